//! `install` and `uninstall`, each in two phases: look at every hook and decide (a plan
//! of steps, or an error before anything changed), then carry the steps out. A failed
//! install step undoes the steps before it; uninstall steps each restore something, so
//! a failed uninstall can simply be run again.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::state::{self, HookRecord, State};
use crate::{location, shim, InstallError, Report, HOOKS, STATE_FILE};

pub(crate) fn install(start: &Path, agent_sandbox: &Path, force: bool) -> Result<Report, InstallError> {
    let dir = location::hooks_dir(start)?;
    let missing_dirs = missing_levels(&dir)?;
    let state_path = dir.join(STATE_FILE);
    let old_state = state::read(&state_path)?;
    let mut new_state = State::new(old_state.as_ref().map_or(missing_dirs, |state| state.created_dirs));
    let mut steps = Vec::new();
    let mut actions = Vec::new();
    if missing_dirs > 0 {
        steps.push(Step::CreateDirs { dir: dir.clone(), levels: missing_dirs });
        actions.push(format!("created the hooks directory {}", dir.display()));
    }

    for &hook in HOOKS {
        let record = plan_hook(hook, &dir, agent_sandbox, (force, old_state.as_ref()), (&mut steps, &mut actions))?;
        new_state.hooks.insert(hook.to_string(), record);
    }

    if old_state.as_ref() != Some(&new_state) {
        let previous = match old_state {
            Some(_) => Some(read(&state_path)?),
            None => None,
        };
        actions.push(format!("recorded the install in {}", state_path.display()));
        steps.push(Step::WriteState { path: state_path, text: new_state.to_json(), previous });
    }
    run_with_undo(steps)?;
    Ok(Report { hooks_dir: dir, actions })
}

/// The steps that put the guard shim in front of `hook` in `dir`, and the record of it.
fn plan_hook(
    hook: &str,
    dir: &Path,
    agent_sandbox: &Path,
    (force, old_state): (bool, Option<&State>),
    (steps, actions): (&mut Vec<Step>, &mut Vec<String>),
) -> Result<HookRecord, InstallError> {
    let found = inspect(dir, hook)?;
    let shim = shim::render(hook, agent_sandbox)?;
    let (path, chained) = (found.path, found.chained);
    let record = match found.current {
        Current::Shim { contents, mode } if force => {
            actions.push(format!("{hook}: rewrote the guard shim {} (--force)", path.display()));
            steps.push(Step::WriteShim { path, text: shim.clone(), previous: Some((contents, mode)) });
            HookRecord { chained: found.chained_exists, shim }
        }
        Current::Shim { contents, .. } => {
            actions.push(format!("{hook}: the guard shim {} is already installed; nothing changed", path.display()));
            let recorded = old_state.and_then(|state| state.hooks.get(hook));
            recorded.cloned().unwrap_or_else(|| HookRecord {
                chained: found.chained_exists,
                shim: String::from_utf8_lossy(&contents).into_owned(),
            })
        }
        // Not ours, and the place for the chained original is taken: never clobber
        // either, whatever `force` says. The usual cause is husky (v9): it keeps its
        // generated hooks in `.husky/_`, which `core.hooksPath` names, so that is where
        // the shims go, chaining husky's `_/pre-commit`; but its `prepare` script
        // (`npm install`) rewrites every file in `.husky/_`, the shims included, after
        // which `hooks install` must be run again and lands here, since the old
        // `pre-commit.agent-sandbox-chained` is still there.
        // ...unless the hook there is byte- and mode-identical to the kept copy: husky
        // regenerated it, so the copy already holds it and the shim goes back in front.
        Current::Other if found.chained_exists && same_file(&path, &chained)? => {
            actions.push(format!(
                "{hook}: {} was regenerated identical to the hook kept at {} (as husky does on `npm install`); \
                 put the guard shim back in front of it",
                path.display(),
                chained.display()
            ));
            let previous = read(&path)?;
            let mode = lstat(&path)?.map_or(0o755, |meta| meta.permissions().mode());
            steps.push(Step::WriteShim { path, text: shim.clone(), previous: Some((previous, mode)) });
            HookRecord { chained: true, shim }
        }
        _ if found.chained_exists => return Err(InstallError::ChainedExists { hook: path, chained }),
        Current::Other => {
            actions.push(format!(
                "{hook}: moved the existing hook to {} and put the guard shim in its place",
                chained.display()
            ));
            steps.push(Step::Chain { path: path.clone(), chained });
            steps.push(Step::WriteShim { path, text: shim.clone(), previous: None });
            HookRecord { chained: true, shim }
        }
        Current::Missing => {
            actions.push(format!("{hook}: no hook was there; installed the guard shim {}", path.display()));
            steps.push(Step::WriteShim { path, text: shim.clone(), previous: None });
            HookRecord { chained: false, shim }
        }
    };
    Ok(record)
}

pub(crate) fn uninstall(start: &Path) -> Result<Report, InstallError> {
    let dir = location::hooks_dir(start)?;
    let state_path = dir.join(STATE_FILE);
    let state = state::read(&state_path)?;
    let mut report = Report { hooks_dir: dir.clone(), actions: Vec::new() };

    // Decide everything first.
    let mut plans = Vec::new();
    let hooks: Vec<&str> = match &state {
        Some(state) => state.hooks.keys().map(String::as_str).collect(),
        None => HOOKS.to_vec(),
    };
    for hook in hooks {
        let Some(&hook) = HOOKS.iter().find(|known| **known == hook) else {
            return Err(InstallError::State { path: state_path, error: format!("unknown hook {hook:?}") });
        };
        let record = state.as_ref().and_then(|state| state.hooks.get(hook));
        let found = inspect(&dir, hook)?;
        if record.is_none() && matches!(found.current, Current::Other | Current::Missing) && !found.chained_exists {
            continue; // No state file and nothing of ours for this hook.
        }
        let plan = match &found.current {
            Current::Shim { contents, .. } if record.is_none_or(|record| record.shim.as_bytes() == contents) => {
                if found.chained_exists {
                    UninstallPlan::PutBack
                } else if record.is_some_and(|record| record.chained) {
                    UninstallPlan::RemoveShimChainedLost
                } else {
                    UninstallPlan::RemoveShim
                }
            }
            Current::Shim { .. } => UninstallPlan::LeaveEdited,
            Current::Other if found.chained_exists && same_file(&found.path, &found.chained)? => {
                UninstallPlan::DropRegeneratedCopy
            }
            Current::Other => UninstallPlan::LeaveReplaced,
            Current::Missing if found.chained_exists => UninstallPlan::PutBackShimGone,
            Current::Missing => UninstallPlan::NothingThere,
        };
        plans.push((hook, found, plan));
    }
    if state.is_none() && plans.is_empty() {
        report.actions.push(format!("no agent-sandbox hooks are installed in {}; nothing to do", dir.display()));
        return Ok(report);
    }

    // Then act.
    for (hook, found, plan) in plans {
        let (path, chained) = (&found.path, &found.chained);
        let left_chained = if found.chained_exists {
            format!(", and left the earlier hook at {} (move it back yourself if you want it)", chained.display())
        } else {
            String::new()
        };
        let action = match plan {
            UninstallPlan::PutBack => {
                // One rename replaces the shim with the original: no moment without a hook.
                rename(chained, path)?;
                format!("{hook}: removed the guard shim and put the earlier hook back at {}", path.display())
            }
            UninstallPlan::RemoveShim => {
                remove_file(path)?;
                format!("{hook}: removed the guard shim {} (there was no hook before)", path.display())
            }
            UninstallPlan::RemoveShimChainedLost => {
                remove_file(path)?;
                format!(
                    "{hook}: removed the guard shim {}; the earlier hook it chained ({}) was gone, so there is nothing to put back",
                    path.display(),
                    chained.display()
                )
            }
            UninstallPlan::LeaveEdited => format!(
                "{hook}: {} was edited since it was installed; left it as it is{left_chained} (delete it yourself, or run `agent-sandbox hooks install --force` and uninstall again)",
                path.display()
            ),
            UninstallPlan::DropRegeneratedCopy => {
                remove_file(chained)?;
                format!(
                    "{hook}: {} was regenerated identical to the earlier hook kept at {} (as husky does on `npm install`); removed that copy",
                    path.display(),
                    chained.display()
                )
            }
            UninstallPlan::LeaveReplaced => format!(
                "{hook}: {} is no longer agent-sandbox's shim (something replaced it); left it as it is{left_chained}",
                path.display()
            ),
            UninstallPlan::PutBackShimGone => {
                rename(chained, path)?;
                format!("{hook}: the guard shim was already gone; put the earlier hook back at {}", path.display())
            }
            UninstallPlan::NothingThere => {
                format!("{hook}: neither the guard shim nor an earlier hook is there any more; nothing to do")
            }
        };
        report.actions.push(action);
    }

    if let Some(state) = state {
        remove_file(&state_path)?;
        report.actions.push(format!("removed {}", state_path.display()));
        let mut created = Some(dir.as_path());
        for _ in 0..state.created_dirs {
            let Some(created_dir) = created else { break };
            if let Err(error) = std::fs::remove_dir(created_dir) {
                report
                    .actions
                    .push(format!("left the directory {} that install created: {error}", created_dir.display()));
                break;
            }
            report.actions.push(format!("removed the directory {} that install created", created_dir.display()));
            created = created_dir.parent();
        }
    }
    Ok(report)
}

/// What is at `<dir>/<hook>`.
enum Current {
    Missing,
    /// A regular file with the marker line.
    Shim {
        contents: Vec<u8>,
        mode: u32,
    },
    /// Anything else: a hook of the user's or a hook manager's, a symlink, ….
    Other,
}

struct Found {
    /// `<dir>/<hook>`.
    path: PathBuf,
    /// `<dir>/<hook>.agent-sandbox-chained`.
    chained: PathBuf,
    current: Current,
    chained_exists: bool,
}

fn inspect(dir: &Path, hook: &str) -> Result<Found, InstallError> {
    let path = dir.join(hook);
    let chained = shim::chained_path(dir, hook);
    let current = match lstat(&path)? {
        None => Current::Missing,
        Some(meta) if meta.file_type().is_file() => {
            let contents = read(&path)?;
            if shim::has_marker(&contents) {
                Current::Shim { contents, mode: meta.permissions().mode() }
            } else {
                Current::Other
            }
        }
        Some(_) => Current::Other,
    };
    let chained_exists = lstat(&chained)?.is_some();
    Ok(Found { path, chained, current, chained_exists })
}

enum UninstallPlan {
    /// Our shim with the original chained: rename the original over it.
    PutBack,
    /// Our shim, nothing was there before.
    RemoveShim,
    /// Our shim; an original was chained but is gone.
    RemoveShimChainedLost,
    /// Has the marker but not what we wrote.
    LeaveEdited,
    /// Not ours, but byte- and mode-identical to the chained original (husky rewrote it).
    DropRegeneratedCopy,
    /// Not ours.
    LeaveReplaced,
    /// Our shim was removed by someone; the original is still chained.
    PutBackShimGone,
    /// Neither there.
    NothingThere,
}

/// One change `install` makes.
enum Step {
    /// Create `dir` and the `levels - 1` missing directories above it.
    CreateDirs { dir: PathBuf, levels: usize },
    /// Rename the existing hook to its chained name.
    Chain { path: PathBuf, chained: PathBuf },
    /// Write a shim, replacing `previous` (contents, mode) if set, else where nothing is.
    WriteShim { path: PathBuf, text: String, previous: Option<(Vec<u8>, u32)> },
    /// Write the state file, replacing `previous` if set.
    WriteState { path: PathBuf, text: String, previous: Option<Vec<u8>> },
}

/// How to take one carried-out step back.
enum Undo {
    RemoveDirs { dir: PathBuf, levels: usize },
    Rename { from: PathBuf, to: PathBuf },
    Remove(PathBuf),
    Restore { path: PathBuf, contents: Vec<u8>, mode: u32 },
}

/// Carries out `steps` in order; on a failure, undoes the ones done (best effort) and
/// returns the failure.
fn run_with_undo(steps: Vec<Step>) -> Result<(), InstallError> {
    let mut done = Vec::new();
    for step in steps {
        match apply(step) {
            Ok(undo) => done.push(undo),
            Err(error) => {
                for undo in done.into_iter().rev() {
                    undo_step(undo);
                }
                return Err(error);
            }
        }
    }
    Ok(())
}

fn apply(step: Step) -> Result<Undo, InstallError> {
    Ok(match step {
        Step::CreateDirs { dir, levels } => {
            std::fs::create_dir_all(&dir).map_err(|error| io_error("create", &dir, error))?;
            Undo::RemoveDirs { dir, levels }
        }
        Step::Chain { path, chained } => {
            // A rename keeps the hook as it was: contents, mode, symlink or not.
            rename(&path, &chained)?;
            Undo::Rename { from: chained, to: path }
        }
        Step::WriteShim { path, text, previous } => {
            write_file(&path, text.as_bytes(), 0o755, previous.is_some())?;
            match previous {
                Some((contents, mode)) => Undo::Restore { path, contents, mode },
                None => Undo::Remove(path),
            }
        }
        Step::WriteState { path, text, previous } => {
            write_file(&path, text.as_bytes(), 0o644, true)?;
            match previous {
                Some(contents) => Undo::Restore { path, contents, mode: 0o644 },
                None => Undo::Remove(path),
            }
        }
    })
}

fn undo_step(undo: Undo) {
    // Best effort: the error that caused the undo is what gets reported.
    let _ = match undo {
        Undo::RemoveDirs { dir, levels } => {
            let mut created = Some(dir.as_path());
            for _ in 0..levels {
                let Some(created_dir) = created else { break };
                if std::fs::remove_dir(created_dir).is_err() {
                    break;
                }
                created = created_dir.parent();
            }
            Ok(())
        }
        Undo::Rename { from, to } => rename(&from, &to),
        Undo::Remove(path) => remove_file(&path),
        Undo::Restore { path, contents, mode } => write_file(&path, &contents, mode, true),
    };
}

/// How many directories, from `dir` up, do not exist yet.
fn missing_levels(dir: &Path) -> Result<usize, InstallError> {
    let mut levels = 0;
    let mut current = Some(dir);
    while let Some(path) = current {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => return Ok(levels),
            Ok(_) => return Err(InstallError::NotADirectory { path: path.to_path_buf() }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                levels += 1;
                current = path.parent();
            }
            Err(error) => return Err(io_error("inspect", path, error)),
        }
    }
    Ok(levels)
}

/// True when both are regular files (not symlinks) with the same contents and mode.
fn same_file(one: &Path, other: &Path) -> Result<bool, InstallError> {
    let (Some(one_meta), Some(other_meta)) = (lstat(one)?, lstat(other)?) else { return Ok(false) };
    if !one_meta.file_type().is_file()
        || !other_meta.file_type().is_file()
        || one_meta.permissions().mode() != other_meta.permissions().mode()
    {
        return Ok(false);
    }
    Ok(read(one)? == read(other)?)
}

/// Writes `contents` with `mode` through a temporary file in the same directory, so the
/// file appears whole; replaces an existing file only if `replace`.
fn write_file(path: &Path, contents: &[u8], mode: u32, replace: bool) -> Result<(), InstallError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut file = tempfile::Builder::new()
        .prefix(".agent-sandbox-")
        .tempfile_in(dir)
        .map_err(|error| io_error("create a file in", dir, error))?;
    file.write_all(contents).map_err(|error| io_error("write", file.path(), error))?;
    std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(mode))
        .map_err(|error| io_error("set the mode of", file.path(), error))?;
    let persisted = if replace { file.persist(path) } else { file.persist_noclobber(path) };
    persisted.map_err(|error| io_error("write", path, error.error))?;
    Ok(())
}

fn lstat(path: &Path) -> Result<Option<std::fs::Metadata>, InstallError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some(meta)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(io_error("inspect", path, error)),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, InstallError> {
    std::fs::read(path).map_err(|error| io_error("read", path, error))
}

fn rename(from: &Path, to: &Path) -> Result<(), InstallError> {
    std::fs::rename(from, to).map_err(|error| io_error("rename", from, error))
}

fn remove_file(path: &Path) -> Result<(), InstallError> {
    std::fs::remove_file(path).map_err(|error| io_error("remove", path, error))
}

fn io_error(action: &'static str, path: &Path, error: std::io::Error) -> InstallError {
    InstallError::Io { action, path: path.to_path_buf(), error }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).expect("lstat").permissions().mode() & 0o7777
    }

    #[test]
    fn a_failed_step_undoes_the_steps_before_it() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let top = tmp.path().join("a");
        let dir = top.join("b/hooks");
        let steps = vec![
            Step::CreateDirs { dir: dir.clone(), levels: 3 },
            Step::WriteShim { path: dir.join("pre-commit"), text: "shim\n".into(), previous: None },
            Step::Chain { path: dir.join("missing"), chained: dir.join("missing.chained") },
        ];
        let err = run_with_undo(steps).expect_err("the rename fails");
        assert!(matches!(err, InstallError::Io { action: "rename", .. }), "{err}");
        assert!(!top.exists(), "the created directories were not removed");
    }

    #[test]
    fn undo_puts_back_renamed_hooks_and_rewritten_files_with_their_modes() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        std::fs::write(dir.join("pre-push"), "user hook\n").expect("write");
        std::fs::set_permissions(dir.join("pre-push"), std::fs::Permissions::from_mode(0o750)).expect("chmod");
        std::fs::write(dir.join("pre-commit"), "old shim\n").expect("write");
        std::fs::set_permissions(dir.join("pre-commit"), std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let steps = vec![
            Step::Chain { path: dir.join("pre-push"), chained: dir.join("pre-push.chained") },
            Step::WriteShim { path: dir.join("pre-push"), text: "shim\n".into(), previous: None },
            Step::WriteShim {
                path: dir.join("pre-commit"),
                text: "new shim\n".into(),
                previous: Some((b"old shim\n".to_vec(), 0o700)),
            },
            Step::Chain { path: dir.join("missing"), chained: dir.join("missing.chained") },
        ];
        run_with_undo(steps).expect_err("the last rename fails");
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["pre-commit", "pre-push"]);
        assert_eq!(std::fs::read_to_string(dir.join("pre-push")).expect("read"), "user hook\n");
        assert_eq!(mode(&dir.join("pre-push")), 0o750);
        assert_eq!(std::fs::read_to_string(dir.join("pre-commit")).expect("read"), "old shim\n");
        assert_eq!(mode(&dir.join("pre-commit")), 0o700);
    }

    #[test]
    fn a_new_shim_never_replaces_a_file_that_appeared_meanwhile() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("pre-commit");
        std::fs::write(&path, "someone else's\n").expect("write");
        let err = run_with_undo(vec![Step::WriteShim { path: path.clone(), text: "shim\n".into(), previous: None }])
            .expect_err("no clobber");
        assert!(matches!(err, InstallError::Io { action: "write", .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "someone else's\n");
        assert_eq!(std::fs::read_dir(tmp.path()).expect("read_dir").count(), 1, "a temporary file was left");
    }
}
