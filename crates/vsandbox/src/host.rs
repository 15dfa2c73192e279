//! The only two ways between the host and a sandbox's filesystem, both explicit calls
//! of the embedding program (never reachable from a command line):
//! - [`import`] copies a host directory in, through the filesystem's limits. Symbolic
//!   links are followed only to files inside the imported directory; links leading
//!   outside it, links to directories, special files and names that are not UTF-8 are
//!   skipped and reported. A file over the size limit is refused before it is read.
//! - [`export`] writes a sandbox directory out into a new or empty host directory,
//!   creating every file with `O_CREAT|O_EXCL`, so it never follows or overwrites
//!   anything already on the host.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use crate::fs::{self, FileSystem, FsError, Metadata};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    pub files: u64,
    pub dirs: u64,
    pub bytes: u64,
    /// Host paths left out, with the reason.
    pub skipped: Vec<(PathBuf, String)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    pub files: u64,
    pub dirs: u64,
    pub bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("importing {}: {source}", host.display())]
    Import { host: PathBuf, source: FsError },
    #[error("exporting to {}: {source}", host.display())]
    Export { host: PathBuf, source: FsError },
    #[error("{}: not a directory (import takes a directory)", .0.display())]
    NotADirectory(PathBuf),
    #[error("{}: exists and is not empty (export only into a new or empty directory)", .0.display())]
    NotEmpty(PathBuf),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> HostError + '_ {
    move |source| HostError::Io { path: path.to_owned(), source }
}

/// Copies the host directory `host` into the sandbox directory `dest` (created if
/// missing). On error the filesystem may hold part of the import: callers that need
/// all-or-nothing import into a clone (as [`crate::Sandbox::import_dir`] does).
pub fn import(fs: &mut FileSystem, host: &Path, dest: &str) -> Result<ImportReport, HostError> {
    let root = host.canonicalize().map_err(io(host))?;
    if !root.is_dir() {
        return Err(HostError::NotADirectory(host.to_owned()));
    }
    let fail = |source| HostError::Import { host: host.to_owned(), source };
    fs.create_dir_all(dest).map_err(fail)?;
    let mut report = ImportReport::default();
    import_dir(fs, &root, &root, dest, &mut report).map_err(|err| match err {
        Walk::Fs(source) => fail(source),
        Walk::Host(err) => err,
    })?;
    Ok(report)
}

enum Walk {
    Fs(FsError),
    Host(HostError),
}

impl From<FsError> for Walk {
    fn from(err: FsError) -> Walk {
        Walk::Fs(err)
    }
}

fn import_dir(fs: &mut FileSystem, root: &Path, dir: &Path, dest: &str, report: &mut ImportReport) -> Result<(), Walk> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|err| Walk::Host(io(dir)(err)))?
        .collect::<Result<_, _>>()
        .map_err(|err| Walk::Host(io(dir)(err)))?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    let limit = fs.limits().max_file_size;
    for entry in entries {
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            report.skipped.push((path, String::from("the name is not UTF-8")));
            continue;
        };
        let target = if dest == "/" { format!("/{name}") } else { format!("{dest}/{name}") };
        let meta = entry.metadata().map_err(|err| Walk::Host(io(&path)(err)))?;
        let file_type = meta.file_type();
        let source = if file_type.is_symlink() {
            match path.canonicalize() {
                Err(_) => {
                    report.skipped.push((path, String::from("a broken symbolic link")));
                    continue;
                }
                Ok(resolved) if !resolved.starts_with(root) => {
                    report.skipped.push((path, String::from("a symbolic link leading outside the imported directory")));
                    continue;
                }
                Ok(resolved) if resolved.is_dir() => {
                    report.skipped.push((path, String::from("a symbolic link to a directory")));
                    continue;
                }
                Ok(resolved) => resolved,
            }
        } else if file_type.is_dir() {
            fs.create_dir_all(&target)?;
            report.dirs += 1;
            import_dir(fs, root, &path, &target, report)?;
            continue;
        } else if file_type.is_file() {
            path.clone()
        } else {
            report.skipped.push((path, String::from("not a regular file or directory")));
            continue;
        };
        let size = std::fs::metadata(&source).map_err(|err| Walk::Host(io(&source)(err)))?.len();
        if size > limit {
            return Err(Walk::Fs(FsError::FileTooLarge { path: target, size, limit }));
        }
        let data = std::fs::read(&source).map_err(|err| Walk::Host(io(&source)(err)))?;
        fs.write(&target, &data, false)?;
        report.files += 1;
        report.bytes += data.len() as u64;
    }
    Ok(())
}

/// Writes the sandbox path `src` (a directory, or a single file) to `host`, which must
/// not exist or be an empty directory (for a file: must not exist).
pub fn export(fs: &FileSystem, src: &str, host: &Path) -> Result<ExportReport, HostError> {
    let fail = |source| HostError::Export { host: host.to_owned(), source };
    let src = fs::resolve("/", src);
    let meta = fs.metadata(&src).map_err(fail)?;
    let mut report = ExportReport::default();
    if let Metadata::File { .. } = meta {
        write_new(host, &fs.read(&src).map_err(fail)?)?;
        report.files = 1;
        report.bytes = fs.read(&src).map_err(fail)?.len() as u64;
        return Ok(report);
    }
    match std::fs::read_dir(host) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(HostError::NotEmpty(host.to_owned()));
            }
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(host).map_err(io(host))?;
        }
        Err(err) => return Err(io(host)(err)),
    }
    for (path, meta) in fs.walk(&src).map_err(fail)?.into_iter().skip(1) {
        let relative = if src == "/" { &path[1..] } else { &path[src.len() + 1..] };
        let target = host.join(relative);
        match meta {
            Metadata::Dir { .. } => {
                std::fs::create_dir(&target).map_err(io(&target))?;
                report.dirs += 1;
            }
            Metadata::File { .. } => {
                let data = fs.read(&path).map_err(fail)?;
                write_new(&target, &data)?;
                report.files += 1;
                report.bytes += data.len() as u64;
            }
        }
    }
    Ok(report)
}

fn write_new(path: &Path, data: &[u8]) -> Result<(), HostError> {
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(path).map_err(io(path))?;
    file.write_all(data).map_err(io(path))
}
