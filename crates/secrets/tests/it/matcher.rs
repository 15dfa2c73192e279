//! Table-driven tests for `SecretMatcher`: the default patterns and allow list,
//! case-insensitivity, name versus root-relative '/' globs, and pattern errors.

use std::path::Path;

use crate::{default_allow, default_patterns};
use secrets::{PatternError, SecretMatcher};

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn matcher_table() {
    let mut patterns = default_patterns();
    patterns.push("config/*.json".to_owned());
    let mut allow = default_allow();
    allow.push("fixtures/**".to_owned());
    let matcher = SecretMatcher::new(&patterns, &allow).expect("valid patterns");

    let cases: &[(&str, Option<&str>)] = &[
        (".env", Some(".env")),
        ("sub/.env", Some(".env")),
        ("./sub/.env", Some(".env")),
        (".ENV", Some(".env")),
        (".env.local", Some(".env.*")),
        (".env.example", None),
        ("sub/.ENV.Example", None),
        ("config/prod.pem", Some("*.pem")),
        ("server.key", Some("*.key")),
        ("aws_credentials.json", Some("*credentials*")),
        ("Secrets.yaml", Some("*secret*")),
        ("my_SECRET.txt", Some("*secret*")),
        ("Secrets", Some("*secret*")),
        ("home/.ssh/id_ed25519", Some("id_ed25519")),
        ("id_rsa.pub", None),
        ("keyboard.rs", None),
        ("environment.ts", None),
        ("src/main.rs", None),
        ("config/app.json", Some("config/*.json")),
        ("CONFIG/App.JSON", Some("config/*.json")),
        ("sub/config/app.json", None),
        ("config/nested/app.json", None),
        ("fixtures/certs/test.pem", None),
        ("", None),
        ("..", None),
    ];
    for (path, expected) in cases {
        assert_eq!(matcher.matches(Path::new(path)), *expected, "path {path:?}");
    }
}

#[test]
fn leading_and_trailing_slashes() {
    let matcher = SecretMatcher::new(&strings(&["/top.txt", "vault/"]), &[]).expect("valid");
    let cases: &[(&str, Option<&str>)] = &[
        ("top.txt", Some("/top.txt")),
        ("sub/top.txt", None),
        ("vault", Some("vault/")),
        ("sub/Vault", Some("vault/")),
    ];
    for (path, expected) in cases {
        assert_eq!(matcher.matches(Path::new(path)), *expected, "path {path:?}");
    }
}

#[test]
fn pattern_errors_name_the_pattern() {
    let err = SecretMatcher::new(&strings(&[".env", "[abc"]), &[]).expect_err("invalid glob");
    assert!(matches!(&err, PatternError::Invalid { pattern, .. } if pattern == "[abc"));
    let msg = err.to_string();
    assert!(msg.starts_with("invalid secret pattern \"[abc\": "), "{msg}");

    let err = SecretMatcher::new(&[], &strings(&["***"])).expect_err("invalid glob");
    assert!(err.to_string().starts_with("invalid allow pattern \"***\""), "{err}");

    for empty in ["", "/", "//"] {
        let err = SecretMatcher::new(&strings(&[empty]), &[]).expect_err("empty pattern");
        assert!(matches!(&err, PatternError::Empty { pattern, .. } if pattern == empty));
    }
}
