//! End to end: under `exec` the agent's git is its own (`hostpush::home::exec`). The
//! project's `.git` inside is the session repository; the user's is read-only; commits
//! reach the user's branches only through the checks, brought home by the `exec`
//! process on the host. Each attack sits beside the legitimate workflow, and the user's
//! own git is run on the host after it.

use std::path::Path;

use crate::support::{require_bwrap, World};

/// A project whose check fails while a file `BROKEN` exists.
fn checked_world() -> World {
    let world = World::new();
    world.project_config(r#"{ "checks": { "commands": ["test ! -e BROKEN"] } }"#);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "config"]);
    world
}

/// The user's git on the host: `git status`, with a `core.fsmonitor` that would leave
/// `ran` behind had anything put one where it reads it.
fn users_status(world: &World) -> String {
    let status = world.git(&["status", "--porcelain"]);
    assert!(!world.path("ran").exists(), "the user's git ran a command the agent chose");
    status
}

#[test]
fn a_commit_comes_home_and_nothing_in_the_users_git_is_writable() {
    require_bwrap!();
    let world = checked_world();
    let ran = world.path("ran");
    let script = format!(
        "echo ok > ok && git add ok && git commit -qm ok && \
         (touch /run/agent-sandbox/user-git/x 2>/dev/null && echo USER-GIT-WRITABLE; true) && \
         printf '[core]\\n\\tfsmonitor = touch {ran}\\n' >> .git/config && git -c core.fsmonitor=false status --porcelain",
        ran = ran.display()
    );
    let run = world.sh(&[], &script);
    let out = run.ok();
    assert!(!out.contains("USER-GIT-WRITABLE"), "{out}");
    assert!(run.stderr().contains("main is now"), "the user is told what came home: {}", run.stderr());
    // The commit is on the user's branch, the index follows, and nothing the agent wrote
    // into `.git` is in the user's.
    assert_eq!(world.git(&["log", "-1", "--format=%s"]).trim(), "ok");
    assert_eq!(users_status(&world), "");
    let config = world.read("home/proj/.git/config");
    assert!(!config.contains("fsmonitor"), "{config}");
}

/// Every `.git` plant earlier attack rounds used lands in the session repository: the
/// user's `.git` is byte for byte what it was, and the user's git runs nothing.
#[test]
fn every_plant_in_dot_git_stays_in_the_session() {
    require_bwrap!();
    let world = checked_world();
    let ran = world.path("ran");
    let monitor = format!("printf '[core]\\n\\tfsmonitor = touch {}\\n'", ran.display());
    let plants = [
        format!("mkdir -p /tmp/o && cp -r .git/. /tmp/o/ && {monitor} >> /tmp/o/config && echo /tmp/o > .git/commondir"),
        format!("mkdir -p .git/modules/sub && cp -r .git/objects .git/refs .git/HEAD .git/modules/sub/ && {monitor} > .git/modules/sub/config"),
        format!("mkdir -p nested && cp -r .git nested/.git && {monitor} >> nested/.git/config"),
        "rm .git/refs/heads/main 2>/dev/null; ln -sf /etc/passwd .git/refs/heads/main".to_owned(),
        "rm .git/HEAD && mkfifo .git/HEAD".to_owned(),
        "printf '#!/bin/sh\\ntouch RAN\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout".to_owned(),
        "mkdir -p .git/worktrees/w && echo /tmp > .git/worktrees/w/gitdir && echo ../.. > .git/worktrees/w/commondir".to_owned(),
    ];
    let listing = |world: &World| {
        let out = std::process::Command::new("sh")
            .args(["-c", "find . -printf '%p %s %m %y\\n' | sort && cat config HEAD"])
            .current_dir(world.path("home/proj/.git"))
            .output()
            .expect("find");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for plant in plants {
        let before = listing(&world);
        let run = world.sh(&[], &plant);
        assert_eq!(run.code(), 0, "{plant}: {}", run.stderr());
        assert_eq!(listing(&world), before, "{plant}: the user's .git changed");
        world.git(&["status", "--porcelain"]);
        assert!(!ran.exists(), "{plant}: the user's git ran the agent's command");
        assert!(!world.path("home/proj/RAN").exists(), "{plant}");
        let _ = std::fs::remove_dir_all(world.path("home/proj/nested"));
        // The session is the agent's to break, and to mend: start it afresh.
        let state = world.path("xdg-state/agent-sandbox/sessions");
        for entry in std::fs::read_dir(&state).into_iter().flatten().flatten() {
            let _ = std::fs::remove_dir_all(entry.path().join("home"));
        }
    }
}

#[test]
fn commits_that_skipped_the_checks_stay_out_of_the_users_branches() {
    require_bwrap!();
    let world = checked_world();
    let main_before = world.git(&["rev-parse", "main"]);
    // The real git, which no guard runs: a commit without the pre-commit checks, a
    // stash made a branch, and a commit made in another repository and fetched in.
    let own_git = "cp /run/agent-sandbox/bin/git /tmp/g && ";
    let attacks = [
        ("main", format!("{own_git}touch BROKEN && /tmp/g add BROKEN && /tmp/g commit -qn -m sneaky")),
        (
            "stashed",
            format!("{own_git}touch BROKEN && git add BROKEN && git stash -q && git branch stashed 'stash@{{0}}'"),
        ),
        (
            "fetched",
            format!(
                "{own_git}/tmp/g clone -q . /tmp/s && cd /tmp/s && touch BROKEN && /tmp/g add BROKEN && \
                 /tmp/g -c user.name=a -c user.email=a@b commit -qnm x && cd - >/dev/null && \
                 git fetch -q /tmp/s main:refs/heads/fetched"
            ),
        ),
    ];
    for (branch, script) in attacks {
        let run = world.sh(&[], &script);
        let said = run.stderr();
        assert!(said.contains("did not come home"), "{branch}: {said}");
        assert_eq!(world.git(&["rev-parse", "main"]), main_before, "{branch}: {said}");
        let listed = world.git(&["for-each-ref", "--format=%(refname)", "refs/heads/"]);
        assert_eq!(listed.trim(), "refs/heads/main", "{branch}: {said}");
        // Kept aside for the user to look at (`agent-sandbox git adopt`).
        let refused = world.git(&["for-each-ref", "--format=%(refname)", "refs/agent-sandbox/refused/"]);
        assert!(refused.contains(branch), "{branch}: {refused}");
        // The work tree is shared: the agent's file is there, not on the user's branch.
        users_status(&world);
        let _ = std::fs::remove_file(world.path("home/proj/BROKEN"));
        // The session repository keeps the agent's work: clean it for the next attack.
        let clean = format!(
            "git checkout -qf main && git reset -q --hard {} && git clean -qfd; git branch -D stashed fetched 2>/dev/null; \
             git stash clear; true",
            main_before.trim()
        );
        world.sh(&[], &clean).ok();
    }
}

#[test]
fn the_session_repository_is_kept_and_follows_the_users_commits() {
    require_bwrap!();
    let world = checked_world();
    // An unfinished change stashed in one session is there in the next.
    world.sh(&[], "echo wip > wip.txt && git add wip.txt && git stash -q").ok();
    assert!(!world.path("home/proj/wip.txt").exists());
    assert_eq!(world.git(&["stash", "list"]), "", "the stash is the session's, not the user's");
    // The user commits on the host meanwhile: the next session starts from it, clean.
    world.write("home/proj/host.txt", "host\n");
    world.git(&["add", "host.txt"]);
    world.git(&["commit", "-qm", "host"]);
    let out = world.sh(&[], "git log -1 --format=%s && git status --porcelain && git stash list | wc -l").ok();
    assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["host", "1"], "{out}");
    assert!(Path::new(&world.path("home/proj/.git")).is_dir());
}
