//! Aliases are expanded like git does (builtins first, quoting, global options in the
//! alias, chains, loops), shell aliases are refused only when they name a bypass, and
//! with `help.autocorrect` on, an unknown command is judged as every command git could
//! correct it to.

use gitguard::Verdict;

use crate::{check, git};

#[test]
fn aliases_are_judged_as_their_expansion() {
    let ci = |value: &str, args: &[&str]| git(args).config("alias.ci", value);
    check(&[
        (ci("commit --no-verify", &["ci", "-m", "x"]), "no-verify"),
        (ci("commit", &["ci", "-m", "x"]), "run"),
        // Arguments after the alias are appended to its expansion.
        (ci("commit", &["ci", "-n", "-m", "x"]), "no-verify"),
        (ci("commit -am", &["ci", "-n"]), "run"),
        (ci("commit -nam", &["ci", "x"]), "no-verify"),
        (ci("commit -m \"a b\" -n", &["ci"]), "no-verify"),
        (ci("commit -m '--no-verify'", &["ci"]), "run"),
        (ci("commit -m 'x -n'", &["ci"]), "run"),
        (ci("commit -m x\\ -n", &["ci"]), "run"),
        (ci("commit \"--no-verify\"", &["ci"]), "no-verify"),
        // Alias names are case-insensitive.
        (ci("commit --no-verify", &["CI", "-m", "x"]), "no-verify"),
        // Global options at the start of an alias are git's.
        (ci("-c core.hooksPath=/dev/null commit", &["ci", "-m", "x"]), "config-override"),
        (ci("--no-pager commit -n", &["ci"]), "no-verify"),
        (ci("-c user.name=x commit", &["ci", "-m", "x"]), "run"),
        // The last definition wins.
        (ci("commit -n", &["ci"]).config("alias.ci", "commit"), "run"),
        (ci("push --force", &["ci"]), "force-push"),
        // An unclosed quote: git dies ("bad alias"), nothing runs.
        (ci("commit -m 'x", &["ci", "-n"]), "run"),
    ]);
}

#[test]
fn alias_chains_are_followed_and_loops_refused() {
    check(&[
        (git(&["a", "-m", "x"]).config("alias.a", "b").config("alias.b", "commit -n"), "no-verify"),
        (git(&["a"]).config("alias.a", "b").config("alias.b", "a"), "alias-loop"),
        (git(&["a"]).config("alias.a", "a --oneline"), "alias-loop"),
        (git(&["a"]).config("alias.a", "A"), "alias-loop"),
        (git(&["a"]).config("alias.a", "b").config("alias.b", "log"), "run"),
    ]);
}

#[test]
fn aliases_cannot_shadow_builtins() {
    check(&[
        (git(&["commit", "-m", "x"]).config("alias.commit", "commit --no-verify"), "run"),
        (git(&["status"]).config("alias.status", "push --force"), "run"),
        (git(&["filter-branch"]).config("alias.filter-branch", "log"), "plumbing-commit"),
    ]);
}

#[test]
fn aliases_with_dots_in_their_names_are_found() {
    check(&[
        (git(&["my.ci", "-m", "x"]).config("alias.My.ci", "commit --no-verify"), "no-verify"),
        (git(&["my.ci", "-m", "x"]).config("alias.my.ci", "commit"), "run"),
    ]);
}

#[test]
fn shell_aliases_are_refused_only_when_they_name_a_bypass() {
    let sh = |value: &str| git(&["x"]).config("alias.x", value);
    check(&[
        (sh("!git commit --no-verify"), "shell-alias"),
        (sh("!git -c core.hooksPath=/dev/null commit"), "shell-alias"),
        (sh("!HUSKY=0 git commit"), "shell-alias"),
        (sh("!LEFTHOOK=0 git push"), "shell-alias"),
        (sh("!SKIP=lint git commit"), "shell-alias"),
        (sh("!/run/agent-sandbox/bin/git commit"), "shell-alias"),
        (sh("!echo hi"), "run"),
        (sh("!f() { git log --oneline -n 5; }; f"), "run"),
        (sh("!git commit -n"), "run"),
    ]);
    let Verdict::Run { notices, .. } = sh("!echo hi").verdict() else {
        panic!("a harmless shell alias runs");
    };
    assert_eq!(notices, ["`git x` is a shell alias; the git commands it runs are judged on their own"]);
}

#[test]
fn unknown_commands_are_judged_as_their_autocorrection() {
    let on = |args: &[&str]| git(args).config("help.autocorrect", "1");
    check(&[
        (on(&["comit", "--no-verify", "-m", "x"]), "autocorrect"),
        (on(&["comit", "-n", "-m", "x"]), "autocorrect"),
        (on(&["psuh", "--force"]), "autocorrect"),
        (on(&["comit", "-m", "x"]), "run"),
        (on(&["lgo", "-n", "5"]), "run"),
        (on(&["cj", "-m", "x"]).config("alias.ci", "commit -n"), "autocorrect"),
        (git(&["comit", "--no-verify"]).config("help.autocorrect", "immediate"), "autocorrect"),
        (git(&["comit", "--no-verify"]).config("help.autocorrect", "-1"), "autocorrect"),
        (git(&["comit", "--no-verify"]).config("help.autocorrect", "prompt"), "autocorrect"),
        (git(&["-c", "help.autocorrect=immediate", "comit", "-n"]), "autocorrect"),
        (git(&["comit", "--no-verify"]), "run"),
        (git(&["comit", "--no-verify"]).config("help.autocorrect", "0"), "run"),
        (git(&["comit", "--no-verify"]).config("help.autocorrect", "never"), "run"),
        (git(&["-c", "help.autocorrect=0", "comit", "-n"]).config("help.autocorrect", "1"), "run"),
        // After an alias expansion git does not autocorrect.
        (on(&["x"]).config("alias.x", "comit --no-verify"), "run"),
    ]);
}
