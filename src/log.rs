//! `agent-sandbox log`: the audit log (and its rotated files) as a table or as JSONL,
//! filtered, optionally followed as it grows. Reading, rotation and filtering live in
//! `crates/audit`; this module prints.

use std::{
    io::{IsTerminal as _, Read as _, Write},
    os::unix::fs::MetadataExt as _,
    path::Path,
};

use anyhow::{bail, Context as _, Result};
use audit::{Event, Filter};

#[derive(clap::Args)]
pub struct LogArgs {
    /// Only refusals: blocked commands, masked files, dropped variables
    #[arg(long)]
    pub blocked_only: bool,
    /// One JSON object per line (the log's own format) instead of a table
    #[arg(long)]
    pub json: bool,
    /// Only entries of the last DURATION (30m, 2h, 1d, 1h30m) or since TIME (2026-01-28, 2026-01-28T10:30:00Z; UTC)
    #[arg(long, value_name = "DURATION|TIME", value_parser = since)]
    pub since: Option<String>,
    /// Only the session ID (as `exec --debug` prints it; a prefix will do)
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Keep printing entries as they are written, until interrupted
    #[arg(short, long)]
    pub follow: bool,
    /// Only the last N entries (before following)
    #[arg(short = 'n', long, value_name = "N")]
    pub limit: Option<usize>,
    /// One line per session: its time span, agents, and counts by operation and result
    #[arg(long, conflicts_with = "follow")]
    pub summary: bool,
}

/// `--since`, checked by clap so that a malformed one is a usage error (exit 2).
fn since(text: &str) -> Result<String, String> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    audit::parse_since(text, now)
}

pub fn log(args: &LogArgs) -> Result<i32> {
    let path = match runtime_layout::detect() {
        runtime_layout::Where::Outside => {
            audit::default_path().context("neither XDG_STATE_HOME nor HOME is set: no audit log to read")?
        }
        runtime_layout::Where::Bubblewrap => bail!(
            "the audit log is kept outside the sandbox, out of its reach: run `agent-sandbox log` in your own shell"
        ),
        // Root's, out of the agent's reach; root reads it where the agent cannot.
        runtime_layout::Where::Container => {
            let path = std::path::PathBuf::from(runtime_layout::CONTAINER_AUDIT_LOG);
            let denied =
                std::fs::File::open(&path).is_err_and(|err| err.kind() == std::io::ErrorKind::PermissionDenied);
            if denied {
                bail!(
                    "this container's audit log is root's, out of the agent's reach: from the host, run \
                     `docker exec -u root <container> agent-sandbox log`"
                );
            }
            path
        }
    };
    let filter = Filter { blocked_only: args.blocked_only, since: args.since.clone(), session: args.session.clone() };
    // The current file is opened first and read through this handle, so that `--follow`
    // goes on exactly where the listing ended.
    let mut tail = Tail::open(&path);
    let (mut events, mut corrupt) = (Vec::new(), Vec::new());
    for file in audit::log_files(&path).iter().filter(|file| **file != path) {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        audit::parse_lines(&bytes, file, 1, &mut events, &mut corrupt);
    }
    if let Some(tail) = tail.as_mut() {
        tail.read(&path, &mut events, &mut corrupt)?;
    }
    for bad in &corrupt {
        eprintln!("agent-sandbox: warning: {bad} (skipped)");
    }
    if events.is_empty() && corrupt.is_empty() && !args.follow {
        eprintln!("agent-sandbox: the audit log {} is empty or not there yet", path.display());
    }
    let mut shown: Vec<&Event> = events.iter().filter(|event| filter.matches(event)).collect();
    if args.summary {
        let mut summaries = audit::summarize(shown);
        if let Some(limit) = args.limit {
            summaries.drain(..summaries.len().saturating_sub(limit));
        }
        return print_summaries(&summaries, args.json);
    }
    if let Some(limit) = args.limit {
        shown.drain(..shown.len().saturating_sub(limit));
    }
    let stdout = std::io::stdout();
    let mut printer = Printer {
        out: stdout.lock(),
        json: args.json,
        colour: stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty()),
        widths: widths(&shown),
        from_sandbox: false,
    };
    // A closed pipe (`log | head`) ends the output quietly.
    if printer.header().and_then(|()| shown.iter().try_for_each(|event| printer.event(event))).is_err() {
        return Ok(0);
    }
    if args.follow {
        follow(&path, tail, &filter, &mut printer)?;
    } else if printer.from_sandbox && !args.json {
        let _ = writeln!(printer.out, "* sent from inside the sandbox (which could have forged it)");
    }
    Ok(0)
}

/// `--summary`: a table (or one JSON object per session), oldest session first; counts
/// read `exec 7 (5 blocked)`: all the operation's entries, then those refused.
fn print_summaries(summaries: &[audit::SessionSummary], json: bool) -> Result<i32> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut lines = Vec::new();
    if json {
        lines.extend(summaries.iter().map(|summary| serde_json::to_string(summary).expect("a summary serializes")));
    } else {
        let rows: Vec<[String; 5]> = summaries
            .iter()
            .map(|summary| {
                let counts: Vec<String> = summary
                    .counts
                    .iter()
                    .map(|(operation, results)| {
                        let all: usize = results.values().sum();
                        let refused: Vec<String> = results
                            .iter()
                            .filter(|(result, _)| *result != "allowed")
                            .map(|(result, count)| format!("{count} {result}"))
                            .collect();
                        if refused.is_empty() {
                            format!("{operation} {all}")
                        } else {
                            format!("{operation} {all} ({})", refused.join(", "))
                        }
                    })
                    .collect();
                let session = if summary.session.is_empty() { "-".to_owned() } else { summary.session.clone() };
                [session, summary.start.clone(), summary.end.clone(), summary.agents.join(","), counts.join(", ")]
            })
            .collect();
        let header = ["SESSION", "START", "END", "AGENTS", "ENTRIES BY OPERATION"].map(str::to_owned);
        let mut widths = header.clone().map(|cell| cell.len());
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.len());
            }
        }
        for row in std::iter::once(&header).chain(&rows) {
            let cells: Vec<String> = row.iter().zip(widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
            lines.push(cells.join("  ").trim_end().to_owned());
        }
    }
    for line in lines {
        // A closed pipe (`log --summary | head`) ends the output quietly.
        if writeln!(out, "{line}").is_err() {
            break;
        }
    }
    Ok(0)
}

/// The current log file, read as it grows.
struct Tail {
    file: std::fs::File,
    inode: u64,
    /// A last line not complete yet.
    pending: Vec<u8>,
    /// Lines read so far, for the place of a corrupt one.
    lines: usize,
}

impl Tail {
    fn open(path: &Path) -> Option<Tail> {
        let file = std::fs::File::open(path).ok()?;
        let inode = file.metadata().ok()?.ino();
        Some(Tail { file, inode, pending: Vec::new(), lines: 0 })
    }

    /// Parses the complete lines written since the last call.
    fn read(&mut self, path: &Path, events: &mut Vec<Event>, corrupt: &mut Vec<audit::Corrupt>) -> Result<()> {
        self.file.read_to_end(&mut self.pending).with_context(|| format!("reading {}", path.display()))?;
        if let Some(end) = self.pending.iter().rposition(|byte| *byte == b'\n') {
            let complete: Vec<u8> = self.pending.drain(..=end).collect();
            audit::parse_lines(&complete, path, self.lines + 1, events, corrupt);
            self.lines += complete.iter().filter(|byte| **byte == b'\n').count();
        }
        Ok(())
    }

    /// Whether `path` is another file now (the log was rotated).
    fn replaced(&self, path: &Path) -> bool {
        path.metadata().map_or(true, |meta| meta.ino() != self.inode)
    }
}

/// Prints what is appended to the log from now on, across rotations, until
/// interrupted (or stdout closes).
fn follow(path: &Path, mut tail: Option<Tail>, filter: &Filter, printer: &mut Printer<'_>) -> Result<()> {
    loop {
        let (mut events, mut corrupt) = (Vec::new(), Vec::new());
        // Rotated (or not there yet): the rest of the old file first, then the new one
        // from its start.
        let replaced = match tail.as_mut() {
            Some(current) => {
                current.read(path, &mut events, &mut corrupt)?;
                current.replaced(path)
            }
            None => true,
        };
        if replaced {
            tail = Tail::open(path);
            if let Some(current) = tail.as_mut() {
                current.read(path, &mut events, &mut corrupt)?;
            }
        }
        for bad in &corrupt {
            eprintln!("agent-sandbox: warning: {bad} (skipped)");
        }
        for event in events.iter().filter(|event| filter.matches(event)) {
            if printer.event(event).is_err() {
                return Ok(());
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The reason comes last and is never padded: it is the long one (what was refused and
/// the way to allow it).
const COLUMNS: [&str; 8] = ["TIME", "SESSION", "AGENT", "OPERATION", "TARGET", "RESULT", "POLICY", "REASON"];
/// Longer targets are not cut, they only stop widening the column.
const MAX_TARGET_WIDTH: usize = 60;

struct Printer<'a> {
    out: std::io::StdoutLock<'a>,
    json: bool,
    colour: bool,
    widths: [usize; 8],
    /// Whether a line sent from inside a sandbox was shown (the footnote says what `*` means).
    from_sandbox: bool,
}

impl Printer<'_> {
    fn header(&mut self) -> std::io::Result<()> {
        if self.json {
            return Ok(());
        }
        let line = pad(&COLUMNS.map(str::to_owned), &self.widths, None);
        writeln!(self.out, "{line}")
    }

    fn event(&mut self, event: &Event) -> std::io::Result<()> {
        if self.json {
            return self.out.write_all(event.to_line().as_bytes()).and_then(|()| self.out.flush());
        }
        let mut cells = cells(event);
        if event.source == "sandbox" {
            cells[6].push('*');
            self.from_sandbox = true;
        }
        // The result in red on a terminal, unless NO_COLOR says otherwise.
        let highlight = (self.colour && event.is_refusal()).then_some(5);
        let line = pad(&cells, &self.widths, highlight);
        writeln!(self.out, "{line}").and_then(|()| self.out.flush())
    }
}

/// An event's table cells, with control characters escaped: a line sent from inside a
/// sandbox must not reach the terminal as escape sequences.
fn cells(event: &Event) -> [String; 8] {
    let session = if event.session.is_empty() { "-" } else { event.session.as_str() };
    let reason = event.reason.as_deref().unwrap_or("");
    [&event.timestamp, session, &event.agent, &event.operation, &event.target, &event.result, &event.policy, reason]
        .map(util::one_line)
}

fn widths(events: &[&Event]) -> [usize; 8] {
    let mut widths = COLUMNS.map(str::len);
    for event in events {
        for (width, cell) in widths.iter_mut().zip(cells(event)) {
            *width = (*width).max(cell.chars().count());
        }
    }
    widths[4] = widths[4].min(MAX_TARGET_WIDTH);
    widths
}

fn pad(cells: &[String; 8], widths: &[usize; 8], highlight: Option<usize>) -> String {
    let mut line = String::new();
    for (index, (cell, width)) in cells.iter().zip(widths).enumerate() {
        match highlight == Some(index) {
            true => line.push_str(&format!("\x1b[31m{cell}\x1b[0m")),
            false => line.push_str(cell),
        }
        if index + 1 < cells.len() {
            line.push_str(&" ".repeat(width.saturating_sub(cell.chars().count()) + 2));
        }
    }
    // No reason: no padding left dangling after the policy.
    line.truncate(line.trim_end().len());
    line
}
