//! The refusal messages as the agent reads them, whole.

use gitguard::Verdict;

use crate::{git, Case};

fn message(case: Case) -> String {
    match case.verdict() {
        Verdict::Refuse(refusal) => refusal.to_string(),
        Verdict::Run { .. } | Verdict::Unchanged { .. } => panic!("expected a refusal"),
    }
}

#[test]
fn no_verify_refusal_reads_whole() {
    assert_eq!(
        message(git(&["commit", "--no-verify", "-m", "wip"])),
        "agent-sandbox: refused `git commit --no-verify`: it skips the repository's pre-commit checks.\n\
         Instead: run the checks, fix what fails, and commit again without --no-verify."
    );
}

#[test]
fn bundled_no_verify_refusal_explains_the_spelling() {
    assert_eq!(
        message(git(&["commit", "-anm", "wip"])),
        "agent-sandbox: refused `git commit -anm`: `-anm` means --no-verify for git commit: it skips the repository's pre-commit checks.\n\
         Instead: run the checks, fix what fails, and commit again without --no-verify."
    );
}

#[test]
fn alias_refusal_names_the_alias() {
    assert_eq!(
        message(git(&["ci", "-m", "x"]).config("alias.ci", "commit --no-verify")),
        "agent-sandbox: refused `git commit --no-verify`: it skips the repository's pre-commit checks \
         (`git ci` is an alias: `ci` = `commit --no-verify`).\n\
         Instead: run the checks, fix what fails, and commit again without --no-verify."
    );
}

#[test]
fn force_push_refusal_reads_whole() {
    assert_eq!(
        message(git(&["push", "origin", "+main"])),
        "agent-sandbox: refused `git push origin +main`: the leading `+` in `+main` force-updates the remote branch, overwriting its history.\n\
         Instead: integrate the remote changes first (`git pull --rebase`) and push without force, or push a new branch and open a pull request; if the remote history really must be rewritten, ask the user."
    );
}

#[test]
fn config_override_refusal_reads_whole() {
    assert_eq!(
        message(git(&["-c", "core.hooksPath=/dev/null", "commit", "-m", "x"])),
        "agent-sandbox: refused `git -c core.hooksPath=/dev/null`: it sets core.hookspath: it points git at another hooks directory, so the repository's checks would not run.\n\
         Instead: run git without overriding core.hookspath; the repository's hook configuration is fixed in this sandbox."
    );
}
