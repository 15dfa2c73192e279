//! Walks a project tree in parallel (std threads sharing a work queue of
//! directories) and reports every entry a [`SecretMatcher`] marks as a secret. It
//! uses `read_dir` file types (no stat per entry), never follows symlinks, does not
//! descend into matching directories or skipped ones, and fails closed: any
//! directory it cannot list turns the whole scan into an error.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;

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
pub fn scan(
    root: &Path,
    matcher: &SecretMatcher,
    skip: &[PathBuf],
) -> Result<Vec<SecretHit>, ScanError> {
    if skip.iter().any(|s| s == root) {
        return Ok(Vec::new());
    }
    let shared = Shared {
        root,
        matcher,
        skip,
        queue: Mutex::new(Queue {
            jobs: vec![Job {
                dir: root.to_path_buf(),
                rel: String::new(),
            }],
            finished: false,
            error: None,
        }),
        wakeup: Condvar::new(),
        pending: AtomicUsize::new(1),
        waiting: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    };
    let threads = thread::available_parallelism().map_or(1, |n| n.get());
    let mut hits: Vec<SecretHit> = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| s.spawn(|| Worker::new(&shared).run()))
            .collect();
        workers
            .into_iter()
            .flat_map(|w| match w.join() {
                Ok(hits) => hits,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    let queue = shared
        .queue
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(error) = queue.error {
        return Err(error);
    }
    hits.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    Ok(hits)
}

/// A directory waiting to be listed.
struct Job {
    dir: PathBuf,
    /// '/'-joined path relative to the root; only filled when the matcher needs it.
    rel: String,
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
            queue = self
                .wakeup
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
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
    /// Reused buffer for an entry's root-relative path.
    rel_buf: String,
}

impl<'s, 'a> Worker<'s, 'a> {
    fn new(shared: &'s Shared<'a>) -> Self {
        Self {
            shared,
            local: Vec::new(),
            hits: Vec::new(),
            rel_buf: String::new(),
        }
    }

    fn run(mut self) -> Vec<SecretHit> {
        loop {
            let Some(job) = self.local.pop().or_else(|| self.shared.take()) else {
                return self.hits;
            };
            if self.shared.stop.load(Ordering::Relaxed) {
                return self.hits;
            }
            let before = self.local.len();
            if let Err(error) = self.list(&job) {
                self.shared.fail(error);
                return self.hits;
            }
            let found = self.local.len() - before;
            if found > 0 {
                self.shared.pending.fetch_add(found, Ordering::AcqRel);
            }
            if self.shared.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                // That was the last directory anywhere (our local stack is empty too).
                self.shared.finish();
                return self.hits;
            }
            if self.local.len() > 1 && self.shared.waiting.load(Ordering::Relaxed) > 0 {
                self.shared.share(&mut self.local);
            }
        }
    }

    /// Lists one directory: records secrets, pushes subdirectories to descend into.
    fn list(&mut self, job: &Job) -> Result<(), ScanError> {
        let unreadable = |path: &Path, error| ScanError::Unreadable {
            path: path.to_path_buf(),
            error,
        };
        let is_root = job.dir.as_path() == self.shared.root;
        let entries = match fs::read_dir(&job.dir) {
            Ok(entries) => entries,
            // Removed since its parent was listed: nothing left to hide.
            Err(e) if e.kind() == io::ErrorKind::NotFound && !is_root => return Ok(()),
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
            let dir_path = if file_type.is_dir() {
                let path = entry.path();
                if self.shared.skip.contains(&path) {
                    continue;
                }
                Some(path)
            } else {
                None
            };
            if let Some(pattern) = matcher.check(&name, rel) {
                let path = dir_path.unwrap_or_else(|| entry.path());
                let rel_path = path
                    .strip_prefix(self.shared.root)
                    .map_or_else(|_| path.clone(), Path::to_path_buf);
                let kind = if file_type.is_symlink() {
                    EntryKind::Symlink
                } else if file_type.is_dir() {
                    EntryKind::Dir
                } else if file_type.is_file() {
                    EntryKind::File
                } else {
                    EntryKind::Other
                };
                self.hits.push(SecretHit {
                    path,
                    rel_path,
                    kind,
                    pattern: pattern.to_owned(),
                });
            } else if let Some(dir) = dir_path {
                self.local.push(Job {
                    dir,
                    rel: rel.map(str::to_owned).unwrap_or_default(),
                });
            }
        }
        Ok(())
    }
}
