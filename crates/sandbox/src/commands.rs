//! Command wrapper setup: for each `commands.<name>` rule other than `true`, find every
//! executable the name can run on the sandbox's PATH (symlinks resolved, deduplicated by
//! target) so the plan can overlay each one with the multicall launcher.

use std::{
    collections::BTreeMap,
    ffi::OsStr,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use config::{CommandRule, Sourced};
use policy::Mount;

use crate::plan::WrappedCommand;

/// Built-in command presets the multicall binary implements.
pub const COMMAND_PRESETS: &[&str] = &["git"];

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("commands.{name}: unknown preset @{preset} (known: @{}) (from {origin})", COMMAND_PRESETS.join(", @"))]
    UnknownPreset { name: String, preset: String, origin: String },
    #[error("commands.{name}: wrapper {} is not an executable file (from {origin}) (check the path and chmod +x it)", .path.display())]
    BadWrapper { name: String, path: PathBuf, origin: String },
}

/// Resolves the command rules; `notes` receives one line per decision for `--debug`.
pub fn wrap(
    rules: &BTreeMap<String, Sourced<CommandRule>>,
    path_var: Option<&OsStr>,
    mounts: &[Mount],
    home: &Path,
    cwd: &Path,
    notes: &mut Vec<String>,
) -> Result<Vec<WrappedCommand>, CommandError> {
    let mut wrapped = Vec::new();
    for (name, rule) in rules {
        let wrapper = match &rule.value {
            CommandRule::Allow => {
                notes.push(format!("command {name}: runs unwrapped (from {})", rule.origin));
                continue;
            }
            CommandRule::Preset(preset) if !COMMAND_PRESETS.contains(&preset.as_str()) => {
                return Err(CommandError::UnknownPreset {
                    name: name.clone(),
                    preset: preset.clone(),
                    origin: rule.origin.to_string(),
                });
            }
            CommandRule::Wrapper(written) => {
                let path = policy::normalize(&match written.strip_prefix("~/") {
                    Some(rest) => home.join(rest),
                    None => cwd.join(written),
                });
                match path.canonicalize() {
                    Ok(real) if is_executable(&real) => Some(real),
                    _ => {
                        return Err(CommandError::BadWrapper {
                            name: name.clone(),
                            path,
                            origin: rule.origin.to_string(),
                        })
                    }
                }
            }
            CommandRule::Preset(_) | CommandRule::Deny => None,
        };
        let targets: Vec<PathBuf> =
            find_on_path(name, path_var).into_iter().filter(|target| policy::is_visible(target, mounts)).collect();
        let real = match rule.value {
            CommandRule::Deny => None,
            _ => targets.first().cloned(),
        };
        notes.push(format!(
            "command {name}: {} over [{}] (from {})",
            rule.value,
            targets.iter().map(|target| target.display().to_string()).collect::<Vec<_>>().join(", "),
            rule.origin
        ));
        wrapped.push(WrappedCommand { name: name.clone(), rule: rule.value.clone(), targets, real, wrapper });
    }
    Ok(wrapped)
}

/// Every executable called `name` in the directories of `path_var`, canonicalized,
/// first hit first, duplicates removed.
pub fn find_on_path(name: &str, path_var: Option<&OsStr>) -> Vec<PathBuf> {
    let Some(path_var) = path_var else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = Vec::new();
    for dir in std::env::split_paths(path_var) {
        if !dir.is_absolute() {
            continue; // a relative PATH entry means a different file in every directory
        }
        let Ok(real) = dir.join(name).canonicalize() else {
            continue;
        };
        if is_executable(&real) && !found.contains(&real) {
            found.push(real);
        }
    }
    found
}

fn is_executable(path: &Path) -> bool {
    path.metadata().is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}
