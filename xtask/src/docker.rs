//! The Docker tasks of development and CI, through bollard on a current-thread tokio
//! runtime (the binary's own Docker commands live in crates/dockerbox):
//! - `bootstrap-image [--tag T]`: a Debian bookworm image from Debian's packages
//!   (debootstrap + import), for hosts that reach no registry (and, for the Feature's
//!   harness, an Ubuntu 22.04 one: `bootstrap_ubuntu`);
//! - `build-base [--tag T] [--from IMAGE] [--claude-code-version V] [--codex-version V]
//!   [--git-delta-version V] [--ast-grep-version V]`: `agent-sandbox-base:<tag>` from
//!   the context `agent-sandbox build-base` sends (`dockerbox::context::base_context`:
//!   `devcontainer/base/Dockerfile`, the Feature `devcontainer/feature/agent-sandbox/`)
//!   with the release binary, `latest` resolved first so Docker's layer cache holds,
//!   progress streamed.

use std::{collections::HashMap, path::Path, process::Command};

use anyhow::{bail, Context, Result};
use bollard::{
    query_parameters::{BuildImageOptionsBuilder, CreateImageOptionsBuilder},
    Docker,
};
// The tool versions the base Dockerfile takes (one table, shared with `agent-sandbox build-base`).
use dockerbox::context::TOOLS;
use futures_util::StreamExt;

use crate::{root, run};

pub const BOOTSTRAP_IMAGE: &str = "agent-sandbox-bootstrap:bookworm";
/// The Ubuntu image of the Feature's harness (`bootstrap_ubuntu`).
pub const UBUNTU_IMAGE: &str = "agent-sandbox-bootstrap:jammy";

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the tokio runtime")
}

async fn connect() -> Result<Docker> {
    let docker = Docker::connect_with_local_defaults()
        .context("cannot reach the Docker engine (start dockerd, or set DOCKER_HOST)")?;
    docker.version().await.context("the Docker engine does not answer (is dockerd running?)")?;
    Ok(docker)
}

pub fn bootstrap_image(args: &[String]) -> Result<()> {
    let tag = flag(args, "--tag")?.unwrap_or_else(|| BOOTSTRAP_IMAGE.to_owned());
    bootstrap(&tag, &["--variant=minbase", "bookworm"], "http://deb.debian.org/debian")
}

/// An Ubuntu 22.04 image for the Feature's harness: Ubuntu, and a C library older than
/// Debian 12's, which the Feature's static binary must not need. Debian has no Ubuntu
/// keyring package, so the packages' signatures are not checked: a test image only.
pub fn bootstrap_ubuntu() -> Result<()> {
    bootstrap(UBUNTU_IMAGE, &["--variant=minbase", "--no-check-gpg", "jammy"], "http://archive.ubuntu.com/ubuntu")
}

/// `debootstrap ARGS ROOTFS MIRROR`, imported as `tag` (nothing done when it exists).
fn bootstrap(tag: &str, debootstrap_args: &[&str], mirror: &str) -> Result<()> {
    runtime()?.block_on(async {
        let docker = connect().await?;
        if docker.inspect_image(tag).await.is_ok() {
            eprintln!("xtask: {tag} exists");
            return Ok(());
        }
        let rootfs = root().join("target/bootstrap-rootfs");
        let _ = std::fs::remove_dir_all(&rootfs);
        eprintln!("xtask: debootstrap {} into {}", debootstrap_args.join(" "), rootfs.display());
        run(Command::new("debootstrap").args(debootstrap_args).arg(&rootfs).arg(mirror))
            .context("debootstrap (install with: apt-get install -y debootstrap)")?;
        let out = Command::new("tar").arg("-C").arg(&rootfs).args(["-c", "."]).output().context("tar")?;
        if !out.status.success() {
            bail!("tar of {} failed", rootfs.display());
        }
        let (repo, version) = tag.split_once(':').unwrap_or((tag, "latest"));
        let options = CreateImageOptionsBuilder::default().from_src("-").repo(repo).tag(version).build();
        let mut stream = docker.create_image(Some(options), Some(bollard::body_full(out.stdout.into())), None);
        while let Some(info) = stream.next().await {
            info.context("importing the root file system")?;
        }
        std::fs::remove_dir_all(&rootfs).ok();
        eprintln!("xtask: imported {tag}");
        Ok(())
    })
}

pub fn build_base(args: &[String]) -> Result<()> {
    build_base_with(args, true)
}

/// `build-base` without the build's progress (for the bench).
pub fn build_base_quiet(args: &[String]) -> Result<()> {
    build_base_with(args, false)
}

fn build_base_with(args: &[String], progress: bool) -> Result<()> {
    let tag = flag(args, "--tag")?.unwrap_or_else(|| "latest".to_owned());
    let mut build_args: HashMap<String, String> = HashMap::new();
    if let Some(from) = flag(args, "--from")? {
        build_args.insert("FROM_IMAGE".into(), from);
    }
    for (name, arg, package) in TOOLS {
        let Some(version) = flag(args, name)? else { continue };
        let version = dockerbox::context::tool_version(name, *package, version)?;
        build_args.insert((*arg).into(), version);
    }
    for flag_name in args.iter().filter(|a| a.starts_with("--")) {
        let known = ["--tag", "--from"].contains(&flag_name.as_str()) || TOOLS.iter().any(|t| t.0 == flag_name);
        if !known {
            bail!(
                "unknown option {flag_name} (build-base takes --tag, --from, {})",
                TOOLS.iter().map(|t| t.0).collect::<Vec<_>>().join(", ")
            );
        }
    }
    let root = root();
    let mut cargo = Command::new("cargo");
    cargo.args(["build", "--release", "--locked", "--bin", "agent-sandbox"]).current_dir(&root);
    if !progress {
        cargo.arg("--quiet");
    }
    run(&mut cargo)?;
    let context = build_context(&root)?;
    let image = format!("agent-sandbox-base:{tag}");
    if progress {
        eprintln!("xtask: building {image} ({})", describe(&build_args));
    }
    runtime()?.block_on(async {
        let docker = connect().await?;
        let options = BuildImageOptionsBuilder::default()
            .dockerfile("Dockerfile")
            .t(&image)
            .rm(true)
            .buildargs(&build_args)
            .build();
        let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
        while let Some(info) = stream.next().await {
            let info = info.context("docker build")?;
            if let Some(text) = info.stream.filter(|_| progress) {
                eprint!("{text}");
            }
            if let Some(detail) = info.error_detail {
                bail!("building {image} failed: {}", detail.message.unwrap_or_default());
            }
        }
        if progress {
            eprintln!("xtask: built {image}");
        }
        Ok(())
    })
}

fn describe(build_args: &HashMap<String, String>) -> String {
    let mut pairs: Vec<String> = build_args.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.sort();
    if pairs.is_empty() {
        "the Dockerfile's defaults".into()
    } else {
        pairs.join(" ")
    }
}

/// The same context `agent-sandbox build-base` sends (`dockerbox::context::base_context`:
/// the base Dockerfile and the Feature's files, built into the binary), with the
/// release binary just built.
fn build_context(root: &Path) -> Result<Vec<u8>> {
    let binary = root.join("target/release/agent-sandbox");
    let bytes = std::fs::read(&binary).with_context(|| format!("reading {}", binary.display()))?;
    dockerbox::context::base_context(&bytes).context("building the context")
}

/// The value after `name` in `args`, if present.
fn flag(args: &[String], name: &str) -> Result<Option<String>> {
    match args.iter().position(|arg| arg == name) {
        None => Ok(None),
        Some(idx) => match args.get(idx + 1) {
            Some(value) if !value.starts_with("--") => Ok(Some(value.clone())),
            _ => bail!("{name} needs a value"),
        },
    }
}

/// The base image tag the end-to-end test uses.
pub const E2E_TAG: &str = "e2e";
const DEVCONTAINER_CLI: &str = "@devcontainers/cli@0.89.0";

/// As root: installs and starts the Docker engine (and compose, for the compose case),
/// installs the devcontainer CLI,
/// bootstraps the Debian image and builds `agent-sandbox-base:e2e` (AI CLIs skipped:
/// the test needs none of them). Returns the CLI's path. Idempotent.
pub fn prepare_e2e() -> Result<std::path::PathBuf> {
    crate::ensure_debian_packages(&[
        ("dockerd", "docker.io"),
        ("docker-compose", "docker-compose"),
        ("debootstrap", "debootstrap"),
        // The OCI registry on loopback the published Feature is pulled from.
        ("docker-registry", "docker-registry"),
    ])?;
    start_dockerd()?;
    let cli = devcontainer_cli()?;
    bootstrap_image(&[])?;
    // Best effort: where Ubuntu's mirror does not answer, the Feature's harness leaves its
    // Ubuntu scenario out and says so.
    if let Err(err) = bootstrap_ubuntu() {
        eprintln!("xtask: no {UBUNTU_IMAGE} ({err:#}): the Feature's harness will leave Ubuntu out");
    }
    let args = e2e_build_args();
    build_base(&args)?;
    Ok(cli)
}

/// The devcontainer CLI in `target/devcontainer-cli`, installed from npm when missing.
pub fn devcontainer_cli() -> Result<std::path::PathBuf> {
    crate::ensure_debian_packages(&[("npm", "npm")])?;
    let prefix = root().join("target/devcontainer-cli");
    let cli = prefix.join("node_modules/.bin/devcontainer");
    if !cli.exists() {
        eprintln!("xtask: installing {DEVCONTAINER_CLI}");
        run(Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(DEVCONTAINER_CLI))?;
    }
    Ok(cli)
}

/// `build-base`'s arguments for `agent-sandbox-base:e2e`: from the bootstrapped image,
/// every optional tool left out.
pub fn e2e_build_args() -> Vec<String> {
    let mut args: Vec<String> = ["--tag", E2E_TAG, "--from", BOOTSTRAP_IMAGE].map(String::from).to_vec();
    for (flag, _, _) in TOOLS {
        args.extend([flag.to_string(), "none".to_owned()]);
    }
    args
}

fn engine_answers() -> bool {
    Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// As root: the Docker engine and debootstrap installed, the engine started. Idempotent.
pub fn prepare_engine() -> Result<()> {
    crate::ensure_debian_packages(&[("dockerd", "docker.io"), ("debootstrap", "debootstrap")])?;
    start_dockerd()
}

fn start_dockerd() -> Result<()> {
    if engine_answers() {
        return Ok(());
    }
    eprintln!("xtask: starting dockerd (log: /tmp/agent-sandbox-dockerd.log)");
    let log = std::fs::File::create("/tmp/agent-sandbox-dockerd.log").context("creating the dockerd log")?;
    Command::new("dockerd")
        .args(["--host", "unix:///var/run/docker.sock", "--data-root", "/var/lib/docker"])
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting dockerd")?;
    for _ in 0..120 {
        if engine_answers() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    bail!("dockerd did not answer within 60 s (see /tmp/agent-sandbox-dockerd.log)")
}

/// What the devcontainer CLI leaves after the end-to-end tests: an image (and its
/// `-uid` variant) per test workspace (`vsc-plain-…`, `vsc-template-…`, `vsc-compose-…`,
/// `vsc-pushed-…`, `vsc-vscode-…`, `vsc-agentbox-…`, `vsc-byref-…`, named after the tests' own folders, and
/// `vsc-<number>-<hash>-features` of the Feature's harness; the tests remove
/// theirs, this catches a run that was stopped) and a copy of the Feature's content per `up` in
/// `/tmp/devcontainercli-<user>`: a gigabyte or more per run, which would fill a CI
/// machine's disk over repeated runs. Best effort: a leftover is not a failure.
pub fn remove_e2e_leftovers() {
    let images = Command::new("docker").args(["images", "--format", "{{.Repository}}:{{.Tag}}"]).output();
    let names: Vec<String> =
        images.map(|out| String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()).unwrap_or_default();
    let ours: Vec<&String> = names
        .iter()
        .filter(|name| {
            [
                "vsc-plain-",
                "vsc-template-",
                "vsc-compose-",
                "vsc-pushed-",
                "vsc-vscode-",
                "vsc-agentbox-",
                "vsc-home-",
                "vsc-byref-",
            ]
            .iter()
            .any(|prefix| name.starts_with(prefix))
                || is_harness_image(name)
        })
        .collect();
    if !ours.is_empty() {
        let _ = Command::new("docker").args(["rmi", "-f"]).args(ours).stdout(std::process::Stdio::null()).status();
    }
    let _ = std::fs::remove_dir_all("/tmp/devcontainercli-root/container-features");
    // `devcontainer features test`'s workspaces, each a copy of the Feature (~100 MB a run).
    let _ = std::fs::remove_dir_all("/tmp/devcontainercli/container-features-test");
    // The devcontainer CLI rebuilds `dev_container_feature_content_temp` for every `up`,
    // leaving the one before untagged. On CI's machine (it is CI's own) every untagged
    // image goes; on a developer's machine their own untagged images stay theirs.
    let _ = Command::new("docker").args(["rmi", "dev_container_feature_content_temp"]).output();
    if std::env::var_os("CI").is_some_and(|ci| ci == "true") {
        let _ = Command::new("docker").args(["image", "prune", "-f"]).stdout(std::process::Stdio::null()).status();
    }
}

/// `vsc-<timestamp>-<hash>-features[-uid]:latest`: what `devcontainer features test` builds
/// (its workspaces are named after a timestamp); a user's own dev container images are
/// named after their folders.
fn is_harness_image(name: &str) -> bool {
    let Some((folder, rest)) = name.strip_prefix("vsc-").and_then(|rest| rest.split_once('-')) else {
        return false;
    };
    folder.len() >= 10
        && folder.bytes().all(|byte| byte.is_ascii_digit())
        && (rest.ends_with("-features:latest") || rest.ends_with("-features-uid:latest"))
}

#[cfg(test)]
mod tests {
    use super::is_harness_image;

    #[test]
    fn only_the_harness_images_are_its_leftovers() {
        let hash = "8b8878ff3815ad6616effc4358677779362f3b7534e8478720aa3fa4a2435cd0";
        assert!(is_harness_image(&format!("vsc-1795773611203-{hash}-features:latest")));
        assert!(is_harness_image(&format!("vsc-1795773611203-{hash}-features-uid:latest")));
        assert!(!is_harness_image(&format!("vsc-myproject-{hash}-features:latest")), "a user's own");
        assert!(!is_harness_image(&format!("vsc-2024-{hash}-features:latest")), "a short number is a folder");
        assert!(!is_harness_image(&format!("vsc-1795773611203-{hash}:latest")), "no Feature");
    }
}
