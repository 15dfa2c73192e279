//! The real Claude Code and Codex from npm, at pinned versions, driven through whole
//! tasks inside `exec` by a scripted model on loopback ([`crate::model`]). Every claim is asserted
//! from the model's side (the `tool_result` it was shown) and, for refusals, from the
//! audit log: reading and editing, the project's tests, a commit whose checks pass and a
//! push through the host; then the refusals (a disallowed tool, a secret read empty,
//! `--no-verify`, a force push, a host off the allowlist, a hook the project's settings
//! add), with the agent's own git calls refused none and each one held by the guard's
//! table test ([`GitRecorder`]).

use std::{path::PathBuf, sync::OnceLock};

mod container;
mod copilot;
mod gemini_first_run;
mod opencode;

use serde_json::json;

use crate::{
    model::{bash, tool, ScriptedModel},
    support::{require_bwrap, Run, World},
};

/// The versions CI runs (README's "Tested with" line names them). `cargo xtask test`
/// also runs these tests against the newest releases, as a row that does not fail the
/// run: [`VERSION_VAR`] set to `latest`.
pub const CLAUDE_CODE_VERSION: &str = "2.1.332";
pub const CODEX_VERSION: &str = "0.171.0";
/// Qwen Code, driven over the OpenAI Chat Completions API.
pub const QWEN_CODE_VERSION: &str = "0.15.10";
/// Gemini CLI, driven over the Gemini API.
pub const GEMINI_CLI_VERSION: &str = "0.61.0";

/// `latest` (the newest release on npm) or an exact version, for both CLIs, instead of
/// the pinned ones.
pub const VERSION_VAR: &str = "AGENT_SANDBOX_IT_AGENT_VERSIONS";

/// The version of `package` to test: the pinned one, or what [`VERSION_VAR`] asks for.
fn wanted(package: &str, pinned: &str) -> Option<String> {
    match std::env::var(VERSION_VAR).ok().filter(|value| !value.is_empty()) {
        None => Some(pinned.to_owned()),
        Some(value) if value == "latest" => {
            let out = std::process::Command::new("npm").args(["view", package, "version"]).output().ok()?;
            let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            assert!(out.status.success() && !version.is_empty(), "npm view {package} version failed");
            eprintln!("testing {package}@{version} (the newest release)");
            Some(version)
        }
        Some(value) => Some(value),
    }
}

/// An agent CLI installed once per user and version, as its users install it (`npm
/// install -g --prefix`), outside the test worlds (each world shows it read-only): a
/// fresh install per test would copy hundreds of MB each time. `None` (with the reason
/// printed) where npm's registry cannot be reached, outside CI.
fn installed(package: &str, version: &str, program: &str) -> Option<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let name = package.rsplit('/').next().unwrap_or(package);
    let prefix = std::env::temp_dir().join(format!("agent-sandbox-it-{name}-{uid}-{version}"));
    let works = || {
        std::process::Command::new(prefix.join("bin").join(program))
            .arg("--version")
            .output()
            .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains(version))
    };
    if works() {
        return Some(prefix);
    }
    // With `--prefix`, npm reads its "global" config from `PREFIX/etc/npmrc`: keep the
    // machine's (where a registry's CA or proxy may be configured).
    let global = std::process::Command::new("npm").args(["config", "get", "globalconfig"]).output();
    let global = global.map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned()).unwrap_or_default();
    let mut install = std::process::Command::new("npm");
    if !global.is_empty() {
        install.env("npm_config_globalconfig", &global);
    }
    let out = install
        .args(["install", "-g", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg(format!("{package}@{version}"))
        .output();
    let why = match out {
        Ok(out) if out.status.success() && works() => return Some(prefix),
        Ok(out) => String::from_utf8_lossy(&out.stderr).into_owned(),
        Err(err) => err.to_string(),
    };
    assert!(std::env::var_os("CI").is_none(), "installing {package}@{version} from npm failed in CI: {why}");
    eprintln!("skipping: cannot install {package}@{version} from npm here: {why}");
    None
}

/// `package`'s program installed once per test binary ([`installed`]), at `pinned` or
/// the version [`VERSION_VAR`] asks for.
fn agent_prefix(
    cell: &'static OnceLock<Option<PathBuf>>,
    package: &str,
    pinned: &str,
    program: &str,
) -> Option<PathBuf> {
    cell.get_or_init(|| installed(package, &wanted(package, pinned)?, program)).clone()
}

fn claude_prefix() -> Option<PathBuf> {
    static PREFIX: OnceLock<Option<PathBuf>> = OnceLock::new();
    agent_prefix(&PREFIX, "@anthropic-ai/claude-code", CLAUDE_CODE_VERSION, "claude")
}

fn codex_prefix() -> Option<PathBuf> {
    static PREFIX: OnceLock<Option<PathBuf>> = OnceLock::new();
    agent_prefix(&PREFIX, "@openai/codex", CODEX_VERSION, "codex")
}

fn gemini_prefix() -> Option<PathBuf> {
    static PREFIX: OnceLock<Option<PathBuf>> = OnceLock::new();
    agent_prefix(&PREFIX, "@google/gemini-cli", GEMINI_CLI_VERSION, "gemini")
}

fn qwen_prefix() -> Option<PathBuf> {
    static PREFIX: OnceLock<Option<PathBuf>> = OnceLock::new();
    agent_prefix(&PREFIX, "@qwen-code/qwen-code", QWEN_CODE_VERSION, "qwen")
}

/// Records every git call the guard lets through, with git's own trace (`GIT_TRACE2_EVENT`
/// into a directory given with `--rw`): each top-level git's arguments, its callers, and
/// `GIT_CONFIG_PARAMETERS`. A call whose caller is a shell came from a tool (the script's
/// commands); any other is the agent's own.
struct GitRecorder {
    log: PathBuf,
}

/// One recorded call: its caller, `GIT_CONFIG_PARAMETERS`, and the arguments after `git`.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
struct GitCall {
    caller: String,
    parameters: String,
    args: Vec<String>,
}

impl GitCall {
    /// The agent's own call: not from a shell (a tool's command), not from agent-sandbox
    /// (the host's push service), and not one of the script's commands (bash runs the
    /// last command of a list in its own place, so that one's caller is the agent).
    fn own(&self, script: &[&str]) -> bool {
        let line = format!("git {}", self.args.join(" "));
        !["sh", "bash", "dash", "zsh", "agent-sandbox"].contains(&self.caller.as_str())
            && !script.iter().any(|command| command.contains(&line))
    }

    /// The call as a line of the guard's table, the same in every run: each 40-digit hex
    /// run (an object id, `A..B`, OpenCode's snapshot repositories named by hashes) as the
    /// empty tree's id, and a time given as `--min-age=`/`--max-age=` as 0.
    fn table_line(&self, agent: &str) -> serde_json::Value {
        let oid = |arg: &String| -> String {
            if let Some(option) = ["--min-age=", "--max-age="].iter().find(|option| arg.starts_with(**option)) {
                return format!("{option}0");
            }
            let mut out = String::new();
            let mut rest = arg.as_str();
            while !rest.is_empty() {
                let run = rest.bytes().take_while(u8::is_ascii_hexdigit).count();
                if run == 40 {
                    out.push_str("4b825dc642cb6eb9a060e54bf8d69288fbee4904");
                } else {
                    out.push_str(&rest[..run]);
                }
                rest = &rest[run..];
                let other = rest.bytes().take_while(|b| !b.is_ascii_hexdigit()).count();
                out.push_str(&rest[..other]);
                rest = &rest[other..];
            }
            out
        };
        json!({ "agent": agent, "parameters": self.parameters, "args": self.args.iter().map(oid).collect::<Vec<_>>() })
    }
}

/// The agents' own git calls the guard's table test holds: every one recorded here must
/// be there (and so pass the guard there), so a new call in a new release is seen.
const GIT_CALLS_TABLE: &str = include_str!("../../crates/gitguard/tests/it/agent_git_calls.jsonl");

/// Asserts that `agent` made git calls of its own among `calls` (the recorder works) and
/// that the guard's table test holds each one.
fn own_git_calls_are_in_the_table(calls: &[GitCall], agent: &str, script: &[&str]) {
    let own: Vec<&GitCall> = calls.iter().filter(|call| call.own(script)).collect();
    assert!(!own.is_empty(), "no git call of {agent}'s own was recorded: {calls:#?}");
    let table: Vec<serde_json::Value> = GIT_CALLS_TABLE
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    let mut missing: Vec<String> = own
        .iter()
        .map(|call| call.table_line(agent))
        .filter(|line| !table.contains(line))
        .map(|line| line.to_string())
        .collect();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "{agent} made git calls of its own that crates/gitguard/tests/it/agent_git_calls.jsonl does not hold. \
         Check what each does, then add it there (the guard's table test judges each):\n{}",
        missing.join("\n")
    );
}

impl GitRecorder {
    fn new(world: &World) -> GitRecorder {
        let log = world.path("git-recorder");
        fs_err::create_dir_all(&log).expect("mkdir");
        GitRecorder { log }
    }

    /// The environment and `exec`'s option that record the session's git calls.
    fn options(&self, cmd: &mut crate::support::TestCommand) -> [std::ffi::OsString; 2] {
        cmd.env("GIT_TRACE2_EVENT", self.log.join("events")).env("GIT_TRACE2_ENV_VARS", "GIT_CONFIG_PARAMETERS");
        ["--rw".into(), self.log.clone().into()]
    }

    /// The calls recorded so far in `world`, the world's own directory written `$WORLD`
    /// (so that a path into the home reads the same in every run).
    fn calls(world: &World) -> Vec<GitCall> {
        let text = std::fs::read_to_string(world.path("git-recorder/events")).unwrap_or_default();
        let root = serde_json::to_string(&world.root.display().to_string()).expect("JSON");
        GitRecorder::parse(&text.replace(root.trim_matches('"'), "$WORLD"))
    }

    /// The calls in git's trace `text`, top-level ones only (not git's own children).
    fn parse(text: &str) -> Vec<GitCall> {
        let mut calls: Vec<(String, GitCall)> = Vec::new();
        for line in text.lines() {
            let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else { continue };
            let sid = event["sid"].as_str().unwrap_or_default().to_owned();
            if sid.contains('/') {
                continue;
            }
            let call = match calls.iter_mut().find(|(id, _)| *id == sid) {
                Some((_, call)) => call,
                None => {
                    calls.push((sid, GitCall::default()));
                    &mut calls.last_mut().expect("pushed").1
                }
            };
            let strings = |key: &str| -> Vec<String> {
                event[key].as_array().into_iter().flatten().filter_map(|v| v.as_str()).map(str::to_owned).collect()
            };
            match event["event"].as_str() {
                Some("start") => call.args = strings("argv").into_iter().skip(1).collect(),
                // A git the guard ran as its child (in a container with a session
                // repository, to bring the commits home after it) has the guard, named
                // `git`, as its parent: the caller is the guard's.
                Some("cmd_ancestry") => {
                    call.caller = strings("ancestry").into_iter().find(|name| name != "git").unwrap_or_default()
                }
                Some("def_param") if event["param"] == "GIT_CONFIG_PARAMETERS" => {
                    call.parameters = event["value"].as_str().unwrap_or_default().to_owned()
                }
                _ => {}
            }
        }
        calls.into_iter().map(|(_, call)| call).collect()
    }
}

/// `claude -p` inside `exec`, talking to `model` through the host port it is granted.
fn claude(world: &World, prefix: &std::path::Path, model: &ScriptedModel, extra: &[&str]) -> Run {
    let port = model.port.to_string();
    let mut cmd = world.cmd();
    let recorder = GitRecorder::new(world).options(&mut cmd);
    cmd.env("PATH", format!("{}/bin:/usr/local/bin:/usr/bin:/bin", prefix.display()))
        .env("ANTHROPIC_BASE_URL", format!("http://localhost:{port}"))
        .env("ANTHROPIC_API_KEY", "sk-ant-scripted-model")
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .arg("exec")
        .args(recorder)
        .args(["--host-port", &port, "--ro"])
        .arg(prefix)
        .args(extra)
        .args(["--", "claude", "-p", "Carry out the task.", "--allowedTools", "Bash,Read,Edit,Write"]);
    cmd.run_within(240)
}

/// The refusals the audit log holds, as (agent, operation, target).
fn blocked(world: &World) -> Vec<(String, String, String)> {
    refusals(&world.cmd().args(["log", "--json", "--blocked-only"]).run().ok())
}

/// What the audit log says each session masked (the `read` entries marked `masked`).
fn masked(world: &World) -> Vec<String> {
    let log = world.cmd().args(["log", "--json"]).run().ok();
    log.lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("JSON"))
        .filter(|event| event["operation"] == "read" && event["result"] == "masked")
        .map(|event| event["target"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// `log --json --blocked-only`'s lines as (agent, operation, target).
fn refusals(log: &str) -> Vec<(String, String, String)> {
    log.lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("JSON"))
        .map(|event| {
            let text = |key: &str| event[key].as_str().unwrap_or_default().to_owned();
            (text("agent"), text("operation"), text("target"))
        })
        .collect()
}

fn remote_head(world: &World) -> String {
    let remote = world.path("home/remote.git");
    world.git_in(&world.root, &["--git-dir", remote.to_str().expect("utf-8"), "rev-parse", "main"]).trim().to_owned()
}

/// `network.deny` for every name the built-in allowlists hold (the agent catalog's
/// hosts, `exec`'s defaults and the Feature's additions), without their ports (a deny
/// entry without a port denies every port): the agents' own calls home are refused by
/// the proxy instead of leaving the machine. Read from the catalog and the two files, so
/// a name added there is denied here too.
pub fn deny_the_world() -> String {
    let mut names: Vec<String> = config::agents::all_hosts().into_iter().map(str::to_owned).collect();
    for text in [
        include_str!("../../crates/config/src/defaults.jsonc"),
        include_str!("../../devcontainer/feature/agent-sandbox/config.jsonc"),
    ] {
        let network = &text[text.find("\"network\"").expect("a network section")..];
        let allow = &network[network.find("\"allow\"").expect("an allow list")..];
        let list = &allow[allow.find('[').expect("[")..=allow.find(']').expect("]")];
        for line in list.lines().map(|line| line.split("//").next().unwrap_or_default()) {
            for quoted in line.split('"').skip(1).step_by(2) {
                let name = quoted.split(':').next().unwrap_or_default().to_owned();
                if !name.is_empty() && !names.contains(&name) {
                    names.push(name);
                }
            }
        }
    }
    assert!(names.len() > 20 && names.iter().any(|name| name == "github.com"), "{names:?}");
    serde_json::to_string(&names).expect("JSON")
}

/// A project with tests, the checks that run them at every commit, and a remote.
fn project() -> World {
    let world = World::new();
    // As README tells the user who signs in with an API key; and no test traffic to any
    // other address (Codex looks up its plugins on github.com at every start): every
    // name the built-in allowlist has is denied here, the model is on a host port.
    world.write(
        "xdg-config/agent-sandbox/config.jsonc",
        &format!(r#"{{ "env": {{ "allow": ["ANTHROPIC_API_KEY"] }}, "network": {{ "deny": {} }} }}"#, deny_the_world()),
    );
    world.write("home/proj/test.sh", "grep -q hello README.md && echo 'tests passed'\n");
    world.project_config(r#"{ "checks": { "commands": ["sh test.sh"] } }"#);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "tests"]);
    world.bare_origin();
    world.git(&["push", "-q", "origin", "main"]);
    world
}

#[test]
fn claude_code_reads_edits_tests_commits_and_pushes_inside() {
    require_bwrap!();
    let Some(prefix) = claude_prefix() else { return };
    let world = project();
    let readme = world.path("home/proj/README.md").display().to_string();
    let script = [
        "sh test.sh",
        "git add -A && git commit -qm 'Greet the world' && git log --format=%s -1",
        "git push -q origin main && echo pushed",
    ];
    let model = ScriptedModel::start(vec![
        tool("Read", json!({ "file_path": readme })),
        tool("Edit", json!({ "file_path": readme, "old_string": "hello", "new_string": "hello, world" })),
        bash(script[0]),
        bash(script[1]),
        bash(script[2]),
    ]);
    let run = claude(&world, &prefix, &model, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    assert_eq!(model.steps_played(), 5, "{}", run.stderr());
    let results = model.tool_results();
    assert_eq!(results.len(), 5, "{results:#?}");
    assert!(results[0].contains("hello"), "the read: {results:#?}");
    assert!(results[1].contains("updated"), "the edit: {results:#?}");
    assert!(results[2].contains("tests passed"), "the tests: {results:#?}");
    assert!(results[3].contains("Greet the world"), "the commit: {results:#?}");
    assert!(results[4].contains("pushed"), "the push: {results:#?}");
    assert_eq!(world.read("home/proj/README.md"), "hello, world\n");
    assert_eq!(remote_head(&world), world.git(&["rev-parse", "HEAD"]).trim(), "the push reached the remote");
    // Claude Code's own git calls (at its start, with their safety overrides) and the
    // task's were refused none.
    let refused = blocked(&world);
    assert!(refused.iter().all(|(agent, _, _)| agent != "git"), "{refused:#?}");
    own_git_calls_are_in_the_table(&GitRecorder::calls(&world), "claude-code", &script);
}

#[test]
fn claude_codes_refusals_are_seen_by_the_model_and_audited() {
    require_bwrap!();
    let Some(prefix) = claude_prefix() else { return };
    let world = project();
    world.write("home/proj/.env", "API_KEY=TOPSECRET\n");
    world.write("home/proj/secrets/token.txt", "TOPSECRET\n");
    // The project's settings try to add a hook of their own: it must never run.
    world.write(
        "home/proj/.claude/settings.json",
        r#"{"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "touch \"$CLAUDE_PROJECT_DIR/hook-ran\""}]}]}}"#,
    );
    world.project_config(
        r#"{ "checks": { "commands": ["sh test.sh"] },
             "tools": { "disallowed": ["Write", "Bash(git push:*)", "Read(./secrets/**)"] } }"#,
    );
    let project = world.path("home/proj").display().to_string();
    let model = ScriptedModel::start(vec![
        tool("Write", json!({ "file_path": format!("{project}/new.txt"), "content": "x\n" })),
        bash("git push -q origin main"),
        tool("Read", json!({ "file_path": format!("{project}/secrets/token.txt") })),
        tool("Read", json!({ "file_path": format!("{project}/.env") })),
        bash("curl -sS -m 10 -o /dev/null https://example.com/ 2>&1; echo curl=$?"),
    ]);
    let run = claude(&world, &prefix, &model, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let results = model.tool_results();
    assert_eq!(results.len(), 5, "{results:#?}");
    for (result, rule) in results.iter().zip(["Write", "Bash(git push:*)", "Read(./secrets/**)"]) {
        assert!(result.contains(rule), "denied by {rule}: {results:#?}");
    }
    assert!(!results[3].contains("TOPSECRET"), "the .env read: {results:#?}");
    assert!(masked(&world).iter().any(|target| target.ends_with("/.env")), "the .env mask is not audited");
    assert!(results[4].contains("403") && !results[4].contains("curl=0"), "off the allowlist: {results:#?}");
    assert!(!world.path("home/proj/new.txt").exists());
    assert!(!world.path("home/proj/hook-ran").exists(), "the project's hook ran");
    let refused = blocked(&world);
    for (operation, target) in
        [("tool", "Write "), ("tool", "Bash git push"), ("tool", "Read "), ("net", "example.com")]
    {
        assert!(
            refused.iter().any(|(_, op, what)| op == operation && what.contains(target)),
            "{operation} {target} not audited: {refused:#?}"
        );
    }
    // Claude Code's own git calls were refused none.
    assert!(refused.iter().all(|(agent, _, _)| agent != "git"), "{refused:#?}");

    // Through the git guard (no tool rule in the way): `--no-verify` and a force push.
    world.project_config(r#"{ "checks": { "commands": ["sh test.sh"] } }"#);
    let model = ScriptedModel::start(vec![
        bash("echo more >> README.md && git commit --no-verify -qam sneaky; echo commit=$?"),
        bash("git commit -q --allow-empty -m rewritten --amend && git push -q --force origin main; echo push=$?"),
    ]);
    let before = remote_head(&world);
    let run = claude(&world, &prefix, &model, &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let results = model.tool_results();
    assert!(results[0].contains("--no-verify") && !results[0].contains("commit=0"), "{results:#?}");
    assert!(!results[1].contains("push=0"), "{results:#?}");
    assert_eq!(remote_head(&world), before, "the force push changed the remote");
    let refused = blocked(&world);
    assert!(refused.iter().any(|(agent, _, what)| agent == "git" && what.contains("--no-verify")), "{refused:#?}");
    assert!(refused.iter().any(|(agent, _, what)| agent == "git" && what.contains("--force")), "{refused:#?}");
}

/// `codex exec` inside `exec`, its model provider (in the user's `~/.codex/config.toml`,
/// as a user of another endpoint writes it) the scripted model. Codex's own sandbox is
/// off: agent-sandbox is the sandbox.
fn codex(world: &World, prefix: &std::path::Path, model: &ScriptedModel) -> Run {
    let port = model.port.to_string();
    world.write(
        "home/.codex/config.toml",
        &format!(
            "model_provider = \"scripted\"\nmodel = \"gpt-5-codex\"\n[model_providers.scripted]\nname = \"scripted\"\n\
             base_url = \"http://localhost:{port}/v1\"\nwire_api = \"responses\"\nsupports_websockets = false\n"
        ),
    );
    let mut cmd = world.cmd();
    let recorder = GitRecorder::new(world).options(&mut cmd);
    cmd.env("PATH", format!("{}/bin:/usr/local/bin:/usr/bin:/bin", prefix.display()))
        .arg("exec")
        .args(recorder)
        .args(["--host-port", &port, "--ro"])
        .arg(prefix)
        .args(["--", "codex", "exec", "--skip-git-repo-check", "-s", "danger-full-access", "Carry out the task."]);
    cmd.run_within(240)
}

fn shell(command: &str) -> crate::model::Step {
    tool("exec_command", json!({ "cmd": command }))
}

#[test]
fn codex_reads_edits_tests_commits_and_pushes_inside_and_meets_the_same_refusals() {
    require_bwrap!();
    let Some(prefix) = codex_prefix() else { return };
    let world = project();
    world.write("home/proj/.env", "API_KEY=TOPSECRET\n");
    let script = [
        "cat README.md",
        "sed -i 's/hello/hello, world/' README.md && sh test.sh",
        "git add README.md && git commit -qm 'Greet the world' && git log --format=%s -1",
        "git push -q origin main && echo pushed",
        "cat .env; echo read=$?",
        "echo more >> README.md && git commit --no-verify -qam sneaky; echo commit=$?",
        "git push -q --force origin HEAD~1:main; echo push=$?",
        "curl -sS -m 10 -o /dev/null https://example.com/ 2>&1; echo curl=$?",
    ];
    let model = ScriptedModel::start(script.iter().map(|command| shell(command)).collect());
    let run = codex(&world, &prefix, &model);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    assert_eq!(model.steps_played(), 8, "{}", run.stderr());
    let results = model.tool_results();
    assert_eq!(results.len(), 8, "{results:#?}");
    assert!(results[0].contains("hello"), "the read: {results:#?}");
    assert!(results[1].contains("tests passed"), "the tests: {results:#?}");
    assert!(results[2].contains("Greet the world"), "the commit: {results:#?}");
    assert!(results[3].contains("pushed"), "the push: {results:#?}");
    assert!(results[4].contains("read=0") && !results[4].contains("TOPSECRET"), "the .env: {results:#?}");
    assert!(masked(&world).iter().any(|target| target.ends_with("/.env")), "the .env mask is not audited");
    assert!(results[5].contains("--no-verify") && !results[5].contains("commit=0"), "{results:#?}");
    assert!(!results[6].contains("push=0"), "{results:#?}");
    assert!(results[7].contains("403") && !results[7].contains("curl=0"), "off the allowlist: {results:#?}");
    // The refused commit was never made, and the force push left the remote at the good
    // commit.
    let head = world.git(&["log", "--format=%s", "-1"]);
    assert_eq!(head.trim(), "Greet the world");
    assert_eq!(remote_head(&world), world.git(&["rev-parse", "HEAD"]).trim(), "the remote holds the good commit");
    let refused = blocked(&world);
    for (agent, target) in [("git", "--no-verify"), ("git", "--force"), ("codex", "example.com")] {
        assert!(
            refused.iter().any(|(who, _, what)| who == agent && what.contains(target)),
            "{agent} {target} not audited: {refused:#?}"
        );
    }
    // Codex's own git calls were refused none: every git refusal is one the script made.
    let own: Vec<_> = refused
        .iter()
        .filter(|(who, _, what)| who == "git" && !what.contains("--no-verify") && !what.contains("--force"))
        .collect();
    assert!(own.is_empty(), "{own:#?}");
    own_git_calls_are_in_the_table(&GitRecorder::calls(&world), "codex", &script);
}

#[test]
fn codexs_disallowed_tools_are_denied_and_audited() {
    require_bwrap!();
    let Some(prefix) = codex_prefix() else { return };
    let world = project();
    world.project_config(
        r#"{ "checks": { "commands": ["sh test.sh"] }, "tools": { "disallowed": ["Bash(git push:*)"] } }"#,
    );
    let model = ScriptedModel::start(vec![
        shell("git push -q origin main; echo push=$?"),
        shell("git status --short; echo status=$?"),
    ]);
    let run = codex(&world, &prefix, &model);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let results = model.tool_results();
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(results[0].contains("Bash(git push:*)") && !results[0].contains("push=0"), "{results:#?}");
    // The legitimate call beside it runs.
    assert!(results[1].contains("status=0"), "{results:#?}");
    let refused = blocked(&world);
    assert!(
        refused.iter().any(|(who, op, what)| who == "codex" && op == "tool" && what.contains("git push")),
        "{refused:#?}"
    );
}

/// Qwen Code's shell tool, as the scripted model calls it.
fn qwen_shell(command: &str) -> crate::model::Step {
    tool("run_shell_command", json!({ "command": command, "is_background": false, "description": "scripted step" }))
}

/// Qwen Code inside `exec`, pointed at the scripted model (OpenAI-compatible) on a host
/// port: it reads, edits and runs the project's tests; its own engine refuses what
/// `tools.disallowed` names (the system settings `exec` mounts); its settings file the
/// host runs is read-only while the login it writes is kept for the next session.
#[test]
fn qwen_code_works_inside_its_own_engine_denies_tools_disallowed_and_its_login_is_kept() {
    require_bwrap!();
    let Some(prefix) = qwen_prefix() else { return };
    let world = project();
    world.write(
        "xdg-config/agent-sandbox/config.jsonc",
        &format!(
            r#"{{ "env": {{ "allow": ["OPENAI_API_KEY"] }}, "tools": {{ "disallowed": ["Bash(git push:*)"] }},
                 "network": {{ "deny": {} }} }}"#,
            deny_the_world()
        ),
    );
    let model = ScriptedModel::start(vec![
        qwen_shell("cat README.md && echo 'hello again' >> README.md && sh test.sh"),
        qwen_shell("git push origin main"),
        qwen_shell(
            "echo qwen-login > ~/.qwen/oauth_creds.json && cat ~/.qwen/oauth_creds.json; \
             echo '{\"mcpServers\": {\"x\": {\"command\": \"touch\"}}}' > ~/.qwen/settings.json; echo settings=$?",
        ),
    ]);
    let port = model.port.to_string();
    let qwen = |args: &[&str]| {
        let mut cmd = world.cmd();
        cmd.env("PATH", format!("{}/bin:/usr/local/bin:/usr/bin:/bin", prefix.display()))
            .env("OPENAI_API_KEY", "sk-scripted-model")
            .env("OPENAI_BASE_URL", format!("http://localhost:{port}/v1"))
            .env("OPENAI_MODEL", "qwen3-coder-plus")
            .arg("exec")
            .args(["--host-port", &port, "--ro"])
            .arg(&prefix)
            .arg("--")
            .args(args);
        cmd.run_within(240)
    };
    let run = qwen(&["qwen", "--yolo", "--auth-type", "openai", "-o", "json", "Carry out the task."]);
    run.ok();
    assert_eq!(model.steps_played(), 3, "{}", run.stderr());
    let results = model.tool_results();
    assert!(results[0].contains("hello") && results[0].contains("tests passed"), "{results:#?}");
    assert!(
        results[1].contains("denied by permission rules") && results[1].contains("Bash(git push *)"),
        "Qwen Code's own engine refuses it: {results:#?}"
    );
    assert!(results[2].contains("qwen-login") && results[2].contains("Read-only file system"), "{results:#?}");
    assert!(results[2].contains("settings=1"), "{results:#?}");
    assert_eq!(world.read("home/proj/README.md"), "hello\nhello again\n");
    // On the host: the login is kept, the settings file never was (created empty to be
    // mounted, removed again).
    assert_eq!(world.read("home/.qwen/oauth_creds.json"), "qwen-login\n");
    assert!(world.home.join(".qwen/settings.json").symlink_metadata().is_err());
    // The next session starts with it.
    let next =
        qwen(&["cat", "/etc/qwen-code/settings.json", &format!("{}/.qwen/oauth_creds.json", world.home.display())]);
    let next = next.ok();
    assert!(next.ends_with("qwen-login\n") && next.contains("\"Bash(git push *)\""), "{next}");
}

/// Gemini CLI inside `exec`, pointed at the scripted model (the Gemini API) on a host
/// port, with the sign-in method the user chose outside in `~/.gemini/settings.json`:
/// it runs the project's tests; `Write` from `tools.disallowed` is gone from its tools
/// (the read-only copy of the user's settings `exec` shows it); its settings stay the
/// user's while its login file is kept.
#[test]
fn gemini_cli_works_inside_its_own_engine_drops_tools_disallowed_and_its_login_is_kept() {
    require_bwrap!();
    let Some(prefix) = gemini_prefix() else { return };
    let world = project();
    world.write(
        "xdg-config/agent-sandbox/config.jsonc",
        &format!(
            r#"{{ "env": {{ "allow": ["GEMINI_API_KEY"] }}, "tools": {{ "disallowed": ["Write"] }},
                 "network": {{ "deny": {} }} }}"#,
            deny_the_world()
        ),
    );
    let settings = "{\n  // chosen at the first run outside\n  \"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}}\n}\n";
    world.write("home/.gemini/settings.json", settings);
    let shell = |command: &str| tool("run_shell_command", json!({ "command": command }));
    let model = ScriptedModel::start(vec![
        shell("cat README.md && sh test.sh"),
        tool("write_file", json!({ "file_path": "notes.txt", "content": "written" })),
        shell(
            "echo gemini-login > ~/.gemini/oauth_creds.json && cat ~/.gemini/oauth_creds.json; \
             echo '{}' > ~/.gemini/settings.json; echo settings=$?",
        ),
    ]);
    let run = gemini_headless(&world, &prefix, &model);
    assert_eq!(model.steps_played(), 3, "{}\n{}", run.stdout(), run.stderr());
    let results = model.tool_results();
    assert!(results[0].contains("hello") && results[0].contains("tests passed"), "{results:#?}");
    assert!(results[1].contains("not found"), "write_file is not among its tools: {results:#?}");
    assert!(world.path("home/proj/notes.txt").symlink_metadata().is_err());
    assert!(results[2].contains("gemini-login") && results[2].contains("Read-only file system"), "{results:#?}");
    assert_eq!(world.read("home/.gemini/oauth_creds.json"), "gemini-login\n");
    assert_eq!(world.read("home/.gemini/settings.json"), settings, "the user's settings as they were");
}

/// Headless `gemini -p` inside `exec`, its API the scripted model on a host port, with
/// `GEMINI_API_KEY` set (let through only where the world's config allows it).
fn gemini_headless(world: &World, prefix: &std::path::Path, model: &ScriptedModel) -> Run {
    let port = model.port.to_string();
    let mut cmd = world.cmd();
    cmd.env("PATH", format!("{}/bin:/usr/local/bin:/usr/bin:/bin", prefix.display()))
        .env("GEMINI_API_KEY", "scripted-model")
        .env("GOOGLE_GEMINI_BASE_URL", format!("http://localhost:{port}"))
        .arg("exec")
        .args(["--host-port", &port, "--ro"])
        .arg(prefix)
        .args(["--", "gemini", "--yolo", "--skip-trust", "-o", "json", "-p", "Carry out the task."]);
    cmd.run_within(240)
}

/// The whole task as shell commands, for an agent driven through its shell tool alone:
/// read, edit and run the tests, commit through the checks, push through the host.
const WHOLE_TASK: [&str; 4] = [
    "cat README.md",
    "sed -i 's/hello/hello, world/' README.md && sh test.sh",
    "git add README.md && git commit -qm 'Greet the world' && git log --format=%s -1",
    "git push -q origin main && echo pushed",
];

/// What [`WHOLE_TASK`] must have done, from the model's side and on the host: each step's
/// result, the commit home through the broker, the push on the remote, no warning from
/// the guards at its ordinary start and exit, no git call refused, and each of `agent`'s
/// own git calls held by the guard's table.
fn whole_task_done(world: &World, model: &ScriptedModel, run: &Run, agent: &str) {
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let results = model.tool_results();
    assert_eq!(results.len(), WHOLE_TASK.len(), "{results:#?}\n{}", run.stderr());
    assert!(!run.stderr().contains("agent-sandbox: warning"), "{}", run.stderr());
    assert!(results[0].contains("hello"), "the read: {results:#?}");
    assert!(results[1].contains("tests passed"), "the tests: {results:#?}");
    assert!(results[2].contains("Greet the world"), "the commit: {results:#?}");
    assert!(results[3].contains("pushed"), "the push: {results:#?}");
    assert_eq!(world.git(&["log", "--format=%s", "-1"]).trim(), "Greet the world", "the commit came home");
    assert_eq!(world.read("home/proj/README.md"), "hello, world\n");
    assert_eq!(remote_head(world), world.git(&["rev-parse", "HEAD"]).trim(), "the push reached the remote");
    let refused = blocked(world);
    assert!(refused.iter().all(|(who, _, _)| who != "git"), "{refused:#?}");
    own_git_calls_are_in_the_table(&GitRecorder::calls(world), agent, &WHOLE_TASK);
}
