//! The decision on a push request, as a value: from the request and the facts the host
//! gathered, either the exact git command the host runs or a refusal. Nothing here
//! touches the filesystem or runs anything.
//!
//! Only a small grammar of `git push` is accepted, each option spelled out: the host
//! runs this git with the user's credentials, so an option that names a program
//! (`--receive-pack`, `--exec`), another repository (`--repo`, a URL or path as the
//! remote) or a rewrite (`--force`, `+refspec`, `--mirror`, `--delete`, `--prune`) is
//! refused, as is anything unknown.

use std::path::{Path, PathBuf};

/// What the host knows when a request comes in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushFacts {
    /// The project's work tree, where the host's git runs.
    pub project_root: PathBuf,
    /// The project repository's common directory at the start.
    pub common_dir: PathBuf,
    /// Where the request says git started.
    pub request_dir: PathBuf,
    /// The repository git would find from there (`None`: none, or it is not in the
    /// project): see [`request_repository`].
    pub request_common_dir: Option<PathBuf>,
    /// The remotes configured in the repository (`.git/config` is read-only inside).
    pub remotes: Vec<String>,
    pub allow_branch_deletion: bool,
    /// Repository files that decide what git reads and that differ from the start
    /// (`shallow`, `objects/info/alternates`).
    pub changed_since_start: Vec<String>,
    /// The directory holding the host's pre-push hook.
    pub hooks_dir: PathBuf,
}

/// Why a push is not carried out, and what to do instead (printed as `agent-sandbox:
/// push refused: …`).
pub use util::refusal::{refuse, Refusal};

/// Options taken as they are.
const FLAGS: &[&str] = &[
    "-q",
    "--quiet",
    "-v",
    "--verbose",
    "--progress",
    "--no-progress",
    "-n",
    "--dry-run",
    "--porcelain",
    "--atomic",
    "--no-atomic",
    "--all",
    "--branches",
    "--tags",
    "--follow-tags",
    "--no-follow-tags",
    "--thin",
    "--no-thin",
];
const UPSTREAM_NOTE: &str = "agent-sandbox: note: pushed by agent-sandbox, not by this git, so the upstream is not \
                             recorded (.git/config stays as the user set it): push with an explicit \
                             `git push origin <branch>`";
/// Letters that may be bundled (`-uq`).
const SHORT: &str = "uqvn";

/// `-u`: accepted, but the host does not record the upstream (`.git/config` is the
/// user's; the session's exit check would restore it anyway).
const SET_UPSTREAM: &[&str] = &["-u", "--set-upstream"];

/// What the host runs for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushCommand {
    /// git's arguments, run in [`PushFacts::project_root`].
    pub argv: Vec<String>,
    /// Said to the agent before the push.
    pub notes: Vec<String>,
    /// The remote named (`None`: git chooses it from the configuration).
    pub remote: Option<String>,
}

/// The git command line the host runs for `args` (the arguments after `push`).
pub fn plan(args: &[String], facts: &PushFacts) -> Result<PushCommand, Refusal> {
    match &facts.request_common_dir {
        Some(dir) if *dir == facts.common_dir => {}
        _ => {
            return Err(refuse(
                format!(
                    "only the project's own repository is pushed from the host, and this push comes from {}",
                    facts.request_dir.display()
                ),
                format!("push from the project ({}) itself", facts.project_root.display()),
            ));
        }
    }
    if let Some(file) = facts.changed_since_start.first() {
        return Err(refuse(
            format!(
                "{file} changed since the sandbox started: it changes which objects git sees (a shallow history hides \
                 commits, alternates borrow objects from elsewhere), so nothing it pushes could be checked"
            ),
            format!("restore {file} as it was (the user can remove it outside the sandbox), then push again"),
        ));
    }
    let mut options: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut positional: Vec<&str> = Vec::new();
    let mut iter = args.iter();
    let mut options_done = false;
    while let Some(arg) = iter.next() {
        let arg = arg.as_str();
        if options_done || !arg.starts_with('-') || arg == "-" {
            positional.push(arg);
        } else if arg == "--" {
            options_done = true;
        } else if FLAGS.contains(&arg) {
            options.push(arg.to_owned());
        } else if SET_UPSTREAM.contains(&arg) {
            notes.push(UPSTREAM_NOTE.to_owned());
        } else if arg == "-o" || arg == "--push-option" {
            let value = iter.next().ok_or_else(|| refuse(format!("{arg} needs a value"), "give the push option"))?;
            options.push(format!("--push-option={value}"));
        } else if let Some(value) = arg.strip_prefix("--push-option=").or_else(|| arg.strip_prefix("-o")) {
            options.push(format!("--push-option={value}"));
        } else if arg.len() > 2 && !arg.starts_with("--") && arg[1..].chars().all(|c| SHORT.contains(c)) {
            for letter in arg[1..].chars() {
                match letter {
                    'u' => notes.push(UPSTREAM_NOTE.to_owned()),
                    _ => options.push(format!("-{letter}")),
                }
            }
        } else {
            return Err(refuse(
                format!("`git push {arg}` is not carried out from the host (it could rewrite or delete remote history, or run a program there)"),
                "push with plain options (`git push [-u] [--tags] <remote> <branch>…`)",
            ));
        }
    }
    if let Some(remote) = positional.first() {
        if !facts.remotes.iter().any(|name| name == remote) {
            let known = if facts.remotes.is_empty() { "none".to_owned() } else { facts.remotes.join(", ") };
            return Err(refuse(
                format!("`{remote}` is not one of the repository's configured remotes ({known}), and the host pushes only to those"),
                "push to a configured remote by its name (the user adds remotes outside the sandbox)",
            ));
        }
    }
    for refspec in positional.iter().skip(1) {
        if refspec.starts_with('+') {
            return Err(refuse(
                format!("`{refspec}` forces the update: it would rewrite remote history"),
                "integrate the remote changes (`git pull --rebase`) and push again, without `+`",
            ));
        }
        if refspec.starts_with(':') && *refspec != ":" && !facts.allow_branch_deletion {
            return Err(refuse(
                format!("`{refspec}` deletes {} on the remote", &refspec[1..]),
                "leave remote branches alone (or ask the user to allow git.allowBranchDeletion)",
            ));
        }
    }
    let mut command = vec![
        "-c".to_owned(),
        format!("core.hooksPath={}", facts.hooks_dir.display()),
        // The service turns grafts off with GIT_GRAFT_FILE=/dev/null, which git advises
        // against on every run.
        "-c".to_owned(),
        "advice.graftFileDeprecated=false".to_owned(),
        // Submodules' pushes would read `.gitmodules`, the agent's.
        "-c".to_owned(),
        "push.recurseSubmodules=no".to_owned(),
        "push".to_owned(),
    ];
    command.extend(options);
    if !positional.is_empty() {
        command.push("--".to_owned());
        command.extend(positional.iter().map(|arg| (*arg).to_owned()));
    }
    notes.dedup();
    Ok(PushCommand { argv: command, notes, remote: positional.first().map(|remote| (*remote).to_owned()) })
}

/// The repository git would find starting in `dir`, told without reading anything the
/// agent wrote (a `.git` it plants could be a FIFO): the project's when `dir` is in the
/// project and no directory between them has a `.git` entry; else `None`. `has_git`
/// answers for one directory (an lstat on the host).
pub fn request_repository(
    dir: &Path,
    project_root: &Path,
    common_dir: &Path,
    has_git: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let rel = dir.strip_prefix(project_root).ok()?;
    if rel.components().any(|part| !matches!(part, std::path::Component::Normal(_))) {
        return None;
    }
    let mut below = project_root.to_path_buf();
    for part in rel.components() {
        below.push(part);
        if has_git(&below) {
            return None;
        }
    }
    Some(common_dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> PushFacts {
        PushFacts {
            project_root: "/p".into(),
            common_dir: "/p/.git".into(),
            request_dir: "/p/src".into(),
            request_common_dir: Some("/p/.git".into()),
            remotes: vec!["origin".into(), "upstream".into()],
            allow_branch_deletion: false,
            changed_since_start: Vec::new(),
            hooks_dir: "/state/push/1/hooks".into(),
        }
    }

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn accepted_pushes_become_whole_command_lines() {
        let ok = |line: &str| plan(&args(line), &facts()).map(|command| command.argv.join(" "));
        let hooks = "-c core.hooksPath=/state/push/1/hooks -c advice.graftFileDeprecated=false \
                     -c push.recurseSubmodules=no push";
        assert_eq!(ok(""), Ok(hooks.to_owned()));
        assert_eq!(ok("origin main"), Ok(format!("{hooks} -- origin main")));
        assert_eq!(ok("-uq origin HEAD:refs/heads/topic"), Ok(format!("{hooks} -q -- origin HEAD:refs/heads/topic")));
        let upstream = plan(&args("-u --set-upstream origin x"), &facts()).expect("plan");
        assert_eq!(upstream.notes, [UPSTREAM_NOTE]);
        assert!(plan(&args("origin x"), &facts()).expect("plan").notes.is_empty());
        assert_eq!(plan(&args("-q upstream x"), &facts()).expect("plan").remote.as_deref(), Some("upstream"));
        assert_eq!(plan(&args("--tags"), &facts()).expect("plan").remote, None);
        assert_eq!(ok("--tags --all upstream"), Ok(format!("{hooks} --tags --all -- upstream")));
        assert_eq!(ok("-o ci.skip origin v1"), Ok(format!("{hooks} --push-option=ci.skip -- origin v1")));
        assert_eq!(ok("origin -- -weird"), Ok(format!("{hooks} -- origin -weird")));
        assert_eq!(ok("--push-option=x origin :"), Ok(format!("{hooks} --push-option=x -- origin :")));
    }

    #[test]
    fn the_request_directory_must_be_the_projects_own_repository() {
        let find = |dir: &str, planted: &[&str]| {
            request_repository(Path::new(dir), Path::new("/p"), Path::new("/p/.git"), |dir: &Path| {
                planted.iter().any(|git| Path::new(git) == dir)
            })
        };
        assert_eq!(find("/p", &[]), Some("/p/.git".into()));
        assert_eq!(find("/p/src/deep", &["/p/other"]), Some("/p/.git".into()));
        assert_eq!(find("/p/vendor/x/src", &["/p/vendor/x"]), None, "a nested repository");
        assert_eq!(find("/p/src", &["/p/src"]), None);
        assert_eq!(find("/tmp/s", &[]), None, "outside the project");
        assert_eq!(find("/p/../tmp/s", &[]), None, "no way out through ..");
        assert_eq!(find("/pp", &[]), None);
    }

    #[test]
    fn refusals_name_the_reason() {
        let why = |line: &str, facts: &PushFacts| plan(&args(line), facts).expect_err(line).why;
        let base = facts();
        for line in [
            "--force origin main",
            "-f origin main",
            "--force-with-lease origin main",
            "--mirror origin",
            "--delete origin x",
            "-d origin x",
            "--prune origin",
            "--receive-pack=/tmp/x origin main",
            "--exec=/tmp/x origin main",
            "--repo=/tmp/r main",
            "--no-verify origin main",
            "-uf origin main",
            "--signed origin main",
        ] {
            assert!(why(line, &base).contains("not carried out from the host"), "{line}");
        }
        assert!(why("/tmp/other.git main", &base).contains("not one of the repository's configured remotes"));
        assert!(why("ext::sh origin", &base).contains("configured remotes (origin, upstream)"));
        assert!(why("origin +main", &base).contains("forces the update"));
        assert!(why("origin :feature", &base).contains("deletes feature"));
        let deleting = PushFacts { allow_branch_deletion: true, ..facts() };
        assert!(plan(&args("origin :feature"), &deleting).is_ok());
        let elsewhere = PushFacts {
            request_dir: "/p/vendor/x".into(),
            request_common_dir: Some("/p/vendor/x/.git".into()),
            ..facts()
        };
        assert!(why("origin main", &elsewhere).contains("this push comes from /p/vendor/x"));
        let outside = PushFacts { request_dir: "/tmp/s".into(), request_common_dir: None, ..facts() };
        assert!(why("origin main", &outside).contains("comes from /tmp/s"));
        let shallow = PushFacts { changed_since_start: vec![".git/shallow".into()], ..facts() };
        assert!(why("origin main", &shallow).contains(".git/shallow changed since the sandbox started"));
    }
}
