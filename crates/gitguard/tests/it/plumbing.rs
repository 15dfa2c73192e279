//! Commit-creating plumbing is refused unless allowed; plumbing that does not create
//! commits or move branches passes.

use crate::{check, git};

#[test]
fn commit_creating_plumbing_is_refused_unless_allowed() {
    let refused: &[&[&str]] = &[
        &["fast-import"],
        &["filter-branch", "--msg-filter", "cat", "HEAD"],
        // Not part of git, but the same thing when installed (git-filter-repo).
        &["filter-repo", "--path", "src"],
        &["replay", "--onto", "main", "topic~2..topic"],
        &["update-ref", "refs/heads/main", "abc123"],
        &["update-ref", "-m", "msg", "refs/heads/main", "abc123", "def456"],
        &["update-ref", "HEAD", "abc123"],
        &["update-ref", "ORIG_HEAD", "abc123"],
        &["update-ref", "--stdin"],
        &["update-ref", "--no-deref", "refs/heads/main", "abc123"],
        &["hash-object", "-w", "-t", "commit", "commit.txt"],
        &["hash-object", "-wtcommit", "--stdin"],
        &["replace", "abc123", "def456"],
        &["replace", "--edit", "abc123"],
        &["replace", "-g", "abc123", "def456"],
        &["replace", "--convert-graft-file"],
    ];
    let mut cases = Vec::new();
    for args in refused {
        cases.push((git(args), "plumbing-commit"));
        cases.push((git(args).allow_plumbing_commits(), "run"));
    }
    check(&cases);
}

#[test]
fn branch_deletion_through_update_ref_needs_its_own_permission() {
    check(&[
        (git(&["update-ref", "-d", "refs/heads/old"]), "branch-delete"),
        (git(&["update-ref", "-d", "HEAD"]), "branch-delete"),
        (git(&["update-ref", "-d", "refs/heads/old"]).allow_branch_deletion(), "run"),
        (git(&["update-ref", "-d", "refs/heads/old"]).allow_plumbing_commits(), "branch-delete"),
        (git(&["update-ref", "-d", "refs/tags/v1"]), "run"),
    ]);
}

#[test]
fn plumbing_that_creates_no_commit_passes() {
    check(&[
        (git(&["update-ref", "refs/tags/v1", "abc123"]), "run"),
        (git(&["update-ref", "refs/notes/commits", "abc123"]), "run"),
        (git(&["update-ref", "refs/remotes/origin/main", "abc123"]), "run"),
        (git(&["update-ref", "--no-deref", "HEAD", "abc123"]), "run"),
        (git(&["symbolic-ref", "HEAD", "refs/heads/feature"]), "run"),
        (git(&["hash-object", "-w", "file.txt"]), "run"),
        (git(&["hash-object", "-t", "commit", "commit.txt"]), "run"),
        (git(&["mktree"]), "run"),
        (git(&["write-tree"]), "run"),
        // Unreferenced until a ref points at it; update-ref of a branch is refused above.
        (git(&["commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "x"]), "run"),
        (git(&["read-tree", "HEAD"]), "run"),
        (git(&["replace", "-l"]), "run"),
        (git(&["replace"]), "run"),
        (git(&["replace", "-d", "abc123"]), "run"),
        (git(&["notes", "add", "-m", "x"]), "run"),
        (git(&["stash", "create"]), "run"),
        (git(&["commit", "--amend", "-m", "x"]), "run"),
        (git(&["rebase", "-x", "make test", "main"]), "run"),
        (git(&["branch", "-f", "main", "HEAD~1"]), "run"),
    ]);
}
