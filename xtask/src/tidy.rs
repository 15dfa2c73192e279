//! Checks of the source tree that run as tests (`cargo test -p xtask`, so in every
//! `cargo xtask test`): host crates run git, or open a repository with gix, only where
//! ARCHITECTURE.md's list of host-side readers says it is safe. A new call elsewhere
//! fails here until it is listed, with the rule it follows: the agent writes the
//! project's `.git`, and git on the host follows its links, runs its fsmonitor and
//! reads its `commondir`.

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
    ("crates/dockerbox/src/lifecycle.rs", "git config --file of the user's .git/config, read-only in containers"),
    ("crates/session/src/index.rs", "the index, opened only once open_regular found a plain file"),
    ("crates/hostpush/src/mirror.rs", "git in agent-sandbox's own mirror; the reader runs in the view"),
    ("crates/hostpush/src/service.rs", "the project's remotes at the start; git --exec-path; pushes from the mirror"),
    ("crates/hostpush/src/verify.rs", "root's git in root's mirror; the reader as agent-sandbox-check"),
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
        for (file, _) in ALLOWED {
            assert!(architecture.contains(&format!("`{file}`")), "ARCHITECTURE.md's list of readers lacks {file}");
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
}
