//! Configuration: overrides of protected keys through every channel (`-c`,
//! `--config-env`, `GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_COUNT`, config-file variables)
//! and `git config` writes of them are refused; harmless overrides, reads and writes of
//! other keys pass.

use crate::{check, check_args, git};

#[test]
fn protected_overrides_on_the_command_line_are_refused() {
    check_args(&[
        (&["-c", "core.hooksPath=/dev/null", "commit", "-m", "x"], "config-override"),
        (&["-c", "CORE.HOOKSPATH=x", "commit", "-m", "x"], "config-override"),
        (&["-c", "core.hookspath", "commit", "-m", "x"], "config-override"),
        (&["-c", " core.hooksPath =x", "commit", "-m", "x"], "config-override"),
        (&["-c", "core.hooksPath=", "commit", "-m", "x"], "config-override"),
        (&["-c", "user.name=x", "-c", "core.hooksPath=/tmp", "commit"], "config-override"),
        (&["--config-env=core.hooksPath=HOOKS", "commit", "-m", "x"], "config-override"),
        (&["--config-env", "core.hooksPath=HOOKS", "commit", "-m", "x"], "config-override"),
        (&["-c", "hook.lint.command=true", "commit", "-m", "x"], "config-override"),
        (&["-c", "hook.pre-commit.event=pre-commit", "commit"], "config-override"),
        (&["-c", "include.path=/tmp/evil", "commit", "-m", "x"], "config-override"),
        (&["-c", "includeIf.gitdir:/.path=/tmp/evil", "commit"], "config-override"),
        (&["-c", "IncludeIf.onbranch:main.path=/tmp/evil", "commit"], "config-override"),
        (&["-c", "alias.ci=commit --no-verify", "ci", "-m", "x"], "config-override"),
        (&["-c", "core.fsmonitor=/tmp/run-me", "status"], "config-override"),
        (&["-c", "remote.origin.push=+refs/heads/*:refs/heads/*", "push"], "config-override"),
        (&["-c", "remote.origin.mirror=true", "push"], "config-override"),
        (&["-C", "sub", "-c", "core.hooksPath=/dev/null", "commit"], "config-override"),
        // Refused even when git would only print something, unless it disables
        // nothing (`--version` runs no hook): a path other than /dev/null.
        (&["-c", "core.hooksPath=/tmp/h", "--version"], "config-override"),
    ]);
}

#[test]
fn harmless_overrides_pass() {
    check(&[
        (git(&["-c", "user.name=x", "commit", "-m", "m"]), "run"),
        (git(&["-c", "color.ui=always", "status"]), "run"),
        (git(&["-c", "core.editor=vim", "commit"]), "run"),
        (git(&["-c", "core.sshCommand=ssh -v", "push", "origin", "main"]), "run"),
        (git(&["-c", "sequence.editor=true", "rebase", "-i", "main"]), "run"),
        (git(&["-c", "core.hooks=x", "commit", "-m", "x"]), "run"),
        // A subsection makes it another key, which git never reads as the hooks path.
        (git(&["-c", "core.x.hooksPath=/dev/null", "commit", "-m", "x"]), "run"),
        (git(&["-c", "remote.origin.url=/srv/r.git", "push", "origin", "main"]), "run"),
        (git(&["-c", "push.default=current", "push"]), "run"),
        (git(&["-c", "user.email", "commit", "-m", "x"]), "run"),
        (git(&["--config-env=user.name=NAME", "commit", "-m", "x"]).env("NAME", "n"), "run"),
    ]);
}

#[test]
fn protected_overrides_in_the_environment_are_refused() {
    let commit = || git(&["commit", "-m", "x"]);
    check(&[
        (commit().env("GIT_CONFIG_PARAMETERS", "'core.hookspath'='/dev/null'"), "config-override"),
        (commit().env("GIT_CONFIG_PARAMETERS", "'core.hooksPath=/dev/null'"), "config-override"),
        (commit().env("GIT_CONFIG_PARAMETERS", "'CORE.hooksPath'='x'"), "config-override"),
        (commit().env("GIT_CONFIG_PARAMETERS", "'user.name'='x' 'core.hookspath'='y'"), "config-override"),
        (commit().env("GIT_CONFIG_PARAMETERS", "'core.hookspath'"), "config-override"),
        (commit().env("GIT_CONFIG_PARAMETERS", "'core.hookspath'="), "config-override"),
        (commit().env("GIT_CONFIG_PARAMETERS", "'alias.ci'='commit -n'"), "config-override"),
        (commit().env("GIT_CONFIG_PARAMETERS", "'include.path'='/tmp/it'\\''s'"), "config-override"),
        // Not in git's format: git would die, the guard refuses.
        (commit().env("GIT_CONFIG_PARAMETERS", "core.hookspath=/dev/null"), "config-override"),
        (commit().env("GIT_CONFIG_PARAMETERS", "'user.name'='x'junk"), "config-override"),
        (commit().env("GIT_CONFIG_PARAMETERS", "'user.name"), "config-override"),
        (
            commit()
                .env("GIT_CONFIG_COUNT", "1")
                .env("GIT_CONFIG_KEY_0", "core.hooksPath")
                .env("GIT_CONFIG_VALUE_0", "/x"),
            "config-override",
        ),
        (
            commit()
                .env("GIT_CONFIG_COUNT", "2")
                .env("GIT_CONFIG_KEY_0", "user.name")
                .env("GIT_CONFIG_VALUE_0", "x")
                .env("GIT_CONFIG_KEY_1", "Hook.x.Command")
                .env("GIT_CONFIG_VALUE_1", "true"),
            "config-override",
        ),
        (commit().env("GIT_CONFIG_COUNT", "x"), "config-override"),
        (commit().env("GIT_CONFIG_COUNT", "1"), "config-override"),
        (commit().env("GIT_CONFIG_GLOBAL", "/tmp/hooks-off.gitconfig"), "config-override"),
        // Another file than the one the sandbox pinned.
        (
            commit().pinned_global("/home/u/.gitconfig").env("GIT_CONFIG_GLOBAL", "/tmp/hooks-off.gitconfig"),
            "config-override",
        ),
        (
            commit().pinned_global("/home/u/.gitconfig").env("GIT_CONFIG_SYSTEM", "/home/u/.gitconfig"),
            "config-override",
        ),
        (commit().env("GIT_CONFIG_SYSTEM", "/tmp/hooks-off.gitconfig"), "config-override"),
        (commit().env("GIT_CONFIG", "/tmp/hooks-off.gitconfig"), "config-override"),
    ]);
}

#[test]
fn harmless_environment_configuration_passes() {
    let commit = || git(&["commit", "-m", "x"]);
    check(&[
        (commit().env("GIT_CONFIG_PARAMETERS", "'user.name'='x'"), "run"),
        (commit().env("GIT_CONFIG_PARAMETERS", "'user.name'='it'\\''s' 'color.ui'"), "run"),
        (commit().env("GIT_CONFIG_PARAMETERS", "'user.name=x'  'a.b'='c'"), "run"),
        (commit().env("GIT_CONFIG_PARAMETERS", ""), "run"),
        (
            commit().env("GIT_CONFIG_COUNT", "1").env("GIT_CONFIG_KEY_0", "user.name").env("GIT_CONFIG_VALUE_0", "x"),
            "run",
        ),
        // Only the first COUNT pairs are read.
        (
            commit()
                .env("GIT_CONFIG_COUNT", "0")
                .env("GIT_CONFIG_KEY_0", "core.hooksPath")
                .env("GIT_CONFIG_VALUE_0", "/x"),
            "run",
        ),
        (commit().env("GIT_CONFIG_GLOBAL", "/dev/null"), "run"),
        // The user's own global file, pinned by the sandbox (the hook guard's git names it).
        (commit().pinned_global("/home/u/.gitconfig").env("GIT_CONFIG_GLOBAL", "/home/u/.gitconfig"), "run"),
        (commit().env("GIT_CONFIG_SYSTEM", "/dev/null"), "run"),
        (commit().env("GIT_CONFIG_NOSYSTEM", "1"), "run"),
    ]);
}

#[test]
fn git_config_writes_of_protected_keys_are_refused() {
    check_args(&[
        (&["config", "core.hooksPath", "/dev/null"], "config-write"),
        (&["config", "Core.HooksPath", "/dev/null"], "config-write"),
        (&["config", "--global", "core.hooksPath", "x"], "config-write"),
        (&["config", "--local", "--path", "core.hooksPath", "x"], "config-write"),
        (&["config", "-f", "/tmp/c", "core.hooksPath", "y"], "config-write"),
        (&["config", "--file=/tmp/c", "include.path", "y"], "config-write"),
        (&["config", "core.hooksPath", "x", "old-value-pattern"], "config-write"),
        (&["config", "set", "core.hooksPath", "x"], "config-write"),
        (&["config", "set", "--global", "--append", "include.path", "x"], "config-write"),
        (&["config", "set", "--file", "/tmp/c", "core.hooksPath", "y"], "config-write"),
        (&["config", "--unset", "core.hooksPath"], "config-write"),
        (&["config", "--unset-all", "hook.lint.command"], "config-write"),
        (&["config", "unset", "core.hooksPath"], "config-write"),
        (&["config", "unset", "--all", "alias.ci"], "config-write"),
        (&["config", "alias.c", "commit -n"], "config-write"),
        (&["config", "--add", "alias.x", "y"], "config-write"),
        (&["config", "--replace-all", "core.hooksPath", "x"], "config-write"),
        (&["config", "core.fsmonitor", "/tmp/x"], "config-write"),
        (&["config", "core.fsmonitor", "true"], "config-write"),
        (&["config", "set", "core.fsmonitor", "/tmp/x"], "config-write"),
        (&["config", "--add", "core.fsmonitor", "/tmp/x"], "config-write"),
        (&["config", "--unset", "core.fsmonitor", "false"], "config-write"),
        (&["config", "remote.origin.push", "+refs/heads/*:refs/heads/*"], "config-write"),
        (&["config", "remote.origin.mirror", "true"], "config-write"),
        (&["config", "--rename-section", "alias", "old-alias"], "config-write"),
        (&["config", "--rename-section", "foo", "core"], "config-write"),
        (&["config", "--remove-section", "core"], "config-write"),
        (&["config", "--remove-section", "includeIf.gitdir:~/work/"], "config-write"),
        (&["config", "rename-section", "hooksoff", "core"], "config-write"),
        (&["config", "remove-section", "alias"], "config-write"),
        (&["config", "--edit"], "config-write"),
        (&["config", "-e"], "config-write"),
        (&["config", "--global", "--edit"], "config-write"),
        (&["config", "edit"], "config-write"),
    ]);
}

#[test]
fn git_config_reads_and_other_writes_pass() {
    check_args(&[
        (&["config", "--get", "core.hooksPath"], "run"),
        (&["config", "core.hooksPath"], "run"),
        (&["config", "get", "core.hooksPath"], "run"),
        (&["config", "get", "--all", "alias.ci"], "run"),
        (&["config", "--get-regexp", "alias"], "run"),
        (&["config", "--get-all", "remote.origin.push"], "run"),
        (&["config", "--list"], "run"),
        (&["config", "-l", "--show-origin"], "run"),
        (&["config", "list"], "run"),
        (&["config", "user.name", "x"], "run"),
        // Switching fsmonitor off runs nothing (OpenCode, in its snapshot repository).
        (&["config", "core.fsmonitor", "false"], "run"),
        (&["--git-dir", "/h/.local/share/opencode/snapshot/p/w", "config", "core.fsmonitor", "false"], "run"),
        (&["config", "set", "core.fsmonitor", "false"], "run"),
        (&["config", "--replace-all", "core.fsmonitor", "0"], "run"),
        (&["config", "--global", "user.email", "x@example.com"], "run"),
        (&["config", "set", "user.name", "x"], "run"),
        (&["config", "--unset", "user.name"], "run"),
        (&["config", "--remove-section", "foo"], "run"),
        (&["config", "--rename-section", "foo", "bar"], "run"),
        (&["config", "user.name", "--unset core.hooksPath"], "run"),
        // `-f` takes the next word as the file: this reads key `x` from it.
        (&["config", "-f", "core.hooksPath", "x"], "run"),
        // The new subcommands exist only as the first argument: this is the old syntax
        // with the key `set` (an error in git).
        (&["config", "--global", "set", "core.hooksPath", "x"], "run"),
        // Options stop at the first operand: this sets a.b to "--add".
        (&["config", "a.b", "--add"], "run"),
        (&["config", "--help"], "run"),
    ]);
}

#[test]
fn setting_core_hooks_path_to_the_value_it_has_is_a_silent_no_op() {
    let husky = |args: &[&str]| git(args).config("core.hookspath", ".husky/_");
    check(&[
        // husky's `prepare`, on every `npm install`: nothing changes, nothing is run.
        (husky(&["config", "core.hooksPath", ".husky/_"]), "unchanged"),
        (husky(&["config", "set", "core.hooksPath", ".husky/_"]), "unchanged"),
        // Another value, another location, or no value yet: refused as before.
        (husky(&["config", "core.hooksPath", "/tmp/hooks"]), "config-write"),
        (husky(&["config", "--global", "core.hooksPath", ".husky/_"]), "config-write"),
        (git(&["config", "core.hooksPath", ".husky/_"]), "config-write"),
        (husky(&["config", "--add", "core.hooksPath", ".husky/_"]), "config-write"),
    ]);
}
