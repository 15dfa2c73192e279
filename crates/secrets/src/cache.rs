//! The scan cache: what each directory held the last time it was listed, so a start in
//! a big tree stats its directories instead of listing every entry again.
//!
//! A directory's cached listing is reused only if its device, inode and ctime are
//! unchanged ([`DirKey`]). Adding, removing or renaming an entry always updates the
//! directory's ctime (and its mtime, which adds nothing: `touch -d` sets an mtime, and
//! no user-space call sets a ctime), so a sandboxed process cannot make a changed
//! directory look unchanged; the device tells apart two filesystems' equal inode
//! numbers (a snapshot mounted where the directory was). The key says nothing about
//! the subdirectories: a change deep in a tree leaves its ancestors' times alone, so
//! every directory is still `lstat`ed, by the scan that replays its parent's listing;
//! what the cache saves is reading its entries and matching them. Directories whose ctime was
//! within [`RACY`] of the scan are not cached at all: timestamps are coarse, and a
//! change in the same tick as the listing would otherwise go unseen (git's "racy
//! index" problem). The file is trusted only as far as its location is: the caller
//! keeps it where the sandbox cannot write (and hides that directory from it).
//!
//! Format (version 2), all integers little-endian: the magic line, the matcher
//! fingerprint (u64), the root (bytes), then one record per directory: path, device and
//! inode (u64 each), ctime seconds and nanoseconds (i64 each), subdirectory names, and
//! hits (name, kind byte, pattern). Byte strings are u32-length-prefixed. Anything malformed makes
//! the whole file ignored: the scan just lists everything.

use std::{
    collections::HashMap,
    ffi::OsString,
    io::Write,
    os::unix::ffi::{OsStrExt, OsStringExt},
    path::Path,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use crate::EntryKind;

const MAGIC: &[u8] = b"agent-sandbox scan cache v2\n";
/// A directory changed this recently is listed again on the next scan.
pub(crate) const RACY: Duration = Duration::from_secs(2);

/// What says a directory is the one listed, unchanged: its device, inode and ctime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirKey {
    pub dev: u64,
    pub ino: u64,
    pub ctime: (i64, i64),
}

impl DirKey {
    pub(crate) fn of(st: &libc::stat) -> DirKey {
        #[allow(clippy::unnecessary_cast)] // the field types differ between targets
        DirKey { dev: st.st_dev as u64, ino: st.st_ino as u64, ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64) }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CachedDir {
    pub key: DirKey,
    /// Every subdirectory (skipped ones too: skips can change between runs), not
    /// including those reported as secrets.
    pub subdirs: Vec<OsString>,
    pub hits: Vec<CachedHit>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CachedHit {
    pub name: OsString,
    pub kind: EntryKind,
    pub pattern: String,
}

/// Whether a directory with this ctime may be cached by a scan that started at `start`.
pub(crate) fn settled(ctime: (i64, i64), start: SystemTime) -> bool {
    let changed = UNIX_EPOCH + Duration::new(ctime.0.max(0) as u64, ctime.1.clamp(0, 999_999_999) as u32);
    changed + RACY < start
}

pub(crate) fn load(path: &Path, fingerprint: u64, root: &Path) -> HashMap<OsString, CachedDir> {
    std::fs::read(path).ok().and_then(|bytes| decode(&bytes, fingerprint, root)).unwrap_or_default()
}

pub(crate) fn store<'a>(
    path: &Path,
    fingerprint: u64,
    root: &Path,
    dirs: impl Iterator<Item = (&'a OsString, &'a CachedDir)>,
) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(64 * 1024);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&fingerprint.to_le_bytes());
    put_bytes(&mut out, root.as_os_str().as_bytes());
    for (dir, cached) in dirs {
        put_bytes(&mut out, dir.as_os_str().as_bytes());
        out.extend_from_slice(&cached.key.dev.to_le_bytes());
        out.extend_from_slice(&cached.key.ino.to_le_bytes());
        out.extend_from_slice(&cached.key.ctime.0.to_le_bytes());
        out.extend_from_slice(&cached.key.ctime.1.to_le_bytes());
        out.extend_from_slice(&(cached.subdirs.len() as u32).to_le_bytes());
        for sub in &cached.subdirs {
            put_bytes(&mut out, sub.as_bytes());
        }
        out.extend_from_slice(&(cached.hits.len() as u32).to_le_bytes());
        for hit in &cached.hits {
            put_bytes(&mut out, hit.name.as_bytes());
            out.push(kind_byte(hit.kind));
            put_bytes(&mut out, hit.pattern.as_bytes());
        }
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(&out)?;
    tmp.persist(path).map_err(|err| err.error)?;
    Ok(())
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn kind_byte(kind: EntryKind) -> u8 {
    match kind {
        EntryKind::File => 0,
        EntryKind::Dir => 1,
        EntryKind::Symlink => 2,
        EntryKind::Other => 3,
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.bytes.len() < n {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }
}

fn decode(bytes: &[u8], fingerprint: u64, root: &Path) -> Option<HashMap<OsString, CachedDir>> {
    let mut reader = Reader { bytes };
    if reader.take(MAGIC.len())? != MAGIC
        || reader.u64()? != fingerprint
        || reader.bytes()? != root.as_os_str().as_bytes()
    {
        return None;
    }
    let mut dirs = HashMap::with_capacity(4096);
    while !reader.bytes.is_empty() {
        let dir = OsString::from_vec(reader.bytes()?.to_vec());
        let key = DirKey { dev: reader.u64()?, ino: reader.u64()?, ctime: (reader.i64()?, reader.i64()?) };
        let subdirs = (0..reader.u32()?)
            .map(|_| reader.bytes().map(|name| OsString::from_vec(name.to_vec())))
            .collect::<Option<Vec<_>>>()?;
        let hits = (0..reader.u32()?)
            .map(|_| {
                let name = OsString::from_vec(reader.bytes()?.to_vec());
                let kind = match reader.take(1)?[0] {
                    0 => EntryKind::File,
                    1 => EntryKind::Dir,
                    2 => EntryKind::Symlink,
                    3 => EntryKind::Other,
                    _ => return None,
                };
                let pattern = String::from_utf8(reader.bytes()?.to_vec()).ok()?;
                Some(CachedHit { name, kind, pattern })
            })
            .collect::<Option<Vec<_>>>()?;
        if !Path::new(&dir).starts_with(root) {
            return None;
        }
        dirs.insert(dir, CachedDir { key, subdirs, hits });
    }
    Some(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_foreign_file_is_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c/cache");
        let root = Path::new("/p");
        let mut dirs = HashMap::new();
        dirs.insert(
            OsString::from("/p/a"),
            CachedDir {
                key: DirKey { dev: 2049, ino: 7, ctime: (1_700_000_000, 5) },
                subdirs: vec!["b".into(), OsString::from_vec(b"we\nird".to_vec())],
                hits: vec![CachedHit { name: ".env".into(), kind: EntryKind::Symlink, pattern: ".env".into() }],
            },
        );
        store(&path, 42, root, dirs.iter()).expect("store");
        assert_eq!(load(&path, 42, root), dirs);
        assert!(load(&path, 43, root).is_empty(), "other patterns");
        assert!(load(&path, 42, Path::new("/q")).is_empty(), "other root");
        let mut bytes = std::fs::read(&path).expect("read");
        bytes.truncate(bytes.len() - 3);
        std::fs::write(&path, bytes).expect("write");
        assert!(load(&path, 42, root).is_empty(), "truncated");
    }

    #[test]
    fn recent_changes_are_racy() {
        let now = SystemTime::now();
        let secs = now.duration_since(UNIX_EPOCH).expect("after 1970").as_secs() as i64;
        assert!(!settled((secs, 0), now));
        assert!(!settled((secs - 1, 0), now));
        assert!(settled((secs - 10, 0), now));
    }
}
