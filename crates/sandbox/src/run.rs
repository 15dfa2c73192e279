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
    io::{Read, Write},
    os::unix::{
        io::{AsRawFd, FromRawFd},
        process::{CommandExt, ExitStatusExt},
    },
    path::{Path, PathBuf},
    process::Command,
    thread,
};

use runtime_layout::RuntimeLayout;

use crate::plan::{SECCOMP_FD, STATUS_FD};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("bwrap not found in PATH (install with: apt install bubblewrap)")]
    BwrapMissing,
    #[error("starting {}", .0.display())]
    Spawn(PathBuf, #[source] std::io::Error),
    #[error("setting up the audit relay")]
    Audit(#[source] std::io::Error),
    #[error("cannot make the sandbox's private network namespace{}; --network off or on does without it", diagnose_userns(&read_userns_settings()).map(|fix| format!(" ({fix})")).unwrap_or_default())]
    PrivateNetwork(#[source] std::io::Error),
    #[error("cannot make the mount namespace for the caches' overlays{}; leave the caches out with \"!@caches\" in filesystem.presets", diagnose_userns(&read_userns_settings()).map(|fix| format!(" ({fix})")).unwrap_or_default())]
    Caches(#[source] std::io::Error),
    #[error("bwrap could not start the command in the sandbox (its message is above){}", diagnose_userns(&read_userns_settings()).map(|fix| format!("; {fix}")).unwrap_or_default())]
    Setup,
}

/// The caches' overlays to mount before bwrap starts, and what to tell the user of each
/// the kernel refused (mounted read-only instead).
pub struct CacheOverlays<'a> {
    pub prepared: &'a crate::caches::Prepared,
    pub on_refused: &'a dyn Fn(&Path, &std::io::Error),
}

/// Runs bwrap (in `network`'s namespace when there is one:
/// [`crate::plan::premade_network_namespace`]; over the caches' overlays when there are
/// some); returns the exit code to pass on (128 + signal for a killed command).
pub fn run(
    bwrap: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
    runtime: &RuntimeLayout,
    audit_log: Option<PathBuf>,
    network: Option<&crate::netns::PrivateNetwork>,
    caches: Option<CacheOverlays<'_>>,
) -> Result<i32, RunError> {
    let seccomp = File::open(runtime.seccomp()).map_err(RunError::Audit)?;
    // O_RDWR keeps the FIFO open for writing too, so its reader never sees EOF while
    // the sandbox has no writer, and opening never blocks.
    let fifo =
        std::fs::OpenOptions::new().read(true).write(true).open(runtime.audit_fifo()).map_err(RunError::Audit)?;
    let relay = Relay::spawn(fifo, audit_log).map_err(RunError::Audit)?;

    let seccomp_fd = seccomp.as_raw_fd();
    let (status_read, status_write) = pipe().map_err(RunError::Audit)?;
    let status_fd = status_write.as_raw_fd();
    let scope = crate::landlock::supported();
    let network = network.cloned();
    let private_network = network.is_some();
    let (report_read, report_write) = pipe().map_err(RunError::Audit)?;
    let report_fd = report_write.as_raw_fd();
    let overlays = caches.as_ref().map(|caches| caches.prepared.clone());
    let mut command = Command::new(bwrap);
    command.args(args).env_clear().envs(env.iter().map(|(k, v)| (k, v)));
    // SAFETY: only async-signal-safe calls (dup2, fcntl, and those of `enter`) between
    // fork and exec.
    unsafe {
        command.pre_exec(move || {
            // Copies above the targets first (close-on-exec), so neither dup2 below can
            // overwrite the other's source; dup2 leaves its target inheritable.
            let seccomp_copy = libc::fcntl(seccomp_fd, libc::F_DUPFD_CLOEXEC, 10);
            let status_copy = libc::fcntl(status_fd, libc::F_DUPFD_CLOEXEC, 10);
            if seccomp_copy < 0
                || status_copy < 0
                || libc::dup2(seccomp_copy, SECCOMP_FD) < 0
                || libc::dup2(status_copy, STATUS_FD) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(network) = &network {
                // SAFETY: between fork and exec, as `enter` requires.
                network.enter()?;
            }
            if let Some(overlays) = &overlays {
                // SAFETY: between fork and exec, as `enter` requires.
                if let Err(err) = overlays.enter(report_fd) {
                    crate::caches::report_failure(report_fd);
                    return Err(err);
                }
            }
            if scope {
                crate::landlock::restrict_self()?;
            }
            Ok(())
        });
    }
    // Only an errno comes back from the child: with a network namespace to make, any
    // failure but a missing bwrap is taken to be that step's (Landlock's rarely fails).
    let spawned = command.spawn();
    drop(report_write);
    let refused = match &caches {
        Some(caches) => {
            // Written before bwrap's exec (which spawn waited for): never blocks.
            let _ = set_nonblocking(report_read.as_raw_fd());
            crate::caches::read_report(report_read, &caches.prepared.paths())
        }
        None => crate::caches::Report::default(),
    };
    let mut child = spawned.map_err(|err| match err.kind() {
        std::io::ErrorKind::NotFound => RunError::BwrapMissing,
        _ if refused.failed => RunError::Caches(err),
        _ if private_network => RunError::PrivateNetwork(err),
        _ => RunError::Spawn(bwrap.to_owned(), err),
    })?;
    if let Some(caches) = &caches {
        for (path, err) in &refused.refused {
            (caches.on_refused)(path, err);
        }
    }
    drop(seccomp);
    drop(status_write);
    // The terminal sends ^C and ^\\ to the whole foreground group: the sandboxed command
    // decides what they mean. SIGTERM, SIGHUP, and a SIGINT sent to this process alone
    // (not by a terminal) end the sandbox, after which the caller still runs its exit
    // check; a second request (not a copy of the first) aborts at once, saying so (see
    // `asks_again`).
    install_signal_handlers();
    CHILD.store(i32::try_from(child.id()).unwrap_or(0), std::sync::atomic::Ordering::SeqCst);
    if RECEIVED.load(std::sync::atomic::Ordering::SeqCst) != 0 {
        // A signal came before bwrap started: end it at once (the exit check still runs).
        // SAFETY: kill(2) on the child just spawned.
        unsafe { libc::kill(i32::try_from(child.id()).unwrap_or(0), libc::SIGKILL) };
    }
    let status = child.wait().map_err(|err| RunError::Spawn(bwrap.to_owned(), err));
    // Its pid may be reused from now on: later signals must not reach another process.
    CHILD.store(0, std::sync::atomic::Ordering::SeqCst);
    let status = status?;

    relay.finish();
    // bwrap writes an exit-code record only for a command that ran; its own failures
    // (a mount it cannot make, a command it cannot exec) exit 1 without one.
    let mut report = String::new();
    let _ = (&status_read).read_to_string(&mut report);
    if status.code() == Some(1) && !report.contains("exit-code") {
        return Err(RunError::Setup);
    }
    let received = RECEIVED.load(std::sync::atomic::Ordering::SeqCst);
    if received > 0 {
        return Ok(128 + received);
    }
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// The kernel settings that decide whether an unprivileged user may create the user
/// namespace bwrap needs: (file under /proc/sys, its value), for those that exist.
pub fn read_userns_settings() -> Vec<(&'static str, String)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Vec::new();
    }
    ["kernel/apparmor_restrict_unprivileged_userns", "kernel/unprivileged_userns_clone", "user/max_user_namespaces"]
        .into_iter()
        .filter_map(|name| {
            let value = std::fs::read_to_string(Path::new("/proc/sys").join(name)).ok()?;
            Some((name, value.trim().to_owned()))
        })
        .collect()
}

/// Why bwrap cannot create a user namespace here, with the exact fix, from
/// [`read_userns_settings`]; `None` when nothing there explains it.
pub fn diagnose_userns(settings: &[(&str, String)]) -> Option<String> {
    let value = |name: &str| settings.iter().find(|(key, _)| *key == name).map(|(_, value)| value.as_str());
    if value("user/max_user_namespaces") == Some("0") {
        return Some(
            "user namespaces are disabled on this machine (user.max_user_namespaces = 0); enable them with: \
             sudo sysctl -w user.max_user_namespaces=15000"
                .into(),
        );
    }
    if value("kernel/unprivileged_userns_clone") == Some("0") {
        return Some(
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0); enable them with: \
             sudo sysctl -w kernel.unprivileged_userns_clone=1"
                .into(),
        );
    }
    if value("kernel/apparmor_restrict_unprivileged_userns") == Some("1") {
        return Some(
            "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and later); give bwrap a profile that \
             allows them (Ubuntu ships one in the apparmor-profiles package: sudo apt install apparmor-profiles \
             && sudo ln -s /usr/share/apparmor/extra-profiles/bwrap-userns-restrict /etc/apparmor.d/ \
             && sudo apparmor_parser -r /etc/apparmor.d/bwrap-userns-restrict), or lift the restriction with: \
             sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
                .into(),
        );
    }
    None
}

/// A pipe whose ends are both close-on-exec.
fn pipe() -> std::io::Result<(File, File)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 just created both descriptors; each is owned once.
    Ok(unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) })
}

/// bwrap's pid, for [`on_signal`].
static CHILD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
/// The first terminating signal received, reported as the exit status (128 + it).
static RECEIVED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
/// Who sent it (`si_pid`; 0 for the kernel) and when (`CLOCK_MONOTONIC`, in ns; 0 until
/// stored), to tell a copy of the same request from a second one.
static FIRST_SENDER: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
static FIRST_AT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How long after the first request the same signal from the same sender still counts
/// as a copy of it. coreutils `timeout` signals its child and then its whole process
/// group, and `kill` of a group reaches a process once per way it belongs to it: the
/// copies follow within microseconds. A person asking again takes longer than this.
const COPY_WINDOW_NS: u64 = 1_000_000_000;

/// Set once the caller's exit check has finished ([`exit_check_finished`]): a second
/// signal after that ends the process without claiming the check was skipped.
static CHECK_DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Tells the signal handler that the exit check is over: a second stop request from now
/// on only ends the process (with 128 + the signal), with nothing left unchecked.
pub fn exit_check_finished() {
    CHECK_DONE.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// What a second signal prints before exiting: the session check did not finish.
const ABORTED: &[u8] = b"agent-sandbox: aborted by a second signal before the exit check finished: the project's git \
metadata was not checked; the next `agent-sandbox exec` in this project checks it first\n";

/// Handles SIGTERM, SIGHUP and SIGINT from now on for this process (also while the
/// caller runs its exit check after [`run`] returns). SIGQUIT is ignored. `exec` calls it
/// first thing, so that a signal during the start is not lost either; [`run`] calls it
/// again (idempotent).
pub fn install_signal_handlers() {
    // SAFETY: a zeroed sigaction is valid; the handler only uses async-signal-safe calls
    // (kill, write, _exit, clock_gettime) and atomics.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction =
            on_signal as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        for signal in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
}

/// One stop request as [`on_signal`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Request {
    signal: i32,
    /// `si_pid`: the sending process (0: the kernel).
    sender: i32,
    /// `CLOCK_MONOTONIC` in ns.
    at: u64,
}

/// Whether `next`, received after `first`, asks again to stop: then the exit check is
/// abandoned. A copy of the first request (the same signal from the same sender within
/// [`COPY_WINDOW_NS`]) does not; neither does a hangup, which comes twice (from the
/// kernel and again from the shell that owned the terminal). Another signal, another
/// sender, or the same one asking again later does. Pure, so that it is table-tested.
///
/// A sender of 0 is unknown, and matches any: the kernel reports 0 for a sender outside
/// the receiver's pid namespace, and for a process group's kill it writes that 0 into
/// the one siginfo all members share, so once the group's walk has passed bwrap's
/// sandbox init (in a pid namespace of its own) every later member, this process
/// included, sees 0 (timeout's group copy arrives so, here). Erring that way only runs
/// the exit check.
fn asks_again(first: Request, next: Request) -> bool {
    if next.signal == libc::SIGHUP {
        return false;
    }
    let same_sender = next.sender == first.sender || next.sender == 0 || first.sender == 0;
    let copy = next.signal == first.signal && same_sender && next.at.saturating_sub(first.at) < COPY_WINDOW_NS;
    !copy
}

fn monotonic_ns() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime is async-signal-safe and writes only `now`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    u64::try_from(now.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(now.tv_nsec).unwrap_or(0)
}

extern "C" fn on_signal(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    use std::sync::atomic::Ordering::SeqCst;
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler; si_pid is
    // meaningful for the signals kill(2) and the kernel send (0 from the kernel).
    let (code, sender) = if info.is_null() { (0, 0) } else { unsafe { ((*info).si_code, (*info).si_pid()) } };
    // A terminal's ^C (si_code SI_KERNEL) also reached the sandboxed command, which
    // decides what it means (an agent cancels its current step).
    if signal == libc::SIGINT && code == libc::SI_KERNEL {
        return;
    }
    let now = monotonic_ns();
    // The first request wins the exchange; a copy may run at the same time on another
    // thread (the signal is blocked only in the thread handling it), so the sender is
    // published before the signal and a time not yet stored counts as "just now".
    let first_signal = RECEIVED.load(SeqCst);
    if first_signal == 0 {
        FIRST_SENDER.store(sender, SeqCst);
        let _ = FIRST_AT.compare_exchange(0, now, SeqCst, SeqCst);
    }
    match RECEIVED.compare_exchange(0, signal, SeqCst, SeqCst) {
        Ok(_) => {}
        Err(first_signal) => {
            let at = match FIRST_AT.load(SeqCst) {
                0 => now,
                at => at,
            };
            let first = Request { signal: first_signal, sender: FIRST_SENDER.load(SeqCst), at };
            if asks_again(first, Request { signal, sender, at: now }) {
                // SAFETY: write(2) and _exit(2) are async-signal-safe.
                unsafe {
                    if !CHECK_DONE.load(SeqCst) {
                        libc::write(2, ABORTED.as_ptr().cast(), ABORTED.len());
                    }
                    libc::_exit(128 + signal);
                }
            }
        }
    }
    let pid = CHILD.load(SeqCst);
    if pid > 0 {
        // bwrap is pid 1's parent in the sandbox's pid namespace, with
        // --die-with-parent: killing it ends every process in the sandbox.
        // SAFETY: kill(2) is async-signal-safe.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Relays complete JSON lines from the audit FIFO to the log while the sandbox runs.
/// Nothing the sandbox writes can stall it: the FIFO is read without blocking, a
/// separate pipe tells it to stop, a partial last line is dropped, and an over-long line
/// is discarded.
struct Relay {
    stop: File,
    handle: thread::JoinHandle<()>,
}

/// Events one session may add to the log; the rest are counted, not written.
const MAX_EVENTS: usize = 10_000;

impl Relay {
    fn spawn(fifo: File, audit_log: Option<PathBuf>) -> std::io::Result<Relay> {
        set_nonblocking(fifo.as_raw_fd())?;
        let (stop_read, stop_write) = pipe()?;
        let handle = thread::spawn(move || relay(fifo, stop_read, audit_log));
        Ok(Relay { stop: stop_write, handle })
    }

    /// Drains what is left and stops the relay.
    fn finish(mut self) {
        let _ = self.stop.write_all(b"x");
        let _ = self.handle.join();
    }
}

fn relay(mut fifo: File, stop: File, audit_log: Option<PathBuf>) {
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut written = 0;
    let mut dropped = 0;
    loop {
        let mut polls = [
            libc::pollfd { fd: fifo.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: stop.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: polls is a valid array of two pollfd structs.
        let ready = unsafe { libc::poll(polls.as_mut_ptr(), 2, -1) };
        if ready < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
        let stopping = polls[1].revents != 0;
        // Read everything available now (all of it when stopping: the sandbox is gone).
        loop {
            match fifo.read(&mut chunk) {
                Ok(0) => break,
                Ok(len) => pending.extend_from_slice(&chunk[..len]),
                Err(_) => break, // WouldBlock: nothing more for now
            }
        }
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if written < MAX_EVENTS {
                written += usize::from(record(&line[..line.len() - 1], audit_log.as_deref()));
            } else {
                dropped += 1;
            }
        }
        if pending.len() > audit::MAX_LINE {
            pending.clear();
        }
        if stopping {
            if dropped > 0 {
                if let Some(path) = &audit_log {
                    let reason = format!("{dropped} more lines from the sandbox were not recorded");
                    let event = audit::Event::new("?", "audit", "", "blocked", "audit-flood", Some(reason));
                    let _ = audit::append(path, &[event]);
                }
            }
            return;
        }
    }
}

/// Appends one sandbox line to the log if it is an event; says whether it was.
fn record(line: &[u8], audit_log: Option<&Path>) -> bool {
    audit_log.is_some_and(|path| audit::record_sandbox_line(line, path))
}

fn set_nonblocking(fd: i32) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor this process owns.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each copy a sender makes of one request beside a real second request.
    #[test]
    fn only_a_second_request_abandons_the_exit_check() {
        let ms = 1_000_000;
        let first = Request { signal: libc::SIGTERM, sender: 4242, at: 10_000 * ms };
        let next = |signal, sender, after_ms: u64| Request { signal, sender, at: first.at + after_ms * ms };
        let cases = [
            // coreutils `timeout`: the child, then its process group, microseconds apart.
            (next(libc::SIGTERM, 4242, 0), false),
            (next(libc::SIGTERM, 4242, 999), false),
            // The same sender asking again later.
            (next(libc::SIGTERM, 4242, 1000), true),
            (next(libc::SIGTERM, 4242, 5000), true),
            // Its group copy, whose sender the kernel may report as 0.
            (next(libc::SIGTERM, 0, 0), false),
            (next(libc::SIGTERM, 0, 1000), true),
            // Someone else asking (another `kill`), however soon.
            (next(libc::SIGTERM, 4343, 0), true),
            // Another kind of request from the same sender.
            (next(libc::SIGINT, 4242, 0), true),
            // A hangup comes twice by itself: never a second request.
            (next(libc::SIGHUP, 4343, 0), false),
            (next(libc::SIGHUP, 4242, 5000), false),
        ];
        for (request, abandons) in cases {
            assert_eq!(asks_again(first, request), abandons, "{request:?}");
        }
        // A clock that did not move forward (the time stored by a concurrent copy) is a copy.
        assert!(!asks_again(first, Request { at: first.at - ms, ..first }));
    }

    #[test]
    fn each_user_namespace_restriction_is_named_with_its_fix() {
        type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);
        let cases: [Case<'_>; 5] = [
            (&[], None),
            (&[("user/max_user_namespaces", "15000"), ("kernel/apparmor_restrict_unprivileged_userns", "0")], None),
            (&[("user/max_user_namespaces", "0")], Some("sudo sysctl -w user.max_user_namespaces=15000")),
            (&[("kernel/unprivileged_userns_clone", "0")], Some("sudo sysctl -w kernel.unprivileged_userns_clone=1")),
            (
                &[("kernel/apparmor_restrict_unprivileged_userns", "1")],
                Some("sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"),
            ),
        ];
        for (settings, fix) in cases {
            let settings: Vec<(&str, String)> = settings.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
            let got = diagnose_userns(&settings);
            match fix {
                Some(fix) => assert!(got.as_deref().is_some_and(|text| text.contains(fix)), "{settings:?}: {got:?}"),
                None => assert_eq!(got, None, "{settings:?}"),
            }
        }
    }
}
