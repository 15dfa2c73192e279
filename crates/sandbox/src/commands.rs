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
    let mut git_inodes: Vec<(u64, u64)> = targets.iter().filter_map(|target| inode(target)).collect();
    git_inodes.extend(dirs.iter().filter_map(|dir| inode(&dir.join("git"))));
    let mut result = Vec::new();
    for dir in dirs {
        let Some(entries) = exec_dir_entries(&dir, &git_inodes, &cache_dir.join("git-exec")) else { continue };
        let stand_in = cache_dir.join("git-exec").join(format!("{:016x}", stand_in_hash(result.len(), &entries)));
        result.push(ExecDir { path: dir, entries, stand_in });
    }
    result
}

/// The entries of git exec dir `dir`, each with whether it is git (named `git`, or
/// git's inode: a hard link, or a symlink that resolves to it), sorted; `None` if it
/// cannot be listed. Telling that takes a `stat` of every entry (about 170 in git's
/// exec dir), so the answer is kept in `cache` (the host's own cache directory, which
/// no sandbox shows) under the directory's identity and change times and git's inodes:
/// adding, removing or renaming an entry changes the directory's times, and a new git
/// binary changes its inode. (A symlink leading out of the directory is followed only
/// when the listing is made: the host's package manager relinks such trees, which
/// changes the directory; the agent cannot write either.)
fn exec_dir_entries(dir: &Path, git_inodes: &[(u64, u64)], cache: &Path) -> Option<Vec<(OsString, bool)>> {
    use std::os::unix::ffi::OsStrExt as _;
    let meta = dir.metadata().ok()?;
    let mut key = format!(
        "{} {} {}.{} {}.{}",
        meta.dev(),
        meta.ino(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    );
    for (dev, ino) in git_inodes {
        key.push_str(&format!(" {dev}:{ino}"));
    }
    key.push('\n');
    let name = format!("listing-{:016x}", stand_in_hash(0, &[(dir.as_os_str().to_owned(), false)]));
    let file = cache.join(name);
    if let Ok(bytes) = util::fs::read_regular_nofollow(&file, 1 << 20) {
        if let Some(kept) = bytes.strip_prefix(key.as_bytes()) {
            // Each entry: `1` (git) or `0`, its name, a NUL.
            let entries = kept
                .split(|byte| *byte == 0)
                .filter(|entry| !entry.is_empty())
                .map(|entry| (OsStr::from_bytes(&entry[1..]).to_owned(), entry[0] == b'1'));
            return Some(entries.collect());
        }
    }
    // Listed after the key was taken: a change in between makes the key stale, never
    // the kept listing.
    let mut entries: Vec<(OsString, bool)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| {
            let name = entry.file_name();
            // metadata() follows symlinks: a symlink to git has git's inode.
            let is_git = name == "git" || inode(&entry.path()).is_some_and(|id| git_inodes.contains(&id));
            (name, is_git)
        })
        .collect();
    entries.sort();
    let mut bytes = key.into_bytes();
    for (name, is_git) in &entries {
        bytes.push(if *is_git { b'1' } else { b'0' });
        bytes.extend_from_slice(name.as_bytes());
        bytes.push(0);
    }
    // Kept for the next start when the cache directory can take it, and only once the
    // directory has been still for two seconds: a change within one tick of the file
    // system's clock can leave its times as the key read them.
    let still = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .is_ok_and(|now| now.as_secs() as i64 > meta.ctime().max(meta.mtime()) + 2);
    if !still {
        return Some(entries);
    }
    let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(cache);
    if let Ok(mut temp) = tempfile::NamedTempFile::new_in(cache) {
        if std::io::Write::write_all(&mut temp, &bytes).is_ok() {
            let _ = temp.persist(&file);
        }
    }
    Some(entries)
}

/// The device and inode `path` leads to (symlinks followed: a symlink to git has git's).
fn inode(path: &Path) -> Option<(u64, u64)> {
    path.metadata().ok().map(|meta| (meta.dev(), meta.ino()))
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
    fn an_exec_dirs_listing_is_kept_until_the_directory_or_git_changes() {
        let root = tempfile::tempdir().expect("tempdir");
        let (dir, cache) = (root.path().join("git-core"), root.path().join("cache"));
        fs_err::create_dir(&dir).expect("mkdir");
        fs_err::write(dir.join("git"), "git").expect("write");
        fs_err::hard_link(dir.join("git"), dir.join("git-add")).expect("link");
        fs_err::write(dir.join("git-sh-setup"), "sh").expect("write");
        std::os::unix::fs::symlink("git", dir.join("git-log")).expect("symlink");
        let git = dir.join("git").metadata().expect("stat");
        let inodes = [(git.dev(), git.ino())];
        let names = |entries: Vec<(OsString, bool)>| -> Vec<String> {
            entries.into_iter().map(|(name, is_git)| format!("{}={is_git}", name.to_string_lossy())).collect()
        };
        let expected = ["git=true", "git-add=true", "git-log=true", "git-sh-setup=false"];
        // Changed just now: listed, not kept (a change in the same clock tick would
        // leave the key as it is).
        assert_eq!(names(exec_dir_entries(&dir, &inodes, &cache).expect("listed")), expected);
        assert!(!cache.exists(), "kept although the directory just changed");
        std::thread::sleep(std::time::Duration::from_millis(3100));
        assert_eq!(names(exec_dir_entries(&dir, &inodes, &cache).expect("listed")), expected);
        let kept: Vec<PathBuf> =
            fs_err::read_dir(&cache).expect("kept").map(|entry| entry.expect("entry").path()).collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        // Kept: a start reads the file, not the directory.
        let bytes = fs_err::read(&kept[0]).expect("read");
        let key_end = bytes.iter().position(|byte| *byte == b'\n').expect("key") + 1;
        fs_err::write(&kept[0], [&bytes[..key_end], b"1git-marker\0"].concat()).expect("write");
        assert_eq!(names(exec_dir_entries(&dir, &inodes, &cache).expect("listed")), ["git-marker=true"]);
        // Another git binary: listed again.
        let other = [(git.dev(), u64::MAX)];
        assert_eq!(
            names(exec_dir_entries(&dir, &other, &cache).expect("listed")),
            ["git=true", "git-add=false", "git-log=false", "git-sh-setup=false"]
        );
        // A new hard link changes the directory: listed again.
        exec_dir_entries(&dir, &inodes, &cache).expect("listed");
        fs_err::write(&kept[0], [&bytes[..key_end], b"1git-marker\0"].concat()).expect("write");
        fs_err::hard_link(dir.join("git"), dir.join("git-commit")).expect("link");
        assert_eq!(
            names(exec_dir_entries(&dir, &inodes, &cache).expect("listed")),
            ["git=true", "git-add=true", "git-commit=true", "git-log=true", "git-sh-setup=false"]
        );
    }

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
