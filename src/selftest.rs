//! `agent-sandbox test`: its flags, the dispatch (a sandbox of its own outside, the
//! container's own guarantees inside one) and the printing of the rows. The judge and
//! the probes are `crates/selftest`; inside a container it is handed the probe that runs
//! there, `inside::probe::container`.

use std::{ffi::OsString, io::Write as _};

use anyhow::{bail, Result};
use serde_json::{json, Value};

use crate::exec::PolicyArgs;

#[derive(clap::Args)]
pub struct TestArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Print JSON instead of the table
    #[arg(long)]
    pub json: bool,
}

pub fn test(args: &TestArgs) -> Result<i32> {
    let rows = match runtime_layout::detect() {
        runtime_layout::Where::Bubblewrap => {
            bail!("`agent-sandbox test` starts sandboxes of its own: run it outside, in your own shell")
        }
        runtime_layout::Where::Container => {
            if !policy_flags(&args.policy).is_empty() || args.policy.read_only {
                bail!(
                    "inside a container, `agent-sandbox test` checks the container's own guarantees: exec's flags do \
                     not apply here (run it without them)"
                );
            }
            selftest::container(inside::probe::container)?
        }
        runtime_layout::Where::Outside => {
            selftest::bubblewrap(&crate::exec::invocation(&args.policy), &policy_flags(&args.policy))?
        }
    };
    print(&rows, args.json)?;
    Ok(if rows.iter().any(|row| row.status == selftest::Status::NotHeld) { 1 } else { 0 })
}

fn print(rows: &[selftest::Row], as_json: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if as_json {
        let rows: Vec<Value> = rows
            .iter()
            .map(|row| {
                let result = match row.status {
                    selftest::Status::Held => "held",
                    selftest::Status::NotHeld => "not held",
                    selftest::Status::NotApplicable => "not applicable",
                };
                json!({ "guarantee": row.guarantee, "result": result, "probe": row.probe, "fix": row.fix })
            })
            .collect();
        let held = rows.iter().all(|row| row["result"] != "not held");
        writeln!(out, "{}", json!({ "held": held, "rows": rows }))?;
        return Ok(());
    }
    let width = rows.iter().map(|row| row.guarantee.len()).max().unwrap_or(0);
    writeln!(out, "{:<width$}  {:<14}  HOW IT WAS PROBED", "GUARANTEE", "RESULT")?;
    for row in rows {
        writeln!(out, "{:<width$}  {:<14}  {}", row.guarantee, label(row.status), row.probe)?;
        if let Some(fix) = &row.fix {
            writeln!(out, "{:<width$}  {:<14}  fix: {fix}", "", "")?;
        }
    }
    Ok(())
}

/// A row's result in the table.
fn label(status: selftest::Status) -> &'static str {
    match status {
        selftest::Status::Held => "held",
        selftest::Status::NotHeld => "NOT HELD",
        selftest::Status::NotApplicable => "not applicable",
    }
}

/// The flags of `exec` that form the configuration, as given.
fn policy_flags(args: &PolicyArgs) -> Vec<OsString> {
    let mut flags: Vec<OsString> = Vec::new();
    let mut push = |flag: &str, value: &std::ffi::OsStr| {
        flags.push(flag.into());
        flags.push(value.to_owned());
    };
    if let Some(dir) = &args.cwd {
        push("--cwd", dir.as_os_str());
    }
    if let Some(file) = &args.config {
        push("--config", file.as_os_str());
    }
    if let Some(network) = &args.network {
        push("--network", network.as_ref());
    }
    for (flag, values) in [("--ro", &args.ro), ("--rw", &args.rw), ("--exclude", &args.exclude), ("--cmd", &args.cmds)]
    {
        for value in values {
            push(flag, value.as_ref());
        }
    }
    if args.read_only {
        flags.push("--read-only".into());
    }
    flags
}
