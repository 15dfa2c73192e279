//! Whole-document snapshots of what `init` writes for real-world-shaped dev containers
//! (`UPDATE_SNAPSHOTS=1 cargo test -p devcontainer` rewrites them after a deliberate
//! change; compiled in, so the tests run from any directory), the refusals, and the
//! executor's all-or-nothing writes.

use std::{collections::BTreeMap, path::Path};

use super::*;

fn options() -> Options {
    Options {
        base_tag: None,
        protected: [".git/hooks", ".git/config", ".devcontainer", ".agent-sandbox", ".githooks"]
            .map(String::from)
            .to_vec(),
        per_workspace_config: false,
        force: false,
        tool_guard: Some(guard_settings::ToolGuardSettings { disallowed: vec!["WebFetch".into()], read_only: true }),
        local_workspace: "/src/app".into(),
        image_user: None,
        session_git: true,
        backup_dir: None,
    }
}

/// Plans against an in-memory tree.
fn plan_for(files: &[(&str, &str)], options: &Options) -> Result<Plan, Error> {
    let tree: BTreeMap<String, String> = files.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect();
    plan(&|path: &Path| tree.get(&path.display().to_string()).cloned(), options)
}

fn written<'a>(plan: &'a Plan, path: &str) -> &'a str {
    plan.files
        .iter()
        .find(|(p, _, _)| p == Path::new(path))
        .map(|(_, c, _)| c.as_str())
        .unwrap_or_else(|| panic!("{path} not planned: {:?}", plan.files.iter().map(|f| &f.0).collect::<Vec<_>>()))
}

fn value(text: &str) -> Value {
    jsonc_parser::parse_to_serde_value(text, &Default::default()).expect("valid")
}

#[test]
fn a_repository_without_a_dev_container_gets_the_template_and_the_feature() {
    let plan = plan_for(&[], &options()).expect("plan");
    snapshot(
        include_str!("snapshots/devcontainer.json"),
        written(&plan, ".devcontainer/devcontainer.json"),
        "devcontainer.json",
    );
    assert_eq!(written(&plan, ".devcontainer/Dockerfile"), REPO_DOCKERFILE);
    assert_eq!(written(&plan, ".devcontainer/agent-sandbox/.gitignore"), "/agent-sandbox\n");
    assert!(written(&plan, ".devcontainer/agent-sandbox/install.sh").starts_with("#!/bin/sh"));
    assert_eq!(plan.binary, Path::new(".devcontainer/agent-sandbox/agent-sandbox"));
    assert_eq!(
        written(&plan, ".devcontainer/agent-sandbox/tool-guard.json"),
        "{\"disallowed\":[\"WebFetch\"],\"readOnly\":true}\n"
    );
}

#[test]
fn a_legacy_firewall_policy_is_named_with_what_replaces_it() {
    let plain = plan_for(&[], &options()).expect("plan");
    assert!(!plain.lines.iter().any(|line| line.contains("firewall.jsonc")), "{:?}", plain.lines);
    let legacy = plan_for(&[(".agent-sandbox/firewall.jsonc", "{\"domains\": []}")], &options()).expect("plan");
    assert!(
        legacy.lines.iter().any(|line| line.starts_with("WARNING: .agent-sandbox/firewall.jsonc is no longer read")),
        "{:?}",
        legacy.lines
    );
}

#[test]
fn tool_guard_rules_that_do_not_parse_stop_init() {
    let settings = guard_settings::ToolGuardSettings { disallowed: vec!["Bash(".into()], read_only: false };
    let err = plan_for(&[], &Options { tool_guard: Some(settings), ..options() }).expect_err("refused");
    assert!(
        err.to_string().starts_with(".devcontainer/agent-sandbox/tool-guard.json: tools.disallowed: \"Bash(\""),
        "{err}"
    );
    let none = plan_for(&[], &Options { tool_guard: None, ..options() }).expect("plan");
    assert!(none.files.iter().all(|(path, _, _)| !path.ends_with("tool-guard.json")));
}

#[test]
fn generated_dockerfile_is_seed_002s_template() {
    snapshot(include_str!("snapshots/Dockerfile"), REPO_DOCKERFILE, "Dockerfile");
}

#[test]
fn protected_paths_are_only_those_that_exist_and_hooks_path_must() {
    let root = tempfile::tempdir().expect("tempdir");
    fs_err::create_dir_all(root.path().join(".git")).expect("mkdir");
    fs_err::write(root.path().join(".git/config"), "").expect("write");
    fs_err::create_dir_all(root.path().join(".githooks")).expect("mkdir");
    fs_err::write(root.path().join(".envrc"), "").expect("write");
    let got = protected_paths(root.path(), &["./tools/ci/".into(), ".envrc".into()], Some(".githooks")).expect("valid");
    // `.git/hooks` is created inside `.git` by init; `tools/ci`, `.husky`... do not exist: not mounted.
    assert_eq!(got, [".git/hooks", ".git/config", ".devcontainer", ".envrc", ".githooks"]);
    let absolute = root.path().join(".githooks").display().to_string();
    assert_eq!(
        protected_paths(root.path(), &[], Some(&absolute)).expect("valid").last().map(String::as_str),
        Some(".githooks")
    );
    assert_eq!(protected_paths(root.path(), &[], Some("/usr/share/hooks")).expect("outside").len(), 4);
    assert!(matches!(protected_paths(root.path(), &[], Some(".hooks")), Err(Error::MissingHooksPath(_))));
    // husky's hooks path, `.husky/_`, is git-ignored (a fresh clone lacks it until `npm
    // install`): read-only with `.husky`, never a mount of its own.
    fs_err::create_dir_all(root.path().join(".husky/_")).expect("mkdir");
    let got = protected_paths(root.path(), &[], Some(".husky/_")).expect("valid");
    assert!(got.contains(&".husky".to_owned()) && !got.iter().any(|path| path == ".husky/_"), "{got:?}");
    for bad in ["/etc", "../up", "a/../../b", "", "a//b"] {
        assert!(matches!(protected_paths(root.path(), &[bad.into()], None), Err(Error::BadPath(_))), "{bad:?}");
    }
    // A `.git` file, and the git directory it names inside the workspace, are read-only.
    let separate = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new("git")
        .args(["init", "-q", "--separate-git-dir=.repo"])
        .current_dir(separate.path())
        .output()
        .expect("git");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = protected_paths(&separate.path().canonicalize().expect("real"), &[], None).expect("valid");
    assert_eq!(got, [".devcontainer", ".git", ".repo"]);
    // Nothing was created in the tree.
    assert!(!root.path().join(".git/hooks").exists() && !root.path().join("tools").exists());
}

#[test]
fn parents_of_protected_paths_are_pinned_shallowest_first() {
    let protected: Vec<String> =
        [".git/hooks", ".git/config", ".husky", ".husky/pre-commit", "tools/ci/check.sh", ".claude/settings.json"]
            .map(String::from)
            .to_vec();
    // `.husky` is a read-only mount already; the rest are bound onto themselves.
    assert_eq!(pinned_parents(&protected), [".claude", ".git", "tools", "tools/ci"]);
    assert!(pinned_parents(&[".devcontainer".into(), ".envrc".into()]).is_empty());
}

/// The shape of Microsoft's Node.js template after a user's edits: comments
/// everywhere, trailing commas, features, their own Dockerfile, `remoteUser: node`.
const USER_BUILD: &str = r#"// For format details, see https://aka.ms/devcontainer.json. For config options, see the
// README at: https://github.com/devcontainers/templates/tree/main/src/javascript-node
{
	"name": "my-app",
	// Or use a Dockerfile or Docker Compose file. More info: https://containers.dev/guide/dockerfile
	"build": {
		"dockerfile": "Dockerfile", // theirs: FROM node:20 AS build ... FROM debian
		"context": "..",
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
	"remoteUser": "node",
}
"#;

#[test]
fn a_build_with_the_users_dockerfile_keeps_it_and_gains_the_feature() {
    let files = [
        (".devcontainer/devcontainer.json", USER_BUILD),
        (".devcontainer/Dockerfile", "FROM node:20 AS build\nFROM debian:bookworm\n"),
    ];
    let plan = plan_for(&files, &options()).expect("plan");
    let merged = written(&plan, ".devcontainer/devcontainer.json");
    snapshot(include_str!("snapshots/merged-build.jsonc"), merged, "merged-build.jsonc");
    for kept in ["// README at:", "/* warm the cache */", "// keep me", "\"forwardPorts\": [3000]", "// theirs:"] {
        assert!(merged.contains(kept), "{kept} lost");
    }
    // Their Dockerfile is not touched, nor is their postStartCommand.
    assert!(!plan.files.iter().any(|(p, _, _)| p == Path::new(".devcontainer/Dockerfile")));
    let merged_value = value(merged);
    assert_eq!(merged_value["postStartCommand"], "npm run warm");
    assert_eq!(merged_value["build"]["dockerfile"], "Dockerfile");
    assert!(merged_value["features"].get("./agent-sandbox").is_some());
    // A second run changes nothing.
    let again = plan_for(&[(".devcontainer/devcontainer.json", merged)], &options()).expect("plan");
    assert_eq!(written(&again, ".devcontainer/devcontainer.json"), merged);
    assert!(again.lines[0].ends_with("already has every setting"), "{:?}", again.lines);
}

#[test]
fn an_image_with_a_vscode_user_keeps_both() {
    let user = "{\n  // prebuilt\n  \"image\": \"mcr.microsoft.com/devcontainers/base:bookworm\",\n  \"remoteUser\": \"vscode\",\n  \"workspaceFolder\": \"/src\"\n}\n";
    let plan = plan_for(&[(".devcontainer/devcontainer.json", user)], &options()).expect("plan");
    snapshot(
        include_str!("snapshots/merged-image.jsonc"),
        written(&plan, ".devcontainer/devcontainer.json"),
        "merged-image.jsonc",
    );
}

#[test]
fn compose_keeps_the_users_services_and_adds_a_read_only_override() {
    let user = "{\n  \"name\": \"app+db\",\n  \"dockerComposeFile\": \"docker-compose.yml\",\n  \"service\": \"app\",\n  \"workspaceFolder\": \"/workspaces/app\",\n  \"remoteUser\": \"dev\"\n}\n";
    let compose = "services:\n  app:\n    build: .\n    volumes:\n      - ..:/workspaces/app:cached\n  db:\n    image: postgres\n";
    let files = [(".devcontainer/devcontainer.json", user), (".devcontainer/docker-compose.yml", compose)];
    let plan = plan_for(&files, &options()).expect("plan");
    snapshot(
        include_str!("snapshots/merged-compose.jsonc"),
        written(&plan, ".devcontainer/devcontainer.json"),
        "merged-compose.jsonc",
    );
    snapshot(
        include_str!("snapshots/agent-sandbox.compose.yml"),
        written(&plan, ".devcontainer/agent-sandbox.compose.yml"),
        "agent-sandbox.compose.yml",
    );
    let again = plan_for(
        &[(".devcontainer/devcontainer.json", written(&plan, ".devcontainer/devcontainer.json")), files[1]],
        &options(),
    )
    .expect("plan");
    assert!(again.lines[0].ends_with("already has every setting"), "{:?}", again.lines);
}

/// The official templates' shape: the compose file beside `.devcontainer/` (in the
/// workspace itself) and `workspaceFolder` named with a devcontainer variable. Both
/// used to validate and protect nothing: the sources resolved to the workspace's
/// parent, and compose read the variable as its own, empty (`/workspaces/.git`).
#[test]
fn compose_in_the_workspace_with_the_templates_workspace_folder_protects_the_workspace() {
    let user = "{\n  \"dockerComposeFile\": [\"../docker-compose.yml\"],\n  \"service\": \"app\",\n  \"workspaceFolder\": \"/workspaces/${localWorkspaceFolderBasename}\"\n}\n";
    let compose = "services:\n  app:\n    image: debian\n    volumes:\n      - .:/workspaces/app\n";
    let files = [(".devcontainer/devcontainer.json", user), ("docker-compose.yml", compose)];
    let plan = plan_for(&files, &options()).expect("plan");
    let written_override = written(&plan, ".devcontainer/agent-sandbox.compose.yml");
    snapshot(
        include_str!("snapshots/agent-sandbox.compose-parent.yml"),
        written_override,
        "agent-sandbox.compose-parent.yml",
    );
    assert!(written_override.contains("\"./.git:/var/lib/agent-sandbox/home/git\""), "{written_override}");
    assert!(written_override.contains("\"agent-sandbox-git:/workspaces/app/.git\""), "{written_override}");
    assert!(!written_override.contains(".git/hooks"), "{written_override}");
    let merged = value(written(&plan, ".devcontainer/devcontainer.json"));
    assert_eq!(merged["dockerComposeFile"], json!(["../docker-compose.yml", "agent-sandbox.compose.yml"]));
    // The folder's own spelling stays for the devcontainer CLI, which substitutes it.
    assert_eq!(merged["workspaceFolder"], "/workspaces/${localWorkspaceFolderBasename}");
}

/// Every `workspaceFolder` and compose path form: what the override's first read-only
/// target becomes, or why init refuses.
#[test]
fn compose_workspace_folders_are_substituted_or_refused_with_the_reason() {
    let compose = "services:\n  app:\n    image: debian\n";
    let cases: &[(&str, &str, Result<&str, &str>)] = &[
        ("docker-compose.yml", "/workspaces/app", Ok("\"../.devcontainer:/workspaces/app/.devcontainer:ro\"")),
        (
            "./docker-compose.yml",
            "/w/${localWorkspaceFolderBasename}",
            Ok("\"../.devcontainer:/w/app/.devcontainer:ro\""),
        ),
        ("../docker-compose.yml", "${localWorkspaceFolder}", Ok("\"./.devcontainer:/src/app/.devcontainer:ro\"")),
        (
            "../ci/../docker-compose.yml",
            "/w/${localWorkspaceFolderBasename}-x",
            Ok("\"./.devcontainer:/w/app-x/.devcontainer:ro\""),
        ),
        ("../compose/dev.yml", "/w/$HOME", Ok("\"../.devcontainer:/w/$$HOME/.devcontainer:ro\"")),
        (
            "../../shared/docker-compose.yml",
            "/workspaces/app",
            Err("its compose file \"../../shared/docker-compose.yml\" is outside the workspace"),
        ),
        (
            "/etc/docker-compose.yml",
            "/workspaces/app",
            Err("its compose file \"/etc/docker-compose.yml\" is outside the workspace"),
        ),
        (
            "docker-compose.yml",
            "/w/${localEnv:USER}",
            Err("uses ${localEnv:USER}, which is known only when the container is made"),
        ),
        ("docker-compose.yml", "/w/${devcontainerId}", Err("uses ${devcontainerId}, which is known only")),
        (
            "docker-compose.yml",
            "${containerWorkspaceFolder}",
            Err("uses ${containerWorkspaceFolder}, which is known only"),
        ),
        ("docker-compose.yml", "/w/${localWorkspaceFolderBasename", Err("has an unclosed \"${\"")),
    ];
    for (file, folder, expected) in cases {
        let user = json!({ "dockerComposeFile": file, "service": "app", "workspaceFolder": folder }).to_string();
        let compose_rel = compose_path(file, Path::new("x")).map(|p| p.display().to_string()).unwrap_or_default();
        let files = [(".devcontainer/devcontainer.json", user.as_str()), (compose_rel.as_str(), compose)];
        match (plan_for(&files, &options()), expected) {
            (Ok(plan), Ok(volume)) => {
                let text = written(&plan, ".devcontainer/agent-sandbox.compose.yml");
                let first = text.lines().find(|line| line.contains(":ro")).unwrap_or_default();
                assert_eq!(first.trim_start_matches(" ").trim_start_matches("- "), *volume, "{file} {folder}");
            }
            (Err(err), Err(reason)) => assert!(err.to_string().contains(reason), "{file} {folder}: {err}"),
            (got, _) => panic!("{file} {folder}: {:?}", got.map(|plan| plan.lines)),
        }
    }
}

#[test]
fn risky_settings_are_refused_with_the_list_and_kept_under_force() {
    let user = r#"{
  "image": "mcr.microsoft.com/devcontainers/base:bookworm",
  "remoteUser": "root",
  "mounts": ["source=/var/run/docker.sock,target=/var/run/docker.sock,type=bind", "source=${localEnv:HOME}/.ssh,target=/root/.ssh,type=bind"],
  "containerEnv": { "GITHUB_TOKEN": "${localEnv:GITHUB_TOKEN}" },
  "runArgs": ["--privileged", "--network=host"]
}
"#;
    let files = [(".devcontainer/devcontainer.json", user)];
    let err = plan_for(&files, &options()).expect_err("risky").to_string();
    assert_eq!(
        err,
        ".devcontainer/devcontainer.json: these settings defeat a guard rail:
  - mount \"source=/var/run/docker.sock,target=/var/run/docker.sock,type=bind\": the Docker socket gives whoever is inside root on the host
  - mount \"source=${localEnv:HOME}/.ssh,target=/root/.ssh,type=bind\": mounts the host's .ssh (credentials) where the agent reads it
  - runArgs --privileged: the agent can reach every device and disable the firewall
  - runArgs --network=host: the host's network, where the container's firewall rules would change the host's
  - \"remoteUser\": \"root\": the agent would work as root and could turn the firewall off
  - ${localEnv:GITHUB_TOKEN}: passes a secret of the host's environment into the container, where the agent reads it
(remove them, or run again with --force to keep them; nothing was written)"
    );
    let forced = plan_for(&files, &Options { force: true, ..options() }).expect("forced");
    assert_eq!(forced.accepted_risks.len(), 6);
    let merged = value(written(&forced, ".devcontainer/devcontainer.json"));
    assert_eq!(merged["image"], "mcr.microsoft.com/devcontainers/base:bookworm");
    assert_eq!(merged["remoteUser"], "root");
}

#[test]
fn a_file_from_the_previous_init_is_migrated_and_keeps_its_config_volumes() {
    // The previous init's output, where `.husky`, `.agent-precommit` and `tools/ci` were
    // empty directories its initializeCommand created; the user has since removed them.
    let old = include_str!("snapshots/old-generated.jsonc");
    let exists = [".devcontainer/Dockerfile", ".git/hooks", ".git/config", ".devcontainer", ".agent-sandbox"];
    let tree: BTreeMap<String, String> = exists
        .iter()
        .map(|p| (p.to_string(), String::new()))
        .chain([(".devcontainer/devcontainer.json".to_owned(), old.to_owned())])
        .collect();
    let opts = Options { protected: exists[1..].iter().map(|p| p.to_string()).collect(), ..options() };
    let plan = plan(&|path: &Path| tree.get(&path.display().to_string()).cloned(), &opts).expect("plan");
    let migrated = written(&plan, ".devcontainer/devcontainer.json");
    snapshot(include_str!("snapshots/migrated.jsonc"), migrated, "migrated.jsonc");
    let migrated = value(migrated);
    for gone in ["initializeCommand", "postStartCommand", "waitFor"] {
        assert!(migrated.get(gone).is_none(), "{gone} kept");
    }
    let mounts = migrated["mounts"].to_string();
    assert!(!mounts.contains(".husky") && !mounts.contains("tools/ci"), "{mounts}");
    // Their per-workspace config volumes stay where their logins are; no second mount there.
    assert!(mounts.contains("agent-sandbox-claude-${devcontainerId}") && !mounts.contains(CLAUDE_VOLUME), "{mounts}");
}

#[test]
fn a_users_mount_over_a_protected_path_is_a_risk() {
    let user = "{\"image\": \"debian\", \"workspaceFolder\": \"/src\", \"mounts\": [\"source=hooks-vol,target=/src/.git/hooks,type=volume\"]}";
    let err = plan_for(&[(".devcontainer/devcontainer.json", user)], &options()).expect_err("risky").to_string();
    assert!(
        err.contains("mount \"source=hooks-vol,target=/src/.git/hooks,type=volume\": mounts over /src/.git/hooks, which must be the session repository's"),
        "{err}"
    );
}

#[test]
fn the_base_tag_changes_without_force_and_stays_without_the_flag() {
    let first = plan_for(&[], &Options { base_tag: Some("2026-11-01".into()), ..options() }).expect("plan");
    let json = written(&first, ".devcontainer/devcontainer.json").to_owned();
    let files = [(".devcontainer/devcontainer.json", json.as_str()), (".devcontainer/Dockerfile", REPO_DOCKERFILE)];
    let kept = plan_for(&files, &options()).expect("plan");
    assert_eq!(
        value(written(&kept, ".devcontainer/devcontainer.json"))["build"]["args"]["BASE_IMAGE_TAG"],
        "2026-11-01"
    );
    let bumped = plan_for(&files, &Options { base_tag: Some("2026-11-21".into()), ..options() }).expect("plan");
    let bumped_json = written(&bumped, ".devcontainer/devcontainer.json");
    assert_eq!(bumped_json, json.replace("2026-11-01", "2026-11-21"));
}

#[test]
fn per_workspace_config_names_the_volumes_after_the_workspace() {
    let plan = plan_for(&[], &Options { per_workspace_config: true, ..options() }).expect("plan");
    let mounts = value(written(&plan, ".devcontainer/devcontainer.json"))["mounts"].to_string();
    assert!(
        mounts.contains("source=agent-sandbox-claude-code-config-${devcontainerId},target=/home/node/.claude"),
        "{mounts}"
    );
    assert!(
        mounts.contains("source=agent-sandbox-codex-config-${devcontainerId},target=/home/node/.codex"),
        "{mounts}"
    );
}

#[test]
fn init_writes_everything_or_nothing_and_creates_no_empty_directory() {
    let root = tempfile::tempdir().expect("tempdir");
    let binary = root.path().join("fake-binary");
    fs_err::write(&binary, "#!/bin/sh\n").expect("write");
    fs_err::create_dir_all(root.path().join(".git")).expect("mkdir");
    let dir = root.path().join(".devcontainer");
    fs_err::create_dir_all(&dir).expect("mkdir");
    let risky = "{\"image\": \"debian\", \"privileged\": true}\n";
    fs_err::write(dir.join("devcontainer.json"), risky).expect("write");
    let outside = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        protected: protected_paths(root.path(), &[], None).expect("paths"),
        backup_dir: Some(outside.path().join("backups")),
        ..Options::default()
    };
    let err = init(root.path(), &opts, &binary).expect_err("risky");
    assert!(err.to_string().contains("nothing was written"), "{err}");
    let mut listing: Vec<String> = walk(root.path());
    assert_eq!(listing, [".devcontainer/devcontainer.json", ".git/", "fake-binary"]);
    assert_eq!(fs_err::read_to_string(dir.join("devcontainer.json")).expect("read"), risky);

    fs_err::write(dir.join("devcontainer.json"), "{\"image\": \"debian\"}\n").expect("write");
    let report = init(root.path(), &opts, &binary).expect("init");
    // The previous file is kept outside the work tree, and the report says where.
    let backups = walk(outside.path());
    assert_eq!(backups.len(), 1, "{backups:?}");
    let backup = outside.path().join(&backups[0]);
    assert_eq!(fs_err::read_to_string(&backup).expect("backup"), "{\"image\": \"debian\"}\n");
    let said = format!("the previous .devcontainer/devcontainer.json is kept at {}", backup.display());
    assert!(report.lines.contains(&said), "{:?}", report.lines);
    listing = walk(root.path());
    assert_eq!(
        listing,
        [
            ".devcontainer/agent-sandbox/.gitignore",
            ".devcontainer/agent-sandbox/README.md",
            ".devcontainer/agent-sandbox/agent-sandbox",
            ".devcontainer/agent-sandbox/bashrc",
            ".devcontainer/agent-sandbox/config.jsonc",
            ".devcontainer/agent-sandbox/devcontainer-feature.json",
            ".devcontainer/agent-sandbox/entrypoint.sh",
            ".devcontainer/agent-sandbox/install.sh",
            ".devcontainer/devcontainer.json",
            ".git/hooks/",
            "fake-binary",
        ]
    );
    let json = fs_err::read_to_string(dir.join("devcontainer.json")).expect("read");
    init(root.path(), &opts, &binary).expect("again");
    assert_eq!(fs_err::read_to_string(dir.join("devcontainer.json")).expect("read"), json);
    assert_eq!(walk(outside.path()).len(), 1, "a run that changes nothing keeps no backup");
}

/// Files (and empty directories, with a trailing slash) under `root`, sorted.
fn walk(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries: Vec<_> = fs_err::read_dir(&dir).expect("read_dir").filter_map(Result::ok).collect();
        if entries.is_empty() && dir != root {
            out.push(format!("{}/", dir.strip_prefix(root).expect("inside").display()));
        }
        for entry in entries {
            if entry.path().is_dir() {
                stack.push(entry.path());
            } else {
                out.push(entry.path().strip_prefix(root).expect("inside").display().to_string());
            }
        }
    }
    out.sort();
    out
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

/// A file that names no user gets the image's as `init` learned it (common-utils
/// images: `vscode`, not `node`), the Feature's own user on an image that runs as root,
/// and, when the image's is unknown here, no `remoteUser` and nothing in a home.
#[test]
fn the_remote_user_is_the_images_or_left_out() {
    let user = "{\"image\": \"mcr.microsoft.com/devcontainers/base:bookworm\"}\n";
    let merged = |image_user: Option<&str>| {
        let options = Options { image_user: image_user.map(str::to_owned), ..options() };
        let plan = plan_for(&[(".devcontainer/devcontainer.json", user)], &options).expect("plan");
        (value(written(&plan, ".devcontainer/devcontainer.json")), plan.lines)
    };
    let (vscode, _) = merged(Some("vscode"));
    assert_eq!(vscode["remoteUser"], "vscode");
    assert_eq!(vscode["containerEnv"]["CLAUDE_CONFIG_DIR"], "/home/vscode/.claude");
    assert!(vscode["mounts"].to_string().contains("target=/home/vscode/.codex,type=volume"), "{vscode}");
    let (root, _) = merged(Some("root"));
    assert_eq!(root["remoteUser"], "node");
    let (unknown, lines) = merged(None);
    assert_eq!(unknown.get("remoteUser"), None);
    assert_eq!(unknown["containerEnv"], json!({"HISTFILE": "/commandhistory/.bash_history"}));
    let mounts = unknown["mounts"].to_string();
    assert!(!mounts.contains("target=/home/") && mounts.contains("target=/commandhistory"), "{mounts}");
    assert!(lines.iter().any(|line| line.starts_with("remote user: the image's, which init cannot see")), "{lines:?}");
    // The file's own user wins over the image's.
    let named = "{\"image\": \"x\", \"remoteUser\": \"dev\"}\n";
    let options = Options { image_user: Some("vscode".into()), ..options() };
    let plan = plan_for(&[(".devcontainer/devcontainer.json", named)], &options).expect("plan");
    assert_eq!(value(written(&plan, ".devcontainer/devcontainer.json"))["remoteUser"], "dev");
}
