//! `vsh` on a terminal: a line editor (rustyline: arrow keys, Emacs keys, history
//! search with Ctrl-R) with history kept on the host, never in the sandbox, completion
//! of commands and sandbox paths with Tab, and a prompt showing the working directory.
//! Ctrl-C cancels the line being edited or stops the running command (through the
//! sandbox's interrupt flag); Ctrl-D and `exit` save the snapshot and leave.
//!
//! The completion logic ([`completions`]) is pure: it gets the line and a way to list
//! a sandbox directory, so its table test needs no terminal.

use std::{
    io::Write,
    path::PathBuf,
    sync::{atomic::AtomicBool, Arc, Mutex},
};

use anyhow::{Context as _, Result};
use rustyline::{
    completion::{Completer, Pair},
    config::{CompletionType, Config},
    error::ReadlineError,
    highlight::Highlighter,
    hint::Hinter,
    validate::Validator,
    Editor, Helper,
};
use vsandbox::Sandbox;

use crate::{
    line::{exit_request, print_result, ExitRequest},
    session::SessionOptions,
};

/// How many lines the history file keeps.
const HISTORY_SIZE: usize = 1000;

/// Runs the interactive shell on the terminal until Ctrl-D or `exit`; the caller saves.
pub fn run(shared: &Arc<Mutex<Sandbox>>, interrupt: &Arc<AtomicBool>, session: &SessionOptions) -> Result<i32> {
    let config = Config::builder()
        .max_history_size(HISTORY_SIZE)
        .context("configuring the line editor")?
        .history_ignore_dups(true)
        .context("configuring the line editor")?
        .history_ignore_space(true)
        .auto_add_history(true)
        .completion_type(CompletionType::List)
        .build();
    let mut editor: Editor<VshHelper, _> = Editor::with_config(config).context("starting the line editor")?;
    let commands = {
        let sandbox = lock(shared);
        let mut names: Vec<String> = sandbox.available_commands().into_iter().map(|info| info.name).collect();
        names.sort();
        names
    };
    editor.set_helper(Some(VshHelper { sandbox: Arc::clone(shared), commands }));
    let history = history_path(session);
    if let Some(path) = &history {
        // A missing or unreadable history only means starting without one.
        let _ = editor.load_history(path);
    }
    let mut status = 0;
    loop {
        let prompt = format!("vsh:{}$ ", lock(shared).cwd());
        let line = match editor.readline(&prompt) {
            Ok(line) => line,
            // Ctrl-C while editing: the line is dropped, as in bash.
            Err(ReadlineError::Interrupted) => {
                status = 130;
                continue;
            }
            // Ctrl-D on an empty line: leave (the editor ends the line, so the host's
            // prompt starts on a line of its own).
            Err(ReadlineError::Eof) => break,
            Err(err) => return Err(err).context("reading the terminal"),
        };
        if let Some(path) = &history {
            save_history(&mut editor, path);
        }
        match exit_request(&line) {
            ExitRequest::Exit(code) => {
                status = code.unwrap_or(status);
                break;
            }
            ExitRequest::Invalid(message) => {
                eprintln!("vsh: {message}");
                status = 1;
                continue;
            }
            ExitRequest::None => {}
        }
        interrupt.store(false, std::sync::atomic::Ordering::Relaxed);
        let result = lock(shared).execute(&line);
        print_result(&result)?;
        // A prompt after output without a final newline would start mid-line.
        if !result.stdout.is_empty() && !result.stdout.ends_with('\n') {
            println!();
        }
        status = result.exit_code;
    }
    Ok(status)
}

/// The mutex's sandbox; a panic while it was held left nothing half-written that
/// matters here (each command line is all or nothing for the tree's limits).
pub fn lock(shared: &Mutex<Sandbox>) -> std::sync::MutexGuard<'_, Sandbox> {
    shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Where the history lives: beside the snapshot or store file (`FILE.history`), else in the
/// state directory (`$XDG_STATE_HOME/agent-sandbox/vsh_history`, else
/// `~/.local/state/agent-sandbox/vsh_history`). Always on the host, outside the
/// sandbox and its limits.
pub fn history_path(session: &SessionOptions) -> Option<PathBuf> {
    if let Some(file) = session.snapshot.as_ref().or(session.store.as_ref()) {
        let mut name = file.file_name()?.to_os_string();
        name.push(".history");
        return Some(file.with_file_name(name));
    }
    let home = PathBuf::from(std::env::var_os("HOME").filter(|home| !home.is_empty())?);
    Some(config::xdg_dir(&home, "XDG_STATE_HOME", ".local/state").join("vsh_history"))
}

fn save_history(editor: &mut Editor<VshHelper, rustyline::history::FileHistory>, path: &std::path::Path) {
    if let Some(dir) = path.parent() {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    }
    if let Err(err) = editor.save_history(path) {
        // Not fatal: the session goes on without a history file.
        let _ = writeln!(std::io::stderr(), "vsh: cannot save the history to {}: {err}", path.display());
    }
}

struct VshHelper {
    sandbox: Arc<Mutex<Sandbox>>,
    commands: Vec<String>,
}

impl Completer for VshHelper {
    type Candidate = Pair;

    fn complete(&self, line: &str, pos: usize, _: &rustyline::Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let sandbox = lock(&self.sandbox);
        let list = |dir: &str| {
            sandbox
                .read_dir(dir)
                .ok()
                .map(|entries| entries.into_iter().map(|(name, meta)| (name, meta.is_dir())).collect())
        };
        Ok(completions(line, pos, &self.commands, list))
    }
}

impl Hinter for VshHelper {
    type Hint = String;
}

impl Highlighter for VshHelper {}

impl Validator for VshHelper {}

impl Helper for VshHelper {}

/// What Tab offers at byte `pos` of `line`: the start of the word being completed and
/// the candidates. In command position (the first word, or after `;`, `|`, `&&`, `||`)
/// the command names; elsewhere the names in the sandbox directory the word points
/// into (`list` gives a directory's names and whether each is a directory), with `/`
/// after a directory and a space after a file. Dot files only when the word's last
/// component starts with `.`; shell characters in names are escaped with `\`.
pub fn completions(
    line: &str,
    pos: usize,
    commands: &[String],
    list: impl Fn(&str) -> Option<Vec<(String, bool)>>,
) -> (usize, Vec<Pair>) {
    let before = &line[..pos.min(line.len())];
    let start = word_start(before);
    let word = &before[start..];
    let preceding = before[..start].trim_end();
    if preceding.is_empty() || preceding.ends_with([';', '|', '&']) {
        let pairs = commands
            .iter()
            .filter(|name| name.starts_with(word))
            .map(|name| Pair { display: name.clone(), replacement: format!("{name} ") })
            .collect();
        return (start, pairs);
    }
    let typed = unescape(word);
    let (dir, prefix) = match typed.rfind('/') {
        Some(idx) => (&typed[..=idx], &typed[idx + 1..]),
        None => ("", typed.as_str()),
    };
    let Some(entries) = list(if dir.is_empty() { "." } else { dir }) else {
        return (start, Vec::new());
    };
    let pairs = entries
        .into_iter()
        .filter(|(name, _)| name.starts_with(prefix) && (prefix.starts_with('.') || !name.starts_with('.')))
        .map(|(name, is_dir)| Pair {
            replacement: format!("{}{}{}", escape(dir), escape(&name), if is_dir { "/" } else { " " }),
            display: if is_dir { format!("{name}/") } else { name },
        })
        .collect();
    (start, pairs)
}

/// Characters that end a word for completion (unless escaped with `\`).
const WORD_BREAKS: &[char] = &[' ', '\t', ';', '|', '&', '>', '<'];

/// Characters escaped in a completed name.
const SPECIAL: &[char] = &[' ', '\t', ';', '|', '&', '>', '<', '\'', '"', '\\', '$', '*', '?', '[', '#', '(', ')', '`'];

fn word_start(before: &str) -> usize {
    let mut start = 0;
    let mut escaped = false;
    for (idx, ch) in before.char_indices() {
        if escaped {
            escaped = false;
        } else if ch == '\\' {
            escaped = true;
        } else if WORD_BREAKS.contains(&ch) {
            start = idx + ch.len_utf8();
        }
    }
    start
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        if SPECIAL.contains(&ch) {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '\\' => out.extend(chars.next()),
            '\'' | '"' => {}
            ch => out.push(ch),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(dir: &str) -> Option<Vec<(String, bool)>> {
        let entries: &[(&str, bool)] = match dir {
            "." => &[(".hidden", false), ("a b.txt", false), ("src", true), ("summary.md", false)],
            "src/" => &[("lib.rs", false), ("main.rs", false)],
            "/" => &[("etc", true), ("p", true)],
            _ => return None,
        };
        Some(entries.iter().map(|(name, is_dir)| ((*name).to_owned(), *is_dir)).collect())
    }

    #[test]
    fn tab_completes_commands_then_sandbox_paths() {
        let commands: Vec<String> = ["cat", "cd", "cp", "curl", "echo", "exit"].map(String::from).to_vec();
        for (line, start, want) in [
            ("c", 0, vec!["cat ", "cd ", "cp ", "curl "]),
            ("ec", 0, vec!["echo "]),
            ("ls && cu", 6, vec!["curl "]),
            ("echo x | ca", 9, vec!["cat "]),
            ("cat s", 4, vec!["src/", "summary.md "]),
            ("cat src/m", 4, vec!["src/main.rs "]),
            ("cat src/", 4, vec!["src/lib.rs ", "src/main.rs "]),
            ("cat a", 4, vec!["a\\ b.txt "]),
            ("cat a\\ ", 4, vec!["a\\ b.txt "]),
            ("cat .", 4, vec![".hidden "]),
            ("ls /", 3, vec!["/etc/", "/p/"]),
            ("echo x > su", 9, vec!["summary.md "]),
            ("cat nope/x", 4, vec![]),
        ] {
            let (got_start, pairs) = completions(line, line.len(), &commands, tree);
            let got: Vec<&str> = pairs.iter().map(|pair| pair.replacement.as_str()).collect();
            assert_eq!((got_start, got), (start, want), "{line:?}");
        }
    }

    #[test]
    fn history_lives_beside_the_snapshot_or_in_the_state_directory() {
        let session = SessionOptions { snapshot: Some(PathBuf::from("/tmp/x/work.json")), ..SessionOptions::default() };
        assert_eq!(history_path(&session), Some(PathBuf::from("/tmp/x/work.json.history")));
        let session = SessionOptions { store: Some(PathBuf::from("/tmp/x/work.redb")), ..SessionOptions::default() };
        assert_eq!(history_path(&session), Some(PathBuf::from("/tmp/x/work.redb.history")));
    }
}
