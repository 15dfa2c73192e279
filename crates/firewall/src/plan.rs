//! The pure half of `apply`: from the resolved allowlist to the exact input of
//! `ipset restore`, `iptables-restore` and `ip6tables-restore`.
//!
//! Only the `filter` table is written (Docker's embedded DNS lives in `nat` and stays
//! intact), and it is replaced whole, so applying twice gives the same rules. The sets
//! are filled under a temporary name and swapped in, so there is never a moment with
//! an empty allowlist in force, and the same address from two domains is one entry.

use std::{fmt::Write as _, net::IpAddr};

pub const SET_V4: &str = "agent-sandbox-allow4";
pub const SET_V6: &str = "agent-sandbox-allow6";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    pub fn parse(text: &str) -> Option<Cidr> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr.parse::<IpAddr>().ok()?, prefix.parse::<u8>().ok()?),
            None => {
                let addr = text.parse::<IpAddr>().ok()?;
                (addr, if addr.is_ipv4() { 32 } else { 128 })
            }
        };
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (prefix <= max).then_some(Cidr { addr, prefix })
    }

    pub fn host(addr: IpAddr) -> Cidr {
        Cidr { addr, prefix: if addr.is_ipv4() { 32 } else { 128 } }
    }

    pub fn contains(&self, addr: IpAddr) -> bool {
        match (self.addr, addr) {
            (IpAddr::V4(net), IpAddr::V4(addr)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(addr) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(addr)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(addr) & mask
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// What `apply` found out before planning.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// Every allowed range: the policy's, the domains' addresses, GitHub's.
    pub allowed: Vec<Cidr>,
    /// The `nameserver`s of /etc/resolv.conf.
    pub resolvers: Vec<IpAddr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub ipset: String,
    pub iptables: String,
    pub ip6tables: String,
    /// Addresses listed more than once (reported as a warning, never an error).
    pub duplicates: Vec<Cidr>,
}

/// Docker's embedded resolver for user-defined networks. It answers on loopback and
/// forwards from sockets dockerd (root) opens inside the container's network namespace.
const DOCKER_DNS: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 11));

pub fn plan(resolved: &Resolved) -> Plan {
    let mut seen = std::collections::BTreeSet::new();
    let mut duplicates = Vec::new();
    for cidr in &resolved.allowed {
        if !seen.insert(*cidr) && !duplicates.contains(cidr) {
            duplicates.push(*cidr);
        }
    }
    let mut ipset = String::new();
    for (set, family, v4) in [(SET_V4, "inet", true), (SET_V6, "inet6", false)] {
        let next = format!("{set}-next");
        let _ = writeln!(ipset, "create {set} hash:net family {family}");
        let _ = writeln!(ipset, "create {next} hash:net family {family}");
        let _ = writeln!(ipset, "flush {next}");
        for cidr in seen.iter().filter(|cidr| cidr.addr.is_ipv4() == v4) {
            let _ = writeln!(ipset, "add {next} {cidr}");
        }
        let _ = writeln!(ipset, "swap {next} {set}");
        let _ = writeln!(ipset, "destroy {next}");
    }
    Plan { ipset, iptables: filter_table(resolved, true), ip6tables: filter_table(resolved, false), duplicates }
}

/// The tables while `start` works the allowlist out: loopback, replies, and root's own
/// connections (its resolver lookups, GitHub's ranges). The agent is never root, so it
/// has loopback only until the allowlist is in force. `(iptables, ip6tables)`.
pub fn starting_tables() -> (String, String) {
    let root_only =
        "-A OUTPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n-A OUTPUT -m owner --uid-owner 0 -j ACCEPT\n";
    (minimal_table(true, root_only), minimal_table(false, root_only))
}

/// Fail closed: loopback only, for everyone. `(iptables, ip6tables)`.
pub fn closed_tables() -> (String, String) {
    (minimal_table(true, ""), minimal_table(false, ""))
}

fn minimal_table(v4: bool, extra: &str) -> String {
    let reject = if v4 { "icmp-admin-prohibited" } else { "icmp6-adm-prohibited" };
    format!(
        "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT DROP [0:0]\n-A OUTPUT -o lo -j ACCEPT\n{extra}\
         -A OUTPUT -p tcp -j REJECT --reject-with tcp-reset\n-A OUTPUT -j REJECT --reject-with {reject}\nCOMMIT\n"
    )
}

fn filter_table(resolved: &Resolved, v4: bool) -> String {
    let mut rules = String::from("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT DROP [0:0]\n");
    rules.push_str("-A OUTPUT -o lo -j ACCEPT\n");
    rules.push_str("-A OUTPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n");
    if !v4 {
        // Neighbour discovery: without it no IPv6 address on the link answers at all.
        for icmp in ["router-solicitation", "neighbour-solicitation", "neighbour-advertisement"] {
            let _ = writeln!(rules, "-A OUTPUT -p ipv6-icmp --icmpv6-type {icmp} -j ACCEPT");
        }
    }
    for resolver in resolved.resolvers.iter().filter(|ip| ip.is_ipv4() == v4) {
        if resolver.is_loopback() {
            continue; // covered by `-o lo`
        }
        for proto in ["udp", "tcp"] {
            let _ = writeln!(rules, "-A OUTPUT -d {resolver} -p {proto} --dport 53 -j ACCEPT");
        }
    }
    if v4 && resolved.resolvers.contains(&DOCKER_DNS) {
        // The embedded resolver forwards to the engine's upstream servers through
        // sockets of dockerd (uid 0), inside this namespace; the agent is never uid 0.
        for proto in ["udp", "tcp"] {
            let _ = writeln!(rules, "-A OUTPUT -p {proto} --dport 53 -m owner --uid-owner 0 -j ACCEPT");
        }
    }
    let (set, reject) = if v4 { (SET_V4, "icmp-admin-prohibited") } else { (SET_V6, "icmp6-adm-prohibited") };
    let _ = writeln!(rules, "-A OUTPUT -m set --match-set {set} dst -j ACCEPT");
    let _ = writeln!(rules, "-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset");
    let _ = writeln!(rules, "-A OUTPUT -j REJECT --reject-with {reject}");
    rules.push_str("COMMIT\n");
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_plan_for_a_small_allowlist() {
        let resolved = Resolved {
            allowed: ["10.1.0.0/16", "140.82.112.3", "140.82.112.3", "fd00:a5::2"]
                .iter()
                .map(|text| Cidr::parse(text).expect("valid"))
                .collect(),
            resolvers: vec!["127.0.0.11".parse().expect("ip"), "10.255.255.53".parse().expect("ip")],
        };
        let plan = plan(&resolved);
        assert_eq!(plan.duplicates, vec![Cidr::parse("140.82.112.3/32").expect("valid")]);
        assert_eq!(
            plan.ipset,
            "create agent-sandbox-allow4 hash:net family inet
create agent-sandbox-allow4-next hash:net family inet
flush agent-sandbox-allow4-next
add agent-sandbox-allow4-next 10.1.0.0/16
add agent-sandbox-allow4-next 140.82.112.3/32
swap agent-sandbox-allow4-next agent-sandbox-allow4
destroy agent-sandbox-allow4-next
create agent-sandbox-allow6 hash:net family inet6
create agent-sandbox-allow6-next hash:net family inet6
flush agent-sandbox-allow6-next
add agent-sandbox-allow6-next fd00:a5::2/128
swap agent-sandbox-allow6-next agent-sandbox-allow6
destroy agent-sandbox-allow6-next
"
        );
        assert_eq!(
            plan.iptables,
            "*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT DROP [0:0]
-A OUTPUT -o lo -j ACCEPT
-A OUTPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
-A OUTPUT -d 10.255.255.53 -p udp --dport 53 -j ACCEPT
-A OUTPUT -d 10.255.255.53 -p tcp --dport 53 -j ACCEPT
-A OUTPUT -p udp --dport 53 -m owner --uid-owner 0 -j ACCEPT
-A OUTPUT -p tcp --dport 53 -m owner --uid-owner 0 -j ACCEPT
-A OUTPUT -m set --match-set agent-sandbox-allow4 dst -j ACCEPT
-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset
-A OUTPUT -j REJECT --reject-with icmp-admin-prohibited
COMMIT
"
        );
        assert_eq!(
            plan.ip6tables,
            "*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT DROP [0:0]
-A OUTPUT -o lo -j ACCEPT
-A OUTPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
-A OUTPUT -p ipv6-icmp --icmpv6-type router-solicitation -j ACCEPT
-A OUTPUT -p ipv6-icmp --icmpv6-type neighbour-solicitation -j ACCEPT
-A OUTPUT -p ipv6-icmp --icmpv6-type neighbour-advertisement -j ACCEPT
-A OUTPUT -m set --match-set agent-sandbox-allow6 dst -j ACCEPT
-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset
-A OUTPUT -j REJECT --reject-with icmp6-adm-prohibited
COMMIT
"
        );
    }

    #[test]
    fn closed_is_loopback_only_and_starting_adds_only_root() {
        let (v4, v6) = closed_tables();
        assert_eq!(
            v4,
            "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT DROP [0:0]\n-A OUTPUT -o lo -j ACCEPT\n\
             -A OUTPUT -p tcp -j REJECT --reject-with tcp-reset\n-A OUTPUT -j REJECT --reject-with icmp-admin-prohibited\nCOMMIT\n"
        );
        assert!(v6.ends_with("-A OUTPUT -j REJECT --reject-with icmp6-adm-prohibited\nCOMMIT\n"), "{v6}");
        let (start4, _) = starting_tables();
        assert_eq!(
            start4.replace(
                "-A OUTPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n-A OUTPUT -m owner --uid-owner 0 -j ACCEPT\n",
                ""
            ),
            v4
        );
    }

    #[test]
    fn without_the_docker_resolver_no_dns_is_allowed_by_owner() {
        let resolved = Resolved { allowed: vec![], resolvers: vec!["10.0.0.2".parse().expect("ip")] };
        assert!(!plan(&resolved).iptables.contains("uid-owner"));
    }

    #[test]
    fn cidr_parsing_and_containment() {
        let table: &[(&str, Option<&str>)] = &[
            ("10.0.0.0/8", Some("10.0.0.0/8")),
            ("1.2.3.4", Some("1.2.3.4/32")),
            ("fd00::/64", Some("fd00::/64")),
            ("::1", Some("::1/128")),
            ("10.0.0.0/33", None),
            ("fd00::/129", None),
            ("example.com", None),
            ("10.0.0.0/x", None),
        ];
        for (text, want) in table {
            assert_eq!(Cidr::parse(text).map(|c| c.to_string()).as_deref(), *want, "{text}");
        }
        let net = Cidr::parse("10.20.0.0/16").expect("valid");
        assert!(net.contains("10.20.3.4".parse().expect("ip")));
        assert!(!net.contains("10.21.0.1".parse().expect("ip")));
        assert!(!net.contains("::1".parse().expect("ip")));
        assert!(Cidr::parse("2001:db8::/32").expect("valid").contains("2001:db8::1".parse().expect("ip")));
    }
}
