//! Fuzz target: any bytes as a packet to the resolver inside the sandbox, read as it
//! reads one. A panic, including a broken invariant of `inside::dns::fuzz_one`, is a
//! failure.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inside::dns::fuzz_one(data);
});
