//! `agent-sandbox exec`, `config show` and `config allow`: the flags become a
//! `session::Invocation`; the pipeline lives in `crates/session`; this prints.

use std::{ffi::OsString, io::IsTerminal, path::PathBuf};

use anyhow::{Context as _, Result};
use clap::Args;

/// Flags that form the CLI configuration layer.
#[derive(Args, Clone, Default)]
pub struct PolicyArgs {
    /// Run as if started in DIR
    #[arg(short = 'C', long = "cwd", value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// An extra config file, applied after the global and project ones
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Network access: allowlist (only the allowed host names, through a proxy), on or off
    #[arg(long, value_name = "allowlist|on|off", value_parser = ["allowlist", "on", "off"])]
    pub network: Option<String>,
    /// Allow HOST (or *.DOMAIN), on ports 80 and 443 or on :PORT (repeatable)
    #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
    pub allow_hosts: Vec<String>,
    /// Make the host's loopback PORT reachable inside as localhost:PORT (repeatable)
    #[arg(long = "host-port", value_name = "PORT")]
    pub host_ports: Vec<String>,
    /// Make PATH visible read-only (repeatable)
    #[arg(long, value_name = "PATH")]
    pub ro: Vec<String>,
    /// Make PATH visible read-write (repeatable)
    #[arg(long, value_name = "PATH")]
    pub rw: Vec<String>,
    /// Hide PATH (repeatable)
    #[arg(long, value_name = "PATH")]
    pub exclude: Vec<String>,
    /// The whole project read-only (a read-only agent; /tmp stays writable)
    #[arg(long)]
    pub read_only: bool,
    /// NAME=VALUE: true (unwrapped), false (deny), @git (built-in preset) or a wrapper script path
    #[arg(long = "cmd", value_name = "NAME=VALUE", value_parser = command_rule)]
    pub cmds: Vec<String>,
}

#[derive(Args)]
pub struct ExecArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Print the bwrap command instead of running it
    #[arg(long)]
    pub dry_run: bool,
    /// Explain each decision on stderr
    #[arg(long)]
    pub debug: bool,
    /// The command and its arguments (after `--` when they start with `-`)
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// `--cmd NAME=VALUE`, checked by clap so that a malformed one is a usage error (exit 2).
fn command_rule(text: &str) -> Result<String, String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() && !value.is_empty() && !name.contains('/') => Ok(text.to_owned()),
        _ => Err(format!(
            "expected NAME=VALUE, e.g. npm=false, git=@git, npm=true or npm=./tools/npm-wrapper (got {text:?})"
        )),
    }
}

pub(crate) fn invocation(args: &PolicyArgs) -> session::Invocation {
    session::Invocation {
        cwd: args.cwd.clone(),
        config: args.config.clone(),
        network: args.network.clone(),
        ro: args.ro.clone(),
        rw: args.rw.clone(),
        exclude: args.exclude.clone(),
        cmds: args.cmds.clone(),
        read_only: args.read_only,
        allow_hosts: args.allow_hosts.clone(),
        host_ports: args.host_ports.clone(),
    }
}

/// `agent-sandbox config allow`: trusts the project's config file as it is now.
pub fn config_allow(args: &PolicyArgs) -> Result<i32> {
    let (project_root, allowed) = session::config_allow(&invocation(args))?;
    if allowed.is_empty() {
        println!("{} has no .agent-sandbox/config.jsonc or config.json: nothing to allow", project_root.display());
    }
    for (path, bytes) in allowed {
        println!("allowed {} as it is now:", path.display());
        // Shown with control characters escaped: an escape sequence could hide lines.
        let text: String = String::from_utf8_lossy(&bytes)
            .chars()
            .flat_map(|c| match c {
                '\n' | '\t' => vec![c],
                c if c.is_control() => c.escape_default().collect(),
                c => vec![c],
            })
            .collect();
        print!("{text}");
    }
    Ok(0)
}

pub fn config_show(args: &PolicyArgs, json: bool) -> Result<i32> {
    let loaded = session::load(&invocation(args))?;
    for (path, _) in loaded.project_config.iter().filter(|(_, allowed)| !allowed) {
        eprintln!(
            "agent-sandbox: note: {} is not allowed as it is: exec refuses to start until `agent-sandbox config allow`",
            path.display()
        );
    }
    if json {
        let text = serde_json::to_string_pretty(&loaded.config.to_json()).context("formatting JSON")?;
        println!("{text}");
    } else {
        print!("{}", loaded.config.to_text());
    }
    Ok(0)
}

pub fn exec(args: ExecArgs) -> Result<i32> {
    let debug = |line: &str| {
        if args.debug {
            eprintln!("agent-sandbox: debug: {line}");
        }
    };
    let options = session::ExecOptions {
        command: &args.command,
        dry_run: args.dry_run,
        debug: &debug,
        terminal: std::io::stderr().is_terminal(),
    };
    match session::exec(&invocation(&args.policy), &options)? {
        session::Outcome::DryRun { env_names, argv, caches } => {
            println!("# environment passed: {}", env_names.join(" "));
            for cache in &caches {
                println!("# {cache}");
            }
            println!("{}", util::shell_line(&argv));
            Ok(0)
        }
        session::Outcome::Ran(code) => Ok(code),
        session::Outcome::NotFound(why) => {
            eprintln!("agent-sandbox: {why}");
            Ok(127)
        }
    }
}
