//! The proxy against real loopback servers: each allowed form beside the refused ones.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpListener,
    os::unix::net::{UnixListener, UnixStream},
};

use config::{defaults, merge, parse_layer, LayerKind};

use super::*;

/// A server on 127.0.0.1 that answers each connection with what it read first, echoed
/// after `HELLO `; returns its port.
fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            thread::spawn(move || {
                let mut stream = stream;
                let mut buffer = [0u8; 4096];
                if let Ok(len) = stream.read(&mut buffer) {
                    let _ = stream.write_all(b"HELLO ");
                    let _ = stream.write_all(&buffer[..len]);
                }
            });
        }
    });
    port
}

struct Setup {
    // Dropped first, while its socket is still there.
    _proxy: Proxy,
    socket: PathBuf,
    audit: PathBuf,
    _dir: tempfile::TempDir,
}

fn setup(network: &str) -> Setup {
    setup_with(network, MAX_CONNECTIONS)
}

fn setup_with(network: &str, max_connections: usize) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("net.sock");
    let audit = dir.path().join("audit.jsonl");
    let layer = parse_layer(network, std::path::Path::new("/c.jsonc"), LayerKind::Project).expect("config");
    let policy = NetPolicy::from_config(&merge(vec![defaults(), layer])).expect("policy");
    let hosts = parse_test_hosts("allowed.test=127.0.0.1,denied.test=127.0.0.1,private.test=127.0.0.1");
    let config = ProxyConfig {
        policy,
        hosts,
        audit_log: Some(audit.clone()),
        agent: "test".into(),
        max_connections,
        upstream: vec![],
        refused: Default::default(),
    };
    let listener = UnixListener::bind(&socket).expect("bind socket");
    let proxy = start(listener, socket.clone(), config);
    Setup { _proxy: proxy, socket, audit, _dir: dir }
}

fn network(port: u16) -> String {
    format!(
        r#"{{"network": {{"allow": ["allowed.test:{port}", "private.test:{port}", "denied.test:{port}"], "deny": ["denied.test"], "allowPrivate": ["127.0.0.1"], "hostPorts": [{port}]}}}}"#
    )
}

/// Sends `request`, returns the response head (status line and headers) and the rest.
fn ask(socket: &Path, request: &[u8], then: &[u8]) -> (String, String) {
    let mut stream = UnixStream::connect(socket).expect("connect");
    // A refusal may come (and the socket close) before the whole request is written.
    let _ = stream.write_all(request);
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).expect("read") == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    stream.write_all(then).expect("payload");
    let mut rest = String::new();
    let _ = reader.read_to_string(&mut rest);
    (head, rest)
}

use std::path::Path;

#[test]
fn connect_reaches_an_allowed_name_and_refuses_the_others_with_a_reason() {
    let port = echo_server();
    let setup = setup(&network(port));
    let (head, rest) = ask(&setup.socket, format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n").as_bytes(), b"ping");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(rest, "HELLO ping");
    let cases = [
        (format!("denied.test:{port}"), format!("denied.test:{port} is denied by network.deny \"denied.test\"")),
        ("allowed.test:443".to_owned(), format!("allowed.test is allowed on port {port} only, not 443")),
        (format!("127.0.0.1:{}", port + 1), format!("127.0.0.1:{}: the host's port", port + 1)),
        ("unknown.test:443".to_owned(), "unknown.test is not on the network allowlist".to_owned()),
        ("192.0.2.1:443".to_owned(), "192.0.2.1: raw IP addresses are refused".to_owned()),
    ];
    for (target, reason) in cases {
        let (head, rest) = ask(&setup.socket, format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes(), b"");
        assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{target}: {head}");
        assert!(head.contains(&format!("X-Proxy-Error: {reason}")), "{target}: {head}");
        assert!(rest.contains(&reason), "{target}: {rest}");
    }
    let log = fs_read(&setup.audit);
    assert!(log.contains(&format!("\"target\":\"allowed.test:{port}\",\"result\":\"allowed\"")), "{log}");
    assert!(log.contains("mode=connect bytes_out=4 bytes_in=10 duration_ms="), "{log}");
    assert!(log.contains(&format!("\"target\":\"denied.test:{port}\",\"result\":\"blocked\"")), "{log}");
    assert!(!log.contains("ping"), "the payload is never recorded: {log}");
}

#[test]
fn an_allowed_name_on_a_private_address_needs_allow_private() {
    let port = echo_server();
    let setup = setup(&format!(r#"{{"network": {{"allow": ["allowed.test:{port}"]}}}}"#));
    let (head, _) = ask(&setup.socket, format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n").as_bytes(), b"");
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(head.contains("X-Proxy-Error: allowed.test resolves to 127.0.0.1, a loopback address"), "{head}");
}

#[test]
fn absolute_uri_requests_are_forwarded_in_origin_form() {
    let port = echo_server();
    let setup = setup(&network(port));
    let mut stream = UnixStream::connect(&setup.socket).expect("connect");
    let request =
        format!("GET http://allowed.test:{port}/path?q=1 HTTP/1.1\r\nHost: allowed.test\r\nProxy-Connection: keep-alive\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("write");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert_eq!(answer, "HELLO GET /path?q=1 HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n");
    let (head, _) = ask(&setup.socket, b"GET http://unknown.test/ HTTP/1.1\r\n\r\n", b"");
    assert!(head.contains("X-Proxy-Error: unknown.test is not on the network allowlist"), "{head}");
}

#[test]
fn socks5_with_remote_names() {
    let port = echo_server();
    let setup = setup(&network(port));
    let socks = |host: &str| -> (u8, String) {
        let mut stream = UnixStream::connect(&setup.socket).expect("connect");
        stream.write_all(&[5, 1, 0]).expect("greeting");
        let mut reply = [0u8; 2];
        stream.read_exact(&mut reply).expect("method");
        assert_eq!(reply, [5, 0]);
        let mut request = vec![5, 1, 0, 3, u8::try_from(host.len()).expect("short")];
        request.extend_from_slice(host.as_bytes());
        request.extend_from_slice(&port.to_be_bytes());
        stream.write_all(&request).expect("request");
        let mut reply = [0u8; 10];
        stream.read_exact(&mut reply).expect("reply");
        if reply[1] != 0 {
            return (reply[1], String::new());
        }
        stream.write_all(b"ping").expect("payload");
        let mut rest = String::new();
        let _ = stream.read_to_string(&mut rest);
        (0, rest)
    };
    assert_eq!(socks("allowed.test"), (0, "HELLO ping".to_owned()));
    assert_eq!(socks("denied.test"), (2, String::new()));
    assert_eq!(socks("unknown.test"), (2, String::new()));
}

#[test]
fn connections_beyond_the_limit_are_refused_until_one_ends() {
    let port = echo_server();
    let setup = setup_with(&network(port), 1);
    let mut first = UnixStream::connect(&setup.socket).expect("connect");
    first.write_all(format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n").as_bytes()).expect("request");
    let mut head = [0u8; 12];
    first.read_exact(&mut head).expect("answer");
    assert_eq!(&head, b"HTTP/1.1 200");
    let (refused, _) = ask(&setup.socket, format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n").as_bytes(), b"");
    assert!(refused.starts_with("HTTP/1.1 503") && refused.contains("more than 1 connections at once"), "{refused}");
    first.write_all(b"bye").expect("payload");
    drop(first);
    thread::sleep(Duration::from_millis(200));
    let (again, _) = ask(&setup.socket, format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n").as_bytes(), b"x");
    assert!(again.starts_with("HTTP/1.1 200"), "{again}");
}

#[test]
fn resolve_answers_the_ports_of_allowed_names_and_refuses_the_others() {
    let port = echo_server();
    let setup = setup(&network(port));
    let (head, _) = ask(&setup.socket, b"RESOLVE allowed.test HTTP/1.1\r\n\r\n", b"");
    assert!(head.starts_with("HTTP/1.1 200") && head.contains(&format!("X-Allowed-Ports: {port}\r\n")), "{head}");
    let (head, _) = ask(&setup.socket, b"RESOLVE api.anthropic.com HTTP/1.1\r\n\r\n", b"");
    assert!(head.contains("X-Allowed-Ports: 80 443\r\n"), "{head}");
    for (name, reason) in [
        ("denied.test", "denied.test:443 is denied by network.deny"),
        ("unknown.test", "unknown.test is not on the network allowlist"),
        ("localhost", "localhost:443: the host's port 443 is not in network.hostPorts"),
    ] {
        let (head, _) = ask(&setup.socket, format!("RESOLVE {name} HTTP/1.1\r\n\r\n").as_bytes(), b"");
        assert!(head.starts_with("HTTP/1.1 403") && head.contains(&format!("X-Proxy-Error: {reason}")), "{head}");
    }
    let log = std::fs::read_to_string(&setup.audit).expect("audit");
    assert!(log.contains("\"target\":\"unknown.test\",\"result\":\"blocked\""), "{log}");
    assert!(log.contains("mode=dns unknown.test is not on the network allowlist"), "{log}");
}

/// Hands `listener` to the proxy as `LISTEN role`; the proxy's answer.
fn hand_over(socket: &Path, listener: &TcpListener, role: &str) -> String {
    use std::os::fd::AsRawFd;
    let stream = UnixStream::connect(socket).expect("connect");
    let line = format!("LISTEN {role}\n");
    let fd = listener.as_raw_fd();
    let mut iov = libc::iovec { iov_base: line.as_ptr().cast_mut().cast(), iov_len: line.len() };
    // SAFETY: as in crates/inside/src/net.rs: one SCM_RIGHTS message in a buffer sized
    // by CMSG_SPACE, all of it alive until sendmsg returns.
    unsafe {
        let space = libc::CMSG_SPACE(4) as usize;
        let mut control = vec![0u64; space.div_ceil(8)];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(4) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>(), fd);
        assert_eq!(libc::sendmsg(stream.as_raw_fd(), &msg, 0), line.len() as isize);
    }
    let mut answer = String::new();
    let _ = (&stream).read_to_string(&mut answer);
    answer
}

#[test]
fn a_resolver_listener_leads_to_its_name_and_port_as_the_policy_allows() {
    let port = echo_server();
    let setup = setup(&network(port));
    let cases = [
        (format!("allowed.test:{port}"), Some("HELLO ping")),
        (format!("denied.test:{port}"), None),
        ("allowed.test:443".to_owned(), None),
    ];
    for (role, expected) in cases {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        assert_eq!(hand_over(&setup.socket, &listener, &role), "OK\n", "{role}");
        drop(listener);
        let mut stream = std::net::TcpStream::connect(addr).expect("connect");
        let _ = stream.write_all(b"ping");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        assert_eq!(answer, expected.unwrap_or_default(), "{role}");
    }
    let log = fs_read(&setup.audit);
    assert!(log.contains(&format!("\"target\":\"allowed.test:{port}\",\"result\":\"allowed\"")), "{log}");
    assert!(log.contains("mode=transparent bytes_out=4 bytes_in=10"), "{log}");
    assert!(log.contains("mode=transparent denied.test:"), "{log}");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    assert!(hand_over(&setup.socket, &listener, ":80").starts_with("ERR expected LISTEN <role>"));
}

#[test]
fn listener_roles() {
    let cases: &[(&str, Option<Role>)] = &[
        ("3128", Some(Role::Proxy)),
        ("5432", Some(Role::HostPort(5432))),
        ("github.com:22", Some(Role::Transparent("github.com".into(), 22))),
        (":22", None),
        ("github.com:", None),
        ("github.com:http", None),
        ("x", None),
    ];
    for (word, expected) in cases {
        assert_eq!(Role::parse(word), *expected, "{word}");
    }
}

#[test]
fn authorities() {
    let cases: &[(&str, Option<(&str, u16)>)] = &[
        ("example.org:8443", Some(("example.org", 8443))),
        ("example.org", Some(("example.org", 443))),
        ("user:pw@example.org:80", Some(("example.org", 80))),
        ("[::1]:22", Some(("::1", 22))),
        ("[::1]", Some(("::1", 443))),
        ("example.org:http", None),
        (":80", None),
    ];
    for (authority, expected) in cases {
        let got = split_authority(authority, 443);
        assert_eq!(got.as_ref().map(|(host, port)| (host.as_str(), *port)), *expected, "{authority}");
    }
}

fn fs_read(path: &Path) -> String {
    // The last event is written as the relay ends, just after the client saw EOF.
    for _ in 0..50 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains("bytes_out") {
            return text;
        }
        thread::sleep(Duration::from_millis(20));
    }
    std::fs::read_to_string(path).unwrap_or_default()
}
