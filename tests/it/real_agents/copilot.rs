//! The real Copilot CLI from npm inside `exec`, pointed at the scripted model as a custom
//! provider (its documented BYOK variables: `COPILOT_PROVIDER_BASE_URL`, an
//! OpenAI-compatible endpoint, and `COPILOT_OFFLINE`, which needs no GitHub sign-in):
//! it does the whole task (read, edit, the project's tests, a commit through the checks
//! that comes home, a push through the host, its own git calls held by the guard's
//! table); its `--deny-tool` refuses `git push` (its only deny rules: agent-sandbox
//! cannot set them for it); the git guard still refuses `--no-verify` whatever Copilot
//! allows.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{blocked, deny_the_world, project};
use crate::{
    model::{lowercase_bash, ScriptedModel},
    support::{require_bwrap, Run, World},
};

/// Copilot CLI, driven over the Chat Completions API as a custom provider.
pub const COPILOT_VERSION: &str = "1.0.102";

fn copilot_prefix() -> Option<PathBuf> {
    static PREFIX: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    super::agent_prefix(&PREFIX, "@github/copilot", COPILOT_VERSION, "copilot")
}

/// `copilot -p` inside `exec`, its provider the scripted model; `extra` are Copilot's own
/// flags.
fn copilot(world: &World, prefix: &Path, model: &ScriptedModel, extra: &[&str]) -> Run {
    copilot_with(world.cmd(), prefix, model, &[], extra)
}

fn copilot_with(
    mut cmd: crate::support::TestCommand,
    prefix: &Path,
    model: &ScriptedModel,
    exec_options: &[std::ffi::OsString],
    extra: &[&str],
) -> Run {
    let port = model.port.to_string();
    cmd.env("PATH", format!("{}/bin:/usr/local/bin:/usr/bin:/bin", prefix.display()))
        .env("COPILOT_PROVIDER_BASE_URL", format!("http://localhost:{port}/v1"))
        .env("COPILOT_PROVIDER_TYPE", "openai")
        .env("COPILOT_PROVIDER_API_KEY", "sk-scripted-model")
        .env("COPILOT_MODEL", "gpt-4.1")
        .env("COPILOT_OFFLINE", "true")
        .env("COPILOT_AUTO_UPDATE", "false")
        .arg("exec")
        .args(exec_options)
        .args(["--host-port", &port, "--ro"])
        .arg(prefix)
        .args(["--", "copilot", "-p", "Carry out the task.", "--allow-all-tools"])
        .args(extra);
    cmd.run_within(300)
}

fn configure(world: &World) {
    world.write(
        "xdg-config/agent-sandbox/config.jsonc",
        &format!(
            r#"{{ "env": {{ "allow": ["COPILOT_PROVIDER_API_KEY"] }}, "network": {{ "deny": {} }} }}"#,
            deny_the_world()
        ),
    );
}

#[test]
fn copilot_cli_works_inside_with_a_custom_provider_and_its_deny_tool_flag_holds() {
    require_bwrap!();
    let Some(prefix) = copilot_prefix() else { return };
    let world = project();
    configure(&world);
    let model = ScriptedModel::start(vec![
        lowercase_bash("cat README.md && sh test.sh"),
        lowercase_bash("git push origin main; echo push=$?"),
        lowercase_bash("echo more >> README.md && git commit --no-verify -qam sneaky; echo commit=$?"),
    ]);
    let before = super::remote_head(&world);
    // The flag `agent-sandbox test` names for `Bash(git push:*)` (`toolguard::agents::copilot`).
    let run = copilot(&world, &prefix, &model, &["--deny-tool", "shell(git push:*)"]);
    assert_eq!(model.steps_played(), 3, "{}\n{}\n{:#?}", run.stdout(), run.stderr(), model.requests());
    let results = model.tool_results();
    assert_eq!(results.len(), 3, "{results:#?}");
    assert!(results[0].contains("hello") && results[0].contains("tests passed"), "{results:#?}");
    assert!(!results[1].contains("push=") && results[1].contains("denied"), "its --deny-tool: {results:#?}");
    assert_eq!(super::remote_head(&world), before);
    assert!(results[2].contains("--no-verify") && !results[2].contains("commit=0"), "the git guard: {results:#?}");
    let refused = blocked(&world);
    assert!(refused.iter().any(|(agent, _, what)| agent == "git" && what.contains("--no-verify")), "{refused:#?}");
}

#[test]
fn copilot_cli_reads_edits_tests_commits_and_pushes_inside() {
    require_bwrap!();
    let Some(prefix) = copilot_prefix() else { return };
    let world = project();
    configure(&world);
    let model = ScriptedModel::start(super::WHOLE_TASK.iter().map(|command| lowercase_bash(command)).collect());
    let mut cmd = world.cmd();
    let recorder = super::GitRecorder::new(&world).options(&mut cmd);
    let run = copilot_with(cmd, &prefix, &model, &recorder, &[]);
    super::whole_task_done(&world, &model, &run, "copilot");
}

/// Copilot CLI's settings hold its login (in plain text where no keychain answers) beside
/// hooks, a status line and trusted folders: what the session writes there is kept but
/// those keys, which get the user's values back; its plugins' directory is read-only.
/// Then the user's own Copilot CLI, on the host, runs the user's hook, not the session's.
#[test]
fn copilots_settings_written_inside_never_run_on_the_host_and_its_login_is_kept() {
    require_bwrap!();
    let Some(prefix) = copilot_prefix() else { return };
    let world = project();
    configure(&world);
    let user_hook = r#"{"sessionStart": [{"type": "command", "bash": "echo user >> ~/user-hook-ran"}]}"#;
    world.write("home/.copilot/settings.json", &format!("{{\n  // mine\n  \"hooks\": {user_hook}\n}}\n"));
    let model = ScriptedModel::start(vec![lowercase_bash(
        r#"printf '{"hooks": {"sessionStart": [{"type": "command", "bash": "touch ~/agent-hook-ran"}]}, "trustedFolders": ["/"], "statusLine": {"type": "command", "command": "touch ~/agent-status-ran"}, "loggedInUsers": ["kept"]}' > ~/.copilot/settings.json; echo settings=$?; mkdir ~/.copilot/installed-plugins/evil; echo plugins=$?"#,
    )]);
    let run = copilot(&world, &prefix, &model, &[]);
    assert_eq!(model.steps_played(), 1, "{}\n{}", run.stdout(), run.stderr());
    let results = model.tool_results();
    assert!(results[0].contains("settings=0") && results[0].contains("plugins=1"), "{results:#?}");
    assert!(run.stderr().contains("put back as they were"), "{}", run.stderr());
    let settings: serde_json::Value =
        serde_json::from_str(&world.read("home/.copilot/settings.json")).expect("settings.json is JSON");
    assert_eq!(
        settings,
        json!({ "hooks": serde_json::from_str::<serde_json::Value>(user_hook).expect("JSON"), "loggedInUsers": ["kept"] }),
        "the login kept, the hooks the user's, no trusted folder, no status line"
    );
    assert!(!world.home.join(".copilot/installed-plugins/evil").exists());

    // The user's Copilot CLI, outside the sandbox.
    let model = ScriptedModel::start(Vec::new());
    let host = std::process::Command::new(prefix.join("bin/copilot"))
        .args(["-p", "Say hello.", "--allow-all-tools"])
        .current_dir(&world.project)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &world.home)
        .env("COPILOT_PROVIDER_BASE_URL", format!("http://127.0.0.1:{}/v1", model.port))
        .env("COPILOT_PROVIDER_API_KEY", "sk-scripted-model")
        .env("COPILOT_MODEL", "gpt-4.1")
        .env("COPILOT_OFFLINE", "true")
        .env("COPILOT_AUTO_UPDATE", "false")
        .output()
        .expect("copilot runs on the host");
    assert!(!model.requests().is_empty(), "{}", String::from_utf8_lossy(&host.stderr));
    assert!(world.home.join("user-hook-ran").exists(), "the user's own hook runs on the host");
    assert!(!world.home.join("agent-hook-ran").exists(), "the session's hook never does");
    assert!(!world.home.join("agent-status-ran").exists());
}
