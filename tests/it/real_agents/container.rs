//! The real Claude Code in the dev container `devcontainer init` makes (the real
//! `@devcontainers/cli`, a real engine, the template on `agent-sandbox-base`), driven by
//! the scripted model on the host's side of a Docker network the test made (reached
//! through a forwarder container, a name the firewall's proxy resolves): the same whole
//! task as inside `exec` (read, edit, the project's tests, a commit through the checks, a
//! push that root verifies) and the refusals: a read `tools.disallowed` names (the
//! Feature's managed settings), `--no-verify` and `--force` (the git guard), a host off
//! the allowlist (the firewall), a hook the project's settings add (never runs), each
//! from the model's side and in the container's audit log (root's: the agent cannot read
//! it); Claude Code's own git calls are refused none, and each is recorded through the
//! guard and must be in its table, as in `exec`.

use std::process::Command;

use serde_json::json;

use crate::{
    container_push::as_root,
    devcontainer::{check, chown_for_container, docker, git, Cleanup, Devcontainer},
    model::{bash, tool, ScriptedModel},
};

#[test]
fn claude_code_works_and_meets_the_guards_in_a_dev_container_from_init() {
    let Some(tag) = crate::support::e2e_base_tag("the real Claude Code in a dev container") else { return };
    let Some(prefix) = super::claude_prefix() else { return };
    let cli = std::env::var("AGENT_SANDBOX_DEVCONTAINER_CLI").expect("xtask sets the devcontainer CLI path");
    let world = tempfile::tempdir().expect("tempdir");
    let project = Devcontainer { cli: &cli, repo: world.path().join("agentbox") };
    let repo = &project.repo;
    let id = std::process::id();
    let subnet = format!("172.27.{}", 16 + id % 200);
    let network = format!("as-agent-{id}");
    // The model's name on the network: a forwarder container (Docker's resolver, which the
    // firewall's proxy asks, knows containers, not the host).
    let forwarder = format!("as-agent-model-{id}");
    let _cleanup = Cleanup {
        workspaces: vec![repo.clone()],
        containers: vec![forwarder.clone()],
        network: network.clone(),
        images: Vec::new(),
    };
    let out = Command::new("docker")
        .args([
            "network",
            "create",
            "--subnet",
            &format!("{subnet}.0/24"),
            "--gateway",
            &format!("{subnet}.1"),
            &network,
        ])
        .output()
        .expect("docker");
    assert!(out.status.success(), "network: {}", String::from_utf8_lossy(&out.stderr));

    let script = [
        "sh test.sh",
        "git add -A && git commit -qm 'Greet the world' && git log --format=%s -1",
        "git push -q origin main && echo pushed",
        "echo more >> README.md && git commit --no-verify -qam sneaky; echo commit=$?",
        "git commit -q --allow-empty -m rewritten --amend && git push -q --force origin main; echo push=$?",
        "curl -sS -m 10 -o /dev/null https://example.com/ 2>&1; echo curl=$?",
    ];
    // The template's workspace folder (asserted below).
    let workspace = "/workspace";
    let model = ScriptedModel::start_on(
        &format!("{subnet}.1"),
        vec![
            tool("Read", json!({ "file_path": format!("{workspace}/README.md") })),
            tool(
                "Edit",
                json!({ "file_path": format!("{workspace}/README.md"), "old_string": "hello", "new_string": "hello, world" }),
            ),
            bash(script[0]),
            bash(script[1]),
            bash(script[2]),
            tool("Read", json!({ "file_path": format!("{workspace}/secrets/token.txt") })),
            bash(script[3]),
            bash(script[4]),
            bash(script[5]),
        ],
    );
    let port = model.port;
    let forward = format!(
        "const net=require('net');net.createServer(c=>{{const u=net.connect({port},'{subnet}.1');\
         c.pipe(u).pipe(c);u.on('error',()=>c.destroy());c.on('error',()=>u.destroy())}})\
         .listen({port},()=>console.log('ready'))"
    );
    let image = format!("agent-sandbox-base:{tag}");
    let out = Command::new("docker")
        .args(["run", "-d", "--name", &forwarder, "--network", &network, "--user", "root", "--entrypoint", "node"])
        .args([image.as_str(), "-e", &forward])
        .output()
        .expect("docker run");
    assert!(out.status.success(), "the forwarder: {}", String::from_utf8_lossy(&out.stderr));
    for _ in 0..240 {
        if docker(&["logs", &forwarder]).contains("ready") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }

    std::fs::create_dir_all(repo.join(".agent-sandbox")).expect("mkdir");
    git(repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "hello\n").expect("write");
    // The project's settings try to add a hook of their own: it must never run.
    std::fs::create_dir_all(repo.join(".claude")).expect("mkdir");
    std::fs::write(
        repo.join(".claude/settings.json"),
        r#"{"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "touch /tmp/hook-ran"}]}]}}"#,
    )
    .expect("write");
    std::fs::create_dir_all(repo.join("secrets")).expect("mkdir");
    std::fs::write(repo.join("secrets/token.txt"), "TOPSECRET\n").expect("write");
    std::fs::write(repo.join("test.sh"), "grep -q hello README.md && echo 'tests passed'\n").expect("write");
    std::fs::write(
        repo.join(".agent-sandbox/config.jsonc"),
        format!(
            "{{\"git\": {{\"verifiedPush\": true}},\n \"checks\": {{\"commands\": [\"sh test.sh\"]}},\n \
             \"tools\": {{\"disallowed\": [\"Read(./secrets/**)\"]}},\n \
             \"network\": {{\"allow\": [\"{forwarder}:{port}\"], \"allowPrivate\": [\"{subnet}.0/24\"], \
             \"deny\": {deny}}}}}\n",
            deny = super::deny_the_world()
        ),
    )
    .expect("write");
    git(repo, &["add", "."]);
    git(repo, &["-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "-m", "init"]);
    git(repo, &["remote", "add", "origin", "/srv/remote.git"]);
    project.init(&["--base-tag", &tag]);
    // The test's network, the model's name on it, and Claude Code as npm installed it on
    // the host (read-only; a user's image would install it with build-base).
    let json_path = repo.join(".devcontainer/devcontainer.json");
    let generated = std::fs::read_to_string(&json_path).expect("generated");
    let prefix_text = prefix.display().to_string();
    let edited = generated.replacen(
        "{\n",
        &format!("{{\n  \"runArgs\": [\"--network={network}\", \"-v\", \"{prefix_text}:{prefix_text}:ro\"],\n"),
        1,
    );
    std::fs::write(&json_path, edited).expect("edit");
    git(repo, &["add", "."]);
    git(repo, &["-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "-m", "dev container"]);
    chown_for_container(repo);
    let (ok, up_text) = project.up(&[]);
    assert!(ok, "devcontainer up: {up_text}");
    let container = project.container();
    let (got, all) = project.exec("say workspace \"$PWD\"");
    assert_eq!(got.get("workspace").map(String::as_str), Some(workspace), "{all}");
    // The remote only root can write, holding the project's history.
    as_root(
        &container,
        &format!(
            "set -e; G=/usr/libexec/agent-sandbox/git; $G init -q --bare /srv/remote.git\n\
             $G --git-dir=/srv/remote.git fetch -q --upload-pack=\"$G -c safe.directory='*' upload-pack\" {workspace}/.git main:main"
        ),
    );

    let (got, all) = project.exec(&format!(
        "git config --global user.name agent; git config --global user.email agent@t.invalid\n\
         ANTHROPIC_BASE_URL=http://{forwarder}:{port} ANTHROPIC_API_KEY=sk-ant-scripted-model DISABLE_TELEMETRY=1 \
         CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 GIT_TRACE2_EVENT=/tmp/git-trace \
         GIT_TRACE2_ENV_VARS=GIT_CONFIG_PARAMETERS timeout 240 {prefix_text}/bin/claude -p 'Carry out the task.' \
         --allowedTools Bash,Read,Edit,Write > /tmp/claude.out 2>&1; say claude $?\n\
         say readme \"$(head -1 README.md)\"\n\
         say hook_ran \"$([ -e /tmp/hook-ran ] && echo yes)\"\n\
         agent-sandbox log >/dev/null 2>/tmp/log-err; say agent_reads_log $?\n\
         say log_refusal \"$(grep -c \"audit log is root's\" /tmp/log-err)\"\n\
         echo ==; cat /tmp/claude.out"
    ));
    let results = model.tool_results();
    let relay = as_root(
        &container,
        "cat /var/log/agent-sandbox-firewall.log /var/log/agent-sandbox-audit-relay.log 2>&1; \
         ls -la /run/agent-sandbox /var/log/agent-sandbox 2>&1; true",
    );
    let all = format!("{all}\n--- the tool results the model was shown:\n{results:#?}\n--- root's side:\n{relay}");
    check(
        "Claude Code in the dev container",
        &got,
        &[
            ("claude", "0"),
            ("readme", "hello, world"),
            ("hook_ran", ""),
            ("agent_reads_log", "125"),
            ("log_refusal", "1"),
        ],
        &all,
    );
    assert_eq!(model.steps_played(), 9, "{all}");
    assert_eq!(results.len(), 9, "{results:#?}");
    assert!(results[0].contains("hello"), "the read: {results:#?}");
    assert!(results[1].contains("updated"), "the edit: {results:#?}");
    assert!(results[2].contains("tests passed"), "the tests: {results:#?}");
    assert!(results[3].contains("Greet the world"), "the commit: {results:#?}");
    assert!(results[4].contains("pushed"), "the push: {results:#?}");
    assert!(
        results[5].contains("Read(./secrets/**)") && !results[5].contains("TOPSECRET"),
        "the disallowed read: {results:#?}"
    );
    assert!(results[6].contains("--no-verify") && !results[6].contains("commit=0"), "{results:#?}");
    assert!(results[7].contains("--force") && !results[7].contains("push=0"), "the force push: {results:#?}");
    assert!(!results[8].contains("curl=0"), "off the allowlist: {results:#?}");
    // Each refusal is in the container's audit log (root's), and none of Claude Code's
    // own git calls.
    let log = as_root(&container, "agent-sandbox log --json --blocked-only");
    let refused = super::refusals(&log);
    for (agent, operation, target) in
        [("claude", "tool", "secrets/token.txt"), ("git", "exec", "--no-verify"), ("git", "exec", "--force")]
    {
        assert!(
            refused.iter().any(|(who, op, what)| who == agent && op == operation && what.contains(target)),
            "{agent} {operation} {target} not audited: {refused:#?}"
        );
    }
    let own: Vec<_> = refused
        .iter()
        .filter(|(who, _, what)| who == "git" && !what.contains("--no-verify") && !what.contains("--force"))
        .collect();
    assert!(own.is_empty(), "Claude Code's own git calls were refused: {own:#?}");
    // Claude Code's own git calls in the container, recorded through the guard like in
    // `exec`: the guard's table holds each.
    let trace = as_root(&container, "cat /tmp/git-trace");
    super::own_git_calls_are_in_the_table(&super::GitRecorder::parse(&trace), "claude-code", &script);
    let refs = as_root(
        &container,
        "G=/usr/libexec/agent-sandbox/git; $G --git-dir=/srv/remote.git for-each-ref --format='%(refname) %(subject)'",
    );
    assert_eq!(refs.trim(), "refs/heads/main Greet the world", "the verified push reached the remote\n{all}");
}
