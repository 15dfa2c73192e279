//! Configuration keys as git reads them from the command line and the environment:
//! canonical key names (`git_config_parse_key`), the protected keys an agent may not set,
//! and the parsers for every override channel git 2.47 has: `-c key[=value]`,
//! `--config-env=key=ENVVAR`, `GIT_CONFIG_PARAMETERS` (git's single-quoted list, parsed
//! like `config.c`'s `parse_config_env_list` with `sq_dequote_step`) and
//! `GIT_CONFIG_COUNT` / `GIT_CONFIG_KEY_<n>` / `GIT_CONFIG_VALUE_<n>`.

/// One configuration entry from an override channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Canonical: section and variable lower-cased, subsection kept.
    pub(crate) key: String,
    /// `None` for a bare `-c key` (boolean true).
    pub(crate) value: Option<String>,
}

/// Why a configuration key may not be set by the agent, or `None` when it may.
/// `key` must be canonical.
pub(crate) fn protected_key(key: &str) -> Option<&'static str> {
    let (section, subsection, variable) = split_key(key);
    match (section, subsection, variable) {
        ("core", None, "hookspath") => {
            Some("it points git at another hooks directory, so the repository's checks would not run")
        }
        ("core", None, "fsmonitor") => Some("it makes git run an arbitrary command"),
        ("hook", _, _) => Some("it defines or changes git hooks"),
        ("include" | "includeif", _, _) => Some("it loads another config file, which can change the hook settings"),
        ("alias", _, _) => Some("it defines a git alias, which can hide a refused command"),
        ("remote", Some(_), "push") => {
            Some("it changes what every push to that remote writes, which can force-push or delete")
        }
        ("remote", Some(_), "mirror") => Some(
            "it turns every push to that remote into a mirror push, which force-updates and deletes remote branches",
        ),
        _ => None,
    }
}

/// Whether a `-c` override of a protected key only switches something off, which the
/// agents' own read-only git calls do at every start (Claude Code:
/// `git -c core.hooksPath=/dev/null -c core.fsmonitor= ls-files …`): an empty or false
/// `core.fsmonitor` (git then scans the work tree itself; passes on any command), and
/// `core.hooksPath=/dev/null` on a command that runs no hooks (`runs_no_hooks`), where
/// there is nothing it could disable. `key` must be canonical.
///
/// Claude Code (2.1.3xx) adds more to every call of its own: `hook.<name>.enabled=false`
/// for each hook event (again only on commands that run no hooks, where it disables
/// nothing the repository relies on), and, in `GIT_CONFIG_PARAMETERS`,
/// `alias.remote-none=version`-style entries that turn an alias name into `git version`:
/// an alias whose value is exactly `version` runs nothing but that builtin, on any
/// command (a builtin's name is never looked up as an alias).
pub(crate) fn only_disables(entry: &Entry, runs_no_hooks: bool) -> bool {
    let value = entry.value.as_deref();
    match (split_key(&entry.key), value) {
        (("core", None, "fsmonitor"), Some(value)) => value.trim().is_empty() || !is_true(value),
        (("core", None, "hookspath"), Some("/dev/null")) => runs_no_hooks,
        (("hook", Some(_), "enabled"), Some(value)) => runs_no_hooks && !value.trim().is_empty() && !is_true(value),
        // `alias.<name>` (no subsection) and `alias.<name>.command`.
        (("alias", None, _) | ("alias", Some(_), "command"), Some("version")) => true,
        _ => false,
    }
}

/// Why renaming or removing `section` (`alias`, `includeIf.gitdir:~/x`, `remote.origin`)
/// is refused, or `None`. `core` is protected as a whole because it holds
/// `core.hooksPath`; `remote` because renaming a section into it can add push refspecs.
pub(crate) fn protected_section(section: &str) -> Option<&'static str> {
    let name = section.split('.').next().unwrap_or(section).to_ascii_lowercase();
    match name.as_str() {
        "core" => Some("the core section holds core.hooksPath"),
        "hook" => Some("it holds git hook definitions"),
        "include" | "includeif" => Some("it loads other config files"),
        "alias" => Some("it holds git aliases"),
        "remote" => Some("it holds remote push settings"),
        _ => None,
    }
}

/// `git_config_parse_key` without the validation: lower-cases the section (before the
/// first dot) and the variable (after the last dot). Surrounding whitespace is trimmed,
/// as git does for the old `'key=value'` form; an invalid key makes git fail, so being
/// lenient here can only make the guard stricter.
pub(crate) fn canonical_key(key: &str) -> String {
    let key = key.trim_matches(is_git_space);
    match (key.find('.'), key.rfind('.')) {
        (Some(first), Some(last)) => {
            format!("{}{}{}", key[..first].to_ascii_lowercase(), &key[first..last], key[last..].to_ascii_lowercase())
        }
        _ => key.to_ascii_lowercase(),
    }
}

/// `(section, subsection, variable)` of a canonical key.
pub(crate) fn split_key(key: &str) -> (&str, Option<&str>, &str) {
    match (key.find('.'), key.rfind('.')) {
        (Some(first), Some(last)) if first == last => (&key[..first], None, &key[last + 1..]),
        (Some(first), Some(last)) => (&key[..first], Some(&key[first + 1..last]), &key[last + 1..]),
        _ => (key, None, ""),
    }
}

/// `git -c <text>`: the key is everything before the first `=`; no `=` means true.
pub(crate) fn from_dash_c(text: &str) -> Entry {
    match text.split_once('=') {
        Some((key, value)) => Entry { key: canonical_key(key), value: Some(value.to_owned()) },
        None => Entry { key: canonical_key(text), value: None },
    }
}

/// `git --config-env=<spec>`: the key is everything before the LAST `=`, the rest names
/// an environment variable (`git_config_push_env`). `None` when git would die on it.
pub(crate) fn from_config_env(spec: &str, env: impl Fn(&str) -> Option<String>) -> Option<Entry> {
    let (key, var) = spec.rsplit_once('=')?;
    Some(Entry { key: canonical_key(key), value: env(var) })
}

/// `GIT_CONFIG_PARAMETERS`, in git's format: space-separated `'key'='value'` (new) or
/// `'key=value'` (old) items, each quoted the way `sq_quote` writes them. `Err` when git
/// would report "bogus format".
pub(crate) fn parse_parameters(text: &str) -> Result<Vec<Entry>, ()> {
    let mut entries = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (key, after) = sq_dequote_step(rest)?;
        match after {
            None => {
                entries.push(from_dash_c(&key));
                break;
            }
            Some(after) if after.starts_with(is_git_space) => {
                entries.push(from_dash_c(&key));
                rest = after;
            }
            Some(after) => {
                let Some(value_part) = after.strip_prefix('=') else {
                    return Err(());
                };
                if value_part.starts_with('\'') {
                    let (value, after_value) = sq_dequote_step(value_part)?;
                    entries.push(Entry { key: canonical_key(&key), value: Some(value) });
                    match after_value {
                        None => break,
                        Some(after_value) if after_value.starts_with(is_git_space) => rest = after_value,
                        Some(_) => return Err(()),
                    }
                } else if value_part.is_empty() || value_part.starts_with(is_git_space) {
                    entries.push(Entry { key: canonical_key(&key), value: None });
                    rest = value_part;
                } else {
                    return Err(());
                }
            }
        }
        rest = rest.trim_start_matches(is_git_space);
    }
    Ok(entries)
}

/// One single-quoted word from the start of `text` (`sq_dequote_step` in `quote.c`):
/// `'...'` with `'\''` and `'\!'` allowed between quoted parts. Returns the word and
/// what follows it (`None` at the end of the text).
fn sq_dequote_step(text: &str) -> Result<(String, Option<&str>), ()> {
    let Some(mut rest) = text.strip_prefix('\'') else {
        return Err(());
    };
    let mut word = String::new();
    loop {
        let Some(close) = rest.find('\'') else {
            return Err(());
        };
        word.push_str(&rest[..close]);
        let after = &rest[close + 1..];
        if after.is_empty() {
            return Ok((word, None));
        }
        let mut chars = after.chars();
        if let (Some('\\'), Some(escaped @ ('\'' | '!')), Some('\'')) = (chars.next(), chars.next(), chars.next()) {
            word.push(escaped);
            rest = &after[3..];
            continue;
        }
        return Ok((word, Some(after)));
    }
}

/// `GIT_CONFIG_COUNT` and its `GIT_CONFIG_KEY_<n>` / `GIT_CONFIG_VALUE_<n>` pairs. `Err`
/// when git would refuse them (bogus count, missing key or value).
pub(crate) fn parse_count(count: &str, env: impl Fn(&str) -> Option<String>) -> Result<Vec<Entry>, ()> {
    // strtoul(…, 10) with `*endp` required to be the end: leading whitespace and a sign
    // are accepted, an empty string is zero.
    let trimmed = count.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let digits = trimmed.strip_prefix('+').unwrap_or(trimmed);
    let count: u64 = if count.is_empty() {
        0
    } else if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(());
    } else {
        digits.parse().map_err(|_| ())?
    };
    if count > i32::MAX as u64 {
        return Err(());
    }
    let mut entries = Vec::new();
    for idx in 0..count {
        let key = env(&format!("GIT_CONFIG_KEY_{idx}")).ok_or(())?;
        let value = env(&format!("GIT_CONFIG_VALUE_{idx}")).ok_or(())?;
        entries.push(Entry { key: canonical_key(&key), value: Some(value) });
    }
    Ok(entries)
}

/// git's own `isspace` (`sane_ctype`): space, tab, newline, carriage return.
pub(crate) fn is_git_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

/// git's boolean parsing, leaning to `true` for anything that is not clearly false: an
/// empty value is false in git but cannot be told from a valueless (`true`) entry here.
pub(crate) fn is_true(value: &str) -> bool {
    let value = value.trim();
    !(value.eq_ignore_ascii_case("false")
        || value.eq_ignore_ascii_case("no")
        || value.eq_ignore_ascii_case("off")
        || value.parse::<i64>() == Ok(0))
}
