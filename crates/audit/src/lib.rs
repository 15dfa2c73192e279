//! The audit log: policy decisions worth keeping (a masked file, a filtered variable, a
//! refused command), one JSON object per line with SPEC-SANDBOX-01's fields
//! (`timestamp`, `agent`, `operation`, `target`, `result`, `policy`, `reason`).
//!
//! Outside the sandbox events are appended to `$XDG_STATE_HOME/agent-sandbox/audit.jsonl`
//! (default `~/.local/state/...`), a file the sandbox cannot see. Inside, a process can
//! only [`send`] a line to `/run/agent-sandbox/audit`, a FIFO whose reader is the
//! `agent-sandbox exec` parent: the sandbox can add entries (marked `"source":"sandbox"`)
//! but never rewrite or delete the log.
//!
//! Each `exec` is a session with a short id ([`start_session`]): every line written while
//! it runs carries it, those the sandbox sent included (the relay stamps them, so a
//! sandbox cannot claim another session). The log is capped at [`MAX_LOG_BYTES`]: the
//! writer that would cross the cap first renames it to `audit.1.jsonl` (and `.1` to
//! `.2`, …, keeping [`ROTATED_LOGS`]); [`log_files`] lists them oldest first and [`read`]
//! reads them all, reporting a line that is not an event instead of failing.

#![forbid(unsafe_code)]

use std::{
    io::Write,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt},
    path::{Path, PathBuf},
    sync::OnceLock,
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
    /// The `exec` session that wrote it ([`start_session`]); empty for decisions taken
    /// outside any session (the hook guard run by a person).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session: String,
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
            session: session().unwrap_or_default().to_owned(),
        }
    }

    /// Whether it records a refusal (`blocked`, `masked`: anything but `allowed`).
    pub fn is_refusal(&self) -> bool {
        self.result != "allowed"
    }

    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("an Event always serializes");
        line.push('\n');
        line
    }
}

/// `$XDG_STATE_HOME/agent-sandbox/audit.jsonl`, or under `~/.local/state`.
pub fn default_path() -> Option<PathBuf> {
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
    if home.as_os_str().is_empty() && std::env::var_os("XDG_STATE_HOME").filter(|dir| !dir.is_empty()).is_none() {
        return None;
    }
    Some(util::dirs::state(&home).join("audit.jsonl"))
}

static SESSION: OnceLock<String> = OnceLock::new();

/// Starts this process's session (once; later calls return the same id): 8 hex digits
/// that every [`Event::new`] and every relayed line from now on carries.
pub fn start_session() -> &'static str {
    SESSION.get_or_init(|| {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let seed = format!("{nanos}:{}", std::process::id());
        format!("{:08x}", util::fnv1a(seed.as_bytes()) as u32)
    })
}

/// This process's session, if [`start_session`] was called.
pub fn session() -> Option<&'static str> {
    SESSION.get().map(String::as_str)
}

/// The size at which the log is rotated.
pub const MAX_LOG_BYTES: u64 = 4 * 1024 * 1024;
/// How many rotated files are kept (`audit.1.jsonl` the newest of them).
pub const ROTATED_LOGS: usize = 3;

/// Appends `events` to the log at `path` (created 0600 in a 0700 directory), rotating
/// it first when they would take it past [`MAX_LOG_BYTES`].
pub fn append(path: &Path, events: &[Event]) -> std::io::Result<()> {
    append_capped(path, events, MAX_LOG_BYTES)
}

/// [`append`] with another cap. Writers (concurrent sessions, the relay) take a lock
/// beside the log, so that only one of them rotates and no line lands in a file being
/// renamed away.
pub fn append_capped(path: &Path, events: &[Event], max_bytes: u64) -> std::io::Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let context = |path: &Path| {
        let path = path.display().to_string();
        move |err: std::io::Error| std::io::Error::new(err.kind(), format!("opening {path}: {err}"))
    };
    let lock_path = path.with_extension("lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .map_err(context(&lock_path))?;
    lock.lock()?;
    let text: String = events.iter().map(Event::to_line).collect();
    let len = path.metadata().map_or(0, |meta| meta.len());
    if len > 0 && len + text.len() as u64 > max_bytes {
        rotate(path)?;
    }
    let mut file =
        std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path).map_err(context(path))?;
    file.write_all(text.as_bytes())
}

/// `audit.N.jsonl` beside `audit.jsonl`.
pub fn rotated(path: &Path, index: usize) -> PathBuf {
    let stem = path.file_stem().map_or_else(|| "audit".into(), |stem| stem.to_string_lossy().into_owned());
    let ext = path.extension().map_or_else(String::new, |ext| format!(".{}", ext.to_string_lossy()));
    path.with_file_name(format!("{stem}.{index}{ext}"))
}

fn rotate(path: &Path) -> std::io::Result<()> {
    for index in (1..ROTATED_LOGS).rev() {
        match std::fs::rename(rotated(path, index), rotated(path, index + 1)) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
            _ => {}
        }
    }
    std::fs::rename(path, rotated(path, 1))
}

/// The log's files that exist, oldest first: the rotated ones, then `path` itself.
pub fn log_files(path: &Path) -> Vec<PathBuf> {
    let rotated = (1..=ROTATED_LOGS).rev().map(|index| rotated(path, index));
    rotated.chain([path.to_path_buf()]).filter(|file| file.is_file()).collect()
}

/// A line of the log that is not an event: where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corrupt {
    pub file: PathBuf,
    /// 1-based.
    pub line: usize,
    pub why: String,
}

impl std::fmt::Display for Corrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: not an audit event ({})", self.file.display(), self.line, self.why)
    }
}

/// Every event of the log at `path` and its rotated files, oldest first, and the lines
/// that are not events (skipped).
pub fn read(path: &Path) -> std::io::Result<(Vec<Event>, Vec<Corrupt>)> {
    let (mut events, mut corrupt) = (Vec::new(), Vec::new());
    for file in log_files(path) {
        let bytes = std::fs::read(&file)
            .map_err(|err| std::io::Error::new(err.kind(), format!("reading {}: {err}", file.display())))?;
        parse_lines(&bytes, &file, 1, &mut events, &mut corrupt);
    }
    Ok((events, corrupt))
}

/// Parses complete lines of `bytes` (from `file`, its first line numbered `first_line`).
pub fn parse_lines(bytes: &[u8], file: &Path, first_line: usize, events: &mut Vec<Event>, corrupt: &mut Vec<Corrupt>) {
    for (index, line) in bytes.split(|byte| *byte == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Event>(line) {
            Ok(event) => events.push(event),
            Err(err) => corrupt.push(Corrupt { file: file.to_owned(), line: first_line + index, why: err.to_string() }),
        }
    }
}

/// Which events `agent-sandbox log` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only refusals ([`Event::is_refusal`]).
    pub blocked_only: bool,
    /// Only events at or after this timestamp (as [`now_rfc3339`] writes them).
    pub since: Option<String>,
    /// Only this session (or the sessions whose id starts with it).
    pub session: Option<String>,
}

impl Filter {
    pub fn matches(&self, event: &Event) -> bool {
        (!self.blocked_only || event.is_refusal())
            && self.since.as_ref().is_none_or(|since| event.timestamp.as_str() >= since.as_str())
            && self
                .session
                .as_ref()
                .is_none_or(|session| !session.is_empty() && event.session.starts_with(session.as_str()))
    }
}

/// `--since`: a duration back from `now` (`90s`, `30m`, `2h`, `1d`, `1w`, or several,
/// `1h30m`) or a time ([`util::parse_utc`]), as the timestamp [`Filter::since`] compares.
pub fn parse_since(text: &str, now: u64) -> Result<String, String> {
    if let Some(secs) = util::parse_utc(text) {
        return Ok(format_rfc3339(secs));
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(since_error(text)),
        };
        let count: u64 = digits.parse().map_err(|_| since_error(text))?;
        total = total.saturating_add(count.saturating_mul(unit));
        digits.clear();
    }
    if !digits.is_empty() || text.is_empty() {
        return Err(since_error(text));
    }
    Ok(format_rfc3339(now.saturating_sub(total)))
}

fn since_error(text: &str) -> String {
    format!("expected a duration (30m, 2h, 1d, 1h30m) or a UTC time (2026-01-28, 2026-01-28T10:30:00Z), got {text:?}")
}

/// Parses a line a sandboxed process sent; forces `source` to `sandbox` and `session` to
/// this process's session.
pub fn parse_sandbox_line(line: &str) -> Option<Event> {
    let mut event: Event = serde_json::from_str(line).ok()?;
    event.source = "sandbox".into();
    event.session = session().unwrap_or_default().to_owned();
    Some(event)
}

/// From inside the sandbox: sends `event` to the parent's FIFO. Never blocks and never
/// fails the caller: a refusal still happens when the log cannot be written.
pub fn send(event: &Event) -> bool {
    let line = event.to_line();
    if line.len() > MAX_LINE {
        return false; // larger writes to a pipe are not atomic
    }
    let fifo = runtime_layout::RuntimeLayout::inside().audit_fifo();
    let file = std::fs::OpenOptions::new().write(true).custom_flags(libc_o_nonblock()).open(fifo);
    match file {
        Ok(mut file) => file.write_all(line.as_bytes()).is_ok(),
        Err(_) => false,
    }
}

/// The longest line a sandbox may send (a write to a pipe is atomic up to 4 KiB);
/// relays discard longer ones.
pub const MAX_LINE: usize = 4096;

/// Appends one line a sandbox sent to `log` if it is an event (marked as the sandbox's,
/// stamped with this process's session); says whether it was. A failed write is said on
/// stderr (the error names the file), and the relay goes on.
pub fn record_sandbox_line(line: &[u8], log: &Path) -> bool {
    let Some(event) = std::str::from_utf8(line).ok().and_then(parse_sandbox_line) else {
        return false;
    };
    if let Err(err) = append(log, &[event]) {
        eprintln!("agent-sandbox: warning: cannot write the audit log: {err}");
    }
    true
}

/// A container's relay (root, started with the firewall at every start): reads the
/// lines the guards write to `fifo`, which it holds open for writing too so that it
/// never reaches its end, and appends each event, marked as the sandbox's and stamped
/// with this relay's session, to `log` ([`record_sandbox_line`]). Lines over [`MAX_LINE`] and lines that are no event are
/// dropped; the log's rotation bounds what a flood can take. Returns only when reading
/// fails.
pub fn relay_forever(mut fifo: std::fs::File, log: &Path) -> std::io::Error {
    use std::io::Read;
    start_session();
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let len = match fifo.read(&mut chunk) {
            Ok(len) => len,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return err,
        };
        pending.extend_from_slice(&chunk[..len]);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            record_sandbox_line(&line[..line.len() - 1], log);
        }
        if pending.len() > MAX_LINE {
            pending.clear();
        }
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

/// One session's entries in a few numbers: what `log --summary` prints first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionSummary {
    /// Empty for entries written outside any session (the hook guard run by a person).
    pub session: String,
    pub start: String,
    pub end: String,
    /// The agents and wrapped commands named, in order of first appearance.
    pub agents: Vec<String>,
    pub events: usize,
    pub refusals: usize,
    /// Per operation (`exec`, `read`, `tool`, `net`, …), the count of each result.
    pub counts: std::collections::BTreeMap<String, std::collections::BTreeMap<String, usize>>,
}

/// Groups `events` by session, in the order each session first appears.
pub fn summarize<'a>(events: impl IntoIterator<Item = &'a Event>) -> Vec<SessionSummary> {
    let mut summaries: Vec<SessionSummary> = Vec::new();
    for event in events {
        let index = match summaries.iter().position(|summary| summary.session == event.session) {
            Some(index) => index,
            None => {
                summaries.push(SessionSummary {
                    session: event.session.clone(),
                    start: event.timestamp.clone(),
                    end: event.timestamp.clone(),
                    agents: Vec::new(),
                    events: 0,
                    refusals: 0,
                    counts: std::collections::BTreeMap::new(),
                });
                summaries.len() - 1
            }
        };
        let summary = &mut summaries[index];
        summary.start = summary.start.clone().min(event.timestamp.clone());
        summary.end = summary.end.clone().max(event.timestamp.clone());
        if !summary.agents.contains(&event.agent) {
            summary.agents.push(event.agent.clone());
        }
        summary.events += 1;
        summary.refusals += usize::from(event.is_refusal());
        *summary.counts.entry(event.operation.clone()).or_default().entry(event.result.clone()).or_default() += 1;
    }
    summaries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_counts_each_sessions_operations_by_result() {
        let at = |time: &str, session: &str, agent: &str, operation: &str, result: &str| Event {
            timestamp: time.into(),
            agent: agent.into(),
            operation: operation.into(),
            target: "t".into(),
            result: result.into(),
            policy: "p".into(),
            reason: None,
            source: "host".into(),
            session: session.into(),
        };
        let events = [
            at("2026-01-01T10:00:05Z", "a", "claude", "read", "masked"),
            at("2026-01-01T10:00:01Z", "a", "git", "exec", "blocked"),
            at("2026-01-01T11:00:00Z", "b", "codex", "tool", "blocked"),
            at("2026-01-01T10:00:09Z", "a", "claude", "exec", "allowed"),
            at("2026-01-01T10:00:07Z", "a", "git", "exec", "blocked"),
        ];
        let summaries = summarize(&events);
        assert_eq!(summaries.len(), 2);
        let a = &summaries[0];
        assert_eq!(
            (a.session.as_str(), a.start.as_str(), a.end.as_str()),
            ("a", "2026-01-01T10:00:01Z", "2026-01-01T10:00:09Z")
        );
        assert_eq!(a.agents, ["claude", "git"]);
        assert_eq!((a.events, a.refusals), (4, 3));
        assert_eq!(a.counts["exec"]["blocked"], 2);
        assert_eq!(a.counts["exec"]["allowed"], 1);
        assert_eq!(a.counts["read"]["masked"], 1);
        assert_eq!((summaries[1].session.as_str(), summaries[1].refusals), ("b", 1));
    }

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
        let forged = line.replace(r#""source":"host""#, r#""source":"host","session":"someone-else""#);
        assert_eq!(parse_sandbox_line(forged.trim_end()).expect("parses").session, session().unwrap_or_default());
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

    #[test]
    fn the_log_rotates_at_its_cap_and_reads_back_whole_oldest_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let event = |n: usize| Event::new("sh", "exec", &format!("t{n:02}"), "blocked", "command-deny", None);
        let line_len = event(0).to_line().len() as u64;
        // Three lines fit; the fourth starts a new file; ROTATED_LOGS + 1 files at most.
        for n in 0..20 {
            append_capped(&path, &[event(n)], 3 * line_len).expect("append");
        }
        let names: Vec<String> = log_files(&path)
            .iter()
            .map(|file| file.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["audit.3.jsonl", "audit.2.jsonl", "audit.1.jsonl", "audit.jsonl"]);
        let (events, corrupt) = read(&path).expect("read");
        let targets: Vec<&str> = events.iter().map(|event| event.target.as_str()).collect();
        let expected: Vec<String> = (9..20).map(|n| format!("t{n:02}")).collect();
        assert_eq!(targets, expected);
        assert_eq!(corrupt, []);
    }

    #[test]
    fn a_corrupt_line_is_reported_with_its_place_and_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let event = Event::new("sh", "read", "/p/.env", "masked", "sensitive-file-pattern", None);
        let text = format!("{}{{\"timestamp\": tru\n\n{}", event.to_line(), event.to_line());
        fs_err::write(&path, text).expect("write");
        let (events, corrupt) = read(&path).expect("read");
        assert_eq!(events, [event.clone(), event]);
        assert_eq!(corrupt.len(), 1);
        assert_eq!((corrupt[0].file.as_path(), corrupt[0].line), (path.as_path(), 2));
        assert!(corrupt[0].to_string().contains("audit.jsonl:2: not an audit event ("), "{}", corrupt[0]);
    }

    #[test]
    fn filters_by_refusal_time_and_session() {
        let mut allowed = Event::new("claude", "session", "/p", "allowed", "session-start", None);
        allowed.timestamp = "2026-01-28T10:30:00Z".into();
        allowed.session = "0a1b2c3d".into();
        let blocked = Event { result: "blocked".into(), timestamp: "2026-01-28T10:31:00Z".into(), ..allowed.clone() };
        let masked = Event { result: "masked".into(), session: String::new(), ..blocked.clone() };
        let cases: [(Filter, [bool; 3]); 5] = [
            (Filter::default(), [true, true, true]),
            (Filter { blocked_only: true, ..Filter::default() }, [false, true, true]),
            (Filter { since: Some("2026-01-28T10:30:30Z".into()), ..Filter::default() }, [false, true, true]),
            (Filter { session: Some("0a1b".into()), ..Filter::default() }, [true, true, false]),
            (Filter { session: Some(String::new()), ..Filter::default() }, [false, false, false]),
        ];
        for (filter, expected) in cases {
            let got = [&allowed, &blocked, &masked].map(|event| filter.matches(event));
            assert_eq!(got, expected, "{filter:?}");
        }
    }

    #[test]
    fn since_takes_durations_and_times() {
        let now = 1_769_596_200; // 2026-01-28T10:30:00Z
        let cases = [
            ("90s", "2026-01-28T10:28:30Z"),
            ("30m", "2026-01-28T10:00:00Z"),
            ("1h30m", "2026-01-28T09:00:00Z"),
            ("2d", "2026-01-26T10:30:00Z"),
            ("1w", "2026-01-21T10:30:00Z"),
            ("2026-01-01", "2026-01-01T00:00:00Z"),
            ("2026-01-28T08:00:00Z", "2026-01-28T08:00:00Z"),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_since(text, now).as_deref(), Ok(expected), "{text}");
        }
        for bad in ["", "5", "m", "5y", "yesterday", "-1h"] {
            assert!(parse_since(bad, now).is_err(), "{bad}");
        }
    }
}
