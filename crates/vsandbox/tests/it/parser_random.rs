//! The parser and the shell never panic, whatever the input: the CI half of the fuzz
//! target in `fuzz/` (which runs the same `vsandbox::fuzz_one` under libFuzzer).
//! Inputs are deterministic: a fixed corpus, the files of `fuzz/corpus/shell/` (glob
//! and regex heavy, the target's seed corpus) and seeded mutations of them, proptest's
//! strings, and a seeded stream of shell-heavy text.

use std::path::Path;

use proptest::prelude::*;
use util::fuzzing::Campaign;

/// Inputs that once reached every error path of the lexer and parser.
const CORPUS: &[&str] = &[
    "",
    " ",
    ";",
    ";;",
    "&&",
    "||",
    "|",
    "&",
    ">",
    ">>",
    "2>",
    "2>&1",
    "2>&",
    ">&",
    "<",
    "(",
    ")",
    "`",
    "$",
    "${",
    "${}",
    "${?}",
    "$?",
    "$(",
    "'",
    "\"",
    "\\",
    "\"\\",
    "#",
    "echo \\",
    "a\\\n",
    "echo \"$\"",
    "2>>x",
    "x 2>&1 >",
    "echo ${A}${B",
    "é ñ 中 🦀",
    "\0",
    "\u{feff}echo",
    "cd ..; cd ..; cd ../..",
    "rm -rf /",
    "find / -name '*'",
    "cat /dev/null",
    "echo $PWD$HOME$PATH$?",
    "mkdir -p a/b/c && cp -r a a/b/c",
    "mv a a/b",
    "grep -r '' /",
    "head -n -1",
    "tail -n +0",
    "head -n 99999999999999999999",
    "ls -l -a -1 -z",
    "echo *",
    "echo */*/*/*",
    "echo .* */.* [",
    "echo [!] []] [!]] [a-] [-a] [z-a] [\\]",
    "echo **/../*/../*",
    "cat /x\\ y/\\* '/x y/[z]' /é/*",
    "grep -rE '(a|b)*c{2,}' /",
    "grep -E 'a{99999}' /a/b.txt",
    "grep '\\(\\)\\{1\\}' -r /",
    "grep -e -o -w -F -r --include=* --exclude",
    "*\n*",
    "[a-\n-",
];

#[test]
fn the_corpus_parses_or_errs_without_panicking() {
    let mut sandbox = vsandbox::fuzz_sandbox(vsandbox::Config::default());
    for input in CORPUS {
        vsandbox::fuzz_one(&mut sandbox, input.as_bytes());
    }
}

/// Pieces of wildcards, bracket expressions, regular expressions and shell syntax,
/// spliced in by the mutator.
const TOKENS: &[&[u8]] = &[
    b"*",
    b"?",
    b"[",
    b"]",
    b"[!",
    b"[^",
    b"[:alpha:]",
    b"[[:",
    b":]]",
    b"-",
    b"\\",
    b"\\*",
    b"'",
    b"\"",
    b"/",
    b"..",
    b".",
    b"/*",
    b"*/",
    b".*",
    b"**",
    b"$",
    b"$D",
    b"{",
    b"}",
    b"{2,}",
    b"(",
    b")",
    b"|",
    b"\\(",
    b"\\|",
    b"+",
    b"^",
    b"\n",
    b";",
    b"&&",
    b" > ",
    b" -r ",
    b" -E ",
    b"--include=",
    b"\xff",
    b"\xc3",
    b"\0",
    b"\xc3\xa9",
];

fn campaign() -> Campaign<'static> {
    Campaign {
        corpus: Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/shell"),
        min_files: 30,
        tokens: TOKENS,
        mutations: 3_000,
        max_cut: 8,
        max_splice: 24,
    }
}

/// A fresh sandbox per input, so that one input cannot hide the next one's failure.
fn fuzz_fresh(data: &[u8]) {
    let config = vsandbox::Config { command_timeout: std::time::Duration::from_millis(200), ..Default::default() };
    vsandbox::fuzz_one(&mut vsandbox::fuzz_sandbox(config), data);
}

#[test]
fn every_shell_corpus_file_runs_without_panicking() {
    campaign().run_corpus(fuzz_fresh);
}

#[test]
fn seeded_mutations_of_the_shell_corpus_never_panic() {
    campaign().run_mutations(fuzz_fresh);
}

#[test]
fn seeded_shell_text_never_panics() {
    const PIECES: &[&str] = &[
        " ", "echo", "cat", "ls", "cd", "mkdir -p", "rm -rf", "cp -r", "mv", "grep", "find", "head", "tail", "wc",
        "touch", "export", "env", "a", "b/c", "..", "/", "'", "\"", "\\", "$", "$A", "${A}", "$?", ";", "&&", "||",
        "|", ">", ">>", "2>", "2>&1", "#", "\n", "*", "-n", "-r", "=", "A=1", "{", "}", "é", "?", "[", "]", "[!", "-",
        ".", "/*", "*/", ".*", "\\*", "'*'", "-E", "-F", "-o", "-w", "-e", "(", "|", "^", "$", "+",
    ];
    let mut sandbox = vsandbox::fuzz_sandbox(vsandbox::Config::default());
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        // xorshift64*: deterministic, so a failure reproduces.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    for _ in 0..20_000 {
        let len = (next() % 12) as usize;
        let input: String = (0..len).map(|_| PIECES[(next() % PIECES.len() as u64) as usize]).collect();
        vsandbox::fuzz_one(&mut sandbox, input.as_bytes());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut sandbox = vsandbox::fuzz_sandbox(vsandbox::Config::default());
        vsandbox::fuzz_one(&mut sandbox, &bytes);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "[ -~\n\t]{0,80}") {
        let _ = vsandbox::parse::parse(&text);
    }

    #[test]
    fn arbitrary_wildcards_never_panic(pattern in "[*?\\[\\]!^a-c./\\\\-]{0,24}", name in "[a-c.\\]\\[-]{0,12}") {
        let _ = vsandbox::glob::matches(&pattern, &name);
        let _ = vsandbox::builtins::posix_to_regex(&pattern, false);
        let _ = vsandbox::builtins::posix_to_regex(&pattern, true);
        let mut sandbox = vsandbox::fuzz_sandbox(vsandbox::Config::default());
        vsandbox::fuzz_one(&mut sandbox, format!("echo {pattern} {name}").as_bytes());
    }
}
