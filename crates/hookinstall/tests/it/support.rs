//! What every test needs: a temporary tree with its own `HOME`, the real git run in it
//! with nothing of the host's configuration, a recursive snapshot of a tree (contents,
//! modes, symlink targets) to prove a round trip byte-identical, and a way to run the
//! library in a child process with another environment (gix reads `HOME`, and setting it
//! in the test process would leak into the tests running beside it).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use hookinstall::{InstallError, Report};

/// A temporary tree: `root` (canonical) holds `home/` and whatever the test makes.
pub struct Sandbox {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().canonicalize().expect("canonical tempdir");
        let home = root.join("home");
        std::fs::create_dir(&home).expect("create home");
        Sandbox { _tmp: tmp, root, home }
    }

    /// git in `dir` with this sandbox's `HOME`, no system config, a fixed identity and
    /// `PATH` without any agent-sandbox.
    pub fn git_command(&self, dir: &Path, args: &[&str]) -> Command {
        let mut command = Command::new("git");
        command
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", path_without_agent_sandbox())
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com");
        command
    }

    /// `git ARGS` in `dir`, which must succeed; its stdout, trimmed.
    pub fn git(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.git_command(dir, args).output().expect("run git");
        assert!(out.status.success(), "git {args:?} in {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// `git ARGS` in `dir` with `env` added, whatever its outcome.
    pub fn git_output(&self, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = self.git_command(dir, args);
        command.envs(env.iter().copied()).stdin(Stdio::null());
        command.output().expect("run git")
    }

    /// A new repository `root/name` on branch `main` (with git's sample hooks).
    pub fn init(&self, name: &str) -> PathBuf {
        self.git(&self.root, &["init", "-q", "-b", "main", name]);
        self.root.join(name)
    }

    /// A new repository `root/name` with one commit.
    pub fn init_with_commit(&self, name: &str) -> PathBuf {
        let repo = self.init(name);
        std::fs::write(repo.join("README"), "hello\n").expect("write README");
        self.git(&repo, &["add", "README"]);
        self.git(&repo, &["commit", "-q", "--no-verify", "-m", "first"]);
        repo
    }

    /// The hooks directory according to git itself (`git rev-parse --git-path hooks`),
    /// canonical; it must exist.
    pub fn git_hooks_dir(&self, dir: &Path) -> PathBuf {
        let path = self.git(dir, &["rev-parse", "--git-path", "hooks"]);
        dir.join(path).canonicalize().expect("git's hooks directory exists")
    }

    /// Runs `op` (`hooks-dir`, `install`, `uninstall`) of the library on `start` in a
    /// child process whose `HOME` is this sandbox's and that reads no system config.
    pub fn in_child(&self, op: &str, start: &Path, agent_sandbox: &Path) -> ChildOutcome {
        let out_file = self.root.join(format!("child-{op}.out"));
        let status = Command::new(std::env::current_exe().expect("test binary"))
            .args(["--exact", "support::child_process_entry", "--nocapture", "--test-threads=1", "--quiet"])
            .env_clear()
            .env("PATH", path_without_agent_sandbox())
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env(CHILD_OP, op)
            .env(CHILD_START, start)
            .env(CHILD_AGENT_SANDBOX, agent_sandbox)
            .env(CHILD_OUT, &out_file)
            .stdout(Stdio::null())
            .status()
            .expect("run the test binary as a child");
        assert!(status.success(), "child process for {op} failed");
        let text = std::fs::read_to_string(&out_file).expect("child wrote its outcome");
        std::fs::remove_file(&out_file).expect("remove child outcome");
        let mut lines = text.lines().map(str::to_string);
        match lines.next().as_deref() {
            Some("ok") => {
                let hooks_dir = PathBuf::from(lines.next().expect("hooks dir line"));
                ChildOutcome::Ok(Report { hooks_dir, actions: lines.collect() })
            }
            Some("err") => ChildOutcome::Err(lines.collect::<Vec<_>>().join("\n")),
            other => panic!("unexpected child outcome {other:?}"),
        }
    }
}

/// What a library call in a child process returned (an error as its message).
#[derive(Debug, PartialEq, Eq)]
pub enum ChildOutcome {
    Ok(Report),
    Err(String),
}

const CHILD_OP: &str = "HOOKINSTALL_TEST_CHILD_OP";
const CHILD_START: &str = "HOOKINSTALL_TEST_CHILD_START";
const CHILD_AGENT_SANDBOX: &str = "HOOKINSTALL_TEST_CHILD_AGENT_SANDBOX";
const CHILD_OUT: &str = "HOOKINSTALL_TEST_CHILD_OUT";

/// The entry point of [`Sandbox::in_child`]'s child processes; does nothing when the
/// test binary runs normally (it is not a test of its own).
#[test]
fn child_process_entry() {
    let (Some(op), Some(start), Some(agent_sandbox), Some(out_file)) = (
        std::env::var_os(CHILD_OP),
        std::env::var_os(CHILD_START),
        std::env::var_os(CHILD_AGENT_SANDBOX),
        std::env::var_os(CHILD_OUT),
    ) else {
        return;
    };
    let start = Path::new(&start);
    let outcome: Result<Report, InstallError> = match op.to_str() {
        Some("hooks-dir") => hookinstall::hooks_dir(start).map(|hooks_dir| Report { hooks_dir, actions: Vec::new() }),
        Some("install") => hookinstall::install(start, Path::new(&agent_sandbox), false),
        Some("uninstall") => hookinstall::uninstall(start),
        other => panic!("unknown child op {other:?}"),
    };
    let text = match outcome {
        Ok(report) => {
            let mut lines = vec!["ok".to_string(), report.hooks_dir.display().to_string()];
            lines.extend(report.actions);
            lines.join("\n")
        }
        Err(err) => format!("err\n{err}"),
    };
    std::fs::write(out_file, text).expect("write child outcome");
}

/// The test process's `PATH` without the directories holding an `agent-sandbox`, so
/// the shims cannot find a real one.
pub fn path_without_agent_sandbox() -> OsString {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).filter(|dir| !dir.join("agent-sandbox").exists()).collect();
    std::env::join_paths(dirs).expect("PATH entries joined again")
}

/// Writes an executable (0755) script.
pub fn write_script(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create script dir");
    }
    std::fs::write(path, text).expect("write script");
    set_mode(path, 0o755);
}

pub fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// `text` as a single-quoted shell word.
pub fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// One entry of a [`snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir { mode: u32 },
    File { mode: u32, contents: Vec<u8> },
    Symlink { target: PathBuf },
}

/// Every entry under `dir` (relative path → entry), symlinks not followed.
pub fn snapshot(dir: &Path) -> BTreeMap<String, Entry> {
    let mut entries = BTreeMap::new();
    walk(dir, dir, &mut entries);
    entries
}

fn walk(root: &Path, dir: &Path, entries: &mut BTreeMap<String, Entry>) {
    for item in std::fs::read_dir(dir).expect("read_dir") {
        let path = item.expect("dir entry").path();
        let meta = std::fs::symlink_metadata(&path).expect("lstat");
        let rel = path.strip_prefix(root).expect("under root").display().to_string();
        let mode = meta.permissions().mode() & 0o7777;
        if meta.file_type().is_symlink() {
            entries.insert(rel, Entry::Symlink { target: std::fs::read_link(&path).expect("readlink") });
        } else if meta.is_dir() {
            entries.insert(rel, Entry::Dir { mode });
            walk(root, &path, entries);
        } else {
            entries.insert(rel, Entry::File { mode, contents: std::fs::read(&path).expect("read") });
        }
    }
}

/// Asserts two snapshots are equal, naming the paths that differ.
pub fn assert_same_tree(before: &BTreeMap<String, Entry>, after: &BTreeMap<String, Entry>) {
    let differing: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|key| before.get(*key) != after.get(*key))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(differing.is_empty(), "the trees differ at {differing:?}");
}

/// The path `root`-relative, as snapshot keys are.
pub fn key(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).expect("under root").display().to_string()
}

/// A path for the agent-sandbox binary that is never run.
pub fn unused_binary() -> PathBuf {
    PathBuf::from("/opt/agent sandbox/bin/agent-sandbox")
}
