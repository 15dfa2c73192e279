//! One fuzzing step for the config file reader, shared by the `config` target in `fuzz/`
//! (libFuzzer) and the CI test over `fuzz/corpus/config/` (`tests/fuzz.rs`). Any bytes go
//! through [`parse_layer`] as a project file's contents would, and every outcome is
//! checked against what the rest of agent-sandbox relies on: no panic; an error is
//! `Invalid` with a `line:column` inside the text; a parsed layer's origins point at the
//! values they record; `config show` renders it; and the effective configuration,
//! written back as plain JSON, reads back as the same values.

use std::path::Path;
use std::sync::LazyLock;

use crate::{defaults, merge, parse_layer, Config, ConfigError, Layer, LayerKind, Location, Sourced};

const PATH: &str = "/project/.agent-sandbox/config.jsonc";

/// The built-in layer, parsed once rather than per input.
static DEFAULTS: LazyLock<Layer> = LazyLock::new(defaults);

/// Parses `data` as one config file and asserts the invariants above; a violated one
/// panics. Bytes that are not UTF-8 never reach the parser from a file (`read_layer` reads
/// the file as a `String`), so they are parsed with U+FFFD in their place, which keeps a
/// mutation that breaks one character useful.
#[doc(hidden)]
pub fn fuzz_one(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let lines = Lines::new(&text);
    match parse_layer(&text, Path::new(PATH), LayerKind::Project) {
        Err(ConfigError::Invalid { path, line, column, message }) => {
            assert_eq!(path, Path::new(PATH), "the error names the file");
            assert!(!message.is_empty(), "the error says what is wrong at {line}:{column}");
            lines.position(line, column).unwrap_or_else(|| panic!("error at {line}:{column} is outside the text"));
        }
        Err(other) => panic!("parse_layer can only fail with Invalid, got {other:?}"),
        Ok(layer) => {
            check_origins(&layer, &lines);
            let shown = merge(vec![DEFAULTS.clone(), layer.clone()]);
            let _ = shown.to_text();
            let _ = serde_json::to_string(&shown.to_json()).expect("config show --json serialises");
            check_round_trip(&merge(vec![layer]));
        }
    }
}

/// The text's lines as jsonc-parser counts them for its errors: `\n` and a lone `\r`
/// end a line (a `\r` before `\n` is the line's last character).
struct Lines {
    /// Each line's characters.
    lines: Vec<Vec<char>>,
}

impl Lines {
    fn new(text: &str) -> Lines {
        let mut lines = vec![Vec::new()];
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\n' || (c == '\r' && chars.peek() != Some(&'\n')) {
                lines.push(Vec::new());
            } else if let Some(line) = lines.last_mut() {
                line.push(c);
            }
        }
        Lines { lines }
    }

    /// The character at 1-based `line:column`, or `'\n'` just past the end of a line;
    /// `None` when the position is not in the text.
    fn position(&self, line: usize, column: usize) -> Option<char> {
        let chars = self.lines.get(line.checked_sub(1)?)?;
        let idx = column.checked_sub(1)?;
        chars.get(idx).copied().or((idx == chars.len()).then_some('\n'))
    }
}

/// Every value remembers the file and the position where it starts: a string's opening
/// quote, a boolean's first letter.
fn check_origins(layer: &Layer, lines: &Lines) {
    let check = |origin: &crate::Origin, first: &[char], what: &str| {
        let Location::File { path, line, column } = &origin.location else {
            panic!("{what} in a file layer has origin {origin}");
        };
        assert_eq!(path, Path::new(PATH), "{what}: the origin names the file");
        let found = lines.position(*line, *column);
        assert!(
            found.is_some_and(|c| first.contains(&c)),
            "{what}: origin {line}:{column} points at {found:?}, not at the value"
        );
    };
    let strings = |items: &[Sourced<String>], what: &str| {
        for item in items {
            assert!(!item.value.is_empty(), "{what}: empty strings are refused");
            check(&item.origin, &['"'], what);
        }
    };
    strings(&layer.presets, "filesystem.presets");
    strings(&layer.ro, "filesystem.ro");
    strings(&layer.rw, "filesystem.rw");
    strings(&layer.exclude, "filesystem.exclude");
    strings(&layer.secret_patterns, "secrets.patterns");
    strings(&layer.secret_allow, "secrets.allow");
    strings(&layer.env_secret_patterns, "env.secretPatterns");
    strings(&layer.env_allow, "env.allow");
    strings(&layer.env_block, "env.block");
    strings(&layer.check_commands, "checks.commands");
    strings(&layer.protected_paths, "checks.protectedPaths");
    strings(&layer.tools_disallowed, "tools.disallowed");
    if let Some(network) = &layer.network {
        check(&network.origin, &['"'], "network");
    }
    for (name, rule) in &layer.commands {
        assert!(crate::check_command_name(name).is_ok(), "commands: {name:?} was accepted as a command name");
        check(&rule.origin, &['"', 't', 'f'], "commands");
    }
    for (flag, what) in [
        (&layer.git_allow_branch_deletion, "git.allowBranchDeletion"),
        (&layer.git_allow_plumbing_commits, "git.allowPlumbingCommits"),
        (&layer.git_verified_push, "git.verifiedPush"),
        (&layer.git_session_repository, "git.sessionRepository"),
        (&layer.check_humans, "checks.humans"),
        (&layer.tools_read_only, "tools.readOnly"),
    ] {
        if let Some(flag) = flag {
            check(&flag.origin, &['t', 'f'], what);
        }
    }
}

/// `config show --json` with the origins dropped is itself a config file; reading it
/// back gives the same configuration.
fn check_round_trip(config: &Config) {
    let values = without_origins(config.to_json());
    let text = serde_json::to_string_pretty(&values).expect("a JSON value serialises");
    let layer = parse_layer(&text, Path::new(PATH), LayerKind::Project)
        .unwrap_or_else(|err| panic!("the written-back configuration does not read: {err}\n{text}"));
    let again = without_origins(merge(vec![layer]).to_json());
    assert_eq!(again, values, "the written-back configuration reads differently:\n{text}");
}

/// Replaces every `{ "value": v, "from": origin }` by `v`.
fn without_origins(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(mut object)
            if object.len() == 2
                && object.contains_key("value")
                && object.get("from").is_some_and(Value::is_string) =>
        {
            object.remove("value").map_or(Value::Null, without_origins)
        }
        Value::Object(object) => Value::Object(object.into_iter().map(|(k, v)| (k, without_origins(v))).collect()),
        Value::Array(items) => Value::Array(items.into_iter().map(without_origins).collect()),
        other => other,
    }
}
