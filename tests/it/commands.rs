//! Command wrappers: `false` denies every route to the command, a script wrapper gets the
//! real binary, `true` runs it unwrapped.

use crate::support::{require_bwrap, World};

#[test]
fn a_denied_command_is_refused_by_name_and_by_absolute_path_and_audited() {
    require_bwrap!();
    let world = World::new();
    let run = world.sh(
        &["--cmd", "python3=false"],
        "python3 -c 'print(1)'; echo code=$?; /usr/bin/python3 -c 'print(2)'; echo code=$?; \
         p=$(readlink -f /usr/bin/python3); $p -c 'print(3)'; echo code=$?; echo still-running",
    );
    assert_eq!(run.ok(), "code=126\ncode=126\ncode=126\nstill-running\n");
    assert!(
        run.stderr().contains("agent-sandbox: `python3` is blocked in this sandbox (commands.python3 = false)."),
        "{}",
        run.stderr()
    );
    let log = world.audit_log();
    let refusals = log.lines().filter(|line| line.contains(r#""policy":"command-deny""#)).count();
    assert_eq!(refusals, 3, "{log}");
    assert!(log.contains(r#""reason":"arguments: -c print(1)","source":"sandbox""#), "{log}");
}

#[test]
fn a_wrapper_script_gets_the_original_arguments_and_the_real_binary() {
    require_bwrap!();
    let world = World::new();
    let wrapper = world.write(
        "home/bin/git-wrapper",
        "#!/bin/sh\necho \"wrapped $AGENT_SANDBOX_CMD: $*\" >&2\ncase \"$1\" in gc) echo no gc >&2; exit 3;; esac\nexec \"$AGENT_SANDBOX_REAL\" \"$@\"\n",
    );
    world.chmod("home/bin/git-wrapper", 0o755);
    let flag = format!("git={}", wrapper.display());
    let run = world.sh(&["--cmd", &flag], "git rev-parse --is-inside-work-tree; git gc; echo gc=$?");
    assert_eq!(run.ok(), "true\ngc=3\n");
    assert!(run.stderr().contains("wrapped git: rev-parse --is-inside-work-tree"), "{}", run.stderr());
}

#[test]
fn true_runs_a_command_unwrapped() {
    require_bwrap!();
    let world = World::new();
    let out = world.sh(&["--cmd", "git=true"], "cmp -s /usr/local/bin/git $(command -v git) || cmp -s /usr/bin/git $(command -v git); echo same=$?; git --version | cut -c1-11").ok();
    assert_eq!(out, "same=0\ngit version\n");
}

#[test]
fn a_missing_wrapper_is_an_error_before_anything_runs() {
    require_bwrap!();
    let world = World::new();
    let run = world.sh(&["--cmd", "npm=./nope.sh"], "touch ran");
    assert_eq!(run.code(), 125);
    assert_eq!(
        run.stderr(),
        format!(
            "agent-sandbox: error: commands.npm: wrapper {}/nope.sh is not an executable file (from cli (--cmd)) (check the path and chmod +x it)\n",
            world.project.display()
        )
    );
    assert!(!world.path("home/proj/ran").exists());
}

/// Script-based commands (npm, npx, yarn, pnpm, npm-installed CLIs) load files relative
/// to themselves; wrapped, they still find them, because the real command runs from its
/// whole installation. README's wrapper example over the machine's own npm, and over a
/// CLI installed with `npm install -g --prefix ~/.local` whose bin script requires
/// `../lib/…`.
#[test]
fn a_wrapper_over_a_script_based_command_runs_it_from_its_installation() {
    require_bwrap!();
    if std::process::Command::new("npm").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "npm is part of CI's machine (xtask installs it)");
        eprintln!("skipping: npm not found (install nodejs and npm)");
        return;
    }
    let world = World::new();
    let guard = world.write(
        "home/bin/npm-guard",
        "#!/bin/sh\ncase \"$1\" in publish|unpublish) echo \"publishing is not allowed here\" >&2; exit 1;; esac\n\
         exec \"$AGENT_SANDBOX_REAL\" \"$@\"\n",
    );
    world.chmod("home/bin/npm-guard", 0o755);
    // A CLI as npm installs it: ~/.local/bin/hello -> ../lib/node_modules/hello/bin/hello.js,
    // which requires ../lib/greet.js.
    world.write(
        "home/src/hello/package.json",
        r#"{"name": "hello", "version": "1.0.0", "bin": {"hello": "bin/hello.js"}}"#,
    );
    world.write(
        "home/src/hello/bin/hello.js",
        "#!/usr/bin/env node\nconsole.log(require('../lib/greet.js')(process.argv[2]));\n",
    );
    world.write("home/src/hello/lib/greet.js", "module.exports = (who) => `hello ${who}`;\n");
    let npm = |args: &[&str]| {
        let out = std::process::Command::new("npm")
            .args(args)
            .current_dir(world.home.join("src"))
            .env("HOME", &world.home)
            .output()
            .expect("npm");
        assert!(out.status.success(), "npm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    // Packed first: installing a directory would only link to it, as `npm link` does.
    npm(&["pack", "--silent", "./hello"]);
    let prefix = world.home.join(".local");
    let prefix = prefix.to_str().expect("utf-8");
    npm(&["install", "-g", "--offline", "--no-audit", "--no-fund", "--prefix", prefix, "./hello-1.0.0.tgz"]);
    let hello_guard = world.write("home/bin/hello-guard", "#!/bin/sh\nexec \"$AGENT_SANDBOX_REAL\" \"$@\"\n");
    world.chmod("home/bin/hello-guard", 0o755);
    // A local dependency, so `npm install` needs no registry.
    world.write("home/proj/dep/package.json", r#"{"name": "dep", "version": "1.0.0"}"#);
    world.write(
        "home/proj/package.json",
        r#"{"name": "proj", "version": "1.0.0", "dependencies": {"dep": "file:./dep"}}"#,
    );
    let npm_flag = format!("npm={}", guard.display());
    let hello_flag = format!("hello={}", hello_guard.display());
    let path = format!("{}/.local/bin:/usr/local/bin:/usr/bin:/bin", world.home.display());
    let run = world.cmd().env("PATH", &path).args(["exec", "--cmd", &npm_flag, "--cmd", &hello_flag, "--", "sh", "-c",
        "npm --version >/dev/null && echo version-ok; \
         npm install --offline --no-audit --no-fund >/dev/null && test -f node_modules/dep/package.json && echo install-ok; \
         npm publish; echo publish=$?; \
         hello world; \
         case \"$(command -v hello)\" in */.local/bin/hello) echo on-path;; esac"]).run();
    assert_eq!(run.ok(), "version-ok\ninstall-ok\npublish=1\nhello world\non-path\n", "{}", run.stderr());
    assert!(run.stderr().contains("publishing is not allowed here"), "{}", run.stderr());
}

/// An installation is mounted whole only where the sandbox cannot write and nothing in it
/// is hidden: a package.json planted at the project's top, with a "real" command in the
/// project first on PATH, must not mount the project again without its secret masks
/// (read-write or read-only project alike). The wrapped command still runs.
#[test]
fn a_planted_package_json_does_not_remount_the_project_unmasked() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/.env", "API_KEY=secret\n");
    world.write("home/proj/package.json", "{}");
    world.write("home/proj/bin/tool", "#!/bin/sh\necho real-tool\n");
    world.chmod("home/proj/bin/tool", 0o755);
    let guard = world.write("home/bin/tool-guard", "#!/bin/sh\nexec \"$AGENT_SANDBOX_REAL\" \"$@\"\n");
    world.chmod("home/bin/tool-guard", 0o755);
    let flag = format!("tool={}", guard.display());
    let path = format!("{}/bin:/usr/local/bin:/usr/bin:/bin", world.project.display());
    for extra in [&[][..], &["--read-only"][..]] {
        let run = world
            .cmd()
            .env("PATH", &path)
            .args(["exec", "--cmd", &flag])
            .args(extra)
            .args(["--", "sh", "-c", "tool; cat /run/agent-sandbox/packages/tool/.env 2>/dev/null; cat .env; echo end"])
            .run();
        assert_eq!(run.ok(), "real-tool\nend\n", "{extra:?}: {}", run.stderr());
    }
}
