//! The `exec` pipeline, as named stages (`stages.rs`, one module each): the facts of an
//! invocation (home, cwd, project root, config with approvals, the repository), the scan
//! (policy mounts, the secret scan, index blobs, the masks with the reason for each),
//! the decisions (environment, wrapped commands, settings copies, the guards' settings),
//! the preparation (caches, runtime directory, the bwrap plan), the services (session
//! baseline, push service, proxy), the run and the exit check. Each stage takes the
//! values the earlier ones returned; [`exec`] reads as that sequence and times it. The
//! binary's `src/exec.rs` only turns arguments into an [`Invocation`] and prints.
//!
//! The decisions are pure where they can be tested as values: `masks::decide` (table
//! tests), `policy::resolve`, `policy::env`, `sandbox::plan::bwrap_args`, and
//! `gitcare::diff`. The gathering reads files an agent may have written, always with
//! never-blocking reads of regular files only.

mod agent_guard;
mod caches;
mod claude_state;
mod gemini_auth;
pub mod index;
mod installs;
mod mask_record;
pub mod masks;
mod programs;
mod push;
mod settings;
pub mod stages;
mod trees;

use std::{ffi::OsString, path::PathBuf};

use anyhow::{bail, Context as _, Result};

pub use caches::CACHE_LAYERS;
pub use stages::facts::{load, project_state, Loaded};

/// What the user asked for, as plain values (the binary maps its flags onto this).
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    pub cwd: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub network: Option<String>,
    pub ro: Vec<String>,
    pub rw: Vec<String>,
    pub exclude: Vec<String>,
    pub cmds: Vec<String>,
    /// `--read-only`: the whole project read-only.
    pub read_only: bool,
    /// `--allow-host`: more `network.allow` entries.
    pub allow_hosts: Vec<String>,
    /// `--host-port`: more `network.hostPorts` entries.
    pub host_ports: Vec<String>,
}

/// A config file and the bytes the user allowed.
pub type Allowed = (PathBuf, Vec<u8>);

/// `agent-sandbox config allow`: trusts the project's config files as they are now;
/// returns the project root and each file with the bytes allowed.
pub fn config_allow(inv: &Invocation) -> Result<(PathBuf, Vec<Allowed>)> {
    let loaded = load(inv)?;
    let mut allowed = Vec::new();
    for (path, _) in &loaded.project_config {
        let bytes = config::approval::allow(&loaded.state_dir, path).context("allowing the project config")?;
        allowed.push((path.clone(), bytes));
    }
    Ok((loaded.ctx.project_root, allowed))
}

/// Hidden, for `cargo xtask bench` only: when this variable names a file, `exec` does
/// everything up to running bwrap (the same checks, the same runtime directory), then
/// writes there, as JSON, the bwrap it would run with the exact arguments and
/// environment (`{"bwrap", "args", "env", "runtime"}`), leaves the runtime directory in
/// place and exits 0 without running anything. The bench runs that bwrap as the
/// baseline of `exec`'s own cost and removes the directory. It changes nothing `exec`
/// decides or the sandbox enforces; it only stops short of the run.
pub const BENCH_ARGV_VAR: &str = "AGENT_SANDBOX_BENCH_ARGV";

/// What `exec` did.
pub enum Outcome {
    /// `--dry-run`: the names of the variables passed and the whole bwrap command line.
    DryRun { env_names: Vec<String>, argv: Vec<OsString>, caches: Vec<String> },
    /// The command ran: its exit status to pass on.
    Ran(i32),
    /// The command is not there inside the sandbox (exit status 127): why, and the fix.
    NotFound(String),
}

/// Options of one `exec`.
pub struct ExecOptions<'a> {
    pub command: &'a [OsString],
    pub dry_run: bool,
    /// Receives `--debug` lines.
    pub debug: &'a dyn Fn(&str),
    /// Whether stderr is a terminal (the one-line summaries of masks and dropped
    /// variables are for people).
    pub terminal: bool,
}

/// `agent-sandbox exec`: the stages in order, each timed (`--debug`), then the run and
/// the exit check, which runs however the command ended.
pub fn exec(inv: &Invocation, options: &ExecOptions<'_>) -> Result<Outcome> {
    refuse_unsupported()?;
    let debug = options.debug;
    let mut timer = stages::Stages::start();
    // Every audit line of this run carries its id, relayed ones included.
    let session_id = audit::start_session();
    debug(&format!("session {session_id} (its audit trail: agent-sandbox log --session {session_id})"));
    if !options.dry_run {
        // From here on a terminating signal ends the sandbox (once it runs) and the exit
        // check still runs.
        sandbox::run::install_signal_handlers();
    }
    stages::facts::recover(inv)?;
    timer.end("recover");
    let (mut facts, config) = stages::facts::gather(inv, options)?;
    timer.end("facts");
    let mut scanned = stages::scan::scan(&facts, config, debug)?;
    timer.end("scan");
    let decision = match stages::decide::decide(&facts, &mut scanned, options)? {
        Ok(decision) => decision,
        Err(why) => return Ok(Outcome::NotFound(why)),
    };
    timer.end("decide");
    let (cache_layers, restricted) = stages::prepare::caches(&facts, &mut scanned, options)?;
    if options.dry_run {
        return Ok(stages::prepare::dry_run(&facts, &scanned, &decision, &cache_layers));
    }
    let mut prepared = stages::prepare::prepare(&mut facts, &scanned, &decision, restricted, options)?;
    timer.end("prepare");
    debug(&format!("bwrap {}", util::shell_line(&prepared.bwrap_args)));
    if let Some(file) = std::env::var_os(BENCH_ARGV_VAR).filter(|file| !file.is_empty()) {
        let env = &decision.env.vars;
        let runtime = prepared.runtime.keep();
        stages::prepare::write_bench_argv(file.as_ref(), &decision.bwrap, &prepared.bwrap_args, env, runtime)?;
        return Ok(Outcome::Ran(0));
    }
    let services = stages::services::start(&facts, &scanned, &decision, &mut prepared, &cache_layers, debug)?;
    timer.end("services");
    if let Some(took) = services.home_took() {
        timer.carve("session-repo", took);
    }
    debug(&timer.line());
    let code = stages::run::run(&decision, &prepared, &services, &cache_layers);
    let mut timer = stages::Stages::start();
    drop(cache_layers);
    let session = services.stop();
    timer.end("stop");
    let (lister, claude_state) = (&scanned.lister, facts.claude_state);
    stages::run::exit_check(session, &facts.watch, lister, claude_state, prepared.runtime, &mut timer, debug)?;
    Ok(Outcome::Ran(code?))
}

/// `exec` runs on Linux only, and never inside a sandbox.
fn refuse_unsupported() -> Result<()> {
    if !cfg!(target_os = "linux") {
        bail!(
            "agent-sandbox exec needs Linux: bubblewrap is built on Linux namespaces (elsewhere, use a devcontainer)"
        );
    }
    if runtime_layout::detect() != runtime_layout::Where::Outside {
        bail!("this is already inside an agent-sandbox; run the command directly (sandboxes do not nest)");
    }
    Ok(())
}
