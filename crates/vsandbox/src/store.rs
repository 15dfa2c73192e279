//! Where the filesystem's tree lives: the [`Store`] trait, and [`MemoryStore`], the
//! in-memory tree every sandbox used before there was a choice (and still the default).
//! The persistent store is [`crate::redb_store::RedbStore`].
//!
//! A store is a dumb keeper of nodes. It checks nothing: [`crate::FileSystem`] resolves
//! paths, checks names, kinds and every limit, and calls a store only for an operation
//! it has already decided is legal (the preconditions on each method). So no store, and
//! nothing a store file holds, can widen a limit; a store only says how it failed to
//! keep what it was given.
//!
//! Paths are the components of a normalized absolute path (`[]` is `/`), each a name
//! without `/` or NUL.

use std::{borrow::Cow, collections::BTreeMap};

/// A store's own failure (I/O, a damaged file), worded for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

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

/// The tree behind a [`crate::FileSystem`]. Mutations are kept until [`Store::commit`]
/// (a store may keep them earlier) and undone back to the state at [`Store::begin`] by
/// [`Store::rollback`].
pub trait Store: Send {
    /// What is at `path`, or `None`; `[]` is always a directory.
    fn metadata(&self, path: &[&str]) -> Result<Option<Metadata>, StoreError>;
    /// The bytes of the file at `path`. Precondition: a file is there.
    fn read(&self, path: &[&str]) -> Result<Cow<'_, [u8]>, StoreError>;
    /// The names in the directory at `path`, sorted bytewise, with their metadata.
    /// Precondition: a directory is there.
    fn read_dir(&self, path: &[&str]) -> Result<Vec<(String, Metadata)>, StoreError>;
    /// Creates, replaces or (`append`) extends the file at `path`. Preconditions: its
    /// parent is a directory; `path` is a file or nothing.
    fn write(&mut self, path: &[&str], data: &[u8], append: bool) -> Result<(), StoreError>;
    /// Preconditions: the parent is a directory; nothing is at `path`; `path` is not `[]`.
    fn create_dir(&mut self, path: &[&str]) -> Result<(), StoreError>;
    /// Removes the node at `path` with everything under it. Preconditions: something is
    /// there; `path` is not `[]`.
    fn remove(&mut self, path: &[&str]) -> Result<(), StoreError>;
    /// Moves the node at `from` (and everything under it) to `to`. Preconditions: a node
    /// is at `from`, nothing at `to`, `to`'s parent is a directory and not under `from`;
    /// neither is `[]`.
    fn rename(&mut self, from: &[&str], to: &[&str]) -> Result<(), StoreError>;
    /// Removes everything but `/`.
    fn clear(&mut self) -> Result<(), StoreError>;
    /// A value kept beside the tree (the shell's working directory and environment),
    /// committed and rolled back with it.
    fn attribute(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    fn set_attribute(&mut self, key: &str, value: &[u8]) -> Result<(), StoreError>;
    /// Starts a unit that [`Store::rollback`] undoes entirely; what was done before is
    /// committed first.
    fn begin(&mut self) -> Result<(), StoreError>;
    /// Puts back the state at the last [`Store::begin`] (called only after one).
    fn rollback(&mut self) -> Result<(), StoreError>;
    /// Makes everything done so far permanent (for a persistent store: on disk).
    fn commit(&mut self) -> Result<(), StoreError>;
    /// For messages: `memory`, or the store file.
    fn describe(&self) -> String;
    /// Whether the tree outlives the process (then the shell's state is kept too).
    fn persistent(&self) -> bool;
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    File(Vec<u8>),
    Dir(BTreeMap<String, Node>),
}

/// The tree in memory: nested sorted maps. After `begin`, the first change keeps the
/// tree as it was for `rollback` (moved aside, not copied, when that change is `clear`,
/// as in a restore).
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    root: BTreeMap<String, Node>,
    attributes: BTreeMap<String, Vec<u8>>,
    /// Between `begin` and `commit`/`rollback`.
    in_unit: bool,
    saved: Option<Saved>,
}

/// The tree and attributes as they were at `begin`.
type Saved = (BTreeMap<String, Node>, BTreeMap<String, Vec<u8>>);

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn dir(&self, path: &[&str]) -> Option<&BTreeMap<String, Node>> {
        let mut entries = &self.root;
        for component in path {
            match entries.get(*component)? {
                Node::Dir(inner) => entries = inner,
                Node::File(_) => return None,
            }
        }
        Some(entries)
    }

    fn dir_mut(&mut self, path: &[&str]) -> Result<&mut BTreeMap<String, Node>, StoreError> {
        let mut entries = &mut self.root;
        for component in path {
            match entries.get_mut(*component) {
                Some(Node::Dir(inner)) => entries = inner,
                _ => return Err(broken(path)),
            }
        }
        Ok(entries)
    }

    /// Before the first change of a unit: keep the state to roll back to.
    fn save(&mut self) {
        if self.in_unit && self.saved.is_none() {
            self.saved = Some((self.root.clone(), self.attributes.clone()));
        }
    }

    fn node(&self, path: &[&str]) -> Option<&Node> {
        let (name, parent) = path.split_last()?;
        self.dir(parent)?.get(*name)
    }
}

/// A precondition the caller broke: a bug in `FileSystem`, reported rather than panicked on.
fn broken(path: &[&str]) -> StoreError {
    StoreError(format!("/{}: the store was asked for an impossible change (a bug; please report it)", path.join("/")))
}

fn node_metadata(node: &Node) -> Metadata {
    match node {
        Node::File(data) => Metadata::File { size: data.len() as u64 },
        Node::Dir(entries) => Metadata::Dir { entries: entries.len() },
    }
}

impl Store for MemoryStore {
    fn metadata(&self, path: &[&str]) -> Result<Option<Metadata>, StoreError> {
        if path.is_empty() {
            return Ok(Some(Metadata::Dir { entries: self.root.len() }));
        }
        Ok(self.node(path).map(node_metadata))
    }

    fn read(&self, path: &[&str]) -> Result<Cow<'_, [u8]>, StoreError> {
        match self.node(path) {
            Some(Node::File(data)) => Ok(Cow::Borrowed(data)),
            _ => Err(broken(path)),
        }
    }

    fn read_dir(&self, path: &[&str]) -> Result<Vec<(String, Metadata)>, StoreError> {
        let entries = self.dir(path).ok_or_else(|| broken(path))?;
        Ok(entries.iter().map(|(name, node)| (name.clone(), node_metadata(node))).collect())
    }

    fn write(&mut self, path: &[&str], data: &[u8], append: bool) -> Result<(), StoreError> {
        self.save();
        let (name, parent) = path.split_last().ok_or_else(|| broken(path))?;
        let entries = self.dir_mut(parent)?;
        match entries.get_mut(*name) {
            Some(Node::File(old)) if append => old.extend_from_slice(data),
            Some(Node::File(old)) => data.clone_into(old),
            Some(Node::Dir(_)) => return Err(broken(path)),
            None => {
                entries.insert((*name).to_owned(), Node::File(data.to_vec()));
            }
        }
        Ok(())
    }

    fn create_dir(&mut self, path: &[&str]) -> Result<(), StoreError> {
        self.save();
        let (name, parent) = path.split_last().ok_or_else(|| broken(path))?;
        let entries = self.dir_mut(parent)?;
        if entries.contains_key(*name) {
            return Err(broken(path));
        }
        entries.insert((*name).to_owned(), Node::Dir(BTreeMap::new()));
        Ok(())
    }

    fn remove(&mut self, path: &[&str]) -> Result<(), StoreError> {
        self.save();
        let (name, parent) = path.split_last().ok_or_else(|| broken(path))?;
        self.dir_mut(parent)?.remove(*name).map(drop).ok_or_else(|| broken(path))
    }

    fn rename(&mut self, from: &[&str], to: &[&str]) -> Result<(), StoreError> {
        self.save();
        let (from_name, from_parent) = from.split_last().ok_or_else(|| broken(from))?;
        let (to_name, to_parent) = to.split_last().ok_or_else(|| broken(to))?;
        if self.dir(to_parent).is_none_or(|entries| entries.contains_key(*to_name)) {
            return Err(broken(to));
        }
        let node = self.dir_mut(from_parent)?.remove(*from_name).ok_or_else(|| broken(from))?;
        self.dir_mut(to_parent)?.insert((*to_name).to_owned(), node);
        Ok(())
    }

    fn clear(&mut self) -> Result<(), StoreError> {
        let root = std::mem::take(&mut self.root);
        if self.in_unit && self.saved.is_none() {
            self.saved = Some((root, self.attributes.clone()));
        }
        Ok(())
    }

    fn attribute(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.attributes.get(key).cloned())
    }

    fn set_attribute(&mut self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.save();
        self.attributes.insert(key.to_owned(), value.to_vec());
        Ok(())
    }

    fn begin(&mut self) -> Result<(), StoreError> {
        (self.in_unit, self.saved) = (true, None);
        Ok(())
    }

    fn rollback(&mut self) -> Result<(), StoreError> {
        if let Some((root, attributes)) = self.saved.take() {
            self.root = root;
            self.attributes = attributes;
        }
        self.in_unit = false;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        (self.in_unit, self.saved) = (false, None);
        Ok(())
    }

    fn describe(&self) -> String {
        String::from("memory")
    }

    fn persistent(&self) -> bool {
        false
    }
}
