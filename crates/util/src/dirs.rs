//! agent-sandbox's own directories on the host, one rule for each kind:
//! `$XDG_<KIND>_HOME/agent-sandbox`, else `<home>/<git's usual place>/agent-sandbox`.
//! Every crate that needs one asks here (`config::approval::state_dir` and
//! `config::xdg_dir` are this, for the crates that already depend on `config`).

use std::path::{Path, PathBuf};

/// `$XDG_STATE_HOME/agent-sandbox`, else `<home>/.local/state/agent-sandbox`: sessions,
/// approvals, the audit log, the push service's directories. No sandbox shows it.
pub fn state(home: &Path) -> PathBuf {
    xdg(home, "XDG_STATE_HOME", ".local/state")
}

/// `$XDG_CONFIG_HOME/agent-sandbox`, else `<home>/.config/agent-sandbox`.
pub fn config(home: &Path) -> PathBuf {
    xdg(home, "XDG_CONFIG_HOME", ".config")
}

/// `$XDG_CACHE_HOME/agent-sandbox`, else `<home>/.cache/agent-sandbox`.
pub fn cache(home: &Path) -> PathBuf {
    xdg(home, "XDG_CACHE_HOME", ".cache")
}

/// `$var/agent-sandbox` when `var` is set and not empty, else `<home>/<fallback>/agent-sandbox`.
pub fn xdg(home: &Path, var: &str, fallback: &str) -> PathBuf {
    match std::env::var_os(var).filter(|dir| !dir.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("agent-sandbox"),
        None => home.join(fallback).join("agent-sandbox"),
    }
}
