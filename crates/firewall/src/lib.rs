//! The container's egress firewall: what `agent-sandbox firewall apply` and `status`
//! do. It runs as root through one sudo rule, takes no options, and reads only policy
//! files the agent cannot change ([`POLICY_FILES`], see [`trust`]). The policy is a
//! list of domains and address ranges; everything else leaving the container is
//! refused, over IPv4 and IPv6, and DNS goes only to the configured resolver.
//!
//! `policy.rs` reads the files, `plan.rs` turns a policy plus the resolved addresses
//! into `ipset` and `iptables-restore` input (pure, tested whole), `apply.rs` resolves,
//! runs the tools, verifies the result and records what it did for `status`.

mod apply;
mod plan;
mod policy;

use std::path::PathBuf;

pub use apply::{apply, apply_or_close, health, status, status_json, Health, Report};
pub use plan::{closed_tables, plan, starting_tables, Cidr, Plan, Resolved, SET_V4, SET_V6};
pub use policy::{load, parse, trust, Policy};

/// The policy files, in order: the image's (root-owned) and the project's (the
/// project's `.agent-sandbox/` bind-mounted read-only by the generated devcontainer.json).
pub const POLICY_FILES: &[&str] = &["/etc/agent-sandbox/firewall.jsonc", "/etc/agent-sandbox/project/firewall.jsonc"];

/// Where `apply` records what it did (readable by everyone, for `status`).
pub const STATE_FILE: &str = "/var/lib/agent-sandbox/firewall.json";

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
    #[error("`{command}` failed: {message} (the container needs the NET_ADMIN and NET_RAW capabilities, and iptables, ip6tables and ipset installed)")]
    Tool { command: String, message: String },
    #[error("the firewall must be applied as root (run: sudo agent-sandbox firewall apply)")]
    NotRoot,
    #[error("verification failed: {0} was reachable after applying; the firewall is not in effect")]
    NotEffective(String),
}
