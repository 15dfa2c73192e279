//! `network.mode = "allowlist"` end to end: a private network namespace whose only way
//! out is the host-side proxy. Test hosts are loopback servers this test starts on
//! 127.0.0.2 (allowed) and 127.0.0.3 (denied); the proxy learns their names from
//! `AGENT_SANDBOX_TEST_HOSTS`, so no system file changes. Each legitimate use sits
//! beside the attacks that must fail: another name, another port, a raw address, the
//! same through the resolver inside (programs that ignore the proxy variables), and
//! DNS itself as a way out.

use std::{
    io::{Read, Write},
    net::TcpListener,
    sync::{Arc, Mutex},
};

use crate::support::{require_bwrap, World};

/// A loopback HTTP server answering `HELLO <name>` to every request and remembering
/// each request line; the list of requests it has seen.
fn server(addr: &str, name: &'static str) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind((addr, 0)).expect("bind a loopback test server");
    let port = listener.local_addr().expect("addr").port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                // The whole head: closing with unread input would reset the connection
                // and could drop the answer on its way.
                while !head.ends_with(b"\r\n\r\n") && head.len() <= 8192 {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => break,
                    }
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                log.lock().expect("lock").push(text.lines().next().unwrap_or_default().to_owned());
                let body = format!("HELLO {name}\n");
                let _ = write!(stream, "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            });
        }
    });
    (port, seen)
}

fn config(allowed: u16, denied: u16) -> String {
    format!(
        r#"{{"network": {{"mode": "allowlist", "allow": ["allowed.test:{allowed}", "denied.test:{denied}"], "deny": ["denied.test"], "allowPrivate": ["127.0.0.2"]}}}}"#
    )
}

const HOSTS: &str = "allowed.test=127.0.0.2,denied.test=127.0.0.3";

/// Prints `NAME: RESULT` for each probe; the script runs inside the sandbox.
fn probes(allowed: u16, denied: u16) -> String {
    let curl = "curl -sS -m 5 -o - -w ' %{http_code}'";
    format!(
        r#"
probe() {{ name=$1; shift; out=$("$@" 2>&1 | tr '\n' ' '); printf '%s: %s\n' "$name" "$out"; }}
probe proxied-allowed {curl} http://allowed.test:{allowed}/
probe proxied-https-style sh -c 'curl -sS -m 5 -p -o /dev/null -w "%{{http_code}}" http://allowed.test:{allowed}/'
probe proxied-denied {curl} http://denied.test:{denied}/
probe proxied-other-port {curl} http://allowed.test:{denied}/
probe proxied-raw-ip {curl} http://127.0.0.2:{allowed}/
probe socks-allowed {curl} -x socks5h://127.0.0.1:3128 http://allowed.test:{allowed}/
probe socks-denied {curl} -x socks5h://127.0.0.1:3128 http://denied.test:{denied}/
probe direct-name {curl} --noproxy '*' http://allowed.test:{allowed}/
probe direct-ip {curl} --noproxy '*' http://127.0.0.2:{allowed}/
probe direct-denied-ip {curl} --noproxy '*' http://127.0.0.3:{denied}/
probe urllib-proxied python3 -c 'import urllib.request; print(urllib.request.urlopen("http://allowed.test:{allowed}/", timeout=5).read())'
probe urllib-no-proxy env -u http_proxy -u HTTP_PROXY -u all_proxy -u ALL_PROXY python3 -c 'import urllib.request; print(urllib.request.urlopen("http://allowed.test:{allowed}/", timeout=5).read())'
probe raw-socket python3 -c 'import socket; socket.create_connection(("127.0.0.2", {allowed}), timeout=5); print("CONNECTED")'
probe raw-socket-name python3 -c 'import socket; s = socket.create_connection(("allowed.test", {allowed}), timeout=5); s.sendall(b"GET / HTTP/1.0\r\n\r\n"); s.recv(100); print("CONNECTED")'
probe resolver getent hosts allowed.test
probe ssh-proxy-allowed sh -c 'printf "GET / HTTP/1.0\r\n\r\n" | /run/agent-sandbox/agent-sandbox net-connect allowed.test {allowed}'
probe ssh-proxy-denied sh -c '/run/agent-sandbox/agent-sandbox net-connect denied.test {denied} </dev/null; echo "exit $?"'
if command -v node >/dev/null; then
  probe node-fetch node -e 'fetch("http://allowed.test:{allowed}/").then(r => r.text()).then(t => console.log("FETCHED", t)).catch(e => console.log("failed", String(e.cause && e.cause.code)))'
  probe node-fetch-ip node -e 'fetch("http://127.0.0.3:{denied}/").then(r => r.text()).then(t => console.log("FETCHED", t)).catch(e => console.log("failed", String(e.cause && e.cause.code)))'
fi
"#
    )
}

fn line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|line| line.strip_prefix(&format!("{name}: ")))
        .map(str::trim_end)
        .unwrap_or_else(|| panic!("no {name} in:\n{out}"))
}

#[test]
fn allowlist_lets_allowed_names_through_the_proxy_and_nothing_else() {
    require_bwrap!();
    let world = World::new();
    let (allowed, allowed_seen) = server("127.0.0.2", "allowed");
    let (denied, denied_seen) = server("127.0.0.3", "denied");
    world.project_config(&config(allowed, denied));
    let out = world
        .cmd()
        .env("AGENT_SANDBOX_TEST_HOSTS", HOSTS)
        .args(["exec", "--", "sh", "-c", &probes(allowed, denied)])
        .run()
        .ok();

    // The legitimate uses: through the proxy by name, however the client speaks to it.
    assert_eq!(line(&out, "proxied-allowed"), "HELLO allowed  200", "{out}");
    assert_eq!(line(&out, "proxied-https-style"), "200", "{out}");
    assert_eq!(line(&out, "socks-allowed"), "HELLO allowed  200", "{out}");
    assert_eq!(line(&out, "urllib-proxied"), "b'HELLO allowed\\n'", "{out}");
    assert!(line(&out, "ssh-proxy-allowed").contains("HELLO allowed"), "{out}");

    // Refused by the proxy, with the reason the agent can read.
    let refused = |name: &str, reason: &str| {
        let got = line(&out, name);
        assert!(got.contains(reason) && got.ends_with(" 403"), "{name}: {got}\n{out}");
    };
    refused("proxied-denied", &format!("denied.test:{denied} is denied by network.deny"));
    refused("proxied-other-port", &format!("allowed.test is allowed on port {allowed} only, not {denied}"));
    refused("proxied-raw-ip", "127.0.0.2: raw IP addresses are refused");
    assert!(line(&out, "socks-denied").contains("curl: (97)"), "{out}");
    assert!(
        line(&out, "ssh-proxy-denied").contains("is denied by network.deny")
            && line(&out, "ssh-proxy-denied").ends_with("exit 1"),
        "{out}"
    );

    // Whatever ignores the proxy reaches the allowed name through the resolver inside
    // (`transparent_*` below has the attacks on that path), and no raw address.
    assert_eq!(line(&out, "direct-name"), "HELLO allowed  200", "{out}");
    for name in ["direct-ip", "direct-denied-ip"] {
        let got = line(&out, name);
        assert!(got.contains("curl: (7)"), "{name}: {got}");
    }
    assert_eq!(line(&out, "urllib-no-proxy"), "b'HELLO allowed\\n'", "{out}");
    assert_eq!(line(&out, "raw-socket-name"), "CONNECTED", "{out}");
    let got = line(&out, "raw-socket");
    assert!(got.contains("rror") && !got.contains("CONNECTED"), "raw-socket: {got}");
    assert_eq!(line(&out, "resolver"), "127.77.0.1      allowed.test", "{out}");
    if out.contains("node-fetch: ") {
        assert!(line(&out, "node-fetch").starts_with("FETCHED HELLO allowed"), "{out}");
        assert!(line(&out, "node-fetch-ip").starts_with("failed"), "{out}");
    }

    // The denied server never saw a request; the allowed one only the proxied ones.
    assert_eq!(*denied_seen.lock().expect("lock"), Vec::<String>::new());
    assert!(
        allowed_seen.lock().expect("lock").iter().all(|request| request.starts_with("GET / HTTP/")),
        "{allowed_seen:?}"
    );

    // Every connection is in the audit log: allowed with its bytes, refused with why.
    let log = world.audit_log();
    assert!(
        log.contains(&format!("\"operation\":\"net\",\"target\":\"allowed.test:{allowed}\",\"result\":\"allowed\"")),
        "{log}"
    );
    assert!(log.contains("bytes_out=") && log.contains("duration_ms="), "{log}");
    assert!(log.contains(&format!("\"target\":\"denied.test:{denied}\",\"result\":\"blocked\"")), "{log}");
}

/// What programs that ignore the proxy variables do, each attack beside the legitimate
/// use; prints `NAME: RESULT` lines.
fn transparent_probes(allowed: u16, denied: u16) -> String {
    let bare = "env -u http_proxy -u HTTP_PROXY -u https_proxy -u HTTPS_PROXY -u all_proxy -u ALL_PROXY";
    let curl = "curl -sS -m 5 --noproxy '*' -o - -w ' %{http_code}'";
    let py_get = |host: &str, port: u16| {
        format!(
            "python3 -c 'import socket; s = socket.create_connection((\"{host}\", {port}), timeout=5); \
             s.sendall(b\"GET / HTTP/1.0\\r\\n\\r\\n\"); print(b\"\".join(iter(lambda: s.recv(200), b\"\")).decode().split(\"\\n\")[-2])'"
        )
    };
    let py_resolve = |host: &str, family: &str| {
        format!(
            "python3 -c 'import socket; print(sorted({{a[4][0] for a in socket.getaddrinfo(\"{host}\", 443, \
             socket.{family})}}))'"
        )
    };
    format!(
        r#"
probe() {{ name=$1; shift; out=$("$@" 2>&1 | tr '\n' ' '); printf '%s: %s\n' "$name" "$out"; }}
probe curl-allowed {curl} http://allowed.test:{allowed}/
probe curl-denied {curl} http://denied.test:{denied}/
probe curl-unknown {curl} http://unknown.test:{allowed}/
probe curl-other-port {curl} http://allowed.test:{denied}/
probe curl-raw-ip {curl} http://127.0.0.2:{allowed}/
probe urllib-allowed {bare} python3 -c 'import urllib.request; print(urllib.request.urlopen("http://allowed.test:{allowed}/", timeout=5).read())'
probe urllib-denied {bare} python3 -c 'import urllib.request; print(urllib.request.urlopen("http://denied.test:{denied}/", timeout=5).read())'
probe socket-allowed {py_allowed}
probe socket-denied {py_denied}
probe socket-raw-ip {py_raw}
probe bash-tcp-allowed bash -c 'exec 3<>/dev/tcp/allowed.test/{allowed}; printf "GET / HTTP/1.0\r\n\r\n" >&3; tail -n 1 <&3'
probe bash-tcp-denied bash -c 'exec 3<>/dev/tcp/denied.test/{denied} && echo OPENED'
probe ipv4 {v4}
probe ipv6 {v6}
probe getent-denied sh -c 'getent hosts denied.test; echo "exit $?"'
probe dns-exfil sh -c 'getent hosts c2VjcmV0LWRhdGE.unknown.test; echo "exit $?"'
probe dns-txt python3 -c '
import socket
q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07allowed\x04test\x00\x00\x10\x00\x01"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5); s.sendto(q, ("127.0.0.1", 53))
r = s.recv(512); print("rcode", r[3] & 15, "answers", r[7])'
probe external-resolver python3 -c '
import socket
ifaces = [line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:]]
assert ifaces == ["lo"], ifaces  # never send anything unless this namespace is private
q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
try:
    s.sendto(q, ("192.0.2.53", 53)); print("SENT", s.recv(512))
except OSError as err:
    print("failed", err.errno)'
probe caps grep -E '^Cap(Eff|Bnd|Amb)' /proc/self/status
if command -v node >/dev/null; then
  probe node-fetch {bare} node -e 'fetch("http://allowed.test:{allowed}/").then(r => r.text()).then(t => console.log("FETCHED", t)).catch(e => console.log("failed", String(e.cause && e.cause.code)))'
  probe node-fetch-denied {bare} node -e 'fetch("http://denied.test:{denied}/").then(r => r.text()).then(t => console.log("FETCHED", t)).catch(e => console.log("failed", String(e.cause && e.cause.code)))'
fi
"#,
        py_allowed = py_get("allowed.test", allowed),
        py_denied = py_get("denied.test", denied),
        py_raw = py_get("127.0.0.2", allowed),
        v4 = py_resolve("allowed.test", "AF_INET"),
        v6 = py_resolve("allowed.test", "AF_INET6"),
    )
}

#[test]
fn transparent_programs_that_ignore_the_proxy_reach_allowed_names_and_nothing_else() {
    require_bwrap!();
    let world = World::new();
    let (allowed, allowed_seen) = server("127.0.0.2", "allowed");
    let (denied, denied_seen) = server("127.0.0.3", "denied");
    // allowed.test on its test port and on the default 80 and 443: the resolver's
    // listeners on those need the namespace's low ports, as root and unprivileged.
    world.project_config(&format!(
        r#"{{"network": {{"allow": ["allowed.test", "allowed.test:{allowed}", "denied.test:{denied}"], "deny": ["denied.test"], "allowPrivate": ["127.0.0.2"]}}}}"#
    ));
    let out = world
        .cmd()
        .env("AGENT_SANDBOX_TEST_HOSTS", HOSTS)
        .args(["exec", "--", "sh", "-c", &transparent_probes(allowed, denied)])
        .run()
        .ok();

    // The legitimate uses: by name, without the proxy variables, however the program
    // connects.
    assert_eq!(line(&out, "curl-allowed"), "HELLO allowed  200", "{out}");
    assert_eq!(line(&out, "urllib-allowed"), "b'HELLO allowed\\n'", "{out}");
    assert_eq!(line(&out, "socket-allowed"), "HELLO allowed", "{out}");
    assert_eq!(line(&out, "bash-tcp-allowed"), "HELLO allowed", "{out}");
    assert_eq!(line(&out, "ipv4"), "['127.77.0.1']", "{out}");
    if out.contains("node-fetch: ") {
        assert_eq!(line(&out, "node-fetch"), "FETCHED HELLO allowed", "{out}");
        assert!(line(&out, "node-fetch-denied").starts_with("failed ENOTFOUND"), "{out}");
    }

    // A denied or unlisted name does not exist; DNS carries nothing out.
    assert!(line(&out, "curl-denied").contains("curl: (6) Could not resolve host: denied.test"), "{out}");
    assert!(line(&out, "curl-unknown").contains("curl: (6) Could not resolve host: unknown.test"), "{out}");
    assert!(line(&out, "urllib-denied").contains("Name or service not known"), "{out}");
    assert!(line(&out, "socket-denied").contains("socket.gaierror"), "{out}");
    assert!(line(&out, "bash-tcp-denied").contains("denied.test: Name or service not known"), "{out}");
    assert_eq!(line(&out, "getent-denied"), "exit 2", "{out}");
    assert_eq!(line(&out, "dns-exfil"), "exit 2", "{out}");
    // TXT (and every type but A and AAAA): refused, with no answer.
    assert_eq!(line(&out, "dns-txt"), "rcode 5 answers 0", "{out}");
    // No IPv6 address for a name (no data, so getaddrinfo finds none).
    assert!(line(&out, "ipv6").contains("socket.gaierror"), "{out}");
    // Another resolver: no route out of the namespace.
    assert_eq!(line(&out, "external-resolver"), "failed 101", "{out}");

    // An allowed name's other port, a raw address: nothing listens there.
    assert!(line(&out, "curl-other-port").contains("curl: (7)"), "{out}");
    assert!(line(&out, "curl-raw-ip").contains("curl: (7)"), "{out}");
    assert!(line(&out, "socket-raw-ip").contains("ConnectionRefusedError"), "{out}");

    // The agent holds no capability (the namespace's low ports need none).
    assert_eq!(
        line(&out, "caps"),
        "CapEff:\t0000000000000000 CapBnd:\t0000000000000000 CapAmb:\t0000000000000000",
        "{out}"
    );

    assert_eq!(*denied_seen.lock().expect("lock"), Vec::<String>::new());
    assert!(
        allowed_seen
            .lock()
            .expect("lock")
            .iter()
            .all(|request| request == "GET / HTTP/1.0" || request.starts_with("GET / HTTP/1.1")),
        "{allowed_seen:?}"
    );

    // The audit log says how each came in, and what the resolver refused.
    let log = world.audit_log();
    assert!(log.contains(&format!("\"target\":\"allowed.test:{allowed}\",\"result\":\"allowed\"")), "{log}");
    assert!(log.contains("mode=transparent bytes_out="), "{log}");
    assert!(log.contains("\"target\":\"denied.test\",\"result\":\"blocked\""), "{log}");
    assert!(log.contains("mode=dns denied.test:443 is denied by network.deny"), "{log}");
    assert!(
        log.contains("mode=dns c2vjcmv0lwrhdgE.unknown.test is not on the network allowlist")
            || log.contains("mode=dns c2vjcmv0lwrhdge.unknown.test is not on the network allowlist"),
        "{log}"
    );
}

#[test]
fn an_allowed_name_that_resolves_into_loopback_is_refused_without_allow_private() {
    require_bwrap!();
    let world = World::new();
    let (allowed, seen) = server("127.0.0.2", "allowed");
    let out = world
        .cmd()
        .env("AGENT_SANDBOX_TEST_HOSTS", HOSTS)
        .args(["exec", "--allow-host", &format!("allowed.test:{allowed}"), "--", "curl", "-sS", "-i"])
        .arg(format!("http://allowed.test:{allowed}/"))
        .run();
    assert!(
        out.stdout().contains("X-Proxy-Error: allowed.test resolves to 127.0.0.2, a loopback address"),
        "{}{}",
        out.stdout(),
        out.stderr()
    );
    assert!(seen.lock().expect("lock").is_empty());
}

#[test]
fn host_ports_reach_the_hosts_loopback_and_no_other_port_does() {
    require_bwrap!();
    let world = World::new();
    let (open, open_seen) = server("127.0.0.1", "open");
    let (closed, closed_seen) = server("127.0.0.1", "closed");
    let script = format!(
        "curl -sS -m 5 --noproxy '*' http://localhost:{open}/; \
         curl -sS -m 5 --noproxy '*' http://127.0.0.1:{closed}/ 2>&1 | head -c 12; echo; \
         curl -sS -m 5 -i --noproxy '' http://localhost:{closed}/ | grep X-Proxy-Error"
    );
    let out = world.cmd().args(["exec", "--host-port", &open.to_string(), "--", "sh", "-c", &script]).run().ok();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "HELLO open", "{out}");
    assert_eq!(lines[1], "curl: (7) Fa", "{out}");
    assert!(
        lines[2].starts_with(&format!(
            "X-Proxy-Error: localhost:{closed}: the host's port {closed} is not in network.hostPorts"
        )),
        "{out}"
    );
    assert_eq!(open_seen.lock().expect("lock").len(), 1);
    assert!(closed_seen.lock().expect("lock").is_empty());
}

#[test]
fn git_clones_over_http_from_an_allowed_host_only() {
    require_bwrap!();
    let world = World::new();
    // A bare repository served by git's dumb HTTP protocol from 127.0.0.2.
    let served = world.path("served");
    world.git_in(
        &world.root,
        &[
            "clone",
            "-q",
            "--bare",
            world.project.to_str().expect("utf-8"),
            served.join("repo.git").to_str().expect("utf-8"),
        ],
    );
    world.git_in(&served.join("repo.git"), &["update-server-info"]);
    let listener = TcpListener::bind(("127.0.0.2", 0)).expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let mut http = std::process::Command::new("python3")
        .args(["-m", "http.server", "--bind", "127.0.0.2", &port.to_string(), "--directory"])
        .arg(&served)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 http.server");
    // Until it listens (python starts slowly on a loaded machine).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.2", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "python3 -m http.server did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    world.project_config(&format!(
        r#"{{"network": {{"allow": ["allowed.test:{port}"], "allowPrivate": ["127.0.0.2"]}}}}"#
    ));
    let script = format!(
        "cd /tmp && git clone -q http://allowed.test:{port}/repo.git a && git -C a log --format=%s; \
         echo DENIED; git clone -q http://denied.test:{port}/repo.git b 2>&1; \
         echo DIRECT; env -u http_proxy -u HTTP_PROXY -u all_proxy -u ALL_PROXY \
           git clone -q http://127.0.0.2:{port}/repo.git c 2>&1; test -d c && echo CLONED"
    );
    // The network, not the git guard (which has its own tests), is what this shows.
    let out = world
        .cmd()
        .env("AGENT_SANDBOX_TEST_HOSTS", HOSTS)
        .args(["exec", "--cmd", "git=true", "--", "sh", "-c", &script])
        .run();
    let _ = http.kill();
    let _ = http.wait();
    let text = out.stdout();
    let (cloned, rest) = text.split_once("DENIED\n").expect("marker");
    let (denied, direct) = rest.split_once("DIRECT\n").expect("marker");
    assert_eq!(cloned, "init\n", "{text}{}", out.stderr());
    assert!(denied.contains("agent-sandbox: denied.test is not on the network allowlist"), "{text}");
    assert!(direct.contains("Failed to connect to 127.0.0.2") && !direct.contains("CLONED"), "{text}");
}

/// A name only the host's `/etc/hosts` lists: inside, the sandbox's `/etc/hosts` holds the
/// loopback names only, so the name goes through the resolver and the proxy (which looks
/// it up on the host, in the host's `/etc/hosts`) whether or not the program uses the
/// proxy variables; its listed address is never what a program inside is given. The
/// host's `/etc/hosts` is this test's own, bound over the real one in a mount namespace
/// that only `exec` runs in (needs root).
#[test]
fn a_name_only_the_hosts_etc_hosts_lists_goes_through_the_proxy_not_to_its_listed_address() {
    require_bwrap!();
    if !crate::support::is_root() {
        eprintln!("skipped: a test's own /etc/hosts needs a mount namespace (root)");
        return;
    }
    let world = World::new();
    let (port, seen) = server("127.0.0.2", "listed");
    let hosts = world.write("etc-hosts", "127.0.0.1\tlocalhost\n127.0.0.2\tlisted.test\n");
    world.project_config(&format!(
        r#"{{"network": {{"allow": ["listed.test:{port}"], "allowPrivate": ["127.0.0.2"]}}}}"#
    ));
    let script = format!(
        r#"
probe() {{ name=$1; shift; out=$("$@" 2>&1 | tr '\n' ' '); printf '%s: %s\n' "$name" "$out"; }}
probe hosts-file grep -c listed.test /etc/hosts
probe localhost getent hosts localhost
probe resolved getent hosts listed.test
probe proxy-aware curl -sS -m 5 -o - -w ' %{{http_code}}' http://listed.test:{port}/
probe proxy-unaware curl -sS -m 5 --noproxy '*' -o - -w ' %{{http_code}}' http://listed.test:{port}/
probe listed-address curl -sS -m 5 --noproxy '*' http://127.0.0.2:{port}/
"#
    );
    let agent_sandbox = world.cmd();
    let mut cmd = std::process::Command::new("unshare");
    cmd.env_clear().envs(agent_sandbox.cmd.get_envs().filter_map(|(key, value)| Some((key, value?))));
    cmd.current_dir(&world.project).args([
        "-m",
        "sh",
        "-c",
        "mount --bind \"$0\" /etc/hosts && getent hosts listed.test && exec \"$@\"",
    ]);
    cmd.arg(&hosts).arg(&*crate::support::BIN).args(["exec", "--", "sh", "-c", &script]);
    let out = crate::support::Run(cmd.output().expect("unshare"));
    let out = out.ok();

    // The host's view has the name (the proxy resolves it there).
    assert!(out.starts_with("127.0.0.2       listed.test\n"), "{out}");
    // Inside: the loopback names only, the name from the resolver.
    assert_eq!(line(&out, "hosts-file"), "0", "{out}");
    assert_eq!(line(&out, "localhost"), "::1             localhost ip6-localhost ip6-loopback", "{out}");
    assert_eq!(line(&out, "resolved"), "127.77.0.1      listed.test", "{out}");
    // Both kinds of program reach it, through the proxy.
    assert_eq!(line(&out, "proxy-aware"), "HELLO listed  200", "{out}");
    assert_eq!(line(&out, "proxy-unaware"), "HELLO listed  200", "{out}");
    // Its listed address leads nowhere inside.
    assert!(line(&out, "listed-address").contains("curl: (7)"), "{out}");
    assert_eq!(seen.lock().expect("lock").len(), 2, "{seen:?}");
    let log = world.audit_log();
    assert!(log.contains(&format!("\"target\":\"listed.test:{port}\",\"result\":\"allowed\"")), "{log}");
    assert!(log.contains("mode=transparent"), "{log}");
}

/// A tool shows a refusal as `403` or a closed connection: at the end of the session
/// `exec` lists each refused destination once, with the reason and the way to allow it.
/// An allowed host that does not answer is no refusal: the log says it was unreachable.
#[test]
fn the_session_ends_with_the_destinations_the_allowlist_refused() {
    require_bwrap!();
    let world = World::new();
    let (allowed, _) = server("127.0.0.2", "allowed");
    // An allowed name whose address nothing listens on.
    let closed = TcpListener::bind("127.0.0.2:0").expect("bind").local_addr().expect("addr").port();
    world.project_config(&format!(
        r#"{{"network": {{"mode": "allowlist", "allow": ["allowed.test:{allowed}", "gone.test:{closed}"], "allowPrivate": ["127.0.0.2"]}}}}"#
    ));
    let script = format!(
        "curl -sS -m 5 -o /dev/null http://allowed.test:{allowed}/ && echo allowed-ok; \
         for i in 1 2; do curl -sS -m 5 -o /dev/null http://elsewhere.test/ 2>/dev/null; done; \
         curl -sS -m 5 -o /dev/null http://allowed.test:{closed}/ 2>/dev/null; \
         curl -sS -m 5 -o /dev/null http://gone.test:{closed}/ 2>/dev/null; echo done"
    );
    let run = world
        .cmd()
        .env("AGENT_SANDBOX_TEST_HOSTS", "allowed.test=127.0.0.2,gone.test=127.0.0.2")
        .args(["exec", "--", "sh", "-c", &script])
        .run();
    assert_eq!(run.ok(), "allowed-ok\ndone\n");
    let stderr = run.stderr();
    assert!(stderr.contains("the network allowlist refused 2 destinations this session"), "{stderr}");
    assert!(stderr.contains("  elsewhere.test:80: ") && stderr.contains("--allow-host elsewhere.test"), "{stderr}");
    assert!(
        stderr.contains(&format!("  allowed.test:{closed}: allowed.test is allowed on port {allowed} only")),
        "{stderr}"
    );
    assert_eq!(stderr.matches("elsewhere.test:80").count(), 1, "listed once:\n{stderr}");
    assert!(!stderr.contains("gone.test"), "an unreachable host is not a refusal:\n{stderr}");
    let log = world.audit_log();
    let gone = log
        .lines()
        .find(|line| line.contains("\"operation\":\"net\"") && line.contains("gone.test"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(gone.contains("\"result\":\"failed\"") && gone.contains("\"policy\":\"network-unreachable\""), "{gone}");
}
