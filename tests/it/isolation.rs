//! Process, /tmp, privilege, terminal, socket and network isolation.

use std::{
    io::{Read, Write},
    net::TcpListener,
    os::unix::net::UnixListener,
    process::Command,
    time::Duration,
};

use crate::support::{require_bwrap, World};

#[test]
fn host_processes_are_invisible_and_unsignalable() {
    require_bwrap!();
    let world = World::new();
    let mut sleeper = Command::new("sleep").arg("31337").spawn().expect("sleep");
    let pid = sleeper.id();
    let out = world
        .sh(&[], &format!("ps -eo args | grep -c '[s]leep 31337'; kill -0 {pid} 2>/dev/null && echo SIGNALLED; ls /proc | grep -c '^[0-9]'"))
        .ok();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "0", "{out}");
    assert!(!out.contains("SIGNALLED"), "{out}");
    let processes: usize = lines[1].parse().expect("a count");
    assert!(processes < 10, "only the sandbox's own processes are in /proc: {out}");
}

#[test]
fn tmp_is_private() {
    require_bwrap!();
    let world = World::new();
    let host_file = format!("/tmp/as-it-host-{}", std::process::id());
    fs_err::write(&host_file, "host").expect("write");
    let out = world
        .sh(
            &[],
            &format!(
                "cat {host_file} 2>/dev/null && echo SEEN; echo inside > /tmp/as-it-inside-{0} && echo wrote",
                std::process::id()
            ),
        )
        .ok();
    let _ = fs_err::remove_file(&host_file);
    assert_eq!(out, "wrote\n");
    assert!(!std::path::Path::new(&format!("/tmp/as-it-inside-{}", std::process::id())).exists());
}

#[test]
fn no_new_privileges_no_capabilities_no_user_namespaces() {
    require_bwrap!();
    let world = World::new();
    let out = world
        .sh(
            &[],
            "grep -E '^(NoNewPrivs|CapEff|CapPrm|CapBnd)' /proc/self/status | tr -s '\\t ' ' '; \
             unshare -U true 2>/dev/null && echo USERNS; unshare -Ur true 2>/dev/null && echo ROOTNS; \
             bwrap --ro-bind / / true 2>/dev/null && echo NESTED; true",
        )
        .ok();
    assert_eq!(out, "CapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapBnd: 0000000000000000\nNoNewPrivs: 1\n");
}

/// Runs `cmd` with a new pseudo-terminal as its controlling terminal and stdin.
fn with_controlling_tty(cmd: &[&str], world: &World) -> String {
    let script = r#"
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
out = b""
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
"#;
    let mut command = world.cmd();
    command.cmd = Command::new("python3");
    command.cmd.arg("-c").arg(script).args(cmd).current_dir(&world.project);
    command.cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin").env("HOME", &world.home);
    command.cmd.env("XDG_STATE_HOME", world.path("xdg-state"));
    command.run().ok()
}

const INJECT: &str = "import fcntl, termios\ntry:\n    fcntl.ioctl(0, termios.TIOCSTI, b'#')\n    print('INJECTED')\nexcept OSError as err:\n    print('refused', err.errno)\n";

#[test]
fn keystrokes_cannot_be_injected_into_the_terminal() {
    require_bwrap!();
    let world = World::new();
    let legacy = fs_err::read_to_string("/proc/sys/dev/tty/legacy_tiocsti").unwrap_or_default();
    if legacy.trim() == "1" {
        // The attack works on this machine without the guard...
        let raw = with_controlling_tty(
            &[
                "bwrap",
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--unshare-all",
                "--",
                "python3",
                "-c",
                INJECT,
            ],
            &world,
        );
        assert!(raw.contains("INJECTED"), "control: {raw}");
    } else {
        eprintln!("note: legacy_tiocsti is off here, so the kernel refuses TIOCSTI even without the guard");
    }
    // ...and is refused inside agent-sandbox.
    let bin = crate::support::BIN.as_str();
    let out = with_controlling_tty(&[bin, "exec", "--", "python3", "-c", INJECT], &world);
    assert!(out.contains("refused 1"), "{out}");
    // The terminal itself still works for the sandboxed program.
    let out = with_controlling_tty(
        &[bin, "exec", "--", "sh", "-c", "test -t 0 && stty size >/dev/null && echo tty-ok"],
        &world,
    );
    assert!(out.contains("tty-ok"), "{out}");
}

fn unix_server(path: &std::path::Path) -> std::thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).expect("bind unix socket");
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    let _ = stream.write_all(b"HOST-SOCKET\n");
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    })
}

const CONNECT: &str = "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(sys.argv[1])\n    print('CONNECTED', s.recv(64))\nexcept OSError as err:\n    print('unreachable', err.errno)\n";

#[test]
fn host_unix_sockets_are_unreachable_with_network_on_and_off() {
    require_bwrap!();
    let world = World::new();
    // Stand-ins for the Docker socket and an ssh-agent socket, outside the project.
    let docker = world.path("run/docker.sock");
    let agent = world.path("home/.ssh/agent.sock");
    fs_err::create_dir_all(docker.parent().expect("parent")).expect("mkdir");
    fs_err::create_dir_all(agent.parent().expect("parent")).expect("mkdir");
    let _servers = [unix_server(&docker), unix_server(&agent)];
    // The servers answer outside the sandbox.
    let control = Command::new("python3").args(["-c", CONNECT]).arg(&docker).output().expect("python");
    assert!(String::from_utf8_lossy(&control.stdout).contains("CONNECTED"));
    for network in ["on", "off"] {
        for socket in [&docker, &agent] {
            let mut cmd = world.cmd();
            cmd.env("SSH_AUTH_SOCK", &agent);
            let out = cmd.args(["exec", "--network", network, "--", "python3", "-c", CONNECT]).arg(socket).run().ok();
            assert!(out.starts_with("unreachable"), "--network {network} {}: {out}", socket.display());
        }
    }
}

#[test]
fn network_off_cuts_the_host_loopback_and_network_on_keeps_it() {
    require_bwrap!();
    let world = World::new();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let server = std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let _ = stream.write_all(b"HELLO\n");
            let mut sink = Vec::new();
            let _ = stream.read_to_end(&mut sink);
        }
    });
    let probe = format!(
        "import socket\ntry:\n    s = socket.create_connection(('127.0.0.1', {port}), timeout=3)\n    print('reached', s.recv(16))\nexcept OSError as err:\n    print('unreachable', err.errno)\n"
    );
    let off = world.cmd().args(["exec", "--network", "off", "--", "python3", "-c", &probe]).run().ok();
    assert!(off.starts_with("unreachable"), "{off}");
    let on = world.cmd().args(["exec", "--network", "on", "--", "python3", "-c", &probe]).run().ok();
    assert!(on.starts_with("reached b'HELLO"), "{on}");
    let _ = server.join();
}

#[test]
fn host_abstract_unix_sockets_are_unreachable_even_with_the_network_on() {
    require_bwrap!();
    let world = World::new();
    let name = format!("\0as-it-abstract-{}", std::process::id());
    let addr = <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
        &name.as_bytes()[1..],
    )
    .expect("abstract address");
    let listener = UnixListener::bind_addr(&addr).expect("bind abstract socket");
    let probe = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect('\\0{}')\n    print('CONNECTED')\nexcept OSError as err:\n    print('unreachable', err.errno)\n",
        &name[1..]
    );
    // Control: the socket answers on the host.
    let control = Command::new("python3").args(["-c", &probe]).output().expect("python");
    assert_eq!(String::from_utf8_lossy(&control.stdout), "CONNECTED\n");
    for network in ["on", "off"] {
        let out = world.cmd().args(["exec", "--network", network, "--", "python3", "-c", &probe]).run().ok();
        assert!(out.starts_with("unreachable"), "--network {network}: {out}");
    }
    // Abstract sockets the sandbox makes for itself keep working.
    let own = "import socket, os\na = socket.socket(socket.AF_UNIX); a.bind('\\0own'); a.listen(1)\nb = socket.socket(socket.AF_UNIX); b.connect('\\0own'); print('own-ok')\n";
    assert_eq!(world.cmd().args(["exec", "--", "python3", "-c", own]).run().ok(), "own-ok\n");
    drop(listener);
}
