//! The fail-closed walk for git entries: every `.git` entry (not descended into) and
//! every `HEAD` below a directory. Git, as the same user, reaches a repository behind a
//! directory it may only search (`--x`), so a directory this walk cannot list is never
//! skipped: it is made listable again (the session check runs as the owner of what the
//! sandbox created), and what still cannot be listed is reported as unexamined, for the
//! caller to move aside. Nothing is opened here; entries are only listed and `lstat`ed.

use std::{
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
};

/// What [`walk`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Found {
    pub nested: Vec<PathBuf>,
    pub heads: Vec<PathBuf>,
    /// Directories that could not be listed even after trying to make them listable.
    pub unexamined: Vec<PathBuf>,
    /// Directories whose permissions were restored to make them listable.
    pub repaired: Vec<PathBuf>,
}

/// Walks `dir` (which must not itself be a `.git` entry), appending to `found`.
pub fn walk(dir: &Path, found: &mut Found) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(_) if repair(dir) => {
            found.repaired.push(dir.to_path_buf());
            match std::fs::read_dir(dir) {
                Ok(entries) => entries,
                Err(_) => return found.unexamined.push(dir.to_path_buf()),
            }
        }
        Err(_) => return found.unexamined.push(dir.to_path_buf()),
    };
    for entry in entries {
        let Ok(entry) = entry else {
            found.unexamined.push(dir.to_path_buf());
            return;
        };
        let path = entry.path();
        let name = entry.file_name();
        if name == ".git" {
            found.nested.push(path);
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            found.unexamined.push(path);
            continue;
        };
        if kind.is_dir() {
            walk(&path, found);
        } else if name == "HEAD" {
            found.heads.push(path);
        }
    }
}

/// Gives the owner read and search permission on `dir` if this process owns it (or is
/// root); says whether it changed anything.
pub fn repair(dir: &Path) -> bool {
    let Ok(meta) = dir.symlink_metadata() else { return false };
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if !meta.is_dir() || (meta.uid() != euid && euid != 0) || meta.mode() & 0o500 == 0o500 {
        return false;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode((meta.mode() & 0o7777) | 0o700)).is_ok()
}

/// Gives the owner write and search permission on `dir` if this process owns it, so that
/// an entry in it can be moved aside.
pub fn repair_writable(dir: &Path) {
    let Ok(meta) = dir.symlink_metadata() else { return };
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if meta.is_dir() && meta.uid() == euid && meta.mode() & 0o300 != 0o300 {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode((meta.mode() & 0o7777) | 0o700));
    }
}
