//! `parse`: what the caller's repository checks get, compared whole.

use std::path::PathBuf;

use gitguard::{parse, Parsed};

use crate::git;

#[test]
fn parse_reports_directories_and_the_effective_subcommand() {
    let parsed = git(&["-C", "a", "-C", "b", "--git-dir=../g", "--work-tree", "wt", "ci", "-m", "x"])
        .config("alias.ci", "commit --amend")
        .with_request(parse);
    assert_eq!(
        parsed,
        Ok(Parsed {
            subcommand: Some("commit".to_owned()),
            args: vec!["--amend".to_owned(), "-m".to_owned(), "x".to_owned()],
            aliases: vec!["ci".to_owned()],
            shell_alias: None,
            chdirs: vec![PathBuf::from("a"), PathBuf::from("b")],
            git_dir: Some(PathBuf::from("../g")),
            work_tree: Some(PathBuf::from("wt")),
            common_dir: None,
            bare: false,
        })
    );
}

#[test]
fn parse_falls_back_to_the_environment() {
    let parsed = git(&["status"])
        .env("GIT_DIR", "/r/.git")
        .env("GIT_WORK_TREE", "/r")
        .env("GIT_COMMON_DIR", "/c")
        .with_request(parse);
    assert_eq!(
        parsed,
        Ok(Parsed {
            subcommand: Some("status".to_owned()),
            git_dir: Some(PathBuf::from("/r/.git")),
            work_tree: Some(PathBuf::from("/r")),
            common_dir: Some(PathBuf::from("/c")),
            ..Parsed::default()
        })
    );
    let flag_wins = git(&["--git-dir", "x", "status"]).env("GIT_DIR", "/r/.git").with_request(parse);
    assert_eq!(flag_wins.map(|parsed| parsed.git_dir), Ok(Some(PathBuf::from("x"))));
}

#[test]
fn parse_of_special_invocations() {
    let subcommand = |case: crate::Case| case.with_request(parse).map(|parsed| parsed.subcommand);
    assert_eq!(subcommand(git(&["--version"])), Ok(Some("version".to_owned())));
    assert_eq!(subcommand(git(&["-h"])), Ok(Some("help".to_owned())));
    assert_eq!(subcommand(git(&[])), Ok(None));
    assert_eq!(subcommand(git(&["--html-path"])), Ok(None));
    assert_eq!(subcommand(git(&["-n"]).argv0("git-commit")), Ok(Some("commit".to_owned())));
    let shell = git(&["x", "a"]).config("alias.x", "!echo hi").with_request(parse);
    assert_eq!(
        shell.map(|parsed| (parsed.subcommand, parsed.shell_alias)),
        Ok((Some("x".to_owned()), Some("echo hi".to_owned())))
    );
    let bare = git(&["--bare", "log"]).with_request(parse);
    assert_eq!(bare.map(|parsed| parsed.bare), Ok(true));
    let looping = git(&["a"]).config("alias.a", "b").config("alias.b", "a").with_request(parse);
    assert_eq!(looping.map_err(|refusal| refusal.rule), Err("alias-loop"));
}
