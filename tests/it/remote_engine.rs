//! End to end: the Docker lifecycle against a remote engine, over TLS (`init`, then
//! `list --json`, `start`, `shell -c`, `stop`) and over ssh (the same, then `build`,
//! `restart`, `show-run`, `codex-init-config`, `checkout`, `shell --branch`, `stop --all`).
//! The remote engine is a second dockerd the test starts (its own data, exec root,
//! pidfile and sockets; no bridge, no iptables, so it cannot touch the main engine's
//! networking) with TLS on 127.0.0.1, certificates made here with the `openssl` CLI.
//! The ssh endpoint is an sshd process on a loopback port, run by the test with its own
//! config, host key and authorized key, whose sessions' `docker` talks to the second
//! engine (`SetEnv DOCKER_HOST`): simpler than an sshd container (no image with sshd
//! and the docker CLI, no network, no published port), and what a remote machine is,
//! one that runs sshd and dockerd. The client side is the user's own `ssh`, given the
//! test's config by a wrapper first on `PATH`. The second engine has no images: the
//! base image is loaded into it from the main engine (`docker save | docker load`):
//! about 50 s of the test's 2 to 2.5 minutes for the 1.3 GB image here on 2 shared cores,
//! and as much disk again while the test runs.
//! Only loopback is used; everything made is removed at the end.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use crate::{
    dockerbox::{docker_volume_hash, text},
    support::BIN,
};

/// A second engine and an sshd in front of it, stopped and removed on drop.
struct Remote {
    dir: tempfile::TempDir,
    dockerd: Child,
    sshd: Option<Child>,
    made_run_sshd: bool,
    tls_port: u16,
    ssh_port: u16,
}

impl Remote {
    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn socket(&self) -> String {
        format!("unix://{}", self.path("d.sock").display())
    }

    /// The docker CLI against the second engine.
    fn docker(&self, args: &[&str]) -> Output {
        Command::new("docker").args(["-H", &self.socket()]).args(args).output().expect("docker client")
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        if let Some(sshd) = &mut self.sshd {
            sshd.kill().ok();
            sshd.wait().ok();
        }
        if self.made_run_sshd {
            std::fs::remove_dir("/run/sshd").ok();
        }
        let ids = String::from_utf8_lossy(&self.docker(&["ps", "-aq"]).stdout).into_owned();
        for id in ids.split_whitespace() {
            self.docker(&["rm", "-f", id]);
        }
        self.docker(&["volume", "prune", "-f"]);
        // SAFETY: SIGTERM to the dockerd this test started.
        unsafe { libc::kill(self.dockerd.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.dockerd.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        self.dockerd.kill().ok();
        self.dockerd.wait().ok();
        // The data root holds the image's layers: remove it even where the container's
        // user left read-only directories.
        Command::new("rm").arg("-rf").arg(self.dir.path()).status().ok();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|err| panic!("{cmd:?}: {err}"));
    assert!(out.status.success(), "{cmd:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A CA, the engine's certificate for 127.0.0.1 and a client certificate, in `dir`
/// (`ca.pem`, `server-cert.pem`, `server-key.pem`, `client/{ca,cert,key}.pem`).
fn make_certs(dir: &Path) {
    let openssl = |args: &[&str]| run(Command::new("openssl").args(args).current_dir(dir));
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &["-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "2", "-subj", "/CN=remote-test-ca"],
        ]
        .concat(),
    );
    for (name, usage) in [
        ("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ] {
        std::fs::write(dir.join(format!("{name}.ext")), usage).expect("write");
        let (key, csr, cert) = (format!("{name}-key.pem"), format!("{name}.csr"), format!("{name}-cert.pem"));
        openssl(&[&["req"][..], &ec, &["-keyout", &key, "-out", &csr, "-subj", &format!("/CN={name}")]].concat());
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-out",
            &cert,
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
        ]);
    }
    let client = dir.join("client");
    std::fs::create_dir(&client).expect("mkdir");
    for (from, to) in [("ca.pem", "ca.pem"), ("client-cert.pem", "cert.pem"), ("client-key.pem", "key.pem")] {
        std::fs::copy(dir.join(from), client.join(to)).expect("copy");
    }
}

/// Starts the second engine and the sshd; loads `image` into the engine.
fn start_remote(image: &str) -> Remote {
    // Short: containerd's socket under the exec root must fit a socket path.
    let dir = tempfile::Builder::new().prefix("asr-").tempdir_in("/tmp").expect("tempdir");
    let path = |rel: &str| dir.path().join(rel);
    make_certs(dir.path());
    std::fs::write(path("daemon.json"), "{}").expect("write");
    let tls_port = free_port();
    let log = std::fs::File::create(path("dockerd.log")).expect("log");
    let mut dockerd = Command::new("dockerd");
    let files = [
        ("--config-file", "daemon.json"),
        ("--data-root", "data"),
        ("--exec-root", "x"),
        ("--pidfile", "dockerd.pid"),
        ("--tlscacert", "ca.pem"),
        ("--tlscert", "server-cert.pem"),
        ("--tlskey", "server-key.pem"),
    ];
    for (flag, file) in files {
        dockerd.arg(flag).arg(path(file));
    }
    let unix = format!("unix://{}", path("d.sock").display());
    let tcp = format!("tcp://127.0.0.1:{tls_port}");
    let dockerd = dockerd
        .args(["--host", &unix, "--host", &tcp, "--tlsverify"])
        .args(["--bridge", "none", "--iptables=false", "--ip6tables=false", "--ip-forward=false"])
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("dockerd (install with: apt-get install docker.io)");
    let mut remote = Remote { dir, dockerd, sshd: None, made_run_sshd: false, tls_port, ssh_port: free_port() };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !remote.docker(&["version"]).status.success() {
        let log = std::fs::read_to_string(remote.path("dockerd.log")).unwrap_or_default();
        assert!(Instant::now() < deadline, "the second dockerd did not start:\n{log}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let started = Instant::now();
    let load = format!("docker save {image} | docker -H {} load -q", remote.socket());
    run(Command::new("sh").args(["-c", &load]));
    eprintln!("loading {image} into the second engine took {:.1} s", started.elapsed().as_secs_f64());
    start_sshd(&mut remote);
    remote
}

/// The sshd on 127.0.0.1 (root, key only), whose sessions' docker is the second engine;
/// and the client's side: a key, the host key as known, an `ssh` wrapper in `bin/`.
fn start_sshd(remote: &mut Remote) {
    let ssh = remote.path("ssh");
    std::fs::create_dir(&ssh).expect("mkdir");
    for key in ["host_key", "client_key"] {
        run(Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f"]).arg(ssh.join(key)));
    }
    std::fs::copy(ssh.join("client_key.pub"), ssh.join("authorized_keys")).expect("copy");
    let port = remote.ssh_port;
    let config = format!(
        "ListenAddress 127.0.0.1:{port}\nHostKey {ssh}/host_key\nPidFile none\nUsePAM no\nStrictModes no\n\
         PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n\
         AuthorizedKeysFile {ssh}/authorized_keys\nSetEnv DOCKER_HOST={}\n",
        remote.socket(),
        ssh = ssh.display()
    );
    std::fs::write(ssh.join("sshd_config"), config).expect("write");
    let host_key = std::fs::read_to_string(ssh.join("host_key.pub")).expect("host key");
    std::fs::write(ssh.join("known_hosts"), format!("[127.0.0.1]:{port} {host_key}")).expect("write");
    std::fs::write(
        ssh.join("config"),
        format!(
            "Host 127.0.0.1\n  IdentityFile {ssh}/client_key\n  IdentitiesOnly yes\n  UserKnownHostsFile {ssh}/known_hosts\n  \
             GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n",
            ssh = ssh.display()
        ),
    )
    .expect("write");
    let bin = remote.path("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    std::fs::write(bin.join("ssh"), format!("#!/bin/sh\nexec /usr/bin/ssh -F {}/config \"$@\"\n", ssh.display()))
        .expect("write");
    run(Command::new("chmod").arg("755").arg(bin.join("ssh")));
    // sshd's privilege separation directory.
    if !Path::new("/run/sshd").exists() {
        std::fs::create_dir("/run/sshd").expect("mkdir /run/sshd");
        remote.made_run_sshd = true;
    }
    let sshd = Command::new("/usr/sbin/sshd")
        .args(["-D", "-e", "-f"])
        .arg(ssh.join("sshd_config"))
        .stderr(std::fs::File::create(remote.path("sshd.log")).expect("log"))
        .spawn()
        .expect("sshd (install with: apt-get install openssh-server)");
    remote.sshd = Some(sshd);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = Command::new(bin.join("ssh"))
            .args(["-p", &port.to_string(), "root@127.0.0.1", "docker", "version", "--format", "{{.Server.Version}}"])
            .stdin(Stdio::null())
            .output()
            .expect("ssh");
        if out.status.success() {
            break;
        }
        let log = std::fs::read_to_string(remote.path("sshd.log")).unwrap_or_default();
        assert!(Instant::now() < deadline, "ssh to the test's sshd failed: {}\nsshd:\n{log}", text(&out));
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A git repository owned by the container's user, on the `none` network.
fn make_repo(parent: &Path) -> PathBuf {
    let path = parent.join("proj");
    std::fs::create_dir_all(path.join(".agent-sandbox")).expect("mkdir");
    let git = |args: &[&str]| {
        run(Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "safe.directory=*"])
            .args(args)
            .current_dir(&path))
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(path.join("README"), "hello\n").expect("write");
    std::fs::write(path.join(".agent-sandbox/settings.json"), "{\"network\": \"none\"}\n").expect("write");
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "init"]);
    run(Command::new("chown").args(["-R", "1000:1000"]).arg(&path));
    path
}

/// `agent-sandbox ARGS` in `repo` with `env`, the user's own docker configuration out of
/// the way (`DOCKER_CONFIG`).
fn sandbox(repo: &Path, env: &[(&str, String)], args: &[&str]) -> Output {
    let parent = repo.parent().expect("parent");
    let mut cmd = Command::new(BIN.as_str());
    cmd.args(args)
        .current_dir(repo)
        .env_remove("DOCKER_HOST")
        .env_remove("DOCKER_CONTEXT")
        .env_remove("DOCKER_TLS_VERIFY")
        .env_remove("DOCKER_CERT_PATH")
        .env_remove("DOCKER_TLS")
        .env("DOCKER_CONFIG", parent.join("docker-config"))
        .env("XDG_STATE_HOME", parent.join("state"))
        .stdin(Stdio::null());
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd.output().expect("agent-sandbox")
}

/// `list --json`'s state of `name` (`None`: not listed).
fn listed_state(out: &Output, name: &str) -> Option<String> {
    assert!(out.status.success(), "list --json: {}", text(out));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("list --json is JSON");
    let item = listed.as_array().expect("an array").iter().find(|item| item["name"] == name)?.clone();
    Some(item["state"].as_str().expect("state").to_owned())
}

/// The rest of the lifecycle through one endpoint: `build`, `restart`, `show-run`,
/// `codex-init-config` (the archive API), branch mode (`checkout`, `shell --branch`),
/// `stop --all`.
fn the_other_commands(repo: &Path, tag: &str, env: &[(&str, String)], hash: &str) {
    let ok = |args: &[&str]| {
        let out = sandbox(repo, env, &[args, &["--base-tag", tag]].concat());
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let name = format!("agent-sandbox-proj-{hash}");
    assert!(ok(&["build"]).contains(&format!("built {name}:latest")));
    assert!(ok(&["restart"]).contains(&format!("{name} restarted")));
    assert!(ok(&["show-run"]).starts_with("docker run"));
    let codex = ok(&["codex-init-config"]);
    assert!(codex.contains("config.toml"), "{codex}");
    ok(&["checkout", "b1"]);
    let branch =
        ok(&["shell", "--branch", "b1", "-c", "git branch --show-current; agent-sandbox firewall status | head -1"]);
    assert!(branch.contains("b1\nfirewall: on"), "{branch}");
    let out = sandbox(repo, env, &["stop", "--all"]);
    let stopped = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    for want in [format!("stopped {name}"), format!("stopped agent-sandbox-proj-b1-{hash}")] {
        assert!(stopped.contains(&want), "{want}: {}", text(&out));
    }
}

/// The lifecycle through one endpoint: `list --json`, `start`, `shell -c` (behind the
/// firewall), `stop`; the container lives on the second engine, not on the main one.
fn lifecycle(remote: &Remote, repo: &Path, tag: &str, env: &[(&str, String)], what: &str) {
    let name = format!("agent-sandbox-proj-{}", docker_volume_hash(repo));
    assert_eq!(listed_state(&sandbox(repo, env, &["list", "--json"]), &name), None, "{what}: none yet");
    let out = sandbox(repo, env, &["start", "--base-tag", tag]);
    assert!(out.status.success(), "{what}: start: {}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("agent-sandbox: firewall: on"), "{what}: {}", text(&out));
    let script = "agent-sandbox check; echo \"check=$?\"; agent-sandbox firewall status | head -1; \
                  echo \"uid=$(id -u) pwd=$(pwd)\"; cat README";
    let out = sandbox(repo, env, &["shell", "--base-tag", tag, "-c", script]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{what}: shell: {}", text(&out));
    for want in
        ["inside an agent-sandbox (container)", "check=0", "firewall: on", "uid=1000 pwd=/workspace/proj", "hello"]
    {
        assert!(stdout.contains(want), "{what}: {want:?} missing in:\n{}", text(&out));
    }
    // A command's status comes back through the endpoint too.
    let out = sandbox(repo, env, &["shell", "--base-tag", tag, "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7), "{what}: {}", text(&out));
    assert_eq!(listed_state(&sandbox(repo, env, &["list", "--json"]), &name).as_deref(), Some("running"), "{what}");
    let on_remote =
        String::from_utf8_lossy(&remote.docker(&["ps", "-q", "--filter", &format!("name=^{name}$")]).stdout)
            .trim()
            .to_owned();
    assert!(!on_remote.is_empty(), "{what}: {name} is not on the second engine");
    let on_main =
        Command::new("docker").args(["ps", "-aq", "--filter", &format!("name=^{name}$")]).output().expect("docker");
    assert!(on_main.stdout.is_empty(), "{what}: {name} reached the main engine");
    let out = sandbox(repo, env, &["stop", "--base-tag", tag]);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains(&format!("stopped {name}")),
        "{what}: {}",
        text(&out)
    );
    assert_eq!(listed_state(&sandbox(repo, env, &["list", "--json"]), &name).as_deref(), Some("exited"), "{what}");
    assert!(remote.docker(&["rm", "-f", &name]).status.success(), "{what}: rm");
}

#[test]
fn the_lifecycle_runs_on_a_remote_engine_over_tls_and_over_ssh() {
    let Some(tag) = crate::support::e2e_base_tag("the remote engine end-to-end test") else { return };
    if !crate::support::is_root() {
        eprintln!("skipped: the remote engine test starts a second dockerd and an sshd, which needs root");
        return;
    }
    let remote = start_remote(&format!("agent-sandbox-base:{tag}"));
    let repo = make_repo(remote.dir.path());
    let tls_host = format!("tcp://127.0.0.1:{}", remote.tls_port);
    let client = remote.path("client").display().to_string();
    let tls = [
        ("DOCKER_HOST", tls_host.clone()),
        ("DOCKER_TLS_VERIFY", "1".to_owned()),
        ("DOCKER_CERT_PATH", client.clone()),
    ];
    // init over TLS: the build context goes up, the build's stream comes back.
    let hash = docker_volume_hash(&repo);
    let out = sandbox(&repo, &tls, &["init", "--base-tag", &tag]);
    assert!(out.status.success(), "init: {}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("built agent-sandbox-proj-{hash}:latest")),
        "{}",
        text(&out)
    );
    lifecycle(&remote, &repo, &tag, &tls, "tls");

    let path = format!("{}:{}", remote.path("bin").display(), std::env::var("PATH").unwrap_or_default());
    let ssh = [("DOCKER_HOST", format!("ssh://root@127.0.0.1:{}", remote.ssh_port)), ("PATH", path)];
    lifecycle(&remote, &repo, &tag, &ssh, "ssh");
    the_other_commands(&repo, &tag, &ssh, &hash);

    // A context holding TLS material, as `docker context create` stores it.
    let config = repo.parent().expect("parent").join("docker-config");
    std::fs::create_dir_all(config.join("contexts/meta/d1")).expect("mkdir");
    std::fs::write(
        config.join("contexts/meta/d1/meta.json"),
        format!(r#"{{"Name":"box","Endpoints":{{"docker":{{"Host":"{tls_host}","SkipTLSVerify":false}}}}}}"#),
    )
    .expect("write");
    std::fs::create_dir_all(config.join("contexts/tls/d1")).expect("mkdir");
    run(Command::new("cp").arg("-r").arg(&client).arg(config.join("contexts/tls/d1/docker")));
    // It sees what the ssh endpoint left: the same engine.
    let out = sandbox(&repo, &[("DOCKER_CONTEXT", "box".to_owned())], &["list", "--json"]);
    for name in [format!("agent-sandbox-proj-{hash}"), format!("agent-sandbox-proj-b1-{hash}")] {
        assert_eq!(listed_state(&out, &name).as_deref(), Some("exited"), "{name}: {}", text(&out));
    }

    // What cannot be trusted is refused: no client certificate (the engine asks for
    // one), another CA than the engine's, TLS_VERIFY without the files.
    let only_ca = remote.path("only-ca");
    std::fs::create_dir(&only_ca).expect("mkdir");
    std::fs::copy(remote.path("ca.pem"), only_ca.join("ca.pem")).expect("copy");
    let other_ca = remote.path("other-ca");
    std::fs::create_dir(&other_ca).expect("mkdir");
    make_certs(&other_ca);
    for file in ["cert.pem", "key.pem"] {
        std::fs::copy(remote.path("client").join(file), other_ca.join("client").join(file)).expect("copy");
    }
    let empty = remote.path("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    for (dir, want) in
        [(&only_ca, "does not answer"), (&other_ca.join("client"), "does not answer"), (&empty, "ca.pem is missing")]
    {
        let env = [
            ("DOCKER_HOST", tls_host.clone()),
            ("DOCKER_TLS_VERIFY", "1".to_owned()),
            ("DOCKER_CERT_PATH", dir.display().to_string()),
        ];
        let out = sandbox(&repo, &env, &["list", "--json"]);
        assert!(
            !out.status.success() && String::from_utf8_lossy(&out.stderr).contains(want),
            "{}: {}",
            dir.display(),
            text(&out)
        );
    }
}
