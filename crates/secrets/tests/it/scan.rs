//! Tests for `scan` on real temporary trees: deep scattered secrets, directories
//! reported without descending, symlinks not followed, `skip`, the allow list,
//! sorted output, fail-closed errors, and a 20,000-file sanity run.

use std::fs;
use std::io;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::{default_allow, default_patterns};
use secrets::{scan, EntryKind, ScanError, SecretMatcher};

fn default_matcher() -> SecretMatcher {
    SecretMatcher::new(&default_patterns(), &default_allow()).expect("default patterns are valid")
}

fn touch(root: &Path, rel: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().expect("has parent")).expect("mkdir");
    fs::write(&path, b"x").expect("write");
}

/// `(rel_path, kind, pattern)` of each hit, after checking `path` is `root/rel_path`.
fn summary(root: &Path, hits: &[secrets::SecretHit]) -> Vec<(String, EntryKind, String)> {
    hits.iter()
        .map(|h| {
            assert_eq!(h.path, root.join(&h.rel_path));
            (h.rel_path.display().to_string(), h.kind, h.pattern.clone())
        })
        .collect()
}

/// The effective uid, without libc: files we create are owned by it.
fn running_as_root(dir: &Path) -> bool {
    let probe = dir.join(".uid-probe");
    fs::write(&probe, b"").expect("write probe");
    let uid = fs::metadata(&probe).expect("stat probe").uid();
    fs::remove_file(&probe).expect("remove probe");
    uid == 0
}

#[test]
fn finds_secrets_in_a_project_tree() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    for rel in [
        ".env",
        ".env.example",
        "README.md",
        "src/main.rs",
        "src/keyboard.rs",
        "node_modules/a/index.js",
        "node_modules/a/b/.env",
        "node_modules/a/b/c/d/server.KEY",
        "node_modules/z/package.json",
        "node_modules/z/.env.production",
        "Secrets/prod.pem",
        "Secrets/nested/.env",
        "config/app.json",
        "sub/config/app.json",
        "skipped/.env",
        "skipped/deeper/id_rsa",
    ] {
        touch(root, rel);
    }
    fs::create_dir_all(root.join("empty_dir")).expect("mkdir");
    // A dangling symlink named like a secret, and a symlink to a directory full of
    // secrets that must not be followed.
    symlink("/nonexistent/target", root.join("src/.env")).expect("symlink");
    symlink(root.join("node_modules"), root.join("linked_modules")).expect("symlink");

    let mut patterns = default_patterns();
    patterns.push("config/*.json".to_owned());
    let matcher = SecretMatcher::new(&patterns, &default_allow()).expect("valid");
    let hits = scan(root, &matcher, &[root.join("skipped")]).expect("scan");

    let expected: Vec<(String, EntryKind, String)> = [
        (".env", EntryKind::File, ".env"),
        ("Secrets", EntryKind::Dir, "*secret*"),
        ("config/app.json", EntryKind::File, "config/*.json"),
        ("node_modules/a/b/.env", EntryKind::File, ".env"),
        ("node_modules/a/b/c/d/server.KEY", EntryKind::File, "*.key"),
        ("node_modules/z/.env.production", EntryKind::File, ".env.*"),
        ("src/.env", EntryKind::Symlink, ".env"),
    ]
    .iter()
    .map(|(p, k, pat)| ((*p).to_owned(), *k, (*pat).to_owned()))
    .collect();
    assert_eq!(summary(root, &hits), expected);

    let paths: Vec<&PathBuf> = hits.iter().map(|h| &h.path).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted, "hits are sorted by path");

    let again = scan(root, &matcher, &[root.join("skipped")]).expect("scan");
    assert_eq!(hits, again, "output is deterministic");

    // Without `skip`, the skipped directory's secrets show up.
    let hits = scan(root, &matcher, &[]).expect("scan");
    let rels: Vec<String> = summary(root, &hits).into_iter().map(|h| h.0).collect();
    assert!(rels.contains(&"skipped/.env".to_owned()), "{rels:?}");
    assert!(rels.contains(&"skipped/deeper/id_rsa".to_owned()), "{rels:?}");
}

#[test]
fn skipping_the_root_finds_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    touch(tmp.path(), ".env");
    let hits = scan(tmp.path(), &default_matcher(), &[tmp.path().to_path_buf()]).expect("scan");
    assert!(hits.is_empty());
}

#[test]
fn missing_root_is_an_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("does-not-exist");
    let err = scan(&root, &default_matcher(), &[]).expect_err("missing root");
    let ScanError::Unreadable { path, error } = &err;
    assert_eq!(path, &root);
    assert_eq!(error.kind(), io::ErrorKind::NotFound);
}

#[test]
fn unreadable_error_says_what_to_do() {
    let err = ScanError::Unreadable { path: PathBuf::from("/p/x"), error: io::Error::from_raw_os_error(13) };
    assert_eq!(
        err.to_string(),
        "cannot scan /p/x for secret files: Permission denied (os error 13) \
         (fix its permissions, or exclude it with --exclude /p/x)"
    );
}

#[test]
fn unreadable_directory_fails_closed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    for i in 0..50 {
        touch(root, &format!("pkg{i}/lib/index.js"));
    }
    touch(root, "pkg7/locked/.env");
    let locked = root.join("pkg7/locked");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).expect("chmod 000");
    let result = scan(root, &default_matcher(), &[]);
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).expect("chmod back");

    if running_as_root(root) {
        println!("skipping: root can read mode-000 directories");
        let hits = result.expect("root can read everything");
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].path, locked.join(".env"));
        return;
    }
    let err = result.expect_err("mode-000 directory must fail the scan");
    let ScanError::Unreadable { path, error } = &err;
    assert_eq!(path, &locked);
    assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
    let msg = err.to_string();
    assert!(msg.contains(&format!("--exclude {}", locked.display())), "{msg}");

    // Excluding it makes the scan succeed.
    let hits = scan(root, &default_matcher(), std::slice::from_ref(&locked)).expect("scan with skip");
    assert!(hits.is_empty());
}

#[test]
fn generated_tree_of_20000_files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let mut planted = Vec::new();
    for a in 0..10 {
        for b in 0..10 {
            for c in 0..10 {
                let dir = root.join(format!("node_modules/p{a}/d{b}/e{c}"));
                fs::create_dir_all(&dir).expect("mkdir");
                for f in 0..20 {
                    fs::write(dir.join(format!("file{f}.js")), b"").expect("write");
                }
                let n = a * 100 + b * 10 + c;
                if n % 71 == 0 {
                    let name = [".env", "tls.pem", "my_secret.txt"][n % 3];
                    fs::write(dir.join(name), b"").expect("write");
                    planted.push(dir.join(name));
                }
            }
        }
    }
    planted.sort();

    let start = Instant::now();
    let hits = scan(root, &default_matcher(), &[]).expect("scan");
    println!("scanned 20,000 files in {:?}", start.elapsed());
    let found: Vec<PathBuf> = hits.into_iter().map(|h| h.path).collect();
    assert_eq!(found, planted);
}
