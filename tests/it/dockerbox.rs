//! End to end: seed 002's Docker lifecycle (`init`, `shell`, `start --branch`,
//! `list`, `show-run`, `stop`, ten sandboxes under limits at once) against the real
//! engine, checked with the docker CLI.
//! Each test repository's `.agent-sandbox/settings.json` puts its containers on the
//! `none` network: nothing leaves them (the firewall still applies, with nothing to
//! resolve). `cargo xtask test` builds `agent-sandbox-base:e2e` and sets
//! `AGENT_SANDBOX_E2E_BASE_TAG`; the unprivileged rerun has no Docker access and says so.

use std::{
    io::{Read as _, Write as _},
    path::{Path, PathBuf},
    process::{Command, Output},
};

use crate::support::BIN;

/// The base image tag, or `None` (skip, with the reason printed) outside CI.
fn base_tag() -> Option<String> {
    crate::support::e2e_base_tag("the Docker lifecycle end-to-end tests")
}

/// Every test here holds it while its sandboxes live, the one that stops every sandbox
/// on the engine (`stop --all`) alone.
static ENGINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

#[allow(dead_code)] // held, never read
enum EngineGuard {
    Shared(std::sync::RwLockReadGuard<'static, ()>),
    Alone(std::sync::RwLockWriteGuard<'static, ()>),
}

/// A git repository owned by the container's user (uid 1000), on the `none` network.
struct Repo {
    _dir: tempfile::TempDir,
    path: PathBuf,
    tag: String,
    _engine: EngineGuard,
}

impl Repo {
    fn new(tag: &str) -> Repo {
        let guard = ENGINE.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        Repo::with_guard(tag, EngineGuard::Shared(guard))
    }

    /// The only test's repository while it lives: no other test has sandboxes.
    fn alone(tag: &str) -> Repo {
        let guard = ENGINE.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        Repo::with_guard(tag, EngineGuard::Alone(guard))
    }

    fn with_guard(tag: &str, engine: EngineGuard) -> Repo {
        let dir = tempfile::Builder::new().prefix("as-dbx-").tempdir().expect("tempdir");
        let path = dir.path().canonicalize().expect("canonical").join("proj");
        std::fs::create_dir_all(path.join(".agent-sandbox")).expect("mkdir");
        git(&path, &["init", "-q", "-b", "main"]);
        std::fs::write(path.join("README"), "hello\n").expect("write");
        std::fs::write(path.join(".agent-sandbox/settings.json"), "{\"network\": \"none\"}\n").expect("write");
        git(&path, &["add", "."]);
        git(&path, &["commit", "-q", "-m", "init"]);
        // The container's user must be able to write the checkout (as a user's own is).
        let status = Command::new("chown").args(["-R", "1000:1000"]).arg(dir.path()).status().expect("chown");
        assert!(status.success());
        Repo { _dir: dir, path, tag: tag.to_owned(), _engine: engine }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN.as_str());
        cmd.args(args)
            .current_dir(&self.path)
            .env("AGENT_SANDBOX_E2E_HOST_SECRET", "s3cret-from-the-host")
            .env("XDG_STATE_HOME", self.path.parent().expect("parent").join("state"));
        cmd
    }

    /// `agent-sandbox ARGS --base-tag TAG`, which must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.cmd(args).args(["--base-tag", &self.tag]).output().expect("agent-sandbox");
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let label = format!("label=agent-sandbox.workspace={}", self.path.display());
        for id in docker(&["ps", "-aq", "--filter", &label]).split_whitespace() {
            docker(&["rm", "-f", id]);
        }
        let hash = docker_volume_hash(&self.path);
        docker(&["volume", "rm", &format!("agent-sandbox-{hash}-history"), &format!("agent-sbx-repo-{hash}")]);
        docker(&["image", "rm", &format!("agent-sandbox-proj-{hash}:latest")]);
    }
}

/// The workspace hash as the seed defines it, computed here with the real `md5sum`.
pub(crate) fn docker_volume_hash(path: &Path) -> String {
    let mut child = Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("md5sum");
    child.stdin.take().expect("stdin").write_all(path.to_string_lossy().as_bytes()).expect("write");
    let out = child.wait_with_output().expect("md5sum");
    String::from_utf8_lossy(&out.stdout)[..12].to_owned()
}

pub(crate) fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "safe.directory=*"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker").args(args).output().expect("docker client");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// What makes two containers the same sandbox, from `docker inspect`; the environment
/// sorted and capabilities without `CAP_` (the docker CLI reorders and renames both).
fn shape(container: &str) -> serde_json::Value {
    let all: serde_json::Value = serde_json::from_str(&docker(&["inspect", container])).expect("inspect is JSON");
    let info = &all[0];
    let mut env: Vec<String> = info["Config"]["Env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_owned())
        .collect();
    env.sort();
    let caps: Vec<String> = info["HostConfig"]["CapAdd"]
        .as_array()
        .expect("caps")
        .iter()
        .map(|v| v.as_str().unwrap_or_default().trim_start_matches("CAP_").to_owned())
        .collect();
    serde_json::json!({
        "image": info["Config"]["Image"],
        "user": info["Config"]["User"],
        "workdir": info["Config"]["WorkingDir"],
        "env": env,
        "labels": info["Config"]["Labels"],
        "cmd": info["Config"]["Cmd"],
        "init": info["HostConfig"]["Init"],
        "caps": caps,
        "network": info["HostConfig"]["NetworkMode"],
        "mounts": info["HostConfig"]["Mounts"],
        "limits": [
            &info["HostConfig"]["NanoCpus"],
            &info["HostConfig"]["Memory"],
            &info["HostConfig"]["MemorySwap"],
            &info["HostConfig"]["PidsLimit"],
        ],
    })
}

#[test]
fn init_then_shell_holds_the_guards_and_show_run_creates_the_same_container() {
    let Some(tag) = base_tag() else { return };
    let repo = Repo::new(&tag);
    let hash = docker_volume_hash(&repo.path);
    let name = format!("agent-sandbox-proj-{hash}");

    // Hooks in a directory of the repository's own (core.hooksPath): read-only inside too.
    std::fs::create_dir(repo.path.join(".githooks")).expect("mkdir");
    std::fs::write(repo.path.join(".githooks/pre-commit"), "#!/bin/sh\nexit 0\n").expect("hook");
    assert!(Command::new("chmod")
        .arg("755")
        .arg(repo.path.join(".githooks/pre-commit"))
        .status()
        .expect("chmod")
        .success());
    git(&repo.path, &["config", "core.hooksPath", ".githooks"]);
    // A check that prints an OSC 52 clipboard write and a window title when it fails.
    std::fs::write(
        repo.path.join(".agent-sandbox/config.jsonc"),
        r#"{"checks": {"commands": ["test ! -e BROKEN || { printf '\\033]52;c;ZXZpbA==\\007\\033]0;pwned\\007'; exit 1; }"]}}"#,
    )
    .expect("config");
    git(&repo.path, &["add", ".agent-sandbox/config.jsonc"]);
    git(&repo.path, &["commit", "-q", "-m", "checks"]);
    let init = repo.ok(&["init"]);
    assert!(init.contains(&format!("built agent-sandbox-proj-{hash}:latest")), "{init}");
    assert_eq!(
        std::fs::read_to_string(repo.path.join(".agent-sandbox/Dockerfile")).expect("Dockerfile"),
        include_str!("../../devcontainer/repo/Dockerfile")
    );
    // On a terminal, a build shows a bar instead of the build's lines.
    let build = format!("{} build --base-tag {tag}", BIN.as_str());
    let out =
        Command::new("script").args(["-qec", &build, "/dev/null"]).current_dir(&repo.path).output().expect("script");
    let terminal = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && terminal.contains("\r\x1b[K[") && !terminal.contains("Step 1/"), "{}", text(&out));

    // Inside: the marker, the unprivileged user, the firewall, no host environment; each
    // attack beside the legitimate use.
    let script = r#"
        agent-sandbox check; echo "check=$?"
        echo "uid=$(id -u)"
        echo "pwd=$(pwd)"
        echo "secret=$(env | grep -c s3cret)"
        agent-sandbox firewall status | head -1
        agent-sandbox test >/tmp/test.txt 2>&1; echo "selftest=$?"; cat /tmp/test.txt
        touch .git/hooks/pre-commit 2>/dev/null; echo "hooks_write=$?"
        echo 'exit 0' >> .githooks/pre-commit 2>/dev/null; echo "hooks_path_write=$?"
        git config core.hooksPath /tmp 2>/dev/null; echo "hooks_path_set=$?"
        echo changed >> README; echo "readme_write=$?"
        export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a.invalid GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@a.invalid
        git commit -qam bypass --no-verify 2>/dev/null; echo "no_verify=$?"
        git commit -qam legit; echo "commit=$?"
        mv .git .git-away 2>/dev/null; echo "git_rename=$?"
        sudo -n true 2>/dev/null; echo "sudo=$?"
        bash -ic 'alias freeclaude' 2>/dev/null
    "#;
    let hooks_before = std::fs::read_dir(repo.path.join(".git/hooks")).map(|dir| dir.count()).unwrap_or(0);
    let out = repo.cmd(&["shell", "--base-tag", &tag, "-c", script]).output().expect("shell");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", text(&out));
    // `.git` inside is the session repository: its hooks are the agent's to write, and
    // the user's own `.git/hooks` gains nothing.
    let hooks_after = std::fs::read_dir(repo.path.join(".git/hooks")).map(|dir| dir.count()).unwrap_or(0);
    assert_eq!(hooks_after, hooks_before, "a hook reached the user's .git");
    for want in [
        "inside an agent-sandbox (container)",
        "check=0",
        "uid=1000",
        "pwd=/workspace/proj",
        "secret=0",
        "firewall: on",
        "selftest=0",
        "hooks_write=0",
        "hooks_path_write=1",
        "hooks_path_set=1",
        "readme_write=0",
        "no_verify=1",
        "commit=0",
        "git_rename=1",
        "sudo=1",
        "alias freeclaude='claude --dangerously-skip-permissions'",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{}", text(&out));
    }
    assert_eq!(git(&repo.path, &["log", "-1", "--format=%s"]).trim(), "legit");
    // What the agent's check prints reaches the user's terminal escaped: a commit past
    // the hooks that fails its check is refused when the shell ends, and said so with
    // the check's escape sequences shown, not sent.
    let broken = "export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a.invalid GIT_COMMITTER_NAME=a \
                  GIT_COMMITTER_EMAIL=a@a.invalid; touch BROKEN && /usr/libexec/agent-sandbox/git add BROKEN \
                  && /usr/libexec/agent-sandbox/git commit -qn -m broken";
    let out = repo.cmd(&["shell", "--base-tag", &tag, "-c", broken]).output().expect("shell");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("main did not come home"), "{}", text(&out));
    assert!(said.contains("\\u{1b}]52;c;ZXZpbA==\\u{7}\\u{1b}]0;pwned\\u{7}"), "{}", text(&out));
    assert!(!said.contains('\u{1b}') && !said.contains('\u{7}'), "{said:?}");
    assert_eq!(git(&repo.path, &["log", "-1", "--format=%s"]).trim(), "legit");
    repo.cmd(&["shell", "--base-tag", &tag, "-c", "git reset -q --hard HEAD~1"]).output().expect("shell");
    // The exit status of the command is the shell's.
    let status = repo.cmd(&["shell", "--base-tag", &tag, "-c", "exit 7"]).status().expect("shell");
    assert_eq!(status.code(), Some(7));

    // list --json: this container, bind mode, its workdir and volumes.
    let out = repo.cmd(&["list", "--json"]).output().expect("list");
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("list --json is JSON");
    let mine = list.as_array().expect("array").iter().find(|item| item["name"] == name.as_str()).expect("listed");
    assert_eq!(mine["mode"], "bind");
    assert_eq!(mine["workdir"], "/workspace/proj");
    assert_eq!(mine["state"], "running");
    assert_eq!(mine["workspace"], repo.path.to_string_lossy().as_ref());
    let volumes: Vec<&str> = mine["volumes"].as_array().expect("volumes").iter().filter_map(|v| v.as_str()).collect();
    let want_volume = format!("agent-sandbox-{hash}-history");
    for volume in [want_volume.as_str(), "agent-sandbox-claude-code-config", "agent-sandbox-codex-config"] {
        assert!(volumes.contains(&volume), "{volumes:?}");
    }

    // show-run's command, run with the docker CLI, creates the same container.
    let ours = shape(&name);
    let line = repo.ok(&["show-run"]);
    docker(&["rm", "-f", &name]);
    let out = Command::new("sh").arg("-c").arg(line.trim()).output().expect("sh");
    assert!(out.status.success(), "{line}\n{}", text(&out));
    assert_eq!(shape(&name), ours);
    // ... and `shell` uses it as its own.
    let out = repo.cmd(&["shell", "--base-tag", &tag, "-c", "agent-sandbox check"]).output().expect("shell");
    assert!(out.status.success(), "{}", text(&out));

    // A protected directory that appears later (.husky): the running container is
    // left alone with a note, a stopped one is recreated with the new read-only mount.
    std::fs::create_dir(repo.path.join(".husky")).expect("mkdir");
    let out = repo.cmd(&["shell", "--base-tag", &tag, "-c", "true"]).output().expect("shell");
    assert!(String::from_utf8_lossy(&out.stderr).contains("`agent-sandbox restart` recreates it"), "{}", text(&out));
    repo.ok(&["stop"]);
    assert_eq!(docker(&["inspect", "-f", "{{.State.Running}}", &name]), "false");
    let probe = "touch .husky/pre-commit 2>/dev/null; echo husky=$?; touch notes.txt; echo notes=$?";
    let out = repo.cmd(&["shell", "--base-tag", &tag, "-c", probe]).output().expect("shell");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("recreated {name}")), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "husky=1\nnotes=0\n", "{}", text(&out));
    assert_eq!(docker(&["inspect", "-f", "{{.State.Running}}", &name]), "true");
}

/// The default command is `shell` with `shell`'s arguments: `agent-sandbox PATH -c CMD`
/// from elsewhere runs in PATH's container; without an engine it says so.
#[test]
fn the_default_command_takes_shells_path_and_command() {
    let Some(tag) = base_tag() else { return };
    let repo = Repo::new(&tag);
    let elsewhere = repo.path.parent().expect("parent");
    let path = repo.path.to_str().expect("utf-8");
    let out = repo
        .cmd(&[path, "--base-tag", &tag, "-c", "pwd; agent-sandbox check; exit 3"])
        .current_dir(elsewhere)
        .output()
        .expect("agent-sandbox");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "/workspace/proj\ninside an agent-sandbox (container)\n",
        "{}",
        text(&out)
    );
    // `-c` alone: the current directory's container.
    let out = repo.cmd(&["-c", "pwd", "--base-tag", &tag]).output().expect("agent-sandbox");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "/workspace/proj\n", "{}", text(&out));

    // Bare, and with arguments, without an engine: what to do, not a usage error.
    for args in [&[][..], &[path, "-c", "true"][..]] {
        let out = repo
            .cmd(args)
            .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("agent-sandbox");
        assert_eq!(out.status.code(), Some(125), "{args:?}: {}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("cannot reach the Docker engine at unix:///nonexistent/docker.sock")
                && stderr.contains("start it"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn missing_image_and_stopped_engine_say_what_to_do() {
    let Some(tag) = base_tag() else { return };
    let repo = Repo::new(&tag);
    let out = repo.cmd(&["shell", "--base-tag", "no-such-tag", "-c", "true"]).output().expect("shell");
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "agent-sandbox-base:no-such-tag does not exist: build it with `agent-sandbox build-base --tag no-such-tag`"
        ),
        "{stderr}"
    );

    // A directory that is no project is not mounted read-write into a container.
    let loose = repo.path.parent().expect("parent").join("loose");
    std::fs::create_dir(&loose).expect("mkdir");
    let out = repo.cmd(&["shell", "--base-tag", &tag, "-c", "true"]).current_dir(&loose).output().expect("shell");
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a project (no .git or .agent-sandbox/)"),
        "{}",
        text(&out)
    );

    let out = repo.cmd(&["list"]).env("DOCKER_HOST", "unix:///nonexistent/docker.sock").output().expect("list");
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot reach the Docker engine at unix:///nonexistent/docker.sock")
            && stderr.contains("start it"),
        "{stderr}"
    );
}

#[test]
fn branch_sandboxes_started_at_once_share_the_shelf_and_bring_work_home() {
    let Some(tag) = base_tag() else { return };
    let repo = Repo::new(&tag);
    let hash = docker_volume_hash(&repo.path);
    // Two branch sandboxes of one repository, started at the same moment.
    let mut children: Vec<std::process::Child> = ["feat/one", "feat/two"]
        .iter()
        .map(|branch| {
            repo.cmd(&["start", "--branch", branch, "--base-tag", &tag])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start")
        })
        .collect();
    for child in children.iter_mut() {
        let status = child.wait().expect("wait");
        let mut stderr = String::new();
        child.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("read");
        assert!(status.success(), "{stderr}");
    }
    let shelf = format!("agent-sbx-repo-{hash}");
    for (branch, dir) in [("feat/one", "feat__one"), ("feat/two", "feat__two")] {
        let name = format!("agent-sandbox-proj-{dir}-{hash}");
        let mounts = docker(&["inspect", "-f", "{{range .Mounts}}{{.Name}}:{{.Destination}} {{end}}", &name]);
        assert!(mounts.contains(&format!("{shelf}:/repo-shelf")), "{mounts}");
        let out = repo
            .cmd(&["shell", "--branch", branch, "--base-tag", &tag, "-c", "pwd; git branch --show-current"])
            .output()
            .expect("shell");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("/repo-shelf/worktrees/{dir}\n{branch}\n"),
            "{}",
            text(&out)
        );
    }
    let out = repo.cmd(&["list", "--json"]).output().expect("list");
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mine: Vec<(String, String, String)> = list
        .as_array()
        .expect("array")
        .iter()
        .filter(|item| item["workspace"] == repo.path.to_string_lossy().as_ref())
        .map(|item| (item["mode"].to_string(), item["branch"].to_string(), item["workdir"].to_string()))
        .collect();
    assert_eq!(
        mine,
        vec![
            ("\"branch\"".into(), "\"feat/one\"".into(), "\"/repo-shelf/worktrees/feat__one\"".into()),
            ("\"branch\"".into(), "\"feat/two\"".into(), "\"/repo-shelf/worktrees/feat__two\"".into()),
        ]
    );

    // A commit in a branch sandbox comes home through the broker, after the checks, as a
    // branch of the host's repository; the branch the host has checked out (main) never
    // moves, and the host's checkout, its `.git` with it, is read-only inside.
    let script = r#"
        export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a.invalid GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@a.invalid
        settle() { sudo -n /usr/local/bin/agent-sandbox git-home sync >/dev/null 2>&1; git status >/dev/null 2>>"$1"; }
        echo one > one.txt && git add one.txt && git commit -qm "work on one" 2>/tmp/commit && settle /tmp/commit
        echo "home=$(grep -m1 -c 'feat/one is now' /tmp/commit)"
        /usr/libexec/agent-sandbox/git update-ref refs/heads/main HEAD && git branch -q also 2>/tmp/main && settle /tmp/main
        echo "main_waits=$(grep -m1 -c 'main did not come home (another checkout of the user.s has this branch checked out' /tmp/main)"
        (echo x >> /workspace/proj/.git/config) 2>/dev/null; echo "host_git_write=$?"
        (echo /tmp > /workspace/proj/.git/commondir) 2>/dev/null; echo "host_commondir=$?"
        git push -q host HEAD:refs/heads/pushed >/dev/null 2>&1; echo "push_host=$?"
    "#;
    let out = repo.cmd(&["shell", "--branch", "feat/one", "--base-tag", &tag, "-c", script]).output().expect("shell");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for want in ["home=1\n", "main_waits=1\n", "host_git_write=1\n", "host_commondir=1\n"] {
        assert!(stdout.contains(want), "missing {want:?}: {}", text(&out));
    }
    assert!(!stdout.contains("push_host=0"), "a push into the read-only checkout: {}", text(&out));
    assert!(!repo.path.join(".git/commondir").exists());
    assert_eq!(git(&repo.path, &["log", "-1", "--format=%s", "feat/one"]).trim(), "work on one");
    assert_eq!(git(&repo.path, &["log", "-1", "--format=%s", "main"]).trim(), "init");
    assert_eq!(git(&repo.path, &["branch", "--show-current"]).trim(), "main");
}

/// Forwards TCP connections on a loopback port to the local engine's socket: a "remote"
/// engine that the test sets up. Its `tcp://` address.
fn loopback_engine() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let address = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(engine) = std::os::unix::net::UnixStream::connect("/var/run/docker.sock") else { continue };
            let (mut client_read, mut engine_write) =
                (client.try_clone().expect("clone"), engine.try_clone().expect("clone"));
            let (mut engine_read, mut client_write) = (engine, client);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut client_read, &mut engine_write);
                let _ = engine_write.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut engine_read, &mut client_write);
                let _ = client_write.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    format!("tcp://{address}")
}

/// `agent-sandbox ARGS` in a mount namespace where the default socket is out of reach
/// (/dev/null bound over it), with `env` set.
fn without_default_socket(repo: &Repo, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "sh", "-c", "mount --bind /dev/null /var/run/docker.sock && exec \"$@\"", "sh", BIN.as_str()]);
    cmd.args(args).current_dir(&repo.path).env_remove("DOCKER_HOST").envs(env.iter().copied());
    cmd.output().expect("unshare")
}

#[test]
fn docker_host_and_docker_contexts_reach_an_engine_elsewhere() {
    let Some(tag) = base_tag() else { return };
    if !crate::support::is_root() {
        eprintln!("skipped: hiding the default socket needs a mount namespace (root)");
        return;
    }
    let repo = Repo::new(&tag);
    let host = loopback_engine();
    // The default socket is out of reach: without DOCKER_HOST nothing answers.
    let out = without_default_socket(&repo, &["list"], &[]);
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("start it"), "{}", text(&out));
    // Through DOCKER_HOST: a sandbox starts and holds.
    let out = without_default_socket(
        &repo,
        &["shell", "--base-tag", &tag, "-c", "agent-sandbox check"],
        &[("DOCKER_HOST", host.as_str())],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "inside an agent-sandbox (container)\n");
    // Through the docker CLI's current context.
    let config = repo.path.parent().expect("parent").join("docker-config");
    std::fs::create_dir_all(config.join("contexts/meta/0123")).expect("mkdir");
    std::fs::write(config.join("config.json"), r#"{"currentContext": "elsewhere"}"#).expect("write");
    let meta = format!(r#"{{"Name":"elsewhere","Metadata":{{}},"Endpoints":{{"docker":{{"Host":"{host}"}}}}}}"#);
    std::fs::write(config.join("contexts/meta/0123/meta.json"), meta).expect("write");
    let out = without_default_socket(&repo, &["list", "--json"], &[("DOCKER_CONFIG", config.to_str().expect("utf-8"))]);
    assert!(out.status.success(), "{}", text(&out));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let listed =
        list.as_array().expect("array").iter().any(|item| item["workspace"] == repo.path.to_string_lossy().as_ref());
    assert!(listed, "{list}");
}

/// The files of a volume as `name:mode:content` lines (read with the docker CLI).
fn volume_files(tag: &str, volume: &str) -> String {
    docker(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        "sh",
        "-v",
        &format!("{volume}:/c"),
        &format!("agent-sandbox-base:{tag}"),
        "-c",
        "cd /c && for f in *; do echo \"$f:$(stat -c %a:%u $f):$(head -c 40 $f | tr '\\n' ' ')\"; done",
    ])
}

#[test]
fn codex_config_is_idempotent_forced_imported_and_logged_out() {
    let Some(tag) = base_tag() else { return };
    let repo = Repo::new(&tag);
    let volume = format!("as-e2e-codex-{}", std::process::id());
    let home = repo.path.parent().expect("parent").join("home");
    std::fs::create_dir_all(home.join(".codex")).expect("mkdir");
    let run = |args: &[&str]| {
        let out =
            repo.cmd(args).args(["--base-tag", &tag, "--volume", &volume]).env("HOME", &home).output().expect("run");
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    struct Gone(String);
    impl Drop for Gone {
        fn drop(&mut self) {
            docker(&["volume", "rm", &self.0]);
        }
    }
    let _gone = Gone(volume.clone());

    run(&["codex-init-config"]);
    let first = volume_files(&tag, &volume);
    assert!(first.contains("config.toml:644:1000:# Written by `agent-sandbox codex-init"), "{first}");
    assert!(first.contains("AGENTS.md:644:1000:# Environment"), "{first}");
    // A user's edit survives a second run; --force puts the template back.
    docker(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        "sh",
        "-v",
        &format!("{volume}:/c"),
        &format!("agent-sandbox-base:{tag}"),
        "-c",
        "echo mine > /c/config.toml",
    ]);
    let second = run(&["codex-init-config"]);
    assert!(second.contains("kept config.toml"), "{second}");
    assert!(volume_files(&tag, &volume).contains("config.toml:644:1000:mine"));
    run(&["codex-init-config", "--force"]);
    assert_eq!(volume_files(&tag, &volume), first);

    // --auth without a host login says what to do; with one it imports, always
    // overwriting auth.json, keeping profile.json unless --force.
    let out = repo
        .cmd(&["codex-init-config", "--auth", "--base-tag", &tag, "--volume", &volume])
        .env("HOME", &home)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`codex login`"), "{}", text(&out));
    std::fs::write(home.join(".codex/auth.json"), "{\"token\":\"one\"}").expect("write");
    std::fs::write(home.join(".codex/profile.json"), "{\"p\":1}").expect("write");
    run(&["codex-init-config", "--auth"]);
    std::fs::write(home.join(".codex/auth.json"), "{\"token\":\"two\"}").expect("write");
    std::fs::write(home.join(".codex/profile.json"), "{\"p\":2}").expect("write");
    run(&["codex-init-config", "--auth"]);
    let files = volume_files(&tag, &volume);
    assert!(files.contains("auth.json:600:1000:{\"token\":\"two\"}"), "{files}");
    assert!(files.contains("profile.json:600:1000:{\"p\":1}"), "{files}");

    run(&["codex-logout"]);
    let files = volume_files(&tag, &volume);
    assert!(
        !files.contains("auth.json") && !files.contains("profile.json") && files.contains("config.toml"),
        "{files}"
    );
}

#[test]
fn build_base_needs_nothing_but_the_binary() {
    let Some(_tag) = base_tag() else { return };
    // A copy of the binary alone in an empty directory: the context is inside it.
    let dir = tempfile::tempdir().expect("tempdir");
    let binary = dir.path().join("agent-sandbox");
    std::fs::copy(BIN.as_str(), &binary).expect("copy");
    let tag = format!("e2e-dbx-{}", std::process::id());
    let image = format!("agent-sandbox-base:{tag}");
    struct Gone(String);
    impl Drop for Gone {
        fn drop(&mut self) {
            docker(&["image", "rm", &self.0]);
        }
    }
    let _gone = Gone(image.clone());
    // The same arguments as `cargo xtask test`'s base image: its layers are cached.
    let mut args: Vec<String> =
        ["build-base", "--tag", &tag, "--from", "agent-sandbox-bootstrap:bookworm"].map(String::from).to_vec();
    for flag in ["--claude-code-version", "--codex-version", "--git-delta-version", "--ast-grep-version"] {
        args.extend([flag.to_owned(), "none".to_owned()]);
    }
    let out = Command::new(&binary).args(&args).current_dir(dir.path()).output().expect("build-base");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("built {image}\n"));
    // Not a terminal: the build's own lines.
    assert!(String::from_utf8_lossy(&out.stderr).contains("Step 1/"), "{}", text(&out));
    let version = docker(&["run", "--rm", "--network", "none", "--entrypoint", "agent-sandbox", &image, "--version"]);
    let ours = Command::new(&binary).arg("--version").output().expect("version");
    assert_eq!(version, String::from_utf8_lossy(&ours.stdout).trim());
    let git = docker(&["run", "--rm", "--network", "none", "--entrypoint", "readlink", &image, "/usr/bin/git"]);
    assert_eq!(git, "/usr/local/bin/agent-sandbox", "the git guard is `git` in the image");
}

#[test]
fn the_firewall_holds_before_the_shell_opens_and_fails_closed() {
    let Some(tag) = base_tag() else { return };
    let repo = Repo::new(&tag);
    let image = format!("agent-sandbox-base:{tag}");
    let id = std::process::id();
    let subnet = 16 + id % 200;
    let names = crate::devcontainer::Names {
        network: format!("as-dbx-{id}"),
        dns: format!("as-dbx-dns-{id}"),
        allowed: format!("as-dbx-allowed-{id}"),
        denied: format!("as-dbx-denied-{id}"),
        v4: format!("10.231.{subnet}"), // outside Docker's default address pools
        v6: format!("fd00:a5db:{subnet:x}"),
    };
    struct Network(Vec<String>, String);
    impl Drop for Network {
        fn drop(&mut self) {
            for name in &self.0 {
                docker(&["rm", "-f", name]);
            }
            // The sandbox's own container is still attached (the repository is dropped
            // after this): without it gone the network stays, and a later run whose
            // pid picks the same subnet cannot create its own.
            let attached = docker(&["network", "inspect", "-f", "{{range .Containers}}{{.Name}} {{end}}", &self.1]);
            for name in attached.split_whitespace() {
                docker(&["rm", "-f", name]);
            }
            docker(&["network", "rm", &self.1]);
        }
    }
    let _network = Network(vec![names.dns.clone(), names.allowed.clone(), names.denied.clone()], names.network.clone());
    let created = Command::new("docker")
        .args(["network", "create", "--ipv6", "--subnet", &format!("{}.0/24", names.v4)])
        .args(["--subnet", &format!("{}::/64", names.v6), &names.network])
        .output()
        .expect("docker");
    assert!(created.status.success(), "{}", text(&created));
    crate::devcontainer::start_host(&image, &names, &names.dns, 53, true);
    crate::devcontainer::start_host(&image, &names, &names.allowed, 10, false);
    crate::devcontainer::start_host(&image, &names, &names.denied, 20, true);
    let settings = format!("{{\"network\": \"{}\", \"dns\": [\"{}.53\"]}}\n", names.network, names.v4);
    std::fs::write(repo.path.join(".agent-sandbox/settings.json"), settings).expect("write");
    // The same `network` section `exec` reads: the allowed host's port, and the test
    // network's private ranges its name resolves into.
    let policy = format!(
        "{{\"network\": {{\"allow\": [\"{allowed}:8080\"], \"allowPrivate\": [\"{v4}.0/24\", \"{v6}::/64\"]}}}}\n",
        allowed = names.allowed,
        v4 = names.v4,
        v6 = names.v6
    );
    std::fs::write(repo.path.join(".agent-sandbox/config.jsonc"), &policy).expect("write");
    let probe = format!(
        "for target in allowed=http://{allowed}:8080/ other_port=http://{allowed}:80/ by_address=http://{v4}.10:8080/ \
         denied_name=http://{denied}:8080/ denied_v4=http://{v4}.20:8080/ denied_v6=http://[{v6}::20]:8080/; do \
           curl -gsS --max-time 5 \"${{target#*=}}\" >/dev/null 2>&1; echo \"${{target%%=*}}=$?\"; \
         done; \
         node -e 'const d=require(\"dns\");const ask=(s,label,then)=>{{\
           const r=new d.Resolver({{timeout:2000,tries:1}});r.setServers([s]);\
           r.resolve4(\"{allowed}\",(e)=>{{console.log(label+\"=\"+(e?\"refused\":\"answered\"));then()}})}};\
           ask(\"127.0.0.11\",\"dns_docker\",()=>ask(\"{v4}.53\",\"dns_external\",()=>{{}}))'",
        allowed = names.allowed,
        denied = names.denied,
        v4 = names.v4,
        v6 = names.v6
    );
    let want = "allowed=0\nother_port=7\nby_address=7\ndenied_name=6\ndenied_v4=7\ndenied_v6=7\ndns_docker=refused\ndns_external=refused\n";
    // The first command already runs behind the firewall: the allowed name on its port
    // answers; its other port, its address, the denied host by name, IPv4 and IPv6
    // address, and DNS servers other than the filtering resolver do not.
    let out = repo.cmd(&["shell", "--base-tag", &tag, "-c", &probe]).output().expect("shell");
    assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{}", text(&out));
    let label = format!("label=agent-sandbox.workspace={}", repo.path.display());
    let container = docker(&["ps", "-q", "--filter", &label]).trim().to_owned();
    // Answers forged from Docker's resolver address (free for anyone to bind: its
    // resolver listens on another port behind a DNAT) reach nobody, the proxy's queries
    // included; a packet from another loopback address arrives beside it.
    let forge = "node -e 'const d=require(\"dgram\");const got=[];const rx=d.createSocket(\"udp4\");\
        rx.on(\"message\",(m)=>got.push(String(m)));rx.bind(5353,\"127.0.0.1\",()=>{\
        const f=d.createSocket(\"udp4\");f.bind(53,\"127.0.0.11\",()=>f.send(\"forged\",5353,\"127.0.0.1\",()=>{\
        d.createSocket(\"udp4\").send(\"plain\",5353,\"127.0.0.1\",()=>setTimeout(()=>{\
        console.log(\"received=\"+got.join(\",\"));process.exit(0)},1000))}))})'";
    let out = repo.cmd(&["shell", "--base-tag", &tag, "-c", forge]).output().expect("shell");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "received=plain\n", "{}", text(&out));
    // A flow root opened (dockerd's upstream queries are root's) cannot be reused by the
    // agent from the same port once root's socket is closed: conntrack knows ports, not
    // sockets. Root's own query is answered beside it.
    let query = |who: &str| {
        format!(
            "const s=require(\"dgram\").createSocket(\"udp4\");\
             const q=Buffer.from(\"123401000001000000000000076578616d706c650000010001\",\"hex\");\
             s.on(\"message\",()=>{{console.log(\"{who}=answered\");process.exit(0)}});\
             s.bind(40555,()=>s.send(q,53,\"{v4}.53\",(e)=>console.log(\"{who}_sent=\"+(e?e.code:\"ok\"))));\
             setTimeout(()=>{{console.log(\"{who}=none\");process.exit(0)}},2000)",
            v4 = names.v4
        )
    };
    let root = docker(&["exec", "-u", "root", &container, "node", "-e", &query("root")]);
    assert_eq!(root, "root_sent=ok\nroot=answered");
    let out = repo
        .cmd(&["shell", "--base-tag", &tag, "-c", &format!("node -e '{}'", query("agent"))])
        .output()
        .expect("shell");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "agent_sent=EPERM\nagent=none\n", "{}", text(&out));
    // network.mode "off" and "on" in the container do what they say, and every start
    // says which.
    for (mode, banner, denied) in [
        ("off", "firewall: CLOSED: egress is loopback only, because network.mode is \"off\"", "denied_v4=7"),
        ("on", "firewall: OPEN: egress is not restricted, because network.mode is \"on\"", "denied_v4=0"),
    ] {
        let config = format!("{{\"network\": {{\"mode\": \"{mode}\"}}}}");
        std::fs::write(repo.path.join(".agent-sandbox/config.jsonc"), config).expect("write");
        let out = repo.cmd(&["restart", "--base-tag", &tag]).output().expect("restart");
        assert!(String::from_utf8_lossy(&out.stderr).contains(banner), "{mode}: {}", text(&out));
        let out = repo.cmd(&["shell", "--base-tag", &tag, "-c", &probe]).output().expect("shell");
        assert!(String::from_utf8_lossy(&out.stdout).contains(denied), "{mode}: {}", text(&out));
    }
    std::fs::write(repo.path.join(".agent-sandbox/config.jsonc"), &policy).expect("write");
    // A project policy that does not load: after a restart, egress is closed (the
    // allowed host too) and start says so.
    std::fs::write(repo.path.join(".agent-sandbox/config.jsonc"), "{\"network\": {\"allow\": [\"not a host\"]}}")
        .expect("write");
    let out = repo.cmd(&["restart", "--base-tag", &tag]).output().expect("restart");
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("agent-sandbox: WARNING: firewall: CLOSED"),
        "{}",
        text(&out)
    );
    let out = repo.cmd(&["shell", "--base-tag", &tag, "-c", &probe]).output().expect("shell");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("=0") && !stdout.contains("answered"), "{}", text(&out));
    // The old address allowlist is not silently ignored: it closes egress with the fix.
    std::fs::write(repo.path.join(".agent-sandbox/config.jsonc"), &policy).expect("write");
    std::fs::write(repo.path.join(".agent-sandbox/firewall.jsonc"), "{\"domains\": []}").expect("write");
    let out = repo.cmd(&["restart", "--base-tag", &tag]).output().expect("restart");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("firewall.jsonc is replaced by the `network` section"),
        "{}",
        text(&out)
    );
    // The policy fixed, a restart opens the allowlist again.
    std::fs::remove_file(repo.path.join(".agent-sandbox/firewall.jsonc")).expect("remove");
    repo.ok(&["restart"]);
    let out = repo.cmd(&["shell", "--base-tag", &tag, "-c", &probe]).output().expect("shell");
    assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{}", text(&out));
}

/// A git daemon serving `dir` as `git://remote.test/` on a Docker network of the test's
/// own (nothing else is on it); removed with every container on that network.
struct GitRemote {
    network: String,
    subnet: String,
}

impl GitRemote {
    fn start(tag: &str, dir: &Path, id: &str) -> GitRemote {
        let network = format!("as-e2e-remote-{id}");
        let out = Command::new("docker").args(["network", "create", &network]).output().expect("docker");
        assert!(out.status.success(), "{}", text(&out));
        let remote = GitRemote {
            subnet: docker(&["network", "inspect", "-f", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", &network]),
            network,
        };
        let volume = format!("{}:/srv:ro", dir.display());
        let out = Command::new("docker")
            .args(["run", "-d", "--name", &format!("{}-daemon", remote.network), "--network", &remote.network])
            .args(["--network-alias", "remote.test", "--user", "0", "--entrypoint", "git", "-v", &volume])
            .arg(format!("agent-sandbox-base:{tag}"))
            .args(["-c", "safe.directory=*", "daemon", "--export-all", "--base-path=/srv", "--reuseaddr", "/srv"])
            .output()
            .expect("docker");
        assert!(out.status.success(), "{}", text(&out));
        remote
    }
}

impl Drop for GitRemote {
    fn drop(&mut self) {
        for id in docker(&["ps", "-aq", "--filter", &format!("network={}", self.network)]).split_whitespace() {
            docker(&["rm", "-f", id]);
        }
        docker(&["network", "rm", &self.network]);
    }
}

/// Branch mode provisions with the project's network policy: a branch that only the
/// remote has, on a host the project's config allows, is checked out at the remote's
/// commit; with the host off the project's list, the fetch fails and the checkout stops
/// with what to do, instead of starting the branch from the host's `main`.
#[test]
fn branch_mode_checks_out_a_branch_that_only_an_allowed_remote_has() {
    let Some(tag) = base_tag() else { return };
    let repo = Repo::new(&tag);
    let hash = docker_volume_hash(&repo.path);
    let served = repo.path.parent().expect("parent").join("served");
    std::fs::create_dir(&served).expect("mkdir");
    let bare = served.join("app.git");
    git(&served, &["init", "-q", "--bare", bare.to_str().expect("utf-8")]);
    git(&repo.path, &["push", "-q", bare.to_str().expect("utf-8"), "main"]);
    let work = repo.path.parent().expect("parent").join("elsewhere");
    git(&served, &["clone", "-q", bare.to_str().expect("utf-8"), work.to_str().expect("utf-8")]);
    git(&work, &["checkout", "-q", "-b", "feat/remote-only"]);
    std::fs::write(work.join("remote.txt"), "only on the remote\n").expect("write");
    git(&work, &["add", "remote.txt"]);
    git(&work, &["commit", "-q", "-m", "remote work"]);
    git(&work, &["push", "-q", "origin", "feat/remote-only"]);
    let commit = git(&work, &["rev-parse", "HEAD"]).trim().to_owned();
    let remote = GitRemote::start(&tag, &served, &hash);

    git(&repo.path, &["remote", "add", "origin", "git://remote.test/app.git"]);
    let settings = format!("{{\"network\": \"{}\"}}\n", remote.network);
    std::fs::write(repo.path.join(".agent-sandbox/settings.json"), settings).expect("write");
    let allow = |allowed: &str| {
        let config = format!(r#"{{"network": {{"allow": [{allowed}], "allowPrivate": ["{}"]}}}}"#, remote.subnet);
        std::fs::write(repo.path.join(".agent-sandbox/config.jsonc"), config).expect("write");
    };

    allow(r#""remote.test:9418""#);
    let out = repo.ok(&["checkout", "feat/remote-only"]);
    assert!(out.contains("from origin/feat/remote-only"), "{out}");
    let script = "git rev-parse HEAD; cat remote.txt";
    let out =
        repo.cmd(&["shell", "--branch", "feat/remote-only", "--base-tag", &tag, "-c", script]).output().expect("shell");
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{commit}\nonly on the remote\n"), "{}", text(&out));

    // The remote's host off the project's list: the fetch is refused, and so the checkout.
    allow("");
    let out = repo.cmd(&["checkout", "feat/other", "--base-tag", &tag]).output().expect("checkout");
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "agent-sandbox: cannot fetch origin (git://remote.test/app.git), so feat/other was not checked out"
        ) && stderr.contains("allow the remote's host in .agent-sandbox/config.jsonc (network.allow")
            && !stderr.contains("new branch from"),
        "{}",
        text(&out)
    );
    drop(remote);
}

/// Seed 002's "many agents at once": ten branch sandboxes of one repository started at
/// the same moment (each provisioning takes the repo shelf's lock in turn, and the shelf
/// stays whole), with the project's small limits. One runs a fork bomb and a memory hog;
/// the others still answer within ten times what the same command took while all were
/// idle. `list --json` shows the ten with what each uses, and `stop --all` stops them.
#[test]
fn ten_branch_sandboxes_at_once_and_a_runaway_starves_none() {
    const COUNT: usize = 10;
    let Some(tag) = base_tag() else { return };
    let repo = Repo::alone(&tag);
    let hash = docker_volume_hash(&repo.path);
    let limits = r#"{"container": {"cpus": "0.5", "memory": "256m", "pids": 256}}"#;
    std::fs::write(repo.path.join(".agent-sandbox/config.jsonc"), limits).expect("write");
    let branches: Vec<String> = (0..COUNT).map(|idx| format!("b{idx}")).collect();
    let started = std::time::Instant::now();
    let children: Vec<(String, std::process::Child)> = branches
        .iter()
        .map(|branch| {
            let child = repo
                .cmd(&["start", "--branch", branch, "--base-tag", &tag])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start");
            (branch.clone(), child)
        })
        .collect();
    for (branch, child) in children {
        let out = child.wait_with_output().expect("wait");
        assert!(out.status.success(), "start --branch {branch}: {}", text(&out));
    }
    eprintln!("{COUNT} branch sandboxes started in {:?}", started.elapsed());

    // The same command in a sandbox: its branch, a clean worktree, the commit, and a
    // little work for the CPU. Timed from the host, `shell` included.
    let check = "git branch --show-current; git status --porcelain; git log -1 --format=%s; \
                 i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo done";
    let run = |branch: &str| {
        let started = std::time::Instant::now();
        let out = repo.cmd(&["shell", "--branch", branch, "--base-tag", &tag, "-c", check]).output().expect("shell");
        let elapsed = started.elapsed();
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{branch}\ninit\ndone\n"), "{}", text(&out));
        elapsed
    };
    let mut idle: Vec<std::time::Duration> = (0..3).map(|_| run("b1")).collect();
    idle.sort();
    let bound = idle[1] * 10;

    // The runaway: a memory hog (the OOM killer ends it at the limit; it starts again)
    // and a fork bomb, detached, in one exec (once the bomb holds every pid the
    // container may have, nothing more starts in it).
    let runaway = "setsid sh -c 'while :; do head -c 2G /dev/zero | tail; done' >/dev/null 2>&1 </dev/null & \
                   setsid bash -c 'bomb() { bomb | bomb & }; bomb' >/dev/null 2>&1 </dev/null & \
                   sleep 5";
    let out = repo.cmd(&["shell", "--branch", "b0", "--base-tag", &tag, "-c", runaway]).output().expect("shell");
    assert!(out.status.success(), "{}", text(&out));
    let mut slowest = std::time::Duration::ZERO;
    for branch in &branches[1..] {
        let elapsed = run(branch);
        assert!(elapsed < bound, "{branch}: {elapsed:?} beside the runaway, {:?} idle (bound {bound:?})", idle[1]);
        slowest = slowest.max(elapsed);
    }
    eprintln!("the check took {:?} idle (median of 3), at most {slowest:?} beside the runaway", idle[1]);

    // The shelf is whole: one worktree per branch, and fsck finds nothing.
    let script = "git -C /repo-shelf/repo worktree list --porcelain | grep -c '^worktree /repo-shelf/worktrees/'; \
                  git -C /repo-shelf/repo fsck --strict --no-progress 2>&1; echo fsck=$?";
    let out = repo.cmd(&["shell", "--branch", "b9", "--base-tag", &tag, "-c", script]).output().expect("shell");
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{COUNT}\nfsck=0\n"), "{}", text(&out));

    // list --json: the ten, running, each with its usage under the project's limits; the
    // runaway's processes at its limit.
    let out = repo.cmd(&["list", "--json"]).output().expect("list");
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("list --json is JSON");
    let mine: Vec<&serde_json::Value> = list
        .as_array()
        .expect("array")
        .iter()
        .filter(|item| item["workspace"] == repo.path.to_string_lossy().as_ref())
        .collect();
    let names: Vec<&str> = mine.iter().filter_map(|item| item["name"].as_str()).collect();
    let want: Vec<String> = branches.iter().map(|branch| format!("agent-sandbox-proj-{branch}-{hash}")).collect();
    assert_eq!(names, want, "{list:#}");
    for item in &mine {
        let usage = &item["usage"];
        assert_eq!(item["state"], "running", "{item:#}");
        assert_eq!(usage["memory_limit_bytes"], 256 << 20, "{item:#}");
        assert_eq!(usage["pids_limit"], 256, "{item:#}");
        assert!(usage["pids"].as_u64().is_some_and(|pids| pids >= 1), "{item:#}");
        assert!(usage["cpu_percent"].as_f64().is_some_and(|cpu| cpu >= 0.0), "{item:#}");
        assert!(usage["memory_bytes"].as_u64().is_some_and(|memory| memory <= 256 << 20), "{item:#}");
    }
    let runaway = &mine[0]["usage"];
    assert!(runaway["pids"].as_u64().is_some_and(|pids| pids > 128), "the fork bomb is not running: {runaway:#}");
    let out = repo.cmd(&["list"]).output().expect("list");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.starts_with("NAME\tSTATE\tCPU\tMEMORY\tPIDS\tMODE\t"), "{table}");
    assert!(table.contains(&format!("{}\trunning\t", want[0])) && table.contains(" / 256.0MiB\t"), "{table}");

    // stop --all: every sandbox on the engine (this test has the engine to itself).
    let out = repo.cmd(&["stop", "--all"]).output().expect("stop --all");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    for name in &want {
        assert!(stdout.contains(&format!("stopped {name}\n")), "{name}: {}", text(&out));
    }
    let label = format!("label=agent-sandbox.workspace={}", repo.path.display());
    assert_eq!(docker(&["ps", "-q", "--filter", &label]), "", "still running after stop --all");
    let out = repo.cmd(&["stop", "--all"]).output().expect("stop --all");
    assert!(String::from_utf8_lossy(&out.stdout).contains("no sandbox container is running"), "{}", text(&out));
}

/// `container.disk` where the engine's storage driver cannot cap a container's
/// filesystem (overlay2 on ext4, this machine's engine): `show-run` and `start` refuse
/// it, naming the driver, before any container exists. Elsewhere `show-run` has the cap.
#[test]
fn a_disk_cap_is_refused_where_the_storage_driver_cannot_keep_it() {
    let Some(tag) = base_tag() else { return };
    let repo = Repo::new(&tag);
    std::fs::write(repo.path.join(".agent-sandbox/config.jsonc"), r#"{"container": {"disk": "1g"}}"#).expect("write");
    let format =
        r#"{{.Driver}} {{range .DriverStatus}}{{if eq (index . 0) "Backing Filesystem"}}{{index . 1}}{{end}}{{end}}"#;
    let driver = docker(&["info", "-f", format]);
    let show_run = repo.cmd(&["show-run", "--base-tag", &tag]).output().expect("show-run");
    if driver != "overlay2 extfs" {
        eprintln!("the engine's storage driver is {driver:?}: the refusal is not tested here");
        assert!(
            String::from_utf8_lossy(&show_run.stdout).contains(" --storage-opt size=1073741824 "),
            "{}",
            text(&show_run)
        );
        return;
    }
    let start = repo.cmd(&["start", "--base-tag", &tag]).output().expect("start");
    for out in [show_run, start] {
        assert_eq!(out.status.code(), Some(125), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(
                "container.disk: this engine's storage driver (overlay2 on extfs) cannot cap a container's filesystem"
            ),
            "{}",
            text(&out)
        );
    }
    let label = format!("label=agent-sandbox.workspace={}", repo.path.display());
    assert_eq!(docker(&["ps", "-aq", "--filter", &label]), "", "a container was created");
}
