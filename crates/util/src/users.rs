//! The system's users, for root's code in a container: looking one up and ending every
//! process of one (the firewall's proxy user, the verifier's checks user; nothing else
//! runs as them).

use std::time::{Duration, Instant};

/// The uid and gid of the user `name` in `/etc/passwd`.
///
/// Read from the file, not through the C library's `getpwnam`: the users looked up are the
/// ones an image made with `useradd` (always in `/etc/passwd`), and the release binary is
/// linked statically, where `getpwnam` would load NSS modules of the system's C library.
pub fn lookup(name: &str) -> Option<(u32, u32)> {
    passwd_entry(&std::fs::read_to_string("/etc/passwd").ok()?, name)
}

/// The uid and gid of `name` in the text of a passwd file (`name:x:uid:gid:…`).
fn passwd_entry(passwd: &str, name: &str) -> Option<(u32, u32)> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        if fields.next()? != name {
            return None;
        }
        let (_password, uid, gid) = (fields.next()?, fields.next()?, fields.next()?);
        Some((uid.parse().ok()?, gid.parse().ok()?))
    })
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

#[cfg(test)]
mod tests {
    use super::passwd_entry;

    #[test]
    fn a_user_is_found_by_its_whole_name_only() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nagent-sandbox-net:x:998:997::/nonexistent:/usr/sbin/nologin\n\
                      agent:x:1000:1000:,,,:/home/agent:/bin/bash\n";
        assert_eq!(passwd_entry(passwd, "root"), Some((0, 0)));
        assert_eq!(passwd_entry(passwd, "agent-sandbox-net"), Some((998, 997)));
        assert_eq!(passwd_entry(passwd, "agent"), Some((1000, 1000)));
        assert_eq!(passwd_entry(passwd, "agent-sandbox"), None, "a prefix of a name");
        assert_eq!(passwd_entry(passwd, "x"), None, "a field that is not the name");
        assert_eq!(passwd_entry("broken:x:notanumber:0::/:/bin/sh\n", "broken"), None);
        assert_eq!(passwd_entry("short:x\n", "short"), None);
    }
}
