//! A container's audit log. Inside `exec`, the session relays what the guards report
//! (the FIFO `/run/agent-sandbox/audit`) into the user's log. A container has no
//! session: at every start, `firewall start` (root) makes that FIFO, writable by every
//! user and readable by root only, and leaves a relay running as root that appends each
//! line to root's log ([`runtime_layout::CONTAINER_AUDIT_LOG`]), out of the agent's
//! reach. Audit is no guard: a relay that cannot start is said, and nothing else stops.

use std::{
    fs::{DirBuilder, File, OpenOptions},
    os::unix::{
        fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt},
        io::AsRawFd,
        process::CommandExt,
    },
    path::Path,
    process::{Command, Stdio},
};

use runtime_layout::{RuntimeLayout, Where};

/// Where the relay's own errors go (root's).
const RELAY_LOG: &str = "/var/log/agent-sandbox-audit-relay.log";

/// Makes the FIFO and starts the relay, unless one runs already (the agent may run
/// `sudo agent-sandbox firewall start` again): what happened, in a few words. Root, in
/// a container agent-sandbox set up, only.
pub fn start(self_exe: &Path) -> Result<&'static str, String> {
    if runtime_layout::detect() != Where::Container {
        return Err("the audit relay runs only in a container agent-sandbox set up".into());
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("only root starts the audit relay".into());
    }
    let layout = RuntimeLayout::inside();
    let dir = layout.root();
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() && meta.uid() == 0 => {}
        Ok(_) => return Err(format!("{} is not a directory of root's: no audit log", dir.display())),
        Err(_) => DirBuilder::new()
            .mode(0o755)
            .create(dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?,
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
        .map_err(|err| format!("cannot set {}'s mode: {err}", dir.display()))?;
    // The relay inherits this lock (an open file description's flock), so it is held
    // from here for the relay's whole life, with no moment between in which a second
    // start could make another FIFO under it.
    let lock_path = dir.join("audit-relay.lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&lock_path)
        .map_err(|err| format!("cannot open {}: {err}", lock_path.display()))?;
    // SAFETY: flock on a descriptor this process owns.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Ok("already running");
    }
    let fifo = layout.audit_fifo();
    let _ = std::fs::remove_file(&fifo);
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).map_err(|err| err.to_string())?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) } != 0 {
        return Err(format!("cannot make {}: {}", fifo.display(), std::io::Error::last_os_error()));
    }
    // Every user's guards write; only root reads.
    std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o622))
        .map_err(|err| format!("cannot set {}'s mode: {err}", fifo.display()))?;
    let errors = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(RELAY_LOG)
        .map_err(|err| format!("cannot open {RELAY_LOG}: {err}"))?;
    let lock_fd = lock.as_raw_fd();
    let mut relay = Command::new(self_exe);
    relay.arg("audit-relay").stdin(Stdio::null()).stdout(Stdio::null()).stderr(errors);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        relay.pre_exec(move || {
            // Its own session (the entrypoint's ending takes nothing with it), and the
            // lock kept open across exec.
            libc::setsid();
            let flags = libc::fcntl(lock_fd, libc::F_GETFD);
            libc::fcntl(lock_fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            Ok(())
        });
    }
    relay.spawn().map_err(|err| format!("cannot start the audit relay: {err}"))?;
    Ok("started")
}

/// The relay itself (`agent-sandbox audit-relay`, started by [`start`]): reads the FIFO
/// into root's log until reading fails.
pub fn run() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if runtime_layout::detect() != Where::Container || unsafe { libc::geteuid() } != 0 {
        return Err("the audit relay runs only as root in a container agent-sandbox set up".into());
    }
    let fifo_path = RuntimeLayout::inside().audit_fifo();
    let fifo: File = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&fifo_path)
        .map_err(|err| format!("cannot open {}: {err}", fifo_path.display()))?;
    let err = audit::relay_forever(fifo, Path::new(runtime_layout::CONTAINER_AUDIT_LOG));
    Err(format!("reading {}: {err}", fifo_path.display()))
}
