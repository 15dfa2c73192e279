//! The built-in presets: named bundles of path grants and command rules that the
//! `filesystem.presets` list switches on and off (`@all` by default, `!@name` removes).
//! README.md documents every expansion listed here; keep the two in step.

use config::{Origin, Sourced};

use crate::PolicyError;

/// Where a preset path is rooted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// An absolute path.
    Abs,
    /// Relative to `$HOME`.
    Home,
    /// Relative to the project root (not the cwd: `.git/hooks` belongs to the repository).
    Project,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PresetPath {
    pub root: Root,
    pub path: &'static str,
}

#[derive(Debug)]
pub struct Preset {
    pub name: &'static str,
    pub summary: &'static str,
    pub ro: &'static [PresetPath],
    pub rw: &'static [PresetPath],
    pub exclude: &'static [PresetPath],
    /// Files shown read-only as a copy without credential lines (see `settings`).
    pub copies: &'static [PresetPath],
    /// `commands.<name>` rules the preset sets, e.g. `git = @git`.
    pub commands: &'static [(&'static str, &'static str)],
}

const fn abs(path: &'static str) -> PresetPath {
    PresetPath { root: Root::Abs, path }
}
const fn home(path: &'static str) -> PresetPath {
    PresetPath { root: Root::Home, path }
}
const fn project(path: &'static str) -> PresetPath {
    PresetPath { root: Root::Project, path }
}

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "base",
        summary: "the system (read-only): /usr, /bin, /lib*, /opt, the parts of /etc programs need, user toolchains",
        ro: &[
            abs("/usr"),
            abs("/bin"),
            abs("/sbin"),
            abs("/lib"),
            abs("/lib32"),
            abs("/lib64"),
            abs("/libx32"),
            abs("/opt"),
            abs("/etc/alternatives"),
            abs("/etc/bash.bashrc"),
            abs("/etc/ca-certificates"),
            abs("/etc/ca-certificates.conf"),
            abs("/etc/crypto-policies"),
            abs("/etc/debian_version"),
            abs("/etc/fonts"),
            abs("/etc/gai.conf"),
            abs("/etc/group"),
            abs("/etc/host.conf"),
            abs("/etc/hostname"),
            abs("/etc/hosts"),
            abs("/etc/inputrc"),
            abs("/etc/ld.so.cache"),
            abs("/etc/ld.so.conf"),
            abs("/etc/ld.so.conf.d"),
            abs("/etc/locale.alias"),
            abs("/etc/localtime"),
            abs("/etc/login.defs"),
            abs("/etc/lsb-release"),
            abs("/etc/manpath.config"),
            abs("/etc/mime.types"),
            abs("/etc/nsswitch.conf"),
            abs("/etc/os-release"),
            abs("/etc/passwd"),
            abs("/etc/pki"),
            abs("/etc/profile"),
            abs("/etc/profile.d"),
            abs("/etc/protocols"),
            abs("/etc/resolv.conf"),
            abs("/etc/services"),
            abs("/etc/shells"),
            abs("/etc/ssl"),
            abs("/etc/terminfo"),
            abs("/etc/timezone"),
            home(".cargo/bin"),
            home(".rustup"),
            home(".local/bin"),
            home(".pyenv"),
            home(".nvm"),
            home(".volta"),
            home(".bun/bin"),
            home("go/bin"),
            home(".sdkman"),
            // npm's documented user prefix, fnm, asdf, mise, deno, pnpm's global bin:
            // programs (read-only), with their shims.
            home(".npm-global"),
            home(".fnm"),
            home(".local/share/fnm"),
            home(".asdf"),
            home(".local/share/mise"),
            home(".deno/bin"),
            home(".local/share/pnpm"),
        ],
        rw: &[],
        exclude: &[],
        copies: &[],
        commands: &[],
    },
    Preset {
        name: "caches",
        summary: "package and build caches (read-write), so installs and builds stay fast",
        ro: &[],
        rw: &[
            home(".cargo/registry"),
            home(".cargo/git"),
            home(".npm"),
            home(".pnpm-store"),
            home(".yarn/berry/cache"),
            home(".bun/install/cache"),
            home("go/pkg/mod"),
            home(".m2/repository"),
            home(".gradle/caches"),
            home(".nuget/packages"),
            home(".cache/pip"),
            home(".cache/uv"),
            home(".cache/pypoetry"),
            home(".cache/yarn"),
            home(".cache/pnpm"),
            home(".cache/node-gyp"),
            home(".cache/ruff"),
            home(".cache/golangci-lint"),
            home(".cache/deno"),
        ],
        exclude: &[],
        copies: &[],
        commands: &[],
    },
    Preset {
        name: "settings",
        summary: "package managers' settings (registries, mirrors), read-only copies without credential lines",
        ro: &[],
        rw: &[],
        exclude: &[],
        // npm's user config, pip's user, legacy and system ones, cargo's: where a corporate
        // mirror is set. Not the project's own (`.npmrc` there is a secret pattern).
        copies: &[
            home(".npmrc"),
            home(".config/pip/pip.conf"),
            home(".pip/pip.conf"),
            abs("/etc/pip.conf"),
            abs("/etc/xdg/pip/pip.conf"),
            home(".cargo/config.toml"),
            home(".cargo/config"),
        ],
        commands: &[],
    },
    Preset {
        name: "agents",
        summary: "the coding agents' state (read-write), so an agent can log in and keep it; their programs and the \
                  settings their host process runs read-only (the agent catalog)",
        ro: &AGENT_PROGRAMS,
        rw: &AGENT_STATE,
        exclude: &[],
        copies: &[],
        commands: &[],
    },
    Preset {
        name: "git",
        summary: "git works, but hooks, repository config and sandbox config are read-only; git runs through the guard",
        ro: &[
            abs("/etc/gitconfig"),
            home(".gitconfig"),
            home(".config/git/config"),
            home(".config/git/ignore"),
            home(".config/git/attributes"),
            project(".git/hooks"),
            project(".git/config"),
            project(".git/modules/*/hooks"),
            project(".git/modules/*/config"),
            project(".husky"),
            project(".agent-sandbox"),
            project(".agent-precommit/user-context.json"),
        ],
        rw: &[],
        exclude: &[],
        copies: &[],
        commands: &[("git", "@git")],
    },
    Preset {
        name: "lint",
        summary:
            "lint, format and hook-manager configs at the project root are read-only, so checks cannot be weakened",
        ro: &[
            project(".eslintrc*"),
            project("eslint.config.*"),
            project(".prettierrc*"),
            project("prettier.config.*"),
            project(".stylelintrc*"),
            project("stylelint.config.*"),
            project("biome.json"),
            project("biome.jsonc"),
            project(".editorconfig"),
            project(".golangci.yml"),
            project(".golangci.yaml"),
            project(".golangci.toml"),
            project("ruff.toml"),
            project(".ruff.toml"),
            project(".flake8"),
            project(".pylintrc"),
            project("mypy.ini"),
            project(".mypy.ini"),
            project("clippy.toml"),
            project(".clippy.toml"),
            project("rustfmt.toml"),
            project(".rustfmt.toml"),
            project("deny.toml"),
            project(".pre-commit-config.yaml"),
            project("lefthook.yml"),
            project("lefthook.yaml"),
            project(".lefthook.yml"),
            project(".lefthook.yaml"),
            project(".lintstagedrc*"),
            project("lint-staged.config.*"),
            project(".commitlintrc*"),
            project("commitlint.config.*"),
            project(".markdownlint*"),
            project(".yamllint*"),
            project(".shellcheckrc"),
            project(".rubocop.yml"),
            project(".swiftlint.yml"),
            project(".hadolint.yaml"),
        ],
        rw: &[],
        exclude: &[],
        copies: &[],
        commands: &[],
    },
];

/// `@agents`' read-only paths: every catalogued agent's programs
/// (`config::agents::CATALOG`), never the agent's to replace: the user runs them
/// outside the sandbox too.
pub const AGENT_PROGRAMS: [PresetPath; count_agent_paths(false)] = agent_paths(false);
/// `@agents`' read-write paths: every catalogued agent's state directories. The files
/// in them that the agent's host process runs are made read-only by `exec`
/// (`session::agent_guard`).
pub const AGENT_STATE: [PresetPath; count_agent_paths(true)] = agent_paths(true);

const fn agent_paths_of(agent: &config::agents::Agent, state: bool) -> &'static [&'static str] {
    if state {
        agent.state
    } else {
        agent.programs
    }
}

const fn count_agent_paths(state: bool) -> usize {
    let (mut count, mut idx) = (0, 0);
    while idx < config::agents::CATALOG.len() {
        count += agent_paths_of(&config::agents::CATALOG[idx], state).len();
        idx += 1;
    }
    count
}

const fn agent_paths<const N: usize>(state: bool) -> [PresetPath; N] {
    let mut paths = [home(""); N];
    let (mut out_idx, mut agent_idx) = (0, 0);
    while agent_idx < config::agents::CATALOG.len() {
        let list = agent_paths_of(&config::agents::CATALOG[agent_idx], state);
        let mut path_idx = 0;
        while path_idx < list.len() {
            paths[out_idx] = home(list[path_idx]);
            out_idx += 1;
            path_idx += 1;
        }
        agent_idx += 1;
    }
    paths
}

/// The names `@all` stands for.
pub const ALL: &[&str] = &["base", "caches", "settings", "agents", "git", "lint"];

/// The `@caches` directories and the tools that fill them: a missing one is created
/// before the sandbox starts when one of its tools is installed, so that the first
/// session's downloads are kept (a directory that does not exist is not mounted).
pub const CACHE_TOOLS: &[(&str, &[&str])] = &[
    (".cargo/registry", &["cargo"]),
    (".cargo/git", &["cargo"]),
    (".npm", &["npm"]),
    (".pnpm-store", &["pnpm"]),
    (".yarn/berry/cache", &["yarn"]),
    (".bun/install/cache", &["bun"]),
    ("go/pkg/mod", &["go"]),
    (".m2/repository", &["mvn"]),
    (".gradle/caches", &["gradle"]),
    (".nuget/packages", &["dotnet"]),
    (".cache/pip", &["pip", "pip3"]),
    (".cache/uv", &["uv"]),
    (".cache/pypoetry", &["poetry"]),
    (".cache/yarn", &["yarn"]),
    (".cache/pnpm", &["pnpm"]),
    (".cache/node-gyp", &["npm"]),
    (".cache/ruff", &["ruff"]),
    (".cache/golangci-lint", &["golangci-lint"]),
    (".cache/deno", &["deno"]),
];

/// Applies a `filesystem.presets` list in order and returns the enabled presets
/// (in catalogue order), each with the origin of the entry that enabled it.
pub fn expand(entries: &[Sourced<String>]) -> Result<Vec<(&'static Preset, Origin)>, PolicyError> {
    let mut enabled: Vec<(&'static str, Origin)> = Vec::new();
    for entry in entries {
        let (negated, text) = match entry.value.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, entry.value.as_str()),
        };
        let Some(name) = text.strip_prefix('@') else {
            return Err(PolicyError::Preset {
                origin: entry.origin.clone(),
                message: format!("{:?} is not a preset (write \"@name\" or \"!@name\")", entry.value),
            });
        };
        let names: Vec<&'static str> = if name == "all" {
            ALL.to_vec()
        } else {
            match PRESETS.iter().find(|preset| preset.name == name) {
                Some(preset) => vec![preset.name],
                None => {
                    let mut known: Vec<&str> = PRESETS.iter().map(|preset| preset.name).collect();
                    known.push("all");
                    let hint = match config::suggest(name, &known) {
                        Some(best) => format!("did you mean @{best}?"),
                        None => format!("known presets: @{}", known.join(", @")),
                    };
                    return Err(PolicyError::Preset {
                        origin: entry.origin.clone(),
                        message: format!("unknown preset @{name} ({hint})"),
                    });
                }
            }
        };
        for name in names {
            enabled.retain(|(enabled_name, _)| *enabled_name != name);
            if !negated {
                enabled.push((name, entry.origin.clone()));
            }
        }
    }
    Ok(PRESETS
        .iter()
        .filter_map(|preset| {
            enabled.iter().find(|(name, _)| *name == preset.name).map(|(_, origin)| (preset, origin.clone()))
        })
        .collect())
}
