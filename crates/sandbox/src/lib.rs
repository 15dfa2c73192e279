//! Everything between a resolved policy and a running sandbox, on the host: the pure
//! bwrap plan, command wrapper discovery, the runtime directory mounted at
//! `/run/agent-sandbox`, and the executor (with Landlock scoping). What runs inside the
//! sandbox lives in the `inside` crate.

pub mod caches;
pub mod commands;
pub mod landlock;
pub mod netns;
pub mod plan;
pub mod run;
pub mod runtime;
