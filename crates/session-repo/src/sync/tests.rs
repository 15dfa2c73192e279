use std::collections::{BTreeMap, BTreeSet};

use super::*;

/// A commit graph by name (each commit's parents), with the commits the session brought.
pub(super) struct Graph {
    pub parents: BTreeMap<String, Vec<String>>,
    pub brought: BTreeSet<String>,
}

impl Graph {
    pub fn ancestors(&self, tip: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![tip.to_owned()];
        while let Some(commit) = stack.pop() {
            if seen.insert(commit.clone()) {
                stack.extend(self.parents.get(&commit).into_iter().flatten().cloned());
            }
        }
        seen
    }
}

impl History for Graph {
    fn is_ancestor(&self, old: &str, new: &str) -> bool {
        self.ancestors(new).contains(old)
    }

    fn only_own(&self, old: &str, new: &str) -> bool {
        let kept = self.ancestors(new);
        self.ancestors(old).iter().filter(|commit| !kept.contains(*commit)).all(|commit| self.brought.contains(commit))
    }

    fn holds_dropped(&self, dropped: &str, kept: &str, tip: &str) -> bool {
        let (kept, held) = (self.ancestors(kept), self.ancestors(tip));
        self.ancestors(dropped).iter().any(|commit| !kept.contains(commit) && held.contains(commit))
    }
}

/// a0 ← a1 ← a2 ← a3 (the session's line, a1 brought home); a1 ← u1 (the user's commit)
/// ← r2 (a2 rebased onto it); a1 ← a2x (a2 amended); a0 ← o1 (another line).
fn graph() -> Graph {
    let edges = [("a1", "a0"), ("a2", "a1"), ("a3", "a2"), ("u1", "a1"), ("r2", "u1"), ("a2x", "a1"), ("o1", "a0")];
    let mut parents: BTreeMap<String, Vec<String>> = BTreeMap::new();
    parents.insert("a0".into(), Vec::new());
    for (child, parent) in edges {
        parents.entry(child.into()).or_default().push(parent.into());
    }
    Graph { parents, brought: ["a1", "a2"].into_iter().map(str::to_owned).collect() }
}

fn refs(pairs: &[(&str, &str)]) -> Refs {
    pairs.iter().map(|(name, sha)| ((*name).to_owned(), (*sha).to_owned())).collect()
}

const MAIN: &str = "refs/heads/main";

fn bring(name: &str, from: Option<&str>, to: Option<&str>) -> Decision {
    Decision::Bring { name: name.into(), from: from.map(str::to_owned), to: to.map(str::to_owned) }
}

fn carry(name: &str, from: Option<&str>, to: Option<&str>) -> Decision {
    Decision::Carry { name: name.into(), from: from.map(str::to_owned), to: to.map(str::to_owned), why: None }
}

/// A decision with its `why` cut to the given words (`None`: no why), for the table.
fn summary(decision: &Decision) -> String {
    match decision {
        Decision::Bring { name, from, to } => format!("bring {name} {from:?} -> {to:?}"),
        Decision::Carry { name, from, to, why } => {
            format!("carry {name} {from:?} -> {to:?}{}", why.as_ref().map_or(String::new(), |why| format!(": {why}")))
        }
        Decision::Agree { name, value } => format!("agree {name} {value:?}"),
        Decision::Wait { name, tip, why } => format!("wait {name} {tip}: {why}"),
    }
}

/// One ref at a time: base, user, session → what happens, with the legitimate move
/// beside each refusal.
#[test]
fn each_ref_is_decided_from_base_user_and_session() {
    type Side<'a> = Option<&'a str>;
    let cases: &[(Side, Side, Side, bool, &str)] = &[
        // Nothing moved; both moved to the same place.
        (Some("a1"), Some("a1"), Some("a1"), false, ""),
        (Some("a1"), Some("a2"), Some("a2"), false, "agree refs/heads/main Some(\"a2\")"),
        // The agent committed: a fast-forward comes home.
        (Some("a1"), Some("a1"), Some("a2"), false, "bring refs/heads/main Some(\"a1\") -> Some(\"a2\")"),
        // The agent amended its own commit (a2 came home): a rewrite of its own.
        (Some("a2"), Some("a2"), Some("a2x"), false, "bring refs/heads/main Some(\"a2\") -> Some(\"a2x\")"),
        // The agent rewound past the user's history: waits.
        (Some("u1"), Some("u1"), Some("o1"), false, "wait refs/heads/main o1: it would rewrite commits that were not made in this session: `git rebase --autostash u1`, then sync again (`git commit` or `git adopt`)"),
        // The user committed: the session takes it.
        (Some("a1"), Some("u1"), Some("a1"), false, "carry refs/heads/main Some(\"a1\") -> Some(\"u1\")"),
        // The user reset it (dropped a2): the session takes the reset.
        (Some("a2"), Some("a1"), Some("a2"), false, "carry refs/heads/main Some(\"a2\") -> Some(\"a1\")"),
        // The user reset it and the agent committed on top of the dropped commit: waits,
        // told how to keep only its own commit.
        (Some("a2"), Some("a1"), Some("a3"), false, "wait refs/heads/main a3: the user dropped commits of this branch (it was reset to a1): keep only the session's later commits with `git rebase --autostash --onto a1 a2`, then sync again"),
        // ... and once it rebased onto the reset (a2x builds on a1 alone), it comes.
        (Some("a2"), Some("a1"), Some("a2x"), false, "bring refs/heads/main Some(\"a1\") -> Some(\"a2x\")"),
        // Both committed: waits, told to rebase; once rebased onto the user's, it comes.
        (Some("a1"), Some("u1"), Some("a2"), false, "wait refs/heads/main a2: the branch moved in the user's repository meanwhile, to u1: `git rebase --autostash u1`, then sync again (`git commit` or `git adopt`)"),
        (Some("a1"), Some("u1"), Some("r2"), false, "bring refs/heads/main Some(\"u1\") -> Some(\"r2\")"),
        // The session is behind the user's new tip: it takes it.
        (Some("a2"), Some("a3"), Some("a1"), false, "carry refs/heads/main Some(\"a1\") -> Some(\"a3\")"),
        // The user deleted it: the session deletes it too; if the agent committed there
        // meanwhile, the tip waits and nothing is made again.
        (Some("a1"), None, Some("a1"), false, "carry refs/heads/main Some(\"a1\") -> None"),
        (Some("a1"), None, Some("a2"), false, "wait refs/heads/main a2: the user deleted this branch or tag meanwhile: to bring its commits home, put them on a new branch (`git switch -c <new-name>`)"),
        // The agent deleted a branch of the user's: not carried out, undone in the session.
        (Some("a1"), Some("a1"), None, false, "carry refs/heads/main None -> Some(\"a1\"): a branch or tag of the user's repository is deleted there only by the user (or, for a branch the session made, once its commits are on another branch): it is back in the session"),
        // ... and the agent's own branch, brought home, is deleted (below, `created`).
        // A new branch of the agent's comes home.
        (None, None, Some("a2"), false, "bring refs/heads/main None -> Some(\"a2\")"),
        // A branch another checkout of the user's has: never moved.
        (Some("a1"), Some("a1"), Some("a2"), true, "wait refs/heads/main a2: another checkout of the user's has this branch checked out (a linked worktree, or the checkout beside a branch sandbox): bring work home on another branch (`git switch -c <new-name>`)"),
    ];
    let history = graph();
    for (base, user, session, checked_out, expected) in cases {
        let one = |value: &Option<&str>| value.map(|sha| refs(&[(MAIN, sha)])).unwrap_or_default();
        let base = Base { refs: one(base), ..Base::default() };
        let checked: Vec<String> = if *checked_out { vec![MAIN.into()] } else { Vec::new() };
        let checkouts = Checkouts { others: &checked, ..Checkouts::default() };
        let decisions = decide(&base, (&one(user), &one(session)), &checkouts, &history);
        let got: Vec<String> = decisions.iter().map(summary).collect();
        assert_eq!(got.join("\n"), *expected, "base {base:?} user {user:?} session {session:?}");
    }
}

#[test]
fn a_branch_the_session_made_may_be_deleted_and_tags_only_made() {
    let history = graph();
    let base = Base {
        refs: refs(&[("refs/heads/topic", "a2"), ("refs/heads/spike", "o1"), (MAIN, "a3"), ("refs/tags/v1", "a1")]),
        created: ["refs/heads/topic".to_owned(), "refs/heads/spike".to_owned()].into(),
        ..Base::default()
    };
    let user = base.refs.clone();
    // topic is merged into main: deleted; spike is on no other branch: kept.
    let session = refs(&[(MAIN, "a3"), ("refs/tags/v1", "a2"), ("refs/tags/v2", "a2")]);
    let got: Vec<String> =
        decide(&base, (&user, &session), &Checkouts::default(), &history).iter().map(summary).collect();
    assert_eq!(
        got,
        [
            "carry refs/heads/spike None -> Some(\"o1\"): a branch or tag of the user's repository is deleted there only by the user (or, for a branch the session made, once its commits are on another branch): it is back in the session",
            "bring refs/heads/topic Some(\"a2\") -> None",
            "wait refs/tags/v1 a2: a tag that exists in the user's repository is not moved",
            "bring refs/tags/v2 None -> Some(\"a2\")",
        ]
    );
    // The stash and remote-tracking refs are each side's own.
    let session = refs(&[("refs/stash", "a3"), ("refs/remotes/origin/main", "a3")]);
    let base = Base::default();
    assert!(decide(&base, (&Refs::new(), &session), &Checkouts::default(), &history).is_empty());
}

#[test]
fn the_users_checked_out_branch_is_never_deleted() {
    let base = Base {
        refs: refs(&[("refs/heads/topic", "a1"), (MAIN, "a2")]),
        created: ["refs/heads/topic".to_owned()].into(),
        ..Base::default()
    };
    let session = refs(&[(MAIN, "a2")]);
    let checkouts = Checkouts { user: Some("refs/heads/topic"), ..Checkouts::default() };
    let decisions = decide(&base, (&base.refs, &session), &checkouts, &graph());
    assert!(matches!(&decisions[..], [Decision::Carry { to: Some(_), why: Some(_), .. }]), "{decisions:?}");
    let decisions = decide(&base, (&base.refs, &session), &Checkouts::default(), &graph());
    assert_eq!(decisions, [bring("refs/heads/topic", Some("a1"), None)]);
}

#[test]
fn a_deletion_of_the_branch_the_agent_is_on_is_not_taken_from_under_it() {
    let base = Base { refs: refs(&[(MAIN, "a1")]), ..Base::default() };
    let (user, session) = (Refs::new(), refs(&[(MAIN, "a1")]));
    let on = |branch: &'static str| Checkouts { session: Some(branch), ..Checkouts::default() };
    assert!(decide(&base, (&user, &session), &on(MAIN), &graph()).is_empty());
    assert_eq!(decide(&base, (&user, &session), &on("refs/heads/other"), &graph()), [carry(MAIN, Some("a1"), None)]);
}

#[test]
fn the_base_settles_on_what_was_carried_out() {
    let mut base = Base { refs: refs(&[(MAIN, "a1")]), ..Base::default() };
    base.settle(&bring("refs/heads/topic", None, Some("a2")));
    base.settle(&bring(MAIN, Some("a1"), Some("a2")));
    assert_eq!(base.refs, refs(&[(MAIN, "a2"), ("refs/heads/topic", "a2")]));
    assert_eq!(base.created, ["refs/heads/topic".to_owned()].into());
    // The user moved the agent's branch: it is the user's now, never deleted for the agent.
    base.settle(&carry("refs/heads/topic", Some("a2"), Some("a3")));
    assert!(base.created.is_empty());
    base.settle(&Decision::Wait { name: MAIN.into(), tip: "a3".into(), why: String::new() });
    base.settle(&carry("refs/heads/topic", Some("a3"), None));
    assert_eq!(base.refs, refs(&[(MAIN, "a2")]));
}

#[test]
fn head_follows_an_agents_switch_only_from_where_both_agreed() {
    let branch = |name: &str| Head::Branch(format!("refs/heads/{name}"));
    let user_refs = refs(&[(MAIN, "a1"), ("refs/heads/topic", "a1"), ("refs/heads/wt", "a1")]);
    let checked_out = ["refs/heads/wt".to_owned()];
    let cases: &[(Option<Head>, Head, Head, HeadMove)] = &[
        (Some(branch("main")), branch("main"), branch("main"), HeadMove::Stay),
        // The agent switched: followed.
        (Some(branch("main")), branch("main"), branch("topic"), HeadMove::Follow("refs/heads/topic".into())),
        (None, branch("main"), branch("topic"), HeadMove::Follow("refs/heads/topic".into())),
        // ... but never to a branch another checkout has, one the user lacks, or detached.
        (Some(branch("main")), branch("main"), branch("wt"), HeadMove::Stay),
        (Some(branch("main")), branch("main"), branch("gone"), HeadMove::Stay),
        (Some(branch("main")), branch("main"), Head::Detached("a1".into()), HeadMove::Stay),
        // The user switched (`git switch -c hotfix`): the session takes it, and the
        // agent's switch back is never followed.
        (Some(branch("main")), branch("hotfix"), branch("main"), HeadMove::Carry(branch("hotfix"))),
        (Some(branch("main")), branch("hotfix"), branch("topic"), HeadMove::Stay),
    ];
    for (base, user, session, expected) in cases {
        assert_eq!(
            &decide_head(base.as_ref(), user, session, &user_refs, &checked_out),
            expected,
            "{base:?} {user:?} {session:?}"
        );
    }
}

#[test]
fn heads_parse_as_git_writes_them() {
    assert_eq!(Head::parse("ref: refs/heads/main\n"), Some(Head::Branch(MAIN.into())));
    let sha = "0123456789abcdef0123456789abcdef01234567";
    assert_eq!(Head::parse(sha), Some(Head::Detached(sha.into())));
    assert_eq!(Head::parse("ref: main"), None);
    assert_eq!(Head::parse("garbage"), None);
}
