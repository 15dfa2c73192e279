//! The catalog of the coding agents agent-sandbox knows: for each, what its
//! documentation says about its programs (read-only inside), its state (read-write and
//! kept across sessions, so a login stays), the hosts it needs (its API, its sign-in),
//! the files in its state that its host process runs later (hooks, MCP server commands,
//! plugins, custom commands: read-only inside, see `session::agent_guard`), and its own
//! permission system (which `tools.*` drive, see `toolguard::agents`). Every entry names
//! the documentation it comes from.
//!
//! It is pure data and the one source of: the `@agents` preset's paths
//! (`policy::presets`), the agents' hosts on the default allowlist ([`crate::defaults`]
//! adds them; `exec` keeps only the running agent's, see [`hosts_for`]), the guard of
//! their host-executed files and the agents page's table in the book (`docs/src/guide/agents.md`, checked by a test).
//!
//! It lives in `config` because the defaults do, as [`crate::host_run`] does. Paths are
//! relative to `$HOME`. Left out on purpose: files an agent only reads as text
//! (`CLAUDE.md`, `GEMINI.md`, `AGENTS.md`, output styles, themes), and caches the agent
//! fills itself (OpenCode's `~/.cache/opencode` holds the provider packages it
//! installs and runs: not kept, so a session cannot plant code there).

/// One coding agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agent {
    pub name: &'static str,
    /// The program names that start it (what `exec -- NAME` runs).
    pub commands: &'static [&'static str],
    /// Its own programs outside the usual bin directories (read-only inside: the user
    /// runs them outside the sandbox too).
    pub programs: &'static [&'static str],
    /// Its state directories (read-write, kept across sessions).
    pub state: &'static [&'static str],
    pub state_source: &'static str,
    /// Hosts it needs: its API, its sign-in, its token refresh.
    pub hosts: &'static [&'static str],
    pub hosts_source: &'static str,
    /// What in its state its host process runs later.
    pub host_executed: &'static [Executable],
    pub permissions: Permissions,
}

/// A file or directory in an agent's state that its host process runs or loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Executable {
    /// Relative to `$HOME`.
    pub path: &'static str,
    pub kind: Kind,
    /// What the agent runs from it.
    pub runs: &'static str,
    pub source: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A settings file: read-only inside. When absent at the start it is created with
    /// `empty` (what the agent reads as "no settings") so that it can be mounted.
    File { empty: &'static str },
    /// A directory: read-only inside, created empty when absent.
    Dir,
    /// A file whose mere existence changes what the agent reads (a `.env`: its lookup
    /// stops at the first one it finds): read-only inside when present; when absent it
    /// is not created (an empty one would hide the next in the lookup), and one the
    /// session created is moved aside at exit.
    Watched,
    /// Keys of a state file the agent rewrites all the time (it cannot be read-only):
    /// what the session changes in them is not copied back (`session::claude_state`).
    Keys { keys: &'static [&'static str] },
}

/// An agent's own permission system, and how `tools.disallowed`/`tools.readOnly`
/// reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permissions {
    pub system: &'static str,
    pub managed: Managed,
    pub source: &'static str,
}

/// Where agent-sandbox puts its rules for the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Managed {
    /// A managed file users and projects cannot override, mounted read-only at `path`.
    File { path: &'static str },
    /// The user's own settings file (relative to `$HOME`), shown read-only as a copy
    /// with the rules merged in: for an agent that ignores its system settings inside a
    /// sandbox (Gemini CLI reads them only when they and every parent are root's, which
    /// nothing is inside an unprivileged user namespace).
    HomeCopy { path: &'static str },
    /// Only command-line flags: nothing agent-sandbox can enforce without wrapping the
    /// agent's command line.
    FlagsOnly { flags: &'static str },
}

const CLAUDE_SETTINGS: &str = "https://docs.anthropic.com/en/docs/claude-code/settings";
const CODEX_CONFIG: &str = "https://developers.openai.com/codex/config-reference";
const GEMINI_CONFIG: &str = "https://geminicli.com/docs/cli/configuration";
const OPENCODE_CONFIG: &str = "https://opencode.ai/docs/config";
const OPENCODE_PLUGINS: &str = "https://opencode.ai/docs/plugins";
const COPILOT_CONFIG: &str =
    "https://docs.github.com/en/copilot/how-tos/copilot-cli/set-up-copilot-cli/configure-copilot-cli";
const COPILOT_DIR: &str = "https://docs.github.com/en/copilot/reference/copilot-cli-reference/cli-config-dir-reference";
const QWEN_CONFIG: &str = "https://qwenlm.github.io/qwen-code-docs/en/cli/configuration";

const fn file(path: &'static str, empty: &'static str, runs: &'static str, source: &'static str) -> Executable {
    Executable { path, kind: Kind::File { empty }, runs, source }
}

const fn watched(path: &'static str, runs: &'static str, source: &'static str) -> Executable {
    Executable { path, kind: Kind::Watched, runs, source }
}

const fn dir(path: &'static str, runs: &'static str, source: &'static str) -> Executable {
    Executable { path, kind: Kind::Dir, runs, source }
}

/// Every agent, in the order the agents page lists them.
pub const CATALOG: &[Agent] = &[
    Agent {
        name: "Claude Code",
        commands: &["claude"],
        // The native installer's versions (`~/.local/bin/claude` points there).
        programs: &[".local/share/claude"],
        // `~/.claude.json` lives in `~/.claude` inside (`session::claude_state`): Claude
        // Code renames over it, which a single-file mount refuses.
        state: &[".claude", ".config/claude", ".local/state/claude"],
        state_source: CLAUDE_SETTINGS,
        // It signs in and refreshes its token at platform.claude.com
        // (console.anthropic.com before 2.1.81); the browser part runs outside.
        hosts: &["api.anthropic.com", "platform.claude.com", "console.anthropic.com", "statsig.anthropic.com", "claude.ai"],
        hosts_source: "https://docs.anthropic.com/en/docs/claude-code/network-config",
        host_executed: &[
            file(
                ".claude/settings.json",
                "{}\n",
                "hooks, `apiKeyHelper`, `statusLine`, `awsAuthRefresh`, `otelHeadersHelper` commands; tools allowed without asking",
                CLAUDE_SETTINGS,
            ),
            file(
                ".claude/settings.local.json",
                "{}\n",
                "the same as `settings.json` when it runs in the home directory (its local project settings)",
                CLAUDE_SETTINGS,
            ),
            dir(".claude/commands", "slash commands, with `!` shell lines and `allowed-tools`", "https://docs.anthropic.com/en/docs/claude-code/slash-commands"),
            dir(".claude/agents", "subagents with their own tools", "https://docs.anthropic.com/en/docs/claude-code/sub-agents"),
            dir(".claude/skills", "skills, with `allowed-tools` used without asking", "https://docs.anthropic.com/en/docs/claude-code/skills"),
            dir(".claude/hooks", "hook scripts its settings name", "https://docs.anthropic.com/en/docs/claude-code/hooks"),
            dir(".claude/plugins", "plugins: their hooks, MCP servers and commands", "https://docs.anthropic.com/en/docs/claude-code/plugins"),
            Executable {
                path: ".claude.json",
                kind: Kind::Keys {
                    keys: &["mcpServers", "projects.*.mcpServers", "projects.*.allowedTools", "projects.*.enabledMcpjsonServers", "projects.*.enableAllProjectMcpServers"],
                },
                runs: "MCP servers' commands (user and per project), tools allowed without asking",
                source: "https://docs.anthropic.com/en/docs/claude-code/mcp",
            },
        ],
        permissions: Permissions {
            system: "permission rules and `PreToolUse` hooks in managed settings",
            managed: Managed::File { path: "/etc/claude-code/managed-settings.json" },
            source: "https://docs.anthropic.com/en/docs/claude-code/iam",
        },
    },
    Agent {
        name: "Codex",
        commands: &["codex"],
        programs: &[],
        state: &[".codex", ".config/codex"],
        state_source: CODEX_CONFIG,
        hosts: &["api.openai.com", "auth.openai.com", "chatgpt.com"],
        hosts_source: "https://developers.openai.com/codex/auth",
        host_executed: &[
            file(
                ".codex/config.toml",
                "",
                "`mcp_servers` commands, `notify`, hooks, sandbox and approval settings",
                CODEX_CONFIG,
            ),
            file(".codex/hooks.json", "{}\n", "hooks", "https://developers.openai.com/codex/hooks"),
            dir(".codex/rules", "execution policy rules (commands allowed without asking)", "https://developers.openai.com/codex/rules"),
            dir(".codex/skills", "skills and their scripts", "https://developers.openai.com/codex/skills"),
        ],
        permissions: Permissions {
            system: "`PreToolUse` hooks in managed requirements",
            managed: Managed::File { path: "/etc/codex/requirements.toml" },
            source: "https://developers.openai.com/codex/security",
        },
    },
    Agent {
        name: "Gemini CLI",
        commands: &["gemini"],
        programs: &[],
        state: &[".gemini"],
        state_source: GEMINI_CONFIG,
        // The API (API key), and Google sign-in with Code Assist.
        hosts: &["generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com"],
        hosts_source: "https://geminicli.com/docs/get-started/authentication",
        host_executed: &[
            file(".gemini/settings.json", "{}\n", "`mcpServers` commands, hooks, `tools.discoveryCommand`/`callCommand`", GEMINI_CONFIG),
            watched(".gemini/.env", "environment variables it loads (`NODE_OPTIONS` reaches every node it starts)", "https://geminicli.com/docs/get-started/authentication"),
            dir(".gemini/commands", "custom commands, with `!{…}` shell lines", "https://geminicli.com/docs/cli/custom-commands"),
            dir(".gemini/skills", "skills and their scripts", "https://geminicli.com/docs/cli/skills"),
            dir(".gemini/agents", "subagents with their own tools", "https://geminicli.com/docs/core/subagents"),
            dir(".gemini/extensions", "extensions: their MCP servers, commands and hooks", "https://geminicli.com/docs/extensions"),
            dir(".gemini/policies", "policy rules (tools allowed without asking)", "https://geminicli.com/docs/core/policy-engine"),
        ],
        permissions: Permissions {
            system: "`tools.exclude` and `mcp.excluded` in its settings (merged as a union with the project's)",
            managed: Managed::HomeCopy { path: ".gemini/settings.json" },
            source: GEMINI_CONFIG,
        },
    },
    Agent {
        name: "OpenCode",
        commands: &["opencode"],
        programs: &[],
        // `auth.json` and the sessions; its config directory is all host-executed.
        state: &[".local/share/opencode", ".local/state/opencode", ".config/opencode"],
        state_source: "https://opencode.ai/docs/troubleshooting",
        // OpenCode talks to any provider: Anthropic's and OpenAI's APIs are there for
        // Claude Code and Codex; models.dev and models.opencode.ai list the models, opencode.ai is its own.
        hosts: &["models.dev", "models.opencode.ai", "opencode.ai", "api.anthropic.com", "api.openai.com", "openrouter.ai"],
        hosts_source: "https://opencode.ai/docs/providers",
        host_executed: &[
            file(".config/opencode/opencode.json", "{}\n", "`mcp` commands, plugins, formatters' and LSP servers' commands", OPENCODE_CONFIG),
            file(".config/opencode/opencode.jsonc", "{}\n", "the same as `opencode.json`", OPENCODE_CONFIG),
            file(".config/opencode/config.json", "{}\n", "the same as `opencode.json` (its older name)", OPENCODE_CONFIG),
            dir(".config/opencode/plugin", "plugins (JavaScript run in its process)", OPENCODE_PLUGINS),
            dir(".config/opencode/plugins", "plugins (JavaScript run in its process)", OPENCODE_PLUGINS),
            dir(".config/opencode/tool", "custom tools (JavaScript)", "https://opencode.ai/docs/custom-tools"),
            dir(".config/opencode/tools", "custom tools (JavaScript)", "https://opencode.ai/docs/custom-tools"),
            dir(".config/opencode/command", "custom commands, with `!` shell lines", "https://opencode.ai/docs/commands"),
            dir(".config/opencode/commands", "custom commands, with `!` shell lines", "https://opencode.ai/docs/commands"),
            dir(".config/opencode/agent", "agents with their own permissions", "https://opencode.ai/docs/agents"),
            dir(".config/opencode/agents", "agents with their own permissions", "https://opencode.ai/docs/agents"),
            // It runs `bun install` here at every start (its plugins' dependencies): the
            // package's own install scripts run, and its plugins import what lands in
            // `node_modules`; bun takes where to fetch from from the lockfile, `bunfig.toml`
            // and `.npmrc` beside it.
            file(".config/opencode/package.json", "{}\n", "`bun install` at its start: the package's install scripts, its dependencies", OPENCODE_PLUGINS),
            dir(".config/opencode/node_modules", "the packages its plugins and custom tools import", OPENCODE_PLUGINS),
            watched(".config/opencode/bun.lock", "where `bun install` fetches each package from", "https://bun.sh/docs/install/lockfile"),
            watched(".config/opencode/bunfig.toml", "bun's install settings (registries, scopes)", "https://bun.sh/docs/runtime/bunfig"),
            watched(".config/opencode/.npmrc", "the registries `bun install` fetches from", "https://bun.sh/docs/install/npmrc"),
        ],
        permissions: Permissions {
            system: "`permission` rules in the managed config directory (it wins over every other config)",
            managed: Managed::File { path: "/etc/opencode/opencode.json" },
            source: "https://opencode.ai/docs/permissions",
        },
    },
    Agent {
        name: "Copilot CLI",
        commands: &["copilot"],
        programs: &[],
        state: &[".copilot"],
        state_source: COPILOT_CONFIG,
        // github.com and api.github.com (its sign-in) are on the list for git already.
        hosts: &["*.githubcopilot.com", "copilot-proxy.githubusercontent.com"],
        hosts_source: "https://docs.github.com/en/copilot/reference/copilot-allowlist-reference",
        host_executed: &[
            file(".copilot/mcp-config.json", "{\"mcpServers\": {}}\n", "MCP servers' commands", "https://docs.github.com/en/copilot/how-tos/copilot-cli/customize-copilot/add-mcp-servers"),
            // Its launcher runs the newest version it finds here (its auto-update).
            dir(".copilot/pkg", "newer versions of itself, which its launcher runs", "https://docs.github.com/en/copilot/reference/copilot-cli-reference"),
            dir(".copilot/hooks", "hooks", "https://docs.github.com/en/copilot/reference/hooks-reference"),
            dir(".copilot/agents", "custom agents with their own tools", "https://docs.github.com/en/copilot/reference/custom-agents-configuration"),
            dir(".copilot/skills", "skills and their scripts", "https://docs.github.com/en/copilot/concepts/agents/about-agent-skills"),
            dir(".copilot/installed-plugins", "plugins: their hooks, MCP servers, agents and skills", COPILOT_DIR),
            watched(".copilot/lsp-config.json", "LSP servers' commands", COPILOT_DIR),
            watched(".copilot/permissions-config.json", "tools and directories allowed without asking, per project", COPILOT_DIR),
            // Its settings (JSON with comments) and its own state file hold what it must
            // write too (its model, its login, in plain text where no keychain answers, as
            // inside): not read-only; these keys get their values back after the session.
            Executable {
                path: ".copilot/settings.json",
                kind: Kind::Keys { keys: &["hooks", "statusLine", "trustedFolders", "enabledPlugins", "allowedUrls"] },
                runs: "hooks and the status line's command; trusted folders (their hooks, MCP servers and plugins load without asking); plugins; URLs fetched without asking",
                source: COPILOT_DIR,
            },
            Executable {
                path: ".copilot/config.json",
                kind: Kind::Keys { keys: &["trusted_folders", "trustedFolders", "installedPlugins", "enabledPlugins"] },
                runs: "trusted folders and installed plugins (state it manages itself)",
                source: COPILOT_DIR,
            },
        ],
        permissions: Permissions {
            system: "`--allow-tool`/`--deny-tool` flags and approvals it asks for",
            managed: Managed::FlagsOnly { flags: "--deny-tool" },
            source: COPILOT_CONFIG,
        },
    },
    Agent {
        name: "Qwen Code",
        commands: &["qwen"],
        programs: &[],
        state: &[".qwen"],
        state_source: QWEN_CONFIG,
        // DashScope (API key, its international and US endpoints) and Qwen OAuth.
        hosts: &["dashscope.aliyuncs.com", "dashscope-intl.aliyuncs.com", "dashscope-us.aliyuncs.com", "chat.qwen.ai", "portal.qwen.ai"],
        hosts_source: "https://qwenlm.github.io/qwen-code-docs/en/users/configuration/auth",
        host_executed: &[
            file(".qwen/settings.json", "{}\n", "`mcpServers` commands, hooks, `tools.discoveryCommand`/`callCommand`, tools allowed without asking", QWEN_CONFIG),
            watched(".qwen/.env", "environment variables it loads (`NODE_OPTIONS` reaches every node it starts)", QWEN_CONFIG),
            dir(".qwen/commands", "custom commands, with `!{…}` shell lines", "https://qwenlm.github.io/qwen-code-docs/en/users/features/commands"),
            dir(".qwen/extensions", "extensions: their MCP servers and commands", "https://qwenlm.github.io/qwen-code-docs/en/users/extension/introduction"),
            dir(".qwen/agents", "subagents with their own tools", "https://qwenlm.github.io/qwen-code-docs/en/users/features/sub-agents"),
            dir(".qwen/skills", "skills and their scripts", "https://qwenlm.github.io/qwen-code-docs/en/users/features/skills"),
        ],
        permissions: Permissions {
            system: "`permissions.deny` rules (Claude Code's syntax) in the system settings file",
            managed: Managed::File { path: "/etc/qwen-code/settings.json" },
            source: QWEN_CONFIG,
        },
    },
];

/// The agent `command` (what `exec` runs: a path or a name) starts, if any.
pub fn for_command(command: &str) -> Option<&'static Agent> {
    let name = std::path::Path::new(command).file_name()?.to_str()?;
    CATALOG.iter().find(|agent| agent.commands.contains(&name))
}

/// Every agent's hosts, in catalog order, each once: the built-in allowlist's entries
/// for agents ([`crate::defaults`]).
pub fn all_hosts() -> Vec<&'static str> {
    let mut hosts: Vec<&'static str> = Vec::new();
    for host in CATALOG.iter().flat_map(|agent| agent.hosts) {
        if !hosts.contains(host) {
            hosts.push(host);
        }
    }
    hosts
}

/// The agent hosts a session keeps on its allowlist: the running agent's when the
/// command is one, else every agent's (a shell may start any of them).
pub fn hosts_for(agent: Option<&Agent>) -> Vec<&'static str> {
    match agent {
        Some(agent) => agent.hosts.to_vec(),
        None => all_hosts(),
    }
}

/// The catalog as the agents page's table lists it (one row per agent).
pub fn markdown() -> String {
    let code = |items: &[&str]| items.iter().map(|item| format!("`{item}`")).collect::<Vec<_>>().join(", ");
    let mut text = String::from(
        "| Agent | Kept (read-write) | Hosts | Host-executed, read-only inside | Its permission system, from `tools.*` |\n\
         |---|---|---|---|---|\n",
    );
    for agent in CATALOG {
        let kept: Vec<String> = agent.state.iter().map(|path| format!("~/{path}")).collect();
        let guarded: Vec<String> = agent
            .host_executed
            .iter()
            .map(|entry| match entry.kind {
                Kind::File { .. } | Kind::Watched => format!("[`~/{}`]({})", entry.path, entry.source),
                Kind::Dir => format!("[`~/{}/`]({})", entry.path, entry.source),
                Kind::Keys { keys } => format!("[`~/{}`]({}) keys {}", entry.path, entry.source, code(keys)),
            })
            .collect();
        let managed = match agent.permissions.managed {
            Managed::File { path } => format!("enforced: `{path}`"),
            Managed::HomeCopy { path } => format!("enforced: a read-only copy of `~/{path}` with the rules"),
            Managed::FlagsOnly { flags } => format!("not enforced (only the `{flags}` flag)"),
        };
        text.push_str(&format!(
            "| {} (`{}`) | [{}]({}) | [{}]({}) | {} | [{}]({}): {managed} |\n",
            agent.name,
            agent.commands.join("`, `"),
            code(&kept.iter().map(String::as_str).collect::<Vec<_>>()),
            agent.state_source,
            code(agent.hosts),
            agent.hosts_source,
            guarded.join(", "),
            agent.permissions.system,
            agent.permissions.source,
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain_relative(path: &str) -> bool {
        !path.is_empty()
            && std::path::Path::new(path).components().all(|part| matches!(part, std::path::Component::Normal(_)))
    }

    /// Every value of the whole catalog: paths are plain and relative to the home, each
    /// host-executed path lies in the agent's own state (else it would not be writable
    /// inside anyway) and is listed once, every source is a link, every host a name.
    #[test]
    fn every_entry_is_well_formed_with_sources() {
        let mut commands = std::collections::BTreeSet::new();
        let mut guarded = std::collections::BTreeSet::new();
        for agent in CATALOG {
            assert!(!agent.commands.is_empty(), "{}: no command", agent.name);
            for command in agent.commands {
                assert!(commands.insert(*command), "{command} starts two agents");
            }
            for path in agent.programs.iter().chain(agent.state) {
                assert!(plain_relative(path), "{}: {path} is not a plain relative path", agent.name);
            }
            for source in [agent.state_source, agent.hosts_source, agent.permissions.source] {
                assert!(source.starts_with("https://"), "{}: {source} is not a link", agent.name);
            }
            assert!(!agent.hosts.is_empty(), "{}: no hosts", agent.name);
            for host in agent.hosts {
                let name = host.strip_prefix("*.").unwrap_or(host);
                assert!(
                    name.contains('.')
                        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || ".-".contains(c)),
                    "{}: {host} is not a host name",
                    agent.name
                );
            }
            for entry in agent.host_executed {
                assert!(plain_relative(entry.path), "{}: {} is not a plain relative path", agent.name, entry.path);
                assert!(guarded.insert(entry.path), "{} listed twice", entry.path);
                assert!(entry.source.starts_with("https://"), "{}: {} has no source", agent.name, entry.path);
                let in_state = agent.state.iter().any(|state| std::path::Path::new(entry.path).starts_with(state));
                match entry.kind {
                    Kind::Keys { keys } => assert!(!keys.is_empty(), "{}: no keys", entry.path),
                    Kind::File { .. } | Kind::Dir | Kind::Watched => {
                        assert!(in_state, "{}: {} is outside its state directories", agent.name, entry.path)
                    }
                }
            }
            match agent.permissions.managed {
                Managed::File { path } => {
                    assert!(path.starts_with("/etc/"), "{}: {path} is not a system file", agent.name)
                }
                Managed::HomeCopy { path } => assert!(
                    agent.host_executed.iter().any(|entry| entry.path == path),
                    "{}: {path} is not a guarded file (the copy replaces its read-only mount)",
                    agent.name
                ),
                Managed::FlagsOnly { .. } => {}
            }
        }
    }

    /// An empty settings file as created before the start must read as "no settings":
    /// valid JSON (an object) for the JSON ones, empty TOML for Codex's.
    #[test]
    fn created_settings_files_are_empty_documents() {
        for entry in CATALOG.iter().flat_map(|agent| agent.host_executed) {
            let Kind::File { empty } = entry.kind else { continue };
            if entry.path.ends_with(".toml") {
                assert_eq!(empty, "", "{}", entry.path);
            } else {
                let value: serde_json::Value = serde_json::from_str(empty).expect(entry.path);
                assert!(value.is_object(), "{}", entry.path);
            }
        }
    }

    #[test]
    fn the_command_names_its_agent() {
        let cases: &[(&str, Option<&str>)] = &[
            ("claude", Some("Claude Code")),
            ("/home/u/.local/bin/claude", Some("Claude Code")),
            ("codex", Some("Codex")),
            ("gemini", Some("Gemini CLI")),
            ("opencode", Some("OpenCode")),
            ("copilot", Some("Copilot CLI")),
            ("qwen", Some("Qwen Code")),
            ("bash", None),
            ("claude-wrapper", None),
            ("", None),
        ];
        for (command, expected) in cases {
            assert_eq!(for_command(command).map(|agent| agent.name), *expected, "{command}");
        }
    }

    #[test]
    fn a_session_keeps_its_agents_hosts_only() {
        assert_eq!(
            hosts_for(for_command("gemini")),
            ["generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com"]
        );
        assert_eq!(hosts_for(for_command("codex")), ["api.openai.com", "auth.openai.com", "chatgpt.com"]);
        let all = hosts_for(None);
        assert_eq!(all.len(), all.iter().collect::<std::collections::BTreeSet<_>>().len(), "each once");
        for agent in CATALOG {
            assert!(agent.hosts.iter().all(|host| all.contains(host)), "{}", agent.name);
        }
    }

    /// The agents page's table is this catalog's [`markdown`]: a change to one without the
    /// other fails here, printing the text to paste.
    #[test]
    fn readme_lists_the_agents() {
        let readme_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/guide/agents.md");
        let readme = std::fs::read_to_string(readme_path).expect("docs/src/guide/agents.md is readable");
        let begin = "<!-- agent catalog: generated from crates/config/src/agents.rs -->\n";
        let end = "<!-- end of agent catalog -->";
        let start = readme.find(begin).expect("the agents page has the agent catalog's begin marker") + begin.len();
        let stop = readme[start..].find(end).expect("the agents page has the agent catalog's end marker") + start;
        assert_eq!(
            readme[start..stop],
            markdown(),
            "docs/src/guide/agents.md's agent table differs from agents::CATALOG; paste:\n{}",
            markdown()
        );
    }
}
