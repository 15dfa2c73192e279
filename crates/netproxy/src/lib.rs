//! The host side of `network.mode = "allowlist"`: a proxy owned by the `exec` parent,
//! listening on a unix socket that the runtime directory carries into the sandbox,
//! whose network namespace has nothing else. It speaks HTTP CONNECT, absolute-URI HTTP
//! and SOCKS5 (remote DNS: the name, not an address, is what the policy checks) on the
//! same socket, told apart by the first byte.
//!
//! For every connection it asks `policy::network::NetPolicy` twice: may the sandbox
//! reach this name and port, then may the name lead to the addresses it resolved to
//! (private, loopback and link-local ones only with `allowPrivate`, so a name whose DNS
//! answer changes cannot lead into the host's network). It resolves names itself; a
//! refusal is answered with `403` and the reason in `X-Proxy-Error` (SOCKS5: reply code
//! 2), and every connection, allowed or not, becomes one audit event (host:port, bytes
//! each way, duration, how it came in), never its payload.
//!
//! For the resolver inside the sandbox (`crates/inside/src/resolver.rs`) it also answers
//! `RESOLVE name` with the ports the name is allowed on (`X-Allowed-Ports`) or a
//! refusal, and serves the listeners the resolver hands over for each allowed name
//! (`LISTEN name:port`): a connection to one is a connection to that name and port,
//! checked as a `CONNECT` is (the audit's mode `transparent`).

pub mod upstream;

use std::{
    io::{Read, Write},
    net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs},
    os::{
        fd::{AsFd, AsRawFd, FromRawFd, OwnedFd},
        unix::net::{UnixListener, UnixStream},
    },
    path::PathBuf,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread,
    time::{Duration, Instant},
};

use policy::network::{NetPolicy, Verdict, DEFAULT_PORTS, LOCALHOST};

/// What the proxy needs, decided before it starts.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    pub policy: NetPolicy,
    /// Names answered without asking the system resolver (tests only: see
    /// [`TEST_HOSTS_VAR`]).
    pub hosts: Vec<(String, IpAddr)>,
    /// Where each connection is recorded; `None` records nothing.
    pub audit_log: Option<PathBuf>,
    /// The sandboxed command, for the audit events.
    pub agent: String,
    /// Connections open at once (each is a thread of the `exec` process on the host):
    /// more are refused, so an agent cannot exhaust the host's threads.
    pub max_connections: usize,
    /// DNS servers to resolve names with, instead of the C library's resolver (in a
    /// container, whose `/etc/resolv.conf` names the filtering resolver: see
    /// `upstream.rs`); empty: the C library's.
    pub upstream: Vec<SocketAddr>,
    /// The destinations the policy refused this session, each with the first reason
    /// (`exec` lists them when the session ends: a tool prints only `403`).
    pub refused: Refused,
}

/// See [`ProxyConfig::refused`]: destination (`host:port`, or a name the resolver was
/// asked for) to reason.
pub type Refused = Arc<std::sync::Mutex<std::collections::BTreeMap<String, String>>>;

/// The default for [`ProxyConfig::max_connections`].
pub const MAX_CONNECTIONS: usize = 512;

/// Listening sockets taken over from the sandbox in one session (each has a thread of
/// the `exec` process): more are refused, so an agent handing over sockets of its own
/// cannot exhaust the host's threads either.
pub const MAX_LISTENERS: usize = 8192;

/// The request the resolver inside sends for a name it has not seen: `RESOLVE name
/// HTTP/1.1`, answered `200` with the ports in [`PORTS_HEADER`], or `403` with the
/// reason.
pub const RESOLVE: &str = "RESOLVE";
/// The header of a `RESOLVE` answer listing the name's ports, space-separated.
pub const PORTS_HEADER: &str = "X-Allowed-Ports";

/// Hidden, for the end-to-end tests only: `NAME=ADDRESS,…` names the proxy resolves
/// itself, so that tests can give loopback test servers host names without touching
/// `/etc/hosts`. It is read from `exec`'s own environment on the host, which the sandbox
/// cannot change, and the addresses still pass `allowPrivate`.
pub const TEST_HOSTS_VAR: &str = "AGENT_SANDBOX_TEST_HOSTS";

/// Parses [`TEST_HOSTS_VAR`]; malformed entries are ignored.
pub fn parse_test_hosts(text: &str) -> Vec<(String, IpAddr)> {
    text.split(',')
        .filter_map(|entry| {
            let (name, addr) = entry.split_once('=')?;
            Some((name.trim().to_ascii_lowercase(), addr.trim().parse().ok()?))
        })
        .collect()
}

/// The variables that point proxy-aware programs at the bridge inside the sandbox (set
/// over whatever the caller had): curl, git, pip, npm, yarn, Node 24's `fetch` with
/// `NODE_USE_ENV_PROXY`, SOCKS5 with remote names for `ALL_PROXY`, and git over ssh through
/// `agent-sandbox net-connect`. `NO_PROXY` keeps the sandbox's own loopback (and the
/// `hostPorts` bridged there) direct.
pub fn proxy_env(marker: &std::path::Path) -> Vec<(&'static str, String)> {
    let http = format!("http://127.0.0.1:{}", runtime_layout::PROXY_PORT);
    let socks = format!("socks5h://127.0.0.1:{}", runtime_layout::PROXY_PORT);
    let no_proxy = "localhost,127.0.0.1,::1".to_owned();
    let ssh = format!("ssh -o ProxyCommand='{} net-connect %h %p'", marker.display());
    let mut env = Vec::new();
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        env.push((name, http.clone()));
    }
    for name in ["npm_config_proxy", "npm_config_https_proxy", "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY", "PIP_PROXY"] {
        env.push((name, http.clone()));
    }
    env.push(("ALL_PROXY", socks.clone()));
    env.push(("all_proxy", socks));
    env.push(("NO_PROXY", no_proxy.clone()));
    env.push(("no_proxy", no_proxy));
    env.push(("NODE_USE_ENV_PROXY", "1".into()));
    env.push(("GIT_SSH_COMMAND", ssh));
    env
}

/// The sandbox's `/etc/hosts`: the loopback names and nothing else, so that every other
/// name goes through the resolver inside (and so the proxy, which resolves it on the
/// host, with the host's `/etc/hosts`). A host entry copied in would resolve to its listed
/// address, which leads nowhere inside.
pub fn hosts() -> String {
    "# agent-sandbox: every other name goes through the resolver inside (the proxy resolves it on the host)\n\
     127.0.0.1\tlocalhost\n\
     ::1\tlocalhost ip6-localhost ip6-loopback\n"
        .to_owned()
}

/// The sandbox's `/etc/resolv.conf`: the resolver the bridge runs inside, and nothing
/// else (no search domains: a short name is looked up as it is).
pub fn resolv_conf() -> String {
    let [a, b, c, d] = runtime_layout::RESOLVER;
    format!(
        "# agent-sandbox: the resolver inside the sandbox answers only the names network.allow allows\n\
         nameserver {a}.{b}.{c}.{d}\noptions timeout:2 attempts:2\n"
    )
}

/// A running proxy; stops accepting when [`Proxy::stop`]ped or dropped.
pub struct Proxy {
    stop: Arc<AtomicBool>,
    socket: PathBuf,
}

/// Starts serving `listener` (bound at `socket`) on a thread of its own.
pub fn start(listener: UnixListener, socket: PathBuf, config: ProxyConfig) -> Proxy {
    let stop = Arc::new(AtomicBool::new(false));
    let config = Arc::new(config);
    let flag = Arc::clone(&stop);
    let open = Arc::new(Counters::default());
    thread::spawn(move || {
        for client in listener.incoming() {
            if flag.load(Ordering::SeqCst) {
                return;
            }
            let Ok(client) = client else {
                // Out of descriptors, say: wait rather than spin.
                thread::sleep(Duration::from_millis(50));
                continue;
            };
            let Some(client) = admit(client, &config, &open) else { continue };
            let (config, counted) = (Arc::clone(&config), Arc::clone(&open));
            if !spawn(move || {
                serve_unix(client, &config, &counted);
                counted.connections.fetch_sub(1, Ordering::SeqCst);
            }) {
                open.connections.fetch_sub(1, Ordering::SeqCst);
            }
        }
    });
    Proxy { stop, socket }
}

/// Connections open now, and listeners taken over so far.
#[derive(Default)]
struct Counters {
    connections: std::sync::atomic::AtomicUsize,
    listeners: std::sync::atomic::AtomicUsize,
}

type Open = Arc<Counters>;

/// Counts `client` in, or refuses it (503) when [`ProxyConfig::max_connections`] are
/// open already. The caller counts it out when it ends.
fn admit<C: Conn>(mut client: C, config: &ProxyConfig, open: &Open) -> Option<C> {
    if open.connections.fetch_add(1, Ordering::SeqCst) >= config.max_connections {
        open.connections.fetch_sub(1, Ordering::SeqCst);
        let reason = format!("more than {} connections at once", config.max_connections);
        reply_error(&mut client, 503, "Service Unavailable", &reason);
        return None;
    }
    Some(client)
}

/// A client connection: on the unix socket, or accepted on a listener the bridge
/// handed over (a socket in the sandbox's network namespace).
trait Conn: Read + Write + AsFd + Send + Sized + 'static {
    fn duplicate(&self) -> std::io::Result<Self>;
    fn close_write(&self);
    fn set_timeout(&self, timeout: Option<Duration>);
}

impl Conn for UnixStream {
    fn duplicate(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
    fn close_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
    fn set_timeout(&self, timeout: Option<Duration>) {
        let _ = self.set_read_timeout(timeout);
    }
}

impl Conn for TcpStream {
    fn duplicate(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
    fn close_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
    fn set_timeout(&self, timeout: Option<Duration>) {
        let _ = self.set_read_timeout(timeout);
    }
}

/// What the bridge sends, with its listening sockets attached, so that connections
/// inside the namespace reach this process without a relay in between:
/// `LISTEN <role>...\n`, one role per socket: the proxy port, a host port, or
/// `name:port` for the resolver's listener of an allowed name.
pub const LISTEN: &str = "LISTEN";

/// A connection on the unix socket: the bridge handing its listeners over, or a client.
fn serve_unix(client: UnixStream, config: &Arc<ProxyConfig>, open: &Open) {
    client.set_timeout(Some(Duration::from_secs(30)));
    let Ok((first, fds)) = recv_first(&client) else { return };
    if fds.is_empty() {
        dispatch(client, first, config);
    } else if first == LISTEN.as_bytes()[0] {
        adopt_listeners(client, fds, config, open);
    }
    // Descriptors sent with anything else are closed unused.
}

/// Reads the first byte and the descriptors sent with it.
fn recv_first(client: &UnixStream) -> std::io::Result<(u8, Vec<OwnedFd>)> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut control = [0u64; 32];
    // SAFETY: a zeroed msghdr is valid; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    let received = loop {
        // SAFETY: msg describes buffers owned by this frame.
        let received = unsafe { libc::recvmsg(client.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if received < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break received;
    };
    if received <= 0 {
        return Err(std::io::Error::other("no request"));
    }
    let mut fds = Vec::new();
    // SAFETY: walking the control messages recvmsg filled in, within msg_controllen;
    // each SCM_RIGHTS descriptor is new to this process and owned once.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<i32>();
                let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<i32>();
                for idx in 0..count {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(idx))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((byte[0], fds))
}

/// What connections on an adopted listener are.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    Proxy,
    HostPort(u16),
    /// A listener of the resolver's: connections go to this name and port.
    Transparent(String, u16),
}

impl Role {
    fn parse(word: &str) -> Option<Role> {
        match word.rsplit_once(':') {
            Some((name, port)) if !name.is_empty() => Some(Role::Transparent(name.to_owned(), port.parse().ok()?)),
            Some(_) => None,
            None => match word.parse().ok()? {
                runtime_layout::PROXY_PORT => Some(Role::Proxy),
                port => Some(Role::HostPort(port)),
            },
        }
    }
}

/// Takes over the bridge's listening sockets (`LISTEN <role>...`): each must be a
/// listening TCP socket; the proxy port's connections are served like the socket's,
/// a host port's go to `localhost:PORT` and a resolver listener's to its `name:port`,
/// each if the policy allows it. Answers `OK` or `ERR`.
fn adopt_listeners(mut client: UnixStream, fds: Vec<OwnedFd>, config: &Arc<ProxyConfig>, open: &Open) {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\n") && line.len() < 1024 {
        match client.read(&mut byte) {
            Ok(1) => line.push(byte[0]),
            _ => return,
        }
    }
    let line = String::from_utf8_lossy(&line);
    let roles: Option<Vec<Role>> = line.trim_end().split(' ').skip(1).map(Role::parse).collect();
    let listening = |fd: &OwnedFd| util::socket_option(fd.as_raw_fd(), libc::SO_ACCEPTCONN) == Some(1);
    let Some(roles) = roles.filter(|roles| roles.len() == fds.len() && fds.iter().all(listening)) else {
        let _ = client.write_all(b"ERR expected LISTEN <role>... with as many listening sockets\n");
        return;
    };
    if open.listeners.fetch_add(fds.len(), Ordering::SeqCst) + fds.len() > MAX_LISTENERS {
        let _ = client.write_all(format!("ERR more than {MAX_LISTENERS} listeners in one session\n").as_bytes());
        return;
    }
    for (fd, role) in fds.into_iter().zip(roles) {
        let listener = std::net::TcpListener::from(fd);
        let (config, open) = (Arc::clone(config), Arc::clone(open));
        spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else {
                    thread::sleep(Duration::from_millis(50));
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let Some(stream) = admit(stream, &config, &open) else { continue };
                let (config, counted, role) = (Arc::clone(&config), Arc::clone(&open), role.clone());
                let served = spawn(move || {
                    match role {
                        Role::Proxy => serve(stream, &config),
                        Role::HostPort(port) => {
                            direct(stream, Attempt { host: LOCALHOST.into(), port, mode: Mode::HostPort }, &config);
                        }
                        Role::Transparent(host, port) => {
                            direct(stream, Attempt { host, port, mode: Mode::Transparent }, &config);
                        }
                    }
                    counted.connections.fetch_sub(1, Ordering::SeqCst);
                });
                if !served {
                    open.connections.fetch_sub(1, Ordering::SeqCst);
                }
            }
        });
    }
    let _ = client.write_all(b"OK\n");
}

/// Runs `work` on a thread of its own; `false` when the system gives no thread (the
/// work is dropped, and with it its connection): `thread::spawn` would panic instead,
/// and end the accept loop that asked while the proxy still looks alive.
fn spawn(work: impl FnOnce() + Send + 'static) -> bool {
    thread::Builder::new().spawn(work).is_ok()
}

/// A connection made to an address inside that stands for one destination (a host
/// port: the host's `127.0.0.1:PORT`; a resolver listener: its name and port), relayed
/// there if the policy allows it, else closed (the refusal audited).
fn direct(client: TcpStream, attempt: Attempt, config: &ProxyConfig) {
    match attempt.open(config) {
        Ok(upstream) => relay(client, upstream, &attempt, config, 0),
        Err((by_policy, reason)) => attempt.record(config, if by_policy { "blocked" } else { "failed" }, reason),
    }
}

impl Proxy {
    /// Stops accepting (connections already open run until either side closes). Never
    /// waits: the accepting thread ends when it wakes, or with the process.
    pub fn stop(self) {}
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the blocking accept, if the socket is still there.
        let _ = UnixStream::connect(&self.socket);
    }
}

/// How a connection came in (the audit's `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Connect,
    Http,
    Socks5,
    HostPort,
    /// A connection to an address the resolver inside gave a name.
    Transparent,
    /// A lookup by the resolver inside (recorded only when refused).
    Dns,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Connect => "connect",
            Mode::Http => "http",
            Mode::Socks5 => "socks5",
            Mode::HostPort => "host-port",
            Mode::Transparent => "transparent",
            Mode::Dns => "dns",
        }
    }
}

const HEAD_LIMIT: usize = 64 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

fn serve<C: Conn>(mut client: C, config: &ProxyConfig) {
    client.set_timeout(Some(Duration::from_secs(30)));
    let mut first = [0u8; 1];
    if client.read_exact(&mut first).is_err() {
        return;
    }
    dispatch(client, first[0], config);
}

fn dispatch<C: Conn>(client: C, first: u8, config: &ProxyConfig) {
    if first == 5 {
        socks5(client, config);
    } else {
        http(client, first, config);
    }
}

/// A request the policy answered and the proxy tried to carry out.
struct Attempt {
    host: String,
    port: u16,
    mode: Mode,
}

impl Attempt {
    fn record(&self, config: &ProxyConfig, result: &str, detail: String) {
        let target = if self.mode == Mode::Dns { self.host.clone() } else { format!("{}:{}", self.host, self.port) };
        if result == "blocked" {
            // Bounded: names are the agent's to invent.
            if let Ok(mut refused) = config.refused.lock().map_err(drop).and_then(|refused| {
                if refused.len() < 1000 || refused.contains_key(&target) {
                    Ok(refused)
                } else {
                    Err(())
                }
            }) {
                refused.entry(target.clone()).or_insert_with(|| detail.clone());
            }
        }
        let Some(path) = &config.audit_log else { return };
        let reason = format!("mode={} {detail}", self.mode.as_str());
        // A name that does not resolve or a host that does not answer is not the
        // policy's refusal: said so, so that `log` does not read like one.
        let policy = if result == "failed" { "network-unreachable" } else { "network-allowlist" };
        let event = audit::Event::new(&config.agent, "net", &target, result, policy, Some(reason));
        let _ = audit::append(path, &[event]);
    }

    /// Checks the policy, resolves and connects; the reason on refusal or failure
    /// (`true` when it is the policy's).
    fn open(&self, config: &ProxyConfig) -> Result<TcpStream, (bool, String)> {
        if let Verdict::Deny(reason) = config.policy.decide(&self.host, self.port) {
            return Err((true, reason));
        }
        let host = self.host.trim_end_matches('.').to_ascii_lowercase();
        let addrs: Vec<SocketAddr> = if host == LOCALHOST || host == "127.0.0.1" || host == "::1" {
            // hostPorts: the host's own loopback, nothing else.
            vec![SocketAddr::from(([127, 0, 0, 1], self.port))]
        } else if let Ok(addr) = host.parse::<IpAddr>() {
            // An address the allowlist names itself (the policy refuses any other).
            vec![SocketAddr::new(addr, self.port)]
        } else {
            let resolved: Vec<SocketAddr> = match config
                .hosts
                .iter()
                .filter(|(name, _)| *name == host)
                .map(|(_, addr)| *addr)
                .collect::<Vec<_>>()
            {
                fixed if !fixed.is_empty() => fixed.into_iter().map(|addr| SocketAddr::new(addr, self.port)).collect(),
                _ if !config.upstream.is_empty() => upstream::lookup(&host, &config.upstream)
                    .map_err(|err| (false, format!("{host}: cannot resolve: {err}")))?
                    .into_iter()
                    .map(|addr| SocketAddr::new(addr, self.port))
                    .collect(),
                _ => (host.as_str(), self.port)
                    .to_socket_addrs()
                    .map_err(|err| (false, format!("{host}: cannot resolve: {err}")))?
                    .collect(),
            };
            let mut reasons = Vec::new();
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|addr| match config.policy.check_address(addr.ip()) {
                    Ok(()) => true,
                    Err(reason) => {
                        reasons.push(reason);
                        false
                    }
                })
                .collect();
            if allowed.is_empty() {
                let why = reasons.into_iter().next().unwrap_or_else(|| "no address".into());
                return Err((true, format!("{host} {why}")));
            }
            allowed
        };
        let mut last = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Err(err) => last = Some(format!("{}:{}: {err}", self.host, self.port)),
            }
        }
        Err((false, last.unwrap_or_else(|| format!("{}:{}: no address to connect to", self.host, self.port))))
    }
}

fn http<C: Conn>(mut client: C, first: u8, config: &ProxyConfig) {
    let mut buffer = vec![first];
    let head_end = loop {
        if let Some(end) = find(&buffer, b"\r\n\r\n") {
            break end + 4;
        }
        if buffer.len() > HEAD_LIMIT {
            return reply_error(&mut client, 431, "Request Header Fields Too Large", "request head too large");
        }
        let mut chunk = [0u8; 4096];
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(len) => buffer.extend_from_slice(&chunk[..len]),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let rest = buffer[head_end..].to_vec();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return reply_error(&mut client, 400, "Bad Request", "not an HTTP proxy request");
    };
    if method == RESOLVE {
        return resolve(client, target, config);
    }
    let (mode, authority, path) = if method.eq_ignore_ascii_case("CONNECT") {
        (Mode::Connect, target.to_owned(), String::new())
    } else if let Some(after) = target.strip_prefix("http://") {
        let (authority, path) = after.find('/').map_or((after, "/"), |slash| (&after[..slash], &after[slash..]));
        (Mode::Http, authority.to_owned(), path.to_owned())
    } else {
        return reply_error(
            &mut client,
            400,
            "Bad Request",
            "expected CONNECT host:port or an absolute http:// URI (https goes through CONNECT)",
        );
    };
    let default_port = if mode == Mode::Connect { 443 } else { 80 };
    let Some((host, port)) = split_authority(&authority, default_port) else {
        return reply_error(&mut client, 400, "Bad Request", &format!("{authority:?} is not host:port"));
    };
    let attempt = Attempt { host, port, mode };
    let mut upstream = match attempt.open(config) {
        Ok(stream) => stream,
        Err((by_policy, reason)) => {
            attempt.record(config, if by_policy { "blocked" } else { "failed" }, reason.clone());
            let (code, text) = if by_policy { (403, "Forbidden") } else { (502, "Bad Gateway") };
            return reply_error(&mut client, code, text, &reason);
        }
    };
    let sent = if mode == Mode::Connect {
        client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").and_then(|()| upstream.write_all(&rest))
    } else {
        // origin-form request line, the client's headers minus the proxy's own, and one
        // request per connection: the next one may be for another host.
        let mut request = format!("{method} {path} {version}\r\n");
        for line in lines.filter(|line| !line.is_empty()) {
            let name = line.split(':').next().unwrap_or_default().trim().to_ascii_lowercase();
            if !["proxy-connection", "proxy-authorization", "connection", "keep-alive"].contains(&name.as_str()) {
                request.push_str(line);
                request.push_str("\r\n");
            }
        }
        request.push_str("Connection: close\r\n\r\n");
        upstream.write_all(request.as_bytes()).and_then(|()| upstream.write_all(&rest))
    };
    if sent.is_err() {
        return;
    }
    relay(client, upstream, &attempt, config, rest.len() as u64);
}

/// `RESOLVE name`: the ports the resolver inside may give `name` listeners on, or a
/// refusal (audited: a lookup of a refused name is an attempt too).
fn resolve<C: Conn>(mut client: C, name: &str, config: &ProxyConfig) {
    let ports = config.policy.allowed_ports(name);
    if ports.is_empty() {
        let reason = match config.policy.decide(name, DEFAULT_PORTS[1]) {
            Verdict::Deny(reason) => reason,
            Verdict::Allow(_) => format!("{name} is not a host name the resolver answers"),
        };
        Attempt { host: name.to_owned(), port: 53, mode: Mode::Dns }.record(config, "blocked", reason.clone());
        return reply_error(&mut client, 403, "Forbidden", &reason);
    }
    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
    let answer = format!(
        "HTTP/1.1 200 OK\r\n{PORTS_HEADER}: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ports.join(" ")
    );
    let _ = client.write_all(answer.as_bytes());
}

fn socks5<C: Conn>(mut client: C, config: &ProxyConfig) {
    // Greeting: VER(5, read already) NMETHODS METHODS…; only "no authentication".
    let mut count = [0u8; 1];
    if client.read_exact(&mut count).is_err() {
        return;
    }
    let mut methods = vec![0u8; usize::from(count[0])];
    if client.read_exact(&mut methods).is_err() {
        return;
    }
    if !methods.contains(&0) {
        let _ = client.write_all(&[5, 0xff]);
        return;
    }
    if client.write_all(&[5, 0]).is_err() {
        return;
    }
    // Request: VER CMD RSV ATYP ADDR PORT.
    let mut header = [0u8; 4];
    if client.read_exact(&mut header).is_err() || header[0] != 5 {
        return;
    }
    let host = match header[3] {
        1 => {
            let mut octets = [0u8; 4];
            if client.read_exact(&mut octets).is_err() {
                return;
            }
            IpAddr::from(octets).to_string()
        }
        3 => {
            let mut len = [0u8; 1];
            if client.read_exact(&mut len).is_err() {
                return;
            }
            let mut name = vec![0u8; usize::from(len[0])];
            if client.read_exact(&mut name).is_err() {
                return;
            }
            String::from_utf8_lossy(&name).into_owned()
        }
        4 => {
            let mut octets = [0u8; 16];
            if client.read_exact(&mut octets).is_err() {
                return;
            }
            IpAddr::from(octets).to_string()
        }
        _ => {
            let _ = client.write_all(&[5, 8, 0, 1, 0, 0, 0, 0, 0, 0]);
            return;
        }
    };
    let mut port = [0u8; 2];
    if client.read_exact(&mut port).is_err() {
        return;
    }
    let attempt = Attempt { host, port: u16::from_be_bytes(port), mode: Mode::Socks5 };
    if header[1] != 1 {
        attempt.record(config, "blocked", "only CONNECT is supported".into());
        let _ = client.write_all(&[5, 7, 0, 1, 0, 0, 0, 0, 0, 0]);
        return;
    }
    match attempt.open(config) {
        Ok(upstream) => {
            if client.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0]).is_ok() {
                relay(client, upstream, &attempt, config, 0);
            }
        }
        Err((by_policy, reason)) => {
            attempt.record(config, if by_policy { "blocked" } else { "failed" }, reason.clone());
            // 2: connection not allowed by ruleset; 4: host unreachable.
            let code = if by_policy { 2 } else { 4 };
            let _ = client.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0]);
            eprintln!("agent-sandbox: network: refused {}:{}: {reason}", attempt.host, attempt.port);
        }
    }
}

/// Copies both ways until both sides are done, then records the connection.
fn relay<C: Conn>(client: C, upstream: TcpStream, attempt: &Attempt, config: &ProxyConfig, already_out: u64) {
    let started = Instant::now();
    client.set_timeout(None);
    let (Ok(client_read), Ok(upstream_write)) = (client.duplicate(), upstream.try_clone()) else { return };
    let Ok(outbound) = thread::Builder::new().spawn(move || {
        let copied = util::splice::copy_socket(&client_read, &upstream_write);
        let _ = upstream_write.shutdown(Shutdown::Write);
        copied
    }) else {
        return;
    };
    let inbound = util::splice::copy_socket(&upstream, &client);
    client.close_write();
    let outbound = outbound.join().unwrap_or(0) + already_out;
    attempt.record(
        config,
        "allowed",
        format!("bytes_out={outbound} bytes_in={inbound} duration_ms={}", started.elapsed().as_millis()),
    );
}

fn reply_error(client: &mut impl Write, code: u16, text: &str, reason: &str) {
    // A header value is one line.
    let reason: String = reason.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let body = format!("agent-sandbox: {reason}\n");
    let response = format!(
        "HTTP/1.1 {code} {text}\r\nX-Proxy-Error: {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(response.as_bytes());
}

/// `host:port`, `[v6]:port` or a bare host (with `default_port`).
fn split_authority(authority: &str, default_port: u16) -> Option<(String, u16)> {
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(port) => port.parse().ok()?,
            None if after.is_empty() => default_port,
            None => return None,
        };
        return Some((host.to_owned(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_owned(), port.parse().ok()?)),
        None => Some((authority.to_owned(), default_port)),
    }
    .filter(|(host, _)| !host.is_empty())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

#[cfg(test)]
mod tests;
