//! Running a parsed [`Script`]: `;` lists, `&&`/`||` chains and `|` pipelines in order,
//! `$VAR` expansion when each command runs (no word splitting), then pathname expansion
//! of words with unquoted wildcards (crate::glob; not of redirection targets, as POSIX
//! allows, nor of wildcards inside variables' values), built-ins
//! first, then registered extensions, else exit code 127. Redirections apply after the
//! command ran (so `cat f > f` keeps `f`); every write goes through the filesystem and
//! its limits. The whole line shares one deadline and one output limit.

use std::{
    cell::Cell,
    collections::BTreeMap,
    sync::atomic::{AtomicBool, Ordering},
    time::Instant,
};

use crate::{
    builtins::{self, Invocation},
    extension::{CommandOutput, Extension, ShellContext},
    fs::{self, FileSystem},
    glob,
    parse::{Connector, Part, Pipeline, Redirect, Script, SimpleCommand, Stream, Word},
    CommandInfo,
};

/// The shell's own state: working directory, environment, extensions, `$?`.
pub(crate) struct Shell {
    pub cwd: String,
    pub env: BTreeMap<String, String>,
    pub extensions: Vec<Box<dyn Extension>>,
    pub last_status: i32,
}

/// Limits of one command line's run.
pub(crate) struct Budget<'a> {
    pub deadline: Instant,
    /// The command timeout, for the message (formatted only when it is needed).
    pub timeout_ms: u128,
    pub output_limit: usize,
    pub env_limit: usize,
    /// Set by the front end (Ctrl-C, a signal) to stop the line as the deadline does.
    pub interrupt: Option<&'a AtomicBool>,
    /// When the deadline was last checked. A line that ran to its end did so at such a
    /// check (the one after its last pipeline), so its duration reuses that reading of
    /// the clock (a tenth of a simple command's cost); `None` after a line stopped
    /// early, which need not be at a check.
    pub checked_at: Cell<Option<Instant>>,
}

/// The message of an interrupted command line; its exit code is 130, as in sh.
pub(crate) const INTERRUPTED_TEXT: &str = "interrupted; nothing after this ran\n";

impl Budget<'_> {
    pub fn interrupted(&self) -> bool {
        self.interrupt.is_some_and(|flag| flag.load(Ordering::Relaxed))
    }

    /// Whether the line must stop now; if so, says why on `line`'s stderr.
    fn stop(&self, line: &mut CommandOutput) -> bool {
        if self.interrupted() {
            line.stderr.push_str(INTERRUPTED_TEXT);
            return true;
        }
        let now = Instant::now();
        self.checked_at.set(Some(now));
        if now >= self.deadline {
            line.stderr.push_str(&format!(
                "timed out after {} ms (the command timeout); nothing after this ran\n",
                self.timeout_ms
            ));
            return true;
        }
        false
    }
}

impl Shell {
    pub fn commands(&self) -> Vec<CommandInfo> {
        let mut all: Vec<CommandInfo> = builtins::BUILTINS
            .iter()
            .map(|(name, description, usage)| CommandInfo {
                name: (*name).to_owned(),
                aliases: Vec::new(),
                description: (*description).to_owned(),
                usage: (*usage).to_owned(),
                builtin: true,
            })
            .collect();
        all.extend(self.extensions.iter().map(|extension| CommandInfo {
            name: extension.name().to_owned(),
            aliases: extension.aliases().iter().map(|alias| (*alias).to_owned()).collect(),
            description: extension.description().to_owned(),
            usage: extension.usage().to_owned(),
            builtin: false,
        }));
        all
    }

    /// Runs `script`, consuming it: each command runs at most once, so its words are
    /// moved into its arguments rather than copied.
    pub fn run(&mut self, fs: &mut FileSystem, script: Script, budget: &Budget) -> CommandOutput {
        let mut line = CommandOutput::default();
        for list in script.lists {
            let mut status = self.pipeline(fs, list.first, budget, &mut line);
            for (connector, pipeline) in list.rest {
                if status.is_none() {
                    break;
                }
                let run = match connector {
                    Connector::And => line.exit_code == 0,
                    Connector::Or => line.exit_code != 0,
                };
                if run {
                    status = self.pipeline(fs, pipeline, budget, &mut line);
                }
            }
            if status.is_none() {
                // Timed out, interrupted or over the output limit: the rest of the line
                // does not run.
                budget.checked_at.set(None);
                line.exit_code = if budget.interrupted() { 130 } else { 1 };
                self.last_status = line.exit_code;
                return line;
            }
        }
        line
    }

    /// Runs one pipeline, appending to `line`; `None` when the line must stop.
    fn pipeline(
        &mut self,
        fs: &mut FileSystem,
        pipeline: Pipeline,
        budget: &Budget,
        line: &mut CommandOutput,
    ) -> Option<()> {
        let mut input: Vec<u8> = Vec::new();
        let last = pipeline.commands.len() - 1;
        let mut code = 0;
        for (idx, command) in pipeline.commands.into_iter().enumerate() {
            if budget.stop(line) {
                return None;
            }
            let (stdout, stderr, exit_code) = self.command(fs, command, &input, budget);
            code = exit_code;
            // Moved rather than copied when the line has none yet (the usual case).
            if line.stderr.is_empty() {
                line.stderr = stderr;
            } else {
                line.stderr.push_str(&stderr);
            }
            if idx == last {
                if line.stdout.len() + stdout.len() > budget.output_limit {
                    line.stderr.push_str(&format!(
                        "output stopped: the command line printed more than {} bytes (the output limit)\n",
                        budget.output_limit
                    ));
                    return None;
                }
                if line.stdout.is_empty() {
                    line.stdout = stdout;
                } else {
                    line.stdout.extend_from_slice(&stdout);
                }
            } else {
                input = stdout;
            }
        }
        line.exit_code = code;
        self.last_status = code;
        if budget.stop(line) {
            return None;
        }
        Some(())
    }

    /// One simple command: (stdout left for the pipe, stderr left for the line, exit code).
    fn command(
        &mut self,
        fs: &mut FileSystem,
        mut command: SimpleCommand,
        stdin: &[u8],
        budget: &Budget,
    ) -> (Vec<u8>, String, i32) {
        let mut words = Vec::with_capacity(command.words.len());
        let mut expanded_size = 0;
        for word in command.words {
            let dropped_when_empty = !word.quoted && word.parts.iter().any(|part| !matches!(part, Part::Literal(_)));
            let pattern = word.parts.iter().any(|part| matches!(part, Part::Wildcard(_))).then(|| self.pattern(&word));
            let (text, from_vars) = self.expand(word);
            expanded_size += from_vars;
            if text.is_empty() && dropped_when_empty {
                continue;
            }
            if let Some(pattern) = pattern {
                match glob::expand(fs, &self.cwd, &pattern, budget.deadline) {
                    // No match: the word stays as typed, as in sh.
                    Ok(paths) if paths.is_empty() => {}
                    Ok(paths) => {
                        expanded_size += paths.iter().map(String::len).sum::<usize>();
                        words.extend(paths);
                        continue;
                    }
                    Err(err) => return (Vec::new(), format!("glob: {err}\n"), 1),
                }
            }
            words.push(text);
        }
        let mut targets = Vec::new();
        for redirect in &mut command.redirects {
            if let Redirect::File { target, .. } = redirect {
                let (text, from_vars) = self.expand(std::mem::take(target));
                expanded_size += from_vars;
                targets.push(text);
            }
        }
        if expanded_size > budget.output_limit {
            let message = format!(
                "variables expand to more than {} bytes in one command (the output limit)\n",
                budget.output_limit
            );
            return (Vec::new(), message, 1);
        }
        let output = match words.split_first() {
            None => CommandOutput::default(),
            Some((name, args)) => self.dispatch(fs, name, args, stdin, budget),
        };
        self.redirect(fs, &command.redirects, &targets, output)
    }

    fn dispatch(
        &mut self,
        fs: &mut FileSystem,
        name: &str,
        args: &[String],
        stdin: &[u8],
        budget: &Budget,
    ) -> CommandOutput {
        let commands = if name == "help" { self.commands() } else { Vec::new() };
        let mut invocation = Invocation {
            fs,
            cwd: &mut self.cwd,
            env: &mut self.env,
            stdin,
            deadline: budget.deadline,
            interrupt: budget.interrupt,
            output_limit: budget.output_limit,
            env_limit: budget.env_limit,
            commands: &commands,
        };
        if let Some(out) = builtins::run(name, args, &mut invocation) {
            return CommandOutput { stdout: out.stdout, stderr: out.stderr, exit_code: out.code };
        }
        let found = self.extensions.iter().find(|ext| ext.name() == name || ext.aliases().contains(&name));
        match found {
            Some(extension) => {
                let mut context = ShellContext {
                    fs,
                    cwd: &self.cwd,
                    env: &self.env,
                    stdin,
                    deadline: budget.deadline,
                    interrupt: budget.interrupt,
                };
                extension.execute(args, &mut context)
            }
            None => CommandOutput {
                stdout: Vec::new(),
                stderr: format!("{name}: command not found (help lists the commands)\n"),
                exit_code: 127,
            },
        }
    }

    /// Applies redirections in order after the command ran; `targets` are the expanded
    /// file names of the `File` redirections.
    fn redirect(
        &self,
        fs: &mut FileSystem,
        redirects: &[Redirect],
        targets: &[String],
        output: CommandOutput,
    ) -> (Vec<u8>, String, i32) {
        #[derive(Clone, PartialEq)]
        enum Sink {
            Inherit,
            File(String, bool),
        }
        let (mut stdout_sink, mut stderr_sink) = (Sink::Inherit, Sink::Inherit);
        let mut stderr_to_stdout = false;
        let mut stdout_lost = false;
        let mut problems = String::new();
        let mut targets = targets.iter();
        for redirect in redirects {
            match redirect {
                Redirect::File { stream, append, .. } => {
                    let Some(target) = targets.next() else { break };
                    let path = fs::resolve(&self.cwd, target);
                    // Every target is created (or emptied) as in sh; the last one of
                    // each stream gets the output.
                    let prepared = if *append && fs.exists(&path) { Ok(()) } else { fs.write(&path, b"", false) };
                    if let Err(err) = prepared {
                        problems.push_str(&format!("{err}\n"));
                        stdout_lost |= *stream == Stream::Stdout;
                        continue;
                    }
                    match stream {
                        Stream::Stdout => stdout_sink = Sink::File(path, *append),
                        Stream::Stderr => {
                            stderr_sink = Sink::File(path, *append);
                            stderr_to_stdout = false;
                        }
                    }
                }
                Redirect::StderrToStdout => {
                    stderr_sink = stdout_sink.clone();
                    stderr_to_stdout = stderr_sink == Sink::Inherit;
                }
            }
        }
        let CommandOutput { mut stdout, stderr, mut exit_code } = output;
        let mut stderr_left = String::new();
        let write = |fs: &mut FileSystem, sink: &Sink, data: &[u8], first: bool| -> Result<(), String> {
            match sink {
                Sink::Inherit => Ok(()),
                // The second stream into the same file appends after the first.
                Sink::File(path, append) => fs.write(path, data, *append || !first).map_err(|err| err.to_string()),
            }
        };
        if let Sink::File(..) = stdout_sink {
            if let Err(err) = write(fs, &stdout_sink, &stdout, true) {
                problems.push_str(&format!("{err}\n"));
            }
            stdout.clear();
        }
        if stdout_lost {
            stdout.clear();
        }
        match &stderr_sink {
            Sink::Inherit if stderr_to_stdout => stdout.extend_from_slice(stderr.as_bytes()),
            Sink::Inherit => stderr_left = stderr,
            sink => {
                let same = *sink == stdout_sink;
                if let Err(err) = write(fs, sink, stderr.as_bytes(), !same) {
                    problems.push_str(&format!("{err}\n"));
                }
            }
        }
        if !problems.is_empty() {
            stderr_left.push_str(&problems);
            exit_code = 1;
        }
        (stdout, stderr_left, exit_code)
    }

    /// The word's text and how many of its bytes came from variables (the command line
    /// bounds the rest).
    fn expand(&self, mut word: Word) -> (String, usize) {
        // A plain word (the usual case) is its text.
        if let [Part::Literal(text)] = word.parts.as_mut_slice() {
            return (std::mem::take(text), 0);
        }
        let mut text = String::new();
        let mut from_vars = 0;
        for part in &word.parts {
            match part {
                Part::Literal(literal) => text.push_str(literal),
                Part::Var(name) => {
                    let value = self.env.get(name).map_or("", String::as_str);
                    from_vars += value.len();
                    text.push_str(value);
                }
                Part::LastStatus => text.push_str(&self.last_status.to_string()),
                Part::Wildcard(ch) => text.push(*ch),
            }
        }
        (text, from_vars)
    }

    /// The word as a pattern for crate::glob: only its unquoted wildcards are special.
    fn pattern(&self, word: &Word) -> String {
        let mut pattern = String::new();
        for part in &word.parts {
            match part {
                Part::Literal(literal) => glob::escape(literal, &mut pattern),
                Part::Var(name) => glob::escape(self.env.get(name).map_or("", String::as_str), &mut pattern),
                Part::LastStatus => pattern.push_str(&self.last_status.to_string()),
                Part::Wildcard(ch) => pattern.push(*ch),
            }
        }
        pattern
    }
}
