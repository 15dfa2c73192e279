//! The executor: runs bwrap with a plan's arguments and the filtered environment,
//! hands it the seccomp program on fd 3, relays audit lines from the sandbox's FIFO to
//! the log while it runs, and returns the sandboxed command's exit status. Between fork
//! and exec it also applies the Landlock scope (`landlock.rs`) to bwrap, so that the
//! whole sandbox inherits it without an extra process.
//!
//! `agent-sandbox exec` stays bwrap's parent rather than exec'ing it, because someone
//! must read the audit FIFO and remove the runtime directory afterwards; bwrap's
//! `--die-with-parent` makes sure the sandbox never outlives it.

use std::{
    ffi::OsString,
    fs::File,
    io::{BufRead, BufReader, Write},
    os::unix::{
        io::AsRawFd,
        process::{CommandExt, ExitStatusExt},
    },
    path::{Path, PathBuf},
    process::Command,
    thread,
};

use crate::{plan::SECCOMP_FD, runtime::Runtime};

const END_OF_AUDIT: &str = "agent-sandbox: end of audit stream";

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("bwrap not found in PATH (install with: apt install bubblewrap)")]
    BwrapMissing,
    #[error("starting {}", .0.display())]
    Spawn(PathBuf, #[source] std::io::Error),
    #[error("setting up the audit relay")]
    Audit(#[source] std::io::Error),
}

/// Runs bwrap; returns the exit code to pass on (128 + signal for a killed command).
pub fn run(
    bwrap: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
    runtime: &Runtime,
    audit_log: Option<PathBuf>,
) -> Result<i32, RunError> {
    let seccomp = File::open(runtime.seccomp()).map_err(RunError::Audit)?;
    // O_RDWR keeps the FIFO open for writing too, so its reader never sees EOF while
    // the sandbox has no writer, and opening never blocks.
    let fifo = std::fs::OpenOptions::new().read(true).write(true).open(runtime.fifo()).map_err(RunError::Audit)?;
    let relay = spawn_relay(fifo.try_clone().map_err(RunError::Audit)?, audit_log);

    let seccomp_fd = seccomp.as_raw_fd();
    let scope = crate::landlock::supported();
    let mut command = Command::new(bwrap);
    command.args(args).env_clear().envs(env.iter().map(|(k, v)| (k, v)));
    // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if seccomp_fd == SECCOMP_FD {
                let flags = libc::fcntl(seccomp_fd, libc::F_GETFD);
                if flags < 0 || libc::fcntl(seccomp_fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(seccomp_fd, SECCOMP_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if scope {
                crate::landlock::restrict_self()?;
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|err| match err.kind() {
        std::io::ErrorKind::NotFound => RunError::BwrapMissing,
        _ => RunError::Spawn(bwrap.to_owned(), err),
    })?;
    drop(seccomp);
    // The terminal sends ^C and ^\ to the whole foreground group: the sandboxed
    // command decides what they mean; this parent just waits for it.
    // SAFETY: setting a signal disposition to SIG_IGN has no memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
    let status = child.wait().map_err(|err| RunError::Spawn(bwrap.to_owned(), err))?;

    // Everything the sandbox wrote is in the pipe before this marker: FIFOs keep order.
    let mut writer = fifo;
    if writer.write_all(format!("{END_OF_AUDIT}\n").as_bytes()).is_ok() {
        let _ = relay.join();
    }
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

fn spawn_relay(fifo: File, audit_log: Option<PathBuf>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        for line in BufReader::new(fifo).lines() {
            let Ok(line) = line else { break };
            if line == END_OF_AUDIT {
                break;
            }
            let (Some(path), Some(event)) = (&audit_log, audit::parse_sandbox_line(&line)) else {
                continue;
            };
            if let Err(err) = audit::append(path, &[event]) {
                eprintln!("agent-sandbox: warning: cannot write the audit log: {err}");
            }
        }
    })
}
