//! The installed shims run for real by `git commit` and `git push`: they find
//! agent-sandbox (on `PATH` before the install-time path), pass the arguments and stdin
//! through, and without any agent-sandbox run the chained hook themselves, as git would
//! have run it (husky's scripts included).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::round_trip::husky_layout;
use crate::support::{quote, write_script, Sandbox};

/// A stand-in for agent-sandbox at `path`: logs its arguments and stdin under `log` as
/// `<name>-<hook>-args|stdin`, then runs the chained hook with the rest of the arguments
/// and the same stdin, as the guard does after its checks.
fn fake_agent_sandbox(path: &Path, name: &str, log: &Path, hooks: &Path) {
    write_script(
        path,
        &format!(
            r#"#!/bin/sh
log={log}
hooks={hooks}
printf '%s\n' "$@" >"$log/{name}-$2-args"
cat >"$log/{name}-$2-stdin"
hook=$2
shift 2
exec "$hooks/$hook.agent-sandbox-chained" "$@" <"$log/{name}-$hook-stdin"
"#,
            log = quote(log),
            hooks = quote(hooks),
        ),
    );
}

/// A user hook that logs its arguments and stdin as `user-<hook>-args|stdin`.
fn user_hook(path: &Path, hook: &str, log: &Path) {
    write_script(
        path,
        &format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" >{args}\ncat >{stdin}\n",
            args = quote(&log.join(format!("user-{hook}-args"))),
            stdin = quote(&log.join(format!("user-{hook}-stdin"))),
        ),
    );
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// A repository with a commit, a bare remote `origin`, user `pre-commit` and `pre-push`
/// hooks, and a log directory.
fn repo_with_user_hooks(sandbox: &Sandbox) -> (PathBuf, PathBuf) {
    let repo = sandbox.init_with_commit("repo");
    sandbox.git(&sandbox.root, &["init", "-q", "--bare", "remote.git"]);
    sandbox.git(&repo, &["remote", "add", "origin", &sandbox.root.join("remote.git").display().to_string()]);
    let log = sandbox.root.join("log");
    std::fs::create_dir(&log).expect("mkdir log");
    for hook in ["pre-commit", "pre-push"] {
        user_hook(&repo.join(".git/hooks").join(hook), hook, &log);
    }
    (repo, log)
}

#[test]
fn commit_and_push_run_the_guard_then_the_chained_hooks_with_arguments_and_stdin() {
    let sandbox = Sandbox::new();
    let (repo, log) = repo_with_user_hooks(&sandbox);
    let hooks = repo.join(".git/hooks");
    let binary = sandbox.root.join("install dir/agent-sandbox");
    fake_agent_sandbox(&binary, "installed", &log, &hooks);
    hookinstall::install(&repo, &binary, false).expect("install");

    let out = sandbox.git_output(&repo, &["commit", "-q", "--allow-empty", "-m", "second"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(read(log.join("installed-pre-commit-args")), "hook\npre-commit\n");
    assert_eq!(read(log.join("user-pre-commit-args")), "\n", "printf with no arguments prints one empty line");

    let out = sandbox.git_output(&repo, &["push", "-q", "origin", "main"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let url = sandbox.root.join("remote.git").display().to_string();
    let head = sandbox.git(&repo, &["rev-parse", "HEAD"]);
    let ref_line = format!("refs/heads/main {head} refs/heads/main {}\n", "0".repeat(40));
    assert_eq!(read(log.join("installed-pre-push-args")), format!("hook\npre-push\norigin\n{url}\n"));
    assert_eq!(read(log.join("installed-pre-push-stdin")), ref_line);
    assert_eq!(read(log.join("user-pre-push-args")), format!("origin\n{url}\n"));
    assert_eq!(read(log.join("user-pre-push-stdin")), ref_line);
}

#[test]
fn agent_sandbox_on_path_comes_before_the_install_time_path() {
    let sandbox = Sandbox::new();
    let (repo, log) = repo_with_user_hooks(&sandbox);
    let hooks = repo.join(".git/hooks");
    let binary = sandbox.root.join("installed/agent-sandbox");
    fake_agent_sandbox(&binary, "installed", &log, &hooks);
    let on_path = sandbox.root.join("bin");
    fake_agent_sandbox(&on_path.join("agent-sandbox"), "on-path", &log, &hooks);
    hookinstall::install(&repo, &binary, false).expect("install");

    let mut path = std::ffi::OsString::from(&on_path);
    path.push(":");
    path.push(crate::support::path_without_agent_sandbox());
    let out = sandbox
        .git_command(&repo, &["commit", "-q", "--allow-empty", "-m", "second"])
        .env("PATH", path)
        .output()
        .expect("git commit");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(read(log.join("on-path-pre-commit-args")), "hook\npre-commit\n");
    assert!(!log.join("installed-pre-commit-args").exists());
    assert!(log.join("user-pre-commit-args").exists());
}

#[test]
fn without_agent_sandbox_the_shim_runs_the_chained_hook_itself() {
    let sandbox = Sandbox::new();
    let (repo, log) = repo_with_user_hooks(&sandbox);
    hookinstall::install(&repo, &sandbox.root.join("uninstalled/agent-sandbox"), false).expect("install");

    let out = sandbox.git_output(&repo, &["commit", "-q", "--allow-empty", "-m", "second"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(log.join("user-pre-commit-args").exists(), "the chained pre-commit did not run");

    let out = sandbox.git_output(&repo, &["push", "-q", "origin", "main"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let url = sandbox.root.join("remote.git").display().to_string();
    let head = sandbox.git(&repo, &["rev-parse", "HEAD"]);
    assert_eq!(read(log.join("user-pre-push-args")), format!("origin\n{url}\n"));
    assert_eq!(
        read(log.join("user-pre-push-stdin")),
        format!("refs/heads/main {head} refs/heads/main {}\n", "0".repeat(40))
    );
}

#[test]
fn without_agent_sandbox_a_failing_chained_hook_still_stops_the_commit() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init_with_commit("repo");
    write_script(&repo.join(".git/hooks/pre-commit"), "#!/bin/sh\necho 'lint failed' >&2\nexit 3\n");
    hookinstall::install(&repo, &sandbox.root.join("uninstalled/agent-sandbox"), false).expect("install");
    let out = sandbox.git_output(&repo, &["commit", "-q", "--allow-empty", "-m", "second"], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("lint failed"));
}

#[test]
fn without_agent_sandbox_or_a_chained_hook_the_shim_lets_git_go_on() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init_with_commit("repo");
    // Not executable: git would not have run it, and neither does the shim.
    std::fs::write(repo.join(".git/hooks/pre-commit"), "#!/bin/sh\nexit 1\n").expect("write");
    hookinstall::install(&repo, &sandbox.root.join("uninstalled/agent-sandbox"), false).expect("install");
    let out = sandbox.git_output(&repo, &["commit", "-q", "--allow-empty", "-m", "second"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Run directly under `sh -e` (the shim must be set -e safe), no chained hook at all.
    let shim = repo.join(".git/hooks/pre-push");
    let status = Command::new("sh")
        .arg("-e")
        .arg(&shim)
        .arg("origin")
        .env("PATH", crate::support::path_without_agent_sandbox())
        .stdin(Stdio::null())
        .status()
        .expect("run shim");
    assert!(status.success());
}

#[test]
fn husky_hooks_still_run_through_the_shim() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init_with_commit("repo");
    let marker = sandbox.root.join("husky-user-hook-ran");
    husky_layout(&sandbox, &repo, &format!("echo \"$@\" > {}\n", quote(&marker)));
    hookinstall::install(&repo, &sandbox.root.join("uninstalled/agent-sandbox"), false).expect("install");

    let out = sandbox.git_output(&repo, &["commit", "-q", "--allow-empty", "-m", "second"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(marker.exists(), "husky's .husky/pre-commit did not run through the shim");
}

#[test]
fn chained_command_runs_a_husky_hook_as_git_would_and_the_bare_path_would_not() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init_with_commit("repo");
    let marker = sandbox.root.join("husky-user-hook-args");
    husky_layout(&sandbox, &repo, &format!("printf '%s\\n' \"$@\" > {}\n", quote(&marker)));
    hookinstall::install(&repo, &sandbox.root.join("uninstalled/agent-sandbox"), false).expect("install");
    let hooks = repo.join(".husky/_");

    // Executing the chained file by its own name: husky looks for .husky/pre-commit.agent-sandbox-chained,
    // finds nothing, and silently succeeds. This is why the guard should use chained_command.
    let chained = hookinstall::chained_hook(&hooks, "pre-commit").expect("chained hook");
    let status = Command::new(&chained).current_dir(&repo).status().expect("run chained");
    assert!(status.success());
    assert!(!marker.exists());

    let status = hookinstall::chained_command(&hooks, "pre-commit")
        .expect("chained command")
        .args(["one", "two words"])
        .current_dir(&repo)
        .status()
        .expect("run chained command");
    assert!(status.success());
    assert_eq!(read(marker), "one\ntwo words\n");
}

#[test]
fn chained_hook_is_only_a_hook_git_would_have_run() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    let hooks = repo.join(".git/hooks");
    assert_eq!(hookinstall::chained_hook(&hooks, "pre-commit"), None);
    std::fs::write(hooks.join("pre-commit.agent-sandbox-chained"), "#!/bin/sh\n").expect("write");
    assert_eq!(hookinstall::chained_hook(&hooks, "pre-commit"), None, "not executable");
    crate::support::set_mode(&hooks.join("pre-commit.agent-sandbox-chained"), 0o755);
    assert_eq!(hookinstall::chained_hook(&hooks, "pre-commit"), Some(hooks.join("pre-commit.agent-sandbox-chained")));
}
