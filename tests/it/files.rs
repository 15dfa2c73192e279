//! Only the project (read-write) and what presets grant are visible: home credentials
//! and sibling projects are not, and a symlink cannot reach them.

use crate::support::{require_bwrap, World};

const HOME_SECRETS: &[&str] = &[
    "home/.ssh/id_ed25519",
    "home/.aws/credentials",
    "home/.gnupg/private-keys-v1.d/key",
    "home/.netrc",
    "home/.git-credentials",
    "home/.config/gh/hosts.yml",
    "home/.docker/config.json",
    "home/.kube/config",
    "home/.npmrc",
];

fn world_with_home_secrets() -> World {
    let world = World::new();
    for secret in HOME_SECRETS {
        // `@settings` shows ~/.npmrc as a copy without its credential lines: its secret
        // is the token line.
        let content =
            if secret.ends_with(".npmrc") { "//registry.npmjs.org/:_authToken=TOPSECRET\n" } else { "TOPSECRET\n" };
        world.write(secret, content);
    }
    world.write("home/other/notes.txt", "TOPSECRET sibling\n");
    world
}

fn probe_script(world: &World) -> String {
    let mut script = String::new();
    for secret in HOME_SECRETS.iter().chain(["home/other/notes.txt"].iter()) {
        let path = world.path(secret);
        script.push_str(&format!("cat '{}' 2>/dev/null | grep -q TOPSECRET && echo 'LEAK {secret}'\n", path.display()));
    }
    script
}

#[test]
fn home_credentials_and_sibling_projects_are_invisible() {
    require_bwrap!();
    let world = world_with_home_secrets();
    let mut script = probe_script(&world);
    script.push_str("cat README.md; echo edited > README.md && echo wrote-project\n");
    let out = world.sh(&[], &script).ok();
    assert!(!out.contains("LEAK"), "{out}");
    assert!(out.contains("hello\nwrote-project"), "{out}");
    assert_eq!(world.read("home/proj/README.md"), "edited\n", "project writes reach the host");
}

#[test]
fn home_credentials_stay_hidden_when_home_is_granted() {
    require_bwrap!();
    let world = world_with_home_secrets();
    let out = world.sh(&["--ro", "~"], &probe_script(&world)).ok();
    let leaks: Vec<&str> = out.lines().filter(|line| line.starts_with("LEAK") && !line.contains("other/")).collect();
    assert!(leaks.is_empty(), "{out}");
    // The explicit grant of ~ does expose the sibling project: that was asked for.
    assert!(out.contains("LEAK home/other/notes.txt"), "{out}");
}

#[test]
fn ro_of_an_excluded_credential_directory_is_refused_and_a_file_inside_it_is_shown() {
    let world = world_with_home_secrets();
    world.write("home/.ssh/known_hosts", "github.com ssh-ed25519 AAAA\n");
    // `--ro ~/.ssh`: the built-in exclude wins on that path, so the flag is refused, loudly.
    let run = world.cmd().args(["exec", "--ro", "~/.ssh", "--", "true"]).run();
    assert_eq!(run.code(), 125, "{}", run.stderr());
    assert!(
        run.stderr().contains("--ro ~/.ssh: the exclude \"~/.ssh\" (from default) hides that path all the same")
            && run.stderr().contains("--ro ~/.ssh/NAME"),
        "{}",
        run.stderr()
    );
    require_bwrap!();
    // What it advises: the one file is shown, the key beside it stays hidden.
    let known_hosts = world.path("home/.ssh/known_hosts");
    let script = format!("cat '{}'; {}true", known_hosts.display(), probe_script(&world));
    let out = world.sh(&["--ro", "~/.ssh/known_hosts"], &script).ok();
    assert!(out.contains("github.com ssh-ed25519"), "{out}");
    assert!(!out.contains("LEAK"), "{out}");
}

#[test]
fn symlinks_in_the_project_do_not_reach_hidden_paths() {
    require_bwrap!();
    let world = world_with_home_secrets();
    std::os::unix::fs::symlink(world.path("home/.ssh/id_ed25519"), world.path("home/proj/key-link")).expect("symlink");
    std::os::unix::fs::symlink("../other/notes.txt", world.path("home/proj/sibling-link")).expect("symlink");
    std::os::unix::fs::symlink(world.path("home/.aws"), world.path("home/proj/aws-dir")).expect("symlink");
    std::os::unix::fs::symlink("README.md", world.path("home/proj/readme-link")).expect("symlink");
    let out = world
        .sh(
            &[],
            "cat key-link sibling-link aws-dir/credentials 2>/dev/null | grep TOPSECRET && echo LEAK; cat readme-link",
        )
        .ok();
    assert_eq!(out, "hello\n");
}

#[test]
fn system_files_are_read_only_and_etc_is_limited() {
    require_bwrap!();
    let world = World::new();
    let out = world
        .sh(
            &[],
            "touch /usr/bin/evil 2>/dev/null && echo WROTE-USR; echo x >> /etc/passwd 2>/dev/null && echo WROTE-ETC; \
             touch /etc/ld.so.preload 2>/dev/null && echo ADDED-ETC; \
             test -e /etc/shadow && echo SHADOW; test -e /etc/ssh && echo ETC-SSH; \
             ls /usr/bin/env >/dev/null && echo usr-ok; grep -q root /etc/passwd && echo passwd-ok",
        )
        .ok();
    assert_eq!(out, "usr-ok\npasswd-ok\n");
}

#[test]
fn exclude_and_ro_flags_apply_inside_the_project() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/vendor/lib.txt", "vendored\n");
    world.write("home/proj/docs/guide.md", "guide\n");
    let out = world
        .sh(
            &["--exclude", "vendor", "--ro", "docs"],
            "cat vendor/lib.txt 2>/dev/null && echo SEEN; echo x > docs/guide.md 2>/dev/null && echo WROTE; cat docs/guide.md",
        )
        .ok();
    assert_eq!(out, "guide\n");
    assert_eq!(world.read("home/proj/docs/guide.md"), "guide\n");
}

#[test]
fn agent_sandbox_state_stays_out_of_reach_even_when_home_is_granted() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/.env", "TOPSECRET\n");
    world.write("xdg-config/agent-sandbox/config.jsonc", "{}\n");
    // A first run creates the scan cache and the audit log.
    world.sh(&[], "true").ok();
    let state = world.path("xdg-state/agent-sandbox");
    let cache = world.path("home/.cache/agent-sandbox");
    assert!(state.join("audit.jsonl").is_file() && cache.join("scan").is_dir());
    let config = world.path("xdg-config/agent-sandbox/config.jsonc");
    let script = format!(
        "echo '{{\"secrets\": {{\"allow\": [\"*\"]}}}}' > {config} 2>/dev/null && echo WROTE-CONFIG; \
         for d in {state} {cache}; do ls -A $d 2>/dev/null | grep -q . && echo SAW-STATE; done; \
         echo forged >> {state}/audit.jsonl 2>/dev/null && echo WROTE-LOG; \
         rm -rf {cache}/scan 2>/dev/null; cat .env; cat {config}",
        config = config.display(),
        state = state.display(),
        cache = cache.display(),
    );
    let root = world.root.display().to_string();
    let out = world.sh(&["--rw", &root], &script).ok();
    assert_eq!(out, "{}\n", "readable, not writable; state hidden");
    assert_eq!(world.read("xdg-config/agent-sandbox/config.jsonc"), "{}\n");
    // (The session's start line quotes the script, "forged" included.)
    assert!(!world.audit_log().lines().any(|line| line == "forged"));
    assert!(cache.join("scan").is_dir(), "the scan cache is untouched");
}

#[test]
fn a_grant_inside_an_excluded_directory_is_visible_and_scanned() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/data/private/users.csv", "TOPSECRET\n");
    world.write("home/proj/data/public/readme.txt", "public\n");
    world.write("home/proj/data/public/.env", "TOPSECRET\n");
    let out = world
        .sh(
            &["--exclude", "data", "--rw", "data/public"],
            "cat data/private/users.csv data/public/.env 2>/dev/null; cat data/public/readme.txt; \
             echo more >> data/public/readme.txt && echo wrote; touch data/new 2>/dev/null && echo CREATED; true",
        )
        .ok();
    assert_eq!(out, "public\nwrote\n");
    assert_eq!(world.read("home/proj/data/public/readme.txt"), "public\nmore\n");
}

#[test]
fn a_read_only_agent_cannot_change_the_project_but_can_read_it_and_use_tmp() {
    require_bwrap!();
    let world = World::new();
    let attacks = ["echo x > README.md", "rm README.md", "mkdir new", "touch .git/index.lock", "mv README.md R"];
    for attack in attacks {
        let run = world.sh(&["--read-only"], attack);
        assert_ne!(run.code(), 0, "{attack} succeeded in a read-only session");
    }
    assert_eq!(world.read("home/proj/README.md"), "hello\n");
    let run = world.sh(&["--read-only"], "cat README.md && echo scratch > /tmp/x && cat /tmp/x");
    assert_eq!(run.ok(), "hello\nscratch\n");
    // The same from the project's config, and `config show` says where it came from.
    world.project_config("{ \"project\": \"ro\" }");
    assert_ne!(world.sh(&[], "echo x > README.md").code(), 0);
    let show = world.cmd().args(["config", "show"]).run().ok();
    assert!(show.lines().any(|line| line.starts_with("project") && line.contains("ro")), "{show}");
    // Sessions still start and end normally.
    world.sh(&[], "true").ok();
}
