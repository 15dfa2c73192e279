//! Shell wildcards: matching one name against a pattern (`*`, `?`, `[abc]`, `[a-z]`,
//! `[!x]`, `\` quoting the next character), used by `find -name` and `grep --include`,
//! and pathname expansion of the unquoted wildcards of a command word against the
//! filesystem, as sh does: the matches sorted, or the word unchanged when nothing
//! matches.
//!
//! Expansion is bounded by the node limit: it refuses a pattern that would look at more
//! names than the sandbox may hold nodes (only `..` after a wildcard, as in `*/../*`,
//! gets there), so no pattern costs more than a walk of the whole tree. Names starting
//! with `.` match only a pattern component that starts with a literal `.`.

use std::time::Instant;

use crate::fs::{self, FileSystem};

/// Why a word was not expanded; the command does not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    #[error("{pattern}: the pattern looks at more than {limit} names (the node limit); narrow it")]
    TooMany { pattern: String, limit: u64 },
    #[error("{pattern}: timed out while expanding the pattern")]
    Timeout { pattern: String },
}

/// Whether `pattern` matches the whole of `name`. Total: an unclosed `[` is a literal
/// `[`, a trailing `\` a literal `\`.
pub fn matches(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    // Iterative with one backtrack point, the last `*`: O(pattern × name) at worst.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        let step = match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
                continue;
            }
            Some('?') => Some(p + 1),
            Some('[') => class_match(&pattern, p, name[n]),
            Some('\\') if p + 1 < pattern.len() => (pattern[p + 1] == name[n]).then_some(p + 2),
            Some(&c) => (c == name[n]).then_some(p + 1),
            None => None,
        };
        match (step, star) {
            (Some(next), _) => {
                p = next;
                n += 1;
            }
            (None, Some((star_p, star_n))) => {
                p = star_p + 1;
                n = star_n + 1;
                star = Some((star_p, star_n + 1));
            }
            (None, None) => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// Whether `pattern` has a wildcard (`*`, `?`, `[`) that is not quoted by `\`.
pub fn has_wildcard(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '\\' => {
                chars.next();
            }
            '*' | '?' | '[' => return true,
            _ => {}
        }
    }
    false
}

/// `text` with `\` before each character that is special in a pattern, so that it
/// matches only itself.
pub fn escape(text: &str, into: &mut String) {
    for ch in text.chars() {
        if matches!(ch, '*' | '?' | '[' | '\\') {
            into.push('\\');
        }
        into.push(ch);
    }
}

/// The paths `pattern` names in `fs`, relative ones resolved against `cwd` but shown as
/// typed (`src/*.rs` gives `src/lib.rs`), sorted bytewise; empty when nothing matches.
/// A pattern ending in `/` matches directories only, and they keep the `/`.
pub fn expand(fs: &FileSystem, cwd: &str, pattern: &str, deadline: Instant) -> Result<Vec<String>, GlobError> {
    let limit = fs.limits().max_node_count;
    let too_many = || GlobError::TooMany { pattern: pattern.to_owned(), limit };
    let absolute = pattern.starts_with('/');
    let body = if absolute { &pattern[1..] } else { pattern };
    let dirs_only = body.ends_with('/');
    let components: Vec<&str> = body.trim_end_matches('/').split('/').collect();
    // (as shown, resolved)
    let mut found: Vec<(String, String)> =
        vec![(String::from(if absolute { "/" } else { "" }), fs::resolve(cwd, if absolute { "/" } else { "." }))];
    let mut looked_at: u64 = 0;
    for component in components {
        if Instant::now() >= deadline {
            return Err(GlobError::Timeout { pattern: pattern.to_owned() });
        }
        if !has_wildcard(component) {
            let literal = unescape(component);
            for (shown, resolved) in &mut found {
                join(shown, &literal);
                *resolved = fs::resolve(resolved, &literal);
            }
            continue;
        }
        let hidden_ok = component.starts_with('.') || component.starts_with("\\.");
        let mut next = Vec::new();
        for (shown, resolved) in &found {
            let Ok(entries) = fs.read_dir(resolved) else { continue };
            looked_at += entries.len() as u64;
            if looked_at > limit {
                return Err(too_many());
            }
            for (name, _) in entries {
                if (hidden_ok || !name.starts_with('.')) && matches(component, &name) {
                    let mut shown = shown.clone();
                    join(&mut shown, &name);
                    next.push((shown, fs::resolve(resolved, &name)));
                }
            }
        }
        found = next;
        if found.is_empty() {
            return Ok(Vec::new());
        }
    }
    let mut paths: Vec<String> = found
        .into_iter()
        .filter(|(_, resolved)| if dirs_only { fs.is_dir(resolved) } else { fs.exists(resolved) })
        .map(|(shown, _)| if dirs_only { format!("{shown}/") } else { shown })
        .collect();
    paths.sort_unstable();
    paths.dedup();
    Ok(paths)
}

/// Appends one component to a path as typed.
fn join(shown: &mut String, component: &str) {
    if !shown.is_empty() && !shown.ends_with('/') {
        shown.push('/');
    }
    shown.push_str(component);
}

fn unescape(component: &str) -> String {
    let mut out = String::with_capacity(component.len());
    let mut chars = component.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '\\' => out.push(chars.next().unwrap_or('\\')),
            ch => out.push(ch),
        }
    }
    out
}

/// Matches `ch` against the class opening at `pattern[open] == '['`; the index after
/// the class when it matches. An unclosed `[` is a literal; `]` first in the class is a
/// member; `\` quotes the next character.
fn class_match(pattern: &[char], open: usize, ch: char) -> Option<usize> {
    let mut i = open + 1;
    let negate = matches!(pattern.get(i), Some('!' | '^'));
    if negate {
        i += 1;
    }
    let start = i;
    let mut hit = false;
    while i < pattern.len() && (pattern[i] != ']' || i == start) {
        let (low, after) = match pattern[i] {
            '\\' if i + 1 < pattern.len() => (pattern[i + 1], i + 2),
            c => (c, i + 1),
        };
        if pattern.get(after) == Some(&'-') && pattern.get(after + 1).is_some_and(|&c| c != ']') {
            let (high, end) = match pattern[after + 1] {
                '\\' if after + 2 < pattern.len() => (pattern[after + 2], after + 3),
                c => (c, after + 2),
            };
            hit |= (low..=high).contains(&ch);
            i = end;
        } else {
            hit |= low == ch;
            i = after;
        }
    }
    if i >= pattern.len() {
        return (ch == '[').then_some(open + 1);
    }
    (hit != negate).then_some(i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_names() {
        for (pattern, name, want) in [
            ("*.rs", "main.rs", true),
            ("*.rs", "main.rsx", false),
            ("m??n.*", "main.rs", true),
            ("[ab]*", "bcd", true),
            ("[!ab]*", "bcd", false),
            ("[^ab]*", "xcd", true),
            ("[a-c]x", "bx", true),
            ("[a-c]x", "dx", false),
            ("[]a]", "]", true),
            ("[!]]", "]", false),
            ("*", "", true),
            ("?", "", false),
            ("?", "é", true),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("[", "[", true),
            ("a[", "a[", true),
            ("a[b", "a[b", true),
            ("\\*", "*", true),
            ("\\*", "x", false),
            ("a\\?", "a?", true),
            ("\\[ab]", "[ab]", true),
            ("[\\]]", "]", true),
            ("x\\", "x\\", true),
            ("*a*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false),
        ] {
            assert_eq!(matches(pattern, name), want, "{pattern} ~ {name}");
        }
    }

    #[test]
    fn wildcards_are_found_unless_quoted() {
        for (pattern, want) in
            [("a*", true), ("a?", true), ("[a]", true), ("a\\*", false), ("abc", false), ("\\[", false)]
        {
            assert_eq!(has_wildcard(pattern), want, "{pattern}");
        }
        let mut escaped = String::new();
        escape("a*b?[c]\\", &mut escaped);
        assert_eq!(escaped, "a\\*b\\?\\[c]\\\\");
        assert!(matches(&escaped, "a*b?[c]\\"));
    }
}
