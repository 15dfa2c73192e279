//! After a session: what the sandbox may have done to git metadata that the user's own
//! git would honour afterwards. The agent must be able to write `.git` (commits need it),
//! and git trusts pointer files there (`commondir`, a worktree's `gitdir`, a submodule's
//! `.git` file) and config files it finds through them. A planted pointer to a config of
//! the agent's making turns the user's next `git status` into the agent's command
//! (`core.fsmonitor`). So the pointers are snapshotted at start and, at exit, anything
//! new or changed is moved aside (or, failing that, deleted), and git configs written
//! during the session that name commands are moved aside too. Best effort: the warning
//! says what to inspect.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// Pointer files, nested git entries and the configs found through them, at start.
pub struct Snapshot {
    files: BTreeMap<PathBuf, Option<Vec<u8>>>,
    nested: BTreeSet<PathBuf>,
    configs: BTreeMap<PathBuf, Vec<u8>>,
}

/// The pointer files git would honour for this project (existing or not).
fn watched(project_root: &Path, common_dir: Option<&Path>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let dot_git = project_root.join(".git");
    if dot_git.is_dir() {
        files.extend(["commondir", "config.worktree"].map(|name| dot_git.join(name)));
    } else {
        files.push(dot_git);
    }
    if let Some(common) = common_dir.filter(|common| !common.starts_with(project_root)) {
        files.extend(["commondir", "config.worktree"].map(|name| common.join(name)));
    }
    if let Some(common) = common_dir {
        if let Ok(entries) = std::fs::read_dir(common.join("worktrees")) {
            for entry in entries.flatten() {
                files.extend(["commondir", "gitdir", "config.worktree"].map(|name| entry.path().join(name)));
            }
        }
    }
    files
}

pub fn snapshot(project_root: &Path, common_dir: Option<&Path>, nested: &[PathBuf]) -> Snapshot {
    let files =
        watched(project_root, common_dir).into_iter().map(|path| (path.clone(), std::fs::read(&path).ok())).collect();
    let configs = configs(common_dir, nested)
        .into_iter()
        .filter_map(|path| std::fs::read(&path).ok().map(|content| (path, content)))
        .collect();
    Snapshot { files, nested: nested.iter().cloned().collect(), configs }
}

/// The configs the user's git reads through submodules and nested repositories.
fn configs(common_dir: Option<&Path>, nested: &[PathBuf]) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = common_dir.map(|common| module_configs(&common.join("modules"))).unwrap_or_default();
    found.extend(nested.iter().filter(|entry| entry.is_dir()).map(|dir| dir.join("config")));
    found
}

/// Compares with `before` and quarantines what the session planted.
pub fn after(before: &Snapshot, project_root: &Path, common_dir: Option<&Path>, nested_now: &[PathBuf]) {
    for path in watched(project_root, common_dir) {
        let now = std::fs::read(&path).ok();
        let then = before.files.get(&path).cloned().flatten();
        if now.is_none() || now == then {
            continue;
        }
        if then.is_none() && is_sound_new_worktree_link(&path, common_dir) {
            continue; // `git worktree add` made it
        }
        quarantine(&path, "would change which repository, configuration or hooks git uses outside the sandbox");
    }
    let modules = common_dir.map(|common| common.join("modules"));
    for entry in nested_now.iter().filter(|entry| !before.nested.contains(*entry)) {
        if entry.is_file() {
            // A gitlink: sound only when it names a submodule git dir of this repository.
            let target = std::fs::read_to_string(entry).ok().and_then(|text| {
                let dir = text.lines().find_map(|line| line.strip_prefix("gitdir:"))?.trim().to_owned();
                let base = entry.parent()?;
                Some(policy::normalize(&base.join(dir)))
            });
            let worktrees = common_dir.map(|common| common.join("worktrees"));
            let links_back = |target: &Path| {
                std::fs::read_to_string(target.join("gitdir"))
                    .is_ok_and(|back| Path::new(back.trim()).canonicalize().ok() == entry.canonicalize().ok())
            };
            match (target, &modules, &worktrees) {
                (Some(target), Some(modules), _) if target.starts_with(modules) => {} // config checked below
                (Some(target), _, Some(worktrees))
                    if target.parent() == Some(worktrees.as_path()) && links_back(&target) => {}
                _ => quarantine(
                    entry,
                    "points git at a directory that is not one of this repository's submodules or worktrees",
                ),
            }
        } else if entry.is_dir() {
            eprintln!(
                "agent-sandbox: note: the sandbox created the git repository {}; its configuration is the agent's",
                entry.display()
            );
        }
    }
    // Configs written or changed during the session must not name commands.
    for config in configs(common_dir, nested_now) {
        let now = std::fs::read(&config).ok();
        if now.is_some() && now.as_ref() != before.configs.get(&config) {
            check_config(&config);
        }
    }
}

/// A new `worktrees/<n>/commondir` or `gitdir` that says what `git worktree add` writes.
fn is_sound_new_worktree_link(path: &Path, common_dir: Option<&Path>) -> bool {
    let (Some(common), Some(name)) = (common_dir, path.file_name()) else { return false };
    let Some(worktree) = path.parent().filter(|dir| dir.parent() == Some(common.join("worktrees").as_path())) else {
        return false;
    };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    match name.to_str() {
        Some("commondir") => text.trim() == "../..",
        Some("gitdir") => {
            // It names the new work tree's .git file, which names this directory back.
            let dot_git = PathBuf::from(text.trim());
            std::fs::read_to_string(&dot_git)
                .ok()
                .and_then(|back| {
                    back.lines().find_map(|line| line.strip_prefix("gitdir:")).map(|dir| dir.trim().to_owned())
                })
                .is_some_and(|dir| Path::new(&dir).canonicalize().ok() == worktree.canonicalize().ok())
        }
        _ => false,
    }
}

/// `modules/<name>/config`, nested submodules included.
fn module_configs(modules: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(modules) else { return found };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.join("config").is_file() {
            found.push(path.join("config"));
        }
        found.extend(module_configs(&path.join("modules")));
    }
    found
}

/// Config keys with which a git config makes git run a program of its choosing.
const COMMAND_KEYS: &[&str] = &[
    "core.fsmonitor",
    "core.hookspath",
    "core.sshcommand",
    "core.pager",
    "core.editor",
    "core.askpass",
    "core.gitproxy",
    "sequence.editor",
    "diff.external",
    "gpg.program",
    "credential.helper",
    "uploadpack.packobjectshook",
];

/// Sections whose entries name programs (`filter.<x>.clean`, `alias.<x>`, includes).
const COMMAND_SECTIONS: &[&str] =
    &["alias", "filter", "include", "includeif", "pager", "merge", "difftool", "mergetool"];

/// The first key in git config `text` that makes git run something, if any.
pub fn command_key(text: &str) -> Option<String> {
    let mut section = String::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            let name = header.trim_end_matches(']').split([' ', '"', '.']).next().unwrap_or_default();
            section = name.to_ascii_lowercase();
            continue;
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let key = line.split(['=', ' ', '\t']).next().unwrap_or_default().to_ascii_lowercase();
        let full = format!("{section}.{key}");
        let textconv = section == "diff" && (key == "textconv" || key == "command");
        if COMMAND_KEYS.contains(&full.as_str()) || COMMAND_SECTIONS.contains(&section.as_str()) || textconv {
            return Some(full);
        }
    }
    None
}

/// Moves aside a git config written during the session if it names a command.
fn check_config(config: &Path) {
    let Ok(text) = std::fs::read_to_string(config) else { return };
    if let Some(key) = command_key(&text) {
        quarantine(config, &format!("sets {key}, which makes git run a program written inside the sandbox"));
    }
}

fn quarantine(path: &Path, why: &str) {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let name = path.file_name().map_or_else(|| "file".into(), |name| name.to_string_lossy().into_owned());
    let aside = path.with_file_name(format!("{name}.agent-sandbox-quarantined.{stamp}"));
    // If even that cannot be done, the plant is removed rather than left in place.
    let moved = std::fs::rename(path, &aside).or_else(|err| {
        let removed = if path.is_dir() { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
        removed.and(Err(err))
    });
    let outcome = match moved {
        Ok(()) => format!("moved it to {} (inspect it, then delete it)", aside.display()),
        Err(err) if path.symlink_metadata().is_err() => format!("could not move it aside ({err}), so it was deleted"),
        Err(err) => format!("could not move it aside or delete it ({err}): delete it before running git here"),
    };
    eprintln!("agent-sandbox: WARNING: the sandbox wrote {}, which {why}; {outcome}", path.display());
    let event =
        audit::Event::new("git", "write", &path.display().to_string(), "blocked", "git-plant", Some(why.to_owned()));
    if let Some(log) = audit::default_path() {
        let _ = audit::append(&log, &[event]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_keys_are_found_in_any_spelling() {
        let cases: &[(&str, Option<&str>)] = &[
            ("[core]\n\tfsmonitor = \"touch x\"\n", Some("core.fsmonitor")),
            ("[Core]\n  FSMonitor=x\n", Some("core.fsmonitor")),
            ("[core]\n\tbare = false\n\trepositoryformatversion = 0\n", None),
            ("[filter \"lfs\"]\n\tclean = x\n", Some("filter.clean")),
            ("[diff \"pdf\"]\n\ttextconv = pdftotext\n", Some("diff.textconv")),
            ("[remote \"origin\"]\n\turl = x\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", None),
            ("[include]\n\tpath = ../x\n", Some("include.path")),
            ("# [core] fsmonitor = x\n[user]\n\tname = a\n", None),
        ];
        for (text, expected) in cases {
            assert_eq!(command_key(text).as_deref(), *expected, "{text:?}");
        }
    }
}
