//! Tools as people install them: an agent from the native installer (its program
//! read-only, its state read-write) and package caches that persist from the first
//! session on.

use std::os::unix::fs::FileTypeExt;

use crate::support::{require_bwrap, World};

#[test]
fn a_native_installer_agent_runs_but_its_program_cannot_be_replaced() {
    require_bwrap!();
    let world = World::new();
    // ~/.local/bin/claude -> ~/.local/share/claude/versions/2.0.0, as Claude Code's
    // native installer lays it out.
    let real = script(&world, "home/.local/share/claude/versions/2.0.0", "#!/bin/sh\necho agent-ran\n");
    fs_err::create_dir_all(world.path("home/.local/bin")).expect("mkdir");
    std::os::unix::fs::symlink(&real, world.path("home/.local/bin/claude")).expect("symlink");
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", world.path("home/.local/bin").display());
    let run = world.cmd().env("PATH", &path).args(["exec", "--", "claude"]).run();
    assert_eq!(run.ok(), "agent-ran\n");
    // The attack: replace the program the user runs outside the sandbox too.
    let versions = world.path("home/.local/share/claude/versions");
    let attacks = [
        format!("echo 'echo trojan' > {}/2.0.0", versions.display()),
        format!("rm -f {0}/2.0.0 && echo 'echo trojan' > {0}/2.0.0", versions.display()),
        format!("echo 'echo trojan' > /tmp/t && mv /tmp/t {}/2.0.0", versions.display()),
        format!("ln -sf /tmp/t {}/../../bin/claude", versions.display()),
    ];
    for attack in &attacks {
        let run = world.cmd().env("PATH", &path).args(["exec", "--", "sh", "-c", attack]).run();
        assert_ne!(run.code(), 0, "{attack}");
    }
    assert_eq!(world.read("home/.local/share/claude/versions/2.0.0"), "#!/bin/sh\necho agent-ran\n");
    // Its state stays writable and persists; the settings its host process runs do not
    // (`agent_settings`).
    let script =
        "echo '{\"token\": 1}' > ~/.claude/.credentials.json && ! echo {} 2>/dev/null > ~/.claude/settings.json";
    world.cmd().env("PATH", &path).args(["exec", "--", "sh", "-c", script]).run().ok();
    assert_eq!(world.read("home/.claude/.credentials.json"), "{\"token\": 1}\n");
    assert!(world.path("home/.claude/settings.json").symlink_metadata().is_err());
}

#[test]
fn the_first_sessions_downloads_persist_for_installed_tools() {
    require_bwrap!();
    let world = World::new();
    // A `cargo` on PATH, as rustup installs it; no ~/.cargo/registry yet.
    script(&world, "home/.cargo/bin/cargo", "#!/bin/sh\nexit 0\n");
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", world.path("home/.cargo/bin").display());
    let run = world
        .cmd()
        .env("PATH", &path)
        .args([
            "exec",
            "--debug",
            "--",
            "sh",
            "-c",
            "mkdir -p ~/.cargo/registry/cache && echo crate > ~/.cargo/registry/cache/x",
        ])
        .run();
    run.ok();
    assert!(run.stderr().contains("so that its downloads persist"), "{}", run.stderr());
    // The directory exists on the host; the download is in the sandbox's own layer
    // (`caches.rs`), which the next session sees.
    assert!(world.path("home/.cargo/registry").is_dir());
    let run = world.cmd().env("PATH", &path).args(["exec", "--", "sh", "-c", "cat ~/.cargo/registry/cache/x"]).run();
    assert_eq!(run.ok(), "crate\n");
    // A tool that is not installed gets no directory.
    assert!(!world.path("home/.cache/golangci-lint").exists());
}

/// An executable script at `rel` under the world's root.
fn script(world: &World, rel: &str, body: &str) -> std::path::PathBuf {
    let path = world.write(rel, body);
    world.chmod(rel, 0o755);
    path
}

#[test]
fn tools_installed_under_home_run_inside_read_only() {
    require_bwrap!();
    let world = World::new();
    // `npm install -g --prefix ~/.local pkg`: ~/.local/bin/pkg -> ../lib/node_modules/pkg/cli.js,
    // which reads a file of its own package (as `require('../lib/cli.js')` does).
    world.write("home/.local/lib/node_modules/pkg/package.json", "{}");
    world.write("home/.local/lib/node_modules/pkg/lib/data", "npm-tool-ran\n");
    script(
        &world,
        "home/.local/lib/node_modules/pkg/bin/cli.js",
        "#!/bin/sh\ncat \"$(dirname \"$(readlink -f \"$0\")\")/../lib/data\"\n",
    );
    // `pipx install tool`: ~/.local/bin/tool -> ~/.local/share/pipx/venvs/tool/bin/tool.
    world.write("home/.local/share/pipx/venvs/tool/pyvenv.cfg", "home = /usr/bin\n");
    script(&world, "home/.local/share/pipx/venvs/tool/bin/tool", "#!/bin/sh\necho pipx-tool-ran\n");
    fs_err::create_dir_all(world.path("home/.local/bin")).expect("mkdir");
    for (link, target) in [("pkg", "../lib/node_modules/pkg/bin/cli.js"), ("tool", "../share/pipx/venvs/tool/bin/tool")]
    {
        std::os::unix::fs::symlink(target, world.path(&format!("home/.local/bin/{link}"))).expect("symlink");
    }
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", world.path("home/.local/bin").display());
    let run = world.cmd().env("PATH", &path).args(["exec", "--", "sh", "-c", "pkg && tool"]).run();
    assert_eq!(run.ok(), "npm-tool-ran\npipx-tool-ran\n");
    // Their programs cannot be changed from inside.
    let lib = world.path("home/.local/lib/node_modules/pkg/lib/data");
    let attack = format!("echo trojan > {}", lib.display());
    let run = world.cmd().env("PATH", &path).args(["exec", "--", "sh", "-c", &attack]).run();
    assert_ne!(run.code(), 0);
    assert_eq!(world.read("home/.local/lib/node_modules/pkg/lib/data"), "npm-tool-ran\n");
}

#[test]
fn a_symlink_planted_in_a_writable_path_directory_shows_nothing_next_time() {
    require_bwrap!();
    let world = World::new();
    world.write("home/Documents/private.txt", "PRIVATE\n");
    // The user has the project's `bin/` on PATH; the agent plants a link there.
    let bin = world.path("home/proj/bin");
    let plant = format!("mkdir -p bin && ln -s {} bin/notes", world.path("home/Documents/private.txt").display());
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    world.cmd().env("PATH", &path).args(["exec", "--", "sh", "-c", &plant]).run().ok();
    let read = format!("cat {} 2>/dev/null; echo end", world.path("home/Documents/private.txt").display());
    let run = world.cmd().env("PATH", &path).args(["exec", "--", "sh", "-c", &read]).run();
    assert_eq!(run.ok(), "end\n");
}

#[test]
fn a_link_the_agent_writes_into_the_users_tool_chain_shows_nothing_next_time() {
    require_bwrap!();
    let world = World::new();
    world.write("home/.config/rclone/rclone.conf", "SECRET_TOKEN=hunter2\n");
    // The user's own dev build on PATH: ~/.local/bin/mytool -> the project's build output.
    script(&world, "home/proj/target/release/mytool", "#!/bin/sh\necho mine\n");
    fs_err::create_dir_all(world.path("home/.local/bin")).expect("mkdir");
    std::os::unix::fs::symlink(world.path("home/proj/target/release/mytool"), world.path("home/.local/bin/mytool"))
        .expect("symlink");
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", world.path("home/.local/bin").display());
    let rclone = world.path("home/.config/rclone");
    let plant = format!("rm target/release/mytool && ln -s {} target/release/mytool", rclone.display());
    world.cmd().env("PATH", &path).args(["exec", "--", "sh", "-c", &plant]).run().ok();
    let read = format!("cat {}/rclone.conf 2>/dev/null; echo end", rclone.display());
    let run = world.cmd().env("PATH", &path).args(["exec", "--", "sh", "-c", &read]).run();
    assert_eq!(run.ok(), "end\n", "{}", run.stderr());
}

/// Claude Code's `~/.claude.json`, replaced the way Claude Code does it (a new file
/// renamed over it): the replace works inside, the change reaches `~/.claude.json`, a
/// file first created inside is kept, and a change made outside meanwhile wins.
#[test]
fn claude_json_survives_atomic_replace_and_first_creation() {
    require_bwrap!();
    let world = World::new();
    world.write("home/.claude/settings.json", "{}\n");
    // As Claude Code writes its state file: beside it, then renamed over it.
    let save = |content: &str| {
        format!(
            "f=\"${{CLAUDE_CONFIG_DIR:-$HOME}}/.claude.json\" && printf '{content}' > \"$f.tmp\" && mv \"$f.tmp\" \"$f\" \
             && cat \"$f\""
        )
    };
    // First creation.
    let run = world.sh(&[], &save("{\"first\": 1}"));
    assert_eq!(run.ok(), "{\"first\": 1}", "{}", run.stderr());
    assert_eq!(world.read("home/.claude.json"), "{\"first\": 1}");
    // Read back and replaced in a later session.
    let run = world.sh(&[], &format!("cat \"$CLAUDE_CONFIG_DIR/.claude.json\" && echo && {}", save("{\"second\": 2}")));
    assert_eq!(run.ok(), "{\"first\": 1}\n{\"second\": 2}", "{}", run.stderr());
    assert_eq!(world.read("home/.claude.json"), "{\"second\": 2}");
    // Changed outside during the session: the user's version stays, the warning says where
    // the sandbox's is.
    let outside = world.path("home/.claude.json");
    let script = format!("printf '{{\"user\": 3}}' > {} && {}", outside.display(), save("{\"agent\": 4}"));
    let run = world.sh(&["--rw", outside.to_str().expect("utf-8")], &script);
    assert!(run.stderr().contains("changed outside the sandbox during the session"), "{}", run.stderr());
    assert_eq!(world.read("home/.claude.json"), "{\"user\": 3}");
    assert_eq!(world.read("home/.claude/.claude.json"), "{\"agent\": 4}");
    // The agent's copy made a symlink to a host secret: nothing is read through it, so
    // the secret never reaches ~/.claude.json (and the next session).
    world.write("home/.ssh/id_ed25519", "PRIVATE KEY\n");
    let link = format!("ln -sf {} \"$CLAUDE_CONFIG_DIR/.claude.json\"", world.path("home/.ssh/id_ed25519").display());
    world.sh(&[], &link).ok();
    assert_eq!(world.read("home/.claude.json"), "{\"user\": 3}");
    // A state file that cannot be read (here a FIFO) is never written over, and never
    // blocks the start.
    fs_err::remove_file(&outside).expect("rm");
    let made = std::process::Command::new("mkfifo").arg(&outside).status().expect("mkfifo");
    assert!(made.success());
    let run = world.cmd().args(["exec", "--", "sh", "-c", &save("{\"agent\": 5}")]).run_within(60);
    assert!(run.stderr().contains("warning: cannot read"), "{}", run.stderr());
    assert!(fs_err::symlink_metadata(&outside).expect("still there").file_type().is_fifo());
}

/// The agent CLIs installed for real, as their users do: `npm install -g --prefix
/// ~/.local @anthropic-ai/claude-code @openai/codex`, and Claude Code's native binary laid
/// out as its native installer does (`~/.local/bin/claude` ->
/// `~/.local/share/claude/versions/V`). Each runs inside; its program cannot be
/// modified, replaced or deleted from inside; its state persists.
#[test]
fn the_agent_clis_installed_for_real_run_inside_and_stay_the_users() {
    require_bwrap!();
    let world = World::new();
    let prefix = world.home.join(".local");
    // The runner's own npm cache: the second run (and the unprivileged one) reuse it.
    let cache = std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".npm")).expect("HOME");
    // With `--prefix`, npm reads its "global" config from `PREFIX/etc/npmrc`: keep the
    // machine's (where a registry's CA or proxy may be configured).
    let global = std::process::Command::new("npm").args(["config", "get", "globalconfig"]).output().expect("npm");
    let global = String::from_utf8_lossy(&global.stdout).trim().to_owned();
    let out = std::process::Command::new("npm")
        .env("npm_config_globalconfig", &global)
        .args(["install", "-g", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .args(["@anthropic-ai/claude-code", "@openai/codex"])
        .env("HOME", &world.home)
        .env("npm_config_cache", &cache)
        .output();
    match out {
        Ok(out) if out.status.success() => {}
        other => {
            let why = match other {
                Ok(out) => String::from_utf8_lossy(&out.stderr).into_owned(),
                Err(err) => err.to_string(),
            };
            assert!(std::env::var_os("CI").is_none(), "installing the agent CLIs from npm failed in CI: {why}");
            eprintln!("skipping: cannot install the agent CLIs from npm here: {why}");
            return;
        }
    }
    let path = format!("{}/bin:/usr/local/bin:/usr/bin:/bin", prefix.display());
    let exec = |script: &str| world.cmd().env("PATH", &path).args(["exec", "--", "sh", "-c", script]).run();
    let run = world.cmd().env("PATH", &path).args(["exec", "--", "claude", "--version"]).run();
    assert!(run.ok().contains("Claude Code"), "{}", run.stderr());
    let run = world.cmd().env("PATH", &path).args(["exec", "--", "codex", "--version"]).run();
    assert!(run.ok().contains("codex"), "{}", run.stderr());

    // Attacks on each program: overwrite, delete, replace by rename, redirect the link.
    let attack = |program: &std::path::Path, link: &std::path::Path| {
        let before = fs_err::read(program).expect("program");
        let p = program.display();
        for attack in [
            format!("echo trojan > {p}"),
            format!("rm {p}"),
            format!("echo trojan > /tmp/t && mv /tmp/t {p}"),
            format!("mv {p} {p}.old"),
            format!("ln -sfn /tmp/t {}", link.display()),
        ] {
            let run = exec(&attack);
            assert_ne!(run.code(), 0, "`{attack}` succeeded");
        }
        assert_eq!(fs_err::read(program).expect("program"), before, "{p} changed");
    };
    let npm_claude = std::fs::canonicalize(prefix.join("bin/claude")).expect("claude's binary");
    attack(&npm_claude, &prefix.join("bin/claude"));
    attack(&std::fs::canonicalize(prefix.join("bin/codex")).expect("codex's script"), &prefix.join("bin/codex"));

    // The native installer's layout, with the real native binary from the npm package;
    // as the native installer does, it takes over `~/.local/bin/claude`.
    let versions = world.home.join(".local/share/claude/versions");
    fs_err::create_dir_all(&versions).expect("mkdir");
    fs_err::copy(&npm_claude, versions.join("2.1.0")).expect("copy");
    fs_err::remove_file(prefix.join("bin/claude")).expect("unlink");
    std::os::unix::fs::symlink(versions.join("2.1.0"), prefix.join("bin/claude")).expect("symlink");
    let run = world.cmd().env("PATH", &path).args(["exec", "--", "claude", "--version"]).run();
    assert!(run.ok().contains("Claude Code"), "{}", run.stderr());
    attack(&versions.join("2.1.0"), &prefix.join("bin/claude"));

    // State persists: what the agents write in their state directories is there after.
    let run = exec("echo kept > ~/.claude/state-check && echo kept > ~/.codex/state-check && echo ok");
    assert_eq!(run.ok(), "ok\n", "{}", run.stderr());
    assert_eq!(world.read("home/.claude/state-check"), "kept\n");
    assert_eq!(world.read("home/.codex/state-check"), "kept\n");
}

/// The other places version managers and installers put their programs: each runs inside
/// from its usual PATH entry, and cannot be changed from inside.
#[test]
fn version_managers_and_installers_programs_run_inside_read_only() {
    require_bwrap!();
    let world = World::new();
    let places = [
        ".npm-global/bin",          // npm's documented user prefix
        ".asdf/shims",              // asdf
        ".local/share/mise/shims",  // mise
        ".fnm/aliases/default/bin", // fnm
        ".deno/bin",                // deno install
        ".local/share/pnpm",        // pnpm's global bin
    ];
    let mut path = String::new();
    let mut script_text = String::new();
    for (index, place) in places.iter().enumerate() {
        script(&world, &format!("home/{place}/tool{index}"), &format!("#!/bin/sh\necho {index}\n"));
        path.push_str(&format!("{}/{place}:", world.home.display()));
        script_text.push_str(&format!("tool{index} && "));
    }
    path.push_str("/usr/local/bin:/usr/bin:/bin");
    let run = world.cmd().env("PATH", &path).args(["exec", "--", "sh", "-c", &format!("{script_text}echo all")]).run();
    assert_eq!(run.ok(), "0\n1\n2\n3\n4\n5\nall\n", "{}", run.stderr());
    for (index, place) in places.iter().enumerate() {
        let program = world.home.join(format!("{place}/tool{index}"));
        let attack = format!("echo 'echo trojan' > {0}; rm -f {0}; echo 'echo trojan' > {0}", program.display());
        world.cmd().env("PATH", &path).args(["exec", "--", "sh", "-c", &attack]).run();
        assert_eq!(fs_err::read_to_string(&program).expect("program"), format!("#!/bin/sh\necho {index}\n"));
    }
}
