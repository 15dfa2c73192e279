//! The sync's model test on real repositories, through the real broker: random
//! interleavings of the user's git on the host and the agent's in the session repository
//! (`hostpush::home::exec`, its views in bwrap), with syncs and starts between them,
//! and after every sync the invariants read off the real repositories:
//! - nothing the user could name (refs, reflogs, the stash, the broker's kept tips) is
//!   lost;
//! - a user ref moves only by a fast-forward, a rewrite of commits the session brought,
//!   or the deletion of a branch the session made; a branch the user deleted stays so;
//! - the user's `HEAD` moves only from where both last agreed;
//! - what the user staged stays staged, and the index follows the branch elsewhere.
//!
//! 200 cases here; `AGENT_SANDBOX_MODEL_CASES` sets another number (`cargo xtask soak`
//! runs 2,000). The checks are a pre-push hook that refuses a tip whose tree has
//! `BROKEN`: the hook guard's own checks have tests of their own.

use std::{
    collections::{BTreeMap, BTreeSet},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::Command,
};

use hostpush::home::{
    exec::{Broker, ExecHome},
    Home,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Action {
    UserCommit(u8),
    UserStage(u8),
    /// Part of a file staged, the rest not (as `git add -p` leaves it).
    UserStagePart(u8),
    UserAmend(u8),
    /// `rm -rf proj && git init proj`: another repository at the same path.
    Reclone,
    UserSwitch(u8),
    UserNewBranch(u8),
    UserResetKeep,
    UserDelete(u8),
    AgentCommit(u8, bool),
    AgentNewBranch(u8),
    AgentSwitch(u8),
    AgentResetKeep,
    AgentDelete(u8),
    AgentTag(u8),
    AgentStash,
    /// The agent rebases onto the user's branch of the same name, as it is told to.
    AgentRebase,
    Sync,
    Start,
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => (0u8..4).prop_map(Action::UserCommit),
        2 => (0u8..4).prop_map(Action::UserStage),
        1 => (0u8..4).prop_map(Action::UserStagePart),
        1 => (0u8..4).prop_map(Action::UserAmend),
        1 => Just(Action::Reclone),
        1 => (0u8..4).prop_map(Action::UserSwitch),
        1 => (0u8..3).prop_map(Action::UserNewBranch),
        1 => Just(Action::UserResetKeep),
        1 => (0u8..4).prop_map(Action::UserDelete),
        4 => (0u8..4, proptest::bool::weighted(0.15)).prop_map(|(path, fails)| Action::AgentCommit(path, fails)),
        1 => (0u8..3).prop_map(Action::AgentNewBranch),
        1 => (0u8..4).prop_map(Action::AgentSwitch),
        1 => Just(Action::AgentResetKeep),
        1 => (0u8..4).prop_map(Action::AgentDelete),
        1 => (0u8..3).prop_map(Action::AgentTag),
        1 => Just(Action::AgentStash),
        1 => Just(Action::AgentRebase),
        4 => Just(Action::Sync),
        1 => Just(Action::Start),
    ]
}

/// One case's repositories: the user's project, and the state directory's session.
struct Case {
    _dir: tempfile::TempDir,
    proj: PathBuf,
    top: PathBuf,
    push: PathBuf,
    broker: Option<Broker>,
    counter: u32,
    /// Branches the user deleted since the last sync.
    deleted: BTreeSet<String>,
    /// The repository was made again since the last sync.
    recloned: bool,
}

const PRE_PUSH: &str = "#!/bin/sh\n\
    while read -r local sha remote old; do\n\
      if git ls-tree -r --name-only \"$sha\" | grep -qx BROKEN; then echo \"BROKEN in $sha\" >&2; exit 1; fi\n\
    done\n";

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.hooksPath=/dev/null"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", "/nonexistent")
        .output()
        .expect("git runs");
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

impl Case {
    fn new() -> Case {
        let dir = tempfile::tempdir().expect("tempdir");
        let proj = dir.path().join("proj");
        let top = dir.path().join("state/home");
        let push = dir.path().join("push");
        for made in [&proj, &push.join("hooks"), &top] {
            fs_err::create_dir_all(made).expect("mkdir");
        }
        git(dir.path(), &["init", "-q", "-b", "main", proj.to_str().expect("utf-8")]).expect("init");
        fs_err::write(proj.join("f0"), "0\n").expect("write");
        git(&proj, &["add", "f0"]).expect("add");
        git(&proj, &["commit", "-qm", "init"]).expect("commit");
        let hook = push.join("hooks/pre-push");
        fs_err::write(&hook, PRE_PUSH).expect("hook");
        fs_err::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        fs_err::write(push.join("told"), "").expect("told");
        let mut case =
            Case { _dir: dir, proj, top, push, broker: None, counter: 0, deleted: BTreeSet::new(), recloned: false };
        case.start();
        case
    }

    fn exec_home(&self) -> ExecHome {
        let git_path = which("git");
        let user_git = self.proj.join(".git");
        ExecHome {
            home: Home {
                git: git_path,
                user_git: user_git.clone(),
                git_dir: user_git.clone(),
                // The session's alternate: here the user's `.git` where it is.
                user_git_inside: user_git,
                env: vec![
                    ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
                    ("HOME".into(), "/nonexistent".into()),
                ],
                hooks: self.push.join("hooks"),
                settings: self.push.join("settings.json"),
                global: None,
                work_tree: Some(self.proj.clone()),
            },
            top: self.top.clone(),
            bwrap: which("bwrap"),
            self_exe: PathBuf::from(env!("CARGO_BIN_EXE_agent-sandbox")),
            git_installation: std::sync::OnceLock::new(),
            mirror: self.push.join("home.git"),
            told: self.push.join("told"),
        }
    }

    fn start(&mut self) {
        self.broker = None;
        let exec = self.exec_home();
        hostpush::home::exec::prepare(&exec).unwrap_or_else(|refusal| panic!("start: {}", refusal.why));
        self.broker = Some(Broker::new(exec));
    }

    fn sync(&mut self) {
        let broker = self.broker.as_ref().expect("a broker");
        // A refusal (the user's index locked, a ref moved meanwhile) is a sync that moved
        // nothing: the invariants hold either way.
        let _ = broker.sync();
    }

    fn user(&self, args: &[&str]) -> Option<String> {
        git(&self.proj, args)
    }

    fn agent(&self, args: &[&str]) -> Option<String> {
        let session = self.top.join(".git");
        let mut all = vec!["--git-dir", session.to_str().expect("utf-8"), "--work-tree", "."];
        all.extend(args);
        git(&self.proj, &all)
    }

    fn branches(&self, agent: bool) -> Vec<String> {
        let args = ["for-each-ref", "--format=%(refname:short)", "refs/heads/"];
        let listed = if agent { self.agent(&args) } else { self.user(&args) };
        listed.unwrap_or_default().lines().map(str::to_owned).collect()
    }

    fn pick(&self, agent: bool, pick: u8) -> Option<String> {
        let branches = self.branches(agent);
        branches.get(usize::from(pick) % branches.len().max(1)).cloned()
    }

    fn write(&mut self, path: u8) -> String {
        self.counter += 1;
        let name = format!("f{path}");
        fs_err::write(self.proj.join(&name), format!("{}\n", self.counter)).expect("write");
        name
    }

    fn act(&mut self, action: &Action) {
        match action {
            Action::UserCommit(path) => {
                let name = self.write(*path);
                let _ = self.user(&["add", &name]);
                let _ = self.user(&["commit", "-qm", "user"]);
            }
            Action::UserStage(path) => {
                let name = self.write(*path);
                let _ = self.user(&["add", &name]);
            }
            Action::UserStagePart(path) => {
                let name = self.write(*path);
                let _ = self.user(&["add", &name]);
                self.write(*path);
            }
            Action::UserAmend(path) => {
                let name = self.write(*path);
                let _ = self.user(&["add", &name]);
                let _ = self.user(&["commit", "-q", "--amend", "-m", "user-amended"]);
            }
            Action::Reclone => {
                fs_err::remove_dir_all(&self.proj).expect("rm -rf");
                let parent = self.proj.parent().expect("a parent").to_path_buf();
                git(&parent, &["init", "-q", "-b", "main", self.proj.to_str().expect("utf-8")]).expect("init");
                let name = self.write(0);
                git(&self.proj, &["add", &name]).expect("add");
                git(&self.proj, &["commit", "-qm", "reclone"]).expect("commit");
                self.recloned = true;
            }
            Action::UserSwitch(pick) => {
                if let Some(branch) = self.pick(false, *pick) {
                    let _ = self.user(&["switch", "-q", &branch]);
                }
            }
            Action::UserNewBranch(pick) => {
                let _ = self.user(&["switch", "-qc", &format!("u{pick}")]);
            }
            Action::UserResetKeep => {
                let _ = self.user(&["reset", "-q", "--keep", "HEAD~1"]);
            }
            Action::UserDelete(pick) => {
                let current = self.user(&["branch", "--show-current"]).unwrap_or_default();
                if let Some(branch) = self.pick(false, *pick).filter(|branch| *branch != current.trim()) {
                    if self.user(&["branch", "-qD", &branch]).is_some() {
                        self.deleted.insert(format!("refs/heads/{branch}"));
                    }
                }
            }
            Action::AgentCommit(path, fails) => {
                let name = self.write(*path);
                let _ = self.agent(&["add", &name]);
                if *fails {
                    fs_err::write(self.proj.join("BROKEN"), "").expect("write");
                    let _ = self.agent(&["add", "BROKEN"]);
                }
                let _ = self.agent(&["commit", "-qm", "agent"]);
                let _ = std::fs::remove_file(self.proj.join("BROKEN"));
            }
            Action::AgentNewBranch(pick) => {
                let _ = self.agent(&["switch", "-qc", &format!("a{pick}")]);
            }
            Action::AgentSwitch(pick) => {
                if let Some(branch) = self.pick(true, *pick) {
                    let _ = self.agent(&["switch", "-q", &branch]);
                }
            }
            Action::AgentResetKeep => {
                let _ = self.agent(&["reset", "-q", "--keep", "HEAD~1"]);
            }
            Action::AgentDelete(pick) => {
                let current = self.agent(&["branch", "--show-current"]).unwrap_or_default();
                if let Some(branch) = self.pick(true, *pick).filter(|branch| *branch != current.trim()) {
                    let _ = self.agent(&["branch", "-qD", &branch]);
                }
            }
            Action::AgentTag(pick) => {
                let _ = self.agent(&["tag", &format!("t{pick}")]);
            }
            Action::AgentStash => {
                let _ = self.agent(&["stash", "-q"]);
            }
            Action::AgentRebase => {
                let current = self.agent(&["branch", "--show-current"]).unwrap_or_default();
                let theirs = self.user(&["rev-parse", "-q", "--verify", &format!("refs/heads/{}", current.trim())]);
                if let Some(theirs) = theirs {
                    if self.agent(&["rebase", "-q", "--autostash", theirs.trim()]).is_none() {
                        let _ = self.agent(&["rebase", "--abort"]);
                    }
                }
            }
            Action::Sync => self.sync(),
            Action::Start => self.start(),
        }
    }
}

fn which(program: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from(program))
}

/// The user's repository as the invariants read it.
#[derive(Debug, Clone)]
struct Snapshot {
    refs: BTreeMap<String, String>,
    head: String,
    index: BTreeMap<String, String>,
    head_tree: BTreeMap<String, String>,
    reachable: BTreeSet<String>,
    /// The broker's state: the base `HEAD`, the branches the session made, what it brought.
    base_head: Option<String>,
    created: BTreeSet<String>,
    brought: BTreeSet<String>,
}

fn pairs(listing: &str, flip: bool) -> BTreeMap<String, String> {
    listing
        .lines()
        .filter_map(|line| {
            let (a, b) = line.split_once(['\t', ' '])?;
            let b = b.rsplit(' ').next().unwrap_or(b);
            Some(if flip { (b.to_owned(), a.to_owned()) } else { (a.to_owned(), b.to_owned()) })
        })
        .collect()
}

impl Case {
    fn snapshot(&self) -> Snapshot {
        let refs = pairs(
            &self
                .user(&["for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/", "refs/tags/"])
                .unwrap_or_default(),
            false,
        );
        let head = self.user(&["symbolic-ref", "-q", "HEAD"]).unwrap_or_default().trim().to_owned();
        let index: BTreeMap<String, String> = self
            .user(&["ls-files", "-s"])
            .unwrap_or_default()
            .lines()
            .filter_map(|line| {
                let (meta, path) = line.split_once('\t')?;
                Some((path.to_owned(), meta.split(' ').nth(1)?.to_owned()))
            })
            .collect();
        let head_tree: BTreeMap<String, String> = self
            .user(&["ls-tree", "-r", "HEAD"])
            .unwrap_or_default()
            .lines()
            .filter_map(|line| {
                let (meta, path) = line.split_once('\t')?;
                Some((path.to_owned(), meta.split(' ').nth(2)?.to_owned()))
            })
            .collect();
        let reachable =
            self.user(&["rev-list", "--all", "--reflog"]).unwrap_or_default().lines().map(str::to_owned).collect();
        let state: serde_json::Value = std::fs::read(self.top.join("sync.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        let strings = |value: &serde_json::Value| -> BTreeSet<String> {
            value.as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect()
        };
        Snapshot {
            refs,
            head,
            index,
            head_tree,
            reachable,
            base_head: state["base"]["head"]["Branch"].as_str().map(str::to_owned),
            created: strings(&state["base"]["created"]),
            brought: strings(&state["brought"]),
        }
    }

    fn is_ancestor(&self, old: &str, new: &str) -> bool {
        self.user(&["merge-base", "--is-ancestor", old, new]).is_some()
    }

    /// The invariants across one sync or start (`before` → `after`); `deleted`: the
    /// branches the user deleted since the last one.
    fn check(&self, before: &Snapshot, after: &Snapshot, deleted: &BTreeSet<String>) -> Result<(), String> {
        let lost: Vec<&String> = before.reachable.difference(&after.reachable).collect();
        if !lost.is_empty() {
            return Err(format!("commits the user could name are gone: {lost:?}"));
        }
        let names: BTreeSet<&String> = before.refs.keys().chain(after.refs.keys()).collect();
        for name in names {
            match (before.refs.get(name), after.refs.get(name)) {
                (old, new) if old == new => {}
                (Some(old), Some(new)) if self.is_ancestor(old, new) => {}
                (Some(old), Some(new)) => {
                    let dropped = self.user(&["rev-list", old, &format!("^{new}")]).unwrap_or_default();
                    if !dropped.lines().all(|sha| after.brought.contains(sha)) {
                        return Err(format!("{name} was rewritten from {old} to {new}, dropping the user's commits"));
                    }
                }
                (Some(_), None) if before.created.contains(name) => {}
                (None, Some(_)) if !deleted.contains(name) => {}
                (old, new) => return Err(format!("{name} moved from {old:?} to {new:?}")),
            }
        }
        if before.head != after.head {
            let agreed = before.base_head.as_ref().is_none_or(|base| *base == before.head);
            if !agreed {
                return Err(format!("HEAD moved from {} to {} though the user had switched", before.head, after.head));
            }
        }
        for (path, blob) in &before.index {
            if before.head_tree.get(path) != Some(blob) && after.index.get(path) != Some(blob) {
                return Err(format!("the staged {path} was lost"));
            }
        }
        if before.head_tree != after.head_tree {
            for path in before.head_tree.keys().chain(after.head_tree.keys()) {
                let staged = before.index.get(path) != before.head_tree.get(path);
                if !staged && after.index.get(path) != after.head_tree.get(path) {
                    return Err(format!("the index at {path} is neither what was staged nor the new commit's"));
                }
            }
        }
        Ok(())
    }
}

fn cases() -> u32 {
    std::env::var("AGENT_SANDBOX_MODEL_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(200).min(200_000)
}

#[test]
fn the_users_work_survives_any_interleaving_through_the_real_broker() {
    crate::support::require_bwrap!();
    let config =
        ProptestConfig { cases: cases(), failure_persistence: None, max_shrink_iters: 64, ..ProptestConfig::default() };
    proptest!(config, |(actions in proptest::collection::vec(action(), 1..16))| {
        let mut case = Case::new();
        for action in &actions {
            let syncs = matches!(action, Action::Sync | Action::Start);
            let before = syncs.then(|| case.snapshot());
            case.act(action);
            if let Some(before) = before {
                let after = case.snapshot();
                // After a new repository at the path, a sync of the old session brings
                // nothing into it; a start makes a new session, and only what comes next is
                // compared.
                if case.recloned && matches!(action, Action::Sync) && before.refs != after.refs {
                    return Err(TestCaseError::fail(format!(
                        "the old session's refs came into a new repository: {:?} -> {:?}\nactions: {actions:?}",
                        before.refs, after.refs
                    )));
                }
                if !case.recloned {
                    if let Err(broken) = case.check(&before, &after, &case.deleted) {
                        return Err(TestCaseError::fail(format!("after {action:?}: {broken}\nactions: {actions:?}")));
                    }
                }
                case.deleted.clear();
                case.recloned &= matches!(action, Action::Sync);
            }
        }
        // The last sync of a session, as `exec`'s end.
        let before = case.snapshot();
        case.sync();
        let after = case.snapshot();
        if let Err(broken) = case.check(&before, &after, &case.deleted) {
            return Err(TestCaseError::fail(format!("at the end: {broken}\nactions: {actions:?}")));
        }
    });
}
