//! End to end: the session repository and its broker (`hostpush::home`) in a dev
//! container `devcontainer init` made from a user's plain Debian image. Inside, `.git`
//! is the container's own; the user's `.git` is out of the agent's reach, and commits
//! come home only through the checks. Every `.git` plant earlier attack rounds used
//! lands in the session repository and never in the user's, which the user's own git
//! on the host then reads (and runs nothing of the agent's); a failing check keeps its
//! commit out; a commit the user makes on the host meanwhile is never overwritten, and
//! the agent's tip waits until it is rebased; new branches and the checked-out branch
//! follow; the session repository survives a restart (a stash with it). The container
//! is on Docker's `none` network: no traffic leaves it.

use std::{path::Path, process::Command, time::Instant};

use super::{check, chown_for_container, docker, docker_ok, git, Cleanup, Devcontainer, PLAIN_IMAGE};

/// The host's git in the user's repository (root's, in a repository the container's
/// user owns).
pub(crate) fn host_git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git").args(["-c", "safe.directory=*"]).args(args).current_dir(repo).output().expect("git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The user's `.git` as the host sees it: every path under it but what commits coming
/// home legitimately change (objects, refs and their logs, `HEAD`, the index), with the
/// configuration's content: what a plant would show up in.
pub(crate) fn git_dir_listing(repo: &Path) -> String {
    let git = repo.join(".git");
    let out = Command::new("find")
        .arg(&git)
        .args(["(", "-path", &format!("{}/objects", git.display()), "-o", "-path", &format!("{}/refs", git.display())])
        .args(["-o", "-path", &format!("{}/logs", git.display()), ")", "-prune", "-o"])
        .args([
            "!",
            "-name",
            "index",
            "!",
            "-name",
            "*HEAD",
            "!",
            "-name",
            "packed-refs",
            "!",
            "-name",
            "COMMIT_EDITMSG",
        ])
        .arg("-print")
        .output()
        .expect("find");
    let mut listing = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect::<Vec<_>>();
    listing.sort();
    let config = std::fs::read_to_string(repo.join(".git/config")).unwrap_or_default();
    format!("{}\n--- config:\n{config}", listing.join("\n"))
}

#[test]
fn commits_come_home_through_the_checks_and_the_users_git_stays_the_users() {
    let Some(_tag) = crate::support::e2e_base_tag("the session repository's end-to-end test") else { return };
    let started = Instant::now();
    let cli = std::env::var("AGENT_SANDBOX_DEVCONTAINER_CLI").expect("xtask sets the devcontainer CLI path");
    let world = tempfile::tempdir().expect("tempdir");
    let dc = Devcontainer { cli: &cli, repo: world.path().join("home") };
    let repo = dc.repo.clone();
    let _cleanup = Cleanup {
        containers: Vec::new(),
        network: format!("as-e2e-home-none-{}", std::process::id()),
        workspaces: vec![repo.clone()],
        images: Vec::new(),
    };
    std::fs::create_dir_all(repo.join(".agent-sandbox")).expect("mkdir");
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join(".agent-sandbox/config.jsonc"), "{\"checks\": {\"commands\": [\"test ! -e FAIL\"]}}\n")
        .expect("config");
    std::fs::write(repo.join("README"), "test\n").expect("write");
    // The user's own pre-commit hook: no file named STOP.
    let hook = repo.join(".git/hooks/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\n! git diff --cached --name-only | grep -qx STOP\n").expect("hook");
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    // A submodule: its repository is in `.git/modules/lib`, which the session seeds too.
    let lib = world.path().join("libsrc");
    std::fs::create_dir_all(&lib).expect("mkdir");
    git(&lib, &["init", "-q", "-b", "main"]);
    git(&lib, &["-c", "user.name=u", "-c", "user.email=u@x.invalid", "commit", "-q", "--allow-empty", "-m", "lib"]);
    git(&repo, &["-c", "protocol.file.allow=always", "submodule", "add", "-q", &lib.display().to_string(), "lib"]);
    git(&repo, &["add", "."]);
    git(&repo, &["-c", "user.name=u", "-c", "user.email=u@x.invalid", "commit", "-q", "-m", "init"]);
    std::fs::create_dir_all(repo.join(".devcontainer")).expect("mkdir");
    let user_json = format!(
        "{{\n  \"image\": \"{PLAIN_IMAGE}\",\n  \"remoteUser\": \"dev\",\n  \"runArgs\": [\"--network=none\"]\n}}\n"
    );
    std::fs::write(repo.join(".devcontainer/devcontainer.json"), user_json).expect("write");
    let said = dc.init(&[]);
    assert!(said.contains("git inside is the container's own session repository"), "{said}");
    // The project's own files stay out of what the agent commits.
    std::fs::write(repo.join(".git/info/exclude"), ".devcontainer/\n").expect("exclude");
    chown_for_container(&repo);
    let (ok, up) = dc.up(&[]);
    assert!(ok, "up:\n{up}");
    let first = host_git(&repo, &["rev-parse", "HEAD"]);
    let commit = "git -c user.name=a -c user.email=a@x.invalid commit -q";

    // The legitimate loop: the user's history is there, a commit comes home.
    let (got, all) = dc.exec(&format!(
        "cd /workspaces/home\n\
         agent-sandbox firewall wait >/dev/null\n\
         say log \"$(git log --format=%H)\"\n\
         say status \"$(git status --porcelain)\"\n\
         say submodule \"$(git submodule status >/dev/null 2>&1; echo $?)$(git -C lib log --format=%s)\"\n\
         git -C lib -c user.name=a -c user.email=a@x.invalid commit -q --allow-empty -m inside; say lib_commit $?\n\
         git -C lib reset -q --hard HEAD~1\n\
         echo more >> README && git add README && {commit} -m 'from the agent' 2>/tmp/commit; say commit $?\n\
         settle /tmp/commit; say told \"$(grep -m1 -c 'main is now' /tmp/commit)\"\n\
         say head \"$(git rev-parse HEAD)\"\n\
         agent-sandbox test >/tmp/selftest 2>&1; say selftest $?"
    ));
    check(
        "a commit inside",
        &got,
        &[
            ("log", &first),
            ("status", ""),
            ("submodule", "0lib"),
            ("lib_commit", "0"),
            ("commit", "0"),
            ("told", "1"),
            ("selftest", "0"),
        ],
        &all,
    );
    let head = got["head"].clone();
    assert_eq!(host_git(&repo, &["rev-parse", "main"]), head, "{all}");
    assert_eq!(host_git(&repo, &["status", "--porcelain"]), "", "the host's index follows the new HEAD");

    // Every plant of earlier rounds, from inside: each lands in the session repository.
    let before = git_dir_listing(&repo);
    let pwned_path = repo.join("PWNED");
    let pwned = pwned_path.display();
    let (got, all) = dc.exec(&format!(
        "cd /workspaces/home\n\
         printf '[core]\\n\\tfsmonitor = touch {pwned}\\n' > .git/config.evil\n\
         cat .git/config.evil >> .git/config; say config $?\n\
         mkdir -p .git/modules/sub && cp .git/config.evil .git/modules/sub/config; say modules $?\n\
         mkdir -p .git/worktrees/w && echo /tmp > .git/worktrees/w/gitdir; say worktrees $?\n\
         printf '#!/bin/sh\\ntouch {pwned}\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout; say hook $?\n\
         echo /workspaces/home/.git/modules/sub > .git/commondir; say commondir $?\n\
         rm .git/commondir\n\
         ls /var/lib/agent-sandbox/home >/dev/null 2>&1; say home_listed $?\n\
         touch /var/lib/agent-sandbox/user-objects/x 2>/dev/null; say objects_written $?\n\
         sudo -n /usr/local/bin/agent-sandbox git-home seed /tmp/s </dev/null >/dev/null 2>&1; say sudo_seed $?"
    ));
    let want = [
        ("config", "0"),
        ("modules", "0"),
        ("worktrees", "0"),
        ("hook", "0"),
        ("commondir", "0"),
        ("home_listed", "2"),
    ];
    check("plants inside", &got, &want, &all);
    check("out of reach", &got, &[("objects_written", "1"), ("sudo_seed", "1")], &all);
    // The user's git on the host reads its own repository and runs nothing planted.
    host_git(&repo, &["status"]);
    host_git(&repo, &["submodule", "status"]);
    host_git(&repo, &["checkout", "-q", "main"]);
    assert!(!pwned_path.exists(), "the host's git ran a command the agent planted");
    assert_eq!(git_dir_listing(&repo), before, "the user's .git changed");

    // A commit whose check fails stays inside; the agent is told which check.
    let (got, all) = dc.exec(&format!(
        "cd /workspaces/home\n\
         git config --file .git/config.evil --list >/dev/null; sed -i '/fsmonitor/d' .git/config\n\
         rm -f .git/hooks/post-checkout\n\
         touch FAIL && git add FAIL && {commit} -m 'fails its check' 2>/tmp/commit; say commit $?\n\
         settle /tmp/commit; say refused \"$(grep -m1 -c 'the check .test ! -e FAIL. failed' /tmp/commit)\"\n\
         git reset -q --hard HEAD~1; say reset $?; settle /dev/null"
    ));
    check("a failing check", &got, &[("commit", "0"), ("refused", "1"), ("reset", "0")], &all);
    assert_eq!(host_git(&repo, &["rev-parse", "main"]), head, "a commit that failed its check came home");

    // The session's hooks are the agent's to change; the broker replays the user's own:
    // with the user's pre-commit edited out inside, a commit it refuses stays out. A
    // commit that adds a submodule over a `.git` directory of the agent's (with a
    // `core.fsmonitor`) stays out, and the user's git on the host runs nothing of it.
    let real = "/usr/libexec/agent-sandbox/git";
    let (got, all) = dc.exec(&format!(
        "cd /workspaces/home\n\
         cp .git/hooks/pre-commit /tmp/pre-commit && printf '#!/bin/sh\\nexit 0\\n' > .git/hooks/pre-commit; say edited $?\n\
         touch STOP && git add STOP && {commit} -m 'past the hook' 2>/tmp/commit; say commit $?\n\
         settle /tmp/commit; say hook_refused \"$(grep -m1 -c 'your pre-commit hook failed' /tmp/commit)\"\n\
         git reset -q --hard HEAD~1; cp /tmp/pre-commit .git/hooks/pre-commit; settle /dev/null\n\
         mkdir sub && cp -r .git sub/.git && printf '[core]\\n\\tfsmonitor = touch {pwned}\\n' >> sub/.git/config\n\
         {real} update-index --add --cacheinfo 160000,$(git rev-parse HEAD),sub && {commit} -m sub 2>/tmp/sub\n\
         say sub_commit $?\n\
         settle /tmp/sub; say sub_refused \"$(grep -m1 -c 'sub/.git in the work tree is a directory' /tmp/sub)\"\n\
         git reset -q --hard HEAD~1; rm -rf sub; settle /dev/null"
    ));
    let want = [("edited", "0"), ("commit", "0"), ("hook_refused", "1"), ("sub_commit", "0"), ("sub_refused", "1")];
    check("the user's hooks and nested repositories", &got, &want, &all);
    assert_eq!(host_git(&repo, &["rev-parse", "main"]), head, "{all}");
    host_git(&repo, &["status"]);
    assert!(!pwned_path.exists(), "the host's git ran the nested repository's fsmonitor");

    // The history bypasses of earlier rounds land commits in the session repository
    // only: the real git binary (`--no-verify` past the guard), a stash made a branch,
    // a commit fetched in from a scratch clone. Each is checked before it could come
    // home, fails, and leaves every other branch free to come home.
    let real = "/usr/libexec/agent-sandbox/git -c user.name=a -c user.email=a@x.invalid";
    let (got, all) = dc.exec(&format!(
        "cd /workspaces/home\n\
         echo FAIL > FAIL && {real} add FAIL && {real} commit -q --no-verify -m real-git; say real_git $?\n\
         git branch by-real-git 2>/tmp/b1; settle /tmp/b1; say real_refused \"$(grep -m1 -c 'by-real-git did not come home' /tmp/b1)\"\n\
         git reset -q --hard HEAD~1\n\
         echo FAIL > FAIL && git add FAIL && git stash -q && git branch stashed 'stash@{{0}}' 2>/tmp/b2\n\
         settle /tmp/b2; say stash_refused \"$(grep -m1 -c 'stashed did not come home' /tmp/b2)\"\n\
         git clone -q . /tmp/scratch && cd /tmp/scratch && echo FAIL > FAIL && {real} add FAIL \\\n\
           && {real} commit -q --no-verify -m scratch && cd /workspaces/home\n\
         git fetch -q /tmp/scratch HEAD:refs/heads/sneaky 2>/tmp/b3; settle /tmp/b3; say fetch_refused \"$(grep -m1 -c 'sneaky did not come home' /tmp/b3)\"\n\
         echo fine >> README && git add README && {commit} -m 'still comes home' 2>/tmp/b4\n\
         settle /tmp/b4; say others_home \"$(grep -m1 -c 'main is now' /tmp/b4)\"\n\
         say head \"$(git rev-parse HEAD)\"\n\
         git branch -q -D by-real-git stashed sneaky; git stash drop -q; settle /dev/null"
    ));
    let want = [
        ("real_git", "0"),
        ("real_refused", "1"),
        ("stash_refused", "1"),
        ("fetch_refused", "1"),
        ("others_home", "1"),
    ];
    check("history bypasses", &got, &want, &all);
    let branches = host_git(&repo, &["for-each-ref", "--format=%(refname)", "refs/heads/"]);
    assert_eq!(branches, "refs/heads/main", "only main is a branch of the user's");
    assert_eq!(host_git(&repo, &["rev-parse", "main"]), got["head"], "{all}");
    // The user sees why a refused branch was refused, and takes it only when they say so.
    let adopt = |extra: &[&str]| {
        let out = Command::new(crate::support::BIN.as_str())
            .args(["git", "adopt", "sneaky", "-C"])
            .arg(&repo)
            .args(extra)
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "safe.directory")
            .env("GIT_CONFIG_VALUE_0", "*")
            .output()
            .expect("agent-sandbox git adopt");
        assert!(out.status.success(), "adopt: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let shown = adopt(&[]);
    assert!(
        shown.contains("test ! -e FAIL") && shown.contains("scratch") && shown.contains("nothing taken"),
        "{shown}"
    );
    assert!(host_git(&repo, &["for-each-ref", "refs/heads/sneaky"]).is_empty(), "taken without --yes");
    let refused = host_git(&repo, &["rev-parse", "refs/agent-sandbox/refused/heads/sneaky"]);
    assert!(adopt(&["--yes"]).contains("sneaky is now"));
    assert_eq!(host_git(&repo, &["rev-parse", "sneaky"]), refused);
    assert!(host_git(&repo, &["for-each-ref", "refs/agent-sandbox/refused/heads/sneaky"]).is_empty());

    // The user commits on the host meanwhile: the agent's next commit waits, and comes
    // home once rebased onto the user's (the work tree is shared: the user's new file is
    // there already, untracked inside until the rebase brings it).
    std::fs::write(repo.join("HOST"), "the user's\n").expect("write");
    host_git(&repo, &["add", "HOST"]);
    host_git(&repo, &["-c", "user.name=u", "-c", "user.email=u@x.invalid", "commit", "-q", "-m", "on the host"]);
    chown_for_container(&repo);
    let users = host_git(&repo, &["rev-parse", "main"]);
    let (got, all) = dc.exec(&format!(
        "cd /workspaces/home\n\
         echo again >> README && git add README && {commit} -m 'meanwhile' 2>/tmp/commit; say commit $?\n\
         settle /tmp/commit; say waits \"$(grep -m1 -c 'did not come home (the branch moved in the user.s repository meanwhile, to .*git rebase --autostash {users}' /tmp/commit)\"\n\
         rm HOST\n\
         git -c user.name=a -c user.email=a@x.invalid rebase -q {users} 2>/tmp/rebase; say rebase $?\n\
         settle /tmp/rebase\n\
         say rebase_said \"$(tr '\\n' ' ' </tmp/rebase)\"\n\
         say home \"$(grep -m1 -c 'main is now' /tmp/rebase)\"\n\
         say head \"$(git rev-parse HEAD)\""
    ));
    check(
        "the user's commit meanwhile",
        &got,
        &[("commit", "0"), ("waits", "1"), ("rebase", "0"), ("home", "1")],
        &all,
    );
    assert_eq!(host_git(&repo, &["rev-parse", "main"]), got["head"], "{all}");
    assert_eq!(host_git(&repo, &["rev-parse", "main~1"]), users, "the user's commit was kept");

    // A new branch comes home, and the user's checkout follows the switch.
    let (got, all) = dc.exec(&format!(
        "cd /workspaces/home\n\
         git switch -q -c feature && echo f > F && git add F && {commit} -m feature 2>/dev/null; say commit $?\n\
         echo wip >> README && git stash -q; say stash $?\n\
         settle /dev/null\n\
         say head \"$(git rev-parse HEAD)\""
    ));
    check("a new branch", &got, &[("commit", "0"), ("stash", "0")], &all);
    assert_eq!(host_git(&repo, &["rev-parse", "feature"]), got["head"], "{all}");
    assert_eq!(host_git(&repo, &["symbolic-ref", "HEAD"]), "refs/heads/feature");

    // The session repository outlives a restart, its stash with it; what the user
    // committed on the host meanwhile is the session's branch after it, index included.
    std::fs::write(repo.join("HOST2"), "the user's, while the container was down\n").expect("write");
    let container = dc.container();
    docker_ok(&["stop", "-t", "1", &container]);
    host_git(&repo, &["add", "HOST2"]);
    host_git(&repo, &["-c", "user.name=u", "-c", "user.email=u@x.invalid", "commit", "-q", "-m", "while down"]);
    chown_for_container(&repo);
    let users = host_git(&repo, &["rev-parse", "feature"]);
    docker_ok(&["start", &container]);
    let (got, all) = dc.exec(
        "cd /workspaces/home\nagent-sandbox firewall wait >/dev/null\nsay stashes \"$(git stash list | wc -l)\"\n\
         say head \"$(git rev-parse HEAD)\"\nsay status \"$(git status --porcelain)\"",
    );
    check("after a restart", &got, &[("stashes", "1"), ("head", &users), ("status", "")], &all);

    // A container killed after a commit and before its broker ran (made here with the
    // real git, which starts no broker): the commit comes home at the next start,
    // through the checks as ever.
    let (got, all) = dc.exec(&format!(
        "cd /workspaces/home\n\
         echo k > K && {real} add K && {real} commit -q -m 'killed after' 2>/dev/null; say commit $?\n\
         say head \"$(git rev-parse HEAD)\""
    ));
    check("a commit before a kill", &got, &[("commit", "0")], &all);
    docker_ok(&["kill", &container]);
    docker_ok(&["start", &container]);
    // No git command inside: the start's own sync brings it.
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    while host_git(&repo, &["rev-parse", "feature"]) != got["head"] && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(host_git(&repo, &["rev-parse", "feature"]), got["head"], "the commit made before the kill: {all}");
    let volumes = docker(&["volume", "ls", "-q", "--filter", "name=agent-sandbox-git-"]);
    assert!(!volumes.is_empty(), "the session volume");
    eprintln!("session repository e2e: {:.0?}", started.elapsed());
}
