//! The audit log: policy decisions worth keeping (a masked file, a filtered variable, a
//! refused command), one JSON object per line with SPEC-SANDBOX-01's fields
//! (`timestamp`, `agent`, `operation`, `target`, `result`, `policy`, `reason`).
//!
//! Outside the sandbox events are appended to `$XDG_STATE_HOME/agent-sandbox/audit.jsonl`
//! (default `~/.local/state/...`), a file the sandbox cannot see. Inside, a process can
//! only [`send`] a line to `/run/agent-sandbox/audit`, a FIFO whose reader is the
//! `agent-sandbox exec` parent: the sandbox can add entries (marked `"source":"sandbox"`)
//! but never rewrite or delete the log.

use std::{
    io::Write,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt},
    path::{Path, PathBuf},
    time::{SystemTime, UNIX_EPOCH},
};

use serde::{Deserialize, Serialize};

/// One audit record; the JSONL line format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub timestamp: String,
    /// The sandboxed command (e.g. `claude`), or the wrapped command for refusals.
    pub agent: String,
    /// `read`, `env`, `exec`, …
    pub operation: String,
    pub target: String,
    /// `allowed`, `blocked` or `masked`.
    pub result: String,
    /// The rule that decided, e.g. `sensitive-file-pattern`.
    pub policy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `host` for decisions taken by `agent-sandbox exec`, `sandbox` for lines a
    /// sandboxed process sent (and so could have forged).
    #[serde(default = "host")]
    pub source: String,
}

fn host() -> String {
    "host".into()
}

impl Event {
    pub fn new(
        agent: &str,
        operation: &str,
        target: &str,
        result: &str,
        policy: &str,
        reason: Option<String>,
    ) -> Event {
        Event {
            timestamp: now_rfc3339(),
            agent: agent.to_owned(),
            operation: operation.to_owned(),
            target: target.to_owned(),
            result: result.to_owned(),
            policy: policy.to_owned(),
            reason,
            source: host(),
        }
    }

    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("an Event always serializes");
        line.push('\n');
        line
    }
}

/// `$XDG_STATE_HOME/agent-sandbox/audit.jsonl`, or under `~/.local/state`.
pub fn default_path() -> Option<PathBuf> {
    let state = match std::env::var_os("XDG_STATE_HOME").filter(|dir| !dir.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".local/state"),
    };
    Some(state.join("agent-sandbox/audit.jsonl"))
}

/// Appends `events` to the log at `path` (created 0600 in a 0700 directory).
pub fn append(path: &Path, events: &[Event]) -> std::io::Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(|err| std::io::Error::new(err.kind(), format!("opening {}: {err}", path.display())))?;
    let text: String = events.iter().map(Event::to_line).collect();
    file.write_all(text.as_bytes())
}

/// Parses a line a sandboxed process sent; forces `source` to `sandbox`.
pub fn parse_sandbox_line(line: &str) -> Option<Event> {
    let mut event: Event = serde_json::from_str(line).ok()?;
    event.source = "sandbox".into();
    Some(event)
}

/// From inside the sandbox: sends `event` to the parent's FIFO. Never blocks and never
/// fails the caller: a refusal still happens when the log cannot be written.
pub fn send(event: &Event) -> bool {
    let line = event.to_line();
    if line.len() > 4096 {
        return false; // larger writes to a pipe are not atomic
    }
    let fifo = runtime_layout::RuntimeLayout::inside().audit_fifo();
    let file = std::fs::OpenOptions::new().write(true).custom_flags(libc_o_nonblock()).open(fifo);
    match file {
        Ok(mut file) => file.write_all(line.as_bytes()).is_ok(),
        Err(_) => false,
    }
}

const fn libc_o_nonblock() -> i32 {
    0o4000 // O_NONBLOCK on Linux (all architectures agent-sandbox supports)
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn now_rfc3339() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    format_rfc3339(secs)
}

fn format_rfc3339(secs: u64) -> String {
    format_utc(secs, None)
}

pub use util::format_utc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(1_769_596_200), "2026-01-28T10:30:00Z");
        assert_eq!(format_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn lines_round_trip_and_sandbox_lines_cannot_claim_host() {
        let event =
            Event::new("claude", "read", "./.env", "masked", "sensitive-file-pattern", Some("matches .env".into()));
        let line = event.to_line();
        assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
        assert!(line.contains(r#""agent":"claude","operation":"read","target":"./.env","result":"masked","policy":"sensitive-file-pattern","reason":"matches .env","source":"host""#));
        let parsed = parse_sandbox_line(line.trim_end()).expect("parses");
        assert_eq!(parsed.source, "sandbox");
        assert_eq!(Event { source: "host".into(), ..parsed }, event);
        assert_eq!(parse_sandbox_line("not json"), None);
    }

    #[test]
    fn append_creates_a_private_log_and_appends() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state/agent-sandbox/audit.jsonl");
        let event = Event::new("sh", "exec", "npm", "blocked", "command-deny", None);
        append(&path, std::slice::from_ref(&event)).expect("append");
        append(&path, &[event.clone(), event]).expect("append");
        let text = fs_err::read_to_string(&path).expect("read");
        assert_eq!(text.lines().count(), 3);
        let mode = fs_err::metadata(&path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
