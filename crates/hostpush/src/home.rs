//! A container's session repository, and the broker that brings its commits home.
//!
//! In a container made by `devcontainer init` or the Docker sandbox (bind mode), the
//! project's `.git` inside is not the user's: it is a volume of the container's own, the
//! session repository, and the agent writes nothing the host's git reads. The user's
//! `.git` is mounted twice: its objects read-only at [`CONTAINER_USER_OBJECTS`] (the
//! session repository's alternate, so creating it costs O(refs)), and the whole of it
//! read-write at [`CONTAINER_HOME_GIT`], inside root's directory (0700), for root alone.
//!
//! - `git-home start` (root, the Feature's entrypoint at every start): takes the user's
//!   refs as the session's start, and seeds a new (empty) session volume as the agent's
//!   user ([`seed`]): refs, `HEAD` and the index copied from the user's, a configuration
//!   with the user's safe keys, the user's hooks. Root never writes in the volume.
//! - `git-home sync` (root, through the image's sudo rule, no arguments; the git guard
//!   runs it after each git command that may move a ref): reads the session's refs and
//!   new objects into root's mirror, exactly as the push verifier does (an
//!   `upload-pack` as `agent-sandbox-check`, index-pack hashing every object), decides
//!   per ref ([`decide`], pure), sends the accepted tips into the user's repository
//!   through a push whose pre-push hook is the hook guard (protected paths and
//!   `checks.commands` on every new commit, as `agent-sandbox-check`), and only then
//!   moves the user's refs, each only from the value it had (`update-ref --stdin`).
//!
//! What reaches the user's refs: fast-forwards, new branches and tags, and rewrites of
//! commits this session brought home; never a rewrite or deletion of anything else. A
//! ref the user moved meanwhile, or a rewrite of the user's history, is left as it is
//! and the session's tip waits under [`WAITING`].

use std::{
    collections::{BTreeMap, BTreeSet},
    ffi::OsString,
    io::{Read, Write},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Mutex,
    time::Duration,
};

use runtime_layout::{
    CONTAINER_BROKER_DIR, CONTAINER_BROKER_TOLD, CONTAINER_HOME_GIT, CONTAINER_REAL_GIT, CONTAINER_REPO_SHELF,
    CONTAINER_USER_GIT, CONTAINER_USER_OBJECTS,
};
use serde::{Deserialize, Serialize};

use session_repo::sync::{self, Base, Checkouts, Decision, Head};

use crate::{
    checks::{self, CHECK_USER},
    mirror::{self, Mirror},
    plan::{refuse, Refusal},
};

mod bring;
pub(crate) use bring::{
    bring, bring_stashes, new_stashes, other_checkout_paths, other_checkouts, read_head, short, Checkout, MirrorHistory,
};

/// The broker's working directory: root's, readable by the checks' user.
pub const STATE_DIR: &str = CONTAINER_BROKER_DIR;
/// What the git guard writes on a sync's stdin when it starts one in the background
/// (the sudo rule allows no arguments): a sync already waiting will bring that
/// command's work too, so this one need not wait.
pub const LATER: &[u8] = b"later\n";
/// The told lines kept (the oldest go first).
const TOLD_KEPT: usize = 200;
/// Where a session tip that could not come home waits, in the user's repository.
pub const WAITING: &str = "refs/agent-sandbox/waiting/";
/// Marks the lines about tips the checks refused.
pub(crate) const REFUSED: &str = "did not come home: its checks refused it";
/// Where a tip whose checks failed is kept in the user's repository, for `agent-sandbox
/// git adopt` (its objects hashed in like any other; no branch of the user's names it).
pub const REFUSED_REFS: &str = "refs/agent-sandbox/refused/";
/// Beside it, in the user's `.git`: what the checks said, one file per ref.
pub const REFUSED_DIR: &str = "agent-sandbox/refused";
/// Set in the environment of the push that brings the session's commits into the user's
/// repository, for its pre-push hook guard: not a publication (no remote receives it).
pub const BRINGING_HOME: &str = "AGENT_SANDBOX_BRINGING_HOME";
/// Where accepted tips land before the refs move (removed again).
pub const INCOMING: &str = "refs/agent-sandbox/incoming/";
const SETPRIV: &str = "/usr/bin/setpriv";
const IMAGE_BINARY: &str = "/usr/local/bin/agent-sandbox";
const MAX_FILE: u64 = 1 << 20;

pub use session_repo::Refs;

/// Where the session repository and the work tree are, from the mounts alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub top: PathBuf,
    pub session: PathBuf,
    /// The work tree is the user's own (bind mode, a dev container): the user's `HEAD`
    /// follows the session's and the index is rebuilt. In a branch sandbox the session
    /// is the shelf, whose worktrees are not the user's checkout.
    pub shared_tree: bool,
    /// Where the broker keeps this session's [`State`] ([`state_path`]).
    pub state: PathBuf,
}

/// The layout the mounts show. The user's work tree is the mount of the directory
/// whose `.git` is mounted at [`CONTAINER_HOME_GIT`] (same device, its parent as root).
/// With a mount of its own at `.git` (the session volume), that is the session; read-only
/// beside the repo shelf, the session is the shelf's clone (branch mode). `None`: no
/// session repository in this container.
pub fn layout(mounts: &[util::mounts::Mount]) -> Option<Layout> {
    let home = mounts.iter().find(|mount| mount.point == Path::new(CONTAINER_HOME_GIT))?;
    let tree = home.root.parent()?;
    let trees: Vec<&util::mounts::Mount> = mounts
        .iter()
        .filter(|mount| mount.device == home.device && mount.root == tree && mount.id != home.id)
        .collect();
    let bind = trees.iter().find(|mount| {
        let git = mount.point.join(".git");
        mounts.iter().any(|other| other.point == git && other.id != home.id)
    });
    if let Some(mount) = bind {
        let session = mount.point.join(".git");
        let state = state_path(mounts, &session);
        return Some(Layout { top: mount.point.clone(), session, shared_tree: true, state });
    }
    let shelf = mounts.iter().any(|mount| mount.point == Path::new(CONTAINER_REPO_SHELF));
    (shelf && trees.iter().any(|mount| mount.read_only)).then(|| {
        let top = Path::new(CONTAINER_REPO_SHELF).join("repo");
        let session = top.join(".git");
        Layout { state: state_path(mounts, &session), session, top, shared_tree: false }
    })
}

/// In the user's `.git`, the directory of the container brokers' [`State`]s.
pub const CONTAINER_STATES: &str = "agent-sandbox/containers";

/// Where a container's broker keeps its [`State`]: in the user's `.git`, which the agent
/// never reaches. It outlives the container (a rebuild keeps the base, so a branch the
/// user deleted stays deleted) and goes with the repository (a re-clone at the same path
/// has none, so a session kept there is known to be another repository's). One per
/// session repository, named by where that comes from (its volume, as the mounts say).
fn state_path(mounts: &[util::mounts::Mount], session: &Path) -> PathBuf {
    let from = mounts
        .iter()
        .filter(|mount| session.starts_with(&mount.point))
        .max_by_key(|mount| mount.point.as_os_str().len());
    let source = match from {
        Some(mount) => match session.strip_prefix(&mount.point) {
            Ok(rest) if !rest.as_os_str().is_empty() => mount.root.join(rest),
            _ => mount.root.clone(),
        },
        None => session.to_path_buf(),
    };
    let key = util::fnv1a(source.as_os_str().as_encoded_bytes());
    Path::new(CONTAINER_HOME_GIT).join(CONTAINER_STATES).join(format!("{key:016x}.json"))
}

/// What the broker keeps between runs: in a container in the user's `.git`
/// ([`state_path`]); for `exec` beside the session repository, which no sandbox shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// What the user's repository and the session last agreed on.
    #[serde(default)]
    pub base: Base,
    /// Every commit this session brought home.
    #[serde(default)]
    pub brought: BTreeSet<String>,
    /// Tips whose checks failed, with what the checks said: not checked again.
    #[serde(default)]
    pub failed: BTreeMap<String, String>,
    /// The session's stash entries already in the user's stash.
    #[serde(default)]
    pub stashed: BTreeSet<String>,
}

impl State {
    /// A new session's: both sides agree on the user's refs and `HEAD`.
    pub fn agreed(user: &Refs, head: Option<Head>) -> State {
        let refs = user.iter().filter(|(name, _)| sync::synced(name)).map(|(n, v)| (n.clone(), v.clone())).collect();
        State { base: Base { refs, head, created: BTreeSet::new() }, ..State::default() }
    }
}

/// `agent-sandbox git-home start`: the exit status. Its failure is also kept in
/// [`START_FAILED`], for `agent-sandbox check` (the shell's banner) to say loudly.
pub fn start() -> i32 {
    let result = run_start();
    if as_root().is_ok() {
        let marker = Path::new(START_FAILED);
        match &result {
            Ok(_) => {
                let _ = std::fs::remove_file(marker);
            }
            Err(refusal) => {
                let text = refusal.inline();
                let _ = checks::make_root_dir(Path::new(STATE_DIR), 0o755)
                    .and_then(|()| checks::write_root_file(marker, text.as_bytes(), 0o644));
            }
        }
    }
    report(result, "the session repository was not made")
}

/// Why the last `git-home start` failed (absent when it did not).
pub const START_FAILED: &str = "/var/lib/agent-sandbox/broker/start-failed";

/// What [`START_FAILED`] says, for the shell's banner: `None` when the session
/// repository was made (or this container has none).
pub fn start_failure() -> Option<String> {
    let bytes = util::fs::read_regular_nofollow(Path::new(START_FAILED), 4096).ok()?;
    Some(format!(
        "git has no repository here: the session repository could not be made at the container's start: {} (the \
         log: /var/log/agent-sandbox-home.log)",
        util::terminal_safe(String::from_utf8_lossy(&bytes).trim())
    ))
}

/// `agent-sandbox git-home sync`: the exit status. Started by the git guard in the
/// background ([`LATER`] on stdin), it does not wait behind a sync that is already
/// waiting; run by hand (or by `stop`), it waits for the syncs before it, then runs.
pub fn sync(config: Result<config::Config, String>) -> i32 {
    let later = stdin_says_later();
    let result = config
        .map_err(|err| refuse(format!("the configuration cannot be read: {err}"), "fix it"))
        .and_then(|config| run_sync(config, later));
    if as_root().is_ok() {
        let lines = match &result {
            Ok(lines) => lines.clone(),
            Err(refusal) => vec![format!("nothing came home: {}", refusal.inline())],
        };
        record_told(&lines);
    }
    report(result, "nothing came home")
}

/// Whether stdin is a pipe that already holds [`LATER`] (never waits: a terminal or an
/// empty pipe is a sync run by hand).
fn stdin_says_later() -> bool {
    // SAFETY: fstat into a zeroed stat of our own; poll on one valid pollfd.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::fstat(0, &mut stat) != 0 || stat.st_mode & libc::S_IFMT != libc::S_IFIFO {
            return false;
        }
        let mut poll = libc::pollfd { fd: 0, events: libc::POLLIN, revents: 0 };
        if libc::poll(&mut poll, 1, 0) != 1 || poll.revents & libc::POLLIN == 0 {
            return false;
        }
    }
    // Non-blocking: the agent holds the pipe's other end too, and may empty it first.
    // SAFETY: fcntl on our own stdin.
    unsafe {
        let flags = libc::fcntl(0, libc::F_GETFL);
        if flags < 0 || libc::fcntl(0, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return false;
        }
    }
    let mut buf = [0u8; 16];
    let read = std::io::stdin().lock().read(&mut buf).unwrap_or(0);
    &buf[..read] == LATER
}

/// One line the broker told, as [`CONTAINER_BROKER_TOLD`] keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Told {
    pub seq: u64,
    pub text: String,
}

/// Parses the told file (lines that do not parse are left out).
pub fn parse_told(bytes: &[u8]) -> Vec<Told> {
    String::from_utf8_lossy(bytes).lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
}

/// Appends `lines` to the told file, numbered on from the last, keeping the newest
/// [`TOLD_KEPT`]. Best effort: the sync's result stands either way.
fn record_told(lines: &[String]) {
    if lines.is_empty() {
        return;
    }
    let Ok(Some(_lock)) = util::fs::lock(&Path::new(STATE_DIR).join("told.lock"), true) else { return };
    let path = Path::new(CONTAINER_BROKER_TOLD);
    let _ = checks::write_root_file(path, told_after(path, lines).as_bytes(), 0o644);
}

/// The told file at `path` with `lines` appended, numbered on from its last. A line
/// already told is not told again: every sync judges the same waiting tip the same way,
/// and the agent hears it once (its commit names are in it, so a new situation reads anew).
pub(crate) fn told_after(path: &Path, lines: &[String]) -> String {
    let mut told = util::fs::read_regular_nofollow(path, 4 << 20).map(|bytes| parse_told(&bytes)).unwrap_or_default();
    let last = told.last().map_or(0, |last| last.seq);
    let mut new: Vec<&String> = Vec::new();
    for line in lines {
        if !told.iter().any(|told| &told.text == line) && !new.contains(&line) {
            new.push(line);
        }
    }
    told.extend((last + 1..).zip(new).map(|(seq, text)| Told { seq, text: text.clone() }));
    let skip = told.len().saturating_sub(TOLD_KEPT);
    told[skip..].iter().map(|told| format!("{}\n", serde_json::to_string(told).expect("a line serializes"))).collect()
}

/// Prints the lines, or the refusal after `failed` ("nothing came home"); the status.
fn report(result: Result<Vec<String>, Refusal>, failed: &str) -> i32 {
    match result {
        Ok(lines) => {
            for line in &lines {
                eprintln!("agent-sandbox: {}", util::terminal_safe(line));
            }
            // A line about a refusal makes the status 1 (scripts can tell).
            i32::from(lines.iter().any(|line| line.contains(REFUSED)))
        }
        Err(refusal) => {
            eprintln!("{}", refusal.said(failed));
            1
        }
    }
}

fn as_root() -> Result<(), Refusal> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || runtime_layout::detect() != runtime_layout::Where::Container {
        return Err(refuse(
            "git-home is a container's broker, which root runs through the image's sudo rule",
            "commit as usual: the git guard brings your commits home",
        ));
    }
    Ok(())
}

/// The user's repository as a broker works in it, and the checks its pushes pass: in a
/// container root's ([`Home::container`]), for `exec` the host's (`home::exec`).
pub struct Home {
    /// The git that works in the user's repository.
    pub git: PathBuf,
    /// The user's `.git` (the common directory).
    pub user_git: PathBuf,
    /// The user's git directory of the work tree the session stands for (its `HEAD`
    /// and index): `user_git`, or a linked worktree's record in it.
    pub git_dir: PathBuf,
    /// Where the session repository sees the user's `.git` (its alternates lead there).
    pub user_git_inside: PathBuf,
    /// git's environment: none of the agent's.
    pub env: Vec<(OsString, OsString)>,
    /// The directory of the pre-push hook that runs the checks, and its settings.
    pub hooks: PathBuf,
    pub settings: PathBuf,
    /// The hook guard's git's global configuration (`GIT_CONFIG_GLOBAL`), when its own.
    pub global: Option<PathBuf>,
    /// Where the checks' hook starts (it finds the project's dependency directories
    /// there): the work tree on the host; `None` in a container, whose checks' settings
    /// name the project themselves.
    pub work_tree: Option<PathBuf>,
}

impl Home {
    /// Root's, in a container.
    fn container() -> Home {
        let state = Path::new(STATE_DIR);
        Home {
            git: PathBuf::from(CONTAINER_REAL_GIT),
            user_git: PathBuf::from(CONTAINER_HOME_GIT),
            git_dir: PathBuf::from(CONTAINER_HOME_GIT),
            user_git_inside: PathBuf::from(CONTAINER_USER_GIT),
            env: checks::root_env(),
            hooks: state.join("hooks"),
            settings: state.join("settings.json"),
            global: Some(state.join("gitconfig")),
            work_tree: None,
        }
    }

    /// git in the user's repository: nothing of the agent's environment, none of the
    /// repository's hooks or fsmonitor.
    pub(crate) fn git(&self, args: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>, Refusal> {
        run_git(self.command(args), &format!("`git {}` in your repository", args.join(" ")), input)
    }

    /// [`Home::git`] with `index` as the index (`GIT_INDEX_FILE`).
    pub(crate) fn git_with_index(&self, args: &[&str], index: &Path) -> Result<Vec<u8>, Refusal> {
        let mut command = self.command(args);
        command.env("GIT_INDEX_FILE", index);
        run_git(command, &format!("`git {}` in your repository", args.join(" ")), None)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.git);
        command
            .args([
                "-c",
                "safe.directory=*",
                "-c",
                "core.fsmonitor=false",
                "-c",
                "core.hooksPath=/dev/null",
                "--git-dir",
            ])
            .arg(&self.git_dir)
            .args(args)
            .current_dir(&self.user_git)
            .env_clear()
            .envs(self.env.iter().map(|(name, value)| (name, value)));
        command
    }

    /// The receive-pack of a push into the user's repository: none of its hooks.
    pub(crate) fn receive_pack(&self) -> String {
        format!(
            "{} -c core.hooksPath=/dev/null -c 'safe.directory=*'",
            util::single_quoted(&self.git.display().to_string())
        )
    }
}

/// Runs a git `command` (`what` names it in a failure), with `input` on its stdin; its
/// stdout.
fn run_git(mut command: Command, what: &str, input: Option<&[u8]>) -> Result<Vec<u8>, Refusal> {
    command
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let failed = |why: String| refuse(format!("{what} failed: {why}"), "try again");
    let mut child = command.spawn().map_err(|err| failed(err.to_string()))?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(input).map_err(|err| failed(err.to_string()))?;
    }
    let out = child.wait_with_output().map_err(|err| failed(err.to_string()))?;
    if !out.status.success() {
        return Err(failed(String::from_utf8_lossy(&out.stderr).trim().to_owned()));
    }
    Ok(out.stdout)
}

pub(crate) fn parse_refs(listing: &[u8]) -> Refs {
    String::from_utf8_lossy(listing)
        .lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(sha, name)| (name.to_owned(), sha.to_owned()))
        .collect()
}

const FOR_EACH: &[&str] = &["for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/", "refs/tags/"];

pub(crate) fn user_refs(home: &Home) -> Result<Refs, Refusal> {
    Ok(parse_refs(&home.git(FOR_EACH, None)?))
}

fn the_layout() -> Result<Option<Layout>, Refusal> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|err| refuse(format!("cannot read the mounts: {err}"), "try again"))?;
    Ok(layout(&util::mounts::parse(&mountinfo)))
}

/// The user's `.git` must lead nowhere else before a broker's git works in it.
pub(crate) fn check_home(home: &Home) -> Result<(), Refusal> {
    let found = crate::redirect::redirections(&home.user_git, true);
    if found.is_empty() {
        return Ok(());
    }
    // Said in the words of the mode that runs: `exec` has the work tree on the host.
    let (broker, instead) = match home.work_tree {
        Some(_) => ("agent-sandbox does not bring commits into it", "remove those entries, then start `exec` again"),
        None => (
            "the container's broker does not work in it",
            "remove those entries on the host, then restart the container",
        ),
    };
    Err(refuse(format!("your repository's .git leads elsewhere, so {broker}: {}", found.join("; ")), instead))
}

/// [`crate::redirect::redirections`] of a session repository, whose one alternate is
/// the user's object store as [`seed`] wrote it (objects the checks may read: the
/// user's own).
pub fn session_redirections(session: &Path, objects: &Path) -> Vec<String> {
    let alternates = session.join("objects/info/alternates");
    let expected = format!("{}\n", objects.display());
    let ours = util::fs::read_regular_nofollow(&alternates, 4096).is_ok_and(|bytes| bytes == expected.as_bytes());
    crate::redirect::redirections(session, true)
        .into_iter()
        .filter(|found| !(ours && found.starts_with(".git/objects/info/alternates:")))
        .collect()
}

/// The broker's state kept at `path`: `None` when there is none (or it does not parse).
fn read_state(path: &Path) -> Option<State> {
    let bytes = util::fs::read_regular_nofollow(path, 64 << 20).ok()?;
    serde_json::from_slice(&bytes).ok()
}

pub(crate) fn write_state(path: &Path, state: &State) -> Result<(), Refusal> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|err| refuse(format!("cannot make {}: {err}", dir.display()), "check that .git is writable"))?;
    }
    let bytes = serde_json::to_vec(state).expect("a state serializes");
    checks::write_root_file(path, &bytes, 0o600)
}

/// Holds the lock of the session's state (beside it in the user's `.git`) while it
/// lives: the branch sandboxes of one repository share their shelf, so their brokers,
/// each in its own container, take turns on its one base.
fn lock_state(layout: &Layout) -> Result<std::fs::File, Refusal> {
    let path = layout.state.with_extension("lock");
    let failed = |err: std::io::Error| refuse(format!("cannot lock {}: {err}", path.display()), "try again");
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    util::fs::lock(&path, true).map_err(failed)?.ok_or_else(|| failed(std::io::ErrorKind::WouldBlock.into()))
}

/// Where `git-home start` records the container start it ran at ([`util::boot_id`]): a
/// second start in the same run of the container (the agent may run it through sudo) is
/// a no-op, and the entrypoint, given PID 1, knows the guard rails are up.
pub const STARTED: &str = "/var/lib/agent-sandbox/broker/started";

fn run_start() -> Result<Vec<String>, Refusal> {
    as_root()?;
    beyond_the_agents_signals();
    checks::make_root_dir(Path::new(STATE_DIR), 0o755)?;
    let _lock = util::fs::lock(&Path::new(STATE_DIR).join("lock"), true)
        .map_err(|err| refuse(format!("cannot lock {STATE_DIR}: {err}"), "restart the container"))?;
    let boot = util::boot_id();
    let started = util::fs::read_regular_nofollow(Path::new(STARTED), 256).unwrap_or_default();
    if String::from_utf8_lossy(&started).trim() == boot {
        return Ok(vec!["the session repository was made at this container's start: nothing to do".into()]);
    }
    checks::write_root_file(Path::new(STARTED), format!("{boot}\n").as_bytes(), 0o644)?;
    let Some(layout) = the_layout()? else { return Ok(Vec::new()) };
    // A sync that root ended before it could hand its files back left them root's.
    own_home_files();
    let _state = lock_state(&layout)?;
    let home = Home::container();
    check_home(&home)?;
    // One listing of every ref: the branches and tags are the session's start, all of
    // them its `packed-refs` when it is new.
    let all = parse_refs(&home.git(&["for-each-ref", "--format=%(objectname) %(refname)"], None)?);
    let refs: Refs = all
        .iter()
        .filter(|(name, _)| name.starts_with("refs/heads/") || name.starts_with("refs/tags/"))
        .map(|(name, sha)| (name.clone(), sha.clone()))
        .collect();
    let session = &layout.session;
    let meta = session.symlink_metadata().map_err(|err| {
        refuse(format!("{}: {err}", session.display()), "restart the container (the session volume is missing)")
    })?;
    let empty = std::fs::read_dir(session).map(|mut entries| entries.next().is_none()).unwrap_or(false);
    let fresh = meta.is_dir() && meta.uid() == 0 && empty;
    let mut said = Vec::new();
    if !fresh {
        let kept = match read_state(&layout.state) {
            // The shelf of branch sandboxes is provisioned as a clone of the user's
            // repository, not seeded here: at its first start there is no record yet.
            None if !layout.shared_tree => Some(State::default()),
            kept => kept,
        };
        match kept {
            Some(state) => {
                let said = refresh(&home, &layout, (meta.uid(), meta.gid()), &refs, state)?;
                own_home_files();
                return Ok(said);
            }
            // Kept in the volume, but not from this repository (a re-clone at the same
            // path) or from before the broker kept its state with the repository.
            None => said.push(put_aside_in_volume(&layout, (meta.uid(), meta.gid()))?),
        }
    }
    let (uid, gid) = agent_user(&layout.top)?;
    std::os::unix::fs::chown(session, Some(uid), Some(gid))
        .map_err(|err| refuse(format!("cannot hand {} to the agent's user: {err}", session.display()), "restart"))?;
    let plan = seed_plan(&home, &all)?;
    as_agent(&layout, (uid, gid), &plan)?;
    write_state(&layout.state, &State::agreed(&refs, read_head(&home.git_dir)))?;
    own_home_files();
    said.push(format!("the session repository {} starts from your repository's refs", session.display()));
    Ok(said)
}

/// The prefix of a session put aside inside its own volume (the volume is the session's
/// `.git` and cannot be renamed from inside).
pub const ASIDE_IN_VOLUME: &str = "agent-sandbox-aside-";

/// Moves everything in the session directory into `agent-sandbox-aside-<stamp>` inside
/// it (as the volume's owner sees it: renames only, nothing followed); what to tell.
fn put_aside_in_volume(layout: &Layout, (uid, gid): (u32, u32)) -> Result<String, Refusal> {
    let session = &layout.session;
    let kept = list_session_refs(session).unwrap_or_default();
    let stashes = sessions::stash_entries(session);
    let aside = sessions::unused_name(session, ASIDE_IN_VOLUME);
    let failed = |err: std::io::Error| {
        refuse(
            format!("cannot put the kept session repository aside in {}: {err}", aside.display()),
            "remove the session volume (docker volume rm) and restart the container",
        )
    };
    std::fs::create_dir(&aside).map_err(failed)?;
    let entries: Vec<_> =
        std::fs::read_dir(session).map_err(failed)?.flatten().map(|entry| entry.file_name()).collect();
    for entry in entries {
        let keep = entry.to_str().is_some_and(|entry| entry.starts_with(ASIDE_IN_VOLUME));
        if !keep {
            std::fs::rename(session.join(&entry), aside.join(&entry)).map_err(failed)?;
        }
    }
    std::os::unix::fs::lchown(&aside, Some(uid), Some(gid)).map_err(failed)?;
    let mut told = format!(
        "the session repository kept in {} was not made from this repository (a new clone at the same path?), so \
         a new one starts: the old one is kept as {}",
        session.display(),
        aside.display()
    );
    let branches: Vec<&str> = kept.keys().map(|name| short(name)).collect();
    if !branches.is_empty() {
        told.push_str(&format!("; its branches and tags: {}", branches.join(", ")));
    }
    if !stashes.is_empty() {
        told.push_str(&format!("; {} stash entries (git --git-dir={} stash list)", stashes.len(), aside.display()));
    }
    told.push_str(&format!("; when nothing in it is needed: rm -rf {}", aside.display()));
    Ok(told)
}

/// A session kept from earlier takes what the user did since the last sync ([`start_plan`]).
/// Without this the work tree (shared, so already the user's) would show the user's
/// commits as changes inside.
fn refresh(
    home: &Home,
    layout: &Layout,
    owner: (u32, u32),
    user: &Refs,
    mut state: State,
) -> Result<Vec<String>, Refusal> {
    let kept = format!("the session repository {} is kept from earlier", layout.session.display());
    let Some(session) = list_session_refs(&layout.session) else { return Ok(vec![kept]) };
    if owner.0 == 0 {
        return Ok(vec![kept]);
    }
    let Some(mut start) = start_plan(home, &layout.session, (user, &session), &state) else { return Ok(vec![kept]) };
    // The session now on the user's `HEAD` takes the user's index too (the work tree is
    // the user's), as `exec`'s start does.
    if start.plan.refresh.as_ref().is_some_and(|refresh| refresh.head.is_some()) {
        start.plan.index = util::fs::read_regular_nofollow(&home.git_dir.join("index"), 1 << 30).ok();
    }
    as_agent(layout, owner, &start.plan)?;
    start.settle(&mut state);
    write_state(&layout.state, &state)?;
    Ok(vec![format!("{kept}; {}", start.said())])
}

/// What a kept session takes at a start, and how the base then stands.
pub(crate) struct StartPlan {
    pub plan: SeedPlan,
    decisions: Vec<Decision>,
    head: Option<Head>,
}

impl StartPlan {
    /// The base once the session took the plan.
    pub(crate) fn settle(&self, state: &mut State) {
        for decision in &self.decisions {
            state.base.settle(decision);
        }
        if let Some(head) = &self.head {
            state.base.head = Some(head.clone());
        }
    }

    pub(crate) fn said(&self) -> String {
        let moved = self.plan.refresh.as_ref().map_or(0, |refresh| refresh.updates.len());
        let head = match self.head.as_ref().and_then(Head::branch) {
            Some(branch) if self.plan.refresh.as_ref().is_some_and(|refresh| refresh.head.is_some()) => {
                format!(", and it is on {} as you are", short(branch))
            }
            _ => String::new(),
        };
        format!("{moved} of its branches and tags take what you did since{head}")
    }
}

/// The user's repository's commits, for a decision made before the session's are read:
/// what it cannot see counts as no ancestor and nothing of the session's own, so such a
/// decision never carries anything (it waits for the first sync).
struct UserHistory<'a> {
    home: &'a Home,
    brought: &'a BTreeSet<String>,
}

impl sync::History for UserHistory<'_> {
    fn is_ancestor(&self, old: &str, new: &str) -> bool {
        self.home.git(&["merge-base", "--is-ancestor", old, new], None).is_ok()
    }

    fn only_own(&self, old: &str, new: &str) -> bool {
        let range = format!("{new}..{old}");
        self.home
            .git(&["rev-list", &range], None)
            .is_ok_and(|out| String::from_utf8_lossy(&out).lines().all(|sha| self.brought.contains(sha)))
    }

    fn holds_dropped(&self, dropped: &str, kept: &str, tip: &str) -> bool {
        bring::holds_dropped(&|args: &[&str]| self.home.git(args, None).ok(), dropped, kept, tip)
    }
}

/// At a start, from the files alone: the user's moves since the last sync (a commit, a
/// reset, a deletion) and `HEAD` (a switch), for the session (at `dir`) to take.
/// Only what the user alone moved is taken; the rest is the first sync's. `None`:
/// nothing to take.
pub(crate) fn start_plan(home: &Home, dir: &Path, (user, session): (&Refs, &Refs), state: &State) -> Option<StartPlan> {
    let (user_head, session_head) = (read_head(&home.git_dir), read_head(dir));
    let checkout_paths = other_checkout_paths(home);
    let others: Vec<String> = checkout_paths.iter().map(|(branch, _)| branch.clone()).collect();
    let history = UserHistory { home, brought: &state.brought };
    // The user's `HEAD` first: the refs are decided for the branch the agent will be on.
    let carried_head = match (&user_head, &session_head) {
        (Some(user_head), Some(session_head)) => {
            match sync::decide_head(state.base.head.as_ref(), user_head, session_head, user, &others) {
                sync::HeadMove::Carry(head) => Some((session_head.clone(), head)),
                _ => None,
            }
        }
        _ => None,
    };
    let on = carried_head.as_ref().map(|(_, head)| head).or(session_head.as_ref()).and_then(Head::branch);
    let checkouts = Checkouts { user: user_head.as_ref().and_then(Head::branch), session: on, others: &others };
    let decisions: Vec<Decision> = session_repo::decide(&state.base, (user, session), &checkouts, &history)
        .into_iter()
        .filter(|decision| matches!(decision, Decision::Carry { .. } | Decision::Agree { .. }))
        .collect();
    let updates: Vec<RefUpdate> = decisions
        .iter()
        .filter_map(|decision| match decision {
            Decision::Carry { name, from, to, .. } => {
                Some(RefUpdate { name: name.clone(), old: from.clone(), new: to.clone() })
            }
            _ => None,
        })
        .collect();
    // The user's other checkouts, as stand-in worktree records (made again at each start
    // that writes the session anyway, and whenever there are any).
    let checkouts = Some(checkout_paths);
    if updates.is_empty() && carried_head.is_none() {
        let agreed = user_head.is_some() && user_head == session_head && state.base.head != user_head;
        let worktrees = checkouts.as_ref().is_some_and(|paths| !paths.is_empty());
        return (!decisions.is_empty() || agreed || worktrees).then(|| StartPlan {
            plan: SeedPlan { refresh: Some(Refresh::default()), checkouts, ..SeedPlan::for_home(home) },
            decisions,
            head: user_head.filter(|_| agreed),
        });
    }
    let index = match &carried_head {
        Some(_) => None,
        None => on
            .and_then(|branch| updates.iter().find(|update| update.name == branch))
            .and_then(|update| Some((update.old.clone()?, update.new.clone()?))),
    };
    let head = carried_head.as_ref().map(|(old, new)| (old.clone(), new.clone()));
    let head_after =
        carried_head.map(|(_, new)| new).or_else(|| user_head.filter(|user| Some(user) == session_head.as_ref()));
    Some(StartPlan {
        plan: SeedPlan { refresh: Some(Refresh { updates, index, head }), checkouts, ..SeedPlan::for_home(home) },
        decisions,
        head: head_after,
    })
}

/// One ref the session takes from the user's repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefUpdate {
    pub name: String,
    /// The session's value (`None`: the session has no such ref).
    pub old: Option<String>,
    /// The user's (`None`: deleted).
    pub new: Option<String>,
}

/// What a kept session takes: refs of the user's, the index's move when `HEAD`'s branch
/// is among them (old, new), and the user's `HEAD` (the session's as it was, the new).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refresh {
    pub updates: Vec<RefUpdate>,
    pub index: Option<(String, String)>,
    #[serde(default)]
    pub head: Option<(Head, Head)>,
}

/// The seed plan that has the session (`dir`) take `carries` mid-session (its `HEAD`'s
/// branch among them: its index moves with it, by a two-way merge); `None`: none.
pub(crate) fn carry_plan(home: &Home, dir: &Path, carries: &[(Decision, RefUpdate)]) -> Option<SeedPlan> {
    if carries.is_empty() {
        return None;
    }
    let updates: Vec<RefUpdate> = carries.iter().map(|(_, update)| update.clone()).collect();
    let head = read_head(dir);
    let index = head
        .as_ref()
        .and_then(Head::branch)
        .and_then(|branch| updates.iter().find(|update| update.name == branch))
        .and_then(|update| Some((update.old.clone()?, update.new.clone()?)));
    Some(SeedPlan { refresh: Some(Refresh { updates, index, head: None }), ..SeedPlan::for_home(home) })
}

/// Runs `git-home seed` in the session as the agent's user (`owner`), with `plan`.
fn as_agent(layout: &Layout, (uid, gid): (u32, u32), plan: &SeedPlan) -> Result<(), Refusal> {
    let mut command = Command::new(SETPRIV);
    command
        .args([format!("--reuid={uid}"), format!("--regid={gid}")])
        .args(["--clear-groups", "--no-new-privs", IMAGE_BINARY, "git-home", "seed"])
        .arg(&layout.session)
        .current_dir(&layout.top)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", "/nonexistent");
    run_seed(command, plan, "restart the container")
}

/// Runs `git-home seed` (`command`) with `plan` on its stdin. The child reads the
/// session's config (the agent's, when kept) and may be stopped by the agent: it is
/// waited for a bounded time, and the plan is written from another thread so that a
/// child that reads nothing cannot block this one either.
pub(crate) fn run_seed(mut command: Command, plan: &SeedPlan, instead: &str) -> Result<(), Refusal> {
    let mut child = command
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|err| refuse(format!("cannot seed the session repository: {err}"), instead))?;
    let input = serde_json::to_vec(plan).expect("a plan serializes");
    let stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(&input);
        }
    });
    let deadline = std::time::Instant::now() + SEED_TIMEOUT;
    let status = match util::wait_until(&mut child, deadline, Duration::from_millis(5)) {
        Ok(Some(status)) => status,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            let _ = writer.join();
            return Err(refuse(
                format!("seeding the session repository did not end within {} s (ended)", SEED_TIMEOUT.as_secs()),
                instead,
            ));
        }
        Err(err) => return Err(refuse(err.to_string(), instead)),
    };
    let _ = writer.join();
    if !status.success() {
        return Err(refuse("the session repository could not be seeded (see above)", instead));
    }
    Ok(())
}

/// How long root waits for `git-home seed` (the agent's user's process).
const SEED_TIMEOUT: Duration = Duration::from_secs(120);

/// The agent's user: the work tree's owner, else the Feature's first agent user.
fn agent_user(top: &Path) -> Result<(u32, u32), Refusal> {
    if let Ok(meta) = top.metadata() {
        if meta.uid() != 0 {
            return Ok((meta.uid(), meta.gid()));
        }
    }
    let users = std::fs::read_to_string("/etc/agent-sandbox/agent-users").unwrap_or_default();
    users
        .lines()
        .find_map(util::users::lookup)
        .ok_or_else(|| refuse("the image names no agent user (/etc/agent-sandbox/agent-users)", "rebuild the image"))
}

/// What [`seed`] writes, decided by root from the user's repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedPlan {
    /// `HEAD`'s content (`ref: refs/heads/main` or an object name).
    pub head: String,
    /// The `packed-refs` file: every branch and tag of the user's.
    pub packed_refs: String,
    /// The user's configuration entries that are safe to keep.
    pub config: Vec<(String, String)>,
    /// The user's hooks (regular files of `.git/hooks`, samples left out).
    pub hooks: Vec<(String, Vec<u8>)>,
    /// `info/exclude` and `info/attributes` (patterns only: nothing in them runs).
    pub info: Vec<(String, Vec<u8>)>,
    /// The user's submodule repositories (`.git/modules/…`), each seeded the same way
    /// with the user's as its alternate (through [`CONTAINER_USER_GIT`]).
    #[serde(default)]
    pub modules: Vec<ModulePlan>,
    /// Set for a session kept from earlier: only these refs move ([`refresh`]).
    #[serde(default)]
    pub refresh: Option<Refresh>,
    /// The git that seeds it, and where the session sees the user's `.git` (its
    /// alternates lead there). A container's when absent.
    #[serde(default = "container_git")]
    pub git: String,
    #[serde(default = "container_user_git")]
    pub user_git: String,
    /// A new session's index, a copy of the user's (seeded in process, [`seed_with`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<Vec<u8>>,
    /// The branches the user's other worktrees have checked out, each with its path:
    /// stand-in worktree records in the session (`worktrees/agent-sandbox-user-…`) make
    /// the agent's git refuse to check them out, as the user's would. `None`: left as
    /// they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkouts: Option<Vec<(String, String)>>,
}

fn container_git() -> String {
    CONTAINER_REAL_GIT.to_owned()
}

fn container_user_git() -> String {
    CONTAINER_USER_GIT.to_owned()
}

impl SeedPlan {
    /// An empty plan for the session repository of `home`.
    fn for_home(home: &Home) -> SeedPlan {
        SeedPlan {
            head: String::new(),
            packed_refs: String::new(),
            config: Vec::new(),
            hooks: Vec::new(),
            info: Vec::new(),
            modules: Vec::new(),
            refresh: None,
            git: home.git.display().to_string(),
            user_git: home.user_git_inside.display().to_string(),
            index: None,
            checkouts: None,
        }
    }

    /// The session's own alternate: the user's objects. In a container they are also
    /// mounted alone ([`CONTAINER_USER_OBJECTS`]), which is what the session names.
    fn objects(&self) -> String {
        match self.user_git == CONTAINER_USER_GIT {
            true => CONTAINER_USER_OBJECTS.to_owned(),
            false => format!("{}/objects", self.user_git),
        }
    }
}

/// One submodule repository of the session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModulePlan {
    /// Its path below `.git/modules` (`sub`, `libs/a`, `a/modules/b`).
    pub path: String,
    pub head: String,
    pub packed_refs: String,
    /// Its safe configuration entries, and `core.worktree` (where its work tree is).
    pub config: Vec<(String, String)>,
}

/// The submodule repositories below `modules` (a directory holding `HEAD` and
/// `objects`), as paths relative to it, nested ones (`a/modules/b`) included. Links and
/// special files are passed by; at most 1,000 repositories.
pub(crate) fn module_dirs(modules: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![(modules.to_path_buf(), String::new(), 0usize)];
    while let Some((dir, rel, depth)) = stack.pop() {
        if depth > 16 || found.len() >= 1000 {
            continue;
        }
        let is_dir = |path: &Path| path.symlink_metadata().is_ok_and(|meta| meta.is_dir());
        let is_repo = !rel.is_empty()
            && dir.join("HEAD").symlink_metadata().is_ok_and(|meta| meta.is_file())
            && is_dir(&dir.join("objects"));
        if is_repo {
            found.push(rel.clone());
            if is_dir(&dir.join("modules")) {
                stack.push((dir.join("modules"), format!("{rel}/modules"), depth + 1));
            }
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten().take(10_000) {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) && plain_path(&name) {
                let rel = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
                stack.push((entry.path(), rel, depth + 1));
            }
        }
    }
    found.sort();
    found
}

/// A relative path of plain parts (no `.`, `..`, empty part, or leading `/`).
fn plain_path(path: &str) -> bool {
    !path.is_empty() && path.split('/').all(|part| !part.is_empty() && part != "." && part != "..")
}

/// What [`seed`] makes of the user's submodule repository at `modules/<rel>`.
fn module_plan(home: &Home, rel: &str) -> Result<ModulePlan, Refusal> {
    let dir = home.user_git.join("modules").join(rel);
    let head = util::fs::read_regular_nofollow(&dir.join("HEAD"), 4096)
        .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_owned())
        .map_err(|err| refuse(format!("the submodule repository {rel}'s HEAD cannot be read: {err}"), "fix it"))?;
    let git_dir = dir.display().to_string();
    // Its `core.worktree` names the work tree relative to where the user's `.git` is on
    // the host: not here, and not needed to list refs.
    let listing = home
        .git(&["--git-dir", &git_dir, "--work-tree", "/", "for-each-ref", "--format=%(objectname) %(refname)"], None)?;
    let mut packed_refs = String::from("# pack-refs with: sorted \n");
    for (name, sha) in parse_refs(&listing) {
        packed_refs.push_str(&format!("{sha} {name}\n"));
    }
    let config_file = dir.join("config").display().to_string();
    let listing = home.git(&["config", "--file", &config_file, "--list", "-z"], None).unwrap_or_default();
    let config = safe_entries(&listing, &["core.worktree"]);
    Ok(ModulePlan { path: rel.to_owned(), head, packed_refs, config })
}

/// The entries of a `git config --list -z` listing that a session keeps: [`safe_key`]s
/// and `more`.
fn safe_entries(listing: &[u8], more: &[&str]) -> Vec<(String, String)> {
    listing
        .split(|b| *b == 0)
        .filter_map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (key, value) = entry.split_once('\n')?;
            let lower = key.to_ascii_lowercase();
            (safe_key(&lower) || more.contains(&lower.as_str())).then(|| (key.to_owned(), value.to_owned()))
        })
        .collect()
}

/// The configuration keys a session repository keeps from the user's: remotes and
/// branches' upstreams, identity, and how the work tree's files are read. Nothing that
/// runs a program.
fn safe_key(key: &str) -> bool {
    const EXACT: &[&str] = &[
        "user.name",
        "user.email",
        "core.autocrlf",
        "core.eol",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.filemode",
        "core.symlinks",
        "core.hookspath",
        "init.defaultbranch",
        "extensions.objectformat",
    ];
    let section = |prefix: &str, suffixes: &[&str]| {
        key.strip_prefix(prefix).is_some_and(|rest| suffixes.iter().any(|suffix| rest.ends_with(suffix)))
    };
    EXACT.contains(&key)
        || section("remote.", &[".url", ".pushurl", ".fetch"])
        || section("branch.", &[".remote", ".merge", ".rebase"])
        // A submodule's registration (`submodule.<name>.update` may name a command: left).
        || section("submodule.", &[".url", ".active", ".branch"])
}

pub(crate) fn seed_plan(home: &Home, all: &Refs) -> Result<SeedPlan, Refusal> {
    let user_git = &home.user_git;
    let head = util::fs::read_regular_nofollow(&home.git_dir.join("HEAD"), 4096)
        .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_owned())
        .map_err(|err| refuse(format!("your repository's HEAD cannot be read: {err}"), "fix it on the host"))?;
    let mut packed_refs = String::from("# pack-refs with: sorted \n");
    for (name, sha) in all {
        packed_refs.push_str(&format!("{sha} {name}\n"));
    }
    let config_file = user_git.join("config").display().to_string();
    let listing = home.git(&["config", "--file", &config_file, "--list", "-z"], None).unwrap_or_default();
    let config = safe_entries(&listing, &[]);
    let mut hooks = Vec::new();
    if let Ok(entries) = std::fs::read_dir(user_git.join("hooks")) {
        for entry in entries.flatten().take(64) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".sample") {
                continue;
            }
            if let Ok(bytes) = util::fs::read_regular_nofollow(&entry.path(), MAX_FILE) {
                hooks.push((name, bytes));
            }
        }
    }
    let info = ["exclude", "attributes"]
        .into_iter()
        .filter_map(|name| {
            let bytes = util::fs::read_regular_nofollow(&user_git.join("info").join(name), MAX_FILE).ok()?;
            Some((name.to_owned(), bytes))
        })
        .collect();
    // A submodule repository that cannot be read is left out (git inside says so in that
    // submodule); the project's own repository does not depend on it.
    let modules = module_dirs(&user_git.join("modules")).iter().filter_map(|rel| module_plan(home, rel).ok()).collect();
    let checkouts = Some(other_checkout_paths(home));
    Ok(SeedPlan { head, packed_refs, config, hooks, info, modules, checkouts, ..SeedPlan::for_home(home) })
}

/// A session repository's `config`: git's own core settings, then the user's safe
/// entries (`key`, value), every value quoted as git's config format wants it. Pure.
pub fn session_config(entries: &[(String, String)]) -> String {
    let quoted = |value: &str| {
        let mut out = String::from("\"");
        for ch in value.chars() {
            match ch {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                _ => out.push(ch),
            }
        }
        out.push('"');
        out
    };
    // A SHA-256 repository's objects need the same format, which needs version 1.
    let version = u8::from(entries.iter().any(|(key, _)| key.eq_ignore_ascii_case("extensions.objectformat")));
    let mut text = format!(
        "[core]\n\trepositoryformatversion = {version}\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
    );
    for (key, value) in entries {
        let Some((section, rest)) = key.split_once('.') else { continue };
        let Some((sub, name)) = rest.rsplit_once('.').map_or(Some((None, rest)), |(sub, name)| Some((Some(sub), name)))
        else {
            continue;
        };
        let header = match sub {
            Some(sub) => format!("[{section} {}]", quoted(sub)),
            None => format!("[{section}]"),
        };
        text.push_str(&format!("{header}\n\t{name} = {}\n", quoted(value)));
    }
    text
}

/// `agent-sandbox git-home seed DIR` (as the agent's user, started by root): makes the
/// session repository in the empty `DIR` from the plan on stdin.
pub fn seed(dir: &Path) -> Result<(), String> {
    let mut input = Vec::new();
    std::io::stdin().take(256 << 20).read_to_end(&mut input).map_err(|err| err.to_string())?;
    let plan: SeedPlan = serde_json::from_slice(&input).map_err(|err| format!("the seed plan: {err}"))?;
    seed_with(dir, &plan)
}

/// Makes (or, for a kept session, refreshes) the session repository in `dir` from `plan`.
pub(crate) fn seed_with(dir: &Path, plan: &SeedPlan) -> Result<(), String> {
    let real_git = Path::new(&plan.git);
    // The session's hooks are not run (a `reference-transaction` hook of the agent's
    // would hold the start).
    let git = |args: &[&str]| -> Result<(), String> {
        let out = Command::new(real_git)
            .args(["-c", "core.hooksPath=/dev/null", "--git-dir"])
            .arg(dir)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|err| err.to_string())?;
        if !out.status.success() {
            return Err(format!("git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(())
    };
    let write = |name: &str, bytes: &[u8], mode: u32| {
        util::fs::atomic_write(&dir.join(name), bytes, mode).map_err(|err| format!("{name}: {err}"))
    };
    if let Some(refresh) = &plan.refresh {
        // Each ref only from the value root saw (a ref the agent moved since stays).
        let mut transaction = String::new();
        for update in &refresh.updates {
            match (&update.old, &update.new) {
                (Some(old), Some(new)) => transaction.push_str(&format!("update {} {new} {old}\n", update.name)),
                (None, Some(new)) => transaction.push_str(&format!("create {} {new}\n", update.name)),
                (Some(old), None) => transaction.push_str(&format!("delete {} {old}\n", update.name)),
                (None, None) => {}
            }
        }
        let mut child = Command::new(real_git)
            .args(["-c", "core.hooksPath=/dev/null", "--git-dir"])
            .arg(dir)
            .args(["update-ref", "--stdin"])
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|err| err.to_string())?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(transaction.as_bytes()).map_err(|err| err.to_string())?;
        }
        if !child.wait().map_err(|err| err.to_string())?.success() {
            return Err("the session's refs changed meanwhile: left as they are".into());
        }
        // The index moves with HEAD, keeping what is staged (a two-tree merge); if that
        // cannot be, it stays, and `git status` shows the difference.
        if let Some((old, new)) = &refresh.index {
            let _ = git(&["read-tree", "-m", old, new]);
        }
        // The user's `HEAD`, only from the value root saw; then the user's index, when
        // given (the work tree is the user's).
        if let Some((old, new)) = &refresh.head {
            let now = std::fs::read_to_string(dir.join("HEAD")).ok().and_then(|text| Head::parse(&text));
            if now.as_ref() == Some(old) {
                match new {
                    Head::Branch(name) => git(&["symbolic-ref", "HEAD", name])?,
                    Head::Detached(sha) => git(&["update-ref", "--no-deref", "HEAD", sha])?,
                }
            }
        }
        if let Some(index) = &plan.index {
            write("index", index, 0o644)?;
        }
        write_checkouts(dir, plan.checkouts.as_deref())?;
        return Ok(());
    }
    // The layout `git init` makes, written directly (a process per step would cost more
    // than the rest of the seeding).
    for sub in ["objects/info", "objects/pack", "refs/heads", "refs/tags", "info", "hooks"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(|err| format!("{sub}: {err}"))?;
    }
    write("config", session_config(&plan.config).as_bytes(), 0o644)?;
    write("objects/info/alternates", format!("{}\n", plan.objects()).as_bytes(), 0o644)?;
    write("packed-refs", plan.packed_refs.as_bytes(), 0o644)?;
    write("HEAD", format!("{}\n", plan.head).as_bytes(), 0o644)?;
    let plain = |name: &str| !name.contains('/') && name != "." && name != "..";
    for (name, bytes) in plan.hooks.iter().filter(|(name, _)| plain(name)) {
        write(&format!("hooks/{name}"), bytes, 0o755)?;
    }
    for (name, bytes) in plan.info.iter().filter(|(name, _)| plain(name)) {
        write(&format!("info/{name}"), bytes, 0o644)?;
    }
    // The user's index when given (its stat data holds: the work tree is the same), else
    // one from HEAD's tree (no stat data: the first `git status` refreshes it), unless
    // HEAD names no commit yet.
    if let Some(index) = &plan.index {
        write("index", index, 0o644)?;
    } else if born(&plan.head, &plan.packed_refs) {
        git(&["read-tree", "HEAD"])?;
    }
    write_checkouts(dir, plan.checkouts.as_deref())?;
    for module in plan.modules.iter().filter(|module| plain_path(&module.path)) {
        let rel = format!("modules/{}", module.path);
        for sub in ["objects/info", "objects/pack", "refs/heads", "refs/tags", "info", "hooks"] {
            std::fs::create_dir_all(dir.join(&rel).join(sub)).map_err(|err| format!("{rel}/{sub}: {err}"))?;
        }
        write(&format!("{rel}/config"), session_config(&module.config).as_bytes(), 0o644)?;
        let alternate = format!("{}/modules/{}/objects\n", plan.user_git, module.path);
        write(&format!("{rel}/objects/info/alternates"), alternate.as_bytes(), 0o644)?;
        write(&format!("{rel}/packed-refs"), module.packed_refs.as_bytes(), 0o644)?;
        write(&format!("{rel}/HEAD"), format!("{}\n", module.head).as_bytes(), 0o644)?;
        if born(&module.head, &module.packed_refs) {
            let out = Command::new(real_git)
                .arg("--git-dir")
                .arg(dir.join(&rel))
                // Its `core.worktree` is relative to where the session is inside: not
                // needed to write an index.
                .args(["--work-tree", "/", "read-tree", "HEAD"])
                .stdin(Stdio::null())
                .output()
                .map_err(|err| err.to_string())?;
            if !out.status.success() {
                return Err(format!("{rel}: git read-tree HEAD: {}", String::from_utf8_lossy(&out.stderr).trim()));
            }
        }
    }
    Ok(())
}

/// The prefix of the stand-in worktree records a session gets for the user's other
/// checkouts.
const USER_CHECKOUT: &str = "agent-sandbox-user-";

/// Makes the session's stand-in records of the user's other checkouts exactly
/// `checkouts` (branch, path); `None` leaves them. Runs as the agent's user, or in a
/// view of the session alone.
fn write_checkouts(dir: &Path, checkouts: Option<&[(String, String)]>) -> Result<(), String> {
    let Some(checkouts) = checkouts else { return Ok(()) };
    let worktrees = dir.join("worktrees");
    if let Ok(entries) = std::fs::read_dir(&worktrees) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(USER_CHECKOUT) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    for (n, (branch, path)) in checkouts.iter().enumerate() {
        if plain_ref(branch).is_none() || path.contains('\n') {
            continue;
        }
        let record = worktrees.join(format!("{USER_CHECKOUT}{n}"));
        std::fs::create_dir_all(&record).map_err(|err| format!("{}: {err}", record.display()))?;
        for (name, text) in [
            ("HEAD", format!("ref: {branch}\n")),
            ("gitdir", format!("{path}/.git\n")),
            ("commondir", "../..\n".into()),
        ] {
            util::fs::atomic_write(&record.join(name), text.as_bytes(), 0o644)
                .map_err(|err| format!("{}: {err}", record.join(name).display()))?;
        }
    }
    Ok(())
}

/// Whether `head` (a `HEAD` file's content) names a commit: a detached one, or a branch
/// that `packed_refs` lists.
fn born(head: &str, packed_refs: &str) -> bool {
    match head.strip_prefix("ref: ") {
        Some(branch) => packed_refs.lines().any(|line| line.split_once(' ').is_some_and(|(_, name)| name == branch)),
        None => true,
    }
}

/// The broker runs through the image's sudo rule, which the agent invokes: sudo passes
/// on the signals it gets, and the agent could end a sync while root's git writes the
/// user's `.git`, before the files are handed back to their owner. So the broker leaves
/// the agent's session and process group, and ignores the signals a user can send
/// (SIGKILL is root's alone). The checks it runs are ended by their own limits.
fn beyond_the_agents_signals() {
    // SAFETY: setsid and signal with SIG_IGN have no preconditions; nothing else in this
    // process handles these signals.
    unsafe {
        libc::setsid();
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT, libc::SIGTSTP] {
            libc::signal(signal, libc::SIG_IGN);
        }
    }
}

fn run_sync(config: config::Config, later: bool) -> Result<Vec<String>, Refusal> {
    as_root()?;
    beyond_the_agents_signals();
    own_home_files();
    let Some(layout) = the_layout()? else {
        if later {
            return Ok(Vec::new());
        }
        return Err(refuse("this container has no session repository", "commit as usual"));
    };
    // SAFETY: umask has no preconditions.
    unsafe { libc::umask(0o022) };
    let (uid, gid) = util::users::lookup(CHECK_USER).ok_or_else(|| {
        refuse(format!("the image has no user {CHECK_USER} to run the checks as"), "rebuild the image with the Feature")
    })?;
    let state_dir = Path::new(STATE_DIR);
    checks::make_root_dir(state_dir, 0o755)?;
    // At most one sync runs and one waits: the waiting one reads the session after the
    // running one is done, so it brings whatever any command since has made.
    let lock = |name: &str, wait: bool| {
        util::fs::lock(&state_dir.join(name), wait)
            .map_err(|err| refuse(format!("cannot lock {STATE_DIR}: {err}"), "try again"))
    };
    let Some(queue) = lock("queue", !later)? else { return Ok(Vec::new()) };
    let _lock = lock("lock", true)?;
    drop(queue);
    let _state = lock_state(&layout)?;
    // The push verifier runs as the checks' user too, and each ends that user's
    // processes before it starts: one at a time.
    let push_dir = Path::new(checks::STATE_DIR);
    checks::make_root_dir(push_dir, 0o755)?;
    let _checks = util::fs::lock(&push_dir.join("lock"), true)
        .map_err(|err| refuse(format!("cannot lock {}: {err}", push_dir.display()), "try again"))?;
    util::users::kill_all(uid, Duration::from_secs(10));
    let home = Home::container();
    check_home(&home)?;
    let found = session_redirections(&layout.session, Path::new(CONTAINER_USER_OBJECTS));
    if !found.is_empty() {
        return Err(refuse(
            format!("the session repository leads elsewhere, so nothing in it comes home: {}", found.join("; ")),
            "remove those entries from .git",
        ));
    }
    let project_config = state_dir.join("project-config");
    let bytes = util::fs::read_regular_nofollow(&Path::new(CONTAINER_HOME_GIT).join("config"), MAX_FILE)
        .map_err(|err| refuse(format!("your repository's config cannot be read: {err}"), "fix it on the host"))?;
    checks::write_root_file(&project_config, &bytes, 0o644)?;
    let mirror_dir = state_dir.join("mirror.git");
    let env = checks::root_env();
    let mirror = Mirror {
        path: &mirror_dir,
        git: Path::new(CONTAINER_REAL_GIT),
        env: &env,
        reader: mirror::reader(
            &format!("{SETPRIV} --reuid={uid} --regid={gid} --clear-groups --no-new-privs "),
            CONTAINER_REAL_GIT,
            Some("/nonexistent"),
        ),
    };
    mirror.configure(&project_config).map_err(|failed| refuse(failed.to_string(), "try again"))?;
    let alternates = format!("{CONTAINER_HOME_GIT}/objects\n");
    checks::write_root_file(&mirror_dir.join("objects/info/alternates"), alternates.as_bytes(), 0o644)?;
    let user = user_refs(&home)?;
    let session = session_refs(&home, &mirror, (&layout.top, &layout.session), &user)?;
    // Without the base there is nothing to tell the user's moves from the session's: a
    // start makes one, and until then nothing moves.
    let mut state = read_state(&layout.state).ok_or_else(|| {
        refuse(
            format!(
                "the broker has no record of what the session last agreed with your repository ({})",
                layout.state.display()
            ),
            "restart the container (its start makes the record, putting a session of another repository aside)",
        )
    })?;
    // In a branch sandbox the user's checkout is another: its branch never moves.
    let others: Vec<String> = match layout.shared_tree {
        true => Vec::new(),
        false => home
            .git(&["symbolic-ref", "-q", "HEAD"], None)
            .ok()
            .map(|name| String::from_utf8_lossy(&name).trim().to_owned())
            .into_iter()
            .collect(),
    };
    let (user_head, session_head) = (read_head(&home.git_dir), read_head(&layout.session));
    let checkouts = Checkouts {
        user: user_head.as_ref().and_then(Head::branch).filter(|_| layout.shared_tree),
        session: session_head.as_ref().and_then(Head::branch),
        others: &others,
    };
    let stashed = bring_stashes(&home, &mirror, &layout.session, &mut state);
    if !stashed.is_empty() {
        write_state(&layout.state, &state)?;
        own_home_files();
    }
    let history = MirrorHistory { mirror: &mirror, brought: &state.brought };
    let decisions = session_repo::decide(&state.base, (&user, &session), &checkouts, &history);
    let head_moved = layout.shared_tree && user_head != session_head;
    if decisions.is_empty() && !head_moved {
        return Ok(stashed);
    }
    // The hook guard's git asks the user's repository (not root's) what it has.
    let global = state_dir.join("gitconfig");
    checks::write_root_file(&global, b"[safe]\n\tdirectory = *\n", 0o644)?;
    let (_, work) = checks::prepare_checks(
        state_dir,
        (uid, gid),
        &config,
        &mirror,
        &project_config,
        &layout.top,
        Path::new(IMAGE_BINARY),
        Some(&global),
    )?;
    let refresh = |index: &Path, paths: &[String]| refresh_index_as((uid, gid), &layout.top, index, paths);
    let checkout = Checkout { shared_tree: layout.shared_tree, others: &others, refresh: Some(&refresh) };
    let brought = bring(&home, &mirror, &checkout, decisions, (&user, session_head.as_ref()), &mut state, &|state| {
        write_state(&layout.state, state)
    });
    util::users::kill_all(uid, Duration::from_secs(10));
    let _ = checks::remove(&work);
    // What root's git made in the user's `.git` (by any path `bring` left by) is the owner's.
    own_home_files();
    let mut outcome = brought?;
    outcome.told.splice(0..0, stashed);
    // What the user moved, the session takes, written as the agent's user.
    if let Some(plan) = carry_plan(&home, &layout.session, &outcome.carries) {
        // Never as root in the agent's volume.
        let owner = layout.session.symlink_metadata().map(|meta| (meta.uid(), meta.gid())).unwrap_or((0, 0));
        let taken = match owner.0 {
            0 => Err(refuse("the session repository is root's", "restart the container")),
            _ => as_agent(&layout, owner, &plan),
        };
        match taken {
            Ok(()) => {
                outcome.carries.iter().for_each(|(decision, _)| state.base.settle(decision));
                write_state(&layout.state, &state)?;
                own_home_files();
            }
            Err(refusal) => outcome.told.push(format!("the session did not take the user's moves: {}", refusal.why)),
        }
    }
    Ok(outcome.told)
}

/// Refreshes the stat data of `paths` in the index at `index` (one the broker moved), as
/// the checks' user: it reads the work tree (the agent's to write) with a copy of the
/// index, an empty git directory and no configuration (no filter, no fsmonitor runs),
/// and nothing of the user's; bounded in time. Root takes the index back without
/// following a link. Without it, the user's next `git reset --keep` takes the moved
/// files for changed ones.
fn refresh_index_as((uid, gid): (u32, u32), top: &Path, index: &Path, paths: &[String]) -> Result<(), String> {
    if paths.is_empty() {
        return Ok(());
    }
    use std::os::unix::fs::DirBuilderExt;
    let dir = Path::new(STATE_DIR).join("refresh");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|err| err.to_string())?;
    let copy = dir.join("index");
    let git_dir = dir.join("git");
    let bytes = util::fs::read_regular_nofollow(index, 1 << 30).map_err(|err| err.to_string())?;
    util::fs::atomic_write(&copy, &bytes, 0o600).map_err(|err| err.to_string())?;
    for made in [&dir, &copy] {
        std::os::unix::fs::lchown(made, Some(uid), Some(gid)).map_err(|err| err.to_string())?;
    }
    let as_checks = |args: &[&std::ffi::OsStr]| {
        Command::new(SETPRIV)
            .args([format!("--reuid={uid}"), format!("--regid={gid}")])
            .args(["--clear-groups", "--no-new-privs", "/usr/bin/timeout", "--kill-after=5", "30", CONTAINER_REAL_GIT])
            .args(["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "safe.directory=*"])
            .args(args)
            .current_dir("/")
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", "/nonexistent")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_INDEX_FILE", &copy)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|err| err.to_string())
            .and_then(|status| status.success().then_some(()).ok_or_else(|| format!("git: {status}")))
    };
    let result = as_checks(&["init".as_ref(), "-q".as_ref(), "--bare".as_ref(), git_dir.as_os_str()])
        .and_then(|()| {
            let mut args: Vec<&std::ffi::OsStr> =
                vec!["--git-dir".as_ref(), git_dir.as_os_str(), "--work-tree".as_ref()];
            args.extend([top.as_os_str(), "add".as_ref(), "--refresh".as_ref(), "--".as_ref()]);
            args.extend(paths.iter().map(std::ffi::OsStr::new));
            as_checks(&args)
        })
        .and_then(|()| util::fs::read_regular_nofollow(&copy, 1 << 30).map_err(|err| err.to_string()))
        .and_then(|bytes| util::fs::atomic_write(index, &bytes, 0o644).map_err(|err| err.to_string()));
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The session's branches and tags, each as the mirror has it. The names are listed
/// from the session's own files ([`list_session_refs`]), and only those whose value is
/// not the user's are fetched (hashed in like any other fetch): with thousands of refs,
/// a sync reads only what changed. A session whose refs are not plain files is read
/// whole, as the push verifier reads it.
pub(crate) fn session_refs(
    home: &Home,
    mirror: &Mirror,
    (top, session_dir): (&Path, &Path),
    user: &Refs,
) -> Result<Refs, Refusal> {
    let unreadable = |failed: mirror::Failed| {
        let said = failed.last_line().to_owned();
        // A session that no longer matches its repository (objects pruned on the host, a
        // session of an older version kept across a new clone) fails the same way as a
        // ref planted at an object from elsewhere: both are named, with both fixes.
        let instead = match home.work_tree {
            Some(_) => {
                "delete or repair that branch or tag (`git fsck` inside names broken ones), then commit \
                       again; if your repository was cloned again at this path or pruned, the session no longer \
                       matches it: on the host, `agent-sandbox git sessions` shows what it holds and `agent-sandbox \
                       git sessions remove home` starts afresh"
            }
            None => {
                "delete or repair that branch or tag (`git fsck` inside names broken ones), then commit \
                    again; if your repository was pruned on the host, the session no longer matches it: remove the \
                    container's session volume (`agent-sandbox-git-…`) on the host and start the container again"
            }
        };
        refuse(
            format!(
                "cannot read the session's commits: an object one of its branches or tags leads to is not in the \
                 project's own object store, or a file in .git is not a regular one (git: {})",
                util::terminal_safe(&said)
            ),
            instead,
        )
    };
    let Some(listed) = list_session_refs(session_dir) else {
        mirror.fetch(top, session_dir).map_err(unreadable)?;
        return Ok(parse_refs(&checks::mirror_git(mirror, FOR_EACH)?));
    };
    let changed: Vec<&str> =
        listed.iter().filter(|(name, sha)| user.get(*name) != Some(*sha)).map(|(name, _)| name.as_str()).collect();
    // The mirror first drops what it holds under those names and what the session no
    // longer has (a branch `a/b` deleted would otherwise keep a new `a` from being
    // fetched), in one transaction.
    let held = parse_refs(&checks::mirror_git(mirror, FOR_EACH)?);
    let dropped: String = held
        .keys()
        .filter(|name| !listed.contains_key(*name) || changed.contains(&name.as_str()))
        .map(|name| format!("delete {name}\n"))
        .collect();
    if !dropped.is_empty() {
        mirror.git_with_input(&["update-ref", "--stdin"], dropped.as_bytes()).map_err(unreadable)?;
    }
    // What the mirror offers: the user's values of those refs and the user's `HEAD` (a
    // new branch starts from there, mostly; one that does not is fetched whole).
    let mut tips: Vec<String> = Vec::new();
    if !changed.is_empty() {
        let head = home.git(&["rev-parse", "-q", "--verify", "HEAD^{commit}"], None).unwrap_or_default();
        let head = String::from_utf8_lossy(&head).trim().to_owned();
        tips.extend(changed.iter().filter_map(|name| user.get(*name).cloned()));
        tips.extend(object_name(&head).map(str::to_owned));
        tips.sort_unstable();
        tips.dedup();
    }
    let tips: Vec<&str> = tips.iter().map(String::as_str).collect();
    mirror.fetch_named(top, session_dir, &changed, &tips).map_err(unreadable)?;
    let mut session: Refs = listed
        .iter()
        .filter(|(name, sha)| user.get(*name) == Some(*sha))
        .map(|(name, sha)| (name.clone(), sha.clone()))
        .collect();
    if !changed.is_empty() {
        let mut args = vec!["for-each-ref", "--format=%(objectname) %(refname)"];
        args.extend(&changed);
        session.extend(parse_refs(&checks::mirror_git(mirror, &args)?));
    }
    Ok(session)
}

/// The branches and tags of a session repository, from its `packed-refs` and loose ref
/// files, read without following a link or opening anything but a regular file. `None`
/// when they are kept otherwise (reftable), or a name is not one git would make.
pub fn list_session_refs(session: &Path) -> Option<Refs> {
    list_refs(session, false)
}

/// [`list_session_refs`], or with `all` every ref under `refs/` (remote-tracking
/// branches, notes, the stash; symbolic refs left out), as `git for-each-ref` lists
/// them, without starting it.
pub(crate) fn list_refs(session: &Path, all: bool) -> Option<Refs> {
    if session.join("reftable").symlink_metadata().is_ok() {
        return None;
    }
    // `read_dir` follows a link given as its path: the directories walked from must be
    // plain (those below are told apart by their entries' own types).
    for dir in ["refs", "refs/heads", "refs/tags"] {
        match session.join(dir).symlink_metadata() {
            Ok(meta) if meta.is_dir() => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            _ => return None,
        }
    }
    let mut refs = packed_refs(&session.join("packed-refs"))?;
    if !all {
        refs.retain(|name, _| name.starts_with("refs/heads/") || name.starts_with("refs/tags/"));
    }
    let mut stack: Vec<String> = if all { vec!["refs".into()] } else { vec!["refs/heads".into(), "refs/tags".into()] };
    let mut budget = 1_000_000usize;
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(session.join(&dir)) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => return None,
        };
        for entry in entries {
            budget = budget.checked_sub(1)?;
            let entry = entry.ok()?;
            let name = format!("{dir}/{}", entry.file_name().to_str()?);
            let kind = entry.file_type().ok()?;
            if kind.is_dir() {
                stack.push(name);
            } else if kind.is_file() {
                let bytes = util::fs::read_regular_nofollow(&session.join(&name), 4096).ok()?;
                let text = String::from_utf8_lossy(&bytes);
                // A symbolic ref among the branches names no commit of its own.
                if text.starts_with("ref: ") {
                    continue;
                }
                refs.insert(plain_ref(&name)?.to_owned(), object_name(text.trim())?.to_owned());
            } else {
                return None;
            }
        }
    }
    Some(refs)
}

/// The refs of a `packed-refs` file (none without one). A file parsed
/// before in this process whose metadata has not changed since (its inode, size, and
/// change time, which nobody can set back) is not parsed again: a start and the sync at
/// its end each read both repositories' refs, and a repository of 10,000 refs took
/// 6 ms a parse. An in-place rewrite of the same size within one tick of the clock
/// could go unseen: the listing only decides whether a sync reads the session at all,
/// so that delays a commit's coming home to the next sync, and brings nothing unchecked.
fn packed_refs(path: &Path) -> Option<Refs> {
    type Stamp = (u64, u64, u64, i64, i64, i64, i64);
    static PARSED: Mutex<BTreeMap<PathBuf, (Stamp, Refs)>> = Mutex::new(BTreeMap::new());
    let file = match util::fs::open_regular(path, false) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Some(Refs::new()),
        Err(_) => return None,
    };
    let meta = file.metadata().ok()?;
    let stamp = (meta.dev(), meta.ino(), meta.size(), meta.mtime(), meta.mtime_nsec(), meta.ctime(), meta.ctime_nsec());
    let mut parsed = PARSED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((seen, refs)) = parsed.get(path) {
        if *seen == stamp {
            return Some(refs.clone());
        }
    }
    let mut bytes = Vec::new();
    file.take((256 << 20) + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() > 256 << 20 {
        return None;
    }
    let mut refs = Refs::new();
    for line in String::from_utf8_lossy(&bytes).lines() {
        if line.starts_with('#') || line.starts_with('^') {
            continue;
        }
        let (sha, name) = line.split_once(' ')?;
        if name.starts_with("refs/") {
            refs.insert(plain_ref(name)?.to_owned(), object_name(sha)?.to_owned());
        }
    }
    parsed.insert(path.to_path_buf(), (stamp, refs.clone()));
    Some(refs)
}

/// `name` if every part of it is one git's `check-ref-format` takes (and no more).
pub(crate) fn plain_ref(name: &str) -> Option<&str> {
    let fine = |part: &str| {
        !part.is_empty()
            && !part.starts_with('.')
            && !part.ends_with(".lock")
            && !part.contains("..")
            && !part.contains("@{")
            && part.bytes().all(|b| b > b' ' && b != 0x7f && !b"~^:?*[\\".contains(&b))
    };
    (name.split('/').all(fine) && !name.ends_with('.')).then_some(name)
}

fn object_name(text: &str) -> Option<&str> {
    (matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())).then_some(text)
}

/// What root's git made in the user's repository becomes the repository owner's (as if
/// the user's git had made it); links are never followed.
fn own_home_files() {
    let home = Path::new(CONTAINER_HOME_GIT);
    let Ok(meta) = home.symlink_metadata() else { return };
    if meta.uid() == 0 {
        return;
    }
    let (uid, gid) = (meta.uid(), meta.gid());
    let mut stack: Vec<PathBuf> =
        ["HEAD", "index", "packed-refs", "ORIG_HEAD", "refs", "logs", "objects", "agent-sandbox"]
            .iter()
            .map(|name| home.join(name))
            .collect();
    while let Some(path) = stack.pop() {
        let Ok(meta) = path.symlink_metadata() else { continue };
        if meta.uid() == 0 {
            let _ = std::os::unix::fs::lchown(&path, Some(uid), Some(gid));
        }
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.flatten().map(|entry| entry.path()));
            }
        }
    }
}

pub mod exec;
pub mod sessions;
pub mod summary;
#[cfg(test)]
mod tests;
