//! The configuration's keys, one table row each: every list ([`LIST_KEYS`]), every
//! boolean ([`BOOL_KEYS`]) and every single value ([`VALUE_KEYS`]) with its dotted key and the fields it fills in a [`Layer`] and
//! in the merged [`Config`]. Parsing (which keys exist, the suggestions for a typo),
//! merging and `config show` (text and JSON) all walk these tables, so a new list is one
//! row here plus its two struct fields.

use crate::{limits::Unit, Config, Layer, Sourced};

/// The top-level keys of a config file, in the order error messages list them. Every one
/// but `project`, `commands` and `$schema` is a section holding [`LIST_KEYS`] and
/// [`BOOL_KEYS`] (`network` also holds `mode`, and may be written as the mode alone).
pub const TOP_KEYS: &[&str] = &[
    "network",
    "project",
    "filesystem",
    "secrets",
    "env",
    "commands",
    "git",
    "checks",
    "tools",
    "container",
    "$schema",
];

/// A list of strings. Every list accumulates across layers.
pub struct ListKey {
    /// `section.name`, as written in the file and shown by `config show`.
    pub key: &'static str,
    /// The list in one layer.
    pub layer: fn(&mut Layer) -> &mut Vec<Sourced<String>>,
    /// The merged list.
    pub config: fn(&Config) -> &Vec<Sourced<String>>,
    pub config_mut: fn(&mut Config) -> &mut Vec<Sourced<String>>,
}

/// `true` or `false`. A later layer replaces an earlier one; the default is `false`.
pub struct BoolKey {
    /// `section.name`, as written in the file and shown by `config show`.
    pub key: &'static str,
    /// The value in one layer, if it sets one.
    pub layer: fn(&mut Layer) -> &mut Option<Sourced<bool>>,
    /// The merged value.
    pub config: fn(&Config) -> &Sourced<bool>,
    pub config_mut: fn(&mut Config) -> &mut Sourced<bool>,
}

/// One value, a string or a number, checked as it is read. A later layer replaces an
/// earlier one; the built-in layer sets every one (`"none"` where there is no default).
pub struct ValueKey {
    /// `section.name`, as written in the file and shown by `config show`.
    pub key: &'static str,
    /// What the value counts: the forms [`crate::limits::parse`] accepts for it.
    pub unit: Unit,
    /// The value in one layer, if it sets one (as written).
    pub layer: fn(&mut Layer) -> &mut Option<Sourced<String>>,
    /// The merged value.
    pub config: fn(&Config) -> &Sourced<String>,
    pub config_mut: fn(&mut Config) -> &mut Sourced<String>,
}

/// Every single value, in the order `config show` prints them: the Docker sandbox's
/// limits per container (`start` applies them; `exec` has none).
pub const VALUE_KEYS: &[ValueKey] = &[
    ValueKey {
        key: "container.cpus",
        unit: Unit::Cpus,
        layer: |layer| &mut layer.container_cpus,
        config: |config| &config.container_cpus,
        config_mut: |config| &mut config.container_cpus,
    },
    ValueKey {
        key: "container.memory",
        unit: Unit::Memory,
        layer: |layer| &mut layer.container_memory,
        config: |config| &config.container_memory,
        config_mut: |config| &mut config.container_memory,
    },
    ValueKey {
        key: "container.pids",
        unit: Unit::Count,
        layer: |layer| &mut layer.container_pids,
        config: |config| &config.container_pids,
        config_mut: |config| &mut config.container_pids,
    },
    ValueKey {
        key: "container.disk",
        unit: Unit::Disk,
        layer: |layer| &mut layer.container_disk,
        config: |config| &config.container_disk,
        config_mut: |config| &mut config.container_disk,
    },
];

/// Every list, in the order `config show` prints them.
pub const LIST_KEYS: &[ListKey] = &[
    ListKey {
        key: "filesystem.presets",
        layer: |layer| &mut layer.presets,
        config: |config| &config.presets,
        config_mut: |config| &mut config.presets,
    },
    ListKey {
        key: "filesystem.ro",
        layer: |layer| &mut layer.ro,
        config: |config| &config.ro,
        config_mut: |config| &mut config.ro,
    },
    ListKey {
        key: "filesystem.rw",
        layer: |layer| &mut layer.rw,
        config: |config| &config.rw,
        config_mut: |config| &mut config.rw,
    },
    ListKey {
        key: "filesystem.exclude",
        layer: |layer| &mut layer.exclude,
        config: |config| &config.exclude,
        config_mut: |config| &mut config.exclude,
    },
    ListKey {
        key: "filesystem.hostExecuted",
        layer: |layer| &mut layer.host_executed,
        config: |config| &config.host_executed,
        config_mut: |config| &mut config.host_executed,
    },
    ListKey {
        key: "secrets.patterns",
        layer: |layer| &mut layer.secret_patterns,
        config: |config| &config.secret_patterns,
        config_mut: |config| &mut config.secret_patterns,
    },
    ListKey {
        key: "secrets.allow",
        layer: |layer| &mut layer.secret_allow,
        config: |config| &config.secret_allow,
        config_mut: |config| &mut config.secret_allow,
    },
    ListKey {
        key: "env.secretPatterns",
        layer: |layer| &mut layer.env_secret_patterns,
        config: |config| &config.env_secret_patterns,
        config_mut: |config| &mut config.env_secret_patterns,
    },
    ListKey {
        key: "env.allow",
        layer: |layer| &mut layer.env_allow,
        config: |config| &config.env_allow,
        config_mut: |config| &mut config.env_allow,
    },
    ListKey {
        key: "env.block",
        layer: |layer| &mut layer.env_block,
        config: |config| &config.env_block,
        config_mut: |config| &mut config.env_block,
    },
    ListKey {
        key: "checks.commands",
        layer: |layer| &mut layer.check_commands,
        config: |config| &config.check_commands,
        config_mut: |config| &mut config.check_commands,
    },
    ListKey {
        key: "checks.protectedPaths",
        layer: |layer| &mut layer.protected_paths,
        config: |config| &config.protected_paths,
        config_mut: |config| &mut config.protected_paths,
    },
    ListKey {
        key: "tools.disallowed",
        layer: |layer| &mut layer.tools_disallowed,
        config: |config| &config.tools_disallowed,
        config_mut: |config| &mut config.tools_disallowed,
    },
    ListKey {
        key: "network.allow",
        layer: |layer| &mut layer.net_allow,
        config: |config| &config.net_allow,
        config_mut: |config| &mut config.net_allow,
    },
    ListKey {
        key: "network.deny",
        layer: |layer| &mut layer.net_deny,
        config: |config| &config.net_deny,
        config_mut: |config| &mut config.net_deny,
    },
    ListKey {
        key: "network.hostPorts",
        layer: |layer| &mut layer.net_host_ports,
        config: |config| &config.net_host_ports,
        config_mut: |config| &mut config.net_host_ports,
    },
    ListKey {
        key: "network.allowPrivate",
        layer: |layer| &mut layer.net_allow_private,
        config: |config| &config.net_allow_private,
        config_mut: |config| &mut config.net_allow_private,
    },
];

/// The one key of a section that is neither a list nor a boolean: `network.mode`.
pub const MODE_KEY: &str = "network.mode";

/// Lists whose entries may be written as numbers (`"hostPorts": [5432]`).
pub(crate) const NUMBER_LISTS: &[&str] = &["network.hostPorts"];

/// Every boolean, in the order `config show` prints them.
pub const BOOL_KEYS: &[BoolKey] = &[
    BoolKey {
        key: "git.allowBranchDeletion",
        layer: |layer| &mut layer.git_allow_branch_deletion,
        config: |config| &config.git_allow_branch_deletion,
        config_mut: |config| &mut config.git_allow_branch_deletion,
    },
    BoolKey {
        key: "git.allowPlumbingCommits",
        layer: |layer| &mut layer.git_allow_plumbing_commits,
        config: |config| &config.git_allow_plumbing_commits,
        config_mut: |config| &mut config.git_allow_plumbing_commits,
    },
    BoolKey {
        key: "git.verifiedPush",
        layer: |layer| &mut layer.git_verified_push,
        config: |config| &config.git_verified_push,
        config_mut: |config| &mut config.git_verified_push,
    },
    BoolKey {
        key: "git.sessionRepository",
        layer: |layer| &mut layer.git_session_repository,
        config: |config| &config.git_session_repository,
        config_mut: |config| &mut config.git_session_repository,
    },
    BoolKey {
        key: "checks.humans",
        layer: |layer| &mut layer.check_humans,
        config: |config| &config.check_humans,
        config_mut: |config| &mut config.check_humans,
    },
    BoolKey {
        key: "tools.readOnly",
        layer: |layer| &mut layer.tools_read_only,
        config: |config| &config.tools_read_only,
        config_mut: |config| &mut config.tools_read_only,
    },
];

/// The keys inside `section` (without the `section.` prefix): its lists, then its
/// booleans, then its values, each in table order.
pub(crate) fn section_keys(section: &str) -> Vec<&'static str> {
    let lists = LIST_KEYS.iter().map(|list_key| list_key.key);
    let bools = BOOL_KEYS.iter().map(|bool_key| bool_key.key);
    let values = VALUE_KEYS.iter().map(|value_key| value_key.key);
    lists
        .chain(bools)
        .chain(values)
        .chain([MODE_KEY])
        .map(split)
        .filter(|(head, _)| *head == section)
        .map(|(_, name)| name)
        .collect()
}

/// `("filesystem", "ro")` for `"filesystem.ro"`.
pub(crate) fn split(key: &'static str) -> (&'static str, &'static str) {
    key.split_once('.').expect("every key in the tables is section.name (tested)")
}
