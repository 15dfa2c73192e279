//! End to end: `devcontainer init` a test repository, bring it up with the real
//! `@devcontainers/cli` against a real Docker engine, and attack every guard from
//! inside as the remote user. The network side uses only what this test creates: a
//! private dual-stack network with an allowed host, a denied host (which also answers
//! DNS) and the container's resolver; nothing else is ever addressed.
//!
//! `cargo xtask test` prepares the engine, the CLI and `agent-sandbox-base:e2e` and
//! sets `AGENT_SANDBOX_E2E_BASE_TAG`; the unprivileged rerun has no Docker access and
//! says so.

use std::{path::Path, process::Command};

use crate::support::BIN;

struct Names {
    network: String,
    dns: String,
    allowed: String,
    denied: String,
    v4: String,
    v6: String,
}

/// Removes what the test created, whatever happened.
struct Cleanup {
    containers: Vec<String>,
    network: String,
    workspace: std::path::PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let label = format!("label=devcontainer.local_folder={}", self.workspace.display());
        let out = Command::new("docker").args(["ps", "-aq", "--filter", &label]).output();
        if let Ok(out) = out {
            for id in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let volumes = docker(&[
                    "inspect",
                    "-f",
                    "{{range .Mounts}}{{if eq .Type \"volume\"}}{{.Name}} {{end}}{{end}}",
                    id,
                ]);
                let _ = Command::new("docker").args(["rm", "-f", id]).output();
                for volume in volumes.split_whitespace().filter(|v| v.starts_with("agent-sandbox-")) {
                    let _ = Command::new("docker").args(["volume", "rm", volume]).output();
                }
            }
        }
        for name in &self.containers {
            let _ = Command::new("docker").args(["rm", "-f", name]).output();
        }
        let _ = Command::new("docker").args(["network", "rm", &self.network]).output();
    }
}

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker").args(args).output().expect("docker client");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn docker_ok(args: &[&str]) {
    let out = Command::new("docker").args(args).output().expect("docker client");
    assert!(out.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A host answering HTTP on 8080 (IPv4 and IPv6) and, on the denied host, DNS on 53.
const SERVER_JS: &str =
    "require('http').createServer((q,s)=>s.end('hello from '+require('os').hostname())).listen(8080,'::');\
    if (process.argv[1]==='dns'){const d=require('dgram').createSocket('udp4');\
    d.on('message',(m,r)=>{const b=Buffer.from(m);b[2]|=0x80;b[3]=0x83;d.send(b,r.port,r.address)});d.bind(53);}";

fn start_host(image: &str, names: &Names, name: &str, last: u8, dns: bool) {
    let ip4 = format!("{}.{last}", names.v4);
    let ip6 = format!("{}::{last}", names.v6);
    let mut args = vec!["run", "-d", "--name", name, "--network", &names.network, "--ip", &ip4, "--ip6", &ip6];
    args.extend(["--user", "root", "--entrypoint", "node", image, "-e", SERVER_JS]);
    if dns {
        args.push("dns");
    }
    docker_ok(&args);
}

#[test]
fn a_devcontainer_from_init_holds_every_guard_from_inside() {
    let Ok(tag) = std::env::var("AGENT_SANDBOX_E2E_BASE_TAG") else {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(
            std::env::var_os("CI").is_none() || !root,
            "CI must run the devcontainer end-to-end test: run the suite through `cargo xtask test`"
        );
        eprintln!("skipped: the devcontainer end-to-end test needs Docker and the base image (run `cargo xtask test` as root; the unprivileged rerun has no Docker access)");
        return;
    };
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
    let repo = world.path().join("repo");
    let _cleanup = Cleanup {
        containers: vec![names.dns.clone(), names.allowed.clone(), names.denied.clone()],
        network: names.network.clone(),
        workspace: repo.clone(),
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

    // The test repository: a passing pre-commit hook, the project's allowlist.
    std::fs::create_dir_all(&repo).expect("mkdir");
    let git = |args: &[&str]| {
        let out = Command::new("git").args(args).current_dir(&repo).output().expect("git");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(repo.join(".git/hooks/pre-commit"), "#!/bin/sh\necho repo-check-ran >&2\n").expect("hook");
    set_mode(&repo.join(".git/hooks/pre-commit"), 0o755);
    std::fs::create_dir_all(repo.join(".agent-sandbox")).expect("mkdir");
    std::fs::write(
        repo.join(".agent-sandbox/firewall.jsonc"),
        format!(
            "// test hosts only\n{{\"domains\": [\"{}\"], \"githubMeta\": false, \"verify\": \"{}:8080\"}}\n",
            names.allowed, names.allowed
        ),
    )
    .expect("policy");
    std::fs::write(repo.join("README"), "test\n").expect("write");
    git(&["add", "."]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "-m", "init"]);

    // init, the user's own addition (network and resolver), init again: nothing changes.
    let init = || {
        let out = Command::new(BIN.as_str())
            .args(["devcontainer", "init", "--base-tag", &tag])
            .arg(&repo)
            .output()
            .expect("agent-sandbox");
        assert!(out.status.success(), "init: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    init();
    let json_path = repo.join(".devcontainer/devcontainer.json");
    let generated = std::fs::read_to_string(&json_path).expect("generated");
    let edited = generated.replacen(
        "{\n",
        &format!(
            "{{\n  // the test's private network and resolver\n  \"runArgs\": [\"--network={}\", \"--dns={}.53\"],\n",
            names.network, names.v4
        ),
        1,
    );
    std::fs::write(&json_path, &edited).expect("edit");
    let again = init();
    assert!(again.contains("already has every setting"), "{again}");
    assert_eq!(std::fs::read_to_string(&json_path).expect("read"), edited);
    // The workspace belongs to the host user the container's `node` stands for.
    let out = Command::new("chown").args(["-R", "1000:1000"]).arg(world.path()).output().expect("chown");
    assert!(out.status.success());

    // A secret in the environment of whoever brings the container up stays outside.
    let up = Command::new(&cli)
        .args(["up", "--workspace-folder"])
        .arg(&repo)
        .env("AGENT_SANDBOX_E2E_HOST_SECRET", "s3cret-from-the-host")
        .output()
        .expect("devcontainer CLI");
    let up_out = String::from_utf8_lossy(&up.stdout);
    assert!(
        up.status.success() && up_out.contains("\"outcome\":\"success\""),
        "devcontainer up:\n{up_out}\n{}",
        String::from_utf8_lossy(&up.stderr)
    );

    let allowed_v6 = format!("[{}::10]", names.v6);
    let denied_v4 = format!("{}.20", names.v4);
    let denied_v6 = format!("[{}::20]", names.v6);
    let script = format!(
        r#"
        say() {{ echo "$1=$2"; }}
        say user "$(id -un)"
        say host_secret_pid1 "$(tr '\0' '\n' < /proc/1/environ | grep -c s3cret-from-the-host)"
        say host_secret_env "$(env | grep -c s3cret-from-the-host)"
        touch /commandhistory/.bash_history /home/node/.claude/x /home/node/.codex/x; say volumes_writable $?
        say check "$(agent-sandbox check)"
        test -e /.agent-sandbox; say marker $?
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
        git -c user.name=a -c user.email=a@b.invalid -c core.hooksPath=/dev/null commit -q -m bypass 2>/dev/null; say hooks_path $?
        git -c user.name=a -c user.email=a@b.invalid commit -q -m legit 2>/tmp/hook; say commit $?
        say hook_ran "$(grep -c repo-check-ran /tmp/hook)"
        say log "$(git log -1 --format=%s)"
        for path in .git/hooks/pre-commit .git/hooks/post-checkout .git/config .husky/pre-commit .agent-sandbox/firewall.jsonc .agent-sandbox/config.jsonc .devcontainer/devcontainer.json .agent-precommit/user-context.json; do
            (echo x >> "$path") 2>/dev/null; echo "write:$path=$?"
        done
        rm -rf .git/hooks 2>/dev/null; say rm_hooks $?
        mv .devcontainer moved 2>/dev/null; say mv_devcontainer $?
        mkdir -p src && echo ok > src/new.txt; say legit_write $?
        sudo -n iptables -F 2>/dev/null; say sudo_flush $?
        sudo -n ip6tables -P OUTPUT ACCEPT 2>/dev/null; say sudo_v6 $?
        sudo -n ipset flush 2>/dev/null; say sudo_ipset $?
        sudo -n agent-sandbox firewall apply --help >/dev/null 2>&1; say sudo_args $?
        sudo -n /bin/sh -c true 2>/dev/null; say sudo_shell $?
        iptables -P OUTPUT ACCEPT 2>/dev/null; say plain_iptables $?
        say allowed4 "$(curl -4 -sS --max-time 5 http://{allowed}:8080/ 2>&1)"
        say allowed6 "$(curl -6 -sS --max-time 5 http://{allowed}:8080/ 2>&1 || curl -sS --max-time 5 'http://{allowed_v6}:8080/' 2>&1)"
        curl -sS --max-time 5 http://{denied_v4}:8080/ >/dev/null 2>&1; say denied4 $?
        curl -sS --max-time 5 'http://{denied_v6}:8080/' >/dev/null 2>&1; say denied6 $?
        curl -sS --max-time 5 http://{denied}:8080/ >/dev/null 2>&1; say denied_name $?
        dig +time=2 +tries=1 @{denied_v4} probe.test >/dev/null 2>&1; say dns_other $?
        dig +time=2 +tries=1 @{v4}.53 probe.test >/dev/null 2>&1; say dns_upstream_direct $?
        say dns_resolver "$(dig +time=3 +tries=1 probe.test 2>&1 | grep -o 'status: [A-Z]*')"
        # Everything above ran under the rules applied at start; applying again is idempotent.
        sudo -n agent-sandbox firewall status | grep '^live' > /tmp/before
        sudo -n agent-sandbox firewall apply >/tmp/apply 2>&1; say reapply $?
        say reapply_verified "$(grep -c 'verified:' /tmp/apply)"
        sudo -n agent-sandbox firewall status | grep '^live' > /tmp/after
        grep -q '^live agent-sandbox-allow4: .*{v4}.10' /tmp/after && cmp -s /tmp/before /tmp/after; say status_same $?
        "#,
        v4 = names.v4,
        allowed = names.allowed,
        denied = names.denied,
    );
    let exec = Command::new(&cli)
        .args(["exec", "--workspace-folder"])
        .arg(&repo)
        .args(["bash", "-c", &script])
        .output()
        .expect("devcontainer exec");
    let stdout = String::from_utf8_lossy(&exec.stdout).into_owned();
    let got: std::collections::BTreeMap<&str, &str> = stdout.lines().filter_map(|line| line.split_once('=')).collect();
    let hostname_allowed = docker(&["inspect", "-f", "{{.Config.Hostname}}", &names.allowed]);
    let want_hello = format!("hello from {hostname_allowed}");
    let mut want: Vec<(String, &str)> = vec![
        ("user".into(), "node"),
        ("host_secret_pid1".into(), "0"),
        ("host_secret_env".into(), "0"),
        ("volumes_writable".into(), "0"),
        ("check".into(), "inside an agent-sandbox (container)"),
        ("marker".into(), "0"),
        ("marker_rm".into(), "1"),
        ("marker_chmod".into(), "1"),
        ("marker_sudo_rm".into(), "1"),
        ("marker_after".into(), "0"),
        ("git_config_write".into(), "4"),
        ("no_verify".into(), "1"),
        ("no_verify_msg".into(), "1"),
        ("no_verify_short".into(), "1"),
        ("hooks_path".into(), "1"),
        ("commit".into(), "0"),
        ("hook_ran".into(), "1"),
        ("log".into(), "legit"),
        ("rm_hooks".into(), "1"),
        ("mv_devcontainer".into(), "1"),
        ("legit_write".into(), "0"),
        ("sudo_flush".into(), "1"),
        ("sudo_v6".into(), "1"),
        ("sudo_ipset".into(), "1"),
        ("sudo_args".into(), "1"),
        ("sudo_shell".into(), "1"),
        ("plain_iptables".into(), "4"),
        ("reapply".into(), "0"),
        ("reapply_verified".into(), "3"),
        ("status_same".into(), "0"),
        ("allowed4".into(), want_hello.as_str()),
        ("allowed6".into(), want_hello.as_str()),
        ("denied4".into(), "7"),
        ("denied6".into(), "7"),
        ("denied_name".into(), "7"),
        ("dns_other".into(), "9"),
        ("dns_upstream_direct".into(), "9"),
        ("dns_resolver".into(), "status: NXDOMAIN"),
    ];
    for path in [
        ".git/hooks/pre-commit",
        ".git/hooks/post-checkout",
        ".git/config",
        ".husky/pre-commit",
        ".agent-sandbox/firewall.jsonc",
        ".agent-sandbox/config.jsonc",
        ".devcontainer/devcontainer.json",
        ".agent-precommit/user-context.json",
    ] {
        want.push((format!("write:{path}"), "1"));
    }
    let mismatches: Vec<String> = want
        .iter()
        .filter(|(key, value)| got.get(key.as_str()) != Some(value))
        .map(|(key, value)| format!("{key}: want {value:?}, got {:?}", got.get(key.as_str())))
        .collect();
    assert!(
        mismatches.is_empty(),
        "{}\n--- stdout:\n{stdout}\n--- stderr:\n{}",
        mismatches.join("\n"),
        String::from_utf8_lossy(&exec.stderr)
    );

    // History and the agents' configuration live in named volumes of this workspace.
    let label = format!("label=devcontainer.local_folder={}", repo.display());
    let container = docker(&["ps", "-q", "--filter", &label]);
    let mounts = docker(&[
        "inspect",
        "-f",
        "{{range .Mounts}}{{if eq .Type \"volume\"}}{{.Name}}>{{.Destination}} {{end}}{{end}}",
        &container,
    ]);
    let volumes: Vec<&str> = mounts.split_whitespace().collect();
    let mut targets: Vec<&str> = volumes.iter().filter_map(|v| v.split_once('>')).map(|(_, target)| target).collect();
    targets.sort();
    assert_eq!(targets, ["/commandhistory", "/home/node/.claude", "/home/node/.codex"], "{mounts}");
    assert!(volumes.iter().all(|v| v.starts_with("agent-sandbox-")), "{mounts}");

    // The refusals above are the firewall's: the same requests from a container
    // without it, on the same network, succeed.
    let control = |args: &[&str]| {
        let mut full =
            vec!["run", "--rm", "--network", &names.network, "--user", "root", "--entrypoint", args[0], &image];
        full.extend(&args[1..]);
        Command::new("docker").args(&full).output().expect("docker").status.success()
    };
    assert!(control(&["curl", "-sS", "--max-time", "5", &format!("http://{denied_v4}:8080/")]), "denied host down?");
    assert!(
        control(&["curl", "-sS", "--max-time", "5", &format!("http://{denied_v6}:8080/")]),
        "denied host (v6) down?"
    );
    assert!(control(&["dig", "+time=2", "+tries=1", &format!("@{denied_v4}"), "probe.test"]), "denied DNS down?");
    // Nothing leaked back to the host: the protected files are as they were.
    assert_eq!(
        std::fs::read_to_string(repo.join(".git/hooks/pre-commit")).expect("hook"),
        "#!/bin/sh\necho repo-check-ran >&2\n"
    );
    assert!(!Path::new(&repo.join(".git/hooks/post-checkout")).exists());
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}
