//! Finds where a project's git metadata really lives, so the `@git` preset can protect
//! it wherever it is: `.git` may be a directory, or a file pointing elsewhere (linked
//! worktrees, submodules), whose common directory holds the hooks and the config; and
//! `core.hooksPath` may move the hooks anywhere. Read with plain file reads: this runs on
//! every start, before anything else needs git.

use std::path::{Path, PathBuf};

use crate::{normalize, Access};

/// Where a repository's metadata lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The per-worktree git directory (`.git` itself for a plain repository).
    pub git_dir: PathBuf,
    /// The directory shared by all worktrees: objects, refs, config, hooks.
    pub common_dir: PathBuf,
    /// `core.hooksPath` from the repository config, resolved against the work tree.
    pub hooks_path: Option<PathBuf>,
}

/// The layout of the repository whose work tree is `root`, if it is one.
pub fn layout(root: &Path) -> Option<Layout> {
    let dot_git = root.join(".git");
    let meta = dot_git.symlink_metadata().ok()?;
    let git_dir = if meta.is_dir() {
        dot_git
    } else {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let target = text.lines().find_map(|line| line.strip_prefix("gitdir:"))?.trim();
        normalize(&root.join(target))
    };
    let common_dir = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) => normalize(&git_dir.join(text.trim())),
        Err(_) => git_dir.clone(),
    };
    let hooks_path = std::fs::read_to_string(common_dir.join("config"))
        .ok()
        .and_then(|text| core_hooks_path(&text))
        .map(|path| match path.strip_prefix("~/") {
            Some(rest) => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(rest),
            None => normalize(&root.join(path)),
        });
    Some(Layout { git_dir, common_dir, hooks_path })
}

/// `core.hooksPath` from git config text: the last assignment in a `[core]` section.
/// Section and key names are case-insensitive in git.
pub fn core_hooks_path(text: &str) -> Option<String> {
    let mut in_core = false;
    let mut found = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            let section = line.trim_start_matches('[').split([']', ' ', '"']).next().unwrap_or_default();
            in_core = section.eq_ignore_ascii_case("core");
            continue;
        }
        if !in_core {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.trim().eq_ignore_ascii_case("hookspath") {
            let value = value.split(['#', ';']).next().unwrap_or_default().trim().trim_matches('"');
            found = Some(value.to_owned());
        }
    }
    found.filter(|value| !value.is_empty())
}

/// The extra rules `@git` needs beyond its fixed paths: a worktree's shared git
/// directory is writable (commits must work), its hooks and config are not, and a
/// configured hooks directory is read-only wherever it is.
pub fn layout_rules(root: &Path, notes: &mut Vec<String>) -> Vec<(Access, PathBuf)> {
    let Some(layout) = layout(root) else {
        notes.push(format!("git: {} is not a git work tree", root.display()));
        return Vec::new();
    };
    notes.push(format!(
        "git: git dir {}, common dir {}, hooksPath {}",
        layout.git_dir.display(),
        layout.common_dir.display(),
        layout.hooks_path.as_deref().map_or("(unset)".into(), |path| path.display().to_string())
    ));
    let mut rules = Vec::new();
    if !layout.git_dir.starts_with(root) {
        rules.push((Access::Rw, layout.git_dir.clone()));
    }
    if !layout.common_dir.starts_with(root) {
        rules.push((Access::Rw, layout.common_dir.clone()));
    }
    for path in
        [layout.common_dir.join("hooks"), layout.common_dir.join("config"), layout.git_dir.join("config.worktree")]
    {
        rules.push((Access::Ro, path));
    }
    if let Some(hooks) = layout.hooks_path {
        rules.push((Access::Ro, hooks));
    }
    rules.retain(|(_, path)| path.exists());
    rules
}
