//! The `agent-sandbox` multicall binary. `main` only dispatches: on `argv[0]` first
//! (invoked as a git hook, `pre-commit`/`pre-push`, or as a wrapped command such as
//! `git` inside a sandbox), then on the hidden `multicall` subcommand, and otherwise
//! hands the command line to clap. Real work lives
//! in the library crates under `crates/`.

mod cli;
mod docker;
mod exec;
mod log;
mod selftest;
mod vsh;

use std::{ffi::OsString, path::Path};

fn main() {
    let args: Vec<OsString> = std::env::args_os().collect();
    let argv0 =
        args.first().map(|arg| Path::new(arg).file_name().unwrap_or(arg.as_os_str()).to_string_lossy().into_owned());
    if let Some(hook) = argv0.as_deref().filter(|name| hookinstall::HOOKS.contains(name)) {
        std::process::exit(hookguard::run(hook, &args[1..]));
    }
    if let Some(name) = argv0.filter(|name| !name.starts_with("agent-sandbox")) {
        std::process::exit(inside::multicall::dispatch(&name, &args[1..]));
    }
    // Hidden: the two halves of the allowlist network inside a sandbox (crates/inside/src/net.rs),
    // and the masks' first process (crates/inside/src/masks.rs).
    match args.get(1).and_then(|arg| arg.to_str()) {
        Some("mask-init") => std::process::exit(inside::masks::run(&args[2..])),
        Some("net-bridge") => std::process::exit(inside::net::bridge(&args[2..])),
        Some("net-connect") => std::process::exit(inside::net::connect(&args[2..])),
        _ => {}
    }
    if args.get(1).is_some_and(|arg| arg == "multicall") {
        let Some(name) = args.get(2) else {
            eprintln!("agent-sandbox: usage: agent-sandbox multicall <command> [args...]");
            std::process::exit(2);
        };
        std::process::exit(inside::multicall::dispatch(&name.to_string_lossy(), &args[3..]));
    }
    std::process::exit(cli::main(args));
}
