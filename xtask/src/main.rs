//! Project automation, run as `cargo xtask <task>` (see `.cargo/config.toml`):
//! - `test`: installs what the suite needs (bubblewrap, python3, util-linux, procps),
//!   checks formatting and clippy (`-D warnings`, every target), runs every test as the current user and, when that is root, again as an
//!   unprivileged user, because real users run agent-sandbox unprivileged;
//! - `bench`: the start-up benchmarks, reported as ratios against a baseline measured in
//!   the same run, then the virtual sandbox's throughput (`bench vsandbox`: only those);
//!   `bench network`: the allowlist proxy's throughput and added latency against direct;
//!   `bench home` (root, Docker): a container's session repository and its broker;
//!   `bench session`: the same for `exec`'s;
//!   `bench git`: only the git guard's loops; `bench exec`: all but Docker and the
//!   virtual sandbox;
//! - `soak`: the session repository's sync against its model, with many more cases
//!   than the normal suite (1,000,000 in memory, 2,000 on real repositories);
//! - `book`: the book in `docs/` (mdBook, installed once when missing), its links checked;
//! - `dist`: the packages (tarball, npm, wheel, `.deb`) from one static build (`dist.rs`);
//!   `dist-test` (root, Docker): each installed from its file in a clean container (`dist_test.rs`);
//! - `feature`: the Dev Container Feature packaged as a registry artifact by
//!   `devcontainer features package`, with a static binary inside (`feature.rs`).
//!
//! No shell scripts: every step is a `Command` whose failure stops the task.

mod bench;
mod bench_home;
mod bench_network;
mod book;
mod dist;
mod dist_test;
mod docker;
mod feature;
#[cfg(test)]
mod tidy;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("test") => test(),
        Some("bench") if args.get(1).map(String::as_str) == Some("docker") => bench::docker_part(),
        Some("bench") if args.get(1).is_some_and(|arg| arg == "vsandbox") => bench::run_vsandbox_bench(),
        Some("bench") if args.get(1).is_some_and(|arg| arg == "precommit") => bench::run_precommit_bench(),
        Some("bench") if args.get(1).is_some_and(|arg| arg == "network") => bench_network::run_network_bench(),
        Some("bench") if args.get(1).is_some_and(|arg| arg == "home") => bench_home::run_home_bench(),
        Some("bench") if args.get(1).is_some_and(|arg| arg == "session") => bench_home::run_session_bench(),
        Some("bench") if args.get(1).is_some_and(|arg| arg == "git") => bench::run_git_bench(),
        Some("bench") if args.get(1).is_some_and(|arg| arg == "exec") => bench::run_exec_bench(),
        Some("bench") => bench::run_bench().and_then(|()| bench::run_vsandbox_bench()),
        Some("man") => man(),
        Some("soak") => soak(),
        Some("build-base") => docker::build_base(&args[1..]),
        Some("bootstrap-image") => docker::bootstrap_image(&args[1..]),
        Some("feature") => feature::feature(),
        Some("book") => book::book(),
        Some("dist") => dist::dist(),
        Some("dist-test") => dist_test::dist_test(),
        _ => {
            bail!(
                "usage: cargo xtask <test|soak|bench [docker|vsandbox|precommit|network|home|session|git|exec]|man|build-base|bootstrap-image|feature|dist|dist-test|book>"
            )
        }
    }
}

/// `cargo xtask soak`: the session repository's sync against its model, longer than the
/// normal suite runs it: 1,000,000 interleavings of the pure decision, 2,000 through the
/// real broker on real repositories.
fn soak() -> Result<()> {
    let root = root();
    let runs: [(&[&str], &str); 2] = [
        (&["test", "--locked", "-p", "session-repo", "--", "model"], "1000000"),
        (&["test", "--locked", "--test", "it", "--", "sync_model"], "2000"),
    ];
    for (args, cases) in runs {
        let status = Command::new("cargo")
            .args(args)
            .env("AGENT_SANDBOX_MODEL_CASES", cases)
            .current_dir(&root)
            .status()
            .context("running cargo test")?;
        if !status.success() {
            bail!("the model test failed ({cases} cases): see above");
        }
    }
    Ok(())
}

/// `cargo xtask man`: target/man/agent-sandbox.1, generated from the clap definitions by
/// the binary itself (`agent-sandbox man`), so it cannot drift from `--help`.
fn man() -> Result<()> {
    let root = root();
    run(Command::new("cargo").args(["build", "--locked", "--bin", "agent-sandbox"]).current_dir(&root))?;
    let out = Command::new(root.join("target/debug/agent-sandbox"))
        .arg("man")
        .output()
        .context("running agent-sandbox man")?;
    if !out.status.success() {
        bail!("agent-sandbox man failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let dir = root.join("target/man");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("agent-sandbox.1"), &out.stdout)?;
    eprintln!("xtask: wrote {}", dir.join("agent-sandbox.1").display());
    Ok(())
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

pub fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

pub fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|out| out.stdout == b"0\n")
}

/// Debian packages the suite needs, by the command that shows each is present.
/// pipx installs the pre-commit framework the way Python users do (tests/it/projects.rs).
const PACKAGES: &[(&str, &str)] = &[
    ("bwrap", "bubblewrap"),
    ("python3", "python3"),
    ("runuser", "util-linux"),
    ("ps", "procps"),
    ("git", "git"),
    ("pipx", "pipx"),
    // An ssh remote on loopback for the push-through-the-host tests.
    ("sshd", "openssh-server"),
    ("ssh-keygen", "openssh-client"),
    // The remote engine test's CA, engine and client certificates (tests/it/remote_engine.rs).
    ("openssl", "openssl"),
];

pub fn ensure_packages() -> Result<()> {
    ensure_debian_packages(PACKAGES)
}

/// Installs the Debian packages (command, package) whose command is missing.
pub fn ensure_debian_packages(packages: &[(&str, &str)]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .filter(|(command, _)| {
            !["/usr/bin", "/usr/sbin"].iter().any(|dir| Path::new(dir).join(command).exists())
                && which(command).is_none()
        })
        .map(|(_, package)| *package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        bail!("missing packages: {} (install with: sudo apt-get install -y {})", missing.join(" "), missing.join(" "));
    }
    eprintln!("xtask: installing {}", missing.join(" "));
    run(Command::new("apt-get").args(["update", "-qq"]))?;
    run(Command::new("apt-get").args(["install", "-y", "-qq", "--no-install-recommends"]).args(&missing))
}

fn which(command: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(command)).find(|path| path.is_file())
}

const TEST_USER: &str = "agent-sandbox-ci";

fn test() -> Result<()> {
    ensure_packages()?;
    let root = root();
    disk_check(&root);
    let started = std::time::Instant::now();
    gates(&root)?;
    let mut tally = Tally::default();
    tally.phase("gates (fmt, clippy, schemas)", started.elapsed(), "passed");
    let started = std::time::Instant::now();
    let mut cargo_test = Command::new("cargo");
    cargo_test.args(["test", "--workspace", "--locked"]).current_dir(&root);
    // The devcontainer end-to-end tests (as root): a real engine, the real CLI, a base
    // image built from Debian's packages (no registry needed).
    let e2e_env = if is_root() {
        let cli = docker::prepare_e2e()?;
        // What an earlier run that was stopped midway left.
        docker::remove_e2e_leftovers();
        // The Feature as its artifact (static binary inside), for the Feature's harness
        // and registry tests.
        let artifact = feature::package(&cli)?;
        vec![
            ("AGENT_SANDBOX_E2E_BASE_TAG", docker::E2E_TAG.into()),
            ("AGENT_SANDBOX_DEVCONTAINER_CLI", cli.into_os_string()),
            ("AGENT_SANDBOX_E2E_FEATURE", artifact.project.into_os_string()),
        ]
    } else {
        Vec::new()
    };
    cargo_test.envs(e2e_env.iter().map(|(name, value)| (name, value)));
    let status = tally.run(&mut cargo_test)?;
    if is_root() {
        docker::remove_e2e_leftovers();
    }
    if !status.success() {
        bail!("cargo test failed: {status}");
    }
    tally.phase(
        if is_root() { "every test as root (Docker included)" } else { "every test" },
        started.elapsed(),
        "passed",
    );
    newest_agents(&root, &e2e_env, &mut tally)?;
    if !is_root() {
        tally.report("as the current user");
        return Ok(());
    }
    let started = std::time::Instant::now();
    eprintln!("xtask: running the test binaries again as the unprivileged user {TEST_USER}");
    if Command::new("id").arg(TEST_USER).output().map(|out| !out.status.success()).unwrap_or(true) {
        run(Command::new("useradd").args(["--create-home", "--shell", "/bin/sh", TEST_USER]))?;
    }
    // The checkout may sit where the test user cannot read (e.g. under /root): run
    // copies from a world-readable directory instead.
    let stage = PathBuf::from(format!("/tmp/agent-sandbox-nonroot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&stage);
    std::fs::create_dir_all(&stage)?;
    let binaries = test_binaries(&root)?;
    let bin = stage.join("agent-sandbox");
    std::fs::copy(root.join("target/debug/agent-sandbox"), &bin).context("copying agent-sandbox")?;
    let mut staged = Vec::new();
    for binary in &binaries {
        let name = binary.file_name().context("binary has a name")?;
        let copy = stage.join(name);
        std::fs::copy(binary, &copy).with_context(|| format!("copying {}", binary.display()))?;
        staged.push(copy);
    }
    run(Command::new("chmod").args(["-R", "a+rX"]).arg(&stage))?;
    let home = format!("/home/{TEST_USER}");
    let mut failed = Vec::new();
    for binary in &staged {
        let status = tally.run(
            Command::new("runuser")
                .args(["-u", TEST_USER, "--", "env", "-i"])
                .arg(format!("HOME={home}"))
                .arg("PATH=/usr/local/bin:/usr/bin:/bin")
                .arg("LANG=C.UTF-8")
                .arg(format!("CI={}", std::env::var("CI").unwrap_or_default()))
                .arg(format!("AGENT_SANDBOX_BIN={}", bin.display()))
                .arg(binary)
                .current_dir(&stage),
        )?;
        if !status.success() {
            failed.push(binary.display().to_string());
        }
    }
    let _ = std::fs::remove_dir_all(&stage);
    if !failed.is_empty() {
        bail!("as {TEST_USER}, these test binaries failed: {}", failed.join(", "));
    }
    tally.phase(&format!("every test binary as {TEST_USER}"), started.elapsed(), "passed");
    tally.report(&format!("as root and as {TEST_USER}"));
    Ok(())
}

/// Says how much disk the suite has, loudly when it is too little: a full disk fails
/// the Docker tests and the agents' installs with errors that name neither.
fn disk_check(root: &Path) {
    /// What a run needs, about: the debug build and the unprivileged copies (~18 GB),
    /// the images and the agents' installs (~6 GB).
    const NEEDED_GB: u64 = 25;
    let free_gb = |path: &Path| -> Option<u64> {
        let out = Command::new("df").args(["--output=avail", "-B1G"]).arg(path).output().ok()?;
        String::from_utf8_lossy(&out.stdout).lines().nth(1)?.trim().parse().ok()
    };
    let Some(free) = free_gb(root) else { return };
    if free < NEEDED_GB {
        eprintln!(
            "xtask: WARNING: only {free} GB free where the build goes ({}); a full run needs about {NEEDED_GB} GB. \
             Leftovers of earlier runs are the usual cause: `docker system df`, old clones' target/, /tmp/as-it-*.",
            root.display()
        );
    } else {
        eprintln!("xtask: {free} GB free where the build goes (a full run needs about {NEEDED_GB} GB)");
    }
}

/// The real agents' tests against the newest release on npm of each driven agent (Claude
/// Code, Codex, Qwen Code, Gemini CLI, OpenCode, Copilot CLI): a row that says what broke without failing the
/// run (the pinned versions are the ones that must pass). Its test counts are not added
/// to the total.
fn newest_agents(root: &Path, e2e_env: &[(&str, std::ffi::OsString)], tally: &mut Tally) -> Result<()> {
    eprintln!("xtask: the real agents' tests against their newest releases (does not fail the run)");
    let started = std::time::Instant::now();
    let mut row = Tally::default();
    let status = row.run(
        Command::new("cargo")
            .args(["test", "--locked", "--test", "it", "--", "real_agents::"])
            .env("AGENT_SANDBOX_IT_AGENT_VERSIONS", "latest")
            .envs(e2e_env.iter().map(|(name, value)| (name, value)))
            .current_dir(root),
    )?;
    let outcome = if status.success() {
        format!("passed ({} tests)", row.passed)
    } else {
        format!(
            "BROKE ({} failed, {} passed): see the failures above; the pinned versions passed",
            row.failed, row.passed
        )
    };
    tally.phase("newest agent releases (not blocking)", started.elapsed(), &outcome);
    Ok(())
}

/// The gates before any test: formatting as `rustfmt.toml` says, no clippy warning in
/// any target (tests, benches, xtask included), the generated files against their
/// schemas, and the book built with its links resolving.
fn gates(root: &Path) -> Result<()> {
    eprintln!("xtask: cargo fmt --check");
    run(Command::new("cargo").args(["fmt", "--all", "--check"]).current_dir(root))
        .context("formatting differs from rustfmt.toml (fix with: cargo fmt)")?;
    eprintln!("xtask: cargo clippy --workspace --all-targets -- -D warnings");
    run(Command::new("cargo")
        .args(["clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings"])
        .current_dir(root))
    .context("clippy found warnings (each is an error in CI)")?;
    schema_check(root)?;
    eprintln!("xtask: the book (mdbook build docs), and its internal links");
    book::book()
}

/// What `devcontainer init` generates, checked against the devcontainer spec's JSON
/// schemas (vendored in `xtask/schemas/` from devcontainers/spec, MIT; the CLI itself
/// validates nothing): every devcontainer.json snapshot and the Feature's metadata.
/// Runs python `jsonschema` + `json5` from a venv in `target/` (installed once).
fn schema_check(root: &Path) -> Result<()> {
    const VALIDATE: &str = "import sys, json, json5, jsonschema
args, bad = sys.argv[1:], 0
for schema_path, doc_path in zip(args[::2], args[1::2]):
    schema = json.load(open(schema_path))
    doc = json5.load(open(doc_path))
    errors = sorted(jsonschema.validators.validator_for(schema)(schema).iter_errors(doc), key=str)
    for err in errors:
        print(f'{doc_path}: at /{\"/\".join(map(str, err.absolute_path))}: {err.message}')
    bad += len(errors)
sys.exit(1 if bad else 0)
";
    let venv = root.join("target/schema-venv");
    let python = venv.join("bin/python3");
    let ready =
        Command::new(&python).args(["-c", "import jsonschema, json5"]).output().is_ok_and(|out| out.status.success());
    if !ready {
        eprintln!("xtask: installing python jsonschema and json5 into {}", venv.display());
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv))
            .context("python3 -m venv (install with: apt-get install -y python3-venv)")?;
        run(Command::new(venv.join("bin/pip")).args(["install", "--quiet", "jsonschema>=4.18,<5", "json5>=0.9,<1"]))?;
    }
    let schemas = root.join("xtask/schemas");
    let snapshots = root.join("crates/devcontainer/src/snapshots");
    let mut args: Vec<PathBuf> = Vec::new();
    for name in
        ["devcontainer.json", "merged-build.jsonc", "merged-image.jsonc", "merged-compose.jsonc", "migrated.jsonc"]
    {
        args.extend([schemas.join("devContainer.base.schema.json"), snapshots.join(name)]);
    }
    args.extend([
        schemas.join("devContainerFeature.schema.json"),
        root.join("devcontainer/feature/agent-sandbox/devcontainer-feature.json"),
    ]);
    eprintln!("xtask: the generated devcontainer.json files and the Feature against the spec's JSON schemas");
    run(Command::new(&python).args(["-c", VALIDATE]).args(&args))
        .context("a generated file does not match the devcontainer spec's schema")
}

/// Adds up libtest's `test result:` lines while passing all output through.
#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
    ignored: u64,
    /// What each phase cost: its name, wall time and outcome.
    phases: Vec<(String, std::time::Duration, String)>,
}

impl Tally {
    fn run(&mut self, cmd: &mut Command) -> Result<std::process::ExitStatus> {
        use std::io::{BufRead, BufReader};
        let mut child =
            cmd.stdout(std::process::Stdio::piped()).spawn().with_context(|| format!("starting {cmd:?}"))?;
        let stdout = child.stdout.take().context("piped stdout")?;
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            println!("{line}");
            if let Some(rest) = line.strip_prefix("test result: ") {
                for part in rest.split(';') {
                    let mut words = part.split_whitespace().rev();
                    let (Some(label), Some(count)) = (words.next(), words.next()) else { continue };
                    let Ok(count) = count.parse::<u64>() else { continue };
                    match label {
                        "passed" => self.passed += count,
                        "failed" => self.failed += count,
                        "ignored" => self.ignored += count,
                        _ => {}
                    }
                }
            }
        }
        Ok(child.wait()?)
    }

    fn phase(&mut self, name: &str, took: std::time::Duration, outcome: &str) {
        self.phases.push((name.to_owned(), took, outcome.to_owned()));
    }

    /// What each phase cost, then the closing line: `total: N passed, N failed, N skipped`.
    fn report(&self, how: &str) {
        eprintln!("xtask: what each phase cost:");
        for (name, took, outcome) in &self.phases {
            eprintln!("xtask:   {:>5}s  {name}: {outcome}", took.as_secs());
        }
        eprintln!("xtask: every test binary passed {how}");
        println!("total: {} passed, {} failed, {} skipped", self.passed, self.failed, self.ignored);
    }
}

/// The test executables `cargo test --workspace` builds.
fn test_binaries(root: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("cargo")
        .args(["test", "--workspace", "--locked", "--no-run", "--message-format=json"])
        .current_dir(root)
        .output()
        .context("cargo test --no-run")?;
    if !out.status.success() {
        bail!("cargo test --no-run failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let mut binaries = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if message["reason"] == "compiler-artifact" && message["profile"]["test"] == true {
            if let Some(executable) = message["executable"].as_str() {
                binaries.push(PathBuf::from(executable));
            }
        }
    }
    if binaries.is_empty() {
        bail!("cargo reported no test binaries");
    }
    Ok(binaries)
}
