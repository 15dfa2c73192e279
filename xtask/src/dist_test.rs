//! `cargo xtask dist-test` (root, Docker): every package `dist` makes, installed from its
//! file in a clean Debian container made from Debian's packages (xtask's bootstrap image:
//! no Rust, no cargo, no checkout; only the package's file is copied in), the way
//! README's install section says. Then `agent-sandbox --version`, `agent-sandbox test` and
//! `agent-sandbox exec -- true` run in it, in a project that is a git repository, the
//! package is uninstalled, and no file the install added may be left. Each install is
//! timed (the target: under 30 s).
//!
//! bubblewrap inside a container needs what Docker's defaults take away, and nothing
//! more ([`SANDBOX_OPTIONS`], found by trying each alone on Docker 20.10): its seccomp
//! profile refuses the `unshare` that makes a user namespace (root in the container makes
//! one without `CAP_SYS_ADMIN`), and its masks over `/proc` (`systempaths`) make the
//! kernel refuse the new `/proc` a sandbox mounts; AppArmor's `docker-default` profile,
//! where the host has AppArmor, refuses mounts too. `--privileged` is not needed.

use std::{
    collections::BTreeSet,
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};

use crate::{docker::BOOTSTRAP_IMAGE, run};

/// The image of the npm, pip and tarball installs: the bootstrap image with what those
/// package managers need, bubblewrap (which only the `.deb` brings by itself) and git
/// (for `test`'s rows about the repository).
const TOOLS_IMAGE: &str = "agent-sandbox-dist-test:bookworm-git";

/// What `docker run` needs for bubblewrap to start inside the container.
pub const SANDBOX_OPTIONS: &[&str] = &[
    "--security-opt",
    "seccomp=unconfined",
    "--security-opt",
    "systempaths=unconfined",
    "--security-opt",
    "apparmor=unconfined",
];

/// One way to install: the lines README gives (`{version}` in place of the version), run
/// in order in the folder holding the package's file; `sudo ` is dropped, as the test runs
/// as root.
pub struct Install {
    pub name: &'static str,
    pub install: &'static [&'static str],
    pub uninstall: &'static [&'static str],
    /// Files the install must have put in place (the man page where the ecosystem reads it).
    pub expect: &'static [&'static str],
    /// Folders of the package manager's own, made by its first install, that it keeps after
    /// the uninstall (emptied of what the install added).
    pub keeps: &'static [&'static str],
}

/// README's install lines, each package's.
pub const INSTALLS: &[Install] = &[
    Install {
        name: "deb",
        install: &["sudo apt-get install -y ./agent-sandbox_{version}_amd64.deb"],
        uninstall: &["sudo apt-get purge -y --autoremove agent-sandbox"],
        expect: &[
            "/usr/bin/agent-sandbox",
            "/usr/bin/bwrap",
            "/usr/share/man/man1/agent-sandbox.1.gz",
            "/usr/share/bash-completion/completions/agent-sandbox",
            "/usr/share/zsh/vendor-completions/_agent-sandbox",
            "/usr/share/fish/vendor_completions.d/agent-sandbox.fish",
        ],
        keeps: &[],
    },
    Install {
        name: "npm",
        install: &["sudo npm install -g ./agent-sandbox-linux-x64-{version}.tgz ./agent-sandbox-{version}.tgz"],
        uninstall: &["sudo npm uninstall -g agent-sandbox @agent-sandbox/linux-x64"],
        expect: &["/usr/local/bin/agent-sandbox", "/usr/local/share/man/man1/agent-sandbox.1"],
        // npm's global folder, made by its first global install; the scope's folder and the
        // man page's section folder, which `npm uninstall -g` empties but does not remove.
        keeps: &[
            "/usr/local/lib/node_modules",
            "/usr/local/lib/node_modules/@agent-sandbox",
            "/usr/local/share/man/man1",
        ],
    },
    Install {
        name: "pipx",
        install: &["pipx install ./agent_sandbox-{version}-py3-none-{wheel_platforms}.whl"],
        uninstall: &["pipx uninstall agent-sandbox"],
        expect: &["/root/.local/bin/agent-sandbox"],
        // pipx's own folders, made by its first install, which `pipx uninstall` empties.
        keeps: &["/root/.local", "/root/.local/bin", "/root/.local/pipx", "/root/.local/pipx/venvs"],
    },
    Install {
        name: "tarball",
        install: &[
            "sha256sum -c agent-sandbox-{version}-x86_64-linux.tar.gz.sha256",
            "tar -xzf agent-sandbox-{version}-x86_64-linux.tar.gz",
            "sudo install -m 755 agent-sandbox-{version}-x86_64-linux/agent-sandbox /usr/local/bin/",
        ],
        uninstall: &["sudo rm /usr/local/bin/agent-sandbox", "rm -r agent-sandbox-{version}-x86_64-linux"],
        expect: &["/usr/local/bin/agent-sandbox"],
        keeps: &[],
    },
];

/// `line` with the version and the wheel's platform tags put in.
pub fn expand(line: &str, version: &str) -> String {
    line.replace("{version}", version).replace("{wheel_platforms}", crate::dist::WHEEL_PLATFORMS)
}

/// Where a root shell in the container finds what the installs put on PATH.
const PATH: &str = "/root/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Folders whose changes are the package managers' own (caches, logs, indexes), not
/// what a package installs; and the kernel's.
const NOT_COMPARED: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/tmp",
    "/var/cache",
    "/var/log",
    "/var/lib/apt/lists",
    // apt's record of which packages were installed as dependencies, made at its first install.
    "/var/lib/apt/extended_states",
    "/root/.npm",
    "/root/.cache",
    "/root/.local/pipx/shared",
    "/root/.local/pipx/logs",
    "/root/.local/pipx/.cache",
];

/// `cargo xtask dist-test`: `dist`, then every install in its own container.
pub fn dist_test() -> Result<()> {
    if !crate::is_root() {
        bail!("dist-test runs Docker as root (sudo cargo xtask dist-test)");
    }
    let dist = crate::dist::build()?;
    crate::docker::prepare_engine()?;
    crate::docker::bootstrap_image(&[])?;
    tools_image()?;
    let mut report = Vec::new();
    for install in INSTALLS {
        let file = match install.name {
            "deb" => vec![dist.deb.clone()],
            "npm" => vec![dist.npm_platform.clone(), dist.npm_launcher.clone()],
            "pipx" => vec![dist.wheel.clone()],
            _ => vec![dist.tarball.clone(), dist.tarball.with_extension("gz.sha256")],
        };
        let image = if install.name == "deb" { BOOTSTRAP_IMAGE } else { TOOLS_IMAGE };
        eprintln!("xtask: dist-test {}: {image}, {} file(s) copied in", install.name, file.len());
        let took = check_install(install, &dist.version, image, &file)
            .with_context(|| format!("the {} package", install.name))?;
        report.push((install.name, took));
    }
    eprintln!("xtask: every package installed, ran `test` and `exec -- true`, and left nothing; install times:");
    for (name, took) in &report {
        eprintln!(
            "xtask:   {name:8} {:5.1} s{}",
            took.as_secs_f64(),
            if took.as_secs() >= 30 { "  (over 30 s)" } else { "" }
        );
    }
    Ok(())
}

/// The image for the npm, pip and tarball installs (made once).
fn tools_image() -> Result<()> {
    if Command::new("docker").args(["image", "inspect", TOOLS_IMAGE]).output().is_ok_and(|out| out.status.success()) {
        return Ok(());
    }
    let dockerfile = format!(
        "FROM {BOOTSTRAP_IMAGE}\nRUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
         --no-install-recommends bubblewrap git nodejs npm pipx ca-certificates && rm -rf /var/lib/apt/lists/*\n"
    );
    let mut child = Command::new("docker")
        .args(["build", "-q", "-t", TOOLS_IMAGE, "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .context("docker build")?;
    {
        use std::io::Write as _;
        child.stdin.take().context("docker build's stdin")?.write_all(dockerfile.as_bytes())?;
    }
    if !child.wait()?.success() {
        bail!("docker build of {TOOLS_IMAGE} failed");
    }
    Ok(())
}

/// A container that is removed when dropped.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

impl Container {
    /// `script` in the container as root, in `/root/packages`; its output, or an error with it.
    fn sh(&self, script: &str) -> Result<String> {
        let out = Command::new("docker")
            .args(["exec", "-w", "/root/packages", "-e", &format!("PATH={PATH}"), &self.0, "sh", "-c", script])
            .output()
            .context("docker exec")?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if !out.status.success() {
            bail!("`{script}` failed ({}):\n{text}", out.status);
        }
        Ok(text)
    }

    /// Every path in the container but those under [`NOT_COMPARED`].
    fn paths(&self) -> Result<BTreeSet<String>> {
        let prune: Vec<String> = NOT_COMPARED.iter().map(|dir| format!("-path {dir}")).collect();
        let listing = self.sh(&format!("find / -xdev \\( {} \\) -prune -o -print", prune.join(" -o ")))?;
        Ok(listing.lines().map(str::to_owned).collect())
    }
}

/// Installs from `files` in a new container of `image`, runs the binary, uninstalls and
/// compares; how long the install took.
fn check_install(install: &Install, version: &str, image: &str, files: &[PathBuf]) -> Result<Duration> {
    let name = format!("agent-sandbox-dist-test-{}", install.name);
    let _ = Command::new("docker").args(["rm", "-f", &name]).output();
    run(Command::new("docker")
        .args(["run", "-d", "--name", &name, "-w", "/root/packages"])
        .args(SANDBOX_OPTIONS)
        .args([image, "sleep", "infinity"])
        .stdout(std::process::Stdio::null()))?;
    let container = Container(name);
    for file in files {
        run(Command::new("docker")
            .arg("cp")
            .arg(file)
            .arg(format!("{}:/root/packages/", container.0))
            .stdout(std::process::Stdio::null()))?;
    }
    if install.name == "deb" {
        // The package lists apt needs to fetch bubblewrap, and git for the project; not part
        // of the install or its time.
        container.sh("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git >/dev/null")?;
    }
    // A project that is a git repository, so that `test` probes the git guard, the
    // read-only `.git` and the push through the host too.
    container.sh(
        "mkdir -p /tmp/project && cd /tmp/project && git init -q && git -c user.name=test -c user.email=test@example.com \
         commit -q --allow-empty -m start",
    )?;
    let before = container.paths()?;
    let started = Instant::now();
    for line in install.install {
        container.sh(without_sudo(&expand(line, version)))?;
    }
    let took = started.elapsed();
    eprintln!("xtask:   installed in {:.1} s", took.as_secs_f64());
    let installed = container.paths()?;
    for path in install.expect {
        if !installed.contains(*path) {
            bail!("the install did not put {path} in place");
        }
    }
    let shown = container.sh("agent-sandbox --version")?;
    if shown.trim() != format!("agent-sandbox {version}") {
        bail!("agent-sandbox --version printed {shown:?}");
    }
    let test = container.sh("cd /tmp/project && agent-sandbox test")?;
    eprintln!("xtask:   agent-sandbox test passed:");
    for line in test.lines() {
        eprintln!("xtask:     {line}");
    }
    container.sh("cd /tmp/project && agent-sandbox exec -- true")?;
    for line in install.uninstall {
        container.sh(without_sudo(&expand(line, version)))?;
    }
    let after = container.paths()?;
    let added: BTreeSet<&String> = installed.difference(&before).collect();
    let left: Vec<&&String> =
        added.iter().filter(|path| after.contains(path.as_str()) && !install.keeps.contains(&path.as_str())).collect();
    for kept in install.keeps.iter().filter(|kept| after.contains(**kept)) {
        // Nothing the install put inside it may stay: that would be in `left`.
        eprintln!("xtask:   {kept}: a folder of {}'s own, kept without anything the install added", install.name);
    }
    if !left.is_empty() {
        bail!(
            "uninstalling left what the install added:\n{}",
            left.iter().map(|path| path.as_str()).collect::<Vec<_>>().join("\n")
        );
    }
    let state: Vec<&String> = after.difference(&installed).filter(|path| !before.contains(*path)).collect();
    if !state.is_empty() {
        eprintln!(
            "xtask:   left by running it (the user's state, not the package's): {}",
            state.iter().map(|path| path.as_str()).collect::<Vec<_>>().join(" ")
        );
    }
    Ok(took)
}

fn without_sudo(line: &str) -> &str {
    line.strip_prefix("sudo ").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// README's install section is what this test runs, line for line.
    #[test]
    fn readme_gives_the_install_lines_the_test_runs() {
        let readme = std::fs::read_to_string(crate::root().join("README.md")).expect("README.md");
        let manifest = std::fs::read_to_string(crate::root().join("Cargo.toml")).expect("Cargo.toml");
        let version = crate::dist::package_version(&manifest).expect("version");
        for install in INSTALLS {
            for line in install.install.iter().chain(install.uninstall) {
                let line = expand(line, &version);
                assert!(readme.contains(&line), "README.md lacks the {} line: {line}", install.name);
            }
        }
    }

    #[test]
    fn only_a_leading_sudo_is_dropped() {
        assert_eq!(without_sudo("sudo npm install -g x"), "npm install -g x");
        assert_eq!(without_sudo("pipx install sudo"), "pipx install sudo");
    }
}
