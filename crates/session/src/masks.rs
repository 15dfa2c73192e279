//! Which secret files the sandbox hides, and why each is or is not hidden: a pure
//! function of the scan's hits, what the index says of them ([`Committed`], gathered by
//! `index.rs`) and the policy's mounts. Table-tested below without bwrap.

use std::path::PathBuf;

use policy::{Kind, Mount};
use sandbox::plan::Mask;
use secrets::{EntryKind, SecretHit};

/// Directories of installed dependencies and build output, which package managers and
/// build tools delete and rewrite wholesale.
pub const DEPENDENCY_TREES: &[&str] = &["node_modules", "target", ".venv", "vendor"];

/// What the repository says of a hit, in process: see `index::committed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// No repository, or its index could not be read: mask.
    Unknown,
    /// A file: whether its bytes are exactly its stage-0 index blob.
    File(bool),
    /// A directory: each file inside (relative to the project root) and whether it is.
    Dir(Vec<(PathBuf, bool)>),
}

/// One hit with the facts the decision needs.
#[derive(Debug, Clone)]
pub struct HitFacts {
    pub hit: SecretHit,
    pub committed: Committed,
    /// For a symlink: its resolved target and whether that is a directory.
    pub target: Option<(PathBuf, bool)>,
}

/// A mask and the hit (by its path and pattern) that asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Masked {
    pub mask: Mask,
    /// The entry the scan found (for a symlink: the link, `mask.path` is its target).
    pub found: PathBuf,
    pub pattern: String,
}

/// The masks, sorted parents first, and one note per decision.
pub fn decide(facts: &[HitFacts], mounts: &[Mount]) -> (Vec<Masked>, Vec<String>) {
    let mut notes = Vec::new();
    let mut masks: Vec<Masked> = Vec::new();
    // Each path once (the first hit asking for it wins); a set, not a scan of the list:
    // a big tree has a thousand `.env` files.
    let mut seen: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    let mut add = |mask: Mask, found: &std::path::Path, hit: &SecretHit, notes: &mut Vec<String>| {
        notes.push(format!("secret {} masked (matches {})", mask.path.display(), hit.pattern));
        if seen.insert(mask.path.clone()) {
            masks.push(Masked { mask, found: found.to_path_buf(), pattern: hit.pattern.clone() });
        }
    };
    for fact in facts {
        let hit = &fact.hit;
        let rel = hit.rel_path.display();
        // Found in a dependency tree by a wildcard (`*secret*` matching a package's
        // `client-secret.js`): masked, it makes `npm ci` or `cargo clean` fail with EBUSY.
        // Exact names (`.env`, `id_rsa`) stay masked there too.
        let in_tree =
            hit.rel_path.components().any(|part| DEPENDENCY_TREES.iter().any(|tree| part.as_os_str() == *tree));
        if in_tree && hit.pattern.starts_with('*') {
            notes.push(format!("secret {rel}: in a dependency or build tree, not masked"));
            continue;
        }
        match (&hit.kind, &fact.committed) {
            // Its content is in `.git` for anyone to read; masking it only makes
            // `git commit -a` record it empty.
            (EntryKind::File, Committed::File(true)) => {
                notes.push(format!("secret {rel}: its exact content is committed to git, not masked"));
            }
            (EntryKind::Dir, Committed::Dir(files)) if files.iter().any(|(_, committed)| *committed) => {
                notes.push(format!("secret {rel}/: holds committed files, masking only its others"));
                for (file, _) in files.iter().filter(|(_, committed)| !committed) {
                    let path = root_of(hit).join(file);
                    add(Mask { path: path.clone(), kind: Kind::File }, &path, hit, &mut notes);
                }
            }
            (EntryKind::Dir, _) => add(Mask { path: hit.path.clone(), kind: Kind::Dir }, &hit.path, hit, &mut notes),
            (EntryKind::File | EntryKind::Other, _) => {
                add(Mask { path: hit.path.clone(), kind: Kind::File }, &hit.path, hit, &mut notes)
            }
            (EntryKind::Symlink, _) => match &fact.target {
                Some((target, is_dir)) if policy::is_visible(target, mounts) => {
                    let kind = if *is_dir { Kind::Dir } else { Kind::File };
                    add(Mask { path: target.clone(), kind }, &hit.path, hit, &mut notes);
                }
                _ => notes.push(format!("secret {}: symlink to nothing visible, nothing to mask", hit.path.display())),
            },
        }
    }
    masks.sort_by(|a, b| {
        let (a, b) = (&a.mask.path, &b.mask.path);
        a.components().count().cmp(&b.components().count()).then(a.cmp(b))
    });
    (masks, notes)
}

/// The scan root of `hit` (its path less its relative path).
fn root_of(hit: &SecretHit) -> PathBuf {
    let depth = hit.rel_path.components().count();
    let mut root = hit.path.clone();
    for _ in 0..depth {
        root.pop();
    }
    root
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn hit(rel: &str, kind: EntryKind, pattern: &str) -> SecretHit {
        SecretHit { path: Path::new("/p").join(rel), rel_path: rel.into(), kind, pattern: pattern.into() }
    }

    fn fact(rel: &str, kind: EntryKind, pattern: &str, committed: Committed) -> HitFacts {
        HitFacts { hit: hit(rel, kind, pattern), committed, target: None }
    }

    fn visible() -> Vec<Mount> {
        vec![Mount {
            path: "/p".into(),
            access: policy::Access::Rw,
            kind: Kind::Dir,
            link: None,
            rule: String::new(),
            origin: config::Origin { layer: config::LayerKind::Default, location: config::Location::Builtin },
        }]
    }

    /// (facts, expected masks as "path:kind", expected notes that must appear)
    #[test]
    fn each_decision_with_its_reason() {
        use Committed::{Dir as CDir, File as CFile, Unknown};
        use EntryKind::{Dir, File, Other, Symlink};
        let cases: Vec<(Vec<HitFacts>, Vec<&str>, Vec<&str>)> = vec![
            (
                vec![fact(".env", File, ".env", Unknown)],
                vec!["/p/.env:file"],
                vec!["secret /p/.env masked (matches .env)"],
            ),
            (vec![fact(".env", File, ".env", CFile(false))], vec!["/p/.env:file"], vec![]),
            (
                vec![fact(".env", File, ".env", CFile(true))],
                vec![],
                vec!["secret .env: its exact content is committed to git, not masked"],
            ),
            (vec![fact("secrets", Dir, "secrets", Unknown)], vec!["/p/secrets:dir"], vec![]),
            (vec![fact("secrets", Dir, "secrets", CDir(vec![]))], vec!["/p/secrets:dir"], vec![]),
            (
                vec![fact(
                    "secrets",
                    Dir,
                    "secrets",
                    CDir(vec![("secrets/a".into(), true), ("secrets/b".into(), false)]),
                )],
                vec!["/p/secrets/b:file"],
                vec!["secret secrets/: holds committed files, masking only its others"],
            ),
            (
                vec![fact("node_modules/x/client-secret.js", File, "*secret*", Unknown)],
                vec![],
                vec!["secret node_modules/x/client-secret.js: in a dependency or build tree, not masked"],
            ),
            (vec![fact("node_modules/x/.env", File, ".env", Unknown)], vec!["/p/node_modules/x/.env:file"], vec![]),
            (vec![fact("sock.pem", Other, "*.pem", Unknown)], vec!["/p/sock.pem:file"], vec![]),
            (
                vec![HitFacts {
                    hit: hit("key.pem", Symlink, "*.pem"),
                    committed: Unknown,
                    target: Some(("/p/real/key".into(), false)),
                }],
                vec!["/p/real/key:file"],
                vec![],
            ),
            (
                vec![HitFacts { hit: hit("key.pem", Symlink, "*.pem"), committed: Unknown, target: None }],
                vec![],
                vec!["secret /p/key.pem: symlink to nothing visible, nothing to mask"],
            ),
            (
                vec![HitFacts {
                    hit: hit("key.pem", Symlink, "*.pem"),
                    committed: Unknown,
                    target: Some(("/elsewhere/key".into(), false)),
                }],
                vec![],
                vec!["secret /p/key.pem: symlink to nothing visible, nothing to mask"],
            ),
            (
                vec![fact("a/b/.env", File, ".env", Unknown), fact("a", Dir, "a", Unknown)],
                vec!["/p/a:dir", "/p/a/b/.env:file"],
                vec![],
            ),
        ];
        for (facts, want_masks, want_notes) in cases {
            let (masks, notes) = decide(&facts, &visible());
            let got: Vec<String> = masks
                .iter()
                .map(|masked| {
                    let kind = if masked.mask.kind == Kind::Dir { "dir" } else { "file" };
                    format!("{}:{kind}", masked.mask.path.display())
                })
                .collect();
            assert_eq!(got, want_masks, "{facts:?}");
            for note in want_notes {
                assert!(notes.iter().any(|got| got == note), "{note:?} not in {notes:?}");
            }
        }
    }
}
