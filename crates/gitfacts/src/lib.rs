//! Git's layout rules, in one place: how git reads a gitlink file (`.git` as a file), a
//! worktree record's `commondir`, what it takes for a repository (`HEAD` + `objects` +
//! `refs`), where submodules keep their git directories, which hooks directory it uses
//! (`core.hooksPath`, with `~` and relative values), and a repository's [`RepoFacts`]
//! (common directory and hooks path). The start of a session, the exit check, the git
//! guard, the hook installer and the `@git` preset all ask here, so they cannot
//! disagree; every rule is tested against the real git (`tests/`).
//!
//! Everything read here may have been written by an agent: files are read with
//! [`util::fs::read_regular`] (never blocking on a FIFO), and what is found outside the
//! project is believed only when git's back-links check out.

#![forbid(unsafe_code)]

use std::{
    os::unix::ffi::OsStrExt,
    path::{Component, Path, PathBuf},
};

/// No pointer file git reads is legitimately longer.
const POINTER_LIMIT: u64 = 64 * 1024;

/// Where a repository's metadata lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The per-worktree git directory (`.git` itself for a plain repository).
    pub git_dir: PathBuf,
    /// The directory shared by all worktrees: objects, refs, config, hooks.
    pub common_dir: PathBuf,
}

/// Reads a small pointer file (`.git` file, `commondir`, `gitdir`, `HEAD`) as bytes,
/// never opening anything but a regular file.
pub fn read_pointer(path: &Path) -> Option<Vec<u8>> {
    util::fs::read_regular(path, POINTER_LIMIT).ok()
}

/// The directory a gitlink file (`.git` as a file) names, as git's `read_gitfile` reads
/// it: the file must start with `gitdir: `; trailing `\n`/`\r` are dropped; everything
/// else (spaces, inner newlines) belongs to the path; a relative path is relative to the
/// file's directory. Lexically normalized, not resolved.
pub fn read_gitlink(dot_git: &Path) -> Option<PathBuf> {
    let bytes = read_pointer(dot_git)?;
    let rest = bytes.strip_prefix(b"gitdir: ")?;
    let end = rest.iter().rposition(|b| *b != b'\n' && *b != b'\r').map_or(0, |pos| pos + 1);
    if end == 0 {
        return None;
    }
    let target = Path::new(std::ffi::OsStr::from_bytes(&rest[..end]));
    Some(normalize(&dot_git.parent()?.join(target)))
}

/// The common directory a git directory's `commondir` file names, as git reads it
/// (trailing newlines dropped, relative to the git directory); `None` without one.
pub fn read_commondir(git_dir: &Path) -> Option<PathBuf> {
    let bytes = read_pointer(&git_dir.join("commondir"))?;
    let end = bytes.iter().rposition(|b| *b != b'\n' && *b != b'\r').map_or(0, |pos| pos + 1);
    let text = Path::new(std::ffi::OsStr::from_bytes(&bytes[..end]));
    Some(normalize(&git_dir.join(text)))
}

/// A `HEAD` git would accept (its `validate_headref`): a symlink into `refs/`,
/// `ref: refs/…`, or an object name.
pub fn is_valid_head(head: &Path) -> bool {
    if let Ok(target) = std::fs::read_link(head) {
        return target.starts_with("refs/");
    }
    let Some(bytes) = read_pointer(head) else { return false };
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(256)]);
    if let Some(rest) = text.strip_prefix("ref:") {
        return rest.trim_start().starts_with("refs/");
    }
    text.bytes().take_while(u8::is_ascii_hexdigit).count() >= 40
}

/// Whether git would take `dir` for a git directory (its `is_git_directory`): a valid
/// `HEAD`, and `objects` and `refs` (any kind of entry: git only needs to search them),
/// which a `commondir` may provide instead.
pub fn looks_like_repository(dir: &Path) -> bool {
    let has = |name: &str| dir.join(name).symlink_metadata().is_ok();
    is_valid_head(&dir.join("HEAD")) && ((has("objects") && has("refs")) || has("commondir"))
}

/// The layout of the repository whose work tree is `root`, if it is one.
///
/// Everything here is read from files a sandboxed agent can write (`.git`, a
/// `commondir` file), and what it finds outside the project is granted read-write. So a
/// git directory outside the project is believed only when git's own links check out:
/// a linked worktree's git dir names this work tree in its `gitdir` file and lives in
/// `<common dir>/worktrees/`; a submodule's is a git directory under a `modules/`
/// directory. A `commondir` file in a plain `.git` directory (which git would honour)
/// is ignored here: `exec` refuses to start with one.
pub fn layout(root: &Path) -> Option<Layout> {
    let dot_git = root.join(".git");
    let meta = dot_git.symlink_metadata().ok()?;
    if meta.is_dir() {
        return Some(Layout { git_dir: dot_git.clone(), common_dir: dot_git });
    }
    if !meta.is_file() {
        return None; // a symlinked .git is not followed
    }
    let git_dir = read_gitlink(&dot_git)?;
    if git_dir.starts_with(root) {
        return Some(Layout { git_dir: git_dir.clone(), common_dir: git_dir });
    }
    match read_commondir(&git_dir) {
        Some(common_dir) => {
            let back_link = read_gitlink_record(&git_dir.join("gitdir"))?;
            let links_back = back_link.canonicalize().ok()? == dot_git.canonicalize().ok()?;
            let in_worktrees = git_dir.parent() == Some(common_dir.join("worktrees").as_path());
            (links_back && in_worktrees && looks_like_repository(&common_dir)).then_some(Layout { git_dir, common_dir })
        }
        None => {
            // A submodule's git dir lives in an enclosing repository's `.git/modules/`.
            let enclosing = root.ancestors().skip(1).any(|dir| git_dir.starts_with(dir.join(".git/modules")));
            (enclosing && looks_like_repository(&git_dir))
                .then(|| Layout { git_dir: git_dir.clone(), common_dir: git_dir })
        }
    }
}

/// Where a session repository stands in for the user's git directory of the work tree
/// `root` (`hostpush::home::exec`): `root/.git` when it is the repository's own
/// directory; else the directory its `.git` file names (a linked worktree's record, a
/// submodule's or a separate git directory), when that path is what the filesystem
/// calls it (git inside follows the file to the same path) and holds neither the
/// project nor the home directory `home`. `None`: no session repository can stand there.
pub fn session_mount(root: &Path, home: &Path, layout: &Layout) -> Option<PathBuf> {
    let dot_git = root.join(".git");
    if layout.git_dir == dot_git {
        return (layout.common_dir == dot_git).then_some(dot_git);
    }
    let git_dir = &layout.git_dir;
    let plain = git_dir.symlink_metadata().is_ok_and(|meta| meta.is_dir())
        && git_dir.canonicalize().ok().as_ref() == Some(git_dir)
        && !root.starts_with(git_dir)
        && !home.starts_with(git_dir)
        && dot_git.symlink_metadata().is_ok_and(|meta| meta.is_file());
    plain.then(|| git_dir.clone())
}

/// A worktree record's `gitdir` file: the path of the worktree's `.git` file, one line.
pub fn read_gitlink_record(gitdir_file: &Path) -> Option<PathBuf> {
    let bytes = read_pointer(gitdir_file)?;
    let end = bytes.iter().rposition(|b| *b != b'\n' && *b != b'\r').map_or(0, |pos| pos + 1);
    (end > 0).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(&bytes[..end])))
}

/// What `core.hooksPath` says, as git resolves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HooksPath {
    /// Unset: `<common dir>/hooks`.
    Default,
    /// Set: absolute (`~/` expanded, relative values taken from the top of the work tree,
    /// the git directory of a bare repository), resolved as far as it exists.
    Configured(PathBuf),
    /// Set to the empty string: git takes it literally and finds no hooks.
    Empty,
}

#[derive(Debug, thiserror::Error)]
pub enum FactsError {
    #[error("{path} is not in a git repository ({error})")]
    NotARepository { path: PathBuf, error: String },
    #[error("core.hooksPath of {repo} cannot be resolved: {error}")]
    HooksPath { repo: PathBuf, error: String },
}

/// Opens the repository git would use from `start`, as git finds it (`GIT_DIR` and
/// friends honoured), reading every configuration file git would.
pub fn discover(start: &Path) -> Result<gix::Repository, FactsError> {
    let start = std::path::absolute(start).unwrap_or_else(|_| start.to_path_buf());
    gix::ThreadSafeRepository::discover_with_environment_overrides(&start)
        .map(|repo| repo.to_thread_local())
        .map_err(|error| FactsError::NotARepository { path: start, error: error.to_string() })
}

/// The repository's `core.hooksPath` (see [`HooksPath`]).
pub fn hooks_path(repo: &gix::Repository) -> Result<HooksPath, FactsError> {
    let config = repo.config_snapshot();
    // gix reports an empty value as unset.
    if config.string("core.hooksPath").is_some_and(|value| value.is_empty()) {
        return Ok(HooksPath::Empty);
    }
    let configured = config
        .trusted_path("core.hooksPath")
        .map_err(|error| FactsError::HooksPath { repo: repo.git_dir().to_path_buf(), error: error.to_string() })?;
    // git with `GIT_DIR` set and neither `GIT_WORK_TREE` nor `core.worktree` takes the
    // current directory for the top of the work tree: so it runs the hooks of a work tree
    // whose `.git` is a file naming a repository of its own (it exports `GIT_DIR` to
    // them, and they start in the top). gix leaves such a repository without a work
    // tree, and a relative `core.hooksPath` would be taken from the git directory.
    let top = repo.workdir().map(Path::to_path_buf).or_else(|| {
        let from_env = std::env::var_os("GIT_DIR").is_some() && std::env::var_os("GIT_WORK_TREE").is_none();
        let bare = config.boolean("core.bare").unwrap_or(false);
        (from_env && !bare).then(std::env::current_dir).and_then(Result::ok)
    });
    Ok(match configured {
        // Hooks run in the top of the work tree, so that is what a relative path is
        // relative to (in a linked worktree: that worktree's top, as with git).
        Some(path) => HooksPath::Configured(canonical(&top.unwrap_or_else(|| repo.git_dir().to_path_buf()).join(path))),
        None => HooksPath::Default,
    })
}

/// Where a repository keeps its refs and which hooks git runs for it: taken at the start
/// of a session, and compared by the git guard before every command that runs hooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoFacts {
    pub common_dir: PathBuf,
    /// The effective `core.hooksPath`, absolute; `None` means `<common dir>/hooks`.
    pub hooks_path: Option<PathBuf>,
}

/// The facts of the repository git would use from `start`, as git reads its
/// configuration (system, global, repository, includes, `GIT_DIR` and friends).
pub fn repo_facts(start: &Path) -> Option<RepoFacts> {
    let repo = gix::ThreadSafeRepository::discover_with_environment_overrides(start).ok()?.to_thread_local();
    Some(repo_facts_of(&repo))
}

/// The facts of an open repository (see [`repo_facts`]).
pub fn repo_facts_of(repo: &gix::Repository) -> RepoFacts {
    let common_dir = repo.common_dir();
    let common_dir = common_dir.canonicalize().unwrap_or_else(|_| normalize(common_dir));
    // An unresolvable value is kept as its own marker, so that start and now still compare.
    let hooks_path = match hooks_path(repo) {
        Ok(HooksPath::Default) => None,
        Ok(HooksPath::Configured(path)) => Some(path),
        Ok(HooksPath::Empty) => Some(PathBuf::new()),
        Err(_) => Some(PathBuf::from("<unresolvable core.hooksPath>")),
    };
    RepoFacts { common_dir, hooks_path }
}

/// The objects the repository's refs (every one under `refs/`, loose or packed) and
/// `HEAD` point at, as hex ids, sorted and deduplicated: what `git rev-parse HEAD --all`
/// prints. Empty when there is no repository; symbolic refs count through their target.
pub fn ref_tips(start: &Path) -> Vec<String> {
    let Ok(repo) = discover(start) else { return Vec::new() };
    let mut tips: Vec<String> = repo.head_id().ok().map(|id| id.to_string()).into_iter().collect();
    if let Ok(platform) = repo.references() {
        if let Ok(all) = platform.all() {
            tips.extend(all.flatten().filter_map(|reference| reference.target().try_id().map(|id| id.to_string())));
        }
    }
    tips.sort();
    tips.dedup();
    tips
}

/// The commits reachable from the repository's refs now ([`ref_tips`]) and from none of
/// `then` (an earlier [`ref_tips`]): what was committed in between. Tips that are not
/// commits (tags are peeled; a tag of a tree is skipped) and unknown ids are ignored.
pub fn new_commits(start: &Path, then: &[String]) -> Vec<String> {
    let Ok(repo) = discover(start) else { return Vec::new() };
    let peel = |text: &String| -> Option<gix::ObjectId> {
        let id = gix::ObjectId::from_hex(text.as_bytes()).ok()?;
        let object = repo.find_object(id).ok()?.peel_tags_to_end().ok()?;
        (object.kind == gix::object::Kind::Commit).then_some(object.id)
    };
    // A tip in both lists leads to nothing new: walking from it alone would still cost a
    // walk of the hidden history (most sessions move no ref at all, and a repository of
    // 10,000 refs took 0.7 s to find that out).
    let known: std::collections::BTreeSet<&str> = then.iter().map(String::as_str).collect();
    let moved: Vec<String> = ref_tips(start).into_iter().filter(|tip| !known.contains(tip.as_str())).collect();
    if moved.is_empty() {
        return Vec::new();
    }
    let now: Vec<gix::ObjectId> = moved.iter().filter_map(peel).collect();
    let hidden: Vec<gix::ObjectId> = then.iter().filter_map(peel).collect();
    let Ok(walk) = repo.rev_walk(now).with_hidden(hidden).all() else { return Vec::new() };
    walk.filter_map(|info| info.ok().map(|info| info.id.to_string())).collect()
}

/// The directory git runs hooks from: the configured one, else `<common dir>/hooks`.
/// `None` for an empty `core.hooksPath` (no hooks run).
pub fn hooks_dir(repo: &gix::Repository) -> Result<Option<PathBuf>, FactsError> {
    Ok(match hooks_path(repo)? {
        HooksPath::Configured(path) => Some(path),
        HooksPath::Default => Some(canonical(&repo.common_dir().join("hooks"))),
        HooksPath::Empty => None,
    })
}

/// `path` with symlinks and `..` resolved as far as it exists; the missing rest is
/// appended as it is (`..` after a missing component is not cancelled out lexically,
/// since the kernel would not either).
pub fn canonical(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut existing = path;
    loop {
        if let Ok(resolved) = existing.canonicalize() {
            return missing.iter().rev().fold(resolved, |dir, name| dir.join(name));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name);
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Removes `.` and resolves `..` without touching the filesystem.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
