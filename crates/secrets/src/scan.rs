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

use crate::cache::{self, CachedDir, CachedHit};
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

/// [`scan`], reusing and then updating the listings kept in `cache_file` (see
/// `cache.rs` for when a cached listing is trusted). A cache that cannot be read is
/// ignored; one that cannot be written only costs speed next time.
pub fn scan_cached(
    root: &Path,
    matcher: &SecretMatcher,
    skip: &[PathBuf],
    cache_file: &Path,
) -> Result<Vec<SecretHit>, ScanError> {
    walk(root, matcher, skip, Some(cache_file))
}

fn walk(
    root: &Path,
    matcher: &SecretMatcher,
    skip: &[PathBuf],
    cache_file: Option<&Path>,
) -> Result<Vec<SecretHit>, ScanError> {
    if skip.iter().any(|s| s == root) {
        return Ok(Vec::new());
    }
    let fingerprint = matcher.fingerprint();
    let cached = match cache_file {
        Some(file) => cache::load(file, fingerprint, root),
        None => HashMap::new(),
    };
    let shared = Shared {
        root,
        matcher,
        skip,
        caching: cache_file.is_some(),
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
    if let Some(file) = cache_file {
        if listed > 0 || reused.len() != cached.len() {
            let kept = reused.into_iter().filter_map(|dir| cached.get_key_value(dir));
            // Only speed depends on this write; a failure is not the scan's failure.
            let _ = cache::store(file, fingerprint, root, kept.chain(recorded.iter()));
        }
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

    /// Handles one directory: from the cache when its inode and ctime are unchanged,
    /// else by listing it.
    fn visit(&mut self, job: &Job) -> Result<(), ScanError> {
        if !self.shared.caching {
            return self.list(job, None);
        }
        let is_root = job.dir.as_path() == self.shared.root;
        // Stat before listing: a change after this stat changes the ctime recorded
        // next time, so it cannot hide behind this listing.
        let stat = match &job.parent {
            Some(parent) => stat_at(parent, &job.dir),
            None => fs::symlink_metadata(&job.dir)
                .map(|meta| (meta.is_dir(), meta.ino(), (meta.ctime(), meta.ctime_nsec()))),
        };
        let (is_dir, ino, ctime) = match stat {
            Ok(stat) => stat,
            Err(e) if e.kind() == io::ErrorKind::NotFound && !is_root => return Ok(()),
            Err(error) => return Err(ScanError::Unreadable { path: job.dir.clone(), error }),
        };
        if !is_dir {
            return Ok(()); // replaced by a symlink or a file since its parent was listed
        }
        let key = (ino, ctime);
        let cache: &'a HashMap<OsString, CachedDir> = self.shared.cache;
        match cache.get_key_value(job.dir.as_os_str()) {
            Some((dir, cached)) if (cached.ino, cached.ctime) == key => {
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
    /// and with `key` (its inode and ctime) records the listing for the cache.
    fn list(&mut self, job: &Job, key: Option<(u64, (i64, i64))>) -> Result<(), ScanError> {
        let unreadable = |path: &Path, error| ScanError::Unreadable { path: path.to_path_buf(), error };
        self.listed += 1;
        let mut record = key.map(|(ino, ctime)| CachedDir { ino, ctime, subdirs: Vec::new(), hits: Vec::new() });
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
            if cache::settled(record.ctime, self.shared.start) {
                self.recorded.push((job.dir.clone().into_os_string(), record));
            }
        }
        Ok(())
    }
}

/// `lstat` of `path`'s last component relative to the open directory `parent`: whether
/// it is a directory, its inode and its ctime.
fn stat_at(parent: &OwnedFd, path: &Path) -> io::Result<(bool, u64, (i64, i64))> {
    let name = path.file_name().ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let name = std::ffi::CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a zeroed stat is a valid out-parameter; `name` is NUL-terminated and
    // `parent` an open descriptor for the duration of the call.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatat(parent.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
    #[allow(clippy::unnecessary_cast)] // the field types differ between targets
    Ok((is_dir, st.st_ino as u64, (st.st_ctime as i64, st.st_ctime_nsec as i64)))
}

/// The job's directory opened with `O_PATH` (no symlink followed), if it is still the
/// one with this inode and ctime.
fn open_checked(job: &Job, key: (u64, (i64, i64))) -> Option<Arc<OwnedFd>> {
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
    #[allow(clippy::unnecessary_cast)]
    let now = (st.st_ino as u64, (st.st_ctime as i64, st.st_ctime_nsec as i64));
    (now == key).then(|| Arc::new(fd))
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
            let mut hits: Vec<(String, String)> = scan_cached(root, &m, &[], &cache_file)
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
        assert_eq!(names(&scan_cached(&root, &m, &[], &file).expect("first")), plain);
        assert!(file.exists(), "the cache was written");
        assert_eq!(names(&scan_cached(&root, &m, &[], &file).expect("second")), plain);

        // A new secret in a cached directory, with the directory's mtime set back.
        let before = fs::metadata(root.join("c")).expect("stat").modified().expect("mtime");
        fs::write(root.join("c/.env"), "x").expect("write");
        fs::File::open(root.join("c")).expect("open").set_modified(before).expect("reset mtime");
        // A new subdirectory holding one, and a removed one.
        fs::create_dir_all(root.join("node_modules/x/new")).expect("mkdir");
        fs::write(root.join("node_modules/x/new/.env"), "x").expect("write");
        fs::remove_file(root.join("a/b/.env")).expect("rm");
        let expected = ["c/.env", "node_modules/x/new/.env", "node_modules/x/y/key.pem"];
        assert_eq!(names(&scan_cached(&root, &m, &[], &file).expect("after changes")), expected);
        assert_eq!(names(&scan(&root, &m, &[]).expect("plain after changes")), expected);

        // Other patterns do not reuse listings made for these.
        let more = matcher(&["readme"]);
        assert_eq!(
            names(&scan_cached(&root, &more, &[], &file).expect("other patterns")),
            ["c/.env", "c/readme", "node_modules/x/new/.env", "node_modules/x/y/key.pem"]
        );
        // A secret-named directory listed while skipped is still a secret when not.
        fs::create_dir_all(root.join("c/secret.pem")).expect("mkdir");
        fs::write(root.join("c/secret.pem/inner"), "x").expect("write");
        std::thread::sleep(cache::RACY + Duration::from_millis(100));
        let skip_it = [root.join("c/secret.pem")];
        assert!(!names(&scan_cached(&root, &m, &skip_it, &file).expect("skipped")).contains(&"c/secret.pem".to_owned()));
        assert!(names(&scan_cached(&root, &m, &[], &file).expect("unskipped")).contains(&"c/secret.pem".to_owned()));
        fs::remove_dir_all(root.join("c/secret.pem")).expect("rm");
        // A directory skipped once is still found when no longer skipped.
        let skipped = names(&scan_cached(&root, &m, &[root.join("node_modules")], &file).expect("skip"));
        assert_eq!(skipped, ["c/.env"]);
        assert_eq!(names(&scan_cached(&root, &m, &[], &file).expect("unskip")), expected);
    }

    #[test]
    fn an_unchanged_directory_is_taken_from_the_cache() {
        let (dir, root) = settled_tree();
        let file = dir.path().join("cache");
        let m = matcher(&[]);
        scan_cached(&root, &m, &[], &file).expect("first");
        // Plant a hit in the cached listing of c/: only a scan that trusts the cache for
        // an unchanged directory reports it.
        let mut cached = cache::load(&file, m.fingerprint(), &root);
        assert_eq!(cached.len(), 7, "{cached:?}");
        let c = cached.get_mut(root.join("c").as_os_str()).expect("c/ cached");
        c.hits.push(CachedHit { name: OsString::from("planted"), kind: EntryKind::File, pattern: ".env".into() });
        cache::store(&file, m.fingerprint(), &root, cached.iter()).expect("store");
        assert_eq!(
            names(&scan_cached(&root, &m, &[], &file).expect("cached")),
            ["a/b/.env", "c/planted", "node_modules/x/y/key.pem"]
        );
        // Any change to c/ (here a chmod, which moves the ctime) drops the cached listing.
        fs::set_permissions(root.join("c"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        assert_eq!(
            names(&scan_cached(&root, &m, &[], &file).expect("relisted")),
            ["a/b/.env", "node_modules/x/y/key.pem"]
        );
    }

    #[test]
    fn recently_changed_directories_are_not_cached() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("proj");
        fs::create_dir_all(root.join("fresh")).expect("mkdir");
        let file = dir.path().join("cache");
        scan_cached(&root, &matcher(&[]), &[], &file).expect("scan");
        let cached: HashMap<OsString, CachedDir> = cache::load(&file, matcher(&[]).fingerprint(), &root);
        assert!(cached.is_empty(), "{cached:?}");
    }
}
