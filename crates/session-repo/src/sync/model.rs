//! The sync against an in-memory model of both repositories: random interleavings of
//! the user's actions on the host and the agent's inside, with syncs and starts between
//! them, and the invariants checked after every step. The broker here is the decision
//! of this module plus the few rules its callers add (the checks, the index's two-way
//! merge, `HEAD`), modelled as `hostpush::home` carries them out.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

/// Path → content.
type Tree = BTreeMap<u8, u32>;

#[derive(Debug, Clone)]
struct Commit {
    parents: Vec<usize>,
    tree: Tree,
    /// Its checks fail (a failing hook).
    fails: bool,
}

#[derive(Debug, Clone)]
struct Repo {
    refs: Refs,
    head: Head,
    index: Tree,
}

impl Repo {
    /// The branch or tag `pick` names among those git would delete (not `HEAD`'s).
    fn deletable(&self, pick: u8) -> Option<String> {
        let current = self.head.branch();
        let names: Vec<&String> =
            self.refs.keys().filter(|name| synced(name) && Some(name.as_str()) != current).collect();
        names.get(usize::from(pick) % names.len().max(1)).map(|name| (*name).clone())
    }
}

#[derive(Debug, Clone)]
struct World {
    commits: Vec<Commit>,
    user: Repo,
    session: Repo,
    base: Base,
    brought: BTreeSet<String>,
    /// The user's `refs/agent-sandbox/waiting/…` and `…/refused/…`.
    kept: Refs,
    /// What the user's reflogs name: every value a sync moved a ref of theirs from
    /// (branches, and the broker's kept tips).
    reflog: BTreeSet<String>,
    /// Branches the user deleted since the last sync, with the value they had.
    deleted: BTreeMap<String, String>,
    /// The user's repository's identity (a re-clone makes another).
    identity: u32,
    session_identity: u32,
    blob: u32,
}

#[derive(Debug, Clone)]
enum Action {
    UserCommit(u8),
    UserStage(u8),
    UserSwitch(u8),
    UserNewBranch(u8),
    UserResetKeep,
    UserDelete(u8),
    UserAmend(u8),
    Reclone,
    AgentCommit(u8, bool),
    AgentNewBranch(u8),
    AgentSwitch(u8),
    AgentReset,
    AgentAmend(u8),
    AgentDelete(u8),
    AgentTag(u8),
    Sync,
    Start,
}

fn action() -> impl Strategy<Value = Action> {
    let path = 0u8..4;
    let pick = 0u8..6;
    prop_oneof![
        3 => path.clone().prop_map(Action::UserCommit),
        2 => path.clone().prop_map(Action::UserStage),
        1 => pick.clone().prop_map(Action::UserSwitch),
        1 => pick.clone().prop_map(Action::UserNewBranch),
        1 => Just(Action::UserResetKeep),
        1 => pick.clone().prop_map(Action::UserDelete),
        1 => path.clone().prop_map(Action::UserAmend),
        1 => Just(Action::Reclone),
        4 => (path.clone(), proptest::bool::weighted(0.15)).prop_map(|(path, fails)| Action::AgentCommit(path, fails)),
        1 => pick.clone().prop_map(Action::AgentNewBranch),
        1 => pick.clone().prop_map(Action::AgentSwitch),
        1 => Just(Action::AgentReset),
        1 => path.prop_map(Action::AgentAmend),
        1 => pick.clone().prop_map(Action::AgentDelete),
        1 => pick.prop_map(Action::AgentTag),
        4 => Just(Action::Sync),
        1 => Just(Action::Start),
    ]
}

fn id(commit: usize) -> String {
    format!("{commit:040x}")
}

fn index_of(sha: &str) -> usize {
    usize::from_str_radix(sha, 16).expect("a model object name")
}

struct Objects<'a> {
    commits: &'a [Commit],
    brought: &'a BTreeSet<String>,
}

impl Objects<'_> {
    fn ancestors(&self, tip: &str) -> BTreeSet<usize> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![index_of(tip)];
        while let Some(commit) = stack.pop() {
            if seen.insert(commit) {
                stack.extend(&self.commits[commit].parents);
            }
        }
        seen
    }
}

impl History for Objects<'_> {
    fn is_ancestor(&self, old: &str, new: &str) -> bool {
        self.ancestors(new).contains(&index_of(old))
    }

    fn only_own(&self, old: &str, new: &str) -> bool {
        let kept = self.ancestors(new);
        self.ancestors(old)
            .iter()
            .filter(|commit| !kept.contains(commit))
            .all(|commit| self.brought.contains(&id(*commit)))
    }

    fn holds_dropped(&self, dropped: &str, kept: &str, tip: &str) -> bool {
        let (kept, held) = (self.ancestors(kept), self.ancestors(tip));
        self.ancestors(dropped).iter().any(|commit| !kept.contains(commit) && held.contains(commit))
    }
}

/// git's two-way merge of an index (`read-tree -m old new`): `None` where what is
/// staged conflicts with the move.
fn two_way(index: &Tree, old: &Tree, new: &Tree) -> Option<Tree> {
    let paths: BTreeSet<&u8> = index.keys().chain(old.keys()).chain(new.keys()).collect();
    let mut out = Tree::new();
    for path in paths {
        let (staged, was, will) = (index.get(path), old.get(path), new.get(path));
        let value = if staged == was {
            will
        } else if was == will {
            staged
        } else if staged == will {
            will
        } else {
            return None;
        };
        if let Some(value) = value {
            out.insert(*path, *value);
        }
    }
    Some(out)
}

const MAIN: &str = "refs/heads/main";

fn branch(pick: u8) -> String {
    format!("refs/heads/b{pick}")
}

impl World {
    fn new() -> World {
        let root = Commit { parents: Vec::new(), tree: Tree::from([(0, 0)]), fails: false };
        let refs = Refs::from([(MAIN.to_owned(), id(0))]);
        let repo = Repo { refs: refs.clone(), head: Head::Branch(MAIN.into()), index: root.tree.clone() };
        World {
            commits: vec![root],
            user: repo.clone(),
            session: repo,
            base: Base { refs, head: Some(Head::Branch(MAIN.into())), created: BTreeSet::new() },
            brought: BTreeSet::new(),
            kept: Refs::new(),
            reflog: BTreeSet::new(),
            deleted: BTreeMap::new(),
            identity: 0,
            session_identity: 0,
            blob: 1,
        }
    }

    fn tree(&self, sha: Option<&str>) -> Tree {
        sha.map(|sha| self.commits[index_of(sha)].tree.clone()).unwrap_or_default()
    }

    fn objects(&self) -> Objects<'_> {
        Objects { commits: &self.commits, brought: &self.brought }
    }

    fn new_commit(&mut self, parents: Vec<usize>, tree: Tree, fails: bool) -> String {
        self.commits.push(Commit { parents, tree, fails });
        id(self.commits.len() - 1)
    }

    fn next_blob(&mut self) -> u32 {
        self.blob += 1;
        self.blob
    }

    /// Moves `repo`'s `HEAD` (its branch, or itself when detached) to `sha`.
    fn move_head(repo: &mut Repo, sha: String) {
        match &repo.head {
            Head::Branch(name) => {
                repo.refs.insert(name.clone(), sha);
            }
            Head::Detached(_) => repo.head = Head::Detached(sha),
        }
    }

    fn act(&mut self, action: &Action) {
        match action {
            Action::Sync => self.sync(false),
            Action::Start => self.sync(true),
            Action::AgentCommit(..)
            | Action::AgentAmend(_)
            | Action::AgentNewBranch(_)
            | Action::AgentSwitch(_)
            | Action::AgentReset
            | Action::AgentDelete(_)
            | Action::AgentTag(_) => self.agent_acts(action),
            _ => self.user_acts(action),
        }
    }

    /// The user's action on the host.
    fn user_acts(&mut self, action: &Action) {
        match action {
            Action::UserCommit(path) | Action::UserAmend(path) => {
                let Some(head) = self.user.head.commit(&self.user.refs).map(index_of) else { return };
                let blob = self.next_blob();
                let mut tree = self.user.index.clone();
                tree.insert(*path, blob);
                let parents = match action {
                    Action::UserAmend(_) => self.commits[head].parents.clone(),
                    _ => vec![head],
                };
                let sha = self.new_commit(parents, tree.clone(), false);
                self.user.index = tree;
                World::move_head(&mut self.user, sha);
            }
            Action::UserStage(path) => {
                let blob = self.next_blob();
                self.user.index.insert(*path, blob);
            }
            Action::UserSwitch(pick) => {
                let names: Vec<String> =
                    self.user.refs.keys().filter(|name| name.starts_with("refs/heads/")).cloned().collect();
                let Some(name) = names.get(usize::from(*pick) % names.len().max(1)).cloned() else { return };
                let old = self.tree(self.user.head.commit(&self.user.refs));
                let new = self.tree(self.user.refs.get(&name).map(String::as_str));
                if let Some(index) = two_way(&self.user.index, &old, &new) {
                    self.user.index = index;
                    self.user.head = Head::Branch(name);
                }
            }
            Action::UserNewBranch(pick) => {
                let name = format!("refs/heads/u{pick}");
                let Some(head) = self.user.head.commit(&self.user.refs).map(str::to_owned) else { return };
                if self.user.refs.contains_key(&name) {
                    return;
                }
                self.user.refs.insert(name.clone(), head);
                self.deleted.remove(&name);
                self.user.head = Head::Branch(name);
            }
            Action::UserResetKeep => {
                let Some(head) = self.user.head.commit(&self.user.refs).map(index_of) else { return };
                let Some(parent) = self.commits[head].parents.first().copied() else { return };
                let (old, new) = (self.commits[head].tree.clone(), self.commits[parent].tree.clone());
                if let Some(index) = two_way(&self.user.index, &old, &new) {
                    self.user.index = index;
                    World::move_head(&mut self.user, id(parent));
                }
            }
            Action::UserDelete(pick) => {
                let Some(name) = self.user.deletable(*pick) else { return };
                let value = self.user.refs.remove(&name).expect("listed");
                self.deleted.insert(name, value);
            }
            Action::Reclone => {
                // `rm -rf proj && git clone … proj`: a repository of its own history.
                let tree = Tree::from([(0, self.next_blob())]);
                let root = self.new_commit(Vec::new(), tree.clone(), false);
                self.user =
                    Repo { refs: Refs::from([(MAIN.to_owned(), root)]), head: Head::Branch(MAIN.into()), index: tree };
                self.kept.clear();
                self.reflog.clear();
                self.deleted.clear();
                self.identity += 1;
            }
            _ => {}
        }
    }

    /// The agent's action inside.
    fn agent_acts(&mut self, action: &Action) {
        match action {
            Action::AgentCommit(path, _) | Action::AgentAmend(path) => {
                let fails = matches!(action, Action::AgentCommit(_, true));
                let Some(head) = self.session.head.commit(&self.session.refs).map(index_of) else { return };
                let blob = self.next_blob();
                let mut tree = self.commits[head].tree.clone();
                tree.insert(*path, blob);
                let parents = match action {
                    Action::AgentAmend(_) => self.commits[head].parents.clone(),
                    _ => vec![head],
                };
                let sha = self.new_commit(parents, tree.clone(), fails);
                self.session.index = tree;
                World::move_head(&mut self.session, sha);
            }
            Action::AgentNewBranch(pick) => {
                let Some(head) = self.session.head.commit(&self.session.refs).map(str::to_owned) else { return };
                self.session.refs.entry(branch(*pick)).or_insert(head);
                self.session.head = Head::Branch(branch(*pick));
            }
            Action::AgentSwitch(pick) => {
                let names: Vec<String> =
                    self.session.refs.keys().filter(|name| name.starts_with("refs/heads/")).cloned().collect();
                let Some(name) = names.get(usize::from(*pick) % names.len().max(1)).cloned() else { return };
                self.session.index = self.tree(self.session.refs.get(&name).map(String::as_str));
                self.session.head = Head::Branch(name);
            }
            Action::AgentReset => {
                let Some(head) = self.session.head.commit(&self.session.refs).map(index_of) else { return };
                let Some(parent) = self.commits[head].parents.first().copied() else { return };
                self.session.index = self.commits[parent].tree.clone();
                World::move_head(&mut self.session, id(parent));
            }
            Action::AgentDelete(pick) => {
                let Some(name) = self.session.deletable(*pick) else { return };
                self.session.refs.remove(&name);
            }
            Action::AgentTag(pick) => {
                let Some(head) = self.session.head.commit(&self.session.refs).map(str::to_owned) else { return };
                self.session.refs.entry(format!("refs/tags/t{pick}")).or_insert(head);
            }
            _ => {}
        }
    }

    /// The broker's sync; at a start, also what a start does: a session of another
    /// repository is put aside, and the session takes the user's `HEAD` and index.
    fn sync(&mut self, start: bool) {
        if start && self.session_identity != self.identity {
            // Kept aside (nothing of it comes into this repository); a new session.
            self.session = self.user.clone();
            self.base =
                Base { refs: self.user.refs.clone(), head: Some(self.user.head.clone()), created: BTreeSet::new() };
            self.brought.clear();
            self.session_identity = self.identity;
            self.deleted.clear();
            return;
        }
        if start {
            // A start takes the user's `HEAD` first, so that the refs are decided for the
            // branch the agent will be on.
            let (user_head, session_head) = (&self.user.head, &self.session.head);
            if let HeadMove::Carry(head) =
                decide_head(self.base.head.as_ref(), user_head, session_head, &self.user.refs, &[])
            {
                self.session.index = self.user.index.clone();
                self.session.head = head.clone();
                self.base.head = Some(head);
            }
        }
        let session_head = self.session.head.branch().map(str::to_owned);
        let user_branch = self.user.head.branch().map(str::to_owned);
        let checkouts = Checkouts { user: user_branch.as_deref(), session: session_head.as_deref(), others: &[] };
        let decisions = decide(&self.base, (&self.user.refs, &self.session.refs), &checkouts, &self.objects());
        self.take(decisions, user_branch.as_deref());
        let user_head = self.user.head.clone();
        let session_head = self.session.head.clone();
        match decide_head(self.base.head.as_ref(), &user_head, &session_head, &self.user.refs, &[]) {
            HeadMove::Stay if user_head == session_head => self.base.head = Some(user_head),
            HeadMove::Stay => {}
            HeadMove::Follow(name) => {
                let old = self.tree(user_head.commit(&self.user.refs));
                let new = self.tree(self.user.refs.get(&name).map(String::as_str));
                if let Some(index) = two_way(&self.user.index, &old, &new) {
                    self.user.index = index;
                    self.user.head = Head::Branch(name);
                    self.base.head = Some(session_head);
                }
            }
            // Taken at a start (above), not from under the agent.
            HeadMove::Carry(_) => {}
        }
        self.deleted.clear();
    }

    /// Carries out the decisions as the broker does: what would come home passes the
    /// checks, and the user's checked-out branch moves only with its index.
    fn take(&mut self, decisions: Vec<Decision>, user_branch: Option<&str>) {
        for decision in decisions {
            let decision = match decision {
                Decision::Bring { name, from, to: Some(to) } => {
                    // The checks: every commit that would come home passes.
                    let mut new = self.objects().ancestors(&to);
                    for value in self.user.refs.values() {
                        for commit in self.objects().ancestors(value) {
                            new.remove(&commit);
                        }
                    }
                    if new.iter().any(|commit| self.commits[*commit].fails) {
                        self.reflog.extend(self.kept.insert(format!("refused/{name}"), to));
                        continue;
                    }
                    // The user's checked-out branch: its index moves by a two-way merge,
                    // or the branch does not move.
                    if user_branch == Some(name.as_str()) {
                        let (old, will) = (self.tree(from.as_deref()), self.tree(Some(&to)));
                        match two_way(&self.user.index, &old, &will) {
                            Some(index) => self.user.index = index,
                            None => {
                                let why = "staged changes conflict".to_owned();
                                let wait = Decision::Wait { name: name.clone(), tip: to.clone(), why };
                                self.apply(&wait);
                                continue;
                            }
                        }
                    }
                    self.brought.extend(new.into_iter().map(id));
                    Decision::Bring { name, from, to: Some(to) }
                }
                decision => decision,
            };
            self.apply(&decision);
        }
    }

    fn apply(&mut self, decision: &Decision) {
        let set = |refs: &mut Refs, name: &str, value: &Option<String>| match value {
            Some(value) => {
                refs.insert(name.to_owned(), value.clone());
            }
            None => {
                refs.remove(name);
            }
        };
        match decision {
            Decision::Bring { name, from, to } => {
                self.reflog.extend(from.clone().filter(|_| to.is_some()));
                set(&mut self.user.refs, name, to)
            }
            Decision::Carry { name, to, .. } => set(&mut self.session.refs, name, to),
            Decision::Agree { .. } => {}
            Decision::Wait { name, tip, .. } => {
                // With a reflog of its own (`update-ref --create-reflog`): a tip that
                // waited before stays nameable.
                self.reflog.extend(self.kept.insert(format!("waiting/{name}"), tip.clone()));
            }
        }
        self.base.settle(decision);
    }

    /// Every commit the user can name: their refs and the broker's kept tips.
    fn reachable(&self) -> BTreeSet<usize> {
        let objects = self.objects();
        self.user
            .refs
            .values()
            .chain(self.kept.values())
            .chain(&self.reflog)
            .flat_map(|tip| objects.ancestors(tip))
            .collect()
    }
}

/// The invariants across one step of the broker (`before` → `after`).
fn check_sync(before: &World, after: &World) -> Result<(), String> {
    if after.identity != after.session_identity {
        return Ok(());
    }
    let fresh = before.session_identity != before.identity;
    // Nothing the user could name is lost.
    let lost: Vec<usize> = before.reachable().difference(&after.reachable()).copied().collect();
    if !fresh && !lost.is_empty() {
        return Err(format!("commits the user could name are gone: {lost:?}"));
    }
    // Each user ref moves only by a fast-forward, a rewrite of the session's own
    // commits, or the deletion of a branch the session made; nothing deleted returns.
    let objects = after.objects();
    let names: BTreeSet<&String> = before.user.refs.keys().chain(after.user.refs.keys()).collect();
    for name in names {
        match (before.user.refs.get(name), after.user.refs.get(name)) {
            (a, b) if a == b => {}
            (Some(old), Some(new)) if objects.is_ancestor(old, new) || objects.only_own(old, new) => {}
            (Some(_), None) if before.base.created.contains(name) => {}
            (None, Some(_)) if !before.deleted.contains_key(name) => {}
            (old, new) => return Err(format!("{name} moved from {old:?} to {new:?}")),
        }
    }
    // `HEAD` moves only from where both agreed, to a branch.
    if before.user.head != after.user.head {
        let agreed = before.base.head.as_ref().is_none_or(|head| *head == before.user.head);
        if !agreed || after.user.head.branch().is_none() {
            return Err(format!("HEAD moved from {:?} to {:?}", before.user.head, after.user.head));
        }
    }
    // What was staged stays staged.
    let head_tree = before.tree(before.user.head.commit(&before.user.refs));
    for (path, blob) in &before.user.index {
        if head_tree.get(path) != Some(blob) && after.user.index.get(path) != Some(blob) {
            return Err(format!("the staged {path} was lost"));
        }
    }
    // The index matches the new commit where nothing was staged.
    let new_tree = after.tree(after.user.head.commit(&after.user.refs));
    for path in head_tree.keys().chain(new_tree.keys()) {
        let staged = before.user.index.get(path) != head_tree.get(path);
        if !staged && after.user.index.get(path) != new_tree.get(path) {
            return Err(format!("the index at {path} is neither what was staged nor the commit's"));
        }
    }
    // Whatever still differs is told: it waits, was refused, or is the agent's branch
    // the user deleted.
    for (name, ours) in &after.session.refs {
        let told = ["waiting", "refused"].iter().any(|kind| after.kept.get(&format!("{kind}/{name}")) == Some(ours));
        if synced(name) && after.user.refs.get(name) != Some(ours) && !told && after.session.head.branch() != Some(name)
        {
            return Err(format!("{name} differs and nothing says why"));
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("AGENT_SANDBOX_MODEL_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(100_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// The pure level of the model test: random interleavings of both parties' actions,
    /// the invariants after every sync and start.
    #[test]
    fn the_users_work_survives_any_interleaving(actions in proptest::collection::vec(action(), 1..40)) {
        let mut world = World::new();
        for action in &actions {
            let before = world.clone();
            world.act(action);
            if matches!(action, Action::Sync | Action::Start) {
                if let Err(broken) = check_sync(&before, &world) {
                    return Err(TestCaseError::fail(format!("after {action:?}: {broken}\nactions: {actions:?}")));
                }
            }
        }
    }
}

/// Found by the soak (1 in 300,000): the agent deletes two branches it made, each
/// holding the other's commits; each deletion alone was allowed, and together they left
/// the commit the user had been brought unreachable.
#[test]
fn two_branches_deleted_at_once_keep_their_commits_nameable() {
    use Action::*;
    let actions = [
        UserNewBranch(0),
        AgentNewBranch(2),
        AgentCommit(0, false),
        AgentNewBranch(0),
        Sync,
        AgentSwitch(2),
        AgentDelete(0),
        AgentDelete(2),
        Sync,
    ];
    let mut world = World::new();
    for action in &actions {
        let before = world.clone();
        world.act(action);
        if matches!(action, Action::Sync) {
            check_sync(&before, &world).unwrap_or_else(|broken| panic!("after {action:?}: {broken}"));
        }
    }
    // Neither stays deleted: each was the other's only keeper. Both are the user's still,
    // and back in the session (said why); the agent deletes them one at a time.
    let made = |refs: &Refs| refs.keys().filter(|name| name.starts_with("refs/heads/b")).count();
    assert_eq!((made(&world.user.refs), made(&world.session.refs)), (2, 2));
}
