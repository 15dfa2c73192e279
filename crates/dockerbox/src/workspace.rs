//! What a container built for a workspace takes from the workspace itself: its
//! protected paths (for the dev container and the Docker sandbox alike) and the
//! options `devcontainer init` writes from.

use std::path::Path;

use anyhow::{Context as _, Result};

/// `agent-sandbox devcontainer init` for the workspace at `root`: the lines to print.
pub fn devcontainer_init(
    root: &Path,
    base_tag: Option<String>,
    force: bool,
    per_workspace_config: bool,
    binary: &Path,
) -> Result<Vec<String>> {
    if !root.is_dir() {
        anyhow::bail!("{} is not a directory (give the workspace to set up)", root.display());
    }
    let options = devcontainer::Options {
        base_tag,
        protected: protected_paths(root)?,
        per_workspace_config,
        force,
        tool_guard: Some(guard_settings::ToolGuardSettings::from_config(&project_config(root)?)),
        local_workspace: std::path::absolute(root).context("cannot make the workspace's path absolute")?,
        image_user: image_user(root),
        session_git: root.join(".git").symlink_metadata().is_ok_and(|meta| meta.is_dir()),
        // The previous devcontainer.json goes outside the work tree (nothing untracked
        // left in the project); without HOME it is not kept (git history holds it).
        backup_dir: std::env::var_os("HOME")
            .filter(|home| !home.is_empty())
            .map(|home| config::approval::state_dir(Path::new(&home)).join("devcontainer-backups")),
    };
    Ok(devcontainer::init(root, &options, binary)?.lines)
}

/// The user the workspace's image runs the agent as, when its devcontainer.json names
/// none: `docker image inspect` of the image (or of its Dockerfile's base), read by
/// `devcontainer::image_user`. `None` when there is nothing to learn or no way to learn
/// it here (no engine, the image not pulled).
fn image_user(root: &Path) -> Option<String> {
    let read = |rel: &Path| std::fs::read_to_string(root.join(rel)).ok();
    let query = devcontainer::image_user::query(&read)?;
    let config = std::process::Command::new("docker")
        .args(["image", "inspect", "--format", "{{json .Config}}", &query.image])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned());
    devcontainer::image_user::decide(&query, config.as_deref())
}

/// The workspace's protected paths (`devcontainer::protected_paths`), with the project's
/// `checks.protectedPaths` and git's `core.hooksPath`. Shared by the devcontainer and
/// the Docker sandbox.
pub fn protected_paths(root: &Path) -> Result<Vec<String>> {
    let config = project_config(root)?;
    let configured: Vec<String> = config.protected_paths.iter().map(|p| p.value.clone()).collect();
    let hooks_path = repo_config(root, "core.hooksPath");
    Ok(devcontainer::protected_paths(root, &configured, hooks_path.as_deref())?)
}

/// `key` in the workspace repository's own config file (`.git/config` alone: no
/// global file, no includes); `None` when unset or empty.
pub(crate) fn repo_config(root: &Path, key: &str) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("config")
        .arg("--file")
        .arg(root.join(".git/config"))
        .args(["--get", key])
        .output()
        .ok()?;
    let value = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !value.is_empty()).then_some(value)
}

/// The defaults and the project's own file, with no flags and no global file: what a
/// container built for the project takes from it. Read even before `config allow`:
/// protected paths only ever add read-only mounts, and `tools.*` only ever deny.
fn project_config(root: &Path) -> Result<config::Config> {
    let sources = config::Sources { global_dir: None, project_dir: Some(root.join(".agent-sandbox")), explicit: None };
    Ok(config::load(&sources, config::Layer::default())?.0)
}
