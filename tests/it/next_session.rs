//! Attacks on the next session or on the host's git: what the agent can write inside
//! the project (`.git`, which is the session repository, a new `.agent-sandbox/`,
//! repositories planted in the work tree, symlinks at preset paths) must not change
//! what a later `agent-sandbox exec`, or the user's own git, trusts.

use std::path::Path;

use crate::support::{require_bwrap, World};

/// The default setup: `.git` inside is the session repository, the user's is read-only
/// (`session_repo::*`). A plant into `.git` lands in the session; the claim is then that
/// the user's `.git` never has it, the user's git on the host runs nothing of it, and a
/// later session grants nothing by it. Plants in the work tree are moved aside at exit.
/// The user's own pre-commit hook refuses every commit (`hook-ran`).
fn world_with_private_home() -> World {
    let world = World::new();
    world.write("home/private.txt", "TOPSECRET\n");
    world.write("home/proj/.git/hooks/pre-commit", "#!/bin/sh\necho hook-ran >&2\nexit 1\n");
    world.chmod("home/proj/.git/hooks/pre-commit", 0o755);
    world
}

/// A config that would make git run a program leaving `marker` behind.
fn evil_leaving(marker: &Path) -> String {
    format!("printf '[core]\\n\\tfsmonitor = \"touch {}; false\"\\n'", marker.display())
}

/// The user's git on the host, in `dir`, outside any sandbox (it may fail): its status
/// and output. Asserts it ran nothing that leaves `ran` in the world.
#[track_caller]
fn users_git_in(world: &World, dir: &Path, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", &world.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(!world.path("ran").exists(), "the user's git ran the agent's command in {}", dir.display());
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

/// A project with a linked worktree of its repository at `home/wt`, outside it.
fn world_with_outside_worktree() -> (World, std::path::PathBuf) {
    let world = world_with_private_home();
    let worktree = world.path("home/wt");
    world.git(&["worktree", "add", "-q", "-b", "wt", worktree.to_str().expect("utf-8")]);
    (world, worktree)
}

/// A `commondir` planted in `.git` (naming the user's home) lands in the session: the
/// user's `.git` never has it, the next session grants nothing by it, and the broker
/// refuses to read a session that leads elsewhere, until the agent removes it.
#[test]
fn a_planted_commondir_grants_nothing_next_time_and_never_reaches_the_users_git() {
    require_bwrap!();
    let world = world_with_private_home();
    let home = world.home.display().to_string();
    let before = world.users_git_listing();
    let main = world.git(&["rev-parse", "main"]);
    let run = world.sh(&[], &format!("echo {home} > .git/commondir"));
    run.ok();
    assert!(run.stderr().contains("the session repository leads elsewhere"), "{}", run.stderr());
    assert!(run.stderr().contains(".git/commondir"), "{}", run.stderr());
    assert_eq!(world.users_git_listing(), before, "the user's .git changed");
    // The next session starts, and what the commondir names is still not shown.
    let run = world.sh(&[], "cat ../private.txt 2>/dev/null; echo end");
    assert_eq!(run.ok(), "end\n", "{}", run.stderr());
    assert!(run.stderr().contains("the session repository leads elsewhere"), "{}", run.stderr());
    let (ok, said) = users_git_in(&world, &world.project, &["status", "--porcelain"]);
    assert!(ok, "{said}");
    assert_eq!(world.git(&["rev-parse", "main"]), main);
    // The session is the agent's to mend: with the plant removed, it is read again.
    let run = world.sh(&[], "rm .git/commondir && git status --porcelain >/dev/null");
    run.ok();
    assert!(!run.stderr().contains("leads elsewhere"), "{}", run.stderr());
    assert_eq!(world.users_git_listing(), before, "the user's .git changed");
}

/// The exit check's quarantine of a repository planted in the work tree cannot be
/// blocked by taking the name it moves it to, nor by a read-only parent.
#[test]
fn a_quarantine_cannot_be_blocked_by_taking_its_name() {
    require_bwrap!();
    let world = world_with_private_home();
    let ran = world.path("ran");
    let script = format!(
        "mkdir -p sub/.git.agent-sandbox-quarantined/x && git init -q sub && {} >> sub/.git/config && chmod 555 sub",
        evil_leaving(&ran)
    );
    let run = world.sh(&[], &script);
    run.ok();
    let sub = world.path("home/proj/sub");
    assert!(!sub.join(".git").exists(), "{}", run.stderr());
    assert!(quarantined(&sub, ".git"), "{}", run.stderr());
    let (ok, said) = users_git_in(&world, &world.project, &["status", "--porcelain"]);
    assert!(ok, "{said}");
}

#[test]
fn index_flags_cannot_unmask_a_secret_next_time() {
    require_bwrap!();
    let world = world_with_private_home();
    world.write("home/proj/.env", "SECRET=1\n");
    world.write("home/proj/secrets/a.txt", "TOPSECRET\n");
    // The agent stages empty blobs under the secrets' names and tells git not to look.
    let plant = "git update-index --add --cacheinfo 100644,$(git hash-object -w --stdin </dev/null),.env \
                 && git update-index --assume-unchanged .env \
                 && git update-index --add --cacheinfo 100644,$(git hash-object -w --stdin </dev/null),secrets/a.txt \
                 && git update-index --skip-worktree secrets/a.txt";
    world.sh(&[], plant).ok();
    assert_eq!(world.sh(&[], "cat .env secrets/a.txt 2>/dev/null; echo end").ok(), "end\n");
}

#[test]
fn read_only_paths_cannot_be_swapped_out_by_renaming_a_parent() {
    require_bwrap!();
    let world = world_with_private_home();
    world.write("home/proj/tools/hooks/pre-commit", "#!/bin/sh\nexit 1\n");
    world.chmod("home/proj/tools/hooks/pre-commit", 0o755);
    world.write("home/proj/.agent-precommit/user-context.json", "{}\n");
    let attacks = ["mv .git .git-old", "mv .agent-precommit x", "mv tools tools-old", "mv .agent-sandbox x"];
    let mut script = String::new();
    for attack in attacks {
        script.push_str(&format!("{attack} 2>/dev/null && echo 'MOVED: {attack}'\n"));
    }
    script.push_str("echo done\n");
    // With tools/hooks as the hooks path, tools is pinned too.
    world.git(&["config", "core.hooksPath", "tools/hooks"]);
    assert_eq!(world.sh(&[], &script).ok(), "done\n");
}

#[test]
fn a_project_config_the_agent_writes_is_not_trusted_next_time() {
    require_bwrap!();
    let world = world_with_private_home();
    world.write("home/proj/.env", "TOPSECRET\n");
    let loosen = r#"{"filesystem":{"presets":["!@git"]},"secrets":{"allow":["*"]},"commands":{"git":true}}"#;
    world.sh(&[], &format!("mkdir -p .agent-sandbox && echo '{loosen}' > .agent-sandbox/config.jsonc")).ok();
    let run = world.sh(&[], "cat .env");
    assert_eq!(run.code(), 125, "{}", run.stderr());
    assert!(run.stderr().contains("is new or changed since you allowed it"), "{}", run.stderr());
    assert!(!run.stdout().contains("TOPSECRET"));
}

#[test]
fn a_symlink_planted_at_a_preset_path_mounts_nothing_from_outside() {
    require_bwrap!();
    let world = world_with_private_home();
    let private = world.path("home/private.txt");
    world
        .sh(&[], &format!("ln -s {} .editorconfig; ln -s {} .eslintrc.json", private.display(), private.display()))
        .ok();
    let out = world.sh(&[], "cat .editorconfig .eslintrc.json ../private.txt 2>/dev/null; echo end").ok();
    assert_eq!(out, "end\n");
}

#[test]
fn own_state_is_out_of_reach_on_the_first_run_too() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/.env", "TOPSECRET\n");
    let cache = world.path("home/.cache");
    let state = world.path("xdg-state");
    let config = world.path("xdg-config");
    for dir in [&cache, &state, &config] {
        fs_err::create_dir_all(dir).expect("mkdir");
    }
    let flags: Vec<String> =
        [&cache, &state, &config].iter().flat_map(|dir| ["--rw".to_owned(), dir.display().to_string()]).collect();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let script = format!(
        "ls -A {c}/agent-sandbox {s}/agent-sandbox 2>/dev/null | grep -v ':$' | grep . && echo SAW; \
         echo '{{\"secrets\":{{\"allow\":[\"*\"]}}}}' > {g}/agent-sandbox/config.jsonc 2>/dev/null && echo WROTE; true",
        c = cache.display(),
        s = state.display(),
        g = config.display()
    );
    assert_eq!(world.sh(&flags, &script).ok(), "");
    assert_eq!(world.sh(&[], "cat .env; echo end").ok(), "end\n");
}

#[test]
fn relative_paths_in_a_project_config_mean_the_same_from_any_subdirectory() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/fixtures/prod-dump/users.csv", "customer PII\n");
    world.write("home/proj/src/main.rs", "fn main() {}\n");
    world.project_config(r#"{ "filesystem": { "exclude": ["fixtures/prod-dump"] } }"#);
    let src = world.path("home/proj/src");
    let out = world
        .cmd()
        .current_dir(&src)
        .args(["exec", "--", "sh", "-c", "cat ../fixtures/prod-dump/users.csv 2>/dev/null; echo end"])
        .run()
        .ok();
    assert_eq!(out, "end\n");
}

/// A config that would make the user's git run the agent's program.
const EVIL: &str = "printf '[core]\\n\\tfsmonitor = \"touch /tmp/PWNED; false\"\\n'";

fn quarantined(dir: &std::path::Path, name: &str) -> bool {
    fs_err::read_dir(dir)
        .map(|entries| {
            entries.filter_map(Result::ok).any(|entry| {
                entry.file_name().to_string_lossy().starts_with(&format!("{name}.agent-sandbox-quarantined."))
            })
        })
        .unwrap_or(false)
}

/// A gitlink planted in the work tree is moved aside; a worktree record rewritten in
/// `.git` lands in the session, and the user's worktree outside the project keeps its
/// own record and works, running nothing of the agent's.
#[test]
fn a_planted_submodule_gitlink_is_quarantined_and_the_users_worktree_link_stays() {
    require_bwrap!();
    let (world, worktree) = world_with_outside_worktree();
    let evil = evil_leaving(&world.path("ran"));
    let script = format!(
        "mkdir -p lib .git/evil && cp -r .git/objects .git/refs .git/HEAD .git/evil/ && {evil} > .git/evil/config \
         && echo 'gitdir: ../.git/evil' > lib/.git; \
         mkdir -p .git/worktrees/wt && echo ../../../evil > .git/worktrees/wt/commondir"
    );
    let run = world.sh(&[], &script);
    let err = run.stderr();
    assert!(quarantined(&world.path("home/proj/lib"), ".git"), "{err}");
    assert!(!world.path("home/proj/lib/.git").exists());
    assert!(!world.path("home/proj/.git/evil").exists(), "{err}");
    // The user's worktree outside the project: its record is the user's, untouched.
    assert_eq!(world.read("home/proj/.git/worktrees/wt/commondir"), "../..\n");
    assert!(!quarantined(&world.path("home/proj/.git/worktrees/wt"), "commondir"), "{err}");
    let (ok, said) = users_git_in(&world, &worktree, &["status", "--short"]);
    assert!(ok, "{said}");
    let (ok, said) = users_git_in(&world, &world.project, &["status", "--short"]);
    assert!(ok, "{said}");
}

#[test]
fn repositories_created_in_the_work_tree_are_quarantined_however_their_config_is_written() {
    require_bwrap!();
    let world = world_with_private_home();
    // A multi-line and a one-line fsmonitor, a non-UTF-8 byte, and a plain repository:
    // none of it is parsed, all of it is moved aside.
    let script = format!(
        "git init -q a && {EVIL} > a/.git/config; \
         git init -q b && printf '[core] fsmonitor = \"touch /tmp/PWNED\"\\n' >> b/.git/config; \
         git init -q c && printf '# \\377\\n[core]\\n\\tfsmonitor = x\\n' >> c/.git/config; \
         git init -q plain"
    );
    world.sh(&[], &script).ok();
    for repo in ["a", "b", "c", "plain"] {
        let dir = world.path(&format!("home/proj/{repo}"));
        assert!(quarantined(&dir, ".git") && !dir.join(".git").exists(), "{repo} was not quarantined");
    }
}

#[test]
fn changes_to_existing_nested_git_metadata_are_quarantined() {
    require_bwrap!();
    let world = world_with_private_home();
    // An existing nested repository and an existing (foreign) gitlink, made by the user.
    let nested = world.path("home/proj/vendored");
    fs_err::create_dir_all(&nested).expect("mkdir");
    world.git_in(&nested, &["init", "-q"]);
    let plain_config = world.read("home/proj/vendored/.git/config");
    world.sh(&[], &format!("{EVIL} >> vendored/.git/config")).ok();
    assert!(quarantined(&nested, ".git"), "a changed nested config is moved aside");
    // A directory the agent makes unreadable does not hide a plant from the exit check.
    let run = world
        .sh(&[], &format!("git init -q sneaky && {EVIL} > sneaky/.git/config && mkdir -p dark/x && chmod 000 dark"));
    let _ = std::process::Command::new("chmod").args(["-R", "755"]).arg(world.path("home/proj/dark")).status();
    assert!(quarantined(&world.path("home/proj/sneaky"), ".git"), "{}", run.stderr());
    let _ = plain_config;
}

/// A rebase the agent leaves in progress, with an `exec` line the user's `git rebase
/// --continue` would run, is the session's: the user's `.git` has none of it, the
/// user's git finds no rebase to continue, and the next session still has it.
#[test]
fn a_rebase_left_in_progress_stays_in_the_session() {
    require_bwrap!();
    let world = world_with_private_home();
    world.write("home/proj/a.txt", "a\n");
    world.git(&["add", "a.txt"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qm", "a"]);
    let main = world.git(&["rev-parse", "main"]);
    let ran = world.path("ran").display().to_string();
    let script = format!(
        "GIT_SEQUENCE_EDITOR='sh -c \"printf \\\"break\\nexec touch {ran}\\n\\\" > \\$0\"' git rebase -q -i HEAD~1 \
         >/dev/null 2>&1; cat .git/rebase-merge/git-rebase-todo"
    );
    let run = world.sh(&[], &script);
    assert_eq!(run.ok(), format!("exec touch {ran}\n"), "{}", run.stderr());
    assert!(!world.path("home/proj/.git/rebase-merge").exists());
    let (ok, said) = users_git_in(&world, &world.project, &["-c", "core.hooksPath=/dev/null", "rebase", "--continue"]);
    assert!(!ok && said.contains("no rebase in progress"), "{said}");
    assert_eq!(world.git(&["rev-parse", "main"]), main);
    let out = world.sh(&[], "git status | head -n1").ok();
    assert!(out.starts_with("interactive rebase in progress"), "{out}");
}

#[test]
fn a_project_config_is_used_only_as_the_user_allowed_it() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/.agent-sandbox/config.jsonc", r#"{ "network": "off" }"#);
    let refused = world.sh(&[], "true");
    assert_eq!(refused.code(), 125);
    assert!(refused.stderr().contains("is new or changed since you allowed it"), "{}", refused.stderr());
    assert!(refused.stderr().contains("agent-sandbox config allow"), "{}", refused.stderr());
    world.cmd().args(["config", "allow"]).run().ok();
    world.sh(&[], "true").ok();
    // Any change needs allowing again.
    world.write("home/proj/.agent-sandbox/config.jsonc", r#"{ "network": "on" }"#);
    assert_eq!(world.sh(&[], "true").code(), 125);
}

#[test]
fn a_config_planted_in_a_subdirectory_is_not_trusted_by_a_later_session_there() {
    require_bwrap!();
    let world = world_with_private_home();
    let plant = r#"mkdir -p sub/.git sub/.agent-sandbox && echo '{"filesystem":{"rw":["~"]},"commands":{"git":true}}' > sub/.agent-sandbox/config.jsonc"#;
    world.sh(&[], plant).ok();
    // The planted .git is moved aside at exit, so sub/ is no project of its own...
    assert!(quarantined(&world.path("home/proj/sub"), ".git"));
    // ...and even with it put back, the planted config is not trusted.
    let aside = fs_err::read_dir(world.path("home/proj/sub"))
        .expect("readable")
        .filter_map(Result::ok)
        .find(|entry| entry.file_name().to_string_lossy().starts_with(".git.agent-sandbox-quarantined."))
        .expect("quarantined");
    fs_err::rename(aside.path(), world.path("home/proj/sub/.git")).expect("put back");
    let sub = world.path("home/proj/sub");
    let run = world.cmd().current_dir(&sub).args(["exec", "--", "sh", "-c", "echo pwn >> ~/.profile; true"]).run();
    assert_eq!(run.code(), 125, "{}", run.stderr());
    assert!(!world.path("home/.profile").exists());
}

#[test]
fn a_config_file_given_with_dash_c_inside_the_project_needs_allowing_too() {
    require_bwrap!();
    let world = World::new();
    let extra = world.write("home/proj/tools/sandbox.jsonc", r#"{ "network": "off" }"#);
    let extra = extra.to_str().expect("utf-8");
    let run = world.cmd().args(["exec", "-c", extra, "--", "true"]).run();
    assert_eq!(run.code(), 125, "{}", run.stderr());
    world.cmd().args(["config", "allow", "-c", extra]).run().ok();
    world.cmd().args(["exec", "-c", extra, "--", "true"]).run().ok();
    // A file outside the project is the user's own and needs no allowing.
    let outside = world.write("elsewhere.jsonc", r#"{ "network": "off" }"#);
    world.cmd().args(["exec", "-c", outside.to_str().expect("utf-8"), "--", "true"]).run().ok();
}

#[test]
fn the_users_other_worktrees_cannot_be_pruned_from_inside() {
    require_bwrap!();
    let world = World::new();
    let outside = world.path("home/wt-victim");
    world.git(&["worktree", "add", "-q", "-b", "victim", outside.to_str().expect("utf-8")]);
    // gc works (it writes the records), and prunes nothing of theirs.
    world.sh(&[], "git worktree prune && git gc --prune=now -q").ok();
    let out =
        std::process::Command::new("git").args(["status", "--short"]).current_dir(&outside).output().expect("git");
    assert!(out.status.success(), "the outside worktree was cut off: {}", String::from_utf8_lossy(&out.stderr));
    // Worktrees inside the project stay the agent's to manage.
    world.sh(&[], "git worktree add -q -b mine inner && git worktree remove inner && echo removed").ok();
}

/// A worktree record made a repository of its own (no `commondir`: git would read its
/// config and hooks), and a `.git` file in the work tree naming it: the record lands in
/// the session. The `.git` file is left, as a worktree added inside writes it
/// (`gitcare::names_a_worktree_slot`): on the host it leads into the user's `.git`,
/// where there is no such record, so the user's git there refuses and runs nothing. The
/// records of the user's own worktree in the project stay the user's: deleting or
/// rewriting its `commondir` inside changes nothing the user's git reads.
#[test]
fn a_worktree_git_directory_that_is_a_repository_of_its_own_never_reaches_the_users_git() {
    require_bwrap!();
    let world = world_with_private_home();
    world.git(&["worktree", "add", "-q", "-b", "inner", "inner"]);
    let before = world.users_git_listing();
    let proj = world.project.display().to_string();
    let evil = evil_leaving(&world.path("ran"));
    let script = format!(
        "mkdir -p .git/worktrees/evil/refs .git/worktrees/evil/objects sub && echo ref: refs/heads/main > .git/worktrees/evil/HEAD \
         && {evil} > .git/worktrees/evil/config && echo {proj}/sub/.git > .git/worktrees/evil/gitdir \
         && echo 'gitdir: {proj}/.git/worktrees/evil' > sub/.git"
    );
    let run = world.sh(&[], &script);
    assert!(!world.path("home/proj/.git/worktrees/evil").exists(), "{}", run.stderr());
    let (ok, said) = users_git_in(&world, &world.path("home/proj/sub"), &["status", "--short"]);
    assert!(!ok && said.contains("not a git repository"), "{said}");
    let inner = world.path("home/proj/inner");
    for attack in [
        "rm .git/worktrees/inner/commondir",
        "mkdir -p .git/worktrees/inner && echo ../../../.. > .git/worktrees/inner/commondir",
    ] {
        let run = world.sh(&[], &format!("{attack}; true"));
        assert_eq!(world.read("home/proj/.git/worktrees/inner/commondir"), "../..\n", "{attack}: {}", run.stderr());
        let (ok, said) = users_git_in(&world, &inner, &["status", "--short"]);
        assert!(ok, "{attack}: {said}");
    }
    let (ok, said) = users_git_in(&world, &world.project, &["status", "--short"]);
    assert!(ok, "{said}");
    assert_eq!(world.users_git_listing(), before, "the user's .git changed");
}

/// A worktree the agent adds and then moves with git itself is not taken for a plant:
/// nothing is moved aside, and it works in the next session.
#[test]
fn worktrees_moved_by_git_itself_are_left_alone() {
    require_bwrap!();
    let world = world_with_private_home();
    world.sh(&[], "git worktree add -q -b side side-wt").ok();
    let run = world.sh(&[], "git worktree move side-wt moved-wt");
    run.ok();
    assert!(!run.stderr().contains("WARNING"), "{}", run.stderr());
    assert!(world.path("home/proj/moved-wt/.git").is_file(), "{}", run.stderr());
    let run = world.sh(&[], "git -C moved-wt log -1 --format=%s");
    assert_eq!(run.ok(), "init\n", "{}", run.stderr());
    assert!(!run.stderr().contains("WARNING"), "{}", run.stderr());
}

#[test]
fn bare_repository_layouts_made_in_the_work_tree_are_quarantined() {
    require_bwrap!();
    let world = world_with_private_home();
    // A fixture the user keeps in the repository stays as it is.
    for dir in ["fixture/objects", "fixture/refs"] {
        fs_err::create_dir_all(world.path(&format!("home/proj/{dir}"))).expect("mkdir");
    }
    world.write("home/proj/fixture/HEAD", "ref: refs/heads/main\n");
    world.write("home/proj/fixture/config", "[core]\n\tbare = true\n");
    let layout = |dir: &str| {
        format!("mkdir -p {dir}/objects {dir}/refs && echo ref: refs/heads/main > {dir}/HEAD && {EVIL} > {dir}/config")
    };
    // Anywhere in the work tree, also inside a directory named HEAD (which the scan
    // does not descend into).
    // Git only checks that `objects` and `refs` can be searched: executable files do.
    let files = "mkdir src && cd src && echo ref: refs/heads/main > HEAD && printf '#!/bin/sh\\n' > objects \
                 && cp objects refs && chmod +x objects refs";
    let script = format!("{}; {}; {} && {EVIL} > config", layout("tools"), layout("HEAD/deep"), files);
    let run = world.sh(&[], &script);
    let err = run.stderr();
    assert!(quarantined(&world.path("home/proj/tools"), "HEAD"), "{err}");
    assert!(quarantined(&world.path("home/proj/HEAD/deep"), "HEAD"), "{err}");
    assert!(quarantined(&world.path("home/proj/src"), "HEAD"), "{err}");
    assert!(world.path("home/proj/fixture/HEAD").exists(), "{err}");
    // A changed config makes an existing layout the agent's too.
    let run = world.sh(&[], &format!("{EVIL} > fixture/config"));
    assert!(quarantined(&world.path("home/proj/fixture"), "HEAD"), "{}", run.stderr());
}

#[test]
fn hooks_planted_in_an_existing_nested_repository_are_quarantined() {
    require_bwrap!();
    let world = world_with_private_home();
    let nested = world.path("home/proj/vendored");
    fs_err::create_dir_all(&nested).expect("mkdir");
    world.git_in(&nested, &["init", "-q"]);
    // Working in it is fine...
    world.sh(&[], "git -C vendored status --short").ok();
    assert!(!quarantined(&nested, ".git"));
    // ...planting a hook is not.
    let run = world.sh(&[], "printf '#!/bin/sh\\ntouch /tmp/PWNED\\n' > vendored/.git/hooks/post-checkout");
    assert!(quarantined(&nested, ".git"), "{}", run.stderr());
}

#[test]
fn repositories_in_dependency_trees_and_secret_directories_are_quarantined_too() {
    require_bwrap!();
    let world = world_with_private_home();
    // One `git add` of such a clone makes the project's `git status` run git in it; a
    // directory named like a secret is not descended into by the scan, but is walked.
    let script = format!(
        "for dir in node_modules/dep my-secrets/dep; do mkdir -p $dir && git init -q $dir && {EVIL} > $dir/.git/config; done"
    );
    let run = world.sh(&[], &script);
    for dir in ["node_modules/dep", "my-secrets/dep"] {
        assert!(quarantined(&world.path(&format!("home/proj/{dir}")), ".git"), "{dir}: {}", run.stderr());
    }
}

/// A worktree record of the user's swapped for a symlink to a record the agent made
/// (whose `commondir` names a repository with the agent's config): the swap lands in
/// the session, whose link the broker refuses to read; the user's worktree outside the
/// project keeps its own record and runs nothing.
#[test]
fn a_worktree_record_swapped_for_a_symlink_never_reaches_the_users_worktree() {
    require_bwrap!();
    let (world, outside) = world_with_outside_worktree();
    let before = world.users_git_listing();
    let evil = evil_leaving(&world.path("ran"));
    let script = format!(
        "mkdir -p x/y/wt .git/worktrees && echo ../.. > x/y/wt/commondir && echo ref: refs/heads/wt > x/y/wt/HEAD \
         && echo {outside}/.git > x/y/wt/gitdir && rm -rf .git/worktrees/wt && ln -s ../../x/y/wt .git/worktrees/wt \
         && ln -s ../.git/objects x/objects && ln -s ../.git/refs x/refs && {evil} > x/config",
        outside = outside.display()
    );
    let run = world.sh(&[], &script);
    run.ok();
    assert!(run.stderr().contains(".git/worktrees/wt: a link"), "{}", run.stderr());
    assert_eq!(world.users_git_listing(), before, "the user's .git changed");
    assert!(world.path("home/proj/.git/worktrees/wt").symlink_metadata().expect("the record").is_dir());
    let (ok, said) = users_git_in(&world, &outside, &["status", "--short"]);
    assert!(ok, "{said}");
    let (ok, said) = users_git_in(&world, &world.project, &["status", "--short"]);
    assert!(ok, "{said}");
}

/// A submodule whose name has a slash (`.git/modules/libs/foo`): the agent's config and
/// hook written into its git directory inside never reach the user's, and the user's
/// git in the submodule runs nothing; committing in the submodule still works, and the
/// commit is kept in the user's submodule repository.
#[test]
fn a_submodule_named_with_a_slash_keeps_the_users_config_and_hooks() {
    require_bwrap!();
    let world = world_with_private_home();
    let sub = world.path("home/sub");
    fs_err::create_dir_all(&sub).expect("mkdir");
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "s"],
    ] {
        world.git_in(&sub, args);
    }
    world.git(&["-c", "protocol.file.allow=always", "submodule", "add", "-q", "../sub", "libs/foo"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qm", "add foo"]);
    let config = world.read("home/proj/.git/modules/libs/foo/config");
    let ran = world.path("ran");
    let hook = format!("printf '#!/bin/sh\\ntouch {}\\n' > .git/modules/libs/foo/hooks/post-checkout", ran.display());
    let run = world.sh(
        &[],
        &format!(
            "{} >> .git/modules/libs/foo/config; {hook} && chmod +x .git/modules/libs/foo/hooks/post-checkout",
            evil_leaving(&ran)
        ),
    );
    assert_eq!(world.read("home/proj/.git/modules/libs/foo/config"), config, "{}", run.stderr());
    assert!(!world.path("home/proj/.git/modules/libs/foo/hooks/post-checkout").exists(), "{}", run.stderr());
    let foo = world.path("home/proj/libs/foo");
    let (ok, said) = users_git_in(&world, &foo, &["status", "--short"]);
    assert!(ok, "{said}");
    let (ok, said) = users_git_in(&world, &foo, &["checkout", "-q", "--detach"]);
    assert!(ok, "{said}");
    // Committing in the submodule still works, and its commit comes home aside.
    let run = world.sh(&[], "git -C libs/foo -c user.name=a -c user.email=a@b commit -q --allow-empty -m inner && git -C libs/foo rev-parse HEAD");
    let inner = run.ok().trim().to_owned();
    assert!(run.stderr().contains("kept in your submodule repository"), "{}", run.stderr());
    assert_eq!(world.git_in(&foo, &["cat-file", "-t", &inner]).trim(), "commit", "{}", run.stderr());
    let (ok, said) = users_git_in(&world, &foo, &["status", "--short"]);
    assert!(ok, "{said}");
}

#[test]
fn a_layout_borrowing_objects_through_commondir_is_quarantined() {
    require_bwrap!();
    let world = world_with_private_home();
    let script = format!(
        "mkdir -p .stash/e src && cp -r .git/objects .git/refs .stash/e/ && {EVIL} > .stash/e/config \
         && echo ref: refs/heads/main > src/HEAD && echo ../.stash/e > src/commondir"
    );
    let run = world.sh(&[], &script);
    assert!(quarantined(&world.path("home/proj/src"), "HEAD"), "{}", run.stderr());
}

/// The user has no `.git/hooks`: the agent cannot make one there (the session's hooks
/// are read-only), and the user's commit on the host runs nothing of the agent's.
#[test]
fn hooks_cannot_be_made_where_the_user_has_none() {
    require_bwrap!();
    let world = world_with_private_home();
    fs_err::remove_dir_all(world.path("home/proj/.git/hooks")).expect("rm hooks");
    let ran = world.path("ran");
    let run = world.sh(
        &[],
        &format!(
            "mkdir -p .git/hooks; printf '#!/bin/sh\\ntouch {}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
            ran.display()
        ),
    );
    assert_ne!(run.code(), 0, "the session's hooks were writable: {}", run.stderr());
    assert!(!world.path("home/proj/.git/hooks").exists(), "{}", run.stderr());
    let (ok, said) = users_git_in(&world, &world.project, &["commit", "-q", "--allow-empty", "-m", "host"]);
    assert!(ok, "{said}");
}

/// The user stops a rebase on the host: the agent cannot add commands to its todo list
/// (the user's `.git` is read-only; a list written inside is the session's), and the
/// user's `git rebase --continue` runs only the user's own.
#[test]
fn a_rebase_the_user_stopped_gets_no_commands_from_inside() {
    require_bwrap!();
    let world = world_with_private_home();
    world.write("home/proj/a.txt", "a\n");
    world.git(&["add", "a.txt"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qm", "a"]);
    // The user stops a rebase and hands it to the agent.
    let out = std::process::Command::new("git")
        .args(["-c", "core.hooksPath=/dev/null", "rebase", "-q", "-i", "HEAD~1"])
        .env("GIT_SEQUENCE_EDITOR", "sh -c 'printf \"break\\npick $(git rev-parse --short HEAD) a\\n\" > $0'")
        .env("HOME", &world.home)
        .current_dir(&world.project)
        .output()
        .expect("git rebase");
    assert!(world.path("home/proj/.git/rebase-merge").is_dir(), "{}", String::from_utf8_lossy(&out.stderr));
    let todo = world.read("home/proj/.git/rebase-merge/git-rebase-todo");
    let ran = world.path("ran");
    let run = world.sh(
        &[],
        &format!(
            "mkdir -p .git/rebase-merge; echo 'exec touch {}' >> .git/rebase-merge/git-rebase-todo",
            ran.display()
        ),
    );
    assert_eq!(world.read("home/proj/.git/rebase-merge/git-rebase-todo"), todo, "{}", run.stderr());
    let (ok, said) = users_git_in(&world, &world.project, &["-c", "core.hooksPath=/dev/null", "rebase", "--continue"]);
    assert!(ok, "{said}");
    assert_eq!(world.git(&["log", "-1", "--format=%s"]).trim(), "a");
}

#[test]
fn an_allow_pattern_matching_dot_git_does_not_hide_planted_repositories() {
    require_bwrap!();
    let world = world_with_private_home();
    world.project_config(r#"{ "secrets": { "allow": [".git*"] } }"#);
    world.git(&["add", "-A"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qm", "config"]);
    let run = world.sh(
        &[],
        &format!("mkdir lib && echo 'gitdir: ../.git/evil' > lib/.git; git init -q sub && {EVIL} > sub/.git/config"),
    );
    assert!(quarantined(&world.path("home/proj/lib"), ".git"), "{}", run.stderr());
    assert!(quarantined(&world.path("home/proj/sub"), ".git"), "{}", run.stderr());
}

/// The "bare clone + worktrees" layout: a worktree the agent adds is not taken for a
/// plant, and works inside in this session and the next.
#[test]
fn worktrees_of_a_bare_clone_kept_in_the_project_are_left_alone() {
    require_bwrap!();
    let world = world_with_private_home();
    // The "bare clone + worktrees" layout: `.bare/` in the project, `.git` naming it.
    let project = world.path("home/bp");
    fs_err::create_dir_all(&project).expect("mkdir");
    let git = |args: &[&str]| world.git_in(&project, args);
    git(&["clone", "-q", "--bare", world.project.to_str().expect("utf-8"), ".bare"]);
    fs_err::write(project.join(".git"), "gitdir: ./.bare\n").expect("write");
    git(&["worktree", "add", "-q", "main", "main"]);
    let run = world
        .cmd()
        .current_dir(&project)
        .args(["exec", "--", "sh", "-c", "git worktree add -q -b feature feature && git -C feature log -1 --format=%s"])
        .run();
    assert_eq!(run.ok(), "init\n");
    assert!(!run.stderr().contains("WARNING"), "{}", run.stderr());
    // The worktree's record is the session's; the user's own worktree keeps working and
    // runs nothing, and the agent's worktree works again in the next session.
    assert!(!project.join(".bare/worktrees/feature").exists(), "{}", run.stderr());
    let (ok, said) = users_git_in(&world, &project.join("main"), &["status", "--short"]);
    assert!(ok, "{said}");
    let run = world
        .cmd()
        .current_dir(&project)
        .args(["exec", "--", "sh", "-c", "git -C feature status --short && git -C feature log -1 --format=%s"])
        .run();
    assert_eq!(run.ok(), "init\n", "{}", run.stderr());
    assert!(!run.stderr().contains("WARNING"), "{}", run.stderr());
    // A `HEAD` git would not accept makes no repository.
    let run = world.sh(&[], "mkdir -p nr/objects nr/refs && echo 'not a ref' > nr/HEAD");
    assert!(world.path("home/proj/nr/HEAD").exists(), "{}", run.stderr());
}

/// Every file a nested repository's git reads through its git directory is watched:
/// its submodules' git directories (at any depth), its worktree records, `info/`,
/// `objects/info/alternates`, `config.worktree`, `commondir`. Beside each plant, the
/// legitimate use: committing in the nested repository leaves its `.git` in place.
#[test]
fn plants_deep_in_a_nested_repository_are_quarantined_and_commits_there_are_not() {
    require_bwrap!();
    let plants = [
        format!("mkdir -p g/modules/x && {EVIL} > g/modules/x/config"),
        format!("mkdir -p g/modules/a/modules/b && echo ref: refs/heads/main > g/modules/a/modules/b/HEAD && {EVIL} > g/modules/a/modules/b/config"),
        format!("mkdir -p g/worktrees/w && {EVIL} > g/worktrees/w/config"),
        format!("mkdir -p g/worktrees/w && echo ../.. > g/worktrees/w/commondir && {EVIL} > g/worktrees/w/config.worktree"),
        "mkdir -p g/worktrees && ln -s /tmp g/worktrees/w".to_owned(),
        format!("{EVIL} > g/config.worktree"),
        "echo /tmp > g/commondir".to_owned(),
        "echo '* filter=evil' > g/info/attributes".to_owned(),
        "echo /tmp/objects > g/objects/info/alternates".to_owned(),
    ];
    let world = world_with_private_home();
    let nested = world.path("home/proj/vendored");
    for plant in plants {
        let _ = fs_err::remove_dir_all(&nested);
        fs_err::create_dir_all(&nested).expect("mkdir");
        world.git_in(&nested, &["init", "-q"]);
        world.git_in(
            &nested,
            &["-c", "user.name=u", "-c", "user.email=u@e", "commit", "-q", "--allow-empty", "-m", "one"],
        );
        // The legitimate use: a commit in the nested repository.
        let run = world.sh(&[], "git -C vendored -c user.name=u -c user.email=u@e commit -q --allow-empty -m two");
        run.ok();
        assert!(
            world.path("home/proj/vendored/.git/HEAD").exists(),
            "{plant}: a commit moved .git aside: {}",
            run.stderr()
        );
        assert!(!quarantined(&nested, ".git"), "{plant}: {}", run.stderr());
        // The plant.
        let run = world.sh(&[], &format!("ln -s vendored/.git g && {{ {plant}; }} && rm g"));
        run.ok();
        assert!(!world.path("home/proj/vendored/.git").exists(), "{plant}: left in place: {}", run.stderr());
        assert!(quarantined(&nested, ".git"), "{plant}: {}", run.stderr());
        for entry in fs_err::read_dir(&nested).expect("listable").filter_map(Result::ok) {
            if entry.file_name().to_string_lossy().starts_with(".git.agent-sandbox-quarantined.") {
                fs_err::remove_dir_all(entry.path()).expect("clean up");
            }
        }
    }
}
