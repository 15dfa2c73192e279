//! What the Feature's `install.sh` asks of the binary while the image is built, as
//! root (`agent-sandbox tool-guard-install`): the tool guard's managed configuration,
//! root-owned in the image, from the same generators `exec` uses for the bubblewrap
//! sandbox (`toolguard`): Claude Code's managed settings and Codex's managed
//! requirements running `agent-sandbox tool-guard` before every tool call, merged into
//! the image's own, and the guard's settings as `devcontainer init` took them from the
//! project's config. [`tool_guard_files`] decides (pure); [`install_tool_guard`] writes.

use std::path::{Path, PathBuf};

use guard_settings::ToolGuardSettings;

use crate::Error;

/// Where the Feature installs the binary (on `PATH`); the managed hooks run it there.
pub const IMAGE_BINARY: &str = "/usr/local/bin/agent-sandbox";

/// The file of the Feature's folder holding the tool guard's settings (written by
/// `init` from the project's config, read by `install.sh`).
pub const TOOL_GUARD_FILE: &str = "tool-guard.json";

/// Every file to write, with its content: the settings, Claude Code's managed settings
/// and Codex's requirements. `read` gives the image's current file at a path (its own
/// managed configuration, or what an earlier install wrote); `settings` is the text of
/// the Feature's [`TOOL_GUARD_FILE`] (`None`: no rules). Rules that do not parse are an
/// error: a guard that would deny nothing must not look configured.
pub fn tool_guard_files(
    read: &dyn Fn(&Path) -> Option<String>,
    settings: Option<&str>,
) -> Result<Vec<(PathBuf, String)>, Error> {
    let invalid = |path: &str, message: String| Error::ToolGuard { path: path.into(), message };
    let settings: ToolGuardSettings = match settings {
        Some(text) => serde_json::from_str(text).map_err(|err| invalid(TOOL_GUARD_FILE, err.to_string()))?,
        None => ToolGuardSettings { disallowed: Vec::new(), read_only: false },
    };
    toolguard::Guard::new(&settings.disallowed, settings.read_only).map_err(|err| invalid(TOOL_GUARD_FILE, err))?;
    let command = format!("{IMAGE_BINARY} tool-guard");
    let claude_path = runtime_layout::CLAUDE_MANAGED_SETTINGS;
    let claude = toolguard::claude_managed_settings(
        read(Path::new(claude_path)).as_deref(),
        &format!("{command} --agent claude"),
    )
    .map_err(|why| {
        invalid(claude_path, format!("{why} (Claude Code would not read it either; fix it in the image)"))
    })?;
    let codex_path = runtime_layout::CODEX_REQUIREMENTS;
    let codex =
        toolguard::codex_requirements(read(Path::new(codex_path)).as_deref(), &format!("{command} --agent codex"));
    Ok(vec![
        (PathBuf::from(ToolGuardSettings::CONTAINER_PATH), settings.to_json()),
        (PathBuf::from(claude_path), claude),
        (PathBuf::from(codex_path), codex),
    ])
}

/// Writes [`tool_guard_files`] as root: each file 0644 (replaced atomically), each
/// directory holding one root-owned 0755, so that the agent's user can neither change
/// nor replace them. Returns a line per file.
pub fn install_tool_guard(settings: Option<&Path>) -> Result<Vec<String>, Error> {
    use std::os::unix::fs::PermissionsExt as _;
    // On a host these files would hand every Claude Code and Codex session to a guard
    // that blocks all calls outside a sandbox; install.sh makes the marker first.
    if runtime_layout::detect() != runtime_layout::Where::Container {
        return Err(Error::NotAnImage("tool-guard-install"));
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source: std::io::Error| Error::Io { path: path.clone(), source }
    };
    let settings = match settings {
        Some(path) => Some(std::fs::read_to_string(path).map_err(io(path))?),
        None => None,
    };
    let read = |path: &Path| std::fs::read_to_string(path).ok();
    let mut lines = Vec::new();
    for (path, content) in tool_guard_files(&read, settings.as_deref())? {
        let dir = path.parent().expect("every managed file is in a directory");
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        std::os::unix::fs::chown(dir, Some(0), Some(0)).map_err(io(dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(io(dir))?;
        util::fs::atomic_write(&path, content.as_bytes(), 0o644).map_err(io(&path))?;
        std::os::unix::fs::chown(&path, Some(0), Some(0)).map_err(io(&path))?;
        lines.push(format!("wrote {} (root, 0644)", path.display()));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_gets_the_guard_with_the_projects_rules() {
        let files = tool_guard_files(&|_| None, Some(r#"{"disallowed": ["Write"], "readOnly": false}"#))
            .expect("valid settings");
        let paths: Vec<&Path> = files.iter().map(|(path, _)| path.as_path()).collect();
        assert_eq!(
            paths,
            [
                Path::new("/etc/agent-sandbox/tool-guard.json"),
                Path::new("/etc/claude-code/managed-settings.json"),
                Path::new("/etc/codex/requirements.toml"),
            ]
        );
        assert_eq!(files[0].1, r#"{"disallowed":["Write"],"readOnly":false}"#);
        // The same documents as the bubblewrap sandbox's, with the image's binary.
        assert_eq!(
            files[1].1,
            toolguard::claude_managed_settings(None, "/usr/local/bin/agent-sandbox tool-guard --agent claude")
                .expect("valid")
        );
        assert_eq!(
            files[2].1,
            toolguard::codex_requirements(None, "/usr/local/bin/agent-sandbox tool-guard --agent codex")
        );
        let none = tool_guard_files(&|_| None, None).expect("no rules");
        assert_eq!(none[0].1, r#"{"disallowed":[],"readOnly":false}"#);
    }

    #[test]
    fn the_images_own_managed_files_are_kept_and_bad_ones_refused() {
        let image = |path: &Path| {
            (path == Path::new("/etc/claude-code/managed-settings.json"))
                .then(|| r#"{"permissions": {"deny": ["WebSearch"]}}"#.to_owned())
        };
        let files = tool_guard_files(&image, None).expect("valid");
        assert!(files[1].1.contains("WebSearch") && files[1].1.contains("allowManagedHooksOnly"), "{}", files[1].1);
        let broken = |_: &Path| Some("[]".to_owned());
        let err = tool_guard_files(&broken, None).expect_err("not an object");
        assert!(err.to_string().starts_with("/etc/claude-code/managed-settings.json: not a JSON object"), "{err}");
        for bad in [r#"{"disallowed": ["Bash("], "readOnly": false}"#, r#"{"disallowed": []}"#, "x"] {
            let err = tool_guard_files(&|_| None, Some(bad)).expect_err(bad);
            assert!(err.to_string().starts_with("tool-guard.json: "), "{err}");
        }
    }
}
