//! Finds secret files (dotenv files, private keys, credential stores, ...) inside a
//! project tree so the sandbox can hide them from the agent: [`SecretMatcher`] decides
//! whether one relative path is a secret, and [`scan`] walks a whole tree in parallel
//! and fails closed when any directory cannot be read; [`scan_cached`] keeps what it
//! listed ([`ScanCache`]) so the next start in a big tree, and the exit check after a
//! start, only stat directories.

mod cache;
mod matcher;
mod scan;

pub use matcher::{PatternError, SecretMatcher, COPY_PATTERN};
pub use scan::{scan, scan_cached, EntryKind, ScanCache, ScanError, SecretHit};
