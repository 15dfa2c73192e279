//! The extension interface: commands added to a sandbox by registering an
//! [`Extension`] (composition, not inheritance). An extension gets its arguments (the
//! command name excluded) and a [`ShellContext`]: the filesystem, whose every write is
//! checked against the sandbox's limits, the working directory, the environment, the
//! pipeline's input and the command's deadline (which an interrupt brings forward). It returns a [`CommandOutput`]; the
//! shell adds the command line and the duration to make the [`crate::ShellResult`].

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use crate::fs::{self, FileSystem};

/// A command the shell can run besides its built-ins.
pub trait Extension: Send {
    /// What users type, e.g. `curl`.
    fn name(&self) -> &str;
    /// Other names for the same command.
    fn aliases(&self) -> &[&str] {
        &[]
    }
    /// One line for `help`.
    fn description(&self) -> &str;
    /// Usage examples for `help NAME`.
    fn usage(&self) -> &str;
    fn execute(&self, args: &[String], context: &mut ShellContext<'_>) -> CommandOutput;
}

/// What one command produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandOutput {
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub exit_code: i32,
}

impl CommandOutput {
    pub fn success(stdout: impl Into<Vec<u8>>) -> CommandOutput {
        CommandOutput { stdout: stdout.into(), stderr: String::new(), exit_code: 0 }
    }

    /// Exit code 1 with `message` (a newline is added) on stderr.
    pub fn error(message: impl std::fmt::Display) -> CommandOutput {
        CommandOutput { stdout: Vec::new(), stderr: format!("{message}\n"), exit_code: 1 }
    }
}

/// What a command sees of the sandbox while it runs.
pub struct ShellContext<'a> {
    pub(crate) fs: &'a mut FileSystem,
    pub(crate) cwd: &'a str,
    pub(crate) env: &'a BTreeMap<String, String>,
    pub(crate) stdin: &'a [u8],
    pub(crate) deadline: Instant,
    pub(crate) interrupt: Option<&'a AtomicBool>,
}

impl ShellContext<'_> {
    /// The virtual filesystem; writes are checked against the sandbox's limits.
    pub fn fs(&mut self) -> &mut FileSystem {
        self.fs
    }

    pub fn current_directory(&self) -> &str {
        self.cwd
    }

    pub fn environment(&self) -> &BTreeMap<String, String> {
        self.env
    }

    /// The previous pipeline stage's output (empty for the first command).
    pub fn stdin(&self) -> &[u8] {
        self.stdin
    }

    /// `path` made absolute against the working directory, `.` and `..` resolved.
    pub fn resolve_path(&self, path: &str) -> String {
        fs::resolve(self.cwd, path)
    }

    /// Time left before the command line's timeout; zero once interrupted. An extension
    /// that blocks should wait in slices and check [`ShellContext::interrupted`] between
    /// them, so that Ctrl-C stops it (curl waits 100 ms at a time).
    pub fn remaining(&self) -> Duration {
        if self.interrupted() {
            return Duration::ZERO;
        }
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Whether the command line's timeout passed or it was interrupted.
    pub fn timed_out(&self) -> bool {
        self.interrupted() || Instant::now() >= self.deadline
    }

    /// Whether the front end interrupted the command line (Ctrl-C, a signal).
    pub fn interrupted(&self) -> bool {
        self.interrupt.is_some_and(|flag| flag.load(Ordering::Relaxed))
    }
}
