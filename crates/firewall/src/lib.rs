//! The container's egress: what `agent-sandbox firewall apply`, `start` and `status`
//! do. It runs as root through one sudo rule, takes no options, and reads only policy
//! files the agent cannot change (`config.jsonc` in [`IMAGE_DIR`] and [`PROJECT_DIR`],
//! see [`trust`]): the same `network` section `exec` enforces, enforced the same way
//! (a proxy that decides by name, a resolver that answers only allowed names), with
//! the firewall as the fence that leaves the proxy no way around.
//!
//! `policy.rs` reads the files, `plan.rs` turns a mode into `iptables-restore` input
//! (pure, tested whole), `serve.rs` runs the proxy as its own user, `apply.rs` puts it
//! all in place, verifies it and records what it did for `status`.

mod apply;
mod plan;
mod policy;
mod serve;

use std::path::{Path, PathBuf};

pub use apply::{apply, apply_or_close, health, status, status_json, Health, Report};
pub use plan::{closed_tables, plan, starting_tables, DOCKER_DNS};
pub use policy::{load, trust, Policy, LEGACY_FILE};
pub use serve::serve;

/// The image's configuration (root-owned).
pub const IMAGE_DIR: &str = config::CONTAINER_CONFIG_DIR;
/// The project's `.agent-sandbox/`, bind-mounted read-only by the generated devcontainer.json.
pub const PROJECT_DIR: &str = config::CONTAINER_PROJECT_DIR;

/// The directories whose `config.jsonc` make the policy, in order.
pub fn policy_dirs() -> [&'static Path; 2] {
    [Path::new(IMAGE_DIR), Path::new(PROJECT_DIR)]
}

/// The user the proxy runs as: the only one the firewall lets leave the container.
pub const NET_USER: &str = "agent-sandbox-net";

/// Where `apply` records what it did (readable by everyone, for `status`).
pub const STATE_FILE: &str = "/var/lib/agent-sandbox/firewall.json";

/// The container's resolver configuration, and where its first version is kept (the
/// DNS servers the proxy asks) once the file names the filtering resolver.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";
pub const SAVED_RESOLV_CONF: &str = "/var/lib/agent-sandbox/upstream-resolv.conf";

/// Why the firewall is neither applied nor reported outside a container agent-sandbox
/// set up: it replaces the filter table of the machine it runs on.
const NOT_A_CONTAINER: &str = "this is not a container agent-sandbox set up (no /.agent-sandbox marker): the firewall \
     is for those containers only (devcontainer init, start), because applying it replaces the filter table of the \
     machine it runs on, which on a host cuts the host's own network; on a host, agent-sandbox exec enforces the \
     network policy itself (nothing to apply)";

/// Whether this is a container agent-sandbox set up, the only place the firewall belongs.
pub fn in_container() -> bool {
    Path::new(runtime_layout::CONTAINER_MARKER).exists()
}

/// An address in TEST-NET-1 / the IPv6 documentation prefix: never routed, so probing
/// it after applying proves refusal without sending traffic anywhere real.
pub const PROBE_V4: &str = "192.0.2.1:443";
pub const PROBE_V6: &str = "[2001:db8::1]:443";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {message}")]
    Policy { path: PathBuf, message: String },
    #[error("{path}: refusing a policy file the agent could change: {why} (it must be root-owned and not writable by others, or on a read-only mount)")]
    Untrusted { path: PathBuf, why: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("`{command}` failed: {message} (the container needs the NET_ADMIN and NET_RAW capabilities, and iptables and ip6tables installed)")]
    Tool { command: String, message: String },
    #[error("the proxy: {0}")]
    Proxy(String),
    #[error("the firewall must be applied as root (run: sudo agent-sandbox firewall apply)")]
    NotRoot,
    #[error("refusing to apply the firewall: {}", NOT_A_CONTAINER)]
    NotAContainer,
    #[error("verification failed: {0} was reachable after applying; the firewall is not in effect")]
    NotEffective(String),
}
