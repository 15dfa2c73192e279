//! `agent-sandbox vsh`: an interactive shell over one virtual sandbox (crates/vsandbox),
//! or with `--json` a line protocol for scripts: one request `{"command": "..."}` per
//! input line, one `ShellResult` JSON object per output line. Also the session set-up
//! `vsh` and `mcp` share: limits and timeout, the curl allowlist, `--snapshot FILE`
//! (restored at start when it exists, written back at the end), and the explicit host
//! `--import`/`--export`.

use std::{
    io::{BufRead, IsTerminal, Write},
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{bail, Context, Result};
use clap::Args;
use vsandbox::{curl::Curl, Config, Sandbox, ShellResult, Snapshot};

/// What `vsh` and `mcp` share: where a session's sandbox starts from and ends up.
#[derive(Args, Clone, Debug, Default)]
pub struct SessionArgs {
    /// Start from this snapshot file when it exists, and save the sandbox to it at the end
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
    /// Copy a host directory into the sandbox at the start (default DIR: /)
    #[arg(long, value_name = "HOST_DIR[:DIR]")]
    pub import: Option<String>,
    /// Write a sandbox directory (default DIR: /) to a new or empty host directory at the end
    #[arg(long, value_name = "HOST_DIR[:DIR]")]
    pub export: Option<String>,
    /// Let curl reach HOST, HOST:PORT or *.DOMAIN (repeatable; nothing by default)
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Seconds one command line may run
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
}

#[derive(Args, Clone, Debug)]
pub struct VshArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    /// Read one JSON request per line ({"command": "..."}), write one ShellResult JSON per line
    #[arg(long)]
    pub json: bool,
}

/// `HOST_DIR[:DIR]`: split at the last `:` followed by an absolute sandbox path.
fn host_and_dir(spec: &str) -> (PathBuf, String) {
    match spec.rsplit_once(':') {
        Some((host, dir)) if dir.starts_with('/') && !host.is_empty() => (PathBuf::from(host), dir.to_owned()),
        _ => (PathBuf::from(spec), String::from("/")),
    }
}

/// The sandbox a session starts with, and a line for the user about what came in.
pub fn open(args: &SessionArgs) -> Result<(Sandbox, Vec<String>)> {
    check_export_target(args)?;
    let config = Config { command_timeout: Duration::from_secs(args.timeout), ..Config::default() };
    let mut sandbox = Sandbox::new(config).context("creating the virtual sandbox")?;
    sandbox.register(Box::new(Curl::new(&args.allow_hosts))).context("registering curl")?;
    let mut notes = Vec::new();
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
pub fn close(sandbox: &Sandbox, args: &SessionArgs) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    if let Some(path) = &args.snapshot {
        write_atomically(path, sandbox.create_snapshot().to_json().as_bytes())?;
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
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().context("the snapshot path names no file")?;
    let tmp = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
    std::fs::write(&tmp, data).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))
}

pub fn vsh(args: VshArgs) -> Result<i32> {
    let (mut sandbox, notes) = open(&args.session)?;
    let stdin = std::io::stdin();
    let interactive = !args.json && stdin.is_terminal();
    if !args.json {
        for note in &notes {
            eprintln!("vsh: {note}");
        }
    }
    if interactive {
        eprintln!("vsh: a virtual sandbox (nothing here touches your machine); help lists commands, exit leaves");
    }
    let mut stdout = std::io::stdout().lock();
    let mut status = 0;
    let mut lines = stdin.lock().lines();
    loop {
        if interactive {
            eprint!("vsh:{}$ ", sandbox.cwd());
        }
        let Some(line) = lines.next() else { break };
        let line = line.context("reading standard input")?;
        if args.json {
            if line.trim().is_empty() {
                continue;
            }
            let result = match request_command(&line) {
                Ok(command) => sandbox.execute(&command),
                Err(message) => ShellResult {
                    command: line.clone(),
                    stdout: String::new(),
                    stderr: format!("{message}\n"),
                    exit_code: 1,
                    success: false,
                    duration_ms: 0.0,
                },
            };
            let json = serde_json::to_string(&result).context("encoding a result")?;
            writeln!(stdout, "{json}").context("writing standard output")?;
            stdout.flush().context("writing standard output")?;
            continue;
        }
        let trimmed = line.trim();
        if trimmed == "exit" || trimmed.starts_with("exit ") {
            let code = trimmed["exit".len()..].trim();
            if !code.is_empty() {
                status = code.parse().with_context(|| format!("exit takes a number, not {code:?}"))?;
            }
            break;
        }
        let result = sandbox.execute(&line);
        stdout.write_all(result.stdout.as_bytes()).context("writing standard output")?;
        stdout.flush().context("writing standard output")?;
        eprint!("{}", result.stderr);
        status = result.exit_code;
    }
    for note in close(&sandbox, &args.session)? {
        if !args.json {
            eprintln!("vsh: {note}");
        }
    }
    Ok(if args.json { 0 } else { status })
}

/// The command of a `--json` request line: `{"command": "..."}`.
fn request_command(line: &str) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Request {
        command: String,
    }
    match serde_json::from_str::<Request>(line) {
        Ok(request) => Ok(request.command),
        Err(err) => Err(format!("invalid request ({err}); send one JSON object per line: {{\"command\": \"ls -l\"}}")),
    }
}

/// Refuses at the start an export the end would refuse.
fn check_export_target(args: &SessionArgs) -> Result<()> {
    if let Some(spec) = &args.export {
        let (host, _) = host_and_dir(spec);
        if host.exists() && std::fs::read_dir(&host).map(|mut entries| entries.next().is_some()).unwrap_or(true) {
            bail!("--export {}: exists and is not empty (export only into a new or empty directory)", host.display());
        }
    }
    Ok(())
}
