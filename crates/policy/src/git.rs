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
///
/// Everything here is read from files a sandboxed agent can write (`.git`, a
/// `commondir` file), and what it finds outside the project is granted read-write. So a
/// git directory outside the project is believed only when git's own links check out:
/// a linked worktree's git dir names this work tree in its `gitdir` file and lives in
/// `<common dir>/worktrees/`; a submodule's is a git directory under a `modules/`
/// directory. A `commondir` file in a plain `.git` directory (which git would honour)
/// is ignored here: only a worktree's git dir has one.
pub fn layout(root: &Path) -> Option<Layout> {
    let dot_git = root.join(".git");
    let meta = dot_git.symlink_metadata().ok()?;
    if meta.is_dir() {
        return Some(Layout { git_dir: dot_git.clone(), common_dir: dot_git });
    }
    if !meta.is_file() {
        return None; // a symlinked .git is not followed
    }
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let target = text.lines().find_map(|line| line.strip_prefix("gitdir:"))?.trim();
    let git_dir = normalize(&root.join(target));
    if git_dir.starts_with(root) {
        return Some(Layout { git_dir: git_dir.clone(), common_dir: git_dir });
    }
    match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(common) => {
            let common_dir = normalize(&git_dir.join(common.trim()));
            let back_link = std::fs::read_to_string(git_dir.join("gitdir")).ok()?;
            let links_back = Path::new(back_link.trim()).canonicalize().ok()? == dot_git.canonicalize().ok()?;
            let in_worktrees = git_dir.parent() == Some(common_dir.join("worktrees").as_path());
            (links_back && in_worktrees && is_repository(&common_dir)).then_some(Layout { git_dir, common_dir })
        }
        Err(_) => {
            // A submodule's git dir lives in an enclosing repository's `.git/modules/`.
            let enclosing = root.ancestors().skip(1).any(|dir| git_dir.starts_with(dir.join(".git/modules")));
            (enclosing && is_repository(&git_dir)).then(|| Layout { git_dir: git_dir.clone(), common_dir: git_dir })
        }
    }
}

/// Every submodule git directory under `modules` (a common directory's), at any depth:
/// a submodule named `libs/foo` lives in `modules/libs/foo`, and nested submodules in
/// `<module>/modules/`.
pub fn module_git_dirs(modules: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    find_modules(modules, 0, &mut found);
    found
}

/// Symlinks are followed (git follows them), so the depth is bounded against loops.
fn find_modules(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    if depth > 32 {
        return;
    }
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if path.join("HEAD").symlink_metadata().is_ok() {
            find_modules(&path.join("modules"), depth + 1, found);
            found.push(path);
        } else {
            find_modules(&path, depth + 1, found);
        }
    }
}

/// A directory with what every git repository has.
fn is_repository(dir: &Path) -> bool {
    dir.join("HEAD").is_file() && dir.join("objects").is_dir() && dir.join("refs").is_dir()
}

/// The extra rules `@git` needs beyond its fixed paths: a worktree's shared git
/// directory is writable (commits must work), its hooks and config are not, and a
/// configured hooks directory is read-only wherever it is.
pub fn layout_rules(root: &Path, hooks_path: Option<&Path>, notes: &mut Vec<String>) -> Vec<(Access, PathBuf)> {
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
            let Ok(dot_git) = std::fs::read_to_string(admin.join("gitdir")) else { continue };
            let dot_git = PathBuf::from(dot_git.trim_end_matches('\n'));
            if dot_git.is_absolute() && !dot_git.starts_with(root) && dot_git.is_file() {
                rules.push((Access::Ro, dot_git));
            }
        }
    }
    rules.retain(|(_, path)| path.exists());
    rules
}
