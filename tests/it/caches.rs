//! `@caches` are overlays: what the sandbox writes into a shared package cache goes to
//! a layer of agent-sandbox's own (kept for the next session), reads fall through to the
//! host's cache, and the host's cache never receives the agent's files: a planted
//! `build.rs` in an extracted crate, or a module in Go's module cache, would run in the
//! user's next host build of any project.

use std::{
    io::{Read, Write},
    net::TcpListener,
    path::Path,
    sync::{Arc, Mutex},
};

use crate::support::{require_bwrap, World};

const CRATE_DIR: &str = "home/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f";
const BUILD_RS: &str = "evil-1.0.0/build.rs";
const GO_MOD: &str = "home/go/pkg/mod";
const GO_FILE: &str = "example.com/evil@v1.0.0/x.go";

fn layer(world: &World, name: &str) -> std::path::PathBuf {
    world.path("xdg-state/agent-sandbox/caches").join(name).join("upper")
}

#[test]
fn plants_in_shared_caches_never_reach_the_hosts_caches() {
    require_bwrap!();
    // With a network namespace made by agent-sandbox (allowlist) and without one (off).
    for network in ["allowlist", "off"] {
        plant_and_check(network);
    }
}

fn plant_and_check(network: &str) {
    let world = World::bare();
    // The host's caches as its tools left them: a crate extracted, Go's module cache.
    world.write(&format!("{CRATE_DIR}/serde-1.0.0/build.rs"), "fn main() {}\n");
    world.write(&format!("{GO_MOD}/cache/download/list"), "v1\n");
    let plant = format!(
        "set -e; cat ~/.cargo/registry/src/*/serde-1.0.0/build.rs; cat ~/go/pkg/mod/cache/download/list; \
         mkdir -p ~/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/evil-1.0.0 ~/go/pkg/mod/example.com/evil@v1.0.0; \
         echo 'fn main() {{ std::process::Command::new(\"sh\"); }}' > ~/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/{BUILD_RS}; \
         echo 'package evil' > ~/go/pkg/mod/{GO_FILE}; \
         echo '// changed' >> ~/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde-1.0.0/build.rs; \
         rm ~/go/pkg/mod/cache/download/list"
    );
    // `--dry-run` says what each cache becomes, and where its writes go.
    let dry = world.cmd().args(["exec", "--dry-run", "--", "true"]).run().ok();
    let line = format!(
        "# cache {}: overlay, the sandbox's writes go to {}\n",
        world.path("home/.cargo/registry").display(),
        layer(&world, ".cargo+registry").display()
    );
    assert!(dry.contains(&line), "{dry}");
    let out = world.sh(&["--network", network], &plant).ok();
    // The host's files are readable inside (the legitimate use: reuse downloads).
    assert_eq!(out, "fn main() {}\nv1\n");
    // Nothing reached the host's caches: no plant, no change, no deletion.
    assert!(!world.path(CRATE_DIR).join(BUILD_RS).exists(), "build.rs planted in the host's cargo registry");
    assert!(!world.path(GO_MOD).join(GO_FILE).exists(), "module planted in the host's Go module cache");
    assert_eq!(world.read(&format!("{CRATE_DIR}/serde-1.0.0/build.rs")), "fn main() {}\n");
    assert_eq!(world.read(&format!("{GO_MOD}/cache/download/list")), "v1\n");
    // They are in the sandbox's own layer, kept for its next session.
    assert!(layer(&world, ".cargo+registry").join("src/index.crates.io-1949cf8c6b5b557f").join(BUILD_RS).is_file());
    assert!(layer(&world, "go+pkg+mod").join(GO_FILE).is_file());
    let out = world.sh(&[], &format!("cat ~/go/pkg/mod/{GO_FILE}; ls ~/go/pkg/mod/cache/download")).ok();
    assert_eq!(out, "package evil\n");
}

/// A loopback npm registry with one package, `tiny`; counts the tarball requests.
fn registry(world: &World) -> Option<(u16, Arc<Mutex<usize>>)> {
    let package = world.write("pkg/package.json", r#"{"name":"tiny","version":"1.0.0","main":"index.js"}"#);
    world.write("pkg/index.js", "module.exports = 42;\n");
    let dir = package.parent().expect("parent").to_path_buf();
    let out = std::process::Command::new("npm")
        .args(["pack", "--json", "--pack-destination"])
        .arg(world.path(""))
        .current_dir(&dir)
        .env("HOME", world.path(""))
        .output();
    let out = match out {
        Ok(out) if out.status.success() => out,
        other => {
            assert!(std::env::var_os("CI").is_none(), "npm is needed in CI: {other:?}");
            eprintln!("skipping: npm pack failed here: {other:?}");
            return None;
        }
    };
    let packed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("npm pack --json");
    let integrity = packed[0]["integrity"].as_str().expect("integrity").to_owned();
    let tarball = fs_err::read(world.path("tiny-1.0.0.tgz")).expect("tarball");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback registry");
    let port = listener.local_addr().expect("addr").port();
    let tarballs = Arc::new(Mutex::new(0));
    let count = Arc::clone(&tarballs);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() <= 8192 {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_owned();
            let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
            let (status, body) = if path.ends_with(".tgz") {
                *count.lock().expect("lock") += 1;
                ("200 OK", tarball.clone())
            } else if path.trim_matches('/') == "tiny" {
                let document = serde_json::json!({
                    "name": "tiny",
                    "dist-tags": {"latest": "1.0.0"},
                    "versions": {"1.0.0": {"name": "tiny", "version": "1.0.0", "dist": {
                        "integrity": integrity,
                        "tarball": format!("http://127.0.0.1:{port}/tiny/-/tiny-1.0.0.tgz"),
                    }}},
                });
                ("200 OK", document.to_string().into_bytes())
            } else {
                ("404 Not Found", b"{}".to_vec())
            };
            let _ = write!(stream, "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = stream.write_all(&body);
        }
    });
    Some((port, tarballs))
}

/// Session 1 downloads a package with npm from a loopback registry; session 2's `npm ci`
/// into a fresh `node_modules` takes it from the cache (no tarball request), and the
/// host's npm cache never received it.
#[test]
fn a_second_session_reuses_the_first_sessions_downloads() {
    require_bwrap!();
    let world = World::bare();
    let Some((port, tarballs)) = registry(&world) else { return };
    fs_err::create_dir_all(world.path("home/.npm")).expect("the host's npm cache");
    world.write("home/proj/package.json", r#"{"name":"proj","version":"1.0.0"}"#);
    let npm = |args: &str| {
        let script = format!(
            "npm {args} --registry http://127.0.0.1:{port}/ --no-audit --no-fund --no-update-notifier --loglevel=error"
        );
        world.sh(&["--host-port", &port.to_string()], &script)
    };
    npm("install tiny").ok();
    assert_eq!(*tarballs.lock().expect("lock"), 1, "the first session downloads the package");
    assert!(world.path("home/proj/node_modules/tiny/index.js").is_file());
    fs_err::remove_dir_all(world.path("home/proj/node_modules")).expect("a fresh node_modules");
    npm("ci").ok();
    assert_eq!(*tarballs.lock().expect("lock"), 1, "the second session's npm ci downloaded again");
    assert!(world.path("home/proj/node_modules/tiny/index.js").is_file());
    // The download is in the sandbox's layer, not in the host's cache.
    assert!(layer(&world, ".npm").join("_cacache").is_dir());
    assert!(!world.path("home/.npm/_cacache").exists(), "the sandbox's download reached the host's npm cache");
}

/// A session that starts while another holds the layers stacks a layer of its own on
/// them: it sees the first session's files, its writes go neither to the shared layer nor
/// to the host, and its layer is gone when it ends.
#[test]
fn a_concurrent_session_writes_to_a_layer_of_its_own() {
    require_bwrap!();
    let world = World::bare();
    fs_err::create_dir_all(world.path("home/.cargo/registry")).expect("the host's cargo registry");
    let done = world.path("home/proj/done");
    let mut first = world.cmd();
    first.args(["exec", "--", "sh", "-c", "echo a > ~/.cargo/registry/a; while [ ! -e done ]; do sleep 0.05; done"]);
    let first = first.cmd.spawn().expect("the first session starts");
    // Ends the first session however this test ends.
    struct Ender<'a>(&'a Path);
    impl Drop for Ender<'_> {
        fn drop(&mut self) {
            let _ = fs_err::write(self.0, "");
        }
    }
    let ender = Ender(&done);
    let shared = layer(&world, ".cargo+registry");
    let started = std::time::Instant::now();
    while !shared.join("a").exists() {
        assert!(started.elapsed().as_secs() < 30, "the first session did not write its file");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = world.sh(&[], "cat ~/.cargo/registry/a; echo b > ~/.cargo/registry/b; cat ~/.cargo/registry/b").ok();
    drop(ender);
    let first = first.wait_with_output().expect("the first session ends");
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert_eq!(out, "a\nb\n");
    assert!(!shared.join("b").exists(), "the concurrent session wrote into the shared layer");
    assert!(!world.path("home/.cargo/registry/a").exists() && !world.path("home/.cargo/registry/b").exists());
    let left: Vec<String> = fs_err::read_dir(world.path("xdg-state/agent-sandbox/caches"))
        .expect("layers")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".session-"))
        .collect();
    assert!(left.is_empty(), "a session's own layer outlived it: {left:?}");
}

/// Where overlayfs refuses the layer, the cache is read-only, with a warning that says
/// so: never the host's cache read-write. Here agent-sandbox's state directory lies in
/// `~/.npm`, so once `~/.npm`'s overlay is mounted the other caches' layers are on
/// overlayfs, which the kernel refuses as an upper layer.
#[test]
fn a_cache_whose_overlay_is_refused_is_read_only() {
    require_bwrap!();
    let world = World::bare();
    fs_err::create_dir_all(world.path("home/.npm")).expect("npm cache");
    world.write("home/.cache/pip/host-file", "from the host\n");
    let run = world
        .cmd()
        .env("XDG_STATE_HOME", world.path("home/.npm/state"))
        .args(["exec", "--", "sh", "-c", "cat ~/.cache/pip/host-file; echo planted > ~/.cache/pip/planted"])
        .run();
    assert_ne!(run.code(), 0, "{}", run.stdout());
    assert_eq!(run.stdout(), "from the host\n");
    let warning = format!("warning: cache {} is read-only in this session", world.path("home/.cache/pip").display());
    assert!(run.stderr().contains(&warning) && run.stderr().contains("downloads are not kept"), "{}", run.stderr());
    assert!(run.stderr().contains("Read-only file system"), "{}", run.stderr());
    assert!(!Path::new(&world.path("home/.cache/pip/planted")).exists(), "the host's cache was writable");
}

/// The checks the host runs before a push run the pushed commit's code outside the
/// session's namespace: they read the host's caches but cannot write them.
#[test]
fn push_checks_see_the_caches_read_only() {
    require_bwrap!();
    let world = World::new();
    world.write("home/.cargo/registry/host-file", "crate\n");
    world.write("home/proj/src.txt", "one\n");
    world.project_config(
        r#"{ "checks": { "commands": ["echo planted > ~/.cargo/registry/planted; grep -q crate ~/.cargo/registry/host-file"] } }"#,
    );
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "second"]);
    world.bare_origin();
    world.git(&["push", "-q", "origin", "main"]);
    world.sh(&[], "echo two > src.txt && git commit -qam two && git push -q origin main").ok();
    let remote = world.path("home/remote.git");
    let pushed = std::process::Command::new("git")
        .args(["--git-dir", remote.to_str().expect("utf-8"), "log", "-1", "--format=%s", "main"])
        .output()
        .expect("git");
    assert_eq!(String::from_utf8_lossy(&pushed.stdout), "two\n", "the check could not read the cache");
    assert!(!world.path("home/.cargo/registry/planted").exists(), "a push check wrote into the host's cache");
}
