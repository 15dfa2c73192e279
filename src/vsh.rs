//! `agent-sandbox vsh` and `mcp`: their flags; the front ends live in crates/vsh.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

/// What `vsh` and `mcp` share: where a session's sandbox starts from and ends up.
#[derive(Args, Clone, Debug, Default)]
pub struct SessionArgs {
    /// Start from this snapshot file when it exists, and save the sandbox to it at the end
    #[arg(long, value_name = "FILE", conflicts_with = "store")]
    pub snapshot: Option<PathBuf>,
    /// Keep the sandbox in this store file (created if missing), saved after every command
    #[arg(long, value_name = "FILE")]
    pub store: Option<PathBuf>,
    /// Copy a host directory into the sandbox at the start (default DIR: /)
    #[arg(long, value_name = "HOST_DIR[:DIR]")]
    pub import: Option<String>,
    /// Write a sandbox directory (default DIR: /) to a new or empty host directory at the end
    #[arg(long, value_name = "HOST_DIR[:DIR]")]
    pub export: Option<String>,
    /// Let curl reach HOST, HOST:PORT or *.DOMAIN (repeatable; nothing by default)
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Seconds one command line may run
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
}

#[derive(Args, Clone, Debug)]
pub struct VshArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    /// Read one JSON request per line ({"command": "..."}), write one ShellResult JSON per line
    #[arg(long)]
    pub json: bool,
}

impl SessionArgs {
    fn options(&self) -> vsh::session::SessionOptions {
        vsh::session::SessionOptions {
            snapshot: self.snapshot.clone(),
            store: self.store.clone(),
            import: self.import.clone(),
            export: self.export.clone(),
            allow_hosts: self.allow_hosts.clone(),
            timeout: self.timeout,
        }
    }
}

pub fn vsh(args: VshArgs) -> Result<i32> {
    vsh::repl::vsh(&args.session.options(), args.json)
}

#[derive(Args, Clone, Debug)]
pub struct McpArgs {
    #[command(flatten)]
    pub session: SessionArgs,
}

pub fn mcp(args: McpArgs) -> Result<i32> {
    vsh::mcp::mcp(&args.session.options())
}
