//! The 19 built-in commands: `pwd cd ls cat head tail wc grep touch cp mv rm mkdir find
//! echo env export clear help`. Each takes its arguments (command name excluded) and an
//! [`Invocation`] and writes into an [`Out`]; errors are `cmd: message` lines on stderr
//! with exit code 1, and one bad operand does not stop the others, as in coreutils.
//! `grep` matches fixed strings; `find -name` takes `*`, `?` and `[...]` patterns.

use std::{collections::BTreeMap, time::Instant};

use crate::{
    fs::{self, FileSystem, FsError, Metadata},
    CommandInfo,
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
    ("grep", "print lines containing a fixed string", "grep [-i] [-v] [-n] [-c] [-l] [-r] PATTERN [PATH...]"),
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
    let cwd = inv.cwd.clone();
    out.line(&cwd)
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
            *inv.cwd = path.clone();
            inv.env.insert(String::from("PWD"), path);
        }
        Ok(Metadata::File { .. }) => out.fail("cd", FsError::NotADirectory(path)),
        Err(err) => out.fail("cd", err),
    }
    Ok(())
}

fn ls(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
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
        let entry_line = |name: &str, meta: Metadata| match (long, meta) {
            (false, _) => name.to_owned(),
            (true, Metadata::File { size }) => format!("- {size:>10} {name}"),
            (true, Metadata::Dir { entries }) => format!("d {entries:>10} {name}"),
        };
        match inv.fs.metadata(&path) {
            Err(err) => out.fail("ls", err),
            Ok(meta @ Metadata::File { .. }) => {
                out.line(&entry_line(operand, meta))?;
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
                        out.line(&entry_line(&name, meta))?;
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
            Ok(data) => found.push((operand.clone(), data.to_vec())),
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
                    return out.write(data);
                }
                out.stdout.extend_from_slice(data);
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

fn grep(args: &[String], inv: &mut Invocation<'_>, out: &mut Out) -> Result<(), Abort> {
    let (set, mut operands) = flags("grep", args, "ivnclrRFHh", out)?;
    if operands.is_empty() {
        out.fail("grep", "usage: grep [-i] [-v] [-n] [-c] [-l] [-r] PATTERN [PATH...]");
        return Ok(());
    }
    let pattern = operands.remove(0);
    let ignore_case = set.contains(&'i');
    let needle = if ignore_case { pattern.to_lowercase() } else { pattern.clone() };
    let recursive = set.contains(&'r') || set.contains(&'R');
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
                    if meta.is_dir() {
                        continue;
                    }
                    let shown = display_path(operand, &path, &found, implicit);
                    if let Ok(data) = inv.fs.read(&found) {
                        files.push((shown, data.to_vec()));
                    }
                }
            }
            Ok(Metadata::File { .. }) => match inv.fs.read(&path) {
                Ok(data) => files.push((operand.clone(), data.to_vec())),
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
            let text = String::from_utf8_lossy(body);
            let hit = if ignore_case { text.to_lowercase().contains(&needle) } else { text.contains(&needle) };
            if hit == set.contains(&'v') {
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
            out.write(prefix.as_bytes())?;
            out.write(body)?;
            out.write(b"\n")?;
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
                let copied =
                    inv.fs.read(&source).map(<[u8]>::to_vec).and_then(|data| inv.fs.write(&target, &data, false));
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
                let data = inv.fs.read(&found)?.to_vec();
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
                if !glob_match(pattern.as_bytes(), name.as_bytes()) {
                    continue;
                }
            }
            out.line(&display_path(root, &base, &found, false))?;
        }
    }
    Ok(())
}

/// Shell wildcard match of a whole name: `*`, `?`, `[abc]`, `[a-z]`, `[!x]`.
pub(crate) fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    // Iterative with one backtrack point for the last `*`: linear in practice.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
                continue;
            }
            Some(b'?') => Some(p + 1),
            Some(b'[') => class_match(pattern, p, name[n]),
            Some(&c) => (c == name[n]).then_some(p + 1),
            None => None,
        };
        match (step, star) {
            (Some(next), _) => {
                p = next;
                n += 1;
            }
            (None, Some((star_p, star_n))) => {
                p = star_p + 1;
                n = star_n + 1;
                star = Some((star_p, star_n + 1));
            }
            (None, None) => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches `ch` against the class starting at `pattern[open] == b'['`; the index after
/// the class when it matches. An unclosed `[` is a literal.
fn class_match(pattern: &[u8], open: usize, ch: u8) -> Option<usize> {
    let mut i = open + 1;
    let negate = matches!(pattern.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let start = i;
    let mut hit = false;
    while i < pattern.len() && (pattern[i] != b']' || i == start) {
        if pattern.get(i + 1) == Some(&b'-') && pattern.get(i + 2).is_some_and(|&c| c != b']') {
            hit |= (pattern[i]..=pattern[i + 2]).contains(&ch);
            i += 3;
        } else {
            hit |= pattern[i] == ch;
            i += 1;
        }
    }
    if i >= pattern.len() {
        return (ch == b'[').then_some(open + 1);
    }
    (hit != negate).then_some(i + 1)
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
    let text = rest.join(" ");
    let text = if escapes { unescape(&text) } else { text };
    out.write(text.as_bytes())?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_patterns() {
        for (pattern, name, want) in [
            ("*.rs", "main.rs", true),
            ("*.rs", "main.rsx", false),
            ("m??n.*", "main.rs", true),
            ("[ab]*", "bcd", true),
            ("[!ab]*", "bcd", false),
            ("[a-c]x", "bx", true),
            ("*", "", true),
            ("a*b*c", "aXbYbZc", true),
            ("[", "[", true),
            ("a[", "a[", true),
        ] {
            assert_eq!(glob_match(pattern.as_bytes(), name.as_bytes()), want, "{pattern} ~ {name}");
        }
    }
}
