//! Root's side of the checks in a container, for the push verifier (`verify.rs`) and
//! the session repository's broker (`home.rs`) alike: root's state directories and
//! files, root's git environment, and the pre-push hook with the settings under which
//! the hook guard runs the checks as `agent-sandbox-check` in a fresh worktree.

use std::{
    ffi::OsString,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use guard_settings::{CheckUser, HookGuardSettings};

use crate::{
    hook::hook_script,
    mirror::Mirror,
    plan::{refuse, Refusal},
};

/// Set in the environment of the verifier's git (root's): the container's git guard
/// lets it, and the git commands git runs for it through the guard, pass unjudged
/// (they set `core.hooksPath` on purpose).
pub const VERIFIER_VAR: &str = "AGENT_SANDBOX_VERIFIER";
/// The user the checks of a container's pushes run as (created by the Feature).
pub const CHECK_USER: &str = "agent-sandbox-check";
/// The verifier's directory: root's, readable by the checks' user (its worktree is in it).
pub const STATE_DIR: &str = "/var/lib/agent-sandbox/push";
/// The system's directories, the only ones root's git and the checks search.
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// A user's hook is read whole up to this size.
const MAX_HOOK: u64 = 1 << 20;

/// The pre-push hook of root's git in `state` (the hook guard, in its host mode) and
/// its settings: the checks run as `agent-sandbox-check` in a fresh worktree under
/// `state/work`, with a clean environment and only root's directories on `PATH`.
/// `global_config`: the hook guard's git's global configuration. Returns the settings
/// file and the work directory (removed by the caller).
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare_checks(
    state: &Path,
    (uid, gid): (u32, u32),
    config: &config::Config,
    mirror: &Mirror,
    project_config: &Path,
    top: &Path,
    self_exe: &Path,
    global_config: Option<&Path>,
) -> Result<(PathBuf, PathBuf), Refusal> {
    let hooks = state.join("hooks");
    make_root_dir(&hooks, 0o755)?;
    write_root_file(&hooks.join("pre-push"), hook_script(self_exe).as_bytes(), 0o755)?;
    let work = state.join("work");
    remove(&work)?;
    make_root_dir(&work, 0o755)?;
    let home = work.join("home");
    for dir in [&home, &work.join("tmp")] {
        std::fs::create_dir(dir)
            .and_then(|()| std::os::unix::fs::chown(dir, Some(uid), Some(gid)))
            .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
            .map_err(|err| refuse(format!("cannot prepare {}: {err}", dir.display()), "push again"))?;
    }
    let mut settings = HookGuardSettings::from_config(config);
    if let Some(global) = global_config {
        settings.global_config = global.display().to_string();
    }
    let hooks = match project_hooks_dir(mirror, project_config, top) {
        Some(HooksDir::InWorkTree(rel)) => {
            settings.protected_paths.push(rel.clone());
            Some(work.join("tree").join(rel))
        }
        Some(HooksDir::Elsewhere) => None,
        None => copy_user_hooks(&work.join("user-hooks"))?,
    };
    let search = checks_path(PATH);
    settings.check_path_dropped = search.dropped_lines();
    settings.check_user = Some(CheckUser {
        uid,
        gid,
        env: check_env(&work, &search.joined().to_string_lossy()),
        worktree: work.join("tree"),
        project: top.to_path_buf(),
        dependencies: dependency_dirs(top),
        hooks,
    });
    let settings_file = state.join("settings.json");
    write_root_file(&settings_file, settings.to_json().as_bytes(), 0o600)?;
    Ok((settings_file, work))
}

/// Creates `dir` (and refuses one that is not root's, or a link) with `mode`.
pub(crate) fn make_root_dir(dir: &Path, mode: u32) -> Result<(), Refusal> {
    let failed = |err: String| refuse(format!("cannot prepare {}: {err}", dir.display()), "rebuild the image");
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(failed(err.to_string())),
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).map_err(|err| failed(err.to_string()))?;
    util::fs::root_only(dir).map_err(failed)
}

pub(crate) fn write_root_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), Refusal> {
    util::fs::atomic_write(path, bytes, mode)
        .map_err(|err| refuse(format!("cannot write {}: {err}", path.display()), "push again"))
}

pub(crate) fn remove(dir: &Path) -> Result<(), Refusal> {
    match std::fs::remove_dir_all(dir) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            Err(refuse(format!("cannot remove {}: {err}", dir.display()), "push again"))
        }
        _ => Ok(()),
    }
}

/// Root's git's environment: nothing of the agent's.
pub(crate) fn root_env() -> Vec<(OsString, OsString)> {
    [
        ("HOME", "/root"),
        ("PATH", PATH),
        ("GIT_NO_REPLACE_OBJECTS", "1"),
        ("GIT_GRAFT_FILE", "/dev/null"),
        ("GIT_TERMINAL_PROMPT", "0"),
        ("USER", "root"),
        (VERIFIER_VAR, "1"),
    ]
    .into_iter()
    .map(|(name, value)| (name.into(), value.into()))
    .collect()
}

/// The checks' `PATH`: the existing entries of `path_var` that are root's alone, links
/// resolved (`policy::path_search`): an image that gave the agent's user `/usr/local/bin`
/// (for `npm i -g`) would otherwise let it plant the `pytest` a check runs.
fn checks_path(path_var: &str) -> policy::path_search::SearchPath {
    let present: Vec<&str> = path_var.split(':').filter(|entry| Path::new(entry).exists()).collect();
    policy::path_search::decide_by(std::ffi::OsStr::new(&present.join(":")), &|entry| {
        let real = entry.canonicalize().map_err(|err| policy::path_search::Dropped::NotRootOnly(err.to_string()))?;
        util::fs::root_only(&real).map_err(policy::path_search::Dropped::NotRootOnly)
    })
}

/// The checks' environment: their own home and temporary directory, git trusting the
/// worktree (its records stay root's).
fn check_env(work: &Path, path: &str) -> Vec<(String, String)> {
    let home = work.join("home").display().to_string();
    let tmp = work.join("tmp").display().to_string();
    [
        ("PATH", path.to_owned()),
        ("HOME", home),
        ("TMPDIR", tmp),
        ("USER", CHECK_USER.to_owned()),
        ("LOGNAME", CHECK_USER.to_owned()),
        ("LANG", "C.UTF-8".to_owned()),
        ("GIT_CONFIG_COUNT", "1".to_owned()),
        ("GIT_CONFIG_KEY_0", "safe.directory".to_owned()),
        ("GIT_CONFIG_VALUE_0", "*".to_owned()),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect()
}

/// Root's git in the mirror; a failure refuses the push with what git said (the
/// reader is a user that can read nothing the agent cannot).
pub(crate) fn mirror_git(mirror: &Mirror, args: &[&str]) -> Result<Vec<u8>, Refusal> {
    mirror.git(args).map_err(|failed| refuse(failed.to_string(), "fix what git says, then push again"))
}

pub(crate) fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes).lines().filter(|line| !line.is_empty()).map(str::to_owned).collect()
}

/// Where the project's `core.hooksPath` leads.
enum HooksDir {
    /// In the work tree, as a path relative to it: commits may not change it.
    InWorkTree(String),
    /// Outside the work tree: not where the container shows it.
    Elsewhere,
}

/// The project's `core.hooksPath` (from root's copy of its config); `None` when unset.
fn project_hooks_dir(mirror: &Mirror, project_config: &Path, top: &Path) -> Option<HooksDir> {
    let config = project_config.display().to_string();
    let value = mirror.git(&["config", "--file", &config, "--get", "core.hooksPath"]).ok()?;
    let value = String::from_utf8_lossy(&value).trim().to_owned();
    let dir = gitfacts::normalize(&top.join(&value));
    Some(match dir.strip_prefix(top) {
        Ok(rel) if !rel.as_os_str().is_empty() => HooksDir::InWorkTree(rel.display().to_string()),
        _ => HooksDir::Elsewhere,
    })
}

/// A root-owned copy in `dest` of the user's `.git/hooks` (the broker's mount, which only
/// root reaches), for the checks' user to replay; `None` without that mount (a verified
/// push of a project whose `.git` is mounted).
fn copy_user_hooks(dest: &Path) -> Result<Option<PathBuf>, Refusal> {
    let source = Path::new(runtime_layout::CONTAINER_HOME_GIT).join("hooks");
    let Ok(entries) = std::fs::read_dir(&source) else { return Ok(None) };
    make_root_dir(dest, 0o755)?;
    for entry in entries {
        let entry = entry.map_err(|err| refuse(format!("cannot list your hooks: {err}"), "try again"))?;
        let name = entry.file_name();
        let (path, plain) = (entry.path(), !name.to_string_lossy().ends_with(".sample"));
        let Ok(meta) = path.symlink_metadata() else { continue };
        if !plain || !meta.is_file() {
            continue;
        }
        let bytes = util::fs::read_regular_nofollow(&path, MAX_HOOK).map_err(|err| {
            refuse(format!("your hook {} cannot be read: {err}", path.display()), "fix it on the host")
        })?;
        let mode = if meta.permissions().mode() & 0o111 != 0 { 0o755 } else { 0o644 };
        write_root_file(&dest.join(&name), &bytes, mode)?;
    }
    Ok(Some(dest.to_path_buf()))
}

/// The project's dependency directories at its top (`node_modules`, `.venv`, …), which
/// the checks see through links (made by the hook guard, which judges both sides again
/// without following a link).
fn dependency_dirs(top: &Path) -> Vec<String> {
    guard_settings::DEPENDENCY_DIRS
        .iter()
        .filter(|name| util::fs::open_dir_beneath(top, Path::new(name), false).is_ok())
        .map(|name| (*name).to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only directories no user but root can change stay on the checks' `PATH`: the
    /// system's own (`/bin` through its link) beside a directory anyone may write and
    /// `/tmp`; an entry that does not exist is left out silently.
    #[test]
    fn the_checks_search_only_roots_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let open = dir.path().join("bin");
        std::fs::create_dir(&open).expect("mkdir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let open = open.to_str().expect("utf-8");
        let search = checks_path(&format!("{open}:/usr/bin:/bin:/tmp:/no/such/dir"));
        assert_eq!(search.kept, [PathBuf::from("/usr/bin"), PathBuf::from("/bin")]);
        let dropped: Vec<&std::ffi::OsStr> = search.dropped.iter().map(|(entry, _)| entry.as_os_str()).collect();
        assert_eq!(dropped, [std::ffi::OsStr::new(open), std::ffi::OsStr::new("/tmp")]);
        assert!(search.dropped_lines()[0].contains("not root's alone"), "{:?}", search.dropped_lines());
    }
}
