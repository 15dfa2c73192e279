//! Shared fixtures: a sandbox holding a small project, and `check`, which runs one
//! command line and compares the whole (stdout, exit code) plus a stderr fragment.

use vsandbox::{Config, Sandbox};

/// A sandbox in `/p` holding:
/// `a.txt` (alpha, beta, gamma), `b.txt` (Beta Two), `nums` (1..=12, one per line),
/// `.hidden`, `src/main.rs`, `src/lib.rs`.
pub fn project() -> Sandbox {
    let mut sandbox = Sandbox::new(Config::default()).expect("default config");
    let nums: String = (1..=12).map(|n| format!("{n}\n")).collect();
    for (path, content) in [
        ("/p/a.txt", "alpha\nbeta\ngamma\n"),
        ("/p/b.txt", "Beta Two\n"),
        ("/p/nums", nums.as_str()),
        ("/p/.hidden", "h\n"),
        ("/p/src/main.rs", "fn main() {}\n"),
        ("/p/src/lib.rs", "pub fn beta() {}\n"),
    ] {
        sandbox.write_file(path, content.as_bytes()).expect("fixture write");
    }
    let cd = sandbox.execute("cd /p");
    assert!(cd.success, "{cd:?}");
    sandbox
}

/// One table row: a command line, its whole stdout, its exit code, and a fragment its
/// stderr must contain ("" for an empty stderr).
pub type Case = (&'static str, &'static str, i32, &'static str);

/// Runs each case in a fresh sandbox from `fresh` and reports every mismatch at once.
pub fn check_all(fresh: impl Fn() -> Sandbox, cases: &[Case]) {
    let mut failures = Vec::new();
    for &(command, stdout, code, stderr) in cases {
        let mut sandbox = fresh();
        let result = sandbox.execute(command);
        let stderr_ok = if stderr.is_empty() { result.stderr.is_empty() } else { result.stderr.contains(stderr) };
        if result.stdout != stdout || result.exit_code != code || !stderr_ok || result.success != (code == 0) {
            failures.push(format!(
                "{command:?}\n  want stdout {stdout:?} code {code} stderr ~ {stderr:?}\n  got  stdout {:?} code {} stderr {:?}",
                result.stdout, result.exit_code, result.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// The stores a sandbox can keep its tree in; tests of the limits and of snapshots run
/// against each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Memory,
    Redb,
}

pub const BACKENDS: [Backend; 2] = [Backend::Memory, Backend::Redb];

/// A fresh sandbox on `backend`: for redb, a new store file in a temporary directory
/// (removed at once: the open file lives on until the sandbox is dropped).
pub fn open(backend: Backend, config: Config) -> Sandbox {
    match backend {
        Backend::Memory => Sandbox::new(config).expect("config"),
        Backend::Redb => {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = vsandbox::RedbStore::open(&dir.path().join("store.redb")).expect("a new store");
            Sandbox::open(config, Box::new(store)).expect("config")
        }
    }
}
