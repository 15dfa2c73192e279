//! `agent-sandbox vsh`: an interactive shell over one virtual sandbox (crates/vsandbox),
//! or with `json` a line protocol for scripts: one request `{"command": "..."}` per
//! input line, one `ShellResult` JSON object per output line.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::{Context, Result};
use vsandbox::ShellResult;

use crate::session::{close, open, SessionOptions};

/// Runs the shell until end of input or `exit`; returns the exit status.
pub fn vsh(session: &SessionOptions, json: bool) -> Result<i32> {
    let (mut sandbox, notes) = open(session)?;
    let stdin = std::io::stdin();
    let interactive = !json && stdin.is_terminal();
    if !json {
        for note in &notes {
            eprintln!("vsh: {note}");
        }
    }
    if interactive {
        eprintln!("vsh: a virtual sandbox (nothing here touches your machine); help lists commands, exit leaves");
    }
    let mut stdout = std::io::stdout().lock();
    let mut status = 0;
    let mut lines = stdin.lock().lines();
    loop {
        if interactive {
            eprint!("vsh:{}$ ", sandbox.cwd());
        }
        let Some(line) = lines.next() else { break };
        let line = line.context("reading standard input")?;
        if json {
            if line.trim().is_empty() {
                continue;
            }
            let result = match request_command(&line) {
                Ok(command) => sandbox.execute(&command),
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
        let trimmed = line.trim();
        if trimmed == "exit" || trimmed.starts_with("exit ") {
            let code = trimmed["exit".len()..].trim();
            if !code.is_empty() {
                status = code.parse().with_context(|| format!("exit takes a number, not {code:?}"))?;
            }
            break;
        }
        let result = sandbox.execute(&line);
        stdout.write_all(result.stdout.as_bytes()).context("writing standard output")?;
        stdout.flush().context("writing standard output")?;
        eprint!("{}", result.stderr);
        status = result.exit_code;
    }
    for note in close(&sandbox, session)? {
        if !json {
            eprintln!("vsh: {note}");
        }
    }
    Ok(if json { 0 } else { status })
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
