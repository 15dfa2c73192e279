//! End to end: `devcontainer init` test repositories, bring them up with the real
//! `@devcontainers/cli` against a real Docker engine, and attack every guard from
//! inside as the remote user, each attack beside the legitimate use that keeps
//! working. Three dev containers: (a) a user's own plain Debian image (no agent-sandbox
//! in it) with `core.hooksPath` and a failing `postCreateCommand`, and (b) a repository
//! without a dev container, which gets the template on `agent-sandbox-base`, and (c)
//! a compose setup (see below). In each,
//! the firewall holds after `docker restart`, and a broken project policy leaves
//! egress closed; `agent-sandbox test` inside holds every guarantee, and fails the
//! matching rows when the firewall's rules are flushed and a managed file of the tool
//! guard is made writable (as root, from outside the agent's reach). The network side uses only what this test creates: a private
//! dual-stack network with an allowed host, a denied host (which also answers DNS)
//! and the containers' resolver; nothing else is ever addressed. (c) is a compose
//! setup whose second service is the only host its firewall allows.
//!
//! `cargo xtask test` prepares the engine, the CLI, the bootstrapped Debian image and
//! `agent-sandbox-base:e2e` and sets `AGENT_SANDBOX_E2E_BASE_TAG`; the unprivileged
//! rerun has no Docker access and says so.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use crate::support::BIN;

mod feature;
mod home;
mod sudo;
mod sync;

/// The plain Debian image `cargo xtask test` bootstraps (no agent-sandbox in it).
pub(crate) const PLAIN_IMAGE: &str = "agent-sandbox-bootstrap:bookworm";

/// The test network's names and prefixes (shared with the Docker lifecycle test).
pub(crate) struct Names {
    pub(crate) network: String,
    pub(crate) dns: String,
    pub(crate) allowed: String,
    pub(crate) denied: String,
    pub(crate) v4: String,
    pub(crate) v6: String,
}

/// Removes what a dev container test created, whatever happened: the containers the
/// devcontainer CLI made for each workspace (and their history volumes), the test's own
/// containers, network and images.
pub(crate) struct Cleanup {
    pub(crate) containers: Vec<String>,
    pub(crate) network: String,
    pub(crate) workspaces: Vec<PathBuf>,
    pub(crate) images: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        // The images the devcontainer CLI built for these workspaces (`vsc-<folder>-<hash>`
        // and its `-uid` variant): over a gigabyte each, and named after the test's own
        // folder, so nothing else uses them.
        let mut built = Vec::new();
        for workspace in &self.workspaces {
            let label = format!("label=devcontainer.local_folder={}", workspace.display());
            for id in docker(&["ps", "-aq", "--filter", &label]).split_whitespace() {
                let image = docker(&["inspect", "-f", "{{.Config.Image}}", id]);
                if image.starts_with("vsc-") {
                    built.extend(image.strip_suffix("-uid").map(str::to_owned));
                    built.push(image);
                }
                let volumes = docker(&[
                    "inspect",
                    "-f",
                    "{{range .Mounts}}{{if eq .Type \"volume\"}}{{.Name}} {{end}}{{end}}",
                    id,
                ]);
                let _ = Command::new("docker").args(["rm", "-f", id]).output();
                // The workspace's own history and session repository volumes; the shared
                // config volumes stay.
                // (compose prefixes it with the project's name)
                let ours = |v: &&str| v.contains("agent-sandbox-history-") || v.contains("agent-sandbox-git");
                for volume in volumes.split_whitespace().filter(ours) {
                    let _ = Command::new("docker").args(["volume", "rm", volume]).output();
                }
            }
        }
        for name in &self.containers {
            let _ = Command::new("docker").args(["rm", "-f", name]).output();
        }
        let _ = Command::new("docker").args(["network", "rm", &self.network]).output();
        for image in built.iter().rev().chain(&self.images) {
            let _ = Command::new("docker").args(["rmi", "-f", image]).output();
        }
    }
}

pub(crate) fn docker(args: &[&str]) -> String {
    let out = Command::new("docker").args(args).output().expect("docker client");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn docker_ok(args: &[&str]) {
    let out = Command::new("docker").args(args).output().expect("docker client");
    assert!(out.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A host answering HTTP on 8080 (IPv4 and IPv6) and, on the denied host, DNS on 53.
/// Prints `ready` once it listens (on 8080, and on 53/udp with the `dns` argument).
const SERVER_JS: &str = "const dns=process.argv[1]==='dns';let left=dns?2:1;\
    const up=()=>{if(--left===0)console.log('ready')};\
    require('http').createServer((q,s)=>s.end('hello from '+require('os').hostname())).listen(8080,'::',up);\
    if (dns){const d=require('dgram').createSocket('udp4');\
    d.on('message',(m,r)=>{const b=Buffer.from(m);b[2]|=0x80;b[3]=0x83;d.send(b,r.port,r.address)});d.bind(53,up);}";

pub(crate) fn start_host(image: &str, names: &Names, name: &str, last: u8, dns: bool) {
    let ip4 = format!("{}.{last}", names.v4);
    let ip6 = format!("{}::{last}", names.v6);
    let mut args = vec!["run", "-d", "--name", name, "--network", &names.network, "--ip", &ip4, "--ip6", &ip6];
    args.extend(["--user", "root", "--entrypoint", "node", image, "-e", SERVER_JS]);
    if dns {
        args.push("dns");
    }
    docker_ok(&args);
    // `docker run -d` returns before the server listens; under load the firewall
    // would resolve its allowlist against a DNS host that is not answering yet.
    for _ in 0..240 {
        let logs = Command::new("docker").args(["logs", name]).output().expect("docker");
        if String::from_utf8_lossy(&logs.stdout).contains("ready") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    panic!("{name} did not start listening within 60 s");
}

/// One `devcontainer up` at a time: the CLI (without BuildKit) builds every Feature's
/// content as the one tag `dev_container_feature_content_temp` and then builds the image
/// from that tag, so concurrent `up`s could each take the other's Feature (another test's
/// `tool-guard.json`), and they share temporary files in `/tmp/devcontainercli-<user>`
/// (two renamed into place in the same millisecond collide: seen once).
static UP: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Waits for the broker (`git-home sync` run by hand waits for the syncs the git guard
/// started in the background, then runs one), then appends what it told to `$1`, as the
/// agent sees it: at its next git command.
const SETTLE: &str =
    "settle() { sudo -n /usr/local/bin/agent-sandbox git-home sync >/dev/null 2>&1; git status >/dev/null 2>>\"$1\"; }";

pub(crate) struct Devcontainer<'a> {
    pub(crate) cli: &'a str,
    pub(crate) repo: PathBuf,
}

impl Devcontainer<'_> {
    pub(crate) fn init(&self, extra: &[&str]) -> String {
        let out = Command::new(BIN.as_str())
            .args(["devcontainer", "init"])
            .args(extra)
            .arg(&self.repo)
            .output()
            .expect("agent-sandbox");
        assert!(
            out.status.success(),
            "init: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `devcontainer up`; its stdout (the CLI's JSON outcome) and stderr. One at a time in
    /// this test process ([`UP`]).
    pub(crate) fn up(&self, env: &[(&str, &str)]) -> (bool, String) {
        let _one = UP.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let up = Command::new(self.cli)
            .args(["up", "--workspace-folder"])
            .arg(&self.repo)
            .envs(env.iter().copied())
            .output()
            .expect("devcontainer CLI");
        let text = format!("{}\n{}", String::from_utf8_lossy(&up.stdout), String::from_utf8_lossy(&up.stderr));
        (up.status.success() && text.contains("\"outcome\":\"success\""), text)
    }

    pub(crate) fn container(&self) -> String {
        docker(&["ps", "-q", "--filter", &format!("label=devcontainer.local_folder={}", self.repo.display())])
    }

    /// The container, running or not.
    pub(crate) fn container_any(&self) -> String {
        docker(&["ps", "-aq", "--filter", &format!("label=devcontainer.local_folder={}", self.repo.display())])
    }

    /// Runs `script` as the remote user; its `key=value` lines, and the whole output.
    pub(crate) fn exec(&self, script: &str) -> (BTreeMap<String, String>, String) {
        let out = Command::new(self.cli)
            .args(["exec", "--workspace-folder"])
            .arg(&self.repo)
            .args(["bash", "-c", &format!("say() {{ echo \"$1=$2\"; }}\n{SETTLE}\n{script}")])
            .output()
            .expect("devcontainer exec");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let got = stdout
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
            .collect();
        (got, format!("--- stdout:\n{stdout}\n--- stderr:\n{}", String::from_utf8_lossy(&out.stderr)))
    }

    /// A broken project policy (edited on the host) and a restart: egress closed, the
    /// allowed host unreachable, `check` and an interactive shell say so; then the fixed
    /// policy applied through the one sudo rule opens the allowlist again.
    fn broken_policy_closes(&self, case: &str, good_policy: &str, allowed_url: &str, hello: &str, denied_url: &str) {
        let policy_path = self.repo.join(".agent-sandbox/config.jsonc");
        std::fs::write(&policy_path, "{\"network\": {\"allow\": [\"not a host\"]}}\n").expect("write");
        let closed = self.restart();
        assert!(closed.starts_with("firewall: CLOSED: egress is loopback only, because "), "{case}: {closed}");
        let (got, all) = self.exec(&format!(
            "curl -sS --max-time 5 {allowed_url} >/dev/null 2>&1; say allowed $?\n\
             curl -sS --max-time 5 {denied_url} >/dev/null 2>&1; say denied $?\n\
             agent-sandbox check >/dev/null 2>/tmp/check_err; say check_warned \"$(grep -c 'WARNING: firewall: CLOSED' /tmp/check_err)\"\n\
             say banner \"$(bash -ic true 2>&1 | grep -c 'firewall: CLOSED')\"\n\
             say status \"$(agent-sandbox firewall status | head -1 | cut -c1-17)\""
        ));
        // The allowed name does not even resolve (6) or does not connect (7).
        assert!(got.get("allowed").is_some_and(|code| code == "6" || code == "7"), "{case}: {all}");
        let want = [("denied", "7"), ("check_warned", "1"), ("banner", "1"), ("status", "firewall: CLOSED:")];
        check(&format!("{case}, broken policy"), &got, &want, &all);
        std::fs::write(&policy_path, good_policy).expect("write");
        let (got, all) = self.exec(&format!(
            "sudo -n agent-sandbox firewall apply >/dev/null 2>&1; say apply $?\n\
             say allowed \"$(curl -sS --max-time 5 {allowed_url} 2>&1)\"\n\
             curl -sS --max-time 5 {denied_url} >/dev/null 2>&1; say denied $?"
        ));
        check(&format!("{case}, policy fixed"), &got, &[("apply", "0"), ("allowed", hello), ("denied", "7")], &all);
    }

    /// `docker restart`, then wait (as the remote user) until the Feature's entrypoint
    /// has applied or closed the firewall.
    fn restart(&self) -> String {
        docker_ok(&["restart", "-t", "1", &self.container()]);
        let (got, all) = self.exec("say wait \"$(agent-sandbox firewall wait)\"");
        got.get("wait").cloned().unwrap_or(all)
    }
}

pub(crate) fn check(case: &str, got: &BTreeMap<String, String>, want: &[(&str, &str)], all: &str) {
    let mismatches: Vec<String> = want
        .iter()
        .filter(|(key, value)| got.get(*key).map(String::as_str) != Some(*value))
        .map(|(key, value)| format!("{key}: want {value:?}, got {:?}", got.get(*key)))
        .collect();
    assert!(mismatches.is_empty(), "{case}:\n{}\n{all}", mismatches.join("\n"));
}

pub(crate) fn git(repo: &Path, args: &[&str]) {
    let out = Command::new("git").args(args).current_dir(repo).output().expect("git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A repository with a passing pre-commit hook at `hooks` and the project's allowlist.
fn test_repo(path: &Path, names: &Names, hooks: &str) {
    std::fs::create_dir_all(path).expect("mkdir");
    git(path, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(path.join(hooks)).expect("mkdir");
    std::fs::write(path.join(hooks).join("pre-commit"), "#!/bin/sh\necho repo-check-ran >&2\n").expect("hook");
    set_mode(&path.join(hooks).join("pre-commit"), 0o755);
    if hooks != ".git/hooks" {
        git(path, &["config", "core.hooksPath", hooks]);
    }
    std::fs::create_dir_all(path.join(".agent-sandbox")).expect("mkdir");
    std::fs::write(path.join(".agent-sandbox/config.jsonc"), policy(names, "")).expect("policy");
    std::fs::write(path.join("README"), "test\n").expect("write");
    git(path, &["add", "."]);
    git(path, &["-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "-m", "init"]);
}

/// The project's `config.jsonc`: `extra` keys, and the network section that allows
/// the allowed host's port and the test network's private ranges its name resolves into.
fn policy(names: &Names, extra: &str) -> String {
    format!(
        "// test hosts only\n{{{extra}\"network\": {{\"allow\": [\"{}:8080\"], \"allowPrivate\": [\"{}.0/24\", \"{}::/64\"]}}}}\n",
        names.allowed, names.v4, names.v6
    )
}

/// The network probes every case runs: the allowed host by name (and not by its
/// addresses, v4 or v6: the policy is names), the denied one by address (v4 and v6) and
/// by name, and Docker's embedded resolver asked directly.
fn network_script(names: &Names) -> String {
    format!(
        r#"
        say allowed "$(curl -sS --max-time 5 http://{allowed}:8080/ 2>&1)"
        curl -sS --max-time 5 http://{v4}.10:8080/ >/dev/null 2>&1; say allowed_by_v4 $?
        curl -sS --max-time 5 'http://[{v6}::10]:8080/' >/dev/null 2>&1; say allowed_by_v6 $?
        say dns_docker "$({dns_probe})"
        curl -sS --max-time 5 http://{v4}.20:8080/ >/dev/null 2>&1; say denied4 $?
        curl -sS --max-time 5 'http://[{v6}::20]:8080/' >/dev/null 2>&1; say denied6 $?
        curl -sS --max-time 5 http://{denied}:8080/ >/dev/null 2>&1; say denied_name $?
        say status "$(agent-sandbox firewall status | head -1)"
        "#,
        allowed = names.allowed,
        denied = names.denied,
        v4 = names.v4,
        v6 = names.v6,
        dns_probe = DOCKER_DNS_PROBE,
    )
}

/// A query to Docker's embedded resolver with bash alone (the plain image has no dig):
/// prints the answer's id (`1234`), or nothing when no answer comes.
const DOCKER_DNS_PROBE: &str = "timeout 3 bash -c 'exec 3<>/dev/udp/127.0.0.11/53 && printf \"\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x07example\\x00\\x00\\x01\\x00\\x01\" >&3 && head -c 2 <&3 | od -An -tx1' 2>/dev/null | tr -d ' \\n'";

#[test]
fn devcontainers_from_init_hold_every_guard_and_fail_closed() {
    let Some(tag) = crate::support::e2e_base_tag("the devcontainer end-to-end test") else { return };
    let started = Instant::now();
    let cli = std::env::var("AGENT_SANDBOX_DEVCONTAINER_CLI").expect("xtask sets the devcontainer CLI path");
    let image = format!("agent-sandbox-base:{tag}");
    let id = std::process::id();
    let subnet = 16 + id % 200;
    let names = Names {
        network: format!("as-e2e-{id}"),
        dns: format!("as-e2e-dns-{id}"),
        allowed: format!("as-e2e-allowed-{id}"),
        denied: format!("as-e2e-denied-{id}"),
        v4: format!("172.29.{subnet}"),
        v6: format!("fd00:a5e2:{subnet:x}"),
    };
    let world = tempfile::tempdir().expect("tempdir");
    let plain = Devcontainer { cli: &cli, repo: world.path().join("plain") };
    let template = Devcontainer { cli: &cli, repo: world.path().join("template") };
    let compose = Devcontainer { cli: &cli, repo: world.path().join("compose") };
    let alpine = Devcontainer { cli: &cli, repo: world.path().join("alpine") };
    let web = format!("as-e2e-web-{id}");
    let _cleanup = Cleanup {
        containers: vec![names.dns.clone(), names.allowed.clone(), names.denied.clone(), web.clone()],
        network: names.network.clone(),
        workspaces: vec![plain.repo.clone(), template.repo.clone(), compose.repo.clone(), alpine.repo.clone()],
        images: Vec::new(),
    };
    docker_ok(&[
        "network",
        "create",
        "--ipv6",
        "--subnet",
        &format!("{}.0/24", names.v4),
        "--subnet",
        &format!("{}::/64", names.v6),
        &names.network,
    ]);
    start_host(&image, &names, &names.dns, 53, true);
    start_host(&image, &names, &names.allowed, 10, false);
    start_host(&image, &names, &names.denied, 20, true);
    let hostname_allowed = docker(&["inspect", "-f", "{{.Config.Hostname}}", &names.allowed]);
    let hello = format!("hello from {hostname_allowed}");
    let run_args = format!("[\"--network={}\", \"--dns={}.53\"]", names.network, names.v4);
    let on = "firewall: on (only the network policy's names are reachable, through its proxy)";
    let network_on: Vec<(&str, &str)> = vec![
        ("allowed", hello.as_str()),
        ("allowed_by_v4", "7"),
        ("allowed_by_v6", "7"),
        ("dns_docker", ""),
        ("denied4", "7"),
        ("denied6", "7"),
        ("denied_name", "6"),
        ("status", on),
    ];

    // (a) A user's own plain Debian image, their own remote user, core.hooksPath, and a
    // postCreateCommand that fails (the CLI then skips every later lifecycle command).
    test_repo(&plain.repo, &names, ".githooks");
    std::fs::create_dir_all(plain.repo.join(".devcontainer")).expect("mkdir");
    let user_json = format!(
        "// the user's own dev container\n{{\n  \"image\": \"{PLAIN_IMAGE}\",\n  \"remoteUser\": \"dev\",\n  \
         \"runArgs\": {run_args},\n  // their setup, broken today\n  \"postCreateCommand\": \"echo setting up; exit 3\"\n}}\n"
    );
    std::fs::write(plain.repo.join(".devcontainer/devcontainer.json"), &user_json).expect("write");
    // A risky setting is refused with nothing written; without it, init merges.
    let risky = user_json.replace("\"remoteUser\": \"dev\"", "\"remoteUser\": \"root\"");
    std::fs::write(plain.repo.join(".devcontainer/devcontainer.json"), &risky).expect("write");
    let out = Command::new(BIN.as_str()).args(["devcontainer", "init"]).arg(&plain.repo).output().expect("init");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("\"remoteUser\": \"root\": the agent would work as root"),
        "{stderr}"
    );
    assert!(!plain.repo.join(".devcontainer/agent-sandbox").exists(), "a refused init wrote the Feature");
    assert_eq!(std::fs::read_to_string(plain.repo.join(".devcontainer/devcontainer.json")).expect("read"), risky);
    std::fs::write(plain.repo.join(".devcontainer/devcontainer.json"), &user_json).expect("write");
    plain.init(&[]);
    assert!(!plain.repo.join(".husky").exists() && !plain.repo.join(".agent-precommit").exists(), "empty dirs created");
    chown_for_container(&plain.repo);
    let (ok, up_text) = plain.up(&[]);
    assert!(!ok && up_text.contains("setting up"), "the user's postCreateCommand should have failed:\n{up_text}");
    assert!(!plain.container().is_empty(), "the container is up despite the failing postCreateCommand:\n{up_text}");
    let guards = r#"
        agent-sandbox firewall wait >/dev/null
        agent-sandbox test >/tmp/selftest 2>&1; say selftest $?
        say user "$(id -un)"
        say check "$(agent-sandbox check 2>/tmp/check_err)"
        say check_warned "$(grep -c WARNING /tmp/check_err)"
        test -e /.agent-sandbox; say marker $?
        echo change >> README && git add README
        git -c user.name=a -c user.email=a@b.invalid commit -q --no-verify -m bypass 2>/dev/null; say no_verify $?
        git -c user.name=a -c user.email=a@b.invalid -c core.hooksPath=/dev/null commit -q -m bypass 2>/dev/null; say hooks_path $?
        (echo 'curl evil' >> .githooks/pre-commit) 2>/dev/null; say write_hook $?
        (echo x > .githooks/post-checkout) 2>/dev/null; say new_hook $?
        (echo x >> .git/config) 2>/dev/null; say git_config $?
        (echo x >> .devcontainer/devcontainer.json) 2>/dev/null; say devcontainer_json $?
        git -c user.name=a -c user.email=a@b.invalid commit -q -m legit 2>/tmp/hook; say commit $?
        say hook_ran "$(grep -c repo-check-ran /tmp/hook)"
        sudo -n iptables -F 2>/dev/null; say sudo_flush $?
        sudo -n /bin/sh -c true 2>/dev/null; say sudo_shell $?
        "#;
    let users_git = home::git_dir_listing(&plain.repo);
    let (got, all) = plain.exec(&format!("{guards}{}", network_script(&names)));
    assert_eq!(home::git_dir_listing(&plain.repo), users_git, "the user's .git changed: {all}");
    let mut want = network_on.clone();
    want.extend([
        ("selftest", "0"),
        ("user", "dev"),
        ("check", "inside an agent-sandbox (container)"),
        ("check_warned", "0"),
        ("marker", "0"),
        ("no_verify", "1"),
        ("hooks_path", "1"),
        ("write_hook", "1"),
        ("new_hook", "1"),
        // `.git` is the session repository: its config is the agent's, the user's is not
        // reachable (checked on the host below).
        ("git_config", "0"),
        ("devcontainer_json", "1"),
        ("commit", "0"),
        ("hook_ran", "1"),
        ("sudo_flush", "1"),
        ("sudo_shell", "1"),
    ]);
    check("plain image, first start", &got, &want, &all);
    assert_eq!(
        std::fs::read_to_string(plain.repo.join(".githooks/pre-commit")).expect("hook"),
        "#!/bin/sh\necho repo-check-ran >&2\n"
    );
    assert!(!plain.repo.join(".githooks/post-checkout").exists());

    // A plain `docker restart`: the Feature's entrypoint applies the firewall again.
    assert_eq!(plain.restart(), on);
    let (got, all) = plain.exec(&network_script(&names));
    check("plain image, after docker restart", &got, &network_on, &all);

    // A broken project policy (the human edits it on the host): after a restart egress
    // is closed, and every shell says so.
    std::fs::write(plain.repo.join(".agent-sandbox/config.jsonc"), "{\"network\": {\"allow\": [\"not a host\"]}}\n")
        .expect("write");
    let closed = plain.restart();
    assert!(closed.starts_with("firewall: CLOSED: egress is loopback only, because "), "{closed}");
    let (got, all) = plain.exec(&format!(
        "{}\nagent-sandbox check >/dev/null 2>/tmp/check_err; say check_warned \"$(grep -c 'WARNING: firewall: CLOSED' /tmp/check_err)\"\n\
         say banner \"$(bash -ic true 2>&1 | grep -c 'firewall: CLOSED')\"",
        network_script(&names)
    ));
    let closed_status = got.get("status").cloned().unwrap_or_default();
    assert!(closed_status.starts_with("firewall: CLOSED"), "{all}");
    let want_closed: Vec<(&str, &str)> = vec![
        ("denied4", "7"),
        ("denied6", "7"),
        ("dns_docker", ""),
        ("check_warned", "1"),
        ("banner", "1"),
        ("status", closed_status.as_str()),
    ];
    check("plain image, broken policy", &got, &want_closed, &all);
    assert!(got.get("allowed").is_some_and(|text| !text.contains("hello")), "closed, yet allowed answered:\n{all}");
    assert!(got.get("denied_name").is_some_and(|code| code != "0"), "closed, yet denied_name answered:\n{all}");
    // Fixed on the host, applied again through the one sudo rule: open to the allowlist.
    std::fs::write(plain.repo.join(".agent-sandbox/config.jsonc"), policy(&names, "")).expect("write");
    let (got, all) = plain.exec(&format!(
        "sudo -n agent-sandbox firewall apply >/dev/null 2>&1; say apply $?\n{}",
        network_script(&names)
    ));
    let mut want = network_on.clone();
    want.push(("apply", "0"));
    check("plain image, policy fixed", &got, &want, &all);
    eprintln!("devcontainer e2e: plain image done after {:?}", started.elapsed());

    // (b) No dev container yet: the template on agent-sandbox-base, then the user's edit.
    test_repo(&template.repo, &names, ".git/hooks");
    std::fs::create_dir_all(template.repo.join(".husky")).expect("mkdir");
    std::fs::write(template.repo.join(".husky/pre-commit"), "npm test\n").expect("write");
    // The project's tool guard rules, which the image takes at build time.
    let template_policy = policy(&names, "\"tools\": {\"disallowed\": [\"WebFetch\"]}, ");
    std::fs::write(template.repo.join(".agent-sandbox/config.jsonc"), &template_policy).expect("write");
    template.init(&["--base-tag", &tag]);
    let json_path = template.repo.join(".devcontainer/devcontainer.json");
    let generated = std::fs::read_to_string(&json_path).expect("generated");
    let edited = generated.replacen(
        "{\n",
        &format!("{{\n  // the test's private network and resolver\n  \"runArgs\": {run_args},\n"),
        1,
    );
    std::fs::write(&json_path, &edited).expect("edit");
    let again = template.init(&[]);
    assert!(again.contains("already has every setting"), "{again}");
    assert_eq!(std::fs::read_to_string(&json_path).expect("read"), edited);
    chown_for_container(&template.repo);
    // A secret in the environment of whoever brings the container up stays outside.
    let (ok, up_text) = template.up(&[("AGENT_SANDBOX_E2E_HOST_SECRET", "s3cret-from-the-host")]);
    assert!(ok, "devcontainer up:\n{up_text}");
    // The entrypoint is PID 1 (the generated file's "overrideCommand": false): closing
    // the window (`docker stop`) first brings home a commit no broker ran for yet (made
    // with the real git, which starts none); the command it stays above is the image's.
    let real = "/usr/libexec/agent-sandbox/git -c user.name=a -c user.email=a@b.invalid";
    let (got, all) = template.exec(&format!(
        "agent-sandbox firewall wait >/dev/null\n\
         say pid1 \"$(tr '\\0' ' ' </proc/1/cmdline)\"\n\
         echo last >> README && {real} add README && {real} commit -q --no-verify -m last; say commit $?\n\
         say head \"$(git rev-parse HEAD)\""
    ));
    let pid1 = "/bin/sh /usr/local/share/agent-sandbox/entrypoint.sh sleep infinity ";
    check("template, PID 1", &got, &[("pid1", pid1), ("commit", "0")], &all);
    docker_ok(&["stop", &template.container_any()]);
    assert_eq!(home::host_git(&template.repo, &["rev-parse", "main"]), got["head"], "closing lost a commit: {all}");
    docker_ok(&["start", &template.container_any()]);
    let script = format!(
        r#"
        say user "$(id -un)"
        say host_secret_pid1 "$(tr '\0' '\n' < /proc/1/environ | grep -c s3cret-from-the-host)"
        say host_secret_env "$(env | grep -c s3cret-from-the-host)"
        touch /commandhistory/.bash_history /home/node/.claude/x /home/node/.codex/x; say volumes_writable $?
        say check "$(agent-sandbox check)"
        rm -f /.agent-sandbox 2>/dev/null; say marker_rm $?
        chmod 666 /.agent-sandbox 2>/dev/null; say marker_chmod $?
        sudo -n rm -f /.agent-sandbox 2>/dev/null; say marker_sudo_rm $?
        test -e /.agent-sandbox; say marker_after $?
        git config user.name t >/dev/null 2>&1; say git_config_write $?
        echo change >> README
        git add README
        git -c user.name=a -c user.email=a@b.invalid commit -q --no-verify -m bypass 2>/tmp/nv; say no_verify $?
        say no_verify_msg "$(grep -c refused /tmp/nv)"
        git -c user.name=a -c user.email=a@b.invalid commit -q -n -m bypass 2>/dev/null; say no_verify_short $?
        git -c user.name=a -c user.email=a@b.invalid commit -q -m legit 2>/tmp/hook; say commit $?
        say hook_ran "$(grep -c repo-check-ran /tmp/hook)"
        say log "$(git log -1 --format=%s)"
        for path in .git/hooks/pre-commit .git/hooks/post-checkout .git/config .husky/pre-commit .agent-sandbox/firewall.jsonc .agent-sandbox/config.jsonc .devcontainer/devcontainer.json .devcontainer/agent-sandbox/install.sh; do
            (echo x >> "$path") 2>/dev/null; echo "write:$path=$?"
        done
        rm -rf .git/hooks 2>/dev/null; say rm_hooks $?
        mv .devcontainer moved 2>/dev/null; say mv_devcontainer $?
        mv .git .git-away 2>/dev/null; say mv_git $?
        mkdir -p src && echo ok > src/new.txt; say legit_write $?
        sudo -n iptables -F 2>/dev/null; say sudo_flush $?
        sudo -n ip6tables -P OUTPUT ACCEPT 2>/dev/null; say sudo_v6 $?
        sudo -n ipset flush 2>/dev/null; say sudo_ipset $?
        sudo -n agent-sandbox firewall apply --help >/dev/null 2>&1; say sudo_args $?
        sudo -n /bin/sh -c true 2>/dev/null; say sudo_shell $?
        iptables -P OUTPUT ACCEPT 2>/dev/null; say plain_iptables $?
        dig +time=2 +tries=1 @{v4}.20 probe.test >/dev/null 2>&1; say dns_other $?
        dig +time=2 +tries=1 @{v4}.53 probe.test >/dev/null 2>&1; say dns_upstream_direct $?
        say diag_resolv "$(grep nameserver /etc/resolv.conf | tr '\n' ' ')"
        say diag_state "$(agent-sandbox firewall status | grep -E '^(DNS|last)' | tr '\n' ' ')"
        say dns_resolver "$(dig +time=3 +tries=1 probe.test 2>&1 | grep -o 'status: [A-Z]*')"
        sudo -n agent-sandbox firewall apply >/tmp/apply 2>&1; say reapply $?
        say reapply_verified "$(grep -c 'verified:' /tmp/apply)"
        say proxy_running "$(agent-sandbox firewall status | grep -c '^proxy: running')"
        for p in /proc/[0-9]*; do [ "$(stat -c %U "$p" 2>/dev/null)" = agent-sandbox-net ] && kill -9 "${{p#/proc/}}" 2>/dev/null && echo killed; done > /tmp/kill
        say kill_proxy "$(grep -c killed /tmp/kill)"
        {network}"#,
        v4 = names.v4,
        network = network_script(&names),
    );
    let users_git = home::git_dir_listing(&template.repo);
    let (got, all) = template.exec(&script);
    // The session repository's own files: the agent's to write.
    let session_writes: Vec<String> = [".git/hooks/pre-commit", ".git/hooks/post-checkout", ".git/config"]
        .iter()
        .map(|path| format!("write:{path}"))
        .collect();
    let protected_writes: Vec<String> = [
        ".husky/pre-commit",
        ".agent-sandbox/firewall.jsonc",
        ".agent-sandbox/config.jsonc",
        ".devcontainer/devcontainer.json",
        ".devcontainer/agent-sandbox/install.sh",
    ]
    .iter()
    .map(|path| format!("write:{path}"))
    .collect();
    let mut want = network_on.clone();
    want.extend([
        ("user", "node"),
        ("host_secret_pid1", "0"),
        ("host_secret_env", "0"),
        ("volumes_writable", "0"),
        ("check", "inside an agent-sandbox (container)"),
        ("marker_rm", "1"),
        ("marker_chmod", "1"),
        ("marker_sudo_rm", "1"),
        ("marker_after", "0"),
        ("git_config_write", "0"),
        ("no_verify", "1"),
        ("no_verify_msg", "1"),
        ("no_verify_short", "1"),
        ("commit", "0"),
        ("hook_ran", "1"),
        ("log", "legit"),
        ("rm_hooks", "0"),
        ("mv_devcontainer", "1"),
        // `.git` is the session volume's mount point.
        ("mv_git", "1"),
        ("legit_write", "0"),
        ("sudo_flush", "1"),
        ("sudo_v6", "1"),
        ("sudo_ipset", "1"),
        ("sudo_args", "1"),
        ("sudo_shell", "1"),
        ("plain_iptables", "4"),
        ("dns_other", "9"),
        ("dns_upstream_direct", "9"),
        ("dns_resolver", "status: NXDOMAIN"),
        ("reapply", "0"),
        ("reapply_verified", "4"),
        ("proxy_running", "1"),
        ("kill_proxy", "0"),
    ]);
    want.extend(protected_writes.iter().map(|key| (key.as_str(), "1")));
    want.extend(session_writes.iter().map(|key| (key.as_str(), "0")));
    check("template on the base image", &got, &want, &all);
    assert_eq!(home::git_dir_listing(&template.repo), users_git, "the user's .git changed: {all}");

    // The tool guard's managed files: root's in the image, running the guard with the
    // project's rules, and beyond the agent's user's reach (no write, no replacement
    // beside or over them, no sudo); `agent-sandbox test` holds every guarantee.
    let managed = r#"
        say owners "$(stat -c '%U:%G:%a' /etc/claude-code /etc/claude-code/managed-settings.json /etc/codex /etc/codex/requirements.toml /etc/agent-sandbox /etc/agent-sandbox/tool-guard.json | tr '\n' ' ')"
        for f in /etc/claude-code/managed-settings.json /etc/codex/requirements.toml /etc/agent-sandbox/tool-guard.json; do
            (echo x >> "$f") 2>/dev/null; echo "append:$f=$?"
            mv -f "$f" /tmp/moved 2>/dev/null; echo "move:$f=$?"
            (echo '{}' > "$f.new") 2>/dev/null; echo "beside:$f=$?"
        done
        sudo -n chmod 666 /etc/codex/requirements.toml 2>/dev/null; say sudo_chmod $?
        say managed_only "$(jq -c .allowManagedHooksOnly /etc/claude-code/managed-settings.json)"
        say codex_managed_only "$(grep -cx 'allow_managed_hooks_only = true' /etc/codex/requirements.toml)"
        say webfetch "$(printf '%s' '{"tool_name":"WebFetch","tool_input":{"url":"https://example.com/"},"cwd":"/workspace"}' | agent-sandbox tool-guard --agent claude 2>/dev/null | jq -r .hookSpecificOutput.permissionDecision)"
        say read "$(printf '%s' '{"tool_name":"Read","tool_input":{"file_path":"/workspace/README"},"cwd":"/workspace"}' | agent-sandbox tool-guard --agent claude; echo "code=$?")"
        agent-sandbox test --json > /tmp/test.json; say test $?
        say results "$(jq -c '[.rows[] | .result] | unique' /tmp/test.json)"
        cat /tmp/test.json
        "#;
    let (got, all) = template.exec(managed);
    let mut want: Vec<(String, &str)> = vec![
        ("owners".into(), "root:root:755 root:root:644 root:root:755 root:root:644 root:root:755 root:root:644 "),
        ("sudo_chmod".into(), "1"),
        ("managed_only".into(), "true"),
        ("codex_managed_only".into(), "1"),
        ("webfetch".into(), "deny"),
        ("read".into(), "code=0"),
        ("test".into(), "0"),
        // Every row held, but the verified push's (git.verifiedPush is off here).
        ("results".into(), "[\"held\",\"not applicable\"]"),
    ];
    for file in
        ["/etc/claude-code/managed-settings.json", "/etc/codex/requirements.toml", "/etc/agent-sandbox/tool-guard.json"]
    {
        for attempt in ["append", "move", "beside"] {
            want.push((format!("{attempt}:{file}"), "1"));
        }
    }
    let want: Vec<(&str, &str)> = want.iter().map(|(key, value)| (key.as_str(), *value)).collect();
    check("template, the tool guard's managed files", &got, &want, &all);
    // Broken as root from outside the agent's reach: the firewall's rules flushed (the
    // DROP policy stays) and a managed file made writable. Those two rows fail, with
    // their fix, and the exit status is 1; the others still hold.
    let container = template.container();
    docker_ok(&["exec", "-u", "root", &container, "iptables", "-F"]);
    docker_ok(&["exec", "-u", "root", &container, "chmod", "0666", "/etc/codex/requirements.toml"]);
    let broken = r#"
        agent-sandbox test > /tmp/test.txt; say test $?
        say fixes "$(grep -c '  fix: ' /tmp/test.txt)"
        say not_held "$(agent-sandbox test --json | jq -c '[.rows[] | select(.result == "not held") | .guarantee]')"
        cat /tmp/test.txt
        "#;
    let (got, all) = template.exec(broken);
    let not_held = r#"["egress closed except the allowlist","tool guard's managed files root-owned"]"#;
    check(
        "template, test with two guarantees broken",
        &got,
        &[("test", "1"), ("fixes", "2"), ("not_held", not_held)],
        &all,
    );
    docker_ok(&["exec", "-u", "root", &container, "chmod", "0644", "/etc/codex/requirements.toml"]);
    assert_eq!(template.restart(), on);
    let (got, all) = template.exec(&network_script(&names));
    check("template, after docker restart", &got, &network_on, &all);
    let (got, all) = template.exec("agent-sandbox test >/tmp/test.txt; say test $?; cat /tmp/test.txt");
    check("template, test after the repair and a restart", &got, &[("test", "0")], &all);
    let allowed_url = format!("http://{}:8080/", names.allowed);
    let denied_url = format!("http://{}.20:8080/", names.v4);
    template.broken_policy_closes("template", &template_policy, &allowed_url, &hello, &denied_url);

    // History and the session repository per workspace; Claude Code and Codex config in
    // the shared volumes.
    let mounts = docker(&[
        "inspect",
        "-f",
        "{{range .Mounts}}{{if eq .Type \"volume\"}}{{.Name}}>{{.Destination}} {{end}}{{end}}",
        &template.container(),
    ]);
    let mut volumes: Vec<&str> = mounts.split_whitespace().collect();
    volumes.sort();
    assert_eq!(volumes.len(), 4, "{mounts}");
    assert_eq!(
        volumes[..2],
        ["agent-sandbox-claude-code-config>/home/node/.claude", "agent-sandbox-codex-config>/home/node/.codex"]
    );
    assert!(volumes[2].starts_with("agent-sandbox-git-") && volumes[2].ends_with(">/workspace/.git"), "{mounts}");
    assert!(volumes[3].starts_with("agent-sandbox-history-") && volumes[3].ends_with(">/commandhistory"), "{mounts}");

    // The refusals above are the firewall's: the same requests from a container
    // without it, on the same network, succeed.
    let control = |args: &[&str]| {
        let mut full =
            vec!["run", "--rm", "--network", &names.network, "--user", "root", "--entrypoint", args[0], &image];
        full.extend(&args[1..]);
        Command::new("docker").args(&full).output().expect("docker").status.success()
    };
    let denied_v4 = format!("http://{}.20:8080/", names.v4);
    let denied_v6 = format!("http://[{}::20]:8080/", names.v6);
    assert!(control(&["curl", "-sS", "--max-time", "5", &denied_v4]), "denied host down?");
    assert!(control(&["curl", "-sS", "--max-time", "5", &denied_v6]), "denied host (v6) down?");
    assert!(control(&["dig", "+time=2", "+tries=1", &format!("@{}.20", names.v4), "probe.test"]), "denied DNS down?");
    let embedded = Command::new("docker")
        .args(["run", "--rm", "--network", &names.network, "--user", "root", "--entrypoint", "bash", &image, "-c"])
        .arg(DOCKER_DNS_PROBE)
        .output()
        .expect("docker");
    assert_eq!(String::from_utf8_lossy(&embedded.stdout), "1234", "the embedded resolver probe finds no answer");
    // Nothing leaked back to the host: the protected files are as they were.
    assert_eq!(
        std::fs::read_to_string(template.repo.join(".git/hooks/pre-commit")).expect("hook"),
        "#!/bin/sh\necho repo-check-ran >&2\n"
    );
    assert!(!template.repo.join(".git/hooks/post-checkout").exists());
    eprintln!("devcontainer e2e: template done after {:?}", started.elapsed());

    // (c) A compose setup with a second service, which the firewall allows by its
    // service name; the dev container's service is the plain Debian image.
    test_repo(&compose.repo, &names, ".git/hooks");
    let compose_policy = format!(
        "{{\"network\": {{\"allow\": [\"web:8080\"], \"allowPrivate\": [\"{}.0/24\", \"{}::/64\"]}}}}\n",
        names.v4, names.v6
    );
    std::fs::write(compose.repo.join(".agent-sandbox/config.jsonc"), &compose_policy).expect("policy");
    std::fs::create_dir_all(compose.repo.join(".devcontainer")).expect("mkdir");
    std::fs::write(
        compose.repo.join(".devcontainer/docker-compose.yml"),
        format!(
            "services:\n  app:\n    image: {PLAIN_IMAGE}\n    command: sleep infinity\n    volumes:\n      - ..:/workspaces/app:cached\n    \
             dns: [\"{v4}.53\"]\n    networks: [e2e]\n  web:\n    image: {image}\n    container_name: {web}\n    user: root\n    \
             entrypoint: [\"node\", \"-e\", {server}]\n    networks: [e2e]\nnetworks:\n  e2e:\n    external: true\n    name: {network}\n",
            v4 = names.v4,
            server = serde_json::Value::String(SERVER_JS.to_owned()),
            network = names.network,
        ),
    )
    .expect("compose");
    std::fs::write(
        compose.repo.join(".devcontainer/devcontainer.json"),
        "{\n  \"name\": \"app and web\",\n  \"dockerComposeFile\": \"docker-compose.yml\",\n  \"service\": \"app\",\n  \
         \"workspaceFolder\": \"/workspaces/app\",\n  \"remoteUser\": \"dev\",\n  \"postCreateCommand\": \"exit 3\"\n}\n",
    )
    .expect("write");
    compose.init(&[]);
    chown_for_container(&compose.repo);
    let (ok, up_text) = compose.up(&[]);
    assert!(!ok && !compose.container().is_empty(), "compose: up with a failing postCreateCommand:\n{up_text}");
    let hostname_web = docker(&["inspect", "-f", "{{.Config.Hostname}}", &web]);
    let hello_web = format!("hello from {hostname_web}");
    let compose_script = format!(
        r#"
        say user "$(id -un)"
        say web "$(curl -sS --max-time 5 http://web:8080/ 2>&1)"
        curl -sS --max-time 5 http://{v4}.20:8080/ >/dev/null 2>&1; say denied4 $?
        curl -sS --max-time 5 'http://[{v6}::20]:8080/' >/dev/null 2>&1; say denied6 $?
        curl -sS --max-time 5 http://{allowed}:8080/ >/dev/null 2>&1; say not_listed $?
        (echo x >> .git/hooks/pre-commit) 2>/dev/null; say write_hook $?
        (echo x >> .devcontainer/docker-compose.yml) 2>/dev/null; say write_compose $?
        mv .git .git-away 2>/dev/null; say mv_git $?
        echo ok > notes.txt; say legit_write $?
        git -c user.name=a -c user.email=a@b.invalid commit -q --no-verify -m bypass 2>/dev/null; say no_verify $?
        say status "$(agent-sandbox firewall status | head -1)"
        "#,
        v4 = names.v4,
        v6 = names.v6,
        allowed = names.allowed,
    );
    let compose_want: Vec<(&str, &str)> = vec![
        ("user", "dev"),
        ("web", hello_web.as_str()),
        ("denied4", "7"),
        ("denied6", "7"),
        ("not_listed", "6"),
        // The session repository's hook: the agent's (the user's `.git` is checked below).
        ("write_hook", "0"),
        ("write_compose", "1"),
        ("mv_git", "1"),
        ("legit_write", "0"),
        ("no_verify", "1"),
        ("status", on),
    ];
    let users_git = home::git_dir_listing(&compose.repo);
    let (got, all) = compose.exec(&compose_script);
    check("compose", &got, &compose_want, &all);
    assert_eq!(home::git_dir_listing(&compose.repo), users_git, "the user's .git changed: {all}");
    assert_eq!(compose.restart(), on);
    let (got, all) = compose.exec(&compose_script);
    check("compose, after docker restart", &got, &compose_want, &all);
    // The shared config volumes are the same ones as the template's, not the compose
    // project's own copies.
    let compose_mounts = docker(&[
        "inspect",
        "-f",
        "{{range .Mounts}}{{if eq .Type \"volume\"}}{{.Name}}>{{.Destination}} {{end}}{{end}}",
        &compose.container(),
    ]);
    for shared in ["agent-sandbox-claude-code-config>/home/dev/.claude", "agent-sandbox-codex-config>/home/dev/.codex"]
    {
        assert!(compose_mounts.split_whitespace().any(|mount| mount == shared), "{shared}: {compose_mounts}");
    }
    compose.broken_policy_closes("compose", &compose_policy, "http://web:8080/", &hello_web, &denied_url);

    // (d) The user's own Dockerfile on an image the Feature cannot serve (one that says
    // it is Alpine): init merges, and the build stops with the reason.
    std::fs::create_dir_all(alpine.repo.join(".devcontainer")).expect("mkdir");
    git(&alpine.repo, &["init", "-q", "-b", "main"]);
    std::fs::write(
        alpine.repo.join(".devcontainer/Dockerfile"),
        format!(
            "FROM {PLAIN_IMAGE}\nRUN printf 'ID=alpine\\nPRETTY_NAME=\"Alpine Linux v3.20\"\\n' > /etc/os-release\n"
        ),
    )
    .expect("write");
    std::fs::write(
        alpine.repo.join(".devcontainer/devcontainer.json"),
        "{\"build\": {\"dockerfile\": \"Dockerfile\"}, \"remoteUser\": \"dev\"}\n",
    )
    .expect("write");
    alpine.init(&[]);
    let (ok, up_text) = alpine.up(&[]);
    assert!(
        !ok && up_text.contains(
            "this image is Alpine Linux v3.20: only Debian and Ubuntu based images are supported (not Alpine, distroless or scratch)"
        ),
        "alpine:\n{up_text}"
    );
    assert!(alpine.container().is_empty());
    // Docker's legacy builder keeps the container of a failed step: the Feature's install
    // that refused the image.
    let exited = docker(&["ps", "-a", "--no-trunc", "--filter", "status=exited", "--format", "{{.ID}} {{.Command}}"]);
    for (id, _) in exited.lines().filter_map(|line| line.split_once(' ')).filter(|(_, command)| {
        command.contains("/tmp/dev-container-features/") && command.contains("devcontainer-features-install.sh")
    }) {
        let _ = Command::new("docker").args(["rm", id]).output();
    }
    eprintln!("devcontainer e2e: done after {:?}", started.elapsed());
}

/// The workspace belongs to the host user the container's remote user stands for
/// (uid 1000), as a developer's checkout would.
pub(crate) fn chown_for_container(repo: &Path) {
    let out = Command::new("chown").args(["-R", "1000:1000"]).arg(repo).output().expect("chown");
    assert!(out.status.success());
}

pub(crate) fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}
