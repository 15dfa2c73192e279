//! Pushes in a container, where no process outside the agent's reach exists: with
//! `git.verifiedPush`, the git guard hands `git push` to `agent-sandbox push-verify`,
//! which root runs through the image's one exact sudo rule (`env_reset`: none of the
//! agent's variables, `LD_*` among them, reach it). The request (the same JSON line as
//! on the host's socket) comes on stdin; everything the agent could have written is
//! treated as hostile:
//!
//! - only the project's repository is pushed: the work tree whose `.git/config` is a
//!   read-only mount point (`devcontainer init` and the Docker sandbox mount it so), so
//!   the remotes, credentials and commands git reads there are the user's;
//! - root's git never works in the agent's repository: it fetches the refs into its own
//!   mirror (`/var/lib/agent-sandbox/push/mirror.git`), with the reading side
//!   (`upload-pack`) run as the checks' user, which cannot read root's files, and
//!   index-pack verifying every object's hash, so what the checks see is what the
//!   remote, which verifies the same hashes, receives; the agent can swap objects in
//!   its own store at any time without effect;
//! - the hook guard, as `pre-push` of root's push from the mirror, refuses protected
//!   paths and runs `checks.commands` on every new commit, as the user
//!   `agent-sandbox-check` (no credentials, not the agent's user: the agent can neither
//!   signal its processes nor write its worktree) with a clean environment;
//! - root's git pushes with root's own setup (`/root/.ssh`, `/root/.gitconfig`): the
//!   container's push credentials are root's and the agent's user holds none.
//!
//! What the image's root trusts stays root's: every configuration file the mirror's git
//! reads must be root's or on a read-only mount, and a remote that is a local directory
//! must be root's all the way up (root's push would run that repository's hooks).

use std::{
    io::Read,
    os::unix::io::AsRawFd,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::{
    checks::{
        lines, make_root_dir, mirror_git, prepare_checks, remove, root_env, write_root_file, CHECK_USER, STATE_DIR,
    },
    hook::SETTINGS_VAR,
    mirror::{self, Mirror},
    plan::{plan, refuse, request_repository, PushFacts, Refusal},
    protocol::{Request, MAX_REQUEST},
};

/// Where refusals are recorded.
const LOG: &str = "/var/log/agent-sandbox/push.jsonl";
const SETPRIV: &str = "/usr/bin/setpriv";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_CONFIG: u64 = 1 << 20;

/// `agent-sandbox push-verify`: the push's exit status. `config` is the configuration a
/// container trusts (the image's and the project's read-only one).
pub fn run(config: Result<config::Config, String>, self_exe: &Path) -> i32 {
    match verify(config, self_exe) {
        Ok(code) => code,
        Err(refusal) => {
            eprintln!("{refusal}");
            let event = audit::Event::new("git", "push", "git push", "blocked", "verified-push", Some(refusal.why));
            if let Some(dir) = Path::new(LOG).parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = audit::append(Path::new(LOG), &[event]);
            1
        }
    }
}

/// A work tree whose `.git/config` is a read-only mount point.
#[derive(Debug, PartialEq, Eq)]
pub struct Project {
    pub top: PathBuf,
    /// The mount's id (`/proc/self/mountinfo`'s first field).
    pub config_mount: u64,
}

/// The project a push comes from: one whose `.git/config` is a read-only mount, or one
/// with a session repository (`crate::home`), whose user's configuration only root reaches.
enum Found {
    Mounted(Project),
    Home(crate::home::Layout),
}

/// The projects as `/proc/self/mountinfo` lists them.
pub fn projects(mountinfo: &str) -> Vec<Project> {
    util::mounts::parse(mountinfo)
        .into_iter()
        .filter(|mount| mount.read_only && mount.point.ends_with(".git/config"))
        .filter_map(|mount| {
            Some(Project { top: mount.point.parent()?.parent()?.to_path_buf(), config_mount: mount.id })
        })
        .collect()
}

/// The bytes of the project's `.git/config`, read through a descriptor that is on the
/// read-only mount itself: the agent can rename `.git` (the mount moves with it) and
/// put a file of its own at the path, which root's git must never read.
pub(crate) fn mounted_config(project: &Project) -> Result<Vec<u8>, Refusal> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = project.top.join(".git/config");
    let failed = |why: String| {
        refuse(
            format!("{} is not the read-only configuration mounted there ({why})", path.display()),
            "push from the project itself; if .git was moved, put it back (or restart the container)",
        )
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .map_err(|err| failed(err.to_string()))?;
    if util::mounts::mount_of(&file) != Some(project.config_mount) {
        return Err(failed("another file is at that path".into()));
    }
    if !file.metadata().is_ok_and(|meta| meta.is_file()) {
        return Err(failed("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG + 1).read_to_end(&mut bytes).map_err(|err| failed(err.to_string()))?;
    if bytes.len() as u64 > MAX_CONFIG {
        return Err(failed("larger than 1 MiB".into()));
    }
    Ok(bytes)
}

/// The `include.path`/`includeIf.*.path` values of a configuration (`git config --list
/// -z` without includes) that are relative: read from a copy, they would lead elsewhere.
pub(crate) fn relative_includes(listing: &[u8]) -> Vec<String> {
    listing
        .split(|b| *b == 0)
        .filter_map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (key, value) = entry.split_once('\n')?;
            let include = key == "include.path" || (key.starts_with("includeif.") && key.ends_with(".path"));
            (include && !value.starts_with('/') && !value.starts_with('~')).then(|| value.to_owned())
        })
        .collect()
}

/// Where a remote's URL leads, for root's push.
#[derive(Debug, PartialEq, Eq)]
pub enum Remote {
    /// Over the network (ssh, https, git): nothing there runs in this container.
    Network,
    /// A directory here: root's push runs its hooks, so it must be root's.
    Local(PathBuf),
    /// A remote helper (`ext::`, `fd::`, …) runs commands the URL names.
    Helper,
}

/// What `url` is, as git reads it (`cwd` for a relative path).
pub fn remote_kind(url: &str, cwd: &Path) -> Remote {
    if let Some(path) = url.strip_prefix("file://") {
        let path = path.strip_prefix("localhost").unwrap_or(path);
        return Remote::Local(gitfacts::normalize(&cwd.join(path)));
    }
    if url.contains("://") {
        return Remote::Network;
    }
    if let Some((transport, _)) = url.split_once("::") {
        if !transport.contains('/') {
            return Remote::Helper;
        }
    }
    // scp-like `[user@]host:path`: a colon before any slash.
    match (url.find(':'), url.find('/')) {
        (Some(colon), slash) if slash.is_none_or(|slash| colon < slash) => Remote::Network,
        _ => Remote::Local(gitfacts::normalize(&cwd.join(url))),
    }
}

fn verify(config: Result<config::Config, String>, self_exe: &Path) -> Result<i32, Refusal> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || runtime_layout::detect() != runtime_layout::Where::Container {
        return Err(refuse(
            "push-verify is a container's verifier, which root runs through the image's sudo rule",
            "push with `git push`: the git guard hands the push over",
        ));
    }
    let config = config.map_err(|err| {
        refuse(format!("the configuration cannot be read: {err}"), "fix it (no push leaves until it reads)")
    })?;
    // The checks' user reads the mirror and the verifier's directory.
    // SAFETY: umask has no preconditions.
    unsafe { libc::umask(0o022) };
    let request = read_request(std::io::stdin(), REQUEST_TIMEOUT)?;
    if request.home {
        return Err(refuse("the verifier pushes; it brings nothing home", "run `agent-sandbox git-home sync`"));
    }
    let (uid, gid) = util::users::lookup(CHECK_USER).ok_or_else(|| {
        refuse(format!("the image has no user {CHECK_USER} to run the checks as"), "rebuild the image with the Feature")
    })?;
    let state = Path::new(STATE_DIR);
    make_root_dir(state, 0o755)?;
    let _lock = util::fs::lock(&state.join("lock"), true)
        .map_err(|err| refuse(format!("cannot lock {STATE_DIR}: {err}"), "push again"))?;
    // What a check left running in an earlier, interrupted push.
    util::users::kill_all(uid, Duration::from_secs(10));

    let cwd = gitfacts::normalize(Path::new(&request.cwd));
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|err| refuse(format!("cannot read the mounts: {err}"), "push again"))?;
    let home = crate::home::layout(&util::mounts::parse(&mountinfo)).filter(|layout| cwd.starts_with(&layout.top));
    let project = projects(&mountinfo)
        .into_iter()
        .filter(|project| cwd.starts_with(&project.top))
        .max_by_key(|project| project.top.components().count())
        .map(Found::Mounted)
        .or_else(|| home.map(Found::Home))
        .ok_or_else(|| {
            refuse(
                format!(
                    "pushes leave this container only from the project's repository (its .git/config mounted \
                     read-only, or its session repository), and this push comes from {}",
                    cwd.display()
                ),
                "push from the project itself",
            )
        })?;
    // With a session repository (`home`), the user's configuration is root's to read
    // where only root reaches it.
    let top = match &project {
        Found::Mounted(project) => project.top.clone(),
        Found::Home(layout) => layout.top.clone(),
    };
    let git_dir = top.join(".git");
    let plain_dir = git_dir.symlink_metadata().is_ok_and(|meta| meta.is_dir());
    if !plain_dir || std::fs::canonicalize(&top).ok().as_deref() != Some(top.as_path()) {
        return Err(refuse(
            format!("{} is not the project's own git directory as mounted", git_dir.display()),
            "push from the project itself",
        ));
    }
    if request_repository(&cwd, &top, &git_dir, |dir| dir.join(".git").symlink_metadata().is_ok()).is_none() {
        return Err(refuse(
            format!("this push comes from {}, a repository nested in the project", cwd.display()),
            format!("push from the project ({}) itself", top.display()),
        ));
    }
    // The same redirections the host refuses (`redirect`), the files a user's setup may
    // hold included: root's reader runs as `agent-sandbox-check`, with no more rights
    // than the agent's, but a link among the refs would still have it read what that
    // user may (and a `commondir` what the agent put in the workspace).
    let found = match &project {
        Found::Mounted(_) => crate::redirect::redirections(&git_dir, true),
        Found::Home(layout) => {
            crate::home::session_redirections(&layout.session, Path::new(runtime_layout::CONTAINER_USER_OBJECTS))
        }
    };
    if !found.is_empty() {
        return Err(crate::redirect::refusal(&found));
    }

    let mirror_dir = state.join("mirror.git");
    let env = root_env();
    let mirror = Mirror {
        path: &mirror_dir,
        git: Path::new(runtime_layout::CONTAINER_REAL_GIT),
        env: &env,
        reader: mirror::reader(
            &format!("{SETPRIV} --reuid={uid} --regid={gid} --clear-groups --no-new-privs "),
            runtime_layout::CONTAINER_REAL_GIT,
            Some("/nonexistent"),
        ),
    };
    // Root's git reads the project's configuration only from root's own copy of it.
    let project_config = state.join("project-config");
    let config_bytes = match &project {
        Found::Mounted(project) => mounted_config(project)?,
        Found::Home(_) => {
            util::fs::read_regular_nofollow(&Path::new(runtime_layout::CONTAINER_HOME_GIT).join("config"), MAX_CONFIG)
                .map_err(|err| refuse(format!("your repository's config cannot be read: {err}"), "fix it on the host"))?
        }
    };
    write_root_file(&project_config, &config_bytes, 0o644)?;
    mirror.configure(&project_config).map_err(|failed| refuse(failed.to_string(), "push again"))?;
    let own_file = project_config.display().to_string();
    let relative = relative_includes(&mirror_git(&mirror, &["config", "--file", &own_file, "--list", "-z"])?);
    if let Some(path) = relative.first() {
        return Err(refuse(
            format!("the project's .git/config includes {path}, a relative path, which the verifier cannot follow"),
            "name that file by its absolute path (a file root owns or mounts read-only)",
        ));
    }
    // Every file the mirror's git reads its configuration from, before it runs.
    for file in mirror.other_config_files(&project_config).map_err(|failed| refuse(failed.to_string(), "push again"))? {
        util::fs::trusted_file(&file).map_err(|why| {
            refuse(
                format!(
                    "the repository's configuration reads {} ({why}), a file the agent may have written; root's git \
                     would do what it says",
                    file.display()
                ),
                "move that setting into .git/config or root's own git configuration",
            )
        })?;
    }
    mirror.fetch(&top, &git_dir).map_err(|failed| {
        refuse(format!("cannot read the project's commits: {failed}"), "fix what git says, then push again")
    })?;
    let remotes = lines(&mirror_git(&mirror, &["remote"])?);
    let facts = PushFacts {
        project_root: top.clone(),
        common_dir: git_dir.clone(),
        request_dir: cwd,
        request_common_dir: Some(git_dir.clone()),
        remotes: remotes.clone(),
        allow_branch_deletion: config.git_allow_branch_deletion.value,
        changed_since_start: Vec::new(),
        hooks_dir: state.join("hooks"),
    };
    let command = plan(&request.args, &facts)?;
    for remote in command.remote.iter().cloned().map(|remote| vec![remote]).next().unwrap_or(remotes) {
        for url in lines(&mirror_git(&mirror, &["remote", "get-url", "--push", "--all", "--", &remote])?) {
            check_remote(&remote, &url, &top)?;
        }
    }

    let (settings_file, work) =
        prepare_checks(state, (uid, gid), &config, &mirror, &project_config, &top, self_exe, None)?;

    for note in &command.notes {
        eprintln!("{note}");
    }
    let status = Command::new(runtime_layout::CONTAINER_REAL_GIT)
        .arg("--git-dir")
        .arg(&mirror_dir)
        .args(&command.argv)
        .current_dir(&mirror_dir)
        .env_clear()
        .envs(env.iter().map(|(name, value)| (name, value)))
        .env(SETTINGS_VAR, &settings_file)
        .stdin(Stdio::null())
        .status();
    util::users::kill_all(uid, Duration::from_secs(10));
    let _ = remove(&work);
    let status =
        status.map_err(|err| refuse(format!("cannot run git: {err}"), "rebuild the image with the Feature"))?;
    Ok(status.code().unwrap_or(1))
}

/// The request line from `input`, which must come within `limit` (the agent may hold
/// sudo's stdin open and send nothing).
fn read_request(input: impl Read + AsRawFd, limit: Duration) -> Result<Request, Refusal> {
    let deadline = Instant::now() + limit;
    let fd = input.as_raw_fd();
    let mut line = Vec::new();
    let mut input = input;
    let mut buf = [0u8; 4096];
    let unreadable = |why: String| refuse(format!("unreadable request: {why}"), "push with `git push`");
    while !line.contains(&b'\n') {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut poll = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        let millis = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd for the duration of the call.
        if millis == 0 || unsafe { libc::poll(&mut poll, 1, millis) } <= 0 {
            return Err(unreadable("none came in time".into()));
        }
        match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => line.extend_from_slice(&buf[..n]),
            Err(err) => return Err(unreadable(err.to_string())),
        }
        if line.len() as u64 > MAX_REQUEST {
            return Err(unreadable("too long".into()));
        }
    }
    Request::read(&line[..]).map_err(|err| unreadable(err.to_string()))
}

/// Refuses a push URL through which root's push would run what the agent wrote.
fn check_remote(remote: &str, url: &str, top: &Path) -> Result<(), Refusal> {
    match remote_kind(url, top) {
        Remote::Network => Ok(()),
        Remote::Helper => Err(refuse(
            format!("{remote}'s URL {url} names a remote helper, which runs commands"),
            "push to an ssh or https remote",
        )),
        Remote::Local(path) => {
            for part in [path.clone(), path.join("config"), path.join("hooks")] {
                if part.symlink_metadata().is_err() && part != path {
                    continue;
                }
                util::fs::root_only(&part).map_err(|why| {
                    refuse(
                        format!(
                            "{remote} is the directory {} ({}: {why}): root's push would run that repository's \
                             hooks, which others can change",
                            path.display(),
                            part.display()
                        ),
                        "push to an ssh or https remote, or make that repository root's alone",
                    )
                })?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projects_are_the_work_trees_with_a_read_only_git_config_mount() {
        let mountinfo = "\
22 1 0:21 / / rw,relatime - overlay overlay rw
30 22 8:1 /home/u/p /workspace rw,relatime - ext4 /dev/sda1 rw
31 30 8:1 /home/u/p/.git/config /workspace/.git/config ro,relatime - ext4 /dev/sda1 rw
32 30 8:1 /home/u/p/.git/hooks /workspace/.git/hooks ro,relatime - ext4 /dev/sda1 rw
33 22 8:1 /home/u/q/.git/config /srv/q/.git/config rw,relatime - ext4 /dev/sda1 rw
34 22 8:1 /x /srv/with\\040blank/.git/config ro,relatime - ext4 /dev/sda1 rw
35 22 8:1 /y /srv/over/.git/config ro,relatime - ext4 /dev/sda1 rw
36 22 8:1 /z /srv/over/.git/config rw,relatime - ext4 /dev/sda1 rw
37 22 8:1 /c /etc/config ro,relatime - ext4 /dev/sda1 rw";
        let project = |top: &str, config_mount| Project { top: top.into(), config_mount };
        assert_eq!(projects(mountinfo), [project("/workspace", 31), project("/srv/with blank", 34)]);
    }

    /// The configuration is read only through a descriptor on the mount the project
    /// was found by: a file at the same path on another mount (the agent's, after it
    /// moved `.git` away) is refused, as is anything but a regular file.
    #[test]
    fn the_config_is_read_only_from_its_own_mount() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join(".git")).expect("mkdir");
        let config = dir.path().join(".git/config");
        std::fs::write(&config, "[core]\n\tbare = false\n").expect("write");
        let here = util::mounts::mount_of(&std::fs::File::open(&config).expect("open")).expect("mnt_id");
        let project = |config_mount| Project { top: dir.path().to_path_buf(), config_mount };
        assert_eq!(mounted_config(&project(here)).expect("read"), b"[core]\n\tbare = false\n");
        let other = mounted_config(&project(here + 1)).expect_err("another mount");
        assert!(other.why.contains("another file is at that path"), "{}", other.why);
        std::fs::remove_file(&config).expect("rm");
        std::os::unix::fs::symlink("/etc/passwd", &config).expect("link");
        assert!(mounted_config(&project(here)).is_err(), "a link is not followed");
        std::fs::remove_file(&config).expect("rm");
        let made = Command::new("mkfifo").arg(&config).status().expect("mkfifo");
        assert!(made.success());
        let fifo = mounted_config(&project(here)).expect_err("a FIFO is refused without blocking");
        assert!(fifo.why.contains("not a regular file"), "{}", fifo.why);
    }

    #[test]
    fn relative_includes_are_found_absolute_ones_kept() {
        let listing = b"core.bare\nfalse\0include.path\n/etc/git/shared\0include.path\n../team.gitconfig\0\
                        includeif.gitdir:/w/.path\nlocal.inc\0includeif.onbranch:main.path\n~/x\0user.path\nrel\0";
        assert_eq!(relative_includes(listing), ["../team.gitconfig", "local.inc"]);
    }

    #[test]
    fn remote_urls_are_told_apart_as_git_reads_them() {
        let top = Path::new("/workspace");
        for url in ["git@github.com:o/r.git", "ssh://h/r", "https://h/r", "host:r", "git://h/r"] {
            assert_eq!(remote_kind(url, top), Remote::Network, "{url}");
        }
        assert_eq!(remote_kind("ext::sh -c x", top), Remote::Helper);
        assert_eq!(remote_kind("fd::3", top), Remote::Helper);
        assert_eq!(remote_kind("/srv/r.git", top), Remote::Local("/srv/r.git".into()));
        assert_eq!(remote_kind("../r.git", top), Remote::Local("/r.git".into()));
        assert_eq!(remote_kind("./a:b", top), Remote::Local("/workspace/a:b".into()));
        assert_eq!(remote_kind("file:///srv/r", top), Remote::Local("/srv/r".into()));
        assert_eq!(remote_kind("file://localhost/srv/r", top), Remote::Local("/srv/r".into()));
    }

    #[test]
    fn the_request_must_come_in_time_and_whole() {
        let (mut writer, reader) = std::os::unix::net::UnixStream::pair().expect("pair");
        let request = Request { cwd: "/w".into(), args: vec!["origin".into()], home: false };
        std::io::Write::write_all(&mut writer, &request.to_line()).expect("write");
        assert_eq!(read_request(reader, Duration::from_secs(5)).expect("read"), request);
        let (_silent, reader) = std::os::unix::net::UnixStream::pair().expect("pair");
        let started = Instant::now();
        let refusal = read_request(reader, Duration::from_millis(200)).expect_err("no request");
        assert!(refusal.why.contains("none came in time"), "{}", refusal.why);
        assert!(started.elapsed() < Duration::from_secs(5));
        let (mut writer, reader) = std::os::unix::net::UnixStream::pair().expect("pair");
        std::io::Write::write_all(&mut writer, b"{\"cwd\":1}\n").expect("write");
        assert!(read_request(reader, Duration::from_secs(5)).is_err());
    }
}
