//! `codex-init-config [--auth] [--force]` and `codex-logout`: the shared Codex config
//! volume (mounted at `~/.codex` in every sandbox) as seed 002 describes it.
//!
//! [`init_plan`] is pure: from what exists in the volume and what the host has, the
//! files to write and the report; `config.toml`, `AGENTS.md` and `profile.json` are kept
//! unless `force`, `auth.json` is always written with `auth`. The executor reads and
//! writes the volume through a created, never started container (Docker's archive API),
//! and `codex-logout` runs one `rm` in such a container: no shell, no network.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};

use crate::engine::Engine;

/// `config.toml`: the `high` profile (Codex reads the effort as `model_reasoning_effort`).
pub const CONFIG_TOML: &str = "# Written by `agent-sandbox codex-init-config` (kept unless --force).\n\
[profiles.high]\n\
model = \"gpt-5\"\n\
# Constrains reasoning effort for reasoning-capable models\n\
model_reasoning_effort = \"high\"\n";

/// `AGENTS.md`: what an agent should know about where it runs.
pub const AGENTS_MD: &str = "# Environment\n\n\
- Purpose: you are running inside a containerized sandbox (agent-sandbox) designed to provide a safe, \
auditable coding environment with network and filesystem guard rails: an egress allowlist, git hooks \
that cannot be skipped (`--no-verify` and force pushes are refused), and read-only git hooks and configuration.\n\
- Persistence: tool and config directories (`~/.codex`, `~/.claude`) are named Docker volumes shared \
across the repository sandboxes on this machine; the shell history is kept per workspace.\n\
- Installed tools: ast-grep (`ast-grep` / `sg`) for structural search and rewrites, git-delta, jq, fzf. \
Additional tools may be added over time.\n";

/// Where the volume is mounted in the helper container.
const DIR: &str = "/home/node/.codex";

/// One file to write into the volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub name: &'static str,
    pub content: Vec<u8>,
    pub mode: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InitPlan {
    pub files: Vec<File>,
    pub lines: Vec<String>,
}

/// The host's Codex credentials (`$CODEX_HOME` or `~/.codex`), for `--auth`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostAuth {
    pub auth: Vec<u8>,
    pub profile: Option<Vec<u8>>,
}

/// What `codex-init-config` writes. `exists` says whether a file is in the volume.
pub fn init_plan(exists: &dyn Fn(&str) -> bool, host: Option<&HostAuth>, force: bool) -> InitPlan {
    let mut plan = InitPlan::default();
    let offer = |plan: &mut InitPlan, name: &'static str, content: &[u8], mode: u32, always: bool| {
        if exists(name) && !force && !always {
            plan.lines.push(format!("kept {name} (exists; --force overwrites it)"));
        } else {
            plan.files.push(File { name, content: content.to_vec(), mode });
            plan.lines.push(format!("wrote {name}"));
        }
    };
    offer(&mut plan, "config.toml", CONFIG_TOML.as_bytes(), 0o644, false);
    offer(&mut plan, "AGENTS.md", AGENTS_MD.as_bytes(), 0o644, false);
    if let Some(host) = host {
        offer(&mut plan, "auth.json", &host.auth, 0o600, true);
        if let Some(profile) = &host.profile {
            offer(&mut plan, "profile.json", profile, 0o600, false);
        }
    }
    plan
}

/// Reads the host's credentials from `codex_home`; missing `auth.json` says to log in.
pub fn host_auth(codex_home: &Path) -> Result<HostAuth> {
    let auth_path = codex_home.join("auth.json");
    let auth = match fs_err::read(&auth_path) {
        Ok(auth) => auth,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            bail!(
                "{} does not exist: log in on the host first (`codex login`), then run this again",
                auth_path.display()
            )
        }
        Err(err) => return Err(err.into()),
    };
    let profile = match fs_err::read(codex_home.join("profile.json")) {
        Ok(profile) => Some(profile),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => return Err(err.into()),
    };
    Ok(HostAuth { auth, profile })
}

/// The files as a tar archive owned by the sandbox user (uid and gid 1000).
fn archive(files: &[File]) -> std::io::Result<Vec<u8>> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let mut builder = tar::Builder::new(Vec::new());
    for file in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(file.content.len() as u64);
        header.set_mode(file.mode);
        header.set_uid(1000);
        header.set_gid(1000);
        header.set_mtime(now);
        header.set_cksum();
        builder.append_data(&mut header, file.name, file.content.as_slice())?;
    }
    builder.into_inner()
}

fn helper_name(volume: &str) -> String {
    format!("{volume}-helper-{}", std::process::id())
}

/// The host's Codex directory: `$CODEX_HOME`, else `~/.codex`.
pub fn host_codex_home() -> Result<PathBuf> {
    match std::env::var_os("CODEX_HOME").filter(|dir| !dir.is_empty()) {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Ok(std::env::var_os("HOME").map(PathBuf::from).context("HOME is not set (set HOME)")?.join(".codex")),
    }
}

/// The base image that reads and writes the volume, which must exist.
pub fn image(engine: &Engine, base_tag: &str) -> Result<String> {
    let image = crate::names::base_image(base_tag);
    if !engine.image_exists(&image)? {
        bail!("the image {image} does not exist: build it with `agent-sandbox build-base` (with --tag {base_tag} for this tag)");
    }
    Ok(image)
}

/// `codex-init-config`: its report lines.
pub fn init(engine: &Engine, image: &str, volume: &str, host: Option<&HostAuth>, force: bool) -> Result<Vec<String>> {
    let name = helper_name(volume);
    engine.scratch(&name, image, volume, DIR, &["true"])?;
    let result = (|| {
        let mut present = Vec::new();
        for file in ["config.toml", "AGENTS.md", "auth.json", "profile.json"] {
            if engine.path_exists(&name, &format!("{DIR}/{file}"))? {
                present.push(file);
            }
        }
        let plan = init_plan(&|file| present.contains(&file), host, force);
        if !plan.files.is_empty() {
            engine.upload(&name, DIR, archive(&plan.files)?)?;
        }
        let mut lines: Vec<String> = plan.lines.iter().map(|line| format!("{volume}: {line}")).collect();
        if host.is_none() {
            lines.push("credentials: not imported (log in on the host with `codex login`, then add --auth)".into());
        }
        Ok(lines)
    })();
    engine.remove(&name)?;
    result
}

/// `codex-logout`: removes `auth.json` and `profile.json` from the volume (tokens are
/// not revoked on the server).
pub fn logout(engine: &Engine, image: &str, volume: &str) -> Result<Vec<String>> {
    let name = helper_name(volume);
    let auth = format!("{DIR}/auth.json");
    let profile = format!("{DIR}/profile.json");
    engine.scratch(&name, image, volume, DIR, &["rm", "-f", &auth, &profile])?;
    let code = engine.run_created(&name);
    engine.remove(&name)?;
    let code = code?;
    if code != 0 {
        bail!("removing the credentials from {volume} failed (status {code})");
    }
    Ok(vec![format!("{volume}: removed auth.json and profile.json (the tokens are not revoked on the server)")])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(plan: &InitPlan) -> Vec<(&str, u32)> {
        plan.files.iter().map(|file| (file.name, file.mode)).collect()
    }

    #[test]
    fn first_run_writes_config_and_agents_and_no_credentials() {
        let plan = init_plan(&|_| false, None, false);
        assert_eq!(names(&plan), vec![("config.toml", 0o644), ("AGENTS.md", 0o644)]);
        assert_eq!(plan.lines, vec!["wrote config.toml", "wrote AGENTS.md"]);
    }

    #[test]
    fn existing_files_are_kept_unless_force_and_auth_is_always_written() {
        let host = HostAuth { auth: b"{}".to_vec(), profile: Some(b"{\"p\":1}".to_vec()) };
        let plan = init_plan(&|_| true, Some(&host), false);
        assert_eq!(names(&plan), vec![("auth.json", 0o600)]);
        assert_eq!(
            plan.lines,
            vec![
                "kept config.toml (exists; --force overwrites it)",
                "kept AGENTS.md (exists; --force overwrites it)",
                "wrote auth.json",
                "kept profile.json (exists; --force overwrites it)",
            ]
        );
        let forced = init_plan(&|_| true, Some(&host), true);
        assert_eq!(
            names(&forced),
            vec![("config.toml", 0o644), ("AGENTS.md", 0o644), ("auth.json", 0o600), ("profile.json", 0o600)]
        );
    }

    #[test]
    fn host_auth_needs_a_login() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = host_auth(dir.path()).expect_err("no auth.json");
        assert!(err.to_string().contains("log in on the host first (`codex login`)"), "{err}");
        fs_err::write(dir.path().join("auth.json"), "{}").expect("write");
        assert_eq!(host_auth(dir.path()).expect("auth"), HostAuth { auth: b"{}".to_vec(), profile: None });
    }
}
