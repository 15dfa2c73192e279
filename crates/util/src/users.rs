//! The system's users, for root's code in a container: looking one up and ending every
//! process of one (the firewall's proxy user, the verifier's checks user; nothing else
//! runs as them).

use std::time::{Duration, Instant};

/// The uid and gid of the user `name` in the password database.
pub fn lookup(name: &str) -> Option<(u32, u32)> {
    let name = std::ffi::CString::new(name).ok()?;
    // SAFETY: getpwnam returns a pointer into static storage or null; read at once.
    unsafe {
        let entry = libc::getpwnam(name.as_ptr());
        (!entry.is_null()).then(|| ((*entry).pw_uid, (*entry).pw_gid))
    }
}

/// The live processes of `uid` (a zombie, killed and not yet reaped, holds nothing and
/// cannot be killed again: a container's PID 1 often reaps nothing).
pub fn processes_of(uid: u32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|status| {
                let field = |name: &str| {
                    status
                        .lines()
                        .find_map(|line| line.strip_prefix(name))
                        .and_then(|rest| rest.split_whitespace().next())
                };
                field("Uid:") == Some(uid.to_string().as_str()) && field("State:") != Some("Z")
            })
        })
        .collect()
}

/// Kills every process of `uid` until none is left or `limit` has passed; whether none
/// is left. Repeated, since a process may fork while the list is read.
pub fn kill_all(uid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let pids = processes_of(uid);
        if pids.is_empty() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        for pid in pids {
            // SAFETY: kill(2) has no memory preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
