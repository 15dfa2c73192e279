//! Package managers' settings files (`~/.npmrc`, `pip.conf`, cargo's `config.toml`, the
//! `@settings` preset): shown read-only inside as a copy, so that a corporate mirror
//! stays the registry inside, without the lines that hold credentials. Pure: from a
//! file's text, the copy's text, the credential keys left out and the registry hosts it
//! names (which the network allowlist must let through for the mirror to answer).
//!
//! A line is a credential line when its key (the part before `=`, its last `:`
//! segment: npm's `//host/:_authToken`), or any key of an inline table on it, names a
//! token, password, secret, credential, authorization, API or private key, or a key
//! (`_auth`, `key`, `*_key`, `*_pat`): it is left out, with the rest of its value (a
//! multi-line string, INI continuation lines), and so is a commented-out one. A value that is only a `${VAR}` reference (npm expands it
//! from the environment, which the env filter governs) holds no secret and stays. A URL
//! with a user part (`https://user:pass@host`, also `https://token@host`) loses that
//! part and keeps the rest, so the tool still asks the mirror (which then refuses)
//! rather than falling back to the public index. Each change is preceded by a comment
//! saying so, in the comment syntax every one of these formats shares (`#`). Where the
//! sandbox's own proxy is the only way out, proxy settings are left out the same way.

/// The copy of one settings file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    pub text: String,
    /// The keys of the lines left out, in order (`//registry.npmjs.org/:_authToken`).
    pub removed: Vec<String>,
    /// The hosts the file names as registries or package indexes, in order, once each.
    pub registries: Vec<String>,
    /// The keys of the proxy settings left out (see [`redact`]), in order.
    pub proxies: Vec<String>,
}

/// The keys that name a proxy: npm's `proxy` and `https-proxy`, pip's `proxy`, cargo's
/// `http.proxy`.
const PROXY_KEYS: &[&str] = &["proxy", "https-proxy", "http-proxy"];

/// The keys whose values are registries or package indexes: npm's `registry` and
/// `@scope:registry`, pip's `index-url`, `extra-index-url` and `find-links`, cargo's
/// `registry` and `index` (in `[source.*]` and `[registries.*]`).
const REGISTRY_KEYS: &[&str] = &["registry", "index-url", "extra-index-url", "find-links", "index"];

/// The copy of a settings file whose text is `text`. With `drop_proxies` (a sandbox
/// whose only way out is its own proxy, or none), proxy settings are left out too:
/// a tool told to use the host's proxy would bypass the sandbox's variables and reach
/// nothing.
pub fn redact(text: &str, drop_proxies: bool) -> Redacted {
    let mut redacted = Redacted {
        text: String::with_capacity(text.len()),
        removed: Vec::new(),
        registries: Vec::new(),
        proxies: Vec::new(),
    };
    // After a credential line: the rest of its value (a multi-line TOML string up to
    // its closing quotes, or INI continuation lines) is left out with it.
    let mut open_quote: Option<&str> = None;
    let mut after_removed = false;
    for line in text.split_inclusive('\n') {
        let content = line.trim_end_matches(['\n', '\r']);
        let trimmed = content.trim_start();
        if let Some(quote) = open_quote {
            if content.contains(quote) {
                open_quote = None;
            }
            continue;
        }
        if after_removed && !trimmed.is_empty() && trimmed.len() < content.len() && !trimmed.contains('=') {
            continue;
        }
        after_removed = false;
        // A credential in a comment (an old token kept "for later") is a credential.
        let commented = trimmed.strip_prefix(['#', ';']).map(str::trim_start);
        if commented.is_some_and(has_secret_key) {
            redacted.text.push_str("# agent-sandbox: a commented-out credential line was left out here\n");
            redacted.removed.push("a commented-out credential".to_owned());
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with(['#', ';', '[']) {
            redacted.text.push_str(line);
            continue;
        }
        let (key, value) = match trimmed.split_once('=') {
            Some((key, value)) => (key.trim(), Some(value.trim())),
            None => ("", None),
        };
        let last = key.rsplit(':').next().unwrap_or(key).trim_matches(['"', '\'']).to_ascii_lowercase();
        if REGISTRY_KEYS.contains(&last.as_str()) {
            for host in value.map(url_hosts).unwrap_or_default() {
                if !redacted.registries.contains(&host) {
                    redacted.registries.push(host);
                }
            }
        }
        let reference_only = value.is_some_and(is_env_reference);
        // The line's own key, or any key of an inline table on it
        // (`corp = { index = "…", token = "…" }`).
        if !reference_only && (is_secret_key(&last) || value.is_some_and(has_secret_key)) {
            redacted.removed.push(key.to_owned());
            redacted.text.push_str(&format!("# agent-sandbox: a credential line was left out here ({key})\n"));
            let value = value.unwrap_or_default();
            open_quote = ["\"\"\"", "\'\'\'"]
                .into_iter()
                .find(|quote| value.starts_with(quote) && value[quote.len()..].find(quote).is_none());
            after_removed = true;
            continue;
        }
        if drop_proxies && PROXY_KEYS.contains(&last.as_str()) {
            redacted.proxies.push(key.to_owned());
            redacted.text.push_str(&format!(
                "# agent-sandbox: a proxy setting was left out here ({key}): the sandbox's own proxy is its way out\n"
            ));
            continue;
        }
        if has_user_part(content) {
            // The URL stays without its user part: the mirror then refuses the request
            // inside, rather than the tool quietly falling back to the public index.
            let shown = if key.is_empty() { "a URL" } else { key };
            redacted.removed.push(format!("{shown} (the user part of its URL)"));
            let indent = &content[..content.len() - trimmed.len()];
            redacted.text.push_str(&format!(
                "{indent}# agent-sandbox: the credentials in the URL below were left out ({shown})\n"
            ));
            redacted.text.push_str(&without_user_part(content));
            redacted.text.push_str(&line[content.len()..]);
            continue;
        }
        redacted.text.push_str(line);
    }
    redacted
}

/// Whether a key (its last `:` segment, lower-cased) names a credential: `_auth`, a
/// token, password, secret, API or private key, credential or auth setting, or a key.
fn is_secret_key(last: &str) -> bool {
    let last = last.trim_matches(['"', '\'', ' ']);
    [
        "token",
        "password",
        "passwd",
        "secret",
        "apikey",
        "api_key",
        "api-key",
        "_auth",
        "authorization",
        "credential",
        "private",
    ]
    .iter()
    .any(|word| last.contains(word))
        || last == "key"
        || last.ends_with("_key")
        || last.ends_with("-key")
        || last.ends_with(".key")
        || last.ends_with("_pat")
}

/// Whether `text` holds `key = value` with a credential key anywhere (split at `,`,
/// `{` and `;`, as inline tables and npm's lists run).
fn has_secret_key(text: &str) -> bool {
    text.split([',', '{', ';']).any(|part| {
        part.split_once('=').is_some_and(|(key, value)| {
            let last = key.trim().rsplit(':').next().unwrap_or("").to_ascii_lowercase();
            !key.trim().is_empty()
                && is_secret_key(&last)
                && !is_env_reference(value.trim().trim_end_matches('}').trim())
        })
    })
}

/// `${NAME}`, quoted or not: npm's reference to an environment variable.
fn is_env_reference(value: &str) -> bool {
    let value = value.trim_matches(['"', '\'']);
    value
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .is_some_and(|name| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// Whether `text` holds a URL with a user part (`scheme://user[:password]@host`).
fn has_user_part(text: &str) -> bool {
    text.match_indices("://").any(|(at, sep)| {
        let authority = text[at + sep.len()..].split(['/', '?', '#', ' ', '"', '\'']).next().unwrap_or("");
        authority.contains('@')
    })
}

/// `text` with the user part of each URL taken out.
fn without_user_part(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let end = after.find(['/', '?', '#', ' ', '"', '\'']).unwrap_or(after.len());
        match after[..end].rfind('@') {
            Some(user_end) => rest = &after[user_end + 1..],
            None => rest = after,
        }
    }
    out.push_str(rest);
    out
}

/// The hosts of the URLs in `value` (`sparse+https://mirror.example/index/` →
/// `mirror.example`), without user part or port.
fn url_hosts(value: &str) -> Vec<String> {
    value
        .match_indices("://")
        .filter_map(|(at, sep)| {
            let authority = value[at + sep.len()..].split(['/', '?', '#', ' ', '"', '\'']).next()?;
            let host_port = authority.rsplit('@').next()?;
            let host = match host_port.strip_prefix('[') {
                Some(bracketed) => bracketed.split(']').next()?,
                None => host_port.split(':').next()?,
            };
            (!host.is_empty()).then(|| host.to_ascii_lowercase())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_lines_are_left_out_and_settings_kept() {
        // (line, left out as)
        let cases: &[(&str, Option<&str>)] = &[
            ("registry=https://npm.corp.example/", None),
            ("@corp:registry = https://npm.corp.example/", None),
            ("always-auth=true", None),
            ("strict-ssl=false", None),
            ("//npm.corp.example/:_authToken=npm_abc123", Some("//npm.corp.example/:_authToken")),
            ("//npm.corp.example/:_auth=dXNlcjpwYXNz", Some("//npm.corp.example/:_auth")),
            ("//npm.corp.example/:_password=cGFzcw==", Some("//npm.corp.example/:_password")),
            ("_authToken=npm_abc123", Some("_authToken")),
            ("_auth = dXNlcjpwYXNz", Some("_auth")),
            ("//npm.corp.example/:username=me", None),
            // An environment reference holds no secret: the env filter decides on it.
            ("//registry.npmjs.org/:_authToken=${NPM_TOKEN}", None),
            ("index-url = https://pypi.corp.example/simple", None),
            ("token = \"cio_abc\"", Some("token")),
            ("registry = \"sparse+https://cargo.corp.example/index/\"", None),
            ("[registries.corp]", None),
            ("# registry=https://old.corp.example/", None),
            ("corp = { index = \"https://cargo.corp.example/index\" }", None),
            ("corp = { index = \"https://cargo.corp.example/index\", token = \"cio_x\" }", Some("corp")),
            ("key=-----BEGIN PRIVATE KEY-----", Some("key")),
            ("GITHUB_PAT = \"ghp_x\"", Some("GITHUB_PAT")),
            ("OPENAI_KEY = \"sk-x\"", Some("OPENAI_KEY")),
        ];
        for (line, removed) in cases {
            let redacted = redact(&format!("{line}\n"), true);
            match removed {
                None => {
                    assert_eq!(redacted.text, format!("{line}\n"), "{line}");
                    assert!(redacted.removed.is_empty(), "{line}");
                }
                Some(key) => {
                    assert_eq!(
                        redacted.text,
                        format!("# agent-sandbox: a credential line was left out here ({key})\n"),
                        "{line}"
                    );
                    assert_eq!(redacted.removed, [key.to_string()], "{line}");
                }
            }
        }
    }

    /// What the review found leaking: a token kept in a comment, a multi-line TOML
    /// string and an INI continuation after a credential key.
    #[test]
    fn commented_and_multi_line_credentials_are_left_out_whole() {
        let text = "# //registry.npmjs.org/:_authToken=npm_old\nregistry=https://npm.corp.example/\n\
                    token = \"\"\"\ncio_secret\n\"\"\"\nindex = \"https://cargo.corp.example/\"\n\
                    password =\n    hunter2\nindex-url = https://pypi.corp.example/simple\n";
        let redacted = redact(text, true);
        for secret in ["npm_old", "cio_secret", "hunter2"] {
            assert!(!redacted.text.contains(secret), "{secret} in:\n{}", redacted.text);
        }
        for kept in ["registry=https://npm.corp.example/", "index = \"https://cargo.corp.example/\"", "index-url = "] {
            assert!(redacted.text.contains(kept), "{kept} lost:\n{}", redacted.text);
        }
    }

    #[test]
    fn urls_lose_their_user_part_and_keep_the_rest() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "index-url = https://user:pass@pypi.corp.example/simple\n",
                "# agent-sandbox: the credentials in the URL below were left out (index-url)\n\
                 index-url = https://pypi.corp.example/simple\n",
                "index-url (the user part of its URL)",
            ),
            (
                "index-url = https://__token__@pypi.corp.example/simple",
                "# agent-sandbox: the credentials in the URL below were left out (index-url)\n\
                 index-url = https://pypi.corp.example/simple",
                "index-url (the user part of its URL)",
            ),
            (
                "    https://me:pw@extra.example/simple https://a@b.example/\n",
                "    # agent-sandbox: the credentials in the URL below were left out (a URL)\n    \
                 https://extra.example/simple https://b.example/\n",
                "a URL (the user part of its URL)",
            ),
        ];
        for (text, copy, removed) in cases {
            let redacted = redact(text, true);
            assert_eq!(redacted.text, *copy, "{text}");
            assert_eq!(redacted.removed, [removed.to_string()], "{text}");
        }
    }

    #[test]
    fn a_whole_npmrc_keeps_its_registry_and_loses_its_token() {
        let npmrc = "registry=https://npm.corp.example/\n//npm.corp.example/:_authToken=npm_SECRET\nfund=false";
        assert_eq!(
            redact(npmrc, true),
            Redacted {
                text: "registry=https://npm.corp.example/\n\
                       # agent-sandbox: a credential line was left out here (//npm.corp.example/:_authToken)\n\
                       fund=false"
                    .into(),
                removed: vec!["//npm.corp.example/:_authToken".into()],
                registries: vec!["npm.corp.example".into()],
                proxies: vec![],
            }
        );
    }

    #[test]
    fn proxy_settings_are_left_out_only_where_the_sandbox_has_its_own() {
        let text =
            "https-proxy=http://proxy.corp.example:3128\nproxy = http://proxy.corp.example:3128\nnoproxy=.corp\n";
        let redacted = redact(text, true);
        assert_eq!(
            redacted.text,
            "# agent-sandbox: a proxy setting was left out here (https-proxy): the sandbox's own proxy is its way out\n\
             # agent-sandbox: a proxy setting was left out here (proxy): the sandbox's own proxy is its way out\n\
             noproxy=.corp\n"
        );
        assert_eq!(redacted.proxies, ["https-proxy", "proxy"]);
        // With the host's network (`network.mode` on), the host's proxy is the way out.
        let redacted = redact(text, false);
        assert_eq!((redacted.text.as_str(), redacted.proxies.len()), (text, 0));
    }

    #[test]
    fn registry_hosts_are_found_in_each_format() {
        let cases: &[(&str, &[&str])] = &[
            (
                "registry=https://npm.corp.example:8443/\n@a:registry=https://b.example/\n",
                &["npm.corp.example", "b.example"],
            ),
            (
                "[global]\nindex-url = https://u:p@pypi.corp.example/simple\nextra-index-url = https://x.example/s\n",
                &["pypi.corp.example", "x.example"],
            ),
            ("[source.mirror]\nregistry = \"sparse+https://cargo.corp.example/index/\"\n", &["cargo.corp.example"]),
            ("[registries.corp]\nindex = \"https://[::1]:4000/git/index\"\n", &["::1"]),
            ("proxy=http://proxy.corp.example:3128\nhome=https://docs.example\n", &[]),
        ];
        for (text, hosts) in cases {
            assert_eq!(redact(text, true).registries, *hosts, "{text}");
        }
    }
}
