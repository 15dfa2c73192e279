//! Claude Code's global state file, `~/.claude.json` (its login, trust and per-project
//! state), which it replaces atomically: a temporary file beside it renamed over it. A
//! single-file mount cannot be renamed over (`EBUSY`), and a file first created inside
//! would vanish with the scratch home. So inside, Claude Code keeps it in its config
//! directory instead (`CLAUDE_CONFIG_DIR=~/.claude`, read-write with `@agents`): seeded
//! from `~/.claude.json` at the start, copied back at the end when the sandbox changed
//! it and nothing outside did meanwhile.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

/// The variable that moves Claude Code's state file into its config directory.
pub const CONFIG_DIR_VAR: &str = "CLAUDE_CONFIG_DIR";
const FILE: &str = ".claude.json";

pub struct ClaudeState {
    /// `~/.claude`, what `CLAUDE_CONFIG_DIR` names inside.
    pub config_dir: PathBuf,
    home_file: PathBuf,
    host_at_start: Option<Vec<u8>>,
    seeded: Option<Vec<u8>>,
    /// `~/.claude.json` could not be read at the start (not a regular file, unreadable):
    /// then nothing is copied back over it.
    untouchable: bool,
}

impl ClaudeState {
    /// Whether the sandbox handles the state file: `@agents` is on (its config directory
    /// `~/.claude` is mounted read-write), the directory exists, and the user has not
    /// moved Claude Code's configuration elsewhere already.
    pub fn plan(config: &config::Config, home: &Path, user_config_dir: bool) -> Result<Option<ClaudeState>> {
        let enabled = policy::presets::expand(&config.presets)?;
        let config_dir = home.join(".claude");
        if user_config_dir || !enabled.iter().any(|(preset, _)| preset.name == "agents") || !config_dir.is_dir() {
            return Ok(None);
        }
        Ok(Some(ClaudeState {
            config_dir,
            home_file: home.join(FILE),
            host_at_start: None,
            seeded: None,
            untouchable: false,
        }))
    }

    /// Copies `~/.claude.json` to where Claude Code reads it inside (with no
    /// `~/.claude.json`, what an earlier session left there stays).
    pub fn seed(&mut self) -> Result<()> {
        let inside = self.config_dir.join(FILE);
        self.host_at_start = match read_checked(&self.home_file) {
            Ok(bytes) => bytes,
            Err(err) => {
                util::say!(
                    "agent-sandbox: warning: cannot read {} ({err}): the agent starts without it, and it is left \
                     as it is at the end",
                    self.home_file.display()
                );
                self.untouchable = true;
                None
            }
        };
        if let Some(bytes) = &self.host_at_start {
            if read(&inside).as_ref() != Some(bytes) {
                util::fs::atomic_write(&inside, bytes, 0o600)
                    .with_context(|| format!("copying {} to {}", self.home_file.display(), inside.display()))?;
            }
        }
        self.seeded = read(&inside);
        Ok(())
    }

    /// Brings what the session wrote back to `~/.claude.json`; when the file changed
    /// outside too, keeps that version and says where the sandbox's is.
    pub fn finish(self) {
        let inside = self.config_dir.join(FILE);
        let Some(now) = read(&inside) else { return };
        if Some(&now) == self.seeded.as_ref() || self.untouchable {
            return;
        }
        if !matches!(read_checked(&self.home_file), Ok(current) if current == self.host_at_start) {
            util::say!(
                "agent-sandbox: warning: {} changed outside the sandbox during the session; kept it, and the \
                 sandbox's version in {} (copy it over to take that one)",
                self.home_file.display(),
                inside.display()
            );
            return;
        }
        // A dotfiles symlink stays a symlink: write where it leads.
        let target = self.home_file.canonicalize().unwrap_or(self.home_file.clone());
        if let Err(err) = util::fs::atomic_write(&target, &now, 0o600) {
            util::say!(
                "agent-sandbox: warning: cannot update {} ({err}); the sandbox's version is in {}",
                target.display(),
                inside.display()
            );
        }
    }
}

/// Claude Code's state file grows with its history: read it whole.
const LIMIT: u64 = 1 << 30;

/// The copy inside `~/.claude`, which the agent writes: a regular file's bytes, never
/// through a symlink (a link to `~/.ssh/id_ed25519` would carry the key into
/// `~/.claude.json`, where the next session reads it) nor blocking on a FIFO; else `None`.
fn read(path: &Path) -> Option<Vec<u8>> {
    util::fs::read_regular_nofollow(path, LIMIT).ok()
}

/// `Ok(None)` when there is no file; an error when there is one that cannot be read.
fn read_checked(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    match util::fs::read_regular(path, LIMIT) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}
