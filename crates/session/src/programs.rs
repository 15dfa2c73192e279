//! Where programs are searched: the command inside the sandbox (is it there, and
//! visible with what its links lead to), and the programs the host runs on the agent's
//! behalf (bwrap, the push's git) or the checks run, each only from a `PATH` entry the
//! agent cannot have written (`policy::path_search`).

use std::path::{Path, PathBuf};

use anyhow::Result;
use policy::{Context, Mount};

/// Whether `command` can be started inside: found on the sandbox's `PATH` (or at its
/// path), and visible there together with what its symlinks lead to (`~/.local/bin/x`
/// → `~/.local/share/x/versions/1/x`). The error says what is missing and the flag that
/// adds it.
pub(crate) fn find_inside(
    command: &std::ffi::OsStr,
    path_var: Option<&std::ffi::OsStr>,
    cwd: &Path,
    mounts: &[Mount],
) -> std::result::Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let name = Path::new(command);
    let candidates: Vec<PathBuf> = if name.components().count() > 1 || name.is_absolute() {
        vec![cwd.join(name)]
    } else {
        std::env::split_paths(path_var.unwrap_or_default())
            .filter(|dir| !dir.starts_with(sandbox::plan::RUNTIME_DIR))
            .map(|dir| cwd.join(dir).join(name))
            .collect()
    };
    let mut hidden = None;
    for candidate in &candidates {
        let executable =
            candidate.metadata().is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0);
        if !executable {
            continue;
        }
        let real = candidate.canonicalize().unwrap_or_else(|_| candidate.clone());
        match (policy::is_visible(candidate, mounts), policy::is_visible(&real, mounts)) {
            (true, true) => return Ok(()),
            (false, _) => hidden = hidden.or(Some((candidate.clone(), candidate.clone()))),
            (true, false) => hidden = hidden.or(Some((candidate.clone(), real))),
        }
    }
    let shown = name.display();
    match hidden {
        Some((found, missing)) => {
            let dir = missing.parent().unwrap_or(&missing);
            let what = if found == missing {
                format!("{} is not visible inside", found.display())
            } else {
                format!("{} leads to {}, which is not visible inside", found.display(), missing.display())
            };
            Err(format!(
                "{shown}: {what} (show it read-only with --ro {}, or add it to filesystem.ro in the config)",
                dir.display()
            ))
        }
        None if candidates.len() == 1 && !name.is_relative() || name.components().count() > 1 => {
            Err(format!("{shown}: no such executable file"))
        }
        None => Err(format!("{shown}: command not found on the sandbox's PATH")),
    }
}

/// bwrap from a `PATH` entry `policy::path_search` keeps (on the host: absolute, outside
/// the project and every writable grant), and itself not a link into such a place: a
/// relative entry (`node_modules/.bin`) or one the agent can write would run a bwrap the
/// agent planted, on the host, unsandboxed.
pub(crate) fn find_bwrap(
    ctx: &Context,
    mounts: &[Mount],
    host_path: &policy::path_search::SearchPath,
) -> Result<PathBuf> {
    find_host_program("bwrap", ctx, mounts, host_path).ok_or_else(|| sandbox::run::RunError::BwrapMissing.into())
}

/// A program the host runs on the agent's behalf (bwrap, the push's git), found as
/// [`find_bwrap`] says, in `host_path` ([`host_path`]): only where the agent cannot
/// have put it.
pub(crate) fn find_host_program(
    name: &str,
    ctx: &Context,
    mounts: &[Mount],
    host_path: &policy::path_search::SearchPath,
) -> Option<PathBuf> {
    let real = |path: &Path| path.canonicalize().ok();
    let facts = search_facts(ctx, mounts, &real, None);
    host_path
        .kept
        .iter()
        .map(|dir| dir.join(name))
        .filter(|candidate| candidate.is_file())
        .find(|candidate| policy::path_search::judge(candidate, &facts).is_ok())
}

/// The start `PATH` less every entry the agent can write: what the host's own programs
/// search (the push's git runs `ssh`, `git-receive-pack` and credential helpers from
/// its `PATH`, each with the user's credentials at hand).
pub(crate) fn host_path(ctx: &Context, mounts: &[Mount]) -> policy::path_search::SearchPath {
    let real = |path: &Path| path.canonicalize().ok();
    let path = std::env::var_os("PATH").unwrap_or_default();
    policy::path_search::decide(&path, &search_facts(ctx, mounts, &real, None))
}

/// The `PATH` the checks search (`path_var`, the start `PATH`): only directories shown
/// read-only in the sandbox, outside the project, every writable grant and the runtime
/// directory.
pub(crate) fn checks_path(
    path_var: &std::ffi::OsStr,
    ctx: &Context,
    mounts: &[Mount],
) -> policy::path_search::SearchPath {
    let real = |path: &Path| path.canonicalize().ok();
    let runtime = [Path::new(sandbox::plan::RUNTIME_DIR)];
    policy::path_search::decide(path_var, &search_facts(ctx, mounts, &real, Some(&runtime)))
}

/// What `policy::path_search` judges against: for the host's own programs
/// (`inside_runtime` `None`), or for what the sandbox runs (the checks), where its
/// runtime directory and whatever no mount shows read-only are no place for tools either.
fn search_facts<'a>(
    ctx: &'a Context,
    mounts: &'a [Mount],
    real: &'a dyn Fn(&Path) -> Option<PathBuf>,
    inside_runtime: Option<&'a [&'a Path]>,
) -> policy::path_search::SearchFacts<'a> {
    policy::path_search::SearchFacts {
        project_root: &ctx.project_root,
        mounts,
        runtime_dirs: inside_runtime.unwrap_or_default(),
        inside: inside_runtime.is_some(),
        real,
    }
}
