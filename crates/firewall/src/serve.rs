//! The proxy's process in a container: the same proxy `exec` runs on the host
//! (`netproxy`: HTTP CONNECT, absolute-URI HTTP, SOCKS5, `RESOLVE`, per-name listeners)
//! and the same filtering resolver the bubblewrap sandbox has (`inside::resolver`),
//! run as [`crate::NET_USER`], the one user the firewall lets out. The agent cannot
//! signal, trace or replace it (another uid), nor write the policy it reads.
//!
//! `apply` (root) binds what it listens on (the unix socket programs and the resolver
//! reach it by, `127.0.0.1:PROXY_PORT`, `127.0.0.1:53`) and starts `agent-sandbox
//! firewall serve` with them as descriptors 3, 4 and 5, as that user, in a session of
//! its own with a clean environment; `apply` stops the previous one first.

use std::{
    ffi::OsString,
    net::{IpAddr, SocketAddr, TcpListener, UdpSocket},
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd},
        unix::{fs::PermissionsExt as _, net::UnixListener, process::CommandExt as _},
    },
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use runtime_layout::{RuntimeLayout, PROXY_PORT};

use crate::Error;

/// Where the proxy's process writes what goes wrong, and its audit (one JSON line per
/// connection, allowed or refused).
pub const LOG_DIR: &str = "/var/log/agent-sandbox";

/// The `/etc/resolv.conf` that names the filtering resolver (its first line is what
/// `apply` recognises its own file by).
pub fn resolv_conf() -> String {
    "# agent-sandbox: the filtering resolver of the container's proxy answers only the names network.allow \
     allows\nnameserver 127.0.0.1\noptions timeout:2 attempts:2\n"
        .into()
}

/// Where `apply` puts the policy files it read, for the proxy to read the very same
/// ones (root-owned, readable by everyone: the project's own may not be readable by
/// the proxy's user).
pub const POLICY_COPY: &str = "/run/agent-sandbox/policy";

fn policy_copy_dirs() -> [PathBuf; 2] {
    [Path::new(POLICY_COPY).join("image"), Path::new(POLICY_COPY).join("project")]
}

/// The proxy user's uid and gid.
pub fn net_user() -> Result<(u32, u32), Error> {
    lookup_user().ok_or_else(|| {
        Error::Proxy(format!(
            "the image has no user {} for the proxy (rebuild it with the current agent-sandbox Feature)",
            crate::NET_USER
        ))
    })
}

fn lookup_user() -> Option<(u32, u32)> {
    util::users::lookup(crate::NET_USER)
}

/// The processes of the proxy user: their count (`None`: no such user).
pub fn running() -> Option<usize> {
    let (uid, _) = lookup_user()?;
    Some(util::users::processes_of(uid).len())
}

/// Ends every process of the proxy user (nothing else runs as it) and waits for them.
pub fn stop() {
    if let Some((uid, _)) = lookup_user() {
        util::users::kill_all(uid, Duration::from_secs(5));
    }
}

/// As root: copies the policy's files for the proxy, binds its sockets and starts its
/// process as `uid`/`gid`.
pub fn start(uid: u32, gid: u32, upstream: &[IpAddr], policy: &crate::Policy) -> Result<Child, Error> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let copies = Path::new(POLICY_COPY);
    match std::fs::remove_dir_all(copies) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(io(copies)(err)),
        _ => {}
    }
    for dir in policy_copy_dirs() {
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    }
    // Whatever the umask: the trust check wants root's 0755 all the way up.
    let mut dirs: Vec<PathBuf> = policy_copy_dirs().into();
    dirs.extend([copies.to_path_buf(), copies.parent().expect("under /run").to_path_buf()]);
    for dir in &dirs {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(io(dir))?;
    }
    for (source, layer) in &policy.layers {
        let copy = policy_copy_dirs()[usize::from(*layer)].join("config.jsonc");
        std::fs::copy(source, &copy).map_err(io(&copy))?;
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o644)).map_err(io(&copy))?;
    }
    let socket = RuntimeLayout::inside().net_socket();
    let dir = socket.parent().expect("the socket has a directory");
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(io(dir))?;
    match std::fs::remove_file(&socket) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(io(&socket)(err)),
        _ => {}
    }
    let unix = UnixListener::bind(&socket).map_err(io(&socket))?;
    // Everyone connects: the agent's programs, the resolver, git's ProxyCommand.
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).map_err(io(&socket))?;
    let proxy_addr = SocketAddr::from(([127, 0, 0, 1], PROXY_PORT));
    let tcp = TcpListener::bind(proxy_addr)
        .map_err(|err| Error::Proxy(format!("cannot listen on {proxy_addr}: {err} (is something else there?)")))?;
    let dns_addr = SocketAddr::from(([127, 0, 0, 1], 53));
    let udp = UdpSocket::bind(dns_addr)
        .map_err(|err| Error::Proxy(format!("cannot listen on {dns_addr}/udp: {err} (is another resolver there?)")))?;
    let logs = Path::new(LOG_DIR);
    std::fs::create_dir_all(logs).map_err(io(logs))?;
    std::fs::set_permissions(logs, std::fs::Permissions::from_mode(0o755)).map_err(io(logs))?;
    let log_path = logs.join("proxy.log");
    let log = std::fs::OpenOptions::new().create(true).append(true).open(&log_path).map_err(io(&log_path))?;
    for path in [log_path.clone(), logs.join("network.jsonl")] {
        if !path.exists() {
            std::fs::write(&path, "").map_err(io(&path))?;
        }
        std::os::unix::fs::chown(&path, Some(uid), Some(gid)).map_err(io(&path))?;
    }
    let exe = std::env::current_exe().map_err(|source| Error::Io { path: "/proc/self/exe".into(), source })?;
    let mut command = Command::new(exe);
    command.args(["firewall", "serve"]);
    for server in upstream {
        command.arg("--upstream").arg(server.to_string());
    }
    let fds = [unix.as_raw_fd(), tcp.as_raw_fd(), udp.as_raw_fd()];
    let unblock = blocked_set();
    command
        .env_clear()
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(io(&log_path))?)
        .stderr(log)
        .uid(uid)
        .gid(gid);
    // SAFETY: only async-signal-safe calls (fcntl, dup2, close, setsid) between fork and exec.
    unsafe {
        command.pre_exec(move || {
            // Out of the way first (a source may be 3, 4 or 5 already), then in place,
            // which clears close-on-exec.
            let mut high = [0; 3];
            for (idx, fd) in fds.iter().enumerate() {
                high[idx] = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 10);
                if high[idx] < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for (idx, fd) in high.iter().enumerate() {
                if libc::dup2(*fd, 3 + idx as i32) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            libc::setsid();
            libc::sigprocmask(libc::SIG_UNBLOCK, &unblock, std::ptr::null_mut());
            Ok(())
        });
    }
    command.spawn().map_err(|err| Error::Proxy(format!("cannot start the proxy: {err}")))
}

/// `agent-sandbox firewall serve [--upstream IP]...`: the proxy's process, with the
/// sockets `start` bound as descriptors 3 (unix), 4 (TCP) and 5 (UDP). Never returns
/// unless it cannot start.
pub fn serve(args: &[OsString]) -> Result<(), Error> {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } == 0 {
        return Err(Error::Proxy("the proxy never runs as root (`firewall apply` starts it)".into()));
    }
    let mut upstream = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match (arg.to_str(), rest.next().and_then(|value| value.to_str()?.parse::<IpAddr>().ok())) {
            (Some("--upstream"), Some(ip)) => upstream.push(SocketAddr::new(ip, 53)),
            _ => return Err(Error::Proxy("usage: agent-sandbox firewall serve [--upstream IP]...".into())),
        }
    }
    let [image, project] = policy_copy_dirs();
    let policy = crate::load(&[&image, &project])?;
    let socket_type = |fd: i32| util::socket_option(fd, libc::SO_TYPE);
    if socket_type(3) != Some(libc::SOCK_STREAM)
        || socket_type(4) != Some(libc::SOCK_STREAM)
        || socket_type(5) != Some(libc::SOCK_DGRAM)
    {
        return Err(Error::Proxy("descriptors 3, 4 and 5 are not the proxy's sockets".into()));
    }
    // SAFETY: the descriptors were checked to be sockets of these kinds and are owned by
    // this process from here on.
    let (unix, tcp, udp) = unsafe {
        (
            UnixListener::from(OwnedFd::from_raw_fd(3)),
            TcpListener::from(OwnedFd::from_raw_fd(4)),
            UdpSocket::from(OwnedFd::from_raw_fd(5)),
        )
    };
    let config = netproxy::ProxyConfig {
        policy: policy.net,
        hosts: Vec::new(),
        audit_log: Some(Path::new(LOG_DIR).join("network.jsonl")),
        agent: "container".into(),
        max_connections: netproxy::MAX_CONNECTIONS,
        upstream,
        refused: Default::default(),
    };
    let _proxy = netproxy::start(unix, RuntimeLayout::inside().net_socket(), config);
    inside::handover::hand_over(&[(tcp, PROXY_PORT.to_string())])
        .map_err(|err| Error::Proxy(format!("cannot hand the proxy port to the proxy: {err}")))?;
    eprintln!("agent-sandbox: proxy and resolver serving");
    inside::resolver::serve(udp);
    Ok(())
}

/// The signals a terminal or `sudo` can deliver, blocked for an apply and unblocked
/// again in the proxy's process.
pub(crate) fn blocked_set() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a set this frame owns.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in
            [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU]
        {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}
