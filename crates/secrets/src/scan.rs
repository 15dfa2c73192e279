//! Walks a project tree in parallel (std threads sharing a work queue of
//! directories) and reports every entry a [`SecretMatcher`] marks as a secret. It
//! uses `read_dir` file types (no stat per entry), never follows symlinks, does not
//! descend into matching directories or skipped ones, and fails closed: any
//! directory it cannot list turns the whole scan into an error. With a cache file
//! ([`scan_cached`]), unchanged directories are stat'ed instead of listed (`cache.rs`).

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::SystemTime;

use crate::cache::{self, CachedDir, CachedHit, DirKey};
use crate::SecretMatcher;

/// What kind of filesystem entry a secret is (as listed, symlinks not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory (reported as a whole; its contents were not scanned).
    Dir,
    /// A symbolic link; the caller decides how to resolve it.
    Symlink,
    /// A fifo, socket or device node.
    Other,
}

/// One secret found by [`scan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretHit {
    /// The entry's path: `root` joined with `rel_path`.
    pub path: PathBuf,
    /// The entry's path relative to the scan root.
    pub rel_path: PathBuf,
    /// What the entry is.
    pub kind: EntryKind,
    /// The secret pattern that matched it.
    pub pattern: String,
}

/// Why a scan failed. A failed scan never yields a partial list.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// A directory (or an entry's type) under the root could not be read, so secrets
    /// inside it could be missed.
    #[error(
        "cannot scan {} for secret files: {error} (fix its permissions, or exclude it with --exclude {})",
        path.display(),
        path.display()
    )]
    Unreadable {
        /// The directory or entry that could not be read.
        path: PathBuf,
        /// The underlying error (part of the message, so not also a `#[source]`).
        error: io::Error,
    },
}

/// Walk `root` and return every entry whose path is a secret, sorted by path.
///
/// `skip`: directories not to descend into (they are hidden from the agent anyway);
/// they are compared with `root.join(relative path)`, so give them in the same form
/// as `root` (e.g. both canonical). A skipped directory is not reported either.
pub fn scan(root: &Path, matcher: &SecretMatcher, skip: &[PathBuf]) -> Result<Vec<SecretHit>, ScanError> {
    walk(root, matcher, skip, None)
}

/// Where a cached scan keeps its listings: a file for the next process, and, once a
/// scan has run, the listings it used and made, in memory, for the next scan of the
/// same tree with the same matcher in this process (`exec`'s exit check lists what its
/// start listed: from memory it only stats, with no file to read and decode again).
#[derive(Debug)]
pub struct ScanCache {
    file: PathBuf,
    kept: Option<Kept>,
}

#[derive(Debug)]
struct Kept {
    fingerprint: u64,
    root: PathBuf,
    dirs: HashMap<OsString, CachedDir>,
}

impl ScanCache {
    /// Listings kept in `file` (read by the first scan, written by each that changed them).
    pub fn new(file: &Path) -> ScanCache {
        ScanCache { file: file.to_path_buf(), kept: None }
    }

    /// The last scan's listings if they were made for this tree and matcher, else the
    /// file's.
    fn take(&mut self, fingerprint: u64, root: &Path) -> HashMap<OsString, CachedDir> {
        match self.kept.take() {
            Some(kept) if kept.fingerprint == fingerprint && kept.root == root => kept.dirs,
            _ => cache::load(&self.file, fingerprint, root),
        }
    }
}

/// [`scan`], reusing and then updating the listings kept in `cache` (see `cache.rs` for
/// when a cached listing is trusted). A cache file that cannot be read is ignored; one
/// that cannot be written only costs speed next time.
pub fn scan_cached(
    root: &Path,
    matcher: &SecretMatcher,
    skip: &[PathBuf],
    cache: &mut ScanCache,
) -> Result<Vec<SecretHit>, ScanError> {
    walk(root, matcher, skip, Some(cache))
}

fn walk(
    root: &Path,
    matcher: &SecretMatcher,
    skip: &[PathBuf],
    mut scan_cache: Option<&mut ScanCache>,
) -> Result<Vec<SecretHit>, ScanError> {
    if skip.iter().any(|s| s == root) {
        return Ok(Vec::new());
    }
    let fingerprint = matcher.fingerprint();
    let cached = match &mut scan_cache {
        Some(scan_cache) => scan_cache.take(fingerprint, root),
        None => HashMap::new(),
    };
    let shared = Shared {
        root,
        matcher,
        skip,
        caching: scan_cache.is_some(),
        cache: &cached,
        start: SystemTime::now(),
        queue: Mutex::new(Queue {
            jobs: vec![Job { dir: root.to_path_buf(), rel: String::new(), parent: None }],
            finished: false,
            error: None,
        }),
        wakeup: Condvar::new(),
        pending: AtomicUsize::new(1),
        waiting: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    };
    let threads = thread::available_parallelism().map_or(1, |n| n.get());
    let mut hits: Vec<SecretHit> = Vec::new();
    let mut recorded: HashMap<OsString, CachedDir> = HashMap::new();
    let mut reused: Vec<&OsString> = Vec::new();
    let mut listed = 0;
    thread::scope(|s| {
        let workers: Vec<_> = (0..threads).map(|_| s.spawn(|| Worker::new(&shared).run())).collect();
        for worker in workers {
            match worker.join() {
                Ok(done) => {
                    hits.extend(done.hits);
                    recorded.extend(done.recorded);
                    reused.extend(done.reused);
                    listed += done.listed;
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    let queue = shared.queue.into_inner().unwrap_or_else(PoisonError::into_inner);
    if let Some(error) = queue.error {
        return Err(error);
    }
    if let Some(scan_cache) = scan_cache {
        // What no longer holds is dropped: directories gone or changed since.
        let stale = reused.len() != cached.len();
        let reused_keys: Option<std::collections::HashSet<OsString>> =
            stale.then(|| reused.iter().map(|dir| (*dir).clone()).collect());
        if listed > 0 || stale {
            let kept = reused.into_iter().filter_map(|dir| cached.get_key_value(dir));
            // Only speed depends on this write; a failure is not the scan's failure.
            let _ = cache::store(&scan_cache.file, fingerprint, root, kept.chain(recorded.iter()));
        }
        let mut dirs = cached;
        if let Some(reused_keys) = reused_keys {
            dirs.retain(|dir, _| reused_keys.contains(dir));
        }
        dirs.extend(recorded);
        scan_cache.kept = Some(Kept { fingerprint, root: root.to_path_buf(), dirs });
    }
    hits.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    Ok(hits)
}

/// A directory waiting to be listed.
struct Job {
    dir: PathBuf,
    /// '/'-joined path relative to the root; only filled when the matcher needs it.
    rel: String,
    /// The parent directory whose cached listing named this one, held open: stat'ing
    /// `dir` by its name relative to it spares the kernel a walk of the whole path
    /// (most of a cached scan's time), and it is the very directory that was checked.
    parent: Option<Arc<OwnedFd>>,
}

struct Queue {
    jobs: Vec<Job>,
    finished: bool,
    error: Option<ScanError>,
}

/// State shared by all workers. `pending` counts directories found but not yet fully
/// listed (in the shared queue, in a worker's local stack, or being listed); the walk
/// is over when it drops to zero.
struct Shared<'a> {
    root: &'a Path,
    matcher: &'a SecretMatcher,
    skip: &'a [PathBuf],
    /// Stat each directory and record its listing for the cache.
    caching: bool,
    cache: &'a HashMap<OsString, CachedDir>,
    start: SystemTime,
    queue: Mutex<Queue>,
    wakeup: Condvar,
    pending: AtomicUsize,
    /// Workers blocked on `wakeup`: a hint that busy workers should share work.
    waiting: AtomicUsize,
    /// Set on error so busy workers stop early.
    stop: AtomicBool,
}

impl Shared<'_> {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Blocks until there is a shared job, or returns `None` once the walk is over.
    fn take(&self) -> Option<Job> {
        let mut queue = self.lock();
        loop {
            if queue.finished {
                return None;
            }
            if let Some(job) = queue.jobs.pop() {
                return Some(job);
            }
            if self.pending.load(Ordering::Acquire) == 0 {
                queue.finished = true;
                self.wakeup.notify_all();
                return None;
            }
            self.waiting.fetch_add(1, Ordering::Relaxed);
            queue = self.wakeup.wait(queue).unwrap_or_else(PoisonError::into_inner);
            self.waiting.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn finish(&self) {
        self.lock().finished = true;
        self.wakeup.notify_all();
    }

    fn fail(&self, error: ScanError) {
        self.stop.store(true, Ordering::Relaxed);
        let mut queue = self.lock();
        queue.error.get_or_insert(error);
        queue.finished = true;
        drop(queue);
        self.wakeup.notify_all();
    }

    /// Moves half of a busy worker's local stack to the shared queue.
    fn share(&self, local: &mut Vec<Job>) {
        // The bottom of a LIFO stack holds the shallowest, likely biggest subtrees.
        let half = local.len() / 2;
        let mut queue = self.lock();
        queue.jobs.extend(local.drain(..half));
        drop(queue);
        self.wakeup.notify_all();
    }
}

struct Worker<'s, 'a> {
    shared: &'s Shared<'a>,
    local: Vec<Job>,
    hits: Vec<SecretHit>,
    /// New listings for the next cache file.
    recorded: Vec<(OsString, CachedDir)>,
    /// Cached listings that still hold.
    reused: Vec<&'a OsString>,
    /// Directories listed rather than taken from the cache.
    listed: usize,
    /// Reused buffer for an entry's root-relative path.
    rel_buf: String,
}

impl<'s, 'a> Worker<'s, 'a> {
    fn new(shared: &'s Shared<'a>) -> Self {
        Self {
            shared,
            local: Vec::new(),
            hits: Vec::new(),
            recorded: Vec::new(),
            reused: Vec::new(),
            listed: 0,
            rel_buf: String::new(),
        }
    }

    fn run(mut self) -> Self {
        loop {
            let Some(job) = self.local.pop().or_else(|| self.shared.take()) else {
                return self;
            };
            if self.shared.stop.load(Ordering::Relaxed) {
                return self;
            }
            let before = self.local.len();
            if let Err(error) = self.visit(&job) {
                self.shared.fail(error);
                return self;
            }
            let found = self.local.len() - before;
            if found > 0 {
                self.shared.pending.fetch_add(found, Ordering::AcqRel);
            }
            if self.shared.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                // That was the last directory anywhere (our local stack is empty too).
                self.shared.finish();
                return self;
            }
            if self.local.len() > 1 && self.shared.waiting.load(Ordering::Relaxed) > 0 {
                self.shared.share(&mut self.local);
            }
        }
    }

    /// Handles one directory: from the cache when its device, inode and ctime are
    /// unchanged, else by listing it.
    fn visit(&mut self, job: &Job) -> Result<(), ScanError> {
        if !self.shared.caching {
            return self.list(job, None);
        }
        let is_root = job.dir.as_path() == self.shared.root;
        // Stat before listing: a change after this stat changes the ctime recorded
        // next time, so it cannot hide behind this listing.
        let stat = match &job.parent {
            Some(parent) => stat_at(parent, &job.dir),
            None => fs::symlink_metadata(&job.dir).map(|meta| {
                let ctime = (meta.ctime(), meta.ctime_nsec());
                (meta.is_dir(), DirKey { dev: meta.dev(), ino: meta.ino(), ctime })
            }),
        };
        let (is_dir, key) = match stat {
            Ok(stat) => stat,
            Err(e) if e.kind() == io::ErrorKind::NotFound && !is_root => return Ok(()),
            Err(error) => return Err(ScanError::Unreadable { path: job.dir.clone(), error }),
        };
        if !is_dir {
            return Ok(()); // replaced by a symlink or a file since its parent was listed
        }
        let cache: &'a HashMap<OsString, CachedDir> = self.shared.cache;
        match cache.get_key_value(job.dir.as_os_str()) {
            Some((dir, cached)) if cached.key == key => {
                // Its subdirectories are stat'ed relative to it, held open, when it is
                // still the directory just checked (else by their whole paths).
                let this = if cached.subdirs.is_empty() { None } else { open_checked(job, key) };
                self.replay(job, cached, this);
                self.reused.push(dir);
                Ok(())
            }
            _ => self.list(job, Some(key)),
        }
    }

    /// Emits a cached listing's hits and queues its subdirectories.
    fn replay(&mut self, job: &Job, cached: &CachedDir, this: Option<Arc<OwnedFd>>) {
        for hit in &cached.hits {
            let path = job.dir.join(&hit.name);
            if self.shared.skip.contains(&path) {
                continue;
            }
            let rel_path = path.strip_prefix(self.shared.root).map_or_else(|_| path.clone(), Path::to_path_buf);
            self.hits.push(SecretHit { path, rel_path, kind: hit.kind, pattern: hit.pattern.clone() });
        }
        for sub in &cached.subdirs {
            let dir = job.dir.join(sub);
            if self.shared.skip.contains(&dir) {
                continue;
            }
            let rel = if self.shared.matcher.needs_rel_path() {
                let name = sub.to_string_lossy();
                if job.rel.is_empty() {
                    name.into_owned()
                } else {
                    format!("{}/{name}", job.rel)
                }
            } else {
                String::new()
            };
            self.local.push(Job { dir, rel, parent: this.clone() });
        }
    }

    /// Lists one directory: records secrets, pushes subdirectories to descend into,
    /// and with `key` (its device, inode and ctime) records the listing for the cache.
    fn list(&mut self, job: &Job, key: Option<DirKey>) -> Result<(), ScanError> {
        let unreadable = |path: &Path, error| ScanError::Unreadable { path: path.to_path_buf(), error };
        self.listed += 1;
        let mut record = key.map(|key| CachedDir { key, subdirs: Vec::new(), hits: Vec::new() });
        let is_root = job.dir.as_path() == self.shared.root;
        let entries = match fs::read_dir(&job.dir) {
            Ok(entries) => entries,
            // Removed since its parent was listed: nothing left to hide.
            Err(e) if e.kind() == io::ErrorKind::NotFound && !is_root => return Ok(()),
            // Another user's directory this user may not list (`/tmp/tmux-0` when the
            // project is `/tmp`): the sandbox runs as this user without capabilities, so
            // it cannot list or enter it either, nor change its mode. One of this user's
            // own stays an error: the agent could `chmod` it and read what is inside.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied && !is_root && owned_by_another_user(&job.dir) => {
                return Ok(())
            }
            Err(e) => return Err(unreadable(&job.dir, e)),
        };
        let matcher = self.shared.matcher;
        let needs_rel = matcher.needs_rel_path();
        for entry in entries {
            let entry = entry.map_err(|e| unreadable(&job.dir, e))?;
            let file_type = match entry.file_type() {
                Ok(t) => t,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(unreadable(&entry.path(), e)),
            };
            let name_os = entry.file_name();
            let name = name_os.to_string_lossy();
            let rel = if needs_rel {
                self.rel_buf.clear();
                if !job.rel.is_empty() {
                    self.rel_buf.push_str(&job.rel);
                    self.rel_buf.push('/');
                }
                self.rel_buf.push_str(&name);
                Some(self.rel_buf.as_str())
            } else {
                None
            };
            // `is_dir` is false for symlinks: file types come from the listing.
            let dir_path = file_type.is_dir().then(|| entry.path());
            // Skipped directories are neither reported nor descended into, but the cache
            // records what they are (a secret or a plain directory): the skip list can
            // change before the listing is replayed.
            let skipped = dir_path.as_ref().is_some_and(|path| self.shared.skip.contains(path));
            let found = matcher
                .check(&name, rel)
                .or_else(|| if file_type.is_dir() { None } else { matcher.marker(&name) })
                .or_else(|| matcher.is_copy(&name).then_some(crate::COPY_PATTERN));
            // A copy's directory is reported and descended into.
            let descend = found.is_none() || found == Some(crate::COPY_PATTERN);
            if let Some(pattern) = found {
                let kind = if file_type.is_symlink() {
                    EntryKind::Symlink
                } else if file_type.is_dir() {
                    EntryKind::Dir
                } else if file_type.is_file() {
                    EntryKind::File
                } else {
                    EntryKind::Other
                };
                if let Some(record) = &mut record {
                    record.hits.push(CachedHit { name: name_os.clone(), kind, pattern: pattern.to_owned() });
                }
                if !skipped {
                    let path = dir_path.clone().unwrap_or_else(|| entry.path());
                    let rel_path = path.strip_prefix(self.shared.root).map_or_else(|_| path.clone(), Path::to_path_buf);
                    self.hits.push(SecretHit { path, rel_path, kind, pattern: pattern.to_owned() });
                }
            }
            if let Some(dir) = dir_path.filter(|_| descend) {
                if let Some(record) = &mut record {
                    record.subdirs.push(name_os.clone());
                }
                if !skipped {
                    self.local.push(Job { dir, rel: rel.map(str::to_owned).unwrap_or_default(), parent: None });
                }
            }
        }
        if let Some(record) = record {
            if cache::settled(record.key.ctime, self.shared.start) {
                self.recorded.push((job.dir.clone().into_os_string(), record));
            }
        }
        Ok(())
    }
}

/// `lstat` of `path`'s last component relative to the open directory `parent`: whether
/// it is a directory, and its device, inode and ctime.
fn stat_at(parent: &OwnedFd, path: &Path) -> io::Result<(bool, DirKey)> {
    let name = path.file_name().ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let name = std::ffi::CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a zeroed stat is a valid out-parameter; `name` is NUL-terminated and
    // `parent` an open descriptor for the duration of the call.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatat(parent.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
    Ok((is_dir, DirKey::of(&st)))
}

/// The job's directory opened with `O_PATH` (no symlink followed), if it is still the
/// one with this device, inode and ctime.
fn open_checked(job: &Job, key: DirKey) -> Option<Arc<OwnedFd>> {
    let (dirfd, name) = match &job.parent {
        Some(parent) => (parent.as_raw_fd(), std::ffi::CString::new(job.dir.file_name()?.as_bytes()).ok()?),
        None => (libc::AT_FDCWD, std::ffi::CString::new(job.dir.as_os_str().as_bytes()).ok()?),
    };
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `name` is NUL-terminated; the descriptor returned is owned once below.
    let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags) };
    if fd < 0 {
        return None;
    }
    // SAFETY: openat just returned this descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let empty = c"";
    // SAFETY: as in `stat_at`; AT_EMPTY_PATH stats `fd` itself.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatat(fd.as_raw_fd(), empty.as_ptr(), &mut st, libc::AT_EMPTY_PATH) } != 0 {
        return None;
    }
    (DirKey::of(&st) == key).then(|| Arc::new(fd))
}

/// Whether `dir` (not followed) belongs to a user other than this process's and cannot
/// be entered either: with search permission (`--x`), a file whose name the agent knows
/// could be opened without listing the directory.
fn owned_by_another_user(dir: &Path) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: a valid C string; faccessat only reads it.
    let searchable = unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), libc::X_OK, libc::AT_EACCESS) } == 0;
    !searchable && dir.symlink_metadata().is_ok_and(|meta| meta.is_dir() && meta.uid() != euid)
}

#[cfg(test)]
mod cache_tests {
    use std::{collections::HashMap, ffi::OsString, path::PathBuf, time::Duration};

    use super::*;

    fn matcher(extra: &[&str]) -> SecretMatcher {
        let mut patterns = vec![".env".to_owned(), "*.pem".to_owned()];
        patterns.extend(extra.iter().map(|p| p.to_string()));
        SecretMatcher::new(&patterns, &[]).expect("valid patterns")
    }

    fn names(hits: &[SecretHit]) -> Vec<String> {
        hits.iter().map(|hit| hit.rel_path.display().to_string()).collect()
    }

    /// A tree whose directories are old enough to be cached.
    fn settled_tree() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("proj");
        for sub in ["a/b", "c", "node_modules/x/y"] {
            fs::create_dir_all(root.join(sub)).expect("mkdir");
        }
        fs::write(root.join("a/b/.env"), "x").expect("write");
        fs::write(root.join("node_modules/x/y/key.pem"), "x").expect("write");
        fs::write(root.join("c/readme"), "x").expect("write");
        std::thread::sleep(cache::RACY + Duration::from_millis(100));
        (dir, root)
    }

    /// Copies are reported whatever they are, directories are still scanned (a secret in
    /// `.vscode/` is found), a secret pattern wins over a copy name, and a cached listing
    /// replays both.
    #[test]
    fn copies_are_reported_and_descended_into() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        for sub in ["sub/.vscode", ".vscode", "other"] {
            fs::create_dir_all(root.join(sub)).expect("mkdir");
        }
        for file in ["sub/.vscode/.env", "sub/.envrc", "other/.env"] {
            fs::write(root.join(file), "x").expect("write");
        }
        std::os::unix::fs::symlink("/nowhere", root.join("other/.envrc")).expect("symlink");
        use crate::COPY_PATTERN;
        let m = matcher(&[".env"]).with_copies(&[".vscode", ".envrc", ".env"]);
        let cache_file = dir.path().join("cache");
        let run = || {
            let mut hits: Vec<(String, String)> = scan_cached(root, &m, &[], &mut ScanCache::new(&cache_file))
                .expect("scan")
                .into_iter()
                .filter(|hit| !hit.path.starts_with(&cache_file))
                .map(|hit| (hit.rel_path.display().to_string(), hit.pattern))
                .collect();
            hits.sort();
            hits
        };
        let want = [
            (".vscode", COPY_PATTERN),
            ("other/.env", ".env"),
            ("other/.envrc", COPY_PATTERN),
            ("sub/.envrc", COPY_PATTERN),
            ("sub/.vscode", COPY_PATTERN),
            ("sub/.vscode/.env", ".env"),
        ]
        .map(|(path, pattern)| (path.to_owned(), pattern.to_owned()));
        assert_eq!(run(), want);
        std::thread::sleep(cache::RACY + Duration::from_millis(100));
        assert_eq!(run(), want, "a second scan");
        assert_eq!(run(), want, "a scan from the cache");
    }

    #[test]
    fn markers_are_reported_as_files_and_never_stop_the_scan() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        for sub in ["HEAD/deep", "head", "repo"] {
            fs::create_dir_all(root.join(sub)).expect("mkdir");
        }
        for file in ["HEAD/deep/.env", "head/.env", "repo/HEAD", "repo/head", "HEAD/deep/HEAD"] {
            fs::write(root.join(file), "x").expect("write");
        }
        let m = matcher(&[]).with_markers(&[], &["HEAD"]);
        let mut hits: Vec<(String, String)> = scan(root, &m, &[])
            .expect("scan")
            .into_iter()
            .map(|hit| (hit.rel_path.display().to_string(), hit.pattern))
            .collect();
        hits.sort();
        let want =
            [("HEAD/deep/.env", ".env"), ("HEAD/deep/HEAD", "HEAD"), ("head/.env", ".env"), ("repo/HEAD", "HEAD")];
        assert_eq!(hits, want.map(|(path, pattern)| (path.to_owned(), pattern.to_owned())));
    }

    #[test]
    fn cached_scans_see_every_change_a_listing_would() {
        let (dir, root) = settled_tree();
        let file = dir.path().join("cache");
        let m = matcher(&[]);
        let plain = names(&scan(&root, &m, &[]).expect("scan"));
        assert_eq!(plain, ["a/b/.env", "node_modules/x/y/key.pem"]);
        assert_eq!(names(&scan_cached(&root, &m, &[], &mut ScanCache::new(&file)).expect("first")), plain);
        assert!(file.exists(), "the cache was written");
        assert_eq!(names(&scan_cached(&root, &m, &[], &mut ScanCache::new(&file)).expect("second")), plain);

        // A new secret in a cached directory, with the directory's mtime set back.
        let before = fs::metadata(root.join("c")).expect("stat").modified().expect("mtime");
        fs::write(root.join("c/.env"), "x").expect("write");
        fs::File::open(root.join("c")).expect("open").set_modified(before).expect("reset mtime");
        // A new subdirectory holding one, and a removed one.
        fs::create_dir_all(root.join("node_modules/x/new")).expect("mkdir");
        fs::write(root.join("node_modules/x/new/.env"), "x").expect("write");
        fs::remove_file(root.join("a/b/.env")).expect("rm");
        let expected = ["c/.env", "node_modules/x/new/.env", "node_modules/x/y/key.pem"];
        assert_eq!(names(&scan_cached(&root, &m, &[], &mut ScanCache::new(&file)).expect("after changes")), expected);
        assert_eq!(names(&scan(&root, &m, &[]).expect("plain after changes")), expected);

        // Other patterns do not reuse listings made for these.
        let more = matcher(&["readme"]);
        assert_eq!(
            names(&scan_cached(&root, &more, &[], &mut ScanCache::new(&file)).expect("other patterns")),
            ["c/.env", "c/readme", "node_modules/x/new/.env", "node_modules/x/y/key.pem"]
        );
        // A secret-named directory listed while skipped is still a secret when not.
        fs::create_dir_all(root.join("c/secret.pem")).expect("mkdir");
        fs::write(root.join("c/secret.pem/inner"), "x").expect("write");
        std::thread::sleep(cache::RACY + Duration::from_millis(100));
        let skip_it = [root.join("c/secret.pem")];
        assert!(!names(&scan_cached(&root, &m, &skip_it, &mut ScanCache::new(&file)).expect("skipped"))
            .contains(&"c/secret.pem".to_owned()));
        assert!(names(&scan_cached(&root, &m, &[], &mut ScanCache::new(&file)).expect("unskipped"))
            .contains(&"c/secret.pem".to_owned()));
        fs::remove_dir_all(root.join("c/secret.pem")).expect("rm");
        // A directory skipped once is still found when no longer skipped.
        let skipped =
            names(&scan_cached(&root, &m, &[root.join("node_modules")], &mut ScanCache::new(&file)).expect("skip"));
        assert_eq!(skipped, ["c/.env"]);
        assert_eq!(names(&scan_cached(&root, &m, &[], &mut ScanCache::new(&file)).expect("unskip")), expected);
    }

    #[test]
    fn an_unchanged_directory_is_taken_from_the_cache() {
        let (dir, root) = settled_tree();
        let file = dir.path().join("cache");
        let m = matcher(&[]);
        scan_cached(&root, &m, &[], &mut ScanCache::new(&file)).expect("first");
        // Plant a hit in the cached listing of c/: only a scan that trusts the cache for
        // an unchanged directory reports it.
        let mut cached = cache::load(&file, m.fingerprint(), &root);
        assert_eq!(cached.len(), 7, "{cached:?}");
        let c = cached.get_mut(root.join("c").as_os_str()).expect("c/ cached");
        c.hits.push(CachedHit { name: OsString::from("planted"), kind: EntryKind::File, pattern: ".env".into() });
        cache::store(&file, m.fingerprint(), &root, cached.iter()).expect("store");
        assert_eq!(
            names(&scan_cached(&root, &m, &[], &mut ScanCache::new(&file)).expect("cached")),
            ["a/b/.env", "c/planted", "node_modules/x/y/key.pem"]
        );
        // Any change to c/ (here a chmod, which moves the ctime) drops the cached listing.
        fs::set_permissions(root.join("c"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        assert_eq!(
            names(&scan_cached(&root, &m, &[], &mut ScanCache::new(&file)).expect("relisted")),
            ["a/b/.env", "node_modules/x/y/key.pem"]
        );
    }

    /// What an agent can do to a cached tree to hide a new secret from a scan that trusts
    /// the cache: plant it deep with every directory's mtime set back (`touch -d`), under
    /// a parent renamed away and back, in a directory replaced by another of the same
    /// name. Each moves a ctime the agent cannot set back, or an inode: each is found.
    #[test]
    fn plants_behind_restored_mtimes_renames_and_replacements_are_found() {
        let (dir, root) = settled_tree();
        let file = dir.path().join("cache");
        let m = matcher(&[]);
        let unchanged = ["a/b/.env", "node_modules/x/y/key.pem"];
        // As `exec` does: the start's scan, then the exit check's with the same cache.
        let mut scan_cache = ScanCache::new(&file);
        assert_eq!(names(&scan_cached(&root, &m, &[], &mut scan_cache).expect("first")), unchanged);
        let mtime = |rel: &str| fs::metadata(root.join(rel)).expect("stat").modified().expect("mtime");
        let set_mtime = |rel: &str, to| {
            fs::File::open(root.join(rel)).expect("open").set_modified(to).expect("set the mtime back");
        };
        let times: Vec<_> = ["", "node_modules", "node_modules/x", "node_modules/x/y", "a", "c"]
            .into_iter()
            .map(|rel| (rel, mtime(rel)))
            .collect();
        // Deep in an otherwise unchanged tree.
        fs::write(root.join("node_modules/x/y/.env"), "x").expect("plant deep");
        // Under a parent renamed away and back.
        fs::rename(root.join("c"), root.join("c.tmp")).expect("rename away");
        fs::write(root.join("c.tmp/.env"), "x").expect("plant in the renamed parent");
        fs::rename(root.join("c.tmp"), root.join("c")).expect("rename back");
        // In a directory replaced by another of the same name.
        fs::create_dir(root.join("b.new")).expect("mkdir");
        fs::write(root.join("b.new/.env"), "x").expect("the replacement's own");
        fs::write(root.join("b.new/id.pem"), "x").expect("plant in the replacement");
        fs::remove_dir_all(root.join("a/b")).expect("rm");
        fs::rename(root.join("b.new"), root.join("a/b")).expect("replace");
        for (rel, time) in times {
            set_mtime(rel, time);
        }
        let planted = ["a/b/.env", "a/b/id.pem", "c/.env", "node_modules/x/y/.env", "node_modules/x/y/key.pem"];
        assert_eq!(names(&scan_cached(&root, &m, &[], &mut scan_cache).expect("listings in memory")), planted);
        assert_eq!(names(&scan_cached(&root, &m, &[], &mut ScanCache::new(&file)).expect("from the file")), planted);
        assert_eq!(names(&scan(&root, &m, &[]).expect("a plain scan agrees")), planted);
        // The legitimate case beside it: a file changed in place changes no directory, and
        // the listings are reused (the planted cached hit in a/b shows they are).
        std::thread::sleep(cache::RACY + Duration::from_millis(100));
        assert_eq!(names(&scan_cached(&root, &m, &[], &mut ScanCache::new(&file)).expect("settled again")), planted);
        fs::write(root.join("c/readme"), "changed").expect("edit in place");
        let mut cached = cache::load(&file, m.fingerprint(), &root);
        let b = cached.get_mut(root.join("a/b").as_os_str()).expect("a/b cached");
        b.hits.push(CachedHit { name: OsString::from("replayed"), kind: EntryKind::File, pattern: ".env".into() });
        cache::store(&file, m.fingerprint(), &root, cached.iter()).expect("store");
        let mut replayed = planted.to_vec();
        replayed.insert(2, "a/b/replayed");
        assert_eq!(names(&scan_cached(&root, &m, &[], &mut ScanCache::new(&file)).expect("from the cache")), replayed);
    }

    /// The second scan with one [`ScanCache`] (the exit check after the start) takes the
    /// listings from memory, not the file, and trusts them no further than the file's.
    #[test]
    fn a_second_scan_in_the_process_reuses_the_listings_in_memory() {
        let (dir, root) = settled_tree();
        let file = dir.path().join("cache");
        let m = matcher(&[]);
        let mut scan_cache = ScanCache::new(&file);
        scan_cached(&root, &m, &[], &mut scan_cache).expect("first");
        fs::remove_file(&file).expect("the file is not read again");
        let kept = scan_cache.kept.as_mut().expect("listings kept");
        let c = kept.dirs.get_mut(root.join("c").as_os_str()).expect("c/ kept");
        c.hits.push(CachedHit { name: OsString::from("planted"), kind: EntryKind::File, pattern: ".env".into() });
        assert_eq!(
            names(&scan_cached(&root, &m, &[], &mut scan_cache).expect("from memory")),
            ["a/b/.env", "c/planted", "node_modules/x/y/key.pem"]
        );
        fs::set_permissions(root.join("c"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        assert_eq!(
            names(&scan_cached(&root, &m, &[], &mut scan_cache).expect("relisted")),
            ["a/b/.env", "node_modules/x/y/key.pem"]
        );
        // Other patterns, another tree: the file's listings (none here), not memory's.
        let more = matcher(&["readme"]);
        assert_eq!(
            names(&scan_cached(&root, &more, &[], &mut scan_cache).expect("other patterns")),
            ["a/b/.env", "c/readme", "node_modules/x/y/key.pem"]
        );
    }

    /// A directory with the same inode number and ctime on another device is another
    /// directory: its cached listing is not reused.
    #[test]
    fn a_listing_is_reused_only_on_the_same_device() {
        let (dir, root) = settled_tree();
        let file = dir.path().join("cache");
        let m = matcher(&[]);
        scan_cached(&root, &m, &[], &mut ScanCache::new(&file)).expect("first");
        let mut cached = cache::load(&file, m.fingerprint(), &root);
        let c = cached.get_mut(root.join("c").as_os_str()).expect("c/ cached");
        c.hits.push(CachedHit { name: OsString::from("planted"), kind: EntryKind::File, pattern: ".env".into() });
        c.key.dev ^= 1;
        cache::store(&file, m.fingerprint(), &root, cached.iter()).expect("store");
        assert_eq!(
            names(&scan_cached(&root, &m, &[], &mut ScanCache::new(&file)).expect("relisted")),
            ["a/b/.env", "node_modules/x/y/key.pem"]
        );
    }

    #[test]
    fn recently_changed_directories_are_not_cached() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("proj");
        fs::create_dir_all(root.join("fresh")).expect("mkdir");
        let file = dir.path().join("cache");
        scan_cached(&root, &matcher(&[]), &[], &mut ScanCache::new(&file)).expect("scan");
        let cached: HashMap<OsString, CachedDir> = cache::load(&file, matcher(&[]).fingerprint(), &root);
        assert!(cached.is_empty(), "{cached:?}");
    }
}
