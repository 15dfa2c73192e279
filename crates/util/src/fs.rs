//! File access for paths an agent can write. Opening a FIFO for reading blocks until a
//! writer comes, and a device may do anything on open: so these never open what is not a
//! regular file (checked before opening, opened with `O_NONBLOCK`, and checked again on
//! the open descriptor, so a swap in between is caught too), and say so with
//! [`NotRegular`] instead.
//!
//! Where host code makes something at a path the agent shaped (a dependency directory
//! linked into a check worktree), it goes one component at a time from a directory it
//! trusts, never following a link ([`open_dir_beneath`], [`symlink_beneath`]).

use std::{
    ffi::OsStr,
    fs::File,
    io::{Read, Write},
    os::{
        fd::OwnedFd,
        unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt},
    },
    path::{Component, Path},
};

use rustix::fs::{FileType, Mode, OFlags};

/// The error kind and message for a path that is not a regular file.
#[derive(Debug)]
pub struct NotRegular;

impl std::fmt::Display for NotRegular {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not a regular file (a FIFO, socket or device): not opened")
    }
}

impl std::error::Error for NotRegular {}

/// Whether `err` came from [`read_regular`] refusing a special file.
pub fn is_not_regular(err: &std::io::Error) -> bool {
    err.get_ref().is_some_and(|inner| inner.is::<NotRegular>())
}

fn not_regular() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, NotRegular)
}

/// Opens `path` for reading if it is a regular file; `follow` says whether a final
/// symlink is followed (git follows them for config files and hooks). Never blocks.
pub fn open_regular(path: &Path, follow: bool) -> std::io::Result<File> {
    let meta = if follow { path.metadata()? } else { path.symlink_metadata()? };
    if !meta.is_file() {
        return Err(not_regular());
    }
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path)?;
    let opened = file.metadata()?;
    if !opened.is_file() || opened.ino() != meta.ino() || opened.dev() != meta.dev() {
        return Err(not_regular());
    }
    Ok(file)
}

/// The bytes of the regular file at `path` (symlinks followed), at most `limit` of them
/// (a longer file is an error: nothing read this way is legitimately that big).
pub fn read_regular(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    read_limited(open_regular(path, true)?, limit)
}

/// As [`read_regular`], but a symlink is not followed (it is not a regular file).
pub fn read_regular_nofollow(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    read_limited(open_regular(path, false)?, limit)
}

fn read_limited(file: File, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("longer than {limit} bytes")));
    }
    Ok(bytes)
}

/// The directory `rel` beneath `root`, opened one component at a time, each relative to
/// the descriptor of the one before and never through a link: a component that is a
/// symlink (or anything but a directory) is an error, so the result is inside `root`
/// whatever the agent made of the path. With `create`, missing components are made
/// (mode 0755) the same way. `root` is the caller's own and is followed; `rel` must be
/// relative, without `.` or `..`.
///
/// Why not `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`: each call here resolves one
/// plain name, where `O_NOFOLLOW` already is the whole rule, and plain `openat` works on
/// every kernel and under container seccomp profiles that refuse `openat2`.
pub fn open_dir_beneath(root: &Path, rel: &Path, create: bool) -> std::io::Result<OwnedFd> {
    let mut dir = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    for name in plain_names(rel)? {
        dir = match open_child_dir(&dir, name) {
            Err(err) if create && err.kind() == std::io::ErrorKind::NotFound => {
                match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(err) => return Err(err.into()),
                }
                open_child_dir(&dir, name)?
            }
            opened => opened?,
        };
    }
    Ok(dir)
}

/// Makes a symlink at `rel` beneath `root` pointing to `target`, its parents made as
/// [`open_dir_beneath`] makes them (no link followed); an existing entry at `rel` is an
/// error (`AlreadyExists`) and is left as it is.
pub fn symlink_beneath(root: &Path, rel: &Path, target: &Path) -> std::io::Result<()> {
    let names = plain_names(rel)?;
    let Some((name, parents)) = names.split_last() else {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "an empty path"));
    };
    let parent = open_dir_beneath(root, &parents.iter().collect::<std::path::PathBuf>(), true)?;
    rustix::fs::symlinkat(target, &parent, *name)?;
    Ok(())
}

/// The names of the relative path `rel`, refusing anything but plain names.
fn plain_names(rel: &Path) -> std::io::Result<Vec<&OsStr>> {
    rel.components()
        .map(|component| match component {
            Component::Normal(name) => Ok(name),
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{}: not a plain relative path", rel.display()),
            )),
        })
        .collect()
}

/// The directory `name` in `dir`, not through a link.
fn open_child_dir(dir: &OwnedFd, name: &OsStr) -> std::io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let child = rustix::fs::openat(dir, name, flags, Mode::empty())?;
    // `O_PATH | O_NOFOLLOW` opens a link itself: the descriptor says what it is.
    if FileType::from_raw_mode(rustix::fs::fstat(&child)?.st_mode) != FileType::Directory {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            format!("{}: a link or not a directory", name.to_string_lossy()),
        ));
    }
    Ok(child)
}

/// Writes `bytes` to `path` atomically (a temporary file beside it, renamed over it),
/// with `mode`: a reader sees the old content or the new, never a part.
pub fn atomic_write(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.persist(path).map_err(|err| err.error)?;
    Ok(())
}

/// An exclusive `flock` on `path` (created if missing), held while the `File` lives;
/// `None` when `wait` is false and another process holds it.
pub fn lock(path: &Path, wait: bool) -> std::io::Result<Option<File>> {
    flock(path, if wait { libc::LOCK_EX } else { libc::LOCK_EX | libc::LOCK_NB })
}

/// A shared `flock` on `path` (created if missing), held while the `File` lives: waits
/// while someone holds it exclusively.
pub fn lock_shared(path: &Path) -> std::io::Result<File> {
    flock(path, libc::LOCK_SH)?.ok_or_else(|| std::io::Error::from(std::io::ErrorKind::WouldBlock))
}

fn flock(path: &Path, operation: libc::c_int) -> std::io::Result<Option<File>> {
    use std::os::unix::io::AsRawFd;
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
    loop {
        // SAFETY: flock on a descriptor this process owns.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return Ok(Some(file));
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return Ok(None),
            _ => return Err(err),
        }
    }
}

/// Accepts `path` only if no user but root can have written it: a regular file (no
/// symlink) that is either on a read-only mount, or root's and not group/other-writable
/// in directories that are root's all the way up ([`root_only`]). The reason otherwise.
pub fn trusted_file(path: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(path).map_err(|err| err.to_string())?;
    if !meta.file_type().is_file() {
        return Err("not a regular file".into());
    }
    if on_read_only_mount(path) {
        return Ok(());
    }
    root_only(path)
}

/// Accepts `path` (not a symlink) only if it is root's and not group/other-writable, in
/// directories that are root's and not writable by others (a sticky directory may be)
/// all the way up. The reason otherwise.
pub fn root_only(path: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(path).map_err(|err| err.to_string())?;
    if meta.file_type().is_symlink() {
        return Err("a symbolic link".into());
    }
    if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return Err(format!("owner uid {}, mode {:o}", meta.uid(), meta.mode() & 0o7777));
    }
    let mut dir = path.parent();
    while let Some(current) = dir.filter(|dir| !dir.as_os_str().is_empty()) {
        let meta = std::fs::metadata(current).map_err(|err| format!("{}: {err}", current.display()))?;
        if meta.uid() != 0 || (meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0) {
            return Err(format!("its directory {} can be changed by others", current.display()));
        }
        dir = current.parent();
    }
    Ok(())
}

/// Whether `path` is on a read-only mount.
pub fn on_read_only_mount(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: statvfs writes into the zeroed struct we own; the path is NUL-terminated.
    unsafe {
        let mut stat: libc::statvfs = std::mem::zeroed();
        libc::statvfs(c_path.as_ptr(), &mut stat) == 0 && stat.f_flag & libc::ST_RDONLY != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn special_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("config");
        mkfifo(&fifo);
        let err = read_regular(&fifo, 1024).expect_err("a FIFO is refused");
        assert!(is_not_regular(&err), "{err}");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).expect("symlink");
        assert!(is_not_regular(&read_regular(&link, 1024).expect_err("through a symlink too")));
        assert!(read_regular(Path::new("/dev/null"), 1024).is_err(), "devices are refused");
    }

    /// A link anywhere in the path is never followed: not in a parent made on the way
    /// (the attack: `a` a link to the user's `~/.local`, `a/lib/node_modules` linked
    /// into a check worktree), not at the end; real directories are walked and made.
    #[test]
    fn links_beneath_a_root_never_follow_a_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (root, outside) = (dir.path().join("root"), dir.path().join("outside"));
        std::fs::create_dir_all(root.join("real/lib")).expect("mkdir");
        std::fs::create_dir(&outside).expect("mkdir");
        std::os::unix::fs::symlink(&outside, root.join("a")).expect("symlink");
        let target = Path::new("/project/a/lib/node_modules");
        let err = symlink_beneath(&root, Path::new("a/lib/node_modules"), target).expect_err("a link on the way");
        assert_eq!(err.kind(), std::io::ErrorKind::NotADirectory, "{err}");
        assert_eq!(std::fs::read_dir(&outside).expect("ls").count(), 0, "nothing made outside the root");
        assert!(open_dir_beneath(&root, Path::new("a"), false).is_err(), "a link is not a directory");
        assert!(open_dir_beneath(&root, Path::new("a/.."), false).is_err(), "no `..`");
        assert!(symlink_beneath(&root, Path::new("/etc/x"), target).is_err(), "relative only");
        // The legitimate uses: a link made in new directories, one beside a real one.
        symlink_beneath(&root, Path::new("new/deep/node_modules"), target).expect("made");
        assert_eq!(std::fs::read_link(root.join("new/deep/node_modules")).expect("link"), target);
        symlink_beneath(&root, Path::new("real/lib/node_modules"), target).expect("made");
        assert!(open_dir_beneath(&root, Path::new("real/lib"), false).is_ok());
        let err = symlink_beneath(&root, Path::new("real/lib/node_modules"), target).expect_err("exists");
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    }

    #[test]
    fn regular_files_read_and_symlinks_follow_only_when_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("f");
        atomic_write(&file, b"hello", 0o600).expect("write");
        assert_eq!(read_regular(&file, 5).expect("read"), b"hello");
        assert!(read_regular(&file, 4).is_err(), "over the limit");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).expect("symlink");
        assert_eq!(read_regular(&link, 10).expect("followed"), b"hello");
        assert!(read_regular_nofollow(&link, 10).is_err(), "not followed");
        let mode = std::fs::metadata(&file).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
