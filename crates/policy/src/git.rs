//! Finds where a project's git metadata really lives, so the sandbox can protect it
//! wherever it is: `.git` may be a directory, or a file pointing elsewhere (linked
//! worktrees, submodules), whose common directory holds the hooks and the config; and
//! `core.hooksPath` may move the hooks anywhere (the caller resolves it with gix, which
//! reads every config file git would). The layout rules themselves live in `gitfacts`.

use std::path::{Path, PathBuf};

use crate::Access;

pub use gitfacts::{layout, Layout};

/// The rules for the user's git directories, whatever the presets: with a session
/// repository (`session`) none (the sandbox binds the session where git looks, and shows
/// the user's directories only as its read-only alternate); without one, the git
/// directory, the common directory and a `.git` file naming them are read-only, so git
/// inside reads the history but cannot commit. Never writable: git on the host trusts
/// what they hold (a `commondir`, a submodule's config, a worktree record).
pub fn dir_rules(root: &Path, session: bool, notes: &mut Vec<String>) -> Vec<(Access, PathBuf)> {
    let Some(layout) = layout(root) else {
        notes.push(format!("git: {} is not a git work tree (or its .git does not check out)", root.display()));
        return Vec::new();
    };
    notes.push(format!("git: git dir {}, common dir {}", layout.git_dir.display(), layout.common_dir.display()));
    if session {
        notes.push("git: the session repository stands in for the git dir; the user's is not shown".into());
        return Vec::new();
    }
    notes.push("git: no session repository: the user's git directories are read-only (no commits inside)".into());
    let mut rules = vec![(Access::Ro, root.join(".git"))];
    for dir in [&layout.common_dir, &layout.git_dir] {
        if !rules.iter().any(|(_, path)| dir.starts_with(path)) {
            rules.push((Access::Ro, dir.clone()));
        }
    }
    // A work tree inside its own git directory would be read-only as a whole.
    rules.retain(|(_, path)| path.symlink_metadata().is_ok() && !root.starts_with(path));
    rules
}

/// The extra rule `@git` needs beyond its fixed paths: a configured hooks directory
/// (`core.hooksPath`) is read-only wherever it is.
pub fn layout_rules(hooks_path: Option<&Path>) -> Vec<(Access, PathBuf)> {
    hooks_path.filter(|hooks| hooks.exists()).map(|hooks| (Access::Ro, hooks.to_path_buf())).into_iter().collect()
}
