//! Decides whether a path inside the project is a secret: compiles the user's secret
//! and allow globs once (with cheap fast paths for the common `name`, `prefix*`,
//! `*suffix` and `*infix*` shapes) and matches them ASCII-case-insensitively against
//! an entry's file name, or against its root-relative path for globs containing '/'.

use std::path::{Component, Path};

use glob::{MatchOptions, Pattern};

/// Glob options shared by every pattern: case-insensitive, `*` stops at '/', and a
/// leading '.' needs no literal match (so `*secret*` also catches `.secret`).
const OPTIONS: MatchOptions =
    MatchOptions { case_sensitive: false, require_literal_separator: true, require_literal_leading_dot: false };

/// A secret or allow pattern that could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    /// The pattern is empty (or only slashes).
    #[error("empty {list} pattern {pattern:?}: a pattern must name something")]
    Empty {
        /// Which list the pattern came from: "secret" or "allow".
        list: &'static str,
        /// The pattern as given.
        pattern: String,
    },
    /// The glob syntax is invalid.
    #[error("invalid {list} pattern {pattern:?}: {reason}")]
    Invalid {
        /// Which list the pattern came from: "secret" or "allow".
        list: &'static str,
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it, from the glob parser.
        reason: String,
    },
}

/// How one compiled pattern is tested. Literals are stored ASCII-lowercased.
#[derive(Debug)]
enum Test {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
    Glob(Pattern),
}

/// What a pattern is matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// The entry's file name (pattern had no '/').
    Name,
    /// The '/'-joined path relative to the scan root (pattern had a '/').
    RelPath,
}

#[derive(Debug)]
struct Compiled {
    text: String,
    target: Target,
    test: Test,
}

impl Compiled {
    fn new(raw: &str, list: &'static str) -> Result<Self, PatternError> {
        // A leading '/' anchors to the root (a path pattern); trailing '/' is dropped
        // so `secrets/` means "an entry named secrets" like `secrets`.
        let anchored = raw.starts_with('/');
        let text = raw.trim_matches('/');
        if text.is_empty() {
            return Err(PatternError::Empty { list, pattern: raw.to_owned() });
        }
        let glob = Pattern::new(text).map_err(|e| PatternError::Invalid {
            list,
            pattern: raw.to_owned(),
            reason: format!("{} at position {}", e.msg, e.pos),
        })?;
        let target = if anchored || text.contains('/') { Target::RelPath } else { Target::Name };
        Ok(Self { text: raw.to_owned(), target, test: fast_test(text).unwrap_or(Test::Glob(glob)) })
    }

    /// `rel` must be `Some` when this is a [`Target::RelPath`] pattern.
    fn is_match(&self, name: &str, rel: Option<&str>) -> bool {
        let subject = match self.target {
            Target::Name => name,
            Target::RelPath => match rel {
                Some(rel) => rel,
                None => return false,
            },
        };
        match &self.test {
            Test::Exact(lit) => subject.eq_ignore_ascii_case(lit),
            Test::Prefix(lit) => starts_with_ci(subject.as_bytes(), lit.as_bytes()),
            Test::Suffix(lit) => ends_with_ci(subject.as_bytes(), lit.as_bytes()),
            Test::Contains(lit) => contains_ci(subject.as_bytes(), lit.as_bytes()),
            Test::Glob(glob) => glob.matches_with(subject, OPTIONS),
        }
    }
}

/// A cheap equivalent of the glob when it is a literal with at most a leading and a
/// trailing `*` and no '/' (where `*` could not cross a separator anyway).
fn fast_test(text: &str) -> Option<Test> {
    let (lead, rest) = match text.strip_prefix('*') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (trail, lit) = match rest.strip_suffix('*') {
        Some(lit) => (true, lit),
        None => (false, rest),
    };
    if lit.contains(['*', '?', '[', ']', '/']) {
        return None;
    }
    let lit = lit.to_ascii_lowercase();
    Some(match (lead, trail) {
        (false, false) => Test::Exact(lit),
        (false, true) => Test::Prefix(lit),
        (true, false) => Test::Suffix(lit),
        (true, true) => Test::Contains(lit),
    })
}

/// `needle` must already be ASCII-lowercase.
fn starts_with_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len() && hay[..needle.len()].eq_ignore_ascii_case(needle)
}

/// `needle` must already be ASCII-lowercase.
fn ends_with_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len() && hay[hay.len() - needle.len()..].eq_ignore_ascii_case(needle)
}

/// `needle` must already be ASCII-lowercase.
fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

/// Compiled secret and allow globs. Cheap to share between threads.
#[derive(Debug)]
pub struct SecretMatcher {
    patterns: Vec<Compiled>,
    allow: Vec<Compiled>,
    /// Exact, case-sensitive names reported whatever they are, before the patterns and
    /// regardless of the allow-list (git's `.git`); not descended into.
    entries: Vec<String>,
    /// Exact, case-sensitive names reported when they are not directories, without
    /// stopping the scan from descending into directories of that name.
    markers: Vec<String>,
    /// Exact, case-sensitive names reported as [`COPY_PATTERN`] whatever they are, when
    /// no pattern claims them; directories of that name are still descended into.
    copies: Vec<String>,
    needs_rel_path: bool,
}

/// The pattern given for an entry named one of [`SecretMatcher::with_copies`]'s names. No
/// secret pattern has this text (a name never holds a NUL), so no secret is taken for one.
pub const COPY_PATTERN: &str = "\0copy";

impl SecretMatcher {
    /// `patterns`: globs that mark a secret; `allow`: globs that exempt a path (allow
    /// beats patterns). A glob without '/' matches an entry's file name; a glob with
    /// '/' matches the path relative to the scan root (a leading '/' only anchors it,
    /// trailing '/' is ignored). Matching is ASCII-case-insensitive, `*` does not cross
    /// '/', and `**` spans directories.
    pub fn new(patterns: &[String], allow: &[String]) -> Result<SecretMatcher, PatternError> {
        let patterns = patterns.iter().map(|p| Compiled::new(p, "secret")).collect::<Result<Vec<_>, _>>()?;
        let allow = allow.iter().map(|p| Compiled::new(p, "allow")).collect::<Result<Vec<_>, _>>()?;
        let needs_rel_path = patterns.iter().chain(&allow).any(|c| c.target == Target::RelPath);
        Ok(SecretMatcher {
            patterns,
            allow,
            entries: Vec::new(),
            markers: Vec::new(),
            copies: Vec::new(),
            needs_rel_path,
        })
    }

    /// Also reports entries named exactly one of `entries`, whatever they are and
    /// before anything else (git's `.git`), and those named exactly one of `markers`
    /// that are not directories (git's `HEAD`) unless they are secrets; the name is
    /// given as their pattern.
    #[must_use]
    pub fn with_markers(mut self, entries: &[&str], markers: &[&str]) -> SecretMatcher {
        self.entries = entries.iter().map(|name| (*name).to_owned()).collect();
        self.markers = markers.iter().map(|marker| (*marker).to_owned()).collect();
        self
    }

    /// Also reports entries named exactly one of `names` (files, directories, links),
    /// with the pattern [`COPY_PATTERN`], when nothing else claims them; the scan still
    /// descends into directories of those names.
    #[must_use]
    pub fn with_copies(mut self, names: &[&str]) -> SecretMatcher {
        self.copies = names.iter().map(|name| (*name).to_owned()).collect();
        self
    }

    /// Whether `name` is one of [`Self::with_copies`]'s names.
    pub(crate) fn is_copy(&self, name: &str) -> bool {
        self.copies.iter().any(|copy| copy == name)
    }

    /// The marker `name` is, for an entry that is not a directory.
    pub(crate) fn marker(&self, name: &str) -> Option<&str> {
        self.markers.iter().find(|marker| *marker == name).map(String::as_str)
    }

    /// `Some(pattern that matched)` if `rel_path` (relative to the root) is a secret
    /// and not allowed. `.` components are ignored; a path without a file name never
    /// matches.
    pub fn matches(&self, rel_path: &Path) -> Option<&str> {
        let mut rel = String::new();
        for component in rel_path.components() {
            match component {
                Component::Normal(part) => {
                    if !rel.is_empty() {
                        rel.push('/');
                    }
                    rel.push_str(&part.to_string_lossy());
                }
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
                Component::ParentDir => return None,
            }
        }
        let name = rel.rsplit('/').next().unwrap_or_default();
        if name.is_empty() {
            return None;
        }
        self.check(name, Some(&rel))
    }

    /// A hash of the patterns and allow-list: a scan cache made with other rules is
    /// not reused. FNV-1a: stable across runs and builds, unlike std's hasher.
    pub(crate) fn fingerprint(&self) -> u64 {
        let mut hash = util::Fnv1a::default();
        let lists = [
            ("secret", self.patterns.iter().map(|c| c.text.as_str()).collect::<Vec<_>>()),
            ("allow", self.allow.iter().map(|c| c.text.as_str()).collect()),
            ("entry", self.entries.iter().map(String::as_str).collect()),
            ("marker", self.markers.iter().map(String::as_str).collect()),
            ("copy", self.copies.iter().map(String::as_str).collect()),
        ];
        for (label, list) in lists {
            for text in std::iter::once(label).chain(list) {
                hash.write(text.as_bytes());
                hash.write(&[0]);
            }
        }
        hash.finish()
    }

    /// Whether [`Self::check`] needs the root-relative path, not just the name.
    pub(crate) fn needs_rel_path(&self) -> bool {
        self.needs_rel_path
    }

    /// Hot-path match of one entry. `rel` ('/'-joined, relative to the root) must be
    /// `Some` whenever [`Self::needs_rel_path`] is true.
    pub(crate) fn check(&self, name: &str, rel: Option<&str>) -> Option<&str> {
        if let Some(entry) = self.entries.iter().find(|entry| *entry == name) {
            return Some(entry);
        }
        let hit = self.patterns.iter().find(|c| c.is_match(name, rel))?;
        if self.allow.iter().any(|c| c.is_match(name, rel)) {
            return None;
        }
        Some(&hit.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast paths must agree with the glob crate on every shape they handle.
    #[test]
    fn fast_paths_agree_with_glob() {
        let patterns = [".env", ".env.*", "*.pem", "*secret*", "*", "**", "id_rsa", "*.", ".*", "a*", "*a"];
        let names = [
            ".env",
            ".ENV",
            ".env.",
            ".env.local",
            "x.env",
            "cert.PEM",
            "pem",
            "my_Secret.txt",
            ".secret",
            "secret",
            "id_rsa",
            "ID_RSA",
            "id_rsa.pub",
            "",
            "a",
            "ba",
            "ab",
            "é.pem",
            "É.PEM",
            "x.",
        ];
        for pat in patterns {
            let fast = fast_test(pat).expect("pattern has a fast shape");
            let compiled = Compiled { text: pat.to_owned(), target: Target::Name, test: fast };
            let glob = Pattern::new(pat).expect("valid glob");
            for name in names {
                assert_eq!(
                    compiled.is_match(name, None),
                    glob.matches_with(name, OPTIONS),
                    "pattern {pat:?} on {name:?}"
                );
            }
        }
    }

    #[test]
    fn non_fast_shapes_use_glob() {
        for pat in ["a?b", "[ab]", "a*b", "*a*b*"] {
            assert!(fast_test(pat).is_none(), "{pat}");
        }
    }
}
