//! The CI half of the fuzz targets in `fuzz/`: every file of a corpus directory, then a
//! seeded stream of mutations of them (deterministic, so a failure reproduces), each fed
//! to the target's `fuzz_one`, whose assertions are the invariants.

use std::path::{Path, PathBuf};

/// How a corpus is mutated and checked.
pub struct Campaign<'a> {
    /// The corpus directory (e.g. `fuzz/corpus/config`).
    pub corpus: PathBuf,
    /// At least this many files must be there (so a moved corpus fails loudly).
    pub min_files: usize,
    /// Words spliced in by the mutator.
    pub tokens: &'a [&'a [u8]],
    pub mutations: usize,
    /// The longest range one mutation cuts out, and the longest piece it splices in.
    pub max_cut: usize,
    pub max_splice: usize,
}

impl Campaign<'_> {
    /// Runs `check` on every corpus file; panics naming the first that fails.
    pub fn run_corpus(&self, check: impl Fn(&[u8]) + std::panic::RefUnwindSafe) {
        for (path, data) in self.read_corpus() {
            let res = std::panic::catch_unwind(|| check(&data));
            assert!(res.is_ok(), "{} broke an invariant (message above)", path.display());
        }
    }

    /// Runs `check` on the seeded mutations; panics with the failing input.
    pub fn run_mutations(&self, check: impl Fn(&[u8]) + std::panic::RefUnwindSafe) {
        let corpus = self.read_corpus();
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for round in 0..self.mutations {
            let input = self.mutate(&mut rng, &corpus);
            let res = std::panic::catch_unwind(|| check(&input));
            assert!(
                res.is_ok(),
                "mutation {round} broke an invariant (message above); input: b\"{}\"",
                input.escape_ascii()
            );
        }
    }

    fn read_corpus(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let dir: &Path = &self.corpus;
        let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap_or_else(|err| panic!("reading {}: {err}", dir.display()))
            .map(|entry| {
                let path = entry.expect("a directory entry").path();
                let data = std::fs::read(&path).unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
                (path, data)
            })
            .collect();
        files.sort();
        assert!(files.len() >= self.min_files, "the corpus is in {}", dir.display());
        files
    }

    /// A corpus entry with one to four mutations: a byte flipped, a range cut out, the
    /// text truncated, a token inserted, or a piece of another entry spliced in.
    fn mutate(&self, rng: &mut XorShift, corpus: &[(PathBuf, Vec<u8>)]) -> Vec<u8> {
        let mut data = corpus[rng.below(corpus.len())].1.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(data.len() + 1);
            match rng.below(5) {
                0 if !data.is_empty() => {
                    let idx = rng.below(data.len());
                    data[idx] ^= 1 << rng.below(8);
                }
                1 => {
                    let end = (at + 1 + rng.below(self.max_cut)).min(data.len());
                    data.drain(at..end);
                }
                2 => data.truncate(at),
                3 => {
                    let token = self.tokens[rng.below(self.tokens.len())];
                    data.splice(at..at, token.iter().copied());
                }
                _ => {
                    let other = &corpus[rng.below(corpus.len())].1;
                    let start = rng.below(other.len() + 1);
                    let end = (start + rng.below(self.max_splice)).min(other.len());
                    data.splice(at..at, other[start..end].iter().copied());
                }
            }
        }
        data
    }
}

/// xorshift64*: tiny and deterministic.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}
