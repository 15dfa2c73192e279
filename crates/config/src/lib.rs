//! The agent-sandbox configuration: its JSONC file format, the layers it is read from
//! (built-in defaults → global → project → `--config` file → command-line flags) and the
//! merged result, in which every value remembers the layer and position it came from so
//! that `config show` and error messages can cite it.
//!
//! Merging is deliberately simple: `network.mode` is a scalar (a later layer replaces it),
//! `commands` is a map (a later layer replaces a key), every list accumulates. Removing
//! something a lower layer granted is done with the policy's own syntax (`!@preset`,
//! `exclude`), never by dropping list items, so a later layer cannot silently shrink the
//! built-in secret patterns.

#![forbid(unsafe_code)]

pub mod agents;
pub mod approval;
mod fuzz;
pub mod host_run;
mod keys;
pub mod limits;
mod parse;

use std::{
    collections::BTreeMap,
    fmt,
    path::{Path, PathBuf},
};

#[doc(hidden)]
pub use fuzz::fuzz_one;
pub use keys::{BoolKey, ListKey, ValueKey, BOOL_KEYS, LIST_KEYS, TOP_KEYS, VALUE_KEYS};
pub use parse::parse_layer;

/// The text of the built-in defaults layer.
pub const DEFAULTS_JSONC: &str = include_str!("defaults.jsonc");

/// Which layer a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayerKind {
    Default,
    Global,
    Project,
    /// The file named by `-c/--config`.
    Explicit,
    /// A command-line flag.
    Cli,
}

impl LayerKind {
    pub fn name(&self) -> &'static str {
        match self {
            LayerKind::Default => "default",
            LayerKind::Global => "global",
            LayerKind::Project => "project",
            LayerKind::Explicit => "--config",
            LayerKind::Cli => "cli",
        }
    }
}

/// Where one value was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub layer: LayerKind,
    /// File and 1-based line:column for file layers; the flag for the CLI layer.
    pub location: Location,
}

impl Origin {
    /// What agent-sandbox itself adds (the defaults layer, built in).
    pub fn builtin() -> Origin {
        Origin { layer: LayerKind::Default, location: Location::Builtin }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    File { path: PathBuf, line: usize, column: usize },
    Flag(String),
    Builtin,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Location::File { path, line, column } => {
                write!(f, "{} ({}:{line}:{column})", self.layer.name(), path.display())
            }
            Location::Flag(flag) => write!(f, "{} ({flag})", self.layer.name()),
            Location::Builtin => f.write_str(self.layer.name()),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    pub value: T,
    pub origin: Origin,
}

/// `network.mode` (or the whole `network` key as a string, its older form).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// The host's network namespace: every host, every host loopback service.
    On,
    /// A private network namespace with only loopback.
    Off,
    /// A private network namespace whose only way out is agent-sandbox's proxy, which
    /// lets through the host names `network.allow` names and `network.deny` does not.
    Allowlist,
}

impl Network {
    /// What an error message lists as the valid values.
    pub const EXPECTED: &'static str = "expected \"allowlist\", \"on\" or \"off\"";

    pub fn parse(text: &str) -> Option<Network> {
        match text {
            "on" => Some(Network::On),
            "off" => Some(Network::Off),
            "allowlist" => Some(Network::Allowlist),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Network::On => "on",
            Network::Off => "off",
            Network::Allowlist => "allowlist",
        }
    }
}

/// What happens when the sandboxed process runs a command (`commands.<name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandRule {
    /// `true`: run the real command unwrapped.
    Allow,
    /// `false`: every invocation is refused.
    Deny,
    /// `"@name"`: a built-in preset implemented by the multicall binary.
    Preset(String),
    /// A path: a wrapper script that receives the original arguments.
    Wrapper(String),
}

impl CommandRule {
    /// Parses the CLI/JSON string form: `true`, `false`, `@name` or a path.
    pub fn parse(text: &str) -> CommandRule {
        match text {
            "true" => CommandRule::Allow,
            "false" => CommandRule::Deny,
            _ => match text.strip_prefix('@') {
                Some(name) => CommandRule::Preset(name.to_owned()),
                None => CommandRule::Wrapper(text.to_owned()),
            },
        }
    }
}

impl fmt::Display for CommandRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandRule::Allow => f.write_str("true"),
            CommandRule::Deny => f.write_str("false"),
            CommandRule::Preset(name) => write!(f, "@{name}"),
            CommandRule::Wrapper(path) => f.write_str(path),
        }
    }
}

/// What one layer says. Absent keys are `None` / empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layer {
    pub network: Option<Sourced<Network>>,
    /// `"project": "ro"`: the whole project read-only (a read-only agent).
    pub project_read_only: Option<Sourced<bool>>,
    pub presets: Vec<Sourced<String>>,
    pub ro: Vec<Sourced<String>>,
    pub rw: Vec<Sourced<String>>,
    pub exclude: Vec<Sourced<String>>,
    /// Project files the host runs later (editor tasks, direnv, agents' hooks): read-only
    /// inside when present, moved aside at exit when the session created them.
    pub host_executed: Vec<Sourced<String>>,
    pub secret_patterns: Vec<Sourced<String>>,
    pub secret_allow: Vec<Sourced<String>>,
    pub env_secret_patterns: Vec<Sourced<String>>,
    pub env_allow: Vec<Sourced<String>>,
    pub env_block: Vec<Sourced<String>>,
    pub commands: Vec<(String, Sourced<CommandRule>)>,
    pub git_allow_branch_deletion: Option<Sourced<bool>>,
    pub git_allow_plumbing_commits: Option<Sourced<bool>>,
    pub git_verified_push: Option<Sourced<bool>>,
    pub git_session_repository: Option<Sourced<bool>>,
    pub check_commands: Vec<Sourced<String>>,
    pub protected_paths: Vec<Sourced<String>>,
    pub check_humans: Option<Sourced<bool>>,
    pub tools_disallowed: Vec<Sourced<String>>,
    pub tools_read_only: Option<Sourced<bool>>,
    pub net_allow: Vec<Sourced<String>>,
    pub net_deny: Vec<Sourced<String>>,
    pub net_host_ports: Vec<Sourced<String>>,
    pub net_allow_private: Vec<Sourced<String>>,
    pub container_cpus: Option<Sourced<String>>,
    pub container_memory: Option<Sourced<String>>,
    pub container_pids: Option<Sourced<String>>,
    pub container_disk: Option<Sourced<String>>,
}

/// The effective configuration: all layers merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub network: Sourced<Network>,
    /// `"project": "ro"` (or `--read-only`): the project is mounted read-only.
    pub project_read_only: Sourced<bool>,
    pub presets: Vec<Sourced<String>>,
    pub ro: Vec<Sourced<String>>,
    pub rw: Vec<Sourced<String>>,
    pub exclude: Vec<Sourced<String>>,
    /// Project files the host runs later (editor tasks, direnv, agents' hooks): read-only
    /// inside when present, moved aside at exit when the session created them.
    pub host_executed: Vec<Sourced<String>>,
    pub secret_patterns: Vec<Sourced<String>>,
    pub secret_allow: Vec<Sourced<String>>,
    pub env_secret_patterns: Vec<Sourced<String>>,
    pub env_allow: Vec<Sourced<String>>,
    pub env_block: Vec<Sourced<String>>,
    pub commands: BTreeMap<String, Sourced<CommandRule>>,
    /// `git.allowBranchDeletion`: the git guard lets pushes delete remote branches.
    pub git_allow_branch_deletion: Sourced<bool>,
    /// `git.allowPlumbingCommits`: the git guard lets `commit-tree`, `update-ref` and
    /// friends write branches without hooks.
    pub git_allow_plumbing_commits: Sourced<bool>,
    /// `git.verifiedPush` (containers): every push goes to the image's verifier (root,
    /// through its one sudo rule), which checks it and pushes with root's git setup.
    pub git_verified_push: Sourced<bool>,
    /// `git.sessionRepository` (`exec`, on by default): the agent's git is its own, and
    /// commits reach the user's branches only through the host's broker
    /// (`hostpush::home::exec`).
    pub git_session_repository: Sourced<bool>,
    /// `checks.commands`: shell commands the hook guard runs before a commit and on
    /// every commit being pushed.
    pub check_commands: Vec<Sourced<String>>,
    /// `checks.protectedPaths`: paths (relative to the work tree) a commit may not touch.
    pub protected_paths: Vec<Sourced<String>>,
    /// `checks.humans`: the hook guard checks outside a sandbox too.
    pub check_humans: Sourced<bool>,
    /// `tools.disallowed`: the agent's tool calls the tool guard denies (Claude Code's
    /// rule syntax: `Write`, `Bash(git push:*)`, `WebFetch`).
    pub tools_disallowed: Vec<Sourced<String>>,
    /// `tools.readOnly`: the tool guard denies every tool that edits files.
    pub tools_read_only: Sourced<bool>,
    /// `network.allow`: `host`, `*.domain`, each with an optional `:port` (else 80 and 443).
    pub net_allow: Vec<Sourced<String>>,
    /// `network.deny`: the same forms; beats `network.allow`.
    pub net_deny: Vec<Sourced<String>>,
    /// `network.hostPorts`: host loopback ports reachable inside as `localhost:PORT`.
    pub net_host_ports: Vec<Sourced<String>>,
    /// `network.allowPrivate`: CIDRs an allowed name may resolve to in private,
    /// loopback or link-local ranges.
    pub net_allow_private: Vec<Sourced<String>>,
    /// `container.*`: the Docker sandbox's limits as written (see [`limits::parse`]).
    pub container_cpus: Sourced<String>,
    pub container_memory: Sourced<String>,
    pub container_pids: Sourced<String>,
    pub container_disk: Sourced<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}:{line}:{column}: {message}")]
    Invalid { path: PathBuf, line: usize, column: usize, message: String },
    #[error("both {} and {} exist (keep one of them)", .json.display(), .jsonc.display())]
    BothFormats { json: PathBuf, jsonc: PathBuf },
    #[error("reading {}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{flag}: {message}")]
    Flag { flag: String, message: String },
    #[error("{}: refusing a file the agent could have written ({why})", .path.display())]
    Untrusted { path: PathBuf, why: String },
}

/// Where to look for each file layer.
#[derive(Debug, Clone)]
pub struct Sources {
    /// `$XDG_CONFIG_HOME/agent-sandbox` (or `~/.config/agent-sandbox`); `None` if neither is set.
    pub global_dir: Option<PathBuf>,
    /// `<project root>/.agent-sandbox`; `None` to leave the project's file out.
    pub project_dir: Option<PathBuf>,
    /// The file named by `-c/--config`.
    pub explicit: Option<PathBuf>,
}

/// Reads every layer in order: defaults, global, project, `--config`, then `cli`.
pub fn load(sources: &Sources, cli: Layer) -> Result<(Config, Vec<PathBuf>), ConfigError> {
    let mut layers = vec![defaults()];
    let mut files = Vec::new();
    if let Some(dir) = &sources.global_dir {
        if let Some(path) = find_config_file(dir)? {
            layers.push(read_layer(&path, LayerKind::Global)?);
            files.push(path);
        }
    }
    if let Some(path) = sources.project_dir.as_deref().map(find_config_file).transpose()?.flatten() {
        layers.push(read_layer(&path, LayerKind::Project)?);
        files.push(path);
    }
    if let Some(path) = &sources.explicit {
        layers.push(read_layer(path, LayerKind::Explicit)?);
        files.push(path.clone());
    }
    layers.push(cli);
    Ok((merge(layers), files))
}

/// The global config directory: `$XDG_CONFIG_HOME/agent-sandbox`, else
/// `~/.config/agent-sandbox` (`home` is the caller's `$HOME`).
pub fn global_dir(home: &Path) -> PathBuf {
    xdg_dir(home, "XDG_CONFIG_HOME", ".config")
}

/// agent-sandbox's directory under the XDG base directory `var` names, else under
/// `<home>/<fallback>` (an empty variable counts as unset, as the spec says).
pub fn xdg_dir(home: &Path, var: &str, fallback: &str) -> PathBuf {
    util::dirs::xdg(home, var, fallback)
}

/// The configuration as a guard that has no snapshot from `exec` reads it outside any
/// sandbox (`checks.humans`): defaults, `<home>/.config/agent-sandbox` and the project's
/// file if the user allowed it as it is (see [`approval`]), no flags. `home` comes from
/// the password database and `XDG_CONFIG_HOME` is not consulted. Also returns the
/// project file left out for not being allowed, if any.
pub fn load_for_project(project_root: &Path, home: &Path) -> Result<(Config, Option<PathBuf>), ConfigError> {
    let project_dir = project_root.join(".agent-sandbox");
    let unapproved = match find_config_file(&project_dir) {
        Ok(project) => project.filter(|path| !approval::is_allowed(&approval::state_dir(home), path)),
        // Both formats can never have been allowed (`exec` refuses them).
        Err(ConfigError::BothFormats { jsonc, .. }) => Some(jsonc),
        Err(err) => return Err(err),
    };
    let sources = Sources {
        global_dir: Some(home.join(".config/agent-sandbox")),
        project_dir: unapproved.is_none().then_some(project_dir),
        explicit: None,
    };
    load(&sources, Layer::default()).map(|(config, _)| (config, unapproved))
}

/// Where a container image keeps agent-sandbox's configuration: root-owned, so that
/// the agent inside cannot change the settings its guards read.
pub const CONTAINER_CONFIG_DIR: &str = "/etc/agent-sandbox";

/// The project's `.agent-sandbox/` in a container: bind-mounted read-only there by the
/// generated devcontainer.json and the Docker sandbox.
pub const CONTAINER_PROJECT_DIR: &str = "/etc/agent-sandbox/project";

/// The configuration for guards in a container: defaults, [`CONTAINER_CONFIG_DIR`] and
/// [`CONTAINER_PROJECT_DIR`], each file only if the agent cannot have written it (on a
/// read-only mount, or root's all the way up: `util::fs::trusted_file`). The project's
/// own `.agent-sandbox` and the home directory are the agent's to write there.
pub fn load_for_container() -> Result<Config, ConfigError> {
    let mut layers = vec![defaults()];
    for (dir, kind) in [(CONTAINER_CONFIG_DIR, LayerKind::Global), (CONTAINER_PROJECT_DIR, LayerKind::Project)] {
        if let Some(path) = find_config_file(Path::new(dir))? {
            util::fs::trusted_file(&path).map_err(|why| ConfigError::Untrusted { path: path.clone(), why })?;
            layers.push(read_layer(&path, kind)?);
        }
    }
    Ok(merge(layers))
}

/// The built-in defaults layer.
pub fn defaults() -> Layer {
    let mut layer = parse_layer(DEFAULTS_JSONC, Path::new("<built-in defaults>"), LayerKind::Default)
        .expect("the built-in defaults are valid (tested)");
    // `filesystem.hostExecuted`: the catalog is the one source of its built-in entries.
    let origin = Origin::builtin();
    layer
        .host_executed
        .extend(host_run::CATALOG.iter().map(|entry| Sourced { value: entry.path.to_owned(), origin: origin.clone() }));
    // `network.allow`: the agents' hosts come from their catalog, first (`exec` keeps
    // the running agent's only: `agents::hosts_for`).
    let agent_hosts =
        agents::all_hosts().into_iter().map(|host| Sourced { value: host.to_owned(), origin: origin.clone() });
    layer.net_allow.splice(0..0, agent_hosts);
    layer
}

/// `config.jsonc` or `config.json` in `dir`; both is an error.
pub fn find_config_file(dir: &Path) -> Result<Option<PathBuf>, ConfigError> {
    let jsonc = dir.join("config.jsonc");
    let json = dir.join("config.json");
    match (jsonc.is_file(), json.is_file()) {
        (true, true) => Err(ConfigError::BothFormats { json, jsonc }),
        (true, false) => Ok(Some(jsonc)),
        (false, true) => Ok(Some(json)),
        (false, false) => Ok(None),
    }
}

/// No config file is legitimately bigger.
pub const CONFIG_LIMIT: u64 = 16 * 1024 * 1024;

/// Reads one config file (a regular file only, never blocking) as a layer of `kind`.
pub fn read_layer(path: &Path, kind: LayerKind) -> Result<Layer, ConfigError> {
    // Never blocks: a FIFO planted as a config file is an error, not a hang.
    let bytes = util::fs::read_regular(path, CONFIG_LIMIT)
        .map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
    let text = String::from_utf8(bytes).map_err(|_| ConfigError::Read {
        path: path.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"),
    })?;
    parse_layer(&text, path, kind)
}

/// Merges layers, lowest first.
pub fn merge(layers: Vec<Layer>) -> Config {
    let builtin = Origin::builtin();
    let mut config = Config {
        network: Sourced { value: Network::On, origin: builtin.clone() },
        project_read_only: Sourced { value: false, origin: builtin.clone() },
        git_allow_branch_deletion: Sourced { value: false, origin: builtin.clone() },
        git_allow_plumbing_commits: Sourced { value: false, origin: builtin.clone() },
        git_verified_push: Sourced { value: false, origin: builtin.clone() },
        git_session_repository: Sourced { value: true, origin: builtin.clone() },
        check_commands: Vec::new(),
        protected_paths: Vec::new(),
        check_humans: Sourced { value: false, origin: builtin.clone() },
        tools_disallowed: Vec::new(),
        tools_read_only: Sourced { value: false, origin: builtin.clone() },
        container_cpus: Sourced { value: "none".into(), origin: builtin.clone() },
        container_memory: Sourced { value: "none".into(), origin: builtin.clone() },
        container_pids: Sourced { value: "none".into(), origin: builtin.clone() },
        container_disk: Sourced { value: "none".into(), origin: builtin },
        net_allow: Vec::new(),
        net_deny: Vec::new(),
        net_host_ports: Vec::new(),
        net_allow_private: Vec::new(),
        presets: Vec::new(),
        ro: Vec::new(),
        rw: Vec::new(),
        exclude: Vec::new(),
        host_executed: Vec::new(),
        secret_patterns: Vec::new(),
        secret_allow: Vec::new(),
        env_secret_patterns: Vec::new(),
        env_allow: Vec::new(),
        env_block: Vec::new(),
        commands: BTreeMap::new(),
    };
    for mut layer in layers {
        if let Some(network) = layer.network.take() {
            config.network = network;
        }
        if let Some(project) = layer.project_read_only.take() {
            config.project_read_only = project;
        }
        config.commands.extend(std::mem::take(&mut layer.commands));
        for list_key in LIST_KEYS {
            (list_key.config_mut)(&mut config).append((list_key.layer)(&mut layer));
        }
        for bool_key in BOOL_KEYS {
            if let Some(value) = (bool_key.layer)(&mut layer).take() {
                *(bool_key.config_mut)(&mut config) = value;
            }
        }
        for value_key in VALUE_KEYS {
            if let Some(value) = (value_key.layer)(&mut layer).take() {
                *(value_key.config_mut)(&mut config) = value;
            }
        }
    }
    config
}

impl Config {
    /// The effective configuration as JSON, each value paired with its origin, every
    /// key where the file has it (`filesystem.ro` as `{"filesystem": {"ro": …}}`).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::{json, Map, Value};
        fn sourced(value: Value, origin: &Origin) -> Value {
            json!({ "value": value, "from": origin.to_string() })
        }
        let mut root = Map::new();
        for top_key in TOP_KEYS {
            let value = match *top_key {
                "$schema" => continue,
                "network" => {
                    let mut object = section_json(self, "network");
                    object.insert("mode".into(), sourced(json!(self.network.value.as_str()), &self.network.origin));
                    Value::Object(object)
                }
                "project" => sourced(
                    json!(if self.project_read_only.value { "ro" } else { "rw" }),
                    &self.project_read_only.origin,
                ),
                "commands" => self
                    .commands
                    .iter()
                    .map(|(name, rule)| {
                        let value = match &rule.value {
                            CommandRule::Allow => json!(true),
                            CommandRule::Deny => json!(false),
                            other => json!(other.to_string()),
                        };
                        (name.clone(), sourced(value, &rule.origin))
                    })
                    .collect(),
                section => Value::Object(section_json(self, section)),
            };
            root.insert((*top_key).to_owned(), value);
        }
        return Value::Object(root);

        fn section_json(config: &Config, section: &str) -> Map<String, Value> {
            let mut object = Map::new();
            for list_key in LIST_KEYS.iter().filter(|list_key| keys::split(list_key.key).0 == section) {
                let items = (list_key.config)(config).iter();
                let list = items.map(|item| sourced(json!(item.value), &item.origin)).collect();
                object.insert(keys::split(list_key.key).1.to_owned(), list);
            }
            for bool_key in BOOL_KEYS.iter().filter(|bool_key| keys::split(bool_key.key).0 == section) {
                let value = (bool_key.config)(config);
                object.insert(keys::split(bool_key.key).1.to_owned(), sourced(json!(value.value), &value.origin));
            }
            for value_key in VALUE_KEYS.iter().filter(|value_key| keys::split(value_key.key).0 == section) {
                let value = (value_key.config)(config);
                object.insert(keys::split(value_key.key).1.to_owned(), sourced(json!(value.value), &value.origin));
            }
            object
        }
    }

    /// Human-readable form for `config show`: one `key = value  # origin` line per value.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let mut line = |key: &str, value: &str, origin: &Origin| {
            writeln!(out, "{key:<26} {value:<40} # {origin}").expect("writing to a String cannot fail");
        };
        line("network", self.network.value.as_str(), &self.network.origin);
        line("project", if self.project_read_only.value { "ro" } else { "rw" }, &self.project_read_only.origin);
        for list_key in LIST_KEYS {
            for item in (list_key.config)(self) {
                line(list_key.key, &item.value, &item.origin);
            }
        }
        for (name, rule) in &self.commands {
            line(&format!("commands.{name}"), &rule.value.to_string(), &rule.origin);
        }
        for bool_key in BOOL_KEYS {
            let value = (bool_key.config)(self);
            line(bool_key.key, &value.value.to_string(), &value.origin);
        }
        for value_key in VALUE_KEYS {
            let value = (value_key.config)(self);
            line(value_key.key, &value.value, &value.origin);
        }
        out
    }
}

/// Builds the CLI layer from flag values. `cmds` are `NAME=VALUE` strings.
pub fn cli_layer(
    network: Option<&str>,
    ro: &[String],
    rw: &[String],
    exclude: &[String],
    cmds: &[String],
) -> Result<Layer, ConfigError> {
    let origin = |flag: &str| Origin { layer: LayerKind::Cli, location: Location::Flag(flag.to_owned()) };
    let sourced = |flag: &str, items: &[String]| -> Vec<Sourced<String>> {
        items.iter().map(|value| Sourced { value: value.clone(), origin: origin(flag) }).collect()
    };
    let network = match network {
        None => None,
        Some(text) => Some(Sourced {
            value: Network::parse(text).ok_or_else(|| ConfigError::Flag {
                flag: "--network".into(),
                message: format!("{}, got {text:?}", Network::EXPECTED),
            })?,
            origin: origin("--network"),
        }),
    };
    let mut commands = Vec::new();
    for cmd in cmds {
        let (name, value) = cmd.split_once('=').ok_or_else(|| ConfigError::Flag {
            flag: "--cmd".into(),
            message: format!("expected NAME=VALUE (e.g. git=@git, npm=false), got {cmd:?}"),
        })?;
        check_command_name(name).map_err(|message| ConfigError::Flag { flag: "--cmd".into(), message })?;
        commands.push((name.to_owned(), Sourced { value: CommandRule::parse(value), origin: origin("--cmd") }));
    }
    Ok(Layer {
        network,
        ro: sourced("--ro", ro),
        rw: sourced("--rw", rw),
        exclude: sourced("--exclude", exclude),
        commands,
        ..Layer::default()
    })
}

impl Layer {
    /// Adds `--allow-host` and `--host-port` values to a CLI layer (see [`cli_layer`]).
    pub fn with_network_flags(mut self, allow_hosts: &[String], host_ports: &[String]) -> Layer {
        let origin = |flag: &str| Origin { layer: LayerKind::Cli, location: Location::Flag(flag.to_owned()) };
        let sourced = |flag: &str, value: &String| Sourced { value: value.clone(), origin: origin(flag) };
        self.net_allow.extend(allow_hosts.iter().map(|host| sourced("--allow-host", host)));
        self.net_host_ports.extend(host_ports.iter().map(|port| sourced("--host-port", port)));
        self
    }
}

/// A command name is a single file name: no '/', not empty, not `.`/`..`.
pub fn check_command_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(format!("{name:?} is not a command name (use the bare name, e.g. \"npm\")"));
    }
    Ok(())
}

/// The closest of `candidates` to `word`, if it is close enough to be a plausible typo.
pub fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|candidate| (edit_distance(&word.to_lowercase(), &candidate.to_lowercase()), *candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.len() / 3).max(2))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests;
