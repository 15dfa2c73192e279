//! The environment filter: which of the caller's variables reach the sandbox.
//! Order of decision: `env.block` always drops; `env.allow` keeps (the user opting in,
//! e.g. the agent's own API key); a name matching `env.secretPatterns` drops, and so does
//! a value carrying credentials in a URL (`mongodb://user:pass@host`); everything else
//! passes. Names are matched case-insensitively: `api_key` is as secret as `API_KEY`.

use std::ffi::OsString;

use config::{Config, Origin, Sourced};
use glob::{MatchOptions, Pattern};

use crate::PolicyError;

const OPTIONS: MatchOptions =
    MatchOptions { case_sensitive: false, require_literal_separator: false, require_literal_leading_dot: false };

#[derive(Debug)]
pub struct EnvFilter {
    block: Vec<(Pattern, Origin)>,
    allow: Vec<(Pattern, Origin)>,
    secret: Vec<(Pattern, Origin)>,
}

/// Why a variable was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    pub name: String,
    pub pattern: String,
    pub policy: &'static str,
}

impl EnvFilter {
    pub fn new(config: &Config) -> Result<EnvFilter, PolicyError> {
        fn compile(items: &[Sourced<String>]) -> Result<Vec<(Pattern, Origin)>, PolicyError> {
            items
                .iter()
                .map(|item| {
                    Pattern::new(&item.value).map(|pattern| (pattern, item.origin.clone())).map_err(|err| {
                        PolicyError::Glob {
                            pattern: item.value.clone(),
                            origin: item.origin.clone(),
                            message: err.msg.to_owned(),
                        }
                    })
                })
                .collect()
        }
        Ok(EnvFilter {
            block: compile(&config.env_block)?,
            allow: compile(&config.env_allow)?,
            secret: compile(&config.env_secret_patterns)?,
        })
    }

    /// `None` if `name` passes, else why it is dropped.
    pub fn judge(&self, name: &str) -> Option<Dropped> {
        let hit = |list: &[(Pattern, Origin)]| {
            list.iter()
                .find(|(pattern, _)| pattern.matches_with(name, OPTIONS))
                .map(|(pattern, _)| pattern.as_str().to_owned())
        };
        if let Some(pattern) = hit(&self.block) {
            return Some(Dropped { name: name.to_owned(), pattern, policy: "env-block" });
        }
        if hit(&self.allow).is_some() || is_routine(name) {
            return None;
        }
        hit(&self.secret).map(|pattern| Dropped { name: name.to_owned(), pattern, policy: "env-secret-pattern" })
    }

    fn is_allowed(&self, name: &str) -> bool {
        self.allow.iter().any(|(pattern, _)| pattern.matches_with(name, OPTIONS))
    }

    /// Splits `vars` into those passed to the sandbox and those dropped.
    /// Names that are not UTF-8 are dropped: they cannot be judged.
    pub fn apply(
        &self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> (Vec<(OsString, OsString)>, Vec<Dropped>) {
        let mut kept = Vec::new();
        let mut dropped = Vec::new();
        for (name, value) in vars {
            let Some(text) = name.to_str() else {
                dropped.push(Dropped {
                    name: name.to_string_lossy().into_owned(),
                    pattern: "<not UTF-8>".into(),
                    policy: "env-invalid-name",
                });
                continue;
            };
            match self.judge(text) {
                None if !self.is_allowed(text) && has_url_credentials(&value.to_string_lossy()) => {
                    dropped.push(Dropped {
                        name: text.to_owned(),
                        pattern: "<user:password@ in a URL>".into(),
                        policy: "env-credential-url",
                    })
                }
                None => kept.push((name, value)),
                Some(why) => dropped.push(why),
            }
        }
        (kept, dropped)
    }
}

/// Names that match a secret pattern (`AWS_*`) but hold no secret: a region or the path
/// of a CA bundle, which tools need and which were reported as blocked at every start.
/// Only these exact shapes pass; a value with credentials in a URL is still dropped.
fn is_routine(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    ["_REGION", "_CA_BUNDLE", "_CA_CERTS", "_CA_FILE"].iter().any(|suffix| name.ends_with(suffix))
        || ["SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"].contains(&name.as_str())
}

/// Whether `value` holds a URL with a password in it (`scheme://user:password@host`).
pub fn has_url_credentials(value: &str) -> bool {
    value.match_indices("://").any(|(at, _)| {
        let authority = value[at + 3..].split(['/', '?', '#', ' ']).next().unwrap_or_default();
        authority.rsplit_once('@').is_some_and(|(userinfo, _)| userinfo.contains(':'))
    })
}
