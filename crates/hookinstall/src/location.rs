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
    let repo = gitfacts::discover(&start)
        .map_err(|error| InstallError::NotARepository { path: start.clone(), error: error.to_string() })?;
    match gitfacts::hooks_dir(&repo) {
        Ok(Some(dir)) => Ok(dir),
        // git takes an empty value literally (and then finds no hooks): there is nowhere
        // to install.
        Ok(None) => Err(InstallError::EmptyHooksPath { repo: repo.git_dir().to_path_buf() }),
        Err(error) => Err(InstallError::HooksPath { repo: repo.git_dir().to_path_buf(), error: error.to_string() }),
    }
}
