//! What `git.c` does before a subcommand runs (git 2.47): the global options
//! (`handle_options`), alias expansion (`run_argv`/`handle_alias`, with `split_cmdline`
//! from `alias.c`), and, for an unknown command, `help.autocorrect` (`help_unknown_cmd`
//! with its weighted Levenshtein distance), so the guard judges the command git will
//! actually run.

use std::ffi::OsString;

use crate::config_keys;
use crate::ConfigView;

/// One argument: its text (lossy UTF-8, for matching) and the exact bytes (for paths).
#[derive(Clone, Debug)]
pub(crate) struct Word {
    pub(crate) text: String,
    pub(crate) raw: OsString,
}

impl Word {
    pub(crate) fn new(raw: &OsString) -> Word {
        Word { text: raw.to_string_lossy().into_owned(), raw: raw.clone() }
    }

    fn from_text(text: &str) -> Word {
        Word { text: text.to_owned(), raw: OsString::from(text) }
    }
}

/// A configuration override from the command line, with the words that gave it.
#[derive(Debug, Clone)]
pub(crate) struct Override {
    pub(crate) entry: Option<config_keys::Entry>,
    /// `-c core.hooksPath=x` or `--config-env=core.hooksPath=X`, for messages.
    pub(crate) spelled: String,
}

/// The global options seen so far (before the subcommand, and in alias expansions).
#[derive(Debug, Default)]
pub(crate) struct Globals {
    pub(crate) chdirs: Vec<OsString>,
    pub(crate) git_dir: Option<OsString>,
    pub(crate) work_tree: Option<OsString>,
    pub(crate) bare: bool,
    pub(crate) overrides: Vec<Override>,
    /// `--exec-path=<path>`.
    pub(crate) exec_path: Option<String>,
}

/// How `handle_options` ended.
pub(crate) enum Stop {
    /// At `words[n]`, the first word that is not a global option (or the end).
    At(usize),
    /// git prints something and exits, or rejects the options (usage error): no command
    /// runs.
    Exit,
}

/// `handle_options` of git.c: consumes global options from the front of `words`.
pub(crate) fn handle_options(words: &[Word], env: &dyn Fn(&str) -> Option<String>, globals: &mut Globals) -> Stop {
    let mut idx = 0;
    while idx < words.len() {
        let cmd = words[idx].text.as_str();
        if !cmd.starts_with('-') {
            break;
        }
        // git turns these into the `help` and `version` commands.
        if matches!(cmd, "--help" | "-h" | "--version" | "-v") {
            break;
        }
        let next = words.get(idx + 1);
        // Options that take the next word: without one, git prints usage and exits.
        let takes_next = matches!(
            cmd,
            "--git-dir"
                | "--namespace"
                | "--work-tree"
                | "-c"
                | "--config-env"
                | "--shallow-file"
                | "-C"
                | "--attr-source"
        );
        if takes_next && next.is_none() {
            return Stop::Exit;
        }
        if let Some(rest) = cmd.strip_prefix("--exec-path") {
            // `--exec-path` alone (or `--exec-pathX`) prints the path and exits.
            match rest.strip_prefix('=') {
                Some(path) => globals.exec_path = Some(path.to_owned()),
                None => return Stop::Exit,
            }
        } else if let Some(next) = next.filter(|_| takes_next) {
            match cmd {
                "--git-dir" => globals.git_dir = Some(next.raw.clone()),
                "--work-tree" => globals.work_tree = Some(next.raw.clone()),
                "-c" => globals.overrides.push(Override {
                    entry: Some(config_keys::from_dash_c(&next.text)),
                    spelled: format!("-c {}", next.text),
                }),
                "--config-env" => globals.overrides.push(Override {
                    entry: config_keys::from_config_env(&next.text, env),
                    spelled: format!("--config-env {}", next.text),
                }),
                // `-C ""` is allowed and changes nothing.
                "-C" if !next.text.is_empty() => globals.chdirs.push(next.raw.clone()),
                _ => {}
            }
            idx += 1;
        } else if let Some(path) = strip_prefix_raw(&words[idx], "--git-dir=") {
            globals.git_dir = Some(path);
        } else if let Some(path) = strip_prefix_raw(&words[idx], "--work-tree=") {
            globals.work_tree = Some(path);
        } else if let Some(spec) = cmd.strip_prefix("--config-env=") {
            globals
                .overrides
                .push(Override { entry: config_keys::from_config_env(spec, env), spelled: cmd.to_owned() });
        } else if cmd == "--bare" {
            globals.bare = true;
        } else if matches!(cmd, "--html-path" | "--man-path" | "--info-path") || cmd.starts_with("--list-cmds=") {
            return Stop::Exit;
        } else if !(matches!(
            cmd,
            "-p" | "--paginate"
                | "-P"
                | "--no-pager"
                | "--no-lazy-fetch"
                | "--no-replace-objects"
                | "--literal-pathspecs"
                | "--no-literal-pathspecs"
                | "--glob-pathspecs"
                | "--noglob-pathspecs"
                | "--icase-pathspecs"
                | "--no-optional-locks"
                | "--no-advice"
        ) || cmd.starts_with("--namespace=")
            || cmd.starts_with("--attr-source="))
        {
            // "unknown option": git prints usage and exits.
            return Stop::Exit;
        }
        idx += 1;
    }
    Stop::At(idx)
}

fn strip_prefix_raw(word: &Word, prefix: &str) -> Option<OsString> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let bytes = word.raw.as_bytes();
    bytes.strip_prefix(prefix.as_bytes()).map(|rest| OsString::from_vec(rest.to_vec()))
}

/// `split_cmdline` of alias.c: words split on whitespace, single and double quotes,
/// backslash escapes outside single quotes. Like git, leading or trailing whitespace
/// yields an empty first or last word. `None` for an unclosed quote or a trailing
/// backslash (git dies with "bad alias").
pub(crate) fn split_cmdline(line: &str) -> Option<Vec<String>> {
    let mut words = vec![String::new()];
    let mut quoted: Option<char> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if quoted.is_none() && config_keys::is_git_space(c) {
            while chars.peek().copied().is_some_and(config_keys::is_git_space) {
                chars.next();
            }
            words.push(String::new());
        } else if quoted.is_none() && (c == '\'' || c == '"') {
            quoted = Some(c);
        } else if quoted == Some(c) {
            quoted = None;
        } else {
            let c = if c == '\\' && quoted != Some('\'') { chars.next()? } else { c };
            if let Some(word) = words.last_mut() {
                word.push(c);
            }
        }
    }
    if quoted.is_some() {
        return None;
    }
    Some(words)
}

/// Where alias expansion ends.
pub(crate) enum Resolved {
    /// A git command (builtin or one of git's own programs) and its arguments.
    Command { name: String, args: Vec<Word> },
    /// A `!shell` alias: git runs `text` with the remaining arguments appended.
    Shell { name: String, text: String },
    /// A command git does not know. `after_alias`: git then fails without autocorrection.
    Unknown { name: String, args: Vec<Word>, after_alias: bool },
    /// git stops before running anything (usage error, `--html-path`, a bad alias).
    Nothing,
}

/// One alias expansion, for messages: `ci` → `commit --no-verify`.
#[derive(Debug, Clone)]
pub(crate) struct Expansion {
    pub(crate) name: String,
    pub(crate) value: String,
}

/// Why alias expansion failed in a way the guard refuses.
pub(crate) struct AliasLoop {
    pub(crate) chain: Vec<String>,
}

/// `run_argv` of git.c from the subcommand word on: builtins first, then git's own
/// programs, then aliases (whose words may start with global options), until a command
/// is found. A repeated name is git's "alias loop detected" (or "recursive alias").
pub(crate) fn resolve(
    mut words: Vec<Word>,
    config: &dyn ConfigView,
    env: &dyn Fn(&str) -> Option<String>,
    globals: &mut Globals,
    expansions: &mut Vec<Expansion>,
) -> Result<Resolved, AliasLoop> {
    let mut seen: Vec<String> = Vec::new();
    loop {
        let Some(first) = words.first() else {
            return Ok(Resolved::Nothing);
        };
        let name = first.text.clone();
        if is_git_command(&name) {
            words.remove(0);
            return Ok(Resolved::Command { name, args: words });
        }
        if seen.iter().any(|earlier| earlier.eq_ignore_ascii_case(&name)) || seen.len() > 64 {
            seen.push(name);
            return Err(AliasLoop { chain: seen });
        }
        seen.push(name.clone());
        let Some(value) = alias_value(config, &name) else {
            words.remove(0);
            return Ok(Resolved::Unknown { name, args: words, after_alias: !expansions.is_empty() });
        };
        expansions.push(Expansion { name: name.clone(), value: value.clone() });
        if let Some(text) = value.strip_prefix('!') {
            return Ok(Resolved::Shell { name, text: text.to_owned() });
        }
        let Some(alias_words) = split_cmdline(&value) else {
            return Ok(Resolved::Nothing);
        };
        let alias_words: Vec<Word> = alias_words.iter().map(|text| Word::from_text(text)).collect();
        let Stop::At(consumed) = handle_options(&alias_words, env, globals) else {
            return Ok(Resolved::Nothing);
        };
        let mut expanded: Vec<Word> = alias_words[consumed..].to_vec();
        match expanded.first() {
            None => return Ok(Resolved::Nothing),
            Some(word) if word.text == name => {
                seen.push(name);
                return Err(AliasLoop { chain: seen });
            }
            Some(_) => {}
        }
        expanded.extend(words.drain(1..));
        words = expanded;
    }
}

/// `alias.<name>` as `alias_lookup` finds it: the name is compared case-insensitively
/// and the last value wins.
pub(crate) fn alias_value(config: &dyn ConfigView, name: &str) -> Option<String> {
    if name.is_empty() {
        return None;
    }
    if !name.contains('.') {
        return config.get_all(&format!("alias.{}", name.to_ascii_lowercase())).pop();
    }
    // `alias.a.b` has a subsection, whose case the canonical key keeps.
    config
        .keys()
        .into_iter()
        .filter(|key| {
            key.get(..6).is_some_and(|s| s.eq_ignore_ascii_case("alias.")) && key[6..].eq_ignore_ascii_case(name)
        })
        .flat_map(|key| config.get_all(&key))
        .last()
}

/// The names of every alias in `config` (for autocorrection).
pub(crate) fn alias_names(config: &dyn ConfigView) -> Vec<String> {
    config.keys().into_iter().filter_map(|key| key.strip_prefix("alias.").map(str::to_owned)).collect()
}

/// Whether `name` is a git command that an alias cannot shadow: a builtin, or one of the
/// programs git 2.47 installs in its exec-path.
pub(crate) fn is_git_command(name: &str) -> bool {
    BUILTINS.contains(&name) || PROGRAMS.contains(&name)
}

/// `git --list-cmds=builtins` of git 2.47.
pub(crate) const BUILTINS: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "bisect",
    "blame",
    "branch",
    "bugreport",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-mailmap",
    "check-ref-format",
    "checkout",
    "checkout--worker",
    "checkout-index",
    "cherry",
    "cherry-pick",
    "clean",
    "clone",
    "column",
    "commit",
    "commit-graph",
    "commit-tree",
    "config",
    "count-objects",
    "credential",
    "credential-cache",
    "credential-cache--daemon",
    "credential-store",
    "describe",
    "diagnose",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "difftool",
    "fast-export",
    "fast-import",
    "fetch",
    "fetch-pack",
    "fmt-merge-msg",
    "for-each-ref",
    "for-each-repo",
    "format-patch",
    "fsck",
    "fsck-objects",
    "fsmonitor--daemon",
    "gc",
    "get-tar-commit-id",
    "grep",
    "hash-object",
    "help",
    "hook",
    "index-pack",
    "init",
    "init-db",
    "interpret-trailers",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "mailinfo",
    "mailsplit",
    "maintenance",
    "merge",
    "merge-base",
    "merge-file",
    "merge-index",
    "merge-ours",
    "merge-recursive",
    "merge-recursive-ours",
    "merge-recursive-theirs",
    "merge-subtree",
    "merge-tree",
    "mktag",
    "mktree",
    "multi-pack-index",
    "mv",
    "name-rev",
    "notes",
    "pack-objects",
    "pack-redundant",
    "pack-refs",
    "patch-id",
    "pickaxe",
    "prune",
    "prune-packed",
    "pull",
    "push",
    "range-diff",
    "read-tree",
    "rebase",
    "receive-pack",
    "reflog",
    "refs",
    "remote",
    "remote-ext",
    "remote-fd",
    "repack",
    "replace",
    "replay",
    "rerere",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "send-pack",
    "shortlog",
    "show",
    "show-branch",
    "show-index",
    "show-ref",
    "sparse-checkout",
    "stage",
    "stash",
    "status",
    "stripspace",
    "submodule--helper",
    "switch",
    "symbolic-ref",
    "tag",
    "unpack-file",
    "unpack-objects",
    "update-index",
    "update-ref",
    "update-server-info",
    "upload-archive",
    "upload-archive--writer",
    "upload-pack",
    "var",
    "verify-commit",
    "verify-pack",
    "verify-tag",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
];

/// The non-builtin `git-*` programs git 2.47 installs in its exec-path (`make install`).
/// A distribution may ship others (git-lfs, git-gui); an alias with such a name is judged
/// as an alias, which can only be stricter.
pub(crate) const PROGRAMS: &[&str] = &[
    "archimport",
    "cvsexportcommit",
    "cvsimport",
    "cvsserver",
    "daemon",
    "difftool--helper",
    "filter-branch",
    "http-backend",
    "http-fetch",
    "http-push",
    "imap-send",
    "instaweb",
    "merge-octopus",
    "merge-one-file",
    "merge-resolve",
    "mergetool",
    "mergetool--lib",
    "p4",
    "quiltimport",
    "remote-ftp",
    "remote-ftps",
    "remote-http",
    "remote-https",
    "request-pull",
    "send-email",
    "sh-i18n",
    "sh-i18n--envsubst",
    "sh-setup",
    "shell",
    "submodule",
    "svn",
    "web--browse",
];

/// Whether `help.autocorrect` (from `config`, overridden by `overrides`, last wins) makes
/// git run a similar command instead of an unknown one. In 2.47 the values are `never`,
/// `immediate`, `prompt` or a number of deciseconds (0: only suggest; negative:
/// immediately). Anything git would reject counts as on: git then fails anyway.
pub(crate) fn autocorrect_enabled(config: &dyn ConfigView, overrides: &[config_keys::Entry]) -> bool {
    let from_overrides =
        overrides.iter().rev().find(|entry| entry.key == "help.autocorrect").map(|entry| entry.value.clone());
    let value = match from_overrides {
        Some(value) => value,
        None => match config.get_all("help.autocorrect").pop() {
            Some(value) => Some(value),
            None => return false,
        },
    };
    let Some(value) = value else { return true };
    let value = value.trim();
    !(value == "never"
        || value.parse::<i64>() == Ok(0)
        // Later git versions also accept these for "only suggest".
        || ["false", "no", "off", "show"]
            .iter()
            .any(|off| value.eq_ignore_ascii_case(off)))
}

/// The commands git's autocorrection could pick for the unknown `typed`: those within
/// git's similarity floor (weighted Levenshtein distance + 1 < 7) or starting with
/// `typed`. git picks one only when it is the unique best; the guard considers all of
/// them, which can only be stricter.
pub(crate) fn autocorrect_candidates(typed: &str, aliases: &[String]) -> Vec<String> {
    BUILTINS
        .iter()
        .chain(PROGRAMS)
        .map(|name| (*name).to_owned())
        .chain(aliases.iter().cloned())
        .filter(|candidate| candidate.starts_with(typed) || levenshtein(typed, candidate, 0, 2, 1, 3) + 1 < 7)
        .collect()
}

/// git's `levenshtein()` (levenshtein.c): the cost of turning `from` into `to` with
/// weights for swapping two adjacent characters, substituting, inserting ("adding") and
/// deleting. git uses (0, 2, 1, 3).
pub(crate) fn levenshtein(
    from: &str,
    to: &str,
    swap: usize,
    substitution: usize,
    insertion: usize,
    deletion: usize,
) -> usize {
    let from: Vec<char> = from.chars().collect();
    let to: Vec<char> = to.chars().collect();
    let mut two_back = vec![0; to.len() + 1];
    let mut one_back: Vec<usize> = (0..=to.len()).map(|j| j * insertion).collect();
    let mut current = vec![0; to.len() + 1];
    for i in 0..from.len() {
        current[0] = (i + 1) * deletion;
        for j in 0..to.len() {
            let mut cost = one_back[j] + substitution * usize::from(from[i] != to[j]);
            if i > 0 && j > 0 && from[i - 1] == to[j] && from[i] == to[j - 1] && cost > two_back[j - 1] + swap {
                cost = two_back[j - 1] + swap;
            }
            cost = cost.min(one_back[j + 1] + deletion);
            cost = cost.min(current[j] + insertion);
            current[j + 1] = cost;
        }
        std::mem::swap(&mut two_back, &mut one_back);
        std::mem::swap(&mut one_back, &mut current);
    }
    one_back[to.len()]
}
