//! `agent-sandbox tool-guard`: what Claude Code and Codex run before every tool call,
//! from the managed configuration `exec` mounts read-only (`/etc/claude-code/
//! managed-settings.json`, `/etc/codex/requirements.toml`; in a container image the
//! Feature's install writes them root-owned). It reads the `PreToolUse`
//! hook input on stdin, judges the call with `toolguard` against the settings snapshot
//! in the runtime directory (in a container: the root-owned `/etc/agent-sandbox`
//! config and `tool-guard.json`, which the image's build took from the project's
//! config), and denies with the documented decision JSON and a reason, audited. It
//! fails closed: input or settings it cannot use block the call (exit status 2, the
//! reason on stderr, which both agents show the model).

use std::io::Read as _;

use guard_settings::ToolGuardSettings;
use runtime_layout::{RuntimeLayout, Where};

/// No hook input is legitimately bigger (a `Write` carries the whole file).
const INPUT_LIMIT: u64 = 64 * 1024 * 1024;

/// Exit status that makes the agent block the call and show stderr to the model.
const BLOCK: i32 = 2;

/// Runs the guard; `agent` is the harness the managed configuration named (`claude`,
/// `codex`), used in the audit log when the input names no agent.
pub fn run(agent: &str) -> i32 {
    match judge(agent) {
        Ok(Some(answer)) => {
            println!("{answer}");
            0
        }
        Ok(None) => 0,
        Err(why) => {
            eprintln!("agent-sandbox tool-guard: {why}; the call is blocked");
            BLOCK
        }
    }
}

/// The denial to print, if any.
fn judge(agent: &str) -> Result<Option<String>, String> {
    let settings = settings()?;
    let guard = toolguard::Guard::new(&settings.disallowed, settings.read_only)?;
    let mut bytes = Vec::new();
    std::io::stdin().take(INPUT_LIMIT).read_to_end(&mut bytes).map_err(|err| format!("reading stdin: {err}"))?;
    let input: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|err| format!("the hook input is not JSON ({err})"))?;
    let tool = input.get("tool_name").and_then(serde_json::Value::as_str).ok_or("the hook input has no tool_name")?;
    let tool_input = input.get("tool_input").unwrap_or(&serde_json::Value::Null);
    let cwd = input.get("cwd").and_then(serde_json::Value::as_str);
    let call = toolguard::Call { tool, input: tool_input, cwd, resolved: None };
    let resolved = call.target().and_then(|target| resolve(std::path::Path::new(&target)));
    let call = toolguard::Call { resolved: resolved.as_deref(), ..call };
    let Some(denial) = guard.judge(&call) else {
        return Ok(None);
    };
    // A subagent's name when the input has one (Claude Code's `agent_type`).
    let name = ["agent_type", "agent_name"]
        .iter()
        .find_map(|key| input.get(*key).and_then(serde_json::Value::as_str))
        .unwrap_or(agent);
    let target = ["command", "file_path", "path", "notebook_path", "url"]
        .iter()
        .find_map(|key| tool_input.get(*key).and_then(serde_json::Value::as_str))
        .map_or_else(|| tool.to_owned(), |what| format!("{tool} {}", what.chars().take(200).collect::<String>()));
    let policy = if denial.rule == "tools.readOnly" { "tool-read-only" } else { "tool-disallowed" };
    let event = audit::Event::new(name, "tool", &target, "blocked", policy, Some(denial.rule.clone()));
    if !audit::send(&event) && runtime_layout::detect() == Where::Container {
        eprintln!("agent-sandbox tool-guard: note: the audit log is not reachable here");
    }
    Ok(Some(toolguard::deny_json(&denial)))
}

/// `path` with its symlinks resolved, component by component with `read_link` (a link
/// whose target is missing or hidden in this view still says where it points, which
/// `canonicalize` would not). Only link targets and metadata are read, nothing is
/// opened, so a FIFO or a device the agent put there cannot block the guard. `None` for
/// a loop.
fn resolve(path: &std::path::Path) -> Option<String> {
    use std::path::PathBuf;
    let mut done = PathBuf::from("/");
    let mut todo: Vec<std::ffi::OsString> = path.components().rev().map(|part| part.as_os_str().to_owned()).collect();
    let mut hops = 0;
    while let Some(part) = todo.pop() {
        if part == "/" || part == "." || part.is_empty() {
            continue;
        }
        if part == ".." {
            done.pop();
            continue;
        }
        let next = done.join(&part);
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                if hops > 40 {
                    return None;
                }
                let target = std::fs::read_link(&next).ok()?;
                if target.is_absolute() {
                    done = PathBuf::from("/");
                }
                todo.extend(target.components().rev().map(|part| part.as_os_str().to_owned()));
            }
            _ => done = next,
        }
    }
    done.to_str().map(str::to_owned)
}

fn settings() -> Result<ToolGuardSettings, String> {
    match runtime_layout::detect() {
        Where::Bubblewrap => {
            let path = RuntimeLayout::inside().tool_guard_settings();
            match ToolGuardSettings::read(&path) {
                Ok(Some(settings)) => Ok(settings),
                Ok(None) => Err(format!("{} is missing", path.display())),
                Err(err) => Err(err.to_string()),
            }
        }
        // The image's config and the settings its build took from the project's (both
        // root-owned), together: lists only accumulate.
        Where::Container => {
            let config = config::load_for_container().map_err(|err| err.to_string())?;
            let mut settings = ToolGuardSettings::from_config(&config);
            match ToolGuardSettings::read(std::path::Path::new(ToolGuardSettings::CONTAINER_PATH)) {
                Ok(Some(image)) => {
                    settings.disallowed.extend(image.disallowed);
                    settings.read_only |= image.read_only;
                }
                Ok(None) => {}
                Err(err) => return Err(err.to_string()),
            }
            Ok(settings)
        }
        Where::Outside => Err("not inside an agent-sandbox, where its settings are".into()),
    }
}
