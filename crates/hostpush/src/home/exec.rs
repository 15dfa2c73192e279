//! `exec`'s session repository and its broker: what `home` does in a container, done by
//! the `exec` process on the host.
//!
//! The session repository lives in the state directory, per project
//! (`sessions/<hash>/home/.git`, whose parent no sandbox shows). The sandbox shows it at
//! `<project>/.git`, read-write, and the user's `.git` read-only at the runtime
//! directory's `user-git` (the session's alternates lead there); the user's `.git`
//! itself is not writable from inside. The host reads the session only inside a view
//! that shows nothing else of the host but the system's programs ([`ExecHome::view`]):
//! seeding and refreshing run there, and so does the mirror's reader. Commits come home
//! through the push service's checks ([`super::bring`]); the push service's thread
//! syncs when the git guard asks (a `home` request on the push socket), before each
//! push, and once more at exit.

use std::{
    os::unix::fs::DirBuilderExt,
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
};

use session_repo::sync::{Checkouts, Head};

use super::{
    bring, carry_plan, check_home, list_session_refs, read_head, refuse, run_seed, seed_plan, session_redirections,
    session_refs, sessions, start_plan, told_after, user_refs, Checkout, Home, MirrorHistory, Refs, State,
};
use crate::{
    mirror::{self, Mirror, ViewBind},
    plan::Refusal,
};

/// What the broker of one `exec` session needs; all paths on the host.
pub struct ExecHome {
    /// The user's repository (`user_git_inside`: the runtime directory's `user-git` as
    /// the sandbox sees it), the host's git, and the push service's checks.
    pub home: Home,
    /// The directory whose `.git` is the session repository.
    pub top: PathBuf,
    pub bwrap: PathBuf,
    /// This binary (`git-home seed` runs in the view).
    pub self_exe: PathBuf,
    /// Where git is installed outside the system directories (shown in the views):
    /// learnt (`git --exec-path`) when a view is first needed, which most sessions'
    /// syncs never are.
    pub git_installation: std::sync::OnceLock<Vec<PathBuf>>,
    /// The broker's mirror, in the push service's private directory.
    pub mirror: PathBuf,
    /// The told file in the runtime directory, which the git guard inside reads.
    pub told: PathBuf,
}

/// The session repository's directory under a project's state directory.
pub fn session_top(project_state: &Path) -> PathBuf {
    project_state.join("home")
}

/// coreutils' `timeout`, which bounds the mirror's reader.
const TIMEOUT: &str = "/usr/bin/timeout";
const READER_SECS: u32 = 30;

const INSTEAD: &str = "remove the session repository (its path is above) and start again";

impl ExecHome {
    pub fn session(&self) -> PathBuf {
        self.top.join(".git")
    }

    /// A view of `session` (writable or not) and of the user's `.git` where the
    /// sandbox shows it, read-only: the bwrap command line up to `--`.
    fn view(&self, session: &Path, writable: bool) -> Vec<String> {
        let mut extra = self.git_installation.get_or_init(|| crate::mirror::git_installation(&self.home.git)).clone();
        extra.push(self.self_exe.clone());
        let binds = [
            ViewBind { source: session.to_path_buf(), at: session.to_path_buf(), writable },
            ViewBind { source: self.home.user_git.clone(), at: self.home.user_git_inside.clone(), writable: false },
        ];
        mirror::view_args(&self.bwrap, &mirror::system_entries(), &extra, &binds)
    }

    fn seed_command(&self, session: &Path) -> Command {
        let view = self.view(session, true);
        let mut command = Command::new(&view[0]);
        command
            .args(&view[1..])
            .arg(&self.self_exe)
            .args(["git-home", "seed"])
            .arg(session)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", "/nonexistent");
        command
    }

    /// The broker's state: beside the session repository (no sandbox shows it), kept
    /// between sessions as the session is.
    fn state_path(&self) -> PathBuf {
        self.top.join(STATE)
    }

    /// `None`: the state is missing or unreadable (a session made by an older version).
    fn read_state(&self) -> Option<State> {
        util::fs::read_regular_nofollow(&self.state_path(), 256 << 20)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
    }

    fn write_state(&self, state: &State) -> Result<(), Refusal> {
        let bytes = serde_json::to_vec(state).expect("a state serializes");
        let path = self.state_path();
        util::fs::atomic_write(&path, &bytes, 0o600)
            .map_err(|err| refuse(format!("cannot write {}: {err}", path.display()), "try again"))
    }
}

/// Before the sandbox starts: takes the user's refs as the session's start, and makes
/// the session repository (a new one from the user's refs, `HEAD`, index, safe config
/// and hooks) or has a kept one follow what the user did meanwhile. What to say.
pub fn prepare(x: &ExecHome) -> Result<Prepared, Refusal> {
    check_home(&x.home)?;
    // A kept session of another repository at this path (a re-clone) is never used.
    let id = sessions::repository_id(&x.home.user_git)?;
    let aside = match sessions::session_id(&x.top) {
        Some(theirs) if theirs != id && x.session().symlink_metadata().is_ok() => {
            if others_running(&x.top) {
                return Err(refuse(
                    "the session repository kept for this path belongs to another repository, and an `exec` of that \
                     one still runs",
                    "end that session first",
                ));
            }
            Some(sessions::put_aside(&x.top)?)
        }
        _ => None,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&x.top)
        .map_err(|err| refuse(format!("cannot create {}: {err}", x.top.display()), INSTEAD))?;
    sessions::record_session_id(&x.top, &id)?;
    let said = prepare_session(x)?;
    let notice = match aside {
        Some(aside) => {
            let kept = sessions::list(aside.parent().unwrap_or(&aside));
            let lines = kept
                .iter()
                .filter(|kept| kept.dir == aside)
                .flat_map(|kept| sessions::describe(kept, &Refs::new()))
                .collect::<Vec<_>>()
                .join("\n");
            vec![format!(
                "the session repository kept for this path belonged to another repository (a clone made again at the \
                 same path?): it is kept aside, and nothing of it comes into this one; `agent-sandbox git sessions` \
                 lists it, `agent-sandbox git sessions remove NAME` deletes it:\n{lines}"
            )]
        }
        None => Vec::new(),
    };
    Ok(Prepared { said, notice })
}

/// What [`prepare`] did: a line for the debug log, and what the user must read.
#[derive(Debug)]
pub struct Prepared {
    pub said: String,
    pub notice: Vec<String>,
}

/// [`prepare`], once the session in `x.top` is this repository's.
fn prepare_session(x: &ExecHome) -> Result<String, Refusal> {
    // No broker of another `exec` of the project syncs while this one reads both sides
    // and moves the session's refs: when one is syncing now, the session takes the
    // user's moves at its first sync instead (rather than wait for its checks).
    let quiet = util::fs::lock(&x.top.join(SYNC_LOCK), false).ok().flatten();
    // Read from the files when they are plain (no process to start), else by git.
    let refs = match list_session_refs(&x.home.user_git) {
        Some(refs) => refs,
        None => user_refs(&x.home)?,
    };
    let session = x.session();
    match session.symlink_metadata() {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            // Made aside and renamed into place: a start killed halfway leaves no
            // half-made session behind.
            let all = match super::list_refs(&x.home.user_git, true) {
                Some(all) => all,
                None => super::parse_refs(&x.home.git(&["for-each-ref", "--format=%(objectname) %(refname)"], None)?),
            };
            let fresh = x.top.join(".git.new");
            let _ = std::fs::remove_dir_all(&fresh);
            std::fs::create_dir_all(&fresh)
                .map_err(|err| refuse(format!("cannot create {}: {err}", fresh.display()), INSTEAD))?;
            let mut plan = seed_plan(&x.home, &all)?;
            // With the user's index to copy and no submodule to seed, seeding starts no git:
            // it runs here, writing only the new session from the user's files (never
            // writable inside); else in the view, where the session's alternate is.
            match users_index(x) {
                Some(index) if plan.modules.is_empty() => {
                    plan.index = Some(index);
                    super::seed_with(&fresh, &plan)
                        .map_err(|why| refuse(format!("cannot seed the session repository: {why}"), INSTEAD))?;
                }
                _ => run_seed(x.seed_command(&fresh), &plan, INSTEAD)?,
            }
            std::fs::rename(&fresh, &session)
                .map_err(|err| refuse(format!("cannot rename {}: {err}", fresh.display()), INSTEAD))?;
            x.write_state(&State::agreed(&refs, read_head(&x.home.git_dir)))?;
            Ok(format!("the agent's git is its own: {} starts from your repository's refs", session.display()))
        }
        Err(err) => Err(refuse(format!("{}: {err}", session.display()), INSTEAD)),
        Ok(meta) if meta.is_dir() => {
            // Only when the user's config or hooks changed since they were last taken.
            let stamp = user_files_stamp(&x.home.user_git);
            let renewed = x.top.join("renewed");
            if util::fs::read_regular_nofollow(&renewed, 1 << 20).ok().as_deref() != Some(stamp.as_bytes()) {
                renew_own_files(&session, &seed_plan(&x.home, &refs)?)?;
                let _ = util::fs::atomic_write(&renewed, stamp.as_bytes(), 0o600);
            }
            let mut said = format!("the agent's git is its own: {} is kept from earlier", session.display());
            let Some(listed) = list_session_refs(&session) else { return Ok(said) };
            // A session of an older version kept no base: what both have agrees.
            let mut state = x.read_state().unwrap_or_else(|| State::agreed(&refs, read_head(&x.home.git_dir)));
            // Not while another `exec` of the project runs either: its agent's `HEAD` and
            // index would move under it (its broker's syncs take the user's refs).
            let alone = !others_running(&x.top);
            let start = start_plan(&x.home, &session, (&refs, &listed), &state).filter(|_| quiet.is_some() && alone);
            let listed = match start {
                Some(start) => {
                    run_seed(x.seed_command(&session), &start.plan, INSTEAD)?;
                    start.settle(&mut state);
                    x.write_state(&state)?;
                    said.push_str(&format!("; {}", start.said()));
                    let Some(listed) = list_session_refs(&session) else { return Ok(said) };
                    listed
                }
                None => listed,
            };
            // Not while another `exec` of the project runs: the index is its agent's too,
            // and what it staged would be gone under it.
            if alone {
                take_users_index(x, &session, &listed, &refs);
            }
            Ok(said)
        }
        Ok(_) => Err(refuse(format!("{} is not a directory", session.display()), INSTEAD)),
    }
}

/// The work tree is the user's between sessions: when the session's `HEAD` is the
/// user's commit, its index becomes a copy of the user's (what the user staged or
/// unstaged meanwhile), replacing the file rather than writing through it. Otherwise the
/// session keeps its own (it works on another commit than the user's checkout).
fn take_users_index(x: &ExecHome, session: &Path, listed: &Refs, user: &Refs) {
    let commit_of = |head: &[u8], refs: &Refs| {
        let head = String::from_utf8_lossy(head).trim().to_owned();
        match head.strip_prefix("ref: ") {
            Some(branch) => refs.get(branch).cloned(),
            None => Some(head),
        }
    };
    let ours =
        util::fs::read_regular_nofollow(&session.join("HEAD"), 4096).ok().and_then(|head| commit_of(&head, listed));
    let theirs = util::fs::read_regular_nofollow(&x.home.git_dir.join("HEAD"), 4096)
        .ok()
        .and_then(|head| commit_of(&head, user));
    if ours.is_none() || ours != theirs {
        return;
    }
    if let Some(index) = users_index(x) {
        let _ = util::fs::atomic_write(&session.join("index"), &index, 0o644);
    }
}

/// The user's index (their work tree's), as a regular file.
fn users_index(x: &ExecHome) -> Option<Vec<u8>> {
    util::fs::read_regular_nofollow(&x.home.git_dir.join("index"), 1 << 30).ok()
}

/// What the user's config, hooks and info files are now, by their metadata (ctime
/// moves with every change and cannot be set back).
fn user_files_stamp(user_git: &Path) -> String {
    use std::os::unix::fs::MetadataExt as _;
    let line = |rel: &str| match user_git.join(rel).symlink_metadata() {
        Ok(meta) => format!("{rel} {} {}.{} {}\n", meta.ino(), meta.ctime(), meta.ctime_nsec(), meta.size()),
        Err(_) => format!("{rel} -\n"),
    };
    let mut stamp: String = ["config", "hooks", "info/exclude", "info/attributes"].into_iter().map(line).collect();
    let mut hooks: Vec<String> = std::fs::read_dir(user_git.join("hooks"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| format!("hooks/{}", entry.file_name().to_string_lossy()))
        .collect();
    hooks.sort();
    stamp.extend(hooks.iter().map(|rel| line(rel)));
    stamp
}

/// A kept session's `config` and `hooks` become the user's again (the user may have
/// changed theirs since). They are the host's: the sandbox shows them read-only, as
/// mount points the agent can neither write nor rename, and nothing else shows the
/// session; still, neither is followed if it is not what the host made.
fn renew_own_files(session: &Path, plan: &super::SeedPlan) -> Result<(), Refusal> {
    let failed = |what: &Path, err: std::io::Error| refuse(format!("{}: {err}", what.display()), INSTEAD);
    let config = session.join("config");
    let hooks = session.join("hooks");
    let plain = |path: &Path, dir: bool| {
        path.symlink_metadata().is_ok_and(|meta| if dir { meta.is_dir() } else { meta.is_file() })
    };
    if !plain(&config, false) || !plain(&hooks, true) {
        return Err(refuse(
            format!("{}: its config or hooks are not what agent-sandbox made", session.display()),
            INSTEAD,
        ));
    }
    let text = super::session_config(&plan.config);
    if util::fs::read_regular_nofollow(&config, 1 << 20).ok().as_deref() != Some(text.as_bytes()) {
        util::fs::atomic_write(&config, text.as_bytes(), 0o644).map_err(|err| failed(&config, err))?;
    }
    let wanted: Vec<&(String, Vec<u8>)> =
        plan.hooks.iter().filter(|(name, _)| !name.contains('/') && name != "." && name != "..").collect();
    for entry in std::fs::read_dir(&hooks).map_err(|err| failed(&hooks, err))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !wanted.iter().any(|(wanted, _)| *wanted == name) {
            std::fs::remove_file(entry.path()).map_err(|err| failed(&entry.path(), err))?;
        }
    }
    for (name, bytes) in wanted {
        let path = hooks.join(name);
        if util::fs::read_regular_nofollow(&path, 1 << 20).ok().as_deref() != Some(bytes.as_slice()) {
            util::fs::atomic_write(&path, bytes, 0o755).map_err(|err| failed(&path, err))?;
        }
    }
    Ok(())
}

/// Beside the session repository (no sandbox shows it): the broker's [`State`].
const STATE: &str = "sync.json";

/// Beside the session repository (no sandbox shows it): held while one of the project's
/// brokers syncs.
const SYNC_LOCK: &str = "sync.lock";

/// Beside the session repository: held (shared) by each running `exec`'s broker.
const LIVE_LOCK: &str = "live.lock";

/// Whether another `exec` of the project runs (holds [`LIVE_LOCK`]); when that cannot
/// be told, as if one did.
fn others_running(top: &Path) -> bool {
    // Exclusive and not waiting: taken (and dropped at once) only when no broker holds it.
    !matches!(util::fs::lock(&top.join(LIVE_LOCK), false), Ok(Some(_)))
}

/// [`LIVE_LOCK`], shared, for the broker's life; `None` if it cannot be taken (a start
/// beside this session then takes the index as if it were alone).
fn live_lock(top: &Path) -> Option<std::fs::File> {
    util::fs::lock_shared(&top.join(LIVE_LOCK)).ok()
}

/// The broker of one session: one sync at a time (the push service's thread and the
/// exit's, and the other `exec`s' of the project).
pub struct Broker {
    pub exec: ExecHome,
    lock: Mutex<()>,
    _live: Option<std::fs::File>,
    /// Set by the last sync ([`Broker::last_sync`]): the session is ending, its runtime
    /// directory about to go, and a request the push service still holds syncs no more.
    ended: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker").field("session", &self.exec.session()).finish()
    }
}

impl Broker {
    pub fn new(exec: ExecHome) -> Broker {
        let live = live_lock(&exec.top);
        Broker { exec, lock: Mutex::new(()), _live: live, ended: std::sync::atomic::AtomicBool::new(false) }
    }

    /// The sync at the session's end: after it, [`Broker::sync`] does nothing.
    pub fn last_sync(&self) -> Result<Vec<String>, Refusal> {
        let result = self.sync();
        self.ended.store(true, std::sync::atomic::Ordering::SeqCst);
        result
    }

    /// Brings what the session committed home; what to tell (also kept in the told
    /// file for the git guard inside).
    pub fn sync(&self) -> Result<Vec<String>, Refusal> {
        let _one = self.lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.ended.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(Vec::new());
        }
        // And one at a time across the `exec`s of the project, which share the session
        // repository: two brokers sending the same tips would race on the incoming refs
        // (a push that loses is told as refused by its checks) and on the user's refs (the
        // loser says nothing came home, though the other brought it all), and each would
        // write the record of what came home over the other's. The next one finds what
        // the first brought, and has nothing to say about it.
        let lock = self.exec.top.join(SYNC_LOCK);
        let result = util::fs::lock(&lock, true)
            .map_err(|err| refuse(format!("cannot lock {}: {err}", lock.display()), "try again"))
            .and_then(|_all| sync(&self.exec));
        let lines = match &result {
            Ok(lines) => lines.clone(),
            Err(refusal) => vec![format!("nothing came home: {}", refusal.inline())],
        };
        if !lines.is_empty() {
            let text = told_after(&self.exec.told, &lines);
            // In place, never made: the runtime directory takes no new files once made
            // (its removal at the end would find one it did not expect).
            let told = std::fs::OpenOptions::new().write(true).truncate(true).open(&self.exec.told);
            if let Ok(mut told) = told {
                let _ = std::io::Write::write_all(&mut told, text.as_bytes());
            }
        }
        result
    }
}

impl Broker {
    /// Why a push with `args` (after `push`) is refused: the first branch or tag it
    /// would send whose session value is not the user's (its commits did not come home,
    /// or the user's moved on the host since). `None`: nothing stops it.
    pub fn not_home(&self, args: &[String]) -> Option<Refusal> {
        let x = &self.exec;
        let session = list_session_refs(&x.session())?;
        let user = user_refs(&x.home).ok()?;
        let head = util::fs::read_regular_nofollow(&x.session().join("HEAD"), 4096).ok()?;
        let head = String::from_utf8_lossy(&head).trim().strip_prefix("ref: ").map(str::to_owned);
        let mut positional = args.iter().filter(|arg| !arg.starts_with('-')).skip(1).peekable();
        let mut names: Vec<String> = Vec::new();
        if positional.peek().is_none() {
            names.extend(head.clone());
        }
        for spec in positional {
            let source = spec.trim_start_matches('+').split(':').next().unwrap_or_default();
            match source {
                "" => {}
                "HEAD" => names.extend(head.clone()),
                name if name.starts_with("refs/") => names.push(name.to_owned()),
                name => names.extend([format!("refs/heads/{name}"), format!("refs/tags/{name}")]),
            }
        }
        let (name, ours) = names.into_iter().find_map(|name| {
            let ours = session.get(&name).filter(|ours| user.get(&name) != Some(*ours))?.clone();
            Some((name, ours))
        })?;
        let branch = name.trim_start_matches("refs/heads/").to_owned();
        // The user's is ahead of the session's: committed on the host meanwhile.
        if let Some(theirs) = user.get(&name) {
            if x.home.git(&["merge-base", "--is-ancestor", &ours, theirs], None).is_ok() {
                return Some(refuse(
                    format!(
                        "your {branch} moved on the host during the session (to {}); the session's is behind it and \
                         has nothing of its own to push",
                        &theirs[..12.min(theirs.len())]
                    ),
                    format!("take it first (`git merge --ff-only {theirs}`), then push again"),
                ));
            }
        }
        Some(refuse(
            format!("{branch} did not come home (above), so there is nothing of the session's to push"),
            "fix what the message above says, commit, then push again",
        ))
    }
}

fn sync(x: &ExecHome) -> Result<Vec<String>, Refusal> {
    check_home(&x.home)?;
    // The repository at the path is still the one this session was made for (not a
    // clone made again while the session ran).
    if sessions::session_id(&x.top).as_deref() != sessions::existing_id(&x.home.user_git).as_deref() {
        return Err(refuse(
            "the repository at this path is not the one this session was made for (was it cloned again?), so \
             nothing of the session comes into it",
            "end this session; the next `exec` puts the old session aside and starts a new one",
        ));
    }
    let session = x.session();
    let found = session_redirections(&session, &x.home.user_git_inside.join("objects"));
    if !found.is_empty() {
        return Err(refuse(
            format!("the session repository leads elsewhere, so nothing in it comes home: {}", found.join("; ")),
            format!(
                "remove those entries from .git inside the sandbox (the session repository, {})",
                session.display()
            ),
        ));
    }
    // `env`: more of git's environment (`NAME=value `), read by `/usr/bin/env`.
    let reader = |env: &str| {
        let mut prefix: String =
            x.view(&session, false).iter().map(|arg| util::single_quoted(arg)).collect::<Vec<_>>().join(" ");
        prefix.push(' ');
        // The agent can swap a file for a FIFO after the check above: the reader is ended
        // after a while rather than hold the sync (and the end of the session) forever.
        if Path::new(TIMEOUT).is_file() {
            prefix = format!("{TIMEOUT} --kill-after=5 {READER_SECS} {prefix}");
        }
        mirror::reader(&prefix, &format!("{env}{}", x.home.git.display()), Some("/nonexistent"))
    };
    // The submodules' commits first: the project's commits that come home may name them.
    let mut told = bring_modules(x, &session, &reader);
    // Nothing to bring (most commands move no ref, switch no branch and stash nothing):
    // decided from the files alone.
    let (user_head, session_head) = (read_head(&x.home.git_dir), read_head(&session));
    if let (Some(ours), Some(theirs)) = (list_session_refs(&session), list_session_refs(&x.home.user_git)) {
        let state = x.read_state().unwrap_or_default();
        let follows = user_head != session_head && state.base.head == user_head;
        if ours == theirs && !follows && super::new_stashes(&session, &state).is_empty() {
            return Ok(told);
        }
    }
    let mirror = Mirror { path: &x.mirror, git: &x.home.git, env: &x.home.env, reader: reader("") };
    let failed = |failed: mirror::Failed| refuse(failed.to_string(), "try again");
    mirror.configure(&x.home.user_git.join("config")).map_err(failed)?;
    let alternates = format!("{}\n", x.home.user_git.join("objects").display());
    util::fs::atomic_write(&x.mirror.join("objects/info/alternates"), alternates.as_bytes(), 0o644)
        .map_err(|err| refuse(format!("cannot write the broker's mirror: {err}"), "try again"))?;
    let user = user_refs(&x.home)?;
    let session_refs = session_refs(&x.home, &mirror, (&x.top, &session), &user)?;
    let mut state = x.read_state().unwrap_or_else(|| State::agreed(&user, read_head(&x.home.git_dir)));
    told.extend(super::bring_stashes(&x.home, &mirror, &session, &mut state));
    let others = super::other_checkouts(&x.home);
    let checkouts = Checkouts {
        user: user_head.as_ref().and_then(Head::branch),
        session: session_head.as_ref().and_then(Head::branch),
        others: &others,
    };
    let history = MirrorHistory { mirror: &mirror, brought: &state.brought };
    let decisions = session_repo::decide(&state.base, (&user, &session_refs), &checkouts, &history);
    if decisions.is_empty() && user_head == session_head {
        x.write_state(&state)?;
        return Ok(told);
    }
    let save = |state: &State| x.write_state(state);
    let refresh = |index: &Path, paths: &[String]| refresh_index(x, index, paths);
    let checkout = Checkout { shared_tree: true, others: &others, refresh: Some(&refresh) };
    let outcome = bring(&x.home, &mirror, &checkout, decisions, (&user, session_head.as_ref()), &mut state, &save)?;
    told.extend(outcome.told);
    // What the user moved, the session takes, in the view.
    if let Some(plan) = carry_plan(&x.home, &session, &outcome.carries) {
        match run_seed(x.seed_command(&session), &plan, INSTEAD) {
            Ok(()) => {
                outcome.carries.iter().for_each(|(decision, _)| state.base.settle(decision));
                x.write_state(&state)?;
            }
            Err(refusal) => told.push(format!("the session did not take the user's moves: {}", refusal.why)),
        }
    }
    Ok(told)
}

/// Refreshes the stat data of `paths` in the index at `index` (one the broker moved):
/// the host's git reads the work tree, which the agent writes, only in a view that
/// shows it and the user's git directories read-only, and a copy of that index.
fn refresh_index(x: &ExecHome, index: &Path, paths: &[String]) -> Result<(), String> {
    let Some(top) = x.home.work_tree.as_deref() else { return Ok(()) };
    if paths.is_empty() {
        return Ok(());
    }
    // In the push service's private directory; one sync at a time uses it.
    let dir = x.mirror.with_extension("index");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|err| err.to_string())?;
    let copy = dir.join("index");
    std::fs::copy(index, &copy).map_err(|err| err.to_string())?;
    let mut extra = x.git_installation.get_or_init(|| crate::mirror::git_installation(&x.home.git)).clone();
    extra.extend([x.home.user_git.clone(), x.home.git_dir.clone(), top.to_path_buf()]);
    let binds = [ViewBind { source: dir.clone(), at: dir.clone(), writable: true }];
    let view = mirror::view_args(&x.bwrap, &mirror::system_entries(), &extra, &binds);
    let mut command = Command::new(TIMEOUT);
    command
        .args(["--kill-after=5", &READER_SECS.to_string()])
        .args(&view)
        .arg(&x.home.git)
        .args(["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "safe.directory=*", "--git-dir"])
        .arg(&x.home.git_dir)
        .arg("--work-tree")
        .arg(top)
        .args(["add", "--refresh", "--"])
        .args(paths)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .env("GIT_INDEX_FILE", &copy)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let status = command.status().map_err(|err| err.to_string());
    let copied = match status {
        Ok(status) if status.success() => std::fs::copy(&copy, index).map(|_| ()).map_err(|err| err.to_string()),
        Ok(status) => Err(format!("git add --refresh: {status}")),
        Err(err) => Err(err),
    };
    let _ = std::fs::remove_dir_all(&dir);
    copied
}

/// Where the commits of the session's submodules are kept in the user's submodule
/// repositories.
pub const MODULE_REFS: &str = "refs/agent-sandbox/modules/";

/// The commits made in the session's submodule repositories (`modules/<path>`, seeded
/// beside the user's): for each branch or tag whose commit the user's submodule
/// repository lacks, its commits are fetched through the session's reader (every object
/// hashed, in a mirror of that submodule) and kept in the user's submodule repository
/// as [`MODULE_REFS`]`<ref>`. No branch of the user's submodule moves: the project's
/// commits that name them (their gitlinks) come home through the project's checks, and
/// then check out on the host (`git submodule update`). What to tell.
fn bring_modules(x: &ExecHome, session: &Path, reader: &dyn Fn(&str) -> String) -> Vec<String> {
    let mut told = Vec::new();
    for rel in super::module_dirs(&session.join("modules")) {
        let ours_dir = session.join("modules").join(&rel);
        let theirs_dir = x.home.user_git.join("modules").join(&rel);
        if !theirs_dir.join("objects").symlink_metadata().is_ok_and(|meta| meta.is_dir()) {
            told.push(format!(
                "submodule {rel}: your repository does not have it (first cloned inside), so commits made in it \
                 stay in the session; `git submodule update --init` on the host clones it from its URL"
            ));
            continue;
        }
        let Some(mut ours) = list_session_refs(&ours_dir) else { continue };
        // A submodule is mostly on a detached `HEAD`: its commit counts as a ref.
        let head = util::fs::read_regular_nofollow(&ours_dir.join("HEAD"), 4096).unwrap_or_default();
        let head = String::from_utf8_lossy(&head).trim().to_owned();
        if matches!(head.len(), 40 | 64) && head.bytes().all(|b| b.is_ascii_hexdigit()) {
            ours.insert("HEAD".into(), head.clone());
        }
        let theirs = list_session_refs(&theirs_dir).unwrap_or_default();
        let has = |sha: &str| {
            let dir = theirs_dir.display().to_string();
            x.home.git(&["--git-dir", &dir, "cat-file", "-e", &format!("{sha}^{{commit}}")], None).is_ok()
        };
        let new: Vec<(&String, &String)> =
            ours.iter().filter(|(name, sha)| theirs.get(*name) != Some(*sha) && !has(sha)).collect();
        if new.is_empty() {
            continue;
        }
        let failed = |why: String| format!("{rel}: its new commits stay in the session: {why}");
        let objects = x.home.user_git_inside.join("modules").join(&rel).join("objects");
        let found = session_redirections(&ours_dir, &objects);
        if !found.is_empty() {
            told.push(failed(format!("its repository leads elsewhere: {}", found.join("; "))));
            continue;
        }
        let path = x.mirror.with_extension("modules").join(rel.replace('/', "%2F"));
        // A submodule repository names its work tree (`core.worktree`, relative to where
        // it is in the user's `.git`), which the view does not show: `/` instead (git
        // reads that key from the file alone; the environment beats it).
        let mirror = Mirror { path: &path, git: &x.home.git, env: &x.home.env, reader: reader("GIT_WORK_TREE=/ ") };
        let alternates = format!("{}\n", theirs_dir.join("objects").display());
        let prepared = mirror.configure(&theirs_dir.join("config")).map_err(|err| err.to_string()).and_then(|()| {
            util::fs::atomic_write(&path.join("objects/info/alternates"), alternates.as_bytes(), 0o644)
                .map_err(|err| err.to_string())
        });
        if let Err(why) = prepared {
            told.push(failed(why));
            continue;
        }
        let source = format!("file://{}", ours_dir.display());
        let mut fetch = vec!["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--upload-pack"];
        let reader = mirror.reader.clone();
        fetch.push(&reader);
        fetch.push(&source);
        let refspecs: Vec<String> =
            new.iter().map(|(name, sha)| format!("+{sha}:refs/fetched/{}", name.trim_start_matches("refs/"))).collect();
        fetch.extend(refspecs.iter().map(String::as_str));
        if let Err(err) = mirror.git(&fetch) {
            told.push(failed(format!("they cannot be read (git: {})", util::terminal_safe(err.last_line()))));
            continue;
        }
        let receive = format!("{} receive-pack", x.home.receive_pack());
        let dir = theirs_dir.display().to_string();
        for (name, sha) in new {
            // A detached commit by its name: the next one is no branch's successor of it.
            let kept = match name.as_str() {
                "HEAD" => format!("{MODULE_REFS}commits/{sha}"),
                name => format!("{MODULE_REFS}{}", name.trim_start_matches("refs/")),
            };
            let refspec = format!("+{sha}:{kept}");
            match mirror.git(&["push", "--quiet", "--no-verify", "--receive-pack", &receive, &dir, &refspec]) {
                Ok(_) => told.push(format!(
                    "{rel}: {} ({}) is kept in your submodule repository as {kept}",
                    super::short(name),
                    &sha[..12.min(sha.len())]
                )),
                Err(err) => told.push(failed(err.stderr)),
            }
        }
        // The submodule's checkout is the session's (the work tree is shared): the user's
        // submodule repository's `HEAD` (detached) and index follow its commit, as the
        // project's follow the project's.
        let commit = match head.strip_prefix("ref: ") {
            Some(branch) => ours.get(branch).cloned(),
            None => ours.get("HEAD").cloned(),
        };
        let Some(commit) = commit.filter(|sha| has(sha)) else { continue };
        let current = x.home.git(&["--git-dir", &dir, "rev-parse", "-q", "--verify", "HEAD"], None).unwrap_or_default();
        if String::from_utf8_lossy(&current).trim() != commit {
            let moved = x.home.git(&["--git-dir", &dir, "update-ref", "--no-deref", "HEAD", &commit], None);
            if moved.is_ok() {
                let _ = x.home.git(&["--git-dir", &dir, "--work-tree", "/", "read-tree", &commit], None);
            }
        }
    }
    told
}
