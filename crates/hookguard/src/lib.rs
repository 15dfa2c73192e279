//! The hook guard: what the `pre-commit` and `pre-push` shims run
//! (`agent-sandbox hook <name> ARGS…`), installed by `agent-sandbox hooks install`.
//!
//! Inside a sandbox (or everywhere, with `checks.humans`), pre-commit refuses staged
//! changes to protected paths, staged secret files and staged secret contents, then runs
//! the configured checks; pre-push refuses non-fast-forward updates and branch deletions
//! and runs the configured checks on every commit being pushed, so a commit that reached
//! the branch by any route without passing them is stopped before it leaves. Then the
//! hook that was there before (chained at install) runs, inside or outside.

mod tokens;

use std::{
    ffi::OsString,
    io::{Read, Write},
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use guard_settings::HookGuardSettings;
use runtime_layout::RuntimeLayout;
pub use tokens::{find as find_secrets, Finding};

/// Exit status of a refused commit or push.
pub const REFUSED: i32 = 1;

/// Runs the guard for `hook` (`pre-commit` or `pre-push`) with git's arguments.
pub fn run(hook: &str, args: &[OsString]) -> i32 {
    match guard(hook, args) {
        Ok(code) => code,
        Err(refusal) => {
            eprintln!("{}", refusal.said(&format!("{hook} refused")));
            let why = refusal.why;
            let event = audit::Event::new("git", hook, &why, "blocked", &format!("{hook}-guard"), None);
            if !audit::send(&event) {
                if let Some(path) = audit::default_path() {
                    let _ = audit::append(&path, &[event]);
                }
            }
            REFUSED
        }
    }
}

use util::refusal::{refuse, Refusal};

/// Inside bubblewrap: the snapshot `exec` took at start. In a container: the root-owned
/// `/etc/agent-sandbox`. Outside any sandbox: the configuration read with the home
/// directory from the password database.
fn load_settings(top: &Path, host_push: Option<&Path>) -> Result<HookGuardSettings, Refusal> {
    if let Some(path) = host_push {
        if runtime_layout::detect() == runtime_layout::Where::Container && !root_only(path) {
            return Err(refuse(
                format!("the push's settings {} are not root's alone", path.display()),
                "push again (the verifier writes them afresh)",
            ));
        }
        return match HookGuardSettings::read(path) {
            Ok(Some(settings)) if settings.check_sandbox.is_some() || settings.check_user.is_some() => Ok(settings),
            Ok(_) => Err(refuse(format!("the push's settings {} are missing", path.display()), "restart the sandbox")),
            Err(err) => Err(refuse(err.to_string(), "restart the sandbox")),
        };
    }
    match HookGuardSettings::read(&RuntimeLayout::inside().hook_guard_settings()) {
        Ok(Some(settings)) => return Ok(settings),
        Ok(None) => {}
        Err(err) => return Err(refuse(err.to_string(), "restart the sandbox")),
    }
    let loaded = if runtime_layout::detect() == runtime_layout::Where::Container {
        config::load_for_container()
    } else {
        let home = util::passwd_home().unwrap_or_default();
        config::load_for_project(top, &home).map(|(config, unapproved)| {
            if let Some(path) = unapproved {
                eprintln!(
                    "agent-sandbox: note: ignoring {}: not allowed as it is (review it, then `agent-sandbox config allow`)",
                    path.display()
                );
            }
            config
        })
    };
    loaded.map(|config| HookGuardSettings::from_config(&config)).map_err(|err| {
        refuse(format!("cannot read the agent-sandbox configuration: {err}"), "fix the configuration file it names")
    })
}

/// Whether `path` is a regular file of root's that nobody else may write.
fn root_only(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    path.symlink_metadata().is_ok_and(|meta| meta.is_file() && meta.uid() == 0 && meta.mode() & 0o022 == 0)
}

struct Repo {
    /// The top of the work tree: git runs hooks there.
    top: PathBuf,
    /// Whether this is the pre-push of a push the host carries out (`hostpush`): the
    /// checks then run in the fresh sandbox of `settings.check_sandbox`.
    host_push: bool,
    git: PathBuf,
    settings: HookGuardSettings,
    /// Whether git's `GIT_INDEX_FILE` is honoured (pre-commit).
    keep_index: bool,
    /// For a push the host or a container's verifier carries out: the mirror the push
    /// is sent from (`hostpush::mirror`), where the guard's git reads what is pushed;
    /// the project's work tree (`top`) is looked at only for its hooks directory and
    /// dependency directories.
    git_dir: Option<PathBuf>,
}

/// What the pushing (or committing) git's environment may say that would make the
/// guard's own git see another history, tree or configuration than the one that is
/// pushed: dropped. Replace refs and grafts are turned off outright.
const UNTRUSTED_GIT_ENV: &[&str] = &[
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_REPLACE_REF_BASE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_WORK_TREE",
    "GIT_NAMESPACE",
    "GIT_SHALLOW_FILE",
];

impl Repo {
    /// The guard's own git, in a cleaned environment, in the repository being pushed
    /// from. `GIT_INDEX_FILE` is kept only for pre-commit, where it names the index being
    /// committed.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = self.project_command(args);
        if let Some(git_dir) = &self.git_dir {
            command.env("GIT_DIR", git_dir);
        }
        command
    }

    /// As [`Repo::command`], in the project's work tree.
    fn project_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.git);
        // `.git/shallow` is the agent's to write: a commit marked shallow would hide its
        // ancestors from the walk and look like a root. The guard's git goes on through
        // them (a parent truly missing is an error, and the push is refused).
        command.args(["--shallow-file", "/dev/null", "-c", "advice.graftFileDeprecated=false"]);
        if self.host_push {
            // On the host, git must run nothing of the repository's: `worktree add` would
            // run its post-checkout hook (husky's leads to files in the work tree).
            command.args(["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"]);
        }
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name.starts_with("GIT_CONFIG_KEY_") || name.starts_with("GIT_CONFIG_VALUE_") {
                command.env_remove(name.as_ref());
            }
        }
        for name in UNTRUSTED_GIT_ENV {
            command.env_remove(name);
        }
        if !self.keep_index {
            command.env_remove("GIT_INDEX_FILE");
        }
        if !self.settings.global_config.is_empty() {
            command.env("GIT_CONFIG_GLOBAL", &self.settings.global_config);
        }
        command.env("GIT_NO_REPLACE_OBJECTS", "1").env("GIT_GRAFT_FILE", "/dev/null");
        command.args(args).current_dir(&self.top);
        command
    }

    fn git(&self, args: &[&str]) -> Result<Output, Refusal> {
        self.command(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|err| refuse(format!("cannot run git: {err}"), "check that git is installed"))
    }

    /// Runs git with `input` on its stdin.
    fn git_with_input(&self, args: &[&str], input: &[u8]) -> Result<Vec<u8>, Refusal> {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|err| refuse(format!("cannot run git: {err}"), "check that git is installed"))?;
        if let Some(mut pipe) = child.stdin.take() {
            let _ = pipe.write_all(input);
        }
        let out = child.wait_with_output().map_err(|err| refuse(format!("git: {err}"), "retry"))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(refuse(format!("`git {}` failed: {}", args.join(" "), stderr.trim()), "fix the repository"));
        }
        Ok(out.stdout)
    }

    fn git_ok(&self, args: &[&str]) -> Result<Vec<u8>, Refusal> {
        let out = self.git(args)?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(refuse(format!("`git {}` failed: {}", args.join(" "), stderr.trim()), "fix the repository"));
        }
        Ok(out.stdout)
    }
}

fn guard(hook: &str, args: &[OsString]) -> Result<i32, Refusal> {
    let top = std::env::current_dir().map_err(|err| refuse(format!("no working directory: {err}"), "retry"))?;
    let place = runtime_layout::detect();
    let inside = place != runtime_layout::Where::Outside;
    // Set by the host's push service for the git it runs, or by a container's verifier
    // (root, whom the agent's user cannot be); never honoured for the agent.
    let trusted = match place {
        runtime_layout::Where::Outside => true,
        // SAFETY: geteuid has no preconditions.
        runtime_layout::Where::Container => (unsafe { libc::geteuid() }) == 0,
        runtime_layout::Where::Bubblewrap => false,
    };
    let host_push = (trusted && hook == "pre-push")
        .then(|| std::env::var_os(hostpush::hook::SETTINGS_VAR).filter(|path| !path.is_empty()))
        .flatten()
        .map(PathBuf::from);
    // The mirror a push the host carries out is sent from (git names it to its hooks).
    let git_dir = host_push.is_some().then(|| std::env::var_os("GIT_DIR").map(PathBuf::from)).flatten();
    if host_push.is_some() {
        // The service's `-c core.hooksPath` is not the repository's own setting (which
        // decides the protected hooks directory), nor is the mirror the project; and
        // checks report on stderr.
        std::env::remove_var("GIT_CONFIG_PARAMETERS");
        std::env::remove_var("GIT_CONFIG_COUNT");
        std::env::remove_var("GIT_DIR");
        // SAFETY: dup2 on the process's own standard descriptors.
        unsafe { libc::dup2(2, 1) };
    }
    // Inside, the real git directly: the git guard has already judged this command (in
    // a container's verifier, `git` on PATH is the guard, which refuses the guard's own
    // `-c core.hooksPath`).
    let real = RuntimeLayout::inside().bin("git");
    let git = if real.exists() {
        real
    } else if host_push.is_some() && place == runtime_layout::Where::Container {
        PathBuf::from(runtime_layout::CONTAINER_REAL_GIT)
    } else {
        PathBuf::from("git")
    };
    let settings = load_settings(&top, host_push.as_deref())?;
    let repo = Repo { top, host_push: host_push.is_some(), git, settings, keep_index: hook == "pre-commit", git_dir };
    let check = inside || repo.host_push || repo.settings.humans;
    let mut stdin = Vec::new();
    if hook == "pre-push" {
        std::io::stdin()
            .read_to_end(&mut stdin)
            .map_err(|err| refuse(format!("cannot read the refs to push: {err}"), "retry"))?;
    }
    if check {
        match hook {
            "pre-commit" => pre_commit(&repo)?,
            "pre-push" => pre_push(&repo, args, &stdin)?,
            _ => {}
        }
    }
    if repo.host_push {
        // The repository's own pre-push hook (files the agent may have changed) never runs
        // on the host: in the checks' fresh sandbox, or (a container's verifier) not at all.
        if hook == "pre-push" && repo.settings.check_sandbox.is_some() {
            own_pre_push(&repo, args, &stdin)?;
        }
        return Ok(0);
    }
    chain(&repo, hook, args, &stdin)
}

/// For a push the host carries out: the repository's own pre-push hook, the one the
/// user's `git push` runs (the original `hooks install` chained, or a plain hook in the
/// hooks directory), run in the checks' sandbox in a worktree of the pushed tip, with
/// git's arguments and refs. Its failure refuses the push; its output is on stderr.
fn own_pre_push(repo: &Repo, args: &[OsString], stdin: &[u8]) -> Result<(), Refusal> {
    let dir = hookinstall::hooks_dir(&repo.top).map_err(|err| {
        refuse(format!("cannot find the repository's hooks directory: {err}"), "fix the repository's core.hooksPath")
    })?;
    if !has_own_hook(&dir, "pre-push") {
        // The user's own push would run none: no worktree of the tip to check out (a
        // 5,000-file tree took 1.6 s) for a script that would find nothing to run.
        return Ok(());
    }
    let text = String::from_utf8_lossy(stdin);
    let updates = parse_updates(&text);
    let tip = updates.iter().rev().find(|update| !is_zero(update.local_sha));
    let (commit, local_ref) = match tip {
        Some(update) => (update.local_sha.to_owned(), update.local_ref.to_owned()),
        None => {
            let head = repo.git_ok(&["rev-parse", "--verify", "-q", "HEAD"]).unwrap_or_default();
            let head = String::from_utf8_lossy(&head).trim().to_owned();
            if head.is_empty() {
                return Ok(());
            }
            (head, "HEAD".to_owned())
        }
    };
    let args: Vec<String> = args.iter().map(|arg| arg.to_string_lossy().into_owned()).collect();
    let mut script = own_hook_script(&dir.join("pre-push"), &args, &text);
    if let Some(chained) = hookinstall::chained_hook(&dir, "pre-push") {
        // The host sees the hook: the checks' sandbox must too, or it would pass unrun.
        let chained = util::single_quoted(&chained.to_string_lossy());
        script = format!(
            "[ -x {chained} ] || {{ echo 'agent-sandbox: the check sandbox does not show the pre-push hook '{chained} >&2; exit 1; }}\n{script}"
        );
    }
    let dependencies = std::cell::OnceCell::new();
    check_commit(repo, &commit, &local_ref, false, &dependencies, &|repo, _dir, what| {
        let sandbox = repo.settings.check_sandbox.as_ref().ok_or_else(|| refuse("no check sandbox", "push again"))?;
        let (passed, status) = run_in_sandbox(sandbox, &script)?;
        if passed {
            return Ok(());
        }
        Err(refuse(
            format!(
                "the repository's own pre-push hook ({}) failed on {what} ({status})",
                dir.join("pre-push").display()
            ),
            "fix what the hook reports (above), then push again",
        ))
    })
}

/// Whether the hooks directory `dir` has a `hook` of the user's: one chained behind the
/// guard's shim, or one in place that is not the shim. Only a hook that is surely not
/// there says no (what cannot be read is run, and judged, in the checks' sandbox).
fn has_own_hook(dir: &Path, hook: &str) -> bool {
    if hookinstall::chained_hook(dir, hook).is_some() {
        return true;
    }
    match util::fs::read_regular(&dir.join(hook), 1 << 20) {
        Ok(bytes) => !String::from_utf8_lossy(&bytes).lines().any(|line| line == hookinstall::MARKER),
        Err(err) => err.kind() != std::io::ErrorKind::NotFound,
    }
}

/// The shell script that runs, in the checks' sandbox, the hook the user's `git push`
/// would run at `hook` (`<hooks dir>/pre-push`): the original `hooks install` chained,
/// as the shim runs it (a shell script with `$0` set to `hook`), else `hook` itself
/// unless it is the guard's shim; nothing when there is neither. `args` and `refs` are
/// git's pre-push arguments and stdin. The worktree's git records are read-only to the
/// checks: the hook gets a private copy of the index (the pre-commit framework writes it).
fn own_hook_script(hook: &Path, args: &[String], refs: &str) -> String {
    let quoted: Vec<String> = args.iter().map(|arg| util::single_quoted(arg)).collect();
    format!(
        "hook={hook}\nset -- {args}\n{function}\
         index=$(mktemp) && cp \"$(git rev-parse --git-path index)\" \"$index\" && export GIT_INDEX_FILE=\"$index\" \
         || exit 1\nprintf '%s' {refs} | own_hook \"$@\"\n",
        hook = util::single_quoted(&hook.to_string_lossy()),
        args = quoted.join(" "),
        function = OWN_HOOK_FUNCTION
            .replace("{suffix}", hookinstall::CHAINED_SUFFIX)
            .replace("{marker}", &util::single_quoted(hookinstall::MARKER)),
        refs = util::single_quoted(refs),
    )
}

/// The shell function `own_hook ARGS…` (in a subshell of its own: it ends with `exec`):
/// runs the hook at `$hook` as the user's git would, the original `hooks install`
/// chained (as the shim runs it: a shell script with `$0` set to `$hook`), else `$hook`
/// itself unless it is the guard's shim; nothing (status 0) when there is neither.
const OWN_HOOK_FUNCTION: &str = "own_hook() (\n\
     if [ -x \"$hook{suffix}\" ]; then\n\
     shebang=\nIFS= read -r shebang <\"$hook{suffix}\" || :\n\
     case $shebang in\n\
     '#!/bin/sh') exec /bin/sh -c '. \"$0{suffix}\"' \"$hook\" \"$@\" ;;\n\
     '#!/usr/bin/env sh') exec sh -c '. \"$0{suffix}\"' \"$hook\" \"$@\" ;;\n\
     '#!/bin/bash') exec /bin/bash -c '. \"$0{suffix}\"' \"$hook\" \"$@\" ;;\n\
     '#!/usr/bin/env bash') exec bash -c '. \"$0{suffix}\"' \"$hook\" \"$@\" ;;\n\
     esac\nexec \"$hook{suffix}\" \"$@\"\n\
     elif [ -x \"$hook\" ] && ! grep -qxF {marker} \"$hook\"; then\nexec \"$hook\" \"$@\"\nfi\n)\n";

/// The shell script that replays, in a commit's worktree (as the checks' user), the
/// repository's own `pre-commit` and `commit-msg` hooks of the hooks directory `hooks`
/// as `git commit` would have run them: `HEAD` at the first parent (none for a root
/// commit), the commit's tree staged, its message in a file. The worktree's git records
/// are root's: the hooks get a private git directory of the worktree's, which shares the
/// mirror's refs, and the objects in `objects` when given (the checks' user cannot read
/// the user's object store, the mirror's alternate). A hook that changes the staged or
/// the work tree's files
/// (a formatter) refuses the commit, with the difference: the commit is not what the
/// hooks produce.
fn replay_script(hooks: &Path, commit: &str, parent: Option<&str>, objects: Option<&Path>) -> String {
    let head = match parent {
        Some(parent) => parent.to_owned(),
        None => "ref: refs/agent-sandbox/replay-unborn".to_owned(),
    };
    let (commit, head) = (util::single_quoted(commit), util::single_quoted(&head));
    let hooks = util::single_quoted(&hooks.to_string_lossy());
    let mut lines = vec![OWN_HOOK_FUNCTION
        .replace("{suffix}", hookinstall::CHAINED_SUFFIX)
        .replace("{marker}", &util::single_quoted(hookinstall::MARKER))];
    if let Some(objects) = objects {
        lines.push(format!("export GIT_OBJECT_DIRECTORY={}", util::single_quoted(&objects.to_string_lossy())));
    }
    lines.extend([
        "common=$(cd \"$(git rev-parse --git-common-dir)\" && pwd) || exit 1".to_owned(),
        "index=$(git rev-parse --path-format=absolute --git-path index) && dir=$(mktemp -d) || exit 1".to_owned(),
        "echo \"$common\" > \"$dir/commondir\" && echo \"$PWD/.git\" > \"$dir/gitdir\" || exit 1".to_owned(),
        format!("echo {head} > \"$dir/HEAD\" && cp \"$index\" \"$dir/index\" || exit 1"),
        format!("msg=$(mktemp) && git cat-file commit {commit} | sed '1,/^$/d' > \"$msg\" || exit 1"),
        "export GIT_DIR=\"$dir\" GIT_WORK_TREE=\"$PWD\"".to_owned(),
        format!("hook={hooks}/pre-commit"),
        "own_hook </dev/null || { echo 'agent-sandbox: your pre-commit hook failed' >&2; exit 1; }".to_owned(),
        format!("hook={hooks}/commit-msg"),
        "own_hook \"$msg\" </dev/null || { echo 'agent-sandbox: your commit-msg hook failed' >&2; exit 1; }".to_owned(),
        format!("if ! git diff --cached --quiet {commit} -- || ! git diff --quiet; then"),
        "echo \"agent-sandbox: your hooks changed the commit's files (a formatter?); it is not what they make:\" >&2"
            .to_owned(),
        format!("git --no-pager diff --stat {commit} >&2; exit 1"),
        "fi\n".to_owned(),
    ]);
    lines.join("\n")
}

/// Runs the hook that was in place before `hooks install`, with git's arguments and
/// (for pre-push) the refs on stdin; its status is the hook's status.
///
/// git ran this shim from a hooks directory: one the guard cannot find, or a chained
/// hook it cannot read, is refused rather than taken for "no hook of the user's".
fn chain(repo: &Repo, hook: &str, args: &[OsString], stdin: &[u8]) -> Result<i32, Refusal> {
    let dir = hookinstall::hooks_dir(&repo.top).map_err(|err| {
        refuse(
            format!("cannot find the repository's hooks directory, so its own {hook} hook cannot run: {err}"),
            "check the repository's core.hooksPath (`git config --show-origin core.hooksPath`)",
        )
    })?;
    let Some(chained) = hookinstall::chained_hook(&dir, hook) else { return Ok(0) };
    // Run as git would have (husky derives the hook's name from `$0`).
    let mut command = hookinstall::chained_command(&dir, hook).ok_or_else(|| {
        refuse(format!("cannot read the repository's own {hook} hook {}", chained.display()), "make it readable")
    })?;
    command.args(args).current_dir(&repo.top);
    if hook == "pre-push" {
        command.stdin(Stdio::piped());
    }
    let mut child = command
        .spawn()
        .map_err(|err| refuse(format!("cannot run {}: {err}", chained.display()), "make it executable"))?;
    if let Some(mut pipe) = child.stdin.take() {
        let _ = pipe.write_all(stdin);
    }
    let status = child.wait().map_err(|err| refuse(format!("waiting for {}: {err}", chained.display()), "retry"))?;
    Ok(status.code().unwrap_or(REFUSED))
}

fn pre_commit(repo: &Repo) -> Result<(), Refusal> {
    let (entries, findings) = scan_staged(repo)?;
    let staged: Vec<(String, String)> =
        entries.iter().map(|entry| (entry.status.clone(), entry.path.clone())).collect();
    let protected = protected_paths(repo);
    for (status, path) in &staged {
        if let Some(rule) = rule_covering(path, &protected) {
            return Err(refuse(
                format!("the commit changes {path} ({status}), which is protected ({rule})"),
                format!("leave {rule} as it is: unstage it with `git restore --staged {path}`"),
            ));
        }
    }
    for (status, path) in &staged {
        let masked = rule_covering(path, &repo.settings.masked_paths);
        if let Some(masked) = masked {
            return Err(refuse(
                format!(
                    "the commit changes {path} ({status}), which the sandbox hides from you (you see {masked} empty)"
                ),
                format!("leave it out of the commit: `git restore --staged {path}`"),
            ));
        }
    }
    let matcher = secrets::SecretMatcher::new(&repo.settings.secret_patterns, &repo.settings.secret_allow)
        .map_err(|err| refuse(format!("bad secret pattern: {err}"), "fix secrets.patterns in the configuration"))?;
    for (status, path) in &staged {
        if status != "D" {
            if let Some(pattern) = matcher.matches(Path::new(path)) {
                return Err(refuse(
                    format!("the commit adds {path}, a secret file (matches {pattern})"),
                    format!("keep secrets out of git: `git restore --staged {path}` and add it to .gitignore"),
                ));
            }
        }
    }
    if let Some((path, finding)) = findings.into_iter().next() {
        return Err(refuse(
            format!("the commit adds {} {} to {path}", article(finding.kind), finding.kind),
            "remove the credential (read it from the environment or a secret store) and stage the file again",
        ));
    }
    run_checks(repo, &repo.top, "the staged work")
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['A', 'E', 'I', 'O', 'U', 'a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// Credentials found, with the file each is in.
type Findings = Vec<(String, Finding)>;

/// One staged change, from `git diff --cached --raw -z --no-abbrev`.
#[derive(Debug, PartialEq, Eq)]
struct Staged {
    status: String,
    /// For messages and matching (lossy).
    path: String,
    /// As git wrote it, for reading the file and naming it to git again.
    raw_path: Vec<u8>,
    /// The staged mode and blob (`100644`, `100755`, `120000` symlink, `160000` gitlink).
    mode: String,
    blob: String,
}

/// One record of `git diff --raw -z`: the header `:old_mode new_mode old_id new_id
/// status` and the path.
fn parse_record(header: &[u8], path: &[u8]) -> Option<Staged> {
    let header = String::from_utf8_lossy(header);
    let parts: Vec<&str> = header.trim_start_matches(':').split(' ').collect();
    let [_, mode, _, blob, status] = parts[..] else { return None };
    Some(Staged {
        status: status.to_owned(),
        path: String::from_utf8_lossy(path).into_owned(),
        raw_path: path.to_vec(),
        mode: mode.to_owned(),
        blob: blob.to_owned(),
    })
}

/// A regular file's bytes in four system calls (open without following a symlink and
/// without blocking on a FIFO, fstat, read, close): the pre-commit guard reads every
/// new file of a commit. Whatever it returns is checked against the staged blob's hash.
fn read_file(path: &Path) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > 1 << 30 {
        return None;
    }
    // Exactly the size fstat gave (a file that changed meanwhile fails the hash check).
    let mut bytes = vec![0; meta.len() as usize];
    file.read_exact(&mut bytes).ok()?;
    Some(bytes)
}

/// The staged changes (`git diff --cached --raw`) and the credentials on the lines they
/// add. An added regular file is read from the work tree when its bytes hash to the
/// staged blob (no stat or index field is trusted: the agent can write `.git/index`),
/// which spares git inflating and diffing every new file of a big commit; the files are
/// read by two threads while git is still listing. Everything else (changed files,
/// other content than staged, symlinks) goes through one `git diff --cached -U0`
/// limited to those paths.
fn scan_staged(repo: &Repo) -> Result<(Vec<Staged>, Findings), Refusal> {
    let mut child = repo
        .command(&["diff", "--cached", "--raw", "-z", "--no-abbrev", "--no-renames"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| refuse(format!("cannot run git: {err}"), "check that git is installed"))?;
    let stdout = child.stdout.take().ok_or_else(|| refuse("git gave no output", "retry"))?;
    let (send, receive) = std::sync::mpsc::channel::<(Vec<u8>, String, String)>();
    let receive = std::sync::Mutex::new(receive);
    let worker = || {
        let (mut found, mut rest) = (Vec::new(), Vec::new());
        loop {
            let next = receive.lock().map_err(|_| ()).and_then(|queue| queue.recv().map_err(|_| ()));
            let Ok((raw_path, path, blob)) = next else { break };
            match scan_added_file(repo, &raw_path, &path, &blob) {
                Some(findings) => found.extend(findings),
                None => rest.push(raw_path),
            }
        }
        (found, rest)
    };
    let scanned = std::thread::scope(|scope| {
        let workers = [scope.spawn(worker), scope.spawn(worker)];
        let mut entries = Vec::new();
        let mut rest = Vec::new();
        let mut reader = std::io::BufReader::new(stdout);
        let (mut header, mut path) = (Vec::new(), Vec::new());
        let mut complete = true;
        loop {
            header.clear();
            path.clear();
            match std::io::BufRead::read_until(&mut reader, 0, &mut header) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => {
                    complete = false;
                    break;
                }
            }
            let read = std::io::BufRead::read_until(&mut reader, 0, &mut path);
            let record = match (read, header.pop(), path.pop()) {
                (Ok(_), Some(b'\0'), Some(b'\0')) => parse_record(&header, &path),
                _ => None,
            };
            // A record that cannot be read is a change nobody checked: refuse.
            let Some(entry) = record else {
                complete = false;
                break;
            };
            if entry.status == "A" && matches!(entry.mode.as_str(), "100644" | "100755") {
                let _ = send.send((entry.raw_path.clone(), entry.path.clone(), entry.blob.clone()));
            } else if entry.status != "D" {
                rest.push(entry.raw_path.clone());
            }
            entries.push(entry);
        }
        drop(send);
        let mut found = Vec::new();
        let mut all_scanned = true;
        for handle in workers {
            match handle.join() {
                Ok((findings, unread)) => {
                    found.extend(findings);
                    rest.extend(unread);
                }
                Err(_) => all_scanned = false,
            }
        }
        if !complete {
            return Err(refuse("cannot read the list of staged changes from git", "retry the commit"));
        }
        // A scanning thread that died leaves every added file to git.
        if !all_scanned {
            rest = entries.iter().filter(|entry| entry.status != "D").map(|entry| entry.raw_path.clone()).collect();
        }
        Ok((entries, found, rest))
    });
    let out = child.wait_with_output().map_err(|err| refuse(format!("git: {err}"), "retry"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(refuse(format!("`git diff --cached --raw` failed: {}", stderr.trim()), "fix the repository"));
    }
    let (entries, mut found, rest) = scanned?;
    // --text and --no-textconv: `.gitattributes` (the agent's) cannot hide content as
    // binary; literal pathspecs: a name is never a pattern. In batches: command lines
    // have a size limit (`git diff` takes no pathspec file).
    for batch in rest.chunks(1000) {
        let mut command = repo.command(&[
            "--literal-pathspecs",
            "diff",
            "--cached",
            "-U0",
            "--no-color",
            "--no-ext-diff",
            "--text",
            "--no-textconv",
            "--",
        ]);
        command.args(batch.iter().map(|path| std::ffi::OsStr::from_bytes(path)));
        let out = command
            .stdin(Stdio::null())
            .output()
            .map_err(|err| refuse(format!("cannot run git: {err}"), "check that git is installed"))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(refuse(format!("`git diff --cached` failed: {}", stderr.trim()), "fix the repository"));
        }
        found.extend(secrets_in_diff(&String::from_utf8_lossy(&out.stdout)));
    }
    Ok((entries, found))
}

/// The credentials in an added file, when the work tree holds exactly the staged blob;
/// `None` when it does not (git must show the staged content).
fn scan_added_file(repo: &Repo, raw_path: &[u8], path: &str, blob: &str) -> Option<Findings> {
    let bytes = read_file(&repo.top.join(std::ffi::OsStr::from_bytes(raw_path)))?;
    let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, &bytes).ok()?;
    if gix::ObjectId::from_hex(blob.as_bytes()).ok()? != id {
        return None;
    }
    let text = String::from_utf8_lossy(&bytes);
    Some(tokens::find(&text).into_iter().map(|finding| (path.to_owned(), finding)).collect())
}

/// The rule of `rules` (paths relative to the work tree) that is `path` or one of its
/// parent directories.
fn rule_covering<'a>(path: &str, rules: &'a [String]) -> Option<&'a String> {
    rules.iter().find(|rule| {
        path == rule.as_str() || path.strip_prefix(rule.as_str()).is_some_and(|rest| rest.starts_with('/'))
    })
}

/// `checks.protectedPaths`, plus the hooks directory when it lives in the work tree.
fn protected_paths(repo: &Repo) -> Vec<String> {
    let mut rules: Vec<String> =
        repo.settings.protected_paths.iter().map(|path| path.trim_end_matches('/').to_owned()).collect();
    // A container's verifier works in its own bare mirror, and names the project's
    // hooks directory itself.
    if repo.settings.check_user.is_some() {
        return rules;
    }
    if let Ok(dir) = hookinstall::hooks_dir(&repo.top) {
        let top = repo.top.canonicalize().unwrap_or_else(|_| repo.top.clone());
        let dir = dir.canonicalize().unwrap_or(dir);
        if let Ok(rel) = dir.strip_prefix(&top) {
            if !rel.as_os_str().is_empty() {
                rules.push(rel.display().to_string());
            }
        }
    }
    rules
}

/// Credentials on the lines a `git diff -U0` adds, with the file they are added to.
fn secrets_in_diff(diff: &str) -> Vec<(String, Finding)> {
    let mut file = String::new();
    let mut found = Vec::new();
    for line in diff.lines() {
        if let Some(path) = line.strip_prefix("+++ ") {
            file = path.strip_prefix("b/").unwrap_or(path).to_owned();
        } else if let Some(added) = line.strip_prefix('+') {
            found.extend(tokens::find(added).into_iter().map(|finding| (file.clone(), finding)));
        }
    }
    found
}

fn run_checks(repo: &Repo, dir: &Path, what: &str) -> Result<(), Refusal> {
    for command in &repo.settings.check_commands {
        let sandbox = repo.settings.check_sandbox.as_ref().filter(|_| repo.host_push);
        let user = repo.settings.check_user.as_ref().filter(|_| repo.host_push);
        let (passed, status) = match (sandbox, user) {
            (Some(sandbox), _) => run_in_sandbox(sandbox, command)?,
            (None, Some(user)) => run_as_user(user, command)?,
            (None, None) => {
                // Checks report on stderr: stdout of a pre-push hook is not the terminal's.
                // /bin/sh: never an `sh` planted in a directory on the pusher's PATH.
                let mut check = Command::new("/bin/sh");
                if !repo.settings.check_env.is_empty() {
                    check.env_clear().envs(repo.settings.check_env.iter().map(|(name, value)| (name, value)));
                    check.envs(hook_git_env(repo));
                }
                let status = check
                    .args(["-c", command])
                    .current_dir(dir)
                    .stdin(Stdio::null())
                    .stdout(std::io::stderr())
                    .status()
                    .map_err(|err| refuse(format!("cannot run the check `{command}`: {err}"), "fix the check"))?;
                (status.success(), status.to_string())
            }
        };
        if !passed {
            let dropped = &repo.settings.check_path_dropped;
            if dropped.is_empty() {
                return Err(refuse(
                    format!("the check `{command}` failed on {what} ({status})"),
                    "fix what the check reports, then try again (never skip the check)",
                ));
            }
            return Err(refuse(
                format!(
                    "the check `{command}` failed on {what} ({status}); the checks do not search these PATH entries: {}",
                    dropped.join(", ")
                ),
                "fix what the check reports, then try again (never skip the check); a check that needs a tool from \
                 the project's dependencies runs code the agent can change: install the tool outside the project \
                 (npm i -g --prefix ~/.local, pipx) or in the check (npm ci && npx --no-install TOOL)",
            ));
        }
    }
    Ok(())
}

/// Runs the check `command` in the fresh sandbox of a push the host carries out (its
/// argv ends with the worktree as `--chdir`, then `/bin/sh -c`): whether it passed, and
/// its exit status as [`std::process::ExitStatus`] shows one.
fn run_in_sandbox(sandbox: &guard_settings::CheckSandbox, command: &str) -> Result<(bool, String), Refusal> {
    let env: Vec<(std::ffi::OsString, std::ffi::OsString)> =
        sandbox.env.iter().map(|(name, value)| (name.into(), value.into())).collect();
    let mut args: Vec<std::ffi::OsString> = sandbox.args.iter().map(Into::into).collect();
    args.push(command.into());
    let runtime = RuntimeLayout::host(&sandbox.runtime);
    // bwrap makes the checks' network namespace (`--unshare-net` in their plan).
    match sandbox::run::run(&sandbox.bwrap, &args, &env, &runtime, audit::default_path(), None, None) {
        Ok(code) => Ok((code == 0, format!("exit status: {code}"))),
        Err(err) => Err(refuse(
            format!("cannot run the check `{command}` in a sandbox: {err}"),
            "fix what the message says (the push stays refused until the checks run)",
        )),
    }
}

/// Runs the check `command` as the checks' user of a container's verifier, in its
/// worktree, with exactly its environment (`/bin/sh`, never one on a `PATH` the agent
/// writes). Every process of that user is ended afterwards: one left behind could
/// change the next commit's worktree while it is checked.
fn run_as_user(user: &guard_settings::CheckUser, command: &str) -> Result<(bool, String), Refusal> {
    use std::os::unix::process::CommandExt;
    let status = Command::new("/bin/sh")
        .args(["-c", command])
        .current_dir(&user.worktree)
        .env_clear()
        .envs(user.env.iter().map(|(name, value)| (name, value)))
        // std drops the supplementary groups before setuid.
        .uid(user.uid)
        .gid(user.gid)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .status();
    let ended = util::users::kill_all(user.uid, std::time::Duration::from_secs(10));
    let status = status.map_err(|err| {
        refuse(
            format!("cannot run the check `{command}` as the checks' user: {err}"),
            "rebuild the image with the Feature",
        )
    })?;
    if !ended {
        return Err(refuse(
            format!("a process the check `{command}` started could not be ended"),
            "push again (nothing was pushed)",
        ));
    }
    Ok((status.success(), status.to_string()))
}

/// Replays the user's `pre-commit` and `commit-msg` hooks (in `hooks`) on `commit`, as
/// the checks' user in its worktree ([`replay_script`]).
fn replay_own_hooks(repo: &Repo, hooks: &Path, commit: &str, what: &str) -> Result<(), Refusal> {
    let Some(user) = &repo.settings.check_user else { return Ok(()) };
    let parent = repo.git_ok(&["rev-parse", "-q", "--verify", &format!("{commit}^1")]).ok();
    let parent = parent.map(|out| String::from_utf8_lossy(&out).trim().to_owned());
    // What the hooks' git reads: the two commits' objects, packed by root where the
    // checks' user may read them.
    let objects = user.worktree.with_file_name("replay-objects");
    let packed = (|| -> Result<(), Refusal> {
        let _ = std::fs::remove_dir_all(&objects);
        std::fs::create_dir_all(objects.join("pack"))
            .map_err(|err| refuse(format!("cannot prepare {}: {err}", objects.display()), "commit again"))?;
        let mut listed = vec!["rev-list", "--objects", "--no-walk", commit];
        listed.extend(parent.as_deref());
        let listing = repo.git_ok(&listed)?;
        repo.git_with_input(&["pack-objects", "-q", &objects.join("pack/pack").to_string_lossy()], &listing)?;
        Ok(())
    })();
    let ran = packed.and_then(|()| run_as_user(user, &replay_script(hooks, commit, parent.as_deref(), Some(&objects))));
    let _ = std::fs::remove_dir_all(&objects);
    let (passed, status) = ran?;
    if passed {
        return Ok(());
    }
    Err(refuse(
        format!("your repository's own hooks ({}) refused {what} ({status})", hooks.display()),
        "fix what the hook reports (above), then commit again: the hooks that run are the user's, whatever the \
         session's .git/hooks holds",
    ))
}

/// Gives `entry` and everything in it to `uid`/`gid` (the checks' user), links not
/// followed. The worktree's `.git` file is never given: it leads to the verifier's
/// repository, whose files root's git reads afterwards.
fn give_to_entry(entry: &std::fs::DirEntry, uid: u32, gid: u32) -> std::io::Result<()> {
    let path = entry.path();
    std::os::unix::fs::lchown(&path, Some(uid), Some(gid))?;
    if entry.file_type()?.is_dir() {
        for inner in std::fs::read_dir(&path)? {
            give_to_entry(&inner?, uid, gid)?;
        }
    }
    Ok(())
}

/// What git itself tells a hook and its checks need: the index being committed
/// (`git commit -a` and `git commit <paths>` use a temporary one, and anyone may name
/// another with `GIT_INDEX_FILE`: the checks must see what the commit is made of), and
/// the subdirectory git was started in.
fn hook_git_env(repo: &Repo) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if !repo.settings.global_config.is_empty() {
        env.push(("GIT_CONFIG_GLOBAL".to_owned(), repo.settings.global_config.clone()));
    }
    if let Ok(prefix) = std::env::var("GIT_PREFIX") {
        env.push(("GIT_PREFIX".to_owned(), prefix));
    }
    if let Some(index) = std::env::var_os("GIT_INDEX_FILE").filter(|_| repo.keep_index) {
        // Absolute: a check may change directory.
        env.push(("GIT_INDEX_FILE".to_owned(), repo.top.join(index).to_string_lossy().into_owned()));
    }
    env
}

/// One line git writes to a pre-push hook's stdin.
#[derive(Debug, PartialEq, Eq)]
struct Update<'a> {
    local_ref: &'a str,
    local_sha: &'a str,
    remote_ref: &'a str,
    remote_sha: &'a str,
}

fn parse_updates(stdin: &str) -> Vec<Update<'_>> {
    stdin
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            Some(Update {
                local_ref: fields.next()?,
                local_sha: fields.next()?,
                remote_ref: fields.next()?,
                remote_sha: fields.next()?,
            })
        })
        .collect()
}

fn is_zero(sha: &str) -> bool {
    sha.bytes().all(|b| b == b'0')
}

fn pre_push(repo: &Repo, args: &[OsString], stdin: &[u8]) -> Result<(), Refusal> {
    let remote = args.first().map(|arg| arg.to_string_lossy().into_owned()).unwrap_or_else(|| "origin".into());
    let url = args.get(1).map(|arg| arg.to_string_lossy().into_owned()).unwrap_or_else(|| remote.clone());
    let stdin = String::from_utf8_lossy(stdin);
    // What the remote has, asked once: its own advertisement, not local remote-tracking
    // refs, which the agent can set to anything.
    let mut advertised: Option<Result<Vec<(String, String)>, Refusal>> = None;
    let mut checked: std::collections::HashSet<String> = std::collections::HashSet::new();
    let protected = protected_paths(repo);
    // Where checks run: the checked-out HEAD, and the dependency directories a worktree
    // links to, looked up once for the whole push.
    let head = String::from_utf8_lossy(&repo.git_ok(&["rev-parse", "--verify", "-q", "HEAD"]).unwrap_or_default())
        .trim()
        .to_owned();
    let dependencies = std::cell::OnceCell::new();
    // A push the host carries out to a remote publishes; a broker bringing the session's
    // commits into the user's own repository does not (it says so in the environment
    // of the push it runs, which the agent does not set).
    let bringing_home = repo.host_push && std::env::var_os(hostpush::home::BRINGING_HOME).is_some();
    for update in parse_updates(&stdin) {
        if is_zero(update.local_sha) {
            if repo.settings.allow_branch_deletion {
                continue;
            }
            return Err(refuse(
                format!("the push deletes {} on {remote}", update.remote_ref),
                "leave remote branches alone (or ask the user to allow git.allowBranchDeletion)",
            ));
        }
        pushed_object(repo, &update)?;
        fast_forward(repo, &update, &remote)?;
        // Not new: what the remote has on this branch and on any other.
        let mut on_remote: Vec<String> = Vec::new();
        if !is_zero(update.remote_sha) {
            on_remote.push(update.remote_sha.to_owned());
        }
        let listing = advertised.get_or_insert_with(|| ls_remote(repo, &remote, &url));
        match listing {
            Ok(refs) => on_remote.extend(refs.iter().map(|(sha, _)| sha.clone())),
            // Without the remote's answer, a branch that exists there is checked from its
            // tip there (more, never less); a new one cannot be.
            Err(_) if !is_zero(update.remote_sha) => {}
            Err(refusal) => return Err(refuse(refusal.why.clone(), refusal.instead.clone())),
        }
        let commits = new_commits(repo, update.local_sha, &on_remote)?;
        if !commits.is_empty() {
            // What comes is judged against what is there, whatever merges lie between:
            // a merge that takes an old protected file from the user's own history
            // changes nothing by `--cc`, yet it changes what the checks run.
            let listing = advertised.as_ref().and_then(|listing| listing.as_ref().ok());
            let listing = listing.map_or(&[][..], Vec::as_slice);
            let base = protected_base(&update, listing, bringing_home).map(|base| {
                if bringing_home {
                    base
                } else {
                    as_fetched(repo, base, listing, &remote)
                }
            });
            if let Some(base) = &base {
                protected_since(repo, base, &update, &protected)?;
            }
            if bringing_home {
                no_embedded_repositories(repo, base.as_ref().map(|base| base.sha.as_str()), &update)?;
            }
        }
        for commit in commits {
            if checked.contains(&commit) {
                continue;
            }
            let push = PushOf { head: &head, dependencies: &dependencies, protected: &protected, bringing_home };
            check_new_commit(repo, &push, &commit, update.local_ref)?;
            checked.insert(commit);
        }
    }
    Ok(())
}

/// What one push's new commits are held to, looked up once for it.
struct PushOf<'a> {
    /// The checked-out `HEAD` (checked in place when the work tree is clean).
    head: &'a str,
    /// The dependency directories a worktree links to, listed when first needed.
    dependencies: &'a std::cell::OnceCell<Vec<String>>,
    protected: &'a [String],
    /// The broker's push into the user's repository, not a publication.
    bringing_home: bool,
}

/// Holds one new commit of a push to the protected paths (a commit made anywhere, a
/// scratch clone fetched and fast-forwarded, must not change what pre-commit protects,
/// the checks among them), to its submodules being published (a push the host carries
/// out to a remote), and to the checks, with the user's own hooks replayed in a
/// container (where the session's hooks are the agent's to change).
fn check_new_commit(repo: &Repo, push: &PushOf, commit: &str, local_ref: &str) -> Result<(), Refusal> {
    protected_in_commit(repo, commit, push.protected, local_ref)?;
    if repo.host_push && !push.bringing_home {
        submodules_published(repo, commit, local_ref)?;
    }
    let replay =
        repo.settings.check_user.as_ref().and_then(|user| user.hooks.as_deref()).filter(|_| push.bringing_home);
    if repo.settings.check_commands.is_empty() && replay.is_none() {
        return Ok(());
    }
    check_commit(repo, commit, local_ref, commit == push.head, push.dependencies, &|repo, dir, what| {
        if let Some(hooks) = replay {
            replay_own_hooks(repo, hooks, commit, what)?;
        }
        run_checks(repo, dir, what)
    })
}

/// Refuses an update of an existing remote ref that is not a fast-forward, or whose
/// old value is unknown here.
fn fast_forward(repo: &Repo, update: &Update, remote: &str) -> Result<(), Refusal> {
    if is_zero(update.remote_sha) {
        return Ok(());
    }
    let out = repo.git(&["merge-base", "--is-ancestor", update.remote_sha, update.local_sha])?;
    match out.status.code() {
        Some(0) => Ok(()),
        Some(1) => Err(refuse(
            format!(
                "the push to {} on {remote} is not a fast-forward: it would rewrite remote history",
                update.remote_ref
            ),
            "integrate the remote changes (`git pull --rebase`) and push again, without force",
        )),
        _ => Err(refuse(
            format!(
                "cannot tell whether the push to {} is a fast-forward ({} is unknown here)",
                update.remote_ref,
                &update.remote_sha[..12.min(update.remote_sha.len())]
            ),
            format!("`git fetch {remote}` first, then push again"),
        )),
    }
}

/// What is pushed must be in the project's own object store as the guard's git sees it
/// (the pusher's `GIT_ALTERNATE_OBJECT_DIRECTORIES` is not honoured), or nothing about
/// it could be checked; and a tag must lead to a commit (a tag of a tree or blob
/// carries content no check ever runs on).
fn pushed_object(repo: &Repo, update: &Update) -> Result<(), Refusal> {
    let peeled = format!("{}^{{}}", update.local_sha);
    let out = repo.git(&["cat-file", "-t", &peeled])?;
    let kind = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() {
        return Err(refuse(
            format!(
                "the push of {} sends {}, which is not in the project's own object store (objects borrowed from \
                 elsewhere cannot be checked)",
                update.local_ref,
                &update.local_sha[..12.min(update.local_sha.len())]
            ),
            "push from the project's repository, with its own objects",
        ));
    }
    if kind != "commit" {
        return Err(refuse(
            format!("{} points at a {kind}, not a commit: no check runs on what it carries", update.local_ref),
            "tag commits only",
        ));
    }
    Ok(())
}

/// Refuses a pushed commit that changes a protected path: against its parent, or for a
/// merge, where its result matches none of its parents (`--cc`).
fn protected_in_commit(repo: &Repo, commit: &str, protected: &[String], local_ref: &str) -> Result<(), Refusal> {
    let changed = repo.git_ok(&["diff-tree", "-r", "--root", "--cc", "--no-commit-id", "--name-only", "-z", commit])?;
    if let Some((path, rule)) = first_protected(&changed, protected) {
        return Err(refuse(
            format!(
                "commit {} of {local_ref} changes {path}, which is protected ({rule})",
                &commit[..12.min(commit.len())]
            ),
            format!("leave {rule} as it is: drop that change from the commits you push"),
        ));
    }
    Ok(())
}

/// The first of the NUL-separated paths `changed` that a rule of `protected` covers,
/// with that rule (the path made terminal-safe).
fn first_protected<'a>(changed: &[u8], protected: &'a [String]) -> Option<(String, &'a String)> {
    changed.split(|b| *b == 0).filter(|path| !path.is_empty()).find_map(|path| {
        let path = String::from_utf8_lossy(path);
        let rule = rule_covering(&path, protected)?;
        Some((util::terminal_safe(&path).into_owned(), rule))
    })
}

/// The tip a pushed ref's protected paths are compared with: what the destination has
/// now, and how to name it.
#[derive(Debug, PartialEq, Eq)]
struct Base {
    sha: String,
    what: String,
}

/// What the destination has that the update replaces (`listing`: its advertised refs):
/// the ref's old value; for a ref the broker brings home (`home`: pushed to
/// `refs/agent-sandbox/incoming/<ref>`), the user's value of `<ref>`. For a new ref, the
/// destination's `HEAD` (the user's checked-out branch, or a remote's default branch):
/// its tip, not its merge base with the pushed tip, because a branch started from an
/// old commit of the user's would otherwise keep that commit's lenient checks; a branch
/// started before the user changed a protected file has to take that change first.
/// `None` when the destination has nothing (an empty repository).
fn protected_base(update: &Update, listing: &[(String, String)], home: bool) -> Option<Base> {
    let named = |name: &str| listing.iter().find(|(_, listed)| listed == name).map(|(sha, _)| sha.clone());
    let user_ref = update.remote_ref.strip_prefix(hostpush::home::INCOMING).filter(|_| home);
    let (sha, what) = match user_ref {
        Some(rel) => {
            let name = format!("refs/{rel}");
            match named(&name) {
                Some(sha) => (sha, format!("the user's {name}")),
                None => (named("HEAD")?, "the user's HEAD".to_owned()),
            }
        }
        None if !is_zero(update.remote_sha) => {
            (update.remote_sha.to_owned(), format!("{} on the remote", update.remote_ref))
        }
        None => (named("HEAD")?, REMOTE_HEAD.to_owned()),
    };
    Some(Base { sha, what })
}

/// A remote's `HEAD` the repository has not fetched (teammates pushed since): its
/// default branch as the repository last fetched it (`refs/remotes/<remote>/<branch>`),
/// which the user's own fetch wrote, so that pushing a new branch needs no fetch on the
/// host first; `base` itself when the repository has it, or no such branch.
fn as_fetched(repo: &Repo, base: Base, listing: &[(String, String)], remote: &str) -> Base {
    let has = |sha: &str| repo.git_ok(&["cat-file", "-e", &format!("{sha}^{{commit}}")]).is_ok();
    if base.what != REMOTE_HEAD || has(&base.sha) {
        return base;
    }
    let branches = listing.iter().filter(|(sha, name)| *sha == base.sha && name.starts_with("refs/heads/"));
    for (_, name) in branches {
        let tracking = format!("refs/remotes/{remote}/{}", name.trim_start_matches("refs/heads/"));
        let found = repo.git_ok(&["rev-parse", "-q", "--verify", &format!("{tracking}^{{commit}}")]);
        if let Ok(sha) = found {
            let sha = String::from_utf8_lossy(&sha).trim().to_owned();
            return Base { sha, what: format!("{tracking} (the remote's HEAD as this repository last fetched it)") };
        }
    }
    base
}

/// How [`protected_base`] names the remote's `HEAD` as the base of a new ref.
const REMOTE_HEAD: &str = "the remote's HEAD";

/// Refuses a pushed tip whose protected paths differ from `base`'s.
fn protected_since(repo: &Repo, base: &Base, update: &Update, protected: &[String]) -> Result<(), Refusal> {
    if protected.is_empty() {
        return Ok(());
    }
    let short = &base.sha[..12.min(base.sha.len())];
    let unknown = |refusal: Refusal| {
        let why = format!(
            "cannot compare the protected paths of {} with {} ({short}): {}",
            update.local_ref, base.what, refusal.why
        );
        refuse(why, "have that tip in the repository first (on the host: `git fetch`), then push again")
    };
    let diff = ["diff-tree", "-r", "--no-renames", "--name-only", "-z", &base.sha, update.local_sha];
    let changed = repo.git_ok(&diff).map_err(unknown)?;
    if let Some((path, rule)) = first_protected(&changed, protected) {
        return Err(refuse(
            format!(
                "{} would change {path}, which is protected ({rule}), from what {} has ({short})",
                update.local_ref, base.what
            ),
            format!(
                "keep {rule} as {short} has it, whatever you merge: `git checkout {short} -- {rule}`, commit, \
                 and push again"
            ),
        ));
    }
    Ok(())
}

/// Refuses a tip brought into the user's repository that adds or changes a gitlink whose
/// path in the work tree holds a repository of its own the user's git did not make: a
/// `.git` directory, or a `.git` file that leads anywhere but the user's
/// `.git/modules/`. The user's next `git status` recurses into a submodule and would do
/// what that repository's config says (`core.fsmonitor`). `base`: the user's tip the
/// gitlinks are compared with (`None`: every gitlink of the tip).
fn no_embedded_repositories(repo: &Repo, base: Option<&str>, update: &Update) -> Result<(), Refusal> {
    let listing = match base {
        Some(base) => repo.git_ok(&["diff-tree", "-r", "--no-renames", "-z", base, update.local_sha])?,
        None => repo.git_ok(&["ls-tree", "-r", "-z", "--full-tree", update.local_sha])?,
    };
    // The work tree: where the hook starts, or the project a container's checks name.
    let top = repo.settings.check_user.as_ref().map_or(repo.top.as_path(), |user| user.project.as_path());
    for path in gitlink_paths(&listing, base.is_some()) {
        if let Some(why) = embedded_repository(top, &path) {
            let path = util::terminal_safe(&path).into_owned();
            return Err(refuse(
                format!(
                    "{} adds the submodule {path}, and {path}/.git in the work tree is {why}: the user's git would run \
                     what its config says",
                    update.local_ref
                ),
                format!(
                    "add submodules with `git submodule add <url> {path}` (its repository goes under .git/modules), or \
                     commit {path} as plain files"
                ),
            ));
        }
    }
    Ok(())
}

/// The paths of gitlinks (mode 160000) in `git diff-tree -r -z` output (`diff`: new
/// modes of changed entries) or `git ls-tree -r -z` output.
fn gitlink_paths(listing: &[u8], diff: bool) -> Vec<String> {
    let mut fields = listing.split(|b| *b == 0).filter(|field| !field.is_empty());
    let mut paths = Vec::new();
    if diff {
        while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
            let meta = String::from_utf8_lossy(meta);
            if meta.trim_start_matches(':').split(' ').nth(1) == Some("160000") {
                paths.push(String::from_utf8_lossy(path).into_owned());
            }
        }
    } else {
        for entry in fields {
            let entry = String::from_utf8_lossy(entry);
            if let Some((meta, path)) = entry.split_once('\t') {
                if meta.starts_with("160000 ") {
                    paths.push(path.to_owned());
                }
            }
        }
    }
    paths
}

/// What `path/.git` in the work tree `top` is when it is a repository the user's git
/// did not make (`None`: nothing there, or the `.git` file of a submodule whose
/// repository is the user's, under `.git/modules/`). Read without following a link.
fn embedded_repository(top: &Path, path: &str) -> Option<String> {
    let dir = match util::fs::open_dir_beneath(top, Path::new(path), false) {
        Ok(dir) => dir,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
        Err(err) => return Some(format!("not reachable through real directories ({err})")),
    };
    drop(dir);
    let dot_git = top.join(path).join(".git");
    let meta = match dot_git.symlink_metadata() {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
        Err(err) => return Some(format!("unreadable ({err})")),
        Ok(meta) => meta,
    };
    if meta.is_dir() {
        return Some("a directory (a repository of its own)".to_owned());
    }
    if !meta.is_file() {
        return Some("a link or a special file".to_owned());
    }
    let text = match util::fs::read_regular_nofollow(&dot_git, 4096) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(err) => return Some(format!("unreadable ({err})")),
    };
    let gitdir = text.strip_prefix("gitdir: ").map(str::trim_end).unwrap_or_default();
    let target = gitfacts::normalize(&top.join(path).join(gitdir));
    // The project's git directory: `.git`, or the record a linked worktree's `.git` names.
    let mut git_dirs = vec![top.join(".git")];
    git_dirs.extend(gitfacts::layout(top).map(|layout| layout.git_dir));
    let users = git_dirs.iter().any(|git_dir| {
        let modules = gitfacts::normalize(&git_dir.join("modules"));
        target.strip_prefix(&modules).is_ok_and(|rest| !rest.as_os_str().is_empty())
    });
    match users && !gitdir.is_empty() {
        true => None,
        false => Some(format!("a file that leads to {}", util::terminal_safe(gitdir))),
    }
}

/// A commit published to a remote must not name a submodule commit that no remote of
/// that submodule has (a teammate's `git submodule update` would then fail with `not
/// our ref`): each gitlink the commit changes must be reachable from the user's
/// submodule repository's remote-tracking branches, as `git push
/// --recurse-submodules=check` asks. The submodule repositories are the user's, in the
/// project's common directory (`modules/<name>`), which the agent cannot write.
fn submodules_published(repo: &Repo, commit: &str, local_ref: &str) -> Result<(), Refusal> {
    let changed = repo.git_ok(&["diff-tree", "-r", "--root", "-m", "--no-commit-id", "-z", commit])?;
    let mut fields = changed.split(|b| *b == 0).filter(|field| !field.is_empty());
    let mut gitlinks = Vec::new();
    while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
        let meta = String::from_utf8_lossy(meta);
        // `:old_mode new_mode old_sha new_sha status`
        let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        if parts.len() >= 4 && parts[1] == "160000" {
            gitlinks.push((String::from_utf8_lossy(path).into_owned(), parts[3].to_owned()));
        }
    }
    if gitlinks.is_empty() {
        return Ok(());
    }
    let Some(layout) = gitfacts::layout(&repo.top) else { return Ok(()) };
    let names = repo.git_ok(&[
        "config",
        "--blob",
        &format!("{commit}:.gitmodules"),
        "-z",
        "--get-regexp",
        r"^submodule\..*\.path$",
    ]);
    let names = names.unwrap_or_default();
    for (path, sha) in gitlinks {
        // The submodule's name for this path (`.gitmodules` in the commit), else the path.
        let name = names
            .split(|b| *b == 0)
            .filter_map(|entry| {
                let entry = String::from_utf8_lossy(entry);
                let (key, value) = entry.split_once('\n')?;
                (value == path).then(|| key.trim_start_matches("submodule.").trim_end_matches(".path").to_owned())
            })
            .next()
            .unwrap_or_else(|| path.clone());
        let module = layout.common_dir.join("modules").join(&name);
        let module = module.display().to_string();
        let unpublished = repo.git_ok(&["--git-dir", &module, "rev-list", "-n", "1", &sha, "--not", "--remotes"]);
        let published = unpublished.is_ok_and(|out| out.iter().all(u8::is_ascii_whitespace));
        if !published {
            return Err(refuse(
                format!(
                    "commit {} of {local_ref} points submodule {path} at {}, which no remote of {path} has: a \
                     teammate's `git submodule update` would fail",
                    &commit[..12.min(commit.len())],
                    &sha[..12.min(sha.len())]
                ),
                format!(
                    "have that commit pushed first (on the host: `git -C {path} push origin <its branch>`; a commit made \
                     in the session waits there as refs/agent-sandbox/modules/…), then push again"
                ),
            ));
        }
    }
    Ok(())
}

/// What `url` advertises: object name and ref name, `HEAD` included.
fn ls_remote(repo: &Repo, remote: &str, url: &str) -> Result<Vec<(String, String)>, Refusal> {
    let listing = repo.git_ok(&["ls-remote", "--", url]).map_err(|refusal| {
        refuse(
            format!("cannot ask {remote} which commits it has ({})", refusal.why),
            "check the remote is reachable, then push again",
        )
    })?;
    // The tips a broker kept aside in the user's repository (refused or waiting,
    // `hostpush::home`), and the stash (where a broker puts the session's stash
    // entries), are there unchecked: never what the destination vouches for.
    Ok(String::from_utf8_lossy(&listing)
        .lines()
        .filter_map(|line| line.split_once(char::is_whitespace))
        .map(|(sha, name)| (sha.to_owned(), name.trim().to_owned()))
        .filter(|(_, name)| !name.starts_with("refs/agent-sandbox/") && name != "refs/stash")
        .collect())
}

/// The commits of `tip` to check, oldest first: those the remote does not have, less the
/// user's own history (reachable from the refs when the sandbox started) unless a
/// session made them.
fn new_commits(repo: &Repo, tip: &str, on_remote: &[String]) -> Result<Vec<String>, Refusal> {
    // `^sha` on stdin: `--not` on the command line does not reach what --stdin reads.
    let rev_list = |exclude: &mut dyn Iterator<Item = &String>| -> Result<Vec<String>, Refusal> {
        let input: Vec<u8> = exclude.flat_map(|sha| format!("^{sha}\n").into_bytes()).collect();
        let args = ["rev-list", "--reverse", "--ignore-missing", tip, "--stdin"];
        let out = repo.git_with_input(&args, &input)?;
        Ok(String::from_utf8_lossy(&out).lines().map(str::to_owned).collect())
    };
    let mut commits = rev_list(&mut on_remote.iter())?;
    let settings = &repo.settings;
    if !settings.known_commits.is_empty() {
        let not_known: std::collections::HashSet<String> =
            rev_list(&mut on_remote.iter().chain(&settings.known_commits))?.into_iter().collect();
        let agents: std::collections::HashSet<&String> = settings.agent_commits.iter().collect();
        commits.retain(|commit| not_known.contains(commit) || agents.contains(commit));
    }
    Ok(commits)
}

/// How long listing the work tree's dependency directories may take.
const DEPENDENCY_LISTING: std::time::Duration = std::time::Duration::from_secs(20);

/// Runs the checks on `commit`: in place when it is the checked-out HEAD and the work
/// tree is clean (the project's dependencies are there), else in a temporary worktree of
/// it that links to the project's dependency directories (`dependencies`: listed once
/// for a whole push). For a push the host carries out, always in the worktree its
/// settings name (a directory only the host and the checks' sandbox see; the agent can
/// change the work tree while the checks run, and its processes are in another pid
/// namespace).
fn check_commit(
    repo: &Repo,
    commit: &str,
    local_ref: &str,
    is_head: bool,
    dependencies: &std::cell::OnceCell<Vec<String>>,
    run: &dyn Fn(&Repo, &Path, &str) -> Result<(), Refusal>,
) -> Result<(), Refusal> {
    let short = &commit[..12.min(commit.len())];
    let what = format!("commit {short} of {local_ref}");
    let user = repo.settings.check_user.as_ref().filter(|_| repo.host_push);
    let host_worktree = match (&repo.settings.check_sandbox, user) {
        _ if !repo.host_push => None,
        (Some(sandbox), _) => Some(&sandbox.worktree),
        (None, Some(user)) => Some(&user.worktree),
        (None, None) => None,
    };
    if is_head && host_worktree.is_none() {
        let status =
            repo.git_ok(&["status", "--porcelain", "-z", "--untracked-files=normal", "--ignore-submodules=none"])?;
        if status.is_empty() {
            return run(repo, &repo.top, &what);
        }
    }
    let tmp;
    let worktree = match host_worktree {
        Some(worktree) => worktree.clone(),
        None => {
            tmp = tempfile::Builder::new().prefix("agent-sandbox-check-").tempdir().map_err(|err| {
                refuse(format!("cannot create a temporary worktree: {err}"), "free some space in /tmp")
            })?;
            tmp.path().join("worktree")
        }
    };
    let worktree_text = worktree.display().to_string();
    let remove = || {
        match user {
            // The checks' user could have left anything in the worktree (a `.git` of its
            // own among it): root's git does not go in; the directory goes, links not
            // followed, and `prune` drops the record.
            Some(user) => {
                util::users::kill_all(user.uid, std::time::Duration::from_secs(10));
            }
            None => {
                let _ = repo.git(&["worktree", "remove", "--force", &worktree_text]);
            }
        }
        let _ = std::fs::remove_dir_all(&worktree);
        let _ = repo.git(&["worktree", "prune"]);
    };
    // A worktree an interrupted push left there.
    remove();
    // The whole tree: a sparse-checkout file would leave paths out of the checks.
    repo.git_ok(&[
        "-c",
        "core.sparseCheckout=false",
        "worktree",
        "add",
        "--detach",
        "--quiet",
        &worktree_text,
        commit,
    ])?;
    match user {
        Some(user) => {
            let given = std::fs::read_dir(&worktree).and_then(|entries| {
                std::os::unix::fs::lchown(&worktree, Some(user.uid), Some(user.gid))?;
                for entry in entries {
                    let entry = entry?;
                    if entry.file_name() == ".git" {
                        continue;
                    }
                    give_to_entry(&entry, user.uid, user.gid)?;
                }
                Ok(())
            });
            if let Err(err) = given {
                remove();
                return Err(refuse(
                    format!("cannot give the worktree of {what} to the checks' user: {err}"),
                    "push again (nothing was pushed)",
                ));
            }
            link_dependencies(&user.project, &worktree, &user.dependencies);
        }
        None => link_dependencies(&repo.top, &worktree, dependencies.get_or_init(|| dependency_dirs(repo))),
    }
    let result = run(repo, &worktree, &what);
    remove();
    result
}

/// The ignored dependency directories of the work tree (`node_modules`, `.venv`, …, at
/// any depth git lists them), relative to its top.
fn dependency_dirs(repo: &Repo) -> Vec<String> {
    let spawned = repo
        .project_command(&["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(child) = spawned else { return Vec::new() };
    // The work tree is the agent's: a FIFO where git looks for a nested repository would
    // hold the listing, and the push (or the broker, at the session's end) with it.
    let pid = child.id();
    let listed = util::within(DEPENDENCY_LISTING, move || child.wait_with_output());
    let listing = match listed {
        Some(Ok(out)) if out.status.success() => out.stdout,
        Some(_) => return Vec::new(),
        None => {
            // SAFETY: kill(2) on a child that is not reaped yet (its waiter is blocked).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            eprintln!(
                "agent-sandbox: note: the project's dependency directories could not be listed within {} s (a FIFO \
                 in the work tree?): the checks run without them",
                DEPENDENCY_LISTING.as_secs()
            );
            return Vec::new();
        }
    };
    listing
        .split(|b| *b == 0)
        .filter_map(|entry| String::from_utf8_lossy(entry).strip_suffix('/').map(str::to_owned))
        .filter(|dir| {
            Path::new(dir)
                .file_name()
                .is_some_and(|name| guard_settings::DEPENDENCY_DIRS.iter().any(|dep| name == *dep))
        })
        .collect()
}

/// Links each of `dirs` (relative to `top`) into `worktree`, where the commit has
/// nothing there. Both sides are the agent's to shape (the work tree, and the commit
/// checked out in the worktree), so neither is followed through a link: a directory is
/// linked only when it is a real one in the project reached through real directories,
/// and the link and its parents are made beneath `worktree` without following one (a
/// committed link `a` to `~/.local` never leads host code, or a container's root, to
/// make `~/.local/lib/node_modules`). One rule for every mode: the host's checks and a
/// container's verifier.
fn link_dependencies(top: &Path, worktree: &Path, dirs: &[String]) {
    for dir in dirs {
        if util::fs::open_dir_beneath(top, Path::new(dir), false).is_err() {
            continue;
        }
        match util::fs::symlink_beneath(worktree, Path::new(dir), &top.join(dir)) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(err) => eprintln!(
                "agent-sandbox: note: the checks run without {} ({}): the commit has a link or a file on its path",
                util::terminal_safe(dir),
                err
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZERO: &str = "0000000000000000000000000000000000000000";

    /// The script, run by a real shell: the chained original with `$0` as git gives it,
    /// git's arguments and refs; a plain hook; the guard's shim alone runs nothing.
    #[test]
    fn own_hook_script_runs_the_hook_git_would() {
        let dir = tempfile::tempdir().expect("tempdir");
        let hook = dir.path().join("pre-push");
        let chained = dir.path().join(format!("pre-push{}", hookinstall::CHAINED_SUFFIX));
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).expect("mkdir");
        let git = Command::new("sh").args(["-c", "git init -q && git read-tree --empty"]).current_dir(&repo).status();
        assert!(git.expect("git").success());
        let run = |script: &str| {
            let out = Command::new("/bin/sh").args(["-c", script]).current_dir(&repo).output().expect("sh");
            (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
        };
        let set = |path: &Path, text: &str| {
            std::fs::write(path, text).expect("write");
            std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        };
        let refs = "refs/heads/it's 1111 refs/heads/main 0000\n";
        let args = ["origin".to_owned(), "/srv/it's.git".to_owned()];
        let script = own_hook_script(&hook, &args, refs);
        set(&hook, &format!("#!/bin/sh\n{}\nexit 0\n", hookinstall::MARKER));
        assert_eq!(run(&script), (Some(0), String::new()), "the shim alone: nothing runs");
        set(&chained, "#!/bin/sh\necho \"$0|$1|$2\"; cat; exit 3\n");
        assert_eq!(run(&script), (Some(3), format!("{}|origin|/srv/it's.git\n{refs}", hook.display())));
        std::fs::remove_file(&chained).expect("rm");
        set(&hook, "#!/bin/sh\necho plain \"$1\"; exit 4\n");
        assert_eq!(run(&script), (Some(4), "plain origin\n".to_owned()));
    }

    /// The replay, run by a real shell in a real worktree: the hooks see the commit's
    /// changes staged over its first parent (all of them for a root commit) and its
    /// message; a failing hook, or one that changes files, refuses; the guard's shim
    /// alone runs nothing.
    #[test]
    fn replay_script_runs_the_users_hooks_as_git_commit_would() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (repo, hooks, tree) = (dir.path().join("repo"), dir.path().join("hooks"), dir.path().join("tree"));
        std::fs::create_dir_all(&repo).expect("mkdir");
        std::fs::create_dir_all(&hooks).expect("mkdir");
        let sh = |script: &str, cwd: &Path| {
            let out = Command::new("/bin/sh").args(["-c", script]).current_dir(cwd).output().expect("sh");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
            )
        };
        let git = "git -c user.name=u -c user.email=u@x.invalid";
        let made = sh(
            &format!(
                "git init -q && echo a > a && git add a && {git} commit -qm root && echo b > b && git add b \
                 && {git} commit -qm 'feat: b' && git worktree add -q --detach {} HEAD",
                tree.display()
            ),
            &repo,
        );
        assert_eq!(made.0, Some(0), "{}", made.1);
        let rev = |name: &str| sh(&format!("git rev-parse {name}"), &repo).1.trim().to_owned();
        let (root, tip) = (rev("HEAD~1"), rev("HEAD"));
        let set = |name: &str, text: &str| {
            let path = hooks.join(name);
            std::fs::write(&path, text).expect("write");
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        };
        let replay = |commit: &str, parent: Option<&str>| sh(&replay_script(&hooks, commit, parent, None), &tree);
        set("pre-commit", &format!("#!/bin/sh\n{}\nexit 1\n", hookinstall::MARKER));
        assert_eq!(replay(&tip, Some(&root)).0, Some(0), "the shim alone: nothing runs");
        set("pre-commit", "#!/bin/sh\ntest \"$(git diff --cached --name-only)\" = b\n");
        set("commit-msg", "#!/bin/sh\ngrep -q '^feat: ' \"$1\"\n");
        assert_eq!(replay(&tip, Some(&root)), (Some(0), String::new()), "b staged, the message given");
        let failed = replay(&tip, None);
        assert_eq!(failed.0, Some(1), "a root commit stages everything: a and b");
        assert!(failed.1.contains("your pre-commit hook failed"), "{}", failed.1);
        set("commit-msg", "#!/bin/sh\ngrep -q '^fix: ' \"$1\"\n");
        let failed = replay(&tip, Some(&root));
        assert!(failed.0 == Some(1) && failed.1.contains("your commit-msg hook failed"), "{}", failed.1);
        std::fs::remove_file(hooks.join("commit-msg")).expect("rm");
        set("pre-commit", "#!/bin/sh\necho formatted >> b\n");
        let failed = replay(&tip, Some(&root));
        assert!(failed.0 == Some(1) && failed.1.contains("changed the commit's files"), "{}", failed.1);
        // Nothing of the replay is left in the worktree's records.
        assert_eq!(sh("git status --porcelain", &tree).1, " M b\n");
        assert_eq!(sh("git rev-parse HEAD", &tree).1.trim(), tip);
    }

    #[test]
    fn pre_push_lines_parse() {
        let input = format!("refs/heads/main 1111 refs/heads/main 2222\nrefs/heads/x {ZERO} refs/heads/x 3333\n\n");
        let updates = parse_updates(&input);
        assert_eq!(
            updates,
            [
                Update {
                    local_ref: "refs/heads/main",
                    local_sha: "1111",
                    remote_ref: "refs/heads/main",
                    remote_sha: "2222"
                },
                Update { local_ref: "refs/heads/x", local_sha: ZERO, remote_ref: "refs/heads/x", remote_sha: "3333" },
            ]
        );
        assert!(is_zero(ZERO) && !is_zero("0001"));
    }

    /// What a pushed ref is compared with: the ref's old value; for the broker, the
    /// user's ref behind the incoming one; for a new ref, the destination's `HEAD`;
    /// nothing in an empty destination.
    #[test]
    fn protected_paths_are_compared_with_what_the_destination_has() {
        let listing = [("1111".to_owned(), "HEAD".to_owned()), ("2222".to_owned(), "refs/heads/main".to_owned())];
        let update =
            |remote_ref, remote_sha| Update { local_ref: "refs/heads/main", local_sha: "3333", remote_ref, remote_sha };
        let base = |sha: &str, what: &str| Some(Base { sha: sha.into(), what: what.into() });
        let cases = [
            (update("refs/heads/main", "4444"), false, base("4444", "refs/heads/main on the remote")),
            (update("refs/heads/new", ZERO), false, base("1111", "the remote's HEAD")),
            (update("refs/agent-sandbox/incoming/heads/main", ZERO), true, base("2222", "the user's refs/heads/main")),
            (update("refs/agent-sandbox/incoming/heads/new", ZERO), true, base("1111", "the user's HEAD")),
            // Only the broker's push names a user's ref by the incoming one.
            (update("refs/agent-sandbox/incoming/heads/main", ZERO), false, base("1111", "the remote's HEAD")),
        ];
        for (update, home, expected) in cases {
            assert_eq!(protected_base(&update, &listing, home), expected, "{update:?}");
        }
        assert_eq!(protected_base(&update("refs/heads/new", ZERO), &[], false), None);
    }

    #[test]
    fn gitlinks_are_found_in_diffs_and_listings() {
        let diff =
            b":000000 160000 0000 aaaa A\0sub\0:100644 100644 bbbb cccc M\0file\0:160000 160000 dddd eeee M\0lib/x\0";
        assert_eq!(gitlink_paths(diff, true), ["sub", "lib/x"]);
        let tree = b"160000 commit aaaa\tsub\x00100644 blob bbbb\tfile\x00";
        assert_eq!(gitlink_paths(tree, false), ["sub"]);
    }

    #[test]
    fn raw_diff_entries() {
        let raw = b":000000 100644 0000000000000000000000000000000000000000 e69de29bb2d1d6434b8b29ae775ad8c2e48c5391 A\0we ird\0\
:100755 000000 1111111111111111111111111111111111111111 0000000000000000000000000000000000000000 D\0.husky/pre-commit\0\
:100644 120000 2222222222222222222222222222222222222222 3333333333333333333333333333333333333333 T\0link\xff\0";
        let entry = |status: &str, path: &[u8], mode: &str, blob: &str| Staged {
            status: status.into(),
            path: String::from_utf8_lossy(path).into_owned(),
            raw_path: path.to_vec(),
            mode: mode.into(),
            blob: blob.into(),
        };
        let fields: Vec<&[u8]> = raw.split(|b| *b == 0).collect();
        let parsed: Vec<Staged> = fields.chunks(2).filter_map(|pair| parse_record(pair[0], pair.get(1)?)).collect();
        assert_eq!(
            parsed,
            [
                entry("A", b"we ird", "100644", "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"),
                entry("D", b".husky/pre-commit", "000000", "0000000000000000000000000000000000000000"),
                entry("T", b"link\xff", "120000", "3333333333333333333333333333333333333333"),
            ]
        );
    }

    #[test]
    fn added_lines_only_and_the_right_file() {
        let diff = "diff --git a/x b/x\n--- a/x\n+++ b/config/x.env\n@@ -1 +1 @@\n-AKIAIOSFODNN7EXAMPLE\n+ok\n+k=AKIAIOSFODNN7EXAMPL2\n";
        let found = secrets_in_diff(diff);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "config/x.env");
    }
}
