//! Redirections in the project's git directory: the files and links that would make a
//! reader of it (the push's `upload-pack`, root's verifier in a container) see another
//! repository's refs, objects or history than the project's. A push is refused while
//! one is there, with what to remove. The reader runs where such a redirection leads
//! nowhere anyway (a view of the git directory alone, or a user with no more rights
//! than the agent's); this check is what tells the agent why, instead of a copy that
//! fails or quietly reads less.
//!
//! Every entry is examined with `lstat`: nothing here follows a link or opens a file.

use std::path::Path;

use crate::plan::Refusal;

/// Files whose mere presence redirects git: `commondir` (in a plain `.git`: another
/// repository's refs and objects), `shallow` (a cut history), alternates (another
/// object store), `config.worktree` (settings git reads beside the user's config).
const REDIRECTING_FILES: &[&str] =
    &["commondir", "shallow", "objects/info/alternates", "objects/info/http-alternates", "config.worktree"];

/// Entries that must be what a repository holds (a file or a directory), never a link
/// or a special file.
const PLAIN_ENTRIES: &[(&str, Expect)] = &[
    ("HEAD", Expect::File),
    ("config", Expect::File),
    ("packed-refs", Expect::File),
    ("objects", Expect::Dir),
    ("objects/info", Expect::Dir),
    ("objects/pack", Expect::Dir),
    ("refs", Expect::Dir),
];

/// More refs than this are not walked: the push is refused rather than the check cut
/// short.
const MAX_REF_ENTRIES: usize = 200_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    File,
    Dir,
}

/// Every redirection in `git_dir` (a repository's common directory), each as the entry
/// (relative to `git_dir`) and what is wrong with it. `refused_files` says whether the
/// files of [`REDIRECTING_FILES`] count (the host service judges `shallow`,
/// alternates and `config.worktree` against the start instead, where a user's own
/// shallow clone is legitimate).
pub fn redirections(git_dir: &Path, refused_files: bool) -> Vec<String> {
    let mut found = Vec::new();
    match git_dir.symlink_metadata() {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return vec![".git: not a directory (a link or a special file)".to_owned()],
        Err(err) => return vec![format!(".git: cannot be examined ({err})")],
    }
    if refused_files {
        for name in REDIRECTING_FILES {
            if git_dir.join(name).symlink_metadata().is_ok() {
                found.push(format!(".git/{name}: makes git read another repository, history or configuration"));
            }
        }
    } else if git_dir.join("commondir").symlink_metadata().is_ok() {
        found.push(".git/commondir: makes git read another repository's refs and objects".to_owned());
    }
    for (name, expect) in PLAIN_ENTRIES {
        if let Ok(meta) = git_dir.join(name).symlink_metadata() {
            let kind = meta.file_type();
            let plain = match expect {
                Expect::File => kind.is_file(),
                Expect::Dir => kind.is_dir(),
            };
            if !plain {
                found.push(format!(".git/{name}: {}", what(kind)));
            }
        }
    }
    // Object directories (`objects/ab`, the packs): a link leads to another store.
    for dir in ["objects", "objects/pack"] {
        if !is_plain_dir(&git_dir.join(dir)) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(git_dir.join(dir)) else { continue };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_symlink()) {
                found.push(format!(".git/{dir}/{}: a link", entry.file_name().to_string_lossy()));
            }
        }
    }
    walk_refs(git_dir, &mut found);
    worktree_records(git_dir, &mut found);
    found
}

/// The worktree records (`worktrees/<n>/…`, which git reads for their `HEAD`s and
/// `commondir`s): only directories and regular files, so that no reader opens a FIFO.
fn worktree_records(git_dir: &Path, found: &mut Vec<String>) {
    let worktrees = git_dir.join("worktrees");
    match worktrees.symlink_metadata() {
        Ok(meta) if meta.is_dir() => {}
        Ok(meta) => return found.push(format!(".git/worktrees: {}", what(meta.file_type()))),
        Err(_) => return,
    }
    let Ok(records) = std::fs::read_dir(&worktrees) else {
        return found.push(".git/worktrees: cannot be listed".to_owned());
    };
    for record in records.flatten().take(10_000) {
        let Ok(kind) = record.file_type() else { continue };
        if !kind.is_dir() {
            found.push(format!("{}: {}", shown(git_dir, &record.path()), what(kind)));
            continue;
        }
        let Ok(entries) = std::fs::read_dir(record.path()) else { continue };
        for entry in entries.flatten().take(10_000) {
            match entry.file_type() {
                Ok(kind) if kind.is_file() || kind.is_dir() => {}
                Ok(kind) => found.push(format!("{}: {}", shown(git_dir, &entry.path()), what(kind))),
                Err(_) => {}
            }
        }
    }
}

/// The refusal for what [`redirections`] found.
pub fn refusal(found: &[String]) -> Refusal {
    Refusal {
        why: format!(
            "the project's .git leads elsewhere, so what the push would send could come from another repository: {}",
            found.join("; ")
        ),
        instead: "remove those entries (a ref or object directory must be a plain file or directory of .git, and \
                  .git must not name another repository), then push again"
            .into(),
    }
}

fn what(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_symlink() {
        "a link"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else if kind.is_dir() {
        "a directory where git expects a file"
    } else {
        "a file where git expects a directory"
    }
}

/// Every entry under `refs/`: only directories and regular files.
fn walk_refs(git_dir: &Path, found: &mut Vec<String>) {
    if !is_plain_dir(&git_dir.join("refs")) {
        return;
    }
    let mut pending = vec![git_dir.join("refs")];
    let mut seen = 0usize;
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            if dir.symlink_metadata().is_ok_and(|meta| meta.is_dir()) {
                found.push(format!("{}: cannot be listed", shown(git_dir, &dir)));
            }
            continue;
        };
        for entry in entries {
            seen += 1;
            if seen > MAX_REF_ENTRIES {
                found.push(format!(".git/refs: more than {MAX_REF_ENTRIES} entries"));
                return;
            }
            let Ok(entry) = entry else {
                found.push(format!("{}: cannot be listed", shown(git_dir, &dir)));
                continue;
            };
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => pending.push(entry.path()),
                Ok(kind) if kind.is_file() => {}
                Ok(kind) => found.push(format!("{}: {}", shown(git_dir, &entry.path()), what(kind))),
                Err(_) => found.push(format!("{}: cannot be examined", shown(git_dir, &entry.path()))),
            }
        }
    }
}

/// A directory itself, not a link to one (`read_dir` would follow it).
fn is_plain_dir(path: &Path) -> bool {
    path.symlink_metadata().is_ok_and(|meta| meta.is_dir())
}

fn shown(git_dir: &Path, path: &Path) -> String {
    format!(".git/{}", path.strip_prefix(git_dir).unwrap_or(path).display())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn repo() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let git = dir.path().join(".git");
        for sub in ["objects/info", "objects/pack", "objects/ab", "refs/heads/topic", "refs/tags"] {
            std::fs::create_dir_all(git.join(sub)).expect("mkdir");
        }
        for file in ["HEAD", "config", "packed-refs", "refs/heads/main", "refs/heads/topic/one", "objects/ab/cdef"] {
            std::fs::write(git.join(file), "x\n").expect("write");
        }
        (dir, git)
    }

    /// Each redirection is found and named; a plain repository has none, and the
    /// files a user's own setup may hold count only when asked for.
    #[test]
    fn every_redirection_is_found_and_a_plain_repository_has_none() {
        let (dir, git) = repo();
        assert_eq!(redirections(&git, true), Vec::<String>::new());
        std::fs::write(git.join("shallow"), "x\n").expect("write");
        assert_eq!(redirections(&git, false), Vec::<String>::new(), "the service judges shallow against the start");
        assert_eq!(
            redirections(&git, true),
            [".git/shallow: makes git read another repository, history or configuration"]
        );
        std::fs::remove_file(git.join("shallow")).expect("rm");

        let elsewhere = dir.path().join("private");
        std::fs::create_dir_all(elsewhere.join("refs")).expect("mkdir");
        std::fs::write(git.join("commondir"), elsewhere.display().to_string()).expect("write");
        std::fs::remove_file(git.join("packed-refs")).expect("rm");
        symlink(elsewhere.join("packed-refs"), git.join("packed-refs")).expect("ln");
        symlink(elsewhere.join("refs"), git.join("refs/remotes")).expect("ln");
        symlink(elsewhere.join("main"), git.join("refs/heads/topic/two")).expect("ln");
        symlink(&elsewhere, git.join("objects/cd")).expect("ln");
        symlink(&elsewhere, git.join("objects/pack/pack-1.pack")).expect("ln");
        let status = std::process::Command::new("mkfifo").arg(git.join("refs/tags/v1")).status().expect("mkfifo");
        assert!(status.success());
        // A worktree record git reads: a FIFO would hold any reader; a plain one is fine.
        std::fs::create_dir_all(git.join("worktrees/x")).expect("mkdir");
        std::fs::create_dir_all(git.join("worktrees/ok")).expect("mkdir");
        std::fs::write(git.join("worktrees/ok/commondir"), "../..\n").expect("write");
        let status =
            std::process::Command::new("mkfifo").arg(git.join("worktrees/x/commondir")).status().expect("mkfifo");
        assert!(status.success());
        let mut found = redirections(&git, false);
        found.sort();
        assert_eq!(
            found,
            [
                ".git/commondir: makes git read another repository's refs and objects",
                ".git/objects/cd: a link",
                ".git/objects/pack/pack-1.pack: a link",
                ".git/packed-refs: a link",
                ".git/refs/heads/topic/two: a link",
                ".git/refs/remotes: a link",
                ".git/refs/tags/v1: a FIFO",
                ".git/worktrees/x/commondir: a FIFO",
            ]
        );

        // The whole refs directory, or .git itself, as a link.
        let (dir, git) = repo();
        std::fs::rename(git.join("refs"), dir.path().join("refs")).expect("mv");
        symlink(dir.path().join("refs"), git.join("refs")).expect("ln");
        assert_eq!(redirections(&git, true), [".git/refs: a link"]);
        let linked = dir.path().join("linked");
        symlink(&git, &linked).expect("ln");
        assert_eq!(redirections(&linked, true), [".git: not a directory (a link or a special file)"]);
    }
}
