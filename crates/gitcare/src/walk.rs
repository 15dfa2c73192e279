//! The fail-closed walk for git entries: every `.git` entry (not descended into) and
//! every `HEAD` below a directory, and the entries named like a host-run file's copy
//! ([`crate::Watch::copy_names`]). Git, as the same user, reaches a repository behind a
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
    /// Entries (any kind) named one of the copy names; directories are still walked.
    pub copies: Vec<PathBuf>,
    /// Directories that could not be listed even after trying to make them listable.
    pub unexamined: Vec<PathBuf>,
    /// Directories whose permissions were restored to make them listable.
    pub repaired: Vec<PathBuf>,
}

/// Walks `dir` (which must not itself be a `.git` entry), appending to `found`; entries
/// named one of `copy_names` go to [`Found::copies`].
pub fn walk(dir: &Path, copy_names: &[std::ffi::OsString], found: &mut Found) {
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
        if copy_names.contains(&name) {
            found.copies.push(path.clone());
        }
        let Ok(kind) = entry.file_type() else {
            found.unexamined.push(path);
            continue;
        };
        if kind.is_dir() {
            walk(&path, copy_names, found);
        } else if name == "HEAD" {
            found.heads.push(path);
        }
    }
}

/// Makes `dir` listable again for the check: its owner's read and search permission,
/// if this process owns it; says whether it changed anything.
pub fn repair(dir: &Path) -> bool {
    give_owner(dir, 0o500)
}

/// Gives the owner write and search permission on `dir` if this process owns it, so that
/// an entry in it can be moved aside.
pub fn repair_writable(dir: &Path) {
    give_owner(dir, 0o300);
}

/// Adds `bits` (and the rest of rwx) for the owner of the directory `dir` when this process
/// owns it and some of `bits` are missing; says whether it changed anything. (As root,
/// which reads and writes regardless, there is nothing to repair.)
fn give_owner(dir: &Path, bits: u32) -> bool {
    let Ok(meta) = dir.symlink_metadata() else { return false };
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != euid || meta.mode() & bits == bits {
        return false;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode((meta.mode() & 0o7777) | 0o700)).is_ok()
}
