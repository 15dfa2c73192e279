//! `merge`, `pull`, `am`, `rebase`: `--no-verify` is refused; their `-n` means something
//! else except for `am`, where it is `--no-verify` as for commit.

use crate::check_args;

#[test]
fn merge_pull_am_rebase_no_verify_is_refused() {
    check_args(&[
        (&["merge", "--no-verify", "feature"], "no-verify"),
        (&["merge", "feature", "--no-verify"], "no-verify"),
        // git: ambiguous (--no-verify-signatures, --no-verify).
        (&["merge", "--no-verif", "feature"], "no-verify"),
        (&["pull", "--no-verify"], "no-verify"),
        (&["pull", "--rebase", "--no-verify", "origin", "main"], "no-verify"),
        (&["pull", "--no-verif"], "no-verify"),
        (&["am", "-n", "patch.mbox"], "no-verify"),
        (&["am", "--no-verify", "patch.mbox"], "no-verify"),
        (&["am", "-3n", "patch.mbox"], "no-verify"),
        (&["rebase", "--no-verify", "main"], "no-verify"),
        (&["rebase", "--no-verif", "main"], "no-verify"),
        (&["rebase", "--no-v", "main"], "no-verify"),
        (&["rebase", "--verify", "--no-verify", "main"], "no-verify"),
    ]);
}

#[test]
fn merge_pull_rebase_dash_n_is_no_stat_and_passes() {
    check_args(&[
        (&["merge", "-n", "feature"], "run"),
        (&["merge", "--no-stat", "feature"], "run"),
        (&["merge", "-m", "--no-verify", "feature"], "run"),
        (&["merge", "--verify", "feature"], "run"),
        (&["merge", "--no-verify", "--verify", "feature"], "run"),
        (&["merge", "--no-verify-signatures", "feature"], "run"),
        // Unknown to git ("verifi" is not a prefix of "verify").
        (&["merge", "--no-verifi", "feature"], "run"),
        (&["pull", "-n"], "run"),
        (&["pull", "--verify"], "run"),
        (&["pull", "--rebase"], "run"),
        (&["pull", "-f", "origin", "main"], "run"),
        (&["rebase", "-n", "main"], "run"),
        (&["rebase", "-i", "main"], "run"),
        (&["rebase", "--no-verify", "--verify", "main"], "run"),
        (&["rebase", "-x", "git commit --no-verify", "main"], "run"),
        (&["rebase", "--exec=git commit -n", "main"], "run"),
        (&["am", "--verify", "patch.mbox"], "run"),
        (&["am", "-n", "--verify", "patch.mbox"], "run"),
        (&["am", "-3", "patch.mbox"], "run"),
        (&["am", "--continue"], "run"),
    ]);
}

#[test]
fn commands_without_hook_switches_pass_their_dash_n() {
    check_args(&[
        (&["log", "-n", "5"], "run"),
        (&["log", "-n5", "--oneline"], "run"),
        (&["log", "--no-walk"], "run"),
        (&["log", "--grep=--no-verify"], "run"),
        (&["add", "-n", "."], "run"),
        (&["clean", "-n"], "run"),
        (&["clean", "-fdx"], "run"),
        (&["cherry-pick", "-n", "abc123"], "run"),
        (&["revert", "-n", "abc123"], "run"),
        (&["stash"], "run"),
        (&["stash", "push", "-m", "--no-verify"], "run"),
        (&["status"], "run"),
        (&["diff", "--cached"], "run"),
        (&["tag", "-n"], "run"),
        (&["branch", "-D", "old"], "run"),
        (&["checkout", "-f", "main"], "run"),
        (&["switch", "-c", "feature"], "run"),
        (&["reset", "--hard", "HEAD~1"], "run"),
        (&["fetch", "--force", "--prune", "origin"], "run"),
        (&["worktree", "add", "../wt"], "run"),
        (&["notes", "add", "-m", "note"], "run"),
        (&["hook", "run", "pre-commit"], "run"),
    ]);
}
