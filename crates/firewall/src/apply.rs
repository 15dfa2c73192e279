//! The executor: resolve the domains, fetch GitHub's ranges, feed the plan to
//! `ipset`/`iptables-restore`/`ip6tables-restore`, verify from the inside, and write
//! the state file `status` reads. Failing to resolve a domain or to fetch GitHub's
//! ranges is a warning (the rest of the allowlist still applies); a firewall that
//! lets the probe address through is an error.
//!
//! [`apply_or_close`] is what the commands call: whatever goes wrong (a policy that
//! does not load, a tool that fails, a probe that gets through), egress ends up
//! closed (loopback only) and the state file says why; [`health`] reads it back for
//! `status`, `check` and the shell banner, and knows a state left by an earlier start.

use std::{
    io::Write as _,
    net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs},
    path::Path,
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use serde_json::json;

use crate::{
    load,
    plan::{self, closed_tables, starting_tables},
    Cidr, Error, Policy, Resolved, PROBE_V4, PROBE_V6, SET_V4, SET_V6, STATE_FILE,
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
}

impl Health {
    /// The line every shell, `check` and `status` print; loud unless all is well.
    pub fn banner(&self) -> String {
        match self {
            Health::Applied => "firewall: on (only the allowlist is reachable)".into(),
            Health::Closed(reason) => format!(
                "firewall: CLOSED: egress is loopback only, because {reason} (fix it, then: sudo agent-sandbox firewall apply)"
            ),
            Health::Open(reason) => format!("firewall: OPEN: NO RULES COULD BE INSTALLED ({reason}); egress is not restricted"),
            Health::NotApplied => "firewall: NOT APPLIED since this container started: egress may be OPEN (run: sudo agent-sandbox firewall apply)".into(),
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
        };
        json!({ "state": state, "reason": reason, "banner": self.banner() })
    }
}

/// Reads the state file and tells whether it belongs to this start of the container.
pub fn health() -> Health {
    let Some(state) =
        std::fs::read_to_string(STATE_FILE).ok().and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
    else {
        return Health::NotApplied;
    };
    if state["boot"].as_str() != Some(boot_id().as_str()) {
        return Health::NotApplied;
    }
    let reason = state["reason"].as_str().unwrap_or("unknown").to_owned();
    match state["state"].as_str() {
        Some("applied") => Health::Applied,
        Some("closed") => Health::Closed(reason),
        Some("open") => Health::Open(reason),
        _ => Health::NotApplied,
    }
}

/// Identifies this start of the container: PID 1's start time (a restart gives a new
/// PID namespace and a new PID 1), so a state file from an earlier start is not trusted.
fn boot_id() -> String {
    let stat = std::fs::read_to_string("/proc/1/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
    // Fields after the name start at field 3 (state); starttime is field 22.
    after_name.split_whitespace().nth(19).unwrap_or("unknown").to_owned()
}

/// Loads the policy from `paths` and applies it; on any failure closes egress (loopback
/// only), records why and returns the original error. With `starting` (the Feature's
/// entrypoint, at every start), the agent has loopback only from the first moment:
/// root's own lookups are the only traffic until the allowlist is in force.
pub fn apply_or_close(paths: &[&Path], starting: bool) -> Result<Report, Error> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::NotRoot);
    }
    if starting {
        let (v4, v6) = starting_tables();
        if let Err(err) = restore_tables(&v4, &v6) {
            write_outcome("open", &err.to_string());
            return Err(err);
        }
    }
    let result = load(paths).and_then(|policy| apply(&policy));
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

fn restore_tables(v4: &str, v6: &str) -> Result<(), Error> {
    run_with_input(&mut Command::new("iptables-restore"), v4)?;
    run_with_input(&mut Command::new("ip6tables-restore"), v6)
}

fn write_outcome(state: &str, reason: &str) {
    write_state_value(json!({
        "version": 2,
        "state": state,
        "reason": reason,
        "boot": boot_id(),
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

const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

pub fn apply(policy: &Policy) -> Result<Report, Error> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::NotRoot);
    }
    let started = Instant::now();
    let mut report = Report::default();
    let mut allowed = policy.cidrs.clone();
    for (domain, result) in resolve_all(&policy.domains) {
        match result {
            Ok(addrs) if !addrs.is_empty() => allowed.extend(addrs.into_iter().map(Cidr::host)),
            Ok(_) => report.warnings.push(format!("{domain}: no address (left out)")),
            Err(err) => report.warnings.push(format!("{domain}: cannot resolve ({err}); left out")),
        }
    }
    if policy.github_meta {
        match github_meta() {
            Ok(ranges) => {
                report.lines.push(format!("GitHub's published ranges: {}", ranges.len()));
                allowed.extend(ranges);
            }
            Err(err) => report.warnings.push(format!("GitHub's published ranges: {err}; left out")),
        }
    }
    let resolvers = resolvers(Path::new("/etc/resolv.conf"));
    let resolved = Resolved { allowed, resolvers };
    let plan = plan::plan(&resolved);
    for dup in &plan.duplicates {
        report.warnings.push(format!("{dup} is allowed more than once (kept once)"));
    }
    run_with_input(Command::new("ipset").args(["-exist", "restore"]), &plan.ipset)?;
    run_with_input(&mut Command::new("iptables-restore"), &plan.iptables)?;
    run_with_input(&mut Command::new("ip6tables-restore"), &plan.ip6tables)?;
    let v4 = resolved.allowed.iter().filter(|c| c.addr.is_ipv4()).count();
    report.lines.push(format!(
        "allowed: {} domain(s), {} IPv4 and {} IPv6 range(s); everything else refused (IPv4 and IPv6)",
        policy.domains.len(),
        v4,
        resolved.allowed.len() - v4,
    ));
    let dns: Vec<String> = resolved.resolvers.iter().map(IpAddr::to_string).collect();
    report.lines.push(format!(
        "DNS: only to {}",
        if dns.is_empty() { "(no resolver configured)".into() } else { dns.join(", ") }
    ));

    // Verification: the probe addresses are never routed; a connection means no firewall.
    for probe in [PROBE_V4, PROBE_V6] {
        let addr: SocketAddr = probe.parse().expect("the probe addresses are valid");
        if resolved.allowed.iter().any(|cidr| cidr.contains(addr.ip())) {
            report.warnings.push(format!("cannot verify refusal: the allowlist covers {}", addr.ip()));
            continue;
        }
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(_) => return Err(Error::NotEffective(probe.into())),
            Err(err) => report.lines.push(format!("verified: {probe} (outside the allowlist) refused: {err}")),
        }
    }
    match &policy.verify {
        Some(target) => match connect(target) {
            Ok(addr) => report.lines.push(format!("verified: {target} (inside the allowlist) reachable at {addr}")),
            Err(err) => report.warnings.push(format!("{target} (inside the allowlist) not reachable: {err}")),
        },
        None => report.lines.push("no `verify` target in the policy: reachability not checked".into()),
    }
    report.lines.push(format!("applied in {} ms", started.elapsed().as_millis()));
    write_state(policy, &resolved, &report);
    Ok(report)
}

/// What was applied last (from the state file) and, as root, the live sets.
pub fn status(policy: &Policy) -> Vec<String> {
    let mut lines = vec![health().banner()];
    lines.push(format!(
        "policy: {}",
        policy.sources.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    ));
    lines.push(format!("domains: {}", policy.domains.join(" ")));
    if !policy.cidrs.is_empty() {
        lines.push(format!("ranges: {}", policy.cidrs.iter().map(Cidr::to_string).collect::<Vec<_>>().join(" ")));
    }
    lines.push(format!("GitHub's published ranges: {}", if policy.github_meta { "yes" } else { "no" }));
    match std::fs::read_to_string(STATE_FILE)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
    {
        Some(state) => {
            lines.push(format!("last applied: {} (unix time)", state["appliedAt"]));
            lines.push(format!("DNS only to: {}", state["resolvers"]));
            for warning in state["warnings"].as_array().into_iter().flatten() {
                lines.push(format!("warning then: {}", warning.as_str().unwrap_or_default()));
            }
        }
        None => lines.push("not applied in this container yet (run: sudo agent-sandbox firewall apply)".into()),
    }
    match live_sets() {
        Some(sets) => {
            for (set, members) in sets {
                match members {
                    Some(members) => lines.push(format!("live {set}: {}", members.join(" "))),
                    None => lines.push(format!("live {set}: missing (the firewall is not in effect)")),
                }
            }
        }
        None => lines.push("(run with sudo to list the live address sets)".into()),
    }
    lines
}

/// `firewall status --json`: what [`status`] prints, as one object (`policy` holds
/// `error` when it does not load; `live` is null unless run as root).
pub fn status_json(policy: Result<&Policy, &Error>) -> serde_json::Value {
    let policy = match policy {
        Ok(policy) => json!({
            "files": policy.sources.iter().map(|path| path.display().to_string()).collect::<Vec<_>>(),
            "domains": policy.domains,
            "ranges": policy.cidrs.iter().map(Cidr::to_string).collect::<Vec<_>>(),
            "githubMeta": policy.github_meta,
        }),
        Err(err) => json!({ "error": err.to_string() }),
    };
    let last =
        std::fs::read_to_string(STATE_FILE).ok().and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
    let live = live_sets().map(|sets| {
        sets.into_iter().map(|(set, members)| (set.to_owned(), json!(members))).collect::<serde_json::Map<_, _>>()
    });
    json!({ "health": health().to_json(), "policy": policy, "lastApplied": last, "live": live })
}

/// A live address set: its name and members (`None` when it is missing).
type LiveSet = (&'static str, Option<Vec<String>>);

/// The live address sets; `None` when not root (only root may list them).
fn live_sets() -> Option<Vec<LiveSet>> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let sets = [SET_V4, SET_V6].map(|set| {
        let members =
            Command::new("ipset").args(["list", set]).output().ok().filter(|out| out.status.success()).map(|out| {
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.lines().skip_while(|line| *line != "Members:").skip(1).map(str::to_owned).collect()
            });
        (set, members)
    });
    Some(sets.into())
}

fn resolve_all(domains: &[String]) -> Vec<(String, Result<Vec<IpAddr>, String>)> {
    let (sender, receiver) = mpsc::channel();
    for domain in domains {
        let sender = sender.clone();
        let domain = domain.clone();
        std::thread::spawn(move || {
            let result = (domain.as_str(), 0)
                .to_socket_addrs()
                .map(|addrs| {
                    let mut ips: Vec<IpAddr> = addrs.map(|addr| addr.ip()).collect();
                    ips.sort();
                    ips.dedup();
                    ips
                })
                .map_err(|err| err.to_string());
            let _ = sender.send((domain, result));
        });
    }
    drop(sender);
    let deadline = Instant::now() + RESOLVE_TIMEOUT;
    let mut results: Vec<(String, Result<Vec<IpAddr>, String>)> = Vec::new();
    while results.len() < domains.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match receiver.recv_timeout(left) {
            Ok(result) => results.push(result),
            Err(_) => break,
        }
    }
    for domain in domains {
        if !results.iter().any(|(name, _)| name == domain) {
            results.push((domain.clone(), Err("timed out".into())));
        }
    }
    results.sort_by(|a, b| a.0.cmp(&b.0));
    results
}

fn github_meta() -> Result<Vec<Cidr>, String> {
    let out = Command::new("curl")
        .args(["-fsS", "--max-time", "10", "https://api.github.com/meta"])
        .output()
        .map_err(|err| format!("cannot run curl: {err}"))?;
    if !out.status.success() {
        return Err(format!("curl: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|err| err.to_string())?;
    let mut ranges = Vec::new();
    for key in ["web", "api", "git"] {
        for text in meta[key].as_array().into_iter().flatten().filter_map(|v| v.as_str()) {
            if let Some(cidr) = Cidr::parse(text) {
                ranges.push(cidr);
            }
        }
    }
    Ok(ranges)
}

/// The `nameserver` addresses of a resolv.conf.
pub(crate) fn resolvers(path: &Path) -> Vec<IpAddr> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("nameserver"))
        .filter_map(|rest| rest.trim().split('%').next()?.parse().ok())
        .collect()
}

fn connect(target: &str) -> Result<SocketAddr, String> {
    let addrs: Vec<SocketAddr> = target.to_socket_addrs().map_err(|err| err.to_string())?.collect();
    let mut last = String::from("no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(_) => return Ok(addr),
            Err(err) => last = format!("{addr}: {err}"),
        }
    }
    Err(last)
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

fn write_state(policy: &Policy, resolved: &Resolved, report: &Report) {
    write_state_value(json!({
        "version": 2,
        "state": "applied",
        "boot": boot_id(),
        "appliedAt": now(),
        "sources": policy.sources,
        "allowed": resolved.allowed.iter().map(Cidr::to_string).collect::<Vec<_>>(),
        "resolvers": resolved.resolvers.iter().map(IpAddr::to_string).collect::<Vec<_>>(),
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
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("resolv.conf");
        std::fs::write(&path, "# c\nnameserver 127.0.0.11\nnameserver fe80::1%eth0\n nameserver 10.0.0.2 \nsearch x\n")
            .expect("write");
        let got: Vec<String> = super::resolvers(&path).iter().map(|ip| ip.to_string()).collect();
        assert_eq!(got, ["127.0.0.11", "fe80::1", "10.0.0.2"]);
    }
}
