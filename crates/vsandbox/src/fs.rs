//! The in-memory filesystem: a tree of directories and files addressed by POSIX-like
//! absolute paths, with the sandbox's limits (total size, file size, node count, name
//! length) enforced here, in the only code that can change the tree. Commands,
//! extensions, snapshot restore and host import all write through these methods, so none
//! of them can exceed a limit.
//!
//! Paths are resolved lexically: `.` and `..` are components, `..` at `/` stays at `/`,
//! and there are no symbolic links, permissions or timestamps.

use std::borrow::Cow;

use smallvec::SmallVec;

use crate::store::{MemoryStore, Store, StoreError};

/// The sandbox's resource limits. Defaults: 100 MiB in total, 10 MiB per file, 10,000
/// nodes (files plus directories, `/` not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_total_size: u64,
    pub max_file_size: u64,
    pub max_node_count: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_total_size: 100 * MIB, max_file_size: 10 * MIB, max_node_count: 10_000 }
    }
}

const MIB: u64 = 1024 * 1024;

/// The longest file or directory name, in bytes (POSIX `NAME_MAX`). Names do not count
/// towards the size limit, so they need a limit of their own.
pub const MAX_NAME_LEN: usize = 255;

/// What went wrong, worded for the shell's `cmd: message` lines.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    #[error("{0}: No such file or directory")]
    NotFound(String),
    #[error("{0}: Not a directory")]
    NotADirectory(String),
    #[error("{0}: Is a directory")]
    IsADirectory(String),
    #[error("{0}: File exists")]
    AlreadyExists(String),
    #[error("{0}: Directory not empty")]
    DirectoryNotEmpty(String),
    #[error("{path}: invalid path ({reason})")]
    InvalidPath { path: String, reason: &'static str },
    #[error("{path}: the file would be {size} bytes, over the file size limit of {limit} bytes (make it smaller)")]
    FileTooLarge { path: String, size: u64, limit: u64 },
    #[error(
        "{path}: the sandbox would hold {size} bytes, over its total size limit of {limit} bytes (remove files first)"
    )]
    TotalSizeExceeded { path: String, size: u64, limit: u64 },
    #[error(
        "{path}: the sandbox would hold {count} files and directories, over its limit of {limit} (remove some first)"
    )]
    NodeCountExceeded { path: String, count: u64, limit: u64 },
    #[error("{0}: cannot move or copy a directory into itself")]
    IntoItself(String),
    #[error("/: the root directory cannot be removed or moved")]
    Root,
    #[error("the sandbox's store: {0}")]
    Storage(String),
}

/// File or directory, with what `ls -l` and `stat` need (the store's own, below this).
pub use crate::store::Metadata;

/// Current usage against the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub total_size: u64,
    pub node_count: u64,
    pub files: u64,
    pub dirs: u64,
}

/// One node of a whole-tree listing: its absolute path and, for files, the content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir(String),
    File(String, Vec<u8>),
}

/// The tree, in a [`Store`], and the usage counted against the limits. Every change
/// goes through here: the checks (names, kinds, limits) are made before the store is
/// asked, so no store can exceed a limit.
pub struct FileSystem {
    store: Box<dyn Store>,
    limits: Limits,
    total_size: u64,
    files: u64,
    dirs: u64,
    /// A store change failed half-way: what the store holds may not match the usage,
    /// so the changes since the last commit are dropped instead of committed.
    broken: bool,
}

impl std::fmt::Debug for FileSystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSystem")
            .field("store", &self.store.describe())
            .field("limits", &self.limits)
            .field("usage", &self.usage())
            .finish()
    }
}

impl FileSystem {
    /// An empty filesystem (only `/`) in memory.
    pub fn new(limits: Limits) -> FileSystem {
        FileSystem { store: Box::new(MemoryStore::new()), limits, total_size: 0, files: 0, dirs: 0, broken: false }
    }

    /// The filesystem kept in `store`, as it is: its usage is counted by walking it
    /// (nothing the store says about itself is believed), and it must fit `limits` and
    /// the name rules, or it is refused whole.
    pub fn open(store: Box<dyn Store>, limits: Limits) -> Result<FileSystem, FsError> {
        let mut fs = FileSystem { store, limits, total_size: 0, files: 0, dirs: 0, broken: false };
        fs.recount()?;
        let usage = fs.usage();
        let place = fs.store.describe();
        if usage.node_count > limits.max_node_count {
            return Err(FsError::NodeCountExceeded {
                path: place,
                count: usage.node_count,
                limit: limits.max_node_count,
            });
        }
        if usage.total_size > limits.max_total_size {
            return Err(FsError::TotalSizeExceeded {
                path: place,
                size: usage.total_size,
                limit: limits.max_total_size,
            });
        }
        Ok(fs)
    }

    /// Counts the usage again from the store, checking every name and file size.
    fn recount(&mut self) -> Result<(), FsError> {
        let (mut total_size, mut files, mut dirs) = (0u64, 0u64, 0u64);
        for (path, meta) in self.walk("/")?.into_iter().skip(1) {
            let name = path.rsplit('/').next().unwrap_or_default();
            check_name(&path, name)?;
            match meta {
                Metadata::Dir { .. } => dirs += 1,
                Metadata::File { size } => {
                    if size > self.limits.max_file_size {
                        return Err(FsError::FileTooLarge { path, size, limit: self.limits.max_file_size });
                    }
                    files += 1;
                    total_size += size;
                }
            }
        }
        (self.total_size, self.files, self.dirs) = (total_size, files, dirs);
        Ok(())
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn usage(&self) -> Usage {
        Usage { total_size: self.total_size, node_count: self.files + self.dirs, files: self.files, dirs: self.dirs }
    }

    /// `memory`, or the store file.
    pub fn describe_store(&self) -> String {
        self.store.describe()
    }

    /// Whether the store keeps the tree beyond this process.
    pub fn persistent(&self) -> bool {
        self.store.persistent()
    }

    pub fn metadata(&self, path: &str) -> Result<Metadata, FsError> {
        let components = components(path)?;
        self.store_metadata(&components)?.ok_or_else(|| FsError::NotFound(path.to_owned()))
    }

    pub fn exists(&self, path: &str) -> bool {
        self.metadata(path).is_ok()
    }

    pub fn is_dir(&self, path: &str) -> bool {
        self.metadata(path).is_ok_and(Metadata::is_dir)
    }

    /// The bytes of a file: borrowed from the in-memory store, read from a persistent one.
    pub fn read(&self, path: &str) -> Result<Cow<'_, [u8]>, FsError> {
        let components = components(path)?;
        match self.store_metadata(&components)? {
            Some(Metadata::File { .. }) => self.store.read(&components).map_err(storage),
            Some(Metadata::Dir { .. }) => Err(FsError::IsADirectory(path.to_owned())),
            None => Err(FsError::NotFound(path.to_owned())),
        }
    }

    /// Names in a directory, sorted bytewise, each with its metadata.
    pub fn read_dir(&self, path: &str) -> Result<Vec<(String, Metadata)>, FsError> {
        let components = components(path)?;
        match self.store_metadata(&components)? {
            Some(Metadata::Dir { .. }) => self.store.read_dir(&components).map_err(storage),
            Some(Metadata::File { .. }) => Err(FsError::NotADirectory(path.to_owned())),
            None => Err(FsError::NotFound(path.to_owned())),
        }
    }

    /// Creates or replaces (`append`: extends) the file at `path`; its parent must exist.
    pub fn write(&mut self, path: &str, data: &[u8], append: bool) -> Result<(), FsError> {
        let components = components(path)?;
        let Some((name, parent)) = components.split_last() else {
            return Err(FsError::IsADirectory(path.to_owned()));
        };
        check_name(path, name)?;
        let limits = self.limits;
        let old = match self.store_metadata(&components)? {
            Some(Metadata::Dir { .. }) => return Err(FsError::IsADirectory(path.to_owned())),
            Some(Metadata::File { size }) => Some(size),
            None => {
                self.check_parent(path, parent)?;
                None
            }
        };
        let new_size = if append { old.unwrap_or(0) + data.len() as u64 } else { data.len() as u64 };
        if new_size > limits.max_file_size {
            return Err(FsError::FileTooLarge { path: path.to_owned(), size: new_size, limit: limits.max_file_size });
        }
        let new_total = self.total_size - old.unwrap_or(0) + new_size;
        if new_total > limits.max_total_size {
            return Err(FsError::TotalSizeExceeded {
                path: path.to_owned(),
                size: new_total,
                limit: limits.max_total_size,
            });
        }
        let nodes = self.files + self.dirs;
        if old.is_none() && nodes + 1 > limits.max_node_count {
            return Err(FsError::NodeCountExceeded {
                path: path.to_owned(),
                count: nodes + 1,
                limit: limits.max_node_count,
            });
        }
        self.change(|store| store.write(&components, data, append))?;
        self.total_size = new_total;
        if old.is_none() {
            self.files += 1;
        }
        Ok(())
    }

    /// Creates one directory; its parent must exist and the name must be free.
    pub fn create_dir(&mut self, path: &str) -> Result<(), FsError> {
        let components = components(path)?;
        let Some((name, parent)) = components.split_last() else {
            return Err(FsError::AlreadyExists(path.to_owned()));
        };
        check_name(path, name)?;
        self.check_parent(path, parent)?;
        if self.store_metadata(&components)?.is_some() {
            return Err(FsError::AlreadyExists(path.to_owned()));
        }
        let (limit, nodes) = (self.limits.max_node_count, self.files + self.dirs);
        if nodes + 1 > limit {
            return Err(FsError::NodeCountExceeded { path: path.to_owned(), count: nodes + 1, limit });
        }
        self.change(|store| store.create_dir(&components))?;
        self.dirs += 1;
        Ok(())
    }

    /// `mkdir -p`: creates every missing directory on the way; existing directories are fine.
    pub fn create_dir_all(&mut self, path: &str) -> Result<(), FsError> {
        let components = components(path)?;
        let mut prefix = String::new();
        for component in components {
            prefix.push('/');
            prefix.push_str(component);
            match self.metadata(&prefix) {
                Ok(Metadata::Dir { .. }) => {}
                Ok(Metadata::File { .. }) => return Err(FsError::NotADirectory(prefix)),
                Err(_) => self.create_dir(&prefix)?,
            }
        }
        Ok(())
    }

    pub fn remove_file(&mut self, path: &str) -> Result<(), FsError> {
        match self.metadata(path)? {
            Metadata::Dir { .. } => Err(FsError::IsADirectory(path.to_owned())),
            Metadata::File { .. } => self.remove(path),
        }
    }

    /// Removes an empty directory.
    pub fn remove_dir(&mut self, path: &str) -> Result<(), FsError> {
        match self.metadata(path)? {
            Metadata::File { .. } => Err(FsError::NotADirectory(path.to_owned())),
            Metadata::Dir { entries: 0 } => self.remove(path),
            Metadata::Dir { .. } => Err(FsError::DirectoryNotEmpty(path.to_owned())),
        }
    }

    /// Removes a file, or a directory with everything in it.
    pub fn remove(&mut self, path: &str) -> Result<(), FsError> {
        let components = components(path)?;
        let Some((_, parent)) = components.split_last() else {
            return Err(FsError::Root);
        };
        self.check_parent(path, parent)?;
        let (mut size, mut files, mut dirs) = (0, 0, 0);
        match self.store_metadata(&components)? {
            None => return Err(FsError::NotFound(path.to_owned())),
            Some(Metadata::File { size: file_size }) => (size, files) = (file_size, 1),
            Some(Metadata::Dir { .. }) => {
                for (_, meta) in self.walk(path)? {
                    match meta {
                        Metadata::File { size: file_size } => (size, files) = (size + file_size, files + 1),
                        Metadata::Dir { .. } => dirs += 1,
                    }
                }
            }
        }
        self.change(|store| store.remove(&components))?;
        self.total_size -= size;
        self.files -= files;
        self.dirs -= dirs;
        Ok(())
    }

    /// POSIX `rename`: `to` is replaced if it is a file (and `from` too) or an empty
    /// directory (and `from` is one); a directory cannot move into itself.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), FsError> {
        let from_components = components(from)?;
        let to_components = components(to)?;
        if from_components.is_empty() {
            return Err(FsError::Root);
        }
        let from_meta = self.metadata(from)?;
        if to_components.len() > from_components.len() && to_components.starts_with(&from_components) {
            return Err(FsError::IntoItself(from.to_owned()));
        }
        if to_components == from_components {
            return Ok(());
        }
        let Some((to_name, to_parent)) = to_components.split_last() else {
            return Err(FsError::Root);
        };
        check_name(to, to_name)?;
        let replaced = match self.metadata(to) {
            Err(_) => None,
            Ok(Metadata::Dir { entries }) if from_meta.is_dir() && entries == 0 => Some(()),
            Ok(Metadata::Dir { .. }) if from_meta.is_dir() => return Err(FsError::DirectoryNotEmpty(to.to_owned())),
            Ok(Metadata::Dir { .. }) => return Err(FsError::IsADirectory(to.to_owned())),
            Ok(Metadata::File { .. }) if from_meta.is_dir() => return Err(FsError::NotADirectory(to.to_owned())),
            Ok(Metadata::File { .. }) => Some(()),
        };
        // The target's parent must exist before anything changes.
        self.check_parent(to, to_parent)?;
        if replaced.is_some() {
            self.remove(to)?;
        }
        self.change(|store| store.rename(&from_components, &to_components))
    }

    /// Every node under `path` (itself first), depth first, names sorted.
    pub fn walk(&self, path: &str) -> Result<Vec<(String, Metadata)>, FsError> {
        let components = components(path)?;
        let meta = self.store_metadata(&components)?.ok_or_else(|| FsError::NotFound(path.to_owned()))?;
        let base = if components.is_empty() { String::from("/") } else { format!("/{}", components.join("/")) };
        // Depth first with a stack rather than recursion, so that a deep tree cannot
        // exhaust the thread's stack; children are pushed in reverse to pop in order.
        let mut out = Vec::new();
        let mut stack = vec![(base, meta)];
        while let Some((dir, meta)) = stack.pop() {
            if meta.is_dir() {
                let children = self.store.read_dir(&components_unchecked(&dir)).map_err(storage)?;
                for (name, child_meta) in children.into_iter().rev() {
                    // A store file edited by another program could hold any name; one
                    // that is not a plain name would make the walk go round in circles.
                    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
                        return Err(FsError::Storage(format!(
                            "{}: {dir} holds the name {name:?}, which no sandbox makes (the store is damaged)",
                            self.store.describe()
                        )));
                    }
                    let child = if dir == "/" { format!("/{name}") } else { format!("{dir}/{name}") };
                    stack.push((child, child_meta));
                }
            }
            out.push((dir, meta));
        }
        Ok(out)
    }

    /// The whole tree, parents before children, for snapshots.
    pub fn entries(&self) -> Result<Vec<Entry>, FsError> {
        let mut out = Vec::with_capacity((self.files + self.dirs) as usize);
        for (path, meta) in self.walk("/")?.into_iter().skip(1) {
            match meta {
                Metadata::Dir { .. } => out.push(Entry::Dir(path)),
                Metadata::File { .. } => {
                    let data = self.store.read(&components_unchecked(&path)).map_err(storage)?.into_owned();
                    out.push(Entry::File(path, data));
                }
            }
        }
        Ok(out)
    }

    /// Replaces the whole tree by exactly `entries`, built through `create_dir_all`/
    /// `write` so that the limits hold for it as for anything else. Stops at the first
    /// error: run it in [`FileSystem::atomically`] for all or nothing.
    pub fn replace_all(&mut self, entries: &[Entry]) -> Result<(), FsError> {
        self.change(|store| store.clear())?;
        (self.total_size, self.files, self.dirs) = (0, 0, 0);
        for entry in entries {
            match entry {
                Entry::Dir(path) => self.create_dir_all(path)?,
                Entry::File(path, data) => {
                    let components = components(path)?;
                    if let Some((_, parent)) = components.split_last() {
                        self.create_dir_all(&format!("/{}", parent.join("/")))?;
                    }
                    if self.exists(path) {
                        return Err(FsError::AlreadyExists(path.clone()));
                    }
                    self.write(path, data, false)?;
                }
            }
        }
        Ok(())
    }

    /// Runs `change`, keeping all it did or (on error) nothing; either way what was
    /// kept is committed.
    pub fn atomically<T, E: From<FsError>>(
        &mut self,
        change: impl FnOnce(&mut FileSystem) -> Result<T, E>,
    ) -> Result<T, E> {
        self.store.begin().map_err(storage)?;
        let saved = (self.total_size, self.files, self.dirs);
        match change(self) {
            Ok(value) => {
                self.commit()?;
                Ok(value)
            }
            Err(err) => {
                self.store.rollback().map_err(storage)?;
                (self.total_size, self.files, self.dirs) = saved;
                self.broken = false;
                Err(err)
            }
        }
    }

    /// Makes every change so far permanent (a no-op in memory). When the store cannot,
    /// its changes since the last commit are gone and the usage is counted again.
    pub fn commit(&mut self) -> Result<(), FsError> {
        let res = if self.broken {
            Err(FsError::Storage(format!("{}: a change failed half-way", self.store.describe())))
        } else {
            self.store.commit().map_err(storage)
        };
        if res.is_err() {
            self.broken = false;
            // When even these fail, the store refuses everything from now on (redb: no
            // transaction), so stale counters cannot let anything through.
            let _ = self.store.rollback();
            let _ = self.recount();
        }
        res
    }

    /// A change of the store, after every check passed; a failure marks the unit broken.
    fn change(&mut self, change: impl FnOnce(&mut dyn Store) -> Result<(), StoreError>) -> Result<(), FsError> {
        change(&mut *self.store).map_err(|err| {
            self.broken = true;
            storage(err)
        })
    }

    /// A value kept with the tree (committed with it): the shell's state.
    pub fn attribute(&self, key: &str) -> Result<Option<Vec<u8>>, FsError> {
        self.store.attribute(key).map_err(storage)
    }

    pub fn set_attribute(&mut self, key: &str, value: &[u8]) -> Result<(), FsError> {
        self.change(|store| store.set_attribute(key, value))
    }

    fn store_metadata(&self, components: &[&str]) -> Result<Option<Metadata>, FsError> {
        self.store.metadata(components).map_err(storage)
    }

    /// The parent of `path` (`dir`) must be a directory.
    fn check_parent(&self, path: &str, dir: &[&str]) -> Result<(), FsError> {
        // A missing or file component anywhere on the way decides the message, as a
        // lookup from the root would.
        if let Some(Metadata::Dir { .. }) = self.store.metadata(dir).map_err(storage)? {
            return Ok(());
        }
        for depth in 1..=dir.len() {
            match self.store.metadata(&dir[..depth]).map_err(storage)? {
                Some(Metadata::Dir { .. }) => {}
                Some(Metadata::File { .. }) => return Err(FsError::NotADirectory(path.to_owned())),
                None => return Err(FsError::NotFound(path.to_owned())),
            }
        }
        Err(FsError::NotFound(path.to_owned()))
    }
}

fn storage(err: StoreError) -> FsError {
    FsError::Storage(err.0)
}

/// A path's components. Paths are rarely deep, so they are kept inline (every file
/// operation splits one or two paths; that should not cost an allocation).
pub type Components<'a> = SmallVec<[&'a str; 8]>;

/// The components of a path this module built itself (absolute, normalized).
fn components_unchecked(path: &str) -> Components<'_> {
    path.split('/').filter(|component| !component.is_empty()).collect()
}

/// `path` as components after resolving `.` and `..`; it must be absolute.
pub fn components(path: &str) -> Result<Components<'_>, FsError> {
    if !path.starts_with('/') {
        return Err(FsError::InvalidPath { path: path.to_owned(), reason: "not absolute" });
    }
    if path.contains('\0') {
        return Err(FsError::InvalidPath { path: path.replace('\0', "\\0"), reason: "contains a NUL byte" });
    }
    let mut out = Components::new();
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            name => out.push(name),
        }
    }
    Ok(out)
}

/// `path` resolved against `cwd` (absolute) into a normalized absolute path.
pub fn resolve(cwd: &str, path: &str) -> String {
    let joined = if path.starts_with('/') { Cow::Borrowed(path) } else { Cow::Owned(format!("{cwd}/{path}")) };
    let resolved = match components(&joined) {
        Ok(components) if components.is_empty() => Some(String::from("/")),
        Ok(components) => {
            let mut out = String::with_capacity(joined.len());
            for component in components {
                out.push('/');
                out.push_str(component);
            }
            Some(out)
        }
        Err(_) => None,
    };
    // Only a NUL byte makes it fail; keep the text so that the FS call reports it.
    resolved.unwrap_or_else(|| joined.into_owned())
}

fn check_name(path: &str, name: &str) -> Result<(), FsError> {
    if name.len() > MAX_NAME_LEN {
        return Err(FsError::InvalidPath { path: path.to_owned(), reason: "a name is longer than 255 bytes" });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_is_lexical() {
        for (cwd, path, want) in [
            ("/", "a", "/a"),
            ("/a/b", "../c", "/a/c"),
            ("/a", "/x/./y/", "/x/y"),
            ("/", "../../..", "/"),
            ("/a", ".", "/a"),
            ("/a", "b//c", "/a/b/c"),
        ] {
            assert_eq!(resolve(cwd, path), want, "{cwd} + {path}");
        }
    }

    #[test]
    fn usage_follows_writes_and_removals() {
        let mut fs = FileSystem::new(Limits::default());
        fs.create_dir_all("/a/b").expect("mkdir");
        fs.write("/a/b/f", b"hello", false).expect("write");
        fs.write("/a/b/f", b"!", true).expect("append");
        assert_eq!(fs.usage(), Usage { total_size: 6, node_count: 3, files: 1, dirs: 2 });
        fs.rename("/a/b", "/c").expect("rename");
        assert_eq!(&*fs.read("/c/f").expect("read"), b"hello!");
        fs.remove("/a").expect("rm");
        assert_eq!(fs.usage(), Usage { total_size: 6, node_count: 2, files: 1, dirs: 1 });
        fs.remove("/c").expect("rm -r");
        assert_eq!(fs.usage(), Usage { total_size: 0, node_count: 0, files: 0, dirs: 0 });
    }

    #[test]
    fn rename_refuses_a_directory_into_itself() {
        let mut fs = FileSystem::new(Limits::default());
        fs.create_dir_all("/a/b").expect("mkdir");
        assert_eq!(fs.rename("/a", "/a/b/a"), Err(FsError::IntoItself("/a".into())));
        assert_eq!(fs.rename("/", "/x"), Err(FsError::Root));
    }
}
