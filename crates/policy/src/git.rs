//! Finds where a project's git metadata really lives, so the `@git` preset can protect
//! it wherever it is: `.git` may be a directory, or a file pointing elsewhere (linked
//! worktrees, submodules), whose common directory holds the hooks and the config; and
//! `core.hooksPath` may move the hooks anywhere (the caller resolves it with gix, which
//! reads every config file git would). The layout rules themselves live in `gitfacts`.

use std::path::{Path, PathBuf};

use crate::Access;

pub use gitfacts::{layout, module_git_dirs, Layout};

/// The extra rules `@git` needs beyond its fixed paths: a worktree's shared git
/// directory is writable (commits must work), its hooks and config are not, and a
/// configured hooks directory is read-only wherever it is. With a session repository
/// (`session`) the sandbox shows it where git looks, and the user's git directories not
/// at all: only the hooks directory is left to show.
pub fn layout_rules(
    root: &Path,
    hooks_path: Option<&Path>,
    session: bool,
    notes: &mut Vec<String>,
) -> Vec<(Access, PathBuf)> {
    let Some(layout) = layout(root) else {
        notes.push(format!("git: {} is not a git work tree (or its .git does not check out)", root.display()));
        return Vec::new();
    };
    notes.push(format!(
        "git: git dir {}, common dir {}, hooksPath {}",
        layout.git_dir.display(),
        layout.common_dir.display(),
        hooks_path.map_or("(unset)".into(), |path| path.display().to_string())
    ));
    let mut rules = Vec::new();
    if session {
        notes.push("git: the session repository stands in for the git dir; the user's is not shown".into());
        rules.extend(hooks_path.map(|hooks| (Access::Ro, hooks.to_path_buf())));
        rules.retain(|(_, path)| path.exists());
        return rules;
    }
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
    // Submodules' own hooks and config, wherever their names put them.
    for module in module_git_dirs(&layout.common_dir.join("modules")) {
        rules.extend([(Access::Ro, module.join("hooks")), (Access::Ro, module.join("config"))]);
    }
    // The user's other worktrees: their checkouts are not visible here, so git inside
    // would call them prunable and `git worktree prune` (or a gc) would cut them off.
    // Their `.git` files are shown (read-only), which is all git looks at; their records
    // stay writable for gc, and gitcare checks them at exit.
    if let Ok(entries) = std::fs::read_dir(layout.common_dir.join("worktrees")) {
        for entry in entries.flatten() {
            let admin = entry.path();
            if admin == layout.git_dir {
                continue; // this project's own
            }
            let Some(dot_git) = gitfacts::read_gitlink_record(&admin.join("gitdir")) else { continue };
            if dot_git.is_absolute() && !dot_git.starts_with(root) && dot_git.is_file() {
                rules.push((Access::Ro, dot_git));
            }
        }
    }
    rules.retain(|(_, path)| path.exists());
    rules
}
