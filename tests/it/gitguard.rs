//! The git guard under real bwrap with real git: a repository whose pre-commit hook
//! fails and a local bare remote the sandbox may write to. Every bypass must leave the
//! branch and the remote unchanged; the legitimate neighbours must work.

use crate::support::{require_bwrap, World};

const FAILING_HOOK: &str = "#!/bin/sh\necho 'pre-commit: checks failed' >&2\nexit 1\n";
/// A git directory of the agent's making, with no hooks, wired to the project's refs.
const FAKE_GIT_DIR: &str = "git init -q --bare /tmp/fake && rm -rf /tmp/fake/refs /tmp/fake/objects \
    && ln -s \"$PWD/.git/refs\" /tmp/fake/refs && ln -s \"$PWD/.git/objects\" /tmp/fake/objects \
    && cp .git/HEAD /tmp/fake/HEAD; ";
const PASSING_HOOK: &str = "#!/bin/sh\necho 'pre-commit: checks passed' >&2\nexit 0\n";

/// A project with two commits on main, pushed to a bare remote at `home/remote.git`
/// (which has a `feature` branch too), and the given pre-commit hook.
fn world_with_remote(hook: &str) -> World {
    let world = World::new();
    world.write("home/proj/src.txt", "one\n");
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "second"]);
    world.bare_origin();
    world.git(&["push", "-q", "origin", "main", "main:feature"]);
    world.write("home/proj/.git/hooks/pre-commit", hook);
    world.chmod("home/proj/.git/hooks/pre-commit", 0o755);
    world
}

fn remote_ref(world: &World, name: &str) -> String {
    let out = std::process::Command::new("git")
        .args([
            "--git-dir",
            world.path("home/remote.git").to_str().expect("utf-8"),
            "rev-parse",
            "--verify",
            "-q",
            name,
        ])
        .output()
        .expect("git rev-parse");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn state(world: &World) -> (String, String, String) {
    let local = world.git(&["rev-parse", "main"]).trim().to_owned();
    (local, remote_ref(world, "refs/heads/main"), remote_ref(world, "refs/heads/feature"))
}

/// Runs each attack in its own sandbox and asserts the branch and the remote did not
/// move; returns the combined stderr.
fn attempt_all(world: &World, flags: &[&str], attacks: &[&str]) -> String {
    let before = state(world);
    let mut stderr = String::new();
    for attack in attacks {
        let run = world.sh(flags, &format!("echo change >> src.txt; git add src.txt; {attack}"));
        stderr.push_str(&run.stderr());
        assert_eq!(state(world), before, "`{attack}` moved a branch:\n{}", run.stderr());
        world.git(&["reset", "-q"]);
        world.git(&["checkout", "-q", "--", "."]);
    }
    stderr
}

#[test]
fn hook_bypasses_are_refused_and_leave_the_branch_alone() {
    require_bwrap!();
    let world = world_with_remote(FAILING_HOOK);
    let off = "printf '[core]\\n\\thooksPath = /dev/null\\n' > /tmp/off.gitconfig;";
    let attacks = [
        "git commit --no-verify -m x".to_owned(),
        "git commit -n -m x".to_owned(),
        "git commit -anm x".to_owned(),
        "git commit -am x -n".to_owned(),
        "git commit --no-verif -m x".to_owned(),
        "git commit --verify --no-verify -m x".to_owned(),
        "git -c core.hooksPath=/dev/null commit -m x".to_owned(),
        "git -c CORE.HOOKSPATH=/tmp commit -m x".to_owned(),
        "EMPTY=/dev/null git --config-env=core.hooksPath=EMPTY commit -m x".to_owned(),
        "GIT_CONFIG_PARAMETERS=\"'core.hookspath'='/dev/null'\" git commit -m x".to_owned(),
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/dev/null git commit -m x".to_owned(),
        format!("{off} GIT_CONFIG_GLOBAL=/tmp/off.gitconfig git commit -m x"),
        format!("{off} GIT_CONFIG_SYSTEM=/tmp/off.gitconfig git commit -m x"),
        format!("{off} git -c include.path=/tmp/off.gitconfig commit -m x"),
        format!("{off} git --git-dir=.git -c includeIf.onbranch:main.path=/tmp/off.gitconfig commit -m x"),
        "git config core.hooksPath /dev/null; git commit -m x".to_owned(),
        "git config --global core.hooksPath /dev/null; git commit -m x".to_owned(),
        "git -c alias.ci='commit --no-verify' ci -m x".to_owned(),
        "/usr/bin/git commit --no-verify -m x".to_owned(),
        "/usr/local/bin/git commit -n -m x".to_owned(),
        "\"$(git --exec-path)/git-commit\" --no-verify -m x".to_owned(),
        "/usr/lib/git-core/git-commit -n -m x".to_owned(),
        "/usr/lib/git-core/git commit -n -m x".to_owned(),
        "git commit-tree HEAD^{tree} -p HEAD -m x | xargs git update-ref refs/heads/main".to_owned(),
        "git update-ref refs/heads/main $(git commit-tree HEAD^{tree} -p HEAD -m x)".to_owned(),
        "HUSKY=0 SKIP=all LEFTHOOK=0 git commit -m x".to_owned(),
        "rm -f .git/hooks/pre-commit; git commit -m x".to_owned(),
        "git commit -m x".to_owned(),
    ];
    let attacks: Vec<&str> = attacks.iter().map(String::as_str).collect();
    let stderr = attempt_all(&world, &[], &attacks);
    assert!(stderr.contains("agent-sandbox: refused"), "{stderr}");
    assert!(stderr.contains("pre-commit: checks failed"), "the hook ran where the commit was not refused:\n{stderr}");
}

#[test]
fn a_user_alias_that_skips_hooks_is_judged_by_what_it_expands_to() {
    require_bwrap!();
    let world = world_with_remote(FAILING_HOOK);
    let config = world.read("home/.gitconfig");
    world.write("home/.gitconfig", &format!("{config}[alias]\n\tci = commit --no-verify\n\tst = status --short\n"));
    attempt_all(&world, &[], &["git ci -m x"]);
    let out = world.sh(&[], "git st").ok();
    assert_eq!(out, "");
}

#[test]
fn destructive_pushes_are_refused_and_leave_the_remote_alone() {
    require_bwrap!();
    let world = world_with_remote(PASSING_HOOK);
    let remote = world.path("home/remote.git");
    let remote = remote.to_str().expect("utf-8");
    // Rewrite local history so that only a force push could publish it.
    let rewrite = "git reset -q --hard HEAD~1 && git commit -q --allow-empty -m rewritten";
    let attacks = [
        format!("{rewrite}; git push --force origin main"),
        format!("{rewrite}; git push -f"),
        format!("{rewrite}; git push --forc origin main"),
        format!("{rewrite}; git push --force-with-lease origin main"),
        format!("{rewrite}; git push --force-if-includes --force-with-lease origin main"),
        format!("{rewrite}; git push origin +main"),
        format!("{rewrite}; git push origin +HEAD:main"),
        format!("{rewrite}; git push origin '+refs/heads/*:refs/heads/*'"),
        format!("{rewrite}; git push --mirror origin"),
        format!("{rewrite}; git -c remote.origin.push='+refs/heads/*:refs/heads/*' push"),
        format!("{rewrite}; git -c remote.origin.mirror=true push"),
        format!("{rewrite}; git send-pack --force {remote} main"),
        format!("{rewrite}; git send-pack {remote} +main"),
        "git push origin :feature".to_owned(),
        "git push --delete origin feature".to_owned(),
        "git push -d origin feature".to_owned(),
        "git push --prune origin 'refs/heads/*:refs/heads/*'".to_owned(),
        "git push --no-verify origin main".to_owned(),
    ];
    let before = state(&world);
    for attack in &attacks {
        let run = world.sh(&["--rw", remote], attack);
        assert_eq!(state(&world).1, before.1, "`{attack}` moved the remote main:\n{}", run.stderr());
        assert_eq!(state(&world).2, before.2, "`{attack}` moved the remote feature:\n{}", run.stderr());
        assert!(run.stderr().contains("agent-sandbox: refused"), "`{attack}`:\n{}", run.stderr());
        world.git(&["reset", "-q", "--hard", &before.0]);
    }
}

#[test]
fn a_passing_hook_commits_and_pushes_normally() {
    require_bwrap!();
    let world = world_with_remote(PASSING_HOOK);
    let remote = world.path("home/remote.git");
    let script = "echo two >> src.txt && git commit -qam 'add two' && git push -q origin main \
                  && git switch -qc topic && git commit -q --allow-empty -m topic && git push -q -u origin topic \
                  && git log -n 1 --format=%s && git push -n origin main 2>&1 | tail -1 \
                  && git add -n . && git commit -q -m '-n' --allow-empty && git commit -q --allow-empty -m 'never use --no-verify' \
                  && git -c user.name=other commit -q --allow-empty -m named && git log -n 1 --format=%an";
    let run = world.sh(&["--rw", remote.to_str().expect("utf-8")], script);
    let out = run.ok();
    assert_eq!(out, "topic\nEverything up-to-date\nother\n");
    assert!(run.stderr().contains("pre-commit: checks passed"));
    assert_eq!(remote_ref(&world, "refs/heads/main"), world.git(&["rev-parse", "main"]).trim());
    assert!(!remote_ref(&world, "refs/heads/topic").is_empty());
}

#[test]
fn git_itself_may_commit_without_hooks_during_a_revert() {
    require_bwrap!();
    // `git revert` commits through `git commit -n` (its sequencer never runs pre-commit
    // hooks); that nested call must not be refused as a bypass.
    let world = world_with_remote(FAILING_HOOK);
    let out = world.sh(&[], "GIT_EDITOR=true git revert HEAD >/dev/null && git log -n 1 --format=%s").ok();
    assert_eq!(out, "Revert \"second\"\n");
}

#[test]
fn husky_style_hooks_path_cannot_be_skipped() {
    require_bwrap!();
    let world = world_with_remote(PASSING_HOOK);
    world.write("home/proj/.husky/_/pre-commit", FAILING_HOOK);
    world.chmod("home/proj/.husky/_/pre-commit", 0o755);
    world.git(&["config", "core.hooksPath", ".husky/_"]);
    attempt_all(
        &world,
        &[],
        &[
            "git commit -m x",
            "HUSKY=0 git commit -m x",
            "HUSKY_SKIP_HOOKS=1 git commit -m x",
            "echo 'exit 0' > .husky/_/pre-commit; git commit -m x",
            "git -c core.hooksPath=.git/hooks commit -m x",
            "git config core.hooksPath .git/hooks; git commit -m x",
        ],
    );
}

#[test]
fn refusals_are_audited_and_say_what_to_do() {
    require_bwrap!();
    let world = world_with_remote(FAILING_HOOK);
    let run = world.sh(&[], "git commit --no-verify -m x");
    assert_eq!(run.code(), 1);
    let err = run.stderr();
    assert!(
        err.starts_with(
            "agent-sandbox: refused `git commit --no-verify`: it skips the repository's pre-commit checks."
        ),
        "{err}"
    );
    assert!(err.to_lowercase().contains("instead"), "{err}");
    let log = world.audit_log();
    assert!(log.contains(r#""agent":"git","operation":"exec","target":"git commit --no-verify -m x","result":"blocked","policy":"no-verify""#), "{log}");
}

#[test]
fn hooks_from_a_global_hooks_path_run_and_cannot_be_skipped() {
    require_bwrap!();
    let world = world_with_remote(PASSING_HOOK);
    world.write("home/.githooks/pre-commit", FAILING_HOOK);
    world.chmod("home/.githooks/pre-commit", 0o755);
    let config = world.read("home/.gitconfig");
    world.write("home/.gitconfig", &format!("{config}[core]\n\thooksPath = ~/.githooks\n"));
    let stderr = attempt_all(
        &world,
        &[],
        &["git commit -m x", "echo 'exit 0' > ~/.githooks/pre-commit; git commit -m x", "HOME=/tmp git commit -m x"],
    );
    assert!(stderr.contains("pre-commit: checks failed"), "{stderr}");
    assert!(stderr.contains("refused `git commit`"), "{stderr}");
}

#[test]
fn a_scratch_repository_of_the_agent_commits_freely() {
    require_bwrap!();
    let world = world_with_remote(FAILING_HOOK);
    let script =
        "git init -q /tmp/scratch && cd /tmp/scratch && git commit -q --allow-empty -m s && git log --format=%s";
    assert_eq!(world.sh(&[], script).ok(), "s\n");
}

#[test]
fn redirected_configuration_and_fake_git_dirs_are_refused_by_outcome() {
    require_bwrap!();
    let world = world_with_remote(FAILING_HOOK);
    // A config that disables hooks and names the author, so only the guard stops it.
    let off = "printf '[core]\\n\\thooksPath = /dev/null\\n[user]\\n\\tname = a\\n\\temail = a@b.invalid\\n' > /tmp/off.gitconfig;";
    let attacks = [
        format!("mkdir -p /tmp/h; {off} cp /tmp/off.gitconfig /tmp/h/.gitconfig; HOME=/tmp/h git commit -m x"),
        format!("mkdir -p /tmp/x/git; {off} cp /tmp/off.gitconfig /tmp/x/git/config; XDG_CONFIG_HOME=/tmp/x git commit -m x"),
        format!("{FAKE_GIT_DIR} git --git-dir=/tmp/fake --work-tree=. commit -m x"),
        format!("{FAKE_GIT_DIR} GIT_DIR=/tmp/fake GIT_WORK_TREE=. git commit -m x"),
        format!("{FAKE_GIT_DIR} cd /tmp/fake && git --work-tree=\"$OLDPWD\" commit -m x"),
    ];
    for attack in &attacks {
        let stderr = attempt_all(&world, &[], &[attack]);
        assert!(stderr.contains("agent-sandbox: refused `git commit`"), "`{attack}`:\n{stderr}");
    }
}

/// bwrap arguments for a container-like root: the system read-only, this binary
/// installed as git (PATH and exec-path), the real git at the fixed root-owned path,
/// the `/.agent-sandbox` marker, and the test world read-write.
fn container(world: &World) -> Vec<String> {
    let bin = crate::support::BIN.as_str();
    let marker = world.write("marker", "");
    let root = world.root.display().to_string();
    let real = std::fs::canonicalize("/usr/local/bin/git").expect("git 2.47 at /usr/local/bin/git");
    let mut args: Vec<String> = ["--unshare-user", "--unshare-pid", "--die-with-parent", "--cap-drop", "ALL"]
        .into_iter()
        .map(String::from)
        .collect();
    for dir in ["/usr", "/etc"] {
        args.extend(["--ro-bind".into(), dir.into(), dir.into()]);
    }
    for link in ["bin", "lib", "lib64", "sbin"] {
        if let Ok(target) = std::fs::read_link(format!("/{link}")) {
            args.extend(["--symlink".into(), target.display().to_string(), format!("/{link}")]);
        }
    }
    args.extend(["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/usr/libexec"].map(String::from));
    args.extend(["--ro-bind".into(), real.display().to_string(), "/usr/libexec/agent-sandbox/git".into()]);
    args.extend(["--ro-bind".into(), bin.into(), "/usr/libexec/agent-sandbox/agent-sandbox".into()]);
    for git in ["/usr/local/bin/git", "/usr/bin/git", "/usr/local/libexec/git-core/git"] {
        args.extend(["--ro-bind".into(), bin.into(), git.into()]);
    }
    args.extend(["--ro-bind".into(), marker.display().to_string(), "/.agent-sandbox".into()]);
    args.extend(["--bind".into(), root.clone(), root]);
    args.extend(["--chdir".into(), world.project.display().to_string()]);
    args
}

#[test]
fn installed_as_git_in_a_container_image_the_guard_works_unchanged() {
    require_bwrap!();
    let world = world_with_remote(FAILING_HOOK);
    let off = "printf '[core]\\n\\thooksPath = /dev/null\\n[user]\\n\\tname = a\\n\\temail = a@b.invalid\\n' > /tmp/off.gitconfig;";
    let script = format!(
        "echo change >> src.txt; git add src.txt; \
         git commit -q --no-verify -m x; echo no-verify=$?; \
         git commit -q -m x 2>/dev/null; echo hook=$?; \
         mkdir -p /tmp/h; {off} cp /tmp/off.gitconfig /tmp/h/.gitconfig; HOME=/tmp/h git commit -q -m x; echo home=$?; \
         git push -q --force origin main; echo force=$?; \
         mkdir -p .agent-sandbox && echo '{{\"git\":{{\"allowPlumbingCommits\":true}}}}' > .agent-sandbox/config.jsonc; \
         git update-ref refs/heads/side HEAD~1; echo plumbing=$?; \
         git log -n 1 --format=%s; \
         /usr/libexec/agent-sandbox/git --version | cut -c1-11; \
         /usr/libexec/agent-sandbox/agent-sandbox check"
    );
    let mut cmd = std::process::Command::new("bwrap");
    cmd.args(container(&world))
        .args(["--setenv", "HOME"])
        .arg(&world.home)
        .args(["--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin"])
        .args(["--", "sh", "-c", &script]);
    let out = cmd.output().expect("bwrap");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stdout,
        "no-verify=1\nhook=1\nhome=1\nforce=1\nplumbing=1\nsecond\ngit version\ninside an agent-sandbox (container)\n",
        "{stderr}"
    );
    assert!(stderr.contains("refused `git commit --no-verify`"), "{stderr}");
    assert!(stderr.contains("git would run the hooks in /dev/null"), "{stderr}");
    assert!(stderr.contains("refused `git push --force`"), "{stderr}");
}

#[test]
fn commands_that_would_write_the_repository_config_say_why_they_cannot() {
    require_bwrap!();
    let world = world_with_remote(PASSING_HOOK);
    let remote = world.path("home/remote.git");
    let run = world
        .sh(&["--rw", remote.to_str().expect("utf-8")], "git push -q -u origin main; git branch -m main trunk; true");
    let err = run.stderr();
    // (a push is carried out by the host, which says so itself)
    assert!(err.contains("note: pushed by agent-sandbox, not by this git, so the upstream is not recorded"), "{err}");
    assert!(err.contains("so the branch's settings will not be recorded"), "{err}");
    // Reading the config says nothing.
    let quiet = world.sh(&[], "git config --get user.name >/dev/null; git status -s");
    assert!(!quiet.stderr().contains("read-only"), "{}", quiet.stderr());
}

#[test]
fn the_agents_own_git_calls_work_inside_and_are_not_logged_as_blocked() {
    require_bwrap!();
    let world = world_with_remote(FAILING_HOOK);
    let before = state(&world);
    // Claude Code's start-up calls.
    let claude = "git -c core.hooksPath=/dev/null -c core.fsmonitor= ls-files --error-unmatch -- ':(icase)src.txt' \
        && git -c core.quotePath=false -c core.fsmonitor= -c core.hooksPath=/dev/null -c core.pager= log --since=7.days --oneline";
    let out = world.sh(&[], claude).ok();
    assert!(out.starts_with("src.txt\n"), "{out}");
    assert!(out.contains("second"), "{out}");
    // Codex's ghost commit: a snapshot in a temporary index, an unreferenced commit,
    // then both restores (checkout of its tree; read-tree + checkout-index).
    let codex = "set -e; echo ghost > new.txt; \
        export GIT_INDEX_FILE=/tmp/ghost.idx; git read-tree HEAD; git add -A; \
        tree=$(git write-tree); c=$(git commit-tree \"$tree\" -p HEAD -m snapshot); unset GIT_INDEX_FILE; \
        rm new.txt; echo lost > src.txt; git checkout \"$c\" -- .; cat new.txt src.txt; \
        rm new.txt; GIT_INDEX_FILE=/tmp/r.idx git read-tree \"$tree\"; \
        GIT_INDEX_FILE=/tmp/r.idx git checkout-index -a -f; cat new.txt";
    let out = world.sh(&[], codex).ok();
    assert_eq!(out, "ghost\none\nghost\n");
    assert_eq!(state(&world), before, "a snapshot moved a branch");
    let log = world.audit_log();
    assert!(!log.contains(r#""result":"blocked""#), "{log}");
    // The same override on a command that runs the pre-commit hook stays refused.
    let run = world.sh(&[], "git -c core.hooksPath=/dev/null commit --allow-empty -m x");
    assert_eq!(run.code(), 1);
    assert!(run.stderr().starts_with("agent-sandbox: refused `git -c core.hooksPath=/dev/null`"), "{}", run.stderr());
    assert_eq!(state(&world), before);
    assert!(world.audit_log().contains(r#""result":"blocked","policy":"config-override""#));
}
