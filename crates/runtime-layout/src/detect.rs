//! Sandbox detection: `agent-sandbox check`, the guards that behave differently inside,
//! and `exec`, which refuses to nest. Both sides ask, so it lives here rather than with
//! the code that runs inside. Inside bubblewrap the marker is this binary mounted
//! read-only at `/run/agent-sandbox/agent-sandbox` (under a read-only `/`, so a
//! sandboxed process can neither remove it nor unmount it: it has no capabilities and
//! cannot create a user namespace). In a container it is the root-owned
//! `/.agent-sandbox` file.

use std::path::Path;

use crate::RuntimeLayout;

/// Where this process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where {
    Bubblewrap,
    Container,
    Outside,
}

/// The root-owned file that marks a container agent-sandbox set up (its Feature's
/// `install.sh` writes it): where the guards run in container mode and the only place
/// the firewall may be applied.
pub const CONTAINER_MARKER: &str = "/.agent-sandbox";

/// Where a container image keeps the real git when this binary is installed as
/// `/usr/bin/git` (root-owned, so the agent cannot replace it).
pub const CONTAINER_REAL_GIT: &str = "/usr/libexec/agent-sandbox/git";

/// In a container with a session repository (`hostpush::home`): root's directory
/// (0700, made by the Feature) holding the user's own `.git`, mounted read-write at
/// [`CONTAINER_HOME_GIT`] for the broker alone.
pub const CONTAINER_HOME_DIR: &str = "/var/lib/agent-sandbox/home";
pub const CONTAINER_HOME_GIT: &str = "/var/lib/agent-sandbox/home/git";
/// The broker's working directory: root's, readable by the checks' user and the agent
/// (nothing secret in it: a mirror of the session's commits, the checks' settings).
pub const CONTAINER_BROKER_DIR: &str = "/var/lib/agent-sandbox/broker";
/// What the broker told, as JSON lines (`{"seq", "text"}`): a sync the git guard started
/// in the background has nobody to tell, so the guard shows new lines at its next call.
pub const CONTAINER_BROKER_TOLD: &str = "/var/lib/agent-sandbox/broker/told";
/// The user's `.git/objects`, read-only: the session repository's alternate.
pub const CONTAINER_USER_OBJECTS: &str = "/var/lib/agent-sandbox/user-objects";
/// The user's `.git` as a whole, read-only: where the session's submodule repositories
/// find their alternates (`modules/<path>/objects`). A mount of `.git/modules` itself
/// would stop a fresh clone's container from starting: git makes that directory only
/// with the first submodule, and a bind mount needs its source. Nothing in it runs
/// inside; the agent could read all of it before the session repository.
pub const CONTAINER_USER_GIT: &str = "/var/lib/agent-sandbox/user-git";
/// Where a Docker sandbox's repo shelf is mounted (branch mode's worktrees; in a branch
/// sandbox, the session repository is the shelf's clone).
pub const CONTAINER_REPO_SHELF: &str = "/repo-shelf";

/// A container's audit log: root's (the relay the firewall's start leaves running writes
/// it), out of the agent's reach, read with `docker exec -u root <container> agent-sandbox log`.
pub const CONTAINER_AUDIT_LOG: &str = "/var/log/agent-sandbox/audit.jsonl";

/// Where this process runs, read off the markers under `/`.
pub fn detect() -> Where {
    detect_in(Path::new("/"))
}

/// [`detect`] against another root, for tests.
pub fn detect_in(root: &Path) -> Where {
    if RuntimeLayout::inside_of(root).marker().exists() {
        Where::Bubblewrap
    } else if root.join(CONTAINER_MARKER.trim_start_matches('/')).exists() {
        Where::Container
    } else {
        Where::Outside
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_follows_the_markers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        assert_eq!(detect_in(root), Where::Outside);
        std::fs::write(root.join(".agent-sandbox"), "").expect("write");
        assert_eq!(detect_in(root), Where::Container);
        std::fs::create_dir_all(root.join("run/agent-sandbox")).expect("mkdir");
        assert_eq!(detect_in(root), Where::Container, "the directory alone is not the marker");
        std::fs::write(root.join("run/agent-sandbox/agent-sandbox"), "").expect("write");
        assert_eq!(detect_in(root), Where::Bubblewrap);
    }
}
