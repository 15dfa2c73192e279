//! The three-way sync between the user's repository and the session's, per ref and for
//! `HEAD`: a pure decision over three values (the base, the user's, the session's) and a
//! history oracle. Nothing here runs git or reads a file.
//!
//! The base is what both sides last agreed on, kept by the broker alone. For each branch
//! and tag:
//! - only the session moved it: it comes home (after the checks, by compare and swap
//!   against the user's value), if that is a fast-forward or drops only the session's own
//!   commits (the user's reflog still names what it dropped); a branch the session
//!   made may also be deleted, once its commits are on another branch;
//! - only the user moved it (a commit, a reset, a deletion): the session takes it;
//! - both moved it: nothing of the user's moves and the session's tip waits, unless the
//!   session's tip already builds on the user's new one and brings back nothing the user
//!   dropped (the agent rebased onto the user's work).
//!
//! `HEAD` follows an agent's switch only while the user's is where both last agreed.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Ref name → object name.
pub type Refs = BTreeMap<String, String>;

/// What a `HEAD` names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Head {
    /// `ref: refs/heads/<name>`, the full ref name.
    Branch(String),
    /// A commit, by its object name.
    Detached(String),
}

impl Head {
    /// A `HEAD` file's content; `None` when it is neither a ref nor an object name.
    pub fn parse(text: &str) -> Option<Head> {
        let text = text.trim();
        match text.strip_prefix("ref: ") {
            Some(name) if name.starts_with("refs/") => Some(Head::Branch(name.to_owned())),
            Some(_) => None,
            None => (matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| Head::Detached(text.to_owned())),
        }
    }

    /// The commit it names, given the refs of its repository (`None`: an unborn branch).
    pub fn commit<'a>(&'a self, refs: &'a Refs) -> Option<&'a str> {
        match self {
            Head::Branch(name) => refs.get(name).map(String::as_str),
            Head::Detached(sha) => Some(sha),
        }
    }

    pub fn branch(&self) -> Option<&str> {
        match self {
            Head::Branch(name) => Some(name),
            Head::Detached(_) => None,
        }
    }
}

/// What both sides last agreed on: written by the broker alone, after each ref it moved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Base {
    /// Per branch and tag, the value both had (absent: neither had it).
    pub refs: Refs,
    /// The `HEAD` both had (`None`: not yet known; the user's is taken).
    #[serde(default)]
    pub head: Option<Head>,
    /// Branches the session made and brought home, still as it brought them: the only
    /// ones a deletion in the session deletes in the user's repository.
    #[serde(default)]
    pub created: BTreeSet<String>,
}

/// What the decision needs to know of the commits.
pub trait History {
    /// `old` is `new` or one of its ancestors.
    fn is_ancestor(&self, old: &str, new: &str) -> bool;
    /// Every commit reachable from `old` and not from `new` is one the session brought
    /// home: moving a ref from `old` to `new` drops nothing but the session's own.
    fn only_own(&self, old: &str, new: &str) -> bool;
    /// `tip` holds a commit reachable from `dropped` and not from `kept`: a commit the
    /// user dropped when moving a ref from `dropped` to `kept`.
    fn holds_dropped(&self, dropped: &str, kept: &str, tip: &str) -> bool;
}

/// What becomes of one ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The session's value comes home: the user's ref moves from `from` to `to` (`None`:
    /// absent), after the checks, by compare and swap.
    Bring { name: String, from: Option<String>, to: Option<String> },
    /// The session takes the user's value (`to`) in place of its own (`from`); `why` is
    /// set when this undoes something the agent did, and says why.
    Carry { name: String, from: Option<String>, to: Option<String>, why: Option<String> },
    /// Both already have `value`: only the base moves.
    Agree { name: String, value: Option<String> },
    /// Nothing moves: the session's tip waits, for `why` (with the command to act on it).
    Wait { name: String, tip: String, why: String },
}

impl Decision {
    pub fn name(&self) -> &str {
        match self {
            Decision::Bring { name, .. }
            | Decision::Carry { name, .. }
            | Decision::Agree { name, .. }
            | Decision::Wait { name, .. } => name,
        }
    }
}

impl Base {
    /// The base once `decision` was carried out (a decision that could not be carried
    /// out leaves it as it was).
    pub fn settle(&mut self, decision: &Decision) {
        let mut set = |name: &str, value: &Option<String>| match value {
            Some(value) => {
                self.refs.insert(name.to_owned(), value.clone());
            }
            None => {
                self.refs.remove(name);
            }
        };
        match decision {
            Decision::Bring { name, from, to } => {
                set(name, to);
                if from.is_none() && to.is_some() && name.starts_with("refs/heads/") {
                    self.created.insert(name.clone());
                } else if to.is_none() {
                    self.created.remove(name);
                }
            }
            Decision::Carry { name, to, .. } | Decision::Agree { name, value: to } => {
                set(name, to);
                self.created.remove(name);
            }
            Decision::Wait { .. } => {}
        }
    }
}

/// Whether the sync looks at `name`: branches and tags (the stash and remote-tracking
/// refs are each side's own).
pub fn synced(name: &str) -> bool {
    name.starts_with("refs/heads/") || name.starts_with("refs/tags/")
}

/// Why a branch another checkout of the user's has does not move.
const CHECKED_OUT: &str = "another checkout of the user's has this branch checked out (a linked worktree, or the \
                           checkout beside a branch sandbox): bring work home on another branch (`git switch -c \
                           <new-name>`)";

fn short(sha: &str) -> &str {
    &sha[..12.min(sha.len())]
}

/// The branches each side has checked out.
#[derive(Debug, Clone, Copy, Default)]
pub struct Checkouts<'a> {
    /// The user's `HEAD`'s branch: moved only by a fast-forward or a rewrite of the
    /// session's own commits, never deleted.
    pub user: Option<&'a str>,
    /// The session's `HEAD`'s branch: a deletion of the user's does not take it from
    /// under the agent (its next commit there waits instead).
    pub session: Option<&'a str>,
    /// The branches the user's other checkouts have (linked worktrees, a branch
    /// sandbox's user), which the session never moves.
    pub others: &'a [String],
}

/// Per branch and tag of either side or the base: what becomes of it. Pure.
pub fn decide(
    base: &Base,
    (user, session): (&Refs, &Refs),
    checkouts: &Checkouts,
    history: &dyn History,
) -> Vec<Decision> {
    let names: BTreeSet<&String> =
        base.refs.keys().chain(user.keys()).chain(session.keys()).filter(|name| synced(name)).collect();
    names
        .into_iter()
        .filter_map(|name| {
            let sides = (base.refs.get(name), user.get(name), session.get(name));
            // A branch the session made may be deleted once its commits are on another
            // branch of the user's that stays (its reflog goes with it), and while the user
            // does not have it checked out. The other branch stays with its commits whatever
            // this sync decides for it: both sides' values hold them, or it is the user's
            // new one, which the session takes. (Two such branches the agent deleted at
            // once each hold the other's commits, and both went.)
            let holds = |value: Option<&String>, tip: &str| value.is_some_and(|value| history.is_ancestor(tip, value));
            let stays_with = |other: &String, tip: &str| match session.get(other) {
                Some(ours) => holds(user.get(other), tip) && holds(Some(ours), tip),
                None => !base.refs.contains_key(other) && holds(user.get(other), tip),
            };
            let merged = sides
                .1
                .is_some_and(|tip| user.keys().any(|other| other != name && synced(other) && stays_with(other, tip)));
            let deletable = base.created.contains(name) && merged && checkouts.user != Some(name.as_str());
            let decision = decide_one(name, sides, deletable, checkouts.others.contains(name), history);
            match decision {
                Some(Decision::Carry { to: None, .. }) if checkouts.session == Some(name.as_str()) => None,
                decision => decision,
            }
        })
        .collect()
}

fn decide_one(
    name: &str,
    (base, user, session): (Option<&String>, Option<&String>, Option<&String>),
    created: bool,
    checked_out: bool,
    history: &dyn History,
) -> Option<Decision> {
    let owned = |value: Option<&String>| value.cloned();
    let tag = name.starts_with("refs/tags/");
    let wait = |tip: &String, why: String| Decision::Wait { name: name.to_owned(), tip: tip.clone(), why };
    let bring = || Decision::Bring { name: name.to_owned(), from: owned(user), to: owned(session) };
    let carry =
        |why: Option<String>| Decision::Carry { name: name.to_owned(), from: owned(session), to: owned(user), why };
    if user == session {
        return (base != user).then(|| Decision::Agree { name: name.to_owned(), value: owned(user) });
    }
    // Only the user moved it (a commit, a reset, a deletion): the session takes it.
    if session == base {
        return Some(carry(None));
    }
    let rebase = |onto: &str| format!("`git rebase --autostash {onto}`, then sync again (`git commit` or `git adopt`)");
    if user == base {
        // Only the session moved it.
        return Some(match (user, session) {
            (Some(_), None) if created && !tag => bring(),
            (Some(_), None) => carry(Some(
                "a branch or tag of the user's repository is deleted there only by the user (or, for a branch the \
                 session made, once its commits are on another branch): it is back in the session"
                    .into(),
            )),
            (_, Some(ours)) if checked_out => wait(ours, CHECKED_OUT.into()),
            (None, Some(_)) => bring(),
            (Some(_), Some(ours)) if tag => {
                wait(ours, "a tag that exists in the user's repository is not moved".into())
            }
            (Some(theirs), Some(ours)) if history.is_ancestor(theirs, ours) || history.only_own(theirs, ours) => {
                bring()
            }
            (Some(theirs), Some(ours)) => {
                wait(ours, format!("it would rewrite commits that were not made in this session: {}", rebase(theirs)))
            }
            (None, None) => return None,
        });
    }
    // Both moved it, differently.
    match (user, session) {
        // The session deleted it, the user moved it: the user's stands.
        (Some(_), None) => {
            Some(carry(Some("it moved in the user's repository, so the session's deletion of it is undone".into())))
        }
        (None, Some(ours)) => Some(wait(
            ours,
            "the user deleted this branch or tag meanwhile: to bring its commits home, put them on a new branch \
             (`git switch -c <new-name>`)"
                .into(),
        )),
        (Some(_), Some(ours)) if tag => Some(wait(ours, "the tag moved in the user's repository meanwhile".into())),
        (Some(_), Some(ours)) if checked_out => Some(wait(ours, CHECKED_OUT.into())),
        (Some(theirs), Some(ours)) => {
            // The user's move dropped commits (a reset, an amend): the session's tip may
            // still hold them, and bringing it would bring them back.
            let dropped = base.is_some_and(|base| history.holds_dropped(base, theirs, ours));
            if history.is_ancestor(ours, theirs) {
                // The session's tip is already in the user's history: nothing of its own.
                Some(carry(None))
            } else if !dropped && history.is_ancestor(theirs, ours) {
                Some(bring())
            } else if dropped {
                let base = base.map(String::as_str).unwrap_or_default();
                Some(wait(
                    ours,
                    format!(
                        "the user dropped commits of this branch (it was reset to {}): keep only the session's \
                         later commits with `git rebase --autostash --onto {theirs} {base}`, then sync again",
                        short(theirs)
                    ),
                ))
            } else {
                Some(wait(
                    ours,
                    format!(
                        "the branch moved in the user's repository meanwhile, to {}: {}",
                        short(theirs),
                        rebase(theirs)
                    ),
                ))
            }
        }
        (None, None) => None,
    }
}

/// What becomes of the user's `HEAD` and the session's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadMove {
    /// Neither moves.
    Stay,
    /// The user's `HEAD` follows the agent's switch to this branch.
    Follow(String),
    /// The session's `HEAD` takes the user's.
    Carry(Head),
}

/// `HEAD`: the agent's switch to a branch is followed only while the user's `HEAD` is
/// where both last agreed (`base`; `None`: the user's), to a branch the user's repository
/// has (`user_refs`, as they are once the refs moved) and no other checkout of the user's
/// has; a switch of the user's is taken by the session. Pure.
pub fn decide_head(
    base: Option<&Head>,
    user: &Head,
    session: &Head,
    user_refs: &Refs,
    checked_out: &[String],
) -> HeadMove {
    let base = base.unwrap_or(user);
    if user == session {
        return HeadMove::Stay;
    }
    if user == base {
        return match session {
            Head::Branch(name) if user_refs.contains_key(name) && !checked_out.contains(name) => {
                HeadMove::Follow(name.clone())
            }
            _ => HeadMove::Stay,
        };
    }
    if session == base {
        return HeadMove::Carry(user.clone());
    }
    HeadMove::Stay
}

#[cfg(test)]
mod model;
#[cfg(test)]
mod tests;
