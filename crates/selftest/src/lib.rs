//! `agent-sandbox test`'s judge and probes: proves on this machine, with the effective
//! configuration, in a real sandbox, the guarantees README claims. [`bubblewrap`] runs
//! `exec` itself (the binary, with the same flags), first as `--dry-run --debug` to
//! learn which files it masks, then for real with the hidden `probe` inside
//! (`inside::probe`), which looks at the sandbox from the agent's side; here the
//! observations become one row per guarantee: held, not held (with the fix), or not
//! applicable. Why a child `exec` rather than a library call: the probe then meets
//! exactly the pipeline users run.
//!
//! Inside a container sandbox (the Feature's image) there is no sandbox to start: the
//! container is the sandbox, and [`container`] has its guarantees probed in process
//! (the binary passes `inside::probe::container`: no host crate depends on `inside`) as
//! the agent's user: the marker, the git guard, the read-only paths as `devcontainer
//! init` mounts them, the firewall (its state as `firewall status` reads it, and a
//! connection the rules must refuse) and the tool guard's managed files.
//!
//! The binary's `src/selftest.rs` keeps the flags, the dispatch and the printing.

#![forbid(unsafe_code)]

mod agents;
mod bubblewrap;
mod container;

pub use bubblewrap::bubblewrap;
pub use container::container;

/// What the probe showed of one guarantee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Held,
    NotHeld,
    NotApplicable,
}

/// One guarantee's row of the table.
pub struct Row {
    pub guarantee: &'static str,
    pub status: Status,
    /// How it was probed.
    pub probe: String,
    /// What to do when it is not held.
    pub fix: Option<String>,
}

/// A guarantee probed: held, or not held with `fix`.
pub(crate) fn row(guarantee: &'static str, held: bool, probe: String, fix: String) -> Row {
    Row { guarantee, status: if held { Status::Held } else { Status::NotHeld }, probe, fix: (!held).then_some(fix) }
}

/// A guarantee the setup has nothing to hold (no repository, no secret files).
pub(crate) fn not_applicable(guarantee: &'static str, probe: &str) -> Row {
    Row { guarantee, status: Status::NotApplicable, probe: probe.into(), fix: None }
}
