//! `agent-sandbox test`'s rows for `tools.disallowed`/`tools.readOnly` per agent: which
//! rules each agent's own engine enforces (the managed files `exec` mounts,
//! `toolguard::agents`) and which it does not, and why. Claude Code and Codex run the
//! tool guard itself as a hook, so every rule holds for them. Decided from the plans
//! `exec` mounts, not probed by running the agents (their end-to-end tests do that).

use config::agents::{Agent, CATALOG};
use toolguard::agents::{AgentPlan, Tools, Verdict};

use crate::{Row, Status};

/// One row per catalogued agent when `tools.*` says anything (none otherwise: there
/// is nothing to enforce). `installed` says whether the agent's command is on this
/// machine: a rule an absent agent cannot enforce holds nothing back.
pub fn rows(config: &config::Config, installed: &dyn Fn(&Agent) -> bool) -> Result<Vec<Row>, String> {
    let settings = guard_settings::ToolGuardSettings::from_config(config);
    let disallowed: Vec<toolguard::Rule> =
        settings.disallowed.iter().map(|text| toolguard::Rule::parse(text)).collect::<Result<_, _>>()?;
    let tools = Tools { disallowed: &disallowed, read_only: settings.read_only };
    let mut rows = Vec::new();
    if disallowed.is_empty() && !settings.read_only {
        return Ok(rows);
    }
    for agent in CATALOG {
        let guarantee = guarantee(agent.name);
        let plan = match agent.name {
            "Gemini CLI" => toolguard::agents::gemini(&tools, None)?,
            "Qwen Code" => toolguard::agents::qwen(&tools, None)?,
            "OpenCode" => toolguard::agents::opencode(&tools, None)?,
            "Copilot CLI" => toolguard::agents::copilot(&tools),
            // Claude Code and Codex: the tool guard is their managed PreToolUse hook.
            _ => hook_plan(&tools),
        };
        rows.push(row(guarantee, &plan, installed(agent)));
    }
    Ok(rows)
}

fn hook_plan(tools: &Tools<'_>) -> AgentPlan {
    let how = || Verdict::Enforced("the tool guard as its managed PreToolUse hook".into());
    let mut rules: Vec<(String, Verdict)> = tools.disallowed.iter().map(|rule| (rule.text.clone(), how())).collect();
    if tools.read_only {
        rules.push(("readOnly".into(), how()));
    }
    AgentPlan { document: None, rules }
}

fn row(guarantee: &'static str, plan: &AgentPlan, installed: bool) -> Row {
    let (mut enforced, mut not) = (Vec::new(), Vec::new());
    for (text, verdict) in &plan.rules {
        match verdict {
            Verdict::Enforced(how) => enforced.push(format!("{text} ({how})")),
            Verdict::NotEnforced(why) => not.push(format!("{text} ({why})")),
        }
    }
    let mut probe = format!("from the managed configuration exec mounts: enforced: {}", list(&enforced));
    if !not.is_empty() {
        probe.push_str(&format!("; NOT enforced: {}", list(&not)));
    }
    let status = match (not.is_empty(), installed) {
        (true, _) => Status::Held,
        (false, true) => Status::NotHeld,
        (false, false) => {
            probe.push_str(" (the agent is not installed here)");
            Status::NotApplicable
        }
    };
    let fix = (status == Status::NotHeld).then(|| {
        "this agent's own engine cannot say these rules: only the kernel-level guards (files, network, git) hold \
         for it; use an agent that enforces them, or drop the rules you do not need"
            .to_owned()
    });
    Row { guarantee, status, probe, fix }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// The row's name, per agent (`Row::guarantee` is static).
fn guarantee(agent: &str) -> &'static str {
    match agent {
        "Claude Code" => "tools.* in Claude Code",
        "Codex" => "tools.* in Codex",
        "Gemini CLI" => "tools.* in Gemini CLI",
        "OpenCode" => "tools.* in OpenCode",
        "Copilot CLI" => "tools.* in Copilot CLI",
        "Qwen Code" => "tools.* in Qwen Code",
        _ => "tools.* in another agent",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(jsonc: &str) -> config::Config {
        let layer =
            config::parse_layer(jsonc, std::path::Path::new("t.jsonc"), config::LayerKind::Project).expect("layer");
        config::merge(vec![config::defaults(), layer])
    }

    fn summary(rows: &[Row]) -> Vec<(&str, Status)> {
        rows.iter().map(|row| (row.guarantee, row.status)).collect()
    }

    #[test]
    fn each_agent_says_what_it_enforces() {
        let config = config(r#"{"tools": {"disallowed": ["Bash(git push:*)", "Write"]}}"#);
        let rows = rows(&config, &|agent| agent.name != "Codex").expect("rows");
        assert_eq!(
            summary(&rows),
            [
                ("tools.* in Claude Code", Status::Held),
                ("tools.* in Codex", Status::Held),
                ("tools.* in Gemini CLI", Status::NotHeld),
                ("tools.* in OpenCode", Status::Held),
                ("tools.* in Copilot CLI", Status::NotHeld),
                ("tools.* in Qwen Code", Status::Held),
            ]
        );
        assert_eq!(
            rows[2].probe,
            "from the managed configuration exec mounts: enforced: Write (tools.exclude write_file, replace); NOT \
             enforced: Bash(git push:*) (Gemini CLI's tools.exclude takes whole tools only (the tool stays allowed))"
        );
        assert!(rows[4].fix.is_some());
    }

    /// The catalog's managed files are the ones `exec` mounts (`sandbox::plan`).
    #[test]
    fn every_managed_file_the_catalog_names_is_one_exec_mounts() {
        let mounted: Vec<&str> = [runtime_layout::CLAUDE_MANAGED_SETTINGS, runtime_layout::CODEX_REQUIREMENTS]
            .into_iter()
            .chain(runtime_layout::AGENT_MANAGED.iter().map(|(_, path)| *path))
            .collect();
        for agent in CATALOG {
            if let config::agents::Managed::File { path } = agent.permissions.managed {
                assert!(mounted.contains(&path), "{}: {path} is not mounted", agent.name);
            }
        }
        assert!(
            !mounted.iter().any(|path| path.starts_with("/etc/gemini-cli")),
            "Gemini CLI ignores system settings not owned by root: its rules go into a copy of the user's settings"
        );
    }

    #[test]
    fn no_rules_no_rows_and_an_agent_not_installed_is_not_applicable() {
        assert!(rows(&config("{}"), &|_| true).expect("rows").is_empty(), "nothing to enforce, no rows");
        let config = config(r#"{"tools": {"disallowed": ["Bash"]}}"#);
        let rows = rows(&config, &|_| false).expect("rows");
        assert_eq!(rows[4].status, Status::NotApplicable, "{}", rows[4].probe);
    }
}
