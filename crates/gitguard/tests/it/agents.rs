//! The git calls the agents make on their own (Claude Code at every start, Codex's undo
//! snapshots) pass; the same overrides stay refused where they would disable a hook,
//! and overrides that run something stay refused everywhere.

use crate::{check_args, git};

/// Recorded from Claude Code (read-only calls with safety overrides) and from Codex's
/// `git-tooling` ghost commits (a temporary `GIT_INDEX_FILE`, `add -A`, `write-tree`,
/// `commit-tree`, then a restore of the snapshot's tree).
#[test]
fn the_agents_own_git_calls_pass() {
    let off = ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor="];
    let with = |rest: &[&'static str]| -> Vec<&'static str> { off.iter().chain(rest).copied().collect() };
    let recorded: Vec<Vec<&str>> = vec![
        with(&["ls-files", "--error-unmatch", "--", ":(icase).claude/settings.local.json"]),
        vec![
            "-c",
            "core.quotePath=false",
            "-c",
            "core.fsmonitor=",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.pager=",
            "log",
            "--since=7.days",
            "--oneline",
        ],
        with(&["status", "--porcelain"]),
        with(&["rev-parse", "--show-toplevel"]),
        with(&["diff", "--stat", "HEAD"]),
        vec!["-c", "core.fsmonitor=false", "-c", "log.showSignature=false", "-c", "color.ui=never", "log", "-1"],
        vec!["-c", "core.fsmonitor=0", "-c", "gc.auto=0", "-c", "advice.detachedHead=false", "status"],
        // Codex ghost commit and its restore.
        vec!["add", "-A"],
        vec!["write-tree"],
        vec!["commit-tree", "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "-p", "HEAD", "-m", "codex snapshot"],
        vec!["read-tree", "4b825dc642cb6eb9a060e54bf8d69288fbee4904"],
        vec!["checkout-index", "-a", "-f"],
        vec!["checkout", "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "--", "."],
    ];
    let cases: Vec<(&[&str], &str)> = recorded.iter().map(|args| (args.as_slice(), "run")).collect();
    check_args(&cases);
}

#[test]
fn disabling_overrides_stay_refused_where_they_disable_a_check() {
    check_args(&[
        // Commands that run hooks: the guard's pre-commit / pre-push must run.
        (&["-c", "core.hooksPath=/dev/null", "commit", "-m", "x"], "config-override"),
        (&["-c", "core.hooksPath=/dev/null", "push", "origin", "main"], "config-override"),
        (&["-c", "core.hooksPath=/dev/null", "merge", "topic"], "config-override"),
        (&["-c", "core.hooksPath=/dev/null", "rebase", "main"], "config-override"),
        (&["-c", "core.hooksPath=/dev/null", "am", "x.patch"], "config-override"),
        (&["-c", "core.hooksPath=/dev/null", "pull"], "config-override"),
        (&["-c", "core.hooksPath=/dev/null", "checkout", "main"], "config-override"),
        // Only /dev/null counts as switching hooks off.
        (&["-c", "core.hooksPath=/tmp/hooks", "status"], "config-override"),
        (&["-c", "core.hooksPath=", "status"], "config-override"),
        (&["-c", "core.hooksPath", "status"], "config-override"),
        // An fsmonitor that runs something, on any command.
        (&["-c", "core.fsmonitor=evil", "status"], "config-override"),
        (&["-c", "core.fsmonitor", "ls-files"], "config-override"),
        (&["-c", "core.fsmonitor=true", "ls-files"], "config-override"),
        // Aliases still cannot be defined, and the hook switch stays refused.
        (&["-c", "alias.l=log", "l"], "config-override"),
        (&["-c", "core.fsmonitor=", "commit", "--no-verify", "-m", "x"], "no-verify"),
        // Unknown or shell-alias commands may run anything.
        (&["-c", "core.hooksPath=/dev/null", "frobnicate"], "config-override"),
    ]);
}

#[test]
fn only_the_command_line_channel_passes_a_disabling_override() {
    let status = || git(&["status"]);
    crate::check(&[
        (status().env("GIT_CONFIG_PARAMETERS", "'core.hookspath'='/dev/null'"), "config-override"),
        (git(&["--config-env=core.hooksPath=H", "status"]).env("H", "/dev/null"), "config-override"),
    ]);
}
