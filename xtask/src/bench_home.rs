//! `cargo xtask bench home` (as root, with the engine): what a container's session
//! repository and its broker (`hostpush::home`) cost, against baselines measured in the
//! same run, in containers of `agent-sandbox-base:e2e` laid out as the Docker sandbox's
//! bind mode lays them out (`--network none`):
//! - seeding: `git-home start` on a new session volume, for a repository of 10,000 refs
//!   and 100,000 commits (5,000 files), against `docker exec … true`; target at most
//!   50 ms more;
//! - a commit coming home: the time from a guarded `git commit` returning (the guard
//!   starts the broker in the background) until the user's branch has it, target at
//!   most 1 s (no checks configured); beside it the commit's own time, against the same
//!   commit in a container whose `.git` is the user's own (no broker);
//! - the realistic loop (edit, `status`, `diff`, `add -A`, `commit`, ten times) in the
//!   same two containers, target 1.05×.
//!
//! `cargo xtask bench session` (no root, no engine): the same three figures for
//! `exec`'s session repository (`hostpush::home::exec`), in the same repository, against
//! `exec` with `git.sessionRepository` off measured in the same run.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};

use crate::bench::{median_ms, time};

const REFS: usize = 10_000;
const COMMITS: usize = 100_000;
const FILES: usize = 5_000;
const RUNS: usize = 7;
const WORK_LOOP: &str = "i=0; while [ $i -lt 10 ]; do echo $i >> d0/f0.txt; git status >/dev/null; \
                         git diff >/dev/null; git add -A; git commit -q -m \"work $i\"; i=$((i+1)); done";
/// The agent's user of the e2e image (the work trees are given to it).
const AGENT_UID: &str = "1000:1000";

pub fn run_home_bench() -> Result<()> {
    if !crate::is_root() {
        bail!("bench home runs as root: it starts the engine and makes containers");
    }
    crate::docker::prepare_e2e()?;
    let id = std::process::id();
    let dir = std::env::temp_dir().join(format!("agent-sandbox-bench-home-{id}"));
    let names: Vec<String> = ["seed", "session", "plain"].iter().map(|what| format!("as-bench-{what}-{id}")).collect();
    let result = bench(&dir, &names);
    for name in &names {
        let _ = Command::new("docker").args(["rm", "-f", "-v", name]).output();
        let _ = Command::new("docker").args(["volume", "rm", "-f", &format!("{name}-git")]).output();
    }
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn bench(dir: &Path, names: &[String]) -> Result<()> {
    let big = dir.join("big");
    eprintln!("bench home: a repository of {COMMITS} commits, {REFS} refs and {FILES} files in {}", big.display());
    make_history(&big)?;
    for copy in ["session", "plain"] {
        crate::run(Command::new("cp").arg("-a").arg(&big).arg(dir.join(copy)))?;
    }
    crate::run(Command::new("chown").args(["-R", AGENT_UID]).arg(dir))?;

    let (mut seeds, mut base) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        start(&names[0], &big, true)?;
        base.push(time(exec(&names[0], "root", &["true"]))?);
        seeds.push(time(exec(&names[0], "root", &["agent-sandbox", "git-home", "start"]))?);
        remove(&names[0]);
    }
    let (seed_ms, base_ms) = (median_ms(seeds), median_ms(base));
    println!("home: seeding a session repository ({REFS} refs, {COMMITS} commits, {FILES} files), median of {RUNS}");
    println!("  docker exec … git-home start                     {seed_ms:8.1} ms");
    println!("  docker exec … true (baseline)                    {base_ms:8.1} ms");
    report("seeding, above the baseline", seed_ms - base_ms, 50.0);

    start(&names[1], &dir.join("session"), true)?;
    crate::run(&mut exec(&names[1], "root", &["agent-sandbox", "git-home", "start"]))?;
    start(&names[2], &dir.join("plain"), false)?;
    let (mut session, mut plain, mut home) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..RUNS {
        let commit = format!("echo {run} >> d1/f1.txt && git add d1/f1.txt && git commit -q -m one-{run}");
        session.push(time(exec(&names[1], "node", &["sh", "-c", &commit]))?);
        let returned = Instant::now();
        loop {
            let out = Command::new("git")
                .args(["-c", "safe.directory=*", "-C"])
                .arg(dir.join("session"))
                .args(["log", "-1", "--format=%s", "main"])
                .output()?;
            if String::from_utf8_lossy(&out.stdout).trim() == format!("one-{run}") {
                break;
            }
            if returned.elapsed() > Duration::from_secs(30) {
                bail!("the commit one-{run} did not reach the user's branch within 30 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        home.push(returned.elapsed());
        plain.push(time(exec(&names[2], "node", &["sh", "-c", &commit]))?);
    }
    let (session_ms, plain_ms, home_ms) = (median_ms(session), median_ms(plain), median_ms(home));
    println!("home: one `git commit` through the guard, median of {RUNS}");
    println!("  with the broker                                  {session_ms:8.1} ms");
    println!("  the user's own .git inside (no broker)           {plain_ms:8.1} ms");
    report("`git commit` returned → on the user's branch", home_ms, 1000.0);

    let (mut session, mut plain) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        session.push(time(exec(&names[1], "node", &["sh", "-c", WORK_LOOP]))?);
        plain.push(time(exec(&names[2], "node", &["sh", "-c", WORK_LOOP]))?);
    }
    let (session_ms, plain_ms) = (median_ms(session), median_ms(plain));
    println!("home: status, diff, add, commit ten times in {FILES} files, median of 3");
    println!("  with the broker                                  {session_ms:8.1} ms");
    println!(
        "  the user's own .git inside (no broker)           {plain_ms:8.1} ms  ratio {:.2}x",
        session_ms / plain_ms
    );
    println!(
        "  the realistic loop              {:5.2}x  ({} the target of 1.05x)",
        session_ms / plain_ms,
        crate::bench::verdict(session_ms / plain_ms <= 1.05)
    );
    Ok(())
}

/// `cargo xtask bench session`.
pub fn run_session_bench() -> Result<()> {
    let root = crate::root();
    crate::run(
        Command::new("cargo").args(["build", "--release", "--locked", "--bin", "agent-sandbox"]).current_dir(&root),
    )?;
    let bin = root.join("target/release/agent-sandbox");
    let dir = std::env::temp_dir().join(format!("agent-sandbox-bench-session-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let result = session_bench(&bin, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn session_bench(bin: &Path, dir: &Path) -> Result<()> {
    let repo = dir.join("big");
    eprintln!("bench session: a repository of {COMMITS} commits, {REFS} refs and {FILES} files in {}", repo.display());
    make_history(&repo)?;
    let (on, off) = (dir.join("config-on"), dir.join("config-off"));
    std::fs::create_dir_all(off.join("agent-sandbox"))?;
    std::fs::create_dir_all(&on)?;
    // Without the session repository, `.git` is read-only inside: the start without it
    // is the baseline of the start; the loop's is the same loop outside any sandbox.
    std::fs::write(off.join("agent-sandbox/config.jsonc"), r#"{ "git": { "sessionRepository": false } }"#)?;
    let sessions = dir.join("state/agent-sandbox/sessions");
    let exec = |config: &Path, script: &str| {
        let mut cmd = Command::new(bin);
        cmd.args(["exec", "--network", "off", "--", "sh", "-c", script])
            .current_dir(&repo)
            .env("HOME", dir.join("home"))
            .env("XDG_CONFIG_HOME", config)
            .env("XDG_STATE_HOME", dir.join("state"))
            .env("XDG_CACHE_HOME", dir.join("cache"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    };
    let forget = || {
        for entry in std::fs::read_dir(&sessions).into_iter().flatten().flatten() {
            let _ = std::fs::remove_dir_all(entry.path().join("home"));
        }
    };
    std::fs::create_dir_all(dir.join("home"))?;
    time(exec(&on, "true"))?;
    time(exec(&off, "true"))?;
    let (mut new, mut kept, mut without) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        forget();
        new.push(time(exec(&on, "true"))?);
        kept.push(time(exec(&on, "true"))?);
        without.push(time(exec(&off, "true"))?);
    }
    // Making the session repository itself, as `--debug` times it (the broker's setup
    // and `prepare`: the issue's figure); the whole start above also holds what any
    // session costs (the push service, the final sync).
    let mut made = Vec::new();
    for _ in 0..RUNS {
        forget();
        let out = Command::new(bin)
            .args(["exec", "--debug", "--network", "off", "--", "true"])
            .current_dir(&repo)
            .env("HOME", dir.join("home"))
            .env("XDG_CONFIG_HOME", &on)
            .env("XDG_STATE_HOME", dir.join("state"))
            .env("XDG_CACHE_HOME", dir.join("cache"))
            .output()?;
        let err = String::from_utf8_lossy(&out.stderr);
        let ms = err
            .lines()
            .find_map(|line| line.split_once("starts from your repository's refs (")?.1.strip_suffix(" ms)"))
            .and_then(|ms| ms.parse::<u64>().ok())
            .with_context(|| format!("no creation time in exec --debug's output:\n{err}"))?;
        made.push(Duration::from_millis(ms));
    }
    let (new_ms, kept_ms, without_ms) = (median_ms(new), median_ms(kept), median_ms(without));
    println!("session: `exec --network off -- true` ({REFS} refs, {COMMITS} commits, {FILES} files), median of {RUNS}");
    println!("  a new session repository                         {new_ms:8.1} ms");
    println!("  a kept one                                       {kept_ms:8.1} ms");
    println!("  git.sessionRepository off, .git read-only (base) {without_ms:8.1} ms");
    report("making one (the repository itself)", median_ms(made), 50.0);
    println!("  {:<48} {:8.1} ms", "a new one's whole start, above the baseline", new_ms - without_ms);
    report("a kept one, above the baseline", kept_ms - without_ms, 50.0);

    // From `git commit` returning inside to the user's branch having it, while the
    // session goes on (the git guard asks the broker; no checks configured).
    let mut home = Vec::new();
    for run in 0..RUNS {
        let _ = std::fs::remove_file(repo.join(".seen"));
        let script = format!(
            "echo {run} >> d1/f1.txt && git add d1/f1.txt && git commit -q -m one-{run} && date +%s%N > .returned; \
             i=0; while [ ! -e .seen ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"
        );
        let mut child = exec(&on, &script).spawn()?;
        let started = Instant::now();
        let seen = loop {
            let out = Command::new("git").args(["log", "-1", "--format=%s", "main"]).current_dir(&repo).output()?;
            if String::from_utf8_lossy(&out.stdout).trim() == format!("one-{run}") {
                break std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
            }
            if started.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                bail!("the commit one-{run} did not reach the user's branch within 30 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        std::fs::write(repo.join(".seen"), "")?;
        child.wait()?;
        let returned: u128 = std::fs::read_to_string(repo.join(".returned"))?.trim().parse()?;
        home.push(Duration::from_nanos(seen.as_nanos().saturating_sub(returned) as u64));
    }
    println!("session: one `git commit` inside, median of {RUNS}");
    report("`git commit` returned → on the user's branch", median_ms(home), 1000.0);

    // The loop, timed inside (the sync at the end of `exec` is not the agent's wait).
    let timed = format!("s=$(date +%s%N); {WORK_LOOP}; e=$(date +%s%N); echo $((e - s)) > .loop");
    let read_loop = || -> Result<Duration> {
        Ok(Duration::from_nanos(std::fs::read_to_string(repo.join(".loop"))?.trim().parse()?))
    };
    let outside = || {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &timed]).current_dir(&repo).stdout(Stdio::null()).stderr(Stdio::null());
        cmd
    };
    let (mut session, mut plain) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        time(exec(&on, &timed))?;
        session.push(read_loop()?);
        time(outside())?;
        plain.push(read_loop()?);
    }
    let (session_ms, plain_ms) = (median_ms(session), median_ms(plain));
    println!("session: status, diff, add, commit ten times in {FILES} files, median of {RUNS}");
    println!("  with the session repository                      {session_ms:8.1} ms");
    println!("  outside any sandbox, the real git                {plain_ms:8.1} ms");
    println!(
        "  the realistic loop              {:5.2}x  ({} the target of 1.05x)",
        session_ms / plain_ms,
        crate::bench::verdict(session_ms / plain_ms <= 1.05)
    );
    Ok(())
}

fn report(what: &str, ms: f64, target: f64) {
    println!("  {what:<48} {ms:8.1} ms  ({} the target of {target} ms)", crate::bench::verdict(ms <= target));
}

/// A container of the e2e image on `repo`, laid out as the Docker sandbox's bind mode
/// does: with a session repository (`session`), or with the user's `.git` inside.
fn start(name: &str, repo: &Path, session: bool) -> Result<()> {
    let repo = repo.display();
    let image = format!("agent-sandbox-base:{}", crate::docker::E2E_TAG);
    let mut cmd = Command::new("docker");
    cmd.args(["run", "-d", "--name", name, "--network", "none", "-w", "/workspace/app"])
        .args(["-v", &format!("{repo}:/workspace/app")]);
    if session {
        for (path, target, read_only) in devcontainer::session_binds() {
            let ro = if read_only { ":ro" } else { "" };
            cmd.args(["-v", &format!("{repo}/{path}:{target}{ro}")]);
        }
        cmd.args(["-v", &format!("{name}-git:/workspace/app/.git")]);
    }
    cmd.args(["--entrypoint", "sleep", &image, "infinity"]).stdout(Stdio::null());
    crate::run(&mut cmd)
}

fn remove(name: &str) {
    let _ = Command::new("docker").args(["rm", "-f", "-v", name]).output();
    let _ = Command::new("docker").args(["volume", "rm", "-f", &format!("{name}-git")]).output();
}

fn exec(name: &str, user: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("docker");
    cmd.args(["exec", "-u", user, name]).args(args).stderr(Stdio::null());
    cmd
}

/// `COMMITS` commits on `main` (the first adds `FILES` files in 50 directories, each
/// later one changes one file), a branch at every 20th and a tag at every 20th.
fn make_history(repo: &Path) -> Result<()> {
    std::fs::create_dir_all(repo)?;
    crate::run(Command::new("git").args(["init", "-q", "-b", "main"]).arg(repo))?;
    let mut stream = String::with_capacity(COMMITS * 160);
    let commit_header = |stream: &mut String, mark: usize| {
        stream.push_str(&format!(
            "commit refs/heads/main\nmark :{mark}\ncommitter b <b@example.invalid> {} +0000\ndata 8\nc{mark:06}\n",
            1_700_000_000 + mark
        ));
    };
    commit_header(&mut stream, 1);
    for f in 0..FILES {
        stream.push_str(&format!("M 644 inline d{}/f{}.txt\ndata <<EOF\nfile {f}\nEOF\n", f % 50, f / 50));
    }
    for mark in 2..=COMMITS {
        commit_header(&mut stream, mark);
        stream.push_str(&format!("M 644 inline d{}/f{}.txt\ndata <<EOF\n{mark}\nEOF\n", mark % 50, mark % 100));
    }
    for n in 0..REFS / 2 {
        let mark = 1 + n * (COMMITS / (REFS / 2));
        stream.push_str(&format!("reset refs/heads/b{n}\nfrom :{mark}\n\nreset refs/tags/t{n}\nfrom :{mark}\n\n"));
    }
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(repo)
        .stdin(Stdio::piped())
        .spawn()
        .context("starting git fast-import")?;
    std::io::Write::write_all(child.stdin.as_mut().expect("piped"), stream.as_bytes())?;
    drop(child.stdin.take());
    if !child.wait()?.success() {
        bail!("git fast-import failed");
    }
    crate::run(Command::new("git").args(["-c", "gc.auto=0", "checkout", "-q", "-f", "main"]).current_dir(repo))?;
    // As a clone leaves them.
    crate::run(Command::new("git").args(["pack-refs", "--all"]).current_dir(repo))?;
    for (key, value) in [("user.name", "bench"), ("user.email", "bench@example.invalid"), ("gc.auto", "0")] {
        crate::run(Command::new("git").args(["config", key, value]).current_dir(repo))?;
    }
    Ok(())
}
