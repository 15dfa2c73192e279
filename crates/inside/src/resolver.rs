//! The resolver the bridge runs inside the sandbox's network namespace, for programs
//! that ignore the proxy variables (Go binaries, raw sockets, `curl --noproxy`, Node's
//! `fetch`): `/etc/resolv.conf` names it (`runtime_layout::RESOLVER`, UDP port 53).
//!
//! For a name it has not seen, it asks the host's proxy (`RESOLVE name` on the proxy's
//! socket), which answers with the ports `NetPolicy::allowed_ports` gives the name, or
//! refuses it; nothing here decides. An allowed name gets its own loopback address
//! (`127.77.x.y`, the same for the whole session) and a listener on that address for
//! each of its ports, handed to the proxy like the bridge's others (`LISTEN name:port`),
//! so a connection to the address becomes a connection to the name through the proxy,
//! which checks the name, the port and the address it resolves to, as for `CONNECT`.
//! No query ever leaves the namespace: a refused name is `NXDOMAIN`, `AAAA` of an
//! allowed name is no data (the names get IPv4 loopback addresses only), and every
//! other type or class is refused.

use std::{
    collections::{HashMap, HashSet},
    io::{Read, Write},
    net::{Ipv4Addr, TcpListener, UdpSocket},
    os::unix::net::UnixStream,
};

use runtime_layout::{RuntimeLayout, NAME_RANGE};

use crate::dns::{self, Answer, Query};

/// Names given an address in one session; past this, new names get `SERVFAIL` (the
/// proxy has its own limit on listeners).
const MAX_NAMES: usize = 4096;
/// Refused names remembered (so the proxy is asked, and the refusal audited, once per
/// name); the memory is emptied when it is full.
const MAX_REFUSED: usize = 16_384;

/// The names seen so far.
#[derive(Default)]
pub struct Resolver {
    allowed: HashMap<String, Ipv4Addr>,
    refused: HashSet<String>,
}

/// Answers queries on `socket` for as long as the bridge runs.
pub fn serve(socket: UdpSocket) {
    let mut resolver = Resolver::default();
    let mut packet = [0u8; 1500];
    loop {
        let Ok((len, peer)) = socket.recv_from(&mut packet) else {
            // Not a busy loop if the socket keeps failing.
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        };
        let reply = match dns::parse_query(&packet[..len]) {
            Ok(query) => Some(dns::response(&query, resolver.answer(&query))),
            Err(malformed) => dns::error_response(&packet[..len], malformed),
        };
        if let Some(reply) = reply {
            let _ = socket.send_to(&reply, peer);
        }
    }
}

impl Resolver {
    fn answer(&mut self, query: &Query) -> Answer {
        if query.qclass != dns::CLASS_IN || ![dns::TYPE_A, dns::TYPE_AAAA].contains(&query.qtype) {
            return Answer::Refused;
        }
        let Some(name) = query.host_name() else { return Answer::NxDomain };
        let addr = match self.allowed.get(&name) {
            Some(addr) => *addr,
            None if self.refused.contains(&name) => return Answer::NxDomain,
            None => match self.admit(&name) {
                Ok(Some(addr)) => addr,
                Ok(None) => return Answer::NxDomain,
                Err(err) => {
                    eprintln!("agent-sandbox: network: cannot give {name} an address inside the sandbox: {err}");
                    return Answer::ServFail;
                }
            },
        };
        if query.qtype == dns::TYPE_A {
            Answer::Address(addr)
        } else {
            Answer::NoData
        }
    }

    /// Asks the proxy about `name`; for an allowed one, takes its address and hands its
    /// listeners over. `Ok(None)`: refused.
    fn admit(&mut self, name: &str) -> Result<Option<Ipv4Addr>, String> {
        let ports = match ask_proxy(name)? {
            Some(ports) if !ports.is_empty() => ports,
            _ => {
                if self.refused.len() >= MAX_REFUSED {
                    self.refused.clear();
                }
                self.refused.insert(name.to_owned());
                return Ok(None);
            }
        };
        if self.allowed.len() >= MAX_NAMES {
            return Err(format!("more than {MAX_NAMES} names in one session"));
        }
        let addr = address(self.allowed.len());
        let mut listeners = Vec::new();
        for port in ports {
            let listener =
                TcpListener::bind((addr, port)).map_err(|err| format!("listening on {addr}:{port}: {err}"))?;
            listeners.push((listener, format!("{name}:{port}")));
        }
        crate::handover::hand_over(&listeners)?;
        self.allowed.insert(name.to_owned(), addr);
        Ok(Some(addr))
    }
}

/// The `index`-th name's address: `127.77.0.1`, `127.77.0.2`, …, skipping the `.0` and
/// `.255` of each block of 256.
pub fn address(index: usize) -> Ipv4Addr {
    let [a, b] = NAME_RANGE;
    let (high, low) = (index / 254, index % 254 + 1);
    Ipv4Addr::new(a, b, u8::try_from(high).unwrap_or(u8::MAX), low as u8)
}

/// `RESOLVE name` on the proxy's socket: `Some(ports)` when the name is allowed on
/// them, `None` when it is refused (the proxy audits why).
fn ask_proxy(name: &str) -> Result<Option<Vec<u16>>, String> {
    let mut proxy = UnixStream::connect(RuntimeLayout::inside().net_socket()).map_err(|err| err.to_string())?;
    proxy.write_all(format!("RESOLVE {name} HTTP/1.1\r\n\r\n").as_bytes()).map_err(|err| err.to_string())?;
    let mut head = String::new();
    let _ = (&mut proxy).take(64 * 1024).read_to_string(&mut head);
    if head.starts_with("HTTP/1.1 403") {
        return Ok(None);
    }
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("the proxy answered {:?}", head.lines().next().unwrap_or_default()));
    }
    let ports = head
        .lines()
        .find_map(|line| line.strip_prefix(PORTS_HEADER))
        .unwrap_or_default()
        .split(' ')
        .filter_map(|port| port.parse().ok())
        .collect();
    Ok(Some(ports))
}

/// The header the proxy lists a name's ports in (as `crates/netproxy` writes it: this
/// crate does not depend on the host's).
const PORTS_HEADER: &str = "X-Allowed-Ports: ";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_one_per_name_and_never_a_block_edge() {
        assert_eq!(address(0), Ipv4Addr::new(127, 77, 0, 1));
        assert_eq!(address(253), Ipv4Addr::new(127, 77, 0, 254));
        assert_eq!(address(254), Ipv4Addr::new(127, 77, 1, 1));
        assert_eq!(address(MAX_NAMES - 1), Ipv4Addr::new(127, 77, 16, 32));
        let all: HashSet<Ipv4Addr> = (0..MAX_NAMES).map(address).collect();
        assert_eq!(all.len(), MAX_NAMES);
    }
}
