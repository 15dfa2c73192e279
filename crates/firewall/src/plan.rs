//! The pure half of `apply`: the exact input of `iptables-restore` and
//! `ip6tables-restore` for a network mode.
//!
//! Only the `filter` table is written (Docker's embedded DNS lives in `nat` and stays
//! intact), and it is replaced whole, so applying twice gives the same rules. In
//! `allowlist` mode the one user that may leave the container is the proxy's
//! ([`crate::NET_USER`]): the agent has loopback, where the proxy, the filtering
//! resolver and its per-name listeners are, and nothing else; Docker's embedded
//! resolver (a loopback address too) is the proxy's and dockerd's only, so the agent's
//! lookups cannot carry data out through it.

use std::{fmt::Write as _, net::IpAddr};

use config::Network;

/// Docker's embedded resolver for user-defined networks. It answers on loopback and
/// forwards from sockets dockerd (root) opens inside the container's network namespace.
pub const DOCKER_DNS: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 11));

/// `(iptables, ip6tables)` for `mode`: `upstream` are the DNS servers the proxy asks,
/// `net_uid` the proxy's user.
pub fn plan(mode: Network, upstream: &[IpAddr], net_uid: u32) -> (String, String) {
    match mode {
        Network::Allowlist => (allowlist_table(upstream, net_uid, true), allowlist_table(upstream, net_uid, false)),
        Network::On => (open_table(), open_table()),
        Network::Off => closed_tables(),
    }
}

/// The tables while `start` works the rest out: loopback, replies, and root's own
/// connections. The agent is never root, so it has loopback only until the policy is
/// in force. `(iptables, ip6tables)`.
pub fn starting_tables() -> (String, String) {
    let root_only = format!("{REPLIES}-A OUTPUT -m owner --uid-owner 0 -j ACCEPT\n");
    let root_only = root_only.as_str();
    (minimal_table(true, root_only), minimal_table(false, root_only))
}

/// Fail closed: loopback only, for everyone (Docker's embedded resolver, which forwards
/// out, for root only). `(iptables, ip6tables)`.
pub fn closed_tables() -> (String, String) {
    (minimal_table(true, ""), minimal_table(false, ""))
}

fn open_table() -> String {
    "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n".into()
}

/// Packets of connections already allowed, in the reply direction only: conntrack knows
/// addresses and ports, not sockets, so accepting the original direction too would let
/// the agent send on a flow the proxy (or dockerd) opened, from the same port, once that
/// socket is closed. The original direction is accepted by owner.
const REPLIES: &str = "-A OUTPUT -m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY -j ACCEPT\n";

fn rejects(v4: bool) -> String {
    let reject = if v4 { "icmp-admin-prohibited" } else { "icmp6-adm-prohibited" };
    format!("-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset\n-A OUTPUT -j REJECT --reject-with {reject}\n")
}

fn minimal_table(v4: bool, extra: &str) -> String {
    let guard = if v4 { docker_dns_guard(&[0]) } else { String::new() };
    format!(
        "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT DROP [0:0]\n{guard}-A OUTPUT -o lo -j ACCEPT\n{extra}{}COMMIT\n",
        rejects(v4)
    )
}

/// Before loopback's general accept: Docker's embedded resolver (a loopback address
/// that forwards queries out) is for `uids` only, and only dockerd (root) answers from
/// its address: the agent may bind `127.0.0.11:53` itself (Docker's resolver listens on
/// another port behind a DNAT) and would otherwise forge answers to the proxy's queries.
fn docker_dns_guard(uids: &[u32]) -> String {
    let mut rules = String::new();
    let _ = writeln!(rules, "-A OUTPUT -s {DOCKER_DNS} -m owner --uid-owner 0 -j ACCEPT");
    let _ = writeln!(rules, "-A OUTPUT -s {DOCKER_DNS} -j REJECT --reject-with icmp-admin-prohibited");
    for uid in uids {
        let _ = writeln!(rules, "-A OUTPUT -d {DOCKER_DNS} -m owner --uid-owner {uid} -j ACCEPT");
    }
    let _ = writeln!(rules, "-A OUTPUT -d {DOCKER_DNS} -p tcp -j REJECT --reject-with tcp-reset");
    let _ = writeln!(rules, "-A OUTPUT -d {DOCKER_DNS} -j REJECT --reject-with icmp-admin-prohibited");
    rules
}

fn allowlist_table(upstream: &[IpAddr], net_uid: u32, v4: bool) -> String {
    let mut rules = String::from("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT DROP [0:0]\n");
    if v4 {
        rules.push_str(&docker_dns_guard(&[0, net_uid]));
    }
    rules.push_str("-A OUTPUT -o lo -j ACCEPT\n");
    rules.push_str(REPLIES);
    if !v4 {
        // Neighbour discovery: without it no IPv6 address on the link answers at all.
        for icmp in ["router-solicitation", "neighbour-solicitation", "neighbour-advertisement"] {
            let _ = writeln!(rules, "-A OUTPUT -p ipv6-icmp --icmpv6-type {icmp} -j ACCEPT");
        }
    }
    if v4 && upstream.contains(&DOCKER_DNS) {
        // The embedded resolver forwards to the engine's upstream servers through
        // sockets of dockerd (uid 0), inside this namespace; the agent is never uid 0.
        for proto in ["udp", "tcp"] {
            let _ = writeln!(rules, "-A OUTPUT -p {proto} --dport 53 -m owner --uid-owner 0 -j ACCEPT");
        }
    }
    // The proxy goes where its policy lets it (names, ports, private ranges), its DNS
    // servers included.
    let _ = writeln!(rules, "-A OUTPUT -m owner --uid-owner {net_uid} -j ACCEPT");
    rules.push_str(&rejects(v4));
    rules.push_str("COMMIT\n");
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlist_lets_only_the_proxy_out_and_keeps_the_embedded_resolver_from_the_agent() {
        let (v4, v6) = plan(Network::Allowlist, &[DOCKER_DNS], 990);
        assert_eq!(
            v4,
            "*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT DROP [0:0]
-A OUTPUT -s 127.0.0.11 -m owner --uid-owner 0 -j ACCEPT
-A OUTPUT -s 127.0.0.11 -j REJECT --reject-with icmp-admin-prohibited
-A OUTPUT -d 127.0.0.11 -m owner --uid-owner 0 -j ACCEPT
-A OUTPUT -d 127.0.0.11 -m owner --uid-owner 990 -j ACCEPT
-A OUTPUT -d 127.0.0.11 -p tcp -j REJECT --reject-with tcp-reset
-A OUTPUT -d 127.0.0.11 -j REJECT --reject-with icmp-admin-prohibited
-A OUTPUT -o lo -j ACCEPT
-A OUTPUT -m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY -j ACCEPT
-A OUTPUT -p udp --dport 53 -m owner --uid-owner 0 -j ACCEPT
-A OUTPUT -p tcp --dport 53 -m owner --uid-owner 0 -j ACCEPT
-A OUTPUT -m owner --uid-owner 990 -j ACCEPT
-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset
-A OUTPUT -j REJECT --reject-with icmp-admin-prohibited
COMMIT
"
        );
        assert_eq!(
            v6,
            "*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT DROP [0:0]
-A OUTPUT -o lo -j ACCEPT
-A OUTPUT -m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY -j ACCEPT
-A OUTPUT -p ipv6-icmp --icmpv6-type router-solicitation -j ACCEPT
-A OUTPUT -p ipv6-icmp --icmpv6-type neighbour-solicitation -j ACCEPT
-A OUTPUT -p ipv6-icmp --icmpv6-type neighbour-advertisement -j ACCEPT
-A OUTPUT -m owner --uid-owner 990 -j ACCEPT
-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset
-A OUTPUT -j REJECT --reject-with icmp6-adm-prohibited
COMMIT
"
        );
        // Without the embedded resolver, root's DNS has no exception.
        let (v4, _) = plan(Network::Allowlist, &["10.0.0.2".parse().expect("ip")], 990);
        assert!(!v4.contains("--dport 53"), "{v4}");
    }

    #[test]
    fn on_is_open_off_is_closed_and_starting_adds_only_root() {
        let (v4, v6) = plan(Network::On, &[], 990);
        assert_eq!(v4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n");
        assert_eq!(v4, v6);
        assert_eq!(plan(Network::Off, &[], 990), closed_tables());
        let (v4, v6) = closed_tables();
        assert_eq!(
            v4,
            "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT DROP [0:0]\n\
             -A OUTPUT -s 127.0.0.11 -m owner --uid-owner 0 -j ACCEPT\n\
             -A OUTPUT -s 127.0.0.11 -j REJECT --reject-with icmp-admin-prohibited\n\
             -A OUTPUT -d 127.0.0.11 -m owner --uid-owner 0 -j ACCEPT\n\
             -A OUTPUT -d 127.0.0.11 -p tcp -j REJECT --reject-with tcp-reset\n\
             -A OUTPUT -d 127.0.0.11 -j REJECT --reject-with icmp-admin-prohibited\n-A OUTPUT -o lo -j ACCEPT\n\
             -A OUTPUT -p tcp -j REJECT --reject-with tcp-reset\n-A OUTPUT -j REJECT --reject-with icmp-admin-prohibited\nCOMMIT\n"
        );
        assert!(v6.ends_with("-A OUTPUT -j REJECT --reject-with icmp6-adm-prohibited\nCOMMIT\n"), "{v6}");
        let (start4, _) = starting_tables();
        assert_eq!(
            start4.replace(
                "-A OUTPUT -m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY -j ACCEPT\n-A OUTPUT -m owner --uid-owner 0 -j ACCEPT\n",
                ""
            ),
            v4
        );
    }
}
