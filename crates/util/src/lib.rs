//! Small helpers every other crate needs once: shell quoting, a stable hash, UTC
//! timestamps, the user's home from the password database, atomic writes, and reading a
//! file that an agent may have replaced by something else (a FIFO, a device, a symlink)
//! without ever blocking on it.

pub mod dirs;
pub mod fs;
pub mod fuzzing;
pub mod mounts;
pub mod refusal;
pub mod splice;
pub mod users;

use std::{ffi::OsString, path::PathBuf};

/// `text` as one POSIX shell word: unchanged when it has only characters no shell treats
/// specially, else single-quoted.
pub fn shell_word(text: &str) -> String {
    let safe = !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if safe {
        text.to_owned()
    } else {
        single_quoted(text)
    }
}

/// `text` single-quoted, always (for generated scripts whose lines are compared whole).
pub fn single_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `argv` as one shell command line (for `--dry-run`, `--debug` and `show-run` output).
pub fn shell_line(argv: &[OsString]) -> String {
    argv.iter().map(|arg| shell_word(&arg.to_string_lossy())).collect::<Vec<_>>().join(" ")
}

/// Prints a line on stderr and never panics: after a terminal hangup stderr fails with
/// `EIO`, and `eprintln!` would panic half-way through an exit check. Control
/// characters other than newline and tab, and the Unicode ones that reorder or hide text
/// (bidi overrides and isolates, line and paragraph separators), are escaped: what it
/// prints often holds names the agent chose (a path moved aside, a refused host), which
/// must not drive the user's terminal or disguise the warning.
pub fn say(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{}", terminal_safe(line));
}

/// `text` with the characters [`say`] escapes written as `\u{…}` escapes.
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
    };
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars().map(|c| if unsafe_char(c) { c.escape_unicode().to_string() } else { c.to_string() }).collect(),
    )
}

/// Another process's output on its way to a terminal, through [`terminal_safe`] line by
/// line: a chunk that ends inside a line (or inside a character) waits for the rest, so
/// an escape sequence split between chunks is escaped whole. A line longer than
/// [`TerminalSafeLines::LONGEST`] goes out in parts.
#[derive(Debug, Default)]
pub struct TerminalSafeLines {
    pending: Vec<u8>,
}

impl TerminalSafeLines {
    pub const LONGEST: usize = 64 * 1024;

    /// What of `bytes` (after what came before) can be shown now.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let end = match self.pending.iter().rposition(|b| *b == b'\n') {
            Some(newline) => newline + 1,
            None if self.pending.len() > Self::LONGEST => self.pending.len(),
            None => return String::new(),
        };
        let lines: Vec<u8> = self.pending.drain(..end).collect();
        terminal_safe(&String::from_utf8_lossy(&lines)).into_owned()
    }

    /// The rest, once the output has ended.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        terminal_safe(&String::from_utf8_lossy(&rest)).into_owned()
    }
}

/// `text` on one line: every control character (newline and tab included) escaped as
/// Rust writes it (`\n`, `\u{1b}`), for a name the agent chose shown in a table or a
/// list line.
pub fn one_line(text: &str) -> String {
    text.chars().flat_map(|c| if c.is_control() { c.escape_default().collect() } else { vec![c] }).collect()
}

/// [`say`] with `format!` arguments.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::say(&format!($($arg)*))
    };
}

/// FNV-1a, 64 bits: stable across runs and builds (unlike std's hasher), for file names
/// derived from paths and for cache fingerprints. Not a cryptographic hash.
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    pub fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    pub fn finish(self) -> u64 {
        self.0
    }
}

/// Identifies this start of a container: PID 1's start time (a restart gives a new PID
/// namespace and a new PID 1), so that a record from an earlier start is not trusted.
pub fn boot_id() -> String {
    let stat = std::fs::read_to_string("/proc/1/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
    // Fields after the name start at field 3 (state); starttime is field 22.
    after_name.split_whitespace().nth(19).unwrap_or("unknown").to_owned()
}

/// FNV-1a of `bytes` (see [`Fnv1a`]).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash = Fnv1a::default();
    hash.write(bytes);
    hash.finish()
}

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SSZ`, or with `millis` as
/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn format_utc(secs: u64, millis: Option<u32>) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let fraction = millis.map(|millis| format!(".{millis:03}")).unwrap_or_default();
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}{fraction}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// The inverse of [`format_utc`] for what people type: `YYYY-MM-DD`, or that followed by
/// `T` or a space and `HH:MM` or `HH:MM:SS`, optionally ending in `Z` (always UTC);
/// seconds since the epoch, `None` for anything else.
pub fn parse_utc(text: &str) -> Option<u64> {
    let text = text.strip_suffix('Z').unwrap_or(text);
    let (date, time) = match text.split_once(['T', ' ']) {
        Some((date, time)) => (date, Some(time)),
        None => (text, None),
    };
    let number = |part: &str, len: usize| -> Option<i64> {
        (part.len() == len && part.bytes().all(|b| b.is_ascii_digit())).then(|| part.parse().ok()).flatten()
    };
    let mut date_parts = date.split('-');
    let (year, month, day) =
        (number(date_parts.next()?, 4)?, number(date_parts.next()?, 2)?, number(date_parts.next()?, 2)?);
    if date_parts.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let (mut hour, mut minute, mut second) = (0, 0, 0);
    if let Some(time) = time {
        let mut time_parts = time.split(':');
        hour = number(time_parts.next()?, 2)?;
        minute = number(time_parts.next()?, 2)?;
        if let Some(part) = time_parts.next() {
            second = number(part, 2)?;
        }
        if time_parts.next().is_some() || hour > 23 || minute > 59 || second > 60 {
            return None;
        }
    }
    // Howard Hinnant's days_from_civil.
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second;
    u64::try_from(secs).ok()
}

/// Now, as [`format_utc`] without milliseconds.
pub fn now_utc() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format_utc(secs, None)
}

/// `work` on a thread of its own, waited for at most `limit`: `None` when it does not
/// finish in time (or panics). For reads of files an agent may have replaced with a FIFO
/// where the reader (gix, git) cannot be given `O_NONBLOCK`: the caller goes on, failing
/// closed, and the stuck thread ends with the process.
pub fn within<T: Send + 'static>(limit: std::time::Duration, work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .spawn(move || {
            let _ = send.send(work());
        })
        .ok()?;
    receive.recv_timeout(limit).ok()
}

/// Waits for `child` until `deadline`, looking every `poll`: its status, or `None` when
/// it still runs then (the caller ends it, and its group).
pub fn wait_until(
    child: &mut std::process::Child,
    deadline: std::time::Instant,
    poll: std::time::Duration,
) -> std::io::Result<Option<std::process::ExitStatus>> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if std::time::Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(poll);
    }
}

/// This user's home directory from `/etc/passwd` (not `$HOME`, which the agent sets).
pub fn passwd_home() -> Option<PathBuf> {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() }.to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() > 5 && fields[2] == uid).then(|| PathBuf::from(fields[5]))
    })
}

/// An integer `SOL_SOCKET` option of `fd` (`SO_TYPE`, `SO_ACCEPTCONN`, …); `None` when
/// `fd` is no socket or has no such option.
pub fn socket_option(fd: std::os::fd::RawFd, option: libc::c_int) -> Option<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into a c_int this frame owns.
    let ok =
        unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, option, (&mut value as *mut libc::c_int).cast(), &mut len) };
    (ok == 0).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_escapes_every_control_character() {
        assert_eq!(one_line("a\nb\tc\u{1b}[2Ad é"), "a\\nb\\tc\\u{1b}[2Ad é");
    }

    /// An OSC 52 clipboard write and a window title, split across chunks anywhere, come
    /// out escaped whole; plain lines come out as they were.
    #[test]
    fn terminal_safe_lines_escape_sequences_split_across_chunks() {
        let output = "check: ok\n\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}]0;pwned\u{7}failed\nlast";
        let expected = "check: ok\n\\u{1b}]52;c;ZXZpbA==\\u{7}\\u{1b}]0;pwned\\u{7}failed\nlast";
        for split in 0..output.len() {
            let mut lines = TerminalSafeLines::default();
            let mut shown = lines.push(&output.as_bytes()[..split]);
            shown += &lines.push(&output.as_bytes()[split..]);
            shown += &lines.finish();
            assert_eq!(shown, expected, "split at {split}");
            assert!(!shown.contains('\u{1b}') && !shown.contains('\u{7}'));
        }
    }

    #[test]
    fn terminal_safe_escapes_what_could_drive_or_disguise_a_terminal() {
        assert_eq!(terminal_safe("plain path/.envrc\n\tnext"), "plain path/.envrc\n\tnext");
        assert_eq!(terminal_safe("x\u{1b}[2Ay\u{7}"), "x\\u{1b}[2Ay\\u{7}");
        assert_eq!(terminal_safe("a\u{202e}b\u{2028}c\rd"), "a\\u{202e}b\\u{2028}c\\u{d}d");
    }

    #[test]
    fn within_gives_up_on_work_that_does_not_finish() {
        let short = std::time::Duration::from_millis(50);
        assert_eq!(within(std::time::Duration::from_secs(5), || 7), Some(7));
        assert_eq!(within(short, || std::thread::sleep(std::time::Duration::from_secs(3600))), None);
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(format_utc(0, None), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(1_769_596_200, None), "2026-01-28T10:30:00Z");
        assert_eq!(format_utc(951_782_400, Some(7)), "2000-02-29T00:00:00.007Z");
    }

    #[test]
    fn typed_times_parse_back_to_what_format_utc_prints() {
        for secs in [0, 1_769_596_200, 951_782_400, 4_102_444_799] {
            assert_eq!(parse_utc(&format_utc(secs, None)), Some(secs));
        }
        assert_eq!(parse_utc("2026-01-28"), Some(1_769_558_400));
        assert_eq!(parse_utc("2026-01-28 10:30"), Some(1_769_596_200));
        assert_eq!(parse_utc("2026-01-28T10:30:00"), Some(1_769_596_200));
        for bad in ["", "2026-1-28", "2026-13-01", "2026-01-28T25:00", "yesterday", "2026-01-28T10", "2026-01-28-01"] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
    }

    #[test]
    fn shell_words_quote_only_what_needs_it() {
        let argv: Vec<OsString> = ["bwrap", "--bind", "/a b", "it's", ""].iter().map(OsString::from).collect();
        assert_eq!(shell_line(&argv), r#"bwrap --bind '/a b' 'it'\''s' ''"#);
    }

    #[test]
    fn fnv1a_is_the_published_function() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
