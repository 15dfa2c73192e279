//! After a session: what the sandbox may have done to git metadata that the user's own
//! git would honour afterwards. The agent must be able to write `.git` (commits need it),
//! and git trusts pointer files there (`commondir`, a worktree's `gitdir`, a submodule's
//! `.git` file) and the configs it finds through them, in the project's repository, in
//! its submodules and in any repository nested in the work tree; `git status` in the
//! project even runs git in submodules. One planted `core.fsmonitor` turns the user's
//! next `git status` into the agent's command.
//!
//! Git also takes any directory holding `HEAD`, `objects/` and `refs/` for a (bare)
//! repository, and runs the hooks of whatever repository it is in.
//!
//! So the rule is strict and reads no contents: every such file is snapshotted at start,
//! and at exit anything new or changed is moved aside (or, failing that, deleted): the
//! changed pointer file, the whole nested `.git` or submodule git directory, or a bare
//! layout's `HEAD`. The only things a session may add are what `git worktree add` makes
//! and `git worktree move` changes (checked by their links). Worktree records must stay
//! real directories: through a symlink, the same `commondir` names another repository.
//! An interactive rebase left in progress is reported with its `exec` lines.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// The git metadata as it was at start.
pub struct Snapshot {
    /// Whether the project had a `.git` (directory or file) at all.
    had_git: bool,
    files: BTreeMap<PathBuf, Option<Vec<u8>>>,
    nested: BTreeSet<PathBuf>,
    /// Directories laid out as bare repositories (`HEAD`, `objects/`, `refs/`).
    bare: BTreeSet<PathBuf>,
    /// `worktrees` and each `worktrees/<n>`, with their targets if they are symlinks.
    worktree_dirs: BTreeMap<PathBuf, Option<PathBuf>>,
    modules: BTreeSet<PathBuf>,
    /// In-progress operations and their todo lists.
    sequencer: BTreeMap<PathBuf, String>,
    /// Watched besides the repository's own files (a configured hooks directory).
    extra: Vec<PathBuf>,
}

/// Files of a git directory that make git use other configuration or repositories.
const GIT_DIR_FILES: &[&str] = &["config", "commondir", "config.worktree", "gitdir", "hooks"];
/// What `git worktree add` writes to a worktree record's `commondir`.
const STANDARD_COMMONDIR: &str = "../..\n";
/// In-progress operations whose todo lists git will run on `--continue`.
const SEQUENCER: &[&str] = &["rebase-merge", "rebase-apply", "sequencer"];

/// The project's own pointer files (existing or not) and its worktrees' links.
fn project_files(project_root: &Path, common_dir: Option<&Path>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let dot_git = project_root.join(".git");
    if dot_git.is_dir() {
        files.extend(["commondir", "config.worktree"].map(|name| dot_git.join(name)));
    } else {
        files.push(dot_git);
    }
    if let Some(common) = common_dir {
        if !common.starts_with(project_root) {
            files.extend(["commondir", "config.worktree"].map(|name| common.join(name)));
        }
        // Read-only inside when they exist; made inside when they did not.
        files.extend(["hooks", "config"].map(|name| common.join(name)));
        for worktree in subdirs(&common.join("worktrees")) {
            // `config`: without a `commondir`, the directory is a repository of its own.
            files.extend(["commondir", "gitdir", "config.worktree", "config", "hooks"].map(|name| worktree.join(name)));
        }
    }
    files
}

/// The common directory's `worktrees` and its entries, each with its symlink target.
fn worktree_dirs(common_dir: Option<&Path>) -> BTreeMap<PathBuf, Option<PathBuf>> {
    let Some(worktrees) = common_dir.map(|common| common.join("worktrees")) else { return BTreeMap::new() };
    let entries = std::fs::read_dir(&worktrees).map(|entries| entries.flatten().map(|entry| entry.path()).collect());
    std::iter::once(worktrees)
        .chain(entries.unwrap_or_else(|_| Vec::new()))
        .map(|path| {
            let target = std::fs::read_link(&path).ok();
            (path, target)
        })
        .collect()
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|entry| entry.path()).filter(|path| path.is_dir()).collect())
        .unwrap_or_default()
}

/// The files that make up a nested `.git` entry or a submodule git directory.
fn entry_files(entry: &Path) -> Vec<PathBuf> {
    if entry.is_dir() {
        let mut files: Vec<PathBuf> = GIT_DIR_FILES.iter().map(|name| entry.join(name)).collect();
        // A `commondir` takes config and hooks from the directory it names.
        if let Ok(common) = std::fs::read_to_string(entry.join("commondir")) {
            let common = entry.join(common.trim_end_matches('\n'));
            files.extend(["config", "hooks"].map(|name| common.join(name)));
        }
        files
    } else {
        vec![entry.to_path_buf()]
    }
}

/// Git directories whose in-progress operations are watched.
fn git_dirs(project_root: &Path, common_dir: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = common_dir.map(Path::to_path_buf).into_iter().collect();
    if let Some(common) = common_dir {
        dirs.extend(subdirs(&common.join("worktrees")));
    }
    let dot_git = project_root.join(".git");
    if dot_git.is_dir() && !dirs.contains(&dot_git) {
        dirs.push(dot_git);
    }
    dirs
}

fn sequencer_states(project_root: &Path, common_dir: Option<&Path>) -> BTreeMap<PathBuf, String> {
    git_dirs(project_root, common_dir)
        .into_iter()
        .flat_map(|dir| SEQUENCER.iter().map(move |name| dir.join(name)))
        .filter(|path| path.exists())
        .map(|state| {
            let todo =
                ["git-rebase-todo", "todo"].iter().find_map(|name| std::fs::read_to_string(state.join(name)).ok());
            (state, todo.unwrap_or_default())
        })
        .collect()
}

/// The `exec` lines of a todo list: commands `--continue` runs.
fn exec_lines(todo: &str) -> Vec<&str> {
    todo.lines().map(str::trim_start).filter(|line| line.starts_with("exec") || line.starts_with("x ")).collect()
}

/// A file's bytes, a symlink's target, or a directory's (`hooks`) names and contents.
fn read(path: &Path) -> Option<Vec<u8>> {
    match path.symlink_metadata() {
        Ok(meta) if meta.is_symlink() => {
            std::fs::read_link(path).ok().map(|target| target.into_os_string().into_encoded_bytes())
        }
        Ok(meta) if meta.is_dir() => {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
                .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
                .unwrap_or_default();
            entries.sort();
            let mut listing = Vec::new();
            for entry in entries {
                listing.extend(entry.as_os_str().as_encoded_bytes());
                listing.push(0);
                // Hooks are run through symlinks too: their targets' contents count.
                listing.extend(std::fs::read(&entry).unwrap_or_default());
                listing.push(0);
            }
            Some(listing)
        }
        Ok(_) => std::fs::read(path).ok().or(Some(b"<unreadable>".to_vec())),
        Err(_) => None,
    }
}

/// The directories among `heads` (`HEAD` entries found in the work tree) that git would
/// take for repositories.
pub fn bare_layouts(heads: &[PathBuf], common_dir: Option<&Path>) -> Vec<PathBuf> {
    heads
        .iter()
        .filter(|head| is_valid_head(head))
        .filter_map(|head| head.parent())
        // The repository's own git directory when it lies in the work tree (a bare
        // clone with worktrees beside it): its records are checked as such above.
        .filter(|dir| common_dir.is_none_or(|common| !dir.starts_with(common)))
        // Git only asks that `objects` and `refs` be searchable (any kind of entry counts),
        // and looks for them where a `commondir` says.
        .filter(|dir| {
            let has = |name: &str| dir.join(name).symlink_metadata().is_ok();
            (has("objects") && has("refs")) || has("commondir")
        })
        .map(Path::to_path_buf)
        .collect()
}

/// A `HEAD` git would accept (as its `validate_headref` does): a symlink into `refs/`,
/// `ref: refs/…`, or an object name.
fn is_valid_head(head: &Path) -> bool {
    if let Ok(target) = std::fs::read_link(head) {
        return target.starts_with("refs/");
    }
    let mut bytes = [0u8; 80];
    let Ok(len) = std::fs::File::open(head).and_then(|mut file| std::io::Read::read(&mut file, &mut bytes)) else {
        return false;
    };
    let text = String::from_utf8_lossy(&bytes[..len]);
    if let Some(rest) = text.strip_prefix("ref:") {
        return rest.trim_start().starts_with("refs/");
    }
    let hex = text.bytes().take_while(u8::is_ascii_hexdigit).count();
    hex >= 40
}

/// `nested`: the `.git` entries below the project root (not its own); `bare`: the
/// directories in the work tree laid out as repositories.
/// `extra`: further paths to watch (a hooks directory configured with `core.hooksPath`).
pub fn snapshot(
    project_root: &Path,
    common_dir: Option<&Path>,
    nested: &[PathBuf],
    bare: &[PathBuf],
    extra: &[PathBuf],
) -> Snapshot {
    let modules: BTreeSet<PathBuf> = common_dir
        .map(|common| policy::git::module_git_dirs(&common.join("modules")))
        .unwrap_or_default()
        .into_iter()
        .collect();
    let mut paths = project_files(project_root, common_dir);
    paths.extend(nested.iter().chain(bare).flat_map(|entry| entry_files(entry)));
    paths.extend(extra.iter().cloned());
    paths.extend(modules.iter().flat_map(|dir| entry_files(dir)));
    Snapshot {
        had_git: project_root.join(".git").symlink_metadata().is_ok(),
        files: paths.into_iter().map(|path| (path.clone(), read(&path))).collect(),
        nested: nested.iter().cloned().collect(),
        bare: bare.iter().cloned().collect(),
        worktree_dirs: worktree_dirs(common_dir),
        modules,
        sequencer: sequencer_states(project_root, common_dir),
        extra: extra.to_vec(),
    }
}

/// Compares with `before` and quarantines what the session planted or changed.
pub fn after(
    before: &Snapshot,
    project_root: &Path,
    common_dir: Option<&Path>,
    nested_now: &[PathBuf],
    bare_now: &[PathBuf],
) {
    // A repository the session made at the project root is the agent's, hooks and all.
    let dot_git = project_root.join(".git");
    if !before.had_git && dot_git.symlink_metadata().is_ok() {
        quarantine(&dot_git, "is a repository created inside the sandbox, with its configuration and hooks");
        return;
    }
    for (dir, target) in worktree_dirs(common_dir) {
        if target.is_some() && before.worktree_dirs.get(&dir) != Some(&target) {
            quarantine(&dir, "is a worktree record turned into a symlink, which makes git read another repository");
        }
    }
    for path in project_files(project_root, common_dir).into_iter().chain(before.extra.iter().cloned()) {
        let now = read(&path);
        let then = before.files.get(&path).cloned().flatten();
        if now.is_none() && then.is_some() && path.file_name().is_some_and(|name| name == "commondir") {
            // A worktree's git directory without its `commondir` is a repository of its
            // own, with its own config and hooks.
            let Some(admin) = path.parent().filter(|dir| dir.exists()) else { continue };
            if restore_commondir(&path, then.as_deref()) {
                eprintln!("agent-sandbox: WARNING: {} was deleted inside the sandbox; restored it", path.display());
            } else {
                quarantine(admin, "lost its commondir inside the sandbox, which makes it a repository of its own");
            }
            continue;
        }
        if now.is_none() || now == then {
            continue;
        }
        let sibling_vanished = path.file_name().is_some_and(|name| name == "commondir")
            && path.parent().is_some_and(|dir| is_vanished_worktree_link(&dir.join("gitdir"), common_dir));
        if then.is_none() && sibling_vanished && path.parent().is_some_and(has_standard_commondir) {
            continue;
        }
        if is_new_worktree_link(&path, common_dir) {
            continue; // `git worktree add` made it, or `git worktree move` changed it
        }
        if then.is_none() && is_vanished_worktree_link(&path, common_dir) {
            let checkout = std::fs::read_to_string(&path).unwrap_or_default();
            eprintln!(
                "agent-sandbox: note: the sandbox added a worktree at {}, outside the project, in scratch space that is gone \
                 now; its commits are kept, `git worktree prune` removes the leftover record",
                Path::new(checkout.trim()).parent().unwrap_or(Path::new("?")).display()
            );
            continue;
        }
        quarantine(&path, "would change which repository, configuration or hooks git uses");
        // A worktree left without its `commondir` would be a repository of its own: the
        // standard one is put back.
        if path.file_name().is_some_and(|name| name == "commondir") && restore_commondir(&path, then.as_deref()) {
            eprintln!("  (restored {} as it was)", path.display());
        }
    }
    // Also in dependency trees: one `git add` of a clone there makes the project's
    // `git status` run git in it.
    let changed = |known: &BTreeSet<PathBuf>, entry: &Path| {
        !known.contains(entry)
            || entry_files(entry).iter().any(|file| read(file) != before.files.get(file).cloned().flatten())
    };
    for entry in nested_now {
        if changed(&before.nested, entry) && !is_worktree_gitlink(entry, common_dir) {
            quarantine(entry, "is git metadata written inside the sandbox, which git would use outside it");
        }
    }
    for dir in bare_now {
        if changed(&before.bare, dir) {
            quarantine(&dir.join("HEAD"), "makes a repository, laid out inside the sandbox, that git would use");
        }
    }
    let modules_now =
        common_dir.map(|common| policy::git::module_git_dirs(&common.join("modules"))).unwrap_or_default();
    for dir in modules_now {
        let changed = !before.modules.contains(&dir)
            || entry_files(&dir).iter().any(|file| read(file) != before.files.get(file).cloned().flatten());
        if changed {
            quarantine(&dir, "is a submodule's git directory written inside the sandbox");
        }
    }
    for (state, todo) in sequencer_states(project_root, common_dir) {
        // New, or an existing todo list (a rebase the user stopped) given new commands.
        let known = before.sequencer.get(&state).map(|todo| exec_lines(todo)).unwrap_or_default();
        let added: Vec<&str> = exec_lines(&todo).into_iter().filter(|line| !known.contains(line)).collect();
        if before.sequencer.contains_key(&state) && added.is_empty() {
            continue;
        }
        eprintln!(
            "agent-sandbox: WARNING: the sandbox left an operation in progress ({}); `--continue` would run its todo list{}",
            state.display(),
            if added.is_empty() { String::new() } else { format!(", including: {}", added.join(" | ")) }
        );
    }
}

/// A `worktrees/<n>/commondir` or `gitdir` as `git worktree add` (or `move`) writes
/// them; a `gitdir` only beside the `commondir` that makes `<n>` a worktree.
fn is_new_worktree_link(path: &Path, common_dir: Option<&Path>) -> bool {
    let (Some(common), Some(name)) = (common_dir, path.file_name()) else { return false };
    let Some(worktree) = path.parent().filter(|dir| dir.parent() == Some(common.join("worktrees").as_path())) else {
        return false;
    };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    match name.to_str() {
        Some("commondir") => is_worktree_admin(worktree, common),
        Some("gitdir") => {
            is_worktree_admin(worktree, common)
                && text.strip_suffix('\n').is_some_and(|dot_git| {
                    gitlink_target(Path::new(dot_git)).as_deref() == worktree.canonicalize().ok().as_deref()
                })
        }
        _ => false,
    }
}

/// A new `worktrees/<n>/gitdir` naming a checkout that no longer exists (made by
/// `git worktree add` outside the project, in the sandbox's scratch space), with the
/// `commondir` git writes beside it.
fn is_vanished_worktree_link(path: &Path, common_dir: Option<&Path>) -> bool {
    let (Some(common), Some(worktree)) = (common_dir, path.parent()) else { return false };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    path.file_name().is_some_and(|name| name == "gitdir")
        && worktree.parent() == Some(common.join("worktrees").as_path())
        && text.ends_with('\n')
        && !Path::new(text.trim_end_matches('\n')).exists()
        && has_standard_commondir(worktree)
}

fn has_standard_commondir(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("commondir")).is_ok_and(|text| text == STANDARD_COMMONDIR)
}

/// Puts back a worktree record's `commondir` that was the standard one at start.
fn restore_commondir(path: &Path, then: Option<&[u8]>) -> bool {
    then == Some(STANDARD_COMMONDIR.as_bytes()) && std::fs::write(path, STANDARD_COMMONDIR).is_ok()
}

/// Whether `dir` (`worktrees/<n>`) shares the repository's config and hooks, as git
/// writes it: `commondir` is `../..`, and resolves (as git resolves it) to `common`.
fn is_worktree_admin(dir: &Path, common: &Path) -> bool {
    has_standard_commondir(dir) && dir.join("../..").canonicalize().ok() == common.canonicalize().ok()
}

/// Whether `entry` is the `.git` file of a worktree of this repository (one that its
/// `worktrees/<n>/gitdir` names back, and that shares the repository's config).
fn is_worktree_gitlink(entry: &Path, common_dir: Option<&Path>) -> bool {
    let (Some(common), Some(target)) = (common_dir, gitlink_target(entry)) else { return false };
    let in_worktrees =
        common.join("worktrees").canonicalize().ok().is_some_and(|dir| target.parent() == Some(dir.as_path()));
    let back = std::fs::read_to_string(target.join("gitdir")).unwrap_or_default();
    in_worktrees
        && is_worktree_admin(&target, common)
        && back.strip_suffix('\n').and_then(|path| Path::new(path).canonicalize().ok()) == entry.canonicalize().ok()
}

/// What a `.git` file points at, read as git reads it: `gitdir: ` at the start, the rest
/// up to trailing newlines, relative to the file's directory; canonical.
fn gitlink_target(dot_git: &Path) -> Option<PathBuf> {
    let bytes = std::fs::read(dot_git).ok()?;
    let rest = bytes.strip_prefix(b"gitdir: ")?;
    let end = rest.iter().rposition(|b| *b != b'\n' && *b != b'\r').map_or(0, |pos| pos + 1);
    let target = std::str::from_utf8(&rest[..end]).ok()?;
    dot_git.parent()?.join(target).canonicalize().ok()
}

fn quarantine(path: &Path, why: &str) {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let name = path.file_name().map_or_else(|| "file".into(), |name| name.to_string_lossy().into_owned());
    let aside = path.with_file_name(format!("{name}.agent-sandbox-quarantined.{stamp}"));
    // If even that cannot be done, the plant is removed rather than left in place.
    let moved = std::fs::rename(path, &aside).or_else(|err| {
        let removed = if path.is_dir() { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
        removed.and(Err(err))
    });
    let outcome = match moved {
        Ok(()) => format!("moved it to {} (inspect it before you use it)", aside.display()),
        Err(err) if path.symlink_metadata().is_err() => format!("could not move it aside ({err}), so it was deleted"),
        Err(err) => format!("could not move it aside or delete it ({err}): delete it before running git here"),
    };
    eprintln!("agent-sandbox: WARNING: {} {why}; {outcome}", path.display());
    if path.symlink_metadata().is_err() && aside.symlink_metadata().is_ok() {
        eprintln!("  (to restore it after inspection: mv '{}' '{}')", aside.display(), path.display());
    }
    let event =
        audit::Event::new("git", "write", &path.display().to_string(), "blocked", "git-plant", Some(why.to_owned()));
    if let Some(log) = audit::default_path() {
        let _ = audit::append(&log, &[event]);
    }
}

/// Every `.git` entry below `dir` (not descending into them) and every `HEAD`, skipping
/// what cannot be read: git, running as the same user, could not use what is inside
/// either.
pub fn find_git_entries(dir: &Path, out: &mut Vec<PathBuf>, heads: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name() == ".git" {
            out.push(path);
        } else if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            find_git_entries(&path, out, heads);
        } else if entry.file_name() == "HEAD" {
            heads.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitlinks_are_read_as_git_reads_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(root.join("a/b")).expect("mkdir");
        std::fs::create_dir_all(root.join("x\n/../evil")).ok();
        std::fs::write(root.join("sub.git"), "gitdir: a/b\n").expect("write");
        assert_eq!(gitlink_target(&root.join("sub.git")), Some(root.join("a/b")));
        std::fs::write(root.join("bad.git"), "# comment\ngitdir: a/b\n").expect("write");
        assert_eq!(gitlink_target(&root.join("bad.git")), None, "gitdir: must start the file");
        std::fs::write(root.join("nl.git"), "gitdir: a\n/b\n").expect("write");
        assert_ne!(gitlink_target(&root.join("nl.git")), Some(root.join("a")), "the newline is part of the path");
    }
}
