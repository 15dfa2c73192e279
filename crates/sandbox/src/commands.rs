//! Command wrapper setup: for each `commands.<name>` rule other than `true`, find every
//! executable the name can run on the sandbox's PATH (symlinks resolved, deduplicated by
//! target) so the plan can overlay each one with the multicall launcher.

use std::{
    collections::BTreeMap,
    ffi::{OsStr, OsString},
    os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
};

use config::{CommandRule, Sourced};
use policy::Mount;
use runtime_layout::RuntimeLayout;

use crate::plan::{ExecDir, Mask, WrappedCommand};

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
    masks: &[Mask],
    ctx: &policy::Context,
    cache_dir: &Path,
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
                let base = match rule.origin.layer {
                    config::LayerKind::Cli => &ctx.cwd,
                    _ => &ctx.project_root,
                };
                let path = policy::normalize(&match written.strip_prefix("~/") {
                    Some(rest) => ctx.home.join(rest),
                    None => base.join(written),
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
        let exec_dirs = if name == "git" { git_exec_dirs(&targets, mounts, cache_dir) } else { Vec::new() };
        for dir in &exec_dirs {
            let git = dir.entries.iter().filter(|(_, is_git)| *is_git).count();
            notes.push(format!(
                "command git: exec dir {} replaced ({git} of {} entries lead to the launcher)",
                dir.path.display(),
                dir.entries.len()
            ));
        }
        // Only an installation the sandbox cannot write, with nothing hidden inside it: the
        // whole directory is mounted again from the host's side, where no mask applies,
        // and a package.json the agent plants must not turn the project into one.
        let package = real.as_deref().and_then(installation_of).filter(|dir| {
            policy::access_of(dir, mounts) == Some(policy::Access::Ro)
                && !mounts.iter().any(|mount| mount.path.starts_with(dir) && mount.access != policy::Access::Ro)
                && !masks.iter().any(|mask| mask.path.starts_with(dir))
        });
        if let (Some(real), Some(package)) = (&real, &package) {
            notes.push(format!(
                "command {name}: its real {} is run from its installation {}, mounted whole",
                real.display(),
                package.display()
            ));
        }
        wrapped.push(WrappedCommand {
            name: name.clone(),
            rule: rule.value.clone(),
            targets,
            real,
            package,
            wrapper,
            exec_dirs,
        });
    }
    Ok(wrapped)
}

/// The installation a real executable belongs to, when it is a package that loads
/// files relative to itself (npm's `bin/npm-cli.js` requires `../lib/cli.js`; yarn,
/// pnpm, corepack and npm-installed CLIs likewise): the nearest directory at most four
/// levels above it that holds a `package.json`, never a top-level directory such as
/// `/usr/lib` or a home directory. A lone binary or a Python console script (which finds
/// its modules through its interpreter) has none and is mounted alone.
pub fn installation_of(real: &Path) -> Option<PathBuf> {
    real.ancestors()
        .skip(1)
        .take(4)
        .take_while(|dir| dir.components().count() >= 4)
        .find(|dir| dir.join("package.json").is_file())
        .map(Path::to_path_buf)
}

/// The directories git runs its own programs from, found without running git: next to
/// each git on PATH (`<prefix>/libexec/git-core`, `<prefix>/lib/git-core`, or the
/// binary's own directory when it is a `git-core`), plus the usual system locations.
/// In each, an entry is git itself if it is named `git`, is a hard link to a git binary,
/// or is a symlink resolving to one.
pub fn git_exec_dirs(targets: &[PathBuf], mounts: &[Mount], cache_dir: &Path) -> Vec<ExecDir> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    for target in targets {
        let Some(bin) = target.parent() else { continue };
        if bin.file_name().is_some_and(|name| name == "git-core") {
            candidates.push(bin.to_path_buf());
        }
        if let Some(prefix) = bin.parent() {
            candidates.push(prefix.join("libexec/git-core"));
            candidates.push(prefix.join("lib/git-core"));
        }
    }
    for fixed in ["/usr/lib/git-core", "/usr/libexec/git-core", "/usr/local/libexec/git-core"] {
        candidates.push(PathBuf::from(fixed));
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for candidate in candidates {
        if let Ok(dir) = candidate.canonicalize() {
            if dir.is_dir() && policy::is_visible(&dir, mounts) && !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    let inode = |path: &Path| path.metadata().ok().map(|meta| (meta.dev(), meta.ino()));
    let mut git_inodes: Vec<(u64, u64)> = targets.iter().filter_map(|target| inode(target)).collect();
    git_inodes.extend(dirs.iter().filter_map(|dir| inode(&dir.join("git"))));
    let mut result = Vec::new();
    for dir in dirs {
        let Ok(listing) = std::fs::read_dir(&dir) else { continue };
        let mut entries: Vec<(OsString, bool)> = listing
            .filter_map(Result::ok)
            .map(|entry| {
                let name = entry.file_name();
                // metadata() follows symlinks: a symlink to git has git's inode.
                let is_git = name == "git" || inode(&entry.path()).is_some_and(|id| git_inodes.contains(&id));
                (name, is_git)
            })
            .collect();
        entries.sort();
        let stand_in = cache_dir.join("git-exec").join(format!("{:016x}", stand_in_hash(result.len(), &entries)));
        result.push(ExecDir { path: dir, entries, stand_in });
    }
    result
}

/// FNV-1a over what a stand-in directory holds: its index (symlink targets name it) and
/// every entry with its kind. Equal hashes, equal directories.
fn stand_in_hash(index: usize, entries: &[(OsString, bool)]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let index = index.to_string();
    let bytes = std::iter::once(index.as_bytes()).chain(entries.iter().map(|(name, _)| name.as_encoded_bytes()));
    for (part, is_git) in bytes.zip(std::iter::once(false).chain(entries.iter().map(|(_, is_git)| *is_git))) {
        for byte in part.iter().copied().chain([u8::from(is_git), 0]) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// Builds the stand-in directory for exec dir `index` unless it exists: a symlink per
/// entry, to the launcher for git's own entries and to the original
/// (`/run/agent-sandbox/git-exec-real/<index>/<entry>`) for the rest. Built in a
/// temporary directory and renamed into place, so a concurrent start never sees half
/// of one.
pub fn ensure_stand_in(index: usize, dir: &ExecDir) -> std::io::Result<()> {
    if dir.stand_in.is_dir() {
        return Ok(());
    }
    let parent = dir.stand_in.parent().unwrap_or(Path::new("/"));
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent)?;
    let building = tempfile::Builder::new().prefix(".building-").tempdir_in(parent)?;
    let inside = RuntimeLayout::inside();
    let original = inside.git_exec_real(index);
    let launcher = inside.marker();
    for (entry, is_git) in &dir.entries {
        let target = if *is_git { launcher.clone() } else { original.join(entry) };
        std::os::unix::fs::symlink(target, building.path().join(entry))?;
    }
    std::fs::set_permissions(building.path(), std::fs::Permissions::from_mode(0o755))?;
    let built = building.keep();
    if let Err(err) = std::fs::rename(&built, &dir.stand_in) {
        let _ = std::fs::remove_dir_all(&built);
        if !dir.stand_in.is_dir() {
            return Err(err);
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installation_of_finds_the_package_a_script_belongs_to() {
        let root = tempfile::tempdir().expect("tempdir");
        let at = |relative: &str| root.path().join(relative);
        for file in [
            "usr/lib/node_modules/npm/bin/npm-cli.js",
            "usr/lib/node_modules/npm/package.json",
            "h/.local/lib/node_modules/@openai/codex/bin/codex.js",
            "h/.local/lib/node_modules/@openai/codex/package.json",
            "h/.local/lib/node_modules/deep/a/b/c/d/tool.js",
            "h/.local/lib/node_modules/deep/package.json",
            "usr/bin/pip",
            "package.json",
        ] {
            fs_err::create_dir_all(at(file).parent().expect("parent")).expect("mkdir");
            fs_err::write(at(file), "").expect("write");
        }
        let found = |relative: &str| installation_of(&at(relative));
        assert_eq!(found("usr/lib/node_modules/npm/bin/npm-cli.js"), Some(at("usr/lib/node_modules/npm")));
        assert_eq!(
            found("h/.local/lib/node_modules/@openai/codex/bin/codex.js"),
            Some(at("h/.local/lib/node_modules/@openai/codex"))
        );
        // Farther than four levels up, or at the top of the tree: not an installation.
        assert_eq!(found("h/.local/lib/node_modules/deep/a/b/c/d/tool.js"), None);
        assert_eq!(found("usr/bin/pip"), None);
        assert_eq!(installation_of(Path::new("/package.json/x")), None);
    }
}
