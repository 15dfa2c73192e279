//! Whole-document snapshots (`UPDATE_SNAPSHOTS=1 cargo test -p devcontainer` rewrites
//! them after a deliberate change; compiled in, so the tests run from any directory) and merges into real-world-shaped files.

use std::path::Path;

use super::*;

fn options() -> Options {
    let root = tempfile::tempdir().expect("tempdir");
    fs_err::create_dir_all(root.path().join(".git/hooks")).expect("mkdir");
    fs_err::write(root.path().join(".git/config"), "").expect("write");
    let configured: Vec<String> =
        [".husky", ".agent-sandbox", ".agent-precommit/user-context.json", "tools/ci"].map(String::from).to_vec();
    Options { base_tag: "latest".into(), protected: protected_paths(root.path(), &configured).expect("valid") }
}

#[test]
fn generated_devcontainer_json() {
    snapshot(include_str!("snapshots/devcontainer.json"), &document(&options()), "devcontainer.json");
}

#[test]
fn generated_dockerfile_is_seed_002s_template() {
    snapshot(include_str!("snapshots/Dockerfile"), REPO_DOCKERFILE, "Dockerfile");
}

#[test]
fn protected_paths_stay_inside_the_workspace_and_files_are_mounted_as_files() {
    let root = tempfile::tempdir().expect("tempdir");
    fs_err::create_dir_all(root.path().join(".agent-precommit")).expect("mkdir");
    fs_err::write(root.path().join(".agent-precommit/user-context.json"), "{}").expect("write");
    let got = protected_paths(root.path(), &[".agent-precommit/user-context.json".into(), "./.husky/".into()])
        .expect("valid");
    let got: Vec<(&str, bool)> = got.iter().map(|p| (p.path.as_str(), p.create_dir)).collect();
    // No `.git` directory: git's entries are left out rather than created.
    assert_eq!(got, [(".devcontainer", true), (".agent-precommit/user-context.json", false), (".husky", true)]);
    for bad in ["/etc", "../up", "a/../../b", "", "a//b"] {
        assert!(matches!(protected_paths(root.path(), &[bad.into()]), Err(Error::BadPath(_))), "{bad:?}");
    }
}

/// The shape of Microsoft's Node.js template after a user's edits: comments
/// everywhere, trailing commas, features, a string postStartCommand.
const USER_FILE: &str = r#"// For format details, see https://aka.ms/devcontainer.json. For config options, see the
// README at: https://github.com/devcontainers/templates/tree/main/src/javascript-node
{
	"name": "my-app",
	// Or use a Dockerfile or Docker Compose file. More info: https://containers.dev/guide/dockerfile
	"build": {
		"dockerfile": "Dockerfile", // ours too
	},

	// Features to add to the dev container. More info: https://containers.dev/features.
	"features": {
		"ghcr.io/devcontainers/features/python:1": {}
	},

	// Use 'forwardPorts' to make a list of ports inside the container available locally.
	"forwardPorts": [3000],

	/* warm the cache */
	"postStartCommand": "npm run warm",
	"mounts": [
		"source=my-cache,target=/cache,type=volume", // keep me
	],
	"customizations": {
		"vscode": {
			"extensions": ["dbaeumer.vscode-eslint"],
			"settings": { "editor.formatOnSave": true }
		}
	},
}
"#;

#[test]
fn merge_keeps_the_users_comments_keys_and_formatting() {
    let ours = document(&options());
    let (merged, replaced) = merge(USER_FILE, &ours, false, Path::new("devcontainer.json")).expect("no conflicts");
    assert_eq!(replaced, Vec::<String>::new());
    snapshot(include_str!("snapshots/merged.jsonc"), &merged, "merged.jsonc");
    for kept in ["// README at:", "/* warm the cache */", "// keep me", "\"forwardPorts\": [3000]", "// ours too"] {
        assert!(merged.contains(kept), "{kept} lost");
    }
    // Every one of our settings is in force, the user's command runs beside ours.
    let value: Value = jsonc_parser::parse_to_serde_value(&merged, &Default::default()).expect("valid");
    assert_eq!(value["postStartCommand"]["user"], "npm run warm");
    assert_eq!(value["postStartCommand"]["agent-sandbox-firewall"], FIREWALL_APPLY);
    assert_eq!(value["customizations"]["vscode"]["extensions"][0], "dbaeumer.vscode-eslint");
    assert_eq!(value["customizations"]["vscode"]["extensions"].as_array().map(Vec::len), Some(3));
    let ours_value: Value = jsonc_parser::parse_to_serde_value(&ours, &Default::default()).expect("valid");
    for mount in ours_value["mounts"].as_array().expect("mounts") {
        assert!(value["mounts"].as_array().expect("mounts").contains(mount), "{mount}");
    }
    // A second merge changes nothing.
    let (again, _) = merge(&merged, &ours, false, Path::new("devcontainer.json")).expect("no conflicts");
    assert_eq!(again, merged);
}

#[test]
fn a_conflicting_setting_is_refused_without_force_and_replaced_with_it() {
    let user = "{\n  // prebuilt\n  \"image\": \"mcr.microsoft.com/devcontainers/base:bookworm\",\n  \"remoteUser\": \"root\"\n}\n";
    let ours = document(&options());
    let err = merge(user, &ours, false, Path::new("d.json")).expect_err("conflicts").to_string();
    assert_eq!(
        err,
        "d.json: \"image\" is set, and agent-sandbox's guard rails need its own image (\"build\"); \
         \"remoteUser\" is \"root\", agent-sandbox needs \"node\" (run again with --force to replace these; a backup is kept)"
    );
    let (merged, replaced) = merge(user, &ours, true, Path::new("d.json")).expect("forced");
    assert_eq!(replaced.len(), 2);
    let value: Value = jsonc_parser::parse_to_serde_value(&merged, &Default::default()).expect("valid");
    assert_eq!(value["remoteUser"], "node");
    assert!(value.get("image").is_none());
    assert!(merged.contains("// prebuilt"));
}

#[test]
fn init_writes_once_merges_with_a_backup_and_never_overwrites_without_force() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join(".devcontainer");
    let opts = options();
    let first = init(root.path(), &opts, false).expect("init");
    assert_eq!(first.lines.len(), 2, "{:?}", first.lines);
    let json = fs_err::read_to_string(dir.join("devcontainer.json")).expect("read");
    assert_eq!(json, document(&opts));
    assert_eq!(fs_err::read_to_string(dir.join("Dockerfile")).expect("read"), REPO_DOCKERFILE);

    // Twice: nothing changes, no backup appears.
    init(root.path(), &opts, false).expect("init again");
    assert_eq!(fs_err::read_to_string(dir.join("devcontainer.json")).expect("read"), json);
    assert!(!dir.join("devcontainer.json.bak").exists());

    // A user's file: merged, the original kept as a backup.
    fs_err::write(dir.join("devcontainer.json"), USER_FILE).expect("write");
    init(root.path(), &opts, false).expect("merge");
    assert_eq!(fs_err::read_to_string(dir.join("devcontainer.json.bak")).expect("backup"), USER_FILE);

    // A user's own Dockerfile is not replaced without --force, and kept with it.
    fs_err::write(dir.join("Dockerfile"), "FROM node:20\n").expect("write");
    let err = init(root.path(), &opts, false).expect_err("differs").to_string();
    assert!(err.ends_with("Dockerfile exists and differs from agent-sandbox's template (run again with --force to replace it; a backup is kept)"), "{err}");
    assert_eq!(fs_err::read_to_string(dir.join("Dockerfile")).expect("read"), "FROM node:20\n");
    init(root.path(), &opts, true).expect("forced");
    assert_eq!(fs_err::read_to_string(dir.join("Dockerfile")).expect("read"), REPO_DOCKERFILE);
    assert_eq!(fs_err::read_to_string(dir.join("Dockerfile.bak")).expect("backup"), "FROM node:20\n");
}

/// Compares `actual` with the snapshot compiled in; rewrites the file under
/// `UPDATE_SNAPSHOTS=1` (then rebuild to compare against the new one).
fn snapshot(expected: &str, actual: &str, name: &str) {
    if expected == actual {
        return;
    }
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/snapshots").join(name);
        fs_err::write(path, actual).expect("update the snapshot");
        return;
    }
    panic!("snapshot {name} differs (UPDATE_SNAPSHOTS=1 rewrites it):\n--- expected\n{expected}\n--- actual\n{actual}");
}
