//! Test harness: each test gets its own temporary world (a fake `$HOME` with credentials
//! in it, a project, a sibling project) and runs the real `agent-sandbox` binary under
//! the real bwrap against it. Nothing here mocks anything.

use std::{
    ffi::OsStr,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Output},
};

/// The binary under test; `AGENT_SANDBOX_BIN` overrides it when the suite runs as
/// another user from a copy (see `cargo xtask test`).
pub static BIN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    std::env::var("AGENT_SANDBOX_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_agent-sandbox").to_owned())
});

/// Skips (with a printed reason) when bwrap is missing locally; in CI it must be there.
macro_rules! require_bwrap {
    () => {
        if !$crate::support::bwrap_available() {
            return;
        }
    };
}
pub(crate) use require_bwrap;

pub fn bwrap_available() -> bool {
    let found =
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).any(|dir| dir.join("bwrap").is_file());
    if !found {
        assert!(std::env::var_os("CI").is_none(), "bwrap is required in CI (apt install bubblewrap)");
        eprintln!("skipping: bwrap not found in PATH (install with: apt install bubblewrap)");
    }
    found
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

pub struct World {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub project: PathBuf,
}

impl Drop for World {
    /// Sessions leave directories without write permission (read-only state, a
    /// dependency tree a test made read-only): without this the temporary directory
    /// stays behind, and repeated runs fill the disk.
    fn drop(&mut self) {
        fn writable(dir: &Path) {
            let Ok(meta) = std::fs::symlink_metadata(dir) else { return };
            if !meta.is_dir() {
                return;
            }
            if meta.permissions().mode() & 0o700 != 0o700 {
                let _ =
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(meta.permissions().mode() | 0o700));
            }
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                writable(&entry.path());
            }
        }
        writable(&self.root);
    }
}

impl World {
    /// A world whose project is a git repository with one commit.
    pub fn new() -> World {
        let world = World::bare();
        world.write(
            "home/.gitconfig",
            "[user]\n\tname = Test\n\temail = test@example.invalid\n[init]\n\tdefaultBranch = main\n",
        );
        world.write("home/proj/README.md", "hello\n");
        world.git(&["init", "-q"]);
        world.git(&["add", "-A"]);
        world.git(&["commit", "-qm", "init"]);
        world
    }

    /// A world with an empty project directory (no git).
    pub fn bare() -> World {
        let dir = tempfile::Builder::new().prefix("as-it-").tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical tempdir");
        let home = root.join("home");
        let project = home.join("proj");
        fs_err::create_dir_all(&project).expect("mkdir project");
        World { _dir: dir, root, home, project }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let path = self.path(rel);
        fs_err::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        fs_err::write(&path, content).expect("write");
        path
    }

    /// Writes the project's `.agent-sandbox/config.jsonc` and allows it, as its user would.
    pub fn project_config(&self, content: &str) -> PathBuf {
        let path = self.write("home/proj/.agent-sandbox/config.jsonc", content);
        self.cmd().args(["config", "allow"]).run().ok();
        path
    }

    pub fn read(&self, rel: &str) -> String {
        fs_err::read_to_string(self.path(rel)).expect("read")
    }

    pub fn chmod(&self, rel: &str, mode: u32) {
        fs_err::set_permissions(self.path(rel), std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    /// Every file of the project's `.git` (the user's) with its size and mode, then
    /// `config` and `HEAD`: equal before and after, nothing in it changed. The
    /// repository's identity, which the host writes at the first start, is left out.
    pub fn users_git_listing(&self) -> String {
        let find = "find . -path ./agent-sandbox/id -prune -o -printf '%p %s %m %y\\n' | grep -v '^\\./agent-sandbox [0-9]* [0-7]* d$' | sort";
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("{find} && cat config HEAD")])
            .current_dir(self.path("home/proj/.git"))
            .output()
            .expect("find");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Removes the project's session repository (the agent's own `.git`, kept between
    /// sessions): the next session starts from the user's repository afresh.
    pub fn forget_session(&self) {
        let sessions = self.path("xdg-state/agent-sandbox/sessions");
        for entry in std::fs::read_dir(sessions).into_iter().flatten().flatten() {
            let _ = std::fs::remove_dir_all(entry.path().join("home"));
        }
    }

    /// Runs the host's git in the project, outside any sandbox.
    pub fn git(&self, args: &[&str]) -> String {
        self.git_in(&self.project, args)
    }

    /// Runs the host's git in `dir`, outside any sandbox; it must succeed.
    pub fn git_in(&self, dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Makes `home/remote.git`, a bare repository, the project's `origin`; returns its path.
    pub fn bare_origin(&self) -> PathBuf {
        let remote = self.path("home/remote.git");
        self.git_in(&self.root, &["init", "-q", "--bare", remote.to_str().expect("utf-8")]);
        self.git(&["remote", "add", "origin", remote.to_str().expect("utf-8")]);
        remote
    }

    /// `agent-sandbox` with a clean environment pointing into this world, run in the project.
    pub fn cmd(&self) -> TestCommand {
        let mut cmd = Command::new(&*BIN);
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .env("XDG_CONFIG_HOME", self.root.join("xdg-config"))
            .env("XDG_STATE_HOME", self.root.join("xdg-state"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .current_dir(&self.project);
        TestCommand { cmd }
    }

    /// `agent-sandbox exec [flags] -- sh -c SCRIPT`.
    pub fn sh(&self, flags: &[&str], script: &str) -> Run {
        let mut cmd = self.cmd();
        cmd.arg("exec").args(flags).args(["--", "sh", "-c", script]);
        cmd.run()
    }

    pub fn audit_log(&self) -> String {
        fs_err::read_to_string(self.root.join("xdg-state/agent-sandbox/audit.jsonl")).unwrap_or_default()
    }
}

pub struct TestCommand {
    pub cmd: Command,
}

impl TestCommand {
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Self {
        self.cmd.arg(arg);
        self
    }
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(&mut self, args: I) -> &mut Self {
        self.cmd.args(args);
        self
    }
    pub fn env(&mut self, key: &str, value: impl AsRef<OsStr>) -> &mut Self {
        self.cmd.env(key, value);
        self
    }
    pub fn current_dir(&mut self, dir: &Path) -> &mut Self {
        self.cmd.current_dir(dir);
        self
    }
    pub fn run(&mut self) -> Run {
        let output = self.cmd.output().expect("agent-sandbox runs");
        Run(output)
    }

    /// [`TestCommand::run`], failing the test (and killing the process) if it has not
    /// ended within `secs`: for what must never block.
    #[track_caller]
    pub fn run_within(&mut self, secs: u64) -> Run {
        use std::process::Stdio;
        let child = self.cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        let child = child.expect("agent-sandbox starts");
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
            Ok(output) => Run(output.expect("waited")),
            Err(_) => {
                // SAFETY: kill(2) on the process this test started.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                panic!("agent-sandbox blocked for more than {secs} s");
            }
        }
    }
}

pub struct Run(pub Output);

impl Run {
    pub fn code(&self) -> i32 {
        self.0.status.code().unwrap_or(-1)
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }
    /// Asserts success and returns stdout.
    #[track_caller]
    pub fn ok(&self) -> String {
        assert_eq!(self.code(), 0, "stdout:\n{}\nstderr:\n{}", self.stdout(), self.stderr());
        self.stdout()
    }
}

/// The tag of `agent-sandbox-base` the Docker end-to-end tests run on (`cargo xtask
/// test` builds it and sets `AGENT_SANDBOX_E2E_BASE_TAG`), or `None`: skip `what`, with
/// the reason printed. CI's root pass must not skip; its unprivileged rerun has no
/// Docker access.
pub fn e2e_base_tag(what: &str) -> Option<String> {
    if let Ok(tag) = std::env::var("AGENT_SANDBOX_E2E_BASE_TAG") {
        return Some(tag);
    }
    assert!(
        std::env::var_os("CI").is_none() || !is_root(),
        "CI must run {what}: run the suite through `cargo xtask test`"
    );
    eprintln!(
        "skipped: {what} needs Docker and the base image (run `cargo xtask test` as root, or set \
         AGENT_SANDBOX_E2E_BASE_TAG=<tag of agent-sandbox-base>; the unprivileged rerun has no Docker access)"
    );
    None
}
