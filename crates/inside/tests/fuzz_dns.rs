//! The resolver's packet parser keeps its invariants whatever a packet holds: the CI
//! half of the `dns` fuzz target in `fuzz/` (which runs the same `inside::dns::fuzz_one`
//! under libFuzzer). Inputs are deterministic: every file of `fuzz/corpus/dns/`, then a
//! seeded stream of mutations of them, so a failure reproduces.

use std::path::Path;

use util::fuzzing::Campaign;

const MUTATIONS: usize = 20_000;

/// Pieces of DNS messages, spliced in by the mutator: label lengths at and past the
/// limits, compression pointers, type and class words, the OPT record, counts.
const TOKENS: &[&[u8]] = &[
    b"\x00",
    b"\x3f",
    b"\x40",
    b"\x7f",
    b"\xc0\x0c",
    b"\xc0\x00",
    b"\xff\xff",
    b"\x00\x01\x00\x01",
    b"\x00\x1c\x00\x01",
    b"\x00\x10\x00\x03",
    b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00",
    b"\x00\x01\x00\x00\x00\x00\x00\x00",
    b"\x81\x80",
    b"\x01\x00",
    b"\x07allowed\x04test\x00",
];

fn campaign() -> Campaign<'static> {
    Campaign {
        corpus: Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/dns"),
        min_files: 20,
        tokens: TOKENS,
        mutations: MUTATIONS,
        max_cut: 16,
        max_splice: 32,
    }
}

#[test]
fn every_corpus_file_keeps_the_invariants() {
    campaign().run_corpus(inside::dns::fuzz_one);
}

#[test]
fn seeded_mutations_of_the_corpus_keep_the_invariants() {
    campaign().run_mutations(inside::dns::fuzz_one);
}
