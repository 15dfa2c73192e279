//! The front ends of the virtual sandbox: `vsh` (a shell for people, a JSON line protocol
//! for scripts) and `mcp` (the same sandbox as MCP tools for agents), and the session
//! set-up both share. No OS isolation is involved: see crates/vsandbox.

#![forbid(unsafe_code)]

pub mod editor;
mod line;
pub mod mcp;
pub mod repl;
pub mod session;
