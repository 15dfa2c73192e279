//! The real OpenCode from npm inside `exec`, pointed at the scripted model through an
//! OpenAI-compatible provider in the user's `~/.config/opencode/opencode.json` (written
//! outside, as its documentation tells a user of another endpoint: the file is read-only
//! inside). It does the whole task (read, edit, the project's tests, a commit through the
//! checks that comes home, a push through the host) with its own git calls recorded into
//! the guard's table; its own engine refuses what `tools.disallowed` names (the managed
//! config `exec` mounts); its login is kept while its config, its plugins' package and
//! their `node_modules` (which its host process installs and runs) are not writable.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{deny_the_world, project, remote_head, whole_task_done, GitRecorder, WHOLE_TASK};
use crate::{
    model::{lowercase_bash, ScriptedModel},
    support::{require_bwrap, Run, World},
};

/// OpenCode, driven over the Chat Completions API.
pub const OPENCODE_VERSION: &str = "1.18.33";

fn opencode_prefix() -> Option<PathBuf> {
    static PREFIX: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    super::agent_prefix(&PREFIX, "opencode-ai", OPENCODE_VERSION, "opencode")
}

/// The user's OpenCode config naming the scripted model (an OpenAI-compatible provider),
/// and agent-sandbox's config: nothing reachable but the model.
fn configure(world: &World, model: &ScriptedModel, sandbox_config: &str) {
    world.write(
        "home/.config/opencode/opencode.json",
        &json!({
            "$schema": "https://opencode.ai/config.json",
            "model": "scripted/scripted-coder",
            "autoupdate": false,
            "share": "disabled",
            // Its state outside the project, which the scripted steps write.
            "permission": { "external_directory": "allow" },
            "provider": { "scripted": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Scripted",
                "options": { "baseURL": format!("http://localhost:{}/v1", model.port), "apiKey": "sk-scripted-model" },
                "models": { "scripted-coder": { "name": "Scripted coder", "tool_call": true } },
            } },
        })
        .to_string(),
    );
    world.write("home/.config/agent-sandbox/config.jsonc", sandbox_config);
}

/// `opencode run` inside `exec`, its config in `~/.config` (where the catalog keeps it).
fn opencode(world: &World, prefix: &Path, model: &ScriptedModel) -> Run {
    let port = model.port.to_string();
    let mut cmd = world.cmd();
    let recorder = GitRecorder::new(world).options(&mut cmd);
    cmd.env("PATH", format!("{}/bin:/usr/local/bin:/usr/bin:/bin", prefix.display()))
        .env("XDG_CONFIG_HOME", world.home.join(".config"))
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .arg("exec")
        .args(recorder)
        .args(["--host-port", &port, "--ro"])
        .arg(prefix)
        .args(["--", "opencode", "run", "Carry out the task."]);
    cmd.run_within(300)
}

#[test]
fn opencode_reads_edits_tests_commits_and_pushes_inside() {
    require_bwrap!();
    let Some(prefix) = opencode_prefix() else { return };
    let world = project();
    let model = ScriptedModel::start(WHOLE_TASK.iter().map(|command| lowercase_bash(command)).collect());
    configure(&world, &model, &format!(r#"{{ "network": {{ "deny": {} }} }}"#, deny_the_world()));
    let run = opencode(&world, &prefix, &model);
    whole_task_done(&world, &model, &run, "opencode");
}

#[test]
fn opencodes_own_engine_denies_tools_disallowed_and_its_login_is_kept_not_its_config() {
    require_bwrap!();
    let Some(prefix) = opencode_prefix() else { return };
    let world = project();
    let model = ScriptedModel::start(vec![
        lowercase_bash("git push origin main; echo push=$?"),
        lowercase_bash("git status --short; echo status=$?"),
        lowercase_bash(
            "echo '{\"scripted\": {\"type\": \"api\", \"key\": \"kept\"}}' > ~/.local/share/opencode/auth.json; \
             cat ~/.local/share/opencode/auth.json; \
             echo '{\"plugin\": [\"evil\"]}' > ~/.config/opencode/opencode.json; echo config=$?; \
             echo '{\"scripts\": {\"postinstall\": \"touch ~/pwned\"}}' > ~/.config/opencode/package.json; \
             echo package=$?; mkdir -p ~/.config/opencode/node_modules/evil; echo modules=$?",
        ),
    ]);
    configure(
        &world,
        &model,
        &format!(
            r#"{{ "tools": {{ "disallowed": ["Bash(git push:*)"] }}, "network": {{ "deny": {} }} }}"#,
            deny_the_world()
        ),
    );
    let before = remote_head(&world);
    let config_before = world.read("home/.config/opencode/opencode.json");
    let run = opencode(&world, &prefix, &model);
    assert_eq!(model.steps_played(), 3, "{}\n{}", run.stdout(), run.stderr());
    let results = model.tool_results();
    assert_eq!(results.len(), 3, "{results:#?}\n{}", run.stdout());
    assert!(!results[0].contains("push=0") && results[0].contains("git push"), "OpenCode's engine: {results:#?}");
    assert_eq!(remote_head(&world), before);
    assert!(results[1].contains("status=0"), "the legitimate call beside it: {results:#?}");
    assert!(results[2].contains("\"kept\"") && results[2].contains("Read-only file system"), "{results:#?}");
    for refused in ["config=1", "package=1", "modules=1"] {
        assert!(results[2].contains(refused), "{refused}: {results:#?}");
    }
    // On the host: the login is kept; the config is the user's; nothing to install.
    assert!(world.read("home/.local/share/opencode/auth.json").contains("\"kept\""));
    assert_eq!(world.read("home/.config/opencode/opencode.json"), config_before);
    assert!(!world.home.join(".config/opencode/node_modules/evil").exists());
    let package = world.home.join(".config/opencode/package.json");
    assert!(!std::fs::read_to_string(package).unwrap_or_default().contains("pwned"));
}
