//! The network policy as decisions: `network.allow`/`deny`/`hostPorts`/`allowPrivate`
//! parsed once into a [`NetPolicy`], which answers "may the sandbox reach `host:port`?"
//! and "may an allowed name lead to this address?" with the rule or the reason. The proxy
//! (`crates/netproxy`) asks these two questions for every connection; nothing here does
//! any I/O, so every case is a row in a table test.
//!
//! The forms: `host` (that name only), `*.domain` (every name below `domain`, not
//! `domain` itself), an IPv4 address (that address only: raw addresses are otherwise
//! refused), each with an optional `:port` (else 80 and 443). A deny entry without a
//! port denies every port, and any matching deny entry beats every allow entry.

use std::net::{IpAddr, Ipv4Addr};

use config::{Config, Network, Origin, Sourced};

/// The ports an entry without `:port` allows.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// The parsed network policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetPolicy {
    pub mode: Network,
    allow: Vec<HostRule>,
    deny: Vec<HostRule>,
    /// Host loopback ports reachable inside as `localhost:PORT`, sorted, deduplicated.
    pub host_ports: Vec<u16>,
    allow_private: Vec<Cidr>,
}

/// One `network.allow` or `network.deny` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostRule {
    host: HostPattern,
    /// `None`: 80 and 443 for an allow entry, every port for a deny entry.
    port: Option<u16>,
    /// As written, with where: `"*.npmjs.org" (default)`.
    cited: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    Exact(String),
    /// `*.domain`: the names below `domain`.
    Below(String),
}

/// The answer for one destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed, by this rule (as written, with its origin).
    Allow(String),
    /// Refused, for this reason (what the agent reads in `X-Proxy-Error`).
    Deny(String),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{key}: {value:?}: {message} (from {origin})")]
pub struct NetPolicyError {
    pub key: &'static str,
    pub value: String,
    pub origin: Origin,
    pub message: String,
}

/// The name a request for the host's own loopback services uses (`localhost:PORT`).
pub const LOCALHOST: &str = "localhost";

impl NetPolicy {
    pub fn from_config(config: &Config) -> Result<NetPolicy, NetPolicyError> {
        let rules = |key: &'static str, items: &[Sourced<String>]| -> Result<Vec<HostRule>, NetPolicyError> {
            items
                .iter()
                .map(|item| HostRule::parse(&item.value, &item.origin).map_err(|err| err.at(key, item)))
                .collect()
        };
        let mut host_ports = Vec::new();
        for item in &config.net_host_ports {
            let port =
                parse_port(&item.value).map_err(|message| NetPolicyError::new("network.hostPorts", item, message))?;
            host_ports.push(port);
        }
        host_ports.sort_unstable();
        host_ports.dedup();
        let allow_private = config
            .net_allow_private
            .iter()
            .map(|item| {
                Cidr::parse(&item.value).map_err(|message| NetPolicyError::new("network.allowPrivate", item, message))
            })
            .collect::<Result<_, _>>()?;
        Ok(NetPolicy {
            mode: config.network.value,
            allow: rules("network.allow", &config.net_allow)?,
            deny: rules("network.deny", &config.net_deny)?,
            host_ports,
            allow_private,
        })
    }

    /// May the sandbox reach `host` (a name or an address, as the client wrote it) on
    /// `port`? `localhost` (and `127.0.0.1`) means the host's loopback, allowed on
    /// `hostPorts` only.
    pub fn decide(&self, host: &str, port: u16) -> Verdict {
        let host = normalize(host);
        if host == LOCALHOST || host == "127.0.0.1" || host == "::1" {
            return if self.host_ports.contains(&port) {
                Verdict::Allow(format!("network.hostPorts {port}"))
            } else {
                Verdict::Deny(format!(
                    "{host}:{port}: the host's port {port} is not in network.hostPorts (add it with --host-port {port})"
                ))
            };
        }
        if !is_host_name(&host) && host.parse::<Ipv4Addr>().is_err() {
            return Verdict::Deny(format!("{host:?} is not a host name"));
        }
        if let Some(rule) =
            self.deny.iter().find(|rule| rule.host.matches(&host) && rule.port.is_none_or(|p| p == port))
        {
            return Verdict::Deny(format!("{host}:{port} is denied by network.deny {}", rule.cited));
        }
        if let Some(rule) = self.allow.iter().find(|rule| rule.host.matches(&host) && rule.allows_port(port)) {
            return Verdict::Allow(format!("network.allow {}", rule.cited));
        }
        let ports = self.listed_ports(&host);
        if !ports.is_empty() {
            let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
            return Verdict::Deny(format!(
                "{host} is allowed on port {} only, not {port} (allow it with --allow-host {host}:{port})",
                ports.join(", ")
            ));
        }
        if host.parse::<Ipv4Addr>().is_ok() {
            return Verdict::Deny(format!(
                "{host}: raw IP addresses are refused (use the host name, and add it with --allow-host NAME)"
            ));
        }
        Verdict::Deny(format!("{host} is not on the network allowlist (add it with --allow-host {host})"))
    }

    /// The ports the host name `host` may be reached on, sorted: those its allow entries
    /// name (80 and 443 for an entry without a port), less what [`NetPolicy::decide`]
    /// refuses (a deny entry). Empty for a name that is not allowed at all, for
    /// `localhost` and for addresses: what the resolver inside the sandbox answers, and
    /// the ports its transparent listeners take, for each name.
    pub fn allowed_ports(&self, host: &str) -> Vec<u16> {
        let host = normalize(host);
        if host == LOCALHOST || !is_host_name(&host) {
            return Vec::new();
        }
        let mut ports = self.listed_ports(&host);
        ports.retain(|port| matches!(self.decide(&host, *port), Verdict::Allow(_)));
        ports
    }

    /// The ports the allow entries matching `host` name, sorted, deduplicated.
    fn listed_ports(&self, host: &str) -> Vec<u16> {
        let mut ports: Vec<u16> = self
            .allow
            .iter()
            .filter(|rule| rule.host.matches(host))
            .flat_map(|rule| rule.port.map_or(DEFAULT_PORTS.to_vec(), |port| vec![port]))
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// May an allowed name lead to `addr`? Addresses in private, loopback, link-local
    /// and other non-public ranges only when `network.allowPrivate` names them: a name
    /// whose DNS answer changes to such an address (DNS rebinding) reaches nothing.
    /// An IPv6 address that carries an IPv4 one (mapped, compatible, NAT64, 6to4,
    /// Teredo) is judged as that IPv4 address.
    pub fn check_address(&self, addr: IpAddr) -> Result<(), String> {
        let addr = match addr {
            IpAddr::V6(v6) => embedded_ipv4(v6).map_or(addr, IpAddr::V4),
            IpAddr::V4(_) => addr,
        };
        match special_range(addr) {
            None => Ok(()),
            Some(_) if self.allow_private.iter().any(|cidr| cidr.contains(addr)) => Ok(()),
            Some(range) => Err(format!(
                "resolves to {addr}, a {range} address (allow it with network.allowPrivate [\"{addr}/32\"] if you \
                 mean it)"
            )),
        }
    }
}

impl HostRule {
    fn parse(text: &str, origin: &Origin) -> Result<HostRule, String> {
        // A URL pasted where a host goes (`--allow-host https://example.com`): say what to
        // write instead of reading its `//example.com` as a port.
        if let Some((_, rest)) = text.split_once("://") {
            let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
            return Err(format!(
                "a URL, not a host: write the host alone, {host:?} (ports 80 and 443; HOST:PORT for another)"
            ));
        }
        let (host, port) = match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(parse_port(port)?)),
            None => (text, None),
        };
        let host = normalize(host);
        let pattern = match host.strip_prefix("*.") {
            Some(domain) if is_host_name(domain) && domain.contains('.') => HostPattern::Below(domain.to_owned()),
            Some(_) => return Err("expected *.domain with a domain of at least two labels".into()),
            None if host.contains('*') => return Err("a * is allowed only as the first label (*.domain)".into()),
            None if is_host_name(&host) || host.parse::<Ipv4Addr>().is_ok() => HostPattern::Exact(host),
            None => return Err("expected a host name, *.domain or an IPv4 address, with an optional :port".into()),
        };
        Ok(HostRule { host: pattern, port, cited: format!("{text:?} ({origin})") })
    }

    fn allows_port(&self, port: u16) -> bool {
        self.port.map_or(DEFAULT_PORTS.contains(&port), |own| own == port)
    }
}

impl HostPattern {
    fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(name) => host == name,
            HostPattern::Below(domain) => {
                host.len() > domain.len() + 1
                    && host.ends_with(domain.as_str())
                    && host[..host.len() - domain.len()].ends_with('.')
            }
        }
    }
}

impl NetPolicyError {
    fn new(key: &'static str, item: &Sourced<String>, message: String) -> NetPolicyError {
        NetPolicyError { key, value: item.value.clone(), origin: item.origin.clone(), message }
    }
}

trait At {
    fn at(self, key: &'static str, item: &Sourced<String>) -> NetPolicyError;
}

impl At for String {
    fn at(self, key: &'static str, item: &Sourced<String>) -> NetPolicyError {
        NetPolicyError::new(key, item, self)
    }
}

fn parse_port(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(port) if port > 0 && !text.starts_with('+') => Ok(port),
        _ => Err(format!("{text:?} is not a port (1-65535)")),
    }
}

/// Lowercase, without one trailing dot (`Example.COM.` is `example.com`).
fn normalize(host: &str) -> String {
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// A DNS name: dot-separated labels of letters, digits, `-` and `_`, none empty, none
/// starting or ending with `-`, at most 253 characters, not all digits and dots.
pub fn is_host_name(host: &str) -> bool {
    host.len() <= 253
        && !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        && !host.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

/// The non-public range `addr` lies in, by name; `None` for a public address.
/// The IPv4 address an IPv6 one carries, which is where a packet to it ends up:
/// IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d` (not `::` and `::1`), NAT64
/// `64:ff9b::/96` (RFC 6052), 6to4 `2002:AABB:CCDD::/48` (RFC 3056) and Teredo
/// `2001:0::/32`, whose client address is the last 32 bits inverted (RFC 4380).
fn embedded_ipv4(v6: std::net::Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let last = Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
    if let Some(v4) = v6.to_ipv4_mapped() {
        Some(v4)
    } else if (s[..6] == [0; 6] && !v6.is_unspecified() && !v6.is_loopback()) || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        Some(last)
    } else if s[0] == 0x2002 {
        Some(Ipv4Addr::from((u32::from(s[1]) << 16) | u32::from(s[2])))
    } else if s[0] == 0x2001 && s[1] == 0 {
        Some(Ipv4Addr::from(!u32::from(last)))
    } else {
        None
    }
}

fn special_range(addr: IpAddr) -> Option<&'static str> {
    match addr {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            if v4.is_loopback() {
                Some("loopback")
            } else if v4.is_private() {
                Some("private")
            } else if v4.is_link_local() {
                Some("link-local")
            } else if a == 100 && (64..128).contains(&b) {
                Some("shared (CGNAT)")
            } else if v4.is_unspecified() || a == 0 {
                Some("unspecified")
            } else if v4.is_multicast() || v4.is_broadcast() || a >= 240 {
                Some("multicast or reserved")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if first & 0xfe00 == 0xfc00 {
                Some("private (unique local)")
            } else if first & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if first & 0xffc0 == 0xfec0 {
                Some("site-local")
            } else if v6.segments()[..3] == [0x64, 0xff9b, 1] {
                // RFC 8215: NAT64 for local use, its IPv4 address placed by a local prefix length.
                Some("NAT64 local-use")
            } else if v6.is_multicast() {
                Some("multicast or reserved")
            } else {
                None
            }
        }
    }
}

/// An address range: `10.0.0.0/8`, `fd00::/8`, or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    fn parse(text: &str) -> Result<Cidr, String> {
        let bad = || format!("{text:?} is not an address range (e.g. 10.0.0.0/8, fd00::/8 or one address)");
        let (addr, prefix) = text.split_once('/').map_or((text, None), |(addr, prefix)| (addr, Some(prefix)));
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(prefix) => prefix.parse::<u8>().ok().filter(|prefix| *prefix <= max).ok_or_else(bad)?,
        };
        Ok(Cidr { addr, prefix })
    }

    fn contains(&self, addr: IpAddr) -> bool {
        let bits = |addr: IpAddr| -> (u128, u8) {
            match addr {
                IpAddr::V4(v4) => (u128::from(u32::from(v4)) << 96, 32),
                IpAddr::V6(v6) => (u128::from(v6), 128),
            }
        };
        let ((own, own_len), (other, other_len)) = (bits(self.addr), bits(addr));
        if own_len != other_len {
            return false;
        }
        let mask = if self.prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(self.prefix)) };
        own & mask == other & mask
    }
}

#[cfg(test)]
mod tests {
    use config::{cli_layer, defaults, merge, parse_layer, LayerKind};

    use super::*;

    fn policy(jsonc: &str) -> NetPolicy {
        let layer = parse_layer(jsonc, std::path::Path::new("/p/config.jsonc"), LayerKind::Project).expect("valid");
        NetPolicy::from_config(&merge(vec![defaults(), layer])).expect("valid policy")
    }

    /// Every refused form beside the legitimate one, with the reason the agent reads.
    #[test]
    fn destinations_allowed_and_refused_with_reasons() {
        let policy = policy(
            r#"{"network": {"allow": ["*.example.org", "git.test:2222", "10.1.2.3:8080"], "deny": ["gist.github.com", "bad.example.org:443"], "hostPorts": [5432]}}"#,
        );
        let cases: &[(&str, u16, Result<&str, &str>)] = &[
            ("api.anthropic.com", 443, Ok("network.allow \"api.anthropic.com\" (default)")),
            ("API.Anthropic.COM.", 443, Ok("network.allow \"api.anthropic.com\" (default)")),
            ("api.anthropic.com", 80, Ok("network.allow \"api.anthropic.com\" (default)")),
            ("api.anthropic.com", 8443, Err("api.anthropic.com is allowed on port 80, 443 only, not 8443 (allow it with --allow-host api.anthropic.com:8443)")),
            // Claude Code's sign-in and token refresh (`TOKEN_URL`), and the host it used before 2.1.81.
            ("platform.claude.com", 443, Ok("network.allow \"platform.claude.com\" (default)")),
            ("console.anthropic.com", 443, Ok("network.allow \"console.anthropic.com\" (default)")),
            ("claude.ai", 443, Ok("network.allow \"claude.ai\" (default)")),
            ("evil.claude.com", 443, Err("evil.claude.com is not on the network allowlist (add it with --allow-host evil.claude.com)")),
            ("evil.anthropic.com", 443, Err("evil.anthropic.com is not on the network allowlist (add it with --allow-host evil.anthropic.com)")),
            ("github.com", 22, Ok("network.allow \"github.com:22\" (default)")),
            ("gist.github.com", 443, Err("gist.github.com:443 is denied by network.deny \"gist.github.com\" (project (/p/config.jsonc:1:85))")),
            ("a.example.org", 443, Ok("network.allow \"*.example.org\" (project (/p/config.jsonc:1:24))")),
            ("a.b.example.org", 80, Ok("network.allow \"*.example.org\" (project (/p/config.jsonc:1:24))")),
            ("example.org", 443, Err("example.org is not on the network allowlist (add it with --allow-host example.org)")),
            ("badexample.org", 443, Err("badexample.org is not on the network allowlist (add it with --allow-host badexample.org)")),
            ("bad.example.org", 443, Err("bad.example.org:443 is denied by network.deny \"bad.example.org:443\" (project (/p/config.jsonc:1:104))")),
            ("bad.example.org", 80, Ok("network.allow \"*.example.org\" (project (/p/config.jsonc:1:24))")),
            ("git.test", 2222, Ok("network.allow \"git.test:2222\" (project (/p/config.jsonc:1:41))")),
            ("git.test", 443, Err("git.test is allowed on port 2222 only, not 443 (allow it with --allow-host git.test:443)")),
            ("10.1.2.3", 8080, Ok("network.allow \"10.1.2.3:8080\" (project (/p/config.jsonc:1:58))")),
            ("1.2.3.4", 443, Err("1.2.3.4: raw IP addresses are refused (use the host name, and add it with --allow-host NAME)")),
            ("localhost", 5432, Ok("network.hostPorts 5432")),
            ("127.0.0.1", 5432, Ok("network.hostPorts 5432")),
            ("localhost", 22, Err("localhost:22: the host's port 22 is not in network.hostPorts (add it with --host-port 22)")),
            ("a b", 443, Err("\"a b\" is not a host name")),
            ("", 443, Err("\"\" is not a host name")),
        ];
        for (host, port, expected) in cases {
            let expected = match expected {
                Ok(rule) => Verdict::Allow((*rule).to_owned()),
                Err(reason) => Verdict::Deny((*reason).to_owned()),
            };
            assert_eq!(policy.decide(host, *port), expected, "{host}:{port}");
        }
    }

    /// What the resolver inside answers: every port `decide` allows for the name, and
    /// nothing for a name it refuses on every port.
    #[test]
    fn allowed_ports_per_name_agree_with_decide() {
        let policy = policy(
            r#"{"network": {"allow": ["*.example.org", "git.test:2222", "git.test", "10.1.2.3:8080", "both.test:8080"], "deny": ["gist.github.com", "bad.example.org:443", "both.test"], "hostPorts": [5432]}}"#,
        );
        let cases: &[(&str, &[u16])] = &[
            ("api.anthropic.com", &[80, 443]),
            ("API.Anthropic.COM.", &[80, 443]),
            ("github.com", &[22, 80, 443]),
            ("gist.github.com", &[]),
            ("a.example.org", &[80, 443]),
            ("bad.example.org", &[80]),
            ("example.org", &[]),
            ("git.test", &[80, 443, 2222]),
            ("both.test", &[]),
            ("evil.test", &[]),
            ("10.1.2.3", &[]),
            ("localhost", &[]),
            ("a b", &[]),
            ("", &[]),
        ];
        for (host, expected) in cases {
            let ports = policy.allowed_ports(host);
            assert_eq!(ports, *expected, "{host}");
            for port in [22, 80, 443, 2222, 8080] {
                let allowed = matches!(policy.decide(host, port), Verdict::Allow(_));
                assert_eq!(ports.contains(&port), allowed && !ports.is_empty(), "{host}:{port}");
            }
        }
    }

    #[test]
    fn private_addresses_need_allow_private() {
        let strict = policy("{}");
        let open = policy(r#"{"network": {"allowPrivate": ["127.0.0.2", "10.0.0.0/8", "fd00::/8"]}}"#);
        let cases: &[(&str, Option<&str>, bool)] = &[
            ("93.184.216.34", None, true),
            ("2606:2800:220:1::1", None, true),
            ("127.0.0.2", Some("loopback"), true),
            ("127.0.0.3", Some("loopback"), false),
            ("10.9.8.7", Some("private"), true),
            ("192.168.1.1", Some("private"), false),
            ("172.16.0.1", Some("private"), false),
            ("169.254.169.254", Some("link-local"), false),
            ("100.64.0.1", Some("shared (CGNAT)"), false),
            ("0.0.0.0", Some("unspecified"), false),
            ("::1", Some("loopback"), false),
            ("::ffff:127.0.0.1", Some("loopback"), false),
            ("fd12::1", Some("private (unique local)"), true),
            ("fe80::1", Some("link-local"), false),
            // IPv6 forms that carry an IPv4 address are judged by it.
            ("::127.0.0.1", Some("loopback"), false),
            ("::10.9.8.7", Some("private"), true),
            ("::93.184.216.34", None, true),
            ("64:ff9b::7f00:1", Some("loopback"), false),
            ("64:ff9b::a9fe:a9fe", Some("link-local"), false),
            ("64:ff9b::5db8:d822", None, true),
            ("64:ff9b:1::5db8:d822", Some("NAT64 local-use"), false),
            ("2002:7f00:1::1", Some("loopback"), false),
            ("2002:c0a8:101::", Some("private"), false),
            ("2002:5db8:d822::1", None, true),
            ("2001:0:4136:e378:8000:63bf:80ff:fffe", Some("loopback"), false),
            ("2001:0:4136:e378:8000:63bf:f5ff:fffe", Some("private"), true),
            ("2001:0:4136:e378:8000:63bf:a247:29dd", None, true),
            ("fec0::1", Some("site-local"), false),
            ("2001:db8::1", None, true),
        ];
        for (addr, range, opened) in cases {
            let addr: IpAddr = addr.parse().expect("address");
            match range {
                None => assert_eq!(strict.check_address(addr), Ok(()), "{addr}"),
                Some(range) => {
                    let err = strict.check_address(addr).expect_err("refused");
                    assert!(err.contains(&format!("a {range} address")), "{addr}: {err}");
                }
            }
            assert_eq!(open.check_address(addr).is_ok(), *opened, "{addr} with allowPrivate");
        }
    }

    #[test]
    fn bad_entries_are_reported_with_their_origin() {
        let cases: &[(&str, &str)] = &[
            (
                r#"{"network": {"allow": ["*"]}}"#,
                "network.allow: \"*\": a * is allowed only as the first label (*.domain)",
            ),
            (
                r#"{"network": {"allow": ["*.com"]}}"#,
                "network.allow: \"*.com\": expected *.domain with a domain of at least two labels",
            ),
            (
                r#"{"network": {"allow": ["a.*.com"]}}"#,
                "network.allow: \"a.*.com\": a * is allowed only as the first label (*.domain)",
            ),
            (r#"{"network": {"allow": ["x.org:0"]}}"#, "network.allow: \"x.org:0\": \"0\" is not a port (1-65535)"),
            (
                r#"{"network": {"deny": ["http://x.org"]}}"#,
                "network.deny: \"http://x.org\": a URL, not a host: write the host alone, \"x.org\" (ports 80 and \
                 443; HOST:PORT for another)",
            ),
            (
                r#"{"network": {"allow": ["https://example.com:8443/path"]}}"#,
                "network.allow: \"https://example.com:8443/path\": a URL, not a host: write the host alone, \
                 \"example.com:8443\" (ports 80 and 443; HOST:PORT for another)",
            ),
            (
                r#"{"network": {"hostPorts": [70000]}}"#,
                "network.hostPorts: \"70000\": \"70000\" is not a port (1-65535)",
            ),
            (
                r#"{"network": {"allowPrivate": ["10.0.0.0/33"]}}"#,
                "network.allowPrivate: \"10.0.0.0/33\": \"10.0.0.0/33\" is not an address range",
            ),
        ];
        for (jsonc, expected) in cases {
            let layer = parse_layer(jsonc, std::path::Path::new("/p/c.jsonc"), LayerKind::Project).expect("parses");
            let err = NetPolicy::from_config(&merge(vec![layer])).expect_err(jsonc).to_string();
            assert!(err.starts_with(expected) && err.contains("(from project (/p/c.jsonc:1:"), "{jsonc}: {err}");
        }
        let flags = cli_layer(None, &[], &[], &[], &[]).expect("flags").with_network_flags(&["a b".into()], &[]);
        let err = NetPolicy::from_config(&merge(vec![flags])).expect_err("bad flag").to_string();
        assert!(err.ends_with("(from cli (--allow-host))"), "{err}");
    }
}
