//! End-to-end tests of the `agent-sandbox` binary under real bwrap. Every guarantee is
//! shown by an attack that must fail next to the legitimate use that must keep working.
//! CI runs this suite as root and again as an unprivileged user.

mod agent_settings;
mod caches;
mod cli;
mod commands;
mod container_push;
mod devcontainer;
mod dockerbox;
mod env;
mod files;
mod git;
mod gitguard;
mod hookguard;
mod host_files;
mod install;
mod isolation;
mod log;
mod mcp;
mod model;
mod network;
mod next_session;
mod projects;
mod push;
mod real_agents;
mod remote_engine;
mod runtime;
mod secrets;
mod selftest;
mod session_check;
mod session_repo;
mod session_sync;
mod settings;
mod setups;
mod support;
mod sync_model;
mod tool_guard;
mod vsh;
