//! `agent-sandbox test`: every row held on a correct setup (as root and unprivileged),
//! and each guarantee deliberately broken makes its row fail and the exit status 1.

use crate::support::{require_bwrap, World};

/// A project with a secret file, a home with a credential, and a repository.
fn world() -> World {
    let world = World::new();
    world.write("home/.ssh/id_ed25519", "PRIVATE KEY\n");
    world.write("home/proj/.env", "TOKEN=1\n");
    world
}

/// `test --json` with `flags`: the exit status and each guarantee with its result.
fn results(world: &World, flags: &[&str]) -> (i32, Vec<(String, String)>) {
    let run = world.cmd().args(["test", "--json"]).args(flags).run();
    let value: serde_json::Value =
        serde_json::from_str(&run.stdout()).unwrap_or_else(|err| panic!("{err}: {}\n{}", run.stdout(), run.stderr()));
    let rows = value["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            (row["guarantee"].as_str().expect("name").to_owned(), row["result"].as_str().expect("result").to_owned())
        })
        .collect();
    (run.code(), rows)
}

const GUARANTEES: [&str; 13] = [
    "home credentials hidden",
    "project secrets masked",
    "environment filtered",
    "host sockets unreachable",
    "terminal injection refused",
    "network as configured",
    "marker present",
    "seccomp and no_new_privs active",
    "Landlock scope active",
    ".git/hooks and .git/config read-only",
    "git guard refuses --no-verify and force pushes",
    "pushes leave through the host",
    "host caches never written",
];

/// The rows with `broken` not held and every other held.
fn expected(broken: &[&str]) -> Vec<(String, String)> {
    GUARANTEES
        .iter()
        .map(|name| (name.to_string(), if broken.contains(name) { "not held" } else { "held" }.to_owned()))
        .collect()
}

#[test]
fn every_guarantee_holds_on_a_correct_setup() {
    require_bwrap!();
    let world = world();
    assert_eq!(results(&world, &[]), (0, expected(&[])));
    assert_eq!(results(&world, &["--network", "off"]), (0, expected(&[])));
    assert_eq!(results(&world, &["--network", "on"]), (0, expected(&[])));
    // The default mode, proved as it is: the proxy refuses what the allowlist does not hold.
    let run = world.cmd().args(["test", "--json"]).run();
    let value: serde_json::Value = serde_json::from_str(&run.stdout()).expect("JSON");
    let network =
        value["rows"].as_array().expect("rows").iter().find(|row| row["guarantee"] == "network as configured");
    let probe = network.and_then(|row| row["probe"].as_str()).unwrap_or_default().to_owned();
    assert!(
        probe.starts_with(
            "network allowlist: agent-sandbox-test.invalid (off the list) resolved to nothing, the proxy answered 403; \
             raw address 192.0.2.1: the proxy answered 403, directly refused ("
        ),
        "{probe}"
    );
    let table = world.cmd().arg("test").run().ok();
    assert!(table.starts_with("GUARANTEE") && !table.contains("NOT HELD") && !table.contains("fix:"), "{table}");
    // The guard's refusals during the probe are in the audit log like any other.
    assert!(world.audit_log().contains(r#""policy":"no-verify""#));
}

#[test]
fn each_guarantee_broken_on_purpose_fails_its_row() {
    require_bwrap!();
    let world = world();
    let key = world.path("home/.ssh/id_ed25519").display().to_string();
    assert_eq!(results(&world, &["--ro", &key]), (1, expected(&["home credentials hidden"])));
    assert_eq!(
        results(&world, &["--cmd", "git=true"]),
        (1, expected(&["git guard refuses --no-verify and force pushes", "pushes leave through the host"]))
    );
    let config = world.write(
        "home/no-git.jsonc",
        r#"{"filesystem": {"presets": ["!@git"]}, "env": {"allow": ["AGENT_SANDBOX_TEST_*"]}}"#,
    );
    let config = config.display().to_string();
    assert_eq!(
        results(&world, &["--config", &config]),
        (
            1,
            expected(&[
                "environment filtered",
                // (Without `@git` the user's git directories are still read-only.)
                "git guard refuses --no-verify and force pushes",
                "pushes leave through the host"
            ])
        )
    );
    // An explicit read-write grant of a cache is the host's cache itself.
    fs_err::create_dir_all(world.path("home/.npm")).expect("npm cache");
    let npm = world.path("home/.npm").display().to_string();
    assert_eq!(results(&world, &["--rw", &npm]), (1, expected(&["host caches never written"])));
    let run = world.cmd().args(["test", "--ro", &key]).run();
    assert_eq!(run.code(), 1);
    assert!(
        run.stdout().contains("NOT HELD")
            && run.stdout().contains("fix: ")
            && run.stdout().contains(&key[..key.len() - 11]),
        "{}",
        run.stdout()
    );
}

/// With `tools.*` set, one row per agent says what its own engine enforces: held for
/// those whose engine says every rule, not applicable for the others when they are not
/// installed (none is, on the test's PATH).
#[test]
fn tools_rules_get_a_row_per_agent() {
    require_bwrap!();
    let world = world();
    world.write("xdg-config/agent-sandbox/config.jsonc", r#"{"tools": {"disallowed": ["Bash(git push:*)"]}}"#);
    let (code, rows) = results(&world, &[]);
    let agents: Vec<(&str, &str)> = rows
        .iter()
        .filter(|(name, _)| name.starts_with("tools.* in "))
        .map(|(name, result)| (name.as_str(), result.as_str()))
        .collect();
    assert_eq!(
        (code, agents),
        (
            0,
            vec![
                ("tools.* in Claude Code", "held"),
                ("tools.* in Codex", "held"),
                ("tools.* in Gemini CLI", "not applicable"),
                ("tools.* in OpenCode", "held"),
                ("tools.* in Copilot CLI", "not applicable"),
                ("tools.* in Qwen Code", "held"),
            ]
        )
    );
}

#[test]
fn what_the_setup_lacks_is_not_applicable() {
    require_bwrap!();
    let world = World::bare();
    let (code, rows) = results(&world, &[]);
    assert_eq!(code, 0, "{rows:?}");
    let not_applicable: Vec<&str> =
        rows.iter().filter(|(_, result)| result == "not applicable").map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        not_applicable,
        [
            "home credentials hidden",
            "project secrets masked",
            ".git/hooks and .git/config read-only",
            "git guard refuses --no-verify and force pushes",
            "pushes leave through the host"
        ]
    );
}

/// The network row proves the proxy is running from inside: with the proxy's socket gone
/// from the runtime directory before the sandbox's bridge hands its listeners over (as
/// a cleaner of `$XDG_RUNTIME_DIR` or a proxy that died would leave it), nothing inside
/// answers on the proxy port, the row fails and says so, and every other row holds.
/// The socket is removed the moment it appears (it appears only once ready: bound under
/// another name and renamed), a race with bwrap's start that a loaded machine can lose: a run whose row held is tried again, a few times, never more.
#[test]
fn the_network_row_fails_when_the_proxy_is_not_running() {
    require_bwrap!();
    // The test wins its race against `exec` (removing the socket after it is made and
    // before the sandbox connects) in CI's root pass; as the unprivileged user it lost
    // five runs of five there, which proves nothing either way.
    if !crate::support::is_root() {
        eprintln!("skipped: the proxy's socket race is run in the root pass only");
        return;
    }
    let world = world();
    let runtime = world.path("xdg-runtime");
    fs_err::create_dir_all(&runtime).expect("mkdir");
    let mut attempts = Vec::new();
    for _ in 0..5 {
        let mut test = world.cmd();
        let child = test
            .args(["test", "--json"])
            .env("XDG_RUNTIME_DIR", &runtime)
            .cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("agent-sandbox test starts");
        // The exec that runs the probe makes the socket, then starts bwrap.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        'watch: loop {
            assert!(std::time::Instant::now() < deadline, "no proxy socket appeared in {}", runtime.display());
            for entry in std::fs::read_dir(&runtime).expect("read_dir").flatten() {
                if std::fs::remove_file(entry.path().join("net.sock")).is_ok() {
                    break 'watch;
                }
            }
            std::thread::yield_now();
        }
        let out = child.wait_with_output().expect("agent-sandbox test ends");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let value: serde_json::Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|err| panic!("{err}: {stdout}{}", String::from_utf8_lossy(&out.stderr)));
        let rows = value["rows"].as_array().expect("rows").clone();
        let results: Vec<(String, String)> = rows
            .iter()
            .map(|row| {
                (row["guarantee"].as_str().expect("name").into(), row["result"].as_str().expect("result").into())
            })
            .collect();
        let network = rows.iter().find(|row| row["guarantee"] == "network as configured").cloned();
        let held = network.as_ref().is_some_and(|row| row["result"] == "held");
        attempts.push((out.status.code(), results, network, stdout));
        if !held {
            break;
        }
    }
    let (code, results, network, stdout) = attempts.pop().expect("one attempt that reached the probe");
    assert_eq!((code, results), (Some(1), expected(&["network as configured"])), "{stdout}");
    let fix = network.as_ref().and_then(|row| row["fix"].as_str()).unwrap_or_default();
    assert!(fix.starts_with("the proxy did not answer inside: it is not running"), "{network:?}");
}
