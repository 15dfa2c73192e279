//! `cargo xtask bench network`: what the allowlist's proxy costs, measured in one run
//! against the same transfers made directly on the host:
//! - throughput: a 1 GiB download through the proxy (curl inside `exec`, through the
//!   bridge and the host-side proxy) against the same download from the host, target
//!   at least 0.8× (the median of 3 each, interleaved);
//! - per-connection latency: the time to the first byte of a small response, 50
//!   connections through the proxy against 50 direct ones, target at most 1 ms added
//!   (medians; curl's own `time_starttransfer`, so process start-up is not counted);
//! - the same for the transparent path (`curl --noproxy '*'` inside: the lookup through
//!   the resolver inside, then a connection to the name's loopback address, which the
//!   proxy takes over), against the same direct connections.
//!
//! The server is this process, on 127.0.0.2 (a loopback address; the proxy learns its
//! name from the hidden `AGENT_SANDBOX_TEST_HOSTS` and `allowPrivate` lets it through).

use std::{
    io::{Read, Write},
    net::TcpListener,
    process::Command,
};

use anyhow::{bail, Context, Result};

use crate::{ensure_packages, root, run};

const GIB: u64 = 1 << 30;
const BIG_RUNS: usize = 3;
const SMALL_RUNS: usize = 50;

pub fn run_network_bench() -> Result<()> {
    ensure_packages()?;
    let root = root();
    run(Command::new("cargo").args(["build", "--release", "--locked", "--bin", "agent-sandbox"]).current_dir(&root))?;
    let bin = root.join("target/release/agent-sandbox");
    let dir = std::env::temp_dir().join(format!("agent-sandbox-bench-net-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let result = bench_in(&bin, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// `agent-sandbox config allow` in `project`, with the bench's home.
fn allow_config(bin: &std::path::Path, dir: &std::path::Path, project: &std::path::Path) -> Result<()> {
    let allow = Command::new(bin)
        .args(["config", "allow"])
        .current_dir(project)
        .env("HOME", dir.join("home"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .output()?;
    if !allow.status.success() {
        bail!("config allow failed: {}", String::from_utf8_lossy(&allow.stderr));
    }
    Ok(())
}

fn bench_in(bin: &std::path::Path, dir: &std::path::Path) -> Result<()> {
    let port = serve()?;
    let project = dir.join("home/proj");
    std::fs::create_dir_all(project.join(".agent-sandbox"))?;
    run(Command::new("git").args(["init", "-q"]).current_dir(&project))?;
    std::fs::write(
        project.join(".agent-sandbox/config.jsonc"),
        format!(
            r#"{{"network": {{"mode": "allowlist", "allow": ["bench.test:{port}"], "allowPrivate": ["127.0.0.2"]}}}}"#
        ),
    )?;
    let exec = |script: &str| -> Result<String> {
        let out = Command::new(bin)
            .args(["exec", "--", "sh", "-c", script])
            .current_dir(&project)
            .env("HOME", dir.join("home"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env("XDG_STATE_HOME", dir.join("state"))
            .env("AGENT_SANDBOX_TEST_HOSTS", "bench.test=127.0.0.2")
            .output()
            .context("running agent-sandbox exec")?;
        if !out.status.success() {
            bail!("exec failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    allow_config(bin, dir, &project)?;
    let big = |host: &str| format!("curl -sS -o /dev/null -w '%{{time_total}}\\n' http://{host}:{port}/big");
    let small = |host: &str, flags: &str| {
        format!(
            "i=0; while [ $i -lt {SMALL_RUNS} ]; do curl -sS {flags} -o /dev/null -w '%{{time_starttransfer}}\\n' \
             http://{host}:{port}/small; i=$((i+1)); done"
        )
    };
    let host_sh = |script: &str| -> Result<String> {
        let out = Command::new("sh").args(["-c", script]).output()?;
        if !out.status.success() {
            bail!("{script} failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..BIG_RUNS {
        direct.extend(seconds(&host_sh(&big("127.0.0.2"))?)?);
        proxied.extend(seconds(&exec(&big("bench.test"))?)?);
    }
    let direct_first = seconds(&host_sh(&small("127.0.0.2", ""))?)?;
    let proxied_first = seconds(&exec(&small("bench.test", ""))?)?;
    let transparent_first = seconds(&exec(&small("bench.test", "--noproxy '*'"))?)?;
    let (direct_s, proxied_s) = (median(direct), median(proxied));
    let ratio = direct_s / proxied_s;
    let direct_first = median(direct_first);
    let added_ms = (median(proxied_first) - direct_first) * 1000.0;
    let transparent_ms = (median(transparent_first) - direct_first) * 1000.0;
    let gib_per_s = |secs: f64| GIB as f64 / secs / f64::from(1 << 30);
    println!("network (allowlist proxy against direct, same run):");
    println!(
        "  1 GiB download               {:.2} GiB/s through the proxy, {:.2} GiB/s direct: {ratio:.2}x ({} the target of >= 0.8x)",
        gib_per_s(proxied_s),
        gib_per_s(direct_s),
        verdict(ratio >= 0.8)
    );
    println!(
        "  added time to first byte     {added_ms:.2} ms per connection ({} the target of <= 1 ms)",
        verdict(added_ms <= 1.0)
    );
    println!(
        "  the same, transparent path   {transparent_ms:.2} ms per connection, the lookup included ({} the target \
         of <= 1 ms)",
        verdict(transparent_ms <= 1.0)
    );
    Ok(())
}

fn verdict(meets: bool) -> &'static str {
    if meets {
        "meets"
    } else {
        "MISSES"
    }
}

fn seconds(text: &str) -> Result<Vec<f64>> {
    text.lines().map(|line| line.trim().parse::<f64>().with_context(|| format!("curl printed {line:?}"))).collect()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// An HTTP server on 127.0.0.2: `/big` is 1 GiB of zeros, anything else an empty body.
fn serve() -> Result<u16> {
    let listener = TcpListener::bind(("127.0.0.2", 0)).context("binding the bench server on 127.0.0.2")?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let length = if head.starts_with(b"GET /big ") { GIB } else { 0 };
                let header = format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n");
                if stream.write_all(header.as_bytes()).is_err() {
                    return;
                }
                let chunk = vec![0u8; 1 << 20];
                let mut left = length;
                while left > 0 {
                    let len = left.min(chunk.len() as u64) as usize;
                    if stream.write_all(&chunk[..len]).is_err() {
                        return;
                    }
                    left -= len as u64;
                }
            });
        }
    });
    Ok(port)
}
