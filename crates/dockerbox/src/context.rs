//! The build contexts and the files `init` writes (pure: bytes in, bytes out).
//!
//! The base image's context is built into the binary: `devcontainer/base/Dockerfile`
//! and the Feature's files (the same ones `devcontainer init` copies), with the running
//! binary as `feature/agent-sandbox`, so a user who installed only the binary can run
//! `agent-sandbox build-base`. The archive has fixed metadata: an unchanged binary gives
//! an unchanged context and a fully cached build.

use std::path::Path;

/// The base image's Dockerfile.
pub const BASE_DOCKERFILE: &str = include_str!("../../../devcontainer/base/Dockerfile");

/// The tool versions the base Dockerfile takes: (flag, build argument, npm package to
/// resolve `latest` with).
pub const TOOLS: &[(&str, &str, Option<&str>)] = &[
    ("--claude-code-version", "CLAUDE_CODE_VERSION", Some("@anthropic-ai/claude-code")),
    ("--codex-version", "CODEX_VERSION", Some("@openai/codex")),
    ("--ast-grep-version", "AST_GREP_VERSION", Some("@ast-grep/cli")),
    ("--git-delta-version", "GIT_DELTA_VERSION", None),
];

/// The per-repo settings `init` writes when there are none (see `plan::Settings`).
pub const DEFAULT_SETTINGS: &str = "{\n  \"network\": null,\n  \"dns\": []\n}\n";

/// The base image's build context as a tar archive: the Dockerfile, the Feature's files
/// under `feature/` and `binary` as `feature/agent-sandbox`.
pub fn base_context(binary: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut entries: Vec<(String, &[u8], u32)> = vec![("Dockerfile".into(), BASE_DOCKERFILE.as_bytes(), 0o644)];
    for (name, content, mode) in devcontainer::FEATURE_FILES {
        entries.push((format!("feature/{name}"), content.as_bytes(), *mode));
    }
    entries.push(("feature/agent-sandbox".into(), binary, 0o755));
    entries.sort();
    tar_of(&entries)
}

/// The per-repo image's context: the regular files of `.agent-sandbox/` (the
/// Dockerfile at its top; the repository's code is never sent, it is mounted). Symbolic
/// links and other special files are left out.
pub fn repo_context(dir: &Path) -> std::io::Result<Vec<u8>> {
    let mut files: Vec<(String, Vec<u8>, u32)> = Vec::new();
    collect(dir, "", &mut files)?;
    files.sort();
    let entries: Vec<(String, &[u8], u32)> =
        files.iter().map(|(name, data, mode)| (name.clone(), data.as_slice(), *mode)).collect();
    tar_of(&entries)
}

fn collect(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>, u32)>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    for entry in fs_err::read_dir(dir)? {
        let entry = entry?;
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect(&entry.path(), &format!("{name}/"), out)?;
        } else if kind.is_file() {
            let mode = entry.metadata()?.permissions().mode() & 0o755;
            out.push((name, fs_err::read(entry.path())?, mode | 0o644));
        }
    }
    Ok(())
}

fn tar_of(entries: &[(String, &[u8], u32)]) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, data, mode) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(*mode);
        header.set_mtime(0);
        header.set_cksum();
        builder.append_data(&mut header, name, *data)?;
    }
    builder.into_inner()
}

/// The version of a tool of [`TOOLS`] to build with: as given, or for `latest` the
/// concrete release npm names (so that Docker's layer cache holds); `latest` of a tool
/// not on npm cannot be resolved offline. `flag` names the option in messages.
pub fn tool_version(flag: &str, package: Option<&str>, version: String) -> anyhow::Result<String> {
    if version != "latest" {
        return Ok(version);
    }
    let Some(package) = package else {
        anyhow::bail!("{flag} latest cannot be resolved offline: give a release (e.g. {flag} 0.18.2)")
    };
    let out = std::process::Command::new("npm")
        .args(["view", &format!("{package}@latest"), "version"])
        .output()
        .map_err(|err| {
            anyhow::anyhow!(
                "running npm to resolve {package}@latest ({err}): install Node.js and npm, or give a version"
            )
        })?;
    let resolved = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || resolved.is_empty() {
        anyhow::bail!("cannot resolve {package}@latest: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    eprintln!("{package}@latest is {resolved}");
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(archive: &[u8]) -> Vec<(String, u32, u64)> {
        let mut archive = tar::Archive::new(archive);
        let entries = archive.entries().expect("a tar archive");
        entries
            .map(|entry| {
                let entry = entry.expect("entry");
                let header = entry.header();
                let path = entry.path().expect("path").display().to_string();
                (path, header.mode().expect("mode"), header.size().expect("size"))
            })
            .collect()
    }

    #[test]
    fn base_context_is_the_dockerfile_the_feature_and_the_binary() {
        let archive = base_context(b"ELF").expect("tar");
        let got: Vec<(String, u32)> = listing(&archive).into_iter().map(|(path, mode, _)| (path, mode)).collect();
        let want: Vec<(String, u32)> = [
            ("Dockerfile", 0o644),
            ("feature/.gitignore", 0o644),
            ("feature/README.md", 0o644),
            ("feature/agent-sandbox", 0o755),
            ("feature/bashrc", 0o644),
            ("feature/config.jsonc", 0o644),
            ("feature/devcontainer-feature.json", 0o644),
            ("feature/entrypoint.sh", 0o755),
            ("feature/install.sh", 0o755),
        ]
        .iter()
        .map(|(path, mode)| (path.to_string(), *mode))
        .collect();
        assert_eq!(got, want);
        // Same input, same bytes: Docker's cache holds.
        assert_eq!(base_context(b"ELF").expect("tar"), archive);
        assert!(BASE_DOCKERFILE.contains("COPY feature/ /tmp/agent-sandbox-feature/"));
    }

    #[test]
    fn repo_context_has_the_regular_files_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs_err::write(dir.path().join("Dockerfile"), "FROM x\n").expect("write");
        fs_err::create_dir(dir.path().join("sub")).expect("mkdir");
        fs_err::write(dir.path().join("sub/file"), "abc").expect("write");
        std::os::unix::fs::symlink("/etc/shadow", dir.path().join("link")).expect("symlink");
        let got = listing(&repo_context(dir.path()).expect("tar"));
        assert_eq!(got, vec![("Dockerfile".into(), 0o644, 7), ("sub/file".into(), 0o644, 3)]);
    }
}
