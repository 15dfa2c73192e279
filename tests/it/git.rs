//! With the `@git` preset, ordinary git works while hooks, repository config and the
//! sandbox's own config cannot be changed; in a plain repository, a husky layout and a
//! linked worktree.

use crate::support::{require_bwrap, World};

const HOOK: &str = "#!/bin/sh\necho hook-ran >&2\nexit 0\n";

fn protected_world() -> World {
    let world = World::new();
    world.write("home/proj/.git/hooks/pre-commit", HOOK);
    world.chmod("home/proj/.git/hooks/pre-commit", 0o755);
    world.write("home/proj/.husky/pre-commit", "npm test\n");
    world.project_config("{}\n");
    world.write("home/proj/.agent-precommit/user-context.json", "{}\n");
    world
}

const TAMPER: &[&str] = &[
    "echo 'exit 0' > .git/hooks/pre-commit",
    "rm -f .git/hooks/pre-commit",
    "mv .git/hooks .git/hooks-old",
    "touch .git/hooks/post-commit",
    "git config core.hooksPath /dev/null",
    "git config --local alias.c 'commit --no-verify'",
    "echo '[core] hooksPath = /tmp' >> .git/config",
    "echo x > .husky/pre-commit",
    "rm -rf .husky",
    "echo '{}' > .agent-sandbox/config.jsonc",
    "rm -rf .agent-sandbox",
    "echo '{}' > .agent-precommit/user-context.json",
];

#[test]
fn hooks_and_configs_are_read_only_but_everyday_git_works() {
    require_bwrap!();
    let world = protected_world();
    let before_config = world.read("home/proj/.git/config");
    let mut script = String::new();
    for attack in TAMPER {
        script.push_str(&format!("{attack} >/dev/null 2>&1 && echo 'TAMPERED: {attack}'\n"));
    }
    script.push_str(
        "echo change >> README.md && git add README.md && git commit -qm 'from the sandbox' && echo committed\n\
         git branch feature && git checkout -q feature && echo branched\n\
         echo wip >> README.md && git stash -q && git stash pop -q && echo stashed\n\
         git log --oneline | wc -l\n",
    );
    let run = world.sh(&[], &script);
    let out = run.ok();
    assert_eq!(out, "committed\nbranched\nstashed\n2\n");
    assert!(run.stderr().contains("hook-ran"), "the pre-commit hook still runs: {}", run.stderr());
    assert_eq!(world.read("home/proj/.git/hooks/pre-commit"), HOOK);
    assert_eq!(world.read("home/proj/.git/config"), before_config);
    assert_eq!(world.read("home/proj/.husky/pre-commit"), "npm test\n");
    assert_eq!(world.git(&["log", "-1", "--format=%s", "main"]), "from the sandbox\n");
}

#[test]
fn a_configured_hooks_path_is_protected_too() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/tools/hooks/pre-commit", HOOK);
    world.chmod("home/proj/tools/hooks/pre-commit", 0o755);
    world.git(&["config", "core.hooksPath", "tools/hooks"]);
    let run = world.sh(&[], "echo 'exit 0' > tools/hooks/pre-commit 2>/dev/null && echo TAMPERED; git commit -q --allow-empty -m x && echo committed");
    assert_eq!(run.ok(), "committed\n");
    assert!(run.stderr().contains("hook-ran"));
}

#[test]
fn linked_worktrees_commit_while_the_shared_hooks_stay_read_only() {
    require_bwrap!();
    let world = protected_world();
    let worktree = world.path("home/wt");
    world.git(&["worktree", "add", "-q", "-b", "wt-branch", worktree.to_str().expect("utf-8 path")]);
    let main_hook = world.path("home/proj/.git/hooks/pre-commit");
    let script = format!(
        "echo 'exit 0' > {hook} 2>/dev/null && echo TAMPERED-HOOK; git config core.hooksPath /dev/null 2>/dev/null && echo TAMPERED-CONFIG; \
         cat ../proj/README.md 2>/dev/null && echo SAW-MAIN-TREE; \
         echo wt >> README.md && git commit -qam 'in worktree' && echo committed",
        hook = main_hook.display()
    );
    let run = world.cmd().current_dir(&worktree).args(["exec", "--", "sh", "-c", &script]).run();
    assert_eq!(run.ok(), "committed\n");
    assert!(run.stderr().contains("hook-ran"));
    assert_eq!(world.read("home/proj/.git/hooks/pre-commit"), HOOK);
    assert_eq!(world.git(&["log", "-1", "--format=%s", "wt-branch"]), "in worktree\n");
}

/// Without `@git`, its project paths (`.agent-precommit`) are ordinary files; the user's git
/// directory is not: with no session repository it is read-only, whatever the presets.
#[test]
fn without_the_git_preset_its_paths_are_ordinary_files_but_the_users_git_stays_read_only() {
    require_bwrap!();
    let world = protected_world();
    world.project_config(r#"{ "filesystem": { "presets": ["!@git"] } }"#);
    let out = world
        .sh(
            &[],
            "echo '{}' > .agent-precommit/user-context.json && echo writable; \
             (echo '# changed' >> .git/hooks/pre-commit || touch .git/x) 2>/dev/null && echo GIT-WRITABLE; true",
        )
        .ok();
    assert_eq!(out, "writable\n");
    assert_eq!(world.read("home/proj/.git/hooks/pre-commit"), HOOK);
}

/// git's own transport through the guard: `git clone` and `git fetch` over http run `git
/// remote-http` themselves, which passes; the agent running that helper directly (a push
/// that skips pre-push) is still refused. The remote is a dumb-http server on loopback.
#[test]
fn git_over_http_works_and_its_helper_alone_is_refused() {
    require_bwrap!();
    let world = World::new();
    let served = world.path("served");
    fs_err::create_dir_all(&served).expect("mkdir");
    world.git_in(&served, &["clone", "-q", "--bare", world.project.to_str().expect("utf-8"), "repo.git"]);
    world.git_in(&served.join("repo.git"), &["update-server-info"]);
    let mut server = std::process::Command::new("python3")
        .args([
            "-c",
            "import http.server, functools, sys\n\
                      h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])\n\
                      s = http.server.HTTPServer(('127.0.0.1', 0), h)\n\
                      print(s.server_address[1], flush=True)\n\
                      s.serve_forever()\n",
        ])
        .arg(&served)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3");
    let mut port = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(server.stdout.take().expect("stdout")), &mut port)
        .expect("port");
    let url = format!("http://127.0.0.1:{}/repo.git", port.trim());
    let run = world.sh(
        &["--network", "on"],
        &format!("git clone -q {url} /tmp/c && git -C /tmp/c fetch -q origin && git -C /tmp/c log -1 --format=%s"),
    );
    let helper = world.sh(&["--network", "on"], &format!("git remote-http origin {url} </dev/null"));
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(run.ok(), "init\n", "{}", run.stderr());
    assert_ne!(helper.code(), 0);
    assert!(helper.stderr().contains("refused `git remote-http`"), "{}", helper.stderr());
}
