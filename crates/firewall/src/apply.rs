//! The executor: (re)start the proxy and its resolver as their own user (`serve.rs`),
//! point `/etc/resolv.conf` at the resolver (the container's own servers kept aside
//! for the proxy), feed the plan to `iptables-restore`/`ip6tables-restore`, verify from
//! the inside, and write the state file `status` reads. A firewall that lets the probe
//! address through, or a proxy that does not answer, is an error.
//!
//! [`apply_or_close`] is what the commands call: whatever goes wrong (a policy that
//! does not load, a tool that fails, a probe that gets through), egress ends up
//! closed (loopback only) and the state file says why; [`health`] reads it back for
//! `status`, `check` and the shell banner, and knows a state left by an earlier start.
//! Off a container agent-sandbox set up (no `/.agent-sandbox`: a host) both refuse
//! before touching anything, and `health` says so rather than "not applied".

use std::{
    io::Write as _,
    net::{IpAddr, SocketAddr, TcpStream},
    os::unix::fs::PermissionsExt as _,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use config::Network;
use serde_json::json;

use crate::{
    load,
    plan::{self, closed_tables, starting_tables},
    serve, Error, Policy, PROBE_V4, PROBE_V6, STATE_FILE,
};

/// Where the firewall stands in this container since it (last) started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// The allowlist is in force.
    Applied,
    /// Egress is loopback only, because of the reason given.
    Closed(String),
    /// Not even the closed rules could be installed: egress is open.
    Open(String),
    /// Nothing was applied since this container started (a restart without the
    /// Feature's entrypoint, or it is still working).
    NotApplied,
    /// Not a container agent-sandbox set up (a host): nothing to apply, ever.
    NotAContainer,
}

impl Health {
    /// The line every shell, `check` and `status` print; loud unless all is well.
    pub fn banner(&self) -> String {
        match self {
            Health::Applied => "firewall: on (only the network policy's names are reachable, through its proxy)".into(),
            Health::Closed(reason) => format!(
                "firewall: CLOSED: egress is loopback only, because {reason} (to change it, fix that, then: sudo agent-sandbox firewall apply)"
            ),
            Health::Open(reason) => format!("firewall: OPEN: egress is not restricted, because {reason}"),
            Health::NotApplied => "firewall: NOT APPLIED since this container started: egress may be OPEN (run: sudo agent-sandbox firewall apply)".into(),
            Health::NotAContainer => format!("firewall: not for this machine: {}", crate::NOT_A_CONTAINER),
        }
    }
}

impl Health {
    /// `applied`, `closed`, `open` or `not-applied`, and the reason for the middle two:
    /// for `check --json` and `firewall status --json`.
    pub fn to_json(&self) -> serde_json::Value {
        let (state, reason) = match self {
            Health::Applied => ("applied", None),
            Health::Closed(reason) => ("closed", Some(reason)),
            Health::Open(reason) => ("open", Some(reason)),
            Health::NotApplied => ("not-applied", None),
            Health::NotAContainer => ("not-a-container", None),
        };
        json!({ "state": state, "reason": reason, "banner": self.banner() })
    }
}

/// Reads the state file and tells whether it belongs to this start of the container.
pub fn health() -> Health {
    if !crate::in_container() {
        return Health::NotAContainer;
    }
    let Some(state) =
        std::fs::read_to_string(STATE_FILE).ok().and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
    else {
        return Health::NotApplied;
    };
    if state["boot"].as_str() != Some(util::boot_id().as_str()) {
        return Health::NotApplied;
    }
    let reason = state["reason"].as_str().unwrap_or("unknown").to_owned();
    match state["state"].as_str() {
        // Nothing leaves without the proxy: closed in effect, and said so.
        Some("applied") if state["mode"] == "allowlist" && serve::running() == Some(0) => {
            Health::Closed("the network proxy is not running (stopped or crashed since it was applied)".into())
        }
        Some("applied") => Health::Applied,
        Some("closed") => Health::Closed(reason),
        Some("open") => Health::Open(reason),
        _ => Health::NotApplied,
    }
}

/// Loads the policy from `dirs` and applies it; on any failure closes egress (loopback
/// only), records why and returns the original error. With `starting` (the Feature's
/// entrypoint, at every start), the agent has loopback only from the first moment:
/// root's own traffic is the only traffic until the policy is in force.
pub fn apply_or_close(dirs: &[&Path], starting: bool) -> Result<Report, Error> {
    // Before anything else, root or not: on a host, closing egress on failure would cut
    // the host's network as surely as applying.
    if !crate::in_container() {
        return Err(Error::NotAContainer);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::NotRoot);
    }
    // The agent runs `sudo` and may signal it, which passes the signal on: blocked, so
    // that no apply stops half-way (the starting tables in force, the banner from the
    // last apply saying "on"). Two applies at once take turns.
    block_signals();
    let lock_path = Path::new(APPLY_LOCK);
    if let Some(dir) = lock_path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.into(), source })?;
    }
    let _lock = util::fs::lock(lock_path, true).map_err(|source| Error::Io { path: lock_path.into(), source })?;
    write_outcome("applying", "an apply is under way");
    if starting {
        let (v4, v6) = starting_tables();
        if let Err(err) = restore_tables(&v4, &v6) {
            write_outcome("open", &err.to_string());
            return Err(err);
        }
    }
    let result = load(dirs).and_then(|policy| apply(&policy));
    if let Err(err) = &result {
        let reason = err.to_string();
        let (v4, v6) = closed_tables();
        match restore_tables(&v4, &v6) {
            Ok(()) => write_outcome("closed", &reason),
            Err(close_err) => write_outcome("open", &format!("{reason}; then closing failed too: {close_err}")),
        }
    }
    result
}

/// Taken for the whole of an apply (root-owned, in a root-owned directory).
const APPLY_LOCK: &str = "/var/lib/agent-sandbox/apply.lock";

fn block_signals() {
    let set = crate::serve::blocked_set();
    // SAFETY: sigprocmask on this thread (the only one at this point) with a valid set.
    unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

fn restore_tables(v4: &str, v6: &str) -> Result<(), Error> {
    run_with_input(&mut Command::new("iptables-restore"), v4)?;
    run_with_input(&mut Command::new("ip6tables-restore"), v6)
}

fn write_outcome(state: &str, reason: &str) {
    write_state_value(json!({
        "version": 3,
        "state": state,
        "reason": reason,
        "boot": util::boot_id(),
        "appliedAt": now(),
    }));
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// What `apply` did, in the words it prints.
#[derive(Debug, Default)]
pub struct Report {
    pub lines: Vec<String>,
    pub warnings: Vec<String>,
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// A name no policy allows, for the check that the resolver answers (and refuses).
const PROBE_NAME: &str = "agent-sandbox-probe.invalid";

pub fn apply(policy: &Policy) -> Result<Report, Error> {
    if !crate::in_container() {
        return Err(Error::NotAContainer);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::NotRoot);
    }
    let started = Instant::now();
    let mut report = Report::default();
    let upstream_text = upstream_text()?;
    let upstream = parse_resolvers(&upstream_text);
    if let Some(server) = upstream.iter().find(|ip| ip.is_loopback() && **ip != plan::DOCKER_DNS) {
        // Its answers could come from any local process (the agent's included), and
        // 127.0.0.1 is where the filtering resolver listens.
        return Err(Error::Proxy(format!(
            "the container's DNS server {server} is on loopback, which only Docker's embedded resolver ({}) may be: \
             give the container a DNS server on its network (--dns)",
            plan::DOCKER_DNS
        )));
    }
    let mode = policy.net.mode;
    let net_uid = match mode {
        Network::Allowlist => Some(serve::net_user()?),
        _ => None,
    };
    // The proxy of an earlier apply goes first: it may hold an older policy.
    serve::stop();
    let mut proxy = None;
    if let Some((uid, gid)) = net_uid {
        proxy = Some(serve::start(uid, gid, &upstream, policy)?);
        write_resolv_conf(&serve::resolv_conf())?;
    } else {
        write_resolv_conf(&upstream_text)?;
    }
    let (v4, v6) = plan::plan(mode, &upstream, net_uid.map_or(0, |(uid, _)| uid));
    restore_tables(&v4, &v6)?;
    let dns: Vec<String> = upstream.iter().map(IpAddr::to_string).collect();
    match mode {
        Network::Allowlist => {
            report.lines.push(format!(
                "network.mode allowlist: {} allowed name rule(s), {} denied; only the proxy (user {}) leaves the \
                 container, over IPv4 and IPv6",
                policy.config.net_allow.len(),
                policy.config.net_deny.len(),
                crate::NET_USER
            ));
            report.lines.push(format!(
                "DNS: the filtering resolver on 127.0.0.1 (refused names: NXDOMAIN); the proxy asks {}",
                if dns.is_empty() { "(no resolver configured)".into() } else { dns.join(", ") }
            ));
        }
        Network::On => report.lines.push("network.mode on: egress is not restricted".into()),
        Network::Off => report.lines.push("network.mode off: egress is loopback only".into()),
    }
    // Verification: the probe addresses are never routed; a connection means no firewall.
    if mode != Network::On {
        for probe in [PROBE_V4, PROBE_V6] {
            let addr: SocketAddr = probe.parse().expect("the probe addresses are valid");
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(_) => return Err(Error::NotEffective(probe.into())),
                Err(err) => report.lines.push(format!("verified: {probe} refused: {err}")),
            }
        }
    }
    if let Some(proxy) = &mut proxy {
        verify_proxy(&mut report, proxy)?;
    }
    report.lines.push(format!("applied in {} ms", started.elapsed().as_millis()));
    write_state(policy, &upstream, &report);
    Ok(report)
}

/// The resolver refuses a name no policy allows (with an answer, not silence) and the
/// proxy port accepts: both belong to the proxy's process, started just before.
fn verify_proxy(report: &mut Report, proxy: &mut std::process::Child) -> Result<(), Error> {
    let resolver = SocketAddr::from(([127, 0, 0, 1], 53));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = proxy.try_wait() {
            let log = std::fs::read_to_string(Path::new(serve::LOG_DIR).join("proxy.log")).unwrap_or_default();
            let last = log.lines().last().unwrap_or("(nothing in its log)").to_owned();
            return Err(Error::Proxy(format!("its process ended ({status}): {last}")));
        }
        match netproxy::upstream::ask(PROBE_NAME, netproxy::upstream::TYPE_A, resolver) {
            Ok(addrs) if addrs.is_empty() => break,
            Ok(addrs) => {
                return Err(Error::NotEffective(format!("the resolver gave {PROBE_NAME} an address ({addrs:?})")))
            }
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Err(err) => return Err(Error::Proxy(format!("the resolver on {resolver} does not answer: {err}"))),
        }
    }
    report.lines.push(format!("verified: the resolver refuses {PROBE_NAME}"));
    let proxy = SocketAddr::from(([127, 0, 0, 1], runtime_layout::PROXY_PORT));
    TcpStream::connect_timeout(&proxy, CONNECT_TIMEOUT)
        .map_err(|err| Error::Proxy(format!("the proxy on {proxy} does not accept: {err}")))?;
    report.lines.push(format!("verified: the proxy accepts on {proxy}"));
    if let Ok(start) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start") {
        if start.trim().parse::<u32>().is_ok_and(|port| port > 80) {
            report.warnings.push(format!(
                "net.ipv4.ip_unprivileged_port_start is {} here (Docker sets 0): names on lower ports get no \
                 address, so only programs that use HTTP_PROXY reach them",
                start.trim()
            ));
        }
    }
    Ok(())
}

/// The first line of the `/etc/resolv.conf` this firewall writes.
const RESOLV_MARK: &str = "# agent-sandbox:";

/// The resolv.conf the container had (whose servers the proxy asks): read from
/// /etc/resolv.conf the first time and kept aside, because the file then names the
/// filtering resolver.
fn upstream_text() -> Result<String, Error> {
    let io = |path: &'static str| move |source| Error::Io { path: path.into(), source };
    let current = std::fs::read_to_string(crate::RESOLV_CONF).map_err(io(crate::RESOLV_CONF))?;
    if current.starts_with(RESOLV_MARK) {
        return std::fs::read_to_string(crate::SAVED_RESOLV_CONF).map_err(io(crate::SAVED_RESOLV_CONF));
    }
    write_file(Path::new(crate::SAVED_RESOLV_CONF), &current)?;
    Ok(current)
}

/// Rewritten in place: Docker bind-mounts the file, so it cannot be replaced.
fn write_resolv_conf(text: &str) -> Result<(), Error> {
    let current = std::fs::read_to_string(crate::RESOLV_CONF).unwrap_or_default();
    if current == text {
        return Ok(());
    }
    std::fs::write(crate::RESOLV_CONF, text).map_err(|source| Error::Io { path: crate::RESOLV_CONF.into(), source })
}

/// Written aside and renamed, readable by everyone.
fn write_file(path: &Path, text: &str) -> Result<(), Error> {
    let io = |source| Error::Io { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let next = path.with_extension("next");
    std::fs::write(&next, text).map_err(io)?;
    std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o644)).map_err(io)?;
    std::fs::rename(&next, path).map_err(io)
}

/// What was applied last (from the state file) and the policy the files give now.
pub fn status(policy: &Policy) -> Vec<String> {
    let health = health();
    let mut lines = vec![health.banner()];
    lines.push(format!(
        "policy: built-in defaults{}",
        policy.sources().map(|p| format!(", {}", p.display())).collect::<String>()
    ));
    lines.push(format!("network.mode: {}", policy.net.mode.as_str()));
    let values = |items: &[config::Sourced<String>]| items.iter().map(|item| item.value.clone()).collect::<Vec<_>>();
    lines.push(format!("allow: {}", values(&policy.config.net_allow).join(" ")));
    if !policy.config.net_deny.is_empty() {
        lines.push(format!("deny: {}", values(&policy.config.net_deny).join(" ")));
    }
    if !policy.config.net_allow_private.is_empty() {
        lines.push(format!("allowPrivate: {}", values(&policy.config.net_allow_private).join(" ")));
    }
    // On a host there is nothing applied and no proxy to report, and nothing to advise.
    if health == Health::NotAContainer {
        return lines;
    }
    match std::fs::read_to_string(STATE_FILE)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
    {
        Some(state) => {
            lines.push(format!("last applied: {} (unix time)", state["appliedAt"]));
            if let Some(resolvers) = state.get("upstream") {
                lines.push(format!("the proxy's DNS servers: {resolvers}"));
            }
            for warning in state["warnings"].as_array().into_iter().flatten() {
                lines.push(format!("warning then: {}", warning.as_str().unwrap_or_default()));
            }
        }
        None => lines.push("not applied in this container yet (run: sudo agent-sandbox firewall apply)".into()),
    }
    lines.push(match serve::running() {
        Some(0) => "proxy: NOT RUNNING (run: sudo agent-sandbox firewall apply)".into(),
        Some(count) => format!("proxy: running ({count} process(es) of user {})", crate::NET_USER),
        None => format!("proxy: none (no user {} in this image)", crate::NET_USER),
    });
    lines
}

/// `firewall status --json`: what [`status`] prints, as one object (`policy` holds
/// `error` when it does not load).
pub fn status_json(policy: Result<&Policy, &Error>) -> serde_json::Value {
    let policy = match policy {
        Ok(policy) => {
            let values =
                |items: &[config::Sourced<String>]| items.iter().map(|item| item.value.clone()).collect::<Vec<_>>();
            json!({
                "files": policy.sources().map(|path| path.display().to_string()).collect::<Vec<_>>(),
                "mode": policy.net.mode.as_str(),
                "allow": values(&policy.config.net_allow),
                "deny": values(&policy.config.net_deny),
                "allowPrivate": values(&policy.config.net_allow_private),
            })
        }
        Err(err) => json!({ "error": err.to_string() }),
    };
    let last =
        std::fs::read_to_string(STATE_FILE).ok().and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
    json!({ "health": health().to_json(), "policy": policy, "lastApplied": last, "proxyProcesses": serve::running() })
}

/// The `nameserver` addresses of a resolv.conf.
pub(crate) fn parse_resolvers(text: &str) -> Vec<IpAddr> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("nameserver"))
        .filter_map(|rest| rest.trim().split('%').next()?.parse().ok())
        .collect()
}

fn run_with_input(cmd: &mut Command, input: &str) -> Result<(), Error> {
    let command = format!("{cmd:?}").replace('"', "");
    let tool = |message: String| Error::Tool { command: command.clone(), message };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| tool(err.to_string()))?;
    child.stdin.take().expect("stdin is piped").write_all(input.as_bytes()).map_err(|err| tool(err.to_string()))?;
    let out = child.wait_with_output().map_err(|err| tool(err.to_string()))?;
    if !out.status.success() {
        return Err(tool(String::from_utf8_lossy(&out.stderr).trim().to_owned()));
    }
    Ok(())
}

fn write_state(policy: &Policy, upstream: &[IpAddr], report: &Report) {
    // What the mode does is what every shell says: only allowlist is "on".
    let (state, reason) = match policy.net.mode {
        Network::Allowlist => ("applied", None),
        Network::Off => ("closed", Some("network.mode is \"off\" in the configuration")),
        Network::On => ("open", Some("network.mode is \"on\" in the configuration")),
    };
    write_state_value(json!({
        "version": 3,
        "state": state,
        "reason": reason,
        "boot": util::boot_id(),
        "appliedAt": now(),
        "mode": policy.net.mode.as_str(),
        "sources": policy.sources().collect::<Vec<_>>(),
        "upstream": upstream.iter().map(IpAddr::to_string).collect::<Vec<_>>(),
        "warnings": report.warnings,
    }));
}

fn write_state_value(state: serde_json::Value) {
    let path = Path::new(STATE_FILE);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // Written aside and renamed, so a reader never sees half a state.
    let next = path.with_extension("json.next");
    if std::fs::write(&next, format!("{state:#}\n")).is_ok() {
        let _ = std::fs::rename(&next, path);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn resolvers_are_read_from_resolv_conf() {
        let text = "# c\nnameserver 127.0.0.11\nnameserver fe80::1%eth0\n nameserver 10.0.0.2 \nsearch x\n";
        let got: Vec<String> = super::parse_resolvers(text).iter().map(|ip| ip.to_string()).collect();
        assert_eq!(got, ["127.0.0.11", "fe80::1", "10.0.0.2"]);
    }
}
