//! Three real projects, set up the way their users do it, with the hook guard in front of
//! their own hooks: npm + husky, Python with the pre-commit framework installed by pipx,
//! and cargo. In each, the agent's commits pass the checks where the project's
//! dependencies are and its push lands; a failing commit it slipped past pre-commit is
//! stopped at push. The tools come from the package registries, as users install them.

use std::{path::Path, process::Command};

use crate::support::{is_root, require_bwrap, World};

/// `program args` on the host, as the world's user (its HOME, `~/.local/bin` on PATH).
pub(crate) fn host(world: &World, dir: &Path, program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("HOME", &world.home)
        .env("PATH", path(world))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .map_err(|err| format!("{program}: {err}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

pub(crate) fn path(world: &World) -> String {
    let cargo = std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo/bin"));
    let cargo = cargo.filter(|dir| dir.is_dir()).map(|dir| format!(":{}", dir.display())).unwrap_or_default();
    format!("{}/.local/bin:/usr/local/bin:/usr/bin:/bin{cargo}", world.home.display())
}

/// An installation from a registry: CI reaches them, so there it must work; elsewhere a
/// failure skips the test with the reason.
pub(crate) fn install(result: Result<String, String>) -> bool {
    match result {
        Ok(_) => true,
        Err(err) => {
            assert!(std::env::var_os("CI").is_none(), "installing from the registry failed in CI: {err}");
            eprintln!("skipping: cannot install from the registry here: {err}");
            false
        }
    }
}

/// A husky v9 project's `package.json`: `prepare` runs husky, `test` runs `test.js`.
fn write_husky_package(world: &World) {
    world.write(
        "home/proj/package.json",
        r#"{"name": "proj", "version": "1.0.0", "private": true,
            "scripts": {"prepare": "husky", "test": "node test.js"},
            "devDependencies": {"husky": "^9"}}"#,
    );
}

/// The pre-commit framework installed with pipx, as Python users do; false (with the
/// reason printed) where that cannot be done outside CI.
pub(crate) fn install_pre_commit(world: &World) -> bool {
    if Command::new("pipx").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "pipx is part of CI's machine (xtask installs it)");
        eprintln!("skipping: pipx not found (apt install pipx)");
        return false;
    }
    install(host(world, &world.home, "pipx", &["install", "pre-commit"]))
}

/// Commits what the user set up (outside, as the user), pushes it to a new bare remote,
/// installs the hook guard.
fn publish(world: &World) {
    world.git(&["add", "-A"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qm", "project setup"]);
    world.bare_origin();
    world.git(&["-c", "core.hooksPath=/dev/null", "push", "-q", "origin", "main"]);
    world.cmd().args(["hooks", "install"]).run().ok();
}

fn remote_main(world: &World) -> String {
    let remote = world.path("home/remote.git");
    world.git_in(&world.root, &["--git-dir", remote.to_str().expect("utf-8"), "rev-parse", "main"]).trim().to_owned()
}

/// In the sandbox: two good commits and a push land; then a commit that fails the
/// checks, made past pre-commit with a copy of the real git, is refused at push.
/// `toolchain`: directories outside the world's home to show read-only, with the
/// variables that name them (cargo's, which rustup installed in the real home).
fn agent_round(world: &World, toolchain: &[(&str, &Path)], good: &str, bad: &str) {
    let remote = world.path("home/remote.git");
    let path = path(world);
    let exec = |script: &str| {
        let mut cmd = world.cmd();
        cmd.env("PATH", &path).args(["exec", "--rw", remote.to_str().expect("utf-8")]);
        for (name, dir) in toolchain {
            cmd.env(name, dir).arg("--ro").arg(dir);
        }
        cmd.args(["--", "sh", "-c", script]).run()
    };
    let run = exec(&format!("{good} one && git commit -qam one && {good} two && git commit -qam two && git push -q origin main && echo pushed"));
    assert_eq!(run.ok(), "pushed\n", "{}", run.stderr());
    assert_eq!(remote_main(world), world.git(&["rev-parse", "HEAD"]).trim());
    let before = remote_main(world);
    let run = exec(&format!(
        "cp /run/agent-sandbox/bin/git /tmp/g && {bad} && /tmp/g commit -qn -am sneaky && git push -q origin main"
    ));
    assert!(run.stderr().contains("agent-sandbox: pre-push refused:"), "{}", run.stderr());
    assert_eq!(remote_main(world), before);
}

#[test]
fn npm_with_husky() {
    require_bwrap!();
    let world = World::new();
    let proj = world.project.clone();
    write_husky_package(&world);
    // The test needs the installed dependency: checks without node_modules fail.
    world.write(
        "home/proj/test.js",
        "const fs = require('fs');\nfs.accessSync('node_modules/husky/package.json');\n\
         if (fs.readFileSync('src.txt', 'utf8').includes('bad')) { console.error('src.txt is bad'); process.exit(1); }\n",
    );
    world.write("home/proj/src.txt", "fine\n");
    world.write("home/proj/.gitignore", "node_modules/\n");
    world.write("home/proj/.husky/pre-commit", "npm test\n");
    world.project_config(r#"{ "checks": { "commands": ["npm test --silent"] } }"#);
    if !install(host(&world, &proj, "npm", &["install", "--no-audit", "--no-fund"])) {
        return;
    }
    assert_eq!(world.git(&["config", "core.hooksPath"]).trim(), ".husky/_", "husky's prepare set its hooks");
    publish(&world);
    agent_round(&world, &[], "echo >> src.txt", "echo bad >> src.txt");
}

#[test]
fn python_with_the_pre_commit_framework_from_pipx() {
    require_bwrap!();
    let world = World::new();
    let proj = world.project.clone();
    if !install_pre_commit(&world) {
        return;
    }
    world.write(
        "home/proj/.pre-commit-config.yaml",
        "repos:\n- repo: local\n  hooks:\n  - id: not-bad\n    name: src.py is not bad\n    language: system\n    \
         entry: sh -c '! grep -q bad src.py'\n    pass_filenames: false\n    always_run: true\n",
    );
    world.write("home/proj/src.py", "print('fine')\n");
    world.project_config(r#"{ "checks": { "commands": ["pre-commit run --all-files"] } }"#);
    host(&world, &proj, "pre-commit", &["install"]).expect("pre-commit install");
    publish(&world);
    agent_round(&world, &[], "echo '#' >> src.py", "echo '# bad' >> src.py");
}

#[test]
fn cargo() {
    require_bwrap!();
    if Command::new("cargo").arg("--version").env("PATH", path(&World::bare())).output().is_err() {
        assert!(!(is_root() && std::env::var_os("CI").is_some()), "cargo is on root's PATH in CI");
        eprintln!("skipping: cargo is not installed for this user");
        return;
    }
    let world = World::new();
    world.write("home/proj/Cargo.toml", "[package]\nname = \"proj\"\nversion = \"0.1.0\"\nedition = \"2021\"\n");
    world.write(
        "home/proj/src/lib.rs",
        "pub fn value() -> u32 { 1 }\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn value() { assert_eq!(super::value(), 1); }\n}\n",
    );
    world.write("home/proj/.gitignore", "target/\n");
    world.project_config(r#"{ "checks": { "commands": ["cargo test --offline --quiet"] } }"#);
    publish(&world);
    // rustup's toolchain, as installed in the real home (the world's user has none).
    let real_home = std::env::var_os("HOME").map(std::path::PathBuf::from).expect("HOME");
    let (cargo_home, rustup_home) = (real_home.join(".cargo"), real_home.join(".rustup"));
    let toolchain = [("CARGO_HOME", cargo_home.as_path()), ("RUSTUP_HOME", rustup_home.as_path())];
    agent_round(&world, &toolchain, "echo >> src/lib.rs //", "sed -i 's/{ 1 }/{ 2 }/' src/lib.rs");
}

/// Two ways husky undoes the hook guard without a word, with the real husky: a host
/// `npm install` rewrites `.husky/_`, shims included; and a `git worktree` of the
/// project has no `.husky/_` (it is not in git), so git runs no hook there. `exec` says
/// so before the agent starts, with the fix; once applied, it says nothing.
#[test]
fn exec_warns_when_husky_undid_the_hook_guard() {
    require_bwrap!();
    let world = World::new();
    let proj = world.project.clone();
    write_husky_package(&world);
    world.write("home/proj/.gitignore", "node_modules/\n");
    world.write("home/proj/.husky/pre-commit", "npm test\n");
    world.write("home/proj/test.js", "\n");
    if !install(host(&world, &proj, "npm", &["install", "--no-audit", "--no-fund"])) {
        return;
    }
    publish(&world);
    let warnings = |dir: &Path| -> Vec<String> {
        let run = world.cmd().current_dir(dir).args(["exec", "--", "true"]).run();
        let stderr = run.stderr();
        run.ok();
        stderr.lines().filter(|line| line.starts_with("agent-sandbox: warning:")).map(str::to_owned).collect()
    };
    assert_eq!(warnings(&proj), Vec::<String>::new());
    let hooks = proj.join(".husky/_");
    // A host `npm install` (husky's prepare) put its own hooks back over the shims.
    host(&world, &proj, "npm", &["install", "--offline", "--no-audit", "--no-fund"]).expect("npm install");
    assert_eq!(
        warnings(&proj),
        [format!(
            "agent-sandbox: warning: the hook guard no longer runs before pre-commit and pre-push in {}: its shims \
             were replaced (husky rewrites `.husky/_` on every `npm install`); run `agent-sandbox hooks install` \
             again to put them back in front",
            hooks.display()
        )]
    );
    world.cmd().args(["hooks", "install"]).run().ok();
    assert_eq!(warnings(&proj), Vec::<String>::new());
    // A worktree: no hooks at all until husky and the guard are installed there.
    world.git(&["worktree", "add", "-q", "../wt"]);
    let worktree = world.home.join("wt");
    let found = warnings(&worktree);
    assert!(
        found.len() == 1 && found[0].contains("git runs no hooks in this work tree") && found[0].contains("npx husky"),
        "{found:?}"
    );
    host(&world, &worktree, "npm", &["install", "--offline", "--no-audit", "--no-fund"]).expect("npm install");
    let found = warnings(&worktree);
    assert!(
        found.len() == 1 && found[0].contains("the hook guard is not in front of this work tree's hooks"),
        "{found:?}"
    );
    world.cmd().current_dir(&worktree).args(["hooks", "install"]).run().ok();
    assert_eq!(warnings(&worktree), Vec::<String>::new());
}

/// husky v9's `prepare` script (every `npm install`/`npm ci`) rewrites `.husky/_`,
/// which is read-only inside (its hooks run on the host): it used to fail the install
/// with `EROFS … unlink '.husky/_/husky.sh'`. The sandbox now sets `HUSKY=0` in a husky
/// project, so the install skips that step and succeeds, `.husky/_` stays as the user
/// made it, and the hooks still run for the agent's commits (the git guard takes
/// `HUSKY=0` out of git's environment, without a notice since the sandbox set it).
#[test]
fn npm_install_and_ci_work_inside_a_husky_project_and_its_hooks_still_run() {
    require_bwrap!();
    let world = World::new();
    let proj = world.project.clone();
    write_husky_package(&world);
    world.write(
        "home/proj/test.js",
        "if (require('fs').readFileSync('src.txt', 'utf8').includes('bad')) { console.error('src.txt is bad'); process.exit(1); }\n",
    );
    world.write("home/proj/src.txt", "fine\n");
    world.write("home/proj/.gitignore", "node_modules/\n");
    world.write("home/proj/.husky/pre-commit", "npm test\n");
    if !install(host(&world, &proj, "npm", &["install", "--no-audit", "--no-fund"])) {
        return;
    }
    assert_eq!(world.git(&["config", "core.hooksPath"]).trim(), ".husky/_", "husky's prepare set its hooks");
    world.git(&["add", "-A"]);
    world.git(&["-c", "core.hooksPath=/dev/null", "commit", "-qm", "project setup"]);
    let generated = world.read("home/proj/.husky/_/pre-commit");
    let path = path(&world);
    let exec = |script: &str| world.cmd().env("PATH", &path).args(["exec", "--", "sh", "-c", script]).run();
    for install in
        ["npm install --offline --no-audit --no-fund", "npm ci --offline --no-audit --no-fund", "npm run prepare"]
    {
        let run = exec(&format!("{install} >/dev/null 2>/tmp/err; echo status=$?; cat /tmp/err >&2"));
        assert_eq!(run.ok(), "status=0\n", "{install}: {}", run.stderr());
        assert!(!run.stderr().contains("EROFS"), "{install}: {}", run.stderr());
    }
    assert_eq!(world.read("home/proj/.husky/_/pre-commit"), generated, "husky did not rewrite its hooks");
    // The hooks beside it: a commit the project's pre-commit refuses is refused, a good one lands.
    let run = exec("echo bad >> src.txt && git commit -qam bad; echo status=$?; git checkout -q src.txt");
    assert_eq!(run.ok(), "status=1\n", "{}", run.stderr());
    assert!(run.stderr().contains("src.txt is bad"), "the husky hook ran: {}", run.stderr());
    let run = exec("echo more >> src.txt && git commit -qam good && echo committed");
    assert_eq!(run.ok(), "committed\n", "{}", run.stderr());
    assert!(!run.stderr().contains("HUSKY"), "no notice about the sandbox's own HUSKY=0: {}", run.stderr());
    // An agent's own HUSKY=0 for git is still removed.
    let run = exec("echo bad >> src.txt && HUSKY=0 git commit -qam bad; echo status=$?");
    assert_eq!(run.ok(), "status=1\n", "{}", run.stderr());
}
