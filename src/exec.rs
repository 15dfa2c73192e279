//! `agent-sandbox exec`, `config show` and `config allow`: the flags become a
//! `session::Invocation`; the pipeline lives in `crates/session`; this prints.

use std::io::IsTerminal;

use anyhow::{Context as _, Result};

use crate::cli::{ExecArgs, PolicyArgs};

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
