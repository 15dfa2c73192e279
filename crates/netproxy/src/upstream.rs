//! A minimal DNS client (A and AAAA over UDP) for the proxy in a container, where
//! `/etc/resolv.conf` names the filtering resolver the agent must use, so the proxy's
//! own lookups cannot go through the C library (they would come back to that resolver).
//! It asks the servers the container had before (`ProxyConfig::upstream`), one after
//! the other, and reads only the address records of an answer to its own question.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket},
    time::{Duration, Instant},
};

pub const TYPE_A: u16 = 1;
pub const TYPE_AAAA: u16 = 28;
const TIMEOUT: Duration = Duration::from_secs(2);

/// The addresses of `name` (IPv4 first), from the first of `servers` that answers.
pub fn lookup(name: &str, servers: &[SocketAddr]) -> Result<Vec<IpAddr>, String> {
    let mut last = String::from("no DNS server configured");
    for server in servers {
        let mut addrs = Vec::new();
        let mut answered = false;
        for qtype in [TYPE_A, TYPE_AAAA] {
            match ask(name, qtype, *server) {
                Ok(found) => {
                    answered = true;
                    addrs.extend(found);
                }
                Err(err) => last = format!("{server}: {err}"),
            }
        }
        if answered {
            return if addrs.is_empty() { Err(format!("{name}: no address")) } else { Ok(addrs) };
        }
    }
    Err(last)
}

/// One question (`qtype`: 1 for A, 28 for AAAA) to `server`: its address records, none
/// for a name that does not exist.
pub fn ask(name: &str, qtype: u16, server: SocketAddr) -> Result<Vec<IpAddr>, String> {
    let bind: SocketAddr = if server.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { (Ipv6Addr::UNSPECIFIED, 0).into() };
    let socket = UdpSocket::bind(bind).map_err(|err| err.to_string())?;
    socket.connect(server).map_err(|err| err.to_string())?;
    socket.set_read_timeout(Some(TIMEOUT)).map_err(|err| err.to_string())?;
    let id = query_id();
    let query = encode_query(id, name, qtype).ok_or_else(|| format!("{name:?} is not a host name"))?;
    let question = &query[12..query.len() - OPT.len()];
    for _ in 0..2 {
        socket.send(&query).map_err(|err| err.to_string())?;
        // One deadline per attempt: packets that are not the answer do not extend it.
        let deadline = Instant::now() + TIMEOUT;
        let mut packet = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            socket.set_read_timeout(Some(left)).map_err(|err| err.to_string())?;
            match socket.recv(&mut packet) {
                Ok(len) => match parse_answer(&packet[..len], id, question) {
                    Some(answer) => return answer,
                    None => continue, // not the answer to this question: keep waiting
                },
                Err(err) if matches!(err.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    break
                }
                Err(err) => return Err(err.to_string()),
            }
        }
    }
    Err("no answer".into())
}

/// EDNS0 (RFC 6891): answers up to 1232 bytes come over UDP whole, not truncated.
const OPT: [u8; 11] = [0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0];

fn query_id() -> u16 {
    let mut id = [0u8; 2];
    // SAFETY: getrandom writes at most the two bytes of the buffer it is given.
    let got = unsafe { libc::getrandom(id.as_mut_ptr().cast(), 2, 0) };
    if got == 2 {
        u16::from_ne_bytes(id)
    } else {
        std::process::id() as u16
    }
}

/// A recursive query for `name` (`None`: not a host name).
pub(crate) fn encode_query(id: u16, name: &str, qtype: u16) -> Option<Vec<u8>> {
    let name = name.trim_end_matches('.');
    if name.is_empty() || name.len() > 253 {
        return None;
    }
    let mut packet = Vec::with_capacity(18 + name.len());
    packet.extend_from_slice(&id.to_be_bytes());
    packet.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1]); // RD; one question, the OPT record
    for label in name.split('.') {
        if label.is_empty()
            || label.len() > 63
            || !label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return None;
        }
        packet.push(label.len() as u8);
        packet.extend_from_slice(label.as_bytes());
    }
    packet.push(0);
    packet.extend_from_slice(&qtype.to_be_bytes());
    packet.extend_from_slice(&1u16.to_be_bytes());
    packet.extend_from_slice(&OPT);
    Some(packet)
}

/// Reads an answer to the query whose question section is `question`: `None` when the
/// packet is not that answer (another id, not a response, another question),
/// `Some(Err)` for a server's error, else the A and AAAA records (a name that does not
/// exist, or has no record of the type: none).
pub(crate) fn parse_answer(packet: &[u8], id: u16, question: &[u8]) -> Option<Result<Vec<IpAddr>, String>> {
    if packet.len() < 12 || u16::from_be_bytes([packet[0], packet[1]]) != id || packet[2] & 0x80 == 0 {
        return None;
    }
    let qdcount = u16::from_be_bytes([packet[4], packet[5]]);
    if qdcount != 1 || !packet[12..].starts_with(question) {
        return None;
    }
    match packet[3] & 0x0f {
        0 => {}
        3 => return Some(Ok(Vec::new())), // NXDOMAIN
        rcode => return Some(Err(format!("the server answered with error {rcode}"))),
    }
    if packet[2] & 0x02 != 0 {
        return Some(Err("the answer was truncated".into()));
    }
    let ancount = u16::from_be_bytes([packet[6], packet[7]]);
    let mut at = 12 + question.len();
    let mut addrs = Vec::new();
    for _ in 0..ancount {
        at = skip_name(packet, at)?;
        let fixed = packet.get(at..at + 10)?;
        let rtype = u16::from_be_bytes([fixed[0], fixed[1]]);
        let class = u16::from_be_bytes([fixed[2], fixed[3]]);
        let len = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
        let data = packet.get(at + 10..at + 10 + len)?;
        at += 10 + len;
        if class != 1 {
            continue;
        }
        match (rtype, len) {
            (TYPE_A, 4) => addrs.push(IpAddr::V4(Ipv4Addr::new(data[0], data[1], data[2], data[3]))),
            (TYPE_AAAA, 16) => {
                let octets: [u8; 16] = data.try_into().ok()?;
                addrs.push(IpAddr::V6(Ipv6Addr::from(octets)));
            }
            _ => {} // CNAME and the rest: the address records follow them
        }
    }
    Some(Ok(addrs))
}

/// The offset after the name at `at` (labels, ending in a zero or a pointer).
fn skip_name(packet: &[u8], mut at: usize) -> Option<usize> {
    for _ in 0..128 {
        let len = *packet.get(at)?;
        match len {
            0 => return Some(at + 1),
            len if len & 0xc0 == 0xc0 => {
                packet.get(at + 1)?;
                return Some(at + 2);
            }
            len if len & 0xc0 == 0 => at += 1 + usize::from(len),
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(id: u16, question: &[u8], flags: [u8; 2], records: &[(&[u8], u16, &[u8])]) -> Vec<u8> {
        let mut packet = id.to_be_bytes().to_vec();
        packet.extend_from_slice(&flags);
        packet.extend_from_slice(&[0, 1, 0, records.len() as u8, 0, 0, 0, 0]);
        packet.extend_from_slice(question);
        for (name, rtype, data) in records {
            packet.extend_from_slice(name);
            packet.extend_from_slice(&rtype.to_be_bytes());
            packet.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
            packet.extend_from_slice(&(data.len() as u16).to_be_bytes());
            packet.extend_from_slice(data);
        }
        packet
    }

    #[test]
    fn a_query_is_one_recursive_question() {
        assert_eq!(
            encode_query(0x1234, "api.example.com.", TYPE_A).expect("valid"),
            b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x01\x03api\x07example\x03com\x00\x00\x01\x00\x01\
              \x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00"
        );
        for bad in ["", "a..b", "a b", &"x".repeat(64), &format!("{}.com", "a.".repeat(130))] {
            assert_eq!(encode_query(1, bad, TYPE_A), None, "{bad:?}");
        }
    }

    #[test]
    fn answers_give_their_address_records_and_nothing_else_is_taken() {
        let query = encode_query(7, "a.test", TYPE_A).expect("valid");
        let question = &query[12..query.len() - OPT.len()];
        let pointer: &[u8] = b"\xc0\x0c";
        let cname = answer(
            7,
            question,
            [0x81, 0x80],
            &[
                (pointer, 5, b"\x01b\x04test\x00"),
                (b"\x01b\x04test\x00", TYPE_A, &[10, 0, 0, 1]),
                (pointer, TYPE_AAAA, &[0xfd; 16]),
                (pointer, TYPE_A, &[1, 2, 3]), // a malformed A: skipped
            ],
        );
        let got = parse_answer(&cname, 7, question).expect("the answer").expect("addresses");
        assert_eq!(got, ["10.0.0.1".parse::<IpAddr>().expect("ip"), IpAddr::V6(Ipv6Addr::from([0xfd; 16]))]);
        // Not the answer to this question: another id, a query, another question.
        assert_eq!(parse_answer(&cname, 8, question), None);
        let mut not_response = cname.clone();
        not_response[2] &= 0x7f;
        assert_eq!(parse_answer(&not_response, 7, question), None);
        let other = encode_query(7, "c.test", TYPE_A).expect("valid");
        assert_eq!(parse_answer(&cname, 7, &other[12..other.len() - OPT.len()]), None);
        // NXDOMAIN: no address; SERVFAIL and truncation: errors.
        assert_eq!(parse_answer(&answer(7, question, [0x81, 0x83], &[]), 7, question), Some(Ok(vec![])));
        assert!(parse_answer(&answer(7, question, [0x81, 0x82], &[]), 7, question).expect("answer").is_err());
        assert!(parse_answer(&answer(7, question, [0x83, 0x80], &[]), 7, question).expect("answer").is_err());
        // Cut short anywhere: never a panic, never an answer (the header promises
        // records that are not all there).
        for len in 0..cname.len() {
            assert_eq!(parse_answer(&cname[..len], 7, question), None, "{len}");
        }
        // A name of more labels than any name has, never ending: no answer, no hang.
        let endless: Vec<u8> = std::iter::repeat_n([1u8, b'a'], 200).flatten().collect();
        let looping = answer(7, question, [0x81, 0x80], &[(&endless, TYPE_A, &[1, 1, 1, 1])]);
        assert_eq!(parse_answer(&looping, 7, question), None);
    }

    #[test]
    fn a_lookup_asks_the_server_and_reads_its_answer() {
        let server = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let addr = server.local_addr().expect("addr");
        let thread = std::thread::spawn(move || {
            for _ in 0..2 {
                let mut packet = [0u8; 512];
                let (len, peer) = server.recv_from(&mut packet).expect("query");
                let question = &packet[12..len - OPT.len()];
                let qtype = u16::from_be_bytes([question[question.len() - 4], question[question.len() - 3]]);
                let id = u16::from_be_bytes([packet[0], packet[1]]);
                // Junk first (another id): it neither answers nor ends the wait.
                server.send_to(&answer(id ^ 1, question, [0x81, 0x80], &[]), peer).expect("junk");
                let reply = if qtype == TYPE_A {
                    answer(id, question, [0x81, 0x80], &[(b"\xc0\x0c", TYPE_A, &[10, 1, 2, 3])])
                } else {
                    answer(id, question, [0x81, 0x80], &[])
                };
                server.send_to(&reply, peer).expect("reply");
            }
        });
        assert_eq!(lookup("allowed.test", &[addr]), Ok(vec!["10.1.2.3".parse::<IpAddr>().expect("ip")]));
        thread.join().expect("server");
    }
}
