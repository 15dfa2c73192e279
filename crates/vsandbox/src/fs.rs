//! The in-memory filesystem: a tree of directories and files addressed by POSIX-like
//! absolute paths, with the sandbox's limits (total size, file size, node count, name
//! length) enforced here, in the only code that can change the tree. Commands,
//! extensions, snapshot restore and host import all write through these methods, so none
//! of them can exceed a limit.
//!
//! Paths are resolved lexically: `.` and `..` are components, `..` at `/` stays at `/`,
//! and there are no symbolic links, permissions or timestamps.

use std::collections::BTreeMap;

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
}

/// File or directory, with what `ls -l` and `stat` need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metadata {
    File { size: u64 },
    Dir { entries: usize },
}

impl Metadata {
    pub fn is_dir(self) -> bool {
        matches!(self, Metadata::Dir { .. })
    }
}

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

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    File(Vec<u8>),
    Dir(BTreeMap<String, Node>),
}

#[derive(Debug, Clone)]
pub struct FileSystem {
    root: BTreeMap<String, Node>,
    limits: Limits,
    total_size: u64,
    files: u64,
    dirs: u64,
}

impl FileSystem {
    /// An empty filesystem (only `/`).
    pub fn new(limits: Limits) -> FileSystem {
        FileSystem { root: BTreeMap::new(), limits, total_size: 0, files: 0, dirs: 0 }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn usage(&self) -> Usage {
        Usage { total_size: self.total_size, node_count: self.files + self.dirs, files: self.files, dirs: self.dirs }
    }

    pub fn metadata(&self, path: &str) -> Result<Metadata, FsError> {
        let components = components(path)?;
        match self.lookup(&components).ok_or_else(|| FsError::NotFound(path.to_owned()))? {
            Lookup::Root(entries) | Lookup::Node(Node::Dir(entries)) => Ok(Metadata::Dir { entries: entries.len() }),
            Lookup::Node(Node::File(data)) => Ok(Metadata::File { size: data.len() as u64 }),
        }
    }

    pub fn exists(&self, path: &str) -> bool {
        self.metadata(path).is_ok()
    }

    pub fn is_dir(&self, path: &str) -> bool {
        self.metadata(path).is_ok_and(Metadata::is_dir)
    }

    pub fn read(&self, path: &str) -> Result<&[u8], FsError> {
        let components = components(path)?;
        match self.lookup(&components).ok_or_else(|| FsError::NotFound(path.to_owned()))? {
            Lookup::Node(Node::File(data)) => Ok(data),
            _ => Err(FsError::IsADirectory(path.to_owned())),
        }
    }

    /// Names in a directory, sorted bytewise, each with its metadata.
    pub fn read_dir(&self, path: &str) -> Result<Vec<(String, Metadata)>, FsError> {
        let components = components(path)?;
        let entries = match self.lookup(&components).ok_or_else(|| FsError::NotFound(path.to_owned()))? {
            Lookup::Root(entries) | Lookup::Node(Node::Dir(entries)) => entries,
            Lookup::Node(Node::File(_)) => return Err(FsError::NotADirectory(path.to_owned())),
        };
        Ok(entries.iter().map(|(name, node)| (name.clone(), node_metadata(node))).collect())
    }

    /// Creates or replaces (`append`: extends) the file at `path`; its parent must exist.
    pub fn write(&mut self, path: &str, data: &[u8], append: bool) -> Result<(), FsError> {
        let components = components(path)?;
        let Some((name, parent)) = components.split_last() else {
            return Err(FsError::IsADirectory(path.to_owned()));
        };
        check_name(path, name)?;
        let limits = self.limits;
        let (total, nodes) = (self.total_size, self.files + self.dirs);
        let entries = self.dir_mut(path, parent)?;
        let old = match entries.get(*name) {
            Some(Node::Dir(_)) => return Err(FsError::IsADirectory(path.to_owned())),
            Some(Node::File(old)) => Some(old.len() as u64),
            None => None,
        };
        let new_size = if append { old.unwrap_or(0) + data.len() as u64 } else { data.len() as u64 };
        if new_size > limits.max_file_size {
            return Err(FsError::FileTooLarge { path: path.to_owned(), size: new_size, limit: limits.max_file_size });
        }
        let new_total = total - old.unwrap_or(0) + new_size;
        if new_total > limits.max_total_size {
            return Err(FsError::TotalSizeExceeded {
                path: path.to_owned(),
                size: new_total,
                limit: limits.max_total_size,
            });
        }
        if old.is_none() && nodes + 1 > limits.max_node_count {
            return Err(FsError::NodeCountExceeded {
                path: path.to_owned(),
                count: nodes + 1,
                limit: limits.max_node_count,
            });
        }
        match entries.get_mut(*name) {
            Some(Node::File(old)) if append => old.extend_from_slice(data),
            Some(Node::File(old)) => data.clone_into(old),
            _ => {
                entries.insert((*name).to_owned(), Node::File(data.to_vec()));
            }
        }
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
        let (limit, nodes) = (self.limits.max_node_count, self.files + self.dirs);
        let entries = self.dir_mut(path, parent)?;
        if entries.contains_key(*name) {
            return Err(FsError::AlreadyExists(path.to_owned()));
        }
        if nodes + 1 > limit {
            return Err(FsError::NodeCountExceeded { path: path.to_owned(), count: nodes + 1, limit });
        }
        entries.insert((*name).to_owned(), Node::Dir(BTreeMap::new()));
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
        let Some((name, parent)) = components.split_last() else {
            return Err(FsError::Root);
        };
        let entries = self.dir_mut(path, parent)?;
        let node = entries.remove(*name).ok_or_else(|| FsError::NotFound(path.to_owned()))?;
        let (size, files, dirs) = tree_usage(&node);
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
        self.dir_mut(to, to_parent)?;
        if replaced.is_some() {
            self.remove(to)?;
        }
        let (from_name, from_parent) = from_components.split_last().ok_or(FsError::Root)?;
        let node =
            self.dir_mut(from, from_parent)?.remove(*from_name).ok_or_else(|| FsError::NotFound(from.to_owned()))?;
        self.dir_mut(to, to_parent)?.insert((*to_name).to_owned(), node);
        Ok(())
    }

    /// Every node under `path` (itself first), depth first, names sorted.
    pub fn walk(&self, path: &str) -> Result<Vec<(String, Metadata)>, FsError> {
        let components = components(path)?;
        let start = self.lookup(&components).ok_or_else(|| FsError::NotFound(path.to_owned()))?;
        let mut out = Vec::new();
        let base = if components.is_empty() { String::from("/") } else { format!("/{}", components.join("/")) };
        match start {
            Lookup::Root(entries) => {
                out.push((base.clone(), Metadata::Dir { entries: entries.len() }));
                walk_entries(&base, entries, &mut out);
            }
            Lookup::Node(node) => {
                out.push((base.clone(), node_metadata(node)));
                if let Node::Dir(entries) = node {
                    walk_entries(&base, entries, &mut out);
                }
            }
        }
        Ok(out)
    }

    /// The whole tree, parents before children, for snapshots.
    pub fn entries(&self) -> Vec<Entry> {
        let mut out = Vec::with_capacity((self.files + self.dirs) as usize);
        collect_entries("", &self.root, &mut out);
        out
    }

    /// A filesystem holding exactly `entries`, built through `create_dir_all`/`write`
    /// so that `limits` hold for it as for anything else.
    pub fn from_entries(limits: Limits, entries: &[Entry]) -> Result<FileSystem, FsError> {
        let mut fs = FileSystem::new(limits);
        for entry in entries {
            match entry {
                Entry::Dir(path) => fs.create_dir_all(path)?,
                Entry::File(path, data) => {
                    let components = components(path)?;
                    if let Some((_, parent)) = components.split_last() {
                        fs.create_dir_all(&format!("/{}", parent.join("/")))?;
                    }
                    if fs.exists(path) {
                        return Err(FsError::AlreadyExists(path.clone()));
                    }
                    fs.write(path, data, false)?;
                }
            }
        }
        Ok(fs)
    }

    fn lookup(&self, components: &[&str]) -> Option<Lookup<'_>> {
        let Some((first, rest)) = components.split_first() else {
            return Some(Lookup::Root(&self.root));
        };
        let mut node = self.root.get(*first)?;
        for component in rest {
            match node {
                Node::Dir(entries) => node = entries.get(*component)?,
                Node::File(_) => return None,
            }
        }
        Some(Lookup::Node(node))
    }

    /// The entries of the directory at `dir` (the parent of `path`, for messages).
    fn dir_mut(&mut self, path: &str, dir: &[&str]) -> Result<&mut BTreeMap<String, Node>, FsError> {
        let mut entries = &mut self.root;
        for component in dir {
            match entries.get_mut(*component) {
                Some(Node::Dir(inner)) => entries = inner,
                Some(Node::File(_)) => return Err(FsError::NotADirectory(path.to_owned())),
                None => return Err(FsError::NotFound(path.to_owned())),
            }
        }
        Ok(entries)
    }
}

/// `path` as components after resolving `.` and `..`; it must be absolute.
pub fn components(path: &str) -> Result<Vec<&str>, FsError> {
    if !path.starts_with('/') {
        return Err(FsError::InvalidPath { path: path.to_owned(), reason: "not absolute" });
    }
    if path.contains('\0') {
        return Err(FsError::InvalidPath { path: path.replace('\0', "\\0"), reason: "contains a NUL byte" });
    }
    let mut out: Vec<&str> = Vec::new();
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
    let joined = if path.starts_with('/') { path.to_owned() } else { format!("{cwd}/{path}") };
    match components(&joined) {
        Ok(components) if components.is_empty() => String::from("/"),
        Ok(components) => {
            let mut out = String::with_capacity(joined.len());
            for component in components {
                out.push('/');
                out.push_str(component);
            }
            out
        }
        // Only a NUL byte gets here; keep the text so that the FS call reports it.
        Err(_) => joined,
    }
}

enum Lookup<'a> {
    Root(&'a BTreeMap<String, Node>),
    Node(&'a Node),
}

fn check_name(path: &str, name: &str) -> Result<(), FsError> {
    if name.len() > MAX_NAME_LEN {
        return Err(FsError::InvalidPath { path: path.to_owned(), reason: "a name is longer than 255 bytes" });
    }
    Ok(())
}

fn node_metadata(node: &Node) -> Metadata {
    match node {
        Node::File(data) => Metadata::File { size: data.len() as u64 },
        Node::Dir(entries) => Metadata::Dir { entries: entries.len() },
    }
}

/// (bytes, files, directories) in a subtree, itself included.
fn tree_usage(node: &Node) -> (u64, u64, u64) {
    match node {
        Node::File(data) => (data.len() as u64, 1, 0),
        Node::Dir(entries) => {
            entries.values().map(tree_usage).fold((0, 0, 1), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
        }
    }
}

fn walk_entries(base: &str, entries: &BTreeMap<String, Node>, out: &mut Vec<(String, Metadata)>) {
    for (name, node) in entries {
        let path = if base == "/" { format!("/{name}") } else { format!("{base}/{name}") };
        out.push((path.clone(), node_metadata(node)));
        if let Node::Dir(inner) = node {
            walk_entries(&path, inner, out);
        }
    }
}

fn collect_entries(base: &str, entries: &BTreeMap<String, Node>, out: &mut Vec<Entry>) {
    for (name, node) in entries {
        let path = format!("{base}/{name}");
        match node {
            Node::File(data) => out.push(Entry::File(path, data.clone())),
            Node::Dir(inner) => {
                out.push(Entry::Dir(path.clone()));
                collect_entries(&path, inner, out);
            }
        }
    }
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
        assert_eq!(fs.read("/c/f").expect("read"), b"hello!");
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
