//! Carrying out the sync's decisions (`session_repo::decide`) in the user's repository:
//! the session's tips sent through the checks, the refs moved by compare and swap, the
//! user's index moved by git's two-way merge (never rebuilt), `HEAD` following an
//! agent's switch only from where both agreed. What the session is to take from the
//! user's repository is returned for the caller, which writes the session as the
//! agent's user (a container) or in a view (`exec`).

use std::{
    collections::BTreeSet,
    io::Read,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use session_repo::sync::{decide_head, Decision, Head, HeadMove, History};

use super::{plain_ref, refuse, Home, RefUpdate, Refs, State, INCOMING, REFUSED, REFUSED_DIR, REFUSED_REFS, WAITING};
use crate::{mirror::Mirror, plan::Refusal};

/// The commits as the broker's mirror has them (the session's fetched, the user's as
/// its alternate).
pub(crate) struct MirrorHistory<'a> {
    pub mirror: &'a Mirror<'a>,
    pub brought: &'a BTreeSet<String>,
}

impl History for MirrorHistory<'_> {
    fn is_ancestor(&self, old: &str, new: &str) -> bool {
        self.mirror.git(&["merge-base", "--is-ancestor", old, new]).is_ok()
    }

    fn only_own(&self, old: &str, new: &str) -> bool {
        let range = format!("{new}..{old}");
        match self.mirror.git(&["rev-list", &range]) {
            Ok(out) => String::from_utf8_lossy(&out).lines().all(|sha| self.brought.contains(sha)),
            Err(_) => false,
        }
    }
    fn holds_dropped(&self, dropped: &str, kept: &str, tip: &str) -> bool {
        holds_dropped(&|args: &[&str]| self.mirror.git(args).ok(), dropped, kept, tip)
    }
}

/// [`History::holds_dropped`] by git (`git`: its stdout, `None` when it failed): `tip`
/// holds a dropped commit unless every merge base of `dropped` and `tip` is in `kept`'s
/// history. What cannot be told counts as holding one.
pub(crate) fn holds_dropped(git: &dyn Fn(&[&str]) -> Option<Vec<u8>>, dropped: &str, kept: &str, tip: &str) -> bool {
    let Some(bases) = git(&["merge-base", "--all", dropped, tip]) else {
        // No merge base (exit 1): nothing of `dropped` is in `tip`, if both are commits.
        let commit = |sha: &str| git(&["rev-parse", "-q", "--verify", &format!("{sha}^{{commit}}")]).is_some();
        return !(commit(dropped) && commit(tip));
    };
    !String::from_utf8_lossy(&bases).lines().all(|base| git(&["merge-base", "--is-ancestor", base, kept]).is_some())
}

/// What a sync did: the lines to tell, and the user's moves the session is to take
/// (each [`Decision::Carry`], as a ref update of the session's; settled in the base by
/// the caller once the session took them).
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub told: Vec<String>,
    pub carries: Vec<(Decision, RefUpdate)>,
}

/// `HEAD` as the files say, for the decision (`None`: neither a branch nor a commit).
pub(crate) fn read_head(git_dir: &Path) -> Option<Head> {
    let bytes = util::fs::read_regular_nofollow(&git_dir.join("HEAD"), 4096).ok()?;
    Head::parse(&String::from_utf8_lossy(&bytes))
}

/// Refreshes the stat data of `paths` in the index at the given path ([`Checkout::refresh`]).
pub(crate) type Refresh<'a> = dyn Fn(&Path, &[String]) -> Result<(), String> + 'a;

/// Where the broker brings commits: whether the work tree is the user's checkout (its
/// index and `HEAD` move with the branch), the branches the user's other checkouts
/// have, and how an index the broker moved gets its files' stat data back.
pub(crate) struct Checkout<'a> {
    pub shared_tree: bool,
    pub others: &'a [String],
    /// Refreshes the stat data of `paths` in the index at `index`, reading the work tree
    /// in a view of it alone (`exec`); `None`: left to the user's next `git status`.
    pub refresh: Option<&'a Refresh<'a>>,
}

/// Sends the tips of `decisions` into the user's repository through the checks (whose
/// hook and settings the caller has prepared), moves the refs and, with a shared work
/// tree, the index and `HEAD`; `save` keeps the state once they moved. `user` and
/// `session_head`: the user's refs and the session's `HEAD` the decisions were made from.
pub(crate) fn bring(
    home: &Home,
    mirror: &Mirror,
    checkout: &Checkout,

    decisions: Vec<Decision>,
    (user, session_head): (&Refs, Option<&Head>),
    state: &mut State,
    save: &dyn Fn(&State) -> Result<(), Refusal>,
) -> Result<Outcome, Refusal> {
    let user_head = read_head(&home.git_dir);
    let head_branch = user_head.as_ref().and_then(Head::branch).filter(|name| plain_ref(name).is_some());
    let mut outcome = Outcome::default();
    // One push per tip, so that a branch whose checks fail keeps no other from coming
    // home; a tip that failed before is not checked again.
    let mut decisions: Vec<(Decision, bool)> = decisions.into_iter().map(|decision| (decision, true)).collect();
    let mut refused_lines = Vec::new();
    for (decision, went_in) in &mut decisions {
        let (name, tip) = match decision {
            Decision::Bring { name, to: Some(tip), .. } | Decision::Wait { name, tip, .. } => {
                (name.clone(), tip.clone())
            }
            _ => continue,
        };
        let said = match state.failed.get(&tip) {
            Some(said) => Some(said.clone()),
            None => {
                let said = send(home, mirror, (&name, &tip), head_branch)?;
                if let Some(said) = &said {
                    keep_refused(home, mirror, (&name, &tip), said);
                }
                said
            }
        };
        if let Some(said) = said {
            *went_in = false;
            state.failed.insert(tip.clone(), said.clone());
            refused_lines.push(format!(
                "{} {REFUSED} (its commits stay in the session's repository; fix what they say and commit again; the \
                 user can take them with `agent-sandbox git adopt {}`):\n{said}",
                short(&name),
                short(&name)
            ));
        }
    }
    // The user's checked-out branch moves only with its index, by a two-way merge that
    // keeps what is staged; where that conflicts, the branch waits.
    let mut index_move = None;
    if checkout.shared_tree {
        for (decision, went_in) in &mut decisions {
            let Decision::Bring { name, from, to: Some(to) } = decision else { continue };
            if !*went_in || Some(name.as_str()) != head_branch {
                continue;
            }
            match IndexMove::prepare(home, from.as_deref(), to, checkout.refresh)? {
                Ok(moved) => index_move = Some(moved),
                Err(why) => {
                    let (name, tip) = (name.clone(), to.clone());
                    *decision = Decision::Wait { name, tip, why };
                }
            }
        }
    }
    // The commits that come home (for the record of what is the session's own).
    let mut input: String = decisions
        .iter()
        .filter_map(|(decision, went_in)| match decision {
            Decision::Bring { to: Some(to), .. } if *went_in => Some(format!("{to}\n")),
            _ => None,
        })
        .collect();
    let new = match input.is_empty() {
        true => Vec::new(),
        false => {
            input.extend(user.values().map(|sha| format!("^{sha}\n")));
            mirror
                .git_with_input(&["rev-list", "--stdin"], input.as_bytes())
                .map_err(|failed| refuse(failed.to_string(), "try again"))?
        }
    };
    let mut transaction = String::from("start\n");
    let zero = "0".repeat(40);
    let mut told = Vec::new();
    for (decision, went_in) in &decisions {
        match decision {
            Decision::Bring { name, from, to: Some(to) } if *went_in => {
                transaction.push_str(&format!("update {name} {to} {}\n", from.as_deref().unwrap_or(&zero)));
                transaction.push_str(&format!("delete {INCOMING}{}\n", name.trim_start_matches("refs/")));
                told.push(format!("{} is now {} in the user's repository", short(name), &to[..12.min(to.len())]));
            }
            Decision::Bring { name, from: Some(from), to: None } => {
                transaction.push_str(&format!("delete {name} {from}\n"));
                told.push(format!("{} was deleted in the user's repository", short(name)));
            }
            Decision::Wait { name, tip, why } if *went_in => {
                // Named as the ref is, `heads/` and all: the user's git is to find it.
                let waiting = format!("{WAITING}{}", name.trim_start_matches("refs/"));
                transaction.push_str(&format!("update {waiting} {tip}\n"));
                transaction.push_str(&format!("delete {INCOMING}{}\n", name.trim_start_matches("refs/")));
                told.push(format!("{} did not come home ({why}); it waits as {waiting}", short(name)));
            }
            Decision::Carry { name, from, to, why } => {
                let update = RefUpdate { name: name.clone(), old: from.clone(), new: to.clone() };
                outcome.carries.push((decision.clone(), update));
                let now = to.as_deref().map_or("deleted".to_owned(), |to| format!("at {}", &to[..12.min(to.len())]));
                match why {
                    Some(why) => told.push(format!("{} is {now} in the session again: {why}", short(name))),
                    None => told.push(format!("{} follows the user's repository ({now})", short(name))),
                }
            }
            _ => {}
        }
    }
    // A branch that came home, or that both sides now agree on, waits no more, and what
    // its checks once refused is resolved: its kept tips go. One the new value does not
    // contain (the agent rebased it, or went another way) is kept as
    // `refs/agent-sandbox/resolved/…`, which `git adopt` does not list: nothing the user
    // could name is dropped.
    let kept = super::parse_refs(
        &home.git(&["for-each-ref", "--format=%(objectname) %(refname)", WAITING, REFUSED_REFS], None)?,
    );
    let mut resolved: Vec<String> = Vec::new();
    for (decision, went_in) in &decisions {
        let (name, value) = match decision {
            Decision::Bring { name, to: Some(value), .. } | Decision::Agree { name, value: Some(value) }
                if *went_in =>
            {
                (name, value)
            }
            _ => continue,
        };
        let rel = name.trim_start_matches("refs/");
        for kept_name in [format!("{WAITING}{rel}"), format!("{REFUSED_REFS}{rel}")] {
            let Some(tip) = kept.get(&kept_name) else { continue };
            if tip != value && mirror.git(&["merge-base", "--is-ancestor", tip, value]).is_err() {
                let superseded = kept_name.replacen("refs/agent-sandbox/", RESOLVED, 1);
                transaction.push_str(&format!("update {superseded} {tip}\n"));
            }
            transaction.push_str(&format!("delete {kept_name} {tip}\n"));
            resolved.push(kept_name);
        }
    }
    transaction.push_str("prepare\ncommit\n");
    let moved = home.git(&["update-ref", "--create-reflog", "--stdin"], Some(transaction.as_bytes()));
    if let Err(refusal) = moved {
        if let Some(index_move) = index_move {
            index_move.abandon();
        }
        return Err(refuse(
            format!("the user's repository changed while the commits came in, so no ref moved: {}", refusal.why),
            "commit again",
        ));
    }
    if let Some(index_move) = index_move {
        if let Err(err) = index_move.install() {
            told.push(format!("the user's index could not be moved with the branch ({err}): `git status` shows it"));
        }
    }
    for kept_name in resolved.iter().filter_map(|name| name.strip_prefix(REFUSED_REFS)) {
        let _ = std::fs::remove_file(home.user_git.join(REFUSED_DIR).join(kept_name));
    }
    state.brought.extend(String::from_utf8_lossy(&new).lines().map(str::to_owned));
    for (decision, went_in) in &decisions {
        if *went_in && !matches!(decision, Decision::Carry { .. }) {
            state.base.settle(decision);
        }
    }
    if checkout.shared_tree {
        told.extend(follow_head(home, (user_head.as_ref(), session_head), checkout, state)?);
    }
    save(state)?;
    told.extend(refused_lines);
    outcome.told = told;
    Ok(outcome)
}

/// The session's stash entries (from `git stash` inside, which takes the work tree's
/// changes, the user's included) not yet in the user's stash, oldest first: object name
/// and message.
pub(crate) fn new_stashes(session: &Path, state: &State) -> Vec<(String, String)> {
    let mut entries: Vec<(String, String)> = super::sessions::stash_entries(session)
        .into_iter()
        .filter_map(|entry| {
            let (sha, message) = entry.split_once(' ')?;
            (!state.stashed.contains(sha)).then(|| (sha.to_owned(), message.to_owned()))
        })
        .collect();
    entries.reverse();
    entries
}

/// Brings the session's new stash entries into the user's stash (`git stash list` on the
/// host shows them): each read into the mirror by the session's reader (every object
/// hashed), pushed into the user's repository without checks (no branch names it), and
/// stored there as a stash entry. What to tell.
pub(crate) fn bring_stashes(home: &Home, mirror: &Mirror, session: &Path, state: &mut State) -> Vec<String> {
    let mut told = Vec::new();
    let source = format!("file://{}", session.display());
    let receive = format!("{} receive-pack", home.receive_pack());
    let user_git = home.user_git.display().to_string();
    for (sha, message) in new_stashes(session, state) {
        let kept = format!("refs/agent-sandbox/stashed/{sha}");
        let refspec = format!("+{sha}:{kept}");
        let fetch =
            ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--upload-pack", &mirror.reader, &source];
        let fetched = mirror.git(&[&fetch[..], &[refspec.as_str()]].concat());
        let pushed = fetched.and_then(|_| {
            mirror.git(&["push", "--quiet", "--no-verify", "--receive-pack", &receive, &user_git, &refspec])
        });
        let message = format!("agent-sandbox, from the session: {}", util::terminal_safe(&message));
        let stored = match pushed {
            Ok(_) => home.git(&["stash", "store", "-m", &message, &sha], None).map_err(|refusal| refusal.why),
            Err(failed) => Err(failed.last_line().to_owned()),
        };
        let _ = home.git(&["update-ref", "-d", &kept], None);
        match stored {
            Ok(_) => {
                state.stashed.insert(sha.clone());
                told.push(format!(
                    "the session's stash entry {} (\"{}\") is in the user's stash too: on the host, `git stash list` \
                     shows it and `git stash apply` takes it back",
                    &sha[..12.min(sha.len())],
                    message.trim_start_matches("agent-sandbox, from the session: ")
                ));
            }
            Err(why) => told.push(format!(
                "the session's stash entry {} could not be put in the user's stash ({}): it stays in the session \
                 (`agent-sandbox git sessions` lists it)",
                &sha[..12.min(sha.len())],
                util::terminal_safe(&why)
            )),
        }
    }
    told
}

/// The user's `HEAD` follows the session's switch to a branch, only from where both
/// last agreed, and with the index moved by a two-way merge; the base records where
/// both stand. What to tell.
fn follow_head(
    home: &Home,
    (user, session): (Option<&Head>, Option<&Head>),
    checkout: &Checkout,
    state: &mut State,
) -> Result<Vec<String>, Refusal> {
    let (Some(user), Some(session)) = (user, session) else { return Ok(Vec::new()) };
    let refs = super::user_refs(home)?;
    match decide_head(state.base.head.as_ref(), user, session, &refs, checkout.others) {
        HeadMove::Stay if user == session => state.base.head = Some(user.clone()),
        HeadMove::Stay | HeadMove::Carry(_) => {}
        HeadMove::Follow(branch) => {
            let to = refs.get(&branch).cloned().unwrap_or_default();
            return Ok(match IndexMove::prepare(home, user.commit(&refs), &to, checkout.refresh)? {
                Ok(index_move) => {
                    if let Err(refusal) = home.git(&["symbolic-ref", "HEAD", &branch], None) {
                        index_move.abandon();
                        return Err(refusal);
                    }
                    index_move.install().map_err(|err| {
                        refuse(format!("the user's index could not be moved: {err}"), "run `git status`")
                    })?;
                    state.base.head = Some(session.clone());
                    vec![format!("the user's checkout follows the session to {}", short(&branch))]
                }
                Err(why) => vec![format!("the user's checkout stays where it is, not on {}: {why}", short(&branch))],
            });
        }
    }
    Ok(Vec::new())
}

/// The user's index moved from one commit's tree to another's by git's two-way merge
/// (`read-tree -m`, no work tree touched), written aside while agent-sandbox holds
/// `index.lock` as git's own commands do, and put in place once the refs moved.
pub(crate) struct IndexMove {
    lock: PathBuf,
    new: PathBuf,
    index: PathBuf,
}

/// Where a kept tip that its branch's new value does not contain goes once resolved
/// (`resolved/waiting/heads/main`), its reflog keeping each earlier one.
const RESOLVED: &str = "refs/agent-sandbox/resolved/";

/// Where the moved index is written, beside the user's.
const NEW_INDEX: &str = "agent-sandbox-index.new";

impl IndexMove {
    /// `Ok(Err(why))`: what is staged conflicts with the move, or the user's git holds
    /// the index now.
    pub(crate) fn prepare(
        home: &Home,
        from: Option<&str>,
        to: &str,
        refresh: Option<&Refresh<'_>>,
    ) -> Result<Result<IndexMove, String>, Refusal> {
        let index = home.git_dir.join("index");
        let lock = home.git_dir.join("index.lock");
        let new = home.git_dir.join(NEW_INDEX);
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&lock) {
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                return Ok(Err(format!(
                    "git is working in the user's index now ({} exists): it comes home at the next sync, or remove \
                     that file if no git runs",
                    lock.display()
                )));
            }
            Err(err) => return Err(refuse(format!("cannot lock {}: {err}", index.display()), "try again")),
        }
        let moved = IndexMove { lock, new, index };
        let copied = match util::fs::read_regular_nofollow(&moved.index, 1 << 30) {
            Ok(bytes) => util::fs::atomic_write(&moved.new, &bytes, 0o644),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(err),
        };
        if let Err(err) = copied {
            moved.abandon();
            return Err(refuse(format!("cannot read the user's index: {err}"), "try again"));
        }
        let from = match from {
            Some(from) => from.to_owned(),
            None => String::from_utf8_lossy(&home.git(&["mktree"], Some(b""))?).trim().to_owned(),
        };
        match home.git_with_index(&["read-tree", "-m", &from, to], &moved.new) {
            Ok(_) => {
                // The entries the move changed have no stat data: without it, the user's
                // next `git reset --keep` takes them for changed files.
                if let Some(refresh) = refresh {
                    let listed = home.git(&["diff", "--no-renames", "--name-only", "-z", &from, to], None)?;
                    let paths: Vec<String> = listed
                        .split(|b| *b == 0)
                        .filter(|path| !path.is_empty())
                        .map(|path| String::from_utf8_lossy(path).into_owned())
                        .collect();
                    // Best effort: without it `git status` refreshes them.
                    let _ = refresh(&moved.new, &paths);
                }
                Ok(Ok(moved))
            }
            Err(refusal) => {
                moved.abandon();
                Ok(Err(format!(
                    "the user's staged changes conflict with it ({}): it comes home once they are committed or \
                     unstaged",
                    refusal.why.lines().find(|line| line.contains("error:")).unwrap_or("git read-tree -m").trim()
                )))
            }
        }
    }

    fn install(self) -> std::io::Result<()> {
        let renamed = std::fs::rename(&self.new, &self.index);
        let _ = std::fs::remove_file(&self.lock);
        renamed
    }

    fn abandon(self) {
        let _ = std::fs::remove_file(&self.new);
        let _ = std::fs::remove_file(&self.lock);
    }
}

/// Keeps a refused tip in the user's repository under [`REFUSED_REFS`] (no checks: no
/// branch of the user's points there) with what the checks said, for `git adopt`.
/// Best effort: the refusal stands whether or not it could be kept.
fn keep_refused(home: &Home, mirror: &Mirror, (name, tip): (&str, &str), said: &str) {
    let rel = name.trim_start_matches("refs/");
    let refspec = format!("+{tip}:{REFUSED_REFS}{rel}");
    // With a reflog: a tip refused before, which this one replaces, stays nameable.
    let receive = format!("{} -c core.logAllRefUpdates=always receive-pack", home.receive_pack());
    let user_git = home.user_git.display().to_string();
    let kept = mirror.git(&["push", "--quiet", "--no-verify", "--receive-pack", &receive, &user_git, &refspec]);
    if kept.is_ok() {
        let file = home.user_git.join(REFUSED_DIR).join(rel);
        if let Some(dir) = file.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = util::fs::atomic_write(&file, said.as_bytes(), 0o644);
    }
}

/// Pushes the session's `tip` of `name` from the mirror into the user's repository (under
/// [`INCOMING`]), through the hook guard's checks. `None`: it went in; else what the
/// checks (or git) said.
fn send(
    home: &Home,
    mirror: &Mirror,
    (name, tip): (&str, &str),
    head_branch: Option<&str>,
) -> Result<Option<String>, Refusal> {
    // By the mirror's ref name (the session's, just fetched), so that the checks name the
    // branch; a tip the mirror has under no such name goes by its object name.
    let current = mirror.git(&["rev-parse", "-q", "--verify", name]).unwrap_or_default();
    let source = if String::from_utf8_lossy(&current).trim() == tip { name } else { tip };
    let incoming = format!("{INCOMING}{}", name.trim_start_matches("refs/"));
    // One left by a sync that never moved the refs (its `exec` killed after the push, or
    // a ref the user moved meanwhile) would make the push a rewrite of it, which the
    // hook guard refuses, for this tip and every later one: the branch never came home
    // again, told as refused by its checks. Only the broker writes there, and nothing
    // vouches for what is there (the checks ignore `refs/agent-sandbox/`).
    home.git(&["update-ref", "-d", &incoming], None)?;
    let refspec = format!("{source}:{incoming}");
    // The user's repository shows the push only the ref it moves and `HEAD`'s branch:
    // enough for the pack to hold just the new commits, and a repository of thousands
    // of refs is not listed and walked for each push.
    let mut shown = vec![format!("!{INCOMING}"), format!("!{name}")];
    shown.extend(head_branch.map(|branch| format!("!{branch}")));
    let receive = format!(
        "{} -c receive.hideRefs=refs/ {} receive-pack",
        home.receive_pack(),
        shown
            .iter()
            .map(|entry| format!("-c {}", util::single_quoted(&format!("receive.hideRefs={entry}"))))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let hooks = home.hooks.display().to_string();
    let mut command = Command::new(&home.git);
    command
        .args(["-c", &format!("core.hooksPath={hooks}"), "--git-dir"])
        .arg(mirror.path)
        .args(["push", "--quiet", "--receive-pack", &receive])
        .arg(&home.user_git)
        .arg(&refspec)
        .current_dir(home.work_tree.as_deref().unwrap_or(mirror.path))
        .env_clear()
        .envs(mirror.env.iter().map(|(name, value)| (name, value)))
        .env(crate::hook::SETTINGS_VAR, &home.settings)
        // Into the user's own repository: not a publication.
        .env(super::BRINGING_HOME, "1")
        .stdin(Stdio::null());
    if let Some(global) = &home.global {
        command.env("GIT_CONFIG_GLOBAL", global);
    }
    within_checks_limit(command)
}

/// How long one tip's checks may take before the broker ends them and counts the tip as
/// refused: a check runs the session's code, which may never end, and `exec` waits for
/// the last sync at its end.
const CHECKS_LIMIT: Duration = Duration::from_secs(600);

/// Runs the push `command` (its own process group, so that the checks it starts end
/// with it) for at most [`CHECKS_LIMIT`]. `None`: it went in; else what it said.
fn within_checks_limit(mut command: Command) -> Result<Option<String>, Refusal> {
    use std::os::unix::process::CommandExt as _;
    let mut child = command
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| refuse(format!("cannot run git: {err}"), "check that git runs"))?;
    let stderr = child.stderr.take();
    let (sender, said) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut stderr) = stderr {
            let _ = stderr.read_to_end(&mut bytes);
        }
        let _ = sender.send(bytes);
    });
    let deadline = std::time::Instant::now() + CHECKS_LIMIT;
    let status = util::wait_until(&mut child, deadline, Duration::from_millis(20)).ok().flatten();
    if status.is_none() {
        // SAFETY: kill(2) on the group of a child this function started and has not
        // reaped.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
        let _ = child.wait();
    }
    // A process that left the group could hold the pipe open: not waited for long.
    let said = said.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
    let said = String::from_utf8_lossy(&said).trim().to_owned();
    Ok(match status {
        Some(status) if status.success() => None,
        Some(_) => Some(said),
        None => Some(format!("its checks did not end within {} s, so they were ended\n{said}", CHECKS_LIMIT.as_secs())),
    })
}

/// The branches the user's other checkouts of this repository have (`git worktree
/// list`, the work tree at `home.work_tree` left out): a session neither moves them nor
/// switches to them. None without linked worktrees (no process then).
pub(crate) fn other_checkouts(home: &Home) -> Vec<String> {
    other_checkout_paths(home).into_iter().map(|(branch, _)| branch).collect()
}

/// [`other_checkouts`], each with its work tree's path.
pub(crate) fn other_checkout_paths(home: &Home) -> Vec<(String, String)> {
    let Some(ours) = home.work_tree.as_deref() else { return Vec::new() };
    if !home.user_git.join("worktrees").symlink_metadata().is_ok_and(|meta| meta.is_dir()) {
        return Vec::new();
    }
    let Ok(listing) = home.git(&["worktree", "list", "--porcelain", "-z"], None) else { return Vec::new() };
    let ours = ours.canonicalize().unwrap_or_else(|_| ours.to_path_buf());
    let mut out = Vec::new();
    let mut theirs = None;
    for field in String::from_utf8_lossy(&listing).split('\0') {
        if let Some(path) = field.strip_prefix("worktree ") {
            let other = Path::new(path).canonicalize().unwrap_or_else(|_| PathBuf::from(path)) != ours;
            theirs = other.then(|| path.to_owned());
        } else if let (Some(branch), Some(path)) = (field.strip_prefix("branch "), &theirs) {
            out.push((branch.to_owned(), path.clone()));
        }
    }
    out
}

pub(crate) fn short(name: &str) -> &str {
    name.strip_prefix("refs/heads/").or_else(|| name.strip_prefix("refs/")).unwrap_or(name)
}
