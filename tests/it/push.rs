//! Pushes carried out by agent-sandbox outside the sandbox: `git push` inside becomes a
//! request to the `exec` process on the host, which checks every new commit in a fresh
//! sandbox and pushes with the user's own git setup. The remote is never granted to
//! the sandbox here: it is reachable only through the host.

use std::process::Command;

use crate::support::{require_bwrap, World};

/// A project with the check `test ! -e BROKEN`, `.husky` protected (a built-in default),
/// pushed to a bare remote beside it that the sandbox can read but not write. `.git`
/// inside is the session repository (the default): a commit comes home through the
/// checks, a push leaves from the user's repository, and a plant into `.git` lands in
/// the session (`session_repo::*`).
fn pushed_world() -> World {
    let world = World::new();
    world.write("home/proj/src.txt", "one\n");
    world.write("home/proj/.husky/pre-commit", "npm test\n");
    world.project_config(r#"{ "checks": { "commands": ["test ! -e BROKEN"] } }"#);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "second"]);
    world.bare_origin();
    world.git(&["push", "-q", "origin", "main"]);
    world.git(&["fetch", "-q", "origin"]);
    world
}

fn remote_refs(world: &World) -> String {
    let remote = world.path("home/remote.git");
    let out = Command::new("git")
        .args(["--git-dir", remote.to_str().expect("utf-8"), "for-each-ref", "--format=%(refname) %(objectname)"])
        .output()
        .expect("git");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The user's repository back at `origin/main`, and the agent's session repository
/// (kept between sessions, with whatever the attack left in it) started afresh.
fn reset(world: &World) {
    // Plants into `.git` land in the session repository, never in the user's.
    for leftover in [".git/shallow", ".git/objects/info/alternates", ".git/config.worktree"] {
        assert!(!world.path(&format!("home/proj/{leftover}")).exists(), "{leftover} reached the user's .git");
    }
    world.forget_session();
    world.git(&["checkout", "-qf", "main"]);
    world.git(&["reset", "-q", "--hard", "origin/main"]);
    world.git(&["clean", "-qffdx", "-e", ".agent-sandbox"]);
    // Branches too: one left pointing at a borrowed object would stop every later copy.
    for name in
        world.git(&["for-each-ref", "--format=%(refname)", "refs/tags/", "refs/replace/", "refs/heads/"]).lines()
    {
        if name != "refs/heads/main" {
            world.git(&["update-ref", "-d", name]);
        }
    }
}

/// Every way an agent got a failing commit onto the remote from inside the sandbox, with
/// the remote not granted: none reaches it, and each says why.
#[test]
fn nothing_unchecked_leaves_through_the_host() {
    require_bwrap!();
    let world = pushed_world();
    world.git(&["config", "extensions.worktreeConfig", "true"]);
    let before = remote_refs(&world);
    let own_git = "cp /run/agent-sandbox/bin/git /tmp/g && ";
    let commit_broken = "touch BROKEN && /tmp/g add BROKEN && /tmp/g commit -qn -m sneaky";
    let scratch = "/tmp/g clone -q . /tmp/s && cd /tmp/s && /tmp/g -c user.name=a -c user.email=a@b commit -q";
    let attacks: Vec<(&str, String)> = vec![
        // A commit made without hooks, pushed through the guard: the host's check fails.
        ("failed on commit", format!("{own_git}{commit_broken} && git push -q origin main")),
        // The same, on a new branch, with a clean-up commit on top.
        (
            "failed on commit",
            format!("{own_git}{commit_broken} && git rm -q BROKEN && git commit -qm fine && git push -q origin HEAD:refs/heads/topic"),
        ),
        // Its own git cannot reach the remote: it is not in the sandbox at all.
        ("does not appear to be a git repository", format!("{own_git}{commit_broken} && /tmp/g push -q origin main")),
        // A push from a scratch clone, through the guard.
        ("this push comes from /tmp/s", format!("{own_git}{scratch} --allow-empty -m x && git push -q origin HEAD:refs/heads/topic")),
        // ...or from another git directory named for the push.
        ("names another git directory", format!("{own_git}{scratch} --allow-empty -m x && cd - >/dev/null && git --git-dir=/tmp/s/.git push -q origin main")),
        // A change to a protected path made in a scratch clone and fetched.
        (
            "which is protected (.husky)",
            format!("{own_git}{scratch} --allow-empty -m x && echo 'exit 0' > .husky/pre-commit && /tmp/g commit -qam skip \
                     && cd - >/dev/null && git fetch -q /tmp/s main:refs/heads/topic && git push -q origin topic"),
        ),
        // Objects borrowed from elsewhere: the host sees only the project's own store.
        (
            "not in the project's own object store",
            format!("{own_git}{scratch} --allow-empty -m borrowed && S=$(/tmp/g rev-parse HEAD) && cd - >/dev/null \
                     && export GIT_ALTERNATE_OBJECT_DIRECTORIES=/tmp/s/.git/objects \
                     && /tmp/g update-ref refs/heads/borrowed $S && git push -q origin borrowed"),
        ),
        (
            ".git/objects/info/alternates: makes git read another repository",
            format!("{own_git}{scratch} --allow-empty -m borrowed && S=$(/tmp/g rev-parse HEAD) && cd - >/dev/null \
                     && echo /tmp/s/.git/objects > .git/objects/info/alternates \
                     && /tmp/g update-ref refs/heads/borrowed $S && git push -q origin borrowed"),
        ),
        // A shallow file that hides the failing commit under a clean one.
        (
            ".git/shallow: makes git read another repository",
            format!("{own_git}{commit_broken} && git rm -q BROKEN && git commit -qm cleanup && git rev-parse HEAD~1 > .git/shallow \
                     && git push -q origin main"),
        ),
        // A global config of the agent's making (a smudge filter hiding the file from the
        // check's checkout), an `sh` planted first on PATH: the host uses neither.
        (
            "failed on commit",
            format!("{own_git}{commit_broken} && mkdir -p /tmp/h && cp ~/.gitconfig /tmp/h/ \
                     && echo 'BROKEN filter=hide' > .gitattributes && /tmp/g add .gitattributes && /tmp/g commit -qn -m attrs \
                     && printf '[filter \"hide\"]\\n\\tsmudge = rm -f BROKEN\\n' >> /tmp/h/.gitconfig \
                     && mkdir -p /tmp/bin && printf '#!/bin/sh\\nexit 0\\n' > /tmp/bin/sh && chmod +x /tmp/bin/sh \
                     && HOME=/tmp/h PATH=/tmp/bin:$PATH git push -q origin main"),
        ),
        // A tag of a tree carries content no check runs on.
        ("not a commit", format!("{own_git}/tmp/g tag treetag HEAD^{{tree}} && git push -q origin treetag")),
        // Rewrites, deletions, other destinations and programs run on the host.
        ("force-updates the remote branch", "git commit -q --allow-empty -m x && git push -q origin +main".to_owned()),
        ("refused `git push --force`", "git push -q --force origin main".to_owned()),
        ("not one of the repository's configured remotes", "git push -q /tmp/elsewhere.git main".to_owned()),
        ("not carried out from the host", "git push -q --receive-pack='touch /tmp/x; git-receive-pack' origin main".to_owned()),
        // A repository nested in the project (its `.git` could be anything: a FIFO).
        ("this push comes from", "mkdir -p sub && cd sub && git init -q && mkfifo .git/config 2>/dev/null; git push -q origin main".to_owned()),
        // A per-worktree config (the user enabled them) naming a program the host's git
        // would run.
        (
            ".git/config.worktree: makes git read another repository",
            "git commit -q --allow-empty -m x && printf '[core]\\n\\tsshCommand = touch /tmp/pwned\\n' > .git/config.worktree \
             && git push -q origin main"
                .to_owned(),
        ),
    ];
    for (expected, attack) in &attacks {
        let run = world.sh(&[], attack);
        let err = run.stderr();
        assert!(err.contains(expected), "`{attack}`: expected {expected:?} in:\n{err}");
        assert_eq!(remote_refs(&world), before, "`{attack}` changed the remote");
        let broken = world.git(&["log", "--branches", "--tags", "--format=%s", "--", "BROKEN"]);
        assert_eq!(broken, "", "`{attack}`: a failing commit came into the user's branches:\n{err}");
        reset(&world);
    }
    let log = world.audit_log();
    assert!(log.contains("\"host-push\""), "refusals of the push service are audited:\n{log}");
}

/// What an agent legitimately pushes goes through the host: main, a new branch with
/// `-u` (pushed; the upstream is not recorded, as `.git/config` is the user's), a tag, `--all` and `--tags`; each new commit's check ran (a check that records
/// it ran, in the fresh sandbox, in a worktree of the commit).
#[test]
fn legitimate_pushes_go_through_the_host() {
    require_bwrap!();
    let world = pushed_world();
    world.project_config(r#"{ "checks": { "commands": ["test ! -e BROKEN && pwd >&2 && cat src.txt >&2"] } }"#);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "config"]);
    world.git(&["push", "-q", "origin", "main"]);
    world.git(&["fetch", "-q", "origin"]);
    let run = world.sh(
        &[],
        "echo two >> src.txt && git commit -qam two && git push -q origin main \
         && git switch -qc feature && echo three >> src.txt && git commit -qam three && git push -q -u origin feature \
         && git tag -a -m v1 v1 && git push -q origin v1 \
         && git switch -qc other && git commit -q --allow-empty -m other && git tag v2 && git push -q --all origin \
         && git push -q --tags origin && echo pushed",
    );
    assert_eq!(run.stdout(), "pushed\n", "{}", run.stderr());
    let err = run.stderr();
    assert!(err.contains("one\ntwo\nthree\n"), "the check ran on the commit's own content:\n{err}");
    assert!(err.contains("/agent-sandbox/push/session-"), "in the host's private worktree:\n{err}");
    let refs = remote_refs(&world);
    for name in ["refs/heads/main", "refs/heads/feature", "refs/heads/other", "refs/tags/v1", "refs/tags/v2"] {
        assert!(refs.contains(name), "{name} not pushed:\n{refs}");
    }
    assert!(err.contains("the upstream is not recorded"), "-u says what it did not do:\n{err}");
}

/// The worktree the checks run in, and the host's push process, are out of the agent's
/// reach: the push directory does not show inside, and the processes of the push are in
/// no pid namespace the agent can signal.
#[test]
fn the_checks_worktree_and_processes_are_out_of_reach() {
    require_bwrap!();
    let world = pushed_world();
    world.project_config(r#"{ "checks": { "commands": ["sleep 2; test ! -e BROKEN"] } }"#);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "slow check"]);
    world.git(&["push", "-q", "origin", "main"]);
    world.git(&["fetch", "-q", "origin"]);
    let before = remote_refs(&world);
    let state = world.path("xdg-state/agent-sandbox/push");
    let script = format!(
        "cp /run/agent-sandbox/bin/git /tmp/g && touch BROKEN && /tmp/g add BROKEN && /tmp/g commit -qn -m sneaky; \
         (sleep 1; ls {state} 2>/dev/null | wc -l > /tmp/seen; for p in $(pgrep -f 'hook pre-pus[h]|slee[p] 2'); do kill -STOP $p && echo stopped $p; done > /tmp/stopped) & \
         git push -q origin main; wait; echo \"seen=$(cat /tmp/seen) stopped=$(cat /tmp/stopped | wc -l)\"",
        state = state.display()
    );
    let run = world.sh(&[], &script);
    assert!(run.stderr().contains("failed on commit"), "{}", run.stderr());
    assert_eq!(run.stdout().trim(), "seen=0 stopped=0", "{}", run.stderr());
    assert_eq!(remote_refs(&world), before);
}

/// An sshd on loopback run by the test as the current user, accepting one key; and an
/// ssh agent holding that key. Both live in the test's own directory on the host,
/// which no sandbox shows.
struct SshRemote {
    sshd: std::process::Child,
    agent: std::process::Child,
    url: String,
    /// `SSH_AUTH_SOCK` and `GIT_SSH_COMMAND` of the user's setup.
    env: [(String, String); 2],
}

impl Drop for SshRemote {
    fn drop(&mut self) {
        let _ = self.sshd.kill();
        let _ = self.agent.kill();
        let _ = self.sshd.wait();
        let _ = self.agent.wait();
    }
}

fn ssh_remote(world: &World) -> Option<SshRemote> {
    let sshd = std::path::Path::new("/usr/sbin/sshd");
    if !sshd.exists() {
        assert!(std::env::var_os("CI").is_none(), "CI must have sshd (openssh-server): xtask installs it");
        eprintln!("skipping: no /usr/sbin/sshd (apt-get install openssh-server)");
        return None;
    }
    let dir = world.path("ssh");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let keygen = |file: &std::path::Path| {
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(file)
            .output()
            .expect("ssh-keygen");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    keygen(&dir.join("host_key"));
    // The user's key, where users keep it: the sandbox's home is a scratch one.
    let key = world.path("home/.ssh/id_ed25519");
    std::fs::create_dir_all(key.parent().expect("parent")).expect("mkdir");
    keygen(&key);
    std::fs::copy(key.with_extension("pub"), dir.join("authorized_keys")).expect("authorized_keys");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
    let config = dir.join("sshd_config");
    std::fs::write(
        &config,
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {dir}/host_key\nAuthorizedKeysFile {dir}/authorized_keys\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile none\n",
            dir = dir.display()
        ),
    )
    .expect("config");
    if crate::support::is_root() {
        let _ = std::fs::create_dir_all("/run/sshd");
    }
    let sshd = Command::new(sshd)
        .args(["-D", "-e", "-f"])
        .arg(&config)
        .stderr(std::fs::File::create(dir.join("sshd.log")).expect("log"))
        .spawn()
        .expect("sshd starts");
    let socket = dir.join("agent.sock");
    let agent = Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&socket)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("ssh-agent");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !(socket.exists() && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()) {
        assert!(
            std::time::Instant::now() < deadline,
            "sshd or ssh-agent did not start: {}",
            world.read("ssh/sshd.log")
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = Command::new("ssh-add").arg("-q").arg(&key).env("SSH_AUTH_SOCK", &socket).output().expect("ssh-add");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The host key as the user's known_hosts would have it.
    let host_key = world.read("ssh/host_key.pub");
    let known = dir.join("known_hosts");
    std::fs::write(&known, format!("[127.0.0.1]:{port} {host_key}")).expect("known_hosts");
    let user = String::from_utf8_lossy(&Command::new("id").arg("-un").output().expect("id").stdout).trim().to_owned();
    let remote = world.path("home/remote.git");
    Some(SshRemote {
        sshd,
        agent,
        url: format!("ssh://{user}@127.0.0.1:{port}{}", remote.display()),
        env: [
            ("SSH_AUTH_SOCK".into(), socket.display().to_string()),
            (
                "GIT_SSH_COMMAND".into(),
                format!("ssh -F /dev/null -o BatchMode=yes -o UserKnownHostsFile={}", known.display()),
            ),
        ],
    })
}

/// A push that needs the user's credentials (an ssh remote, the key in an ssh agent on
/// the host) goes through from inside, while the key, `~/.ssh` and the agent's socket
/// are nowhere inside, and the agent's own git cannot push there; the host still
/// refuses a failing commit.
#[test]
fn a_push_over_ssh_uses_the_users_credentials_that_the_sandbox_never_sees() {
    require_bwrap!();
    let world = pushed_world();
    let Some(ssh) = ssh_remote(&world) else { return };
    world.git(&["remote", "set-url", "origin", &ssh.url]);
    let before = remote_refs(&world);
    let sh = |script: &str| {
        let mut cmd = world.cmd();
        for (name, value) in &ssh.env {
            cmd.env(name, value);
        }
        cmd.args(["exec", "--", "sh", "-c", script]).run()
    };
    let run = sh("test -e ~/.ssh/id_ed25519 && echo key-visible; test -S \"$SSH_AUTH_SOCK\" && echo agent-visible; \
                  ssh-add -l >/dev/null 2>&1 && echo agent-answers; \
                  cp /run/agent-sandbox/bin/git /tmp/g && /tmp/g commit -q --allow-empty -m own && /tmp/g push -q origin main 2>/dev/null && echo own-push; \
                  git reset -q --hard HEAD~1; exit 0");
    assert_eq!(run.stdout(), "", "{}", run.stderr());
    assert_eq!(remote_refs(&world), before);
    let run = sh("echo two >> src.txt && git commit -qam two && git push -q origin main && echo pushed");
    assert_eq!(run.stdout(), "pushed\n", "{}\n{}", run.stderr(), world.read("ssh/sshd.log"));
    assert!(remote_refs(&world).contains(&world.git(&["rev-parse", "HEAD"]).trim().to_owned()));
    let run =
        sh("cp /run/agent-sandbox/bin/git /tmp/g && touch BROKEN && /tmp/g add BROKEN && /tmp/g commit -qn -m sneaky \
                  && git rev-parse HEAD && git push -q origin main");
    assert!(run.stderr().contains("failed on commit"), "{}", run.stderr());
    let sneaky = run.stdout().trim().to_owned();
    assert_eq!(sneaky.len(), 40, "{sneaky}{}", run.stderr());
    assert!(!remote_refs(&world).contains(&sneaky), "{}", run.stderr());
    assert_ne!(world.git(&["rev-parse", "main"]).trim(), sneaky, "{}", run.stderr());
}

/// git reads object files without checking their hashes: an agent that swaps the blob
/// of a failing file for a passing one under the same name, and swaps it back while the
/// checks run, would have the checks pass on one content and the remote receive the
/// other. The broker copies the session's commits into its own mirror, hashing every
/// object: the swapped object is not taken, the commit does not come home, and the push
/// is refused. Beside it, the same
/// push without the swap is refused by the check, and a passing one goes.
#[test]
fn an_object_swapped_while_the_checks_run_never_reaches_the_remote() {
    require_bwrap!();
    let world = pushed_world();
    world.project_config(r#"{ "checks": { "commands": ["! grep -q FAIL src.txt", "sleep 3"] } }"#);
    world.git(&["commit", "-qam", "content check"]);
    world.git(&["push", "-q", "origin", "main"]);
    world.git(&["fetch", "-q", "origin"]);
    let before = remote_refs(&world);
    let swap = "echo FAIL > src.txt && git commit -qam bad\n\
                B=$(git rev-parse HEAD:src.txt); F=.git/objects/${B%${B#??}}/${B#??}\n\
                git init -q /tmp/o && echo 'GOOD!' > /tmp/o/g && G=$(git -C /tmp/o hash-object -w g)\n\
                cp $F /tmp/real && rm -f $F && cp /tmp/o/.git/objects/${G%${G#??}}/${G#??} $F\n\
                test \"$(git cat-file -p $B)\" = 'GOOD!'\n\
                (sleep 1.5; rm -f $F; cp /tmp/real $F) &\n\
                git push origin main; echo \"push=$?\"; wait";
    // The broker reads the session through its own hashing copy: the swapped object is
    // not taken (or, read before the swap, the real one fails the check), so the commit
    // does not come home and there is nothing of the session's to push.
    let run = world.sh(&[], swap);
    assert!(run.stdout().contains("push=1"), "{}\n{}", run.stdout(), run.stderr());
    assert!(run.stderr().contains("main did not come home"), "{}", run.stderr());
    assert_eq!(remote_refs(&world), before, "the swapped commit reached the remote");
    assert_eq!(world.git(&["log", "-1", "--format=%s", "main"]).trim(), "content check", "{}", run.stderr());
    let run = world.sh(&[], "git push -q origin main; echo \"push=$?\"");
    assert!(run.stdout().contains("push=1") && run.stderr().contains("failed on commit"), "{}", run.stderr());
    assert_eq!(remote_refs(&world), before);
    let run = world.sh(&[], "git reset -q --hard origin/main && echo fine >> src.txt && git commit -qam good && git push -q origin main && echo pushed");
    assert_eq!(run.stdout(), "pushed\n", "{}", run.stderr());
}

/// git prints the line of `.git/packed-refs` it cannot parse (`fatal: unexpected line in
/// .git/packed-refs: …`): an agent that links it to a file of the user's outside the
/// sandbox, which the host's git would follow, must not see that file's first line in
/// any output. The link is in the session repository, which the broker refuses to read
/// (it says which entry, never what it leads to); nothing reaches the remote.
#[test]
fn a_link_planted_in_dot_git_shows_the_agent_nothing_of_the_host() {
    require_bwrap!();
    let world = pushed_world();
    let before = remote_refs(&world);
    let secret = world.write("secret-token", "https://user:SECRETtok3fa9c1e7@github.com\n");
    let run = world.sh(
        &[],
        &format!(
            "git pack-refs --all && rm -f .git/packed-refs && ln -s {} .git/packed-refs \
             && git commit -q --allow-empty -m x; git push origin main; echo \"push=$?\"",
            secret.display()
        ),
    );
    assert!(run.stderr().contains(".git/packed-refs: a link"), "{}\n{}", run.stdout(), run.stderr());
    assert!(!run.stderr().contains("tok3fa9c1e7"), "the host's file reached the agent:\n{}", run.stderr());
    assert!(!run.stdout().contains("tok3fa9c1e7"), "the host's file reached the agent:\n{}", run.stdout());
    assert_eq!(remote_refs(&world), before);
    assert_eq!(world.git(&["status", "--porcelain"]), "");
}

/// The agent speaks the push protocol itself (its git, with `.git` redirected, could not
/// even ask): one request line on the push socket, the answer's frames printed.
const RAW_PUSH: &str = r#"
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect("/run/agent-sandbox/push.sock")
s.sendall((json.dumps({"cwd": sys.argv[1], "args": sys.argv[2:]}) + "\n").encode())
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
while len(data) >= 5:
    tag, size = data[0:1], struct.unpack(">I", data[1:5])[0]
    body, data = data[5:5 + size], data[5 + size:]
    if tag == b"x":
        print("exit=%d" % struct.unpack(">i", body)[0])
    else:
        sys.stdout.write(body.decode(errors="replace"))
"#;

/// A repository of the user's that the sandbox never shows, with its history.
fn private_repository(world: &World) -> std::path::PathBuf {
    let private = world.path("home/private");
    std::fs::create_dir_all(&private).expect("mkdir");
    world.write("home/private/notes.txt", "PRIVATE history\n");
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &["-c", "user.name=u", "-c", "user.email=u@e", "commit", "-qm", "private"],
    ] {
        world.git_in(&private, args);
    }
    private.join(".git")
}

/// The ways the agent redirects the session's `.git` to another repository: by
/// `commondir`, or by linking `refs` and `objects` there. Each is undone in the same
/// session, after the push.
fn redirections(private_git: &std::path::Path) -> [(&'static str, String, String); 2] {
    [
        (
            "commondir",
            format!("printf '%s\\n' {} > .git/commondir", private_git.display()),
            "rm .git/commondir".to_owned(),
        ),
        (
            "refs/objects links",
            format!(
                "mv .git/refs .git/refs.away && mv .git/objects .git/objects.away && ln -s {0}/refs .git/refs \
                 && ln -s {0}/objects .git/objects",
                private_git.display()
            ),
            "rm .git/refs .git/objects && mv .git/refs.away .git/refs && mv .git/objects.away .git/objects".to_owned(),
        ),
    ]
}

/// Every subject on the remote, every ref.
fn remote_subjects(world: &World) -> String {
    let remote = world.path("home/remote.git");
    world.git_in(&world.root, &["--git-dir", remote.to_str().expect("utf-8"), "log", "--all", "--format=%s"])
}

/// The agent's `.git` (the session repository) redirected to another repository of the
/// user's, one the sandbox never shows, and a push asked for in the push protocol
/// itself: that history is never sent, nor brought into the user's repository (the
/// broker refuses to read a session that leads elsewhere, and its reader could not
/// follow the redirection anyway). The agent's own `git push` of the project's branch
/// works beside it.
#[test]
fn a_dot_git_redirected_to_another_repository_never_sends_that_history() {
    require_bwrap!();
    let world = pushed_world();
    let private_git = private_repository(&world);
    let private_head = world.git_in(&private_git, &["rev-parse", "HEAD"]).trim().to_owned();
    world.write("raw_push.py", RAW_PUSH);
    let raw = world.path("raw_push.py");
    let project = world.path("home/proj");
    let before = remote_refs(&world);
    for (name, redirect, restore) in redirections(&private_git) {
        let run = world.sh(
            &["--ro", raw.to_str().expect("utf-8")],
            &format!(
                "{redirect} && python3 {} {} origin main:refs/heads/stolen; {restore}",
                raw.display(),
                project.display()
            ),
        );
        let out = run.stdout();
        // Refused, saying what to remove, as the sync just before it was: it used to go
        // out from the user's refs (`exit=0`), not what the agent named.
        assert!(out.contains("exit=1"), "{name}: {out}\n{}", run.stderr());
        assert!(out.contains("push refused") && out.contains("leads elsewhere"), "{name}: {out}");
        assert_eq!(remote_refs(&world), before, "{name}: the push went out");
        assert!(!out.contains("PRIVATE") && !run.stderr().contains("PRIVATE"), "{name}: {out}");
        assert!(!remote_subjects(&world).contains("private"), "{name}: the private history reached the remote");
        let in_users =
            Command::new("git").args(["cat-file", "-e", &private_head]).current_dir(&project).output().expect("git");
        assert!(!in_users.status.success(), "{name}: the private history came into the user's repository");
    }
    // The project's own branch still goes out.
    let before = remote_refs(&world);
    let run = world.sh(&[], "git commit -q --allow-empty -m mine && git push -q origin main && echo pushed");
    assert_eq!(run.stdout(), "pushed\n", "{}", run.stderr());
    assert_ne!(remote_refs(&world), before);
}

/// The host runs nothing of the repository's: not the hooks a checkout would run (here
/// a post-checkout hook that, as husky's do, runs a script from the work tree, which the
/// agent changed), not the checks outside a sandbox.
#[test]
fn the_host_runs_nothing_the_agent_wrote() {
    require_bwrap!();
    let world = pushed_world();
    world.write("home/proj/.githooks/post-checkout", "#!/bin/sh\nsh scripts/post-checkout.sh\n");
    world.chmod("home/proj/.githooks/post-checkout", 0o755);
    world.write("home/proj/scripts/post-checkout.sh", "true\n");
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "hooks"]);
    world.git(&["push", "-q", "origin", "main"]);
    world.git(&["config", "core.hooksPath", ".githooks"]);
    let planted = world.path("home/PLANTED");
    let run = world.sh(
        &[],
        &format!(
            "echo 'touch {}' > scripts/post-checkout.sh && git commit -qam 'innocent' && git push -q origin main && echo pushed",
            planted.display()
        ),
    );
    assert_eq!(run.stdout(), "pushed\n", "{}", run.stderr());
    assert!(!planted.exists(), "the host ran the agent's script");
}

/// An agent that interrupts its `git push` ends the host's push and its checks (nothing
/// the repository holds can keep a host process waiting after that). The commit to push
/// is one the user makes on the host while the session runs, which the agent pushes by
/// its id: the only checks that run are the push's (a commit made inside would be
/// checked by the broker's sync, which the push does not own).
#[test]
fn an_interrupted_push_ends_on_the_host() {
    require_bwrap!();
    let world = pushed_world();
    world.project_config(r#"{ "checks": { "commands": ["sleep 31.25"] } }"#);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "slow"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "push", "-q", "origin", "main"]);
    let before = remote_refs(&world);
    let mut session = world.cmd();
    session.args([
        "exec",
        "--",
        "sh",
        "-c",
        "touch .up; while [ ! -s .go ]; do sleep 0.05; done; \
         timeout -s INT 3 git push -q origin \"$(cat .go):refs/heads/main\"; touch .interrupted; sleep 20",
    ]);
    let mut child = session.cmd.stderr(std::process::Stdio::null()).spawn().expect("exec starts");
    let wait_for = |marker: &str, secs: u64| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while !world.path(&format!("home/proj/{marker}")).exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    wait_for(".up", 15);
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-q", "--allow-empty", "-m", "x"]);
    // Named by its id: the session's `main` is behind the user's, and a push of it would be
    // refused before any check.
    fs_err::write(world.path("home/proj/.go"), world.git(&["rev-parse", "main"])).expect("go");
    let running = || {
        let out = Command::new("pgrep").args(["-f", "sleep 31[.]25"]).output().expect("pgrep");
        !out.stdout.is_empty()
    };
    let started = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !running() && !world.path("home/proj/.interrupted").exists() && std::time::Instant::now() < started {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(running(), "the push's check never ran");
    wait_for(".interrupted", 15);
    assert!(world.path("home/proj/.interrupted").exists(), "the push did not return when interrupted");
    let gone = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while running() && std::time::Instant::now() < gone {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let still = running();
    child.kill().expect("kill");
    child.wait().expect("reaped");
    assert!(!still, "the check kept running on the host after the agent interrupted its push");
    assert_eq!(remote_refs(&world), before);
}

/// The user commits on the host while a session runs, and the agent, which made no
/// commit, pushes `main`: there was nothing of the session's to bring home, so the agent
/// is not told that `main` "did not come home (above)" with nothing above it; the
/// session takes the user's `main` (only the user moved it) and the push sends that.
#[test]
fn a_push_of_a_branch_only_the_user_moved_takes_the_users_and_sends_it() {
    require_bwrap!();
    let world = pushed_world();
    let before = remote_refs(&world);
    let child = world
        .cmd()
        .args(["exec", "--", "sh", "-c", "touch .up; while [ ! -e .go ]; do sleep 0.05; done; git push -q origin main"])
        .cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("exec starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !world.path("home/proj/.up").exists() {
        assert!(std::time::Instant::now() < deadline, "the session did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    world.git(&["commit", "-q", "--allow-empty", "-m", "host"]);
    fs_err::write(world.path("home/proj/.go"), "").expect("go");
    let out = child.wait_with_output().expect("exec ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("main did not come home (above)"), "{err}");
    assert!(err.contains("main follows the user's repository"), "{err}");
    assert!(out.status.success(), "{err}");
    assert_ne!(remote_refs(&world), before);
    assert!(remote_refs(&world).contains(world.git(&["rev-parse", "main"]).trim()), "{err}");
}

/// A session killed before it removed its push directory leaves it behind; the next
/// start removes it, and never the directory of a session still running.
#[test]
fn a_killed_sessions_push_directory_is_removed_at_the_next_start() {
    require_bwrap!();
    use std::os::unix::io::AsRawFd;
    let world = pushed_world();
    let parent = world.path("xdg-state/agent-sandbox/push");
    for name in ["session-killed", "session-running"] {
        std::fs::create_dir_all(parent.join(name).join("worktree")).expect("mkdir");
        let out = Command::new("touch").args(["-d", "-2 minutes"]).arg(parent.join(name)).output().expect("touch");
        assert!(out.status.success());
    }
    let held = std::fs::File::create(parent.join("session-running/lock")).expect("lock file");
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX) }, 0);
    world.sh(&[], "true").ok();
    assert!(!parent.join("session-killed").exists(), "the killed session's directory stayed");
    assert!(parent.join("session-running/worktree").exists(), "a running session's directory was removed");
    let left: Vec<_> = std::fs::read_dir(&parent).expect("list").flatten().map(|entry| entry.file_name()).collect();
    assert_eq!(left, ["session-running"], "the session removed its own directory at its end");
}

/// The checks search only `PATH` directories the agent cannot write. The user's `PATH`
/// starts with the project's `node_modules/.bin` (as direnv's `PATH_add` makes it, and
/// once relative); the agent plants an `sh`, a `lint` and a `mylint` there that exit 0
/// and pushes a commit the real tools fail: the real ones run (installed outside the
/// project, in `~/.local/bin`: a script, and a CLI as `npm i -g --prefix ~/.local`
/// installs it) and the push is refused, naming the entries the checks left out and
/// why. Beside it, a good commit passes the same checks with the same plants present.
#[test]
fn checks_never_run_programs_planted_on_the_users_path_in_the_project() {
    require_bwrap!();
    let world = World::new();
    world.write("home/.local/bin/lint", "#!/bin/sh\necho real lint ran >&2\ntest ! -e BROKEN\n");
    world.chmod("home/.local/bin/lint", 0o755);
    world.write(
        "home/src/mylint/package.json",
        r#"{"name": "mylint", "version": "1.0.0", "bin": {"mylint": "bin/mylint.js"}}"#,
    );
    world.write(
        "home/src/mylint/bin/mylint.js",
        "#!/usr/bin/env node\nconsole.error('real mylint ran');\nprocess.exit(require('fs').existsSync('BROKEN') ? 1 : 0);\n",
    );
    let npm = |args: &[&str]| {
        let out = Command::new("npm").args(args).current_dir(world.home.join("src")).env("HOME", &world.home).output();
        let out = out.expect("npm runs");
        assert!(out.status.success(), "npm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    npm(&["pack", "--silent", "./mylint"]);
    let prefix = world.home.join(".local");
    npm(&[
        "install",
        "-g",
        "--offline",
        "--no-audit",
        "--no-fund",
        "--prefix",
        prefix.to_str().expect("utf-8"),
        "./mylint-1.0.0.tgz",
    ]);
    world.write("home/proj/.gitignore", "node_modules/\n");
    world.project_config(r#"{ "checks": { "commands": ["sh -c lint", "mylint"] } }"#);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "checks"]);
    world.bare_origin();
    world.git(&["push", "-q", "origin", "main"]);
    world.git(&["fetch", "-q", "origin"]);
    let before = remote_refs(&world);
    let bin = world.project.join("node_modules/.bin");
    let path =
        format!("{}:node_modules/.bin:{}/.local/bin:/usr/local/bin:/usr/bin:/bin", bin.display(), world.home.display());
    // `git` too: the host's push would run it with the user's credentials.
    let plant = "mkdir -p node_modules/.bin && for tool in sh lint mylint git; do \
                 printf '#!/bin/sh\\nexit 0\\n' > node_modules/.bin/$tool && chmod +x node_modules/.bin/$tool; done";
    let exec =
        |script: &str| world.cmd().env("PATH", &path).args(["exec", "--debug", "--", "/bin/sh", "-c", script]).run();

    let run = exec(&format!(
        "{plant} && cp /run/agent-sandbox/bin/git /tmp/g && touch BROKEN && /tmp/g add BROKEN \
         && /tmp/g commit -qn -m sneaky && PATH=/usr/local/bin:/usr/bin:/bin git push -q origin main"
    ));
    let err = run.stderr();
    assert_ne!(run.code(), 0, "{err}");
    assert!(err.contains("refused: the check `sh -c lint` failed on commit"), "the real check ran and failed:\n{err}");
    assert!(err.contains("real lint ran"), "{err}");
    let dropped = format!("{} (in the project, which the agent writes)", bin.display());
    assert!(err.contains(&format!("these PATH entries: {dropped}")), "the refusal names the entry it left out:\n{err}");
    let debug = format!("checks: PATH entry {dropped} not searched by the checks");
    assert_eq!(err.matches(&debug).count(), 1, "--debug says it once, at the start:\n{err}");
    assert!(err.contains("node_modules/.bin (relative, so a different directory"), "{err}");
    assert!(err.contains("npm i -g --prefix ~/.local"), "and what to do:\n{err}");
    assert_eq!(remote_refs(&world), before, "the failing commit reached the remote");
    reset(&world);

    let run = exec(&format!(
        "{plant} && cp /run/agent-sandbox/bin/git /tmp/g && echo good > src.txt && /tmp/g add src.txt \
         && /tmp/g commit -qm good && PATH=/usr/local/bin:/usr/bin:/bin git push -q origin main && echo pushed"
    ));
    let err = run.stderr();
    assert_eq!(run.stdout(), "pushed\n", "{err}");
    assert!(err.contains("real lint ran") && err.contains("real mylint ran"), "both real tools ran:\n{err}");
    assert_ne!(remote_refs(&world), before);
}

/// The repository's own pre-push hook runs for the agent's pushes through the host, as
/// for the user's own `git push`, in the checks' sandbox (no `checks.commands`): a plain
/// `.git/hooks/pre-push` that refuses a commit refuses the push with its output, and a
/// good commit beside it is pushed (the hook saw git's arguments and refs).
#[test]
fn the_repositorys_own_pre_push_hook_runs_for_the_agents_push() {
    require_bwrap!();
    let world = pushed_world();
    world.project_config(r#"{ "checks": { "commands": [] } }"#);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "no checks"]);
    world.git(&["push", "-q", "origin", "main"]);
    world.git(&["fetch", "-q", "origin"]);
    let hook = "home/proj/.git/hooks/pre-push";
    world.write(
        hook,
        "#!/bin/sh\necho \"own hook: $1 $(cat | cut -d' ' -f1)\" >&2\n\
         if grep -q bad src.txt; then echo 'own hook: src.txt is bad' >&2; exit 1; fi\n",
    );
    world.chmod(hook, 0o755);
    let run = world.sh(&[], "echo good >> src.txt && git commit -qam good && git push -q origin main && echo pushed");
    assert_eq!(run.stdout(), "pushed\n", "{}", run.stderr());
    assert!(run.stderr().contains("own hook: origin refs/heads/main"), "the hook ran:\n{}", run.stderr());
    assert!(remote_refs(&world).contains(world.git(&["rev-parse", "HEAD"]).trim()), "the good commit is pushed");
    let before = remote_refs(&world);
    let run = world.sh(&[], "echo bad >> src.txt && git commit -qam bad && git push -q origin main && echo pushed");
    assert_eq!(run.stdout(), "", "{}", run.stderr());
    let err = run.stderr();
    assert!(err.contains("own hook: src.txt is bad"), "the hook's output:\n{err}");
    assert!(err.contains("the repository's own pre-push hook"), "the refusal says which:\n{err}");
    assert_eq!(remote_refs(&world), before, "the refused commit did not leave");
}

/// The pre-commit framework (from pipx) at its `pre-push` stage, chained by `hooks
/// install`, with a failing local hook: the agent's push is refused; a good one is pushed.
#[test]
fn pre_commits_pre_push_stage_runs_for_the_agents_push() {
    use crate::projects::{host, install_pre_commit, path};
    require_bwrap!();
    let world = pushed_world();
    if !install_pre_commit(&world) {
        return;
    }
    world.write(
        "home/proj/.pre-commit-config.yaml",
        "default_install_hook_types: [pre-push]\nrepos:\n- repo: local\n  hooks:\n  - id: not-bad\n    \
         name: src.txt is not bad\n    language: system\n    stages: [pre-push]\n    \
         entry: sh -c '! grep -q bad src.txt'\n    pass_filenames: false\n    always_run: true\n",
    );
    world.project_config(r#"{ "checks": { "commands": [] } }"#);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "pre-commit at pre-push"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "push", "-q", "origin", "main"]);
    world.git(&["fetch", "-q", "origin"]);
    host(&world, &world.project, "pre-commit", &["install", "--hook-type", "pre-push"]).expect("pre-commit install");
    let installed = world.cmd().args(["hooks", "install"]).run();
    assert!(
        installed.stdout().contains("then your earlier pre-push hook"),
        "says what runs where:\n{}",
        installed.stdout()
    );
    let exec = |script: &str| world.cmd().env("PATH", path(&world)).args(["exec", "--", "sh", "-c", script]).run();
    let run = exec("echo good >> src.txt && git commit -qam good && git push -q origin main && echo pushed");
    assert_eq!(run.stdout(), "pushed\n", "{}", run.stderr());
    let before = remote_refs(&world);
    let run = exec("echo bad >> src.txt && git commit -qam bad && git push -q origin main && echo pushed");
    assert_eq!(run.stdout(), "", "{}", run.stderr());
    assert!(run.stderr().contains("src.txt is not bad"), "pre-commit's output:\n{}", run.stderr());
    assert_eq!(remote_refs(&world), before, "the refused commit did not leave");
}
