//! Command wrappers: `false` denies every route to the command, a script wrapper gets the
//! real binary, `true` runs it unwrapped.

use crate::support::{require_bwrap, World};

#[test]
fn a_denied_command_is_refused_by_name_and_by_absolute_path_and_audited() {
    require_bwrap!();
    let world = World::new();
    let run = world.sh(
        &["--cmd", "python3=false"],
        "python3 -c 'print(1)'; echo code=$?; /usr/bin/python3 -c 'print(2)'; echo code=$?; \
         p=$(readlink -f /usr/bin/python3); $p -c 'print(3)'; echo code=$?; echo still-running",
    );
    assert_eq!(run.ok(), "code=126\ncode=126\ncode=126\nstill-running\n");
    assert!(
        run.stderr().contains("agent-sandbox: `python3` is blocked in this sandbox (commands.python3 = false)."),
        "{}",
        run.stderr()
    );
    let log = world.audit_log();
    let refusals = log.lines().filter(|line| line.contains(r#""policy":"command-deny""#)).count();
    assert_eq!(refusals, 3, "{log}");
    assert!(log.contains(r#""reason":"arguments: -c print(1)","source":"sandbox""#), "{log}");
}

#[test]
fn a_wrapper_script_gets_the_original_arguments_and_the_real_binary() {
    require_bwrap!();
    let world = World::new();
    let wrapper = world.write(
        "home/bin/git-wrapper",
        "#!/bin/sh\necho \"wrapped $AGENT_SANDBOX_CMD: $*\" >&2\ncase \"$1\" in gc) echo no gc >&2; exit 3;; esac\nexec \"$AGENT_SANDBOX_REAL\" \"$@\"\n",
    );
    world.chmod("home/bin/git-wrapper", 0o755);
    let flag = format!("git={}", wrapper.display());
    let run = world.sh(&["--cmd", &flag], "git rev-parse --is-inside-work-tree; git gc; echo gc=$?");
    assert_eq!(run.ok(), "true\ngc=3\n");
    assert!(run.stderr().contains("wrapped git: rev-parse --is-inside-work-tree"), "{}", run.stderr());
}

#[test]
fn true_runs_a_command_unwrapped() {
    require_bwrap!();
    let world = World::new();
    let out = world.sh(&["--cmd", "git=true"], "cmp -s /usr/local/bin/git $(command -v git) || cmp -s /usr/bin/git $(command -v git); echo same=$?; git --version | cut -c1-11").ok();
    assert_eq!(out, "same=0\ngit version\n");
}

#[test]
fn a_missing_wrapper_is_an_error_before_anything_runs() {
    require_bwrap!();
    let world = World::new();
    let run = world.sh(&["--cmd", "npm=./nope.sh"], "touch ran");
    assert_eq!(run.code(), 125);
    assert_eq!(
        run.stderr(),
        format!(
            "agent-sandbox: error: commands.npm: wrapper {}/nope.sh is not an executable file (from cli (--cmd)) (check the path and chmod +x it)\n",
            world.project.display()
        )
    );
    assert!(!world.path("home/proj/ran").exists());
}
