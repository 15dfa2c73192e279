//! `tools.disallowed` and `tools.readOnly` as the managed configuration of the agents
//! that do not run the tool guard as a hook: Gemini CLI's settings (`tools.exclude`,
//! `mcp.excluded`, merged into a copy of the user's own), Qwen Code's system settings
//! (`permissions.deny`, Claude Code's syntax) and OpenCode's managed config
//! (`permission`), each mounted read-only where the agent reads it (`config::agents`), with, per rule, whether that agent's own engine
//! enforces it and why not (`agent-sandbox test` prints it). Copilot CLI takes its deny
//! rules only as `--deny-tool` flags: nothing is enforced for it. Pure: nothing here
//! reads files; the host's own managed file comes in as text.

use serde_json::{json, Map, Value};

use crate::{Rule, Spec, EDIT_TOOLS};

/// One rule's fate in one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Enforced by the agent's own engine, as this entry.
    Enforced(String),
    /// Not enforced, and why.
    NotEnforced(String),
}

/// An agent's managed document and what it enforces.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentPlan {
    /// The document to mount (the host's own merged in), if the agent takes one.
    pub document: Option<String>,
    /// Each `tools.disallowed` rule (and `tools.readOnly` as `readOnly`), with its fate.
    pub rules: Vec<(String, Verdict)>,
}

/// The `tools.*` settings, parsed.
pub struct Tools<'a> {
    pub disallowed: &'a [Rule],
    pub read_only: bool,
}

const READ_ONLY: &str = "readOnly";

/// Gemini CLI 0.61: `tools.exclude` denies whole tools in its policy engine (merged as a
/// union: the project's settings cannot take one out), `mcp.excluded` whole MCP
/// servers; `existing` is the user's settings the copy starts from. A rule with a
/// command, path or domain cannot be said there.
pub fn gemini(tools: &Tools<'_>, existing: Option<&str>) -> Result<AgentPlan, String> {
    let mut exclude: Vec<String> = Vec::new();
    let mut servers: Vec<String> = Vec::new();
    let mut rules = Vec::new();
    let whole_tools_only = "Gemini CLI's tools.exclude takes whole tools only";
    for rule in tools.disallowed {
        let verdict = match (&rule.spec, gemini_tools(&rule.tool)) {
            (Spec::Any, Some(names)) => {
                exclude.extend(names.iter().map(|name| (*name).to_owned()));
                Verdict::Enforced(format!("tools.exclude {}", names.join(", ")))
            }
            (Spec::Any, None) => match rule.tool.strip_prefix("mcp__").filter(|server| !server.contains("__")) {
                Some(server) => {
                    servers.push(server.to_owned());
                    Verdict::Enforced(format!("mcp.excluded {server}"))
                }
                None => Verdict::NotEnforced(format!("Gemini CLI has no tool {:?}", rule.tool)),
            },
            (_, _) => Verdict::NotEnforced(format!("{whole_tools_only} (the tool stays allowed)")),
        };
        rules.push((rule.text.clone(), verdict));
    }
    if tools.read_only {
        exclude.extend(["write_file", "replace"].map(str::to_owned));
        rules.push((READ_ONLY.into(), Verdict::Enforced("tools.exclude write_file, replace".into())));
    }
    let mut document = parse_object(existing)?;
    if !exclude.is_empty() {
        extend_array(&mut document, &["tools", "exclude"], exclude)?;
    }
    if !servers.is_empty() {
        extend_array(&mut document, &["mcp", "excluded"], servers)?;
    }
    Ok(AgentPlan { document: Some(pretty(&document)?), rules })
}

/// Gemini CLI's names for a Claude Code tool (`Read` also covers the searches, as the
/// tool guard's does).
fn gemini_tools(tool: &str) -> Option<&'static [&'static str]> {
    Some(match tool {
        "Bash" => &["run_shell_command"],
        tool if EDIT_TOOLS.contains(&tool) => &["write_file", "replace"],
        "Read" => &["read_file", "read_many_files", "glob", "grep_search", "list_directory"],
        "Glob" => &["glob"],
        "Grep" => &["grep_search"],
        "LS" => &["list_directory"],
        "WebFetch" => &["web_fetch"],
        "WebSearch" => &["google_web_search"],
        _ => return None,
    })
}

/// Qwen Code 0.15: `permissions.deny` in the system settings, Claude Code's syntax
/// (deny beats every allow, merged as a union). `Bash(cmd:*)` is written `Bash(cmd *)`.
pub fn qwen(tools: &Tools<'_>, existing: Option<&str>) -> Result<AgentPlan, String> {
    let mut deny: Vec<String> = Vec::new();
    let mut rules = Vec::new();
    for rule in tools.disallowed {
        let tool = match rule.tool.as_str() {
            "Bash" | "Read" | "Write" | "Edit" | "Glob" | "Grep" | "WebFetch" => Some(rule.tool.as_str()),
            "MultiEdit" | "NotebookEdit" | "apply_patch" => Some("Edit"),
            "LS" => Some("list_directory"),
            _ => None,
        };
        let verdict = match tool {
            None => Verdict::NotEnforced(format!("Qwen Code has no tool {:?} this plan knows", rule.tool)),
            Some(tool) => {
                let entry = match &rule.spec {
                    Spec::Any => tool.to_owned(),
                    Spec::Command { command, prefix: true } => format!("{tool}({command} *)"),
                    Spec::Command { command, prefix: false } => format!("{tool}({command})"),
                    Spec::Path(pattern) => format!("{tool}({})", relative(pattern.as_str())),
                    Spec::Domain(domain) => format!("{tool}(domain:{domain})"),
                };
                deny.push(entry.clone());
                Verdict::Enforced(format!("permissions.deny {entry}"))
            }
        };
        rules.push((rule.text.clone(), verdict));
    }
    if tools.read_only {
        deny.extend(["Edit", "Write"].map(str::to_owned));
        rules.push((READ_ONLY.into(), Verdict::Enforced("permissions.deny Edit, Write".into())));
    }
    let mut document = parse_object(existing)?;
    if !deny.is_empty() {
        extend_array(&mut document, &["permissions", "deny"], deny)?;
    }
    Ok(AgentPlan { document: Some(pretty(&document)?), rules })
}

/// OpenCode 1.18: `permission` in its managed config directory (`/etc/opencode`, which
/// wins over the user's and the project's config): a tool `deny`, or for `bash` one
/// pattern per command (`npm test`, `git push *`; the last matching pattern wins and
/// a deny here replaces the same pattern elsewhere). Paths and domains are not said.
pub fn opencode(tools: &Tools<'_>, existing: Option<&str>) -> Result<AgentPlan, String> {
    let mut permission = Map::new();
    let mut rules = Vec::new();
    for rule in tools.disallowed {
        let name = match rule.tool.as_str() {
            "Bash" => Some("bash"),
            tool if EDIT_TOOLS.contains(&tool) => Some("edit"),
            "Read" => Some("read"),
            "Glob" => Some("glob"),
            "Grep" => Some("grep"),
            "LS" => Some("list"),
            "WebFetch" => Some("webfetch"),
            "WebSearch" => Some("websearch"),
            _ => None,
        };
        let verdict = match (name, &rule.spec) {
            (None, _) => Verdict::NotEnforced(format!("OpenCode has no tool {:?} this plan knows", rule.tool)),
            (Some(name), Spec::Any) => {
                permission.insert(name.to_owned(), json!("deny"));
                Verdict::Enforced(format!("permission.{name} deny"))
            }
            (Some("bash"), Spec::Command { command, prefix }) => {
                let pattern = if *prefix { format!("{command} *") } else { command.clone() };
                let bash = permission.entry("bash").or_insert_with(|| json!({}));
                // A whole-tool deny already there covers it.
                if let Some(patterns) = bash.as_object_mut() {
                    patterns.insert(pattern.clone(), json!("deny"));
                }
                Verdict::Enforced(format!("permission.bash {pattern:?} deny"))
            }
            (Some(_), _) => Verdict::NotEnforced(
                "OpenCode's permission patterns for paths and domains are not generated (the tool stays allowed)"
                    .into(),
            ),
        };
        rules.push((rule.text.clone(), verdict));
    }
    if tools.read_only {
        permission.insert("edit".into(), json!("deny"));
        rules.push((READ_ONLY.into(), Verdict::Enforced("permission.edit deny".into())));
    }
    let mut document = parse_object(existing)?;
    if !permission.is_empty() {
        let Some(object) = document.as_object_mut() else { return Err("not a JSON object".into()) };
        object.insert("permission".into(), Value::Object(permission));
    }
    Ok(AgentPlan { document: Some(pretty(&document)?), rules })
}

/// Copilot CLI 1.0: deny rules exist only as `--deny-tool` on its own command line (no
/// system or managed settings file it reads: its managed settings come from the GitHub
/// organization; its hooks a project's `disableAllHooks` turns off), and agent-sandbox
/// does not rewrite the agent's command line: nothing is enforced. Each rule says the
/// flag that would say it to Copilot CLI, or that its permission kinds (`shell`,
/// `write`, `url`, an MCP server) have none: reads, searches and listings are not gated.
pub fn copilot(tools: &Tools<'_>) -> AgentPlan {
    let mut rules: Vec<(String, Verdict)> = Vec::new();
    for rule in tools.disallowed {
        rules.push((rule.text.clone(), Verdict::NotEnforced(copilot_flag(rule))));
    }
    if tools.read_only {
        rules.push((READ_ONLY.into(), Verdict::NotEnforced(copilot_says("write"))));
    }
    AgentPlan { document: None, rules }
}

fn copilot_says(pattern: &str) -> String {
    format!(
        "Copilot CLI takes deny rules only on its command line, which agent-sandbox does not rewrite: pass \
         --deny-tool '{pattern}' to copilot yourself"
    )
}

/// Why `rule` is not enforced in Copilot CLI, with its `--deny-tool` pattern when it has one.
fn copilot_flag(rule: &Rule) -> String {
    let glob = |text: &str| text.contains(['*', '?', '[']);
    let pattern = match (rule.tool.as_str(), &rule.spec) {
        ("Bash", Spec::Any) => Some("shell".to_owned()),
        ("Bash", Spec::Command { command, prefix: true }) => Some(format!("shell({command}:*)")),
        ("Bash", Spec::Command { command, prefix: false }) => Some(format!("shell({command})")),
        (tool, Spec::Any) if EDIT_TOOLS.contains(&tool) => Some("write".to_owned()),
        (tool, Spec::Path(path)) if EDIT_TOOLS.contains(&tool) && !glob(path.as_str()) => {
            Some(format!("write({})", path.as_str()))
        }
        ("WebFetch", Spec::Any) => Some("url".to_owned()),
        ("WebFetch", Spec::Domain(domain)) => Some(format!("url({domain})")),
        (tool, Spec::Any) => tool.strip_prefix("mcp__").map(|rest| match rest.split_once("__") {
            Some((server, name)) => format!("{server}({name})"),
            None => rest.to_owned(),
        }),
        _ => None,
    };
    match pattern {
        Some(pattern) => copilot_says(&pattern),
        None => {
            "Copilot CLI has no permission for it (its kinds are shell, write, url and MCP servers: reads, \
                 searches and listings are not gated, a write's path takes no glob); the kernel-level guards still hold"
                .to_owned()
        }
    }
}

/// `./secrets/**` and `secrets/**` alike, as Claude Code writes project paths.
fn relative(pattern: &str) -> String {
    if pattern.starts_with('/') || pattern.starts_with("./") {
        pattern.to_owned()
    } else {
        format!("./{pattern}")
    }
}

/// The host's (or the user's) file as a JSON object; comments and trailing commas are
/// allowed (Gemini CLI and Qwen Code read JSONC), and are not kept.
fn parse_object(existing: Option<&str>) -> Result<Value, String> {
    let value = match existing {
        Some(text) => jsonc_parser::parse_to_serde_value::<Value>(text, &Default::default())
            .map_err(|err| format!("not JSON: {err}"))?,
        None => json!({}),
    };
    if !value.is_object() {
        return Err("not a JSON object".into());
    }
    Ok(value)
}

/// Appends `items` (each once) to the array at `path`, made when absent.
fn extend_array(document: &mut Value, path: &[&str], items: Vec<String>) -> Result<(), String> {
    let mut node = document;
    for key in path {
        let Some(object) = node.as_object_mut() else { return Err(format!("{key:?}'s parent is not an object")) };
        let last = key == path.last().expect("a path has a last key");
        node = object.entry(*key).or_insert_with(|| if last { json!([]) } else { json!({}) });
    }
    let Some(array) = node.as_array_mut() else { return Err(format!("{:?} is not an array", path.join("."))) };
    for item in items {
        let item = Value::String(item);
        if !array.contains(&item) {
            array.push(item);
        }
    }
    Ok(())
}

fn pretty(document: &Value) -> Result<String, String> {
    serde_json::to_string_pretty(document).map_err(|err| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(texts: &[&str]) -> Vec<Rule> {
        texts.iter().map(|text| Rule::parse(text).expect("valid rule")).collect()
    }

    const RULES: &[&str] = &[
        "Bash",
        "Bash(git push:*)",
        "Bash(npm test)",
        "Write",
        "Read(./secrets/**)",
        "WebFetch(domain:evil.test)",
        "mcp__jira",
        "Task",
    ];

    fn verdicts(plan: &AgentPlan) -> Vec<(&str, String)> {
        plan.rules
            .iter()
            .map(|(text, verdict)| {
                let shown = match verdict {
                    Verdict::Enforced(how) => format!("enforced: {how}"),
                    Verdict::NotEnforced(_) => "NOT enforced".to_owned(),
                };
                (text.as_str(), shown)
            })
            .collect()
    }

    #[test]
    fn gemini_excludes_whole_tools_and_servers_and_names_the_rest() {
        let disallowed = rules(RULES);
        let plan =
            gemini(&Tools { disallowed: &disallowed, read_only: true }, Some(r#"{"tools": {"exclude": ["x"]}}"#))
                .expect("plan");
        let document: Value = serde_json::from_str(plan.document.as_deref().expect("a document")).expect("JSON");
        assert_eq!(
            document,
            json!({
                "tools": {"exclude": ["x", "run_shell_command", "write_file", "replace"]},
                "mcp": {"excluded": ["jira"]}
            })
        );
        assert_eq!(
            verdicts(&plan),
            [
                ("Bash", "enforced: tools.exclude run_shell_command".to_owned()),
                ("Bash(git push:*)", "NOT enforced".to_owned()),
                ("Bash(npm test)", "NOT enforced".to_owned()),
                ("Write", "enforced: tools.exclude write_file, replace".to_owned()),
                ("Read(./secrets/**)", "NOT enforced".to_owned()),
                ("WebFetch(domain:evil.test)", "NOT enforced".to_owned()),
                ("mcp__jira", "enforced: mcp.excluded jira".to_owned()),
                ("Task", "NOT enforced".to_owned()),
                ("readOnly", "enforced: tools.exclude write_file, replace".to_owned()),
            ]
        );
    }

    #[test]
    fn qwen_denies_in_claude_codes_syntax() {
        let disallowed = rules(RULES);
        let plan = qwen(&Tools { disallowed: &disallowed, read_only: false }, None).expect("plan");
        let document: Value = serde_json::from_str(plan.document.as_deref().expect("a document")).expect("JSON");
        assert_eq!(
            document,
            json!({"permissions": {"deny": [
                "Bash", "Bash(git push *)", "Bash(npm test)", "Write", "Read(./secrets/**)", "WebFetch(domain:evil.test)"
            ]}})
        );
        let not_enforced: Vec<&str> = plan
            .rules
            .iter()
            .filter(|(_, verdict)| matches!(verdict, Verdict::NotEnforced(_)))
            .map(|(text, _)| text.as_str())
            .collect();
        assert_eq!(not_enforced, ["mcp__jira", "Task"]);
    }

    #[test]
    fn opencode_denies_tools_and_command_patterns() {
        let disallowed = rules(&["Bash(git push:*)", "Bash(npm test)", "Edit", "Read(./secrets/**)"]);
        let plan =
            opencode(&Tools { disallowed: &disallowed, read_only: true }, Some(r#"{"model": "m"}"#)).expect("plan");
        let document: Value = serde_json::from_str(plan.document.as_deref().expect("a document")).expect("JSON");
        assert_eq!(
            document,
            json!({"model": "m", "permission": {"bash": {"git push *": "deny", "npm test": "deny"}, "edit": "deny"}})
        );
        assert_eq!(
            verdicts(&plan),
            [
                ("Bash(git push:*)", "enforced: permission.bash \"git push *\" deny".to_owned()),
                ("Bash(npm test)", "enforced: permission.bash \"npm test\" deny".to_owned()),
                ("Edit", "enforced: permission.edit deny".to_owned()),
                ("Read(./secrets/**)", "NOT enforced".to_owned()),
                ("readOnly", "enforced: permission.edit deny".to_owned()),
            ]
        );
    }

    #[test]
    fn nothing_configured_is_an_empty_document_and_no_rows() {
        let tools = Tools { disallowed: &[], read_only: false };
        for plan in [gemini(&tools, None), qwen(&tools, None), opencode(&tools, None)] {
            assert_eq!(plan, Ok(AgentPlan { document: Some("{}".into()), rules: Vec::new() }));
        }
        assert_eq!(copilot(&tools), AgentPlan { document: None, rules: Vec::new() });
    }

    /// Nothing is enforced; each rule says the `--deny-tool` pattern that would say it, or
    /// that Copilot CLI has none.
    #[test]
    fn copilot_enforces_nothing_and_names_the_flag_that_would() {
        let disallowed = rules(&[
            "Bash",
            "Bash(git push:*)",
            "Bash(npm test)",
            "Write",
            "Edit(./src/main.rs)",
            "Write(./secrets/**)",
            "WebFetch",
            "WebFetch(domain:example.com)",
            "mcp__github",
            "mcp__github__create_issue",
            "Read",
            "Read(./secrets/**)",
            "Grep",
            "WebSearch",
        ]);
        let plan = copilot(&Tools { disallowed: &disallowed, read_only: true });
        assert_eq!(plan.document, None);
        let none = "none";
        let said: Vec<(&str, &str)> = plan
            .rules
            .iter()
            .map(|(text, verdict)| match verdict {
                Verdict::Enforced(how) => panic!("{text} enforced: {how}"),
                Verdict::NotEnforced(why) => {
                    let pattern = why.split("--deny-tool '").nth(1).and_then(|rest| rest.split('\'').next());
                    (text.as_str(), pattern.unwrap_or(none))
                }
            })
            .collect();
        assert_eq!(
            said,
            [
                ("Bash", "shell"),
                ("Bash(git push:*)", "shell(git push:*)"),
                ("Bash(npm test)", "shell(npm test)"),
                ("Write", "write"),
                ("Edit(./src/main.rs)", "write(src/main.rs)"),
                ("Write(./secrets/**)", none),
                ("WebFetch", "url"),
                ("WebFetch(domain:example.com)", "url(example.com)"),
                ("mcp__github", "github"),
                ("mcp__github__create_issue", "github(create_issue)"),
                ("Read", none),
                ("Read(./secrets/**)", none),
                ("Grep", none),
                ("WebSearch", none),
                ("readOnly", "write"),
            ]
        );
    }

    #[test]
    fn a_host_file_that_is_not_an_object_is_an_error() {
        let tools = Tools { disallowed: &[], read_only: true };
        let with_comments = gemini(&tools, Some("{\n  // mine\n  \"ui\": {\"theme\": \"x\"},\n}")).expect("JSONC");
        let document: Value = serde_json::from_str(with_comments.document.as_deref().expect("doc")).expect("JSON");
        assert_eq!(document, json!({"ui": {"theme": "x"}, "tools": {"exclude": ["write_file", "replace"]}}));
        assert_eq!(gemini(&tools, Some("[]")), Err("not a JSON object".into()));
        assert!(qwen(&tools, Some("{")).is_err_and(|err| err.starts_with("not JSON")));
        assert_eq!(
            gemini(&tools, Some(r#"{"tools": {"exclude": "x"}}"#)),
            Err("\"tools.exclude\" is not an array".into())
        );
    }
}
