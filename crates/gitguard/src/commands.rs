//! The subcommands the guard refuses forms of, each with its git 2.47 option table (the
//! option column of `git <cmd> --help-all`, checked against the real git by a unit test)
//! and its rules: hook bypass (`--no-verify` and its spellings), destructive pushes,
//! writes of protected configuration, and commit-creating plumbing. Commands without a
//! dangerous option (`log`, `add`, `clean`, `stash`, `cherry-pick`, `revert`, `branch`,
//! `checkout`, `reset`, …) have no table: nothing in their arguments can be refused, and a
//! table could only misread them.

use crate::config_keys;
use crate::options::{self, Event, Opt};
use crate::{global::Word, ConfigView, GuardOptions, Refusal};

/// What a rule needs besides the arguments.
pub(crate) struct Ctx<'a> {
    pub(crate) config: &'a dyn ConfigView,
    pub(crate) options: &'a GuardOptions,
}

/// Judges `git <name> <args…>` (after global options and alias expansion).
pub(crate) fn judge(name: &str, args: &[String], ctx: &Ctx<'_>) -> Option<Refusal> {
    // `git <cmd> --help` is `git help <cmd>`, and a lone `-h` only prints usage.
    if args.first().is_some_and(|arg| arg == "--help") || args == ["-h"] {
        return None;
    }
    match name {
        "commit" => no_verify(name, &options::table(COMMIT), args, VerifyOpt::NoVerify),
        "am" => no_verify(name, &options::table(AM), args, VerifyOpt::NoVerify),
        "merge" => no_verify(name, &options::table(MERGE), args, VerifyOpt::NoVerify),
        "rebase" => no_verify(name, &options::table(REBASE), args, VerifyOpt::NoVerify),
        "pull" => no_verify(name, &options::table(PULL), args, VerifyOpt::Verify),
        "push" => push(args, ctx),
        "config" => config(args, ctx.config),
        "update-ref" => update_ref(args, ctx.options),
        "hash-object" => hash_object(args, ctx.options),
        "replace" => replace(args, ctx.options),
        // `commit-tree` passes: its commit is unreferenced until a ref points at it, and
        // `update-ref` of a branch is judged here; the pre-push hook and the host push
        // service check every commit a push sends (Codex's undo snapshots use it).
        "fast-import" | "filter-branch" | "filter-repo" | "replay" => {
            plumbing_commit(name, ctx.options, whole_command_why(name))
        }
        "send-pack" | "http-push" | "remote-http" | "remote-https" | "remote-ftp" | "remote-ftps" | "remote-ext"
        | "remote-fd" => Some(Refusal {
            rule: "plumbing-push",
            what: format!("git {name}"),
            why: "it talks to the remote directly, without the repository's pre-push checks".to_owned(),
            instead: "push with `git push`, which runs the pre-push checks".to_owned(),
        }),
        _ => None,
    }
}

/// Commands that run no git hook at all, directly or through a git child they start, so
/// `-c core.hooksPath=/dev/null` on them disables nothing. An allowlist of reading and
/// object-writing commands (the agents' `ls-files`, `log`, `status`, Codex's undo
/// snapshots with `write-tree`/`commit-tree`/`read-tree`/`checkout-index`); everything
/// else counts as running hooks: `commit`, `merge`, `rebase`, `am`, `push`, `pull`,
/// `checkout`/`switch`/`clone`/`worktree` (post-checkout), `fetch`/`gc` (pre-auto-gc).
///
/// Also `config` (reads and writes a file; its writes are judged by their own rule) and
/// `remote` in its reading forms (`remote`, `-v`, `get-url`, `show`): `remote update`
/// fetches, and a fetch may start `gc --auto`.
pub(crate) fn runs_no_hooks(name: &str, args: &[Word]) -> bool {
    if name == "remote" {
        // `-v` may come before any subcommand (`remote -v prune`): it is skipped.
        let mut words =
            args.iter().map(|word| word.text.as_str()).skip_while(|word| matches!(*word, "-v" | "--verbose"));
        return matches!(words.next(), None | Some("get-url" | "show"));
    }
    // `worktree list` (Claude Code's own call) reads; `add` runs post-checkout.
    if name == "worktree" {
        return args.first().is_some_and(|word| word.text == "list");
    }
    matches!(name, "config" | "version")
        || matches!(
            name,
            "status"
                | "ls-files"
                | "ls-tree"
                | "log"
                | "show"
                | "diff"
                | "diff-files"
                | "diff-index"
                | "diff-tree"
                | "rev-parse"
                | "rev-list"
                | "cat-file"
                | "for-each-ref"
                | "show-ref"
                | "symbolic-ref"
                | "blame"
                | "grep"
                | "describe"
                | "shortlog"
                | "merge-base"
                | "name-rev"
                | "check-ignore"
                | "check-attr"
                | "ls-remote"
                | "add"
                | "hash-object"
                | "update-index"
                | "write-tree"
                | "commit-tree"
                | "read-tree"
                | "checkout-index"
        )
}

// ---------------------------------------------------------------------------------------
// Hook bypass

/// How a command spells its hook switch.
#[derive(Clone, Copy)]
enum VerifyOpt {
    /// Declared as `no-verify` (`-n, --no-verify` / `--verify`): set means skip.
    NoVerify,
    /// Declared as `verify` (`--[no-]verify`, git pull): unset means skip.
    Verify,
}

impl VerifyOpt {
    /// `Some(true)` when the option event skips hooks, `Some(false)` when it restores
    /// them, `None` when it is another option.
    fn skips(self, key: &str, unset: bool) -> Option<bool> {
        match (self, key) {
            (VerifyOpt::NoVerify, "no-verify") => Some(!unset),
            (VerifyOpt::Verify, "verify") => Some(unset),
            _ => None,
        }
    }
}

/// Refuses when the last `--verify`/`--no-verify` (in any spelling) skips the hooks, or
/// when an ambiguous abbreviation could be the skipping one (git rejects it anyway).
fn no_verify(name: &str, table: &[Opt], args: &[String], verify: VerifyOpt) -> Option<Refusal> {
    let parsed = options::parse(table, args, false);
    let mut skipping: Option<&str> = None;
    for event in &parsed.events {
        match event {
            Event::Opt { key, unset, token, .. } => {
                if let Some(skips) = verify.skips(key, *unset) {
                    skipping = skips.then_some(token.as_str());
                }
            }
            Event::Ambiguous { candidates, token } => {
                if candidates.iter().any(|(key, unset)| verify.skips(key, *unset) == Some(true)) {
                    return Some(no_verify_refusal(name, token, true));
                }
            }
            Event::Unknown => {}
        }
    }
    skipping.map(|token| no_verify_refusal(name, token, false))
}

fn no_verify_refusal(name: &str, token: &str, ambiguous: bool) -> Refusal {
    let (checks, verb) = match name {
        "commit" => ("pre-commit checks", "commit"),
        "merge" | "pull" => ("pre-merge-commit and commit-msg hooks", name),
        "am" => ("pre-applypatch and applypatch-msg hooks", "apply the patches"),
        "rebase" => ("pre-rebase hook", "rebase"),
        "push" => ("pre-push checks", "push"),
        _ => ("hooks", name),
    };
    let spelled = if ambiguous {
        format!("`{token}` is an abbreviation of --no-verify (among others); ")
    } else if token == "--no-verify" {
        String::new()
    } else {
        format!("`{token}` means --no-verify for git {name}: ")
    };
    Refusal {
        rule: "no-verify",
        what: format!("git {name} {token}"),
        why: format!("{spelled}it skips the repository's {checks}"),
        instead: format!("run the checks, fix what fails, and {verb} again without --no-verify"),
    }
}

// Option tables: `git <cmd> --help-all` of git 2.47, option column only.

/// Also where git's behaviour was checked by hand (git 2.47.3, a repository with a
/// pre-commit hook): `--no-ver` and `--no-v` are ambiguous (no-verbose, no-verify);
/// `--no-veri`, `--no-verif` skip the hook; `--ve` is ambiguous (verbose, verify);
/// `--no-no-verify` and `--no-no-verif` are `--verify`; `-Sn` signs with key "n";
/// `--no-verify=1` is an error ("takes no value").
const COMMIT: &[&str] = &[
    "-q, --[no-]quiet",
    "-v, --[no-]verbose",
    "-F, --[no-]file <file>",
    "--[no-]author <author>",
    "--[no-]date <date>",
    "-m, --[no-]message <message>",
    "-c, --[no-]reedit-message <commit>",
    "-C, --[no-]reuse-message <commit>",
    "--[no-]fixup [(amend|reword):]commit",
    "--[no-]squash <commit>",
    "--[no-]reset-author",
    "--trailer <trailer>",
    "-s, --[no-]signoff",
    "-t, --[no-]template <file>",
    "-e, --[no-]edit",
    "--[no-]cleanup <mode>",
    "--[no-]status",
    "-S, --[no-]gpg-sign[=<key-id>]",
    "-a, --[no-]all",
    "-i, --[no-]include",
    "--[no-]interactive",
    "-p, --[no-]patch",
    "-o, --[no-]only",
    "-n, --no-verify",
    "--verify",
    "--[no-]dry-run",
    "--[no-]short",
    "--[no-]branch",
    "--[no-]ahead-behind",
    "--[no-]porcelain",
    "--[no-]long",
    "-z, --[no-]null",
    "--[no-]amend",
    "--no-post-rewrite",
    "--post-rewrite",
    "-u, --[no-]untracked-files[=<mode>]",
    "--[no-]pathspec-from-file <file>",
    "--[no-]pathspec-file-nul",
    "--[no-]allow-empty",
    "--[no-]allow-empty-message",
];

/// `-n` is `--no-stat` here (`git merge -h`: "do not show a diffstat").
const MERGE: &[&str] = &[
    "-n",
    "--[no-]stat",
    "--[no-]summary",
    "--[no-]log[=<n>]",
    "--[no-]squash",
    "--[no-]commit",
    "-e, --[no-]edit",
    "--[no-]cleanup <mode>",
    "--[no-]ff",
    "--ff-only",
    "--[no-]rerere-autoupdate",
    "--[no-]verify-signatures",
    "-s, --[no-]strategy <strategy>",
    "-X, --[no-]strategy-option <option=value>",
    "-m, --[no-]message <message>",
    "-F, --file <path>",
    "--[no-]into-name <name>",
    "-v, --[no-]verbose",
    "-q, --[no-]quiet",
    "--[no-]abort",
    "--[no-]quit",
    "--[no-]continue",
    "--[no-]allow-unrelated-histories",
    "--[no-]progress",
    "-S, --[no-]gpg-sign[=<key-id>]",
    "--[no-]autostash",
    "--[no-]overwrite-ignore",
    "--[no-]signoff",
    "--no-verify",
    "--verify",
];

/// `-n` is `--no-stat`; `--[no-]verify` is declared as `verify` (passed on to merge).
const PULL: &[&str] = &[
    "-v, --[no-]verbose",
    "-q, --[no-]quiet",
    "--[no-]progress",
    "--[no-]recurse-submodules[=<on-demand>]",
    "-r, --[no-]rebase[=(false|true|merges|interactive)]",
    "-n",
    "--[no-]stat",
    "--[no-]summary",
    "--[no-]log[=<n>]",
    "--[no-]signoff[=...]",
    "--[no-]squash",
    "--[no-]commit",
    "--[no-]edit",
    "--[no-]cleanup <mode>",
    "--[no-]ff",
    "--ff-only",
    "--[no-]verify",
    "--[no-]verify-signatures",
    "--[no-]autostash",
    "-s, --[no-]strategy <strategy>",
    "-X, --[no-]strategy-option <option=value>",
    "-S, --[no-]gpg-sign[=<key-id>]",
    "--[no-]allow-unrelated-histories",
    "--[no-]all",
    "-a, --[no-]append",
    "--[no-]upload-pack <path>",
    "-f, --[no-]force",
    "-t, --[no-]tags",
    "-p, --[no-]prune",
    "-j, --[no-]jobs[=<n>]",
    "--[no-]dry-run",
    "-k, --[no-]keep",
    "--[no-]depth <depth>",
    "--[no-]shallow-since <time>",
    "--[no-]shallow-exclude <revision>",
    "--[no-]deepen <n>",
    "--unshallow",
    "--[no-]update-shallow",
    "--refmap <refmap>",
    "-o, --[no-]server-option <server-specific>",
    "-4, --[no-]ipv4",
    "-6, --[no-]ipv6",
    "--[no-]negotiation-tip <revision>",
    "--[no-]show-forced-updates",
    "--[no-]set-upstream",
];

/// `-n` is `--no-verify` here, as for commit (`git am -h`: "bypass pre-applypatch and
/// applypatch-msg hooks").
const AM: &[&str] = &[
    "-i, --[no-]interactive",
    "-n, --no-verify",
    "--verify",
    "-b, --[no-]binary",
    "-3, --[no-]3way",
    "-q, --[no-]quiet",
    "-s, --[no-]signoff",
    "-u, --[no-]utf8",
    "-k, --[no-]keep",
    "--[no-]keep-non-patch",
    "-m, --[no-]message-id",
    "--[no-]keep-cr",
    "-c, --[no-]scissors",
    "--quoted-cr <action>",
    "--[no-]whitespace <action>",
    "--[no-]ignore-space-change",
    "--[no-]ignore-whitespace",
    "--[no-]directory <root>",
    "--[no-]exclude <path>",
    "--[no-]include <path>",
    "-C <n>",
    "-p <num>",
    "--[no-]patch-format <format>",
    "--[no-]reject",
    "--[no-]resolvemsg ...",
    "--continue",
    "-r, --resolved",
    "--skip",
    "--abort",
    "--quit",
    "--show-current-patch[=(diff|raw)]",
    "--retry",
    "--allow-empty",
    "--[no-]committer-date-is-author-date",
    "--[no-]ignore-date",
    "--[no-]rerere-autoupdate",
    "-S, --[no-]gpg-sign[=<key-id>]",
    "--empty (stop|drop|keep)",
    "--[no-]rebasing",
];

/// `-n` is `--no-stat`; `--no-verify` skips the pre-rebase hook (git's help text says
/// "allow pre-rebase hook to run", a known wording slip).
const REBASE: &[&str] = &[
    "--[no-]onto <revision>",
    "--[no-]keep-base",
    "--no-verify",
    "--verify",
    "-q, --[no-]quiet",
    "-v, --[no-]verbose",
    "-n, --no-stat",
    "--stat",
    "--[no-]signoff",
    "--[no-]committer-date-is-author-date",
    "--[no-]reset-author-date",
    "--[no-]ignore-date",
    "-C <n>",
    "--[no-]ignore-whitespace",
    "--[no-]whitespace <action>",
    "-f, --[no-]force-rebase",
    "--no-ff",
    "--ff",
    "--continue",
    "--skip",
    "--abort",
    "--quit",
    "--edit-todo",
    "--show-current-patch",
    "--apply",
    "-m, --merge",
    "-i, --interactive",
    "-p, --[no-]preserve-merges",
    "--[no-]rerere-autoupdate",
    "--empty (drop|keep|stop)",
    "-k, --[no-]keep-empty",
    "--[no-]autosquash",
    "--[no-]update-refs",
    "-S, --[no-]gpg-sign[=<key-id>]",
    "--[no-]autostash",
    "-x, --[no-]exec <exec>",
    "--[no-]allow-empty-message",
    "-r, --[no-]rebase-merges[=<mode>]",
    "--[no-]fork-point",
    "-s, --[no-]strategy <strategy>",
    "-X, --[no-]strategy-option <option>",
    "--[no-]root",
    "--[no-]reschedule-failed-exec",
    "--[no-]reapply-cherry-picks",
];

// ---------------------------------------------------------------------------------------
// Push

/// `-n` is `--dry-run` here. Checked by hand (git 2.47.3): `--forc` and `--for` are
/// ambiguous (force, force-with-lease, force-if-includes), `--fo` too (… follow-tags),
/// `--no-v` is ambiguous (no-verbose, no-verify), `--no-verif` skips the pre-push hook.
const PUSH: &[&str] = &[
    "-v, --[no-]verbose",
    "-q, --[no-]quiet",
    "--[no-]repo <repository>",
    "--[no-]all",
    "--[no-]branches",
    "--[no-]mirror",
    "-d, --[no-]delete",
    "--[no-]tags",
    "-n, --[no-]dry-run",
    "--[no-]porcelain",
    "-f, --[no-]force",
    "--[no-]force-with-lease[=<refname>:<expect>]",
    "--[no-]force-if-includes",
    "--[no-]recurse-submodules (check|on-demand|no)",
    "--[no-]thin",
    "--[no-]receive-pack <receive-pack>",
    "--[no-]exec <receive-pack>",
    "-u, --[no-]set-upstream",
    "--[no-]progress",
    "--[no-]prune",
    "--no-verify",
    "--verify",
    "--[no-]follow-tags",
    "--[no-]signed[=(yes|no|if-asked)]",
    "--[no-]atomic",
    "-o, --[no-]push-option <server-specific>",
    "-4, --ipv4",
    "-6, --ipv6",
];

const FORCE_INSTEAD: &str = "integrate the remote changes first (`git pull --rebase`) and push without force, or push a new branch and open a pull request; if the remote history really must be rewritten, ask the user";
const DELETE_INSTEAD: &str = "leave the remote branch in place and ask the user to delete it (or open a pull request)";

/// `git push`: hook bypass, forced updates (flags, `+` refspecs, `+` push refspecs in the
/// remote's config), mirror pushes (flag or `remote.<name>.mirror`), and remote
/// deletions (`--delete`, `:branch`, `--prune`) unless branch deletion is allowed.
/// A dry run is judged like the real push: the guard does not second-guess `-n`.
fn push(args: &[String], ctx: &Ctx<'_>) -> Option<Refusal> {
    let table = options::table(PUSH);
    if let Some(refusal) = no_verify("push", &table, args, VerifyOpt::NoVerify) {
        return Some(refusal);
    }
    let parsed = options::parse(&table, args, false);
    let mut force: Option<&str> = None;
    let mut mirror: Option<&str> = None;
    let mut delete: Option<&str> = None;
    let mut prune: Option<&str> = None;
    let mut all = false;
    let mut tags = false;
    let mut repo_option: Option<String> = None;
    let mut lease_tokens: Option<&str> = None;
    let mut if_includes: Option<&str> = None;
    for event in &parsed.events {
        match event {
            Event::Opt { key, unset, value, token } => {
                let set = (!*unset).then_some(token.as_str());
                match *key {
                    "force" => force = set,
                    "force-with-lease" => lease_tokens = set,
                    "force-if-includes" => if_includes = set,
                    "mirror" => mirror = set,
                    "delete" => delete = set,
                    "prune" => prune = set,
                    "all" | "branches" => all = !*unset,
                    "tags" => tags = !*unset,
                    "repo" => repo_option = if *unset { None } else { value.clone() },
                    _ => {}
                }
            }
            Event::Ambiguous { candidates, token } => {
                let dangerous = candidates.iter().find(|(key, unset)| {
                    !unset && matches!(*key, "force" | "force-with-lease" | "force-if-includes" | "mirror")
                });
                if let Some((key, _)) = dangerous {
                    return Some(Refusal {
                        rule: if *key == "mirror" { "mirror-push" } else { "force-push" },
                        what: format!("git push {token}"),
                        why: format!(
                            "`{token}` abbreviates --{key} (among others), which overwrites the remote history"
                        ),
                        instead: FORCE_INSTEAD.to_owned(),
                    });
                }
            }
            Event::Unknown => {}
        }
    }
    if let Some(token) = force.or(lease_tokens).or(if_includes) {
        return Some(Refusal {
            rule: "force-push",
            what: format!("git push {token}"),
            why: "it force-updates the remote branch, overwriting history others may have".to_owned(),
            instead: FORCE_INSTEAD.to_owned(),
        });
    }
    if let Some(token) = mirror {
        return Some(mirror_refusal(format!("git push {token}"), "a mirror push".to_owned()));
    }
    let (repo, refspecs) = match parsed.positionals.split_first() {
        Some((repo, refspecs)) => (Some(repo.clone()), refspecs),
        None => (repo_option, &[][..]),
    };
    let repo_shown = repo.clone().map(|repo| format!(" {repo}")).unwrap_or_default();
    for refspec in refspecs {
        if refspec.starts_with('+') {
            return Some(Refusal {
                rule: "force-push",
                what: format!("git push{repo_shown} {refspec}"),
                why: format!("the leading `+` in `{refspec}` force-updates the remote branch, overwriting its history"),
                instead: FORCE_INSTEAD.to_owned(),
            });
        }
    }
    if !ctx.options.allow_branch_deletion {
        if let (Some(token), Some(refspec)) = (delete, refspecs.first()) {
            return Some(delete_refusal(
                format!("git push {token}{repo_shown} {refspec}"),
                "it deletes branches on the remote".to_owned(),
            ));
        }
        if let Some(refspec) = refspecs.iter().find(|refspec| is_deletion(refspec)) {
            return Some(delete_refusal(
                format!("git push{repo_shown} {refspec}"),
                format!("`{refspec}` has no source, which deletes `{}` on the remote", &refspec[1..]),
            ));
        }
        if let Some(token) = prune {
            return Some(delete_refusal(
                format!("git push {token}"),
                "it deletes remote branches that have no local counterpart".to_owned(),
            ));
        }
    }
    let remotes = match &repo {
        Some(repo) => vec![repo.clone()],
        None => default_push_remotes(ctx.config),
    };
    for remote in &remotes {
        if ctx
            .config
            .get_all(&format!("remote.{remote}.mirror"))
            .last()
            .is_some_and(|value| config_keys::is_true(value))
        {
            return Some(mirror_refusal(
                format!("git push{repo_shown}"),
                format!("remote.{remote}.mirror is set, so this push is a mirror push"),
            ));
        }
    }
    // With no refspec on the command line (and no --all/--mirror/--tags), git pushes
    // what `remote.<name>.push` says.
    if refspecs.is_empty() && !all && !tags {
        for remote in &remotes {
            for refspec in ctx.config.get_all(&format!("remote.{remote}.push")) {
                if refspec.starts_with('+') {
                    return Some(Refusal {
                        rule: "force-push",
                        what: format!("git push{repo_shown}"),
                        why: format!(
                            "remote.{remote}.push is `{refspec}`, whose leading `+` force-updates the remote branches"
                        ),
                        instead: format!(
                            "{FORCE_INSTEAD}; to push without the configured refspec, name the branch: `git push {remote} <branch>`"
                        ),
                    });
                }
                if is_deletion(&refspec) && !ctx.options.allow_branch_deletion {
                    return Some(delete_refusal(
                        format!("git push{repo_shown}"),
                        format!("remote.{remote}.push is `{refspec}`, which deletes a remote branch"),
                    ));
                }
            }
        }
    }
    None
}

/// `:branch` deletes; a lone `:` is "matching branches".
fn is_deletion(refspec: &str) -> bool {
    // `:dst`, `+:dst`, and an all-zero object name as the source (`0000…:dst`).
    let refspec = refspec.strip_prefix('+').unwrap_or(refspec);
    let Some((src, dst)) = refspec.split_once(':') else { return false };
    !dst.is_empty() && (src.is_empty() || (src.len() >= 4 && src.bytes().all(|b| b == b'0')))
}

fn mirror_refusal(what: String, reason: String) -> Refusal {
    Refusal {
        rule: "mirror-push",
        what,
        why: format!("{reason}: it force-updates and deletes remote branches to match this repository"),
        instead: "push the branch you changed by name: `git push origin <branch>`".to_owned(),
    }
}

fn delete_refusal(what: String, why: String) -> Refusal {
    Refusal { rule: "branch-delete", what, why, instead: DELETE_INSTEAD.to_owned() }
}

/// The remotes a `git push` without a repository argument can go to, for some current
/// branch (the guard does not know which one is checked out): every
/// `branch.<b>.pushRemote`, `remote.pushDefault` and `branch.<b>.remote`, `origin`, and
/// the only configured remote when there is exactly one.
fn default_push_remotes(config: &dyn ConfigView) -> Vec<String> {
    let mut remotes = vec!["origin".to_owned()];
    remotes.extend(config.get_all("remote.pushdefault"));
    let mut configured: Vec<String> = Vec::new();
    for key in config.keys() {
        let (section, subsection, variable) = config_keys::split_key(&key);
        match (section, subsection, variable) {
            ("branch", Some(_), "pushremote" | "remote") => remotes.extend(config.get_all(&key)),
            ("remote", Some(name), _) if !configured.iter().any(|known| known == name) => {
                configured.push(name.to_owned())
            }
            _ => {}
        }
    }
    if let [only] = configured.as_slice() {
        remotes.push(only.clone());
    }
    remotes.sort();
    remotes.dedup();
    remotes
}

// ---------------------------------------------------------------------------------------
// git config

const CONFIG_LOCATION: &[&str] = &[
    "--[no-]global",
    "--[no-]system",
    "--[no-]local",
    "--[no-]worktree",
    "-f, --[no-]file <file>",
    "--[no-]blob <blob-id>",
];

const CONFIG_TYPE: &[&str] =
    &["-t, --[no-]type <type>", "--bool", "--int", "--bool-or-int", "--bool-or-str", "--path", "--expiry-date"];

const CONFIG_DISPLAY: &[&str] =
    &["-z, --[no-]null", "--[no-]name-only", "--[no-]show-origin", "--[no-]show-scope", "--[no-]show-names"];

/// The old, action-option syntax (`git config --unset key`): location, these actions,
/// display, type, and these others.
const CONFIG_ACTIONS: &[&str] = &[
    "--get",
    "--get-all",
    "--get-regexp",
    "--get-urlmatch",
    "--replace-all",
    "--add",
    "--unset",
    "--unset-all",
    "--rename-section",
    "--remove-section",
    "-l, --list",
    "-e, --edit",
    "--get-color",
    "--get-colorbool",
];

const CONFIG_OTHER: &[&str] =
    &["--[no-]default <value>", "--[no-]comment <value>", "--[no-]fixed-value", "--[no-]includes"];

/// `git config set`: location, type, then these.
const CONFIG_SET: &[&str] =
    &["--[no-]all", "--[no-]value <pattern>", "--[no-]fixed-value", "--[no-]comment <value>", "--[no-]append"];

/// `git config unset`: location, then these.
const CONFIG_UNSET: &[&str] = &["--[no-]all", "--[no-]value <pattern>", "--[no-]fixed-value"];

/// `git config`: refuses writes (set, add, replace, unset, section rename/removal) of the
/// protected keys, and `--edit` (an editor can change anything). Reads pass.
///
/// Checked by hand (git 2.47.3): the new subcommands (`set`, `unset`, …) are recognised
/// only as the first argument (`git config --global set a.b c` is the old syntax with
/// the key `set`, an error), and every form stops option parsing at the first operand
/// (`git config a.b --add` sets a.b to "--add").
fn config(args: &[String], current: &dyn ConfigView) -> Option<Refusal> {
    if let Some(unchanged) = unchanged_hooks_path(args, current) {
        return Some(unchanged);
    }
    let subcommand = args.first().map(String::as_str);
    if let Some(sub @ ("set" | "unset" | "rename-section" | "remove-section" | "edit" | "list" | "get")) = subcommand {
        let table = match sub {
            "set" => options::table(&[CONFIG_LOCATION, CONFIG_TYPE, CONFIG_SET].concat()),
            "unset" => options::table(&[CONFIG_LOCATION, CONFIG_UNSET].concat()),
            _ => options::table(CONFIG_LOCATION),
        };
        let parsed = options::parse(&table, &args[1..], true);
        let operands = &parsed.positionals;
        return match sub {
            "set" => operands.first().and_then(|key| config_key_write(sub, key, operands.get(1))),
            "unset" => operands.first().and_then(|key| config_key_write(sub, key, None)),
            "rename-section" | "remove-section" => config_section_write(sub, operands),
            "edit" => Some(config_edit_refusal("git config edit")),
            _ => None,
        };
    }
    let table = options::table(&[CONFIG_LOCATION, CONFIG_ACTIONS, CONFIG_DISPLAY, CONFIG_TYPE, CONFIG_OTHER].concat());
    let parsed = options::parse(&table, args, true);
    let operands = &parsed.positionals;
    let mut writes_key: Option<&str> = None;
    let mut has_action = false;
    for event in &parsed.events {
        let Event::Opt { key, token, .. } = event else {
            continue;
        };
        match *key {
            "edit" => return Some(config_edit_refusal(&format!("git config {token}"))),
            "rename-section" | "remove-section" => return config_section_write(&format!("--{key}"), operands),
            "replace-all" | "add" | "unset" | "unset-all" => {
                has_action = true;
                writes_key = Some(key);
            }
            "get" | "get-all" | "get-regexp" | "get-urlmatch" | "list" | "get-color" | "get-colorbool" => {
                has_action = true
            }
            _ => {}
        }
    }
    match (writes_key, has_action, operands.first()) {
        (Some(action @ ("add" | "replace-all")), _, Some(key)) => {
            config_key_write(&format!("--{action}"), key, operands.get(1))
        }
        (Some(action), _, Some(key)) => config_key_write(&format!("--{action}"), key, None),
        // No action: `git config key value [value-pattern]` sets, `git config key` reads.
        (None, false, Some(key)) if operands.len() >= 2 => config_key_write("", key, operands.get(1)),
        _ => None,
    }
}

/// `git config [set] core.hooksPath VALUE` (no options) where VALUE is what git reads
/// already: husky's `prepare` does that on every `npm install`. Nothing would change, so
/// the guard answers for git (see [`crate::UNCHANGED`]).
fn unchanged_hooks_path(args: &[String], current: &dyn ConfigView) -> Option<Refusal> {
    let operands = match args {
        [sub, rest @ ..] if sub == "set" => rest,
        _ => args,
    };
    let [key, value] = operands else { return None };
    if key.starts_with('-') || config_keys::canonical_key(key) != "core.hookspath" {
        return None;
    }
    (current.get_all("core.hookspath").last() == Some(value)).then(|| Refusal {
        rule: crate::UNCHANGED,
        what: format!("git config {}", args.join(" ")),
        why: "core.hooksPath has that value already".to_owned(),
        instead: String::new(),
    })
}

/// A write of `key` (to `value`, when it sets one). Setting `core.fsmonitor` off (empty
/// or false) runs nothing, whichever file it goes to: OpenCode does it in its own
/// snapshot repository at every start.
fn config_key_write(action: &str, key: &str, value: Option<&String>) -> Option<Refusal> {
    let canonical = config_keys::canonical_key(key);
    let why = config_keys::protected_key(&canonical)?;
    let entry = config_keys::Entry { key: canonical.clone(), value: value.cloned() };
    if canonical == "core.fsmonitor" && value.is_some() && config_keys::only_disables(&entry, false) {
        return None;
    }
    let action = if action.is_empty() { String::new() } else { format!("{action} ") };
    Some(Refusal {
        rule: "config-write",
        what: format!("git config {action}{key}"),
        why: why.to_owned(),
        instead: format!("leave {key} as it is; if it really must change, ask the user"),
    })
}

fn config_section_write(action: &str, operands: &[String]) -> Option<Refusal> {
    let section = operands.iter().take(2).find(|section| config_keys::protected_section(section).is_some())?;
    let why = config_keys::protected_section(section)?;
    Some(Refusal {
        rule: "config-write",
        what: format!("git config {action} {}", operands.join(" ")),
        why: format!("{why}, which an agent may not rename or remove"),
        instead: "leave that section as it is; if it really must change, ask the user".to_owned(),
    })
}

fn config_edit_refusal(what: &str) -> Refusal {
    Refusal {
        rule: "config-write",
        what: what.to_owned(),
        why: "an editor can change any setting, including the hook settings".to_owned(),
        instead: "set the one key you need with `git config <key> <value>`".to_owned(),
    }
}

// ---------------------------------------------------------------------------------------
// Plumbing

const PLUMBING_INSTEAD: &str =
    "create commits with `git commit`, which runs the repository's checks; if you really need this plumbing command, ask the user";

fn whole_command_why(name: &str) -> &'static str {
    match name {
        "fast-import" => "it writes commits and branches directly, without the repository's checks",
        "filter-branch" | "filter-repo" => "it rewrites commits and branches without the repository's checks",
        _ => "it creates commits without the repository's checks",
    }
}

fn plumbing_commit(name: &str, options: &GuardOptions, why: &str) -> Option<Refusal> {
    if options.allow_plumbing_commits {
        return None;
    }
    Some(Refusal {
        rule: "plumbing-commit",
        what: format!("git {name}"),
        why: why.to_owned(),
        instead: PLUMBING_INSTEAD.to_owned(),
    })
}

const UPDATE_REF: &[&str] =
    &["-m <reason>", "-d", "--no-deref", "--deref", "-z", "--[no-]stdin", "--[no-]create-reflog"];

/// `git update-ref`: moving a branch (`refs/heads/…`, or `HEAD` through its symbolic
/// link) is commit-creating plumbing; deleting one is branch deletion; updates read from
/// `--stdin` cannot be judged and are refused. Other refs (tags, notes, remote-tracking
/// refs, `--no-deref` on a non-branch) pass. A top-level name other than `HEAD` (say
/// `ORIG_HEAD`) could be a symbolic ref to a branch, so it passes only with `--no-deref`.
fn update_ref(args: &[String], options: &GuardOptions) -> Option<Refusal> {
    let parsed = options::parse(&options::table(UPDATE_REF), args, false);
    let mut delete = false;
    let mut no_deref = false;
    let mut stdin = false;
    for event in &parsed.events {
        if let Event::Opt { key, unset, .. } = event {
            match *key {
                "-d" => delete = true,
                "no-deref" => no_deref = !*unset,
                "stdin" => stdin = !*unset,
                _ => {}
            }
        }
    }
    if stdin {
        return plumbing_commit(
            "update-ref --stdin",
            options,
            "it applies ref updates read from its input, which the guard cannot check",
        );
    }
    let refname = parsed.positionals.first()?;
    let moves_branch = if refname.starts_with("refs/heads/") {
        true
    } else if no_deref {
        false
    } else {
        // Through a symbolic ref: HEAD is the current branch; other top-level names
        // could point anywhere; refs/tags, refs/remotes, refs/notes… are not branches.
        !refname.starts_with("refs/")
    };
    if !moves_branch {
        return None;
    }
    if delete {
        if options.allow_branch_deletion {
            return None;
        }
        return Some(delete_refusal(
            format!("git update-ref -d {refname}"),
            format!("it deletes the branch `{refname}` points to, bypassing `git branch`"),
        ));
    }
    plumbing_commit(
        &format!("update-ref {refname}"),
        options,
        &format!("it moves the branch `{refname}` directly, without the checks a commit runs"),
    )
}

const HASH_OBJECT: &[&str] = &[
    "-t <type>",
    "-w",
    "--[no-]stdin",
    "--[no-]stdin-paths",
    "--no-filters",
    "--filters",
    "--[no-]literally",
    "--[no-]path <file>",
];

/// `git hash-object -w -t commit` writes a commit object, like `commit-tree`; other
/// objects (blobs, trees, tags) pass.
fn hash_object(args: &[String], options: &GuardOptions) -> Option<Refusal> {
    let parsed = options::parse(&options::table(HASH_OBJECT), args, false);
    let mut write = false;
    let mut kind = String::from("blob");
    for event in &parsed.events {
        if let Event::Opt { key, value, .. } = event {
            match *key {
                "-w" => write = true,
                "-t" => kind = value.clone().unwrap_or_default(),
                _ => {}
            }
        }
    }
    if !(write && kind == "commit") {
        return None;
    }
    plumbing_commit(
        "hash-object -w -t commit",
        options,
        "it writes a commit object directly, without the repository's checks",
    )
}

const REPLACE: &[&str] = &[
    "-l, --list",
    "-d, --delete",
    "-e, --edit",
    "-g, --graft",
    "--convert-graft-file",
    "-f, --[no-]force",
    "--[no-]raw",
    "--[no-]format <format>",
];

/// `git replace`: listing (`-l`, or no operands) and deleting replacements pass; creating
/// one (`<object> <replacement>`, `--edit`, `--graft`, `--convert-graft-file`) swaps
/// history without the repository's checks.
fn replace(args: &[String], options: &GuardOptions) -> Option<Refusal> {
    let parsed = options::parse(&options::table(REPLACE), args, false);
    let mut creates = false;
    let mut lists_or_deletes = false;
    for event in &parsed.events {
        if let Event::Opt { key, .. } = event {
            match *key {
                "edit" | "graft" | "convert-graft-file" => creates = true,
                "list" | "delete" => lists_or_deletes = true,
                _ => {}
            }
        }
    }
    if !creates && (lists_or_deletes || parsed.positionals.is_empty()) {
        return None;
    }
    plumbing_commit(
        "replace",
        options,
        "it replaces objects in history, so commits appear that never ran the repository's checks",
    )
}

#[cfg(test)]
mod tests {
    //! The option tables against the real git: with git 2.47 on PATH, every table must
    //! equal the option column of `git <cmd> --help-all`.

    use std::process::Command;

    use super::*;

    /// The option column of git's usage text: the part of each option line before the
    /// description, which starts at column 26 or on the next line.
    fn heads(usage: &str) -> Vec<String> {
        usage
            .lines()
            .filter(|line| line.starts_with("    -"))
            .map(|line| {
                let head = if line.len() > 26 && line.as_bytes()[25] == b' ' { &line[4..25] } else { &line[4..] };
                head.trim_end().to_owned()
            })
            .collect()
    }

    fn git_usage(args: &[&str]) -> Option<String> {
        let version = Command::new("git").arg("--version").output().ok()?;
        if !String::from_utf8_lossy(&version.stdout).starts_with("git version 2.47") {
            return None;
        }
        // Some commands want a repository before they print usage: give them their own.
        let repo = tempfile::tempdir().ok()?;
        Command::new("git").args(["init", "-q"]).current_dir(repo.path()).output().ok()?;
        // Usage goes to stdout for --help-all and to stderr after an error.
        let output = Command::new("git").args(args).current_dir(repo.path()).output().ok()?;
        let mut usage = String::from_utf8_lossy(&output.stdout).into_owned();
        usage.push_str(&String::from_utf8_lossy(&output.stderr));
        Some(usage)
    }

    #[test]
    fn option_tables_match_git_help_all() {
        let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
            (vec!["commit", "--help-all"], COMMIT.to_vec()),
            (vec!["merge", "--help-all"], MERGE.to_vec()),
            (vec!["pull", "--help-all"], PULL.to_vec()),
            (vec!["am", "--help-all"], AM.to_vec()),
            (vec!["rebase", "--help-all"], REBASE.to_vec()),
            (vec!["push", "--help-all"], PUSH.to_vec()),
            (vec!["update-ref", "--help-all"], UPDATE_REF.to_vec()),
            (vec!["hash-object", "--help-all"], HASH_OBJECT.to_vec()),
            (vec!["replace", "--help-all"], REPLACE.to_vec()),
            (vec!["config", "set", "--help-all"], [CONFIG_LOCATION, CONFIG_TYPE, CONFIG_SET].concat()),
            (vec!["config", "unset", "--help-all"], [CONFIG_LOCATION, CONFIG_UNSET].concat()),
            (
                // The action syntax prints its table after an unknown option.
                vec!["config", "--unknown-option"],
                [CONFIG_LOCATION, CONFIG_ACTIONS, CONFIG_DISPLAY, CONFIG_TYPE, CONFIG_OTHER].concat(),
            ),
        ];
        for (args, table) in cases {
            let Some(usage) = git_usage(&args) else {
                println!("skipped: git 2.47 is not on PATH");
                return;
            };
            assert_eq!(heads(&usage), table, "git {}", args.join(" "));
        }
    }

    #[test]
    fn every_table_line_parses() {
        for table in [
            COMMIT,
            MERGE,
            PULL,
            AM,
            REBASE,
            PUSH,
            UPDATE_REF,
            HASH_OBJECT,
            REPLACE,
            CONFIG_LOCATION,
            CONFIG_TYPE,
            CONFIG_DISPLAY,
            CONFIG_ACTIONS,
            CONFIG_OTHER,
            CONFIG_SET,
            CONFIG_UNSET,
        ] {
            let opts = options::table(table);
            assert!(!opts.is_empty());
        }
    }
}
