//! Project configs the user allowed. A project's `.agent-sandbox/config.jsonc` is
//! written by whoever writes the repository, agents included, so it takes effect only
//! once `agent-sandbox config allow` has kept a copy of its exact bytes in the state
//! directory (hidden from every sandbox). A copy, not a hash: nothing the agent writes
//! can collide with it.

use std::{
    os::unix::fs::DirBuilderExt,
    path::{Path, PathBuf},
};

/// agent-sandbox's state directory: `$XDG_STATE_HOME/agent-sandbox`, else
/// `<home>/.local/state/agent-sandbox`.
pub fn state_dir(home: &Path) -> PathBuf {
    util::dirs::state(home)
}

/// Where the allowed copy of `config` is kept.
fn copy_path(state_dir: &Path, config: &Path) -> PathBuf {
    state_dir.join("allowed").join(format!("{:016x}", util::fnv1a(config.as_os_str().as_encoded_bytes())))
}

/// The stored form: the config's path, a NUL, its bytes (the path guards against a
/// hash collision between two projects).
fn record(config: &Path, bytes: &[u8]) -> Vec<u8> {
    [config.as_os_str().as_encoded_bytes(), b"\0", bytes].concat()
}

/// Whether `config` is byte for byte what the user allowed.
pub fn is_allowed(state_dir: &Path, config: &Path) -> bool {
    let read = |path: &Path| util::fs::read_regular(path, crate::CONFIG_LIMIT);
    match (read(&copy_path(state_dir, config)), read(config)) {
        (Ok(stored), Ok(current)) => stored == record(config, &current),
        _ => false,
    }
}

/// Trusts `config` as it is now; returns the bytes that were allowed.
pub fn allow(state_dir: &Path, config: &Path) -> std::io::Result<Vec<u8>> {
    let bytes = util::fs::read_regular(config, crate::CONFIG_LIMIT)?;
    let copy = copy_path(state_dir, config);
    let dir = copy.parent().unwrap_or(state_dir);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|err| std::io::Error::new(err.kind(), format!("creating {}: {err}", dir.display())))?;
    fs_err::write(&copy, record(config, &bytes))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bytes_allowed_are_trusted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        let config = dir.path().join("config.jsonc");
        std::fs::write(&config, "{}").expect("fs");
        assert!(!is_allowed(&state, &config), "never allowed");
        assert_eq!(allow(&state, &config).expect("allow"), b"{}");
        assert!(is_allowed(&state, &config));
        std::fs::write(&config, "{ }").expect("fs");
        assert!(!is_allowed(&state, &config), "changed after allow");
        // Another file with the same bytes is not allowed by the first one's copy.
        let other = dir.path().join("other.jsonc");
        std::fs::write(&other, "{ }").expect("fs");
        allow(&state, &config).expect("allow");
        assert!(!is_allowed(&state, &other));
        std::fs::remove_file(&config).expect("fs");
        assert!(!is_allowed(&state, &config), "a missing file is not allowed");
    }
}
