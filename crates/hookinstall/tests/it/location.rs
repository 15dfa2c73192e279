//! `hooks_dir` against git's own answer (`git rev-parse --git-path hooks`) for each way
//! the hooks directory is chosen, and its errors.

use std::path::Path;

use crate::support::{unused_binary, write_script, ChildOutcome, Sandbox};

/// `hooks_dir(start)` is `expected`, and git agrees.
fn check(sandbox: &Sandbox, start: &Path, expected: &Path) {
    std::fs::create_dir_all(expected).expect("create the expected hooks dir so git's answer resolves");
    assert_eq!(hookinstall::hooks_dir(start).expect("hooks_dir"), expected);
    assert_eq!(sandbox.git_hooks_dir(start), expected, "git disagrees");
}

#[test]
fn default_is_the_git_dirs_hooks_from_anywhere_in_the_work_tree() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    std::fs::create_dir_all(repo.join("a/b")).expect("mkdir");
    check(&sandbox, &repo, &repo.join(".git/hooks"));
    check(&sandbox, &repo.join("a/b"), &repo.join(".git/hooks"));
}

#[test]
fn relative_hooks_path_is_relative_to_the_top_of_the_work_tree() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    std::fs::create_dir_all(repo.join("a/b")).expect("mkdir");
    sandbox.git(&repo, &["config", "core.hooksPath", ".husky/_"]);
    check(&sandbox, &repo.join("a/b"), &repo.join(".husky/_"));
}

#[test]
fn absolute_hooks_path_is_taken_as_it_is() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    let elsewhere = sandbox.root.join("shared-hooks");
    sandbox.git(&repo, &["config", "core.hooksPath", &elsewhere.display().to_string()]);
    check(&sandbox, &repo, &elsewhere);
}

#[test]
fn a_linked_worktree_gets_the_main_repositorys_hooks() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init_with_commit("repo");
    sandbox.git(&repo, &["worktree", "add", "-q", "-b", "feature", "../wt"]);
    check(&sandbox, &sandbox.root.join("wt"), &repo.join(".git/hooks"));
}

#[test]
fn a_bare_repository_uses_its_own_hooks() {
    let sandbox = Sandbox::new();
    sandbox.git(&sandbox.root, &["init", "-q", "--bare", "remote.git"]);
    let bare = sandbox.root.join("remote.git");
    check(&sandbox, &bare, &bare.join("hooks"));
    sandbox.git(&bare, &["config", "core.hooksPath", "custom"]);
    check(&sandbox, &bare, &bare.join("custom"));
}

#[test]
fn a_missing_hooks_directory_is_still_named() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    std::fs::remove_dir_all(repo.join(".git/hooks")).expect("remove hooks");
    assert_eq!(hookinstall::hooks_dir(&repo).expect("hooks_dir"), repo.join(".git/hooks"));
}

#[test]
fn tilde_and_global_config_are_resolved_with_the_callers_home() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    // Repository config with `~/`.
    sandbox.git(&repo, &["config", "core.hooksPath", "~/my-hooks"]);
    let expected = sandbox.home.join("my-hooks");
    std::fs::create_dir(&expected).expect("mkdir");
    let outcome = sandbox.in_child("hooks-dir", &repo, &unused_binary());
    assert_eq!(outcome, ChildOutcome::Ok(hookinstall::Report { hooks_dir: expected.clone(), actions: vec![] }));
    assert_eq!(sandbox.git_hooks_dir(&repo), expected);

    // Global config only.
    sandbox.git(&repo, &["config", "--unset", "core.hooksPath"]);
    std::fs::write(sandbox.home.join(".gitconfig"), "[core]\n\thooksPath = ~/global-hooks\n").expect("gitconfig");
    let expected = sandbox.home.join("global-hooks");
    std::fs::create_dir(&expected).expect("mkdir");
    let outcome = sandbox.in_child("hooks-dir", &repo, &unused_binary());
    assert_eq!(outcome, ChildOutcome::Ok(hookinstall::Report { hooks_dir: expected.clone(), actions: vec![] }));
    assert_eq!(sandbox.git_hooks_dir(&repo), expected);

    // The repository's own setting beats the global one, as in git.
    sandbox.git(&repo, &["config", "core.hooksPath", "local-hooks"]);
    std::fs::create_dir(repo.join("local-hooks")).expect("mkdir");
    let outcome = sandbox.in_child("hooks-dir", &repo, &unused_binary());
    assert_eq!(outcome, ChildOutcome::Ok(hookinstall::Report { hooks_dir: repo.join("local-hooks"), actions: vec![] }));
    assert_eq!(sandbox.git_hooks_dir(&repo), repo.join("local-hooks"));
}

#[test]
fn the_global_hooks_path_is_where_git_commit_runs_the_installed_shim() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    std::fs::write(sandbox.home.join(".gitconfig"), "[core]\n\thooksPath = ~/global-hooks\n").expect("gitconfig");
    let marker = sandbox.root.join("user-hook-ran");
    write_script(
        &sandbox.home.join("global-hooks/pre-commit"),
        &format!("#!/bin/sh\ntouch {}\n", crate::support::quote(&marker)),
    );
    let missing_binary = sandbox.root.join("not-installed/agent-sandbox");
    let ChildOutcome::Ok(_) = sandbox.in_child("install", &repo, &missing_binary) else { panic!("install failed") };
    let shim = std::fs::read_to_string(sandbox.home.join("global-hooks/pre-commit")).expect("shim");
    assert!(shim.contains(hookinstall::MARKER));
    // No agent-sandbox anywhere: the shim runs the chained hook itself.
    let out = sandbox.git_output(&repo, &["commit", "-q", "--allow-empty", "-m", "x"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(marker.exists(), "the chained global hook did not run");
}

#[test]
fn outside_a_repository_the_error_says_so() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root.join("plain");
    std::fs::create_dir(&dir).expect("mkdir");
    let err = hookinstall::hooks_dir(&dir).expect_err("not a repository");
    let text = err.to_string();
    assert!(text.starts_with(&format!("not a git repository: {} (", dir.display())), "{text}");
    assert!(text.ends_with("; run it inside a repository)"), "{text}");
    let err = hookinstall::install(&dir, &unused_binary(), false).expect_err("not a repository");
    assert!(matches!(err, hookinstall::InstallError::NotARepository { .. }), "{err}");
    assert_eq!(std::fs::read_dir(&dir).expect("read_dir").count(), 0, "install wrote something");
}

#[test]
fn an_empty_hooks_path_is_an_error_with_the_fix() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    sandbox.git(&repo, &["config", "core.hooksPath", ""]);
    let err = hookinstall::hooks_dir(&repo).expect_err("empty hooksPath");
    assert_eq!(
        err.to_string(),
        format!(
            "core.hooksPath is empty for the repository at {} (set it to a directory with `git config core.hooksPath DIR`, or unset it)",
            repo.join(".git").display()
        )
    );
}

#[test]
fn a_hooks_path_that_is_a_file_is_refused_by_install() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    std::fs::write(repo.join("hooks-file"), "").expect("write");
    sandbox.git(&repo, &["config", "core.hooksPath", "hooks-file"]);
    let err = hookinstall::install(&repo, &unused_binary(), false).expect_err("a file");
    assert_eq!(
        err.to_string(),
        format!(
            "the hooks directory {} exists but is not a directory (move it aside, or point core.hooksPath at a directory)",
            repo.join("hooks-file").display()
        )
    );
}
