//! The multicall dispatcher: what runs when a sandboxed process executes a wrapped
//! command (this binary is mounted over each target, or a shim calls
//! `agent-sandbox multicall <cmd>`). It only works inside a sandbox, where
//! `/run/agent-sandbox` says what to do with `<cmd>`:
//! 1. `wrappers/<cmd>` exists: exec it with the original arguments,
//!    `AGENT_SANDBOX_CMD=<cmd>` and `AGENT_SANDBOX_REAL=/run/agent-sandbox/bin/<cmd>`
//!    resolved (`packages/<cmd>/…` for a command that is part of an installation;
//!    empty if there is no real binary);
//! 2. `presets/<cmd>` names a built-in preset: `deny` refuses, `git` runs the git guard.

use std::{ffi::OsString, os::unix::process::CommandExt, path::Path, process::Command};

use runtime_layout::RuntimeLayout;

/// Dispatches `name` with `args` (without argv[0]); returns an exit code when it does
/// not exec.
pub fn dispatch(name: &str, args: &[OsString]) -> i32 {
    let run = RuntimeLayout::inside();
    let is_git = name == "git" || name.starts_with("git-");
    if is_git && !run.marker().exists() && Path::new(crate::git::CONTAINER_REAL_GIT).exists() {
        // Installed as git in a container image (the real git moved aside).
        let mut git_args: Vec<OsString> = name.strip_prefix("git-").map(OsString::from).into_iter().collect();
        git_args.extend(args.iter().cloned());
        return crate::git::run_in_container(&git_args);
    }
    if config::check_command_name(name).is_err() || !run.marker().exists() {
        eprintln!("agent-sandbox: multicall only works inside an agent-sandbox (for {name:?})");
        return 127;
    }
    // A dashed git builtin from git's exec-path (`git-commit`) is `git commit`.
    if let Some(sub) = name.strip_prefix("git-") {
        if run.preset("git").exists() || run.wrapper("git").exists() {
            let mut git_args = vec![OsString::from(sub)];
            git_args.extend(args.iter().cloned());
            return dispatch_as(&run, "git", &git_args);
        }
    }
    dispatch_as(&run, name, args)
}

fn dispatch_as(run: &RuntimeLayout, name: &str, args: &[OsString]) -> i32 {
    let real = run.bin(name);
    let wrapper = run.wrapper(name);
    if wrapper.exists() {
        // Resolved: for a command that is part of an installation, `bin/<name>` links into
        // the whole installation's mount, and scripts that find their files through `$0`
        // (yarn's, npm-installed CLIs) need the path inside it.
        let real_text: OsString = match real.canonicalize() {
            Ok(resolved) => resolved.into_os_string(),
            Err(_) => OsString::new(),
        };
        let err = Command::new(&wrapper)
            .args(args)
            .env("AGENT_SANDBOX_CMD", name)
            .env("AGENT_SANDBOX_REAL", real_text)
            .exec();
        eprintln!("agent-sandbox: cannot run the wrapper for {name}: {err}");
        return 126;
    }
    match std::fs::read_to_string(run.preset(name)).as_deref() {
        Ok("deny") => {
            eprintln!(
                "agent-sandbox: `{name}` is blocked in this sandbox (commands.{name} = false).\n\
                 Do the task without it, or ask the user to allow it in the agent-sandbox config."
            );
            let event = audit::Event::new(name, "exec", name, "blocked", "command-deny", Some(describe(args)));
            audit::send(&event);
            126
        }
        Ok("git") if name == "git" => crate::git::run(args),
        Ok(other) => {
            eprintln!("agent-sandbox: unknown preset {other:?} for {name}");
            126
        }
        Err(_) => {
            eprintln!("agent-sandbox: no wrapper is configured for {name} in this sandbox");
            127
        }
    }
}

fn describe(args: &[OsString]) -> String {
    let text: Vec<String> = args.iter().map(|arg| arg.to_string_lossy().into_owned()).collect();
    format!("arguments: {}", text.join(" "))
}
