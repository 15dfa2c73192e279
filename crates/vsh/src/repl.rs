//! `agent-sandbox vsh`: an interactive shell over one virtual sandbox (crates/vsandbox;
//! on a terminal with the line editor of `editor.rs`), or with `json` a line protocol
//! for scripts: one request `{"command": "..."}` per input line, one `ShellResult` JSON
//! object per output line.
//!
//! Every way out saves the snapshot (`--snapshot`) and makes the export (`--export`):
//! end of input, `exit`, Ctrl-D, and the signals SIGTERM and SIGHUP (and SIGINT when
//! not on a terminal), which a thread of their own handles: it stops the running
//! command through the sandbox's interrupt flag, waits for the sandbox, saves, puts
//! the terminal back as it found it and exits with 128 + the signal's number.

use std::{
    io::{BufRead, IsTerminal, Write},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
};

use anyhow::{anyhow, Context, Result};
use vsandbox::{CommandOutput, Extension, Sandbox, ShellContext, ShellResult};

use crate::{
    editor::{self, lock},
    line::{exit_request, print_result, ExitRequest},
    session::{close, open, SessionOptions},
};

/// Runs the shell until end of input or `exit`; returns the exit status.
pub fn vsh(session: &SessionOptions, json: bool) -> Result<i32> {
    let (mut sandbox, notes) = open(session)?;
    let interactive = !json && std::io::stdin().is_terminal();
    if !json {
        for note in &notes {
            eprintln!("vsh: {note}");
        }
        // `help` lists it; the front end acts on it.
        sandbox.register(Box::new(Exit)).context("registering exit")?;
    }
    let interrupt = Arc::new(AtomicBool::new(false));
    sandbox.set_interrupt(Arc::clone(&interrupt));
    let shared = Arc::new(Mutex::new(sandbox));
    let closed = Arc::new(AtomicBool::new(false));
    save_on_signals(&shared, &interrupt, &closed, session, interactive, json)?;
    let status = if interactive {
        eprintln!(
            "vsh: a virtual sandbox (nothing here touches your machine); help lists commands, Tab completes, \
             exit or Ctrl-D leaves"
        );
        editor::run(&shared, &interrupt, session)?
    } else {
        lines(&shared, json)?
    };
    // Under the lock, so that a signal arriving now finds the work done.
    let sandbox = lock(&shared);
    closed.store(true, Ordering::SeqCst);
    for note in close(&sandbox, session)? {
        if !json {
            eprintln!("vsh: {note}");
        }
    }
    Ok(if json { 0 } else { status })
}

/// The non-terminal modes: plain lines, or JSON requests with `json`.
fn lines(shared: &Mutex<Sandbox>, json: bool) -> Result<i32> {
    let mut stdout = std::io::stdout().lock();
    let mut status = 0;
    for line in std::io::stdin().lock().lines() {
        let line = line.context("reading standard input")?;
        if json {
            if line.trim().is_empty() {
                continue;
            }
            let result = match request_command(&line) {
                Ok(command) => lock(shared).execute(&command),
                Err(message) => ShellResult {
                    command: line.clone(),
                    stdout: String::new(),
                    stderr: format!("{message}\n"),
                    exit_code: 1,
                    success: false,
                    duration_ms: 0.0,
                },
            };
            let json = serde_json::to_string(&result).context("encoding a result")?;
            writeln!(stdout, "{json}").context("writing standard output")?;
            stdout.flush().context("writing standard output")?;
            continue;
        }
        match exit_request(&line) {
            ExitRequest::Exit(code) => {
                status = code.unwrap_or(status);
                break;
            }
            ExitRequest::Invalid(message) => return Err(anyhow!(message)),
            ExitRequest::None => {}
        }
        let result = lock(shared).execute(&line);
        print_result(&result)?;
        status = result.exit_code;
    }
    Ok(status)
}

/// SIGTERM and SIGHUP (and SIGINT off a terminal, where Ctrl-C is not a key): save
/// and leave. On a terminal SIGINT only stops the running command (the line editor
/// reads Ctrl-C as a key while it edits).
fn save_on_signals(
    shared: &Arc<Mutex<Sandbox>>,
    interrupt: &Arc<AtomicBool>,
    closed: &Arc<AtomicBool>,
    session: &SessionOptions,
    interactive: bool,
    json: bool,
) -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut leaving = vec![SIGTERM, SIGHUP];
    if interactive {
        signal_hook::flag::register(SIGINT, Arc::clone(interrupt)).context("handling SIGINT")?;
    } else {
        leaving.push(SIGINT);
    }
    let mut signals = signal_hook::iterator::Signals::new(&leaving).context("handling SIGTERM and SIGHUP")?;
    let terminal = nix::sys::termios::tcgetattr(std::io::stdin()).ok();
    let (shared, interrupt, closed, session) =
        (Arc::clone(shared), Arc::clone(interrupt), Arc::clone(closed), session.clone());
    std::thread::spawn(move || {
        let Some(signal) = signals.forever().next() else { return };
        interrupt.store(true, Ordering::SeqCst);
        let sandbox = lock(&shared);
        if closed.load(Ordering::SeqCst) {
            // The main thread saved already and is leaving.
            return;
        }
        if let Some(terminal) = &terminal {
            let _ = nix::sys::termios::tcsetattr(std::io::stdin(), nix::sys::termios::SetArg::TCSANOW, terminal);
        }
        let mut stderr = std::io::stderr();
        let name = match signal {
            SIGTERM => "SIGTERM",
            SIGHUP => "SIGHUP",
            _ => "SIGINT",
        };
        match close(&sandbox, &session) {
            Ok(notes) if !json => {
                let _ = writeln!(stderr, "\nvsh: {name}: leaving");
                for note in notes {
                    let _ = writeln!(stderr, "vsh: {note}");
                }
            }
            Ok(_) => {}
            Err(err) => {
                let _ = writeln!(stderr, "\nvsh: {name}: {err:#}");
            }
        }
        std::process::exit(128 + signal);
    });
    Ok(())
}

/// `exit` in `help`. The front end acts on `exit [N]` as a line of its own before the
/// sandbox sees it; anywhere else in a line this says so.
struct Exit;

impl Extension for Exit {
    fn name(&self) -> &str {
        "exit"
    }

    fn description(&self) -> &str {
        "leave vsh, saving the snapshot (--snapshot); Ctrl-D too"
    }

    fn usage(&self) -> &str {
        "exit [N]   (as a command line of its own; N: the exit status)"
    }

    fn execute(&self, _args: &[String], _context: &mut ShellContext<'_>) -> CommandOutput {
        CommandOutput::error("exit: leaves vsh only as a command line of its own (exit [N])")
    }
}

/// The command of a `--json` request line: `{"command": "..."}`.
fn request_command(line: &str) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Request {
        command: String,
    }
    match serde_json::from_str::<Request>(line) {
        Ok(request) => Ok(request.command),
        Err(err) => Err(format!("invalid request ({err}); send one JSON object per line: {{\"command\": \"ls -l\"}}")),
    }
}
