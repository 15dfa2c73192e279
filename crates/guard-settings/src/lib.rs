//! The guards' settings snapshots: what `exec` writes on the host into the runtime
//! directory (`git-guard.json`, `hook-guard.json`) and the git and hook guards read back
//! inside the sandbox, so that they never take their settings from the agent's `HOME`,
//! `XDG_*` or `PATH`. One serde type per file, written by `to_json` and read by one
//! function each that fails closed: a file that is there but cannot be used means the
//! strictest settings (the git guard) or a refusal (the hook guard). Reads go through
//! [`util::fs::read_regular`], so a FIFO or device planted in place of a file never
//! blocks them. The field names are the file format: changing one changes what a guard
//! from another version reads.

use std::path::{Path, PathBuf};

use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// No settings file is legitimately longer (the hook guard's holds the sandbox's whole
/// environment, which the kernel caps far below this).
const LIMIT: u64 = 16 * 1024 * 1024;

/// The git guard's settings (`RuntimeLayout::git_guard_settings`): the config's `git.*`
/// and the facts of the project's repository at start. Every field is optional on
/// disk; a missing one takes its strict [`Default`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GitGuardSettings {
    pub allow_branch_deletion: bool,
    pub allow_plumbing_commits: bool,
    /// The repository's common directory at start; `None` outside a repository (and
    /// then the guard has no start facts to compare the outcome with).
    pub common_dir: Option<PathBuf>,
    /// The effective `core.hooksPath` at start; `None` means `<common dir>/hooks`.
    pub hooks_path: Option<PathBuf>,
    /// The global git config file pinned for the hook guard (see
    /// [`HookGuardSettings::global_config`]), which `GIT_CONFIG_GLOBAL` may then name.
    #[serde(default)]
    pub global_config: Option<String>,
    /// Skip switches `exec` itself set in the sandbox's environment (see
    /// `gitguard::GuardOptions::quiet_env`).
    #[serde(default)]
    pub quiet_env: Vec<(String, String)>,
}

impl GitGuardSettings {
    /// The file's contents. Fails only for a path that is not UTF-8 (JSON strings are).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    /// The settings at `path`; missing, unreadable or unparsable settings are the
    /// strictest ([`Default`]: nothing allowed, no start facts).
    pub fn read(path: &Path) -> GitGuardSettings {
        read_json(path).ok().flatten().unwrap_or_default()
    }
}

/// The hook guard's settings (`RuntimeLayout::hook_guard_settings`): what it needs of
/// the configuration, and what only the session knows (masked paths, its environment).
/// Every field is required on disk: a partial file is unusable, never half-read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookGuardSettings {
    pub check_commands: Vec<String>,
    pub protected_paths: Vec<String>,
    pub humans: bool,
    pub secret_patterns: Vec<String>,
    pub secret_allow: Vec<String>,
    pub allow_branch_deletion: bool,
    /// Paths (relative to the work tree) the sandbox masks: the agent sees them empty,
    /// so a commit must not record them.
    pub masked_paths: Vec<String>,
    /// The environment the sandbox started with: the checks run in it, not in whatever
    /// the agent sets for `git commit` (`PATH`, `LD_PRELOAD`, `BASH_ENV`). Empty outside
    /// a sandbox, where the checks inherit the environment. On disk: `[name, value]`
    /// pairs.
    pub check_env: Vec<(String, String)>,
    /// The entries of the start `PATH` the checks do not search (`ENTRY (REASON)`): the
    /// checks' `PATH` holds only directories the agent cannot write
    /// (`policy::path_search`). A failed check names them, so that a user whose check
    /// needed `node_modules/.bin` learns why.
    #[serde(default)]
    pub check_path_dropped: Vec<String>,
    /// The commits the repository's refs pointed at when the sandbox started: their
    /// history was there before the agent, so pre-push does not check it again (a
    /// human's own old `--no-verify` commit does not block the agent's push). Empty
    /// outside a sandbox.
    pub known_commits: Vec<String>,
    /// Commits earlier sessions made (gitcare's record): checked at push even when the
    /// refs already reached them at the start.
    pub agent_commits: Vec<String>,
    /// The user's global git config file when the sandbox started (`~/.gitconfig`, else
    /// `~/.config/git/config`; mounted read-only), or `/dev/null` when there was none: the
    /// guard's git and the checks read it as `GIT_CONFIG_GLOBAL`, never a file the agent
    /// made in the scratch home (a smudge filter there could change what is checked).
    /// Empty outside a sandbox.
    pub global_config: String,
    /// For pushes carried out by the host (`hostpush`): the fresh sandbox the checks run
    /// in. Absent inside the sandbox.
    #[serde(default)]
    pub check_sandbox: Option<CheckSandbox>,
    /// For pushes a container's verifier carries out (root, `hostpush::verify`): the
    /// user the checks run as instead. Absent everywhere else.
    #[serde(default)]
    pub check_user: Option<CheckUser>,
}

/// The names of the ignored directories holding a project's dependencies, which checks
/// in a temporary worktree see as links to the project's own: one list for the host's
/// checks and a container's.
pub const DEPENDENCY_DIRS: &[&str] = &["node_modules", ".venv", "venv", ".tox", "target", ".gradle", "vendor"];

/// How a container's verifier runs the checks of a pushed commit: as `uid`/`gid` (a
/// user that holds no credentials and is not the agent's), with exactly `env`, in
/// `worktree` (a directory the agent cannot write), with the project's dependency
/// directories (`dependencies`, relative to `project`) linked in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckUser {
    pub uid: u32,
    pub gid: u32,
    pub env: Vec<(String, String)>,
    pub worktree: PathBuf,
    pub project: PathBuf,
    pub dependencies: Vec<String>,
    /// The user's hooks directory as this user reads it (a root-owned copy of the
    /// user's `.git/hooks`, or the `core.hooksPath` in the worktree, which is protected):
    /// the broker replays the repository's own `pre-commit` and `commit-msg` on each
    /// commit it brings home, since the session's hooks are the agent's to change.
    /// `None`: the user's hooks are not where the container shows them.
    #[serde(default)]
    pub hooks: Option<PathBuf>,
}

/// The sandbox a check of a pushed commit runs in, decided by `exec` with the session's
/// policy: bwrap's whole argument vector up to the command (`… -- /bin/sh -c`), to which
/// the check's command line is appended, its environment, the runtime directory it uses
/// (seccomp program, audit FIFO, network socket), and the worktree the commit is checked
/// out in (the argument vector's `--chdir`), in a directory the agent's sandbox does not
/// show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckSandbox {
    pub bwrap: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub runtime: PathBuf,
    pub worktree: PathBuf,
}

impl HookGuardSettings {
    /// The settings `config` gives; the session adds the masked paths and environment.
    pub fn from_config(config: &config::Config) -> HookGuardSettings {
        let values = |items: &[config::Sourced<String>]| items.iter().map(|item| item.value.clone()).collect();
        HookGuardSettings {
            check_commands: values(&config.check_commands),
            protected_paths: values(&config.protected_paths),
            humans: config.check_humans.value,
            secret_patterns: values(&config.secret_patterns),
            secret_allow: values(&config.secret_allow),
            allow_branch_deletion: config.git_allow_branch_deletion.value,
            masked_paths: Vec::new(),
            check_env: Vec::new(),
            check_path_dropped: Vec::new(),
            known_commits: Vec::new(),
            agent_commits: Vec::new(),
            global_config: String::new(),
            check_sandbox: None,
            check_user: None,
        }
    }

    /// The file's contents.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("strings, booleans and lists of them always serialize")
    }

    /// The settings at `path`: `Ok(None)` when there is no file (not inside bubblewrap:
    /// the guard then reads the configuration itself); an error when there is one that
    /// cannot be read or parsed (the guard refuses).
    pub fn read(path: &Path) -> Result<Option<HookGuardSettings>, SnapshotError> {
        read_json(path)
    }
}

/// The tool guard's settings (`RuntimeLayout::tool_guard_settings`): `tools.*` of the
/// configuration, with `tools.readOnly` on for a read-only project too. Every field is
/// required on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolGuardSettings {
    pub disallowed: Vec<String>,
    pub read_only: bool,
}

impl ToolGuardSettings {
    /// Where a container image keeps the settings the project's configuration gave when
    /// the image was built (root-owned; written by the Feature's install, read by the
    /// tool guard in addition to `/etc/agent-sandbox`'s config).
    pub const CONTAINER_PATH: &'static str = "/etc/agent-sandbox/tool-guard.json";

    /// The settings `config` gives: a read-only project (`"project": "ro"`,
    /// `--read-only`) makes the agent's edit tools denied too, with a clear answer
    /// instead of a failed write.
    pub fn from_config(config: &config::Config) -> ToolGuardSettings {
        ToolGuardSettings {
            disallowed: config.tools_disallowed.iter().map(|item| item.value.clone()).collect(),
            read_only: config.tools_read_only.value || config.project_read_only.value,
        }
    }

    /// The file's contents.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("strings and booleans always serialize")
    }

    /// The settings at `path`; `Ok(None)` when there is no file, an error when there is
    /// one that cannot be used (the guard then denies every call).
    pub fn read(path: &Path) -> Result<Option<ToolGuardSettings>, SnapshotError> {
        read_json(path)
    }
}

/// A settings file that is there but cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{} is unreadable", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    #[error("{} is unreadable", path.display())]
    Unparsable {
        path: PathBuf,
        #[source]
        error: serde_json::Error,
    },
}

/// The JSON value at `path`; `Ok(None)` when nothing is there.
fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, SnapshotError> {
    let bytes = match util::fs::read_regular(path, LIMIT) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(SnapshotError::Unreadable { path: path.to_path_buf(), error }),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|error| SnapshotError::Unparsable { path: path.to_path_buf(), error })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook_settings() -> HookGuardSettings {
        HookGuardSettings {
            check_commands: vec!["cargo test".into()],
            protected_paths: vec![".husky".into()],
            humans: true,
            secret_patterns: vec![".env".into()],
            secret_allow: vec![".env.example".into()],
            allow_branch_deletion: false,
            masked_paths: vec!["config/prod.key".into()],
            check_env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            check_path_dropped: vec!["/p/node_modules/.bin (in the project, which the agent writes)".into()],
            known_commits: vec!["0123456789abcdef0123456789abcdef01234567".into()],
            agent_commits: vec!["89abcdef0123456789abcdef0123456789abcdef".into()],
            global_config: "/home/u/.gitconfig".into(),
            check_sandbox: Some(CheckSandbox {
                bwrap: "/usr/bin/bwrap".into(),
                args: vec!["--unshare-pid".into(), "--".into(), "/bin/sh".into(), "-c".into()],
                env: vec![("PATH".into(), "/usr/bin".into())],
                runtime: "/run/user/1/agent-sandbox-x".into(),
                worktree: "/home/u/.local/state/agent-sandbox/push/x/worktree".into(),
            }),
            check_user: Some(CheckUser {
                uid: 998,
                gid: 998,
                env: vec![("HOME".into(), "/var/lib/agent-sandbox/push/work/home".into())],
                worktree: "/var/lib/agent-sandbox/push/work/tree".into(),
                project: "/workspace".into(),
                dependencies: vec!["node_modules".into()],
                hooks: Some("/var/lib/agent-sandbox/push/work/user-hooks".into()),
            }),
        }
    }

    #[test]
    fn git_guard_settings_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("git-guard.json");
        let settings = GitGuardSettings {
            allow_branch_deletion: true,
            allow_plumbing_commits: false,
            common_dir: Some("/p/.git".into()),
            hooks_path: Some("/p/.husky/_".into()),
            global_config: Some("/home/u/.gitconfig".into()),
            quiet_env: vec![("HUSKY".into(), "0".into())],
        };
        std::fs::write(&path, settings.to_json().expect("json")).expect("write");
        assert_eq!(GitGuardSettings::read(&path), settings);
    }

    #[test]
    fn git_guard_settings_keep_their_names_on_disk() {
        let settings = GitGuardSettings { allow_plumbing_commits: true, ..GitGuardSettings::default() };
        assert_eq!(
            settings.to_json().expect("json"),
            r#"{"allowBranchDeletion":false,"allowPlumbingCommits":true,"commonDir":null,"hooksPath":null,"globalConfig":null,"quietEnv":[]}"#
        );
    }

    #[test]
    fn git_guard_settings_fail_closed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("git-guard.json");
        let strict = GitGuardSettings::default();
        assert!(!strict.allow_branch_deletion && !strict.allow_plumbing_commits && strict.common_dir.is_none());
        assert_eq!(GitGuardSettings::read(&path), strict, "missing");
        std::fs::write(&path, r#"{"allowBranchDeletion": "yes", "commonDir": "/p/.git"}"#).expect("write");
        assert_eq!(GitGuardSettings::read(&path), strict, "unparsable");
        std::fs::write(&path, r#"{"commonDir": "/p/.git"}"#).expect("write");
        let partial = GitGuardSettings::read(&path);
        assert_eq!(partial, GitGuardSettings { common_dir: Some("/p/.git".into()), ..strict.clone() }, "partial");
        std::fs::remove_file(&path).expect("remove");
        mkfifo(&path);
        assert_eq!(GitGuardSettings::read(&path), strict, "a FIFO is not read (and does not block)");
    }

    #[test]
    fn hook_guard_settings_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hook-guard.json");
        assert!(matches!(HookGuardSettings::read(&path), Ok(None)), "missing");
        std::fs::write(&path, hook_settings().to_json()).expect("write");
        assert_eq!(HookGuardSettings::read(&path).expect("read"), Some(hook_settings()));
    }

    #[test]
    fn hook_guard_settings_keep_their_names_on_disk() {
        let value: serde_json::Value = serde_json::from_str(&hook_settings().to_json()).expect("json");
        assert_eq!(
            value,
            serde_json::json!({
                "checkCommands": ["cargo test"],
                "protectedPaths": [".husky"],
                "humans": true,
                "secretPatterns": [".env"],
                "secretAllow": [".env.example"],
                "allowBranchDeletion": false,
                "maskedPaths": ["config/prod.key"],
                "checkEnv": [["PATH", "/usr/bin:/bin"]],
                "checkPathDropped": ["/p/node_modules/.bin (in the project, which the agent writes)"],
                "knownCommits": ["0123456789abcdef0123456789abcdef01234567"],
                "agentCommits": ["89abcdef0123456789abcdef0123456789abcdef"],
                "globalConfig": "/home/u/.gitconfig",
                "checkSandbox": {
                    "bwrap": "/usr/bin/bwrap",
                    "args": ["--unshare-pid", "--", "/bin/sh", "-c"],
                    "env": [["PATH", "/usr/bin"]],
                    "runtime": "/run/user/1/agent-sandbox-x",
                    "worktree": "/home/u/.local/state/agent-sandbox/push/x/worktree",
                },
                "checkUser": {
                    "uid": 998,
                    "gid": 998,
                    "env": [["HOME", "/var/lib/agent-sandbox/push/work/home"]],
                    "worktree": "/var/lib/agent-sandbox/push/work/tree",
                    "project": "/workspace",
                    "dependencies": ["node_modules"],
                    "hooks": "/var/lib/agent-sandbox/push/work/user-hooks",
                },
            })
        );
    }

    #[test]
    fn hook_guard_settings_refuse_partial_or_special_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hook-guard.json");
        std::fs::write(&path, r#"{"checkCommands": []}"#).expect("write");
        let err = HookGuardSettings::read(&path).expect_err("partial");
        assert_eq!(err.to_string(), format!("{} is unreadable", path.display()));
        std::fs::remove_file(&path).expect("remove");
        mkfifo(&path);
        assert!(HookGuardSettings::read(&path).is_err(), "a FIFO is refused (and does not block)");
        std::fs::remove_file(&path).expect("remove");
        std::fs::create_dir(&path).expect("mkdir");
        assert!(HookGuardSettings::read(&path).is_err(), "a directory");
    }

    fn mkfifo(path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("no NUL");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    }
}
