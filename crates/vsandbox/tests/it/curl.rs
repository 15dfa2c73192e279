//! `curl` against a real HTTP server on 127.0.0.1 that each test starts; hosts not on
//! the allowlist are refused before any connection, shown by a listener that must
//! never have a connection waiting. Test traffic goes to loopback only.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use vsandbox::{curl::Curl, Config, Limits, Sandbox};

/// A one-thread HTTP server on 127.0.0.1 answering by path; it records each request
/// line and body.
struct Server {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
}

fn respond(stream: &mut TcpStream, status: &str, headers: &str, body: &[u8]) {
    let head = format!("HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
}

fn handle(mut stream: TcpStream, port: u16, requests: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut request_line = String::new();
    reader.read_line(&mut request_line).expect("request line");
    let mut length = 0;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("header");
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().expect("length");
        }
        headers.push(line.trim_end().to_owned());
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("body");
    let body = String::from_utf8_lossy(&body).into_owned();
    requests.lock().expect("lock").push(format!("{} {body}", request_line.trim_end()));
    let path = request_line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    match path.as_str() {
        "/hello" => respond(&mut stream, "200 OK", "Content-Type: text/plain\r\n", b"hello from 127.0.0.1\n"),
        "/echo" => {
            let text = format!("{}\n{}\nbody={body}\n", request_line.trim_end(), headers.join("\n"));
            respond(&mut stream, "200 OK", "", text.as_bytes());
        }
        "/chunked" => {
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n6\r\nchunk \r\n5\r\nby ch\r\n4\r\nunk\n\r\n0\r\n\r\n",
            );
        }
        "/redirect" => respond(&mut stream, "302 Found", "Location: /hello\r\n", b""),
        "/see-other" => respond(&mut stream, "303 See Other", "Location: echo\r\n", b""),
        "/away" => respond(&mut stream, "302 Found", &format!("Location: http://localhost:{port}/hello\r\n"), b""),
        "/loop" => respond(&mut stream, "302 Found", "Location: /loop\r\n", b""),
        "/big" => respond(&mut stream, "200 OK", "", &[b'b'; 2000]),
        "/binary" => respond(&mut stream, "200 OK", "", &[0, 159, 146, 150]),
        "/slow" => std::thread::sleep(Duration::from_secs(3)),
        _ => respond(&mut stream, "404 Not Found", "", b"no such page\n"),
    }
}

impl Server {
    fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let seen = Arc::clone(&seen);
                std::thread::spawn(move || handle(stream, port, &seen));
            }
        });
        Server { port, requests }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("lock").clone()
    }
}

fn sandbox_allowing(allow: &[String], limits: Limits) -> Sandbox {
    let mut sandbox =
        Sandbox::new(Config { limits, command_timeout: Duration::from_secs(10), ..Config::default() }).expect("config");
    sandbox.register(Box::new(Curl::new(allow))).expect("register curl");
    sandbox
}

/// A listening socket nobody accepts from: any connection attempt would wait in its
/// backlog, so `accept` on it afterwards tells whether one was made.
struct Tripwire(TcpListener);

impl Tripwire {
    fn new() -> Tripwire {
        Tripwire(TcpListener::bind("127.0.0.1:0").expect("bind"))
    }

    fn port(&self) -> u16 {
        self.0.local_addr().expect("addr").port()
    }

    fn assert_untouched(&self) {
        self.0.set_nonblocking(true).expect("nonblocking");
        match self.0.accept() {
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("a connection was attempted: {other:?}"),
        }
    }
}

#[test]
fn requests_reach_an_allowlisted_server() {
    let server = Server::start();
    let mut sandbox = sandbox_allowing(&[format!("127.0.0.1:{}", server.port)], Limits::default());
    let check = |sandbox: &mut Sandbox, command: &str, stdout: &str, code: i32| {
        let result = sandbox.execute(command);
        assert_eq!((result.stdout.as_str(), result.exit_code), (stdout, code), "{command}: {}", result.stderr);
    };
    check(&mut sandbox, &format!("curl -s {}", server.url("/hello")), "hello from 127.0.0.1\n", 0);
    check(&mut sandbox, &format!("curl {}", server.url("/chunked")), "chunk by chunk\n", 0);
    check(&mut sandbox, &format!("curl {}", server.url("/missing")), "no such page\n", 0);
    let result = sandbox.execute(&format!("curl -f {}", server.url("/missing")));
    assert!(result.exit_code == 1 && result.stderr.contains("(22) The requested URL returned error: 404"));
    check(&mut sandbox, &format!("curl {}", server.url("/redirect")), "", 0);
    check(&mut sandbox, &format!("curl -sL {}", server.url("/redirect")), "hello from 127.0.0.1\n", 0);
    let included = sandbox.execute(&format!("curl -i {}", server.url("/hello"))).stdout;
    assert!(included.starts_with("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"), "{included}");
    assert!(included.ends_with("\r\n\r\nhello from 127.0.0.1\n"), "{included}");
    // Method, headers and data, from the command line and from a file.
    let echoed =
        sandbox.execute(&format!("curl -X PUT -H 'X-Test: yes' --data 'a=1&b=2' {}", server.url("/echo"))).stdout;
    assert!(echoed.starts_with("PUT /echo HTTP/1.1\n"), "{echoed}");
    assert!(echoed.contains("\nX-Test: yes\n") && echoed.ends_with("body=a=1&b=2\n"), "{echoed}");
    sandbox.execute("echo '{\"k\": 1}' > /payload.json");
    let echoed = sandbox
        .execute(&format!("curl -d @/payload.json -H 'Content-Type: application/json' {}", server.url("/echo")))
        .stdout;
    assert!(echoed.starts_with("POST /echo HTTP/1.1\n") && echoed.ends_with("body={\"k\": 1}\n\n"), "{echoed}");
    // 303 turns a POST into a GET without a body.
    let echoed = sandbox.execute(&format!("curl -L -d x=1 {}", server.url("/see-other"))).stdout;
    assert!(echoed.starts_with("GET /echo HTTP/1.1\n") && echoed.ends_with("body=\n"), "{echoed}");
    // -o writes through the filesystem, bytes intact.
    check(&mut sandbox, &format!("curl -o /dl/page {} ", server.url("/hello")), "", 1);
    check(
        &mut sandbox,
        &format!("mkdir /dl && curl -o /dl/page {} && cat /dl/page", server.url("/hello")),
        "hello from 127.0.0.1\n",
        0,
    );
    sandbox.execute(&format!("curl -o /bin.dat {}", server.url("/binary")));
    let snapshot = sandbox.create_snapshot().expect("snapshot");
    let bytes = snapshot.nodes.iter().find_map(|node| match node {
        vsandbox::fs::Entry::File(path, data) if path == "/bin.dat" => Some(data.clone()),
        _ => None,
    });
    assert_eq!(bytes, Some(vec![0, 159, 146, 150]));
    let result = sandbox.execute(&format!("curl -L {}", server.url("/loop")));
    assert!(result.exit_code == 1 && result.stderr.contains("more than 10 redirects"), "{}", result.stderr);
    assert!(server.requests().iter().any(|line| line.starts_with("GET /hello HTTP/1.1")));
}

#[test]
fn hosts_not_on_the_allowlist_are_refused_without_a_connection() {
    let tripwire = Tripwire::new();
    let port = tripwire.port();
    // Nothing allowed: the default.
    let mut sandbox = sandbox_allowing(&[], Limits::default());
    let result = sandbox.execute(&format!("curl http://127.0.0.1:{port}/"));
    assert_eq!(result.exit_code, 1);
    assert!(
        result
            .stderr
            .contains(&format!("host 127.0.0.1:{port} is not on the allowlist (it is empty); nothing was sent")),
        "{}",
        result.stderr
    );
    // Another port of an allowed host, another name for an allowed address.
    let mut sandbox = sandbox_allowing(
        &[format!("127.0.0.1:{}", port.wrapping_add(1)), String::from("127.0.0.2")],
        Limits::default(),
    );
    for url in [format!("http://127.0.0.1:{port}/"), format!("http://localhost:{port}/"), format!("127.0.0.1:{port}")] {
        let result = sandbox.execute(&format!("curl {url}"));
        assert!(result.exit_code == 1 && result.stderr.contains("is not on the allowlist"), "{url}: {}", result.stderr);
    }
    tripwire.assert_untouched();
}

#[test]
fn redirects_to_hosts_off_the_allowlist_are_refused() {
    let server = Server::start();
    let mut sandbox = sandbox_allowing(&[format!("127.0.0.1:{}", server.port)], Limits::default());
    let result = sandbox.execute(&format!("curl -L {}", server.url("/away")));
    assert_eq!(result.exit_code, 1);
    assert!(
        result.stderr.contains(&format!("host localhost:{} is not on the allowlist", server.port)),
        "{}",
        result.stderr
    );
    assert_eq!(server.requests().len(), 1, "only the first request was made: {:?}", server.requests());
}

#[test]
fn responses_and_downloads_respect_the_limits_and_the_timeout() {
    let server = Server::start();
    let limits = Limits { max_total_size: 10_000, max_file_size: 1000, max_node_count: 100 };
    let mut sandbox = sandbox_allowing(&[String::from("127.0.0.1")], limits);
    let result = sandbox.execute(&format!("curl {}", server.url("/big")));
    assert!(result.exit_code == 1 && result.stderr.contains("larger than 1000 bytes"), "{}", result.stderr);
    let result = sandbox.execute(&format!("curl -i -o /page {}", server.url("/hello")));
    assert_eq!(result.exit_code, 0, "{}", result.stderr);
    let mut sandbox =
        Sandbox::new(Config { command_timeout: Duration::from_millis(300), ..Config::default() }).expect("config");
    sandbox.register(Box::new(Curl::new(&[String::from("127.0.0.1")]))).expect("register");
    let start = Instant::now();
    let result = sandbox.execute(&format!("curl {}", server.url("/slow")));
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
    assert!(result.exit_code == 1 && result.stderr.contains("timed out"), "{}", result.stderr);
}

#[test]
fn unsupported_urls_and_options_say_so() {
    let mut sandbox = sandbox_allowing(&[String::from("127.0.0.1")], Limits::default());
    for (command, message) in [
        ("curl https://127.0.0.1/", "https is not supported"),
        ("curl", "no URL given"),
        ("curl --frobnicate http://127.0.0.1/", "unknown option --frobnicate"),
        ("curl -H", "option -H needs a value"),
        ("curl -H 'a: b' http://127.0.0.1:1/ http://127.0.0.1:2/", "only one URL"),
        ("curl http://u:p@127.0.0.1/", "credentials in the URL are not supported"),
    ] {
        let result = sandbox.execute(command);
        assert!(result.exit_code == 1 && result.stderr.contains(message), "{command}: {}", result.stderr);
    }
}
