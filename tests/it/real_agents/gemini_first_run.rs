//! Gemini CLI's first try with nothing configured: its first interactive run (in a
//! terminal, `script`'s) goes straight to signing in with Google by a code, not to a
//! sign-in menu whose answer it could not keep; a `GEMINI_API_KEY` the env policy drops
//! selects nothing, the same key allowed drives it; and the user's settings are never
//! written.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::{
    model::{tool, ScriptedModel},
    support::{require_bwrap, World, BIN},
};

/// The world's `agent-sandbox exec` as a shell line (for `script -c`): the environment
/// `World::cmd` gives, a terminal, and `PATH` with the agent.
fn exec_line(world: &World, prefix: &Path, args: &str) -> String {
    let quote = |value: &Path| format!("'{}'", value.display());
    format!(
        "exec env -i PATH={}/bin:/usr/local/bin:/usr/bin:/bin HOME={} XDG_CONFIG_HOME={} XDG_STATE_HOME={} \
         GIT_CONFIG_NOSYSTEM=1 LANG=C.UTF-8 TERM=xterm {} exec --ro {} -- {args}",
        prefix.display(),
        quote(&world.home),
        quote(&world.path("xdg-config")),
        quote(&world.path("xdg-state")),
        quote(BIN.as_ref()),
        quote(prefix),
    )
}

/// Runs `line` in a terminal until its output holds `wanted` (or 180 s pass), then ends
/// it as a user's `kill` would (SIGTERM to `exec`, which ends the sandbox and cleans up);
/// returns what the terminal showed.
fn in_terminal_until(world: &World, line: &str, wanted: &str) -> String {
    let typescript = world.path("typescript");
    let mut script = Command::new("script")
        .args(["-qfec", line])
        .arg(&typescript)
        .current_dir(&world.project)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("script(1) starts (util-linux)");
    let started = Instant::now();
    let shown = || String::from_utf8_lossy(&std::fs::read(&typescript).unwrap_or_default()).into_owned();
    while !shown().contains(wanted) && started.elapsed() < Duration::from_secs(180) {
        if script.try_wait().expect("wait").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    // `script`'s child is `exec` itself (the line `exec`s it).
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", script.id())).unwrap_or_default();
    for child in children.split_whitespace().filter_map(|pid| pid.parse::<i32>().ok()) {
        // SAFETY: kill(2) on a process this test started.
        unsafe { libc::kill(child, libc::SIGTERM) };
    }
    let ended = script.wait().expect("script ends with its child");
    assert!(ended.code().is_some(), "exec ended on the SIGTERM: {ended:?}");
    shown()
}

#[test]
fn gemini_cli_signs_in_on_the_first_try_and_the_user_settings_stay_unwritten() {
    require_bwrap!();
    let Some(prefix) = super::gemini_prefix() else { return };
    let world = super::project();
    // No `~/.gemini` at all: a new user. The key on the host is not let through.
    world.write(
        "xdg-config/agent-sandbox/config.jsonc",
        &format!(r#"{{ "network": {{ "deny": {} }} }}"#, super::deny_the_world()),
    );
    let shown = in_terminal_until(&world, &exec_line(&world, &prefix, "gemini"), "Enter the authorization code");
    assert!(
        shown.contains("Please visit the following URL to authorize")
            && shown.contains("https://accounts.google.com/o/oauth2/v2/auth?redirect_uri=https%3A%2F%2Fcodeassist")
            && shown.contains("Enter the authorization code"),
        "the first interactive run signs in with Google by a code:\n{shown}"
    );
    // What Gemini CLI writes there it keeps; the settings it was shown were never the user's.
    assert!(world.home.join(".gemini").is_dir());
    assert!(world.home.join(".gemini/settings.json").symlink_metadata().is_err(), "created empty, removed again");

    // Headless, with a key on the host the env policy drops: still Google's sign-in, which
    // needs a terminal; the model is never asked.
    let model = ScriptedModel::start(vec![tool("run_shell_command", serde_json::json!({ "command": "sh test.sh" }))]);
    let run = super::gemini_headless(&world, &prefix, &model);
    assert_ne!(run.code(), 0);
    let said = format!("{}\n{}", run.stdout(), run.stderr());
    assert!(said.contains("Manual authorization is required"), "{said}");
    assert!(model.requests().is_empty(), "{:#?}", model.requests());

    // The same key allowed: it is the sign-in, with nothing else configured.
    world.write(
        "xdg-config/agent-sandbox/config.jsonc",
        &format!(
            r#"{{ "env": {{ "allow": ["GEMINI_API_KEY"] }}, "network": {{ "deny": {} }} }}"#,
            super::deny_the_world()
        ),
    );
    let run = super::gemini_headless(&world, &prefix, &model);
    assert_eq!(model.steps_played(), 1, "{}\n{}", run.stdout(), run.stderr());
    assert!(model.tool_results()[0].contains("tests passed"), "{:#?}", model.tool_results());
    assert!(world.home.join(".gemini/settings.json").symlink_metadata().is_err());
}
