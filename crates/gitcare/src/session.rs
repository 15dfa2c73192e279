//! The baseline between start and exit, kept on disk in agent-sandbox's state directory
//! (which no sandbox can see), one per project:
//!
//! ```text
//! sessions/<hash of the project root>/
//!   lock            flock'ed around every start and exit check
//!   baseline.json   the watch and the state every running session is checked against
//!   <pid>-<n>.live  one per running session, flock'ed for its whole life
//!   agent-commits   every commit made while sessions ran (tracked when the project is a
//!                   repository), one id a line; kept across sessions
//!   pending-tips    the ref tips at the start of sessions whose commits were never
//!                   recorded (killed): the next start begins from them
//!   masked.json     what the last start masked, by inode (`session::mask_record`)
//! ```
//!
//! Tracked commits let pre-push tell a human's own commits (reachable from the refs when
//! the sandbox started, and never made in a session) from an agent's: the first are not
//! checked again, the second always are, in whichever later session they are pushed.
//!
//! Overlapping sessions share one baseline: the state when the first of them started, as
//! amended by each exit check (whose quarantines leave only accepted changes). When the
//! last one ends the baseline is removed, so the user's own work between sessions is
//! never taken for a plant. A baseline with no live session means its session never ran
//! its exit check (killed, machine restarted, a second signal): the next start checks
//! against it first, before anything reads the repository.

use std::{
    fs::File,
    os::unix::fs::DirBuilderExt,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::{codec, diff, walk::Found, Action, State, Watch};

/// A running session's registration; [`finish`] ends it. Dropping it without `finish`
/// leaves the baseline for the next start to check against.
pub struct Session {
    dir: PathBuf,
    live: PathBuf,
    _live_lock: File,
    /// With commit tracking: the ref tips before the earliest running session started
    /// (none known: empty, so nothing is exempt).
    pub known_commits: Vec<String>,
    /// With commit tracking: the commits earlier sessions made.
    pub agent_commits: Vec<String>,
}

/// How long reading the repository's refs may take: a ref the agent replaced with a FIFO
/// must not hold up the start or the exit check.
const REFS_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Serialize, Deserialize)]
struct Saved {
    #[serde(with = "codec::path")]
    project_root: PathBuf,
    common_dir: Option<String>,
    extra: Vec<String>,
    #[serde(default)]
    host_files: Vec<String>,
    #[serde(default)]
    copy_rules: Vec<String>,
    #[serde(default)]
    copy_exempt: Vec<String>,
    #[serde(default)]
    session_repository: bool,
    /// The ref tips at the baseline's start, when commits are tracked.
    #[serde(default)]
    ref_tips: Option<Vec<String>>,
    state: State,
}

impl Saved {
    fn new(watch: &Watch, state: State) -> Saved {
        Saved {
            project_root: watch.project_root.clone(),
            common_dir: watch.common_dir.as_deref().map(codec::encode),
            extra: watch.extra.iter().map(|path| codec::encode(path)).collect(),
            host_files: watch.host_files.iter().map(|path| codec::encode(path)).collect(),
            copy_rules: watch.copy_rules.iter().map(|path| codec::encode(path)).collect(),
            copy_exempt: watch.copy_exempt.iter().map(|name| codec::encode(Path::new(name))).collect(),
            session_repository: watch.session_repository,
            ref_tips: None,
            state,
        }
    }

    fn watch(&self) -> Option<Watch> {
        Some(Watch {
            project_root: self.project_root.clone(),
            common_dir: match &self.common_dir {
                Some(text) => Some(codec::decode(text)?),
                None => None,
            },
            extra: self.extra.iter().map(|text| codec::decode(text)).collect::<Option<_>>()?,
            host_files: self.host_files.iter().map(|text| codec::decode(text)).collect::<Option<_>>()?,
            copy_rules: self.copy_rules.iter().map(|text| codec::decode(text)).collect::<Option<_>>()?,
            copy_exempt: self
                .copy_exempt
                .iter()
                .map(|text| codec::decode(text).map(PathBuf::into_os_string))
                .collect::<Option<_>>()?,
            session_repository: self.session_repository,
        })
    }
}

/// The directory of `project_root`'s state (the session crate keeps its record of masked
/// files there too).
pub fn project_dir(state_dir: &Path, project_root: &Path) -> PathBuf {
    sessions_dir(state_dir, project_root)
}

fn sessions_dir(state_dir: &Path, project_root: &Path) -> PathBuf {
    state_dir.join("sessions").join(format!("{:016x}", util::fnv1a(project_root.as_os_str().as_encoded_bytes())))
}

/// Before anything reads the project's repository: if a session in `project_root` ended
/// without its exit check (a baseline, and no live session), runs that check now, on a
/// full fail-closed walk of the work tree. Returns its actions (already carried out) and
/// how many paths could be neither moved aside nor deleted.
pub fn recover(state_dir: &Path, project_root: &Path) -> std::io::Result<(Vec<Action>, usize)> {
    let dir = sessions_dir(state_dir, project_root);
    if !dir.is_dir() {
        return Ok((Vec::new(), 0));
    }
    let _lock = util::fs::lock(&dir.join("lock"), true)?.expect("a blocking lock is always taken");
    if live_sessions(&dir)? > 0 {
        return Ok((Vec::new(), 0));
    }
    Ok(check_stale(&dir, project_root))
}

fn check_stale(dir: &Path, project_root: &Path) -> (Vec<Action>, usize) {
    let baseline = dir.join("baseline.json");
    if baseline.symlink_metadata().is_err() {
        return (Vec::new(), 0);
    }
    let Some(saved) = load(&baseline) else {
        util::say!(
            "agent-sandbox: WARNING: {} cannot be read: the last session's exit check may not have run; inspect the \
             project's git metadata (nested .git entries, .git/config, hooks) before trusting it",
            baseline.display()
        );
        let _ = std::fs::remove_file(&baseline);
        return (Vec::new(), 0);
    };
    let Some(watch) = saved.watch().filter(|watch| watch.project_root == project_root) else {
        let _ = std::fs::remove_file(&baseline);
        return (Vec::new(), 0);
    };
    let mut found = Found::default();
    crate::walk::walk(project_root, &watch.copy_names(), &mut found);
    let now = crate::observe(&watch, &found);
    let actions = diff(&watch, &saved.state, &now);
    let mut stuck = 0;
    if !actions.is_empty() {
        util::say!(
            "agent-sandbox: WARNING: the last session in {} ended without its exit check (it was killed, or the \
             machine restarted); checking its git metadata now",
            project_root.display()
        );
        stuck = crate::apply(&actions);
    }
    // Its commits were never recorded: the next tracked start begins from its tips.
    if let Some(tips) = &saved.ref_tips {
        let _ = keep_pending(dir, tips);
    }
    let _ = std::fs::remove_file(&baseline);
    (actions, stuck)
}

const AGENT_COMMITS: &str = "agent-commits";
const PENDING_TIPS: &str = "pending-tips";

/// Leaves `tips` for the next start to begin from, unless older ones wait there already
/// (those cover more).
fn keep_pending(dir: &Path, tips: &[String]) -> std::io::Result<()> {
    let pending = dir.join(PENDING_TIPS);
    if pending.exists() {
        return Ok(());
    }
    util::fs::atomic_write(&pending, tips.join("\n").as_bytes(), 0o600)
}

fn read_ids(path: &Path) -> Vec<String> {
    let bytes = util::fs::read_regular(path, 1 << 30).unwrap_or_default();
    String::from_utf8_lossy(&bytes).lines().filter(|line| !line.is_empty()).map(str::to_owned).collect()
}

/// Records the commits made since `tips` in `agent-commits`. Returns false when the
/// repository could not be read in time (the tips then stay pending).
fn record_commits(dir: &Path, project_root: &Path, tips: Vec<String>) -> bool {
    let root = project_root.to_path_buf();
    let Some(new) = util::within(REFS_LIMIT, move || gitfacts::new_commits(&root, &tips)) else {
        return false;
    };
    if !new.is_empty() {
        let mut all = read_ids(&dir.join(AGENT_COMMITS));
        all.extend(new);
        all.sort();
        all.dedup();
        let mut text = all.join("\n");
        text.push('\n');
        if util::fs::atomic_write(&dir.join(AGENT_COMMITS), text.as_bytes(), 0o600).is_err() {
            return false;
        }
    }
    true
}

/// Registers a session for `watch.project_root` and, unless other sessions are running
/// there (whose baseline it shares), saves the baseline of the work tree as `found`.
/// With `track_commits`, the session also learns which commits are the user's
/// ([`Session::known_commits`], [`Session::agent_commits`]).
pub fn begin(
    state_dir: &Path,
    watch: &Watch,
    found: impl Fn() -> Found,
    track_commits: bool,
) -> std::io::Result<Session> {
    let dir = sessions_dir(state_dir, &watch.project_root);
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    let _lock = util::fs::lock(&dir.join("lock"), true)?.expect("a blocking lock is always taken");
    let known = if live_sessions(&dir)? == 0 {
        let (actions, _) = check_stale(&dir, &watch.project_root);
        let found = if actions.is_empty() {
            found()
        } else {
            let mut fresh = Found::default();
            crate::walk::walk(&watch.project_root, &watch.copy_names(), &mut fresh);
            fresh
        };
        let mut saved = Saved::new(watch, crate::observe(watch, &found));
        if track_commits {
            let pending = dir.join(PENDING_TIPS);
            saved.ref_tips = if pending.exists() {
                Some(read_ids(&pending))
            } else {
                let root = watch.project_root.clone();
                // Unreadable in time: none known, so every commit counts as the agent's.
                Some(util::within(REFS_LIMIT, move || gitfacts::ref_tips(&root)).unwrap_or_default())
            };
        }
        save(&dir.join("baseline.json"), &saved)?;
        saved.ref_tips
    } else {
        // Sharing the running sessions' baseline: their start is this one's too.
        load(&dir.join("baseline.json")).and_then(|saved| saved.ref_tips)
    };
    let (known_commits, agent_commits) = if track_commits {
        (known.unwrap_or_default(), read_ids(&dir.join(AGENT_COMMITS)))
    } else {
        (Vec::new(), Vec::new())
    };
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let live = dir.join(format!("{}-{stamp}.live", std::process::id()));
    std::fs::write(&live, b"")?;
    let live_lock =
        util::fs::lock(&live, false)?.ok_or_else(|| std::io::Error::other("a new session file is locked"))?;
    Ok(Session { dir, live, _live_lock: live_lock, known_commits, agent_commits })
}

/// The parts of [`finish`], in order, each named to `phase` as it ends (for the caller's
/// timing): waiting for the lock and reading the baseline, listing the tree
/// (`found_now`), reading its git files, comparing and moving aside, and the records
/// (commits, baseline) of the session's end.
pub const FINISH_PHASES: [&str; 5] = ["baseline", "list", "observe", "apply", "records"];

/// The exit check: compares the work tree now (`found_now`) with the shared baseline,
/// carries out what it finds, and ends the session. Returns the actions and how many
/// paths could be neither moved aside nor deleted. `phase` is told each of
/// [`FINISH_PHASES`] as it ends.
pub fn finish(
    session: Session,
    watch: &Watch,
    found_now: impl FnOnce() -> Found,
    phase: &mut dyn FnMut(&'static str),
) -> std::io::Result<(Vec<Action>, usize)> {
    let [baseline_phase, list_phase, observe_phase, apply_phase, records_phase] = FINISH_PHASES;
    let _lock = util::fs::lock(&session.dir.join("lock"), true)?.expect("a blocking lock is always taken");
    let baseline = session.dir.join("baseline.json");
    let saved = load(&baseline).ok_or_else(|| {
        std::io::Error::other(format!("the session baseline {} is gone or unreadable", baseline.display()))
    })?;
    let old_watch = saved.watch().unwrap_or_else(|| watch.clone());
    phase(baseline_phase);
    let found = found_now();
    phase(list_phase);
    let now = crate::observe(&old_watch, &found);
    phase(observe_phase);
    let actions = diff(&old_watch, &saved.state, &now);
    let stuck = crate::apply(&actions);
    phase(apply_phase);
    let Session { dir, live, _live_lock, .. } = session;
    let _ = std::fs::remove_file(&live);
    drop(_live_lock);
    // With other sessions still running the baseline stays as it is: a second look now
    // would take in what their agents wrote meanwhile (a plant put back right after this
    // check moved it). What this check accepted is accepted again by theirs, by the same
    // rules.
    if live_sessions(&dir)? == 0 {
        if let Some(tips) = saved.ref_tips {
            let pending = dir.join(PENDING_TIPS);
            if record_commits(&dir, &old_watch.project_root, tips.clone()) {
                let _ = std::fs::remove_file(&pending);
            } else {
                keep_pending(&dir, &tips)?;
            }
        }
        std::fs::remove_file(&baseline)?;
    }
    phase(records_phase);
    Ok((actions, stuck))
}

fn load(path: &Path) -> Option<Saved> {
    let bytes = util::fs::read_regular(path, 1 << 30).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn save(path: &Path, saved: &Saved) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(saved).map_err(std::io::Error::other)?;
    util::fs::atomic_write(path, &bytes, 0o600)
}

/// How many other sessions hold their `.live` lock; removes the files of dead ones.
fn live_sessions(dir: &Path) -> std::io::Result<usize> {
    let mut live = 0;
    for entry in std::fs::read_dir(dir)?.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|ext| ext != "live") {
            continue;
        }
        match util::fs::lock(&path, false) {
            Ok(Some(_)) => {
                let _ = std::fs::remove_file(&path);
            }
            Ok(None) => live += 1,
            Err(_) => {}
        }
    }
    Ok(live)
}
