//! The session repository: the agent's own `.git`, kept in step with the user's by a
//! broker on the host (`exec`) or as root (a container).
//!
//! This crate holds what the two brokers share and what must never read the disk: the
//! three-way decision per ref and for `HEAD` ([`sync`]), and the base it keeps (the value
//! both sides last agreed on). The brokers that read both repositories and carry the
//! decisions out are in `hostpush::home`.

#![forbid(unsafe_code)]

pub mod sync;

pub use sync::{decide, decide_head, Base, Checkouts, Decision, Head, HeadMove, History, Refs};
