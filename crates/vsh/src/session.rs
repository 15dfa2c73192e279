//! The session set-up `vsh` and `mcp` share: limits and timeout, the curl allowlist,
//! where the state lives (`--store FILE`: a redb store, committed after every command;
//! `--snapshot FILE`: restored at start when it exists, written back at the end; else
//! memory only), and the explicit host `--import`/`--export`.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{bail, Context, Result};
use vsandbox::{curl::Curl, Config, RedbStore, Sandbox, Snapshot};

/// Where a session's sandbox starts from and ends up.
#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    pub snapshot: Option<PathBuf>,
    /// The persistent store (opened or created; locked while the session runs).
    pub store: Option<PathBuf>,
    /// `HOST_DIR[:DIR]` copied in at the start.
    pub import: Option<String>,
    /// `HOST_DIR[:DIR]` written out at the end (to a new or empty host directory).
    pub export: Option<String>,
    pub allow_hosts: Vec<String>,
    /// Seconds one command line may run.
    pub timeout: u64,
}

/// `HOST_DIR[:DIR]`: split at the last `:` followed by an absolute sandbox path.
fn host_and_dir(spec: &str) -> (PathBuf, String) {
    match spec.rsplit_once(':') {
        Some((host, dir)) if dir.starts_with('/') && !host.is_empty() => (PathBuf::from(host), dir.to_owned()),
        _ => (PathBuf::from(spec), String::from("/")),
    }
}

/// The sandbox a session starts with, and a line for the user about what came in.
pub fn open(args: &SessionOptions) -> Result<(Sandbox, Vec<String>)> {
    check_export_target(args)?;
    if args.store.is_some() && args.snapshot.is_some() {
        bail!("--store and --snapshot: choose one (the store keeps the state itself; take a snapshot from it with the snapshot tool)");
    }
    let config = Config { command_timeout: Duration::from_secs(args.timeout), ..Config::default() };
    let mut notes = Vec::new();
    let mut sandbox = match &args.store {
        None => Sandbox::new(config).context("creating the virtual sandbox")?,
        Some(path) => {
            let existed = std::fs::metadata(path).is_ok_and(|meta| meta.len() > 0);
            let store = RedbStore::open(path)?;
            let sandbox = Sandbox::open(config, Box::new(store))
                .with_context(|| format!("opening the store {}", path.display()))?;
            let stats = sandbox.stats();
            notes.push(if existed {
                format!(
                    "using the store {}: {} files, {} directories, working directory {}",
                    path.display(),
                    stats.files,
                    stats.directories,
                    stats.cwd
                )
            } else {
                format!("created the store {}: every command's changes are saved there", path.display())
            });
            sandbox
        }
    };
    sandbox.register(Box::new(Curl::new(&args.allow_hosts))).context("registering curl")?;
    if let Some(path) = &args.snapshot {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let snapshot = Snapshot::from_json(&text).with_context(|| format!("reading {}", path.display()))?;
                sandbox.restore_snapshot(&snapshot).with_context(|| format!("restoring {}", path.display()))?;
                notes.push(format!("restored {} (taken {})", path.display(), snapshot.timestamp));
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                notes.push(format!("{} does not exist yet: starting empty, saving there at the end", path.display()));
            }
            Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
        }
    }
    if let Some(spec) = &args.import {
        let (host, dir) = host_and_dir(spec);
        let report = sandbox.import_dir(&host, &dir)?;
        notes.push(format!(
            "imported {} into {dir}: {} files, {} directories, {} bytes",
            host.display(),
            report.files,
            report.dirs,
            report.bytes
        ));
        for (path, reason) in report.skipped {
            notes.push(format!("  skipped {}: {reason}", path.display()));
        }
    }
    Ok((sandbox, notes))
}

/// Saves the snapshot and exports, as the session's arguments ask.
pub fn close(sandbox: &Sandbox, args: &SessionOptions) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    if let Some(path) = &args.snapshot {
        write_atomically(
            path,
            sandbox.create_snapshot().context("reading the sandbox for its snapshot")?.to_json().as_bytes(),
        )?;
        notes.push(format!("saved the sandbox to {}", path.display()));
    }
    if let Some(spec) = &args.export {
        let (host, dir) = host_and_dir(spec);
        let report = sandbox.export_dir(&dir, &host)?;
        notes.push(format!(
            "exported {dir} to {}: {} files, {} directories, {} bytes",
            host.display(),
            report.files,
            report.dirs,
            report.bytes
        ));
    }
    Ok(notes)
}

/// Writes `path` through a temporary file in the same directory, so that a crash never
/// leaves half a snapshot.
fn write_atomically(path: &Path, data: &[u8]) -> Result<()> {
    util::fs::atomic_write(path, data, 0o644).with_context(|| format!("writing {}", path.display()))
}

/// Refuses at the start an export the end would refuse.
fn check_export_target(args: &SessionOptions) -> Result<()> {
    if let Some(spec) = &args.export {
        let (host, _) = host_and_dir(spec);
        if host.exists() && std::fs::read_dir(&host).map(|mut entries| entries.next().is_some()).unwrap_or(true) {
            bail!("--export {}: exists and is not empty (export only into a new or empty directory)", host.display());
        }
    }
    Ok(())
}
