//! The agents' host-executed settings (`config::agents`: hooks, MCP servers, plugins,
//! custom commands in `~/.claude`, `~/.codex`, `~/.gemini`, …) are read-only inside,
//! while the rest of the agent's state stays read-write: a write to them is refused at
//! write time (`EROFS`), so the user's next run of the agent outside the sandbox runs
//! nothing the session wrote.
//!
//! A read-only mount needs something to mount: an entry that does not exist yet is
//! created first, a directory empty and a settings file holding what the agent reads as
//! "no settings" (`{}`, or nothing for TOML), and removed again after the session when
//! it is still exactly that (it was read-only all along). Only the entries of state
//! directories that exist are handled (a directory that does not exist is not mounted).
//! A state file that holds both what the agent must write (its login) and commands its
//! host process runs (Copilot CLI's `settings.json`: credentials beside hooks and trusted
//! folders) cannot be read-only: its listed keys (`Kind::Keys`) get the values they had
//! at the start back after the session, the rest of what the session wrote is kept, and
//! a file that is no longer a JSON object then is moved aside. Until the exit, an agent
//! started outside the sandbox meanwhile would read the session's values.
//! What the agent wrote is read only through `util::fs::read_regular_nofollow` (no link
//! followed, no special file opened); the removal checks type and size through
//! `symlink_metadata`; a file written back goes to a new file (`O_EXCL`, `O_NOFOLLOW`)
//! renamed over it.

use std::{
    fs::OpenOptions,
    io::Write as _,
    os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use config::agents::{Kind, CATALOG};

/// What to do with one catalogued entry, decided from what exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Present: mount it read-only.
    ReadOnly(PathBuf),
    /// Absent: create it (a directory, or a file with these bytes), then mount it
    /// read-only.
    Create { path: PathBuf, file: Option<&'static str> },
    /// Absent, and not to be created (`Kind::Watched`): moved aside at exit if the
    /// session creates it.
    Watch(PathBuf),
    /// A state file the agent writes (`Kind::Keys` in a state directory): these keys get
    /// their values at the start back after the session.
    KeepKeys { path: PathBuf, keys: &'static [&'static str] },
}

/// The guard's plan: every host-executed entry whose agent state directory `exists`
/// (a real directory at the start), read-only, created first when absent. `present`
/// says whether anything (even a dangling link) is at a path. Pure: the caller passes
/// the facts.
pub(crate) fn plan(
    home: &Path,
    state_dir_exists: &dyn Fn(&Path) -> bool,
    present: &dyn Fn(&Path) -> bool,
) -> Vec<Step> {
    let mut steps = Vec::new();
    for agent in CATALOG {
        for entry in agent.host_executed {
            // Keys of a file outside the state directories (`~/.claude.json`) are handled
            // where it is copied back (`claude_state`).
            let Some(state) = agent.state.iter().find(|state| Path::new(entry.path).starts_with(state)) else {
                continue;
            };
            let (file, create) = match entry.kind {
                Kind::File { empty } => (Some(empty), true),
                Kind::Dir => (None, true),
                Kind::Watched | Kind::Keys { .. } => (None, false),
            };
            if !state_dir_exists(&home.join(state)) {
                continue;
            }
            let path = home.join(entry.path);
            // The parent must exist too (`~/.claude/plugins` for a deeper entry): the
            // catalog's entries sit directly in a state directory or one below it.
            if path.parent().is_some_and(|parent| !present(parent)) {
                continue;
            }
            if let Kind::Keys { keys } = entry.kind {
                steps.push(Step::KeepKeys { path, keys });
                continue;
            }
            steps.push(match (present(&path), create) {
                (true, _) => Step::ReadOnly(path),
                (false, true) => Step::Create { path, file },
                (false, false) => Step::Watch(path),
            });
        }
    }
    steps
}

/// What the guard created before the session, removed after it (on drop, so every way
/// out of `exec` removes them) when it is still exactly what was created.
#[derive(Debug, Default)]
pub(crate) struct Created {
    entries: Vec<(PathBuf, Option<&'static str>)>,
    /// Absent at the start and not created (`Step::Watch`).
    watched: Vec<PathBuf>,
    /// `Step::KeepKeys`.
    kept: Vec<Kept>,
}

/// A file whose `keys` get their start values back, with its bytes at the start
/// (`None`: absent).
#[derive(Debug)]
struct Kept {
    path: PathBuf,
    keys: &'static [&'static str],
    at_start: Option<Vec<u8>>,
}

/// A settings file whose keys are kept is read whole up to this size.
const KEPT_LIMIT: u64 = 16 << 20;

/// Carries out `steps`: creates the absent entries (never through a link: `O_EXCL`
/// refuses one), and returns every path to mount read-only with what it created. An
/// entry that cannot be created (a dangling link in the way, no permission) is not
/// guarded and said so: its place is the agent's to fill, as before.
pub(crate) fn prepare(steps: &[Step]) -> (Vec<PathBuf>, Created) {
    let mut read_only = Vec::new();
    let mut created = Created::default();
    for step in steps {
        match step {
            Step::ReadOnly(path) => read_only.push(path.clone()),
            Step::Watch(path) => created.watched.push(path.clone()),
            Step::KeepKeys { path, keys } => match util::fs::read_regular_nofollow(path, KEPT_LIMIT) {
                Ok(bytes) if crate::claude_state::parse_jsonc(&bytes).is_ok_and(|value| value.is_object()) => {
                    created.kept.push(Kept { path: path.clone(), keys, at_start: Some(bytes) })
                }
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    created.kept.push(Kept { path: path.clone(), keys, at_start: None })
                }
                // What the keys hold now cannot be known: the whole file is read-only.
                _ => {
                    util::say!(
                        "agent-sandbox: warning: {} is not a JSON object agent-sandbox can read: it is read-only \
                         inside (what the agent saves there, its login included, is not kept)",
                        path.display()
                    );
                    read_only.push(path.clone());
                }
            },
            Step::Create { path, file } => match create(path, *file) {
                Ok(()) => {
                    created.entries.push((path.clone(), *file));
                    read_only.push(path.clone());
                }
                Err(err) => util::say!(
                    "agent-sandbox: warning: cannot create {} to make it read-only ({err:#}): what the agent writes \
                     there reaches the host",
                    path.display()
                ),
            },
        }
    }
    (read_only, created)
}

fn create(path: &Path, file: Option<&str>) -> Result<()> {
    match file {
        None => {
            std::fs::DirBuilder::new().mode(0o700).create(path).with_context(|| format!("creating {}", path.display()))
        }
        Some(bytes) => {
            let mut handle = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
                .with_context(|| format!("creating {}", path.display()))?;
            handle.write_all(bytes.as_bytes()).with_context(|| format!("writing {}", path.display()))
        }
    }
}

impl Drop for Created {
    fn drop(&mut self) {
        // One the session created is moved aside (renamed beside itself: `rename` moves
        // a link as a link, and reads nothing).
        for path in &self.watched {
            if path.symlink_metadata().is_err() {
                continue;
            }
            let aside = aside_name(path);
            match std::fs::rename(path, &aside) {
                Ok(()) => util::say!(
                    "agent-sandbox: warning: the session created {}, which the agent loads when it starts outside \
                     the sandbox: moved aside to {} (inspect it; to restore it: mv {} {})",
                    path.display(),
                    aside.display(),
                    util::single_quoted(&aside.to_string_lossy()),
                    util::single_quoted(&path.to_string_lossy())
                ),
                Err(err) => util::say!(
                    "agent-sandbox: WARNING: the session created {}, which the agent loads when it starts outside \
                     the sandbox, and it cannot be moved aside ({err}): remove it before you run the agent",
                    path.display()
                ),
            }
        }
        for kept in &self.kept {
            keep_keys(&kept.path, kept.keys, kept.at_start.as_deref());
        }
        // Deepest first: nothing the catalog lists nests today, but a removal must not
        // depend on it.
        for (path, file) in self.entries.iter().rev() {
            // What the user's own agent changed outside during the session is theirs:
            // only an empty directory (`remove_dir`, never through a link) or the exact
            // bytes created go.
            match file {
                None => {
                    let _ = std::fs::remove_dir(path);
                }
                Some(bytes) => {
                    if util::fs::read_regular_nofollow(path, 1 << 16).is_ok_and(|now| now == bytes.as_bytes()) {
                        let _ = std::fs::remove_file(path);
                    }
                }
            }
        }
    }
}

/// Gives `keys` of the file at `path` the values they had at the start (`at_start`),
/// keeping the rest of what the session wrote; a file that is no longer a JSON object
/// is moved aside.
fn keep_keys(path: &Path, keys: &[&str], at_start: Option<&[u8]>) {
    let now = match util::fs::read_regular_nofollow(path, KEPT_LIMIT) {
        Ok(now) => now,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return,
        Err(err) => return move_aside(path, &err.to_string()),
    };
    match crate::claude_state::keep_host_keys(keys, at_start, &now) {
        Ok((_, held)) if held.is_empty() => {}
        Ok((bytes, held)) => match write_over(path, &bytes) {
            Ok(()) => util::say!(
                "agent-sandbox: warning: the session changed {} in {}, which the agent runs outside the sandbox: put \
                 back as they were (the rest of what it saved there is kept)",
                held.join(", "),
                path.display()
            ),
            Err(err) => move_aside(path, &format!("cannot write it back: {err:#}")),
        },
        Err(why) => move_aside(path, &why),
    }
}

/// `bytes` in a new file beside `path` (never through a link), renamed over it.
fn write_over(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let new = path.with_file_name(format!("{name}.agent-sandbox-{}", std::process::id()));
    let mut handle = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&new)
        .with_context(|| format!("creating {}", new.display()))?;
    let written = handle.write_all(bytes).and_then(|()| handle.sync_all());
    drop(handle);
    if let Err(err) = written.and_then(|()| std::fs::rename(&new, path)) {
        let _ = std::fs::remove_file(&new);
        return Err(err).with_context(|| format!("writing {}", path.display()));
    }
    Ok(())
}

/// A file whose guarded keys cannot be checked, renamed beside itself, said why.
fn move_aside(path: &Path, why: &str) {
    let aside = aside_name(path);
    match std::fs::rename(path, &aside) {
        Ok(()) => util::say!(
            "agent-sandbox: warning: {} ({why}) may hold commands the agent runs outside the sandbox: moved aside to \
             {} (inspect it; to restore it: mv {} {})",
            path.display(),
            aside.display(),
            util::single_quoted(&aside.to_string_lossy()),
            util::single_quoted(&path.to_string_lossy())
        ),
        Err(err) => util::say!(
            "agent-sandbox: WARNING: {} ({why}) may hold commands the agent runs outside the sandbox, and it cannot be \
             moved aside ({err}): check it before you run the agent",
            path.display()
        ),
    }
}

/// `NAME.agent-sandbox-moved` beside `path`, numbered when taken.
fn aside_name(path: &Path) -> PathBuf {
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let mut aside = path.with_file_name(format!("{name}.agent-sandbox-moved"));
    let mut idx = 1;
    while aside.symlink_metadata().is_ok() {
        idx += 1;
        aside = path.with_file_name(format!("{name}.agent-sandbox-moved-{idx}"));
    }
    aside
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole plan for a home with Claude Code's and Codex's state only, some entries
    /// present: Claude Code's and Codex's entries, each read-only or created; nothing of
    /// the agents whose state is absent.
    #[test]
    fn present_entries_are_read_only_and_absent_ones_created_in_existing_state_only() {
        let home = Path::new("/h");
        let dirs = ["/h/.claude", "/h/.codex"];
        let present = ["/h/.claude", "/h/.codex", "/h/.claude/settings.json", "/h/.claude/commands", "/h/.codex/rules"];
        let steps = plan(home, &|path| dirs.iter().any(|dir| Path::new(dir) == path), &|path| {
            present.iter().any(|item| Path::new(item) == path)
        });
        let ro = |path: &str| Step::ReadOnly(PathBuf::from(path));
        let dir = |path: &str| Step::Create { path: PathBuf::from(path), file: None };
        let file = |path: &str, bytes: &'static str| Step::Create { path: PathBuf::from(path), file: Some(bytes) };
        assert_eq!(
            steps,
            [
                ro("/h/.claude/settings.json"),
                file("/h/.claude/settings.local.json", "{}\n"),
                ro("/h/.claude/commands"),
                dir("/h/.claude/agents"),
                dir("/h/.claude/skills"),
                dir("/h/.claude/hooks"),
                dir("/h/.claude/plugins"),
                file("/h/.codex/config.toml", ""),
                file("/h/.codex/hooks.json", "{}\n"),
                ro("/h/.codex/rules"),
                dir("/h/.codex/skills"),
            ]
        );
    }

    #[test]
    fn created_entries_are_removed_when_unchanged_and_kept_when_changed() {
        let tree = tempfile::tempdir().expect("tempdir");
        let root = tree.path();
        let steps = [
            Step::Create { path: root.join("settings.json"), file: Some("{}\n") },
            Step::Create { path: root.join("config.toml"), file: Some("") },
            Step::Create { path: root.join("commands"), file: None },
            Step::Create { path: root.join("hooks"), file: None },
            Step::ReadOnly(root.join("present.json")),
        ];
        let (read_only, created) = prepare(&steps);
        assert_eq!(read_only.len(), 5);
        assert_eq!(std::fs::read_to_string(root.join("settings.json")).expect("created"), "{}\n");
        // The user's own agent, outside, during the session:
        std::fs::write(root.join("config.toml"), "model = \"o3\"\n").expect("write");
        std::fs::write(root.join("hooks/mine.sh"), "").expect("write");
        drop(created);
        let mut left: Vec<String> = std::fs::read_dir(root)
            .expect("listing")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["config.toml", "hooks"]);
    }

    #[test]
    fn a_watched_file_is_not_created_and_moved_aside_when_the_session_made_it() {
        let tree = tempfile::tempdir().expect("tempdir");
        let env = tree.path().join(".env");
        let (read_only, created) = prepare(&[Step::Watch(env.clone())]);
        assert!(read_only.is_empty() && env.symlink_metadata().is_err(), "nothing created");
        std::fs::write(&env, "NODE_OPTIONS=--require=/tmp/evil.js\n").expect("the session writes it");
        std::fs::write(tree.path().join(".env.agent-sandbox-moved"), "an earlier one").expect("write");
        drop(created);
        assert!(env.symlink_metadata().is_err(), "moved away");
        assert_eq!(
            std::fs::read_to_string(tree.path().join(".env.agent-sandbox-moved-2")).expect("moved aside"),
            "NODE_OPTIONS=--require=/tmp/evil.js\n"
        );
    }

    /// Copilot CLI's state: its settings' keys kept, its other entries read-only or
    /// created, or watched.
    #[test]
    fn copilots_settings_keys_are_kept_and_its_other_entries_guarded() {
        let home = Path::new("/h");
        let present = ["/h/.copilot", "/h/.copilot/settings.json", "/h/.copilot/hooks"];
        let steps = plan(home, &|path| path == Path::new("/h/.copilot"), &|path| {
            present.iter().any(|item| Path::new(item) == path)
        });
        let keys = |path: &str| match CATALOG.iter().flat_map(|agent| agent.host_executed).find(|e| e.path == path) {
            Some(config::agents::Executable { kind: Kind::Keys { keys }, .. }) => *keys,
            other => panic!("{path}: {other:?}"),
        };
        let dir = |path: &str| Step::Create { path: PathBuf::from(path), file: None };
        assert_eq!(
            steps,
            [
                Step::Create {
                    path: PathBuf::from("/h/.copilot/mcp-config.json"),
                    file: Some("{\"mcpServers\": {}}\n")
                },
                dir("/h/.copilot/pkg"),
                Step::ReadOnly(PathBuf::from("/h/.copilot/hooks")),
                dir("/h/.copilot/agents"),
                dir("/h/.copilot/skills"),
                dir("/h/.copilot/installed-plugins"),
                Step::Watch(PathBuf::from("/h/.copilot/lsp-config.json")),
                Step::Watch(PathBuf::from("/h/.copilot/permissions-config.json")),
                Step::KeepKeys {
                    path: PathBuf::from("/h/.copilot/settings.json"),
                    keys: keys(".copilot/settings.json")
                },
                Step::KeepKeys { path: PathBuf::from("/h/.copilot/config.json"), keys: keys(".copilot/config.json") },
            ]
        );
    }

    /// What the session wrote stays (a login), the guarded keys get their values back
    /// (absent stays absent); a file that is no longer a JSON object, or a link, is moved
    /// aside; a file the keys of which did not change keeps its bytes.
    #[test]
    fn kept_keys_get_their_start_values_back_and_the_rest_stays() {
        let tree = tempfile::tempdir().expect("tempdir");
        let settings = tree.path().join("settings.json");
        let keys: &'static [&'static str] = &["hooks", "trustedFolders"];
        let start = "{\n  // the user's\n  \"model\": \"m\",\n  \"trustedFolders\": [\"/home/u/work\"],\n}\n";
        std::fs::write(&settings, start).expect("write");
        let (read_only, created) = prepare(&[Step::KeepKeys { path: settings.clone(), keys }]);
        assert!(read_only.is_empty(), "kept, not read-only");
        std::fs::write(
            &settings,
            r#"{"model": "m", "token": "login", "trustedFolders": ["/"], "hooks": {"sessionStart": [{"bash": "x"}]}}"#,
        )
        .expect("the session writes");
        drop(created);
        let now: serde_json::Value = serde_json::from_slice(&std::fs::read(&settings).expect("read")).expect("JSON");
        assert_eq!(now, serde_json::json!({"model": "m", "token": "login", "trustedFolders": ["/home/u/work"]}));

        // Unchanged keys: the bytes as the session left them.
        let (_, created) = prepare(&[Step::KeepKeys { path: settings.clone(), keys }]);
        std::fs::write(&settings, "{\"trustedFolders\": [\"/home/u/work\"], \"theme\": \"dark\"}").expect("write");
        drop(created);
        assert_eq!(
            std::fs::read_to_string(&settings).expect("read"),
            "{\"trustedFolders\": [\"/home/u/work\"], \"theme\": \"dark\"}"
        );

        // No longer an object, or a link: moved aside.
        for (idx, replace) in [0, 1].into_iter().enumerate() {
            std::fs::write(&settings, start).expect("write");
            let (_, created) = prepare(&[Step::KeepKeys { path: settings.clone(), keys }]);
            std::fs::remove_file(&settings).expect("rm");
            if replace == 0 {
                std::fs::write(&settings, "[1]").expect("write");
            } else {
                std::os::unix::fs::symlink("/etc/passwd", &settings).expect("symlink");
            }
            drop(created);
            assert!(settings.symlink_metadata().is_err(), "case {idx}: moved aside");
        }
        assert!(tree.path().join("settings.json.agent-sandbox-moved").exists());
        assert!(tree.path().join("settings.json.agent-sandbox-moved-2").symlink_metadata().is_ok());
    }

    #[test]
    fn a_kept_file_that_cannot_be_read_at_the_start_is_read_only() {
        let tree = tempfile::tempdir().expect("tempdir");
        let settings = tree.path().join("settings.json");
        std::fs::write(&settings, "not json").expect("write");
        let (read_only, _created) = prepare(&[Step::KeepKeys { path: settings.clone(), keys: &["hooks"] }]);
        assert_eq!(read_only, [settings]);
    }

    #[test]
    fn a_dangling_link_in_the_way_is_not_followed() {
        let tree = tempfile::tempdir().expect("tempdir");
        let link = tree.path().join("settings.json");
        std::os::unix::fs::symlink(tree.path().join("elsewhere"), &link).expect("symlink");
        let (read_only, created) = prepare(&[Step::Create { path: link.clone(), file: Some("{}\n") }]);
        assert!(read_only.is_empty());
        drop(created);
        assert!(!tree.path().join("elsewhere").exists(), "nothing created through the link");
        assert!(link.symlink_metadata().is_ok(), "the link stays");
    }
}
