//! Decides, for one invocation of `git` by an AI agent inside the sandbox, whether to run
//! it or refuse it: [`judge`] parses the command line the way git 2.47 does (global
//! options, configuration overrides from flags and environment, aliases, the dashed
//! `git-commit` form, each command's own options with bundling and abbreviations) and
//! refuses what skips the repository's hooks (`--no-verify`, `core.hooksPath`, hook
//! managers' skip switches), rewrites remote history (force, mirror and deleting pushes)
//! or creates commits behind the hooks' back (plumbing). [`parse`] exposes what the
//! caller needs for its repository checks. Nothing here runs git or reads files: the
//! caller hands over the configuration through [`ConfigView`].

#![forbid(unsafe_code)]

mod commands;
mod config_keys;
mod fuzz;
mod global;
mod hook_env;
mod options;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use global::{Resolved, Stop, Word};

#[doc(hidden)]
pub use fuzz::fuzz_one;

/// Git configuration as git would see it for this repository (system, global and
/// repository files; NOT `-c` or environment overrides: those are in the request's `args`
/// and `env`). Keys are canonical: section and variable names lower-cased, subsection
/// kept as is (`remote.origin.push`, `alias.ci`).
pub trait ConfigView {
    /// Every value of `key`, in the order git reads them (the last one wins for a
    /// single-valued key).
    fn get_all(&self, key: &str) -> Vec<String>;
    /// Every key that has a value. Used where git enumerates: the remotes a bare
    /// `git push` can go to (`branch.*.pushRemote`, `branch.*.remote`, the only
    /// configured remote), aliases whose names contain a dot, and the aliases
    /// autocorrection may pick. The default lists nothing, which leaves only `origin`
    /// and `remote.pushDefault` for a bare `git push`, so it has no default.
    fn keys(&self) -> Vec<String>;
}

/// A simple [`ConfigView`] backed by a map, for tests and callers.
#[derive(Debug, Clone, Default)]
pub struct MapConfig(pub BTreeMap<String, Vec<String>>);

impl ConfigView for MapConfig {
    fn get_all(&self, key: &str) -> Vec<String> {
        self.0.get(key).cloned().unwrap_or_default()
    }

    fn keys(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
}

/// What the user allows the agent beyond the default.
#[derive(Debug, Clone, Default)]
pub struct GuardOptions {
    /// Deleting remote branches (`push --delete`, `push origin :x`, `push --prune`) and
    /// `update-ref -d` of a branch.
    pub allow_branch_deletion: bool,
    /// `update-ref` of a branch, `fast-import`, `filter-branch`, `replay`,
    /// `replace`, `hash-object -w -t commit`.
    pub allow_plumbing_commits: bool,
    /// The global git config file the sandbox pinned (`GIT_CONFIG_GLOBAL` may name it, as
    /// the hook guard's own git does; it is the user's file, read-only inside).
    pub global_config: Option<String>,
    /// Skip switches the sandbox itself put into its environment (`HUSKY=0` in a husky
    /// project, so that husky's `prepare` does not rewrite the read-only `.husky/_`):
    /// removed from git's environment like any other, but without a notice.
    pub quiet_env: Vec<(String, String)>,
}

/// One invocation of git.
pub struct Request<'a> {
    /// How git was invoked: "git", or a dashed builtin name like "git-commit" (hard links
    /// in git's exec-path), which means `git commit`. A path is reduced to its file name.
    pub argv0: &'a str,
    /// The arguments after argv0.
    pub args: &'a [OsString],
    /// The full environment.
    pub env: &'a [(OsString, OsString)],
    pub config: &'a dyn ConfigView,
    pub options: &'a GuardOptions,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run the real git with the ORIGINAL args, after removing these environment variables
    /// (hook-manager skip switches); `notices` are one-line messages to print on stderr
    /// (without a program-name prefix: the caller adds its own).
    Run {
        strip_env: Vec<String>,
        notices: Vec<String>,
    },
    Refuse(Refusal),
    /// Nothing to do: the command would set a protected setting to the value it has
    /// already (`git config core.hooksPath .husky/_` when it is so). The caller exits 0
    /// without running git, whose write of the read-only config would fail.
    Unchanged {
        what: String,
    },
}

/// The internal rule that [`judge`] turns into [`Verdict::Unchanged`].
pub(crate) const UNCHANGED: &str = "config-unchanged";

/// Why an invocation is refused, written for the agent. `rule` is one of
/// `no-verify`, `force-push`, `mirror-push`, `branch-delete`, `plumbing-push`,
/// `plumbing-commit`, `config-override`, `config-write`, `exec-path`, `alias-loop`,
/// `shell-alias`, `autocorrect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub rule: &'static str,
    /// The refused command, short: `git commit --no-verify`.
    pub what: String,
    /// Why, as a clause: "it skips the repository's pre-commit checks".
    pub why: String,
    /// What to do instead, as a clause.
    pub instead: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&util::refusal::sentence(&format!("refused `{}`", self.what), &self.why, &self.instead))
    }
}

impl std::error::Error for Refusal {}

/// What git will do, as far as the caller's repository checks need to know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The subcommand git runs, after alias expansion (`commit`; `help` for `git --help`,
    /// `version` for `git -v`; for a shell alias, the alias name). `None` when git stops
    /// before running one: no subcommand, `--html-path`, a usage error, a bad alias.
    pub subcommand: Option<String>,
    /// Its arguments after alias expansion (lossy UTF-8).
    pub args: Vec<String>,
    /// The aliases expanded on the way, in order.
    pub aliases: Vec<String>,
    /// The text of the `!shell` alias git runs, if any.
    pub shell_alias: Option<String>,
    /// Every `-C <path>` in order; each is relative to the previous one.
    pub chdirs: Vec<PathBuf>,
    /// `--git-dir`, else `$GIT_DIR`; relative to the directory after the `-C`s.
    pub git_dir: Option<PathBuf>,
    /// `--work-tree`, else `$GIT_WORK_TREE`.
    pub work_tree: Option<PathBuf>,
    /// `$GIT_COMMON_DIR`.
    pub common_dir: Option<PathBuf>,
    /// `--bare` (git then uses the current directory as `$GIT_DIR` unless one is set).
    pub bare: bool,
}

/// Decides whether to run `git` as requested.
pub fn judge(request: &Request<'_>) -> Verdict {
    match evaluate(request) {
        Ok(notices) => {
            let (strip_env, mut switch_notices) =
                hook_env::skip_switches(&lossy_env(request), &request.options.quiet_env);
            switch_notices.extend(notices);
            Verdict::Run { strip_env, notices: switch_notices }
        }
        Err(refusal) if refusal.rule == UNCHANGED => Verdict::Unchanged { what: refusal.what },
        Err(refusal) => Verdict::Refuse(refusal),
    }
}

/// Parses the invocation like git, for the caller's repository checks. Fails only where
/// git itself cannot find a command to run because the aliases loop.
pub fn parse(request: &Request<'_>) -> Result<Parsed, Refusal> {
    let env = lossy_env(request);
    let getenv = |name: &str| getenv(&env, name);
    let invocation = invocation(request, &getenv)?;
    let env_path = |name: &str| request.env.iter().find(|(key, _)| key == name).map(|(_, value)| PathBuf::from(value));
    let globals = &invocation.globals;
    let mut parsed = Parsed {
        aliases: invocation.expansions.iter().map(|e| e.name.clone()).collect(),
        chdirs: globals.chdirs.iter().map(PathBuf::from).collect(),
        git_dir: globals.git_dir.as_ref().map(PathBuf::from).or_else(|| env_path("GIT_DIR")),
        work_tree: globals.work_tree.as_ref().map(PathBuf::from).or_else(|| env_path("GIT_WORK_TREE")),
        common_dir: env_path("GIT_COMMON_DIR"),
        bare: globals.bare,
        ..Parsed::default()
    };
    match &invocation.resolved {
        Resolved::Command { name, args } | Resolved::Unknown { name, args, .. } => {
            parsed.subcommand = Some(name.clone());
            parsed.args = args.iter().map(|word| word.text.clone()).collect();
        }
        Resolved::Shell { name, text } => {
            parsed.subcommand = Some(name.clone());
            parsed.shell_alias = Some(text.clone());
        }
        Resolved::Nothing => {}
    }
    Ok(parsed)
}

/// The invocation after global options and alias expansion.
struct Invocation {
    globals: global::Globals,
    resolved: Resolved,
    expansions: Vec<global::Expansion>,
}

fn invocation(request: &Request<'_>, getenv: &dyn Fn(&str) -> Option<String>) -> Result<Invocation, Refusal> {
    let words: Vec<Word> = request.args.iter().map(Word::new).collect();
    let mut globals = global::Globals::default();
    let mut expansions = Vec::new();
    let program = request.argv0.rsplit('/').next().unwrap_or(request.argv0);
    // `git-commit …`: no global options, no aliases, builtins only (git dies otherwise).
    if let Some(name) = program.strip_prefix("git-") {
        return Ok(Invocation {
            globals,
            resolved: Resolved::Command { name: name.to_owned(), args: words },
            expansions,
        });
    }
    let resolved = match global::handle_options(&words, getenv, &mut globals) {
        Stop::Exit => Resolved::Nothing,
        Stop::At(idx) if idx == words.len() => Resolved::Nothing,
        Stop::At(idx) => {
            let mut rest = words[idx..].to_vec();
            match rest[0].text.as_str() {
                "--version" | "-v" => rest[0] = word("version"),
                "--help" | "-h" => rest[0] = word("help"),
                _ => {}
            }
            global::resolve(rest, request.config, getenv, &mut globals, &mut expansions)
                .map_err(|err| alias_loop_refusal(&err.chain))?
        }
    };
    Ok(Invocation { globals, resolved, expansions })
}

fn word(text: &str) -> Word {
    Word::new(&OsString::from(text))
}

/// The whole decision; `Ok` carries notices for a run.
fn evaluate(request: &Request<'_>) -> Result<Vec<String>, Refusal> {
    let env = lossy_env(request);
    let getenv = |name: &str| getenv(&env, name);
    let (env_entries, mut overrides) = env_overrides(&getenv, request.options.global_config.as_deref())?;
    check_exec_path_env(&getenv)?;
    let invocation = invocation(request, &getenv)?;
    if let Some(path) = &invocation.globals.exec_path {
        return Err(Refusal {
            rule: "exec-path",
            what: format!("git --exec-path={path}"),
            why: format!("it makes git run its helper programs from {path}"),
            instead: "run git without --exec-path".to_owned(),
        });
    }
    let runs_no_hooks = match &invocation.resolved {
        Resolved::Command { name, args } => commands::runs_no_hooks(name, args),
        _ => false,
    };
    // The environment's entries, judged like `-c` ones: git reads them for this command
    // (and an exported value is judged again with every later command).
    for (what, entry) in &env_entries {
        if let Some(why) =
            config_keys::protected_key(&entry.key).filter(|_| !config_keys::only_disables(entry, runs_no_hooks))
        {
            return Err(override_refusal(what.clone(), &entry.key, why));
        }
    }
    for item in &invocation.globals.overrides {
        // No entry: a malformed --config-env, on which git dies.
        if let Some(entry) = &item.entry {
            let allowed = item.spelled.starts_with("-c ") && config_keys::only_disables(entry, runs_no_hooks);
            if let Some(why) = config_keys::protected_key(&entry.key).filter(|_| !allowed) {
                return Err(override_refusal(format!("git {}", item.spelled), &entry.key, why));
            }
            overrides.push(entry.clone());
        }
    }
    let ctx = commands::Ctx { config: request.config, options: request.options };
    let with_alias = |refusal: Refusal| explain_aliases(refusal, &invocation.expansions);
    match &invocation.resolved {
        Resolved::Command { name, args } => {
            let args: Vec<String> = args.iter().map(|word| word.text.clone()).collect();
            match commands::judge(name, &args, &ctx) {
                Some(refusal) => Err(with_alias(refusal)),
                None => Ok(Vec::new()),
            }
        }
        Resolved::Shell { name, text } => judge_shell_alias(name, text),
        Resolved::Unknown { name, args, after_alias } => {
            // A program outside git's own set (`git filter-repo`) that a rule knows.
            let words: Vec<String> = args.iter().map(|word| word.text.clone()).collect();
            if let Some(refusal) = commands::judge(name, &words, &ctx) {
                return Err(with_alias(refusal));
            }
            if *after_alias || !global::autocorrect_enabled(request.config, &overrides) {
                return Ok(Vec::new());
            }
            judge_autocorrect(name, args, request, &getenv, &ctx)
        }
        Resolved::Nothing => Ok(Vec::new()),
    }
}

/// With `help.autocorrect` on, git runs a similar command instead of an unknown one;
/// every command it could pick is judged (through aliases too, as git does).
fn judge_autocorrect(
    typed: &str,
    args: &[Word],
    request: &Request<'_>,
    getenv: &dyn Fn(&str) -> Option<String>,
    ctx: &commands::Ctx<'_>,
) -> Result<Vec<String>, Refusal> {
    let aliases = global::alias_names(request.config);
    for candidate in global::autocorrect_candidates(typed, &aliases) {
        let mut words = vec![word(&candidate)];
        words.extend(args.iter().cloned());
        let mut globals = global::Globals::default();
        let mut expansions = Vec::new();
        let inner = match global::resolve(words, request.config, getenv, &mut globals, &mut expansions) {
            Ok(Resolved::Command { name, args }) => {
                let args: Vec<String> = args.iter().map(|word| word.text.clone()).collect();
                commands::judge(&name, &args, ctx)
            }
            Ok(Resolved::Shell { name, text }) => judge_shell_alias(&name, &text).err(),
            Ok(_) => None,
            Err(err) => Some(alias_loop_refusal(&err.chain)),
        };
        let inner = globals
            .overrides
            .iter()
            .find_map(|item| {
                let entry = item.entry.as_ref()?;
                config_keys::protected_key(&entry.key)
                    .map(|why| override_refusal(format!("git {}", item.spelled), &entry.key, why))
            })
            .or(inner);
        if let Some(refusal) = inner {
            let refusal = explain_aliases(refusal, &expansions);
            return Err(Refusal {
                rule: "autocorrect",
                what: format!("git {typed}"),
                why: format!(
                    "`{typed}` is not a git command and help.autocorrect is on, so git may run `git {candidate}` instead, which is refused: {}",
                    refusal.why
                ),
                instead: format!("spell the command out, and {}", refusal.instead),
            });
        }
    }
    Ok(Vec::new())
}

/// A `!shell` alias: the guard cannot parse shell, and git commands inside it are judged
/// when they run; it refuses only an alias whose text names a bypass outright.
fn judge_shell_alias(name: &str, text: &str) -> Result<Vec<String>, Refusal> {
    let lower = text.to_ascii_lowercase();
    let runtime = format!("{}/", runtime_layout::INSIDE);
    let found = ["no-verify", "hookspath", runtime.as_str()]
        .into_iter()
        .find(|pattern| lower.contains(pattern))
        .or_else(|| ["HUSKY", "LEFTHOOK", "SKIP="].into_iter().find(|pattern| text.contains(pattern)));
    match found {
        Some(pattern) => Err(Refusal {
            rule: "shell-alias",
            what: format!("git {name}"),
            why: format!(
                "`{name}` is a shell alias (`!{text}`) that mentions `{pattern}`, a way around the repository's checks"
            ),
            instead: "run the commands you need directly, and let the repository's hooks run".to_owned(),
        }),
        None => Ok(vec![format!("`git {name}` is a shell alias; the git commands it runs are judged on their own")]),
    }
}

fn explain_aliases(mut refusal: Refusal, expansions: &[global::Expansion]) -> Refusal {
    if let Some(first) = expansions.first() {
        let chain: Vec<String> =
            expansions.iter().map(|expansion| format!("`{}` = `{}`", expansion.name, expansion.value)).collect();
        refusal.why = format!("{} (`git {}` is an alias: {})", refusal.why, first.name, chain.join(", "));
    }
    refusal
}

fn alias_loop_refusal(chain: &[String]) -> Refusal {
    let first = chain.first().cloned().unwrap_or_default();
    Refusal {
        rule: "alias-loop",
        what: format!("git {first}"),
        why: format!("its alias expansion never ends ({})", chain.join(" → ")),
        instead: "run the git command the alias stands for directly".to_owned(),
    }
}

fn override_refusal(what: String, key: &str, why: &str) -> Refusal {
    Refusal {
        rule: "config-override",
        what,
        why: format!("it sets {key}: {why}"),
        instead: format!(
            "run git without overriding {key}; the repository's hook configuration is fixed in this sandbox"
        ),
    }
}

/// Configuration from the environment: `GIT_CONFIG_COUNT` pairs, then
/// `GIT_CONFIG_PARAMETERS` (git reads them in this order), refusing protected keys and
/// anything git cannot parse; and `GIT_CONFIG_GLOBAL`/`GIT_CONFIG_SYSTEM`/`GIT_CONFIG`,
/// which load a whole file (only `/dev/null` passes, and for `GIT_CONFIG_GLOBAL` the
/// user's own global file the sandbox pinned).
///
/// Returns the protected entries still to be judged (with how each was spelled) and all
/// entries; the caller judges the former once it knows the command.
#[allow(clippy::type_complexity)]
fn env_overrides(
    getenv: &dyn Fn(&str) -> Option<String>,
    pinned_global: Option<&str>,
) -> Result<(Vec<(String, config_keys::Entry)>, Vec<config_keys::Entry>), Refusal> {
    let mut judged = Vec::new();
    for name in ["GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG"] {
        let pinned = |path: &String| name == "GIT_CONFIG_GLOBAL" && pinned_global == Some(path.as_str());
        if let Some(path) = getenv(name).filter(|path| path != "/dev/null" && !pinned(path)) {
            return Err(Refusal {
                rule: "config-override",
                what: format!("{name}={path} git"),
                why: format!("it makes git read {path} as configuration, which can change the hook settings"),
                instead: format!("unset {name} (only /dev/null is allowed)"),
            });
        }
    }
    let mut entries = Vec::new();
    if let Some(count) = getenv("GIT_CONFIG_COUNT") {
        let parsed = config_keys::parse_count(&count, getenv).map_err(|()| Refusal {
            rule: "config-override",
            what: format!("GIT_CONFIG_COUNT={count} git"),
            why: "GIT_CONFIG_COUNT and its GIT_CONFIG_KEY_<n>/GIT_CONFIG_VALUE_<n> pairs are malformed, so the guard cannot tell what they set".to_owned(),
            instead: "unset GIT_CONFIG_COUNT and pass settings with `git -c key=value`".to_owned(),
        })?;
        for (idx, entry) in parsed.iter().enumerate() {
            if config_keys::protected_key(&entry.key).is_some() {
                judged.push((format!("GIT_CONFIG_KEY_{idx}={} git", entry.key), entry.clone()));
            }
        }
        entries.extend(parsed);
    }
    if let Some(text) = getenv("GIT_CONFIG_PARAMETERS") {
        let parsed = config_keys::parse_parameters(&text).map_err(|()| Refusal {
            rule: "config-override",
            what: format!("GIT_CONFIG_PARAMETERS={text} git"),
            why: "GIT_CONFIG_PARAMETERS cannot be parsed the way git parses it, so the guard cannot tell what it sets"
                .to_owned(),
            instead: "unset GIT_CONFIG_PARAMETERS and pass settings with `git -c key=value`".to_owned(),
        })?;
        for entry in &parsed {
            if config_keys::protected_key(&entry.key).is_some() {
                judged.push((format!("GIT_CONFIG_PARAMETERS={text} git"), entry.clone()));
            }
        }
        entries.extend(parsed);
    }
    Ok((judged, entries))
}

/// `GIT_EXEC_PATH` is set by git itself for hooks, aliases and other children (to its
/// own exec-path), so it cannot be refused outright; it passes when it names a directory
/// the agent cannot write: an absolute path under `/usr/`, `/opt/`, `/nix/store/` or the
/// sandbox runtime, without `..`.
fn check_exec_path_env(getenv: &dyn Fn(&str) -> Option<String>) -> Result<(), Refusal> {
    let Some(path) = getenv("GIT_EXEC_PATH") else {
        return Ok(());
    };
    let runtime = format!("{}/", runtime_layout::INSIDE);
    let system = ["/usr/", "/opt/", "/nix/store/", runtime.as_str()].iter().any(|prefix| path.starts_with(prefix))
        && !path.split('/').any(|part| part == "..");
    if system {
        return Ok(());
    }
    Err(Refusal {
        rule: "exec-path",
        what: format!("GIT_EXEC_PATH={path} git"),
        why: format!("it makes git run its helper programs from {path}"),
        instead: "unset GIT_EXEC_PATH".to_owned(),
    })
}

fn lossy_env(request: &Request<'_>) -> Vec<(String, String)> {
    request
        .env
        .iter()
        .map(|(key, value)| (key.to_string_lossy().into_owned(), value.to_string_lossy().into_owned()))
        .collect()
}

/// The first value of `name`, as `getenv` finds it.
fn getenv(env: &[(String, String)], name: &str) -> Option<String> {
    env.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone())
}
