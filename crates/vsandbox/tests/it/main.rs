//! Tests of the virtual sandbox through its public API: each built-in and shell feature
//! against its expected output and exit code (table-driven), the limits through every
//! write path, snapshots (property-tested), `curl` against a real server on 127.0.0.1,
//! host import/export, and the parser under random input. No mocks.

mod builtins;
mod curl;
mod host;
mod limits;
mod parser_random;
mod shell;
mod snapshot;
mod stores;
mod support;
