//! Differential tests against the real git: for each command line, run git in a
//! temporary repository whose hooks leave a mark, and check the guard agrees with what
//! git did. When git succeeds, the guard refuses `no-verify` exactly when the hook did
//! not run, and refuses `force-push` whenever a non-fast-forward push went through. When
//! git fails (ambiguous option, bad value), any verdict is safe. Skips with a printed
//! reason when git is missing, except under CI.

use std::path::Path;
use std::process::{Command, Output};

use crate::git;

fn git_available() -> bool {
    let found = Command::new("git").arg("--version").output().is_ok_and(|out| out.status.success());
    if !found {
        assert!(std::env::var_os("CI").is_none(), "git is required under CI");
        println!("skipped: git not found on PATH");
    }
    found
}

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_EDITOR", "true")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("run git")
}

fn ok(dir: &Path, args: &[&str]) {
    let out = run(dir, args);
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn install_hook(repo: &Path, name: &str, marker: &Path) {
    let hook = repo.join(".git/hooks").join(name);
    std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).expect("write hook");
    let status = Command::new("chmod").arg("+x").arg(&hook).status().expect("chmod");
    assert!(status.success());
}

/// The guard's outcome for `git ARGS`.
fn guard(args: &[&str]) -> String {
    git(args).outcome()
}

#[test]
fn commit_no_verify_matches_the_real_git() {
    if !git_available() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    ok(&repo, &["init", "-q"]);
    let marker = tmp.path().join("pre-commit-ran");
    install_hook(&repo, "pre-commit", &marker);
    let forms: &[&[&str]] = &[
        &["-n", "-m", "x"],
        &["--no-verify", "-m", "x"],
        &["-anm", "x"],
        &["-nam", "x"],
        &["-am", "x", "-n"],
        &["-qn", "-m", "x"],
        &["-m", "-n"],
        &["-mn"],
        &["-am", "-n"],
        &["--message=--no-verify"],
        &["-m", "--", "-n"],
        &["-u", "-n", "-m", "x"],
        &["-un", "-m", "x"],
        &["-F", "/dev/null", "-n"],
        &["--no-verif", "-m", "x"],
        &["--no-veri", "-m", "x"],
        &["--no-ver", "-m", "x"],
        &["--no-v", "-m", "x"],
        &["--n", "-m", "x"],
        &["--no-no-verify", "-m", "x"],
        &["--no-no-verif", "-m", "x"],
        &["--verify", "--no-verify", "-m", "x"],
        &["--no-verify", "--verify", "-m", "x"],
        &["-n", "--veri", "-m", "x"],
        &["--veri", "-n", "-m", "x"],
        &["--ve", "-m", "x"],
        &["--no-verify=1", "-m", "x"],
        &["-c", "-n"],
        &["--trailer", "-n", "-m", "x"],
    ];
    let mut succeeded = 0;
    for form in forms {
        let _ = std::fs::remove_file(&marker);
        let mut args = vec!["commit", "-q", "--allow-empty", "--allow-empty-message"];
        args.extend_from_slice(form);
        let out = run(&repo, &args);
        let verdict = guard(&args);
        if out.status.success() {
            succeeded += 1;
            let hook_ran = marker.exists();
            assert_eq!(verdict == "no-verify", !hook_ran, "git {args:?}: hook ran: {hook_ran}, guard: {verdict}");
        } else {
            assert!(verdict == "run" || verdict == "no-verify", "git {args:?} failed, guard: {verdict}");
        }
    }
    assert!(succeeded >= 20, "only {succeeded} forms ran: the repository setup is broken");
}

/// A repository whose HEAD has diverged from the remote's `main`, and a pre-push hook.
fn diverged_push_world(tmp: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let remote = tmp.join("remote.git");
    let repo = tmp.join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    ok(tmp, &["init", "-q", "--bare", "remote.git"]);
    ok(&repo, &["init", "-q"]);
    ok(&repo, &["remote", "add", "origin", remote.to_str().expect("utf-8 path")]);
    ok(&repo, &["commit", "-q", "--allow-empty", "-m", "a"]);
    ok(&repo, &["commit", "-q", "--allow-empty", "-m", "b"]);
    ok(&repo, &["push", "-q", "origin", "HEAD:refs/heads/main"]);
    ok(&repo, &["reset", "-q", "--hard", "HEAD~1"]);
    ok(&repo, &["commit", "-q", "--allow-empty", "-m", "c"]);
    let marker = tmp.join("pre-push-ran");
    install_hook(&repo, "pre-push", &marker);
    (repo, marker)
}

#[test]
fn push_no_verify_and_force_match_the_real_git() {
    if !git_available() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let (repo, marker) = diverged_push_world(tmp.path());
    // Dry runs: git checks fast-forwards and runs the pre-push hook, and the remote
    // stays as it is for the next form.
    let forms: &[&[&str]] = &[
        &["origin", "HEAD:refs/heads/new"],
        &["--no-verify", "origin", "HEAD:refs/heads/new"],
        &["--no-verif", "origin", "HEAD:refs/heads/new"],
        &["--no-v", "origin", "HEAD:refs/heads/new"],
        &["--no-verify", "--verify", "origin", "HEAD:refs/heads/new"],
        &["origin", "HEAD:main"],
        &["-f", "origin", "HEAD:main"],
        &["--force", "origin", "HEAD:main"],
        &["-fu", "origin", "HEAD:main"],
        &["--forc", "origin", "HEAD:main"],
        &["--force-w", "origin", "HEAD:main"],
        &["--force-with-lease", "origin", "HEAD:main"],
        &["--force", "--no-force", "origin", "HEAD:main"],
        &["origin", "+HEAD:main"],
        &["origin", "--", "+HEAD:main"],
        &["-o", "+x", "origin", "HEAD:main"],
        &["--repo=origin", "+HEAD:main"],
    ];
    let (mut forced, mut rejected, mut hook_skipped) = (0, 0, 0);
    for form in forms {
        let _ = std::fs::remove_file(&marker);
        let mut args = vec!["push", "-q", "-n"];
        args.extend_from_slice(form);
        let out = run(&repo, &args);
        let verdict = guard(&args);
        let to_main = form.iter().any(|arg| arg.ends_with(":main"));
        if !out.status.success() {
            rejected += usize::from(to_main && verdict == "run");
            continue;
        }
        if to_main {
            // A non-fast-forward update of main went through: it was forced.
            forced += 1;
            assert_eq!(verdict, "force-push", "git {args:?} force-pushed, guard: {verdict}");
        } else {
            hook_skipped += usize::from(!marker.exists());
            let hook_ran = marker.exists();
            assert_eq!(verdict == "no-verify", !hook_ran, "git {args:?}: hook ran: {hook_ran}, guard: {verdict}");
        }
    }
    // The world works as intended: plain pushes to main are rejected, forced ones go
    // through, and --no-verify skips the hook.
    assert!(forced >= 5 && rejected >= 3 && hook_skipped >= 2, "{forced} {rejected} {hook_skipped}");
}
