//! Secret files inside the project cannot be read, overwritten or unmasked; the scan
//! that finds them fails closed.

use crate::support::{is_root, require_bwrap, World};

const PROJECT_SECRETS: &[&str] = &[
    "home/proj/.env",
    "home/proj/.env.local",
    "home/proj/config/prod.pem",
    "home/proj/server.key",
    "home/proj/aws_credentials.json",
    "home/proj/My_Secret.txt",
    "home/proj/node_modules/pkg/deep/.env",
    // Inside directories named like git's `HEAD`, which the scan also looks for.
    "home/proj/head/.env",
    "home/proj/HEAD/sub/id_rsa",
];

fn world() -> World {
    let world = World::new();
    for secret in PROJECT_SECRETS {
        world.write(secret, "TOPSECRET\n");
    }
    world.write("home/proj/secrets/db.txt", "TOPSECRET\n");
    world.write("home/proj/.env.example", "API_KEY=changeme\n");
    world
}

#[test]
fn secret_files_read_as_empty_and_templates_stay_readable() {
    require_bwrap!();
    let world = world();
    let out = world
        .sh(&[], "cat .env .env.local config/prod.pem server.key aws_credentials.json My_Secret.txt node_modules/pkg/deep/.env head/.env HEAD/sub/id_rsa secrets/db.txt 2>&1; cat .env.example")
        .ok();
    assert!(!out.contains("TOPSECRET"), "{out}");
    assert!(out.contains("API_KEY=changeme"), "{out}");
}

#[test]
fn secret_files_cannot_be_overwritten_removed_or_unmasked() {
    require_bwrap!();
    let world = world();
    let attacks = [
        "echo pwned > .env",
        "rm -f .env",
        "mv .env moved",
        "ln .env hardlink",
        "cp /etc/hostname .env",
        "python3 -c 'import os; open(\"tmp\",\"w\").write(\"x\"); os.replace(\"tmp\", \".env\")'",
        "umount .env",
        "umount -l secrets",
        "mount --bind README.md .env",
        "unshare -Urm sh -c 'umount .env; cat .env'",
        "rm -rf secrets",
        "touch secrets/new",
    ];
    let mut script = String::new();
    for (idx, attack) in attacks.iter().enumerate() {
        script.push_str(&format!("{attack} >/dev/null 2>&1; cat .env secrets/db.txt 2>/dev/null | grep -q TOPSECRET && echo 'LEAK after attack {idx}'\n"));
    }
    script.push_str("echo done\n");
    let out = world.sh(&[], &script).ok();
    assert_eq!(out, "done\n");
    for secret in PROJECT_SECRETS {
        assert_eq!(world.read(secret), "TOPSECRET\n", "{secret} unchanged on the host");
    }
    assert!(world.path("home/proj/secrets/db.txt").exists());
    assert!(!world.path("home/proj/moved").exists() && !world.path("home/proj/hardlink").exists());
}

#[test]
fn a_symlinked_secret_name_masks_its_target() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/config/settings.txt", "TOPSECRET\n");
    std::os::unix::fs::symlink("config/settings.txt", world.path("home/proj/.env")).expect("symlink");
    let out = world.sh(&[], "cat .env config/settings.txt; echo end").ok();
    assert_eq!(out, "end\n");
}

/// The scan reads no contents: FIFOs named like secrets (and like the files the checks
/// watch) never hold up the start, and one named like a secret is masked like a file.
#[test]
fn fifos_named_like_secrets_neither_block_the_start_nor_show_through() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/src/lib.rs", "pub fn f() {}\n");
    for fifo in ["home/proj/.env", "home/proj/config/prod.pem", "home/proj/sub/HEAD", "home/proj/web/.envrc"] {
        let path = world.path(fifo);
        fs_err::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL");
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo {fifo}");
    }
    let run = world.sh(&[], "test -p .env && echo fifo-masked; test -s .env || echo empty; cat src/lib.rs");
    // The legitimate use beside it: the project's own files read as they are.
    assert_eq!(run.ok(), "empty\npub fn f() {}\n", "{}", run.stderr());
}

/// Beyond bwrap's share (`sandbox::plan::MASKS_BY_BWRAP`), the masks are mounted by the
/// sandbox's first process, which then gives up every capability: they read empty, are
/// read-only, and cannot be unmounted, remounted, escaped through a user namespace or
/// read through another process's root (`/proc/1/root`: the sandbox's pid 1 is the
/// process that made them); the command runs with no capability at all.
#[test]
fn many_masks_hold_like_a_few_and_leave_no_capability() {
    require_bwrap!();
    let world = World::new();
    let count = sandbox::plan::MASKS_BY_BWRAP + 8;
    for index in 0..count {
        world.write(&format!("home/proj/packages/p{index}/.env"), "TOPSECRET\n");
        world.write(&format!("home/proj/packages/p{index}/index.js"), "ok\n");
    }
    let last = format!("packages/p{}/.env", count - 1);
    let script = format!(
        "cat packages/p0/.env {last}; echo read; \
         (echo x > packages/p0/.env) 2>/dev/null || echo write-refused; \
         umount packages/p0/.env 2>/dev/null || echo umount-refused; \
         umount -l {last} 2>/dev/null || echo lazy-umount-refused; \
         mount -o remount,rw packages/p0/.env 2>/dev/null || echo remount-refused; \
         unshare -Urm true 2>/dev/null || echo userns-refused; \
         cat /proc/1/root$PWD/packages/p0/.env /proc/1/cwd/packages/p0/.env 2>/dev/null; \
         for p in /proc/[0-9]*; do cat $p/root$PWD/{last} $p/cwd/{last} 2>/dev/null; done; \
         grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status | awk '{{print $2}}' | sort -u; \
         cat packages/p1/index.js; echo legit > packages/p1/notes.txt && echo wrote"
    );
    let out = world.sh(&[], &script).ok();
    assert_eq!(
        out,
        "read\nwrite-refused\numount-refused\nlazy-umount-refused\nremount-refused\nuserns-refused\n0000000000000000\nok\nwrote\n"
    );
    assert_eq!(world.read("home/proj/packages/p0/.env"), "TOPSECRET\n");
    // With the network off (no bridge after `mask-init`) too.
    let out = world.sh(&["--network", "off"], &format!("cat {last}; echo end")).ok();
    assert_eq!(out, "end\n");
}

#[test]
fn secret_patterns_are_configurable() {
    require_bwrap!();
    let world = world();
    world.write("home/proj/notes.private", "TOPSECRET\n");
    world.project_config(r#"{ "secrets": { "patterns": ["*.private"], "allow": [".env.local"] } }"#);
    let out = world.sh(&[], "cat notes.private .env.local .env; echo end").ok();
    assert_eq!(out, "TOPSECRET\nend\n", ".env.local allowed, *.private added, .env still masked");
}

#[test]
fn masked_files_are_recorded_in_the_audit_log() {
    require_bwrap!();
    let world = world();
    world.sh(&[], "true").ok();
    let log = world.audit_log();
    let env_line = log
        .lines()
        .find(|line| line.contains(&format!("\"target\":\"{}\"", world.path("home/proj/.env").display())))
        .unwrap_or_else(|| panic!("no audit entry for .env in:\n{log}"));
    assert!(env_line.contains(r#""operation":"read","#), "{env_line}");
    assert!(
        env_line
            .contains(r#""result":"masked","policy":"sensitive-file-pattern","reason":"matches .env","source":"host""#),
        "{env_line}"
    );
    assert!(env_line.contains(r#""agent":"sh""#), "{env_line}");
}

#[test]
fn an_unreadable_directory_stops_the_start_instead_of_exposing_what_is_inside() {
    require_bwrap!();
    if is_root() {
        eprintln!("skipping: root reads mode-000 directories, so nothing is unreadable (CI runs this as non-root too)");
        return;
    }
    let world = world();
    world.write("home/proj/locked/.env", "TOPSECRET\n");
    world.chmod("home/proj/locked", 0o000);
    let run = world.sh(&[], "touch started");
    world.chmod("home/proj/locked", 0o755);
    assert_eq!(run.code(), 125, "{}", run.stderr());
    let locked = world.path("home/proj/locked");
    assert_eq!(
        run.stderr(),
        format!(
            "agent-sandbox: error: cannot scan {} for secret files: Permission denied (os error 13) (fix its permissions, or exclude it with --exclude {})\n",
            locked.display(),
            locked.display()
        )
    );
    assert!(!world.path("home/proj/started").exists(), "the command must not run");
    // The hint works: excluded, the directory is not scanned and not visible.
    world.chmod("home/proj/locked", 0o000);
    let run = world.sh(&["--exclude", "locked"], "touch started");
    world.chmod("home/proj/locked", 0o755);
    run.ok();
    assert!(world.path("home/proj/started").exists());
}

#[test]
fn a_masked_symlink_target_is_audited_under_its_own_path() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/config/settings.txt", "TOPSECRET\n");
    std::os::unix::fs::symlink("config/settings.txt", world.path("home/proj/.env")).expect("symlink");
    world.sh(&[], "true").ok();
    let log = world.audit_log();
    let target = world.path("home/proj/config/settings.txt");
    assert!(
        log.contains(&format!(
            "\"target\":\"{}\",\"result\":\"masked\",\"policy\":\"sensitive-file-pattern\",\"reason\":\"target of {}, which matches .env\"",
            target.display(),
            world.path("home/proj/.env").display()
        )),
        "{log}"
    );
}

#[test]
fn tracked_unchanged_files_are_not_masked_and_masked_files_cannot_be_committed_empty() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/src/secret_store.rs", "pub fn store() {}\n");
    world.write("home/proj/config/credentials.json", "{\"template\": true}\n");
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "sources"]);
    // The user fills the tracked template with real credentials, without committing.
    world.write("home/proj/config/credentials.json", "{\"password\": \"TOPSECRET\"}\n");
    world.write("home/proj/.git/hooks/pre-commit", "#!/bin/sh\nexit 0\n");
    world.chmod("home/proj/.git/hooks/pre-commit", 0o755);
    world.cmd().args(["hooks", "install"]).run().ok();
    // A tracked, unchanged source file is readable: its content is in .git anyway.
    let out = world.sh(&[], "cat src/secret_store.rs; cat config/credentials.json; echo end").ok();
    assert_eq!(out, "pub fn store() {}\nend\n");
    // Committing everything must not record the masked file as empty.
    let run = world.sh(&[], "echo '// edit' >> src/secret_store.rs && git commit -qam edit");
    assert!(run.stderr().contains("which the sandbox hides from you"), "{}", run.stderr());
    assert!(world.git(&["show", "HEAD:config/credentials.json"]).contains("template"));
    assert_eq!(world.read("home/proj/config/credentials.json"), "{\"password\": \"TOPSECRET\"}\n");
}

#[test]
fn dependency_and_build_trees_can_be_rebuilt() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/node_modules/.package-lock.json", "{}\n");
    world.write("home/proj/node_modules/dep/client-secret.js", "module.exports = 1;\n");
    world.write("home/proj/target/CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n");
    world.write("home/proj/target/debug/deps/libsecret_store-1.rlib", "x");
    world.write("home/proj/node_modules/dep/.env", "TOPSECRET\n");
    let out = world
        .sh(&[], "cat node_modules/dep/.env; rm -rf target && echo cleaned; rm node_modules/dep/client-secret.js && echo removed")
        .ok();
    assert_eq!(
        out, "cleaned\nremoved\n",
        "exact names stay masked; wildcard hits in dependency trees do not block rebuilds"
    );
}

/// Writes a project with a key in `certs/` (masked by `*.key`) and a real-looking npm
/// tree holding a package file that matches `*secret*`.
fn world_with_key_and_npm_tree() -> World {
    let world = World::new();
    world.write("home/proj/certs/server.key", "TOPSECRET\n");
    world.write("home/proj/certs/README", "certificates\n");
    world.write("home/proj/docs/guide.md", "guide\n");
    world.write("home/proj/node_modules/.package-lock.json", "{}\n");
    world.write("home/proj/node_modules/dep/client-secret.js", "module.exports = 1;\n");
    world
}

#[test]
fn a_masked_file_cannot_be_carried_away_by_renaming_its_parents() {
    require_bwrap!();
    let world = world_with_key_and_npm_tree();
    world.write("home/proj/deploy/prod/site.pem", "TOPSECRET\n");
    world.write("home/proj/app/.env", "TOPSECRET\n");
    // Each rename that would carry a secret into a dependency tree (where wildcard hits
    // are not masked at the next start) is refused; the next session still masks both.
    let attacks = [
        "mv certs target",
        "mv certs node_modules/certs",
        "mv certs .venv",
        "mv deploy vendor",
        "mv deploy/prod target",
        "mkdir -p target && mv certs target/",
    ];
    let mut script = String::new();
    for attack in attacks {
        script.push_str(&format!("{attack} 2>/dev/null && echo 'MOVED: {attack}'\n"));
    }
    // The legitimate use beside it: the pinned directories stay writable, a directory
    // without secrets renames as before, and so does one holding an exact name (`.env`
    // is masked wherever it goes, so nothing pins its parents).
    script.push_str(
        "echo new > certs/new.txt && cat certs/README && mv docs documentation && mv app node_modules/app && echo renamed; \
         echo end\n",
    );
    let out = world.sh(&[], &script).ok();
    assert_eq!(out, "certificates\nrenamed\nend\n");
    assert_eq!(world.read("home/proj/certs/server.key"), "TOPSECRET\n");
    assert_eq!(world.read("home/proj/deploy/prod/site.pem"), "TOPSECRET\n");
    assert_eq!(world.read("home/proj/node_modules/app/.env"), "TOPSECRET\n");
    let out = world
        .sh(
            &[],
            "cat certs/server.key deploy/prod/site.pem target/server.key vendor/prod/site.pem node_modules/app/.env 2>/dev/null; \
             echo end",
        )
        .ok();
    assert_eq!(out, "end\n");
}

#[test]
fn a_secret_renamed_into_a_dependency_tree_between_sessions_stays_masked() {
    require_bwrap!();
    let world = world_with_key_and_npm_tree();
    world.write("home/proj/vault/credentials.pem", "TOPSECRET\n");
    assert_eq!(world.sh(&[], "cat certs/server.key vault/credentials.pem; echo end").ok(), "end\n");
    // Renamed outside the sandbox (as a session without pins could have done): into a
    // directory made to look like cargo's, and into npm's real tree.
    std::fs::rename(world.path("home/proj/certs"), world.path("home/proj/target")).expect("rename");
    world.write("home/proj/target/CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n");
    std::fs::rename(world.path("home/proj/vault"), world.path("home/proj/node_modules/vault")).expect("rename");
    let run = world
        .cmd()
        .args(["exec", "--debug", "--", "sh", "-c"])
        .arg(
            "cat target/server.key node_modules/vault/credentials.pem; cat node_modules/dep/client-secret.js; echo end",
        )
        .run();
    assert_eq!(run.ok(), "module.exports = 1;\nend\n", "the renamed secrets masked, the package's file not");
    let stderr = run.stderr();
    let earlier = world.path("home/proj/certs/server.key");
    assert!(
        stderr.contains(&format!(
            "secret target/server.key: masked in an earlier session as {}, so masked in {} too",
            earlier.display(),
            world.path("home/proj/target").display()
        )),
        "{stderr}"
    );
    // Still recognised a session later (the record is rewritten at every start).
    let out = world.sh(&[], "cat target/server.key node_modules/vault/credentials.pem; echo end").ok();
    assert_eq!(out, "end\n");
}

#[test]
fn an_unreadable_record_of_masks_exempts_no_dependency_tree() {
    require_bwrap!();
    let world = world_with_key_and_npm_tree();
    world.sh(&[], "true").ok();
    let sessions = world.path("xdg-state/agent-sandbox/sessions");
    let project_state = fs_err::read_dir(&sessions).expect("sessions").next().expect("one project").expect("entry");
    let record = project_state.path().join("masked.json");
    assert!(record.is_file(), "the start records its masks");
    fs_err::write(&record, "not json").expect("write");
    let run = world
        .cmd()
        .args(["exec", "--debug", "--", "sh", "-c", "cat node_modules/dep/client-secret.js; echo end"])
        .run();
    assert_eq!(run.ok(), "end\n", "fail closed: the package's file is masked too");
    assert!(
        run.stderr().contains(&format!(
            "secrets: the record of files masked in earlier sessions is unreadable ({}: not a record of masked files): \
             no dependency tree is exempt this time",
            record.display()
        )),
        "{}",
        run.stderr()
    );
    // Rewritten from this start's masks, the record works again.
    assert_eq!(world.sh(&[], "cat node_modules/dep/client-secret.js; echo end").ok(), "end\n");
}

#[test]
fn dependency_trees_made_by_their_tools_can_be_deleted_and_reinstalled() {
    require_bwrap!();
    let world = world_with_key_and_npm_tree();
    world.write("home/proj/target/CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n");
    world.write("home/proj/target/debug/deps/libsecret_store-1.rlib", "rlib\n");
    world.write("home/proj/target/debug/build/x/out/tls.key", "generated\n");
    world.write("home/proj/.venv/pyvenv.cfg", "home = /usr/bin\n");
    world.write("home/proj/.venv/lib/python3/site-packages/secretstorage/__init__.py", "\n");
    world.write("home/proj/vendor/modules.txt", "# example.com/x v1\n");
    world.write("home/proj/vendor/example.com/x/credentials.go", "package x\n");
    // A package's file in a real-looking tree is readable; the trees delete and come back
    // (`npm ci`, `cargo clean`), and the next session reads the new files.
    let script = "cat node_modules/dep/client-secret.js target/debug/build/x/out/tls.key \
                  .venv/lib/python3/site-packages/secretstorage/__init__.py vendor/example.com/x/credentials.go && \
                  rm -rf node_modules && mkdir -p node_modules/dep && echo '{}' > node_modules/.package-lock.json && \
                  echo 'module.exports = 2;' > node_modules/dep/client-secret.js && \
                  rm -rf target .venv vendor && echo deleted";
    let out = world.sh(&[], script).ok();
    assert_eq!(out, "module.exports = 1;\ngenerated\n\npackage x\ndeleted\n");
    assert_eq!(
        world.sh(&[], "cat node_modules/dep/client-secret.js certs/server.key; echo end").ok(),
        "module.exports = 2;\nend\n"
    );
}

#[test]
fn a_path_pattern_secret_cannot_be_unmasked_by_renaming_its_parent() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/config/prod.yaml", "TOPSECRET\n");
    world.project_config(r#"{ "secrets": { "patterns": ["config/prod.yaml"] } }"#);
    let out = world
        .sh(&[], "mv config cfg 2>/dev/null && ln -s cfg config && echo MOVED; cat config/prod.yaml; echo end")
        .ok();
    assert_eq!(out, "end\n");
    assert_eq!(world.sh(&[], "cat config/prod.yaml; echo end").ok(), "end\n");
}
