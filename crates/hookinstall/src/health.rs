//! Is the hook guard still where `hooks install` put it? Two things undo it without a
//! word, both husky's doing: every `npm install` runs husky's `prepare`, which rewrites
//! each file in `.husky/_`, the guard's shims included; and `.husky/_` is not in git
//! (its `.gitignore` says `*`), so a new `git worktree` of a husky project has no hooks
//! directory at all, and git runs no hook there, husky's or the guard's. `exec` warns
//! about both, with the fix. Reads only: `lstat`s, and the hooks with
//! `read_regular_nofollow` (never through a symlink, never blocking on a FIFO).

use std::path::{Path, PathBuf};

use gitfacts::HooksPath;

use crate::{shim, HOOKS, STATE_FILE};

/// One warning per problem found for the repository containing `start`, each saying
/// what no longer runs and the command that puts it back; empty when all is well, when
/// there is no repository, or when the guard was never installed and git finds hooks.
pub fn problems(start: &Path) -> Vec<String> {
    let Ok(repo) = gitfacts::discover(start) else { return Vec::new() };
    let Ok(hooks_path) = gitfacts::hooks_path(&repo) else { return Vec::new() };
    let (dir, configured) = match hooks_path {
        HooksPath::Configured(dir) => (dir, true),
        HooksPath::Default => (gitfacts::canonical(&repo.common_dir().join("hooks")), false),
        HooksPath::Empty => return Vec::new(),
    };
    let guard_elsewhere = main_worktree_twin(&repo, &dir).filter(|twin| exists(&twin.join(STATE_FILE)));
    if !exists(&dir) {
        // Only a configured directory: without one, git's default `hooks` is missing only
        // where there are no hooks to run.
        if !configured {
            return Vec::new();
        }
        let then_guard = match &guard_elsewhere {
            Some(twin) => {
                format!(", then `agent-sandbox hooks install` here (the hook guard is installed in {})", twin.display())
            }
            None => String::new(),
        };
        return vec![format!(
            "git runs no hooks in this work tree: core.hooksPath names {}, which does not exist here (husky's \
             `.husky/_` is not in git, so a new worktree lacks it); create it with `npx husky` (or `npm install`){then_guard}",
            dir.display()
        )];
    }
    if !exists(&dir.join(STATE_FILE)) {
        return match guard_elsewhere {
            Some(twin) => vec![format!(
                "the hook guard is not in front of this work tree's hooks in {} (it is in {}): run `agent-sandbox \
                 hooks install` here",
                dir.display(),
                twin.display()
            )],
            None => Vec::new(),
        };
    }
    // The shim is a small regular file: a link, special file or anything large is not it.
    let is_shim = |hook: &str| {
        util::fs::read_regular_nofollow(&dir.join(hook), 64 * 1024).is_ok_and(|contents| shim::has_marker(&contents))
    };
    let replaced: Vec<&str> = HOOKS.iter().copied().filter(|hook| !is_shim(hook)).collect();
    if replaced.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "the hook guard no longer runs before {} in {}: its shims were replaced (husky rewrites `.husky/_` on every \
         `npm install`); run `agent-sandbox hooks install` again to put them back in front",
        replaced.join(" and "),
        dir.display()
    )]
}

/// In a linked worktree whose hooks directory lies inside it (a relative
/// `core.hooksPath`, as husky sets), the same directory in the main worktree.
fn main_worktree_twin(repo: &gix::Repository, dir: &Path) -> Option<PathBuf> {
    let top = gitfacts::canonical(repo.workdir()?);
    let common = gitfacts::canonical(repo.common_dir());
    if gitfacts::canonical(repo.git_dir()) == common {
        return None;
    }
    let relative = dir.strip_prefix(&top).ok()?;
    let main_top = common.parent().filter(|_| common.file_name().is_some_and(|name| name == ".git"))?;
    Some(main_top.join(relative))
}

fn exists(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}
