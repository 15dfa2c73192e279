//! Tools installed under the home directory (`npm --prefix ~/.local`, pipx): a symlink
//! in a visible `PATH` directory leads to an installation no mount shows. The scan
//! stage shows those installations read-only, when no link on the way is the agent's.

use std::path::{Path, PathBuf};

use policy::Mount;

/// The installation directories of the executables in visible `PATH` directories under
/// `home` whose symlinks lead to where no mount reaches (and nothing hides on purpose):
/// the npm package root (`package.json`), the virtual environment (`pyvenv.cfg`), else
/// the target's own directory (never a directory directly under home, `~/.config` or
/// `~/.local/share`). Only a chain of symlinks none of which the sandbox could have
/// written counts: every link on the way must lie where the sandbox cannot write.
pub(crate) fn hidden_installations(path_var: Option<&std::ffi::OsStr>, home: &Path, mounts: &[Mount]) -> Vec<PathBuf> {
    let covered = |path: &Path| mounts.iter().any(|mount| path.starts_with(&mount.path));
    let most_specific = |path: &Path| {
        mounts.iter().filter(|mount| path.starts_with(&mount.path)).max_by_key(|mount| mount.path.components().count())
    };
    // Writable inside: under a read-write mount (the project, `--rw`, @caches, @agents).
    let writable = |path: &Path| most_specific(path).is_some_and(|mount| mount.access == policy::Access::Rw);
    let read_only = |dir: &Path| most_specific(dir).is_some_and(|mount| mount.access == policy::Access::Ro);
    let too_wide = [home.to_path_buf(), home.join(".config"), home.join(".local/share"), home.join(".local")];
    let mut found: Vec<PathBuf> = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for dir in std::env::split_paths(path_var.unwrap_or_default()) {
        // A directory named twice in PATH (rustup's and pyenv's set-ups do) is read once.
        if !dir.is_absolute() || !dir.starts_with(home) || seen.contains(&dir) || !read_only(&dir) {
            continue;
        }
        seen.push(dir.clone());
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|kind| kind.is_symlink()) {
                continue;
            }
            let Some((target, links)) = resolve_tracking(&entry.path()) else { continue };
            if links.iter().any(|link| link.parent().is_none_or(writable)) {
                continue; // the agent could have planted or replaced a link on the way
            }
            // Already shown, or hidden on purpose (an exclude): leave it.
            if covered(&target) || !target.starts_with(home) {
                continue;
            }
            let install = target
                .ancestors()
                .skip(1)
                .take_while(|ancestor| *ancestor != home)
                .find(|ancestor| ancestor.join("package.json").is_file() || ancestor.join("pyvenv.cfg").is_file())
                .or_else(|| target.parent())
                .map(Path::to_path_buf);
            let Some(install) = install else { continue };
            let wide = too_wide.iter().any(|wide| install == *wide || install.parent() == Some(wide.as_path()));
            if !wide && !found.contains(&install) {
                found.push(install);
            }
        }
    }
    found
}

/// `path` resolved as the kernel resolves it, one component at a time, with the path of
/// every symlink met on the way; `None` if it does not resolve (or loops).
fn resolve_tracking(path: &Path) -> Option<(PathBuf, Vec<PathBuf>)> {
    use std::path::Component;
    let mut pending: std::collections::VecDeque<std::ffi::OsString> = std::collections::VecDeque::new();
    let push_front = |pending: &mut std::collections::VecDeque<std::ffi::OsString>, path: &Path| {
        for component in path.components().rev() {
            match component {
                Component::Normal(name) => pending.push_front(name.to_os_string()),
                Component::ParentDir => pending.push_front("..".into()),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
    };
    if !path.is_absolute() {
        return None;
    }
    push_front(&mut pending, path);
    let mut resolved = PathBuf::from("/");
    let mut links = Vec::new();
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        let next = resolved.join(&name);
        let meta = next.symlink_metadata().ok()?;
        if meta.is_symlink() {
            if links.len() >= 40 {
                return None;
            }
            let target = std::fs::read_link(&next).ok()?;
            links.push(next);
            if target.is_absolute() {
                resolved = PathBuf::from("/");
            }
            push_front(&mut pending, &target);
        } else {
            resolved = next;
        }
    }
    Some((resolved, links))
}
