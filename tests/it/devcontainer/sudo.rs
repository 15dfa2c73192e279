//! End to end: a dev container on an image built the way common-utils builds them
//! (every `mcr.microsoft.com/devcontainers/*` image): the user `vscode` with
//! `vscode ALL=(root) NOPASSWD:ALL` in `/etc/sudoers.d/` and in the `sudo` group, the
//! image's `devcontainer.metadata` naming it the remote user, and a devcontainer.json
//! that names no user. `init` refuses the Docker Features with the reason, then writes
//! `"remoteUser": "vscode"` (the image's, not `node`) and leaves nothing untracked in
//! the project. After the build `vscode` cannot become root (`sudo -n true`, `sudo
//! iptables`, a shell), while the Feature's own rules work and `agent-sandbox test`
//! holds every row. A grant put back as root makes `test` fail its sudo row; the
//! Feature's entrypoint takes it away again at the next start. The network is the
//! test's own (a private network and a resolver on it), as in the other dev container
//! tests.

use std::{path::Path, process::Command, time::Instant};

use super::{check, chown_for_container, docker, docker_ok, git, start_host, Cleanup, Devcontainer, Names};
use crate::support::BIN;

/// As common-utils leaves an image: its user, with passwordless sudo for everything.
const COMMON_UTILS_DOCKERFILE: &str = "FROM agent-sandbox-bootstrap:bookworm\n\
    RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends sudo >/dev/null \\\n\
     && rm -rf /var/lib/apt/lists/* \\\n\
     && useradd --create-home --uid 1000 --user-group --shell /bin/bash vscode && usermod -aG sudo vscode \\\n\
     && echo 'vscode ALL=(root) NOPASSWD:ALL' > /etc/sudoers.d/vscode && chmod 0440 /etc/sudoers.d/vscode\n\
    LABEL devcontainer.metadata=\"[{\\\"remoteUser\\\":\\\"vscode\\\"}]\"\n";

/// `devcontainer init` with its own HOME (where the previous devcontainer.json is kept).
fn init(repo: &Path, home: &Path) -> std::process::Output {
    Command::new(BIN.as_str())
        .args(["devcontainer", "init"])
        .arg(repo)
        .env("HOME", home)
        .env_remove("XDG_STATE_HOME")
        .output()
        .expect("agent-sandbox")
}

#[test]
fn a_common_utils_image_keeps_no_sudo_beyond_the_features_rules() {
    let Some(tag) = crate::support::e2e_base_tag("the devcontainer sudo end-to-end test") else { return };
    let started = Instant::now();
    let cli = std::env::var("AGENT_SANDBOX_DEVCONTAINER_CLI").expect("xtask sets the devcontainer CLI path");
    let world = tempfile::tempdir().expect("tempdir");
    let project = Devcontainer { cli: &cli, repo: world.path().join("vscode") };
    let repo = &project.repo;
    let home = world.path().join("home");
    std::fs::create_dir(&home).expect("mkdir");
    let id = std::process::id();
    let subnet = 16 + id % 200;
    let names = Names {
        network: format!("as-sudo-{id}"),
        dns: format!("as-sudo-dns-{id}"),
        allowed: String::new(),
        denied: String::new(),
        v4: format!("172.28.{subnet}"),
        v6: format!("fd00:a5e4:{subnet:x}"),
    };
    let image = format!("as-e2e-common-utils-{id}");
    let _cleanup = Cleanup {
        workspaces: vec![repo.to_path_buf()],
        containers: vec![names.dns.clone()],
        network: names.network.clone(),
        images: vec![image.clone()],
    };
    let build = Command::new("docker")
        .args(["build", "-q", "-t", &image, "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().expect("piped").write_all(COMMON_UTILS_DOCKERFILE.as_bytes())?;
            child.wait_with_output()
        })
        .expect("docker build");
    assert!(build.status.success(), "the common-utils-like image: {}", String::from_utf8_lossy(&build.stderr));
    let (subnet4, subnet6) = (format!("{}.0/24", names.v4), format!("{}::/64", names.v6));
    docker_ok(&["network", "create", "--ipv6", "--subnet", &subnet4, "--subnet", &subnet6, &names.network]);
    start_host(&format!("agent-sandbox-base:{tag}"), &names, &names.dns, 53, true);

    std::fs::create_dir_all(repo.join(".devcontainer")).expect("mkdir");
    git(repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README"), "test\n").expect("write");
    let json_path = repo.join(".devcontainer/devcontainer.json");
    let user_json = format!(
        "// no user named: the image's metadata says vscode\n{{\n  \"image\": \"{image}\",\n  \
         \"runArgs\": [\"--network={}\", \"--dns={}.53\"]\n}}\n",
        names.network, names.v4
    );
    std::fs::write(&json_path, &user_json).expect("write");
    git(repo, &["add", "."]);
    git(repo, &["-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "-m", "init"]);

    // The Docker Features are the socket mount and `privileged` by another name:
    // refused with the reason, nothing written, as the hand-written mount is.
    for (feature, reason) in [
        ("ghcr.io/devcontainers/features/docker-outside-of-docker:1", "mounts the host's Docker socket"),
        ("ghcr.io/devcontainers/features/docker-in-docker:2", "runs the container privileged"),
    ] {
        let with_feature = user_json.replacen("{\n", &format!("{{\n  \"features\": {{\"{feature}\": {{}}}},\n"), 1);
        std::fs::write(&json_path, &with_feature).expect("write");
        let out = init(repo, &home);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(&format!("feature \"{feature}\": {reason}")), "{stderr}");
        assert!(!repo.join(".devcontainer/agent-sandbox").exists(), "a refused init wrote the Feature");
        assert_eq!(std::fs::read_to_string(&json_path).expect("read"), with_feature);
    }
    std::fs::write(&json_path, &user_json).expect("write");

    let out = init(repo, &home);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "init: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    let merged = std::fs::read_to_string(&json_path).expect("read");
    assert!(merged.contains("\"remoteUser\": \"vscode\"") && !merged.contains("node"), "{merged}");
    // Nothing untracked in the project but the Feature's folder (its binary ignored);
    // the previous file is outside the work tree, where init says.
    let status =
        Command::new("git").args(["status", "--porcelain", "--untracked-files=all"]).current_dir(repo).output();
    let status = String::from_utf8_lossy(&status.expect("git").stdout).into_owned();
    let untracked: Vec<&str> = status
        .lines()
        .filter(|line| line.starts_with("??") && !line.starts_with("?? .devcontainer/agent-sandbox/"))
        .collect();
    assert_eq!(untracked, Vec::<&str>::new(), "{status}");
    let kept = stdout
        .lines()
        .find_map(|line| line.strip_prefix("the previous .devcontainer/devcontainer.json is kept at "))
        .unwrap_or_else(|| panic!("no backup named: {stdout}"));
    assert!(Path::new(kept).starts_with(&home), "{kept}");
    assert_eq!(std::fs::read_to_string(kept).expect("backup"), user_json);

    chown_for_container(repo);
    let (ok, up_text) = project.up(&[]);
    assert!(ok, "devcontainer up:\n{up_text}");
    let on = "firewall: on (only the network policy's names are reachable, through its proxy)";
    let probe = r#"
        agent-sandbox firewall wait >/dev/null
        say user "$(id -un)"
        sudo -n true 2>/dev/null; say sudo_true $?
        sudo -n iptables -P OUTPUT ACCEPT 2>/dev/null; say sudo_iptables $?
        sudo -n /bin/sh -c true 2>/dev/null; say sudo_shell $?
        say listed_all "$(sudo -n -l 2>/dev/null | grep -c 'ALL$')"
        say sudo_group "$(id -nG | tr ' ' '\n' | grep -cx sudo)"
        sudo -n agent-sandbox firewall status >/dev/null 2>&1; say feature_status $?
        sudo -n agent-sandbox firewall apply >/dev/null 2>&1; say feature_apply $?
        say status "$(agent-sandbox firewall status | head -1)"
        agent-sandbox test >/tmp/test.txt 2>&1; say test $?
        say sudo_row "$(grep "^no sudo beyond the Feature's rules" /tmp/test.txt | grep -c 'NOT HELD')"
        cat /tmp/test.txt
        "#;
    let held: Vec<(&str, &str)> = vec![
        ("user", "vscode"),
        ("sudo_true", "1"),
        ("sudo_iptables", "1"),
        ("sudo_shell", "1"),
        ("listed_all", "0"),
        ("sudo_group", "0"),
        ("feature_status", "0"),
        ("feature_apply", "0"),
        ("status", on),
        ("test", "0"),
        ("sudo_row", "0"),
    ];
    let (got, all) = project.exec(probe);
    check("common-utils image, first start", &got, &held, &all);
    let container = project.container();
    let grant = docker(&["exec", "-u", "root", &container, "cat", "/etc/sudoers.d/vscode"]);
    assert!(grant.starts_with("# agent-sandbox removed"), "{grant}");
    eprintln!("devcontainer sudo e2e: first start checked after {:?}", started.elapsed());

    // A grant put back as root (as a Feature installed after ours would): `test` fails
    // its sudo row, and only that one, while the grant exists.
    docker_ok(&[
        "exec",
        "-u",
        "root",
        &container,
        "sh",
        "-c",
        "echo 'vscode ALL=(root) NOPASSWD:ALL' > /etc/sudoers.d/later && chmod 0440 /etc/sudoers.d/later",
    ]);
    let (got, all) = project.exec(
        "sudo -n true 2>/dev/null; say sudo_true $?\n\
         agent-sandbox test >/tmp/test.txt 2>&1; say test $?\n\
         say sudo_row \"$(grep \"^no sudo beyond the Feature's rules\" /tmp/test.txt | grep -c 'NOT HELD')\"\n\
         say not_held \"$(grep -c 'NOT HELD' /tmp/test.txt)\"\ncat /tmp/test.txt",
    );
    check("a grant put back", &got, &[("sudo_true", "0"), ("test", "1"), ("sudo_row", "1"), ("not_held", "1")], &all);
    // The entrypoint takes it away again at the next start.
    assert_eq!(project.restart(), on);
    let (got, all) = project.exec(probe);
    check("common-utils image, after docker restart", &got, &held, &all);
    eprintln!("devcontainer sudo e2e: done after {:?}", started.elapsed());
}
