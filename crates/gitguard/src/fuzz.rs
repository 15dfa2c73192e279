//! One fuzzing step for the judge, shared by the `gitguard` target in `fuzz/` (libFuzzer)
//! and the CI test over `fuzz/corpus/gitguard/` (`tests/it/fuzz.rs`). The bytes are a
//! command line (arguments separated by NUL; a first word whose file name starts with
//! `git`, such as `git-commit`, is argv0), judged with an empty environment against one
//! fixed configuration whose aliases cover chains, loops, shell aliases, global options
//! and quoting, so alias expansion is fuzzed too. Besides "no panic" (and, through the
//! fuzzer's timeout and the CI test finishing, "terminates"), it asserts what the judge
//! promises in its docs and table tests; see [`fuzz_one`].

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::sync::LazyLock;

use crate::{judge, parse, GuardOptions, MapConfig, Parsed, Refusal, Request, Verdict};

/// Every rule a refusal can name (the list on [`Refusal`]).
const RULES: &[&str] = &[
    "no-verify",
    "force-push",
    "mirror-push",
    "branch-delete",
    "plumbing-push",
    "plumbing-commit",
    "config-override",
    "config-write",
    "exec-path",
    "alias-loop",
    "shell-alias",
    "autocorrect",
];

/// The commands whose hook switch the judge refuses in every spelling, and spellings of
/// it that are options wherever they stand before `--`.
const NO_VERIFY: &[(&str, &[&str])] = &[
    ("commit", &["--no-verify", "-n", "-qn", "--no-verif"]),
    ("am", &["--no-verify", "-n"]),
    ("merge", &["--no-verify"]),
    ("rebase", &["--no-verify"]),
    ("pull", &["--no-verify"]),
    ("push", &["--no-verify"]),
];

/// The repository configuration every input is judged against.
static CONFIG: LazyLock<MapConfig> = LazyLock::new(|| {
    let entries: &[(&str, &str)] = &[
        ("alias.ci", "commit"),
        ("alias.cn", "commit -n"),
        ("alias.nv", "commit --no-verify"),
        ("alias.cm", "commit -m"),
        ("alias.amend", "commit --amend --no-edit"),
        ("alias.chain", "ci -q"),
        ("alias.p", "push"),
        ("alias.pf", "push --force"),
        ("alias.pd", "push origin :main"),
        ("alias.up", "pull --rebase"),
        ("alias.loop", "loop2 -x"),
        ("alias.loop2", "loop"),
        ("alias.self", "self --oneline"),
        ("alias.hooks", "-c core.hooksPath=/dev/null commit"),
        ("alias.np", "--no-pager log"),
        ("alias.sh", "!git commit --no-verify"),
        ("alias.hi", "!echo hi"),
        ("alias.My.ci", "commit --no-verify"),
        ("alias.quoted", "commit -m 'x -n' \"a b\""),
        ("alias.bad", "commit -m 'x"),
        ("alias.lead", " commit "),
        ("alias.cfg", "config core.hooksPath /tmp/h"),
        ("alias.move", "update-ref refs/heads/main HEAD"),
        ("alias.typo", "comit --no-verify"),
        ("alias.help", "commit -n"),
        ("branch.main.remote", "origin"),
        ("remote.origin.url", "https://example.invalid/r.git"),
        ("remote.fork.url", "https://example.invalid/f.git"),
        ("remote.fork.push", "+refs/heads/*:refs/heads/*"),
        ("remote.backup.mirror", "true"),
    ];
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (key, value) in entries {
        map.entry((*key).to_owned()).or_default().push((*value).to_owned());
    }
    MapConfig(map)
});

/// Judges `data` as one git command line and asserts, besides that nothing panics:
///
/// 1. A refusal names one of the documented rules and says what, why and what instead;
///    a run strips nothing from an empty environment.
/// 2. `parse` fails exactly when `judge` refuses an alias loop (its documented only
///    failure).
/// 3. `--no-pager` in front changes nothing (it only turns paging off).
/// 4. Aliases are judged as their expansion: if typing the command `parse` reports,
///    with its arguments, is refused (other than for autocorrection, which git skips
///    after an alias), so is the alias.
/// 5. Every spelling of `--no-verify` is refused: appending `-m x --no-verify` (or `-n`,
///    `-qn`, `--no-verif` for commit) to a command that `parse` reports as commit, am,
///    merge, rebase, pull or push is refused, unless `--` or `--end-of-options` already
///    ended its options or it is `git <cmd> --help` (which runs `git help`). `-m x`
///    first makes sure the switch is not the value of a trailing option.
#[doc(hidden)]
pub fn fuzz_one(data: &[u8]) {
    let mut args: Vec<OsString> = if data.is_empty() {
        Vec::new()
    } else {
        data.split(|b| *b == 0).map(|arg| OsString::from_vec(arg.to_vec())).collect()
    };
    let argv0 = match args.first() {
        Some(first)
            if first.as_encoded_bytes().rsplit(|b| *b == b'/').next().is_some_and(|name| name.starts_with(b"git")) =>
        {
            args.remove(0).to_string_lossy().into_owned()
        }
        _ => "git".to_owned(),
    };
    let verdict = judge_args(&argv0, &args);
    check_verdict(&verdict);
    let parsed = with_request(&argv0, &args, parse);
    let loop_refused = matches!(&verdict, Verdict::Refuse(refusal) if refusal.rule == "alias-loop");
    assert_eq!(parsed.is_err(), loop_refused, "parse fails exactly for an alias loop: {parsed:?} vs {verdict:?}");
    let Ok(Parsed { subcommand: Some(name), args: expanded, shell_alias: None, .. }) = parsed else {
        return;
    };
    if argv0 == "git" {
        let mut quiet = vec![OsString::from("--no-pager")];
        quiet.extend(args.iter().cloned());
        assert_eq!(judge_args(&argv0, &quiet), verdict, "--no-pager in front changed the verdict");
        if !name.starts_with('-') {
            let mut typed = vec![OsString::from(&name)];
            typed.extend(expanded.iter().map(OsString::from));
            if let Verdict::Refuse(refusal) = judge_args("git", &typed) {
                assert!(
                    refusal.rule == "autocorrect" || matches!(verdict, Verdict::Refuse(_)),
                    "`git {name} {}` is refused ({}) but the command line that expands to it runs",
                    expanded.join(" "),
                    refusal.rule
                );
            }
        }
    }
    let Some((_, spellings)) = NO_VERIFY.iter().find(|(command, _)| *command == name) else {
        return;
    };
    if expanded.iter().any(|arg| arg == "--" || arg == "--end-of-options")
        || expanded.first().is_some_and(|arg| arg == "--help")
    {
        return;
    }
    for spelling in *spellings {
        let mut skipping = args.clone();
        skipping.extend(["-m", "x", spelling].map(OsString::from));
        let verdict = judge_args(&argv0, &skipping);
        assert!(
            matches!(verdict, Verdict::Refuse(_)),
            "`{spelling}` appended to a `{name}` command line is not refused: {verdict:?}"
        );
    }
}

fn judge_args(argv0: &str, args: &[OsString]) -> Verdict {
    with_request(argv0, args, judge)
}

fn with_request<T>(argv0: &str, args: &[OsString], f: impl FnOnce(&Request<'_>) -> T) -> T {
    let options = GuardOptions::default();
    f(&Request { argv0, args, env: &[], config: &*CONFIG, options: &options })
}

fn check_verdict(verdict: &Verdict) {
    match verdict {
        Verdict::Run { strip_env, notices } => {
            assert!(strip_env.is_empty(), "nothing to strip from an empty environment: {strip_env:?}");
            assert!(notices.iter().all(|notice| !notice.is_empty()), "empty notice in {notices:?}");
        }
        Verdict::Refuse(refusal) => {
            let Refusal { rule, what, why, instead } = refusal;
            assert!(RULES.contains(rule), "undocumented rule {rule:?}");
            assert!(what.starts_with("git"), "`what` shows the git command line: {what:?}");
            assert!(!why.is_empty() && !instead.is_empty(), "a refusal says why and what instead: {refusal:?}");
            assert!(refusal.to_string().contains(what.as_str()));
        }
        Verdict::Unchanged { what } => {
            assert!(what.starts_with("git config"), "only a config write can be a no-op: {what:?}");
        }
    }
}
