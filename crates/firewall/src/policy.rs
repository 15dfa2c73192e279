//! Where the container's network policy comes from: the `network` section of the same
//! `config.jsonc` that `exec` reads, in the layers a container trusts (the built-in
//! defaults, the image's [`crate::IMAGE_DIR`], the project's `.agent-sandbox/` mounted
//! read-only at [`crate::PROJECT_DIR`]), each file passing [`trust`] first. One file
//! drives both modes; the old `firewall.jsonc` (an address allowlist) is refused with
//! what to write instead, never silently ignored.

use std::path::{Path, PathBuf};

use config::{Config, LayerKind};
use policy::network::NetPolicy;

use crate::Error;

#[derive(Debug, Clone)]
pub struct Policy {
    /// The merged configuration (its `network` entries cite their files).
    pub config: Config,
    pub net: NetPolicy,
    /// The files the policy came from, after the built-in defaults, each with the index
    /// of the directory it was found in (0: the image's).
    pub layers: Vec<(PathBuf, u8)>,
}

impl Policy {
    /// The files the policy came from, after the built-in defaults.
    pub fn sources(&self) -> impl Iterator<Item = &Path> {
        self.layers.iter().map(|(path, _)| path.as_path())
    }
}

/// The file the firewall read before the `network` section drove it.
pub const LEGACY_FILE: &str = "firewall.jsonc";

/// Reads `config.jsonc` (or `config.json`) of the image's and the project's directory
/// (`dirs`, in that order; either may have none) over the built-in defaults.
pub fn load(dirs: &[&Path]) -> Result<Policy, Error> {
    let mut layers = vec![config::defaults()];
    let mut found_in = Vec::new();
    for (idx, dir) in dirs.iter().enumerate() {
        let legacy = dir.join(LEGACY_FILE);
        if std::fs::symlink_metadata(&legacy).is_ok() {
            return Err(Error::Policy {
                path: legacy,
                message: "firewall.jsonc is replaced by the `network` section of config.jsonc beside it: move its \
                          domains to network.allow (a name, *.domain, optional :port), its private ranges to \
                          network.allowPrivate, and remove the file"
                    .into(),
            });
        }
        let found = config::find_config_file(dir)
            .map_err(|err| Error::Policy { path: dir.to_path_buf(), message: err.to_string() })?;
        let Some(path) = found else { continue };
        trust(&path)?;
        let kind = if idx == 0 { LayerKind::Global } else { LayerKind::Project };
        let layer = config::read_layer(&path, kind)
            .map_err(|err| Error::Policy { path: path.clone(), message: err.to_string() })?;
        layers.push(layer);
        found_in.push((path, u8::try_from(idx).unwrap_or(u8::MAX)));
    }
    let config = config::merge(layers);
    let net = NetPolicy::from_config(&config).map_err(|err| Error::Policy {
        path: found_in.last().map(|(path, _)| path.clone()).unwrap_or_else(|| "<built-in defaults>".into()),
        message: err.to_string(),
    })?;
    Ok(Policy { config, net, layers: found_in })
}

/// Accepts `path` only if the agent (any non-root user) cannot have written it: a
/// regular file (no symlink) that is either on a read-only mount, or root-owned and
/// not group/other-writable in directories that are root-owned and not
/// group/other-writable all the way up.
pub fn trust(path: &Path) -> Result<(), Error> {
    util::fs::trusted_file(path).map_err(|why| Error::Untrusted { path: path.to_path_buf(), why })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use config::Network;

    use super::*;

    fn dirs(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        dir
    }

    fn root() -> bool {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        euid == 0
    }

    #[test]
    fn the_network_section_of_each_layer_adds_up() {
        let dir = dirs(&[
            ("image/config.jsonc", r#"{"network": {"allow": ["marketplace.example"]}}"#),
            (
                "project/config.jsonc",
                r#"{"network": {"allow": ["api.example:8443"], "deny": ["api.openai.com"], "allowPrivate": ["10.9.0.0/16"]}}"#,
            ),
        ]);
        let (image, project) = (dir.path().join("image"), dir.path().join("project"));
        if !root() {
            // Files of an ordinary user are the agent's kind of file: refused.
            let err = load(&[&image, &project]).expect_err("not root-owned").to_string();
            assert!(err.contains("refusing a policy file the agent could change"), "{err}");
            return;
        }
        let policy = load(&[&image, &project]).expect("loads");
        assert_eq!(policy.net.mode, Network::Allowlist);
        assert_eq!(policy.sources().collect::<Vec<_>>(), [image.join("config.jsonc"), project.join("config.jsonc")]);
        assert_eq!(policy.net.allowed_ports("marketplace.example"), [80, 443]);
        assert_eq!(policy.net.allowed_ports("api.example"), [8443]);
        assert_eq!(policy.net.allowed_ports("api.anthropic.com"), [80, 443], "the built-in defaults stay");
        assert!(policy.net.allowed_ports("api.openai.com").is_empty(), "deny beats the defaults' allow");
        assert!(policy.net.check_address("10.9.1.2".parse().expect("ip")).is_ok());
        assert!(policy.net.check_address("10.8.1.2".parse().expect("ip")).is_err());
        // Without files: the defaults alone.
        let none = load(&[&dir.path().join("absent"), &dir.path().join("absent2")]).expect("loads");
        assert_eq!(none.sources().count(), 0);
        assert_eq!(none.net.allowed_ports("registry.npmjs.org"), [80, 443]);
    }

    #[test]
    fn the_images_own_configuration_loads() {
        let text = include_str!("../../../devcontainer/feature/agent-sandbox/config.jsonc");
        let layer = config::parse_layer(text, Path::new("config.jsonc"), LayerKind::Global).expect("parses");
        let config = config::merge(vec![config::defaults(), layer]);
        let net = NetPolicy::from_config(&config).expect("valid network entries");
        assert_eq!(net.allowed_ports("marketplace.visualstudio.com"), [80, 443]);
        assert_eq!(net.allowed_ports("api.anthropic.com"), [80, 443], "the defaults stay");
    }

    #[test]
    fn a_legacy_firewall_jsonc_and_mistakes_stop_the_load_with_the_fix() {
        let dir = dirs(&[
            ("legacy/firewall.jsonc", r#"{"domains": ["a.example"]}"#),
            ("bad/config.jsonc", r#"{"network": {"allow": ["a b"]}}"#),
        ]);
        let err = load(&[&dir.path().join("legacy")]).expect_err("legacy").to_string();
        assert!(err.contains("firewall.jsonc is replaced by the `network` section of config.jsonc"), "{err}");
        if root() {
            let err = load(&[&dir.path().join("bad")]).expect_err("bad host").to_string();
            assert!(err.contains("network.allow") && err.contains("a b"), "{err}");
        }
    }

    #[test]
    fn a_policy_file_the_agent_could_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("config.jsonc");
        std::fs::write(&file, "{}").expect("write");
        // The temp dir lies in /tmp (world-writable, sticky) or a user's directory.
        let verdict = trust(&file).map_err(|err| err.to_string());
        if root() {
            assert_eq!(verdict, Ok(()), "root-owned 0644 file in root-owned directories");
        } else {
            assert!(verdict.expect_err("not root-owned").contains("owner uid"));
        }
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        assert!(trust(&file).expect_err("world-writable").to_string().contains("refusing a policy file"));
        let err = load(&[dir.path()]).expect_err("world-writable").to_string();
        assert!(err.contains("refusing a policy file"), "{err}");
        let link = dir.path().join("link.jsonc");
        std::os::unix::fs::symlink(&file, &link).expect("symlink");
        assert!(trust(&link).expect_err("symlink").to_string().contains("not a regular file"));
    }
}
