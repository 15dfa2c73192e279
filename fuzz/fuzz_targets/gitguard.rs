//! Fuzz target: any bytes as a git command line (NUL-separated arguments), judged by the
//! git guard against a fixed configuration with aliases. A panic, including a broken
//! invariant of `gitguard::fuzz_one`, is a failure.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gitguard::fuzz_one(data);
});
