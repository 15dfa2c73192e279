//! Hook managers' skip switches in the environment are removed from git's environment,
//! with a notice; their "on" values and unrelated variables are left alone.

use gitguard::Verdict;

use crate::git;

fn run_with(env: &[(&str, &str)]) -> Verdict {
    let mut case = git(&["commit", "-m", "x"]);
    for (name, value) in env {
        case = case.env(name, value);
    }
    case.verdict()
}

fn stripped(env: &[(&str, &str)]) -> Vec<String> {
    match run_with(env) {
        Verdict::Run { strip_env, .. } => strip_env,
        Verdict::Refuse(refusal) => panic!("refused: {refusal}"),
        Verdict::Unchanged { what } => panic!("not run: {what}"),
    }
}

#[test]
fn husky_zero_is_stripped_with_a_notice() {
    assert_eq!(
        run_with(&[("HUSKY", "0"), ("PATH", "/usr/bin")]),
        Verdict::Run {
            strip_env: vec!["HUSKY".to_owned()],
            notices: vec![
                "removed HUSKY=0 from git's environment: it makes husky skip the repository's hooks".to_owned()
            ],
        }
    );
}

/// An environment and the names the guard must strip from it.
type StripCase<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);

#[test]
fn hook_manager_skip_switches_are_stripped() {
    let cases: &[StripCase<'_>] = &[
        (&[("HUSKY", "false")], &["HUSKY"]),
        (&[("HUSKY_SKIP_HOOKS", "1")], &["HUSKY_SKIP_HOOKS"]),
        (&[("SKIP", "lint,test")], &["SKIP"]),
        (&[("ONLY", "RuboCop")], &["ONLY"]),
        (&[("PRE_COMMIT_ALLOW_NO_CONFIG", "1")], &["PRE_COMMIT_ALLOW_NO_CONFIG"]),
        (&[("OVERCOMMIT_DISABLE", "1")], &["OVERCOMMIT_DISABLE"]),
        (&[("LEFTHOOK", "0")], &["LEFTHOOK"]),
        (&[("LEFTHOOK", "false")], &["LEFTHOOK"]),
        (&[("LEFTHOOK_EXCLUDE", "lint")], &["LEFTHOOK_EXCLUDE"]),
        (&[("LEFTHOOK_BIN", "/tmp/fake")], &["LEFTHOOK_BIN"]),
        (&[("LEFTHOOK_CONFIG", "/tmp/empty.yml")], &["LEFTHOOK_CONFIG"]),
        (&[("SKIP_SIMPLE_GIT_HOOKS", "1")], &["SKIP_SIMPLE_GIT_HOOKS"]),
        (&[("HUSKY", "0"), ("SKIP", "x"), ("LEFTHOOK", "0")], &["HUSKY", "SKIP", "LEFTHOOK"]),
    ];
    for (env, expected) in cases {
        assert_eq!(stripped(env), *expected, "env {env:?}");
    }
}

#[test]
fn hook_manager_on_values_and_other_variables_are_left_alone() {
    let cases: &[&[(&str, &str)]] = &[
        &[("HUSKY", "1")],
        &[("HUSKY", "2")],
        &[("LEFTHOOK", "1")],
        &[("LEFTHOOK_VERBOSE", "1")],
        &[("HUSKY_SKIP_INSTALL", "1")],
        &[("SKIP", "")],
        &[("OVERCOMMIT_DISABLE", "0")],
        &[("SKIPPER", "1")],
        &[("PATH", "/usr/bin")],
    ];
    for env in cases {
        assert_eq!(run_with(env), Verdict::Run { strip_env: Vec::new(), notices: Vec::new() }, "env {env:?}");
    }
}

/// The sandbox's own `HUSKY=0` (a husky project) is removed just as silently as it was
/// set; the same variable with another value, or another switch, still says so.
#[test]
fn the_sandboxs_own_switch_is_stripped_without_a_notice() {
    let quiet = vec![("HUSKY".to_owned(), "0".to_owned())];
    let verdict = |env: &[(&str, &str)]| {
        let mut case = git(&["commit", "-m", "x"]);
        case.options.quiet_env = quiet.clone();
        for (name, value) in env {
            case = case.env(name, value);
        }
        case.verdict()
    };
    let notice = |name: &str, value: &str, tool: &str| {
        format!("removed {name}={value} from git's environment: it makes {tool} skip the repository's hooks")
    };
    type QuietCase<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], Vec<String>);
    let cases: &[QuietCase<'_>] = &[
        (&[("HUSKY", "0")], &["HUSKY"], vec![]),
        (&[("HUSKY", "false")], &["HUSKY"], vec![notice("HUSKY", "false", "husky")]),
        (&[("HUSKY", "0"), ("SKIP", "x")], &["HUSKY", "SKIP"], vec![notice("SKIP", "x", "pre-commit/overcommit")]),
    ];
    for (env, strip, notices) in cases {
        let expected =
            Verdict::Run { strip_env: strip.iter().map(|name| (*name).to_owned()).collect(), notices: notices.clone() };
        assert_eq!(verdict(env), expected, "env {env:?}");
    }
}

#[test]
fn skip_switches_do_not_turn_a_refusal_into_a_run() {
    let verdict = git(&["commit", "-n"]).env("HUSKY", "0").verdict();
    assert!(matches!(verdict, Verdict::Refuse(ref refusal) if refusal.rule == "no-verify"));
}
