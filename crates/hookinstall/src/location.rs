//! Where git looks for a repository's hooks: `core.hooksPath` as git resolves it (gix
//! reads every configuration file git would, honours `GIT_DIR` and friends, and expands
//! `~/`), relative values taken from the top of the work tree (the git directory of a
//! bare repository), else the `hooks` directory of the common git directory, which a
//! linked worktree shares with its main repository.

use std::path::{Path, PathBuf};

use crate::InstallError;

pub(crate) fn hooks_dir(start: &Path) -> Result<PathBuf, InstallError> {
    let start = std::path::absolute(start).map_err(|error| InstallError::Io {
        action: "resolve",
        path: start.to_path_buf(),
        error,
    })?;
    let repo = gix::ThreadSafeRepository::discover_with_environment_overrides(&start)
        .map_err(|error| InstallError::NotARepository { path: start.clone(), error: error.to_string() })?
        .to_thread_local();
    let config = repo.config_snapshot();
    // git takes an empty value literally (and then finds no hooks); gix reports it as
    // unset, which would put the shims where git does not look.
    if config.string("core.hooksPath").is_some_and(|value| value.is_empty()) {
        return Err(InstallError::EmptyHooksPath { repo: repo.git_dir().to_path_buf() });
    }
    let configured = config
        .trusted_path("core.hooksPath")
        .map_err(|error| InstallError::HooksPath { repo: repo.git_dir().to_path_buf(), error: error.to_string() })?;
    let dir = match configured {
        // Hooks run in the top of the work tree, so that is what a relative path is
        // relative to (in a linked worktree: that worktree's top, as with git).
        Some(path) => repo.workdir().unwrap_or_else(|| repo.git_dir()).join(path),
        None => repo.common_dir().join("hooks"),
    };
    Ok(canonical(&dir))
}

/// `path` with symlinks and `..` resolved as far as it exists; the missing rest is
/// appended as it is (`..` after a missing component is not cancelled out lexically,
/// since the kernel would not either).
fn canonical(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut existing = path;
    loop {
        if let Ok(resolved) = existing.canonicalize() {
            return missing.iter().rev().fold(resolved, |dir, name| dir.join(name));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name);
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}
