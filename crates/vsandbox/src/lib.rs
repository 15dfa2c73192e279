//! The virtual sandbox: an in-memory filesystem with hard limits, a small shell over it
//! (19 built-ins, quoting, `$VAR`, globs, `>`/`>>`, `;`, `&&`, `||`, `|`), extensions such as
//! [`curl::Curl`], and snapshots of the whole state. Nothing in it touches the host:
//! commands see only the in-memory tree; the host is reached only by the embedding
//! program's explicit [`Sandbox::import_dir`]/[`Sandbox::export_dir`] and by
//! extensions it registers (`curl`, and then only to allowlisted hosts).
//!
//! All interaction goes through [`Sandbox::execute`], which records a [`ShellResult`]
//! in the history; `read_file`/`write_file` exist for tool protocols (MCP) and are
//! recorded the same way.

#![forbid(unsafe_code)]

pub mod builtins;
pub mod curl;
pub mod extension;
pub mod fs;
pub mod glob;
pub mod host;
pub mod parse;
pub mod redb_store;
mod shell;
pub mod snapshot;
pub mod store;

use std::{
    cell::Cell,
    collections::{BTreeMap, VecDeque},
    path::Path,
    sync::{atomic::AtomicBool, Arc},
    time::{Duration, Instant},
};

use serde::{Deserialize, Serialize};

pub use crate::{
    extension::{CommandOutput, Extension, ShellContext},
    fs::{FileSystem, FsError, Limits},
    host::{ExportReport, HostError, ImportReport},
    redb_store::RedbStore,
    snapshot::{Snapshot, SnapshotError},
    store::{MemoryStore, Store, StoreError},
};

/// How a sandbox starts. Defaults: the seed's limits, a 30 s timeout per command line,
/// `/` as working directory, `HOME=/`, `PATH=/bin:/usr/bin`, `PWD` following `cd`.
#[derive(Debug, Clone)]
pub struct Config {
    pub limits: Limits,
    pub command_timeout: Duration,
    pub working_directory: String,
    /// Added to (and overriding) the default `HOME`, `PATH`, `PWD`.
    pub environment: BTreeMap<String, String>,
    /// The history keeps the last this many results (and at most 16 MiB of them).
    pub history_limit: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            limits: Limits::default(),
            command_timeout: Duration::from_secs(30),
            working_directory: String::from("/"),
            environment: BTreeMap::new(),
            history_limit: 1000,
        }
    }
}

/// The most the history holds, in bytes of command, stdout and stderr.
pub const HISTORY_MAX_BYTES: usize = 16 * 1024 * 1024;

/// The result of one [`Sandbox::execute`]: also the JSON line of `vsh --json` and the
/// MCP `execute` tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShellResult {
    pub command: String,
    pub stdout: String,
    pub stderr: String,
    pub exit_code: i32,
    pub success: bool,
    pub duration_ms: f64,
}

/// Runtime statistics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    pub commands_executed: u64,
    pub commands_failed: u64,
    pub total_duration_ms: f64,
    pub files: u64,
    pub directories: u64,
    pub node_count: u64,
    pub total_size: u64,
    pub max_total_size: u64,
    pub max_file_size: u64,
    pub max_node_count: u64,
    pub command_timeout_ms: u64,
    pub history_entries: usize,
    pub cwd: String,
}

/// A command `help` lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandInfo {
    pub name: String,
    pub aliases: Vec<String>,
    pub description: String,
    pub usage: String,
    pub builtin: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("a command named {0:?} exists already (choose another name for the extension)")]
    NameTaken(String),
    #[error("the working directory {0:?} must be an absolute, normalized path such as /work")]
    WorkingDirectory(String),
    #[error("environment variable {0:?}: not a valid name (letters, digits and _, not starting with a digit)")]
    EnvName(String),
    #[error("the environment holds {size} bytes, over the limit of {limit} bytes (the file size limit)")]
    EnvTooLarge { size: usize, limit: usize },
    #[error("{store}: the saved working directory and environment are damaged ({reason})")]
    ShellState { store: String, reason: String },
}

/// The shell's part of the state, kept in a persistent store beside the tree under
/// [`SHELL_ATTRIBUTE`], as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct ShellState {
    cwd: String,
    env: BTreeMap<String, String>,
}

const SHELL_ATTRIBUTE: &str = "shell";

pub struct Sandbox {
    fs: FileSystem,
    shell: shell::Shell,
    config: Config,
    history: VecDeque<HistoryEntry>,
    history_bytes: usize,
    executed: u64,
    failed: u64,
    total_duration: Duration,
    interrupt: Option<Arc<AtomicBool>>,
    /// For a persistent store: the shell state last written to it.
    saved_shell: Option<ShellState>,
}

impl Sandbox {
    /// A sandbox in memory.
    pub fn new(config: Config) -> Result<Sandbox, Error> {
        Sandbox::open(config, Box::new(MemoryStore::new()))
    }

    /// A sandbox whose tree lives in `store`: a persistent store brings back the files,
    /// working directory and environment it holds (then `config`'s working directory
    /// and environment are not used), checked against `config`'s limits. Every command
    /// line, tool call, restore and import is committed to the store when it ends.
    pub fn open(config: Config, store: Box<dyn Store>) -> Result<Sandbox, Error> {
        let persistent = store.persistent();
        let mut fs = FileSystem::open(store, config.limits)?;
        let saved = match fs.attribute(SHELL_ATTRIBUTE)? {
            Some(bytes) => Some(
                serde_json::from_slice::<ShellState>(&bytes)
                    .map_err(|err| Error::ShellState { store: fs.describe_store(), reason: err.to_string() })?,
            ),
            None => None,
        };
        let (cwd, env) = match &saved {
            Some(state) => {
                check_cwd(&state.cwd)?;
                check_env(&state.env, config.limits)?;
                (state.cwd.clone(), state.env.clone())
            }
            None => {
                let cwd = config.working_directory.clone();
                check_cwd(&cwd)?;
                let mut env: BTreeMap<String, String> = [("HOME", "/"), ("PATH", "/bin:/usr/bin")]
                    .into_iter()
                    .map(|(name, value)| (name.to_owned(), value.to_owned()))
                    .collect();
                env.extend(config.environment.clone());
                env.insert(String::from("PWD"), cwd.clone());
                check_env(&env, config.limits)?;
                fs.create_dir_all(&cwd)?;
                (cwd, env)
            }
        };
        let mut sandbox = Sandbox {
            fs,
            shell: shell::Shell { cwd, env, extensions: Vec::new(), last_status: 0 },
            config,
            history: VecDeque::new(),
            history_bytes: 0,
            executed: 0,
            failed: 0,
            total_duration: Duration::ZERO,
            interrupt: None,
            saved_shell: if persistent { saved } else { None },
        };
        sandbox.save()?;
        Ok(sandbox)
    }

    /// Commits the changes so far to the store, with the shell's state when it changed
    /// (persistent stores only: in memory, there is nothing to do).
    fn save(&mut self) -> Result<(), FsError> {
        if self.fs.persistent() {
            let state = ShellState { cwd: self.shell.cwd.clone(), env: self.shell.env.clone() };
            if self.saved_shell.as_ref() != Some(&state) {
                let json = serde_json::to_vec(&state).expect("strings and maps always serialize");
                self.fs.set_attribute(SHELL_ATTRIBUTE, &json)?;
                self.saved_shell = Some(state);
            }
        }
        self.fs.commit().inspect_err(|_| self.saved_shell = None)
    }

    /// Adds a command; its name and aliases must not be taken by a built-in or another
    /// extension.
    pub fn register(&mut self, extension: Box<dyn Extension>) -> Result<(), Error> {
        let taken = self.shell.commands();
        for name in std::iter::once(extension.name()).chain(extension.aliases().iter().copied()) {
            if taken.iter().any(|info| info.name == name || info.aliases.iter().any(|alias| alias == name)) {
                return Err(Error::NameTaken(name.to_owned()));
            }
        }
        self.shell.extensions.push(extension);
        Ok(())
    }

    /// Built-ins then extensions, as `help` lists them.
    pub fn available_commands(&self) -> Vec<CommandInfo> {
        self.shell.commands()
    }

    /// Lets `flag` stop a running command line: once it is true, the line stops at its
    /// next check, as at its timeout, with exit code 130 and nothing after it run (curl
    /// within 100 ms). The front end (Ctrl-C, a signal) sets it and clears it again.
    pub fn set_interrupt(&mut self, flag: Arc<AtomicBool>) {
        self.interrupt = Some(flag);
    }

    /// The names in the directory `path` (relative to the working directory) with their
    /// metadata, for a front end's completion; not recorded in the history.
    pub fn read_dir(&self, path: &str) -> Result<Vec<(String, fs::Metadata)>, FsError> {
        self.fs.read_dir(&fs::resolve(&self.shell.cwd, path))
    }

    /// Parses and runs one command line.
    pub fn execute(&mut self, command: &str) -> ShellResult {
        let start = Instant::now();
        // A year stands for "no timeout" and keeps `Instant` arithmetic from overflowing.
        let timeout = self.config.command_timeout.min(Duration::from_secs(365 * 24 * 3600));
        let budget = shell::Budget {
            deadline: start + timeout,
            timeout_ms: self.config.command_timeout.as_millis(),
            output_limit: usize::try_from(self.config.limits.max_total_size).unwrap_or(usize::MAX),
            env_limit: usize::try_from(self.config.limits.max_file_size).unwrap_or(usize::MAX),
            interrupt: self.interrupt.as_deref(),
            checked_at: Cell::new(None),
        };
        let mut output = match parse::parse(command) {
            Ok(script) => self.shell.run(&mut self.fs, script, &budget),
            Err(err) => {
                self.shell.last_status = 1;
                CommandOutput::error(err)
            }
        };
        let ran_until = budget.checked_at.get();
        if let Err(err) = self.save() {
            output.stderr.push_str(&format!("{err} (this command line's changes are lost)\n"));
            output.exit_code = 1;
            self.shell.last_status = 1;
        }
        // The line ended at its last deadline check, unless nothing ran, it stopped
        // early, or a store's commit (which takes time of its own) came after it.
        let end = match ran_until {
            Some(at) if !self.fs.persistent() => at,
            _ => Instant::now(),
        };
        self.record(command, output, start, end)
    }

    /// The bytes of a file (for tool protocols; recorded in the history as `read_file`).
    pub fn read_file(&mut self, path: &str) -> Result<Vec<u8>, FsError> {
        let start = Instant::now();
        let path = fs::resolve(&self.shell.cwd, path);
        let res = self.fs.read(&path).map(std::borrow::Cow::into_owned);
        let output = match &res {
            Ok(data) => CommandOutput::success(data.clone()),
            Err(err) => CommandOutput::error(format!("read_file: {err}")),
        };
        self.record(&format!("read_file {path}"), output, start, Instant::now());
        res
    }

    /// Creates or replaces a file, parent directories included (recorded as `write_file`).
    pub fn write_file(&mut self, path: &str, data: &[u8]) -> Result<(), FsError> {
        let start = Instant::now();
        let path = fs::resolve(&self.shell.cwd, path);
        let res = match path.rsplit_once('/') {
            Some((parent, _)) if !parent.is_empty() => self.fs.create_dir_all(parent),
            _ => Ok(()),
        }
        .and_then(|()| self.fs.write(&path, data, false))
        .and_then(|()| self.save());
        let output = match &res {
            Ok(()) => CommandOutput::default(),
            Err(err) => CommandOutput::error(format!("write_file: {err}")),
        };
        self.record(&format!("write_file {path} ({} bytes)", data.len()), output, start, Instant::now());
        res
    }

    /// The complete state now: files, working directory, environment, timestamp.
    /// Fails only when a persistent store cannot be read.
    pub fn create_snapshot(&self) -> Result<Snapshot, Error> {
        Ok(Snapshot {
            timestamp: snapshot::now_timestamp(),
            cwd: self.shell.cwd.clone(),
            env: self.shell.env.clone(),
            nodes: self.fs.entries()?,
        })
    }

    /// Puts back exactly `snapshot`'s state, or changes nothing when it does not fit
    /// this sandbox's limits or is malformed. History and statistics are kept.
    pub fn restore_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), Error> {
        if fs::resolve("/", &snapshot.cwd) != snapshot.cwd {
            return Err(Error::WorkingDirectory(snapshot.cwd.clone()));
        }
        check_env(&snapshot.env, self.config.limits)?;
        for node in &snapshot.nodes {
            let path = match node {
                fs::Entry::Dir(path) | fs::Entry::File(path, _) => path,
            };
            if fs::resolve("/", path) != *path || path == "/" {
                return Err(Error::Fs(FsError::InvalidPath {
                    path: path.clone(),
                    reason: "snapshot paths must be absolute and normalized, and not /",
                }));
            }
        }
        // The shell's state goes into the same commit as the tree.
        let state = ShellState { cwd: snapshot.cwd.clone(), env: snapshot.env.clone() };
        let persistent = self.fs.persistent();
        self.fs.atomically(|fs| {
            fs.replace_all(&snapshot.nodes)?;
            if persistent {
                let json = serde_json::to_vec(&state).expect("strings and maps always serialize");
                fs.set_attribute(SHELL_ATTRIBUTE, &json)?;
            }
            Ok::<_, FsError>(())
        })?;
        self.shell.cwd = state.cwd.clone();
        self.shell.env = state.env.clone();
        self.saved_shell = persistent.then_some(state);
        Ok(())
    }

    pub fn stats(&self) -> Stats {
        let usage = self.fs.usage();
        let limits = self.config.limits;
        Stats {
            commands_executed: self.executed,
            commands_failed: self.failed,
            total_duration_ms: self.total_duration.as_secs_f64() * 1000.0,
            files: usage.files,
            directories: usage.dirs,
            node_count: usage.node_count,
            total_size: usage.total_size,
            max_total_size: limits.max_total_size,
            max_file_size: limits.max_file_size,
            max_node_count: limits.max_node_count,
            command_timeout_ms: u64::try_from(self.config.command_timeout.as_millis()).unwrap_or(u64::MAX),
            history_entries: self.history.len(),
            cwd: self.shell.cwd.clone(),
        }
    }

    /// The recorded results, oldest first.
    pub fn history(&self) -> Vec<ShellResult> {
        self.history.iter().map(HistoryEntry::result).collect()
    }

    pub fn cwd(&self) -> &str {
        &self.shell.cwd
    }

    /// Copies the host directory `host` into the sandbox at `dest`, all or nothing.
    pub fn import_dir(&mut self, host: &Path, dest: &str) -> Result<ImportReport, Error> {
        let dest = fs::resolve(&self.shell.cwd, dest);
        let report = self.fs.atomically(|fs| host::import(fs, host, &dest).map_err(Error::from))?;
        self.save()?;
        Ok(report)
    }

    /// Writes the sandbox directory (or file) `src` to `host`, a new or empty directory.
    pub fn export_dir(&self, src: &str, host: &Path) -> Result<ExportReport, Error> {
        Ok(host::export(&self.fs, &fs::resolve(&self.shell.cwd, src), host)?)
    }

    fn record(&mut self, command: &str, output: CommandOutput, start: Instant, end: Instant) -> ShellResult {
        let duration = end.saturating_duration_since(start);
        let result = ShellResult {
            command: command.to_owned(),
            // Valid UTF-8 (the usual case) is taken as it is, not copied.
            stdout: String::from_utf8(output.stdout)
                .unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned()),
            stderr: output.stderr,
            exit_code: output.exit_code,
            success: output.exit_code == 0,
            duration_ms: duration.as_secs_f64() * 1000.0,
        };
        self.executed += 1;
        self.failed += u64::from(!result.success);
        self.total_duration += duration;
        let entry = HistoryEntry::new(&result);
        self.history_bytes += entry.size();
        self.history.push_back(entry);
        while self.history.len() > self.config.history_limit || self.history_bytes > HISTORY_MAX_BYTES {
            let Some(old) = self.history.pop_front() else { break };
            self.history_bytes -= old.size();
        }
        result
    }
}

/// A [`ShellResult`] as the history keeps it: its command, stdout and stderr one after
/// the other in one string, so that recording a result copies it in one allocation
/// rather than three (every command line is recorded).
struct HistoryEntry {
    texts: String,
    command_len: usize,
    stdout_len: usize,
    exit_code: i32,
    success: bool,
    duration_ms: f64,
}

impl HistoryEntry {
    fn new(result: &ShellResult) -> HistoryEntry {
        let mut texts = String::with_capacity(result.command.len() + result.stdout.len() + result.stderr.len());
        texts.push_str(&result.command);
        texts.push_str(&result.stdout);
        texts.push_str(&result.stderr);
        HistoryEntry {
            texts,
            command_len: result.command.len(),
            stdout_len: result.stdout.len(),
            exit_code: result.exit_code,
            success: result.success,
            duration_ms: result.duration_ms,
        }
    }

    /// The result as it was recorded.
    fn result(&self) -> ShellResult {
        let (command, rest) = self.texts.split_at(self.command_len);
        let (stdout, stderr) = rest.split_at(self.stdout_len);
        ShellResult {
            command: command.to_owned(),
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
            exit_code: self.exit_code,
            success: self.success,
            duration_ms: self.duration_ms,
        }
    }

    /// Bytes of command, stdout and stderr (counted against [`HISTORY_MAX_BYTES`]).
    fn size(&self) -> usize {
        self.texts.len()
    }
}

fn check_cwd(cwd: &str) -> Result<(), Error> {
    if !cwd.starts_with('/') || fs::resolve("/", cwd) != cwd {
        return Err(Error::WorkingDirectory(cwd.to_owned()));
    }
    Ok(())
}

fn check_env(env: &BTreeMap<String, String>, limits: Limits) -> Result<(), Error> {
    if let Some(name) = env.keys().find(|name| !builtins::valid_name(name)) {
        return Err(Error::EnvName(name.clone()));
    }
    let size = builtins::env_size(env);
    let limit = usize::try_from(limits.max_file_size).unwrap_or(usize::MAX);
    if size > limit {
        return Err(Error::EnvTooLarge { size, limit });
    }
    Ok(())
}

/// One fuzzing step (the `fuzz/` target and the CI test share it): `data` as a command
/// line, parsed and run; and, split at its first line break, as a wildcard pattern and a
/// name for [`glob::matches`] and as a pattern for `grep` and pathname expansion. Only
/// a panic is a failure.
#[doc(hidden)]
pub fn fuzz_one(sandbox: &mut Sandbox, data: &[u8]) {
    let line = String::from_utf8_lossy(data);
    let _ = parse::parse(&line);
    let _ = sandbox.execute(&line);
    let (pattern, name) = line.split_once('\n').unwrap_or((&line, ""));
    let _ = glob::matches(pattern, name);
    let _ = builtins::posix_to_regex(pattern, false);
    let _ = builtins::posix_to_regex(pattern, true);
    let deadline = Instant::now() + Duration::from_millis(200);
    let _ = glob::expand(&sandbox.fs, &sandbox.shell.cwd, pattern, deadline);
}

/// A tree for fuzzing to find its way around (so that wildcards have names to match):
/// a few directories, dot files and odd names.
#[doc(hidden)]
pub fn fuzz_sandbox(config: Config) -> Sandbox {
    let mut sandbox = Sandbox::new(config).expect("the fuzzing config is valid");
    for path in ["/a/b.txt", "/a/.hidden", "/a/c/d.rs", "/x y/[z]", "/x y/*", "/é/ü?", "/n/1", "/n/22"] {
        sandbox.write_file(path, path.as_bytes()).expect("a few bytes fit any limits");
    }
    sandbox
}
