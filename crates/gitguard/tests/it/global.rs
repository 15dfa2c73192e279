//! Global options before the subcommand, the dashed `git-commit` form and the exec-path:
//! the command after them is judged as usual; `--exec-path=` and a writable
//! `GIT_EXEC_PATH` are refused.

use crate::{check, check_args, git};

#[test]
fn global_options_do_not_hide_the_subcommand() {
    check_args(&[
        (&["-C", "dir", "commit", "--no-verify"], "no-verify"),
        (&["-C", "", "commit", "-n"], "no-verify"),
        (&["--git-dir=x", "commit", "-n"], "no-verify"),
        (&["--git-dir", "x", "commit", "-n"], "no-verify"),
        (&["--work-tree=wt", "--git-dir=g", "commit", "-n"], "no-verify"),
        (&["--work-tree", "wt", "commit", "-n"], "no-verify"),
        (&["--no-pager", "commit", "-n"], "no-verify"),
        (&["-P", "commit", "-n"], "no-verify"),
        (&["-p", "commit", "--no-verify"], "no-verify"),
        (&["--paginate", "push", "-f"], "force-push"),
        (&["--bare", "push", "--mirror"], "mirror-push"),
        (&["--namespace", "ns", "commit", "-n"], "no-verify"),
        (&["--namespace=ns", "commit", "-n"], "no-verify"),
        (&["--literal-pathspecs", "--glob-pathspecs", "commit", "-n"], "no-verify"),
        (&["--noglob-pathspecs", "--icase-pathspecs", "commit", "-n"], "no-verify"),
        (&["--no-optional-locks", "--no-advice", "commit", "-n"], "no-verify"),
        (&["--no-replace-objects", "--no-lazy-fetch", "commit", "-n"], "no-verify"),
        (&["--attr-source", "HEAD", "commit", "-n"], "no-verify"),
        (&["--attr-source=HEAD", "commit", "-n"], "no-verify"),
        (&["--shallow-file", "x", "commit", "-n"], "no-verify"),
        (&["-c", "user.name=x", "commit", "-n"], "no-verify"),
        (&["--config-env", "user.name=NAME", "commit", "-n"], "no-verify"),
        (&["--no-literal-pathspecs", "-C", "a", "-C", "b", "commit", "-n"], "no-verify"),
    ]);
}

#[test]
fn invocations_where_git_runs_no_command_pass() {
    check_args(&[
        (&[], "run"),
        (&["--version"], "run"),
        (&["-v", "commit", "-n"], "run"),
        (&["--help", "commit"], "run"),
        (&["-h"], "run"),
        (&["help", "commit"], "run"),
        (&["commit", "--help", "--no-verify"], "run"),
        (&["--html-path"], "run"),
        (&["--list-cmds=main", "commit", "-n"], "run"),
        (&["--exec-path"], "run"),
        // An unknown global option: git prints usage and exits.
        (&["--frobnicate", "commit", "-n"], "run"),
        // Missing values: usage error.
        (&["-C"], "run"),
        (&["-c"], "run"),
    ]);
}

#[test]
fn exec_path_is_refused_unless_it_is_a_system_directory() {
    let commit = || git(&["commit", "-m", "x"]);
    check(&[
        (git(&["--exec-path=/tmp", "commit"]), "exec-path"),
        (git(&["--exec-path=", "status"]), "exec-path"),
        (git(&["--exec-path=/usr/lib/git-core", "status"]), "exec-path"),
        (commit().env("GIT_EXEC_PATH", "/tmp/x"), "exec-path"),
        (commit().env("GIT_EXEC_PATH", "/usr/../tmp/x"), "exec-path"),
        (commit().env("GIT_EXEC_PATH", "libexec/git-core"), "exec-path"),
        // git sets it itself for hooks and aliases, to its own exec-path.
        (commit().env("GIT_EXEC_PATH", "/usr/local/libexec/git-core"), "run"),
        (commit().env("GIT_EXEC_PATH", "/usr/lib/git-core"), "run"),
    ]);
}

#[test]
fn dashed_builtins_are_their_subcommand() {
    check(&[
        (git(&["--no-verify"]).argv0("git-commit"), "no-verify"),
        (git(&["-anm", "x"]).argv0("git-commit"), "no-verify"),
        (git(&["-m", "x"]).argv0("git-commit"), "run"),
        (git(&["-n"]).argv0("/usr/lib/git-core/git-commit"), "no-verify"),
        (git(&["--force", "origin", "main"]).argv0("git-push"), "force-push"),
        (git(&["-n", "origin", "main"]).argv0("git-push"), "run"),
        (git(&["-n", "5"]).argv0("git-log"), "run"),
        (git(&["-d", "refs/heads/x"]).argv0("git-update-ref"), "branch-delete"),
        (git(&["x", "-m", "y"]).argv0("git-send-pack"), "plumbing-push"),
        // No global options in the dashed form: `-c` is commit's reedit-message.
        (git(&["-c", "core.hooksPath=/dev/null"]).argv0("git-commit"), "run"),
        // No aliases either.
        (git(&["-m", "x"]).argv0("git-ci").config("alias.ci", "commit -n"), "run"),
    ]);
}
