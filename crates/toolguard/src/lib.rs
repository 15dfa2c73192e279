//! The tool guard's judge: whether an agent's tool call (Claude Code's or Codex's
//! `PreToolUse` hook input) is one `tools.disallowed` or `tools.readOnly` forbids, and
//! the documents that wire the guard into the agents: Claude Code's managed settings
//! (`/etc/claude-code/managed-settings.json`) and Codex's managed requirements
//! (`/etc/codex/requirements.toml`), each running `agent-sandbox tool-guard` before
//! every tool call. Nothing here reads files or runs anything.
//!
//! Rules use Claude Code's permission syntax: `Tool` (every call of it; `mcp__server`
//! every tool of that MCP server), `Bash(npm test)` (that command), `Bash(git push:*)` or
//! `Bash(git push *)` (that command with any arguments), `Read(./secrets/**)` and the
//! like for the file tools (a glob over the path, absolute or relative to the agent's
//! working directory), `WebFetch(domain:example.com)` (that host and its subdomains).
//! A rule naming a file-editing tool covers them all (`Write`, `Edit`, `MultiEdit`,
//! `NotebookEdit`, Codex's `apply_patch`): denying `Write` while `Edit` may rewrite the
//! whole file would deny nothing. A shell command is judged textually, each part of a
//! `;`/`&&`/`||`/`|` list on its own, leading variable assignments removed; what a
//! script or `sh -c` runs is not seen (the kernel-level guards are the hard ones).

#![forbid(unsafe_code)]

use serde_json::Value;

pub mod agents;

/// The tools that change files: `tools.readOnly` denies them, and a rule naming one
/// covers all of them.
pub const EDIT_TOOLS: &[&str] = &["Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch"];

/// The shell tool (the same name in Claude Code and Codex).
const SHELL_TOOL: &str = "Bash";

/// One `tools.disallowed` entry, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// As written, for messages and the audit log.
    pub text: String,
    tool: String,
    spec: Spec,
}

#[derive(Debug, Clone, PartialEq)]
enum Spec {
    /// Every call of the tool.
    Any,
    /// A shell command: exactly `command`, or (`prefix`) it followed by arguments.
    Command { command: String, prefix: bool },
    /// A file tool's path.
    Path(glob::Pattern),
    /// WebFetch's host.
    Domain(String),
}

impl Rule {
    /// Parses one rule; the error says what forms there are.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let invalid = |why: &str| {
            format!(
                "tools.disallowed: {text:?} {why} (forms: Write, Bash(npm test), Bash(git push:*), Read(./secrets/**), \
                 WebFetch(domain:example.com), mcp__server)"
            )
        };
        let (tool, spec) = match text.split_once('(') {
            None => (text, None),
            Some((tool, rest)) => {
                let inner = rest.strip_suffix(')').ok_or_else(|| invalid("has no closing parenthesis"))?;
                (tool, Some(inner))
            }
        };
        if tool.is_empty() || !tool.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(invalid("does not start with a tool name"));
        }
        let spec = match spec.map(str::trim) {
            None | Some("*") => Spec::Any,
            Some("") => return Err(invalid("has an empty pattern")),
            Some(inner) if tool == SHELL_TOOL => {
                let (command, prefix) = match inner.strip_suffix(":*").or_else(|| inner.strip_suffix(" *")) {
                    Some(command) => (command, true),
                    None => (inner, false),
                };
                Spec::Command { command: words(command), prefix }
            }
            Some(inner) if tool == "WebFetch" => {
                let domain = inner.strip_prefix("domain:").ok_or_else(|| invalid("is not domain:HOST"))?;
                Spec::Domain(domain.trim_start_matches("*.").to_ascii_lowercase())
            }
            Some(inner) if FILE_TOOLS.contains(&tool) || EDIT_TOOLS.contains(&tool) => {
                let pattern = inner.strip_prefix("./").unwrap_or(inner);
                Spec::Path(glob::Pattern::new(pattern).map_err(|err| invalid(&format!("is not a glob ({err})")))?)
            }
            Some(_) => return Err(invalid("has a pattern this tool does not take")),
        };
        Ok(Rule { text: text.to_owned(), tool: tool.to_owned(), spec })
    }

    fn names_tool(&self, tool: &str) -> bool {
        let edits = |name: &str| EDIT_TOOLS.contains(&name);
        self.tool == tool
            || (edits(&self.tool) && edits(tool))
            || (self.tool.starts_with("mcp__")
                && tool.strip_prefix(self.tool.as_str()).is_some_and(|rest| rest.starts_with("__")))
    }

    fn matches(&self, call: &Call<'_>) -> Option<Hit> {
        let search_reads = self.tool == "Read" && SEARCH_TOOLS.contains(&call.tool);
        if !self.names_tool(call.tool) && !search_reads {
            return None;
        }
        match &self.spec {
            Spec::Any => Some(Hit::Call),
            Spec::Command { command, prefix } => {
                let text = call.input.get("command").and_then(Value::as_str).unwrap_or_default();
                commands(text)
                    .iter()
                    .any(|part| {
                        part == command
                            || (*prefix
                                && part.strip_prefix(command.as_str()).is_some_and(|rest| rest.starts_with(' ')))
                    })
                    .then_some(Hit::Call)
            }
            Spec::Path(pattern) => {
                let Some(target) = call.target() else {
                    // An edit without a path (apply_patch names its files in the patch).
                    return EDIT_TOOLS.contains(&call.tool).then_some(Hit::Call);
                };
                let cwd = call.cwd.map(|cwd| normalise(cwd, None));
                let candidates = [Some(target.as_str()), call.resolved];
                let matched = candidates.iter().flatten().any(|path| {
                    let relative = cwd.as_deref().and_then(|cwd| below(path, cwd));
                    pattern.matches(path) || relative.is_some_and(|rel| pattern.matches(rel))
                });
                if matched {
                    return Some(Hit::Call);
                }
                if !SEARCH_TOOLS.contains(&call.tool) {
                    return None;
                }
                // A search prints what is below its root: a root that holds a denied
                // tree (or lies in one whose pattern reaches any depth) reads it.
                let (base, rest) = literal_base(pattern.as_str(), cwd.as_deref());
                candidates
                    .iter()
                    .flatten()
                    .any(|root| {
                        below(&base, root).is_some() || (below(root, &base).is_some() && rest.contains(['*', '?', '[']))
                    })
                    .then_some(Hit::Tree(base))
            }
            Spec::Domain(domain) => {
                let url = call.input.get("url").and_then(Value::as_str).unwrap_or_default();
                let host =
                    url.split("://").nth(1).unwrap_or(url).split(['/', ':', '?', '#']).next().unwrap_or_default();
                let host = host.rsplit('@').next().unwrap_or_default().to_ascii_lowercase();
                (host == *domain || host.ends_with(&format!(".{domain}"))).then_some(Hit::Call)
            }
        }
    }
}

/// What a rule matched: the call itself, or (a search) a root holding the denied tree
/// at this path.
enum Hit {
    Call,
    Tree(String),
}

/// `path` made absolute against `cwd` and lexically normalised: `.` and empty parts
/// dropped, `..` taking off the part before it (never above `/`). Symlinks are not
/// resolved here: the caller passes what the path resolves to as a fact
/// ([`Call::resolved`]).
pub fn normalise(path: &str, cwd: Option<&str>) -> String {
    let joined = match cwd {
        Some(cwd) if !path.starts_with('/') => format!("{cwd}/{path}"),
        _ => path.to_owned(),
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    if !joined.starts_with('/') && cwd.is_none() {
        return parts.join("/");
    }
    format!("/{}", parts.join("/"))
}

/// `path` relative to `dir` when it is `dir` (`""`) or below it, by whole components.
fn below<'p>(path: &'p str, dir: &str) -> Option<&'p str> {
    let dir = dir.trim_end_matches('/');
    let rest = path.strip_prefix(dir)?;
    if rest.is_empty() {
        Some("")
    } else {
        rest.strip_prefix('/')
    }
}

/// A path pattern's leading components without glob characters, absolute (a relative
/// pattern is relative to `cwd`; without one, `/`, so every search is covered), and the
/// rest of the pattern.
fn literal_base(pattern: &str, cwd: Option<&str>) -> (String, String) {
    let parts: Vec<&str> = pattern.split('/').collect();
    let literal = parts.iter().take_while(|part| !part.contains(['*', '?', '['])).count();
    let base = parts[..literal].join("/");
    let rest = parts[literal..].join("/");
    let base =
        if pattern.starts_with('/') { normalise(&base, None) } else { normalise(&base, Some(cwd.unwrap_or("/"))) };
    (base, rest)
}

/// Tools whose pattern is a path (besides [`EDIT_TOOLS`]).
const FILE_TOOLS: &[&str] = &["Read", "Glob", "Grep", "LS"];

/// The tools that print what is below a directory: a `Read` rule covers them too, and a
/// search whose root holds a denied tree is denied.
pub const SEARCH_TOOLS: &[&str] = &["Glob", "Grep", "LS"];

/// One tool call, as the hook input gives it.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub tool: &'a str,
    pub input: &'a Value,
    /// The agent's working directory, for relative path patterns.
    pub cwd: Option<&'a str>,
    /// [`Call::target`] with its symlinks resolved (of its longest existing part), as
    /// the caller found it on disk: a rule matching either denies.
    pub resolved: Option<&'a str>,
}

impl Call<'_> {
    /// The path the call acts on, absolute and normalised ([`normalise`]): a file tool's
    /// path, or a search's root (its `path`, else the working directory; for `Glob`,
    /// joined with its pattern's leading literal directories, so `../secrets/*` is
    /// judged as the directory it searches).
    pub fn target(&self) -> Option<String> {
        let path = ["file_path", "path", "notebook_path"]
            .iter()
            .find_map(|key| self.input.get(*key).and_then(Value::as_str).filter(|path| !path.is_empty()));
        if !SEARCH_TOOLS.contains(&self.tool) {
            return path.map(|path| normalise(path, self.cwd));
        }
        let root = normalise(path.or(self.cwd).unwrap_or("/"), self.cwd);
        let glob = if self.tool == "Glob" { self.input.get("pattern").and_then(Value::as_str) } else { None };
        Some(match glob {
            Some(glob) => {
                let parts: Vec<&str> = glob.split('/').collect();
                let literal = parts.iter().take_while(|part| !part.contains(['*', '?', '['])).count();
                // The last part names files, not a directory, when it is all literal.
                let literal = if literal == parts.len() { literal.saturating_sub(1) } else { literal };
                normalise(&parts[..literal].join("/"), Some(&root))
            }
            None => root,
        })
    }
}

/// Why a call is denied: the rule (as written, or `tools.readOnly`) and the message for
/// the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub rule: String,
    pub reason: String,
}

/// The configured rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Guard {
    rules: Vec<Rule>,
    read_only: bool,
}

impl Guard {
    pub fn new(disallowed: &[String], read_only: bool) -> Result<Guard, String> {
        let rules = disallowed.iter().map(|text| Rule::parse(text)).collect::<Result<_, _>>()?;
        Ok(Guard { rules, read_only })
    }

    /// `Some` when the call is denied.
    pub fn judge(&self, call: &Call<'_>) -> Option<Denial> {
        let deny = |rule: &str, why: String| Denial {
            rule: rule.to_owned(),
            reason: format!(
                "agent-sandbox denies this {} call: {why}. Do the task without it, or ask the user to change the \
                 agent-sandbox config",
                call.tool
            ),
        };
        if self.read_only && EDIT_TOOLS.contains(&call.tool) {
            return Some(deny("tools.readOnly", "this agent is read-only (tools.readOnly)".into()));
        }
        let (rule, hit) = self.rules.iter().find_map(|rule| Some((rule, rule.matches(call)?)))?;
        let why = match hit {
            Hit::Call => format!("tools.disallowed has {:?}", rule.text),
            Hit::Tree(base) => format!(
                "tools.disallowed has {:?}, and this search covers {base}; search a directory that does not hold it \
                 (a subdirectory beside it), or name the files",
                rule.text
            ),
        };
        Some(deny(&rule.text, why))
    }
}

/// The hook's answer that denies (exit status 0 with this on stdout): the same document
/// for Claude Code and Codex.
pub fn deny_json(denial: &Denial) -> String {
    serde_json::json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": denial.reason,
        }
    })
    .to_string()
}

/// Claude Code's managed settings with the tool guard as a `PreToolUse` hook for every
/// tool and `allowManagedHooksOnly` (no user or project hook runs), merged into the
/// host's own managed settings when there are some (`existing`). A hook running
/// `command` already there is not added twice (an image's Feature installed again).
pub fn claude_managed_settings(existing: Option<&str>, command: &str) -> Result<String, String> {
    let mut settings = match existing {
        Some(text) => serde_json::from_str::<Value>(text).map_err(|err| format!("not JSON: {err}"))?,
        None => serde_json::json!({}),
    };
    let Some(object) = settings.as_object_mut() else { return Err("not a JSON object".into()) };
    object.insert("allowManagedHooksOnly".into(), Value::Bool(true));
    let hooks = object.entry("hooks").or_insert_with(|| serde_json::json!({}));
    let Some(hooks) = hooks.as_object_mut() else { return Err("\"hooks\" is not an object".into()) };
    let pre = hooks.entry("PreToolUse").or_insert_with(|| serde_json::json!([]));
    let Some(pre) = pre.as_array_mut() else { return Err("\"hooks.PreToolUse\" is not an array".into()) };
    let ours = serde_json::json!({ "hooks": [{ "type": "command", "command": command }] });
    pre.retain(|entry| *entry != ours);
    pre.insert(0, ours);
    serde_json::to_string_pretty(&settings).map_err(|err| err.to_string())
}

/// The first line of what [`codex_requirements`] puts before the host's own text.
const CODEX_HEAD: &str = "# Added by agent-sandbox: only managed hooks run (user and project hooks are ignored).";
/// The first line of what [`codex_requirements`] puts after it.
const CODEX_TAIL: &str = "# Added by agent-sandbox: its tool guard runs before every tool call.";

/// Codex's managed requirements: top-level `allow_managed_hooks_only = true` (Codex then
/// ignores user, project and session hooks; openai/codex#20319, `docs/config.md`), the
/// host's own requirements (`existing`) as they are but for their own
/// `allow_managed_hooks_only`, then the tool guard as a `PreToolUse` hook for every tool.
/// What an earlier run added is taken out first (an image's Feature installed again).
pub fn codex_requirements(existing: Option<&str>, command: &str) -> String {
    let mut theirs = existing.unwrap_or_default();
    theirs = theirs.strip_prefix(CODEX_HEAD).unwrap_or(theirs);
    if let Some((before, _)) = theirs.split_once(CODEX_TAIL) {
        theirs = before;
    }
    // A top-level key must come before the first table, and only once: their own
    // setting of it (before their first table) is dropped.
    let mut in_table = false;
    let kept: Vec<&str> = theirs
        .lines()
        .filter(|line| {
            let trimmed = line.trim_start();
            in_table |= trimmed.starts_with('[');
            in_table
                || !trimmed
                    .strip_prefix("allow_managed_hooks_only")
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .collect();
    let theirs = kept.join("\n");
    let mut text = format!("{CODEX_HEAD}\nallow_managed_hooks_only = true\n\n");
    if !theirs.trim().is_empty() {
        text.push_str(theirs.trim());
        text.push_str("\n\n");
    }
    text.push_str(CODEX_TAIL);
    text.push_str("\n[[hooks.PreToolUse]]\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\n");
    text.push_str(&format!("command = {}\n", serde_json::Value::String(command.to_owned())));
    text
}

/// `text` with runs of whitespace made one space and trimmed.
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The simple commands of a shell command line, textually: split at `;`, `&`, `|`,
/// newlines and parentheses/backquotes (so `$(…)` is judged too), each with leading
/// `NAME=value` words and wrapper words (`env`, `command`, `exec`, `nohup`, `time`,
/// `sudo`) removed.
fn commands(line: &str) -> Vec<String> {
    line.split([';', '&', '|', '\n', '(', ')', '`'])
        .map(|part| {
            let mut tokens: Vec<&str> = part.split_whitespace().collect();
            while let Some(first) = tokens.first() {
                let assignment = first.split_once('=').is_some_and(|(name, _)| {
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                });
                if assignment || ["env", "command", "exec", "nohup", "time", "sudo", "$"].contains(first) {
                    tokens.remove(0);
                } else {
                    break;
                }
            }
            tokens.join(" ")
        })
        .filter(|part| !part.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn guard(rules: &[&str], read_only: bool) -> Guard {
        Guard::new(&rules.iter().map(|rule| (*rule).to_owned()).collect::<Vec<_>>(), read_only).expect("valid rules")
    }

    /// Every disallowed form with the legitimate call beside it: (rules, tool, input,
    /// the rule that denies or None).
    #[test]
    fn each_form_denies_its_calls_and_passes_the_neighbours() {
        type Case<'a> = (&'a [&'a str], &'a str, Value, Option<&'a str>);
        let cases: Vec<Case<'_>> = vec![
            (&["Write"], "Write", json!({"file_path": "/p/a.rs", "content": "x"}), Some("Write")),
            (&["Write"], "Edit", json!({"file_path": "/p/a.rs"}), Some("Write")),
            (&["Write"], "apply_patch", json!({"command": "*** Begin Patch"}), Some("Write")),
            (&["Write"], "Read", json!({"file_path": "/p/a.rs"}), None),
            (&["Edit"], "MultiEdit", json!({"file_path": "/p/a.rs"}), Some("Edit")),
            (&["WebFetch"], "WebFetch", json!({"url": "https://example.com/"}), Some("WebFetch")),
            (&["WebFetch"], "WebSearch", json!({"query": "x"}), None),
            (&["Bash(git push:*)"], "Bash", json!({"command": "git push origin main"}), Some("Bash(git push:*)")),
            (&["Bash(git push:*)"], "Bash", json!({"command": "git push"}), Some("Bash(git push:*)")),
            (
                &["Bash(git push:*)"],
                "Bash",
                json!({"command": "git  status && git   push -f"}),
                Some("Bash(git push:*)"),
            ),
            (&["Bash(git push:*)"], "Bash", json!({"command": "GIT_TRACE=1 git push"}), Some("Bash(git push:*)")),
            (&["Bash(git push:*)"], "Bash", json!({"command": "echo $(git push)"}), Some("Bash(git push:*)")),
            (&["Bash(git push:*)"], "Bash", json!({"command": "git pushx"}), None),
            (&["Bash(git push:*)"], "Bash", json!({"command": "git status"}), None),
            (&["Bash(git push *)"], "Bash", json!({"command": "ls; git push --tags"}), Some("Bash(git push *)")),
            (&["Bash(npm publish)"], "Bash", json!({"command": "npm publish"}), Some("Bash(npm publish)")),
            (&["Bash(npm publish)"], "Bash", json!({"command": "npm publish --dry-run"}), None),
            (&["Bash"], "Bash", json!({"command": "ls"}), Some("Bash")),
            (&["Read(./secrets/**)"], "Read", json!({"file_path": "/p/secrets/a/b"}), Some("Read(./secrets/**)")),
            (&["Read(./secrets/**)"], "Read", json!({"file_path": "/p/src/a"}), None),
            (&["Edit(/etc/*)"], "Write", json!({"file_path": "/etc/passwd"}), Some("Edit(/etc/*)")),
            (
                &["WebFetch(domain:example.com)"],
                "WebFetch",
                json!({"url": "https://api.Example.com:443/x"}),
                Some("WebFetch(domain:example.com)"),
            ),
            (&["WebFetch(domain:example.com)"], "WebFetch", json!({"url": "https://example.org/"}), None),
            (&["mcp__github"], "mcp__github__create_issue", json!({}), Some("mcp__github")),
            (&["mcp__github"], "mcp__githubx__a", json!({}), None),
        ];
        for (rules, tool, input, expected) in cases {
            let call = Call { tool, input: &input, cwd: Some("/p"), resolved: None };
            let got = guard(rules, false).judge(&call).map(|denial| denial.rule);
            assert_eq!(got.as_deref(), expected, "{rules:?} {tool} {input}");
        }
    }

    /// Paths are judged normalised and, where the caller resolved a symlink, as what it
    /// points to: each refused spelling beside the legitimate one. (rules, tool, input,
    /// resolved, denied).
    #[test]
    fn paths_are_judged_normalised_and_resolved() {
        type Case<'a> = (&'a [&'a str], &'a str, Value, Option<&'a str>, bool);
        let secrets: &[&str] = &["Read(./secrets/**)"];
        let ci: &[&str] = &["Edit(./ci/**)"];
        let cases: Vec<Case<'_>> = vec![
            (secrets, "Read", json!({"file_path": "/p/src/../secrets/token.txt"}), None, true),
            (secrets, "Read", json!({"file_path": "/p/src/../src/main.rs"}), None, false),
            (secrets, "Read", json!({"file_path": "/p//secrets/./token.txt"}), None, true),
            (secrets, "Read", json!({"file_path": "secrets/token.txt"}), None, true),
            (secrets, "Read", json!({"file_path": "src/../secrets/a"}), None, true),
            (secrets, "Read", json!({"file_path": "/p/secrets-not/token.txt"}), None, false),
            (secrets, "Read", json!({"file_path": "/p/link.txt"}), Some("/p/secrets/token.txt"), true),
            (secrets, "Read", json!({"file_path": "/p/link.txt"}), Some("/p/src/main.rs"), false),
            (ci, "Edit", json!({"file_path": "/p/./ci/check.sh"}), None, true),
            (ci, "Write", json!({"file_path": "/p/ci/../src/lib.rs"}), None, false),
            (ci, "Edit", json!({"file_path": "/p/tools/check.sh"}), Some("/p/ci/check.sh"), true),
        ];
        for (rules, tool, input, resolved, denied) in cases {
            let call = Call { tool, input: &input, cwd: Some("/p"), resolved };
            let got = guard(rules, false).judge(&call);
            assert_eq!(got.is_some(), denied, "{rules:?} {tool} {input} {resolved:?}: {got:?}");
        }
    }

    /// A search whose root holds a denied tree is denied with a reason that says how to
    /// narrow it; a search of a directory without one passes. (tool, input, denied).
    #[test]
    fn a_search_that_covers_a_denied_tree_is_denied() {
        let guard = guard(&["Read(./secrets/**)", "Read(/etc/ssl/private/*)"], false);
        let cases = [
            ("Grep", json!({"pattern": "token"}), true),
            ("Grep", json!({"pattern": "token", "path": "/p"}), true),
            ("Grep", json!({"pattern": "token", "path": "/p/src/.."}), true),
            ("Grep", json!({"pattern": "token", "path": "/"}), true),
            ("Grep", json!({"pattern": "token", "path": "/p/secrets/sub"}), true),
            ("Grep", json!({"pattern": "token", "path": "/p/src"}), false),
            ("Grep", json!({"pattern": "token", "path": "src", "glob": "*.rs"}), false),
            ("Glob", json!({"pattern": "**/*.txt"}), true),
            ("Glob", json!({"pattern": "**/*.txt", "path": "/p/src"}), false),
            ("Glob", json!({"pattern": "../secrets/*", "path": "/p/src"}), true),
            ("Glob", json!({"pattern": "secrets/token.txt"}), true),
            ("Glob", json!({"pattern": "src/*.rs"}), false),
            ("LS", json!({"path": "/p"}), true),
            ("LS", json!({"path": "/p/src"}), false),
            ("LS", json!({"path": "/etc"}), true),
            ("LS", json!({"path": "/etc/ssl/certs"}), false),
            ("LS", json!({"path": "/etc/ssl/private/key.pem"}), true),
        ];
        for (tool, input, denied) in cases {
            let got = guard.judge(&Call { tool, input: &input, cwd: Some("/p"), resolved: None });
            assert_eq!(got.is_some(), denied, "{tool} {input}: {got:?}");
        }
        let denial = guard
            .judge(&Call {
                tool: "Grep",
                input: &json!({"pattern": "x", "path": "/p"}),
                cwd: Some("/p"),
                resolved: None,
            })
            .expect("denied");
        assert_eq!(denial.rule, "Read(./secrets/**)");
        assert!(
            denial.reason.contains("this search covers /p/secrets; search a directory that does not hold it"),
            "{}",
            denial.reason
        );
        // A root that resolves into a denied tree is judged there.
        let link =
            Call { tool: "LS", input: &json!({"path": "/p/src/l"}), cwd: Some("/p"), resolved: Some("/p/secrets") };
        assert!(guard.judge(&link).is_some());
    }

    #[test]
    fn normalise_is_lexical_and_absolute_against_the_cwd() {
        for (path, cwd, expected) in [
            ("/p/src/../secrets/t", None, "/p/secrets/t"),
            ("a/./b//c/", Some("/p"), "/p/a/b/c"),
            ("../../..", Some("/p"), "/"),
            ("/", None, "/"),
            ("x", Some("/p/../q"), "/q/x"),
        ] {
            assert_eq!(normalise(path, cwd), expected, "{path} {cwd:?}");
        }
    }

    #[test]
    fn read_only_denies_every_edit_tool_and_nothing_else() {
        let guard = guard(&[], true);
        for tool in EDIT_TOOLS {
            let denial = guard.judge(&Call { tool, input: &json!({}), cwd: None, resolved: None }).expect("denied");
            assert_eq!(denial.rule, "tools.readOnly");
        }
        for tool in ["Read", "Bash", "Grep", "WebFetch"] {
            assert_eq!(
                guard.judge(&Call { tool, input: &json!({"command": "ls"}), cwd: None, resolved: None }),
                None,
                "{tool}"
            );
        }
    }

    #[test]
    fn malformed_rules_are_errors_that_show_the_forms() {
        for bad in ["", "Bash(", "Bash()", "(x)", "WebFetch(example.com)", "Task(x)", "Read([)"] {
            let err = Rule::parse(bad).expect_err(bad);
            assert!(err.contains("forms: Write, Bash(npm test)"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_denial_is_the_documented_hook_output() {
        let denial = Denial { rule: "Write".into(), reason: "no".into() };
        assert_eq!(
            deny_json(&denial),
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}"#
        );
    }

    #[test]
    fn managed_settings_keep_the_hosts_own_and_put_the_guard_first() {
        let ours = claude_managed_settings(None, "/g").expect("valid");
        let value: Value = serde_json::from_str(&ours).expect("JSON");
        assert_eq!(
            value,
            json!({"allowManagedHooksOnly": true, "hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "/g"}]}]}})
        );
        let host = r#"{"permissions": {"deny": ["Bash(curl:*)"]}, "allowManagedHooksOnly": false,
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/corp"}]}]}}"#;
        let merged: Value =
            serde_json::from_str(&claude_managed_settings(Some(host), "/g").expect("valid")).expect("JSON");
        assert_eq!(
            merged,
            json!({
                "permissions": {"deny": ["Bash(curl:*)"]},
                "allowManagedHooksOnly": true,
                "hooks": {"PreToolUse": [
                    {"hooks": [{"type": "command", "command": "/g"}]},
                    {"matcher": "Bash", "hooks": [{"type": "command", "command": "/corp"}]}
                ]}
            })
        );
        for bad in ["[]", "{", r#"{"hooks": 1}"#, r#"{"hooks": {"PreToolUse": {}}}"#] {
            assert!(claude_managed_settings(Some(bad), "/g").is_err(), "{bad}");
        }
    }

    #[test]
    fn codex_requirements_allow_managed_hooks_only_and_follow_the_hosts_own() {
        let head = "# Added by agent-sandbox: only managed hooks run (user and project hooks are ignored).\n\
                    allow_managed_hooks_only = true\n\n";
        let tail = "# Added by agent-sandbox: its tool guard runs before every tool call.\n[[hooks.PreToolUse]]\n\
                    [[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"/g --agent codex\"\n";
        assert_eq!(codex_requirements(None, "/g --agent codex"), format!("{head}{tail}"));
        assert_eq!(
            codex_requirements(Some("approval_policy = \"never\"\n"), "/g --agent codex"),
            format!("{head}approval_policy = \"never\"\n\n{tail}")
        );
        // Their own top-level setting gives way (a key twice is invalid TOML); a key of
        // that name inside a table is another key and stays.
        let host = "allow_managed_hooks_only = false\napproval_policy = \"never\"\n[x]\nallow_managed_hooks_only = 1\n";
        assert_eq!(
            codex_requirements(Some(host), "/g --agent codex"),
            format!("{head}approval_policy = \"never\"\n[x]\nallow_managed_hooks_only = 1\n\n{tail}")
        );
        // Installed again over its own output: the same file.
        let once = codex_requirements(Some(host), "/g --agent codex");
        assert_eq!(codex_requirements(Some(&once), "/g --agent codex"), once);
    }

    #[test]
    fn managed_settings_installed_again_are_the_same() {
        let once = claude_managed_settings(Some(r#"{"permissions": {"deny": ["WebSearch"]}}"#), "/g").expect("valid");
        assert_eq!(claude_managed_settings(Some(&once), "/g").expect("valid"), once);
    }
}
