//! End to end: the session repository's sync under `exec` leaves what the user did on
//! the host alone while the agent works (what is staged, the branch checked out, a
//! reset, a deleted branch), with the legitimate flow beside each: the agent's commit
//! still comes home.

use crate::{
    session_repo::{checked_world, ended, start_until, users_fsck, users_status, wait_for},
    support::{require_bwrap, World},
};

/// Removes the markers the scripts left in the project.
fn tidy(world: &World, markers: &[&str]) {
    for marker in markers {
        fs_err::remove_file(world.path(&format!("home/proj/{marker}"))).expect("marker");
    }
}

/// The user stages a change (part of a file, as `add -p` does) while the agent works;
/// the agent commits another file. The commit comes home, and what the user staged is
/// still staged, byte for byte. A commit that touches what the user staged does not
/// move the branch: it waits, and both are told why.
#[test]
fn what_the_user_stages_during_a_session_stays_staged() {
    require_bwrap!();
    let world = checked_world();
    world.write("home/proj/notes.txt", "one\n");
    world.git(&["add", "notes.txt"]);
    world.git(&["commit", "-qm", "notes"]);
    let script = "touch up; while [ ! -e go ]; do sleep 0.05; done; \
        echo agent > agent.txt && git add agent.txt && git commit -qm agent && touch done; \
        while [ ! -e go2 ]; do sleep 0.05; done; \
        echo agent > notes.txt && git add notes.txt && git commit -qm agent-notes";
    let child = start_until(&world, script, "up");
    // Staged: a version of the file that is not in the work tree (as `add -p` leaves).
    world.write("home/proj/notes.txt", "staged\n");
    world.git(&["add", "notes.txt"]);
    world.write("home/proj/notes.txt", "staged\nand more, unstaged\n");
    let staged = world.git(&["rev-parse", ":notes.txt"]).trim().to_owned();
    fs_err::write(world.path("home/proj/go"), "").expect("go");
    wait_for(&world, "done");
    // The sync runs in the background after the commit: wait for it to land.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while world.git(&["log", "-1", "--format=%s", "main"]).trim() != "agent" {
        assert!(std::time::Instant::now() < deadline, "the agent's commit did not come home");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The broker holds the user's index (as git does) until it has moved it too.
    while world.path("home/proj/.git/index.lock").exists() {
        assert!(std::time::Instant::now() < deadline, "the index stays locked");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(world.git(&["rev-parse", ":notes.txt"]).trim(), staged, "the staged version is gone");
    assert_eq!(world.git(&["diff", "--cached", "--name-only"]).trim(), "notes.txt");
    assert_eq!(world.git(&["rev-parse", ":agent.txt"]).trim(), world.git(&["rev-parse", "main:agent.txt"]).trim());
    // The agent's next commit changes the file the user staged: the branch stays.
    fs_err::write(world.path("home/proj/go2"), "").expect("go2");
    let run = ended(child);
    run.ok();
    assert!(run.stderr().contains("staged changes conflict"), "{}", run.stderr());
    assert_eq!(world.git(&["log", "-1", "--format=%s", "main"]).trim(), "agent");
    assert_eq!(world.git(&["rev-parse", ":notes.txt"]).trim(), staged, "the staged version is gone");
    let waiting = world.git(&["log", "-1", "--format=%s", "refs/agent-sandbox/waiting/heads/main"]);
    assert_eq!(waiting.trim(), "agent-notes");
    tidy(&world, &["up", "go", "done", "go2"]);
    assert_eq!(users_fsck(&world), "");
}

/// The user switches to a new branch on the host mid-session; the agent's next commit
/// on `main` comes home to `main`, and the user's `HEAD` stays on their branch. The
/// agent's own switch to a new branch is followed while the user's `HEAD` is where both
/// agreed.
#[test]
fn the_users_switch_is_never_undone_and_the_agents_is_followed() {
    require_bwrap!();
    let world = checked_world();
    world.sh(&[], "git switch -qc topic && echo t > t.txt && git add t.txt && git commit -qm topic").ok();
    assert_eq!(world.git(&["symbolic-ref", "HEAD"]).trim(), "refs/heads/topic", "the agent's switch is followed");
    assert_eq!(users_status(&world), "");
    let script = "touch up; while [ ! -e go ]; do sleep 0.05; done; \
        echo agent > agent.txt && git add agent.txt && git commit -qm agent";
    let child = start_until(&world, script, "up");
    world.git(&["switch", "-qc", "hotfix"]);
    fs_err::write(world.path("home/proj/go"), "").expect("go");
    let run = ended(child);
    run.ok();
    assert_eq!(world.git(&["symbolic-ref", "HEAD"]).trim(), "refs/heads/hotfix", "{}", run.stderr());
    assert_eq!(world.git(&["log", "-1", "--format=%s", "topic"]).trim(), "agent", "{}", run.stderr());
    assert_eq!(world.git(&["log", "-1", "--format=%s", "hotfix"]).trim(), "topic");
    // The next session starts on the user's branch.
    let out = world.sh(&[], "git symbolic-ref HEAD").ok();
    assert_eq!(out.trim(), "refs/heads/hotfix");
    tidy(&world, &["up", "go"]);
}

/// A commit that came home and that the user then drops (`git reset --keep HEAD~1`) is
/// not brought back by the agent's next commit on top of it: that one waits, told how to
/// keep only its own, and the command it is told works in the shared work tree.
#[test]
fn a_reset_of_the_users_is_never_undone() {
    require_bwrap!();
    let world = checked_world();
    let before = world.git(&["rev-parse", "main"]).trim().to_owned();
    let script = "echo one > one.txt && git add one.txt && git commit -qm one && touch up; \
        while [ ! -e go ]; do sleep 0.05; done; \
        echo two > two.txt && git add two.txt && git commit -qm two";
    let child = start_until(&world, script, "up");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while world.git(&["log", "-1", "--format=%s", "main"]).trim() != "one" {
        assert!(std::time::Instant::now() < deadline, "the agent's commit did not come home");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let one = world.git(&["rev-parse", "main"]).trim().to_owned();
    // The broker holds the user's index (as git does) until it has moved it too.
    while world.path("home/proj/.git/index.lock").exists() {
        assert!(std::time::Instant::now() < deadline, "the index stays locked");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    world.git(&["reset", "-q", "--keep", "HEAD~1"]);
    fs_err::write(world.path("home/proj/go"), "").expect("go");
    let run = ended(child);
    run.ok();
    assert_eq!(world.git(&["rev-parse", "main"]).trim(), before, "the reset was undone: {}", run.stderr());
    let told = format!("git rebase --autostash --onto {before} {one}");
    assert!(run.stderr().contains(&told), "{}", run.stderr());
    tidy(&world, &["up", "go"]);
    // The next session: the command it was told keeps only its own commit, which then
    // comes home on the user's reset.
    world.sh(&[], &format!("{told} -q && echo three > three.txt && git add three.txt && git commit -qm three")).ok();
    assert_eq!(world.git(&["log", "--format=%s", "-3", "main"]), "three\ntwo\nconfig\n");
    assert!(!world.path("home/proj/one.txt").exists());
    assert_eq!(users_status(&world), "");
}

/// A branch the session brought home and the user then deleted stays deleted: the next
/// session does not bring it back, and no longer has it.
#[test]
fn a_branch_the_user_deleted_does_not_come_back() {
    require_bwrap!();
    let world = checked_world();
    world.sh(&[], "git switch -qc spike && echo s > s.txt && git add s.txt && git commit -qm spike").ok();
    assert_eq!(world.git(&["log", "-1", "--format=%s", "spike"]).trim(), "spike");
    world.git(&["switch", "-q", "main"]);
    world.git(&["branch", "-qD", "spike"]);
    let out = world.sh(&[], "git branch --list spike; git symbolic-ref HEAD").ok();
    assert_eq!(out.trim(), "refs/heads/main", "{out}");
    assert_eq!(world.git(&["branch", "--list", "spike"]), "");
    // And the legitimate move beside it: a branch the agent makes anew comes home.
    world.sh(&[], "git branch spike2").ok();
    assert_eq!(world.git(&["branch", "--list", "spike2"]).trim(), "spike2");
    assert_eq!(world.git(&["branch", "--list", "spike"]), "");
}

/// `rm -rf proj && git clone … proj`: the kept session belonged to the old clone. It is
/// put aside, nothing of it comes into the new clone, the user is told where it is and
/// `agent-sandbox git sessions` lists what it held (its branches that never came home,
/// its stash) and removes it. The new clone's session starts from the new clone.
#[test]
fn a_clone_made_again_at_the_same_path_gets_a_session_of_its_own() {
    require_bwrap!();
    let world = checked_world();
    let remote = world.bare_origin();
    world.git(&["push", "-q", "origin", "main"]);
    // The old clone's session: a branch whose commit fails the checks (it never comes
    // home), and an unpushed commit that came home.
    world.sh(&[], "echo ok > ok && git add ok && git commit -qm unpushed").ok();
    world.sh(
        &[],
        "git switch -qc old-work && touch BROKEN && git add BROKEN && git commit -qnm broken; git switch -q main",
    );
    let _ = std::fs::remove_file(world.path("home/proj/BROKEN"));
    let proj = world.path("home/proj");
    fs_err::remove_dir_all(&proj).expect("rm -rf");
    let cloned = std::process::Command::new("git")
        .args(["clone", "-q", remote.to_str().expect("utf-8"), proj.to_str().expect("utf-8")])
        .status()
        .expect("git clone");
    assert!(cloned.success());
    world.cmd().args(["config", "allow"]).run().ok();
    let run = world.sh(&[], "git log --format=%s main && git branch --format='%(refname:short)'");
    let out = run.ok();
    assert_eq!(out, "config\ninit\nmain\n", "{}", run.stderr());
    assert!(run.stderr().contains("belonged to another repository"), "{}", run.stderr());
    assert_eq!(world.git(&["branch", "--format=%(refname:short)"]), "main\n");
    assert_eq!(users_fsck(&world), "");
    // What the old session held is listed, and can be removed.
    let listed = world.cmd().args(["git", "sessions"]).run();
    let listed = listed.ok();
    assert!(listed.contains("aside-") && listed.contains("old-work"), "{listed}");
    let name = listed.split_whitespace().find(|word| word.starts_with("aside-")).expect("an aside session").to_owned();
    world.cmd().args(["git", "sessions", "remove", &name]).run().ok();
    assert!(!world.cmd().args(["git", "sessions"]).run().ok().contains(&name));
    // The legitimate flow beside it: the new clone's session brings commits home.
    world.sh(&[], "echo new > new.txt && git add new.txt && git commit -qm new").ok();
    assert_eq!(world.git(&["log", "-1", "--format=%s", "main"]).trim(), "new");
}

/// The agent commits in a submodule, then in the project, and pushes the project: the
/// push is refused while no remote of the submodule has that commit (a teammate's
/// `git submodule update` would fail with `not our ref`), told how to push it first;
/// once the user has pushed the submodule's commit, the project's push goes out.
#[test]
fn a_project_push_naming_an_unpublished_submodule_commit_is_refused() {
    require_bwrap!();
    let world = checked_world();
    let lib_remote = world.path("lib.git");
    let lib_src = world.path("lib");
    world.git_in(&world.root, &["init", "-q", "--bare", lib_remote.to_str().expect("utf-8")]);
    world.git_in(&world.root, &["init", "-q", "-b", "main", lib_src.to_str().expect("utf-8")]);
    world.git_in(&lib_src, &["commit", "-q", "--allow-empty", "-m", "lib"]);
    world.git_in(&lib_src, &["push", "-q", lib_remote.to_str().expect("utf-8"), "main"]);
    let remote = world.bare_origin();
    world.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        lib_remote.to_str().expect("utf-8"),
        "lib",
    ]);
    world.git(&["commit", "-qm", "add lib"]);
    world.git(&["push", "-q", "origin", "main"]);
    let rw = ["--rw", remote.to_str().expect("utf-8")];
    let run = world.sh(
        &rw,
        "cd lib && echo x > x && git add x && git commit -qm sub-x && cd .. && git add lib && git commit -qm bump && \
         git push -q origin main",
    );
    assert_ne!(run.code(), 0, "{}", run.stderr());
    assert!(run.stderr().contains("which no remote of lib has"), "{}", run.stderr());
    let remote_main = world.git_in(&remote, &["log", "-1", "--format=%s", "main"]);
    assert_eq!(remote_main.trim(), "add lib", "the push went out");
    // The user pushes the submodule's commit (kept in their submodule repository), then
    // the agent's push goes out.
    let lib = world.path("home/proj/lib");
    world.git_in(&lib, &["push", "-q", "origin", "refs/agent-sandbox/modules/heads/main:refs/heads/main"]);
    world.git_in(&lib, &["fetch", "-q", "origin"]);
    let run = world.sh(&rw, "git push -q origin main");
    run.ok();
    assert_eq!(world.git_in(&remote, &["log", "-1", "--format=%s", "main"]).trim(), "bump");
}
