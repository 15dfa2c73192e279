//! The hook guard installed with `agent-sandbox hooks install`, exercised by real git
//! inside real bwrap: pre-commit refuses protected paths, secret files, secret contents
//! and failing checks; pre-push stops what slipped past the git guard (here, a copy of
//! the real git the agent made) before it leaves.

use std::process::Command;

use crate::support::{require_bwrap, World, BIN};

const CHAINED_HOOK: &str = "#!/bin/sh\necho chained-hook-ran >&2\nexit 0\n";

/// A repository pushed to a bare remote, with a user pre-commit hook, the checks
/// `test ! -e BROKEN` configured, and the hook guard installed in front.
fn guarded_world() -> World {
    let world = World::new();
    world.write("home/proj/src.txt", "one\n");
    world.project_config(r#"{ "checks": { "commands": ["test ! -e BROKEN"] } }"#);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "second"]);
    world.bare_origin();
    world.git(&["push", "-q", "origin", "main", "main:feature"]);
    world.write("home/proj/.git/hooks/pre-commit", CHAINED_HOOK);
    world.chmod("home/proj/.git/hooks/pre-commit", 0o755);
    let install = world.cmd().args(["hooks", "install"]).run();
    install.ok();
    world
}

fn remote_ref(world: &World, name: &str) -> String {
    let out = Command::new("git")
        .args([
            "--git-dir",
            world.path("home/remote.git").to_str().expect("utf-8"),
            "rev-parse",
            "-q",
            "--verify",
            name,
        ])
        .output()
        .expect("git");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn head(world: &World) -> String {
    world.git(&["rev-parse", "HEAD"]).trim().to_owned()
}

#[test]
fn pre_commit_refuses_protected_paths_secret_files_secret_contents_and_failing_checks() {
    require_bwrap!();
    let world = guarded_world();
    let before = head(&world);
    let attacks = [
        ("protected", "git update-index --add --cacheinfo 100644,$(echo x | git hash-object -w --stdin),.husky/pre-commit"),
        ("protected", "git update-index --add --cacheinfo 100644,$(echo '{}' | git hash-object -w --stdin),.agent-sandbox/config.jsonc"),
        ("secret file", "echo k > deploy.pem && git add deploy.pem"),
        ("secret file", "echo API=1 > .env.production && git add -f .env.production"),
        ("AWS access key id", "echo 'aws = \"AKIAIOSFODNN7EXAMPLE\"' > settings.py && git add settings.py"),
        ("private key", "printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\\nb3Blbn\\n' > notes.txt && git add notes.txt"),
        ("failed", "touch BROKEN && git add BROKEN"),
        ("AWS access key id", "echo 'k.txt -diff' > .gitattributes && echo AKIAIOSFODNN7EXAMPLE > k.txt && git add .gitattributes k.txt"),
        // The work tree no longer holds what is staged: the staged blob is what counts.
        ("AWS access key id", "echo 'k = \"AKIAIOSFODNN7EXAMPLE\"' > s.py && git add s.py && echo 'k = 1' > s.py"),
        // A name that is not UTF-8.
        ("AWS access key id", "f=$(printf 'n\\377.py') && echo AKIAIOSFODNN7EXAMPLE > \"$f\" && git add \"$f\""),
        // A changed file, not a new one.
        ("AWS access key id", "echo 'AKIAIOSFODNN7EXAMPLE' >> src.txt && git add src.txt"),
    ];
    for (expected, stage) in attacks {
        let run = world.sh(&[], &format!("{stage} && git commit -q -m attempt"));
        let err = run.stderr();
        assert_ne!(run.code(), 0, "`{stage}` committed:\n{err}");
        assert!(err.contains("agent-sandbox: pre-commit refused:") && err.contains(expected), "`{stage}`:\n{err}");
        assert_eq!(head(&world), before, "`{stage}` moved HEAD");
        world.git(&["reset", "-q", "--hard"]);
        world.git(&["clean", "-qfdx", "-e", ".agent-sandbox"]);
    }
    // The legitimate commit passes the checks and the chained hook still runs.
    let run = world.sh(&[], "echo two >> src.txt && git commit -qam 'add two' && git log -1 --format=%s");
    assert_eq!(run.ok(), "add two\n");
    assert!(run.stderr().contains("chained-hook-ran"), "{}", run.stderr());
}

#[test]
fn outside_a_sandbox_the_guard_only_chains() {
    let world = guarded_world();
    world.write("home/proj/deploy.pem", "k\n");
    world.git(&["add", "deploy.pem"]);
    let out = Command::new("git")
        .args(["commit", "-qm", "human"])
        .current_dir(&world.project)
        .env("HOME", &world.home)
        .env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", std::path::Path::new(&*BIN).parent().expect("dir").display()),
        )
        .output()
        .expect("git commit");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("chained-hook-ran"), "{err}");
}

#[test]
fn outside_a_sandbox_an_unallowed_project_config_runs_nothing() {
    let world = guarded_world();
    // The agent writes a project config that would run its code on the human's next
    // commit; the user never allowed it.
    let config = r#"{ "checks": { "humans": true, "commands": ["touch PWNED"] } }"#;
    world.write("home/proj/.agent-sandbox/config.jsonc", config);
    let commit = |message: &str| {
        world.write("home/proj/src.txt", &format!("{message}\n"));
        Command::new("git")
            .args(["commit", "-qam", message])
            .current_dir(&world.project)
            .env("HOME", &world.home)
            .env("XDG_STATE_HOME", world.path("xdg-state"))
            .env("PATH", format!("{}:/usr/bin:/bin", std::path::Path::new(&*BIN).parent().expect("dir").display()))
            .output()
            .expect("git commit")
    };
    let out = commit("human");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!world.path("home/proj/PWNED").exists(), "an unallowed config ran a command:\n{err}");
    assert!(err.contains("not allowed as it is") && err.contains("config allow"), "{err}");
    // Nor do both formats at once (which no one can allow) stop the human's commits.
    world.write("home/proj/.agent-sandbox/config.json", config);
    let out = commit("both");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!world.path("home/proj/PWNED").exists());
    std::fs::remove_file(world.path("home/proj/.agent-sandbox/config.json")).expect("rm");
    // Once the user allows it, the same file takes effect.
    world.cmd().args(["config", "allow"]).run().ok();
    let out = commit("allowed");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(world.path("home/proj/PWNED").exists(), "the allowed config's check did not run");
}

/// The remote granted writable, and the agent's own copy of the real git: the hook guard
/// at pre-push (the session repository's hooks are read-only copies of the user's)
/// stops what it pushes directly, and what it pushes through the guard never gets past
/// the broker, which brings nothing home unchecked and no rewrite at all. Neither the
/// remote nor the user's branches move; a good commit beside them is pushed.
#[test]
fn pre_push_stops_what_slipped_past_the_git_guard() {
    require_bwrap!();
    let world = guarded_world();
    let remote = world.path("home/remote.git");
    let rw = ["--rw", remote.to_str().expect("utf-8")];
    // A commit of the user's on top, so that a rewrite of it (onto the commit before)
    // keeps the protected config and is judged as a rewrite alone.
    world.write("home/proj/src.txt", "two\n");
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qam", "third"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "push", "-q", "origin", "main"]);
    let (main, feature) = (remote_ref(&world, "refs/heads/main"), remote_ref(&world, "refs/heads/feature"));
    // The agent copies the real git to get past the git guard...
    let own_git = "cp /run/agent-sandbox/bin/git /tmp/g && ";
    const REWRITE: &str = "it would rewrite commits that were not made in this session";
    let attacks = [
        // ...commits a failing change without hooks, then pushes through the guard;
        ("failed", "touch BROKEN && /tmp/g add BROKEN && /tmp/g commit -qn -m sneaky && git push -q origin main"),
        // ...or pushes it with its own git;
        ("failed", "touch BROKEN && /tmp/g add BROKEN && /tmp/g commit -qn -m sneaky && /tmp/g push -q origin main"),
        // ...rewrites history and force-pushes with its own git;
        ("not a fast-forward", "/tmp/g reset -q --hard HEAD~1 && /tmp/g commit -q --allow-empty -m rewritten && /tmp/g push -q --force origin main"),
        // ...or deletes a remote branch with it.
        ("deletes", "/tmp/g push -q origin :feature"),
        // ...or makes the guard's own git see another history: a graft or a replace ref
        // that makes a rewrite look like a fast-forward;
        // (through the guard, the host's git never reads the agent's graft file, and the
        // rewrite does not come home)
        (REWRITE, "S=$(git rev-parse HEAD) && git reset -q --hard HEAD~1 && git commit -q --allow-empty -m rewritten \
          && echo \"$(git rev-parse HEAD) $S\" > /tmp/gr && GIT_GRAFT_FILE=/tmp/gr git push -q origin main"),
        // (.git/info is the session's: the graft is written there, and the broker reads
        // the session's objects, not its grafts.)
        (REWRITE, "S=$(git rev-parse HEAD) && git reset -q --hard HEAD~1 && git commit -q --allow-empty -m rewritten \
          && echo \"$(git rev-parse HEAD) $S\" > .git/info/grafts && git push -q origin main"),
        // ...another tree for the failing commit, or a sparse checkout that leaves it out.
        ("failed", "touch BROKEN && /tmp/g add BROKEN && /tmp/g commit -qn -m sneaky \
          && git update-ref refs/replace/$(git rev-parse HEAD^{tree}) $(git rev-parse HEAD~1^{tree}) && git push -q origin main"),
        ("failed", "touch BROKEN && /tmp/g add BROKEN && /tmp/g commit -qn -m sneaky \
          && printf '/*\\n!BROKEN\\n' > .git/info/sparse-checkout \
          && git -c core.sparseCheckout=true -c core.sparseCheckoutCone=false push -q origin main"),
    ];
    for (expected, attack) in attacks {
        let run = world.sh(&rw, &format!("{own_git}{attack}"));
        let err = run.stderr();
        let refused = err.contains("agent-sandbox: pre-push refused:")
            || err.contains("agent-sandbox: push refused:")
            || err.contains("[rejected]");
        assert!(refused && err.contains(expected), "`{attack}`:\n{err}");
        assert_eq!(
            (remote_ref(&world, "refs/heads/main"), remote_ref(&world, "refs/heads/feature")),
            (main.clone(), feature.clone()),
            "`{attack}` changed the remote"
        );
        assert_eq!(head(&world), main, "`{attack}` moved the user's branch:\n{err}");
        for leftover in [".git/info/grafts", ".git/info/sparse-checkout"] {
            assert!(
                !world.path(&format!("home/proj/{leftover}")).exists(),
                "`{attack}`: {leftover} in the user's .git"
            );
        }
        assert_eq!(world.git(&["for-each-ref", "--format=%(refname)", "refs/replace/"]), "", "`{attack}`");
        world.git(&["reset", "-q", "--hard", &main]);
        // The agent's own repository keeps what it did: each attack starts afresh.
        world.forget_session();
        world.git(&["clean", "-qfdx", "-e", ".agent-sandbox"]);
    }
    // A good commit is pushed normally (its checks run in a temporary worktree).
    let run = world.sh(&rw, "echo two >> src.txt && git commit -qam good && git push -q origin main && echo pushed");
    assert_eq!(run.ok(), "pushed\n");
    assert_eq!(remote_ref(&world, "refs/heads/main"), head(&world));
}

#[test]
fn install_is_idempotent_and_uninstall_restores_the_original_hook() {
    let world = guarded_world();
    let hook = world.path("home/proj/.git/hooks/pre-commit");
    assert!(fs_err::read_to_string(&hook).expect("shim").contains("agent-sandbox"));
    let again = world.cmd().args(["hooks", "install"]).run().ok();
    assert!(!again.is_empty());
    world.cmd().args(["hooks", "uninstall"]).run().ok();
    assert_eq!(fs_err::read_to_string(&hook).expect("restored"), CHAINED_HOOK);
    assert!(!world.path("home/proj/.git/hooks/pre-push").exists());
}

#[test]
fn a_decoy_remote_tracking_ref_does_not_hide_commits_from_pre_push() {
    require_bwrap!();
    let world = guarded_world();
    let remote = world.path("home/remote.git");
    let rw = ["--rw", remote.to_str().expect("utf-8")];
    let script = "cp /run/agent-sandbox/bin/git /tmp/g && git switch -qc topic && touch BROKEN && /tmp/g add BROKEN \
                  && /tmp/g commit -qn -m sneaky && git update-ref refs/remotes/origin/decoy HEAD 2>/dev/null; \
                  /tmp/g fetch -q . topic:refs/remotes/origin/decoy; git push -q origin topic";
    let run = world.sh(&rw, script);
    assert!(
        run.stderr().contains("agent-sandbox: pre-push refused:") && run.stderr().contains("failed"),
        "{}",
        run.stderr()
    );
    assert_eq!(remote_ref(&world, "refs/heads/topic"), "");
}

#[test]
fn the_guard_uses_the_settings_of_the_start_not_the_agents_environment() {
    require_bwrap!();
    let world = guarded_world();
    world
        .write("xdg-config/agent-sandbox/config.jsonc", r#"{ "checks": { "commands": ["test ! -e GLOBAL_BROKEN"] } }"#);
    let before = head(&world);
    for redirect in ["XDG_CONFIG_HOME=/tmp/x", "HOME=/tmp/h", "XDG_CONFIG_HOME=/tmp/x HOME=/tmp/h"] {
        let run = world.sh(&[], &format!("touch GLOBAL_BROKEN && git add GLOBAL_BROKEN && {redirect} git -c user.name=a -c user.email=a@b.invalid commit -q -m x"));
        assert!(
            run.stderr().contains("GLOBAL_BROKEN") && run.stderr().contains("pre-commit refused"),
            "{redirect}:\n{}",
            run.stderr()
        );
        assert_eq!(head(&world), before);
        world.git(&["reset", "-q", "--hard"]);
        world.git(&["clean", "-qfdx", "-e", ".agent-sandbox"]);
    }
}

#[test]
fn checks_run_in_the_environment_of_the_start_not_the_agents() {
    require_bwrap!();
    let world = guarded_world();
    // `env` finds `test` on PATH (the shell builtin would not).
    world.project_config(r#"{ "checks": { "commands": ["env test ! -e BROKEN"] } }"#);
    world.git(&["commit", "-qam", "env check"]);
    let before = head(&world);
    // A `test` that always succeeds, put first on PATH for the commit.
    let script = "mkdir -p /tmp/fake && printf '#!/bin/sh\\nexit 0\\n' > /tmp/fake/test && chmod +x /tmp/fake/test \
                  && touch BROKEN && git add BROKEN && PATH=/tmp/fake:$PATH git commit -q -m x";
    let run = world.sh(&[], script);
    assert!(run.stderr().contains("pre-commit refused") && run.stderr().contains("failed"), "{}", run.stderr());
    assert_eq!(head(&world), before);
}

#[test]
fn checks_see_what_commit_a_is_about_to_commit() {
    require_bwrap!();
    let world = guarded_world();
    // (Quoted apart so that the config file itself does not match.)
    world.project_config(r#"{ "checks": { "commands": ["! git grep --cached -q FORBID''DEN"] } }"#);
    world.git(&["commit", "-qam", "grep check"]);
    world.sh(&[], "echo allowed >> src.txt && git commit -qa -m allowed").ok();
    let before = head(&world);
    let run = world.sh(&[], "echo FORBIDDEN >> src.txt && git commit -qa -m x");
    assert!(run.stderr().contains("pre-commit refused"), "commit -a slipped past the check:\n{}", run.stderr());
    assert_eq!(head(&world), before);
    // An index of the agent's choosing (outside the git directory) is what the checks see.
    world.git(&["checkout", "-q", "--", "."]);
    let run = world.sh(
        &[],
        "cp .git/index /tmp/idx && echo FORBIDDEN >> src.txt && GIT_INDEX_FILE=/tmp/idx git add src.txt \
         && GIT_INDEX_FILE=/tmp/idx git commit -q -m x",
    );
    assert!(run.stderr().contains("pre-commit refused"), "another index slipped past the check:\n{}", run.stderr());
    assert_eq!(head(&world), before);
    // And a check that stages, as lint-staged does, works with commit -a.
    world.git(&["checkout", "-q", "--", "."]);
    world.project_config(r#"{ "checks": { "commands": ["git add -u"] } }"#);
    world.git(&["commit", "-qam", "stage check"]);
    world.sh(&[], "echo fine >> src.txt && git commit -qa -m fine").ok();
}

#[test]
fn an_exec_step_of_a_rebase_gets_no_sequencer_exemption() {
    require_bwrap!();
    let world = guarded_world();
    // The rebase's exec step `exec`s git itself, so git is its parent like for the
    // sequencer's own commits; --no-verify stays refused there.
    let script = "cp .git/index /tmp/idx && touch BROKEN && GIT_INDEX_FILE=/tmp/idx git add BROKEN && rm BROKEN \
        && git rebase -q -x 'GIT_INDEX_FILE=/tmp/idx exec git commit -q --amend --no-verify --no-edit' HEAD~1; \
        git ls-tree --name-only HEAD";
    let run = world.sh(&[], script);
    assert!(!run.stdout().contains("BROKEN"), "the exec step committed without checks:\n{}", run.stderr());
    assert!(run.stderr().contains("--no-verify"), "{}", run.stderr());
    // Ordinary exec steps and the sequencer's own commits still work.
    world.sh(&[], "git rebase --abort 2>/dev/null; git rebase -q -x 'git log -1 --format=%s' HEAD~1").ok();
}

/// Pre-push checks only what is new: a human's own old commit that would fail the
/// checks (made outside with `--no-verify`, never pushed) does not block the agent's
/// push; a commit an agent slipped past pre-commit in an earlier session is still
/// checked when a later session pushes it.
#[test]
fn pre_push_skips_the_humans_own_history_but_not_an_earlier_sessions_commits() {
    require_bwrap!();
    let world = guarded_world();
    let remote = world.path("home/remote.git");
    let rw = ["--rw", remote.to_str().expect("utf-8")];
    world.write("home/proj/BROKEN", "");
    world.git(&["add", "BROKEN"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qm", "human: wip, checks fail"]);
    world.git(&["rm", "-q", "BROKEN"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qm", "human: fixed"]);
    let run = world.sh(&rw, "echo agent >> src.txt && git commit -qam agent && git push -q origin main && echo pushed");
    assert_eq!(run.ok(), "pushed\n", "{}", run.stderr());
    assert_eq!(remote_ref(&world, "refs/heads/main"), head(&world));

    // Session 1: the agent commits a failing change past pre-commit (its own git) and
    // hides it under a later commit; it does not push.
    let sneaky = "cp /run/agent-sandbox/bin/git /tmp/g && touch BROKEN && /tmp/g add BROKEN \
                  && /tmp/g commit -qn -m sneaky && git rm -q BROKEN && git commit -qm cleanup && echo committed";
    assert_eq!(world.sh(&[], sneaky).ok(), "committed\n");
    let before = remote_ref(&world, "refs/heads/main");
    // Session 2: its push is checked commit by commit, the earlier session's included.
    let run = world.sh(&rw, "git push -q origin main");
    assert!(
        run.stderr().contains("agent-sandbox: pre-push refused:") && run.stderr().contains("failed"),
        "{}",
        run.stderr()
    );
    assert_eq!(remote_ref(&world, "refs/heads/main"), before);
}

/// A guarded world whose check is `check`, with ignored `node_modules` and `.venv`
/// directories of the project's, pushed.
fn dependencies_world(check: &str) -> World {
    let world = guarded_world();
    world.project_config(&format!(r#"{{ "checks": {{ "commands": ["{check}"] }} }}"#));
    world.write("home/proj/.gitignore", "node_modules/\n.venv/\n");
    world.write("home/proj/node_modules/dep/index.js", "module.exports = 1;\n");
    world.write("home/proj/.venv/ok", "");
    world.git(&["add", ".gitignore", ".agent-sandbox"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qm", "ignore deps"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "push", "-q", "origin", "main"]);
    world
}

/// Checks run where the project's dependencies are: in place for the checked-out clean
/// HEAD, and in a temporary worktree that links the ignored dependency directories for
/// the commits before it.
#[test]
fn pre_push_checks_see_the_projects_dependencies() {
    require_bwrap!();
    let world = dependencies_world("test -f node_modules/dep/index.js && test -f .venv/ok && test ! -e BROKEN");
    let remote = world.path("home/remote.git");
    let rw = ["--rw", remote.to_str().expect("utf-8")];
    let run = world.sh(
        &rw,
        "echo a >> src.txt && git commit -qam one && echo b >> src.txt && git commit -qam two \
         && git push -q origin main && echo pushed",
    );
    assert_eq!(run.ok(), "pushed\n", "{}", run.stderr());
    assert_eq!(remote_ref(&world, "refs/heads/main"), head(&world));
    // The same with a dirty work tree: every commit in a worktree, none refused for want
    // of dependencies, and a failing one still stopped.
    let run = world.sh(
        &rw,
        "echo c >> src.txt && git commit -qam three && echo dirty >> src.txt && git push -q origin main && echo pushed",
    );
    assert_eq!(run.ok(), "pushed\n", "{}", run.stderr());
    let before = remote_ref(&world, "refs/heads/main");
    let run = world.sh(
        &rw,
        "git checkout -q -- src.txt && cp /run/agent-sandbox/bin/git /tmp/g && touch BROKEN && /tmp/g add BROKEN \
         && /tmp/g commit -qn -m sneaky && git push -q origin main",
    );
    assert!(run.stderr().contains("agent-sandbox: pre-push refused:"), "{}", run.stderr());
    assert_eq!(remote_ref(&world, "refs/heads/main"), before);
}

/// A push's check worktree links the project's dependency directories without
/// following a link: a committed link `a` to the user's `~/.local`, with a real ignored
/// `a/lib/node_modules` in the work tree, leaves `~/.local` as it was; the real
/// `node_modules` is linked, the check that needs it passes, and the push goes out.
#[test]
fn pre_push_dependency_links_never_follow_a_link_the_agent_committed() {
    require_bwrap!();
    let world = dependencies_world("test -f node_modules/dep/index.js");
    world.write("home/.local/keep", "");
    let remote = world.path("home/remote.git");
    let rw = ["--rw", remote.to_str().expect("utf-8")];
    let script = format!(
        "ln -s {local} a && git add a && git commit -qm link && rm a && mkdir -p a/lib/node_modules \
         && echo x > a/lib/node_modules/x && echo ok > ok && git add ok && git commit -qm ok \
         && git push -q origin main && echo pushed",
        local = world.path("home/.local").display()
    );
    let run = world.sh(&rw, &script);
    assert!(!world.path("home/.local/lib").exists(), "the push made a directory in ~/.local: {}", run.stderr());
    assert_eq!(run.ok(), "pushed\n", "{}", run.stderr());
    assert_eq!(remote_ref(&world, "refs/heads/main"), head(&world));
}

/// A push is judged against what the destination has, whatever merges lie between:
/// `main` merged with a branch from an old commit of the user's, taking its lenient
/// protected `ci/check.sh`, is refused (by `--cc` the merge changes nothing), as is that
/// branch pushed new (it is not what the default branch has). A merge that leaves the
/// protected paths alone goes out. Under `exec` the broker stops them on the way to the
/// user's repository, with the same judgement the push's checks make.
#[test]
fn pre_push_refuses_a_merge_that_rolls_a_protected_path_back() {
    require_bwrap!();
    let world = guarded_world();
    world.project_config(r#"{ "checks": { "commands": ["sh ci/check.sh"], "protectedPaths": ["ci"] } }"#);
    world.write("home/proj/ci/check.sh", "exit 0\n");
    world.git(&["add", "-A"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qm", "lenient check"]);
    world.write("home/proj/ci/check.sh", "test ! -e BROKEN\n");
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qam", "strict check"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "push", "-q", "origin", "main"]);
    let remote = world.path("home/remote.git");
    let rw = ["--rw", remote.to_str().expect("utf-8")];
    let legit = "git checkout -q -b y && echo y > y && git add y && git commit -qm y && git checkout -q main \
                 && echo z > z && git add z && git commit -qm z && git merge -q --no-edit y \
                 && git push -q origin main && echo pushed";
    let run = world.sh(&rw, legit);
    assert_eq!(run.ok(), "pushed\n", "{}", run.stderr());
    let before = remote_ref(&world, "refs/heads/main");
    let attack = "git checkout -q -b x HEAD~3 && touch BROKEN && git add BROKEN && git commit -qm broken \
                  && git checkout -q main && cp /run/agent-sandbox/bin/git /tmp/g && /tmp/g merge -q --no-commit x; \
                  /tmp/g checkout x -- ci/check.sh && /tmp/g commit -qn -m merge && git show HEAD:ci/check.sh \
                  && git push -q origin main";
    let run = world.sh(&rw, attack);
    assert!(run.stderr().contains("agent-sandbox: pre-push refused:"), "{}", run.stderr());
    assert!(run.stderr().contains("main would change ci/check.sh, which is protected (ci)"), "{}", run.stderr());
    assert_eq!(remote_ref(&world, "refs/heads/main"), before);
    let run = world.sh(&rw, "git push -q origin x");
    assert!(run.stderr().contains("x would change ci/check.sh, which is protected (ci)"), "{}", run.stderr());
    assert_eq!(remote_ref(&world, "refs/heads/x"), "");
}

/// A teammate pushed to the remote's default branch since the user last fetched: a new
/// branch of the agent's is judged against that branch as the user's repository last
/// fetched it (`refs/remotes/origin/main`), and goes out without a fetch on the host;
/// one that changes a protected path is still refused (on its way home already).
#[test]
fn a_new_branch_goes_out_when_the_remotes_head_is_ahead_of_the_last_fetch() {
    require_bwrap!();
    let world = guarded_world();
    world.project_config(r#"{ "checks": { "commands": ["sh ci/check.sh"], "protectedPaths": ["ci"] } }"#);
    world.write("home/proj/ci/check.sh", "test ! -e BROKEN\n");
    world.git(&["add", "-A"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qm", "check"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "push", "-q", "origin", "main"]);
    let remote = world.path("home/remote.git");
    // The teammate's commit, pushed from a clone of their own.
    let teammate = world.path("teammate");
    world.git_in(&world.root, &["clone", "-q", remote.to_str().expect("utf-8"), teammate.to_str().expect("utf-8")]);
    world.git_in(&teammate, &["-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty", "-m", "t"]);
    world.git_in(&teammate, &["push", "-q", "origin", "main"]);
    let rw = ["--rw", remote.to_str().expect("utf-8")];
    let run = world.sh(&rw, "git switch -qc newwork && echo f > f && git add f && git commit -qm f && git push -q origin newwork && echo pushed");
    assert_eq!(run.ok(), "pushed\n", "{}", run.stderr());
    assert_ne!(remote_ref(&world, "refs/heads/newwork"), "");
    let attack = "git switch -qc lenient && echo 'exit 0' > ci/check.sh && cp /run/agent-sandbox/bin/git /tmp/g \
                  && /tmp/g commit -qn -am lenient && git push -q origin lenient";
    let run = world.sh(&rw, attack);
    assert!(run.stderr().contains("lenient would change ci/check.sh, which is protected (ci)"), "{}", run.stderr());
    assert_eq!(remote_ref(&world, "refs/heads/lenient"), "");
}

/// What pre-push holds every pushed commit to, however it was made: no change to a
/// protected path (here the project's hooks, changed in a scratch clone and fetched into
/// a branch, so pre-commit never saw it), objects from the project's own store only
/// (not borrowed through `GIT_ALTERNATE_OBJECT_DIRECTORIES`), and tags of commits only;
/// and a `.git/shallow` the agent wrote does not hide a failing commit from the checks.
/// A passing branch and a tag of a commit go through beside them.
#[test]
fn pre_push_holds_commits_made_elsewhere_to_the_protected_paths_and_own_objects() {
    require_bwrap!();
    let world = guarded_world();
    world.write("home/proj/.husky/pre-commit", "npm test\n");
    world.git(&["add", ".husky"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qm", "husky"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "push", "-q", "origin", "main"]);
    let remote = world.path("home/remote.git");
    let rw = ["--rw", remote.to_str().expect("utf-8")];
    let scratch = "cp /run/agent-sandbox/bin/git /tmp/g && /tmp/g clone -q . /tmp/s && cd /tmp/s \
                   && /tmp/g -c user.name=a -c user.email=a@b commit -q";
    let attacks = [
        (
            "failed",
            "cp /run/agent-sandbox/bin/git /tmp/g && touch BROKEN && /tmp/g add BROKEN && /tmp/g commit -qn -m sneaky \
             && git rm -q BROKEN && git commit -qm cleanup && git rev-parse HEAD > .git/shallow \
             && /tmp/g push -q origin HEAD:refs/heads/topic"
                .to_owned(),
        ),
        (
            "which is protected (.husky)",
            format!(
                "{scratch} --allow-empty -m x && echo 'exit 0' > .husky/pre-commit && /tmp/g commit -qam skip-hooks \
                     && cd - >/dev/null && git fetch -q /tmp/s main:refs/heads/topic && git push -q origin topic"
            ),
        ),
        (
            "not in the project's own object store",
            format!(
                "{scratch} --allow-empty -m borrowed && S=$(/tmp/g rev-parse HEAD) && cd - >/dev/null \
                     && export GIT_ALTERNATE_OBJECT_DIRECTORIES=/tmp/s/.git/objects \
                     && /tmp/g update-ref refs/heads/borrowed $S && git push -q origin borrowed"
            ),
        ),
        (
            "not a commit",
            "cp /run/agent-sandbox/bin/git /tmp/g && /tmp/g tag treetag HEAD^{tree} && git push -q origin treetag"
                .to_owned(),
        ),
    ];
    for (expected, attack) in &attacks {
        let run = world.sh(&rw, attack);
        let err = run.stderr();
        // Refused by the guard, or (objects borrowed from elsewhere) already when the host
        // copies the project's refs to check them.
        let refused = err.contains("agent-sandbox: pre-push refused:") || err.contains("agent-sandbox: push refused:");
        assert!(refused && err.contains(expected), "`{attack}`:\n{err}");
        for name in ["refs/heads/topic", "refs/heads/borrowed", "refs/tags/treetag"] {
            assert_eq!(remote_ref(&world, name), "", "`{attack}` reached the remote");
        }
        let _ = std::fs::remove_file(world.path("home/proj/.git/shallow"));
        world.git(&["reset", "-q", "--hard", "origin/main"]);
        // The agent's own repository keeps what it did: each attack starts afresh.
        world.forget_session();
        world.git(&["clean", "-qfdx", "-e", ".agent-sandbox"]);
        // A branch left at a borrowed object would stop every later copy.
        let _ = Command::new("git")
            .args(["update-ref", "-d", "refs/heads/borrowed"])
            .current_dir(world.path("home/proj"))
            .output();
    }
    let run = world.sh(
        &rw,
        "git switch -qc feature2 && echo more >> src.txt && git commit -qam more && git tag v1 \
         && git push -q origin feature2 v1 && echo pushed",
    );
    assert_eq!(run.ok(), "pushed\n", "{}", run.stderr());
    assert_eq!(remote_ref(&world, "refs/heads/feature2"), head(&world));
    assert_ne!(remote_ref(&world, "refs/tags/v1"), "");
}

/// The pushing git's environment does not choose the guard's git configuration or the
/// checks' shell: a global config the agent writes in a scratch `HOME` (a smudge filter
/// that hides the failing line from the check's checkout) and an `sh` planted first on
/// `PATH` change nothing; the check still fails and the push is refused.
#[test]
fn pre_push_ignores_the_pushers_global_config_and_path() {
    require_bwrap!();
    let world = guarded_world();
    world.project_config(r#"{ "checks": { "commands": ["! grep -q bad src.txt"] } }"#);
    world.git(&["add", ".agent-sandbox"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qm", "content check"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "push", "-q", "origin", "main"]);
    let remote = world.path("home/remote.git");
    let rw = ["--rw", remote.to_str().expect("utf-8")];
    let before = remote_ref(&world, "refs/heads/main");
    let commit_bad = "cp /run/agent-sandbox/bin/git /tmp/g && echo bad >> src.txt \
                      && echo 'src.txt filter=hide' > .gitattributes && /tmp/g add -A && /tmp/g commit -qn -m sneaky";
    let attacks = [
        format!(
            "{commit_bad} && mkdir -p /tmp/h && cp ~/.gitconfig /tmp/h/ \
             && printf '[filter \"hide\"]\\n\\tsmudge = sed s/bad//\\n\\tclean = cat\\n' >> /tmp/h/.gitconfig \
             && echo dirty >> README.md && HOME=/tmp/h git push -q origin main"
        ),
        format!(
            "{commit_bad} && mkdir -p /tmp/bin && printf '#!/bin/sh\\nexit 0\\n' > /tmp/bin/sh && chmod +x /tmp/bin/sh \
             && echo dirty >> README.md && PATH=/tmp/bin:$PATH git push -q origin main"
        ),
    ];
    for attack in &attacks {
        let run = world.sh(&rw, attack);
        let err = run.stderr();
        assert!(err.contains("agent-sandbox: pre-push refused:") && err.contains("failed"), "`{attack}`:\n{err}");
        assert_eq!(remote_ref(&world, "refs/heads/main"), before, "`{attack}` reached the remote");
        world.git(&["reset", "-q", "--hard", &before]);
        // The agent's own repository keeps what it did: each attack starts afresh.
        world.forget_session();
        world.git(&["clean", "-qfdx", "-e", ".agent-sandbox"]);
    }
}

/// A session killed before its exit check (SIGKILL, a power cut) never recorded the
/// commits its agent made; the next session must not take them for the user's history:
/// they are still checked at push.
#[test]
fn pre_push_still_checks_what_a_killed_session_committed() {
    require_bwrap!();
    let world = guarded_world();
    let remote = world.path("home/remote.git");
    let before = remote_ref(&world, "refs/heads/main");
    let sneaky = "cp /run/agent-sandbox/bin/git /tmp/g && touch BROKEN && /tmp/g add BROKEN \
                  && /tmp/g commit -qn -m sneaky && git rm -q BROKEN && git commit -qm cleanup \
                  && touch .committed && sleep 60";
    let mut session = world.cmd();
    session.args(["exec", "--", "sh", "-c", sneaky]);
    let mut child = session.cmd.stderr(std::process::Stdio::null()).spawn().expect("exec starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !world.path("home/proj/.committed").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().expect("kill");
    child.wait().expect("reaped");
    assert!(world.path("home/proj/.committed").exists(), "the first session committed");
    let run = world.sh(&["--rw", remote.to_str().expect("utf-8")], "git push -q origin main");
    assert!(
        run.stderr().contains("agent-sandbox: pre-push refused:") && run.stderr().contains("failed"),
        "{}",
        run.stderr()
    );
    assert_eq!(remote_ref(&world, "refs/heads/main"), before);
}
