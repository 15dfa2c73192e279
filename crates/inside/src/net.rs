//! The inside half of `network.mode = "allowlist"`. The sandbox's private network
//! namespace has only loopback; the one way out is the proxy's unix socket in the
//! read-only runtime directory (`RuntimeLayout::net_socket`), served by the `exec`
//! parent on the host, which decides everything. This side only carries bytes:
//!
//! - `bridge`: what bwrap starts in place of the command. It binds
//!   `127.0.0.1:PROXY_PORT` (what the proxy variables name) and `127.0.0.1:PORT` for
//!   each `hostPorts` entry, hands these listening sockets to the proxy over the socket
//!   (`SCM_RIGHTS`), so that the proxy accepts connections made inside the namespace
//!   itself, with no relay in between, then runs the command as its child and exits
//!   with its status.
//! - the resolver (`resolver.rs`), a thread of the bridge on `127.0.0.1:53`: allowed
//!   names get loopback addresses whose listeners the proxy takes over the same way.
//! - `connect HOST PORT`: stdin/stdout through `CONNECT HOST:PORT`, git's and ssh's
//!   `ProxyCommand`.
//!
//! Nothing here is trusted: the agent can kill the bridge (its connections then fail,
//! closed) or talk to the socket itself (the host side applies the same policy).

use std::{
    ffi::OsString,
    io::{Read, Write},
    net::{Shutdown, TcpListener, UdpSocket},
    os::unix::{net::UnixStream, process::CommandExt, process::ExitStatusExt},
    process::Command,
    thread,
};

use runtime_layout::{RuntimeLayout, PROXY_PORT, RESOLVER};

/// `agent-sandbox net-bridge [--resolver] [--host-port PORT]... -- CMD [ARGS...]`
/// (`--resolver`: run the resolver, in a namespace whose low ports it may bind); returns
/// the exit code (the command's, or 128 + the signal that ended it).
pub fn bridge(args: &[OsString]) -> i32 {
    let mut host_ports = Vec::new();
    let mut resolver = false;
    let mut rest = args.iter();
    loop {
        match rest.next().and_then(|arg| arg.to_str()) {
            Some("--resolver") => resolver = true,
            Some("--host-port") => match rest.next().and_then(|port| port.to_str()?.parse::<u16>().ok()) {
                Some(port) => host_ports.push(port),
                None => return usage(),
            },
            Some("--") => break,
            _ => return usage(),
        }
    }
    let command: Vec<&OsString> = rest.collect();
    let Some((program, command_args)) = command.split_first() else { return usage() };
    let mut listeners = Vec::new();
    for port in std::iter::once(PROXY_PORT).chain(host_ports.iter().copied()) {
        match TcpListener::bind(("127.0.0.1", port)) {
            Ok(listener) => listeners.push((listener, port.to_string())),
            Err(err) => {
                eprintln!("agent-sandbox: network: cannot listen on 127.0.0.1:{port} inside the sandbox: {err}");
                return 126;
            }
        }
    }
    // The proxy accepts on these sockets itself (no relay in between); the bridge's own
    // copies close when it has handed them over.
    if let Err(err) = crate::handover::hand_over(&listeners) {
        eprintln!(
            "agent-sandbox: network: cannot hand the sandbox's listeners to the proxy ({err}): the sandbox has no \
             network"
        );
    }
    drop(listeners);
    // The resolver for programs that ignore the proxy variables. Port 53 needs the
    // namespace's `ip_unprivileged_port_start` at 0, which `exec` sets before bwrap
    // starts (`sandbox::netns`); without it, only proxy-aware programs have a network.
    match resolver.then(|| UdpSocket::bind((std::net::Ipv4Addr::from(RESOLVER), 53))) {
        None => {}
        Some(Ok(socket)) => {
            thread::spawn(move || crate::resolver::serve(socket));
        }
        Some(Err(err)) => eprintln!(
            "agent-sandbox: network: no resolver inside the sandbox ({err}): only programs that use the proxy \
             variables can reach allowed hosts"
        ),
    }
    // The terminal's ^C and ^\ are the command's to handle; the bridge outlives them (the
    // command gets the default dispositions back).
    // SAFETY: signal(2) with SIG_IGN/SIG_DFL; the pre_exec closure only calls signal(2),
    // which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
    let mut child = Command::new(program);
    child.args(command_args);
    // SAFETY: see above.
    unsafe {
        child.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
    let status = match child.spawn().and_then(|mut child| child.wait()) {
        Ok(status) => status,
        Err(err) => {
            eprintln!("agent-sandbox: cannot run {}: {err}", program.to_string_lossy());
            return if err.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
        }
    };
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn usage() -> i32 {
    eprintln!("agent-sandbox: usage: agent-sandbox net-bridge [--resolver] [--host-port PORT]... -- CMD [ARGS...]");
    2
}

/// `agent-sandbox net-connect HOST PORT`: stdin and stdout through the proxy to
/// HOST:PORT (ssh's `ProxyCommand`); exit status 1 with the proxy's reason on refusal.
pub fn connect(args: &[OsString]) -> i32 {
    let (Some(host), Some(port)) =
        (args.first().and_then(|host| host.to_str()), args.get(1).and_then(|port| port.to_str()?.parse::<u16>().ok()))
    else {
        eprintln!("agent-sandbox: usage: agent-sandbox net-connect HOST PORT");
        return 2;
    };
    let mut proxy = match UnixStream::connect(RuntimeLayout::inside().net_socket()) {
        Ok(proxy) => proxy,
        Err(err) => {
            eprintln!("agent-sandbox: network: no proxy in this sandbox ({err}); is network.mode \"allowlist\"?");
            return 1;
        }
    };
    if let Err(reason) = open_tunnel(&mut proxy, host, port) {
        eprintln!("agent-sandbox: network: {host}:{port}: {reason}");
        return 1;
    }
    let Ok(proxy_write) = proxy.try_clone() else { return 1 };
    thread::spawn(move || {
        util::splice::copy_stream(&std::io::stdin(), &proxy_write);
        let _ = proxy_write.shutdown(Shutdown::Write);
    });
    util::splice::copy_stream(&proxy, &std::io::stdout());
    0
}

/// Sends `CONNECT host:port` and reads the answer's head; the proxy's reason on refusal.
fn open_tunnel(proxy: &mut UnixStream, host: &str, port: u16) -> Result<(), String> {
    proxy
        .write_all(format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n").as_bytes())
        .map_err(|err| err.to_string())?;
    // Byte by byte: whatever follows the head belongs to the tunnel.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 64 * 1024 || proxy.read(&mut byte).map_err(|err| err.to_string())? == 0 {
            return Err("the proxy closed the connection".into());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    if head.starts_with("HTTP/1.1 200") {
        return Ok(());
    }
    let reason = head
        .lines()
        .find_map(|line| line.strip_prefix("X-Proxy-Error: "))
        .unwrap_or_else(|| head.lines().next().unwrap_or_default());
    Err(reason.to_owned())
}
