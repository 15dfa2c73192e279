//! Sandbox detection for `agent-sandbox check` and for guards that behave differently
//! inside. Inside bubblewrap the marker is this binary mounted read-only at
//! `/run/agent-sandbox/agent-sandbox` (under a read-only `/`, so a sandboxed process can
//! neither remove it nor unmount it: it has no capabilities and cannot create a user
//! namespace). In a container it is the root-owned `/.agent-sandbox` file.

use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where {
    Bubblewrap,
    Container,
    Outside,
}

pub fn detect() -> Where {
    detect_in(Path::new("/"))
}

/// [`detect`] against another root, for tests.
pub fn detect_in(root: &Path) -> Where {
    if root.join("run/agent-sandbox/agent-sandbox").exists() {
        Where::Bubblewrap
    } else if root.join(".agent-sandbox").exists() {
        Where::Container
    } else {
        Where::Outside
    }
}
