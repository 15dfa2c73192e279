//! `cargo xtask feature`: the Dev Container Feature as the artifact a registry serves,
//! made by the devcontainer CLI's own `devcontainer features package`
//! (`devcontainer-feature-agent-sandbox.tgz` and `devcontainer-collection.json` in
//! `target/feature/out/`), with a static agent-sandbox binary inside: a Feature named by
//! reference (`"ghcr.io/…/agent-sandbox:1": {}`) has no host to copy a binary from, and
//! a static one (musl, or glibc with `+crt-static`) runs on every Debian and Ubuntu release
//! whatever its C library.
//!
//! The CLI's project layout is staged first, in `target/feature/project/`:
//! `src/agent-sandbox/` (the Feature's files and the binary) and `test/agent-sandbox/`
//! (`devcontainer/feature/test/agent-sandbox/`, the `devcontainer features test`
//! scenarios), which the end-to-end tests hand to `features test` and `features publish`.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};

use crate::{root, run};

/// The preferred target of the artifact's binary: static, so the image's C library does
/// not matter.
const STATIC_TARGET: &str = "x86_64-unknown-linux-musl";

/// The target of the static binary when rustup has no [`STATIC_TARGET`] (it cannot be
/// fetched offline): glibc, linked statically with `+crt-static`. Its one dependency on
/// the system is NSS: glibc's static `getaddrinfo` has the `files` and `dns` modules
/// built in and loads any other module `/etc/nsswitch.conf` names from the system's own
/// glibc (user lookups do not go through NSS: `util::users` reads `/etc/passwd`).
const GNU_TARGET: &str = "x86_64-unknown-linux-gnu";

/// What `package` made.
pub struct Artifact {
    /// The CLI's project layout (`src/agent-sandbox`, `test/agent-sandbox`).
    pub project: PathBuf,
    /// What `devcontainer features package` wrote: the `.tgz` and the collection metadata.
    pub out: PathBuf,
    /// The Feature's `version` (devcontainer-feature.json), which the registry's tags follow.
    pub version: String,
}

/// `cargo xtask feature`: builds the static binary, stages and packages the Feature.
pub fn feature() -> Result<()> {
    let cli = crate::docker::devcontainer_cli()?;
    let artifact = package(&cli)?;
    eprintln!(
        "xtask: the Feature {} packaged in {} (publish with: {} features publish -r <registry> -n <owner>/<repo> {})",
        artifact.version,
        artifact.out.display(),
        cli.display(),
        artifact.project.join("src").display()
    );
    Ok(())
}

/// Builds the static binary, stages the project layout and runs
/// `devcontainer features package` on it. Everything under `target/feature/` is made anew.
pub fn package(cli: &Path) -> Result<Artifact> {
    let root = root();
    let binary = static_binary(&root)?;
    let dir = root.join("target/feature");
    let project = dir.join("project");
    stage(&root, &binary, &project)?;
    let out = dir.join("out");
    run(Command::new(cli)
        .args(["features", "package", "--force-clean-output-folder", "--log-level", "info", "--output-folder"])
        .arg(&out)
        .arg(project.join("src")))
    .context("devcontainer features package")?;
    for name in ["devcontainer-feature-agent-sandbox.tgz", "devcontainer-collection.json"] {
        if !out.join(name).is_file() {
            bail!("devcontainer features package did not write {}", out.join(name).display());
        }
    }
    Ok(Artifact { project, out, version: feature_version(&root)? })
}

/// Whether rustup has Rust's [`STATIC_TARGET`] installed.
fn static_target_installed() -> bool {
    let installed = Command::new("rustup").args(["target", "list", "--installed"]).output();
    installed.is_ok_and(|out| String::from_utf8_lossy(&out.stdout).lines().any(|line| line == STATIC_TARGET))
}

/// The release binary, static (no program interpreter, no shared library): for
/// [`STATIC_TARGET`] when rustup has it, else for [`GNU_TARGET`] with `+crt-static`.
/// With `--target`, the flags reach only the target's code, not build scripts or proc
/// macros (which the compiler loads, so they cannot be static).
pub(crate) fn static_binary(root: &Path) -> Result<PathBuf> {
    let mut cargo = Command::new("cargo");
    cargo.args(["build", "--release", "--locked", "--bin", "agent-sandbox", "--target"]).current_dir(root);
    let target = if static_target_installed() {
        // ring (rustls, for remote engines) compiles C for the target: musl's gcc wrapper.
        crate::ensure_debian_packages(&[("x86_64-linux-musl-gcc", "musl-tools")])?;
        STATIC_TARGET
    } else {
        eprintln!(
            "xtask: no {STATIC_TARGET} target (rustup target add {STATIC_TARGET}): building {GNU_TARGET} with +crt-static"
        );
        cargo.env("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS", "-C target-feature=+crt-static");
        GNU_TARGET
    };
    run(cargo.arg(target))?;
    let binary = root.join("target").join(target).join("release/agent-sandbox");
    let bytes = std::fs::read(&binary).with_context(|| format!("reading {}", binary.display()))?;
    if !is_static_elf(&bytes) {
        bail!("{} is not a static executable (it names a program interpreter)", binary.display());
    }
    Ok(binary)
}

/// A 64-bit little-endian ELF without a program interpreter (`PT_INTERP`): it needs no
/// dynamic loader, so no C library of the image's.
fn is_static_elf(bytes: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let u16_at = |at: usize| bytes.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at = |at: usize| bytes.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let u64_at =
        |at: usize| bytes.get(at..at + 8).and_then(|b| usize::try_from(u64::from_le_bytes(b.try_into().ok()?)).ok());
    if !bytes.starts_with(b"\x7fELF\x02\x01") {
        return false;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38)) else {
        return false;
    };
    (0..phnum).all(|idx| u32_at(phoff + idx * phentsize).is_some_and(|p_type| p_type != PT_INTERP))
}

/// `project/src/agent-sandbox/`: the Feature's files (as in the repository, modes kept)
/// and `binary`; `project/test/agent-sandbox/`: its `devcontainer features test` scenarios.
fn stage(root: &Path, binary: &Path, project: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(project);
    let feature = project.join("src/agent-sandbox");
    copy_files(&root.join("devcontainer/feature/agent-sandbox"), &feature)?;
    // A host copy `devcontainer init` would put there never ships: the artifact's is static.
    std::fs::copy(binary, feature.join("agent-sandbox")).context("copying the static binary")?;
    copy_files(&root.join("devcontainer/feature/test/agent-sandbox"), &project.join("test/agent-sandbox"))
}

/// Copies the regular files of `from` (not its folders) into `to`, made first.
fn copy_files(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("listing {}", from.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        // What `devcontainer init` writes into a project's copy, never the repository's.
        if !entry.file_type()?.is_file() || name == "agent-sandbox" || name == "tool-guard.json" {
            continue;
        }
        std::fs::copy(entry.path(), to.join(&name)).with_context(|| format!("copying {}", entry.path().display()))?;
    }
    Ok(())
}

/// The Feature's `version` in devcontainer-feature.json.
fn feature_version(root: &Path) -> Result<String> {
    let path = root.join("devcontainer/feature/agent-sandbox/devcontainer-feature.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let metadata: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    metadata["version"].as_str().map(str::to_owned).with_context(|| format!("{} has no version", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64-bit little-endian ELF header with one program header of `p_type`.
    fn elf_with(p_type: u32) -> Vec<u8> {
        let mut bytes = vec![0u8; 64 + 56];
        bytes[..6].copy_from_slice(b"\x7fELF\x02\x01");
        bytes[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        bytes[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        bytes[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        bytes[64..68].copy_from_slice(&p_type.to_le_bytes());
        bytes
    }

    #[test]
    fn only_an_elf_without_an_interpreter_is_static() {
        assert!(is_static_elf(&elf_with(1)), "PT_LOAD alone");
        assert!(!is_static_elf(&elf_with(3)), "PT_INTERP");
        let mut truncated = elf_with(1);
        truncated.truncate(66);
        assert!(!is_static_elf(&truncated), "a program header cut short");
    }

    #[test]
    fn a_dynamic_executable_or_a_short_file_is_not_static() {
        let sh = std::fs::read("/bin/sh").expect("/bin/sh");
        assert!(!is_static_elf(&sh), "Debian's /bin/sh names ld-linux");
        assert!(!is_static_elf(&sh[..0x30]));
        assert!(!is_static_elf(b"#!/bin/sh\n"));
    }

    #[test]
    fn the_features_version_is_semver() {
        let version = feature_version(&root()).expect("version");
        let parts: Vec<&str> = version.split('.').collect();
        assert!(parts.len() == 3 && parts.iter().all(|part| part.parse::<u32>().is_ok()), "{version}");
    }
}
