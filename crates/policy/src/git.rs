//! Finds where a project's git metadata really lives, so the `@git` preset can protect
//! it wherever it is: `.git` may be a directory, or a file pointing elsewhere (linked
//! worktrees, submodules), whose common directory holds the hooks and the config; and
//! `core.hooksPath` may move the hooks anywhere (the caller resolves it with gix, which
//! reads every config file git would). Read with plain file reads: this runs on every
//! start.

use std::path::{Path, PathBuf};

use crate::{normalize, Access};

/// Where a repository's metadata lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The per-worktree git directory (`.git` itself for a plain repository).
    pub git_dir: PathBuf,
    /// The directory shared by all worktrees: objects, refs, config, hooks.
    pub common_dir: PathBuf,
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
    Some(Layout { git_dir, common_dir })
}

/// The extra rules `@git` needs beyond its fixed paths: a worktree's shared git
/// directory is writable (commits must work), its hooks and config are not, and a
/// configured hooks directory is read-only wherever it is.
pub fn layout_rules(root: &Path, hooks_path: Option<&Path>, notes: &mut Vec<String>) -> Vec<(Access, PathBuf)> {
    let Some(layout) = layout(root) else {
        notes.push(format!("git: {} is not a git work tree", root.display()));
        return Vec::new();
    };
    notes.push(format!(
        "git: git dir {}, common dir {}, hooksPath {}",
        layout.git_dir.display(),
        layout.common_dir.display(),
        hooks_path.map_or("(unset)".into(), |path| path.display().to_string())
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
    if let Some(hooks) = hooks_path {
        rules.push((Access::Ro, hooks.to_path_buf()));
    }
    rules.retain(|(_, path)| path.exists());
    rules
}
