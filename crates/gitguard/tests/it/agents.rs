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

/// Every git call of their own the real Claude Code and Codex made in the main suite's
/// `real_agents` tests, recorded through the guard (that test fails on a call this table
/// lacks): each passes, with the `GIT_CONFIG_PARAMETERS` it ran with.
#[test]
fn every_recorded_agent_call_passes() {
    let table = include_str!("agent_git_calls.jsonl");
    let cases: Vec<(crate::Case, &str)> = table
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|line| {
            let call: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            let args: Vec<&str> = call["args"].as_array().expect("args").iter().filter_map(|a| a.as_str()).collect();
            let parameters = call["parameters"].as_str().unwrap_or_default();
            let case = git(&args);
            (if parameters.is_empty() { case } else { case.env("GIT_CONFIG_PARAMETERS", parameters) }, "run")
        })
        .collect();
    assert!(cases.len() >= 10, "the table holds both agents' calls: {table}");
    crate::check(&cases);
}

/// The safety overrides Claude Code 2.1.332 puts on its own calls (taken from its bundle
/// and seen in the audit log of `real_agents` in the main suite).
fn claude_code_2_1_overrides() -> Vec<String> {
    let mut args: Vec<String> = [
        "-c",
        "core.askPass=",
        "-c",
        "protocol.ext.allow=never",
        "-c",
        "core.alternateRefsCommand=f() { git --git-dir=\"$1\" for-each-ref --format='%(objectname)'; }; f",
        "-c",
        "submodule.recurse=false",
        "-c",
        "log.showSignature=false",
        "-c",
        "format.pretty=medium",
        "-c",
        "gc.auto=0",
        "-c",
        "maintenance.auto=false",
        "-c",
        "diff.autoRefreshIndex=false",
    ]
    .map(str::to_owned)
    .to_vec();
    for hook in ["pre-commit", "commit-msg", "pre-push", "post-checkout", "reference-transaction", "fsmonitor-watchman"]
    {
        args.extend(["-c".to_owned(), format!("hook.{hook}.enabled=false")]);
    }
    args.extend(
        [
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=",
            "-c",
            "safe.bareRepository=explicit",
            "-c",
            "protocol.file.allow=never",
        ]
        .map(str::to_owned),
    );
    args
}

/// `GIT_CONFIG_PARAMETERS` as Claude Code 2.1.332 sets it for its own calls.
const CLAUDE_CODE_PARAMETERS: &str =
    "'alias.remote-none=version' 'alias.remote-none.command=version' 'alias.remote-/.command=version' 'fetch.bundleURI=' 'help.autocorrect=0'";

/// Claude Code 2.1.332's safety overrides (its own calls with them pass: see
/// [`every_recorded_agent_call_passes`]) on a command that runs hooks stay refused, and an
/// alias to anything but `version` stays refused on every channel.
#[test]
fn claude_codes_overrides_disable_no_check() {
    let mut commit = claude_code_2_1_overrides();
    commit.extend(["commit", "-qm", "x"].map(str::to_owned));
    let commit: Vec<&str> = commit.iter().map(String::as_str).collect();
    crate::check(&[
        (git(&commit).env("GIT_CONFIG_PARAMETERS", CLAUDE_CODE_PARAMETERS), "config-override"),
        (git(&["remote", "update"]).env("GIT_CONFIG_PARAMETERS", "'core.hooksPath'='/dev/null'"), "config-override"),
        (git(&["-c", "core.hooksPath=/dev/null", "remote", "-v", "prune", "origin"]), "config-override"),
        (git(&["-c", "core.hooksPath=/dev/null", "remote", "-v"]), "run"),
        (git(&["-c", "core.hooksPath=/dev/null", "worktree", "list", "--porcelain", "-z"]), "run"),
        (git(&["-c", "core.hooksPath=/dev/null", "worktree", "add", "../x"]), "config-override"),
        (git(&["-c", "core.hooksPath=/dev/null", "worktree"]), "config-override"),
        (git(&["status"]).env("GIT_CONFIG_PARAMETERS", "'alias.st=commit --no-verify'"), "config-override"),
        (git(&["-c", "alias.remote-none=!sh -c evil", "status"]), "config-override"),
        (git(&["-c", "hook.pre-commit.enabled=false", "commit", "-m", "x"]), "config-override"),
        (git(&["-c", "hook.pre-commit.enabled=true", "status"]), "config-override"),
    ]);
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
fn the_environment_passes_a_disabling_override_only_where_it_disables_nothing() {
    let with = |args: &[&str], value: &str| git(args).env("GIT_CONFIG_PARAMETERS", value);
    crate::check(&[
        (with(&["status"], "'core.hookspath'='/dev/null'"), "run"),
        (
            git(&["status"])
                .env("GIT_CONFIG_COUNT", "1")
                .env("GIT_CONFIG_KEY_0", "core.fsmonitor")
                .env("GIT_CONFIG_VALUE_0", ""),
            "run",
        ),
        // Exported, it is judged again with every later command: a commit is refused.
        (with(&["commit", "-m", "x"], "'core.hookspath'='/dev/null'"), "config-override"),
        (
            git(&["commit", "-m", "x"])
                .env("GIT_CONFIG_COUNT", "1")
                .env("GIT_CONFIG_KEY_0", "core.hooksPath")
                .env("GIT_CONFIG_VALUE_0", "/dev/null"),
            "config-override",
        ),
        (with(&["status"], "'core.fsmonitor'='evil'"), "config-override"),
        // `--config-env` stays strict: no agent uses it.
        (git(&["--config-env=core.hooksPath=H", "status"]).env("H", "/dev/null"), "config-override"),
    ]);
}
