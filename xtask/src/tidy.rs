//! Checks of the source tree that run as tests (`cargo test -p xtask`, so in every
//! `cargo xtask test`): host crates run git, or open a repository with gix, only where
//! ARCHITECTURE.md's list of host-side readers says it is safe. A new call elsewhere
//! fails here until it is listed, with the rule it follows: the agent writes the
//! project's `.git`, and git on the host follows its links, runs its fsmonitor and
//! reads its `commondir`.
//!
//! And `crates/session` stays a pipeline of short stages: no function there is longer
//! than [`MAX_FN_LINES`]; ARCHITECTURE.md stays a map of at most 300 lines; and every
//! crate whose sources use no `unsafe` forbids it.

/// What counts as running git or opening a repository.
const GIT_CALLS: &[&str] = &[
    "Command::new(\"git\")",
    "Command::new(git",
    "Command::new(&git",
    "Command::new(self.git",
    "Command::new(&self.git",
    "Command::new(&config.git",
    "CONTAINER_REAL_GIT)",
    "gix::open(",
    "gix::discover(",
    "ThreadSafeRepository::",
    "gix::index::File::at(",
];

/// Crates whose code runs inside the sandbox or never touches the host's files.
const NOT_HOST: &[&str] = &["crates/inside/", "crates/vsandbox/", "crates/vsh/", "xtask/", "fuzz/"];

/// Each file allowed to run git or open a repository on the host, and why that is
/// safe (ARCHITECTURE.md, "Host-side readers of what the agent wrote").
const ALLOWED: &[(&str, &str)] = &[
    ("crates/gitfacts/src/lib.rs", "gix at exec's start, after the session check, and ref tips at exit (bounded)"),
    (
        "crates/dockerbox/src/workspace.rs",
        "git config --file of the workspace's .git/config (hooksPath, origin), before a container runs",
    ),
    ("crates/session/src/index.rs", "the index, opened only once open_regular found a plain file"),
    ("crates/hostpush/src/mirror.rs", "git in agent-sandbox's own mirror; the reader runs in the view"),
    ("crates/hostpush/src/service.rs", "the project's remotes at the start; git --exec-path; pushes from the mirror"),
    ("crates/hostpush/src/verify.rs", "root's git in root's mirror; the reader as agent-sandbox-check"),
    (
        "crates/hostpush/src/home.rs",
        "root's git in root's mirror and the user's .git; the reader as agent-sandbox-check",
    ),
    ("crates/hostpush/src/adopt.rs", "git adopt: the user's own git on the user's repository, run by the user"),
    ("crates/hookguard/src/lib.rs", "git in the mirror's worktree (host mode) or inside the sandbox"),
    ("src/cli.rs", "hooks install, run by the user on their repository: rev-parse runs nothing of it"),
];

/// The calls in `text` (a file's code before its tests module), as `line: code`.
pub fn git_calls(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let code = line.trim();
        if code.starts_with("//") {
            continue;
        }
        if GIT_CALLS.iter().any(|call| code.contains(call)) {
            found.push(format!("{}: {code}", index + 1));
        }
    }
    found
}

/// Every call in a host crate's file that [`ALLOWED`] does not list, as `file:line: code`.
pub fn unlisted_git_calls(root: &std::path::Path) -> Vec<String> {
    let mut files = Vec::new();
    collect_rs(&root.join("crates"), &mut files);
    collect_rs(&root.join("src"), &mut files);
    let mut unlisted = Vec::new();
    for file in files {
        let rel = file.strip_prefix(root).unwrap_or(&file).to_string_lossy().into_owned();
        let test_file = rel.contains("/tests/") || rel.ends_with("tests.rs") || rel.ends_with("_tests.rs");
        if test_file || NOT_HOST.iter().any(|prefix| rel.starts_with(prefix)) {
            continue;
        }
        if ALLOWED.iter().any(|(allowed, _)| *allowed == rel) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        unlisted.extend(git_calls(&text).into_iter().map(|call| format!("{rel}:{call}")));
    }
    unlisted
}

/// The longest a function may be, from its `fn` line to its closing brace: `exec` is a
/// pipeline of named stages, each a few short functions, and the rest of the code
/// follows, but for the functions [`LONG_ALLOWED`] names.
pub const MAX_FN_LINES: usize = 80;

/// The functions over [`MAX_FN_LINES`] when the rule reached every crate (file:name):
/// each is split when next touched, and the list only shrinks.
pub const LONG_ALLOWED: &[&str] = &[
    "crates/config/src/parse.rs:parse_layer",
    "crates/devcontainer/src/lib.rs:plan",
    "crates/devcontainer/src/risks.rs:risks",
    "crates/dockerbox/src/engine.rs:exec",
    "crates/dockerbox/src/plan.rs:plan",
    "crates/firewall/src/serve.rs:start",
    "crates/gitguard/src/commands.rs:push",
    "crates/gitguard/src/global.rs:handle_options",
    "crates/hookguard/src/lib.rs:scan_staged",
    "crates/hookguard/src/lib.rs:check_commit",
    "crates/hookinstall/src/install.rs:uninstall",
    "crates/hostpush/src/home/bring.rs:bring",
    "crates/hostpush/src/home/exec.rs:sync",
    "crates/hostpush/src/home/exec.rs:bring_modules",
    "crates/hostpush/src/home.rs:seed_with",
    "crates/hostpush/src/home.rs:run_sync",
    "crates/hostpush/src/plan.rs:plan",
    "crates/hostpush/src/verify.rs:verify",
    "crates/inside/src/git.rs:guard",
    "crates/policy/src/lib.rs:resolve",
    "crates/policy/src/settings.rs:redact",
    "crates/sandbox/src/commands.rs:wrap",
    "crates/sandbox/src/plan.rs:bwrap_args",
    "crates/sandbox/src/run.rs:run",
    "crates/secrets/src/scan.rs:list",
    "crates/session-repo/src/sync.rs:decide_one",
    "crates/vsandbox/src/builtins.rs:grep",
    "crates/vsandbox/src/curl.rs:request",
    "crates/vsandbox/src/parse.rs:lex",
    "src/cli.rs:main",
    "xtask/src/bench.rs:bench_in",
    "xtask/src/bench.rs:docker_bench",
    "xtask/src/bench_home.rs:session_bench",
];

/// The functions of `text` (a file's code before its tests module: a table test is as
/// long as its table) longer than `limit` lines, as `line: name (n lines)`.
pub fn long_functions(text: &str, limit: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().take_while(|line| !line.starts_with("#[cfg(test)]")).collect();
    let mut found = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        if let Some(end) = body_end(&lines[index..]) {
            if end + 1 > limit {
                found.push(format!("{}: {name} ({} lines)", index + 1, end + 1));
            }
        }
    }
    found
}

/// The name of the function a line declares (`pub(crate) async fn name<T>(`).
fn fn_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    if rest.starts_with("//") {
        return None;
    }
    for prefix in ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// The index (in `lines`) of the line that closes the body opened after `lines[0]`'s
/// `fn`; `None` for a declaration without a body. Braces in strings, character literals
/// and line comments do not count.
fn body_end(lines: &[&str]) -> Option<usize> {
    let mut depth = 0usize;
    let mut opened = false;
    let mut in_string = false;
    for (index, line) in lines.iter().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut at = 0;
        while at < chars.len() {
            let c = chars[at];
            match c {
                '\\' if in_string => at += 1,
                '"' => in_string = !in_string,
                _ if in_string => {}
                '/' if chars.get(at + 1) == Some(&'/') => break,
                // A character literal ('{', '\''), not a lifetime.
                '\'' if chars.get(at + 1) == Some(&'\\') => at += 3,
                '\'' if chars.get(at + 2) == Some(&'\'') => at += 2,
                ';' if !opened => return None,
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => {
                    depth = depth.saturating_sub(1);
                    if opened && depth == 0 {
                        return Some(index);
                    }
                }
                _ => {}
            }
            at += 1;
        }
    }
    None
}

/// Every function in the workspace's sources (`crates/*/src`, `src`, `xtask/src`; not
/// `tests/`, where a table is as long as it is) longer than [`MAX_FN_LINES`], as
/// `file:line: name (n lines)`.
pub fn long_functions_in(root: &std::path::Path) -> Vec<String> {
    let mut files = Vec::new();
    if let Ok(crates) = std::fs::read_dir(root.join("crates")) {
        for krate in crates.flatten() {
            collect_rs(&krate.path().join("src"), &mut files);
        }
    }
    collect_rs(&root.join("src"), &mut files);
    collect_rs(&root.join("xtask/src"), &mut files);
    files.sort();
    let mut long = Vec::new();
    for file in files {
        let rel = file.strip_prefix(root).unwrap_or(&file).to_string_lossy().into_owned();
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        long.extend(long_functions(&text, MAX_FN_LINES).into_iter().map(|found| format!("{rel}:{found}")));
    }
    long
}

/// Where a refusal is defined or its sentence written out (`struct Refusal`, a string
/// with `Instead:`) outside `util::refusal` and gitguard's richer refusal, in the
/// workspace's sources before their tests: `file:line`.
pub fn refusals_outside_util(root: &std::path::Path) -> Vec<String> {
    let mut files = Vec::new();
    if let Ok(crates) = std::fs::read_dir(root.join("crates")) {
        for krate in crates.flatten() {
            collect_rs(&krate.path().join("src"), &mut files);
        }
    }
    collect_rs(&root.join("src"), &mut files);
    files.sort();
    let allowed = ["crates/util/src/refusal.rs", "crates/gitguard/src/lib.rs"];
    let mut found = Vec::new();
    for file in files {
        let rel = file.strip_prefix(root).unwrap_or(&file).to_string_lossy().into_owned();
        if allowed.contains(&rel.as_str()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        for (index, line) in text.lines().take_while(|line| !line.starts_with("#[cfg(test)]")).enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("struct Refusal") || code.contains("Instead: ") {
                found.push(format!("{rel}:{}", index + 1));
            }
        }
    }
    found
}

/// Whether a line of Rust uses `unsafe` as code (a block, a function, an impl, an extern
/// block or an unsafe attribute), not in a comment.
pub fn uses_unsafe(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or("");
    ["unsafe {", "unsafe fn", "unsafe impl", "unsafe extern", "#[unsafe("].iter().any(|form| code.contains(form))
}

/// The crates under `crates/` whose sources (tests and examples included) use no
/// `unsafe` and whose `lib.rs` does not say `#![forbid(unsafe_code)]`.
pub fn crates_that_should_forbid_unsafe(root: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root.join("crates")) else { return vec!["crates/ unreadable".into()] };
    let mut missing = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        let mut files = Vec::new();
        collect_rs(&dir, &mut files);
        let uses =
            files.iter().any(|file| std::fs::read_to_string(file).is_ok_and(|text| text.lines().any(uses_unsafe)));
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap_or_default();
        if !uses && !lib.lines().any(|line| line == "#![forbid(unsafe_code)]") {
            missing.push(dir.strip_prefix(root).unwrap_or(&dir).display().to_string());
        }
    }
    missing.sort();
    missing
}

fn collect_rs(dir: &std::path::Path, files: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => collect_rs(&path, files),
            Ok(kind) if kind.is_file() && path.extension().is_some_and(|ext| ext == "rs") => files.push(path),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_crates_run_git_only_where_architecture_lists_it() {
        let unlisted = unlisted_git_calls(&crate::root());
        assert!(
            unlisted.is_empty(),
            "git run (or a repository opened) on the host outside the listed readers; run it in the reader's \
             view (hostpush::mirror::view_prefix) or list the file in xtask/src/tidy.rs and ARCHITECTURE.md with \
             the rule it follows:\n{}",
            unlisted.join("\n")
        );
        let architecture = std::fs::read_to_string(crate::root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
        let readers = architecture
            .split("\n## Host-side readers of what the agent wrote\n")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("ARCHITECTURE.md has the section \"Host-side readers of what the agent wrote\"");
        for (file, _) in ALLOWED {
            assert!(
                readers.lines().any(|line| line.starts_with(&format!("| `{file}` |"))),
                "ARCHITECTURE.md's table of host-side readers has no row for {file}"
            );
        }
    }

    #[test]
    fn every_crate_without_unsafe_forbids_it() {
        let missing = crates_that_should_forbid_unsafe(&crate::root());
        assert!(
            missing.is_empty(),
            "crates whose sources use no unsafe: add #![forbid(unsafe_code)] to their lib.rs, so none creeps in:\n{}",
            missing.join("\n")
        );
    }

    #[test]
    fn unsafe_is_seen_in_code_not_in_comments() {
        assert!(uses_unsafe("    unsafe { libc::kill(pid, 9) };"));
        assert!(uses_unsafe("pub unsafe fn raw() {}"));
        assert!(uses_unsafe("unsafe impl Send for Thing {}"));
        assert!(!uses_unsafe("// SAFETY: unsafe { is fine here }"));
        assert!(!uses_unsafe("#![forbid(unsafe_code)]"));
        assert!(!uses_unsafe("let unsafe_count = 1;"));
    }

    /// ARCHITECTURE.md stays a map (bird's eye view, codemap, invariants, boundaries):
    /// per-file detail goes into the files' `//!` docs.
    #[test]
    fn architecture_stays_a_map() {
        let architecture = std::fs::read_to_string(crate::root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
        let lines = architecture.lines().count();
        assert!(lines <= 300, "ARCHITECTURE.md has {lines} lines (at most 300: move per-file detail into //! docs)");
        for section in ["## Bird's eye view", "## Codemap", "## Invariants", "## Boundaries"] {
            assert!(architecture.lines().any(|line| line == section), "ARCHITECTURE.md lacks {section}");
        }
    }

    #[test]
    fn the_scanner_finds_each_form_and_skips_comments_and_tests() {
        let text = "fn a() {\n    let out = Command::new(\"git\").arg(\"status\");\n    // Command::new(\"git\") in \
                    a comment\n    let repo = gix::open(dir)?;\n    Command::new(&self.git);\n}\n#[cfg(test)]\nmod \
                    tests {\n    Command::new(\"git\");\n}\n";
        assert_eq!(
            git_calls(text),
            [
                "2: let out = Command::new(\"git\").arg(\"status\");",
                "4: let repo = gix::open(dir)?;",
                "5: Command::new(&self.git);"
            ]
        );
        assert_eq!(git_calls("Command::new(\"ls\");\n"), Vec::<String>::new());
    }

    #[test]
    fn functions_are_short() {
        let long = long_functions_in(&crate::root());
        let key = |found: &String| {
            let (file, rest) = found.split_once(':').unwrap_or_default();
            let name = rest.split_once(": ").map_or("", |(_, rest)| rest.split(' ').next().unwrap_or(""));
            format!("{file}:{name}")
        };
        let unlisted: Vec<&String> = long.iter().filter(|found| !LONG_ALLOWED.contains(&key(found).as_str())).collect();
        assert!(
            unlisted.is_empty(),
            "functions longer than {MAX_FN_LINES} lines: split each into named steps (the stages in \
             crates/session/src/stages/ show the shape):\n{}",
            unlisted.iter().map(|found| found.as_str()).collect::<Vec<_>>().join("\n")
        );
        let stale: Vec<&&str> =
            LONG_ALLOWED.iter().filter(|allowed| !long.iter().any(|found| key(found) == **allowed)).collect();
        assert!(stale.is_empty(), "no longer long, so off the list: {stale:?}");
        assert!(LONG_ALLOWED.len() < 35, "the list only shrinks");
        assert!(!LONG_ALLOWED.iter().any(|allowed| allowed.starts_with("crates/session/")), "crates/session has none");
    }

    #[test]
    fn every_refusal_is_util_refusal() {
        let found = refusals_outside_util(&crate::root());
        assert!(
            found.is_empty(),
            "a refusal of its own, or its sentence written out: use util::refusal (Refusal, refuse, sentence):\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn the_length_scan_counts_from_fn_to_its_closing_brace() {
        let body = |lines: usize| (0..lines).map(|_| "    let x = 1;\n").collect::<String>();
        let text = format!(
            "pub(crate) fn short() {{\n{}}}\nfn long<'a>(a: &'a str) -> char {{\n    let s = \"}}\\\"{{\"; // }}\n    let \
             c = '{{';\n{}    c\n}}\ntrait T {{\n    fn declared(&self);\n}}\n#[cfg(test)]\nmod tests {{\nfn table() \
             {{\n{}}}\n}}\n",
            body(3),
            body(4),
            body(20)
        );
        assert_eq!(long_functions(&text, 5), ["6: long (9 lines)"]);
        assert_eq!(long_functions(&text, 9), Vec::<String>::new());
    }
}
