//! Fuzz target: any bytes as the contents of a config file, read as `config::load` reads
//! one layer. A panic, including a broken invariant of `config::fuzz_one`, is a failure.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    config::fuzz_one(data);
});
