//! The catalog of project files that a program on the host runs or loads without asking
//! (an editor's tasks, an agent's hooks, direnv's `.envrc`, a dev container's
//! `initializeCommand`, a hook manager's config): each with the program, what it runs,
//! whether the program also reads copies in subdirectories, and the documentation that
//! says so. It is the one source of the built-in `filesystem.hostExecuted` entries
//! ([`crate::defaults`] adds them; the key stays for the user's own additions) and of the
//! list in README.md (checked by a test).
//!
//! It lives in `config` because the built-in defaults do: a second list in
//! `defaults.jsonc` could drift from it. Left out on purpose: files that are only read as
//! text (`CLAUDE.md`, `AGENTS.md`, `.cursor/rules`: instructions, not commands),
//! `.vscode/extensions.json` (recommendations VS Code asks about), `.env` (direnv loads it
//! only with `load_dotenv`, off by default; it is a secret pattern anyway) and
//! `.tool-versions` (versions, not commands).

/// One file (or directory: everything below it) that a host program runs or loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostRun {
    /// Relative to the directory the program works in (the project root).
    pub path: &'static str,
    /// A directory: everything below it counts.
    pub is_dir: bool,
    pub program: &'static str,
    /// What the program runs from it.
    pub runs: &'static str,
    /// The program also reads copies in subdirectories (a folder opened on its own, a
    /// directory `cd`ed into, a nested repository).
    pub reads_subdirectory_copies: bool,
    /// The documentation that says it runs.
    pub source: &'static str,
}

const fn file(
    path: &'static str,
    program: &'static str,
    runs: &'static str,
    reads_subdirectory_copies: bool,
    source: &'static str,
) -> HostRun {
    HostRun { path, is_dir: false, program, runs, reads_subdirectory_copies, source }
}

const fn dir(
    path: &'static str,
    program: &'static str,
    runs: &'static str,
    reads_subdirectory_copies: bool,
    source: &'static str,
) -> HostRun {
    HostRun { path, is_dir: true, program, runs, reads_subdirectory_copies, source }
}

const VSCODE_TASKS: &str = "https://code.visualstudio.com/docs/debugtest/tasks";
const VSCODE_TRUST: &str = "https://code.visualstudio.com/docs/editing/workspaces/workspace-trust";
const CLAUDE_SETTINGS: &str = "https://docs.anthropic.com/en/docs/claude-code/settings";
const MISE: &str = "https://mise.jdx.dev/configuration.html";
const LEFTHOOK: &str = "https://lefthook.dev/configuration/";
const LEFTHOOK_RUNS: &str = "the commands and scripts of the git hooks it installed";
const DEVCONTAINER: &str = "https://containers.dev/implementors/json_reference/";
const JETBRAINS: &str = "https://www.jetbrains.com/help/idea/run-debug-configuration.html";

/// Every entry, in the order README.md lists them.
pub const CATALOG: &[HostRun] = &[
    file(".vscode/tasks.json", "VS Code", "tasks, `runOn: folderOpen` ones when the folder opens", true, VSCODE_TASKS),
    file(
        ".vscode/launch.json",
        "VS Code",
        "debug configurations and their `preLaunchTask`",
        true,
        "https://code.visualstudio.com/docs/debugtest/debugging-configuration",
    ),
    file(
        ".vscode/settings.json",
        "VS Code",
        "executables named by settings (terminal, interpreters, linters)",
        true,
        VSCODE_TRUST,
    ),
    file(
        ".vscode/mcp.json",
        "VS Code",
        "MCP servers' commands",
        true,
        "https://code.visualstudio.com/docs/copilot/customization/mcp-servers",
    ),
    file(".cursor/mcp.json", "Cursor", "MCP servers' commands", true, "https://cursor.com/docs/mcp"),
    file(
        ".zed/settings.json",
        "Zed",
        "language servers' and context servers' commands",
        true,
        "https://zed.dev/docs/configuring-zed",
    ),
    file(".zed/tasks.json", "Zed", "tasks", true, "https://zed.dev/docs/tasks"),
    dir(
        ".idea/runConfigurations",
        "JetBrains IDEs",
        "run configurations and their before-launch tasks",
        false,
        JETBRAINS,
    ),
    dir(".run", "JetBrains IDEs", "run configurations (`*.run.xml`) and their before-launch tasks", false, JETBRAINS),
    file(
        ".claude/settings.json",
        "Claude Code",
        "hooks, `apiKeyHelper`, commands allowed without asking",
        true,
        CLAUDE_SETTINGS,
    ),
    file(".claude/settings.local.json", "Claude Code", "the same as `.claude/settings.json`", true, CLAUDE_SETTINGS),
    dir(
        ".claude/hooks",
        "Claude Code",
        "hook scripts its settings name",
        true,
        "https://docs.anthropic.com/en/docs/claude-code/hooks",
    ),
    dir(
        ".claude/commands",
        "Claude Code",
        "slash commands, with `allowed-tools` and `!` shell lines",
        true,
        "https://docs.anthropic.com/en/docs/claude-code/slash-commands",
    ),
    dir(
        ".claude/agents",
        "Claude Code",
        "subagents with their own tools",
        true,
        "https://docs.anthropic.com/en/docs/claude-code/sub-agents",
    ),
    dir(
        ".claude/skills",
        "Claude Code",
        "skills (`*/SKILL.md`), with `allowed-tools` used without asking",
        true,
        "https://docs.anthropic.com/en/docs/claude-code/skills",
    ),
    file(
        ".mcp.json",
        "Claude Code",
        "MCP servers' commands",
        true,
        "https://docs.anthropic.com/en/docs/claude-code/mcp",
    ),
    dir(
        ".codex",
        "Codex",
        "`config.toml` (MCP servers, sandbox and approval settings) and rules, in trusted projects",
        true,
        "https://developers.openai.com/codex/config-basic",
    ),
    dir(
        ".gemini",
        "Gemini CLI",
        "`settings.json` (MCP servers, tool discovery commands) and custom commands",
        true,
        "https://geminicli.com/docs/cli/configuration",
    ),
    dir(".devcontainer", "Dev Containers", "`devcontainer.json`: `initializeCommand` on the host", true, DEVCONTAINER),
    file(".devcontainer.json", "Dev Containers", "`initializeCommand` on the host", true, DEVCONTAINER),
    file(".envrc", "direnv", "the whole file, in the shell, on `cd` (once allowed)", true, "https://direnv.net/"),
    file("mise.toml", "mise", "`[env]` sources, hooks and tasks", true, MISE),
    file(".mise.toml", "mise", "the same as `mise.toml`", true, MISE),
    file("mise.local.toml", "mise", "the same as `mise.toml`", true, MISE),
    file(".mise.local.toml", "mise", "the same as `mise.toml`", true, MISE),
    dir(".mise", "mise", "`config.toml` and file tasks", true, MISE),
    file(".config/mise.toml", "mise", "the same as `mise.toml`", true, MISE),
    dir(".config/mise", "mise", "`config.toml` and file tasks", true, MISE),
    file(
        ".pre-commit-config.yaml",
        "pre-commit",
        "its hooks, `repo: local` ones as written, at every commit",
        true,
        "https://pre-commit.com/",
    ),
    file("lefthook.yml", "lefthook", LEFTHOOK_RUNS, true, LEFTHOOK),
    file(".lefthook.yml", "lefthook", LEFTHOOK_RUNS, true, LEFTHOOK),
    file("lefthook.yaml", "lefthook", LEFTHOOK_RUNS, true, LEFTHOOK),
    file(".lefthook.yaml", "lefthook", LEFTHOOK_RUNS, true, LEFTHOOK),
    file("lefthook.toml", "lefthook", LEFTHOOK_RUNS, true, LEFTHOOK),
    file(".lefthook.toml", "lefthook", LEFTHOOK_RUNS, true, LEFTHOOK),
    file("lefthook.json", "lefthook", LEFTHOOK_RUNS, true, LEFTHOOK),
    file(".lefthook.json", "lefthook", LEFTHOOK_RUNS, true, LEFTHOOK),
    file(".config/lefthook.yml", "lefthook", LEFTHOOK_RUNS, true, LEFTHOOK),
    file("lefthook-local.yml", "lefthook", LEFTHOOK_RUNS, true, LEFTHOOK),
    file(".lefthook-local.yml", "lefthook", LEFTHOOK_RUNS, true, LEFTHOOK),
    dir(".lefthook", "lefthook", "scripts its config names", true, LEFTHOOK),
    dir(".lefthook-local", "lefthook", "scripts its local config names", true, LEFTHOOK),
    dir(".husky", "husky", "the git hook scripts in it", false, "https://typicode.github.io/husky/"),
    dir(
        ".git/info",
        "git",
        "`info/attributes` chooses which filter and diff drivers run",
        false,
        "https://git-scm.com/docs/gitrepository-layout",
    ),
];

/// The entries among `configured` (the `filesystem.hostExecuted` values) whose program
/// also reads copies in subdirectories: those copies are covered too, wherever they are
/// (the user's own additions cover the root only).
pub fn subdirectory_rules<'a>(configured: impl IntoIterator<Item = &'a str>) -> Vec<&'static str> {
    let configured: Vec<&str> = configured.into_iter().collect();
    CATALOG
        .iter()
        .filter(|entry| entry.reads_subdirectory_copies && configured.contains(&entry.path))
        .map(|entry| entry.path)
        .collect()
}

/// The catalog as README.md lists it (one line per entry).
pub fn markdown() -> String {
    let mut text = String::new();
    for entry in CATALOG {
        let path = if entry.is_dir { format!("{}/", entry.path) } else { entry.path.to_owned() };
        let copies = if entry.reads_subdirectory_copies { "; copies in subdirectories are read too" } else { "" };
        text.push_str(&format!(
            "- `{path}` ({}): {}{copies} ([source]({}))\n",
            entry.program, entry.runs, entry.source
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_a_relative_path_listed_once_with_a_source() {
        let mut seen = std::collections::BTreeSet::new();
        for entry in CATALOG {
            let path = std::path::Path::new(entry.path);
            assert!(
                path.components().all(|part| matches!(part, std::path::Component::Normal(_))),
                "{} is not a plain relative path",
                entry.path
            );
            assert!(seen.insert(entry.path), "{} listed twice", entry.path);
            assert!(entry.source.starts_with("https://"), "{} has no source", entry.path);
        }
    }

    /// The book's list (`docs/src/guide/inside.md`) is this table's [`markdown`]: a change
    /// to one without the other fails here, printing the text to paste.
    #[test]
    fn the_book_lists_the_catalog() {
        let page_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/guide/inside.md");
        let readme = std::fs::read_to_string(page_path).expect("docs/src/guide/inside.md is readable");
        let begin = "<!-- host-run catalog: generated from crates/config/src/host_run.rs -->\n";
        let end = "<!-- end of host-run catalog -->";
        let start = readme.find(begin).expect("the page has the catalog's begin marker") + begin.len();
        let stop = readme[start..].find(end).expect("the page has the catalog's end marker") + start;
        assert_eq!(
            readme[start..stop],
            markdown(),
            "docs/src/guide/inside.md's catalog differs from host_run::CATALOG; paste:\n{}",
            markdown()
        );
    }
}
