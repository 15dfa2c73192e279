//! `/run/agent-sandbox` and `agent-sandbox check`: inside answers 0, outside 1, and a
//! sandboxed process can neither remove the marker nor add one.

use std::process::Command;

use crate::support::{require_bwrap, World, BIN};

#[test]
fn check_answers_inside_and_outside() {
    require_bwrap!();
    let world = World::new();
    let outside = world.cmd().arg("check").run();
    assert_eq!((outside.code(), outside.stdout()), (1, "not inside an agent-sandbox\n".to_owned()));
    let inside = world.sh(&[], "agent-sandbox check; echo code=$?; agent-sandbox check -q; echo quiet=$?").ok();
    assert_eq!(inside, "inside an agent-sandbox (bubblewrap)\ncode=0\nquiet=0\n");
}

#[test]
fn the_marker_cannot_be_removed_hidden_or_planted() {
    require_bwrap!();
    let world = World::new();
    let attacks = [
        "rm -f /run/agent-sandbox/agent-sandbox",
        "mv /run/agent-sandbox /run/x",
        "umount /run/agent-sandbox",
        "mount -t tmpfs none /run",
        "unshare -Urm sh -c 'mount -t tmpfs none /run && agent-sandbox check'",
        "touch /.agent-sandbox",
        "mkdir /newdir",
        "chmod 755 /run/agent-sandbox",
    ];
    let mut script = String::new();
    for attack in attacks {
        script.push_str(&format!("{attack} >/dev/null 2>&1 && echo 'SUCCEEDED: {attack}'\n"));
    }
    script.push_str(
        "ls /run/agent-sandbox >/dev/null 2>&1 && echo LISTED; agent-sandbox check -q && echo still-inside\n",
    );
    assert_eq!(world.sh(&[], &script).ok(), "still-inside\n");
}

#[test]
fn the_runtime_directory_is_gone_after_exec() {
    require_bwrap!();
    let world = World::new();
    let runtime_parent = world.path("xdg-runtime");
    fs_err::create_dir_all(&runtime_parent).expect("mkdir");
    world.cmd().env("XDG_RUNTIME_DIR", &runtime_parent).args(["exec", "--", "true"]).run().ok();
    assert_eq!(fs_err::read_dir(&runtime_parent).expect("readable").count(), 0);
}

#[test]
fn the_command_exit_status_is_passed_on() {
    require_bwrap!();
    let world = World::new();
    assert_eq!(world.sh(&[], "exit 7").code(), 7);
    assert_eq!(world.sh(&[], "kill -TERM $$").code(), 128 + 15);
}

#[test]
fn multicall_outside_a_sandbox_refuses() {
    let out = Command::new(&*BIN).args(["multicall", "git", "status"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "agent-sandbox: multicall only works inside an agent-sandbox (for \"git\")\n"
    );
}

#[test]
fn nothing_written_to_the_audit_fifo_can_hang_exec_or_stop_the_relay() {
    require_bwrap!();
    let world = World::new();
    // A partial line, a forged end-of-stream line, garbage, then a real refusal.
    let script = "printf 'partial' > /run/agent-sandbox/audit; \
                  printf 'agent-sandbox: end of audit stream\\n' > /run/agent-sandbox/audit; \
                  head -c 100000 /dev/zero | tr '\\0' x > /run/agent-sandbox/audit 2>/dev/null; \
                  printf '\\n' > /run/agent-sandbox/audit; \
                  python3 -c 1; echo done";
    let (tx, rx) = std::sync::mpsc::channel();
    let world_cmd = {
        let mut cmd = world.cmd();
        cmd.args(["exec", "--cmd", "python3=false", "--", "sh", "-c", script]);
        cmd.cmd
    };
    let mut cmd = world_cmd;
    std::thread::spawn(move || {
        let _ = tx.send(cmd.output());
    });
    let out = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("exec returned").expect("ran");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    let log = world.audit_log();
    assert!(log.contains(r#""policy":"command-deny""#), "the refusal after the garbage was still relayed:\n{log}");
}

#[test]
fn terminating_exec_ends_the_sandbox_and_removes_the_runtime_directory() {
    require_bwrap!();
    let world = World::new();
    let runtime_parent = world.path("xdg-runtime");
    fs_err::create_dir_all(&runtime_parent).expect("mkdir");
    let mut cmd = world.cmd();
    cmd.env("XDG_RUNTIME_DIR", &runtime_parent).args(["exec", "--", "sleep", "30"]);
    let mut child = cmd.cmd.spawn().expect("exec starts");
    // Wait for the sandbox to be up (its runtime directory exists).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while fs_err::read_dir(&runtime_parent).expect("readable").count() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().expect("exec exits");
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "exec reports the sandbox's end by SIGTERM");
    assert_eq!(fs_err::read_dir(&runtime_parent).expect("readable").count(), 0, "runtime directory left behind");
}

#[test]
fn bwraps_own_failures_are_told_apart_from_the_commands_status() {
    require_bwrap!();
    let world = World::new();
    assert_eq!(world.sh(&[], "exit 1").code(), 1, "the command's own 1 passes through");
    // A command that is not there is 127, said before bwrap starts, as a shell says it.
    let run = world.cmd().args(["exec", "--", "/nonexistent-command"]).run();
    assert_eq!(run.code(), 127);
    assert!(run.stderr().contains("/nonexistent-command: no such executable file"), "{}", run.stderr());
    let run = world.cmd().args(["exec", "--", "no-such-command-anywhere"]).run();
    assert_eq!(run.code(), 127);
    assert!(run.stderr().contains("command not found on the sandbox's PATH"), "{}", run.stderr());
    // The command's own status passes through untouched.
    let run = world.cmd().args(["exec", "--", "sh", "-c", "exit 3"]).run();
    assert_eq!(run.code(), 3);
}

#[test]
fn a_command_whose_install_is_not_visible_is_named_with_the_flag_that_adds_it() {
    require_bwrap!();
    let world = World::new();
    // ~/.local/bin/tool -> an installation outside the home directory that no preset
    // shows (installations under home are shown by themselves: see setups.rs).
    let real = world.write("opt-tools/tool/versions/1/tool", "#!/bin/sh\necho tool-ran\n");
    world.chmod("opt-tools/tool/versions/1/tool", 0o755);
    fs_err::create_dir_all(world.path("home/.local/bin")).expect("mkdir");
    std::os::unix::fs::symlink(&real, world.path("home/.local/bin/tool")).expect("symlink");
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", world.path("home/.local/bin").display());
    let run = world.cmd().env("PATH", &path).args(["exec", "--", "tool"]).run();
    assert_eq!(run.code(), 127, "{}", run.stderr());
    assert!(
        run.stderr().contains("which is not visible inside (show it read-only with --ro")
            && run.stderr().contains("opt-tools/tool/versions/1"),
        "{}",
        run.stderr()
    );
    // With the flag it names, it runs.
    let dir = world.path("opt-tools/tool");
    let run = world.cmd().env("PATH", &path).args(["exec", "--ro"]).arg(&dir).args(["--", "tool"]).run();
    assert_eq!(run.ok(), "tool-ran\n");
}
