//! The policy file format (JSONC) and the trust check every file passes before it is read.
//!
//! ```jsonc
//! {
//!   "domains": ["api.anthropic.com"],   // resolved (A and AAAA) at every apply
//!   "cidrs": ["10.20.0.0/16", "fd00::/64"],
//!   "githubMeta": true,                 // add GitHub's published ranges
//!   "verify": "api.github.com:443"      // must be reachable after applying
//! }
//! ```
//! Layers add up: a later file adds domains and ranges, and its `githubMeta` and
//! `verify` replace the earlier ones.

use std::{
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use serde_json::Value;

use crate::{plan::Cidr, Error};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    pub domains: Vec<String>,
    pub cidrs: Vec<Cidr>,
    pub github_meta: bool,
    pub verify: Option<String>,
    /// The files the policy came from.
    pub sources: Vec<PathBuf>,
}

/// Reads the existing files of `paths` in order, after [`trust`] accepts each; a
/// missing file is skipped. The first path must exist: without it there is no policy.
pub fn load(paths: &[&Path]) -> Result<Policy, Error> {
    let mut policy = Policy::default();
    for (idx, path) in paths.iter().enumerate() {
        let text = match std::fs::symlink_metadata(path) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound && idx > 0 => continue,
            Err(source) => return Err(Error::Io { path: path.to_path_buf(), source }),
            Ok(_) => {
                trust(path)?;
                std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?
            }
        };
        parse(&text, path, &mut policy)?;
    }
    Ok(policy)
}

/// Adds one file's content to `policy`.
pub fn parse(text: &str, path: &Path, policy: &mut Policy) -> Result<(), Error> {
    let error = |message: String| Error::Policy { path: path.to_path_buf(), message };
    let value: Value =
        jsonc_parser::parse_to_serde_value(text, &Default::default()).map_err(|err| error(err.to_string()))?;
    let Value::Object(object) = value else { return Err(error("expected an object".into())) };
    let strings = |key: &str, value: &Value| -> Result<Vec<String>, Error> {
        let items = value.as_array().ok_or_else(|| error(format!("{key}: expected an array of strings")))?;
        items
            .iter()
            .map(|item| item.as_str().map(str::to_owned).ok_or_else(|| error(format!("{key}: expected strings"))))
            .collect()
    };
    for (key, value) in &object {
        match key.as_str() {
            "$schema" => {}
            "domains" => {
                for domain in strings(key, value)? {
                    if !is_domain(&domain) {
                        return Err(error(format!("domains: {domain:?} is not a host name")));
                    }
                    if !policy.domains.contains(&domain) {
                        policy.domains.push(domain);
                    }
                }
            }
            "cidrs" => {
                for text in strings(key, value)? {
                    let cidr = Cidr::parse(&text).ok_or_else(|| {
                        error(format!("cidrs: {text:?} is not an address range (e.g. 10.0.0.0/8 or fd00::/64)"))
                    })?;
                    if cidr.prefix < if cidr.addr.is_ipv4() { 8 } else { 16 } {
                        return Err(error(format!(
                            "cidrs: {text:?} is too broad to be an allowlist (use a narrower range)"
                        )));
                    }
                    if !policy.cidrs.contains(&cidr) {
                        policy.cidrs.push(cidr);
                    }
                }
            }
            "githubMeta" => {
                policy.github_meta =
                    value.as_bool().ok_or_else(|| error("githubMeta: expected true or false".into()))?
            }
            "verify" => {
                let target = value.as_str().ok_or_else(|| error("verify: expected \"host:port\"".into()))?;
                if target.rsplit_once(':').is_none_or(|(_, port)| port.parse::<u16>().is_err()) {
                    return Err(error(format!("verify: expected \"host:port\", got {target:?}")));
                }
                policy.verify = Some(target.to_owned());
            }
            other => {
                return Err(error(format!("unknown key {other:?} (valid keys: domains, cidrs, githubMeta, verify)")))
            }
        }
    }
    policy.sources.push(path.to_path_buf());
    Ok(())
}

fn is_domain(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Accepts `path` only if the agent (any non-root user) cannot have written it: a
/// regular file (no symlink) that is either on a read-only mount, or root-owned and
/// not group/other-writable in directories that are root-owned and not
/// group/other-writable all the way up.
pub fn trust(path: &Path) -> Result<(), Error> {
    let untrusted = |why: String| Error::Untrusted { path: path.to_path_buf(), why };
    let meta = std::fs::symlink_metadata(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    if !meta.file_type().is_file() {
        return Err(untrusted("not a regular file".into()));
    }
    if on_read_only_mount(path) {
        return Ok(());
    }
    if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return Err(untrusted(format!("owner uid {}, mode {:o}", meta.uid(), meta.mode() & 0o7777)));
    }
    let mut dir = path.parent();
    while let Some(current) = dir {
        let meta = std::fs::metadata(current).map_err(|source| Error::Io { path: current.to_path_buf(), source })?;
        if meta.uid() != 0 || (meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0) {
            return Err(untrusted(format!("its directory {} can be changed by others", current.display())));
        }
        dir = current.parent();
    }
    Ok(())
}

fn on_read_only_mount(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: statvfs writes into the zeroed struct we own; the path is NUL-terminated.
    unsafe {
        let mut stat: libc::statvfs = std::mem::zeroed();
        libc::statvfs(c_path.as_ptr(), &mut stat) == 0 && stat.f_flag & libc::ST_RDONLY != 0
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn parsed(texts: &[&str]) -> Result<Policy, String> {
        let mut policy = Policy::default();
        for (idx, text) in texts.iter().enumerate() {
            parse(text, Path::new(&format!("/p{idx}.jsonc")), &mut policy).map_err(|err| err.to_string())?;
        }
        Ok(policy)
    }

    #[test]
    fn layers_add_domains_and_ranges_and_replace_scalars() {
        let policy = parsed(&[
            "// image\n{\"domains\": [\"api.anthropic.com\", \"github.com\",], \"githubMeta\": true, \"verify\": \"github.com:443\"}",
            "{/* project */ \"domains\": [\"github.com\", \"my-registry.internal\"], \"cidrs\": [\"10.20.0.0/16\", \"fd00::/64\"], \"githubMeta\": false}",
        ])
        .expect("valid");
        assert_eq!(policy.domains, ["api.anthropic.com", "github.com", "my-registry.internal"]);
        assert_eq!(policy.cidrs.iter().map(ToString::to_string).collect::<Vec<_>>(), ["10.20.0.0/16", "fd00::/64"]);
        assert!(!policy.github_meta);
        assert_eq!(policy.verify.as_deref(), Some("github.com:443"));
        assert_eq!(policy.sources.len(), 2);
    }

    #[test]
    fn mistakes_are_refused_with_the_file_and_what_to_write() {
        let table: &[(&str, &str)] = &[
            ("{\"domain\": []}", "/p0.jsonc: unknown key \"domain\" (valid keys: domains, cidrs, githubMeta, verify)"),
            ("{\"domains\": [\"a b\"]}", "/p0.jsonc: domains: \"a b\" is not a host name"),
            (
                "{\"cidrs\": [\"10.0.0.0/33\"]}",
                "/p0.jsonc: cidrs: \"10.0.0.0/33\" is not an address range (e.g. 10.0.0.0/8 or fd00::/64)",
            ),
            (
                "{\"cidrs\": [\"0.0.0.0/0\"]}",
                "/p0.jsonc: cidrs: \"0.0.0.0/0\" is too broad to be an allowlist (use a narrower range)",
            ),
            (
                "{\"cidrs\": [\"::/1\"]}",
                "/p0.jsonc: cidrs: \"::/1\" is too broad to be an allowlist (use a narrower range)",
            ),
            ("{\"verify\": \"github.com\"}", "/p0.jsonc: verify: expected \"host:port\", got \"github.com\""),
            ("{\"githubMeta\": \"yes\"}", "/p0.jsonc: githubMeta: expected true or false"),
            ("[]", "/p0.jsonc: expected an object"),
        ];
        for (text, want) in table {
            assert_eq!(parsed(&[text]).expect_err(text), *want);
        }
    }

    #[test]
    fn a_policy_file_the_agent_could_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("firewall.jsonc");
        std::fs::write(&file, "{}").expect("write");
        // The temp dir lies in /tmp (world-writable, sticky) or a user's directory.
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let verdict = trust(&file).map_err(|err| err.to_string());
        if root {
            assert_eq!(verdict, Ok(()), "root-owned 0644 file in root-owned directories");
        } else {
            assert!(verdict.expect_err("not root-owned").contains("owner uid"));
        }
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        assert!(trust(&file).expect_err("world-writable").to_string().contains("refusing a policy file"));
        let link = dir.path().join("link.jsonc");
        std::os::unix::fs::symlink(&file, &link).expect("symlink");
        assert!(trust(&link).expect_err("symlink").to_string().contains("not a regular file"));
        // A file on a read-only mount is trusted whoever owns it: /proc/self is not
        // read-only, but /sys is on most systems; only assert what this machine has.
        let missing = load(&[Path::new("/nonexistent/firewall.jsonc")]).expect_err("the image policy is required");
        assert!(missing.to_string().starts_with("/nonexistent/firewall.jsonc: "), "{missing}");
    }
}
