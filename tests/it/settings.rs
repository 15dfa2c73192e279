//! Package managers' settings (`@settings`): a corporate mirror stays the registry
//! inside, as real npm and pip read it, and the credentials beside it stay out.

use crate::support::{require_bwrap, World};

const NPMRC: &str = "registry=https://npm.corp.example/\n//npm.corp.example/:_authToken=TOPSECRET-npm\n\
                     https-proxy=http://proxy.corp.example:3128/\n";
const PIP_CONF: &str = "[global]\nindex-url = https://me:TOPSECRET-pip@pypi.corp.example/simple\n";
const CARGO_CONFIG: &str = "[source.crates-io]\nreplace-with = \"corp\"\n\n[source.corp]\n\
                            registry = \"sparse+https://cargo.corp.example/index/\"\n\n\
                            [registries.corp]\ntoken = \"TOPSECRET-cargo\"\n";

fn world_with_mirror_settings() -> World {
    let world = World::new();
    world.write("home/.npmrc", NPMRC);
    world.write("home/.config/pip/pip.conf", PIP_CONF);
    world.write("home/.cargo/config.toml", CARGO_CONFIG);
    world
}

#[test]
fn a_mirror_stays_the_registry_inside_and_its_credentials_stay_out() {
    require_bwrap!();
    let world = world_with_mirror_settings();
    let script = "npm config get registry; npm config get https-proxy; python3 -m pip config list; \
                  cat ~/.npmrc ~/.config/pip/pip.conf ~/.cargo/config.toml; \
                  grep -rs TOPSECRET ~ && echo LEAK; \
                  echo 'registry=https://npm.evil.example/' > ~/.npmrc && echo WROTE; true";
    // pip reads $XDG_CONFIG_HOME/pip/pip.conf: the default one here.
    let run = world
        .cmd()
        .env("XDG_CONFIG_HOME", world.home.join(".config"))
        .args(["exec", "--debug", "--", "sh", "-c", script])
        .run();
    let out = run.ok();
    // The legitimate use: npm and pip ask the mirror.
    // (npm's https-proxy: the sandbox's own, not the host's, which would reach nothing.)
    assert!(out.starts_with("https://npm.corp.example/\nhttp://127.0.0.1:3128"), "{out}");
    assert!(out.contains("global.index-url='https://pypi.corp.example/simple'\n"), "{out}");
    assert!(out.contains("registry = \"sparse+https://cargo.corp.example/index/\"\n"), "{out}");
    // The attack: read the tokens, or point the next session's npm elsewhere.
    assert!(!out.contains("TOPSECRET") && !out.contains("LEAK") && !out.contains("WROTE"), "{out}");
    assert!(
        out.contains("# agent-sandbox: a credential line was left out here (//npm.corp.example/:_authToken)\n")
            && out.contains("# agent-sandbox: the credentials in the URL below were left out (index-url)\n")
            && out.contains("# agent-sandbox: a credential line was left out here (token)\n"),
        "{out}"
    );
    assert_eq!(world.read("home/.npmrc"), NPMRC);
    // --debug names each file and what its copy left out.
    let stderr = run.stderr();
    for line in [
        "settings ~/.npmrc: shown read-only without its 1 credential line(s): //npm.corp.example/:_authToken \
         (@settings: .npmrc)",
        "settings ~/.config/pip/pip.conf: shown read-only without its 1 credential line(s): index-url (the user \
         part of its URL) (@settings: .config/pip/pip.conf)",
        "settings ~/.cargo/config.toml: shown read-only without its 1 credential line(s): token (@settings: \
         .cargo/config.toml)",
    ] {
        assert!(stderr.contains(line), "{line}\n{stderr}");
    }
    // Each mirror is named as out of the allowlist, with the line that lets it through.
    for (file, host) in [
        ("~/.npmrc", "npm.corp.example"),
        ("~/.config/pip/pip.conf", "pypi.corp.example"),
        ("~/.cargo/config.toml", "cargo.corp.example"),
    ] {
        let note = format!(
            "agent-sandbox: note: {file} names the registry {host}, which the network allowlist does not let through, \
             so it will not answer inside (allow it: --allow-host {host}"
        );
        assert!(stderr.contains(&note), "{note}\n{stderr}");
    }
    let allowed = world
        .cmd()
        .args(["exec", "--allow-host", "npm.corp.example", "--allow-host", "pypi.corp.example"])
        .args(["--allow-host", "cargo.corp.example", "--", "true"])
        .run();
    allowed.ok();
    assert!(!allowed.stderr().contains("names the registry"), "{}", allowed.stderr());
}

#[test]
fn settings_you_exclude_or_switch_off_are_not_shown() {
    require_bwrap!();
    let world = world_with_mirror_settings();
    let script = "test -e ~/.npmrc && echo NPMRC; test -e ~/.cargo/config.toml && echo CARGO; \
                  test -e ~/.config/pip/pip.conf && echo PIP; true";
    let out = world.sh(&["--exclude", "~/.npmrc"], script).ok();
    assert_eq!(out, "CARGO\nPIP\n");
    world.project_config(r#"{"filesystem": {"presets": ["!@settings"]}}"#);
    assert_eq!(world.sh(&[], script).ok(), "");
}
