//! The session check: what a sandbox may have left in the work tree that the user's own
//! git would honour afterwards. The user's git directories are never writable inside (a
//! session repository stands in for them, or they are read-only:
//! `policy::git::dir_rules`), but git also trusts what it finds in the work tree: any
//! nested `.git` (and the configs and hooks it leads to; `git status` in the project
//! runs git in submodules), any directory holding a valid `HEAD`, `objects/` and `refs/`
//! (a bare repository), a `.git` made at the root where there was none. One planted
//! `core.fsmonitor` turns the user's next `git status` into the agent's command. Files
//! the host runs later (`filesystem.hostExecuted`) are watched the same way.
//!
//! So the rule is strict and parses no contents: [`observe`] records every such file (a
//! [`State`]), [`diff`] compares the state at exit with the one at start (pure: a list of
//! [`Action`]s), and [`apply`] carries them out: anything new or changed is moved aside
//! (or, failing that, deleted). The only thing a session may add is the `.git` file of a
//! worktree it made in its session repository ([`names_a_worktree_slot`]).
//!
//! It fails closed: files are read only if they are regular (never blocking on a FIFO);
//! a special file, an unreadable file or a directory that cannot be listed is never
//! equal to anything, so it is moved aside; the work-tree walk makes unlistable
//! directories listable again ([`walk`]). [`session`] keeps the baseline on disk, so a
//! session that was killed is checked by the next start, and overlapping sessions in one
//! project share one baseline.

mod codec;
pub mod diff;
pub mod session;
pub mod walk;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

pub use diff::{apply, diff, Action};

/// Files of a git directory that make git use other configuration, hooks or
/// repositories (`info/`: attributes choose filter and diff drivers; `alternates`:
/// objects from another repository).
const GIT_DIR_FILES: &[&str] =
    &["config", "commondir", "config.worktree", "gitdir", "hooks", "info", "objects/info/alternates"];
/// No file the check reads is legitimately bigger (hooks included).
const READ_LIMIT: u64 = 16 * 1024 * 1024;

/// What the check watches, the same at start and at exit.
#[derive(Debug, Clone)]
pub struct Watch {
    pub project_root: PathBuf,
    /// The repository's common directory (from `gitfacts::layout` at start): not
    /// watched (never writable inside), but a bare clone's lying in the work tree is
    /// not a plant, and a session's worktree names a record at its path.
    pub common_dir: Option<PathBuf>,
    /// Further paths (a hooks directory configured with `core.hooksPath`).
    pub extra: Vec<PathBuf>,
    /// Project files the host runs later (`filesystem.hostExecuted`) that did not exist at
    /// start (those that did are read-only inside): one that appears is moved aside.
    pub host_files: Vec<PathBuf>,
    /// Host-run files whose program also reads copies in subdirectories (relative, as
    /// the catalog names them: `.envrc`, `.vscode/tasks.json`): a copy below the root
    /// that appears or changes is moved aside ([`host_copies`]).
    pub copy_rules: Vec<PathBuf>,
    /// Names of dependency trees (`node_modules`, `.venv`): copies inside them are not
    /// covered (their installers write editor and tool files of their own).
    pub copy_exempt: Vec<std::ffi::OsString>,
    /// The agent's git is its own (`hostpush::home::exec`): the user's `.git` is not
    /// writable inside, and a worktree the agent adds names a record of the session's at
    /// the user's path ([`names_a_worktree_slot`]).
    pub session_repository: bool,
}

impl Watch {
    /// The names whose entries may start a copy: the first component of each rule.
    pub fn copy_names(&self) -> Vec<std::ffi::OsString> {
        let mut names: Vec<std::ffi::OsString> = Vec::new();
        for rule in &self.copy_rules {
            if let Some(first) = rule.components().next() {
                let first = first.as_os_str().to_os_string();
                if !names.contains(&first) {
                    names.push(first);
                }
            }
        }
        names
    }
}

/// The copies of host-run files below the project root (not at it: the root's are
/// `filesystem.hostExecuted` itself) that exist now, from the walk's entries named like a
/// rule's first component. Only `lstat`: where a component on the way is a symlink or
/// not a directory, that entry is the copy (a `.claude` linked elsewhere is itself what
/// the host would follow).
pub fn host_copies(watch: &Watch, found: &walk::Found) -> BTreeSet<PathBuf> {
    let root = &watch.project_root;
    let mut copies = BTreeSet::new();
    for entry in &found.copies {
        let (Some(parent), Some(name)) = (entry.parent(), entry.file_name()) else { continue };
        let Ok(rel) = parent.strip_prefix(root) else { continue };
        if rel.as_os_str().is_empty()
            || rel.components().any(|part| watch.copy_exempt.iter().any(|tree| tree == part.as_os_str()))
        {
            continue;
        }
        for rule in watch
            .copy_rules
            .iter()
            .filter(|rule| rule.components().next().is_some_and(|first| first.as_os_str() == name))
        {
            let mut path = parent.to_path_buf();
            let mut parts = rule.components().peekable();
            while let Some(part) = parts.next() {
                path.push(part);
                let Ok(meta) = path.symlink_metadata() else { break };
                if parts.peek().is_none() || !meta.is_dir() {
                    copies.insert(path);
                    break;
                }
            }
        }
    }
    copies
}

/// One watched path as found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Content {
    Bytes(#[serde(with = "codec::bytes")] Vec<u8>),
    Link(#[serde(with = "codec::path")] PathBuf),
    /// A directory (`hooks`): each entry's name and content (symlinks followed).
    Dir(#[serde(with = "codec::map")] BTreeMap<PathBuf, Content>),
    /// A FIFO, socket or device: never opened, never equal to anything.
    Special,
    /// Could not be read or listed: never equal to anything.
    Unreadable,
}

impl Content {
    /// Whether the check could read all of it.
    pub fn is_examined(&self) -> bool {
        match self {
            Content::Bytes(_) | Content::Link(_) => true,
            Content::Dir(entries) => entries.values().all(Content::is_examined),
            Content::Special | Content::Unreadable => false,
        }
    }
}

/// Everything the check compares. Saved between start and exit (see [`session`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// Whether the project had a `.git` (directory or file) at all.
    pub had_git: bool,
    #[serde(with = "codec::map")]
    pub files: BTreeMap<PathBuf, Option<Content>>,
    /// Nested `.git` entries with the files that make each up.
    #[serde(with = "codec::map")]
    pub nested: BTreeMap<PathBuf, Vec<PathBuf>>,
    /// Directories laid out as bare repositories, with their files.
    #[serde(with = "codec::map")]
    pub bare: BTreeMap<PathBuf, Vec<PathBuf>>,
    /// Nested entries that are the `.git` files of worktrees the session repository made.
    #[serde(with = "codec::set")]
    pub worktree_gitlinks: BTreeSet<PathBuf>,
    /// Directories of the work tree the walk could not list.
    #[serde(with = "codec::set")]
    pub unexamined: BTreeSet<PathBuf>,
    /// Copies of host-run files in subdirectories ([`host_copies`]).
    #[serde(default, with = "codec::set")]
    pub host_copies: BTreeSet<PathBuf>,
}

/// Records the state of everything `watch` covers. `found` is the work tree's walk
/// (nested `.git` entries, `HEAD` files, unexamined directories), from the secret scan or
/// [`walk::walk`]. Reads only; opens only regular files.
pub fn observe(watch: &Watch, found: &walk::Found) -> State {
    let root = &watch.project_root;
    let common = watch.common_dir.as_deref();
    let entry = |dir: &PathBuf| (dir.clone(), entry_files(dir));
    let nested: BTreeMap<PathBuf, Vec<PathBuf>> =
        found.nested.iter().filter(|path| **path != root.join(".git")).map(entry).collect();
    let bare: BTreeMap<PathBuf, Vec<PathBuf>> = bare_layouts(&found.heads, common).iter().map(entry).collect();
    // The project's own `.git` directory is read-only inside, or the session repository's
    // mount point; a `.git` that is a file or a link the layout could not follow (so no
    // rule covers it) is watched as a work-tree file.
    let mut paths: BTreeSet<PathBuf> = watch.extra.iter().cloned().collect();
    let dot_git = root.join(".git");
    if !dot_git.symlink_metadata().is_ok_and(|meta| meta.is_dir()) {
        paths.insert(dot_git);
    }
    paths.extend(watch.host_files.iter().cloned());
    let host_copies = host_copies(watch, found);
    paths.extend(host_copies.iter().cloned());
    for files in nested.values().chain(bare.values()) {
        paths.extend(files.iter().cloned());
    }
    State {
        had_git: root.join(".git").symlink_metadata().is_ok(),
        files: paths.into_iter().map(|path| (path.clone(), read(&path))).collect(),
        worktree_gitlinks: nested
            .keys()
            .filter(|entry| watch.session_repository && names_a_worktree_slot(entry, common))
            .cloned()
            .collect(),
        nested,
        bare,
        unexamined: found.unexamined.iter().cloned().collect(),
        host_copies,
    }
}

/// The files that make up a nested `.git` entry or a git directory.
fn entry_files(entry: &Path) -> Vec<PathBuf> {
    let is_dir = entry.symlink_metadata().is_ok_and(|meta| meta.is_dir());
    if is_dir {
        let mut files = Vec::new();
        git_dir_files(entry, 0, &mut files);
        files
    } else {
        vec![entry.to_path_buf()]
    }
}

/// Submodules inside submodules, worktrees of those: deeper than this is not followed
/// (git follows symlinks, so a loop must end somewhere).
const MAX_GIT_DIR_DEPTH: usize = 16;

/// Every file of the git directory `dir` that git reads for configuration, hooks or other
/// repositories ([`GIT_DIR_FILES`]), and the same for the git directories git finds
/// through it: each worktree record (`worktrees/*`, any entry, whatever it holds) and
/// each submodule's (`modules/**` with a `HEAD` or a `config`), at any depth.
fn git_dir_files(dir: &Path, depth: usize, files: &mut Vec<PathBuf>) {
    files.extend(GIT_DIR_FILES.iter().map(|name| dir.join(name)));
    // A `commondir` takes config and hooks from the directory it names.
    if let Some(common) = gitfacts::read_commondir(dir) {
        files.extend(["config", "hooks"].map(|name| common.join(name)));
    }
    if depth >= MAX_GIT_DIR_DEPTH {
        return;
    }
    if let Ok(records) = std::fs::read_dir(dir.join("worktrees")) {
        for record in records.flatten().map(|entry| entry.path()) {
            if record.symlink_metadata().is_ok_and(|meta| meta.is_dir()) {
                git_dir_files(&record, depth + 1, files);
            } else {
                // A symlink or a file where git expects a record: watched as itself.
                files.push(record);
            }
        }
    }
    module_dirs(&dir.join("modules"), depth + 1, files);
}

/// The submodule git directories below `dir` (a `modules` directory; names may hold
/// `/`), each with its files.
fn module_dirs(dir: &Path, depth: usize, files: &mut Vec<PathBuf>) {
    if depth >= MAX_GIT_DIR_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for path in entries.flatten().map(|entry| entry.path()) {
        if !path.is_dir() {
            continue;
        }
        let is_git_dir = ["HEAD", "config", "commondir"].iter().any(|name| path.join(name).symlink_metadata().is_ok());
        if is_git_dir {
            git_dir_files(&path, depth, files);
        } else {
            module_dirs(&path, depth + 1, files);
        }
    }
}

/// A file's bytes, a symlink's target, or a directory's (`hooks`) names and contents.
/// `None`: nothing there.
pub fn read(path: &Path) -> Option<Content> {
    let meta = path.symlink_metadata().ok()?;
    if meta.is_symlink() {
        return Some(std::fs::read_link(path).map_or(Content::Unreadable, Content::Link));
    }
    if meta.is_dir() {
        let listing =
            std::fs::read_dir(path).or_else(|err| if walk::repair(path) { std::fs::read_dir(path) } else { Err(err) });
        let Ok(entries) = listing else { return Some(Content::Unreadable) };
        let mut listed = BTreeMap::new();
        for entry in entries {
            let Ok(entry) = entry else { return Some(Content::Unreadable) };
            // Hooks are run through symlinks too: their targets' contents count.
            let content = match util::fs::read_regular(&entry.path(), READ_LIMIT) {
                Ok(bytes) => Content::Bytes(bytes),
                // A dangling symlink: git finds no hook there either.
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    std::fs::read_link(entry.path()).map_or(Content::Unreadable, Content::Link)
                }
                Err(err) if util::fs::is_not_regular(&err) => {
                    if entry.path().is_dir() {
                        read(&entry.path()).unwrap_or(Content::Unreadable)
                    } else {
                        Content::Special
                    }
                }
                Err(_) => Content::Unreadable,
            };
            listed.insert(PathBuf::from(entry.file_name()), content);
        }
        return Some(Content::Dir(listed));
    }
    if !meta.is_file() {
        return Some(Content::Special);
    }
    Some(match util::fs::read_regular_nofollow(path, READ_LIMIT) {
        Ok(bytes) => Content::Bytes(bytes),
        Err(err) if util::fs::is_not_regular(&err) => Content::Special,
        Err(_) => Content::Unreadable,
    })
}

/// The directories among `heads` (`HEAD` entries found in the work tree) that git would
/// take for repositories.
fn bare_layouts(heads: &[PathBuf], common_dir: Option<&Path>) -> Vec<PathBuf> {
    heads
        .iter()
        .filter_map(|head| head.parent())
        // The repository's own git directory when it lies in the work tree (a bare
        // clone with worktrees beside it): its records are checked as such.
        .filter(|dir| common_dir.is_none_or(|common| !dir.starts_with(common)))
        .filter(|dir| gitfacts::looks_like_repository(dir))
        .map(Path::to_path_buf)
        .collect()
}

/// With a session repository: whether `entry` is a `.git` file naming
/// `<common>/worktrees/<name>`, as `git worktree add` inside writes it (the record is the
/// session's, at the same path inside). On the host it leads only into the user's own
/// `.git`, which the agent cannot write: nowhere, or to a record of the user's.
fn names_a_worktree_slot(entry: &Path, common_dir: Option<&Path>) -> bool {
    let (Some(common), Some(target)) = (common_dir, gitfacts::read_gitlink(entry)) else { return false };
    let plain = target.file_name().is_some_and(|name| name != "." && name != "..");
    plain && target.parent() == Some(common.join("worktrees").as_path())
}
