//! The executor: resolve the domains, fetch GitHub's ranges, feed the plan to
//! `ipset`/`iptables-restore`/`ip6tables-restore`, verify from the inside, and write
//! the state file `status` reads. Failing to resolve a domain or to fetch GitHub's
//! ranges is a warning (the rest of the allowlist still applies); a firewall that
//! lets the probe address through is an error.

use std::{
    io::Write as _,
    net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs},
    path::Path,
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use serde_json::json;

use crate::{plan, Cidr, Error, Policy, Resolved, PROBE_V4, PROBE_V6, SET_V4, SET_V6, STATE_FILE};

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
    let plan = plan(&resolved);
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
    let mut lines = vec![format!(
        "policy: {}",
        policy.sources.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )];
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
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        for set in [SET_V4, SET_V6] {
            match Command::new("ipset").args(["list", set]).output() {
                Ok(out) if out.status.success() => {
                    let text = String::from_utf8_lossy(&out.stdout);
                    let members: Vec<&str> = text.lines().skip_while(|line| *line != "Members:").skip(1).collect();
                    lines.push(format!("live {set}: {}", members.join(" ")));
                }
                _ => lines.push(format!("live {set}: missing (the firewall is not in effect)")),
            }
        }
    } else {
        lines.push("(run with sudo to list the live address sets)".into());
    }
    lines
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
    let state = json!({
        "version": 1,
        "appliedAt": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        "sources": policy.sources,
        "allowed": resolved.allowed.iter().map(Cidr::to_string).collect::<Vec<_>>(),
        "resolvers": resolved.resolvers.iter().map(IpAddr::to_string).collect::<Vec<_>>(),
        "warnings": report.warnings,
    });
    let path = Path::new(STATE_FILE);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(path, format!("{state:#}\n"));
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
