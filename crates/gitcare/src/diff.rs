//! The pure comparison of two [`State`]s, and the few lines that carry its verdict out.

use std::path::{Path, PathBuf};

use crate::{State, Watch};

/// What the check does about one finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Move `path` aside (or, failing that, delete it), saying `why`.
    Quarantine { path: PathBuf, why: &'static str },
}

/// What to do about the differences between `before` (start) and `now` (exit).
pub fn diff(watch: &Watch, before: &State, now: &State) -> Vec<Action> {
    let mut actions = Vec::new();
    let then_of = |path: &Path| before.files.get(path).cloned().flatten();
    let now_of = |path: &Path| now.files.get(path).cloned().flatten();
    let quarantine = |path: &Path, why| Action::Quarantine { path: path.to_path_buf(), why };
    // A repository the session made at the project root is the agent's, hooks and all.
    if !before.had_git && now.had_git {
        actions.push(quarantine(
            &watch.project_root.join(".git"),
            "is a repository created inside the sandbox, with its configuration and hooks",
        ));
        return actions;
    }
    for dir in &now.unexamined {
        actions.push(quarantine(
            dir,
            "could not be examined (made unreadable inside the sandbox), so git could find a repository behind it",
        ));
    }
    // The project's `.git` when it is not a directory: a file or link changed, or made a
    // directory, would lead the user's git to another repository.
    let dot_git = watch.project_root.join(".git");
    if then_of(&dot_git) != now_of(&dot_git) || now_of(&dot_git).is_some_and(|content| !content.is_examined()) {
        actions.push(quarantine(&dot_git, "would change which repository, configuration or hooks git uses"));
    }
    // A hooks directory (`core.hooksPath`) that did not exist at start (one that did is
    // read-only inside).
    for path in &watch.extra {
        let Some(current) = now_of(path) else { continue };
        if Some(&current) != then_of(path).as_ref() || !current.is_examined() {
            actions.push(quarantine(path, "would change which repository, configuration or hooks git uses"));
        }
    }
    for path in &watch.host_files {
        if now_of(path).is_some() && now_of(path) != then_of(path) {
            actions.push(quarantine(
                path,
                "is run on the host later (an editor task, direnv, an agent's settings or hooks) and was written \
                 inside the sandbox",
            ));
        }
    }
    for path in &now.host_copies {
        let current = now_of(path);
        if !before.host_copies.contains(path)
            || current != then_of(path)
            || current.is_some_and(|content| !content.is_examined())
        {
            actions.push(quarantine(
                path,
                "is a copy in a subdirectory of a file run on the host later (an editor opening that folder, direnv \
                 on `cd`), written inside the sandbox",
            ));
        }
    }
    // Also in dependency trees: one `git add` of a clone there makes the project's
    // `git status` run git in it.
    let changed = |known: &std::collections::BTreeMap<PathBuf, Vec<PathBuf>>, entry: &Path, files: &[PathBuf]| {
        !known.contains_key(entry)
            || files.iter().any(|file| {
                let current = now_of(file);
                current != then_of(file) || current.is_some_and(|content| !content.is_examined())
            })
    };
    for (entry, files) in &now.nested {
        if changed(&before.nested, entry, files) && !now.worktree_gitlinks.contains(entry) {
            actions
                .push(quarantine(entry, "is git metadata written inside the sandbox, which git would use outside it"));
        }
    }
    for (dir, files) in &now.bare {
        if changed(&before.bare, dir, files) {
            actions.push(quarantine(
                &dir.join("HEAD"),
                "makes a repository, laid out inside the sandbox, that git would use",
            ));
        }
    }
    actions
}

/// Carries out `actions`, printing each on stderr and recording quarantines in the audit
/// log. Returns how many paths could be neither moved aside nor deleted.
pub fn apply(actions: &[Action]) -> usize {
    let mut stuck = 0;
    for action in actions {
        match action {
            Action::Quarantine { path, why } => stuck += usize::from(!quarantine(path, why)),
        }
    }
    stuck
}

/// Moves `path` aside; says whether it is gone from its place.
fn quarantine(path: &Path, why: &str) -> bool {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let name = path.file_name().map_or_else(|| "file".into(), |name| name.to_string_lossy().into_owned());
    let aside = path.with_file_name(format!("{name}.agent-sandbox-quarantined.{stamp}"));
    // The parent may have been made read-only inside: we own it, so we may fix that.
    if let Some(parent) = path.parent() {
        crate::walk::repair_writable(parent);
    }
    // If even that cannot be done, the plant is removed rather than left in place.
    let moved = std::fs::rename(path, &aside).or_else(|err| {
        let is_dir = path.symlink_metadata().is_ok_and(|meta| meta.is_dir());
        let removed = if is_dir { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
        removed.and(Err(err))
    });
    let gone = path.symlink_metadata().is_err();
    let outcome = match moved {
        Ok(()) => format!("moved it to {} (inspect it before you use it)", aside.display()),
        Err(err) if gone => format!("could not move it aside ({err}), so it was deleted"),
        Err(err) => format!("could not move it aside or delete it ({err}): delete it before running git here"),
    };
    util::say!("agent-sandbox: WARNING: {} {why}; {outcome}", path.display());
    if gone && aside.symlink_metadata().is_ok() {
        util::say!("  (to restore it after inspection: mv '{}' '{}')", aside.display(), path.display());
    }
    let event =
        audit::Event::new("git", "write", &path.display().to_string(), "blocked", "git-plant", Some(why.to_owned()));
    if let Some(log) = audit::default_path() {
        let _ = audit::append(&log, &[event]);
    }
    gone
}
