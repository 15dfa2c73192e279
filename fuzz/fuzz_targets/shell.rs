//! Fuzz target: any bytes as a command line, parsed and run in one sandbox that lives
//! across inputs (so earlier inputs shape the state later ones meet), starting from a
//! small tree so that wildcards match; each input is also a glob pattern and a name,
//! and a grep pattern (see `vsandbox::fuzz_one`). Only a panic counts as a failure.

#![no_main]

use std::sync::{LazyLock, Mutex};

use libfuzzer_sys::fuzz_target;

static SANDBOX: LazyLock<Mutex<vsandbox::Sandbox>> = LazyLock::new(|| {
    let config = vsandbox::Config {
        command_timeout: std::time::Duration::from_millis(200),
        ..vsandbox::Config::default()
    };
    Mutex::new(vsandbox::fuzz_sandbox(config))
});

fuzz_target!(|data: &[u8]| {
    let mut sandbox = SANDBOX.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    vsandbox::fuzz_one(&mut sandbox, data);
});
