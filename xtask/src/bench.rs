//! `cargo xtask bench`: start-up cost of `agent-sandbox exec`, as ratios against
//! baselines measured in the same run (absolute times vary from machine to machine):
//! - `exec -- true` against a raw `bwrap --ro-bind / / … -- /bin/true` (target ≤ 1.5×);
//! - start-up in a 100,000-file project (a large node_modules with scattered `.env`
//!   files) against a 100-file project (target ≤ 1.5×): whole runs, the same big tree
//!   without secrets (the scan's share apart from masking), and start-up alone (until
//!   the command runs, without the exit-time checks).
//!
//! - a loop of `git rev-parse HEAD` inside one sandbox through the git guard against the
//!   same loop with `--cmd git=true` (target ≤ 1.10×);
//! - the virtual sandbox (`run_vsandbox_bench`, absolute figures since it has no
//!   baseline): simple commands per second (target ≥ 50,000) and snapshot + restore of
//!   a 10,000-node tree (target ≤ 20 ms), measured in process by a release build of
//!   `crates/vsandbox/examples/bench.rs`.
//!
//! - Docker (as root, with the engine): `firewall apply` inside a container against
//!   `docker exec … true`, and an unchanged `build-base` against a trivial cached
//!   `docker build` (both on the bench's own private network / images only).
//!
//! Runs are interleaved so that drift on the machine hits every series alike; each
//! figure is a median. The warm-up runs fill the secret-scan cache, as a user's first
//! start in a project does.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};

use crate::{ensure_packages, root, run};

const RUNS: usize = 41;
const GIT_RUNS: usize = 9;
const GIT_CALLS: usize = 200;
const GIT_LOOP: &str = "i=0; while [ $i -lt 200 ]; do git rev-parse HEAD >/dev/null; i=$((i+1)); done";

pub fn run_bench() -> Result<()> {
    ensure_packages()?;
    let root = root();
    run(Command::new("cargo").args(["build", "--release", "--locked", "--bin", "agent-sandbox"]).current_dir(&root))?;
    let bin = root.join("target/release/agent-sandbox");
    let dir = std::env::temp_dir().join(format!("agent-sandbox-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let small = dir.join("small");
    let big = dir.join("big");
    let big_clean = dir.join("big-clean");
    eprintln!("bench: creating a 100-file and two 100,000-file projects in {}", dir.display());
    make_project(&small, 5, 20, 0)?;
    make_project(&big, 5_000, 20, 20)?;
    make_project(&big_clean, 5_000, 20, 0)?;
    let state = dir.join("state");
    // A real project was not created a moment ago: directories changed in the last two
    // seconds are never cached (see crates/secrets/src/cache.rs), so let the trees settle.
    std::thread::sleep(Duration::from_secs(3));

    let raw = || {
        let mut cmd = Command::new("bwrap");
        cmd.args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-all",
            "--die-with-parent",
            "--",
            "/bin/true",
        ]);
        cmd
    };
    let exec = |project: &Path| {
        let mut cmd = Command::new(&bin);
        cmd.args(["exec", "--", "/bin/true"])
            .current_dir(project)
            .env("XDG_STATE_HOME", &state)
            .env("XDG_CACHE_HOME", &state);
        cmd
    };
    let mut series: [Vec<Duration>; 4] = Default::default();
    for round in 0..RUNS + 3 {
        let times = [time(raw())?, time(exec(&small))?, time(exec(&big))?, time(exec(&big_clean))?];
        if round >= 3 {
            for (all, one) in series.iter_mut().zip(times) {
                all.push(one);
            }
        }
    }
    let [raw_ms, small_ms, big_ms, clean_ms] = series.map(median_ms);

    // Start-up alone: from spawning exec until the command inside runs (it prints the
    // wall clock), without the teardown that follows.
    let startup = |project: &Path| -> Result<Duration> {
        let mut cmd = Command::new(&bin);
        cmd.args(["exec", "--", "/bin/date", "+%s%N"])
            .current_dir(project)
            .env("XDG_STATE_HOME", &state)
            .env("XDG_CACHE_HOME", &state);
        let launched = std::time::SystemTime::now();
        let out = cmd.output().with_context(|| format!("starting {cmd:?}"))?;
        let nanos: u128 = String::from_utf8_lossy(&out.stdout).trim().parse().context("date printed a number")?;
        let started = std::time::UNIX_EPOCH + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        Ok(started.duration_since(launched).unwrap_or_default())
    };
    let mut startups: [Vec<Duration>; 2] = Default::default();
    for round in 0..RUNS + 3 {
        let times = [startup(&small)?, startup(&big)?];
        if round >= 3 {
            for (all, one) in startups.iter_mut().zip(times) {
                all.push(one);
            }
        }
    }
    let [small_start_ms, big_start_ms] = startups.map(median_ms);

    // The git guard: the same loop of a fast git command with and without it.
    run(Command::new("git").args(["init", "-q"]).current_dir(&small))?;
    run(Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.invalid",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ])
        .current_dir(&small))?;
    let git_loop = |guarded: bool| {
        let mut cmd = Command::new(&bin);
        cmd.arg("exec");
        if !guarded {
            cmd.args(["--cmd", "git=true"]);
        }
        cmd.args(["--", "sh", "-c", GIT_LOOP])
            .current_dir(&small)
            .env("XDG_STATE_HOME", &state)
            .env("XDG_CACHE_HOME", &state);
        cmd
    };
    let mut git_series: [Vec<Duration>; 2] = Default::default();
    for round in 0..GIT_RUNS + 1 {
        let times = [time(git_loop(true))?, time(git_loop(false))?];
        if round >= 1 {
            for (all, one) in git_series.iter_mut().zip(times) {
                all.push(one);
            }
        }
    }
    let [guarded_ms, unguarded_ms] = git_series.map(median_ms);
    let _ = std::fs::remove_dir_all(&dir);

    println!("agent-sandbox start-up, median of {RUNS} interleaved runs");
    println!("  raw bwrap -- /bin/true              {raw_ms:8.2} ms");
    println!("  exec -- true, 100-file project      {small_ms:8.2} ms");
    println!("  exec -- true, 100,000-file project  {big_ms:8.2} ms  (20 .env files to mask)");
    println!("  the same without secret files       {clean_ms:8.2} ms");
    report("exec / raw bwrap", small_ms / raw_ms, 1.5);
    report("100,000 files / 100 files", big_ms / small_ms, 1.5);
    println!(
        "  start-up until the command runs:    {small_start_ms:8.2} ms (100 files), {big_start_ms:8.2} ms (100,000)"
    );
    report("start-up, 100,000 / 100 files", big_start_ms / small_start_ms, 1.5);
    println!("  {:<28} {:5.2}x  (the scan alone, no masks)", "no secrets / 100 files", clean_ms / small_ms);
    println!("git guard: {GIT_CALLS} x `git rev-parse HEAD` in one sandbox, median of {GIT_RUNS} runs");
    println!("  through the guard                   {guarded_ms:8.2} ms");
    println!("  --cmd git=true (unguarded)          {unguarded_ms:8.2} ms");
    report("guarded / unguarded", guarded_ms / unguarded_ms, 1.10);
    docker_bench()
}

fn docker_bench() -> Result<()> {
    if !crate::is_root() {
        println!("docker: skipped (run as root: the bench starts the engine and builds agent-sandbox-base:e2e)");
        return Ok(());
    }
    crate::docker::prepare_e2e()?;
    let image = format!("agent-sandbox-base:{}", crate::docker::E2E_TAG);
    let id = std::process::id();
    let net = format!("as-bench-{id}");
    let dns = format!("as-bench-dns-{id}");
    let box_name = format!("as-bench-fw-{id}");
    let docker = |args: &[&str]| -> Result<()> { run(Command::new("docker").args(args).stdout(Stdio::null())) };
    let cleanup = || {
        for name in [&box_name, &dns] {
            let _ = Command::new("docker").args(["rm", "-f", name]).output();
        }
        let _ = Command::new("docker").args(["network", "rm", &net]).output();
    };
    let result = (|| -> Result<(f64, f64)> {
        docker(&["network", "create", "--subnet", "172.28.250.0/24", &net])?;
        // A resolver that answers NXDOMAIN to everything: no query leaves the machine.
        let dns_js = "const d=require('dgram').createSocket('udp4');d.on('message',(m,r)=>{const b=Buffer.from(m);b[2]|=0x80;b[3]=0x83;d.send(b,r.port,r.address)});d.bind(53)";
        docker(&[
            "run",
            "-d",
            "--name",
            &dns,
            "--network",
            &net,
            "--ip",
            "172.28.250.53",
            "--user",
            "root",
            "--entrypoint",
            "node",
            &image,
            "-e",
            dns_js,
        ])?;
        docker(&[
            "run",
            "-d",
            "--name",
            &box_name,
            "--network",
            &net,
            "--dns",
            "172.28.250.53",
            "--cap-add",
            "NET_ADMIN",
            "--cap-add",
            "NET_RAW",
            "--entrypoint",
            "sleep",
            &image,
            "infinity",
        ])?;
        let exec = |args: &[&str]| {
            let mut cmd = Command::new("docker");
            cmd.args(["exec", "-u", "node", &box_name]).args(args).stdout(Stdio::null()).stderr(Stdio::null());
            cmd
        };
        let (mut apply, mut base) = (Vec::new(), Vec::new());
        for _ in 0..9 {
            apply.push(time(exec(&["sudo", "-n", "agent-sandbox", "firewall", "apply"]))?);
            base.push(time(exec(&["true"]))?);
        }
        Ok((median_ms(apply), median_ms(base)))
    })();
    cleanup();
    let (apply_ms, exec_ms) = result?;
    println!("docker: firewall apply in a container (image policy, 23 domains), median of 9");
    println!("  docker exec … sudo agent-sandbox firewall apply  {apply_ms:8.1} ms");
    println!("  docker exec … true (baseline)                    {exec_ms:8.1} ms  ratio {:.2}x", apply_ms / exec_ms);

    let args = crate::docker::e2e_build_args();
    let trivial = std::env::temp_dir().join(format!("agent-sandbox-bench-docker-{id}"));
    std::fs::create_dir_all(&trivial)?;
    std::fs::write(trivial.join("Dockerfile"), format!("FROM {image}\nLABEL bench=1\n"))?;
    let trivial_build = || -> Result<Duration> {
        let mut cmd = Command::new("docker");
        cmd.args(["build", "-q", "-t", "agent-sandbox-bench-trivial"])
            .arg(&trivial)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        time(cmd)
    };
    trivial_build()?;
    let (mut unchanged, mut baseline) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let started = Instant::now();
        crate::docker::build_base_quiet(&args)?;
        unchanged.push(started.elapsed());
        baseline.push(trivial_build()?);
    }
    let _ = Command::new("docker").args(["rmi", "agent-sandbox-bench-trivial"]).output();
    let _ = std::fs::remove_dir_all(&trivial);
    let (unchanged_ms, trivial_ms) = (median_ms(unchanged), median_ms(baseline));
    println!("docker: cargo xtask build-base with nothing changed (fully cached), median of 5");
    println!("  build-base, unchanged                            {unchanged_ms:8.1} ms");
    println!(
        "  docker build of a 2-line cached Dockerfile       {trivial_ms:8.1} ms  ratio {:.2}x",
        unchanged_ms / trivial_ms
    );
    Ok(())
}

fn report(what: &str, ratio: f64, target: f64) {
    let verdict = if ratio <= target { "meets" } else { "MISSES" };
    println!("  {what:<28} {ratio:5.2}x  ({verdict} the target of {target}x)");
}

pub fn docker_part() -> Result<()> {
    docker_bench()
}

fn time(mut cmd: Command) -> Result<Duration> {
    let start = Instant::now();
    let status = cmd.stdout(Stdio::null()).status().with_context(|| format!("starting {cmd:?}"))?;
    let elapsed = start.elapsed();
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(elapsed)
}

fn median_ms(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}

/// `packages` directories of `files` files under node_modules, plus `secrets` `.env`
/// files scattered among them and a small src/ tree.
fn make_project(root: &Path, packages: usize, files: usize, secrets: usize) -> Result<()> {
    let src = root.join("src");
    std::fs::create_dir_all(&src)?;
    std::fs::write(root.join("package.json"), "{}\n")?;
    for pkg in 0..packages {
        let dir: PathBuf = root.join("node_modules").join(format!("pkg{}", pkg / 100)).join(format!("sub{pkg}"));
        std::fs::create_dir_all(&dir)?;
        for file in 0..files {
            std::fs::write(dir.join(format!("f{file}.js")), "module.exports = 1;\n")?;
        }
        if secrets > 0 && pkg % (packages / secrets).max(1) == 0 {
            std::fs::write(dir.join(".env"), "TOKEN=x\n")?;
        }
    }
    Ok(())
}

/// The virtual sandbox's figures, from its release-built example.
pub fn run_vsandbox_bench() -> Result<()> {
    let out = Command::new("cargo")
        .args(["run", "--quiet", "--release", "--locked", "-p", "vsandbox", "--example", "bench"])
        .current_dir(root())
        .stderr(Stdio::inherit())
        .output()
        .context("running the vsandbox bench example")?;
    if !out.status.success() {
        bail!("the vsandbox bench example failed: {}", out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let figure = |name: &str| -> Result<f64> {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .with_context(|| format!("the bench example printed no {name}"))
    };
    let per_second = figure("commands_per_second")?;
    let nodes = figure("snapshot_nodes")?;
    let round_trip = figure("snapshot_restore_ms")?;
    let json_round_trip = figure("snapshot_json_restore_ms")?;
    let verdict = |meets: bool| if meets { "meets" } else { "MISSES" };
    println!("virtual sandbox (crates/vsandbox, in process, release build)");
    println!(
        "  simple commands per second          {per_second:10.0}     ({} the target of >= 50,000)",
        verdict(per_second >= 50_000.0)
    );
    println!(
        "  snapshot + restore, {nodes:.0} nodes    {round_trip:10.2} ms  ({} the target of <= 20 ms)",
        verdict(round_trip <= 20.0)
    );
    println!("  the same through the JSON form      {json_round_trip:10.2} ms");
    Ok(())
}
