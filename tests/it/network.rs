//! `network.mode = "allowlist"` end to end: a private network namespace whose only way
//! out is the host-side proxy. Test hosts are loopback servers this test starts on
//! 127.0.0.2 (allowed) and 127.0.0.3 (denied); the proxy learns their names from
//! `AGENT_SANDBOX_TEST_HOSTS`, so no system file changes. Each legitimate use sits
//! beside the attacks that must fail: another name, another port, a raw address, a
//! direct connection that ignores the proxy variables, the system resolver.

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
                while !head.ends_with(b"\r\n\r\n") && !head.ends_with(b"\n") || head.is_empty() {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => break,
                    }
                    if head.ends_with(b"\r\n\r\n") || head.len() > 8192 {
                        break;
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
probe raw-socket-name python3 -c 'import socket; socket.create_connection(("allowed.test", {allowed}), timeout=5); print("CONNECTED")'
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

    // Whatever ignores the proxy has no route and no resolver.
    for name in ["direct-name", "direct-ip", "direct-denied-ip"] {
        let got = line(&out, name);
        assert!(got.contains("curl: (6)") || got.contains("curl: (7)"), "{name}: {got}");
    }
    for name in ["urllib-no-proxy", "raw-socket", "raw-socket-name"] {
        let got = line(&out, name);
        assert!(got.contains("rror") && !got.contains("HELLO") && !got.contains("CONNECTED"), "{name}: {got}");
    }
    assert_eq!(line(&out, "resolver"), "", "{out}");
    if out.contains("node-fetch: ") {
        // Node 20 ignores the proxy variables (NODE_USE_ENV_PROXY needs Node 24).
        assert!(
            line(&out, "node-fetch").starts_with("failed")
                || line(&out, "node-fetch").starts_with("FETCHED HELLO allowed"),
            "{out}"
        );
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
