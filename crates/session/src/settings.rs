//! The `@settings` copies at the start: each package manager settings file the policy
//! shows (`policy.copies`) is read on the host and redacted (`policy::settings`), so
//! the sandbox sees the registry a corporate mirror sets but no credential. Says in
//! `--debug` what each copy left out, and warns when a registry it names is one the
//! network allowlist refuses (the mirror would not answer inside).

use std::path::{Path, PathBuf};

use config::Network;
use policy::{network::NetPolicy, network::Verdict, SettingsCopy};

/// A settings file larger than this is not shown (no settings file is this large).
const MAX_LEN: u64 = 1 << 20;

/// What the sandbox shows: `paths[i]` with the content `texts[i]`.
#[derive(Debug, Default)]
pub struct Copies {
    pub paths: Vec<PathBuf>,
    pub texts: Vec<String>,
    /// One line each, for stderr: registries the network policy refuses.
    pub warnings: Vec<String>,
}

pub fn prepare(copies: &[SettingsCopy], net_policy: &NetPolicy, home: &Path, notes: &mut Vec<String>) -> Copies {
    let mut prepared = Copies::default();
    for copy in copies {
        let shown = match copy.path.strip_prefix(home) {
            Ok(rel) => format!("~/{}", rel.display()),
            Err(_) => copy.path.display().to_string(),
        };
        let text = match read(&copy.path) {
            Ok(text) => text,
            Err(why) => {
                notes.push(format!("settings {shown}: not shown ({why})"));
                continue;
            }
        };
        let redacted = policy::settings::redact(&text, net_policy.mode != Network::On);
        if !redacted.proxies.is_empty() {
            notes.push(format!(
                "settings {shown}: its proxy setting(s) left out ({}): the sandbox's own proxy is its way out",
                redacted.proxies.join(", ")
            ));
        }
        if redacted.removed.is_empty() {
            notes.push(format!("settings {shown}: shown read-only as it is (no credential lines) ({})", copy.rule));
        } else {
            notes.push(format!(
                "settings {shown}: shown read-only without its {} credential line(s): {} ({})",
                redacted.removed.len(),
                redacted.removed.join(", "),
                copy.rule
            ));
        }
        if net_policy.mode == Network::Allowlist {
            for host in &redacted.registries {
                if let Verdict::Deny(_) = net_policy.decide(host, 443) {
                    prepared.warnings.push(format!(
                        "agent-sandbox: note: {shown} names the registry {host}, which the network allowlist does not \
                         let through, so it will not answer inside (allow it: --allow-host {host}, or \
                         \"network\": {{\"allow\": [\"{host}\"]}} in ~/.config/agent-sandbox/config.jsonc; a mirror on \
                         a private address also needs network.allowPrivate)"
                    ));
                }
            }
        }
        prepared.paths.push(copy.path.clone());
        prepared.texts.push(redacted.text);
    }
    prepared
}

/// The file's text, if it is a regular file (through a symlink: dotfile managers link
/// them) of a sensible size in UTF-8.
fn read(path: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|err| err.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_LEN {
        return Err(format!("larger than {MAX_LEN} bytes"));
    }
    let bytes = std::fs::read(path).map_err(|err| err.to_string())?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())
}
