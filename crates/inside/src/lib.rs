//! What runs inside the sandbox: the multicall dispatcher (this binary mounted over every
//! wrapped command, or reached through a shim), the `@git` preset it hands git to (the
//! git guard, also installed as `git` in a container image), and the tool guard the
//! agents' managed configuration runs before every tool call, the probe `test` runs, and the client side of `git push` (a request to the host's push
//! service, `push.rs`). Everything here runs for an
//! untrusted caller, in an environment the agent controls, over files the agent can
//! write; host code never depends on this crate (only the binary's `argv[0]` dispatch
//! does), and what the host needs at start lives in `gitfacts`, `guard-settings` and
//! `runtime-layout`.
//!
//! It may trust only what the agent cannot change: the read-only runtime directory
//! `/run/agent-sandbox` that `exec` wrote (presets, wrappers, the real binaries, the
//! settings snapshots), and in a container the root-owned `/usr/libexec/agent-sandbox/git`
//! and `/etc/agent-sandbox`. It may not trust its arguments or `argv[0]`, the
//! environment (`HOME`, `XDG_*`, `PATH`, every `GIT_*` variable), the working directory,
//! the repository's files and configuration, or its parent process (believed to be git's
//! sequencer only when `/proc` shows the real git). So settings are never read through
//! `HOME` or `XDG_*`, a settings file that is missing or unusable means the strictest
//! settings, and a command line the guard allows is still refused when its outcome
//! (the repository, its hooks directory) differs from what `exec` recorded at start.

pub mod dns;
mod git;
pub mod handover;
pub mod masks;
pub mod multicall;
pub mod net;
pub mod probe;
mod push;
pub mod resolver;
pub mod tool_guard;
