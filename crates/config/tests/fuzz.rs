//! The config reader keeps its invariants whatever a file holds: the CI half of the
//! `config` fuzz target in `fuzz/` (which runs the same `config::fuzz_one` under
//! libFuzzer). Inputs are deterministic: every file of `fuzz/corpus/config/`, then a
//! seeded stream of mutations of them, so a failure reproduces.

use std::path::Path;

use util::fuzzing::Campaign;

const MUTATIONS: usize = 3_000;

/// Pieces that open or close JSONC constructs, spliced in by the mutator.
const TOKENS: &[&[u8]] = &[
    b"\"",
    b"\\",
    b"\\u",
    b"\\ud800",
    b"/*",
    b"*/",
    b"//",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\n",
    b"\r",
    b"\r\n",
    b"\xef\xbb\xbf",
    b"\xff",
    b"\xc3",
    b"\xe2\x80\xa8",
    b"\0",
    b"true",
    b"false",
    b"null",
    b"1e999",
    b"-",
    b"\"network\"",
    b"\"filesystem\"",
    b"\"ro\"",
    b"\"commands\"",
    b"\"git\"",
    b"\"checks\"",
    b"\"humans\"",
    b"\"@git\"",
    b"\"on\"",
];

fn campaign() -> Campaign<'static> {
    Campaign {
        corpus: Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/config"),
        min_files: 20,
        tokens: TOKENS,
        mutations: MUTATIONS,
        max_cut: 16,
        max_splice: 64,
    }
}

#[test]
fn every_corpus_file_keeps_the_invariants() {
    campaign().run_corpus(config::fuzz_one);
}

#[test]
fn seeded_mutations_of_the_corpus_keep_the_invariants() {
    campaign().run_mutations(config::fuzz_one);
}
