//! What the front ends (the line editor's loop and the plain one) do with a line
//! before and after the sandbox: `exit [N]`, and printing a command's output.

use std::io::Write;

use anyhow::{Context, Result};
use vsandbox::ShellResult;

/// What a line asks of the front end rather than the sandbox.
pub(crate) enum ExitRequest {
    None,
    /// `exit` or `exit N`.
    Exit(Option<i32>),
    Invalid(String),
}

/// `exit [N]` as a whole line leaves the shell.
pub(crate) fn exit_request(line: &str) -> ExitRequest {
    let trimmed = line.trim();
    let Some(rest) = trimmed.strip_prefix("exit") else { return ExitRequest::None };
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return ExitRequest::None;
    }
    match rest.trim() {
        "" => ExitRequest::Exit(None),
        code => match code.parse() {
            Ok(code) => ExitRequest::Exit(Some(code)),
            Err(_) => ExitRequest::Invalid(format!("exit takes a number, not {code:?}")),
        },
    }
}

/// A command line's output as a shell shows it.
pub(crate) fn print_result(result: &ShellResult) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(result.stdout.as_bytes()).context("writing standard output")?;
    stdout.flush().context("writing standard output")?;
    eprint!("{}", result.stderr);
    Ok(())
}
