//! `cargo xtask bench`: the cost of `agent-sandbox exec`, as ratios against baselines
//! measured in the same run (absolute times vary from machine to machine):
//! - `exec -- true` in a 100-file project that is a git repository (as most are: its
//!   start includes the agent's own git and the git guard) against bwrap run directly
//!   with the identical arguments and
//!   environment `exec` used, on the runtime directory it prepared (captured through the
//!   hidden `AGENT_SANDBOX_BENCH_ARGV`, see `session::BENCH_ARGV_VAR`): exec's own work,
//!   target at most 1 ms more;
//! - `exec -- true` in each network mode (`allowlist`, `on`, `off`), and `exec --dry-run`,
//!   against a minimal bwrap ([`MINIMAL_BWRAP`]): targets 2.5× and 1.5×;
//! - whole warm runs (start-up plus the exit check) in a 1,000,000-file project (20,000
//!   directories, 1,000 `.env` files in node_modules), target 100 ms, with the same
//!   identical-argv bwrap as its floor; 100,000 files against 100 files, target 1.5×,
//!   and start-up alone (until the command runs); in the 1,000,000-file project also the
//!   peak memory (`wait4`'s `ru_maxrss`, target 25 MiB) and the curve over 1,000 / 100 /
//!   10 / 0 `.env` files (made by removing files between series; target flat within 30 ms);
//! - the git guard: 200 × `git rev-parse HEAD` in one sandbox through the guard against
//!   the same loop with `--cmd git=true` (target 1.3×), with its floor: the unguarded
//!   loop plus one exec of `/bin/true` per call; and a realistic loop (`status`, `diff`,
//!   `add`, `commit` in a 5,000-file repository), target 1.05×; the target is
//!   the guarded call within 0.3 ms of the floor (`bench git` runs only these);
//! - the pre-commit guard (`run_precommit_bench`, alone: `cargo xtask bench precommit`):
//!   `git commit` of 10,000 new files with the guard against the same commit with hooks
//!   off, target at most 150 ms more;
//! - the virtual sandbox (`run_vsandbox_bench`, absolute figures since it has no
//!   baseline), in memory and in a redb store file: simple commands per second (target
//!   in memory ≥ 1,000,000) and snapshot + restore of a 10,000-node tree (target in
//!   memory ≤ 20 ms), measured in process by a release build of
//!   `crates/vsandbox/examples/bench.rs`.
//!
//! - Docker (as root, with the engine): `firewall apply` inside a container against
//!   `docker exec … true`, and an unchanged `build-base` against a trivial cached
//!   `docker build` (both on the bench's own private network / images only).
//!
//! Runs are interleaved so that drift on the machine hits every series alike; each
//! figure is a median. The warm-up runs fill the secret-scan cache, as a user's first
//! start in a project does. The big trees are made once per run in the bench's own
//! temporary directory and removed at the end.

use std::{
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};

use crate::{ensure_packages, root, run};

/// bwrap with only what running a program needs (the whole filesystem read-only, a
/// `/dev` and a `/proc`): the baseline of the `exec -- true` and `--dry-run` ratios.
const MINIMAL_BWRAP: &[&str] = &["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "/bin/true"];
const RUNS: usize = 41;
const HUGE_RUNS: usize = 15;
const GIT_RUNS: usize = 9;
const GIT_CALLS: usize = 200;
const GIT_LOOP: &str = "i=0; while [ $i -lt 200 ]; do git rev-parse HEAD >/dev/null; i=$((i+1)); done";
/// The floor of a guard that execs git: one more exec of a trivial program per call.
const FLOOR_LOOP: &str = "i=0; while [ $i -lt 200 ]; do git rev-parse HEAD >/dev/null; /bin/true; i=$((i+1)); done";
/// A working session's git use: edit, look, stage, commit, ten times.
const WORK_LOOP: &str = "i=0; while [ $i -lt 10 ]; do echo $i >> d0/f0.txt; git status >/dev/null; \
                         git diff >/dev/null; git add -A; git commit -q -m \"work $i\"; i=$((i+1)); done";

pub fn run_bench() -> Result<()> {
    run_exec_bench()?;
    docker_bench()
}

/// `cargo xtask bench exec`: [`run_bench`] without the Docker part (which, as root,
/// starts the engine and builds an image).
pub fn run_exec_bench() -> Result<()> {
    ensure_packages()?;
    let root = root();
    run(Command::new("cargo").args(["build", "--release", "--locked", "--bin", "agent-sandbox"]).current_dir(&root))?;
    let bin = root.join("target/release/agent-sandbox");
    let dir = std::env::temp_dir().join(format!("agent-sandbox-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let result = bench_in(&bin, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn bench_in(bin: &Path, dir: &Path) -> Result<()> {
    let small = dir.join("small");
    let big = dir.join("big");
    let big_clean = dir.join("big-clean");
    let huge = dir.join("huge");
    let repo = dir.join("repo");
    eprintln!(
        "bench: creating projects of 100 (a git repository), 100,000 (twice) and 1,000,000 files in {}",
        dir.display()
    );
    // The small project is a git repository, as most projects are: its start includes
    // the agent's own git (the session repository) and the git guard.
    make_project(&small, 5, 20, 0)?;
    commit_all(&small)?;
    make_project(&big, 5_000, 20, 20)?;
    make_project(&big_clean, 5_000, 20, 0)?;
    let started = Instant::now();
    make_project(&huge, 20_000, 50, 1_000)?;
    eprintln!("bench: the 1,000,000-file project took {:.1} s to create", started.elapsed().as_secs_f64());
    make_repo(&repo, 50, 100)?;
    let state = dir.join("state");
    // A real project was not created a moment ago: directories changed in the last two
    // seconds are never cached (see crates/secrets/src/cache.rs), so let the trees settle.
    std::thread::sleep(Duration::from_secs(3));

    let exec = |project: &Path| {
        let mut cmd = Command::new(bin);
        cmd.args(["exec", "--", "/bin/true"])
            .current_dir(project)
            .env("XDG_STATE_HOME", &state)
            .env("XDG_CACHE_HOME", &state);
        cmd
    };
    // The baselines: bwrap exactly as exec ran it, in the small and in the huge project.
    // A capture stops before the services, so the small project's session repository
    // (which its bwrap binds) is made by one whole run first.
    time(exec(&small))?;
    let raw_small = Captured::capture(exec(&small), &dir.join("argv-small.json"))?;
    let raw_huge = Captured::capture(exec(&huge), &dir.join("argv-huge.json"))?;
    let result = (|| -> Result<()> {
        let mut series: [Vec<Duration>; 8] = Default::default();
        for round in 0..RUNS + 3 {
            let times = [
                time(raw_small.command())?,
                time(minimal_bwrap(&small))?,
                time(exec(&small))?,
                time(with_args(exec(&small), &["--network", "on"]))?,
                time(with_args(exec(&small), &["--network", "off"]))?,
                time(with_args(exec(&small), &["--dry-run"]))?,
                time(exec(&big))?,
                time(exec(&big_clean))?,
            ];
            if round >= 3 {
                for (all, one) in series.iter_mut().zip(times) {
                    all.push(one);
                }
            }
        }
        let [raw_ms, minimal_ms, small_ms, on_ms, off_ms, dry_ms, big_ms, clean_ms] = series.map(median_ms);
        let mut huge_series: [Vec<Duration>; 2] = Default::default();
        let mut huge_rss_kib = 0;
        for round in 0..HUGE_RUNS + 2 {
            let (exec_took, rss_kib) = time_and_rss(exec(&huge))?;
            let times = [time(raw_huge.command())?, exec_took];
            huge_rss_kib = huge_rss_kib.max(rss_kib);
            if round >= 2 {
                for (all, one) in huge_series.iter_mut().zip(times) {
                    all.push(one);
                }
            }
        }
        let [raw_huge_ms, huge_ms] = huge_series.map(median_ms);

        // Start-up alone: from spawning exec until the command inside runs (it prints the
        // wall clock), without the teardown that follows.
        let startup = |project: &Path| -> Result<Duration> {
            let mut cmd = Command::new(bin);
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

        println!("agent-sandbox exec, median of {RUNS} interleaved runs");
        println!("  bwrap with exec's own arguments     {raw_ms:8.2} ms  (the baseline: runtime prepared)");
        println!("  exec -- true, 100-file project      {small_ms:8.2} ms");
        println!(
            "  exec's own work                     {:8.2} ms  ({:.2}x; target: at most 1 ms more: {})",
            small_ms - raw_ms,
            small_ms / raw_ms,
            verdict(small_ms - raw_ms <= 1.0)
        );
        println!("  minimal bwrap                       {minimal_ms:8.2} ms  (bwrap {})", MINIMAL_BWRAP.join(" "));
        for (mode, mode_ms) in [("allowlist", small_ms), ("on", on_ms), ("off", off_ms)] {
            println!("  exec --network {mode:<9} -- true   {mode_ms:8.2} ms");
            report(&format!("  / minimal bwrap ({mode})"), mode_ms / minimal_ms, 2.5);
        }
        println!("  exec --dry-run -- true              {dry_ms:8.2} ms");
        report("  / minimal bwrap (dry run)", dry_ms / minimal_ms, 1.5);
        println!("  exec -- true, 100,000-file project  {big_ms:8.2} ms  (20 .env files to mask)");
        println!("  the same without secret files       {clean_ms:8.2} ms");
        report("100,000 files / 100 files", big_ms / small_ms, 1.5);
        println!(
            "  start-up until the command runs:    {small_start_ms:8.2} ms (100 files), {big_start_ms:8.2} ms (100,000)"
        );
        println!("  {:<28} {:5.2}x", "start-up, 100,000 / 100 files", big_start_ms / small_start_ms);
        println!("  {:<28} {:5.2}x  (the scan alone, no masks)", "no secrets / 100 files", clean_ms / small_ms);
        println!("1,000,000-file project (20,000 directories, 1,000 .env files), median of {HUGE_RUNS}");
        println!(
            "  exec -- true, warm, whole run       {huge_ms:8.2} ms  (target 100 ms: {})",
            verdict(huge_ms <= 100.0)
        );
        println!(
            "  bwrap with exec's own arguments     {raw_huge_ms:8.2} ms  (its floor; exec's own work {:.2} ms)",
            huge_ms - raw_huge_ms
        );
        println!(
            "  peak memory, largest process      {:8.2} MiB  (wait4's ru_maxrss, max of {} runs; target 25 MiB: {})",
            huge_rss_kib as f64 / 1024.0,
            HUGE_RUNS + 2,
            verdict(huge_rss_kib <= 25 * 1024)
        );
        stage_table(bin, &[("100 files", &small), ("1,000,000 files", &huge)], &state)?;
        secrets_curve(&huge, |project: &Path| time(exec(project)))
    })();
    raw_small.remove();
    raw_huge.remove();
    result?;
    git_bench(bin, &small, &repo, &state)?;
    precommit_bench(bin, &dir.join("precommit-bench"))
}

/// The 1,000,000-file project's warm `exec -- true` with 1,000, 100, 10 and no `.env`
/// files. One tree serves every count: [`make_project`] put one in every 20th package,
/// and each series removes or writes back those its count does not or does keep, lets
/// the changed directories settle (the scan caches no directory changed in the last two
/// seconds) and warms the cache again. The four counts take turns for
/// [`CURVE_CYCLES`] cycles, so that drift on the machine hits each alike.
fn secrets_curve(huge: &Path, time_exec: impl Fn(&Path) -> Result<Duration>) -> Result<()> {
    const COUNTS: [usize; 4] = [1_000, 100, 10, 0];
    let mut series: [Vec<Duration>; 4] = Default::default();
    for _ in 0..CURVE_CYCLES {
        for (count, times) in COUNTS.iter().zip(series.iter_mut()) {
            keep_secrets(huge, *count)?;
            std::thread::sleep(Duration::from_secs(3));
            for round in 0..CURVE_RUNS + 2 {
                let took = time_exec(huge)?;
                if round >= 2 {
                    times.push(took);
                }
            }
        }
    }
    keep_secrets(huge, 1_000)?;
    let points = series.map(median_ms);
    println!(
        "1,000,000-file project with 1,000 / 100 / 10 / 0 .env files, warm, median of {} each ({CURVE_CYCLES} cycles)",
        CURVE_CYCLES * CURVE_RUNS
    );
    for (count, ms) in COUNTS.iter().zip(points) {
        println!("  {count:>5} .env files                    {ms:8.2} ms");
    }
    let spread = points.iter().copied().fold(f64::MIN, f64::max) - points.iter().copied().fold(f64::MAX, f64::min);
    println!(
        "  spread                              {spread:8.2} ms  (target: flat within 30 ms: {})",
        verdict(spread <= 30.0)
    );
    Ok(())
}

const CURVE_CYCLES: usize = 3;
const CURVE_RUNS: usize = 5;

/// Leaves `count` (1,000, 100, 10 or 0) of the `.env` files [`make_project`] wrote in the
/// 20,000-package tree, evenly spread, writing back those removed before.
fn keep_secrets(huge: &Path, count: usize) -> Result<()> {
    const PACKAGES: usize = 20_000;
    for pkg in (0..PACKAGES).step_by(PACKAGES / 1_000) {
        let env = huge.join("node_modules").join(format!("pkg{}", pkg / 100)).join(format!("sub{pkg}/.env"));
        let keep = count > 0 && pkg.is_multiple_of(PACKAGES / count);
        match (keep, env.exists()) {
            (true, false) => std::fs::write(&env, "TOKEN=x\n").with_context(|| format!("writing {}", env.display()))?,
            (false, true) => std::fs::remove_file(&env).with_context(|| format!("removing {}", env.display()))?,
            _ => {}
        }
    }
    Ok(())
}

fn minimal_bwrap(project: &Path) -> Command {
    let mut cmd = Command::new("bwrap");
    cmd.args(MINIMAL_BWRAP).current_dir(project);
    cmd
}

/// `exec` with `args` before its `--`.
fn with_args(cmd: Command, args: &[&str]) -> Command {
    let mut all: Vec<&std::ffi::OsStr> = cmd.get_args().collect();
    let at = all.iter().position(|arg| *arg == "--").unwrap_or(all.len());
    all.splice(at..at, args.iter().map(std::ffi::OsStr::new));
    let mut with = Command::new(cmd.get_program());
    with.args(all);
    if let Some(dir) = cmd.get_current_dir() {
        with.current_dir(dir);
    }
    for (name, value) in cmd.get_envs() {
        match value {
            Some(value) => with.env(name, value),
            None => with.env_remove(name),
        };
    }
    with
}

/// What each stage costs (`exec --debug`'s `start-up stages:` line, then its
/// `exit-check stages:` line, whose rows are named `exit: <part>`), median of
/// [`HUGE_RUNS`] per project, so that a slower start or exit points at its stage.
fn stage_table(bin: &Path, projects: &[(&str, &Path)], state: &Path) -> Result<()> {
    let mut columns: Vec<Vec<(String, Vec<Duration>)>> = Vec::new();
    for (_, project) in projects {
        let mut stages: Vec<(String, Vec<Duration>)> = Vec::new();
        for _ in 0..HUGE_RUNS {
            let out = Command::new(bin)
                .args(["exec", "--debug", "--", "/bin/true"])
                .current_dir(project)
                .env("XDG_STATE_HOME", state)
                .env("XDG_CACHE_HOME", state)
                .output()
                .context("exec --debug")?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            for (prefix, row_prefix) in [(session::stages::PREFIX, ""), (session::stages::EXIT_PREFIX, "exit: ")] {
                let line = stderr
                    .lines()
                    .find_map(|line| line.split_once(prefix).map(|(_, rest)| rest.to_owned()))
                    .with_context(|| format!("exec --debug printed no `{prefix}` line"))?;
                for (name, took) in stage_times(&line)? {
                    let name = format!("{row_prefix}{name}");
                    match stages.iter_mut().find(|(known, _)| *known == name) {
                        Some((_, times)) => times.push(took),
                        None => stages.push((name, vec![took])),
                    }
                }
            }
        }
        columns.push(stages);
    }
    println!("exec's start-up and exit check by stage (exec --debug), median of {HUGE_RUNS}, ms");
    let header: Vec<String> = projects.iter().map(|(name, _)| format!("{name:>16}")).collect();
    println!("  {:<16}{}", "stage", header.join(""));
    for (row, (name, _)) in columns.first().into_iter().flatten().enumerate() {
        let cells: Vec<String> = columns
            .iter()
            .map(|stages| stages.get(row).map_or(f64::NAN, |(_, times)| median_ms(times.clone())))
            .map(|ms| format!("{ms:>16.2}"))
            .collect();
        println!("  {name:<16}{}", cells.join(""));
    }
    Ok(())
}

/// The stages of one line after its prefix: `facts 1.13 ms, scan 2.03 ms`.
fn stage_times(line: &str) -> Result<Vec<(String, Duration)>> {
    let mut times = Vec::new();
    for part in line.split(", ") {
        let Some((name, ms)) =
            part.trim().rsplit_once(' ').and_then(|(rest, unit)| (unit == "ms").then_some(rest)?.rsplit_once(' '))
        else {
            continue;
        };
        let ms: f64 = ms.parse().context("a stage's time")?;
        times.push((name.to_owned(), Duration::from_secs_f64(ms / 1000.0)));
    }
    Ok(times)
}

/// The git guard's loops, each through the guard and with `--cmd git=true`.
fn git_bench(bin: &Path, small: &Path, repo: &Path, state: &Path) -> Result<()> {
    git(small, &["init", "-q"])?;
    git(
        small,
        &[
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.invalid",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
    )?;
    let sandboxed = |project: &Path, guarded: bool, script: &str| {
        let mut cmd = Command::new(bin);
        cmd.arg("exec");
        if !guarded {
            cmd.args(["--cmd", "git=true"]);
        }
        cmd.args(["--", "sh", "-c", script])
            .current_dir(project)
            .env("XDG_STATE_HOME", state)
            .env("XDG_CACHE_HOME", state);
        cmd
    };
    let mut git_series: [Vec<Duration>; 3] = Default::default();
    for round in 0..GIT_RUNS + 1 {
        let times = [
            time(sandboxed(small, true, GIT_LOOP))?,
            time(sandboxed(small, false, GIT_LOOP))?,
            time(sandboxed(small, false, FLOOR_LOOP))?,
        ];
        if round >= 1 {
            for (all, one) in git_series.iter_mut().zip(times) {
                all.push(one);
            }
        }
    }
    let [guarded_ms, unguarded_ms, floor_ms] = git_series.map(median_ms);
    let mut work_series: [Vec<Duration>; 2] = Default::default();
    for round in 0..GIT_RUNS + 1 {
        let times = [time(sandboxed(repo, true, WORK_LOOP))?, time(sandboxed(repo, false, WORK_LOOP))?];
        if round >= 1 {
            for (all, one) in work_series.iter_mut().zip(times) {
                all.push(one);
            }
        }
    }
    let [work_guarded_ms, work_unguarded_ms] = work_series.map(median_ms);
    println!("git guard: {GIT_CALLS} x `git rev-parse HEAD` in one sandbox, median of {GIT_RUNS} runs");
    println!("  through the guard                   {guarded_ms:8.2} ms");
    println!("  --cmd git=true (unguarded)          {unguarded_ms:8.2} ms");
    println!("  unguarded + one /bin/true per call  {floor_ms:8.2} ms  (the floor of a guard that execs git)");
    report("guarded / unguarded", guarded_ms / unguarded_ms, 1.3);
    println!("  {:<28} {:5.2}x", "floor / unguarded", floor_ms / unguarded_ms);
    let above_floor = (guarded_ms - floor_ms) / GIT_CALLS as f64;
    println!(
        "  guarded, per call above the floor   {above_floor:8.3} ms  (target: at most 0.3 ms: {})",
        verdict(above_floor <= 0.3)
    );
    println!("git guard: 10 x (status, diff, add -A, commit) in a 5,000-file repository, median of {GIT_RUNS}");
    println!("  through the guard                   {work_guarded_ms:8.2} ms");
    println!("  --cmd git=true (unguarded)          {work_unguarded_ms:8.2} ms");
    report("guarded / unguarded", work_guarded_ms / work_unguarded_ms, 1.05);
    Ok(())
}

/// `cargo xtask bench git`: only the git guard's loops, for the default build and again
/// for the static build (the Feature's and the packages', see `feature.rs`): a static binary starts without the dynamic loader, libgcc_s and
/// their CPU probing, which is most of what a guarded call costs beyond its exec.
pub fn run_git_bench() -> Result<()> {
    ensure_packages()?;
    let root = root();
    run(Command::new("cargo").args(["build", "--release", "--locked", "--bin", "agent-sandbox"]).current_dir(&root))?;
    let static_bin = Some(crate::feature::static_binary(&root)?);
    let dir = std::env::temp_dir().join(format!("agent-sandbox-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let result = (|| {
        let (small, repo) = (dir.join("small"), dir.join("repo"));
        // The small project is a git repository, as most projects are: its start includes
        // the agent's own git (the session repository) and the git guard.
        make_project(&small, 5, 20, 0)?;
        commit_all(&small)?;
        make_repo(&repo, 50, 100)?;
        std::thread::sleep(Duration::from_secs(3));
        println!("the default build (target/release/agent-sandbox)");
        git_bench(&root.join("target/release/agent-sandbox"), &small, &repo, &dir.join("state"))?;
        if let Some(static_bin) = &static_bin {
            println!("the static build ({})", static_bin.display());
            git_bench(static_bin, &small, &repo, &dir.join("state"))?;
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

const PRECOMMIT_RUNS: usize = 15;

/// `cargo xtask bench precommit`: only the pre-commit guard's figure.
pub fn run_precommit_bench() -> Result<()> {
    let root = root();
    run(Command::new("cargo").args(["build", "--release", "--locked", "--bin", "agent-sandbox"]).current_dir(&root))?;
    let dir = std::env::temp_dir().join(format!("agent-sandbox-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let result = precommit_bench(&root.join("target/release/agent-sandbox"), &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The pre-commit guard's own cost: `git commit` of 10,000 new files with the guard
/// installed in front of the hooks (`checks.humans`, so it runs as it does inside a
/// sandbox, with no check commands: only the guard) against the same commit with hooks
/// off. Each commit is undone (`reset --soft`) before the next.
fn precommit_bench(bin: &Path, dir: &Path) -> Result<()> {
    let repo = dir.join("precommit");
    let home = dir.join("precommit-home");
    std::fs::create_dir_all(repo.join(".agent-sandbox"))?;
    std::fs::create_dir_all(&home)?;
    let with_env = |mut cmd: Command| {
        cmd.current_dir(&repo)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_STATE_HOME", home.join(".state"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "bench")
            .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
            .env("GIT_COMMITTER_NAME", "bench")
            .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
            .stdout(Stdio::null());
        cmd
    };
    let git = |args: &[&str]| {
        let mut cmd = Command::new("git");
        cmd.args(args);
        with_env(cmd)
    };
    run(&mut git(&["init", "-q", "-b", "main"]))?;
    std::fs::write(repo.join(".agent-sandbox/config.jsonc"), "{ \"checks\": { \"humans\": true } }\n")?;
    let mut allow = Command::new(bin);
    allow.args(["config", "allow"]);
    run(&mut with_env(allow))?;
    run(&mut git(&["add", "-A"]))?;
    run(&mut git(&["-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "config"]))?;
    let mut install = Command::new(bin);
    install.args(["hooks", "install"]);
    run(&mut with_env(install))?;
    for d in 0..100 {
        let sub = repo.join(format!("src{d}"));
        std::fs::create_dir_all(&sub)?;
        for f in 0..100 {
            let text = format!("// file {d}/{f}\npub fn f{f}() -> u32 {{ {f} }}\nconst NAME: &str = \"n{d}-{f}\";\n");
            std::fs::write(sub.join(format!("f{f}.rs")), text)?;
        }
    }
    run(&mut git(&["add", "-A"]))?;
    let commit = |guarded: bool| -> Result<Duration> {
        let mut cmd = if guarded {
            git(&["commit", "-q", "-m", "x"])
        } else {
            git(&["-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "x"])
        };
        cmd.stderr(Stdio::null());
        let took = time(cmd)?;
        run(&mut git(&["reset", "-q", "--soft", "HEAD~1"]))?;
        Ok(took)
    };
    let mut series: [Vec<Duration>; 2] = Default::default();
    for round in 0..PRECOMMIT_RUNS + 2 {
        let times = [commit(true)?, commit(false)?];
        if round >= 2 {
            for (all, one) in series.iter_mut().zip(times) {
                all.push(one);
            }
        }
    }
    let [guarded_ms, plain_ms] = series.map(median_ms);
    println!("pre-commit guard: `git commit` of 10,000 new files, median of {PRECOMMIT_RUNS} interleaved runs");
    println!("  with the guard                      {guarded_ms:8.2} ms");
    println!("  hooks off                           {plain_ms:8.2} ms");
    println!(
        "  the guard's own cost                {:8.2} ms  (target: at most 150 ms: {})",
        guarded_ms - plain_ms,
        verdict(guarded_ms - plain_ms <= 150.0)
    );
    Ok(())
}

/// Every path below `dir` that can be listed.
fn listing(dir: &Path) -> std::collections::BTreeSet<PathBuf> {
    let mut all = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            all.extend(listing(&path));
        }
        all.insert(path);
    }
    all
}

fn git(dir: &Path, args: &[&str]) -> Result<()> {
    run(Command::new("git").args(args).current_dir(dir).stdout(Stdio::null()))
}

/// bwrap as one `exec` would run it: its arguments, its environment and the runtime
/// directory it prepared and left in place for the bench.
struct Captured {
    bwrap: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    runtime: PathBuf,
    /// What the runtime directory held before any bwrap ran on it: bwrap makes its
    /// mount points and symlinks (`/etc/localtime`) in the directories bound from it,
    /// so each baseline run starts from this, as each `exec` starts from a new one.
    pristine: std::collections::BTreeSet<PathBuf>,
    /// The seccomp program, opened anew for each run (bwrap reads it from the shared
    /// offset), kept open until the next; bwrap gets it as fd 3 as from `exec`.
    seccomp: std::cell::RefCell<Option<std::fs::File>>,
    /// The status pipe, bwrap's fd 4, never read (two short lines per run fit).
    status: (std::os::fd::OwnedFd, std::os::fd::OwnedFd),
}

impl Captured {
    fn capture(mut exec: Command, file: &Path) -> Result<Captured> {
        exec.env("AGENT_SANDBOX_BENCH_ARGV", file);
        time(exec)?;
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(file).context("exec wrote no bwrap command line")?)?;
        let text = |value: &serde_json::Value| value.as_str().map(str::to_owned).context("a string");
        let list = |key: &str| json[key].as_array().cloned().unwrap_or_default();
        let runtime = PathBuf::from(text(&json["runtime"])?);
        let mut fds = [-1; 2];
        // SAFETY: fds has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            bail!("pipe2: {}", std::io::Error::last_os_error());
        }
        // SAFETY: pipe2 just created both descriptors; each is owned once.
        let status =
            unsafe { (std::os::fd::FromRawFd::from_raw_fd(fds[0]), std::os::fd::FromRawFd::from_raw_fd(fds[1])) };
        Ok(Captured {
            seccomp: std::cell::RefCell::new(None),
            status,
            bwrap: text(&json["bwrap"])?,
            args: list("args").iter().map(text).collect::<Result<_>>()?,
            env: list("env").iter().map(|pair| Ok((text(&pair[0])?, text(&pair[1])?))).collect::<Result<_>>()?,
            pristine: listing(&runtime),
            runtime,
        })
    }

    /// Removes what an earlier baseline run's bwrap added to the runtime directory
    /// (directories it cannot list are mode 0111: bwrap could not write there either).
    fn reset(&self) {
        for path in listing(&self.runtime).difference(&self.pristine) {
            let _ = std::fs::remove_file(path).or_else(|_| std::fs::remove_dir_all(path));
        }
    }

    /// bwrap with the seccomp program on fd 3 and a status pipe on fd 4, as exec passes
    /// them (the status pipe is never read: bwrap writes two short lines).
    fn command(&self) -> Command {
        self.reset();
        use std::os::fd::AsRawFd;
        let seccomp = std::fs::File::open(runtime_layout::RuntimeLayout::host(&self.runtime).seccomp()).ok();
        let seccomp_fd = seccomp.as_ref().map_or(-1, AsRawFd::as_raw_fd);
        self.seccomp.replace(seccomp);
        let status_fd = self.status.1.as_raw_fd();
        let mut cmd = Command::new(&self.bwrap);
        cmd.args(&self.args).env_clear().envs(self.env.iter().map(|(name, value)| (name, value)));
        // SAFETY: only dup2/fcntl between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let seccomp_copy = libc::fcntl(seccomp_fd, libc::F_DUPFD_CLOEXEC, 10);
                let status_copy = libc::fcntl(status_fd, libc::F_DUPFD_CLOEXEC, 10);
                if seccomp_copy < 0
                    || status_copy < 0
                    || libc::dup2(seccomp_copy, 3) < 0
                    || libc::dup2(status_copy, 4) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd
    }

    /// Removes the runtime directory exec left (its directories are mode 0111).
    fn remove(&self) {
        fn open_up(dir: &Path) {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                    open_up(&entry.path());
                }
            }
        }
        open_up(&self.runtime);
        let _ = std::fs::remove_dir_all(&self.runtime);
    }
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
    println!("docker: firewall apply in a container (the proxy restarted, resolv.conf, rules, verified), median of 9");
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
    println!("  {what:<28} {ratio:5.2}x  ({} the target of {target}x)", verdict(ratio <= target));
}

pub(crate) fn verdict(meets: bool) -> &'static str {
    if meets {
        "meets"
    } else {
        "MISSES"
    }
}

pub fn docker_part() -> Result<()> {
    docker_bench()
}

pub(crate) fn time(mut cmd: Command) -> Result<Duration> {
    let start = Instant::now();
    let status = cmd.stdout(Stdio::null()).status().with_context(|| format!("starting {cmd:?}"))?;
    let elapsed = start.elapsed();
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(elapsed)
}

/// [`time`], and the peak resident memory of the largest process of the run (the
/// command or any descendant it waited for: `wait4`'s `ru_maxrss`, in KiB).
fn time_and_rss(mut cmd: Command) -> Result<(Duration, i64)> {
    let start = Instant::now();
    let child = cmd.stdout(Stdio::null()).spawn().with_context(|| format!("starting {cmd:?}"))?;
    let pid = i32::try_from(child.id()).context("a pid")?;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own unwaited child; status and usage are valid for writing.
    if unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid {
        bail!("wait4 {cmd:?}: {}", std::io::Error::last_os_error());
    }
    let elapsed = start.elapsed();
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("{cmd:?} failed: wait status {status}");
    }
    Ok((elapsed, usage.ru_maxrss))
}

pub(crate) fn median_ms(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}

/// `packages` directories of `files` (empty: the scan reads names only) files under
/// node_modules, plus `secrets` `.env` files scattered among them and a small src/ tree.
/// Two threads write it (the big tree has a million files).
fn make_project(root: &Path, packages: usize, files: usize, secrets: usize) -> Result<()> {
    let src = root.join("src");
    std::fs::create_dir_all(&src)?;
    std::fs::write(root.join("package.json"), "{}\n")?;
    let make = |pkg: usize| -> Result<()> {
        let dir: PathBuf = root.join("node_modules").join(format!("pkg{}", pkg / 100)).join(format!("sub{pkg}"));
        std::fs::create_dir_all(&dir)?;
        for file in 0..files {
            std::fs::File::create(dir.join(format!("f{file}.js")))?;
        }
        if secrets > 0 && pkg.is_multiple_of((packages / secrets).max(1)) {
            std::fs::write(dir.join(".env"), "TOKEN=x\n")?;
        }
        Ok(())
    };
    std::thread::scope(|scope| {
        let halves: Vec<_> =
            (0..2).map(|half| scope.spawn(move || (half..packages).step_by(2).try_for_each(make))).collect();
        halves.into_iter().try_for_each(|half| half.join().unwrap_or_else(|_| bail!("a writer thread panicked")))
    })
}

/// A committed repository of `dirs` × `files` small files.
fn make_repo(root: &Path, dirs: usize, files: usize) -> Result<()> {
    for dir in 0..dirs {
        let path = root.join(format!("d{dir}"));
        std::fs::create_dir_all(&path)?;
        for file in 0..files {
            std::fs::write(path.join(format!("f{file}.txt")), format!("{dir} {file}\n"))?;
        }
    }
    commit_all(root)
}

/// Makes `root` a git repository with everything in it committed.
fn commit_all(root: &Path) -> Result<()> {
    git(root, &["init", "-q"])?;
    git(root, &["config", "user.name", "bench"])?;
    git(root, &["config", "user.email", "bench@example.invalid"])?;
    git(root, &["add", "-A"])?;
    git(root, &["commit", "-q", "-m", "initial"])
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
    let verdict = |meets: bool| if meets { "meets" } else { "MISSES" };
    println!("virtual sandbox (crates/vsandbox, in process, release build)");
    for store in ["memory", "redb"] {
        let per_second = figure(&format!("{store}.commands_per_second"))?;
        let nodes = figure(&format!("{store}.snapshot_nodes"))?;
        let round_trip = figure(&format!("{store}.snapshot_restore_ms"))?;
        let json_round_trip = figure(&format!("{store}.snapshot_json_restore_ms"))?;
        if store == "memory" {
            println!("  in memory");
            println!(
                "    simple commands per second        {per_second:10.0}     ({} the target of >= 1,000,000)",
                verdict(per_second >= 1_000_000.0)
            );
            println!(
                "    snapshot + restore, {nodes:.0} nodes  {round_trip:10.2} ms  ({} the target of <= 20 ms)",
                verdict(round_trip <= 20.0)
            );
        } else {
            println!("  in a redb store file (every command line that changes something is committed durably)");
            println!("    simple commands per second        {per_second:10.0}");
            println!("    snapshot + restore, {nodes:.0} nodes  {round_trip:10.2} ms");
        }
        println!("    the same through the JSON form    {json_round_trip:10.2} ms");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_times_reads_each_stage_of_a_debug_line() {
        let times = stage_times("stop 0.10 ms, list 40.50 ms, claude 0.00 ms").expect("a stage line");
        let want = [("stop", 0.10), ("list", 40.50), ("claude", 0.0)]
            .map(|(name, ms)| (name.to_owned(), Duration::from_secs_f64(ms / 1000.0)));
        assert_eq!(times, want);
    }
}
