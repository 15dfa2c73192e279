//! Whether a secret file's content is already in the repository, decided in process: the
//! index is read with gix and the file hashed here, so no path the agent named ever goes
//! through a git subprocess's input protocol (`hash-object --stdin-paths` unquotes
//! `"…"` lines, which let a crafted index entry name another file). The index's flags and
//! stat data are the agent's to set (`--assume-unchanged`, `--cacheinfo`), so only a
//! hash of the file's own bytes counts.

use std::{
    collections::HashMap,
    os::unix::{ffi::OsStrExt, fs::MetadataExt},
    path::{Path, PathBuf},
};

use crate::masks::{Committed, HitFacts};

/// A secret file bigger than this is masked without hashing it.
const HASH_LIMIT: u64 = 64 * 1024 * 1024;

/// Stage-0 regular-file entries of the index: path bytes → blob id.
pub struct Index {
    blobs: HashMap<Vec<u8>, gix::ObjectId>,
}

impl Index {
    /// The index of the work tree at `root` (in its git directory), or `None` when
    /// there is none or it cannot be read (then everything is masked).
    pub fn load(root: &Path) -> Option<Index> {
        let layout = gitfacts::layout(root)?;
        let path = layout.git_dir.join("index");
        // Never block on a FIFO planted as the index.
        util::fs::open_regular(&path, false).ok()?;
        let file = gix::index::File::at(&path, gix::hash::Kind::Sha1, false, Default::default()).ok()?;
        let mut blobs = HashMap::new();
        for entry in file.entries() {
            let regular =
                matches!(entry.mode, gix::index::entry::Mode::FILE | gix::index::entry::Mode::FILE_EXECUTABLE);
            if regular && entry.stage_raw() == 0 {
                blobs.insert(entry.path(&file).to_vec(), entry.id);
            }
        }
        Some(Index { blobs })
    }

    /// Whether the file at `root/rel` has exactly the bytes of its index blob.
    pub fn is_committed(&self, root: &Path, rel: &Path) -> bool {
        let Some(blob) = self.blobs.get(rel.as_os_str().as_bytes()) else { return false };
        let Ok(bytes) = util::fs::read_regular_nofollow(&root.join(rel), HASH_LIMIT) else { return false };
        gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, &bytes).is_ok_and(|id| id == *blob)
    }
}

/// The facts [`crate::masks::decide`] needs for each hit.
pub fn hit_facts(root: &Path, hits: Vec<secrets::SecretHit>, index: Option<&Index>) -> Vec<HitFacts> {
    hits.into_iter()
        .map(|hit| {
            let committed = match (index, &hit.kind) {
                (Some(index), secrets::EntryKind::File) => Committed::File(index.is_committed(root, &hit.rel_path)),
                (Some(index), secrets::EntryKind::Dir) => {
                    let mut files = Vec::new();
                    if collect_files(&hit.path, root, &mut files) {
                        Committed::Dir(
                            files.into_iter().map(|rel| (rel.clone(), index.is_committed(root, &rel))).collect(),
                        )
                    } else {
                        // A part it cannot list stays behind the whole directory's mask.
                        Committed::Unknown
                    }
                }
                _ => Committed::Unknown,
            };
            let target = (hit.kind == secrets::EntryKind::Symlink)
                .then(|| hit.path.canonicalize().ok().map(|target| (target.clone(), target.is_dir())))
                .flatten();
            // What a mask would hide: for a symlink, its target.
            let identity = match hit.kind {
                secrets::EntryKind::Symlink => hit.path.metadata().ok().map(|meta| (meta.dev(), meta.ino())),
                _ => crate::mask_record::identity(&hit.path),
            };
            HitFacts { hit, committed, target, identity }
        })
        .collect()
}

/// Every non-directory entry under `dir` (symlinks not followed), relative to `root`;
/// false when some part could not be listed.
fn collect_files(dir: &Path, root: &Path, out: &mut Vec<PathBuf>) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    for entry in entries {
        let Ok(entry) = entry else { return false };
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => {
                if !collect_files(&path, root, out) {
                    return false;
                }
            }
            Ok(_) => match path.strip_prefix(root) {
                Ok(rel) => out.push(rel.to_path_buf()),
                Err(_) => return false,
            },
            Err(_) => return false,
        }
    }
    true
}
