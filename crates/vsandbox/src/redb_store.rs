//! The persistent store: the tree in one redb file, so that a long-lived sandbox (the
//! MCP server, `vsh --store`) survives its process. redb rather than SQLite: pure Rust
//! (no C build), a single file with crash-safe copy-on-write commits, and a lock on the
//! file, so that a second process opening the same store fails instead of corrupting it.
//!
//! Layout (format `agent-sandbox-vsandbox-store 1`, in the `attributes` table under
//! `format`): table `nodes` maps `PARENT \0 NAME` (PARENT is `/a/b`, empty for `/`) to
//! `d` for a directory or `f` followed by a file's bytes. Names hold neither `/` nor
//! NUL, so a directory's children are exactly the keys starting `PARENT \0`, and its
//! deeper descendants those starting `PARENT /`, each a contiguous sorted range.
//!
//! All changes go into one write transaction, committed (durably: redb's `Immediate`)
//! by [`Store::commit`], which the sandbox calls once per command line or tool call; a
//! crash loses at most the line that was running, never half of it.

use std::{
    borrow::Cow,
    path::{Path, PathBuf},
};

use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition, WriteTransaction};

use crate::{
    fs::Metadata,
    store::{Store, StoreError},
};

const NODES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("nodes");
const ATTRIBUTES: TableDefinition<&str, &[u8]> = TableDefinition::new("attributes");
/// The value of the `format` attribute in every store this crate writes.
pub const FORMAT: &str = "agent-sandbox-vsandbox-store 1";

const DIR: u8 = b'd';
const FILE: u8 = b'f';

pub struct RedbStore {
    path: PathBuf,
    db: Database,
    /// Always open: reads and writes go through it, so a command line sees its own
    /// changes before they are committed.
    txn: Option<WriteTransaction>,
    dirty: bool,
}

impl RedbStore {
    /// Opens the store file at `path`, creating it when it does not exist (or is empty).
    /// Fails when another process has it open, or it is not a store of this format.
    pub fn open(path: &Path) -> Result<RedbStore, StoreError> {
        let db = Database::builder().set_check_integrity_on_open(true).create(path).map_err(|err| match err {
            redb::DatabaseError::DatabaseAlreadyOpen => StoreError(format!(
                "{}: the store is open in another process (an agent-sandbox vsh or mcp); stop that one first, or use another store file",
                path.display()
            )),
            other => StoreError(format!("{}: cannot open the store: {other}", path.display())),
        })?;
        let mut store = RedbStore { path: path.to_owned(), db, txn: None, dirty: false };
        store.txn = Some(store.db.begin_write().map_err(|err| store.fail(err))?);
        let format = store.attribute("format")?;
        match format.as_deref() {
            Some(found) if found == FORMAT.as_bytes() => {}
            Some(found) => {
                return Err(StoreError(format!(
                    "{}: not a store this agent-sandbox reads (format {:?}, expected {FORMAT:?})",
                    path.display(),
                    String::from_utf8_lossy(found)
                )))
            }
            None if store.table_is_empty()? => {
                store.set_attribute("format", FORMAT.as_bytes())?;
                store.commit()?;
            }
            None => return Err(StoreError(format!("{}: not a vsandbox store (no format)", path.display()))),
        }
        Ok(store)
    }

    fn fail(&self, err: impl std::fmt::Display) -> StoreError {
        StoreError(format!("{}: {err}", self.path.display()))
    }

    fn txn(&self) -> Result<&WriteTransaction, StoreError> {
        self.txn.as_ref().ok_or_else(|| {
            StoreError(format!(
                "{}: the store is closed after a failed commit; restart the sandbox",
                self.path.display()
            ))
        })
    }

    fn table_is_empty(&self) -> Result<bool, StoreError> {
        let table = self.txn()?.open_table(NODES).map_err(|err| self.fail(err))?;
        table.is_empty().map_err(|err| self.fail(err))
    }

    fn nodes(&self) -> Result<redb::Table<'_, &'static [u8], &'static [u8]>, StoreError> {
        self.txn()?.open_table(NODES).map_err(|err| self.fail(err))
    }

    fn nodes_mut(&mut self) -> Result<redb::Table<'_, &'static [u8], &'static [u8]>, StoreError> {
        self.dirty = true;
        let Some(txn) = self.txn.as_ref() else {
            return Err(StoreError(format!(
                "{}: the store is closed after a failed commit; restart the sandbox",
                self.path.display()
            )));
        };
        txn.open_table(NODES).map_err(|err| StoreError(format!("{}: {err}", self.path.display())))
    }

    fn count_children(&self, table: &redb::Table<'_, &[u8], &[u8]>, dir: &[&str]) -> Result<usize, StoreError> {
        let (start, end) = children_range(dir);
        let range = table.range::<&[u8]>(start.as_slice()..end.as_slice()).map_err(|err| self.fail(err))?;
        Ok(range.count())
    }
}

/// The key of the node at `path` (not `[]`): `PARENT \0 NAME`.
fn key(path: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some((name, parent)) = path.split_last() {
        for component in parent {
            out.push(b'/');
            out.extend_from_slice(component.as_bytes());
        }
        out.push(0);
        out.extend_from_slice(name.as_bytes());
    }
    out
}

/// `/a/b` for `[a, b]`, empty for `[]`.
fn dir_prefix(dir: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for component in dir {
        out.push(b'/');
        out.extend_from_slice(component.as_bytes());
    }
    out
}

/// The keys of `dir`'s children: `[DIR \0, DIR \x01)`.
fn children_range(dir: &[&str]) -> (Vec<u8>, Vec<u8>) {
    let prefix = dir_prefix(dir);
    let mut start = prefix.clone();
    start.push(0);
    let mut end = prefix;
    end.push(1);
    (start, end)
}

/// The keys of everything below `dir`'s children: `[DIR /, DIR 0)` (`0` follows `/`).
fn deeper_range(dir: &[&str]) -> (Vec<u8>, Vec<u8>) {
    let prefix = dir_prefix(dir);
    let mut start = prefix.clone();
    start.push(b'/');
    let mut end = prefix;
    end.push(b'/' + 1);
    (start, end)
}

/// `PARENT \0 NAME` back to the path `PARENT/NAME`.
fn key_path(key: &[u8]) -> Option<Vec<u8>> {
    let nul = key.iter().position(|&byte| byte == 0)?;
    let mut out = key[..nul].to_vec();
    out.push(b'/');
    out.extend_from_slice(&key[nul + 1..]);
    Some(out)
}

/// The key of the node at the path `/a/b/c` (bytes, as `key_path` gives).
fn path_key(path: &[u8]) -> Option<Vec<u8>> {
    let slash = path.iter().rposition(|&byte| byte == b'/')?;
    let mut out = path[..slash].to_vec();
    out.push(0);
    out.extend_from_slice(&path[slash + 1..]);
    Some(out)
}

fn value_metadata(value: &[u8], children: impl FnOnce() -> Result<usize, StoreError>) -> Result<Metadata, StoreError> {
    match value.split_first() {
        Some((&FILE, data)) => Ok(Metadata::File { size: data.len() as u64 }),
        Some((&DIR, _)) => Ok(Metadata::Dir { entries: children()? }),
        _ => Err(StoreError(String::from("a node of unknown kind (the store file is damaged)"))),
    }
}

impl Store for RedbStore {
    fn metadata(&self, path: &[&str]) -> Result<Option<Metadata>, StoreError> {
        let table = self.nodes()?;
        if path.is_empty() {
            return Ok(Some(Metadata::Dir { entries: self.count_children(&table, path)? }));
        }
        let Some(value) = table.get(key(path).as_slice()).map_err(|err| self.fail(err))? else {
            return Ok(None);
        };
        value_metadata(value.value(), || self.count_children(&table, path)).map(Some)
    }

    fn read(&self, path: &[&str]) -> Result<Cow<'_, [u8]>, StoreError> {
        let table = self.nodes()?;
        let value = table.get(key(path).as_slice()).map_err(|err| self.fail(err))?;
        match value.as_ref().map(|value| value.value().split_first()) {
            Some(Some((&FILE, data))) => Ok(Cow::Owned(data.to_vec())),
            _ => Err(self.fail(format!("/{}: not a file in the store", path.join("/")))),
        }
    }

    fn read_dir(&self, path: &[&str]) -> Result<Vec<(String, Metadata)>, StoreError> {
        let table = self.nodes()?;
        let (start, end) = children_range(path);
        let mut out = Vec::new();
        for item in table.range::<&[u8]>(start.as_slice()..end.as_slice()).map_err(|err| self.fail(err))? {
            let (found, value) = item.map_err(|err| self.fail(err))?;
            let name_bytes = &found.value()[start.len()..];
            let name = std::str::from_utf8(name_bytes)
                .map_err(|_| self.fail("a name that is not UTF-8 (the store file is damaged)"))?
                .to_owned();
            let mut child = path.to_vec();
            child.push(&name);
            let meta = value_metadata(value.value(), || self.count_children(&table, &child))?;
            out.push((name, meta));
        }
        Ok(out)
    }

    fn write(&mut self, path: &[&str], data: &[u8], append: bool) -> Result<(), StoreError> {
        let key = key(path);
        let path_text = self.path.display().to_string();
        let mut table = self.nodes_mut()?;
        let fail = |err: redb::StorageError| StoreError(format!("{path_text}: {err}"));
        let mut value = Vec::new();
        if append {
            if let Some(old) = table.get(key.as_slice()).map_err(fail)? {
                value.extend_from_slice(old.value());
            }
        }
        if value.is_empty() {
            value.push(FILE);
        }
        value.extend_from_slice(data);
        table.insert(key.as_slice(), value.as_slice()).map_err(fail)?;
        Ok(())
    }

    fn create_dir(&mut self, path: &[&str]) -> Result<(), StoreError> {
        let key = key(path);
        let path_text = self.path.display().to_string();
        let mut table = self.nodes_mut()?;
        table.insert(key.as_slice(), [DIR].as_slice()).map_err(|err| StoreError(format!("{path_text}: {err}")))?;
        Ok(())
    }

    fn remove(&mut self, path: &[&str]) -> Result<(), StoreError> {
        let key = key(path);
        let path_text = self.path.display().to_string();
        let mut table = self.nodes_mut()?;
        let fail = |err: redb::StorageError| StoreError(format!("{path_text}: {err}"));
        table.remove(key.as_slice()).map_err(fail)?;
        for (start, end) in [children_range(path), deeper_range(path)] {
            table.retain_in::<&[u8], _>(start.as_slice()..end.as_slice(), |_, _| false).map_err(fail)?;
        }
        Ok(())
    }

    fn rename(&mut self, from: &[&str], to: &[&str]) -> Result<(), StoreError> {
        let from_prefix = dir_prefix(from);
        let to_prefix = dir_prefix(to);
        let path_text = self.path.display().to_string();
        let mut table = self.nodes_mut()?;
        let fail = |err: redb::StorageError| StoreError(format!("{path_text}: {err}"));
        // The node itself and everything below it, read out, removed, written back
        // under the new prefix.
        let mut moved: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        if let Some(value) = table.remove(key(from).as_slice()).map_err(fail)? {
            moved.push((key(to), value.value().to_vec()));
        }
        for (start, end) in [children_range(from), deeper_range(from)] {
            for item in
                table.extract_from_if::<&[u8], _>(start.as_slice()..end.as_slice(), |_, _| true).map_err(fail)?
            {
                let (old_key, value) = item.map_err(fail)?;
                let old_path =
                    key_path(old_key.value()).ok_or_else(|| StoreError(format!("{path_text}: a damaged key")))?;
                let mut new_path = to_prefix.clone();
                new_path.extend_from_slice(&old_path[from_prefix.len()..]);
                let new_key = path_key(&new_path).ok_or_else(|| StoreError(format!("{path_text}: a damaged key")))?;
                moved.push((new_key, value.value().to_vec()));
            }
        }
        for (new_key, value) in moved {
            table.insert(new_key.as_slice(), value.as_slice()).map_err(fail)?;
        }
        Ok(())
    }

    fn clear(&mut self) -> Result<(), StoreError> {
        let path_text = self.path.display().to_string();
        let mut table = self.nodes_mut()?;
        table.retain(|_, _| false).map_err(|err| StoreError(format!("{path_text}: {err}")))
    }

    fn attribute(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let table = self.txn()?.open_table(ATTRIBUTES).map_err(|err| self.fail(err))?;
        let value = table.get(key).map_err(|err| self.fail(err))?;
        Ok(value.map(|value| value.value().to_vec()))
    }

    fn set_attribute(&mut self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.dirty = true;
        let mut table = self.txn()?.open_table(ATTRIBUTES).map_err(|err| self.fail(err))?;
        table.insert(key, value).map_err(|err| self.fail(err))?;
        Ok(())
    }

    fn begin(&mut self) -> Result<(), StoreError> {
        self.commit()
    }

    fn rollback(&mut self) -> Result<(), StoreError> {
        if let Some(txn) = self.txn.take() {
            txn.abort().map_err(|err| self.fail(err))?;
        }
        self.dirty = false;
        self.txn = Some(self.db.begin_write().map_err(|err| self.fail(err))?);
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        if !self.dirty {
            return Ok(());
        }
        self.dirty = false;
        if let Some(txn) = self.txn.take() {
            txn.commit().map_err(|err| self.fail(format!("saving failed: {err}")))?;
        }
        self.txn = Some(self.db.begin_write().map_err(|err| self.fail(err))?);
        Ok(())
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn persistent(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_children_and_descendants_into_contiguous_ranges() {
        assert_eq!(key(&["a"]), b"\0a");
        assert_eq!(key(&["a", "b", "c"]), b"/a/b\0c");
        assert_eq!(key_path(b"/a/b\0c").as_deref(), Some(&b"/a/b/c"[..]));
        assert_eq!(path_key(b"/a/b/c").as_deref(), Some(&b"/a/b\0c"[..]));
        let (start, end) = children_range(&["a"]);
        for child in [key(&["a", "b"]), key(&["a", "\u{1}"]), key(&["a", "zz"])] {
            assert!(start <= child && child < end, "{child:?}");
        }
        let (deep_start, deep_end) = deeper_range(&["a"]);
        for deeper in [key(&["a", "b", "c"]), key(&["a", "b", "c", "d"])] {
            assert!(deep_start <= deeper && deeper < deep_end, "{deeper:?}");
        }
        // A sibling whose name extends "a" falls in neither range.
        for other in [key(&["ab"]), key(&["ab", "c"]), key(&["a.b", "c"]), key(&["a0", "c"])] {
            assert!(!(start <= other && other < end), "{other:?}");
            assert!(!(deep_start <= other && other < deep_end), "{other:?}");
        }
    }
}
