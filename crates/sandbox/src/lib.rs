//! Everything between a resolved policy and a running sandbox: the pure bwrap plan,
//! command wrapper discovery, the runtime directory mounted at `/run/agent-sandbox`,
//! the executor, and what runs inside: the sandbox init (Landlock scoping), the
//! multicall dispatcher and sandbox detection.

pub mod check;
pub mod commands;
pub mod init;
pub mod multicall;
pub mod plan;
pub mod run;
pub mod runtime;
