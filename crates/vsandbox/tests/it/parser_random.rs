//! The parser and the shell never panic, whatever the input: the CI half of the fuzz
//! target in `fuzz/` (which runs the same `vsandbox::fuzz_one` under libFuzzer).
//! Inputs are deterministic: a fixed corpus, proptest's strings, and a seeded stream of
//! shell-heavy text.

use proptest::prelude::*;

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
