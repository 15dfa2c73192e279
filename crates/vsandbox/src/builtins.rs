//! The 19 built-in commands: `pwd cd ls cat head tail wc grep touch cp mv rm mkdir find
//! echo env export clear help`. Each takes its arguments (command name excluded) and an
//! [`Invocation`] and writes into an [`Out`]; errors are `cmd: message` lines on stderr
//! with exit code 1, and one bad operand does not stop the others, as in coreutils.
//! `grep` takes POSIX basic or extended regular expressions (GNU flavour) run by the
//! `regex` crate, whose automata cannot backtrack catastrophically; `find -name` and
//! `grep --include` take shell wildcards (crate::glob).

use std::{
    borrow::Cow,
    collections::BTreeMap,
    sync::atomic::{AtomicBool, Ordering},
    time::Instant,
};

use crate::{
    fs::{self, FileSystem, FsError, Metadata},
    glob, CommandInfo,
};

/// Names, one-line descriptions and usage of the built-ins, in `help` order.
pub const BUILTINS: &[(&str, &str, &str)] = &[
    ("pwd", "print the working directory", "pwd"),
    ("cd", "change the working directory", "cd [DIR]   (default: $HOME)"),
    ("ls", "list directory contents", "ls [-a] [-l] [PATH...]   (-l: type, size in bytes or entries, name)"),
    ("cat", "print files", "cat [FILE...]   (no FILE or -: the piped input)"),
    ("head", "print the first lines", "head [-n N | -N] [FILE...]   (default 10)"),
    ("tail", "print the last lines", "tail [-n N | -n +N | -N] [FILE...]   (default 10; +N: from line N)"),
    ("wc", "count lines, words and bytes", "wc [-l] [-w] [-c] [FILE...]"),
    (
        "grep",
        "print lines matching a pattern",
        "grep [-E | -F] [-i] [-v] [-w] [-o] [-n] [-c] [-l] [-h | -H] [-r] [--include=GLOB] [--exclude=GLOB] \
         [-e PATTERN]... PATTERN [PATH...]   (basic regular expressions; -E extended, -F fixed strings)",
    ),
    ("touch", "create empty files", "touch FILE..."),
    ("cp", "copy files and directories", "cp [-r] SOURCE... DEST"),
    ("mv", "move or rename", "mv SOURCE... DEST"),
    ("rm", "remove files and directories", "rm [-r] [-f] PATH..."),
    ("mkdir", "create directories", "mkdir [-p] DIR..."),
    ("find", "list files under directories", "find [PATH...] [-name PATTERN] [-type f|d] [-maxdepth N]"),
    ("echo", "print arguments", "echo [-n] [-e] [ARG...]"),
    ("env", "print the environment", "env"),
    ("export", "set environment variables", "export [NAME=VALUE | NAME]..."),
    ("clear", "clear the terminal", "clear"),
    ("help", "list commands or show one's usage", "help [COMMAND]"),
];

/// Everything a built-in may touch.
pub(crate) struct Invocation<'a> {
    pub fs: &'a mut FileSystem,
    pub cwd: &'a mut String,
    pub env: &'a mut BTreeMap<String, String>,
    pub stdin: &'a [u8],
    pub deadline: Instant,
    pub interrupt: Option<&'a AtomicBool>,
    /// The most a command may print, in bytes (the total size limit).
    pub output_limit: usize,
    /// The most the environment may hold, in bytes (the file size limit).
    pub env_limit: usize,
    pub commands: &'a [CommandInfo],
}

/// A built-in's stdout, stderr and exit code being built.
pub(crate) struct Out {
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub code: i32,
    limit: usize,
}

/// Why a built-in stopped early: its output limit or the deadline. The message is in
/// `stderr` already.
pub(crate) struct Abort;

impl Out {
    pub fn new(limit: usize) -> Out {
        Out { stdout: Vec::new(), stderr: String::new(), code: 0, limit }
    }

    pub fn write(&mut self, bytes: &[u8]) -> Result<(), Abort> {
        if self.stdout.len() + bytes.len() > self.limit {
            self.stderr.push_str(&format!(
                "output stopped: more than {} bytes (the output limit; write less, e.g. with head)\n",
                self.limit
            ));
            self.code = 1;
            return Err(Abort);
        }
        self.stdout.extend_from_slice(bytes);
        Ok(())
    }

    /// As [`Out::write`], moving `bytes` in when nothing was written yet.
    pub fn write_owned(&mut self, bytes: Vec<u8>) -> Result<(), Abort> {
        if self.stdout.is_empty() && bytes.len() <= self.limit {
            self.stdout = bytes;
            return Ok(());
        }
        self.write(&bytes)
    }

    pub fn line(&mut self, text: &str) -> Result<(), Abort> {
        self.write(text.as_bytes())?;
        self.write(b"\n")
    }

    /// One error line; the command goes on with its other operands.
    pub fn fail(&mut self, command: &str, message: impl std::fmt::Display) {
        self.stderr.push_str(&format!("{command}: {message}\n"));
        self.code = 1;
    }
}

impl Invocation<'_> {
    fn resolve(&self, path: &str) -> String {
        fs::resolve(self.cwd, path)
    }

    fn check_deadline(&self, out: &mut Out) -> Result<(), Abort> {
        if self.interrupt.is_some_and(|flag| flag.load(Ordering::Relaxed)) {
            out.stderr.push_str("interrupted\n");
            out.code = 130;
            return Err(Abort);
        }
        if Instant::now() >= self.deadline {
            out.stderr.push_str("timed out\n");
            out.code = 1;
            return Err(Abort);
        }
        Ok(())
    }
}

/// Runs built-in `name`; `None` when there is no such built-in.
pub(crate) fn run(name: &str, args: &[String], inv: &mut Invocation<'_>) -> Option<Out> {
    let mut out = Out::new(inv.output_limit);
    let res = match name {
        "pwd" => pwd(args, inv, &mut out),
        "cd" => cd(args, inv, &mut out),
        "ls" => ls(args, inv, &mut out),
        "cat" => cat(args, inv, &mut out),
        "head" => head_tail(true, args, inv, &mut out),
        "tail" => head_tail(false, args, inv, &mut out),
        "wc" => wc(args, inv, &mut out),
        "grep" => grep(args, inv, &mut out),
        "touch" => touch(args, inv, &mut out),
        "cp" => cp(args, inv, &mut out),
        "mv" => mv(args, inv, &mut out),
        "rm" => rm(args, inv, &mut out),
        "mkdir" => mkdir(args, inv, &mut out),
        "find" => find(args, inv, &mut out),
        "echo" => echo(args, &mut out),
        "env" => env(args, inv, &mut out),
        "export" => export(args, inv, &mut out),
        "clear" => out.write(b"\x1b[H\x1b[2J"),
        "help" => help(args, inv, &mut out),
        _ => return None,
    };
    if res.is_err() && out.code == 0 {
        out.code = 1;
    }
    Some(out)
}

/// Splits `-abc` style flags (each a char in `known`) from operands; `--` ends flags.
/// Unknown flags are reported and make the command fail.
fn flags(command: &str, args: &[String], known: &str, out: &mut Out) -> Result<(Vec<char>, Vec<String>), Abort> {
    let mut set = Vec::new();
    let mut operands = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--" {
            operands.extend(iter.cloned());
            break;
        }
        match arg.strip_prefix('-') {
            Some(letters) if !letters.is_empty() => {
                for letter in letters.chars() {
                    if !known.contains(letter) {
                        out.fail(command, format!("unknown option -{letter} (see: help {command})"));
                        return Err(Abort);
                    }
                    set.push(letter);
                }
            }
            _ => operands.push(arg.clone()),
        }
    }
    Ok((set, operands))
}

fn pwd(_args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    out.line(inv.cwd)
}

fn cd(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    let target = match args {
        [] => inv.env.get("HOME").cloned().unwrap_or_else(|| String::from("/")),
        [dir] => dir.clone(),
        _ => {
            out.fail("cd", "too many arguments");
            return Ok(());
        }
    };
    let path = inv.resolve(&target);
    match inv.fs.metadata(&path) {
        Ok(Metadata::Dir { .. }) => {
            // Copied into the old strings' room (cd runs often).
            inv.cwd.clone_from(&path);
            match inv.env.get_mut("PWD") {
                Some(pwd) => pwd.clone_from(&path),
                None => {
                    inv.env.insert(String::from("PWD"), path);
                }
            }
        }
        Ok(Metadata::File { .. }) => out.fail("cd", FsError::NotADirectory(path)),
        Err(err) => out.fail("cd", err),
    }
    Ok(())
}

fn ls(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    fn entry_line(name: &str, meta: Metadata, long: bool) -> Cow<'_, str> {
        match (long, meta) {
            (false, _) => Cow::Borrowed(name),
            (true, Metadata::File { size }) => Cow::Owned(format!("- {size:>10} {name}")),
            (true, Metadata::Dir { entries }) => Cow::Owned(format!("d {entries:>10} {name}")),
        }
    }

    let (set, mut operands) = flags("ls", args, "aAl1", out)?;
    let all = set.contains(&'a') || set.contains(&'A');
    let long = set.contains(&'l');
    if operands.is_empty() {
        operands.push(String::from("."));
    }
    let many = operands.len() > 1;
    let mut first = true;
    for operand in &operands {
        let path = inv.resolve(operand);
        match inv.fs.metadata(&path) {
            Err(err) => out.fail("ls", err),
            Ok(meta @ Metadata::File { .. }) => {
                out.line(&entry_line(operand, meta, long))?;
                first = false;
            }
            Ok(Metadata::Dir { .. }) => {
                let entries = match inv.fs.read_dir(&path) {
                    Ok(entries) => entries,
                    Err(err) => {
                        out.fail("ls", err);
                        continue;
                    }
                };
                if many {
                    if !first {
                        out.write(b"\n")?;
                    }
                    out.line(&format!("{operand}:"))?;
                }
                first = false;
                for (name, meta) in entries {
                    if all || !name.starts_with('.') {
                        out.line(&entry_line(&name, meta, long))?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// The contents of each operand (`-` or none: stdin), or an error line for it.
fn inputs(command: &str, operands: &[String], inv: &Invocation<'_>, out: &mut Out) -> Vec<(String, Vec<u8>)> {
    if operands.is_empty() {
        return vec![(String::from("-"), inv.stdin.to_vec())];
    }
    let mut found = Vec::new();
    for operand in operands {
        if operand == "-" {
            found.push((operand.clone(), inv.stdin.to_vec()));
            continue;
        }
        match inv.fs.read(&inv.resolve(operand)) {
            Ok(data) => found.push((operand.clone(), data.into_owned())),
            Err(err) => out.fail(command, err),
        }
    }
    found
}

fn cat(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    let (_, operands) = flags("cat", args, "", out)?;
    if operands.is_empty() {
        return out.write(inv.stdin);
    }
    for operand in &operands {
        inv.check_deadline(out)?;
        if operand == "-" {
            out.write(inv.stdin)?;
            continue;
        }
        match inv.fs.read(&inv.resolve(operand)) {
            Ok(data) => {
                if out.stdout.len() + data.len() > out.limit {
                    return out.write(&data);
                }
                out.stdout.extend_from_slice(&data);
            }
            Err(err) => out.fail("cat", err),
        }
    }
    Ok(())
}

/// Lines with their newline (the last one may have none).
fn lines(data: &[u8]) -> Vec<&[u8]> {
    data.split_inclusive(|&b| b == b'\n').collect()
}

fn head_tail(head: bool, args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    let command = if head { "head" } else { "tail" };
    let mut count: usize = 10;
    let mut from_start = false;
    let mut operands = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let value = if arg == "-n" {
            match iter.next() {
                Some(value) => value.as_str(),
                None => {
                    out.fail(command, "option -n needs a number");
                    return Ok(());
                }
            }
        } else if let Some(value) = arg.strip_prefix("-n") {
            value
        } else if arg.len() > 1 && arg.starts_with('-') && arg[1..].bytes().all(|b| b.is_ascii_digit()) {
            &arg[1..]
        } else if arg.starts_with('-') && arg != "-" {
            out.fail(command, format!("unknown option {arg} (see: help {command})"));
            return Ok(());
        } else {
            operands.push(arg.clone());
            continue;
        };
        let (plus, digits) = match value.strip_prefix('+') {
            Some(digits) if !head => (true, digits),
            _ => (false, value),
        };
        match digits.parse() {
            Ok(parsed) => {
                count = parsed;
                from_start = plus;
            }
            Err(_) => {
                out.fail(command, format!("invalid number of lines: {value:?}"));
                return Ok(());
            }
        }
    }
    let files = inputs(command, &operands, inv, out);
    let many = files.len() > 1;
    for (idx, (name, data)) in files.iter().enumerate() {
        if many {
            out.write(format!("{}==> {name} <==\n", if idx > 0 { "\n" } else { "" }).as_bytes())?;
        }
        let all = lines(data);
        let chosen: &[&[u8]] = if head {
            &all[..count.min(all.len())]
        } else if from_start {
            &all[count.saturating_sub(1).min(all.len())..]
        } else {
            &all[all.len().saturating_sub(count)..]
        };
        for line in chosen {
            out.write(line)?;
        }
    }
    Ok(())
}

fn wc(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    let (mut set, operands) = flags("wc", args, "lwc", out)?;
    if set.is_empty() {
        set = vec!['l', 'w', 'c'];
    }
    let files = inputs("wc", &operands, inv, out);
    let mut totals = [0usize; 3];
    let counts_line = |counts: [usize; 3]| -> String {
        let mut fields = Vec::new();
        for (letter, count) in ['l', 'w', 'c'].iter().zip(counts) {
            if set.contains(letter) {
                fields.push(count.to_string());
            }
        }
        fields.join(" ")
    };
    for (name, data) in &files {
        let counts = [
            data.iter().filter(|&&b| b == b'\n').count(),
            data.split(|b| b.is_ascii_whitespace()).filter(|word| !word.is_empty()).count(),
            data.len(),
        ];
        for (total, count) in totals.iter_mut().zip(counts) {
            *total += count;
        }
        let text = counts_line(counts);
        match operands.is_empty() {
            true => out.line(&text)?,
            false => out.line(&format!("{text} {name}"))?,
        }
    }
    if files.len() > 1 {
        out.line(&format!("{} total", counts_line(totals)))?;
    }
    Ok(())
}

/// What `grep`'s command line asks for.
struct GrepArgs {
    set: Vec<char>,
    patterns: Vec<String>,
    includes: Vec<String>,
    excludes: Vec<String>,
    operands: Vec<String>,
}

const GREP_USAGE: &str = "usage: grep [-E | -F] [-i] [-v] [-w] [-o] [-n] [-c] [-l] [-r] [--include=GLOB] \
                          [--exclude=GLOB] [-e PATTERN]... PATTERN [PATH...]";

/// GNU-style options, permuted with operands: letter clusters (`-rn`), `-e PATTERN` (or
/// `-ePATTERN`) repeatable, `--include=GLOB`/`--exclude=GLOB` (or with the glob as the
/// next argument), `--` ending options.
fn grep_args(args: &[String], out: &mut Out) -> Result<GrepArgs, Abort> {
    let mut parsed = GrepArgs {
        set: Vec::new(),
        patterns: Vec::new(),
        includes: Vec::new(),
        excludes: Vec::new(),
        operands: Vec::new(),
    };
    let mut explicit = false;
    let mut iter = args.iter();
    let missing = |what: &str, out: &mut Out| {
        out.fail("grep", format!("option {what} needs an argument ({GREP_USAGE})"));
        Abort
    };
    while let Some(arg) = iter.next() {
        if arg == "--" {
            parsed.operands.extend(iter.cloned());
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (long, None),
            };
            let list = match name {
                "include" => &mut parsed.includes,
                "exclude" => &mut parsed.excludes,
                _ => {
                    out.fail("grep", format!("unknown option --{name} (see: help grep)"));
                    return Err(Abort);
                }
            };
            match value.or_else(|| iter.next().cloned()) {
                Some(value) => list.push(value),
                None => return Err(missing(&format!("--{name}"), out)),
            }
            continue;
        }
        let Some(letters) = arg.strip_prefix('-').filter(|letters| !letters.is_empty()) else {
            parsed.operands.push(arg.clone());
            continue;
        };
        for (idx, letter) in letters.char_indices() {
            if letter == 'e' {
                let rest = &letters[idx + 1..];
                let pattern = if rest.is_empty() { iter.next().cloned() } else { Some(rest.to_owned()) };
                match pattern {
                    Some(pattern) => parsed.patterns.push(pattern),
                    None => return Err(missing("-e", out)),
                }
                explicit = true;
                break;
            }
            if !"ivnclrRFEGHhwo".contains(letter) {
                out.fail("grep", format!("unknown option -{letter} (see: help grep)"));
                return Err(Abort);
            }
            parsed.set.push(letter);
        }
    }
    if !explicit {
        if parsed.operands.is_empty() {
            out.fail("grep", GREP_USAGE);
            return Err(Abort);
        }
        parsed.patterns.push(parsed.operands.remove(0));
    }
    Ok(parsed)
}

/// The most memory one compiled `grep` pattern may take.
const REGEX_SIZE_LIMIT: usize = 8 * 1024 * 1024;

/// The patterns as one regex (crate `regex`: finite automata, so matching is linear in
/// the input whatever the pattern; no backreferences).
fn grep_regex(set: &[char], patterns: &[String]) -> Result<regex::bytes::Regex, String> {
    let fixed = set.contains(&'F');
    let extended = set.contains(&'E');
    let mut alternatives = Vec::new();
    for pattern in patterns {
        let translated = if fixed { regex::escape(pattern) } else { posix_to_regex(pattern, extended)? };
        alternatives.push(format!("(?:{translated})"));
    }
    let mut joined = alternatives.join("|");
    if set.contains(&'w') {
        joined = format!(r"\b(?:{joined})\b");
    }
    regex::bytes::RegexBuilder::new(&joined)
        .case_insensitive(set.contains(&'i'))
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|err| match err {
            regex::Error::CompiledTooBig(limit) => {
                format!("the pattern compiles to more than {limit} bytes; simplify it")
            }
            err => format!("invalid pattern: {err}"),
        })
}

/// A POSIX basic (`extended`: extended) regular expression, GNU flavour, in the syntax
/// of the `regex` crate. BRE: `\(`, `\)`, `\{`, `\}`, `\|`, `\+`, `\?` are operators and
/// the bare characters literals; ERE the other way round. Both: `\<`/`\>` are word
/// boundaries, `\w \W \s \S \b \B` pass through, any other `\c` is a literal `c`, and
/// bracket expressions take `[:class:]`s with `\` literal inside them.
pub fn posix_to_regex(pattern: &str, extended: bool) -> Result<String, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() * 2);
    let literal = |ch: char, out: &mut String| out.push_str(&regex::escape(&ch.to_string()));
    let mut i = 0;
    // Where a `*` is literal: at the start, after `(` or `|` (and `^` there).
    let mut at_start = true;
    while i < chars.len() {
        let ch = chars[i];
        let was_start = at_start;
        at_start = false;
        match ch {
            '\\' => {
                let Some(&next) = chars.get(i + 1) else {
                    return Err(String::from("trailing backslash (\\)"));
                };
                i += 2;
                match next {
                    '{' if !extended && bre_interval(&chars[i..]).is_some() => {
                        let (interval, len) = bre_interval(&chars[i..]).expect("checked just above");
                        out.push_str(&interval);
                        i += len;
                    }
                    '(' | ')' | '|' | '+' | '?' if !extended => {
                        out.push(next);
                        at_start = matches!(next, '(' | '|');
                    }
                    '<' | '>' => out.push_str(r"\b"),
                    'w' | 'W' | 's' | 'S' | 'b' | 'B' => {
                        out.push('\\');
                        out.push(next);
                    }
                    other => literal(other, &mut out),
                }
                continue;
            }
            '[' => {
                i = bracket(&chars, i, &mut out)?;
                continue;
            }
            '*' if was_start => literal('*', &mut out),
            '^' => {
                out.push('^');
                at_start = was_start;
            }
            '(' | '|' if extended => {
                out.push(ch);
                at_start = true;
            }
            ')' | '+' | '?' if extended => out.push(ch),
            '{' if extended && interval_follows(&chars[i + 1..]) => {
                let close = chars[i..].iter().position(|&c| c == '}').map_or(chars.len(), |pos| i + pos);
                out.extend(&chars[i..=close]);
                i = close + 1;
                continue;
            }
            '(' | ')' | '{' | '}' | '|' | '+' | '?' => literal(ch, &mut out),
            '.' | '*' | '$' => out.push(ch),
            other => literal(other, &mut out),
        }
        i += 1;
    }
    Ok(out)
}

/// The BRE interval `N}`, `N,}` or `N,M}` with `\}` after a `\{` at the start of
/// `rest`: its regex form and how many characters it takes.
fn bre_interval(rest: &[char]) -> Option<(String, usize)> {
    let close = rest.windows(2).position(|pair| pair == ['\\', '}'])?;
    let mut inner: Vec<char> = rest[..close].to_vec();
    inner.push('}');
    interval_follows(&inner).then(|| (format!("{{{}", inner.iter().collect::<String>()), close + 2))
}

/// Whether `rest` (after a `{`) is an interval such as `2}`, `2,}` or `2,5}`.
fn interval_follows(rest: &[char]) -> bool {
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    let after = &rest[digits..];
    match after.first() {
        Some('}') => digits > 0,
        Some(',') => {
            let more = after[1..].iter().take_while(|c| c.is_ascii_digit()).count();
            after.get(1 + more) == Some(&'}') && digits + more > 0
        }
        _ => false,
    }
}

/// Copies the bracket expression opening at `chars[open]` into `out`; the index after it.
fn bracket(chars: &[char], open: usize, out: &mut String) -> Result<usize, String> {
    let mut i = open + 1;
    out.push('[');
    if chars.get(i) == Some(&'^') {
        out.push('^');
        i += 1;
    }
    let first = i;
    loop {
        let Some(&ch) = chars.get(i) else {
            return Err(String::from("unmatched [ (write \\[ for a literal bracket)"));
        };
        match ch {
            ']' if i > first => {
                out.push(']');
                return Ok(i + 1);
            }
            '[' if matches!(chars.get(i + 1), Some(':' | '.' | '=')) => {
                let kind = chars[i + 1];
                let close = (i + 2..chars.len().saturating_sub(1))
                    .find(|&j| chars[j] == kind && chars[j + 1] == ']')
                    .ok_or_else(|| format!("unterminated [{kind} in a bracket expression"))?;
                let name: String = chars[i + 2..close].iter().collect();
                match kind {
                    ':' => out.push_str(&format!("[:{name}:]")),
                    _ => name.chars().for_each(|c| out.push_str(&regex::escape(&c.to_string()))),
                }
                i = close + 2;
            }
            '-' => {
                out.push('-');
                i += 1;
            }
            // Literal inside brackets in POSIX; special (escapes, nesting, set
            // operations) in the regex crate.
            '\\' | '[' | ']' | '&' | '~' | '^' => {
                out.push('\\');
                out.push(ch);
                i += 1;
            }
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
}

fn grep(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    let GrepArgs { set, patterns, includes, excludes, mut operands } = grep_args(args, out)?;
    let regex = match grep_regex(&set, &patterns) {
        Ok(regex) => regex,
        Err(message) => {
            out.fail("grep", message);
            return Ok(());
        }
    };
    let recursive = set.contains(&'r') || set.contains(&'R');
    let only_matching = set.contains(&'o');
    let implicit = operands.is_empty();
    if implicit && recursive {
        operands.push(String::from("."));
    }
    // (display name, content)
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    if operands.is_empty() {
        files.push((String::from("(standard input)"), inv.stdin.to_vec()));
    }
    for operand in &operands {
        let path = inv.resolve(operand);
        match inv.fs.metadata(&path) {
            Err(err) => out.fail("grep", err),
            Ok(Metadata::Dir { .. }) if !recursive => out.fail("grep", FsError::IsADirectory(path)),
            Ok(Metadata::Dir { .. }) => {
                let walked = match inv.fs.walk(&path) {
                    Ok(walked) => walked,
                    Err(err) => {
                        out.fail("grep", err);
                        continue;
                    }
                };
                for (found, meta) in walked {
                    let name = base_name(&found);
                    if meta.is_dir()
                        || excludes.iter().any(|glob| glob::matches(glob, name))
                        || !(includes.is_empty() || includes.iter().any(|glob| glob::matches(glob, name)))
                    {
                        continue;
                    }
                    let shown = display_path(operand, &path, &found, implicit);
                    if let Ok(data) = inv.fs.read(&found) {
                        files.push((shown, data.into_owned()));
                    }
                }
            }
            Ok(Metadata::File { .. }) => match inv.fs.read(&path) {
                Ok(data) => files.push((operand.clone(), data.into_owned())),
                Err(err) => out.fail("grep", err),
            },
        }
    }
    let with_names = (files.len() > 1 || recursive || set.contains(&'H')) && !set.contains(&'h');
    let mut any = false;
    for (name, data) in &files {
        inv.check_deadline(out)?;
        let mut matches = 0usize;
        for (idx, line) in lines(data).into_iter().enumerate() {
            let body = line.strip_suffix(b"\n").unwrap_or(line);
            if regex.is_match(body) == set.contains(&'v') {
                continue;
            }
            matches += 1;
            any = true;
            if set.contains(&'l') {
                break;
            }
            if set.contains(&'c') {
                continue;
            }
            let mut prefix = String::new();
            if with_names {
                prefix.push_str(name);
                prefix.push(':');
            }
            if set.contains(&'n') {
                prefix.push_str(&format!("{}:", idx + 1));
            }
            if !only_matching {
                out.write(prefix.as_bytes())?;
                out.write(body)?;
                out.write(b"\n")?;
                continue;
            }
            // -o: each non-empty match on a line of its own (none for -v, as in GNU grep).
            for found in regex.find_iter(body).filter(|found| !found.is_empty() && !set.contains(&'v')) {
                out.write(prefix.as_bytes())?;
                out.write(found.as_bytes())?;
                out.write(b"\n")?;
            }
        }
        if set.contains(&'l') && matches > 0 {
            out.line(name)?;
        } else if set.contains(&'c') {
            match with_names {
                true => out.line(&format!("{name}:{matches}"))?,
                false => out.line(&matches.to_string())?,
            }
        }
    }
    if !any && out.code == 0 {
        out.code = 1;
    }
    Ok(())
}

/// How `find` and `grep -r` show a path found under `operand` (resolved to `base`):
/// the operand as typed followed by the rest; with no operand typed, the rest alone.
fn display_path(operand: &str, base: &str, found: &str, implicit: bool) -> String {
    let rest = if base == "/" { &found[1..] } else { found[base.len()..].trim_start_matches('/') };
    if implicit {
        return rest.to_owned();
    }
    match (operand.trim_end_matches('/'), rest) {
        (_, "") => operand.to_owned(),
        ("", rest) => format!("/{rest}"),
        (prefix, rest) => format!("{prefix}/{rest}"),
    }
}

fn touch(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    let (_, operands) = flags("touch", args, "", out)?;
    if operands.is_empty() {
        out.fail("touch", "missing file operand");
    }
    for operand in &operands {
        let path = inv.resolve(operand);
        if inv.fs.exists(&path) {
            continue; // no timestamps to update
        }
        if let Err(err) = inv.fs.write(&path, b"", false) {
            out.fail("touch", err);
        }
    }
    Ok(())
}

/// The last component of a resolved path (`/` has none).
fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or("")
}

/// Sources and the destination of `cp`/`mv`: (source, target) pairs.
fn copy_targets(command: &str, operands: &[String], inv: &Invocation<'_>, out: &mut Out) -> Vec<(String, String)> {
    let Some((dest, sources)) = operands.split_last().filter(|(_, sources)| !sources.is_empty()) else {
        out.fail(command, "missing destination operand (usage: SOURCE... DEST)");
        return Vec::new();
    };
    let dest_path = inv.resolve(dest);
    let into_dir = inv.fs.is_dir(&dest_path);
    if sources.len() > 1 && !into_dir {
        out.fail(command, FsError::NotADirectory(dest_path));
        return Vec::new();
    }
    sources
        .iter()
        .map(|source| {
            let source_path = inv.resolve(source);
            let target = match into_dir {
                true => fs::resolve(&dest_path, base_name(&source_path)),
                false => dest_path.clone(),
            };
            (source_path, target)
        })
        .collect()
}

fn cp(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    let (set, operands) = flags("cp", args, "rRa", out)?;
    let recursive = !set.is_empty();
    for (source, target) in copy_targets("cp", &operands, inv, out) {
        inv.check_deadline(out)?;
        match inv.fs.metadata(&source) {
            Err(err) => out.fail("cp", err),
            Ok(Metadata::Dir { .. }) if !recursive => {
                out.fail("cp", format!("-r not specified; omitting directory {source}"))
            }
            Ok(Metadata::Dir { .. }) => {
                if target == source || target.starts_with(&format!("{}/", source.trim_end_matches('/'))) {
                    out.fail("cp", FsError::IntoItself(source));
                    continue;
                }
                if let Err(err) = copy_tree(inv, &source, &target, out) {
                    out.fail("cp", err);
                }
            }
            Ok(Metadata::File { .. }) if source == target => {
                out.fail("cp", format!("{source} and {target} are the same file"))
            }
            Ok(Metadata::File { .. }) => {
                let copied = inv
                    .fs
                    .read(&source)
                    .map(std::borrow::Cow::into_owned)
                    .and_then(|data| inv.fs.write(&target, &data, false));
                if let Err(err) = copied {
                    out.fail("cp", err);
                }
            }
        }
    }
    Ok(())
}

fn copy_tree(inv: &mut Invocation<'_>, source: &str, target: &str, out: &mut Out) -> Result<(), FsError> {
    for (found, meta) in inv.fs.walk(source)? {
        if inv.check_deadline(out).is_err() {
            return Ok(());
        }
        let dest = format!("{target}{}", &found[source.len()..]);
        match meta {
            Metadata::Dir { .. } => inv.fs.create_dir_all(&dest)?,
            Metadata::File { .. } => {
                let data = inv.fs.read(&found)?.into_owned();
                inv.fs.write(&dest, &data, false)?;
            }
        }
    }
    Ok(())
}

fn mv(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    let (_, operands) = flags("mv", args, "f", out)?;
    for (source, target) in copy_targets("mv", &operands, inv, out) {
        if let Err(err) = inv.fs.rename(&source, &target) {
            out.fail("mv", err);
        }
    }
    Ok(())
}

fn rm(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    let (set, operands) = flags("rm", args, "rRf", out)?;
    let recursive = set.contains(&'r') || set.contains(&'R');
    let force = set.contains(&'f');
    if operands.is_empty() && !force {
        out.fail("rm", "missing operand");
    }
    for operand in &operands {
        let path = inv.resolve(operand);
        if path == "/" {
            out.fail("rm", "refusing to remove /");
            continue;
        }
        if *inv.cwd == path || inv.cwd.starts_with(&format!("{path}/")) {
            out.fail("rm", format!("refusing to remove {path}: it holds the working directory (cd out of it first)"));
            continue;
        }
        let res = match inv.fs.metadata(&path) {
            Err(_) if force => Ok(()),
            Err(err) => Err(err),
            Ok(Metadata::Dir { .. }) if !recursive => Err(FsError::IsADirectory(path)),
            Ok(_) => inv.fs.remove(&path),
        };
        if let Err(err) = res {
            out.fail("rm", err);
        }
    }
    Ok(())
}

fn mkdir(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    let (set, operands) = flags("mkdir", args, "p", out)?;
    if operands.is_empty() {
        out.fail("mkdir", "missing operand");
    }
    for operand in &operands {
        let path = inv.resolve(operand);
        let res = if set.contains(&'p') { inv.fs.create_dir_all(&path) } else { inv.fs.create_dir(&path) };
        if let Err(err) = res {
            out.fail("mkdir", err);
        }
    }
    Ok(())
}

fn find(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    let mut roots = Vec::new();
    let mut name_pattern: Option<String> = None;
    let mut kind: Option<bool> = None; // Some(true): directories only
    let mut max_depth: Option<usize> = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let mut value = |what: &str| -> Result<String, Abort> {
            iter.next().cloned().ok_or_else(|| {
                out.fail("find", format!("missing argument to {what}"));
                Abort
            })
        };
        match arg.as_str() {
            "-name" => name_pattern = Some(value("-name")?),
            "-type" => match value("-type")?.as_str() {
                "f" => kind = Some(false),
                "d" => kind = Some(true),
                other => {
                    out.fail("find", format!("unknown -type {other} (use f or d)"));
                    return Ok(());
                }
            },
            "-maxdepth" => match value("-maxdepth")?.parse() {
                Ok(depth) => max_depth = Some(depth),
                Err(_) => {
                    out.fail("find", "-maxdepth needs a number");
                    return Ok(());
                }
            },
            other if other.starts_with('-') => {
                out.fail("find", format!("unknown expression {other} (see: help find)"));
                return Ok(());
            }
            other if name_pattern.is_none() && kind.is_none() && max_depth.is_none() => roots.push(other.to_owned()),
            other => {
                out.fail("find", format!("paths must precede the expression: {other}"));
                return Ok(());
            }
        }
    }
    if roots.is_empty() {
        roots.push(String::from("."));
    }
    for root in &roots {
        let base = inv.resolve(root);
        let walked = match inv.fs.walk(&base) {
            Ok(walked) => walked,
            Err(err) => {
                out.fail("find", err);
                continue;
            }
        };
        let base_depth = fs::components(&base).map_or(0, |c| c.len());
        for (found, meta) in walked {
            inv.check_deadline(out)?;
            let depth = fs::components(&found).map_or(0, |c| c.len()) - base_depth;
            if max_depth.is_some_and(|max| depth > max) {
                continue;
            }
            if kind.is_some_and(|dirs| dirs != meta.is_dir()) {
                continue;
            }
            if let Some(pattern) = &name_pattern {
                let name = if found == "/" { "/" } else { base_name(&found) };
                if !glob::matches(pattern, name) {
                    continue;
                }
            }
            out.line(&display_path(root, &base, &found, false))?;
        }
    }
    Ok(())
}

fn echo(args: &[String], out: &mut Out) -> Result<(), Abort> {
    let mut newline = true;
    let mut escapes = false;
    let mut rest = args;
    while let Some((first, tail)) = rest.split_first() {
        match first.as_str() {
            "-n" => newline = false,
            "-e" => escapes = true,
            "-ne" | "-en" => {
                newline = false;
                escapes = true;
            }
            _ => break,
        }
        rest = tail;
    }
    // Room for the newline too, so that the text can become the output as it is.
    let mut text = String::with_capacity(rest.iter().map(|arg| arg.len() + 1).sum());
    for (idx, arg) in rest.iter().enumerate() {
        if idx > 0 {
            text.push(' ');
        }
        text.push_str(arg);
    }
    let text = if escapes { unescape(&text) } else { text };
    out.write_owned(text.into_bytes())?;
    if newline {
        out.write(b"\n")?;
    }
    Ok(())
}

fn unescape(text: &str) -> String {
    let mut result = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(ch) = chars.next() {
        if ch != '\\' {
            result.push(ch);
            continue;
        }
        match chars.next() {
            Some('n') => result.push('\n'),
            Some('t') => result.push('\t'),
            Some('r') => result.push('\r'),
            Some('\\') => result.push('\\'),
            Some(other) => {
                result.push('\\');
                result.push(other);
            }
            None => result.push('\\'),
        }
    }
    result
}

fn env(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    if !args.is_empty() {
        out.fail("env", "only printing the environment is supported (set variables with export)");
        return Ok(());
    }
    let lines: Vec<String> = inv.env.iter().map(|(name, value)| format!("{name}={value}")).collect();
    for line in lines {
        out.line(&line)?;
    }
    Ok(())
}

/// Whether `name` is a shell variable name.
pub(crate) fn valid_name(name: &str) -> bool {
    name.starts_with(|c: char| c == '_' || c.is_ascii_alphabetic())
        && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Bytes the environment takes (names and values).
pub(crate) fn env_size(env: &BTreeMap<String, String>) -> usize {
    env.iter().map(|(name, value)| name.len() + value.len()).sum()
}

fn export(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    if args.is_empty() {
        let lines: Vec<String> = inv
            .env
            .iter()
            .map(|(name, value)| {
                let quoted = value.replace('\\', "\\\\").replace('"', "\\\"").replace('$', "\\$");
                format!("export {name}=\"{quoted}\"")
            })
            .collect();
        for line in lines {
            out.line(&line)?;
        }
        return Ok(());
    }
    for arg in args {
        let (name, value) = match arg.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (arg.as_str(), None),
        };
        if !valid_name(name) {
            out.fail("export", format!("{arg:?}: not a valid identifier"));
            continue;
        }
        let value = value.map(str::to_owned).or_else(|| inv.env.get(name).cloned()).unwrap_or_default();
        let old = inv.env.get(name).map_or(0, |old| name.len() + old.len());
        if env_size(inv.env) - old + name.len() + value.len() > inv.env_limit {
            out.fail("export", format!("{name}: the environment would exceed {} bytes", inv.env_limit));
            continue;
        }
        inv.env.insert(name.to_owned(), value);
    }
    Ok(())
}

fn help(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    match args {
        [] => {
            let width = inv.commands.iter().map(|info| info.name.len()).max().unwrap_or(0);
            let lines: Vec<String> =
                inv.commands.iter().map(|info| format!("{:<width$}  {}", info.name, info.description)).collect();
            for line in lines {
                out.line(&line)?;
            }
            Ok(())
        }
        [name] => {
            let info = inv.commands.iter().find(|info| info.name == *name || info.aliases.contains(name)).cloned();
            match info {
                Some(info) => out.line(&format!("{}: {}\nusage: {}", info.name, info.description, info.usage)),
                None => {
                    out.fail("help", format!("{name}: no such command (help lists them)"));
                    Ok(())
                }
            }
        }
        _ => {
            out.fail("help", "usage: help [COMMAND]");
            Ok(())
        }
    }
}
