//! `agent-sandbox hooks install|uninstall`: puts agent-sandbox's hook guard in front of a
//! repository's `pre-commit` and `pre-push` hooks without losing the hooks already there.
//! Whatever sits at `<hooks dir>/<hook>` (a plain script, a symlink, husky's, the
//! pre-commit framework's or lefthook's generated script) is renamed to
//! `<hook>.agent-sandbox-chained` and a small shell shim takes its place; the shim runs
//! `agent-sandbox hook <hook>`, which runs its checks and then the chained hook. A state
//! file in the hooks directory records what was done, so `uninstall` restores exactly
//! what was there. Everything is checked before anything changes, and a failure half way
//! through an install undoes what it had done.

#![forbid(unsafe_code)]

mod health;
mod install;
mod location;
mod shim;
mod state;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The hooks the guard is put in front of.
pub const HOOKS: &[&str] = &["pre-commit", "pre-push"];

/// Suffix of the displaced original hook, which the guard runs after its own checks.
pub const CHAINED_SUFFIX: &str = ".agent-sandbox-chained";

/// The line that marks a hook file as agent-sandbox's shim.
pub const MARKER: &str = "# agent-sandbox hook guard";

/// Name of the state file `install` leaves in the hooks directory.
pub const STATE_FILE: &str = ".agent-sandbox-hooks.json";

/// What `install` or `uninstall` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The hooks directory acted on.
    pub hooks_dir: PathBuf,
    /// One human-readable line per thing done (or deliberately not done).
    pub actions: Vec<String>,
}

/// Everything that can stop `hooks install` / `hooks uninstall`; each message names the
/// path involved and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// No repository at or above the starting directory.
    #[error("not a git repository: {} ({error}; run it inside a repository)", path.display())]
    NotARepository {
        /// Where the search started.
        path: PathBuf,
        /// Why gix found none.
        error: String,
    },
    /// `core.hooksPath` could not be resolved (for example `~user/` of an unknown user).
    #[error(
        "cannot resolve core.hooksPath of the repository at {}: {error} (fix it with `git config core.hooksPath DIR`, or unset it)",
        repo.display()
    )]
    HooksPath {
        /// The repository's git directory.
        repo: PathBuf,
        /// What went wrong.
        error: String,
    },
    /// `core.hooksPath` is set to the empty string, which git does not treat as unset.
    #[error(
        "core.hooksPath is empty for the repository at {} (set it to a directory with `git config core.hooksPath DIR`, or unset it)",
        repo.display()
    )]
    EmptyHooksPath {
        /// The repository's git directory.
        repo: PathBuf,
    },
    /// The hooks directory exists but is not a directory.
    #[error(
        "the hooks directory {} exists but is not a directory (move it aside, or point core.hooksPath at a directory)",
        path.display()
    )]
    NotADirectory {
        /// The effective hooks directory.
        path: PathBuf,
    },
    /// A chained original is already there while the hook itself is not the shim:
    /// installing would overwrite one of them.
    #[error(
        "{} already exists and {} is not agent-sandbox's shim, so installing would overwrite one of them (typically the hook was regenerated, e.g. by husky on `npm install`, after an earlier install; run `agent-sandbox hooks uninstall` first, or move one of the two files aside)",
        chained.display(),
        hook.display()
    )]
    ChainedExists {
        /// `<dir>/<hook>`.
        hook: PathBuf,
        /// `<dir>/<hook>.agent-sandbox-chained`.
        chained: PathBuf,
    },
    /// The agent-sandbox path to write into the shim is relative.
    #[error("the agent-sandbox path {} is not absolute (pass the absolute path of the agent-sandbox binary)", path.display())]
    RelativeBinary {
        /// The path given.
        path: PathBuf,
    },
    /// The agent-sandbox path cannot be written into a shell script.
    #[error("the agent-sandbox path {} is not valid UTF-8 (install agent-sandbox under a UTF-8 path)", path.display())]
    NonUtf8Binary {
        /// The path given.
        path: PathBuf,
    },
    /// The state file is not one this version wrote.
    #[error(
        "cannot use the state file {}: {error} (put the hooks back by hand from the *{CHAINED_SUFFIX} files next to it, then delete it)",
        path.display()
    )]
    State {
        /// `<dir>/.agent-sandbox-hooks.json`.
        path: PathBuf,
        /// Why it cannot be used.
        error: String,
    },
    /// A file operation failed.
    #[error("cannot {action} {}: {error} (check that the path exists and you may write to it)", path.display())]
    Io {
        /// What was being done ("read", "rename", …).
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The operating system's error.
        error: std::io::Error,
    },
}

pub use health::problems;

/// The hooks directory git uses for the repository containing `start` (found with gix:
/// `core.hooksPath` from every config file git reads, resolved like git resolves it —
/// relative to the work tree top, `~/` expanded — else `<common git dir>/hooks`, so a
/// linked worktree gets the main repository's hooks).
pub fn hooks_dir(start: &Path) -> Result<PathBuf, InstallError> {
    location::hooks_dir(start)
}

/// Puts the guard shim in front of each of [`HOOKS`] in the hooks directory of the
/// repository containing `start`, chaining whatever hook was there. `agent_sandbox` is
/// the absolute path of the agent-sandbox binary, written into the shim as the last
/// place to look for it. An existing shim is left alone unless `force`, which rewrites
/// it; `force` never touches a hook that is not the shim.
pub fn install(start: &Path, agent_sandbox: &Path, force: bool) -> Result<Report, InstallError> {
    install::install(start, agent_sandbox, force)
}

/// Removes the shims `install` put in the hooks directory of the repository containing
/// `start` and puts the chained hooks back. A shim someone has since replaced or edited
/// is left alone (and reported). Without an install this does nothing and says so.
pub fn uninstall(start: &Path) -> Result<Report, InstallError> {
    install::uninstall(start)
}

/// For the guard: the hook that was there before, if any (`<dir>/<hook>.agent-sandbox-chained`),
/// and only if git would have run it (it resolves to an executable file).
///
/// Executing this path directly changes the hook's `$0`, which breaks scripts that look
/// at their own name, husky's among them: [`chained_command`] runs it as git would have.
pub fn chained_hook(hooks_dir: &Path, hook: &str) -> Option<PathBuf> {
    shim::chained_hook(hooks_dir, hook)
}

/// For the guard: the command that runs the chained hook the way git would have run the
/// original, or `None` when there is none (see [`chained_hook`]). Add the hook's
/// arguments and let stdin through. A script with a plain `#!/bin/sh`,
/// `#!/usr/bin/env sh`, `#!/bin/bash` or `#!/usr/bin/env bash` line runs in that shell
/// with `$0` set to `<dir>/<hook>`, as when git ran it (husky's scripts find the user's
/// hook by their own name); anything else is executed directly.
pub fn chained_command(hooks_dir: &Path, hook: &str) -> Option<Command> {
    shim::chained_command(hooks_dir, hook)
}
