//! Table tests: preset expansion, path resolution, specificity, the env filter and the
//! git layout, on real temporary trees.

use std::path::{Path, PathBuf};

use config::{cli_layer, merge, parse_layer, Layer, LayerKind};

use super::*;

fn sourced(values: &[&str]) -> Vec<Sourced<String>> {
    values
        .iter()
        .map(|value| Sourced {
            value: value.to_string(),
            origin: Origin { layer: LayerKind::Cli, location: Location::Flag("--test".into()) },
        })
        .collect()
}

#[test]
fn preset_lists_apply_in_order() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["@all"], &["base", "caches", "settings", "agents", "git", "lint"]),
        (&["@all", "!@lint"], &["base", "caches", "settings", "agents", "git"]),
        (&["@all", "!@lint", "@lint"], &["base", "caches", "settings", "agents", "git", "lint"]),
        (&["@all", "!@all"], &[]),
        (&["@git"], &["git"]),
        (&["!@git", "@base"], &["base"]),
        (&[], &[]),
    ];
    for (entries, expected) in cases {
        let enabled = presets::expand(&sourced(entries)).expect("valid presets");
        let names: Vec<&str> = enabled.iter().map(|(preset, _)| preset.name).collect();
        assert_eq!(&names, expected, "{entries:?}");
    }
}

#[test]
fn bad_preset_entries_are_errors_with_a_hint() {
    let cases = [
        ("@lnt", "unknown preset @lnt (did you mean @lint?) (from cli (--test))"),
        (
            "@zzzzzzz",
            "unknown preset @zzzzzzz (known presets: @base, @caches, @settings, @agents, @git, @lint, @all) (from cli (--test))",
        ),
        ("lint", "\"lint\" is not a preset (write \"@name\" or \"!@name\") (from cli (--test))"),
    ];
    for (entry, expected) in cases {
        let err = presets::expand(&sourced(&[entry])).expect_err(entry).to_string();
        assert_eq!(err, expected);
    }
}

struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Tree {
    fn new(files: &[&str]) -> Tree {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        for file in files {
            let path = root.join(file);
            if let Some(dir) = file.strip_suffix('/') {
                fs_err::create_dir_all(root.join(dir)).expect("mkdir");
            } else {
                fs_err::create_dir_all(path.parent().expect("has parent")).expect("mkdir");
                fs_err::write(&path, "x").expect("write");
            }
        }
        Tree { _dir: dir, root }
    }

    fn ctx(&self) -> Context {
        let project = self.root.join("home/proj");
        Context {
            home: self.root.join("home"),
            cwd: project.clone(),
            project_root: project,
            hooks_path: None,
            session_git: false,
        }
    }

    /// Resolves a config made of the given layers and returns (path relative to the tree, access) pairs.
    fn resolve(&self, layers: Vec<Layer>) -> Vec<(String, &'static str)> {
        let policy = resolve(&merge(layers), &self.ctx()).expect("resolves");
        self.relative(&policy)
    }

    fn relative(&self, policy: &Policy) -> Vec<(String, &'static str)> {
        policy
            .mounts
            .iter()
            .map(|mount| {
                let rel = mount.path.strip_prefix(&self.root).map(Path::to_path_buf).unwrap_or(mount.path.clone());
                (rel.display().to_string(), mount.access.as_str())
            })
            .filter(|(path, _)| !path.starts_with('/'))
            .collect()
    }
}

fn layer(json: &str, kind: LayerKind) -> Layer {
    parse_layer(json, Path::new("/cfg.jsonc"), kind).expect("valid layer")
}

#[test]
fn specificity_rules() {
    let tree = Tree::new(&[
        "home/proj/src/main.rs",
        "home/proj/docs/a.md",
        "home/proj/docs/b.md",
        "home/proj/vendor/lib.rs",
        "home/data/x",
        "home/data/y/z",
        "home/.ssh/id_ed25519",
    ]);
    let presets_none = layer(r#"{"filesystem": {"presets": []}}"#, LayerKind::Project);
    type Case<'a> = (&'a str, Vec<Layer>, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        ("the project alone is read-write", vec![], vec![("home/proj", "rw")]),
        (
            "a longer path beats a shorter one",
            vec![cli_layer(None, &["~/data".into()], &["~/data/y".into()], &[], &[]).expect("flags")],
            vec![("home/data", "ro"), ("home/proj", "rw"), ("home/data/y", "rw")],
        ),
        (
            "same path: exclude beats ro beats rw",
            vec![layer(
                r#"{"filesystem": {"ro": ["~/data"], "rw": ["~/data"], "exclude": ["~/data"]}}"#,
                LayerKind::Global,
            )],
            vec![("home/proj", "rw")], // excluded and nothing above it is visible: nothing to mount
        ),
        (
            "same path: ro beats rw whatever the layer order",
            vec![
                layer(r#"{"filesystem": {"ro": ["docs"]}}"#, LayerKind::Global),
                cli_layer(None, &[], &["docs".into()], &[], &[]).expect("flags"),
            ],
            vec![("home/proj", "rw"), ("home/proj/docs", "ro")],
        ),
        (
            "an exact path beats a glob on the same path",
            vec![cli_layer(None, &["docs/*".into()], &["docs/a.md".into()], &[], &[]).expect("flags")],
            // docs is pinned (bound onto itself): it holds a read-only file.
            vec![
                ("home/proj", "rw"),
                ("home/proj/docs", "rw"),
                ("home/proj/docs/a.md", "rw"),
                ("home/proj/docs/b.md", "ro"),
            ],
        ),
        (
            "globs expand to existing paths only",
            vec![cli_layer(None, &["*/lib.rs".into(), "nope/*".into()], &[], &[], &[]).expect("flags")],
            vec![("home/proj", "rw"), ("home/proj/vendor", "rw"), ("home/proj/vendor/lib.rs", "ro")],
        ),
        (
            "an exclude inside the project hides it",
            vec![cli_layer(None, &[], &[], &["vendor".into()], &[]).expect("flags")],
            vec![("home/proj", "rw"), ("home/proj/vendor", "exclude")],
        ),
        (
            "a default exclude survives a broader grant in a later layer",
            vec![
                layer(r#"{"filesystem": {"exclude": ["~/.ssh"]}}"#, LayerKind::Default),
                cli_layer(None, &["~".into()], &[], &[], &[]).expect("flags"),
            ],
            vec![("home", "ro"), ("home/.ssh", "exclude"), ("home/proj", "rw")],
        ),
    ];
    for (name, extra, expected) in cases {
        let mut layers = vec![presets_none.clone()];
        layers.extend(extra);
        let got = tree.resolve(layers);
        let expected: Vec<(String, &str)> =
            expected.into_iter().map(|(path, access)| (path.to_owned(), access)).collect();
        assert_eq!(got, expected, "{name}");
    }
}

#[test]
fn a_flag_grant_an_exclude_of_the_same_path_beats_is_refused_with_the_reason() {
    let tree = Tree::new(&["home/.ssh/known_hosts", "home/.ssh/id_ed25519", "home/.netrc", "home/proj/a"]);
    let defaults = || layer(r#"{"filesystem": {"presets": [], "exclude": ["~/.ssh"]}}"#, LayerKind::Default);
    // `--ro ~/.ssh` against the built-in exclude: the exclude wins, so the flag is refused.
    for (ro, rw) in [(vec!["~/.ssh".to_owned()], vec![]), (vec![], vec!["~/.ssh".to_owned()])] {
        let flags = cli_layer(None, &ro, &rw, &[], &[]).expect("flags");
        let err = resolve(&merge(vec![defaults(), flags]), &tree.ctx()).expect_err("hidden").to_string();
        let flag = if ro.is_empty() { "--rw" } else { "--ro" };
        assert_eq!(
            err,
            format!(
                "{flag} ~/.ssh: the exclude \"~/.ssh\" (from default) hides that path all the same: on one path an \
                 exclude beats ro and rw whatever the layer, so that no layer quietly shows what another hides; name \
                 what you need inside it instead ({flag} ~/.ssh/NAME: a longer path beats a shorter one)"
            )
        );
    }
    // A file has no inside to name.
    let flags = cli_layer(None, &["~/.netrc".into()], &[], &[], &[]).expect("flags");
    let defaults_netrc = layer(r#"{"filesystem": {"presets": [], "exclude": ["~/.netrc"]}}"#, LayerKind::Default);
    let err = resolve(&merge(vec![defaults_netrc, flags]), &tree.ctx()).expect_err("hidden").to_string();
    assert!(err.ends_with("; a file it names stays hidden (drop the flag)"), "{err}");
    // What the message advises: a file inside it is shown, the rest stays hidden.
    let flags = cli_layer(None, &["~/.ssh/known_hosts".into()], &[], &[], &[]).expect("flags");
    assert_eq!(
        tree.resolve(vec![defaults(), flags]),
        [("home/proj".to_owned(), "rw"), ("home/.ssh/known_hosts".to_owned(), "ro")]
    );
    let flags = cli_layer(None, &["~".into(), "~/.ssh/known_hosts".into()], &[], &[], &[]).expect("flags");
    assert_eq!(
        tree.resolve(vec![defaults(), flags]),
        [
            ("home".to_owned(), "ro"),
            ("home/.ssh".to_owned(), "exclude"),
            ("home/proj".to_owned(), "rw"),
            ("home/.ssh/known_hosts".to_owned(), "ro")
        ]
    );
    // The same grant in a config file: skipped with a note (`--debug`).
    let global = layer(r#"{"filesystem": {"ro": ["~/.ssh"]}}"#, LayerKind::Global);
    let policy = resolve(&merge(vec![defaults(), global]), &tree.ctx()).expect("resolves");
    assert!(
        policy.notes.iter().any(|note| {
            note
            == "ro ~/.ssh (global (/cfg.jsonc:1:24)): hidden all the same by the exclude ~/.ssh (from default): on one \
                path exclude beats ro and rw"
        }),
        "{:?}",
        policy.notes
    );
    assert!(!policy.mounts.iter().any(|mount| mount.path.ends_with(".ssh")));
}

#[test]
fn same_path_and_level_later_layer_wins_for_origin() {
    let tree = Tree::new(&["home/proj/docs/a.md"]);
    let layers = vec![
        layer(r#"{"filesystem": {"presets": [], "ro": ["docs"]}}"#, LayerKind::Global),
        layer(r#"{"filesystem": {"ro": ["docs"]}}"#, LayerKind::Project),
    ];
    let policy = resolve(&merge(layers), &tree.ctx()).expect("resolves");
    let docs = policy.mounts.iter().find(|mount| mount.path.ends_with("docs")).expect("docs mounted");
    assert_eq!(docs.origin.layer, LayerKind::Project);
}

#[test]
fn missing_cli_path_is_an_error_but_a_missing_config_path_is_skipped() {
    let tree = Tree::new(&["home/proj/a"]);
    let err = resolve(&merge(vec![cli_layer(None, &["nope".into()], &[], &[], &[]).expect("flags")]), &tree.ctx())
        .expect_err("missing path")
        .to_string();
    assert_eq!(err, "--ro nope: no such file or directory (check the path, or create it first)");
    let policy = resolve(&merge(vec![layer(r#"{"filesystem": {"ro": ["nope"]}}"#, LayerKind::Project)]), &tree.ctx())
        .expect("skipped");
    assert!(policy
        .notes
        .iter()
        .any(|note| note.starts_with("path nope (project (/cfg.jsonc:1:24)): nothing exists there")));
}

#[test]
fn git_and_lint_presets_protect_project_paths() {
    let tree = Tree::new(&[
        "home/proj/.git/hooks/pre-commit",
        "home/proj/.git/config",
        "home/proj/.git/HEAD",
        "home/proj/.husky/pre-commit",
        "home/proj/.agent-sandbox/config.jsonc",
        "home/proj/.eslintrc.json",
        "home/proj/src/.eslintrc.json",
        "home/.gitconfig",
    ]);
    let got = tree.resolve(vec![layer(r#"{"filesystem": {"presets": ["@git", "@lint"]}}"#, LayerKind::Default)]);
    assert_eq!(
        got,
        [
            ("home/.gitconfig", "ro"),
            ("home/proj", "rw"),
            ("home/proj/.agent-sandbox", "ro"),
            ("home/proj/.eslintrc.json", "ro"),
            ("home/proj/.git", "ro"), // no session repository in this context
            ("home/proj/.husky", "ro"),
            ("home/proj/.git/config", "ro"),
            ("home/proj/.git/hooks", "ro"),
        ]
        .map(|(path, access)| (path.to_owned(), access))
    );
    let policy =
        resolve(&merge(vec![layer(r#"{"filesystem": {"presets": ["@git"]}}"#, LayerKind::Default)]), &tree.ctx())
            .expect("resolves");
    assert_eq!(policy.commands.get("git").map(|rule| rule.value.clone()), Some(CommandRule::Preset("git".into())));
}

#[test]
fn explicit_command_rules_beat_preset_rules() {
    let tree = Tree::new(&["home/proj/a"]);
    let layers = vec![
        layer(r#"{"filesystem": {"presets": ["@git"]}}"#, LayerKind::Default),
        layer(r#"{"commands": {"git": true}}"#, LayerKind::Global),
    ];
    let policy = resolve(&merge(layers), &tree.ctx()).expect("resolves");
    assert_eq!(policy.commands.get("git").map(|rule| rule.value.clone()), Some(CommandRule::Allow));
}

#[test]
fn a_worktrees_git_directories_are_read_only_unless_a_session_repository_stands_in() {
    let tree = Tree::new(&[
        "home/main/.git/hooks/pre-commit",
        "home/main/.git/config",
        "home/main/.git/worktrees/proj/HEAD",
        "home/main/.git/worktrees/proj/config.worktree",
        "home/main/.git/objects/",
        "home/main/.git/HEAD",
        "home/main/.git/refs/",
        "home/proj/src/a.rs",
        "home/proj/.githooks/pre-commit",
    ]);
    let main_git = tree.root.join("home/main/.git");
    fs_err::write(main_git.join("HEAD"), "ref: refs/heads/main\n").expect("write");
    fs_err::write(tree.root.join("home/proj/.git"), format!("gitdir: {}\n", main_git.join("worktrees/proj").display()))
        .expect("write");
    fs_err::write(main_git.join("worktrees/proj/commondir"), "../..\n").expect("write");
    fs_err::write(main_git.join("worktrees/proj/gitdir"), format!("{}\n", tree.root.join("home/proj/.git").display()))
        .expect("write");
    fs_err::write(main_git.join("config"), "[core]\n\tbare = false\n").expect("write");
    let mut ctx = tree.ctx();
    ctx.hooks_path = Some(tree.root.join("home/proj/.githooks"));
    // Without a session repository (whatever the presets), git inside reads the history
    // but writes none of it: the common directory (the record inside it) and the `.git`
    // file naming it.
    for presets in [r#"["@git"]"#, "[]"] {
        let config = format!(r#"{{"filesystem": {{"presets": {presets}}}}}"#);
        let policy = resolve(&merge(vec![layer(&config, LayerKind::Default)]), &ctx).expect("resolves");
        let mut want = vec![("home/proj", "rw"), ("home/main/.git", "ro"), ("home/proj/.git", "ro")];
        if presets != "[]" {
            want.push(("home/proj/.githooks", "ro"));
        }
        assert_eq!(
            tree.relative(&policy),
            want.into_iter().map(|(path, access)| (path.to_owned(), access)).collect::<Vec<_>>(),
            "{presets}"
        );
    }
    // With a session repository standing in for the worktree's record, nothing of the
    // user's git directories is shown; the configured hooks stay read-only.
    ctx.session_git = true;
    let policy = resolve(&merge(vec![layer(r#"{"filesystem": {"presets": ["@git"]}}"#, LayerKind::Default)]), &ctx)
        .expect("resolves");
    assert_eq!(
        tree.relative(&policy),
        [("home/proj", "rw"), ("home/proj/.githooks", "ro")].map(|(path, access)| (path.to_owned(), access))
    );
}

#[test]
fn project_root_is_the_enclosing_work_tree_and_never_home_or_root() {
    let tree = Tree::new(&["home/proj/.git/HEAD", "home/proj/src/deep/x", "home/loose/x"]);
    let home = tree.root.join("home");
    assert_eq!(find_project_root(&home.join("proj/src/deep"), &home).expect("found"), home.join("proj"));
    assert_eq!(find_project_root(&home.join("loose"), &home).expect("found"), home.join("loose"));
    assert!(matches!(find_project_root(&home, &home), Err(PolicyError::ProjectTooBroad(_))));
    assert!(matches!(find_project_root(Path::new("/"), &home), Err(PolicyError::ProjectTooBroad(_))));
}

#[test]
fn credentials_in_urls_are_recognised() {
    let cases = [
        ("mongodb://u:p@h:27017/db", true),
        ("redis://:secret@localhost:6379", true),
        ("https://user@example.invalid/x", false),
        ("https://example.invalid/a:b@c", false),
        ("postgres://localhost/db", false),
        ("/usr/bin:/bin", false),
        ("see https://a:b@h and more", true),
    ];
    for (value, expected) in cases {
        assert_eq!(env::has_url_credentials(value), expected, "{value}");
    }
}

#[test]
fn env_filter_table() {
    let config = merge(vec![
        config::defaults(),
        layer(
            r#"{"env": {"allow": ["ANTHROPIC_API_KEY", "NODE_*"], "block": ["NODE_SECRET_THING", "DEBUG_TOKEN"]}}"#,
            LayerKind::Project,
        ),
    ]);
    let filter = env::EnvFilter::new(&config).expect("valid patterns");
    let cases: &[(&str, Option<&str>)] = &[
        ("PATH", None),
        ("HOME", None),
        ("USER", None),
        ("NODE_ENV", None),
        ("DEBUG", None),
        ("TERM", None),
        ("OPENAI_API_KEY", Some("env-secret-pattern")),
        // Routine, not secret: regions and CA bundle paths pass; the keys beside them do not.
        ("AWS_REGION", None),
        ("AWS_DEFAULT_REGION", None),
        ("AWS_CA_BUNDLE", None),
        ("SSL_CERT_FILE", None),
        ("AWS_SECRET_ACCESS_KEY", Some("env-secret-pattern")),
        ("AWS_ACCESS_KEY_ID", Some("env-secret-pattern")),
        ("ANTHROPIC_API_KEY", None),             // opted in
        ("api_key", Some("env-secret-pattern")), // lower case is still a secret
        ("MY_SECRET", Some("env-secret-pattern")),
        ("NPM_TOKEN", Some("env-secret-pattern")),
        ("GITHUB_TOKEN", Some("env-secret-pattern")),
        ("GITHUB_ACTIONS", Some("env-secret-pattern")),
        ("AWS_PROFILE", Some("env-secret-pattern")),
        ("DB_PASSWORD", Some("env-secret-pattern")),
        ("GOOGLE_APPLICATION_CREDENTIALS", Some("env-secret-pattern")),
        ("SSH_AUTH_SOCK", Some("env-secret-pattern")),
        ("DATABASE_URL", Some("env-secret-pattern")),
        ("SENTRY_DSN", Some("env-secret-pattern")),
        ("NODE_SECRET_THING", Some("env-block")), // block beats allow
        ("DEBUG_TOKEN", Some("env-block")),
        ("SECRET_KEY_BASE", Some("env-secret-pattern")),
        ("DB_PASS", Some("env-secret-pattern")),
        ("MYSQL_PWD", Some("env-secret-pattern")),
        ("TOKEN", Some("env-secret-pattern")),
        ("APIKEY", Some("env-secret-pattern")),
        ("PWD", None),
        ("BW_SESSION", Some("env-secret-pattern")),
        ("OP_SESSION_my", Some("env-secret-pattern")),
        ("npm_config_//registry.npmjs.org/:_authToken", Some("env-secret-pattern")),
        ("OLDPWD", None),
        ("PASSENGER_APP_ENV", None),
        ("KEYBOARD_LAYOUT", None),
        ("TOKENIZERS_PARALLELISM", None),
    ];
    for (name, expected) in cases {
        assert_eq!(filter.judge(name).map(|dropped| dropped.policy), *expected, "{name}");
    }
}

/// The book's configuration page documents every preset's expansion: each path must
/// appear there, in backticks, so a change here without the book fails.
#[test]
fn the_book_documents_every_preset_path() {
    let page_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/guide/configuration.md");
    let readme = fs_err::read_to_string(&page_path).expect("docs/src/guide/configuration.md");
    let mut missing = Vec::new();
    for preset in presets::PRESETS {
        if !readme.contains(&format!("| `@{}` |", preset.name)) {
            missing.push(format!("@{}", preset.name));
        }
        for path in preset.ro.iter().chain(preset.rw).chain(preset.exclude).chain(preset.copies) {
            let shown = match path.root {
                presets::Root::Abs => path.path.to_owned(),
                presets::Root::Home => format!("~/{}", path.path),
                presets::Root::Project => path.path.to_owned(),
            };
            let etc = shown.strip_prefix("/etc/").map(|name| format!("`{name}`"));
            if !readme.contains(&format!("`{shown}`")) && !etc.is_some_and(|name| readme.contains(&name)) {
                missing.push(format!("@{}: {shown}", preset.name));
            }
        }
    }
    for item in config::defaults().exclude {
        if !readme.contains(&format!("`{}`", item.value)) {
            missing.push(format!("default exclude {}", item.value));
        }
    }
    assert!(missing.is_empty(), "docs/src/guide/configuration.md does not document: {missing:?}");
}

#[test]
fn planted_git_links_do_not_grant_anything_outside_the_project() {
    let tree =
        Tree::new(&["home/proj/.git/HEAD", "home/proj/.git/objects/", "home/proj/.git/refs/", "home/private.txt"]);
    let home = tree.root.join("home");
    let git = layer(r#"{"filesystem": {"presets": ["@git"]}}"#, LayerKind::Default);
    // A commondir file in a plain .git, as git would honour it.
    fs_err::write(tree.root.join("home/proj/.git/commondir"), format!("{}\n", home.display())).expect("write");
    assert_eq!(
        tree.resolve(vec![git.clone()]),
        [("home/proj", "rw"), ("home/proj/.git", "ro")].map(|(p, a)| (p.to_owned(), a)),
        "a planted commondir must not grant home"
    );
    // A .git file naming a directory outside without git's back-link.
    fs_err::remove_dir_all(tree.root.join("home/proj/.git")).expect("rm");
    fs_err::write(tree.root.join("home/proj/.git"), format!("gitdir: {}\n", home.display())).expect("write");
    assert_eq!(tree.resolve(vec![git]), [("home/proj", "rw")].map(|(p, a)| (p.to_owned(), a)));
}

#[test]
fn a_project_path_that_leads_outside_is_not_mounted() {
    let tree = Tree::new(&["home/proj/a", "home/private.txt"]);
    std::os::unix::fs::symlink(tree.root.join("home/private.txt"), tree.root.join("home/proj/.editorconfig"))
        .expect("symlink");
    std::os::unix::fs::symlink("../private.txt", tree.root.join("home/proj/docs")).expect("symlink");
    let layers = vec![
        layer(r#"{"filesystem": {"presets": ["@lint"]}}"#, LayerKind::Default),
        layer(r#"{"filesystem": {"ro": ["docs"]}}"#, LayerKind::Project),
    ];
    let policy = resolve(&merge(layers), &tree.ctx()).expect("resolves");
    assert_eq!(tree.relative(&policy), [("home/proj", "rw")].map(|(p, a)| (p.to_owned(), a)));
    assert!(policy.notes.iter().any(|note| note.starts_with(&format!(
        "skipped {} (@lint: .editorconfig): it leads outside the project",
        tree.root.join("home/proj/.editorconfig").display()
    ))));
}

#[test]
fn settings_files_are_copies_unless_someone_excluded_them() {
    let tree = Tree::new(&["home/.npmrc", "home/.cargo/config.toml", "home/.config/pip/pip.conf", "home/proj/a"]);
    let defaults =
        || layer(r#"{"filesystem": {"presets": ["@settings"], "exclude": ["~/.npmrc"]}}"#, LayerKind::Default);
    let copies = |layers: Vec<Layer>| -> Vec<String> {
        let policy = resolve(&merge(layers), &tree.ctx()).expect("resolves");
        // (Without the machine's own /etc/pip.conf.)
        policy
            .copies
            .iter()
            .filter_map(|copy| Some(copy.path.strip_prefix(&tree.root).ok()?.display().to_string()))
            .collect()
    };
    // The built-in exclude of ~/.npmrc hides the file itself, not its redacted copy.
    assert_eq!(copies(vec![defaults()]), ["home/.npmrc", "home/.config/pip/pip.conf", "home/.cargo/config.toml"]);
    // An exclude someone wrote, of the file or above it, and `!@settings` do.
    let global = layer(r#"{"filesystem": {"exclude": ["~/.cargo", "~/.npmrc"]}}"#, LayerKind::Global);
    assert_eq!(copies(vec![defaults(), global.clone()]), ["home/.config/pip/pip.conf"]);
    let policy = resolve(&merge(vec![defaults(), global]), &tree.ctx()).expect("resolves");
    let note = format!(
        "settings {}: not shown, excluded by ~/.cargo (from global (/cfg.jsonc:1:29))",
        tree.root.join("home/.cargo/config.toml").display()
    );
    assert!(policy.notes.contains(&note), "{:?}", policy.notes);
    // One the sandbox can write may be the agent's (a symlink planted to a key it cannot
    // read); ~/.npmrc, hidden by the exclude, it cannot write.
    let rw_home = layer(r#"{"filesystem": {"rw": ["~"]}}"#, LayerKind::Global);
    assert_eq!(copies(vec![defaults(), rw_home]), ["home/.npmrc"]);
    let off = layer(r#"{"filesystem": {"presets": ["!@settings"]}}"#, LayerKind::Global);
    assert!(copies(vec![defaults(), off]).is_empty());
}
