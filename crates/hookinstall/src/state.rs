//! The state file `install` leaves in the hooks directory (`.agent-sandbox-hooks.json`):
//! the directories it had to create, and per hook whether an original was chained and
//! the exact shim it wrote, so `uninstall` can put everything back and can tell its own
//! shim from one someone has edited or replaced since.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::InstallError;

const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct State {
    pub(crate) version: u32,
    /// How many directories `install` created: the hooks directory and so many of its
    /// ancestors less one (removed again by `uninstall` when empty). A count rather than
    /// paths, so it survives moving the repository.
    pub(crate) created_dirs: usize,
    /// Per hook name.
    pub(crate) hooks: BTreeMap<String, HookRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct HookRecord {
    /// Whether a hook was there and now sits at `<hook>.agent-sandbox-chained`.
    pub(crate) chained: bool,
    /// The shim written in its place.
    pub(crate) shim: String,
}

impl State {
    pub(crate) fn new(created_dirs: usize) -> State {
        State { version: VERSION, created_dirs, hooks: BTreeMap::new() }
    }

    pub(crate) fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("numbers, strings and bools always serialize");
        text.push('\n');
        text
    }
}

/// The state in `path`, `None` when there is no such file.
pub(crate) fn read(path: &Path) -> Result<Option<State>, InstallError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(InstallError::Io { action: "read", path: path.to_path_buf(), error }),
    };
    let state: State = serde_json::from_str(&text)
        .map_err(|error| InstallError::State { path: path.to_path_buf(), error: error.to_string() })?;
    if state.version != VERSION {
        return Err(InstallError::State {
            path: path.to_path_buf(),
            error: format!("version {} is not the {VERSION} this agent-sandbox writes", state.version),
        });
    }
    Ok(Some(state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_through_json() {
        let mut state = State::new(2);
        state.hooks.insert("pre-commit".into(), HookRecord { chained: true, shim: "#!/bin/sh\n".into() });
        let text = state.to_json();
        assert_eq!(
            text,
            r##"{
  "version": 1,
  "createdDirs": 2,
  "hooks": {
    "pre-commit": {
      "chained": true,
      "shim": "#!/bin/sh\n"
    }
  }
}
"##
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        std::fs::write(&path, &text).expect("write");
        assert_eq!(read(&path).expect("read"), Some(state));
        assert_eq!(read(&dir.path().join("missing.json")).expect("read"), None);
    }

    #[test]
    fn another_version_is_refused_with_the_way_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        std::fs::write(&path, r#"{"version": 2, "createdDirs": 0, "hooks": {}}"#).expect("write");
        let err = read(&path).expect_err("version 2");
        assert_eq!(
            err.to_string(),
            format!(
                "cannot use the state file {}: version 2 is not the 1 this agent-sandbox writes (put the hooks back by hand from the *.agent-sandbox-chained files next to it, then delete it)",
                path.display()
            )
        );
    }
}
