//! Which repository a kept session repository belongs to, and the sessions kept aside.
//!
//! A session repository is kept per project path, but a path is not a repository: `rm
//! -rf proj && git clone … proj` makes another one there. So the user's repository gets
//! an identity at the first start (a random id in its `.git`, [`REPO_ID`]), and the
//! session records the identity it was made for ([`SESSION_ID`]). A session of another
//! repository is never used: it is put aside, whole, under the project's state
//! directory, where `agent-sandbox git sessions` lists, shows and removes it.

use std::{
    io::Read,
    path::{Path, PathBuf},
};

use super::{list_session_refs, refuse, Refs};
use crate::plan::Refusal;

/// In the user's common git directory: the repository's identity.
pub const REPO_ID: &str = "agent-sandbox/id";
/// Beside a session repository (in its `home` directory): the identity it belongs to.
pub const SESSION_ID: &str = "repository-id";
/// The prefix of a session put aside, beside `home` in the project's state directory.
pub const ASIDE: &str = "aside-";

/// The identity of the user's repository at `user_git` (its common directory), made
/// now when it has none.
pub fn repository_id(user_git: &Path) -> Result<String, Refusal> {
    let path = user_git.join(REPO_ID);
    match util::fs::read_regular_nofollow(&path, 256) {
        Ok(bytes) => {
            let id = String::from_utf8_lossy(&bytes).trim().to_owned();
            if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Ok(id);
            }
            Err(refuse(
                format!("{} is not an identity agent-sandbox wrote", path.display()),
                format!("remove {} (a new one is made)", path.display()),
            ))
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            let mut bytes = [0u8; 16];
            std::fs::File::open("/dev/urandom")
                .and_then(|mut random| random.read_exact(&mut bytes))
                .map_err(|err| refuse(format!("cannot read /dev/urandom: {err}"), "try again"))?;
            let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let dir = user_git.join("agent-sandbox");
            std::fs::create_dir_all(&dir)
                .and_then(|()| util::fs::atomic_write(&path, format!("{id}\n").as_bytes(), 0o644))
                .map_err(|err| {
                    refuse(format!("cannot write {}: {err}", path.display()), "check that .git is writable")
                })?;
            Ok(id)
        }
        Err(err) => Err(refuse(format!("cannot read {}: {err}", path.display()), "fix it")),
    }
}

/// The identity of the user's repository at `user_git`, if it has one (never made).
pub fn existing_id(user_git: &Path) -> Option<String> {
    let bytes = util::fs::read_regular_nofollow(&user_git.join(REPO_ID), 256).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim().to_owned())
}

/// What the session in `top` was made for: `None` when it records nothing (made by an
/// older version, or not yet).
pub fn session_id(top: &Path) -> Option<String> {
    let bytes = util::fs::read_regular_nofollow(&top.join(SESSION_ID), 256).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim().to_owned())
}

/// Records that the session in `top` belongs to `id` (written only when it says otherwise:
/// a start writes nothing it need not).
pub fn record_session_id(top: &Path, id: &str) -> Result<(), Refusal> {
    if session_id(top).as_deref() == Some(id) {
        return Ok(());
    }
    let path = top.join(SESSION_ID);
    util::fs::atomic_write(&path, format!("{id}\n").as_bytes(), 0o600)
        .map_err(|err| refuse(format!("cannot write {}: {err}", path.display()), "try again"))
}

/// A session kept in a project's state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// `home` (the current one) or `aside-…`.
    pub name: String,
    pub dir: PathBuf,
    /// Its branches and tags (`None`: not plain files).
    pub refs: Option<Refs>,
    /// Its stash entries, newest first.
    pub stashes: Vec<String>,
}

/// The stash entries of the session repository `session` (its `logs/refs/stash`, read
/// without following a link), newest first: the object names, and each message.
pub fn stash_entries(session: &Path) -> Vec<String> {
    let bytes = util::fs::read_regular_nofollow(&session.join("logs/refs/stash"), 16 << 20).unwrap_or_default();
    let mut entries: Vec<String> = String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|line| {
            let (head, message) = line.split_once('\t').unwrap_or((line, ""));
            let sha = head.split(' ').nth(1)?;
            let fine = matches!(sha.len(), 40 | 64) && sha.bytes().all(|b| b.is_ascii_hexdigit());
            fine.then(|| format!("{sha} {}", util::terminal_safe(message)))
        })
        .collect();
    entries.reverse();
    entries
}

/// The sessions kept in the project state directory `project`: the current one first,
/// then those put aside, oldest first.
pub fn list(project: &Path) -> Vec<Kept> {
    let mut names: Vec<String> = std::fs::read_dir(project)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .filter_map(|entry| entry.file_name().to_str().map(str::to_owned))
        .filter(|name| name == "home" || name.starts_with(ASIDE))
        .collect();
    names.sort_by_key(|name| (name != "home", name.clone()));
    names
        .into_iter()
        .map(|name| {
            let dir = project.join(&name);
            let session = dir.join(".git");
            Kept { refs: list_session_refs(&session), stashes: stash_entries(&session), name, dir }
        })
        .collect()
}

/// Puts the session in `top` aside (renamed, whole, beside it); its new path.
pub fn put_aside(top: &Path) -> Result<PathBuf, Refusal> {
    let aside = unused_name(top.parent().unwrap_or(Path::new(".")), ASIDE);
    std::fs::rename(top, &aside).map_err(|err| {
        refuse(format!("cannot put the session repository {} aside: {err}", top.display()), "try again")
    })?;
    Ok(aside)
}

/// A path in `dir` named `<prefix><seconds since the epoch>`, with `-2`, `-3`, … after
/// it while one of that name exists (two sessions put aside in one second).
pub(crate) fn unused_name(dir: &Path, prefix: &str) -> PathBuf {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_secs())
        .unwrap_or_default();
    (1..)
        .map(|n| match n {
            1 => dir.join(format!("{prefix}{stamp}")),
            n => dir.join(format!("{prefix}{stamp}-{n}")),
        })
        .find(|path| path.symlink_metadata().is_err())
        .expect("an unused name")
}

/// Removes the kept session `name` (never the current one while an `exec` uses it:
/// the caller checks).
pub fn remove(project: &Path, name: &str) -> Result<PathBuf, Refusal> {
    let plain = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
    if !plain || !(name == "home" || name.starts_with(ASIDE)) {
        return Err(refuse(format!("{name} is not a kept session"), "see `agent-sandbox git sessions`"));
    }
    let dir = project.join(name);
    if !dir.symlink_metadata().is_ok_and(|meta| meta.is_dir()) {
        return Err(refuse(format!("no session {name} is kept for this project"), "see `agent-sandbox git sessions`"));
    }
    std::fs::remove_dir_all(&dir)
        .map_err(|err| refuse(format!("cannot remove {}: {err}", dir.display()), "try again"))?;
    Ok(dir)
}

/// One line per kept session: what of it did not reach `user` (branches and tags whose
/// value the user's repository lacks), and its stash entries.
pub fn describe(kept: &Kept, user: &Refs) -> Vec<String> {
    let mut lines = vec![format!("{} ({})", kept.name, kept.dir.display())];
    match &kept.refs {
        Some(refs) => {
            let unbrought: Vec<String> = refs
                .iter()
                .filter(|(name, sha)| user.get(*name) != Some(*sha))
                .map(|(name, sha)| format!("  {} {}", &sha[..12.min(sha.len())], super::short(name)))
                .collect();
            match unbrought.is_empty() {
                true => lines.push("  every branch and tag is as in your repository".into()),
                false => {
                    lines.push(format!("  {} branches or tags not as in your repository:", unbrought.len()));
                    lines.extend(unbrought);
                }
            }
        }
        None => lines.push("  its refs are not plain files (listed by git inside only)".into()),
    }
    for (n, entry) in kept.stashes.iter().enumerate() {
        lines.push(format!("  stash@{{{n}}}: {entry}"));
    }
    lines
}
