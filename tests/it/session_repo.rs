//! End to end: under `exec` the agent's git is its own (`hostpush::home::exec`). The
//! project's `.git` inside is the session repository; the user's is read-only; commits
//! reach the user's branches only through the checks, brought home by the `exec`
//! process on the host. Each attack sits beside the legitimate workflow, and the user's
//! own git is run on the host after it.

use std::path::Path;

use crate::support::{require_bwrap, World};

/// A project whose check fails while a file `BROKEN` exists.
pub(crate) fn checked_world() -> World {
    let world = World::new();
    world.project_config(r#"{ "checks": { "commands": ["test ! -e BROKEN"] }, "git": { "sessionRepository": true } }"#);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "config"]);
    world
}

/// The user's git on the host: `git status`, with a `core.fsmonitor` that would leave
/// `ran` behind had anything put one where it reads it.
pub(crate) fn users_status(world: &World) -> String {
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
         (printf '[core]\\n\\tfsmonitor = touch {ran}\\n' >> .git/config 2>/dev/null && echo CONFIG-WRITABLE; true) && \
         git status --porcelain",
        ran = ran.display()
    );
    let run = world.sh(&[], &script);
    let out = run.ok();
    assert!(!out.contains("USER-GIT-WRITABLE"), "{out}");
    assert!(!out.contains("CONFIG-WRITABLE"), "the session's config is read-only as the user's was: {out}");
    assert!(run.stderr().contains("came home: main at"), "the user is told what came home: {}", run.stderr());
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
    for plant in plants {
        let before = world.users_git_listing();
        // Some are refused already (hooks and config are read-only), the rest land in
        // the session.
        world.sh(&[], &plant);
        assert_eq!(world.users_git_listing(), before, "{plant}: the user's .git changed");
        world.git(&["status", "--porcelain"]);
        assert!(!ran.exists(), "{plant}: the user's git ran the agent's command");
        assert!(!world.path("home/proj/RAN").exists(), "{plant}");
        let _ = std::fs::remove_dir_all(world.path("home/proj/nested"));
        // The session is the agent's to break, and to mend: start it afresh.
        world.forget_session();
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
        // Nor in a later session, though its tip is now kept in the user's repository.
        let again = world.sh(&[], "git status --porcelain >/dev/null");
        assert!(again.stderr().contains("did not come home"), "{branch}: {}", again.stderr());
        assert_eq!(world.git(&["rev-parse", "main"]), main_before, "{branch}: {}", again.stderr());
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
    // An unfinished change stashed in one session is there in the next, and in the
    // user's stash too (the work tree is shared: the stash took it from the user's view).
    let run = world.sh(&[], "echo wip > wip.txt && git add wip.txt && git stash -q");
    run.ok();
    assert!(!world.path("home/proj/wip.txt").exists());
    assert!(run.stderr().contains("`git stash list` shows"), "{}", run.stderr());
    let listed = world.git(&["stash", "list"]);
    assert!(listed.starts_with("stash@{0}: agent-sandbox, from the session: WIP on main"), "{listed}");
    assert_eq!(world.git(&["show", "stash@{0}:wip.txt"]), "wip\n");
    // The user commits on the host meanwhile: the next session starts from it, clean.
    world.write("home/proj/host.txt", "host\n");
    world.git(&["add", "host.txt"]);
    world.git(&["commit", "-qm", "host"]);
    let out = world.sh(&[], "git log -1 --format=%s && git status --porcelain && git stash list | wc -l").ok();
    assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["host", "1"], "{out}");
    assert!(Path::new(&world.path("home/proj/.git")).is_dir());
}

/// A push leaves from the user's repository once the session's commits came home; a
/// branch whose commits did not come home is not pushed (the user's older tip would be,
/// and the agent told it worked).
#[test]
fn a_push_sends_what_came_home_and_refuses_what_did_not() {
    require_bwrap!();
    let world = checked_world();
    let remote = world.bare_origin();
    world.git(&["push", "-q", "origin", "main"]);
    let remote_main = |world: &World| world.git_in(&remote, &["rev-parse", "main"]).trim().to_owned();
    let rw = ["--rw", remote.to_str().expect("utf-8")];
    world.sh(&rw, "echo ok > ok && git add ok && git commit -qm ok && git push -q origin main").ok();
    assert_eq!(remote_main(&world), world.git(&["rev-parse", "main"]).trim(), "the commit that came home was pushed");
    let pushed = remote_main(&world);
    let run = world.sh(
        &rw,
        "cp /run/agent-sandbox/bin/git /tmp/g && touch BROKEN && /tmp/g add BROKEN && /tmp/g commit -qnm sneaky \
         && git push -q origin main",
    );
    assert_ne!(run.code(), 0, "{}", run.stderr());
    assert!(run.stderr().contains("nothing of the session's to push"), "{}", run.stderr());
    assert_eq!(remote_main(&world), pushed);
}

/// Commits that came home and that the user then dropped on the host (a reset) are
/// dropped from the session too, rather than brought back at the next sync.
#[test]
fn commits_the_user_dropped_on_the_host_do_not_come_back() {
    require_bwrap!();
    let world = checked_world();
    let before = world.git(&["rev-parse", "main"]).trim().to_owned();
    world.sh(&[], "echo ok > ok && git add ok && git commit -qm ok").ok();
    assert_ne!(world.git(&["rev-parse", "main"]).trim(), before, "it came home");
    world.git(&["reset", "-q", "--hard", &before]);
    let out = world.sh(&[], "git rev-parse main && git status --porcelain").ok();
    assert_eq!(out.trim(), before, "{out}");
    assert_eq!(world.git(&["rev-parse", "main"]).trim(), before);
}

/// A worktree the agent adds works inside, in this session and the next; its branch
/// comes home like any other, and its `.git` file (which names a record of the
/// session's) is not moved aside at the exit.
#[test]
fn a_worktree_added_inside_works_and_its_branch_comes_home() {
    require_bwrap!();
    let world = checked_world();
    let run = world.sh(&[], "git worktree add -q wt -b side && cd wt && echo w > w && git add w && git commit -qm w");
    run.ok();
    assert!(!run.stderr().contains("moved it to"), "{}", run.stderr());
    assert_eq!(world.git(&["log", "-1", "--format=%s", "side"]).trim(), "w");
    assert!(world.path("home/proj/wt/.git").is_file());
    let out = world.sh(&[], "cd wt && git log -1 --format=%s && git status --porcelain").ok();
    assert_eq!(out.trim(), "w");
    assert_eq!(world.git(&["status", "--porcelain"]), "?? wt/\n");
}

/// A project whose check needs its ignored `node_modules`.
fn dependencies_world() -> World {
    let world = World::new();
    world.write("home/proj/.gitignore", "node_modules/\n");
    world.write("home/proj/node_modules/dep/index.js", "\n");
    world.project_config(
        r#"{ "checks": { "commands": ["test -f node_modules/dep/index.js"] }, "git": { "sessionRepository": true } }"#,
    );
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "config"]);
    world
}

/// The broker's checks see the project's dependency directories, as a push's do: a
/// check that needs `node_modules` passes, and a commit comes home.
#[test]
fn the_brokers_checks_see_the_projects_dependencies() {
    require_bwrap!();
    let world = dependencies_world();
    let run = world.sh(&[], "echo ok > ok && git add ok && git commit -qm ok");
    run.ok();
    assert_eq!(world.git(&["log", "-1", "--format=%s"]).trim(), "ok", "{}", run.stderr());
}

/// The broker links the project's dependency directories into its check worktree
/// without following a link: the agent commits `a` as a link to the user's `~/.local`,
/// then makes `a/lib/node_modules` a real ignored directory, and nothing appears in
/// `~/.local`. The real `node_modules` beside it is still linked: the check that needs
/// it passes and the commit comes home.
#[test]
fn the_brokers_dependency_links_never_follow_a_link_the_agent_committed() {
    require_bwrap!();
    let world = dependencies_world();
    world.write("home/.local/keep", "");
    let script = format!(
        "ln -s {local} a && git add a && git commit -qm link && rm a && mkdir -p a/lib/node_modules \
         && echo x > a/lib/node_modules/x && echo ok > ok && git add ok && git commit -qm ok",
        local = world.path("home/.local").display()
    );
    let run = world.sh(&[], &script);
    assert!(!world.path("home/.local/lib").exists(), "the broker made a directory in ~/.local: {}", run.stderr());
    assert_eq!(world.git(&["log", "-1", "--format=%s"]).trim(), "ok", "{}", run.stderr());
}

/// A project whose check is a protected script, made strict after a lenient first version.
fn strict_check_world() -> World {
    let world = World::new();
    world.project_config(
        r#"{ "checks": { "commands": ["sh ci/check.sh"], "protectedPaths": ["ci"] }, "git": { "sessionRepository": true } }"#,
    );
    world.write("home/proj/ci/check.sh", "exit 0\n");
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "lenient check"]);
    world.write("home/proj/ci/check.sh", "test ! -e BROKEN\n");
    world.git(&["commit", "-qam", "strict check"]);
    world
}

/// What comes home is judged against what the user has, whatever merges lie between: a
/// merge of `main` with a branch from the user's old, lenient commit that takes the old
/// `ci/check.sh` changes nothing by `--cc`, yet it rolls the protected check back, and
/// the failing work under it would pass. Refused, and that branch too (it is not what
/// the user has). A merge that leaves the protected paths alone comes home.
#[test]
fn a_merge_that_rolls_a_protected_path_back_stays_out() {
    require_bwrap!();
    let world = strict_check_world();
    let legit = "git checkout -q -b y && echo y > y && git add y && git commit -qm y && git checkout -q main \
                 && echo z > z && git add z && git commit -qm z && git merge -q --no-edit y && echo merged";
    let run = world.sh(&[], legit);
    assert_eq!(run.ok(), "merged\n");
    assert_eq!(world.git(&["log", "-1", "--format=%s", "main"]).trim(), "Merge branch 'y'", "{}", run.stderr());
    let before = world.git(&["rev-parse", "main"]);
    let attack = "git checkout -q -b x HEAD~3 && touch BROKEN && git add BROKEN && git commit -qm broken \
                  && git checkout -q main && cp /run/agent-sandbox/bin/git /tmp/g && /tmp/g merge -q --no-commit x; \
                  /tmp/g checkout x -- ci/check.sh && /tmp/g commit -qn -m merge && git show HEAD:ci/check.sh";
    let run = world.sh(&[], attack);
    assert_eq!(run.ok(), "exit 0\n", "the merge took the lenient check: {}", run.stderr());
    assert_eq!(world.git(&["rev-parse", "main"]), before, "{}", run.stderr());
    assert!(world.git(&["branch", "--list", "x"]).is_empty(), "{}", run.stderr());
    let said = run.stderr();
    assert!(said.contains("ci/check.sh, which is protected (ci), from what the user's refs/heads/main has"), "{said}");
}

/// A commit that adds a gitlink whose path holds a repository of the agent's own (a
/// `.git` directory with `core.fsmonitor` in its config) never reaches the user's
/// branch: the user's next `git status` would recurse into it and run the command. A
/// real submodule, added from a repository beside the project, comes home.
#[test]
fn a_gitlink_over_an_embedded_repository_stays_out_and_a_real_submodule_comes_home() {
    require_bwrap!();
    let world = checked_world();
    let lib = world.path("lib.git");
    world.git_in(&world.root, &["init", "-q", "--bare", lib.to_str().expect("utf-8")]);
    world.git(&["push", "-q", lib.to_str().expect("utf-8"), "main"]);
    let legit = format!(
        "git -c protocol.file.allow=always submodule add -q {lib} libs/lib && git commit -qm lib && echo added",
        lib = lib.display()
    );
    let run = world.sh(&["--ro", lib.to_str().expect("utf-8")], &legit);
    assert_eq!(run.ok(), "added\n");
    assert_eq!(world.git(&["log", "-1", "--format=%s", "main"]).trim(), "lib", "{}", run.stderr());
    assert_eq!(world.git(&["ls-tree", "main", "libs/lib"]).split_whitespace().next(), Some("160000"));
    let before = world.git(&["rev-parse", "main"]);
    let attack = format!(
        "mkdir sub && cp -r .git sub/.git && printf '[core]\\n\\tfsmonitor = touch {ran}\\n' >> sub/.git/config \
         && cp /run/agent-sandbox/bin/git /tmp/g && /tmp/g update-index --add --cacheinfo 160000,$(git rev-parse HEAD),sub \
         && git commit -qm sub && echo committed",
        ran = world.path("ran").display()
    );
    let run = world.sh(&[], &attack);
    assert_eq!(run.ok(), "committed\n");
    assert_eq!(world.git(&["rev-parse", "main"]), before, "{}", run.stderr());
    assert!(run.stderr().contains("sub/.git in the work tree is a directory"), "{}", run.stderr());
    users_status(&world);
}

/// What a check printed reaches the user's terminal only through the terminal-safe
/// filter: an OSC 52 clipboard write and a window title from the agent's check, in the
/// refusal `exec` repeats at its end, come out escaped; the refusal itself is said.
#[test]
fn check_output_reaches_the_terminal_escaped() {
    require_bwrap!();
    let world = World::new();
    world.project_config(
        r#"{ "checks": { "commands": ["printf '\\033]52;c;ZXZpbA==\\007\\033]0;pwned\\007'; test ! -e BROKEN"] }, "git": { "sessionRepository": true } }"#,
    );
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "config"]);
    let run = world.sh(
        &[],
        "cp /run/agent-sandbox/bin/git /tmp/g && touch BROKEN && /tmp/g add BROKEN && /tmp/g commit -qn -m sneaky",
    );
    let said = run.stderr();
    assert!(said.contains("main did not come home"), "{said}");
    assert!(said.contains("\\u{1b}]52;c;ZXZpbA==\\u{7}\\u{1b}]0;pwned\\u{7}"), "{said}");
    assert!(!said.contains('\u{1b}') && !said.contains('\u{7}'), "{said:?}");
}

/// FIFOs the agent plants where the host's git would read (a nested repository's
/// `HEAD` in the work tree, a worktree record in the session) hold neither the broker
/// nor the end of the session for long.
#[test]
fn fifos_the_agent_plants_hold_neither_the_broker_nor_the_end() {
    require_bwrap!();
    let world = checked_world();
    let plant = "mkdir -p sub/.git && mkfifo sub/.git/HEAD && echo ok > ok && git add ok && git commit -qm ok \
                 && mkdir -p .git/worktrees/x && mkfifo .git/worktrees/x/commondir";
    let run = world.cmd().args(["exec", "--", "sh", "-c", plant]).run_within(90);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    world.git(&["status", "--porcelain"]);
    assert!(!world.path("home/proj/.git/worktrees").exists());
}

/// A project that is a linked worktree of the user's repository has a session
/// repository too: it stands at the record the worktree's `.git` file names, and that
/// file, the user's repository and the session's config are read-only. A commit comes
/// home on the worktree's branch through the checks. A branch the user's other
/// checkout has stays where it is: the agent's commit on it waits.
#[test]
fn a_linked_worktree_gets_its_own_git_and_the_users_checkout_stays() {
    require_bwrap!();
    let world = checked_world();
    world.git(&["worktree", "add", "-q", "../wt", "-b", "feature"]);
    let wt = world.path("home/wt");
    world.cmd().current_dir(&wt).args(["config", "allow"]).run().ok();
    let main_before = world.git(&["rev-parse", "main"]);
    let ran = world.path("ran");
    let exec = |script: &str| world.cmd().current_dir(&wt).args(["exec", "--", "sh", "-c", script]).run();
    let script = format!(
        "echo ok > ok && git add ok && git commit -qm ok && \
         (echo 'gitdir: /tmp' > .git 2>/dev/null && echo GITFILE-WRITABLE; true) && \
         (touch {main}/x 2>/dev/null; true) && \
         (touch /run/agent-sandbox/user-git/x 2>/dev/null && echo USER-GIT-WRITABLE; true) && \
         (printf '[core]\\n\\tfsmonitor = touch {ran}\\n' >> \"$(git rev-parse --git-dir)/config\" 2>/dev/null \
            && echo CONFIG-WRITABLE; true) && \
         git status --porcelain && git log -1 --format=%s",
        main = world.path("home/proj/.git").display(),
        ran = ran.display()
    );
    let run = exec(&script);
    let out = run.ok();
    for marker in ["GITFILE-WRITABLE", "USER-GIT-WRITABLE", "CONFIG-WRITABLE"] {
        assert!(!out.contains(marker), "{out}");
    }
    assert_eq!(out.trim(), "ok", "{}", run.stderr());
    // Its path inside is only the mount point's parent, made in the sandbox's own tmpfs.
    assert!(!world.path("home/proj/.git/x").exists(), "the user's repository was written");
    assert!(run.stderr().contains("came home: feature at"), "{}", run.stderr());
    assert_eq!(world.git(&["log", "-1", "--format=%s", "feature"]).trim(), "ok");
    assert_eq!(world.git_in(&wt, &["status", "--porcelain"]), "");
    assert_eq!(world.git(&["status", "--porcelain"]), "");
    assert!(!ran.exists(), "the user's git ran a command the agent chose");
    // A commit that fails the checks stays out. The branch the user's main checkout has
    // cannot be checked out inside, as git refuses it beside the user's; moved anyway
    // (`update-ref`), it waits, and that checkout does not move.
    let run = exec(
        "touch BROKEN && git add BROKEN && git commit -qnm sneaky; git checkout -q main; \
         cp /run/agent-sandbox/bin/git /tmp/g && c=$(/tmp/g commit-tree -p main -m on-main 'main^{tree}') && \
         /tmp/g update-ref refs/heads/main $c",
    );
    run.ok();
    assert!(run.stderr().contains("'main' is already used by worktree at"), "{}", run.stderr());
    assert_eq!(world.git(&["log", "-1", "--format=%s", "feature"]).trim(), "ok", "{}", run.stderr());
    assert_eq!(world.git(&["rev-parse", "main"]), main_before);
    assert_eq!(world.git(&["log", "-1", "--format=%s", "refs/agent-sandbox/waiting/heads/main"]).trim(), "on-main");
    assert!(run.stderr().contains("has this branch checked out"), "{}", run.stderr());
    assert_eq!(world.git_in(&wt, &["symbolic-ref", "HEAD"]).trim(), "refs/heads/feature");
    assert_eq!(world.git(&["status", "--porcelain"]), "");
    assert!(!ran.exists());
}

/// Starts `exec -- sh -c SCRIPT` in the background (its output piped) and returns once
/// the script has touched `marker` in the project: the sandbox is up.
pub(crate) fn start_until(world: &World, script: &str, marker: &str) -> std::process::Child {
    use std::process::Stdio;
    let mut cmd = world.cmd();
    cmd.args(["exec", "--", "sh", "-c", script]);
    let child = cmd.cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let child = child.expect("exec starts");
    wait_for(world, marker);
    child
}

/// Waits (at most 20 s) until `marker` exists in the project.
#[track_caller]
pub(crate) fn wait_for(world: &World, marker: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !world.path(&format!("home/proj/{marker}")).exists() {
        assert!(std::time::Instant::now() < deadline, "{marker} did not appear within 20 s");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The background `exec`'s output once it ended (killed, and the test failed, if it has
/// not within 30 s).
#[track_caller]
pub(crate) fn ended(child: std::process::Child) -> crate::support::Run {
    let pid = child.id();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    match receiver.recv_timeout(std::time::Duration::from_secs(30)) {
        Ok(output) => crate::support::Run(output.expect("waited")),
        Err(_) => {
            // SAFETY: kill(2) on the process this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("exec did not end within 30 s");
        }
    }
}

/// The user's git on the host: what `fsck` says is wrong (dangling objects are not).
pub(crate) fn users_fsck(world: &World) -> String {
    world.git(&["fsck", "--no-dangling", "--no-progress"])
}

/// The user commits on the host while a session runs: the user's branch is never moved
/// underneath, the agent's commit waits beside it (checked) and the agent is told how to
/// rebase; once it has, its commit comes home as a fast-forward of the user's.
#[test]
fn a_branch_the_user_moves_during_a_session_is_kept_and_the_rebased_commit_comes_home() {
    require_bwrap!();
    let world = checked_world();
    let start = world.git(&["rev-parse", "main"]).trim().to_owned();
    // Told lines go to /tmp/told (the sandbox's), what the agent ended with to stdout.
    let script = "touch up; while [ ! -e go ]; do sleep 0.05; done; \
        echo agent > agent.txt && git add agent.txt && git commit -qm agent || exit 1; \
        i=0; until grep -q 'git rebase' /tmp/told 2>/dev/null || [ $i -ge 300 ]; do \
          git status >/dev/null 2>>/tmp/told; sleep 0.05; i=$((i+1)); done; \
        touch told; while [ ! -e go2 ]; do sleep 0.05; done; \
        onto=$(sed -n 's/.*`git rebase --autostash \\([0-9a-f]*\\)`.*/\\1/p' /tmp/told | head -n1); \
        git rebase -q --autostash \"$onto\" && git status --porcelain=v1 -uno && cat /tmp/told";
    let child = start_until(&world, script, "up");
    // The user's own commit on the host, in the shared work tree.
    world.write("home/proj/README.md", "hello from the host\n");
    world.git(&["commit", "-qam", "host"]);
    let host = world.git(&["rev-parse", "main"]).trim().to_owned();
    fs_err::write(world.path("home/proj/go"), "").expect("go");
    wait_for(&world, "told");
    // The user's branch is the user's commit; the agent's waits, checked, beside it.
    assert_eq!(world.git(&["rev-parse", "main"]).trim(), host, "the user's branch was moved underneath");
    let waiting = world.git(&["rev-parse", "refs/agent-sandbox/waiting/heads/main"]).trim().to_owned();
    assert_eq!(world.git(&["log", "-1", "--format=%s %P", &waiting]).trim(), format!("agent {start}"));
    assert_eq!(users_fsck(&world), "");
    fs_err::write(world.path("home/proj/go2"), "").expect("go2");
    let run = ended(child);
    let out = run.ok();
    assert!(out.contains(&format!("`git rebase --autostash {host}`")), "the agent is told onto what to rebase:\n{out}");
    let said = run.stderr();
    // The summary at exit says what came home; the tip that waited meanwhile came home
    // rebased, so nothing is said to wait, and its ref is gone.
    assert!(said.contains("came home: main at"), "{said}");
    assert!(!said.contains("kept in your repository"), "{said}");
    let kept = world.git(&["for-each-ref", "--format=%(refname)", "refs/agent-sandbox/"]);
    assert_eq!(kept.trim(), "refs/agent-sandbox/resolved/waiting/heads/main", "a resolved tip still waits");
    // A fast-forward of the user's commit: nothing of the user's is lost.
    assert_eq!(world.git(&["log", "--format=%s", "main"]), "agent\nhost\nconfig\ninit\n", "{said}");
    assert_eq!(world.git(&["rev-parse", "main^"]).trim(), host);
    assert_eq!(world.read("home/proj/README.md"), "hello from the host\n");
    for marker in ["up", "go", "told", "go2"] {
        fs_err::remove_file(world.path(&format!("home/proj/{marker}"))).expect("marker");
    }
    assert_eq!(users_status(&world), "");
    assert_eq!(users_fsck(&world), "");
}

/// `exec` killed (SIGKILL, no final sync) after the agent committed with the real git,
/// which asks the broker nothing: the next `exec` brings the good branch home through the
/// checks and still refuses the broken one, and the session kept both.
#[test]
fn commits_of_a_killed_exec_come_home_at_the_next_only_through_the_checks() {
    require_bwrap!();
    let world = checked_world();
    let start = world.git(&["rev-parse", "main"]).trim().to_owned();
    let script = "cp /run/agent-sandbox/bin/git /tmp/g && echo good > good && /tmp/g add good && \
        /tmp/g commit -qm good && /tmp/g switch -qc bad && touch BROKEN && /tmp/g add BROKEN && \
        /tmp/g commit -qnm broken && /tmp/g switch -q main && touch committed && sleep 20";
    let mut child = start_until(&world, script, "committed");
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    assert_eq!(world.git(&["rev-parse", "main"]).trim(), start, "nothing synced before the kill");
    // The next session: the killed one's commits are there, and come home at its end.
    fs_err::remove_file(world.path("home/proj/committed")).expect("marker");
    let run = world.sh(&[], "git log --format=%s bad");
    let out = run.ok();
    assert_eq!(out, "broken\ngood\nconfig\ninit\n", "{}", run.stderr());
    let said = run.stderr();
    assert!(said.contains("bad did not come home: its checks refused it"), "{said}");
    assert_eq!(world.git(&["log", "--format=%s", "main"]), "good\nconfig\ninit\n", "{said}");
    let branches = world.git(&["for-each-ref", "--format=%(refname)", "refs/heads/"]);
    assert_eq!(branches, "refs/heads/main\n", "the broken branch came home: {said}");
    world.git(&["rev-parse", "--verify", "-q", "refs/agent-sandbox/refused/heads/bad"]);
    assert_eq!(users_status(&world), "");
    assert_eq!(users_fsck(&world), "");
}

/// `exec` killed after its broker sent a tip through the checks and before it moved the
/// user's ref: the tip stays under `refs/agent-sandbox/incoming/`. The next session's
/// rewrite of that commit still comes home through the checks, and a broken one does
/// not. (The kill comes as soon as the tip is there: when the broker was quicker, the
/// commit came home before it, and the rest holds all the same.)
#[test]
fn an_exec_killed_between_its_checks_and_the_ref_keeps_no_branch_out_at_the_next() {
    require_bwrap!();
    let world = checked_world();
    let start = world.git(&["rev-parse", "main"]).trim().to_owned();
    let script = "echo fine > fine && git add fine && git commit -qm first && touch committed && sleep 20";
    let mut child = start_until(&world, script, "committed");
    let incoming = world.path("home/proj/.git/refs/agent-sandbox/incoming/heads/main");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !incoming.exists() && world.git(&["rev-parse", "main"]).trim() == start {
        assert!(std::time::Instant::now() < deadline, "the commit was never sent home");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    fs_err::remove_file(world.path("home/proj/committed")).expect("marker");
    // The agent goes on: it rewrites its commit (another tip than the one sent).
    let run = world.sh(&[], "git commit -q --amend -m fine && git log --format=%s");
    let out = run.ok();
    assert_eq!(out, "fine\nconfig\ninit\n", "{}", run.stderr());
    assert!(!run.stderr().contains("did not come home"), "{}", run.stderr());
    let home = world.git(&["log", "--format=%s", "main"]);
    // `first` came home before the kill, or not at all.
    assert!(["fine\nconfig\ninit\n", "fine\nfirst\nconfig\ninit\n"].contains(&home.as_str()), "{home}{}", run.stderr());
    // Beside it, still through the checks: a broken commit does not come home.
    let run = world.sh(
        &[],
        "cp /run/agent-sandbox/bin/git /tmp/g && touch BROKEN && /tmp/g add BROKEN && /tmp/g commit -qnm broken",
    );
    assert!(run.stderr().contains("main did not come home: its checks refused it"), "{}", run.stderr());
    assert_eq!(world.git(&["log", "-1", "--format=%s", "main"]), "fine\n");
    fs_err::remove_file(world.path("home/proj/BROKEN")).expect("the agent's file");
    assert_eq!(users_status(&world), "");
    assert_eq!(users_fsck(&world), "");
}

/// Two `exec`s of one project at once share its session repository, each with a broker
/// of its own: they commit on branches of their own (in worktrees) and on `main`, at the
/// same moment, and one commits a broken branch. Every commit that passed the checks
/// comes home, the broken one only under `refs/agent-sandbox/refused/`, neither session
/// is told a good commit was refused, and the user's repository stays sound.
#[test]
fn two_sessions_at_once_bring_their_commits_home_and_lose_none() {
    require_bwrap!();
    let world = checked_world();
    // Each: its own branch in a worktree, then a file of its own on `main` (the index and
    // `HEAD` are shared, so a commit may find the other's lock: it tries again).
    let session = |me: &str, broken: &str| {
        format!(
            "touch {me}-up; while [ ! -e go ]; do sleep 0.02; done; \
             git worktree add -q w{me} -b {me} && (cd w{me} && echo {me} > {me} && git add {me} && git commit -qm {me}) \
             || exit 1; {broken} \
             echo {me} > on-main-{me}; i=0; \
             until git add on-main-{me} && git commit -qm main-{me} --only on-main-{me} 2>/dev/null; do \
               i=$((i+1)); [ $i -lt 100 ] || exit 1; sleep 0.05; done; \
             touch {me}-done; while [ ! -e {me}-end ]; do sleep 0.02; done"
        )
    };
    let broken = "cp /run/agent-sandbox/bin/git /tmp/g && git worktree add -q wbad -b bad && \
        (cd wbad && touch BROKEN && /tmp/g add BROKEN && /tmp/g commit -qnm broken) || exit 1;";
    let first = start_until(&world, &session("a", ""), "a-up");
    let second = start_until(&world, &session("b", broken), "b-up");
    fs_err::write(world.path("home/proj/go"), "").expect("go");
    wait_for(&world, "a-done");
    wait_for(&world, "b-done");
    // One ends while the other still runs, then the other.
    fs_err::write(world.path("home/proj/a-end"), "").expect("a-end");
    let first = ended(first);
    fs_err::write(world.path("home/proj/b-end"), "").expect("b-end");
    let second = ended(second);
    let said = format!("first:\n{}\nsecond:\n{}", first.stderr(), second.stderr());
    assert_eq!(first.code(), 0, "{said}");
    assert_eq!(second.code(), 0, "{said}");
    // Every good commit is on the user's branches; the broken one on none.
    for branch in ["a", "b"] {
        assert_eq!(world.git(&["log", "-1", "--format=%s", branch]).trim(), branch, "{said}");
    }
    let on_main = world.git(&["log", "--format=%s", "main"]);
    assert!(on_main.contains("main-a\n") && on_main.contains("main-b\n"), "{on_main}{said}");
    assert!(!on_main.contains("broken"), "{on_main}{said}");
    let branches = world.git(&["for-each-ref", "--format=%(refname)", "refs/heads/"]);
    assert_eq!(branches, "refs/heads/a\nrefs/heads/b\nrefs/heads/main\n", "{said}");
    // What did not come home is kept for the user, and said.
    world.git(&["rev-parse", "--verify", "-q", "refs/agent-sandbox/refused/heads/bad"]);
    assert!(said.contains("bad did not come home: its checks refused it"), "{said}");
    for branch in ["a", "b", "main"] {
        let wrongly = format!("agent-sandbox: {branch} did not come home");
        assert!(!said.contains(&wrongly), "a good commit was told refused:\n{said}");
    }
    assert!(!said.contains("nothing came home"), "{said}");
    // The session repository has every commit too.
    let inside = world.sh(&[], "git log --format=%s main a b bad | sort").ok();
    assert_eq!(inside, "a\nb\nbroken\nconfig\ninit\nmain-a\nmain-b\n");
    for marker in ["a-up", "b-up", "go", "a-done", "b-done", "a-end", "b-end"] {
        fs_err::remove_file(world.path(&format!("home/proj/{marker}"))).expect("marker");
    }
    for worktree in ["wa", "wb", "wbad"] {
        fs_err::remove_dir_all(world.path(&format!("home/proj/{worktree}"))).expect("worktree");
    }
    assert_eq!(users_status(&world), "");
    assert_eq!(users_fsck(&world), "");
}

/// The same, when the session ends before the agent has rebased: the next session is
/// told again onto what to rebase (the user's commit is not this session's either), and
/// then its commit comes home as a fast-forward.
#[test]
fn a_commit_left_waiting_at_a_sessions_end_comes_home_once_rebased_in_the_next() {
    require_bwrap!();
    let world = checked_world();
    let script = "touch up; while [ ! -e go ]; do sleep 0.05; done; \
        echo agent > agent.txt && git add agent.txt && git commit -qm agent";
    let child = start_until(&world, script, "up");
    world.write("home/proj/README.md", "hello from the host\n");
    world.git(&["commit", "-qam", "host"]);
    let host = world.git(&["rev-parse", "main"]).trim().to_owned();
    fs_err::write(world.path("home/proj/go"), "").expect("go");
    let run = ended(child);
    run.ok();
    assert!(run.stderr().contains(&format!("`git rebase --autostash {host}`")), "{}", run.stderr());
    assert_eq!(world.git(&["rev-parse", "main"]).trim(), host);
    // The next session: its first sync tells the agent again, by the user's commit.
    let script = "git commit -q --allow-empty -m more 2>/dev/null; i=0; \
        until grep -q 'did not come home' /tmp/told 2>/dev/null || [ $i -ge 300 ]; do \
          git status >/dev/null 2>>/tmp/told; sleep 0.05; i=$((i+1)); done; \
        onto=$(sed -n 's/.*`git rebase --autostash \\([0-9a-f]*\\)`.*/\\1/p' /tmp/told | head -n1); cat /tmp/told; \
        git rebase -q --autostash \"$onto\"";
    let run = world.sh(&[], script);
    let out = run.ok();
    assert!(out.contains(&format!("`git rebase --autostash {host}`")), "{out}{}", run.stderr());
    assert_eq!(world.git(&["log", "--format=%s", "main"]), "more\nagent\nhost\nconfig\ninit\n", "{}", run.stderr());
    assert_eq!(world.git(&["rev-parse", "main~2"]).trim(), host);
    for marker in ["up", "go"] {
        fs_err::remove_file(world.path(&format!("home/proj/{marker}"))).expect("marker");
    }
    assert_eq!(users_status(&world), "");
    assert_eq!(users_fsck(&world), "");
}

/// A session that starts while another runs leaves the other's staged changes alone
/// (the session's index is the user's again at a start only when no other session of the
/// project is running in it).
#[test]
fn a_session_starting_beside_another_keeps_what_the_other_staged() {
    require_bwrap!();
    let world = checked_world();
    let script = "echo x > x && git add x && touch staged; while [ ! -e go ]; do sleep 0.05; done; \
        git commit -qm x && git log -1 --format=%s";
    let child = start_until(&world, script, "staged");
    world.sh(&[], "true").ok();
    fs_err::write(world.path("home/proj/go"), "").expect("go");
    let run = ended(child);
    assert_eq!(run.ok(), "x\n", "{}", run.stderr());
    assert_eq!(world.git(&["log", "-1", "--format=%s", "main"]), "x\n", "{}", run.stderr());
}

/// A commit made in a submodule inside, and the project's commit that names it: the
/// project's comes home through the checks, the submodule's is kept in the user's
/// submodule repository (no branch of it moves), and the user's `git submodule update`
/// on the host checks it out. A submodule commit alone (no project commit naming it)
/// is kept too.
#[test]
fn a_submodules_commits_come_home_with_the_project_commit_that_names_them() {
    require_bwrap!();
    let world = checked_world();
    let lib = world.path("lib");
    world.git_in(&world.root, &["init", "-q", lib.to_str().expect("utf-8")]);
    world.git_in(&lib, &["commit", "-q", "--allow-empty", "-m", "lib"]);
    world.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        lib.to_str().expect("utf-8"),
        "libs/foo",
    ]);
    world.git(&["commit", "-qm", "add foo"]);
    let users_main = world.git_in(&world.path("home/proj/libs/foo"), &["rev-parse", "main"]);
    let run = world.sh(
        &[],
        "cd libs/foo && echo x > x && git add x && git commit -qm sub-x && cd ../.. && git add libs/foo && \
         git commit -qm bump && git -C libs/foo rev-parse HEAD",
    );
    let sub = run.ok().trim().to_owned();
    assert!(run.stderr().contains("kept in your submodule repository"), "{}", run.stderr());
    assert_eq!(world.git(&["log", "-1", "--format=%s"]).trim(), "bump", "{}", run.stderr());
    let foo = world.path("home/proj/libs/foo");
    assert_eq!(world.git_in(&foo, &["rev-parse", "refs/agent-sandbox/modules/heads/main"]).trim(), sub);
    assert_eq!(world.git_in(&foo, &["rev-parse", "main"]), users_main, "no branch of the user's submodule moved");
    // The user's submodule checkout is what the project's commit names, as on disk.
    assert_eq!(world.git_in(&foo, &["rev-parse", "HEAD"]).trim(), sub);
    assert_eq!(users_status(&world), "");
    world.git(&["submodule", "update", "-q"]);
    assert_eq!(users_status(&world), "");
    // A detached commit in the submodule, with no project commit: kept by its name.
    let run = world.sh(&[], "cd libs/foo && git checkout -q --detach && echo y > y && git add y && git commit -qm sub-y && git rev-parse HEAD");
    let detached = run.ok().trim().to_owned();
    let kept = format!("refs/agent-sandbox/modules/commits/{detached}");
    assert_eq!(world.git_in(&foo, &["rev-parse", &kept]).trim(), detached, "{}", run.stderr());
    // A submodule first cloned inside has no repository of the user's to go to: said,
    // and nothing of it reaches the user's `.git`.
    let run = world.sh(&[], "git -c protocol.file.allow=always submodule add -q \"$PWD/libs/foo\" libs/bar; true");
    run.ok();
    assert!(run.stderr().contains("submodule libs/bar: your repository does not have it"), "{}", run.stderr());
    assert!(!world.path("home/proj/.git/modules/libs/bar").exists());
}

/// In a linked worktree the user's own pre-commit hook (a relative `core.hooksPath`,
/// chained by `hooks install`) runs inside, as in the main checkout: git exports
/// `GIT_DIR` to the hooks of a work tree whose `.git` is a file, and the guard finds
/// the hooks directory as git does, in the work tree (it took it from the session
/// repository's directory, found no hook to chain, and let the commit through).
#[test]
fn in_a_linked_worktree_the_users_pre_commit_hook_runs_inside() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/.githooks/pre-commit", "#!/bin/sh\ntest ! -e STOP\n");
    world.chmod("home/proj/.githooks/pre-commit", 0o755);
    world.git(&["config", "core.hooksPath", ".githooks"]);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "hooks"]);
    world.git(&["worktree", "add", "-q", "../wt", "-b", "feature"]);
    let wt = world.path("home/wt");
    world.cmd().current_dir(&wt).args(["hooks", "install"]).run().ok();
    let script = "echo ok > ok && git add ok && git commit -qm ok && echo OK-COMMITTED; \
                  touch STOP && git add STOP && git commit -qm stop; echo rc=$?";
    let run = world.cmd().current_dir(&wt).args(["exec", "--", "sh", "-c", script]).run();
    let out = run.ok();
    assert!(out.contains("OK-COMMITTED"), "the legitimate commit works: {out}{}", run.stderr());
    assert!(out.contains("rc=1"), "the user's hook refused the commit: {out}{}", run.stderr());
    assert_eq!(world.git(&["log", "-1", "--format=%s", "feature"]).trim(), "ok", "{}", run.stderr());
}

/// Without a session repository (the key off, the `@git` preset off, a `.git` file that
/// names its directory through a symlink) the user's git directories are read-only
/// inside: the history reads, nothing is written (no commit, no plant), the start says
/// why, and the user's git on the host runs nothing.
#[test]
fn without_a_session_repository_the_users_git_is_read_only_inside() {
    require_bwrap!();
    let world = World::new();
    world.project_config(r#"{ "checks": { "commands": ["test ! -e BROKEN"] } }"#);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "config"]);
    let ran = world.path("ran");
    let monitor = format!("printf '[core]\\n\\tfsmonitor = touch {}\\n'", ran.display());
    // The linked worktree's `.git` file names its record through a symlink.
    world.git(&["worktree", "add", "-q", "../wt", "-b", "feature"]);
    std::os::unix::fs::symlink(world.path("home/proj/.git"), world.path("home/git-link")).expect("symlink");
    let record = world.path("home/git-link/worktrees/wt");
    fs_err::write(world.path("home/wt/.git"), format!("gitdir: {}\n", record.display())).expect("write");
    world.cmd().current_dir(&world.path("home/wt")).args(["config", "allow"]).run().ok();
    let cases = [
        ("home/proj", r#"{ "git": { "sessionRepository": false } }"#, "`git.sessionRepository` is off"),
        ("home/proj", r#"{ "filesystem": { "presets": ["@all", "!@git"] } }"#, "the `@git` preset is off"),
        ("home/wt", "{}", "no session repository can stand in for"),
    ];
    for (dir, config, why) in cases {
        world.write("xdg-config/agent-sandbox/config.jsonc", config);
        let tips = world.git(&["for-each-ref"]);
        let script = format!(
            "git log -1 --format=%s && \
             (echo x > x && git add x 2>/dev/null && git commit -qm x 2>/dev/null && echo COMMITTED; true) && \
             (echo /tmp > \"$(git rev-parse --git-common-dir)/commondir\" 2>/dev/null && echo PLANTED; true) && \
             ({monitor} >> \"$(git rev-parse --git-common-dir)/config\" 2>/dev/null && echo CONFIG-WRITABLE; true) && \
             (echo 'gitdir: /tmp' > .git 2>/dev/null && echo GITFILE-WRITABLE; true)"
        );
        let run = world.cmd().current_dir(&world.path(dir)).args(["exec", "--", "sh", "-c", &script]).run();
        let out = run.ok();
        assert!(out.starts_with("config\n"), "the history reads ({dir}, {config}): {out}\n{}", run.stderr());
        for marker in ["COMMITTED", "PLANTED", "CONFIG-WRITABLE", "GITFILE-WRITABLE"] {
            assert!(!out.contains(marker), "{marker} ({dir}, {config}): {out}");
        }
        assert!(run.stderr().contains(why), "{}", run.stderr());
        assert!(run.stderr().contains("read-only inside"), "{}", run.stderr());
        // The agent is told too, by the git guard (with `@git`), beside git's own error.
        let run = world.cmd().current_dir(&world.path(dir)).args(["exec", "--", "git", "commit", "-qm", "y"]).run();
        assert_ne!(run.code(), 0);
        let told = run.stderr().contains(".git is read-only in this sandbox: there is no session repository");
        assert_eq!(told, !config.contains("!@git"), "{}", run.stderr());
        assert_eq!(world.git(&["for-each-ref"]), tips, "{config}");
        assert!(!world.path("home/proj/.git/commondir").exists());
        std::fs::remove_file(world.path(&format!("{dir}/x"))).expect("rm x");
        // The user's git, in both checkouts: clean, nothing run.
        assert_eq!(users_status(&world), "");
        assert_eq!(world.git_in(&world.path("home/wt"), &["status", "--porcelain"]), "");
        assert!(!ran.exists());
    }
}
