//! Sandbox detection for `agent-sandbox check` and for guards that behave differently
//! inside. Inside bubblewrap the marker is this binary mounted read-only at
//! `/run/agent-sandbox/agent-sandbox` (under a read-only `/`, so a sandboxed process can
//! neither remove it nor unmount it: it has no capabilities and cannot create a user
//! namespace). In a container it is the root-owned `/.agent-sandbox` file.

use std::path::Path;

use runtime_layout::RuntimeLayout;

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
    if RuntimeLayout::inside_of(root).marker().exists() {
        Where::Bubblewrap
    } else if root.join(".agent-sandbox").exists() {
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
        fs_err::write(root.join(".agent-sandbox"), "").expect("write");
        assert_eq!(detect_in(root), Where::Container);
        fs_err::create_dir_all(root.join("run/agent-sandbox")).expect("mkdir");
        assert_eq!(detect_in(root), Where::Container, "the directory alone is not the marker");
        fs_err::write(root.join("run/agent-sandbox/agent-sandbox"), "").expect("write");
        assert_eq!(detect_in(root), Where::Bubblewrap);
    }
}
