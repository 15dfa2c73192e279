//! End to end: the session repository's three-way sync in a dev container (root's
//! broker, the user's own plain Debian image) leaves what the user did on the host
//! alone, each beside the legitimate flow: what the user staged stays staged, the
//! user's switch is not undone, a reset is not undone, a branch the user deleted does
//! not come back when the container is made anew (its base is kept with the user's
//! repository, not in the container), a second `git-home start` run by the agent
//! changes nothing, the agent's stash reaches the user's stash, and a clone made again
//! at the same path gets a session of its own, the old one put aside and named. The
//! container is on Docker's `none` network: no traffic leaves it.

use std::{path::Path, process::Command, time::Instant};

use super::{check, chown_for_container, docker_ok, git, home::host_git, Cleanup, Devcontainer, PLAIN_IMAGE};

const COMMIT: &str = "git -c user.name=a -c user.email=a@x.invalid commit -q";

/// The user's repository, with the project's checks, an origin, and the user's own
/// dev container (`init` adds the Feature).
fn users_repository(dc: &Devcontainer, origin: &Path) {
    let repo = &dc.repo;
    std::fs::create_dir_all(repo.join(".agent-sandbox")).expect("mkdir");
    git(repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join(".agent-sandbox/config.jsonc"), "{\"checks\": {\"commands\": [\"test ! -e FAIL\"]}}\n")
        .expect("config");
    std::fs::write(repo.join("README"), "test\n").expect("write");
    std::fs::write(repo.join("notes.txt"), "one\n").expect("write");
    git(repo, &["add", "."]);
    git(repo, &["-c", "user.name=u", "-c", "user.email=u@x.invalid", "commit", "-q", "-m", "init"]);
    git(repo, &["push", "-q", &origin.display().to_string(), "main"]);
    dev_container(dc);
}

fn dev_container(dc: &Devcontainer) {
    let repo = &dc.repo;
    std::fs::create_dir_all(repo.join(".devcontainer")).expect("mkdir");
    let user_json = format!(
        "{{\n  \"image\": \"{PLAIN_IMAGE}\",\n  \"remoteUser\": \"dev\",\n  \"runArgs\": [\"--network=none\"]\n}}\n"
    );
    std::fs::write(repo.join(".devcontainer/devcontainer.json"), user_json).expect("write");
    dc.init(&[]);
    std::fs::write(repo.join(".git/info/exclude"), ".devcontainer/\n").expect("exclude");
    chown_for_container(repo);
    let (ok, up) = dc.up(&[]);
    assert!(ok, "up:\n{up}");
}

/// The host's git as the user, then the workspace handed back to the container's user.
fn user(dc: &Devcontainer, args: &[&str]) -> String {
    let out = host_git(&dc.repo, args);
    chown_for_container(&dc.repo);
    out
}

/// Removes the container (its volumes stay): what a rebuild or `--remove-existing-container` does.
fn remove_container(dc: &Devcontainer) {
    docker_ok(&["rm", "-f", &dc.container()]);
}

#[test]
fn the_users_moves_on_the_host_are_never_undone_in_a_container() {
    let Some(_tag) = crate::support::e2e_base_tag("the container sync end-to-end test") else { return };
    let started = Instant::now();
    let cli = std::env::var("AGENT_SANDBOX_DEVCONTAINER_CLI").expect("xtask sets the devcontainer CLI path");
    let world = tempfile::tempdir().expect("tempdir");
    let dc = Devcontainer { cli: &cli, repo: world.path().join("sync") };
    let _cleanup = Cleanup {
        containers: Vec::new(),
        network: format!("as-e2e-sync-none-{}", std::process::id()),
        workspaces: vec![dc.repo.clone()],
        images: Vec::new(),
    };
    let origin = world.path().join("origin.git");
    git(world.path(), &["init", "-q", "--bare", "-b", "main", &origin.display().to_string()]);
    users_repository(&dc, &origin);

    // Staged on the host (a version not in the work tree, as `add -p` leaves); the
    // agent commits another file: it comes home, and what the user staged stays staged.
    std::fs::write(dc.repo.join("notes.txt"), "staged\n").expect("write");
    user(&dc, &["add", "notes.txt"]);
    std::fs::write(dc.repo.join("notes.txt"), "staged\nand more, unstaged\n").expect("write");
    chown_for_container(&dc.repo);
    let staged = host_git(&dc.repo, &["rev-parse", ":notes.txt"]);
    let (got, all) = dc.exec(&format!(
        "cd /workspaces/sync\nagent-sandbox firewall wait >/dev/null\n\
         echo agent > agent.txt && git add agent.txt && {COMMIT} -m agent 2>/tmp/c; say commit $?\n\
         settle /tmp/c; say head \"$(git rev-parse HEAD)\""
    ));
    check("staged on the host", &got, &[("commit", "0")], &all);
    assert_eq!(host_git(&dc.repo, &["rev-parse", "main"]), got["head"], "{all}");
    assert_eq!(host_git(&dc.repo, &["rev-parse", ":notes.txt"]), staged, "the staged version is gone: {all}");
    assert_eq!(host_git(&dc.repo, &["diff", "--cached", "--name-only"]), "notes.txt");
    user(&dc, &["reset", "-q", "notes.txt"]);
    user(&dc, &["checkout", "-q", "notes.txt"]);

    // The user switches to a branch of their own; the agent's next commit on `main`
    // comes home to `main`, and the user's `HEAD` stays where the user put it.
    user(&dc, &["switch", "-q", "-c", "hotfix"]);
    let (got, all) = dc.exec(&format!(
        "cd /workspaces/sync\n\
         echo agent2 > agent2.txt && git add agent2.txt && {COMMIT} -m agent2 2>/tmp/c; say commit $?\n\
         settle /tmp/c; say head \"$(git rev-parse main)\""
    ));
    check("the user's switch", &got, &[("commit", "0")], &all);
    assert_eq!(host_git(&dc.repo, &["symbolic-ref", "HEAD"]), "refs/heads/hotfix", "{all}");
    assert_eq!(host_git(&dc.repo, &["rev-parse", "main"]), got["head"], "{all}");
    // The work tree is shared: the agent's file is there, untracked on the user's branch.
    std::fs::remove_file(dc.repo.join("agent2.txt")).expect("rm");
    user(&dc, &["switch", "-q", "main"]);

    // A commit comes home and the user drops it: the agent's next commit on top waits,
    // told the command that keeps only its own, and that command works here.
    let (got, all) = dc.exec(&format!(
        "cd /workspaces/sync\n\
         git status >/dev/null 2>&1; echo one > one.txt && git add one.txt && {COMMIT} -m one 2>/tmp/c; say commit $?\n\
         settle /tmp/c; say head \"$(git rev-parse HEAD)\""
    ));
    check("a commit to drop", &got, &[("commit", "0")], &all);
    let one = got["head"].clone();
    assert_eq!(host_git(&dc.repo, &["rev-parse", "main"]), one, "{all}");
    user(&dc, &["reset", "-q", "--keep", "HEAD~1"]);
    let before = host_git(&dc.repo, &["rev-parse", "main"]);
    let told = format!("git rebase --autostash --onto {before} {one}");
    let run = told.replace("git rebase", "git -c user.name=a -c user.email=a@x.invalid rebase");
    let (got, all) = dc.exec(&format!(
        "cd /workspaces/sync\n\
         echo two > two.txt && git add two.txt && {COMMIT} -m two 2>/tmp/c; say commit $?\n\
         settle /tmp/c; say told \"$(grep -c -F '{told}' /tmp/c)\"\n\
         {run} -q 2>/tmp/r; say rebase $?; say rebase_said \"$(tr '\\n' ' ' </tmp/r)\"\n\
         settle /tmp/r; say head \"$(git rev-parse HEAD)\""
    ));
    check("the user's reset", &got, &[("commit", "0"), ("told", "1"), ("rebase", "0")], &all);
    assert_eq!(host_git(&dc.repo, &["log", "--format=%s", "-2", "main"]), "two\nagent2", "{all}");
    assert_eq!(host_git(&dc.repo, &["rev-parse", "main"]), got["head"], "{all}");
    assert!(!dc.repo.join("one.txt").exists(), "the dropped commit came back");

    // A branch comes home, the user deletes it, and the container is made anew (a
    // rebuild keeps the session volume): the branch stays deleted; a second start the
    // agent runs through sudo changes nothing; a new branch still comes home.
    let (got, all) = dc.exec(&format!(
        "cd /workspaces/sync\n\
         git switch -q -c spike && echo s > s.txt && git add s.txt && {COMMIT} -m spike 2>/tmp/c; say commit $?\n\
         git switch -q main; settle /tmp/c"
    ));
    check("a branch", &got, &[("commit", "0")], &all);
    assert_eq!(host_git(&dc.repo, &["log", "-1", "--format=%s", "spike"]), "spike", "{all}");
    assert_eq!(host_git(&dc.repo, &["symbolic-ref", "HEAD"]), "refs/heads/main", "{all}");
    user(&dc, &["branch", "-q", "-D", "spike"]);
    remove_container(&dc);
    let (ok, up) = dc.up(&[]);
    assert!(ok, "up again:\n{up}");
    let (got, all) = dc.exec(
        "cd /workspaces/sync\nagent-sandbox firewall wait >/dev/null\n\
         say spike \"$(git branch --list spike)\"\n\
         say again \"$(sudo -n /usr/local/bin/agent-sandbox git-home start 2>&1 | grep -c 'nothing to do')\"\n\
         settle /tmp/s; say spike_after \"$(git branch --list spike)\"\n\
         git branch spike2; settle /tmp/s\n\
         echo wip >> README && git stash -q; say stash $?; settle /tmp/s",
    );
    let want = [("spike", ""), ("again", "1"), ("spike_after", ""), ("stash", "0")];
    check("a deleted branch, a new container", &got, &want, &all);
    assert_eq!(host_git(&dc.repo, &["branch", "--list", "spike"]), "", "the deleted branch came back: {all}");
    assert_eq!(host_git(&dc.repo, &["branch", "--list", "spike2"]), "spike2", "{all}");
    // The agent's stash of the user's uncommitted edit is in the user's stash.
    assert!(host_git(&dc.repo, &["stash", "list"]).lines().count() == 1, "{all}");
    assert!(host_git(&dc.repo, &["stash", "show", "-p", "stash@{0}"]).contains("+wip"), "{all}");

    // `rm -rf` and a new clone at the same path: the kept session is another
    // repository's. It is put aside, named, and nothing of it comes into the new clone.
    remove_container(&dc);
    std::fs::remove_dir_all(&dc.repo).expect("rm -rf");
    let cloned = Command::new("git").arg("clone").arg("-q").arg(&origin).arg(&dc.repo).status().expect("git clone");
    assert!(cloned.success());
    dev_container(&dc);
    let (got, all) = dc.exec(
        "cd /workspaces/sync\nagent-sandbox firewall wait >/dev/null\n\
         say branches \"$(git branch --format='%(refname:short)' | tr '\\n' ' ')\"\n\
         say log \"$(git log --format=%s | tr '\\n' ' ')\"\n\
         say status \"$(git status --porcelain)\"\n\
         say aside \"$(ls .git | grep -c agent-sandbox-aside-)\"\n\
         say told \"$(cat /var/log/agent-sandbox-home.log /tmp/agent-sandbox-home.log 2>/dev/null | grep -c 'not made from this repository')\"",
    );
    check(
        "a clone made again",
        &got,
        &[("branches", "main "), ("log", "init "), ("status", ""), ("aside", "1"), ("told", "1")],
        &all,
    );
    assert_eq!(host_git(&dc.repo, &["branch", "--format=%(refname:short)"]), "main", "{all}");
    // The legitimate flow beside it: the new clone's session brings a commit home.
    let (got, all) = dc.exec(&format!(
        "cd /workspaces/sync\n\
         echo new > new.txt && git add new.txt && {COMMIT} -m new 2>/tmp/c; say commit $?\nsettle /tmp/c"
    ));
    check("the new clone's session", &got, &[("commit", "0")], &all);
    assert_eq!(host_git(&dc.repo, &["log", "-1", "--format=%s", "main"]), "new", "{all}");
    eprintln!("container sync e2e: {:.0?}", started.elapsed());
}
