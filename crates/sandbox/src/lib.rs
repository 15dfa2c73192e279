//! Everything between a resolved policy and a running sandbox: the pure bwrap plan,
//! command wrapper discovery, the runtime directory mounted at `/run/agent-sandbox`,
//! the executor (with Landlock scoping), and what runs inside: the multicall dispatcher.

pub mod commands;
pub mod git;
pub mod landlock;
pub mod multicall;
pub mod plan;
pub mod run;
pub mod runtime;
