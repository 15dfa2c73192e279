//! Which secret files the sandbox hides, and why each is or is not hidden: a pure
//! function of the scan's hits, what the index says of them ([`Committed`], gathered by
//! `index.rs`), the dependency trees their tools made ([`MadeTree`], gathered by
//! `trees.rs`), what earlier sessions masked ([`Earlier`], kept by `mask_record.rs`) and the
//! policy's mounts. Table-tested below without bwrap.

use std::{collections::HashMap, path::PathBuf};

use policy::{Kind, Mount};
use sandbox::plan::Mask;
use secrets::{EntryKind, SecretHit};

/// A directory that a package manager or build tool deletes and rewrites wholesale, told
/// apart from one that only has its name (a renamed `certs/`) by a file that tool writes
/// into it. One row per tool.
#[derive(Debug, PartialEq, Eq)]
pub struct DependencyTree {
    /// The directory's name.
    pub name: &'static str,
    /// The file the tool writes directly inside it.
    pub marker: &'static str,
    pub tool: &'static str,
    /// Why the marker shows that the tool made the directory.
    pub why: &'static str,
}

/// Where wildcard hits (`*secret*` matching a package's `client-secret.js`) are not
/// masked: masked, they make `npm ci` or `cargo clean` fail with EBUSY.
pub const DEPENDENCY_TREES: &[DependencyTree] = &[
    DependencyTree {
        name: "node_modules",
        marker: ".package-lock.json",
        tool: "npm",
        why: "npm 7 and later write this hidden lockfile at every install",
    },
    DependencyTree {
        name: "node_modules",
        marker: ".modules.yaml",
        tool: "pnpm",
        why: "pnpm records the layout it installed here",
    },
    DependencyTree {
        name: "node_modules",
        marker: ".yarn-integrity",
        tool: "yarn 1",
        why: "yarn 1 records what it installed here",
    },
    DependencyTree {
        name: "node_modules",
        marker: ".yarn-state.yml",
        tool: "yarn 2+",
        why: "yarn's node-modules linker records its install state here",
    },
    DependencyTree {
        name: "target",
        marker: "CACHEDIR.TAG",
        tool: "cargo",
        why: "cargo tags every build directory it creates, so that backup tools skip it",
    },
    DependencyTree {
        name: ".venv",
        marker: "pyvenv.cfg",
        tool: "venv",
        why: "venv, virtualenv and uv write it; the environment's python reads it at start",
    },
    DependencyTree {
        name: "vendor",
        marker: "modules.txt",
        tool: "go",
        why: "`go mod vendor` lists the vendored modules here, and go checks it",
    },
    DependencyTree {
        name: "vendor",
        marker: "autoload.php",
        tool: "composer",
        why: "composer writes its autoloader here at every install",
    },
];

/// A dependency tree in the project that holds its tool's marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadeTree {
    pub dir: PathBuf,
    pub tree: &'static DependencyTree,
}

/// A file's identity across renames: (device, inode).
pub type Identity = (u64, u64);

/// What earlier sessions of the project masked: each masked entry's identity and the
/// path it had then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Earlier {
    Known(HashMap<Identity, PathBuf>),
    /// The record could not be read (why): nothing is exempt, since a renamed secret
    /// could not be recognised.
    Unreadable(String),
}

/// The distinct names of [`DEPENDENCY_TREES`].
pub fn dependency_tree_names() -> impl Iterator<Item = &'static str> {
    DEPENDENCY_TREES
        .iter()
        .enumerate()
        .filter(|(i, tree)| DEPENDENCY_TREES[..*i].iter().all(|earlier| earlier.name != tree.name))
        .map(|(_, tree)| tree.name)
}

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
    /// The identity of what a mask would hide (for a symlink: its target's); `None` when
    /// it could not be read.
    pub identity: Option<Identity>,
}

/// A mask and the hit (by its path and pattern) that asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Masked {
    pub mask: Mask,
    /// The entry the scan found (for a symlink: the link, `mask.path` is its target).
    pub found: PathBuf,
    pub pattern: String,
    /// Whether its parents are pinned (bound onto themselves, so that neither it nor any
    /// directory above it can be renamed): those a rename could unmask at the next
    /// start, except inside a [`MadeTree`], which must stay deletable (the record of
    /// earlier masks recognises a secret renamed there).
    pub pin: bool,
}

/// The masks, sorted parents first, and one note per decision.
pub fn decide(
    facts: &[HitFacts],
    trees: &[MadeTree],
    earlier: &Earlier,
    mounts: &[Mount],
) -> (Vec<Masked>, Vec<String>) {
    let mut notes = Vec::new();
    let mut masks: Vec<Masked> = Vec::new();
    if let Earlier::Unreadable(why) = earlier {
        notes.push(format!(
            "secrets: the record of files masked in earlier sessions is unreadable ({why}): no dependency tree is \
             exempt this time"
        ));
    }
    // Each path once (the first hit asking for it wins); a set, not a scan of the list:
    // a big tree has a thousand `.env` files.
    let mut seen: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    let mut add = |mask: Mask, found: &std::path::Path, hit: &SecretHit, notes: &mut Vec<String>| {
        notes.push(format!("secret {} masked (matches {})", mask.path.display(), hit.pattern));
        if seen.insert(mask.path.clone()) {
            // Pinned where a rename could change the next start's decision: a path
            // pattern (`config/prod.yaml`) stops matching once a parent is renamed,
            // wherever it is; a wildcard hit could be carried into a made tree; a mask
            // on another entry than the hit (a symlink's target, a file of a secret
            // directory) stops being one when that entry moves. An exact name on the hit
            // itself is masked wherever it goes: pinning its parents would only add
            // mounts (bwrap's cost grows faster than their number).
            let location_matters = mask.path != hit.path || exemptible(&hit.pattern);
            let pin = hit.pattern.contains('/') || (location_matters && made_tree(trees, &mask.path).is_none());
            masks.push(Masked { mask, found: found.to_path_buf(), pattern: hit.pattern.clone(), pin });
        }
    };
    for fact in facts {
        if exempt_in_made_tree(fact, trees, earlier, &mut notes) {
            continue;
        }
        let hit = &fact.hit;
        let rel = hit.rel_path.display();
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

/// Whether `fact`'s hit is left unmasked in a dependency tree its tool made, with the
/// note that says why or why not.
fn exempt_in_made_tree(fact: &HitFacts, trees: &[MadeTree], earlier: &Earlier, notes: &mut Vec<String>) -> bool {
    let hit = &fact.hit;
    let rel = hit.rel_path.display();
    // A wildcard hit in a tree its tool made is a package's or a build's file: not
    // masked, unless it is what an earlier session masked, renamed there (the
    // identity survives a rename; the marker is no proof, the agent can write one).
    // Exact names (`.env`, `id_rsa`) stay masked there too.
    if exemptible(&hit.pattern) {
        if let Some(made) = made_tree(trees, &hit.path) {
            let tree = made.tree;
            match (earlier, fact.identity) {
                (Earlier::Known(known), Some(identity)) => match known.get(&identity) {
                    None => {
                        notes.push(format!(
                            "secret {rel}: in {}, which {} made ({}), not masked",
                            made.dir.display(),
                            tree.tool,
                            tree.marker
                        ));
                        return true;
                    }
                    Some(before) => notes.push(format!(
                        "secret {rel}: masked in an earlier session as {}, so masked in {} too",
                        before.display(),
                        made.dir.display()
                    )),
                },
                (Earlier::Known(_), None) => notes.push(format!(
                    "secret {rel}: in {}, but its inode cannot be read to tell it from an earlier secret: masked",
                    made.dir.display()
                )),
                (Earlier::Unreadable(_), _) => notes.push(format!(
                    "secret {rel}: in {}, but the record of earlier masks is unreadable: masked",
                    made.dir.display()
                )),
            }
        } else if let Some(tree) = hit
            .rel_path
            .components()
            .find_map(|part| DEPENDENCY_TREES.iter().find(|tree| part.as_os_str() == tree.name))
        {
            notes.push(format!(
                "secret {rel}: in a directory named {} that no tool made (no {}): masked",
                tree.name,
                markers_of(tree.name)
            ));
        }
    }
    false
}

/// The made tree `path` lies in.
fn made_tree<'a>(trees: &'a [MadeTree], path: &std::path::Path) -> Option<&'a MadeTree> {
    trees.iter().find(|made| path.starts_with(&made.dir))
}

/// Whether hits of `pattern` are left unmasked in a made dependency tree: wildcards
/// (`*secret*`), not exact names (`.env`, `id_rsa`, `.env.*`).
fn exemptible(pattern: &str) -> bool {
    pattern.starts_with('*')
}

/// The markers of the trees named `name`, for notes.
fn markers_of(name: &str) -> String {
    let markers: Vec<&str> = DEPENDENCY_TREES.iter().filter(|tree| tree.name == name).map(|tree| tree.marker).collect();
    markers.join(", ")
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
        HitFacts { hit: hit(rel, kind, pattern), committed, target: None, identity: Some(identity_of(rel)) }
    }

    /// A made-up identity, the same for the same relative path.
    fn identity_of(rel: &str) -> Identity {
        (7, util::fnv1a(rel.as_bytes()))
    }

    fn tree(name: &str, marker: &str) -> &'static DependencyTree {
        DEPENDENCY_TREES.iter().find(|tree| tree.name == name && tree.marker == marker).expect("a row")
    }

    fn made(dir: &str, name: &str, marker: &str) -> MadeTree {
        MadeTree { dir: Path::new("/p").join(dir), tree: tree(name, marker) }
    }

    fn nothing_earlier() -> Earlier {
        Earlier::Known(HashMap::new())
    }

    /// The masks as "path:kind", with ":unpinned" for those whose parents stay free.
    fn shown(masks: &[Masked]) -> Vec<String> {
        masks
            .iter()
            .map(|masked| {
                let kind = if masked.mask.kind == Kind::Dir { "dir" } else { "file" };
                let pin = if masked.pin { "" } else { ":unpinned" };
                format!("{}:{kind}{pin}", masked.mask.path.display())
            })
            .collect()
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
                vec!["/p/.env:file:unpinned"],
                vec!["secret /p/.env masked (matches .env)"],
            ),
            (vec![fact(".env", File, ".env", CFile(false))], vec!["/p/.env:file:unpinned"], vec![]),
            (
                vec![fact(".env", File, ".env", CFile(true))],
                vec![],
                vec!["secret .env: its exact content is committed to git, not masked"],
            ),
            (vec![fact("secrets", Dir, "secrets", Unknown)], vec!["/p/secrets:dir:unpinned"], vec![]),
            (vec![fact("secrets", Dir, "secrets", CDir(vec![]))], vec!["/p/secrets:dir:unpinned"], vec![]),
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
                vec!["/p/node_modules/x/client-secret.js:file"],
                vec![
                    "secret node_modules/x/client-secret.js: in a directory named node_modules that no tool made (no \
                     .package-lock.json, .modules.yaml, .yarn-integrity, .yarn-state.yml): masked",
                ],
            ),
            (
                vec![fact("node_modules/x/.env", File, ".env", Unknown)],
                vec!["/p/node_modules/x/.env:file:unpinned"],
                vec![],
            ),
            (vec![fact("sock.pem", Other, "*.pem", Unknown)], vec!["/p/sock.pem:file"], vec![]),
            (
                vec![HitFacts {
                    hit: hit("key.pem", Symlink, "*.pem"),
                    committed: Unknown,
                    target: Some(("/p/real/key".into(), false)),
                    identity: None,
                }],
                vec!["/p/real/key:file"],
                vec![],
            ),
            (
                vec![HitFacts {
                    hit: hit("key.pem", Symlink, "*.pem"),
                    committed: Unknown,
                    target: None,
                    identity: None,
                }],
                vec![],
                vec!["secret /p/key.pem: symlink to nothing visible, nothing to mask"],
            ),
            (
                vec![HitFacts {
                    hit: hit("key.pem", Symlink, "*.pem"),
                    committed: Unknown,
                    target: Some(("/elsewhere/key".into(), false)),
                    identity: None,
                }],
                vec![],
                vec!["secret /p/key.pem: symlink to nothing visible, nothing to mask"],
            ),
            (
                vec![fact("a/b/.env", File, ".env", Unknown), fact("a", Dir, "a", Unknown)],
                vec!["/p/a:dir:unpinned", "/p/a/b/.env:file:unpinned"],
                vec![],
            ),
        ];
        for (facts, want_masks, want_notes) in cases {
            let (masks, notes) = decide(&facts, &[], &nothing_earlier(), &visible());
            assert_eq!(shown(&masks), want_masks, "{facts:?}");
            for note in want_notes {
                assert!(notes.iter().any(|got| got == note), "{note:?} not in {notes:?}");
            }
        }
    }

    /// Dependency trees: a wildcard hit in a tree its tool made is not masked, unless an
    /// earlier session masked the same file (renamed there since), or the record or its
    /// identity cannot be read; masks inside made trees keep their parents free.
    /// (facts, made trees, earlier masks, expected masks, expected notes)
    #[test]
    fn dependency_trees_are_exempt_only_when_made_by_their_tool_and_holding_no_earlier_secret() {
        use Committed::Unknown;
        use EntryKind::File;
        let npm = || vec![made("node_modules", "node_modules", ".package-lock.json")];
        let cargo = || vec![made("target", "target", "CACHEDIR.TAG")];
        let earlier = |rel: &str, was: &str| Earlier::Known(HashMap::from([(identity_of(rel), Path::new(was).into())]));
        let unreadable = || Earlier::Unreadable("expected value at line 1 column 1".into());
        type Case = (Vec<HitFacts>, Vec<MadeTree>, Earlier, Vec<&'static str>, Vec<&'static str>);
        let cases: Vec<Case> = vec![
            // A package's file in npm's tree: not masked, nothing pinned.
            (
                vec![fact("node_modules/x/client-secret.js", File, "*secret*", Unknown)],
                npm(),
                nothing_earlier(),
                vec![],
                vec!["secret node_modules/x/client-secret.js: in /p/node_modules, which npm made (.package-lock.json), not masked"],
            ),
            // The rename attack: `certs/` renamed to `target/` (no CACHEDIR.TAG).
            (
                vec![fact("target/server.key", File, "*.key", Unknown)],
                vec![],
                nothing_earlier(),
                vec!["/p/target/server.key:file"],
                vec!["secret target/server.key: in a directory named target that no tool made (no CACHEDIR.TAG): masked"],
            ),
            // … with a planted marker: the record recognises the file.
            (
                vec![fact("target/server.key", File, "*.key", Unknown)],
                cargo(),
                earlier("target/server.key", "/p/certs/server.key"),
                vec!["/p/target/server.key:file:unpinned"],
                vec!["secret target/server.key: masked in an earlier session as /p/certs/server.key, so masked in /p/target too"],
            ),
            // … moved deep into a real tree.
            (
                vec![fact("node_modules/a/certs/server.key", File, "*.key", Unknown)],
                npm(),
                earlier("node_modules/a/certs/server.key", "/p/certs/server.key"),
                vec!["/p/node_modules/a/certs/server.key:file:unpinned"],
                vec![],
            ),
            // An unreadable record exempts nothing.
            (
                vec![fact("node_modules/x/client-secret.js", File, "*secret*", Unknown)],
                npm(),
                unreadable(),
                vec!["/p/node_modules/x/client-secret.js:file:unpinned"],
                vec![
                    "secrets: the record of files masked in earlier sessions is unreadable (expected value at line 1 \
                     column 1): no dependency tree is exempt this time",
                    "secret node_modules/x/client-secret.js: in /p/node_modules, but the record of earlier masks is unreadable: masked",
                ],
            ),
            // An identity that cannot be read could be an earlier secret's.
            (
                vec![HitFacts { identity: None, ..fact("node_modules/x/client-secret.js", File, "*secret*", Unknown) }],
                npm(),
                nothing_earlier(),
                vec!["/p/node_modules/x/client-secret.js:file:unpinned"],
                vec![],
            ),
            // Exact names stay masked in made trees (and are masked wherever they move: no
            // pins anywhere).
            (
                vec![fact("node_modules/x/.env", File, ".env", Unknown)],
                npm(),
                nothing_earlier(),
                vec!["/p/node_modules/x/.env:file:unpinned"],
                vec![],
            ),
            // A path pattern is pinned wherever it is.
            (
                vec![fact("node_modules/conf/prod.yaml", File, "node_modules/conf/prod.yaml", Unknown)],
                npm(),
                nothing_earlier(),
                vec!["/p/node_modules/conf/prod.yaml:file"],
                vec![],
            ),
            // Outside made trees every mask is pinned; another project's tree is not this one.
            (
                vec![
                    fact("certs/server.key", File, "*.key", Unknown),
                    fact("web/node_modules/x/secret.js", File, "*secret*", Unknown),
                ],
                npm(),
                nothing_earlier(),
                vec!["/p/certs/server.key:file", "/p/web/node_modules/x/secret.js:file"],
                vec![],
            ),
            // A nested tree counts when its outer tree was made.
            (
                vec![fact("node_modules/a/node_modules/b/secret.js", File, "*secret*", Unknown)],
                npm(),
                earlier("certs/server.key", "/p/certs/server.key"),
                vec![],
                vec![],
            ),
        ];
        for (facts, trees, earlier, want_masks, want_notes) in cases {
            let (masks, notes) = decide(&facts, &trees, &earlier, &visible());
            assert_eq!(shown(&masks), want_masks, "{facts:?}");
            for note in want_notes {
                assert!(notes.iter().any(|got| got == note), "{note:?} not in {notes:?}");
            }
        }
    }

    /// One row per (directory, tool), each with its reason; the names are the four the
    /// documentation promises.
    #[test]
    fn every_dependency_tree_row_says_why() {
        let names: std::collections::BTreeSet<&str> = DEPENDENCY_TREES.iter().map(|tree| tree.name).collect();
        assert_eq!(names, [".venv", "node_modules", "target", "vendor"].into());
        for tree in DEPENDENCY_TREES {
            assert!(!tree.why.is_empty() && !tree.tool.is_empty() && !tree.marker.contains('/'), "{tree:?}");
        }
    }
}
