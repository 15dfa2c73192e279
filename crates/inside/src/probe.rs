//! `agent-sandbox probe` (hidden): what `agent-sandbox test` runs inside a real sandbox to
//! look at it from the agent's side. It takes what to look at from its one argument (JSON,
//! written by `test` on the host) and prints one JSON object of observations; judging
//! them against the configuration is the host's job. Every probe is an attempt an agent
//! could make: reading hidden and masked paths, writing git metadata, connecting to
//! host sockets, `TIOCSTI`, running git with `--no-verify` and `--force`. An attempt that
//! unexpectedly succeeds in writing is undone at once.
//!
//! [`container`] is the same inside a container sandbox (the Feature's image), where
//! `test` runs it in process as the agent's user: the marker, the git guard, the
//! read-only paths, the firewall (a connection to an address never routed) and the
//! tool guard's managed files.

use std::{
    io::Read as _,
    os::unix::fs::{MetadataExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
};

use serde_json::{json, Value};

/// Runs the probes described by `spec`; prints the observations. Exit status 0, or 2
/// for a spec it cannot read.
pub fn run(spec: &str) -> i32 {
    let Ok(spec) = serde_json::from_str::<Value>(spec) else {
        eprintln!("agent-sandbox probe: the argument is not JSON");
        return 2;
    };
    let paths = |key: &str| -> Vec<PathBuf> {
        spec[key].as_array().into_iter().flatten().filter_map(Value::as_str).map(PathBuf::from).collect()
    };
    let hidden: Vec<Value> =
        paths("hidden").iter().map(|path| json!({ "path": path, "visible": visible(path) })).collect();
    let masked: Vec<Value> = paths("masked")
        .iter()
        .map(|path| json!({ "path": path, "empty": reads_empty(path), "writable": writable(path) }))
        .collect();
    let sockets: Vec<Value> =
        paths("sockets").iter().map(|path| json!({ "path": path, "visible": path.exists() })).collect();
    let abstract_reachable = spec["abstract"].as_str().is_some_and(|name| {
        use std::os::linux::net::SocketAddrExt as _;
        std::os::unix::net::SocketAddr::from_abstract_name(name)
            .and_then(|addr| std::os::unix::net::UnixStream::connect_addr(&addr))
            .is_ok()
    });
    let tcp_reachable = spec["tcp"].as_u64().is_some_and(|port| {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], u16::try_from(port).unwrap_or(0)));
        std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)).is_ok()
    });
    let canary_present = spec["canary"].as_str().is_some_and(|name| std::env::var_os(name).is_some());
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status.lines().find_map(|line| line.strip_prefix(name)).map(str::trim).unwrap_or_default().to_owned()
    };
    let git = spec["git"].as_str().map(Path::new).map(git_facts);
    // Last, after the slower probes: what the allowlist's proxy and resolver answer.
    let allowlist = spec["allowlist"].is_object().then(|| allowlist(&spec["allowlist"]));
    // Written into each shared cache; the host looks for it in its own afterwards.
    let marker = spec["cacheMarker"].as_str().unwrap_or(".agent-sandbox-test");
    for cache in paths("caches") {
        let _ = std::fs::write(cache.join(marker), "written inside agent-sandbox test\n");
    }
    let observations = json!({
        "hidden": hidden,
        "masked": masked,
        "sockets": sockets,
        "abstractReachable": abstract_reachable,
        "tcpReachable": tcp_reachable,
        "canaryPresent": canary_present,
        "tiocstiErrno": tiocsti_errno(),
        "seccomp": field("Seccomp:"),
        "noNewPrivs": field("NoNewPrivs:"),
        "marker": runtime_layout::detect() == runtime_layout::Where::Bubblewrap,
        "git": git,
        "allowlist": allowlist,
    });
    println!("{observations}");
    0
}

/// Allowlist mode, as an agent meets it: a name off the list looked up (the resolver
/// inside must give it no address) and asked of the proxy (`CONNECT`: a `403`), a raw
/// address asked of the proxy (a `403`) and connected to directly (no route). An answer
/// at all shows the proxy is running; a `403` with its reason, that it decides.
fn allowlist(spec: &Value) -> Value {
    let name = spec["offList"].as_str().unwrap_or("agent-sandbox-test.invalid");
    let address = spec["rawAddress"].as_str().unwrap_or("192.0.2.1");
    let resolved: Vec<String> = std::net::ToSocketAddrs::to_socket_addrs(&(name, 443))
        .map(|addrs| addrs.map(|addr| addr.ip().to_string()).collect())
        .unwrap_or_default();
    let direct = address.parse::<std::net::IpAddr>().map(|ip| {
        match std::net::TcpStream::connect_timeout(&(ip, 443).into(), std::time::Duration::from_secs(2)) {
            Ok(_) => json!({ "connected": true }),
            Err(err) => json!({ "connected": false, "error": err.to_string() }),
        }
    });
    json!({
        "offList": { "name": name, "resolved": resolved, "proxy": proxy_answer(&format!("{name}:443")) },
        "rawAddress": {
            "address": address,
            "proxy": proxy_answer(&format!("{address}:443")),
            "direct": direct.unwrap_or(Value::Null),
        },
    })
}

/// `CONNECT target` on the proxy port inside: the status and `X-Proxy-Error` of the
/// answer, or why there was none (a proxy that is not running leaves the connection
/// unanswered or refused).
fn proxy_answer(target: &str) -> Value {
    use std::io::Write as _;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], runtime_layout::PROXY_PORT));
    let answer = (|| -> std::io::Result<String> {
        let mut stream = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2))?;
        stream.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
        stream.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())?;
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
            match stream.read(&mut byte)? {
                0 => break,
                _ => head.push(byte[0]),
            }
        }
        Ok(String::from_utf8_lossy(&head).into_owned())
    })();
    match answer {
        Ok(head) if !head.is_empty() => {
            let status = head.split_whitespace().nth(1).and_then(|code| code.parse::<u16>().ok());
            let reason = head.lines().find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("x-proxy-error").then(|| value.trim().to_owned())
            });
            json!({ "status": status, "reason": reason })
        }
        Ok(_) => json!({ "status": null, "error": "closed without an answer" }),
        Err(err) => json!({ "status": null, "error": err.to_string() }),
    }
}

/// The observations in a container: `spec` names the protected paths (relative to the
/// project's root: the repository's work tree around the current directory, else the
/// current directory), the address to connect to (`refusalProbe`, never routed), and the
/// managed files (`managed`). The repository's hooks directory is added to the
/// protected paths.
pub fn container(spec: &Value) -> Value {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let repo = gitfacts::discover(&cwd).ok();
    let work_tree = repo.as_ref().and_then(|repo| repo.workdir().map(Path::to_path_buf));
    let root = work_tree.clone().unwrap_or_else(|| cwd.clone());
    // With a session repository (`hostpush::home`) nothing in `.git` is the user's.
    let session = Path::new(runtime_layout::CONTAINER_USER_OBJECTS).is_dir();
    let mut protected: Vec<PathBuf> = spec["protected"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|rel| !(session && (*rel == ".git" || rel.starts_with(".git/"))))
        .map(|rel| root.join(rel))
        .collect();
    if let Some(hooks) = repo.as_ref().and_then(|repo| gitfacts::hooks_dir(repo).ok().flatten()) {
        if !(session && hooks.starts_with(root.join(".git"))) {
            protected.push(hooks);
        }
    }
    protected.sort();
    protected.dedup();
    // A parent that is not a mount point can be renamed, the read-only mount inside going
    // with it (`devcontainer::pinned_parents` binds each onto itself).
    let mount_points: Vec<PathBuf> = util::mounts::current().into_iter().map(|mount| mount.point).collect();
    let protected: Vec<Value> = protected
        .iter()
        .filter(|path| path.symlink_metadata().is_ok())
        .map(|path| {
            let changeable = if path.is_dir() { creatable(path) } else { writable(path) };
            let unpinned: Vec<&Path> = path
                .ancestors()
                .skip(1)
                .take_while(|parent| parent.starts_with(&root) && *parent != root)
                .filter(|parent| !mount_points.iter().any(|point| point == parent))
                .collect();
            json!({ "path": path, "writable": changeable, "unpinned": unpinned })
        })
        .collect();
    let git = work_tree.as_deref().map(|root| container_git(root, session));
    // The marker the Feature makes (`runtime_layout::detect` looks for it).
    let marker = Path::new("/.agent-sandbox");
    let refusal =
        spec["refusalProbe"].as_str().and_then(|addr| addr.parse::<std::net::SocketAddr>().ok()).map(|addr| {
            match std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(3)) {
                Ok(_) => json!({ "address": addr.to_string(), "connected": true, "errno": null }),
                Err(err) => json!({ "address": addr.to_string(), "connected": false, "errno": err.raw_os_error() }),
            }
        });
    // Routes out of the container besides loopback's (none on Docker's `none` network:
    // nothing can leave, whatever the rules, and the probe above finds no route).
    let routes = routes_out("/proc/net/route", |fields| fields.first().copied(), 1)
        + routes_out("/proc/net/ipv6_route", |fields| fields.last().copied(), 0);
    let managed: Vec<Value> = spec["managed"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|path| managed_file(Path::new(path)))
        .collect();
    json!({
        "marker": {
            "present": runtime_layout::detect() == runtime_layout::Where::Container,
            "rootOwned": marker.symlink_metadata().is_ok_and(|meta| meta.uid() == 0),
            "writable": writable(marker),
        },
        "git": git,
        "protected": protected,
        "refusal": refusal,
        "routes": routes,
        "managed": managed,
        "sudo": sudo(),
    })
}

/// The repository's facts in a container: its metadata, the guard, and where pushes go.
fn container_git(root: &Path, session: bool) -> Value {
    let mut facts = git_facts(root);
    facts["root"] = json!(root);
    facts["pushCredentials"] = json!(push_credentials(root));
    facts["session"] = json!(session.then(|| session_facts(root)));
    facts
}

/// The repository's facts in either sandbox: its metadata read-only, the guard in front
/// of git, and pushes answered by the host.
fn git_facts(root: &Path) -> Value {
    let answered = answered_by_host(root);
    json!({
        "configWritable": writable(&root.join(".git/config")),
        "hooksWritable": creatable(&root.join(".git/hooks")),
        "noVerifyRefused": refused(root, &["commit", "--no-verify", "--allow-empty", "--dry-run", "-m", "agent-sandbox test"]),
        "forcePushRefused": refused(root, &["push", "--force", "--dry-run", "agent-sandbox-test-no-such-remote", "HEAD"]),
        "pushAnsweredByHost": answered.is_ok(),
        "pushRefusedOtherwise": answered.err().flatten(),
    })
}

/// What sudo grants the agent's user without a password: `sudo -n -l`'s listing, and
/// whether `sudo -n true` ran (it runs only `true`, as root, when anything may).
fn sudo() -> Value {
    let run = |args: &[&str]| {
        // Parsed by `test`: in the C locale, whatever the agent's environment says.
        std::process::Command::new("sudo")
            .args(args)
            .env("LC_ALL", "C")
            .env_remove("LANGUAGE")
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
    };
    let list = run(&["-n", "-l"]);
    let listed = list.as_ref().filter(|out| out.status.success()).map(|out| String::from_utf8_lossy(&out.stdout));
    json!({
        "list": listed,
        "trueRan": run(&["-n", "true"]).is_some_and(|out| out.status.success()),
    })
}

/// The routes of a kernel routing table (`/proc/net/route`, `/proc/net/ipv6_route`)
/// through another interface than loopback; `interface` picks its name from a line's
/// fields, after `header` lines.
fn routes_out(table: &str, interface: for<'a> fn(&[&'a str]) -> Option<&'a str>, header: usize) -> usize {
    let text = std::fs::read_to_string(table).unwrap_or_default();
    text.lines()
        .skip(header)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            interface(&fields).is_some_and(|name| name != "lo")
        })
        .count()
}

/// A managed file: its owner and mode, its directory's, whether this user can change
/// either, and whether it runs the tool guard (and only managed hooks).
fn managed_file(path: &Path) -> Value {
    let owner = |path: &Path| {
        path.symlink_metadata().ok().map(|meta| json!({ "uid": meta.uid(), "mode": meta.mode() & 0o7777 }))
    };
    let dir = path.parent().unwrap_or(Path::new("/"));
    let text =
        util::fs::read_regular(path, 16 * 1024 * 1024).ok().map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    let runs_guard = text.as_deref().is_some_and(|text| {
        if path == Path::new(runtime_layout::CLAUDE_MANAGED_SETTINGS) {
            serde_json::from_str::<Value>(text).is_ok_and(|settings| {
                settings["allowManagedHooksOnly"] == true
                    && settings["hooks"]["PreToolUse"].as_array().into_iter().flatten().any(|entry| {
                        entry["hooks"].as_array().into_iter().flatten().any(|hook| {
                            hook["command"]
                                .as_str()
                                .is_some_and(|command| command.ends_with(" tool-guard --agent claude"))
                        })
                    })
            })
        } else if path == Path::new(runtime_layout::CODEX_REQUIREMENTS) {
            text.lines().any(|line| line.trim() == "allow_managed_hooks_only = true")
                && text.contains(" tool-guard --agent codex\"")
        } else {
            // The guard's settings: usable.
            serde_json::from_str::<guard_settings::ToolGuardSettings>(text).is_ok()
        }
    });
    json!({
        "path": path,
        "file": owner(path),
        "dir": owner(dir),
        "writable": writable(path),
        "dirWritable": creatable(dir),
        "runsGuard": runs_guard,
    })
}

/// Whether anything of `path` can be read: a file with content, a directory with entries.
fn visible(path: &Path) -> bool {
    match std::fs::symlink_metadata(path) {
        Err(_) => false,
        Ok(meta) if meta.is_dir() => std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_some()),
        Ok(_) => !reads_empty(path),
    }
}

fn reads_empty(path: &Path) -> bool {
    if path.is_dir() {
        return std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none());
    }
    let mut byte = [0u8; 1];
    match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path) {
        Ok(mut file) => file.read(&mut byte).is_ok_and(|len| len == 0),
        Err(_) => true,
    }
}

/// Whether `path` can be opened for writing (nothing is written).
/// What keeps the user's `.git` out of reach when `.git` is a session repository: it is
/// a mount of its own (the volume), the broker's directory cannot be listed, and
/// neither the user's objects nor its read-only view of the user's `.git` can be
/// written.
fn session_facts(root: &Path) -> Value {
    let git = root.join(".git");
    let mounted = util::mounts::current().iter().any(|mount| mount.point == git);
    json!({
        "gitIsMount": mounted,
        "homeListable": std::fs::read_dir(runtime_layout::CONTAINER_HOME_DIR).is_ok(),
        "objectsWritable": creatable(Path::new(runtime_layout::CONTAINER_USER_OBJECTS)),
        "userGitWritable": creatable(Path::new(runtime_layout::CONTAINER_USER_GIT)),
    })
}

fn writable(path: &Path) -> bool {
    !path.is_dir() && std::fs::OpenOptions::new().append(true).custom_flags(libc::O_NONBLOCK).open(path).is_ok()
}

/// Whether a new file can be made in `dir` (removed again at once).
fn creatable(dir: &Path) -> bool {
    let probe = dir.join(format!(".agent-sandbox-probe-{}", std::process::id()));
    let made = std::fs::OpenOptions::new().write(true).create_new(true).open(&probe).is_ok();
    if made {
        let _ = std::fs::remove_file(&probe);
    }
    made
}

/// Whether git (whatever `git` is on PATH inside) refuses `args` the way the guard does.
fn refused(root: &Path, args: &[&str]) -> bool {
    let out =
        std::process::Command::new("git").args(args).current_dir(root).stdin(std::process::Stdio::null()).output();
    out.is_ok_and(|out| {
        out.status.code() == Some(1) && String::from_utf8_lossy(&out.stderr).contains("agent-sandbox: refused")
    })
}

/// Whether `git push` is answered by the host's push service: a dry run to a remote
/// that is not configured is refused there, by the service's own words. `Err(Some)`:
/// the push was refused for another reason, in these words (a session repository
/// that no longer matches its repository refuses every push, and says why).
fn answered_by_host(root: &Path) -> Result<(), Option<String>> {
    let out = std::process::Command::new("git")
        .args(["push", "--dry-run", "agent-sandbox-test-no-such-remote", "HEAD"])
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|_| None)?;
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("agent-sandbox: push refused:") && err.contains("the host pushes only to those") {
        return Ok(());
    }
    let refusal = err.find("agent-sandbox: push refused:").map(|at| err[at..].trim().to_owned());
    Err(refusal)
}

/// What would let the agent's own git push past root's verifier in a container: an
/// ssh agent it can reach (`SSH_AUTH_SOCK`, VS Code's forwarded `/tmp/vscode-ssh-auth-*`
/// sockets) or a git credential helper in its configuration (VS Code installs one).
fn push_credentials(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(sock) = std::env::var_os("SSH_AUTH_SOCK").filter(|sock| !sock.is_empty()) {
        found.push(format!("SSH_AUTH_SOCK={}", sock.to_string_lossy()));
    }
    if let Ok(entries) = std::fs::read_dir("/tmp") {
        let mut sockets: Vec<String> = entries
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().starts_with("vscode-ssh-auth-"))
            .map(|entry| entry.path().display().to_string())
            .collect();
        sockets.sort();
        found.extend(sockets);
    }
    let helpers = std::process::Command::new("git")
        .args(["config", "--get-all", "credential.helper"])
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    if let Ok(out) = helpers {
        found.extend(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|line| !line.trim().is_empty())
                .map(|line| format!("credential.helper {line}")),
        );
    }
    found
}

/// The errno of `ioctl(0, TIOCSTI, "x")`: EPERM from the seccomp filter; without it
/// ENOTTY (stdin is no terminal) or success.
fn tiocsti_errno() -> i32 {
    let byte: libc::c_char = b'x' as libc::c_char;
    // SAFETY: TIOCSTI reads one byte through the pointer, which outlives the call.
    let res = unsafe { libc::ioctl(0, libc::TIOCSTI, &byte) };
    if res == 0 {
        0
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
    }
}
