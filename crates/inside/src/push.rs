//! `git push` inside the sandbox: a request to the host's push service (`hostpush`),
//! which pushes from outside with the user's own git setup once the hook guard, run
//! there, has checked every new commit. This side only passes the request on and shows
//! the answer; it decides nothing, and has no credentials to push with itself.

use std::{io::Write, os::unix::net::UnixStream, path::Path};

use hostpush::protocol::{self, Request};

/// Sends the push (its arguments after `push`, started in `cwd`) to the service at
/// `socket`, relays the output; the exit status to end with.
pub fn forward(socket: &Path, cwd: &Path, args: &[String]) -> i32 {
    let request = Request { cwd: cwd.to_string_lossy().into_owned(), args: args.to_vec(), home: false };
    let stream = UnixStream::connect(socket).and_then(|mut stream| {
        stream.write_all(&request.to_line())?;
        Ok(stream)
    });
    let stream = match stream {
        Ok(stream) => stream,
        Err(err) => {
            let why = format!("the host's push service does not answer ({err})");
            eprintln!("{}", util::refusal::refuse(why, "restart the sandbox; pushes only leave through the host"));
            return 1;
        }
    };
    loop {
        match protocol::read_frame(&stream) {
            Ok(Some((protocol::OUT, bytes))) => {
                let _ = std::io::stdout().write_all(&bytes);
            }
            Ok(Some((protocol::ERR, bytes))) => {
                let _ = std::io::stderr().write_all(&bytes);
            }
            Ok(Some((protocol::EXIT, bytes))) => {
                let _ = std::io::stdout().flush();
                return bytes.try_into().map(i32::from_be_bytes).unwrap_or(1);
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => {
                eprintln!("agent-sandbox: push failed: the host's push service ended without an answer.");
                return 1;
            }
        }
    }
}

/// Asks the host's broker (`hostpush::home::exec`, at the push socket) to bring the
/// session repository's work home; does not wait for it (what it says is shown at the
/// next git command).
pub fn ask_home(socket: &Path, cwd: &Path) -> std::io::Result<()> {
    let request = Request { cwd: cwd.to_string_lossy().into_owned(), args: Vec::new(), home: true };
    let mut stream = UnixStream::connect(socket)?;
    stream.set_write_timeout(Some(std::time::Duration::from_secs(1)))?;
    stream.write_all(&request.to_line())
}

/// The image's sudo, by its absolute path (the agent's `PATH` is its own).
const SUDO: &str = "/usr/bin/sudo";
/// What the image's sudo rule allows, exactly (`sudo` resets the environment).
const VERIFIER: &[&str] = &["-n", "/usr/local/bin/agent-sandbox", "push-verify"];

/// In a container with `git.verifiedPush`: hands the push to the verifier (root,
/// through the image's one sudo rule for it), which checks it and pushes with root's
/// git setup; its output is the agent's. The exit status to end with.
pub fn verify(cwd: &Path, args: &[String]) -> i32 {
    let request = Request { cwd: cwd.to_string_lossy().into_owned(), args: args.to_vec(), home: false };
    let child = std::process::Command::new(SUDO).args(VERIFIER).stdin(std::process::Stdio::piped()).spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(err) => {
            let why = format!("the push verifier cannot be started ({SUDO}: {err})");
            let instead = "rebuild the image with the agent-sandbox Feature; with git.verifiedPush, pushes leave only \
                           through it";
            eprintln!("{}", util::refusal::refuse(why, instead));
            return 1;
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&request.to_line());
    }
    match child.wait() {
        Ok(status) => status.code().unwrap_or(1),
        Err(_) => 1,
    }
}
