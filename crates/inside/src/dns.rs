//! The DNS messages the resolver inside the sandbox reads and writes (RFC 1035), and no
//! more: a query with one question, and the four answers it gives (an IPv4 address, no
//! data, no such name, refused), plus format errors. Every packet comes from the agent,
//! so parsing is total (any bytes give a value or an error, never a panic; fuzzed by the
//! `dns` target in `fuzz/`, whose `fuzz_one` CI also runs) and reads nothing beyond what
//! it checked. Written here rather than taken from a crate: the resolver needs the
//! question and four answer shapes, a few dozen lines, where a DNS library brings a
//! whole protocol's surface (compression, every record type, EDNS) into code that parses
//! hostile input.

use std::net::Ipv4Addr;

/// Record types and the class the resolver knows.
pub const TYPE_A: u16 = 1;
pub const TYPE_AAAA: u16 = 28;
pub const CLASS_IN: u16 = 1;

/// The longest name on the wire (RFC 1035 2.3.4), length octets included.
const MAX_NAME: usize = 255;
const HEADER: usize = 12;

/// A standard query with one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub id: u16,
    /// Recursion desired: echoed in the answer.
    pub recursion_desired: bool,
    /// The name's labels as sent (not yet checked to be a host name).
    pub labels: Vec<Vec<u8>>,
    pub qtype: u16,
    pub qclass: u16,
}

/// Why a packet is not a query the resolver answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Shorter than a header: nothing to answer.
    NoHeader,
    /// A response, not a query: never answered (no loops between resolvers).
    NotAQuery,
    /// Readable header, unreadable or unsupported rest: answered with this code.
    Rcode(Rcode),
}

/// Response codes (RFC 1035 4.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rcode {
    NoError = 0,
    FormErr = 1,
    ServFail = 2,
    NxDomain = 3,
    NotImp = 4,
    Refused = 5,
}

/// What the resolver says to one query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The name's address (for type A).
    Address(Ipv4Addr),
    /// The name exists, with no record of this type (`NOERROR`, no answer).
    NoData,
    /// No such name, no record of any type.
    NxDomain,
    /// The resolver will not answer this (another class or type).
    Refused,
    /// The resolver could not answer (out of addresses, the proxy unreachable).
    ServFail,
}

/// Reads a query: the header, one question, and nothing checked after it (EDNS's OPT
/// record in the additional section is ignored, as an answer without one is valid).
pub fn parse_query(packet: &[u8]) -> Result<Query, Malformed> {
    if packet.len() < HEADER {
        return Err(Malformed::NoHeader);
    }
    let word = |at: usize| u16::from_be_bytes([packet[at], packet[at + 1]]);
    let id = word(0);
    let flags = word(2);
    if flags & 0x8000 != 0 {
        return Err(Malformed::NotAQuery);
    }
    if (flags >> 11) & 0xf != 0 {
        return Err(Malformed::Rcode(Rcode::NotImp));
    }
    let (questions, answers, authorities) = (word(4), word(6), word(8));
    if questions != 1 || answers != 0 || authorities != 0 {
        return Err(Malformed::Rcode(Rcode::FormErr));
    }
    let mut at = HEADER;
    let mut labels = Vec::new();
    let mut wire_len = 1;
    loop {
        let Some(&len) = packet.get(at) else { return Err(Malformed::Rcode(Rcode::FormErr)) };
        at += 1;
        if len == 0 {
            break;
        }
        // 0b11: a compression pointer, 0b01 and 0b10: reserved label types; a query's
        // one name has no earlier name to point to.
        if len & 0xc0 != 0 {
            return Err(Malformed::Rcode(Rcode::FormErr));
        }
        let len = usize::from(len);
        wire_len += len + 1;
        let Some(label) = packet.get(at..at + len).filter(|_| wire_len <= MAX_NAME) else {
            return Err(Malformed::Rcode(Rcode::FormErr));
        };
        labels.push(label.to_vec());
        at += len;
    }
    let Some(tail) = packet.get(at..at + 4) else { return Err(Malformed::Rcode(Rcode::FormErr)) };
    Ok(Query {
        id,
        recursion_desired: flags & 0x0100 != 0,
        labels,
        qtype: u16::from_be_bytes([tail[0], tail[1]]),
        qclass: u16::from_be_bytes([tail[2], tail[3]]),
    })
}

impl Query {
    /// The name, lowercase, without the root's dot, when every label is made of letters,
    /// digits, `-` and `_` (what `policy::network` can call a host name); `None`
    /// otherwise, which the resolver answers as a name that does not exist.
    pub fn host_name(&self) -> Option<String> {
        if self.labels.is_empty() {
            return None;
        }
        let ok = |label: &Vec<u8>| label.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_');
        if !self.labels.iter().all(ok) {
            return None;
        }
        let labels: Vec<String> =
            self.labels.iter().map(|label| String::from_utf8_lossy(label).to_ascii_lowercase()).collect();
        Some(labels.join("."))
    }
}

/// The response to `query`: its id and question echoed, authoritative, recursion
/// available, and the answer.
pub fn response(query: &Query, answer: Answer) -> Vec<u8> {
    let rcode = match answer {
        Answer::Address(_) | Answer::NoData => Rcode::NoError,
        Answer::NxDomain => Rcode::NxDomain,
        Answer::Refused => Rcode::Refused,
        Answer::ServFail => Rcode::ServFail,
    };
    let answers = u16::from(matches!(answer, Answer::Address(_)));
    let mut out = header(query.id, query.recursion_desired, rcode, 1, answers);
    for label in &query.labels {
        // parse_query took labels of at most 63 bytes.
        out.push(label.len() as u8);
        out.extend_from_slice(label);
    }
    out.push(0);
    out.extend_from_slice(&query.qtype.to_be_bytes());
    out.extend_from_slice(&query.qclass.to_be_bytes());
    if let Answer::Address(addr) = answer {
        // The name as a pointer to the question's (offset 12), type A, class IN, a TTL
        // of five minutes (the address stays the name's for the whole session), and
        // the four octets.
        out.extend_from_slice(&[0xc0, 0x0c]);
        out.extend_from_slice(&TYPE_A.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&300u32.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&addr.octets());
    }
    out
}

/// The answer to a packet [`parse_query`] refused with [`Malformed::Rcode`]: the header
/// alone, with the packet's id; `None` for packets that get no answer.
pub fn error_response(packet: &[u8], malformed: Malformed) -> Option<Vec<u8>> {
    let Malformed::Rcode(rcode) = malformed else { return None };
    let id = u16::from_be_bytes([*packet.first()?, *packet.get(1)?]);
    let recursion_desired = packet.get(2).is_some_and(|flags| flags & 1 != 0);
    Some(header(id, recursion_desired, rcode, 0, 0))
}

fn header(id: u16, recursion_desired: bool, rcode: Rcode, questions: u16, answers: u16) -> Vec<u8> {
    // QR (a response), AA (the only DNS there is inside), RD as asked, RA.
    let recursion: u16 = if recursion_desired { 0x0100 } else { 0 };
    let flags: u16 = 0x8000 | 0x0400 | recursion | 0x0080 | rcode as u16;
    let mut out = Vec::with_capacity(64);
    for value in [id, flags, questions, answers, 0, 0] {
        out.extend_from_slice(&value.to_be_bytes());
    }
    out
}

/// One fuzzing step, shared by the `dns` target in `fuzz/` and the CI test
/// (`tests/fuzz_dns.rs`): any bytes parse to a query or an error without panicking; a
/// parsed query's every response echoes its id and question, fits one UDP packet, and
/// reads back as a response; an error response, when there is one, is a bare header
/// with the packet's id.
pub fn fuzz_one(packet: &[u8]) {
    match parse_query(packet) {
        Ok(query) => {
            let name_len: usize = query.labels.iter().map(|label| label.len() + 1).sum::<usize>() + 1;
            assert!(name_len <= MAX_NAME, "a name longer than DNS allows was accepted");
            assert!(query.labels.iter().all(|label| !label.is_empty() && label.len() <= 63));
            if let Some(name) = query.host_name() {
                assert!(!name.is_empty() && name.len() < MAX_NAME && name.is_ascii());
            }
            for answer in [
                Answer::Address(Ipv4Addr::new(127, 77, 0, 1)),
                Answer::NoData,
                Answer::NxDomain,
                Answer::Refused,
                Answer::ServFail,
            ] {
                let out = response(&query, answer);
                assert!(out.len() <= 512, "a response larger than a UDP DNS message");
                assert_eq!(&out[..2], &query.id.to_be_bytes());
                assert_eq!(out[2] & 0x80, 0x80, "not marked as a response");
                assert_eq!(parse_query(&out), Err(Malformed::NotAQuery), "a response must never read as a query");
                // The question section is the query's, re-encoded.
                let mut echoed = out[HEADER..].to_vec();
                echoed.truncate(name_len + 4);
                let mut as_query = header(query.id, false, Rcode::NoError, 1, 0);
                as_query[2] = 0;
                as_query[3] = 0;
                as_query.extend_from_slice(&echoed);
                let again = parse_query(&as_query).expect("the echoed question parses");
                assert_eq!(
                    (again.labels, again.qtype, again.qclass),
                    (query.labels.clone(), query.qtype, query.qclass)
                );
            }
        }
        Err(malformed) => {
            if let Some(out) = error_response(packet, malformed) {
                assert_eq!(out.len(), HEADER);
                assert_eq!(&out[..2], &packet[..2]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `dig allowed.test A` sends (with EDNS), as bytes.
    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut packet = vec![0x12, 0x34, 0x01, 0x20, 0, 1, 0, 0, 0, 0, 0, 1];
        for label in name.split('.') {
            packet.push(label.len() as u8);
            packet.extend_from_slice(label.as_bytes());
        }
        packet.push(0);
        packet.extend_from_slice(&qtype.to_be_bytes());
        packet.extend_from_slice(&CLASS_IN.to_be_bytes());
        // EDNS OPT: root name, type 41, payload 1232, no options.
        packet.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
        packet
    }

    #[test]
    fn a_query_is_read_and_answered_with_one_address() {
        let parsed = parse_query(&query("Allowed.Test", TYPE_A)).expect("a query");
        assert_eq!(parsed.id, 0x1234);
        assert!(parsed.recursion_desired);
        assert_eq!(parsed.host_name().as_deref(), Some("allowed.test"));
        let out = response(&parsed, Answer::Address(Ipv4Addr::new(127, 77, 0, 1)));
        let mut expected = vec![0x12, 0x34, 0x85, 0x80, 0, 1, 0, 1, 0, 0, 0, 0];
        expected.extend_from_slice(b"\x07Allowed\x04Test\x00\x00\x01\x00\x01");
        expected.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 1, 0x2c, 0, 4, 127, 77, 0, 1]);
        assert_eq!(out, expected);
    }

    #[test]
    fn refusals_carry_only_the_code() {
        let parsed = parse_query(&query("evil.test", TYPE_AAAA)).expect("a query");
        for (answer, rcode) in [(Answer::NoData, 0), (Answer::NxDomain, 3), (Answer::Refused, 5), (Answer::ServFail, 2)]
        {
            let out = response(&parsed, answer);
            assert_eq!(out[3] & 0x0f, rcode, "{answer:?}");
            assert_eq!(&out[6..8], &[0, 0], "{answer:?}: no answer record");
            assert_eq!(out.len(), 12 + 11 + 4, "{answer:?}");
        }
    }

    #[test]
    fn hostile_packets_are_refused_without_reading_past_them() {
        let mut pointer = query("a.test", TYPE_A);
        pointer[12] = 0xc0;
        let mut long = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        for _ in 0..5 {
            long.push(63);
            long.extend_from_slice(&[b'a'; 63]);
        }
        long.extend_from_slice(&[0, 0, 1, 0, 1]);
        let mut two_questions = query("a.test", TYPE_A);
        two_questions[5] = 2;
        let mut response_bit = query("a.test", TYPE_A);
        response_bit[2] |= 0x80;
        let mut opcode = query("a.test", TYPE_A);
        opcode[2] |= 0x10;
        let truncated = query("a.test", TYPE_A)[..20].to_vec();
        let cases: &[(&[u8], Malformed)] = &[
            (b"", Malformed::NoHeader),
            (b"\x00\x01\x00", Malformed::NoHeader),
            (&pointer, Malformed::Rcode(Rcode::FormErr)),
            (&long, Malformed::Rcode(Rcode::FormErr)),
            (&two_questions, Malformed::Rcode(Rcode::FormErr)),
            (&response_bit, Malformed::NotAQuery),
            (&opcode, Malformed::Rcode(Rcode::NotImp)),
            (&truncated, Malformed::Rcode(Rcode::FormErr)),
        ];
        for (packet, expected) in cases {
            assert_eq!(parse_query(packet), Err(*expected), "{packet:?}");
            fuzz_one(packet);
        }
        assert_eq!(
            error_response(&pointer, Malformed::Rcode(Rcode::FormErr)),
            Some(header(0x1234, true, Rcode::FormErr, 0, 0))
        );
        assert_eq!(error_response(&response_bit, Malformed::NotAQuery), None);
    }

    #[test]
    fn names_that_are_not_host_names_have_none() {
        let cases: &[(&[&[u8]], Option<&str>)] = &[
            (&[b"a", b"test"], Some("a.test")),
            (&[b"_dmarc", b"x-y", b"test"], Some("_dmarc.x-y.test")),
            (&[], None),
            (&[b"a b", b"test"], None),
            (&[b"a.b", b"test"], None),
            (&[b"\xc3\xa9", b"test"], None),
            (&[b"a\0", b"test"], None),
        ];
        for (labels, expected) in cases {
            let query = Query {
                id: 0,
                recursion_desired: false,
                labels: labels.iter().map(|label| label.to_vec()).collect(),
                qtype: TYPE_A,
                qclass: CLASS_IN,
            };
            assert_eq!(query.host_name().as_deref(), *expected, "{labels:?}");
        }
    }
}
