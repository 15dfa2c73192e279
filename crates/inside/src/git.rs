//! The `@git` command preset: what runs inside the sandbox when anything executes git
//! (`git`, a dashed builtin from git's exec-path, an absolute path to either). It reads
//! the repository's configuration with gix (only when a rule needs it: aliases, push
//! settings), asks `gitguard` for a verdict on the command line, then checks the outcome
//! for commands that run hooks: the repository and its effective hooks directory must be
//! the ones in force when the sandbox started (which catches what no command-line
//! judge sees: a `HOME` or `XDG_CONFIG_HOME` with another config, a fake `--git-dir`
//! sharing the real refs). It then execs the real git with the original arguments and
//! environment, or refuses with one message for the agent and an audit entry.

use std::{
    cell::OnceCell,
    collections::BTreeMap,
    ffi::OsString,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::Command,
};

use gitfacts::{repo_facts, repo_facts_of, RepoFacts};
use gitguard::{ConfigView, GuardOptions, Refusal, Request, Verdict};
use guard_settings::GitGuardSettings;
use runtime_layout::RuntimeLayout;

/// Exit status of a refused git command.
pub const REFUSED: i32 = 1;

/// Git subcommands that run hooks, whose repository is checked before they run.
const HOOKED: &[&str] = &["commit", "merge", "pull", "am", "rebase", "push", "cherry-pick", "revert"];

/// The settings `exec` wrote into the runtime directory (the strictest when they are
/// missing or unusable), as the judge's options and the project's facts at start.
fn load_options(run: &RuntimeLayout) -> (GuardOptions, Option<RepoFacts>) {
    let settings = GitGuardSettings::read(&run.git_guard_settings());
    let options = GuardOptions {
        allow_branch_deletion: settings.allow_branch_deletion,
        allow_plumbing_commits: settings.allow_plumbing_commits,
        global_config: settings.global_config,
        quiet_env: settings.quiet_env,
    };
    let hooks_path = settings.hooks_path;
    let facts = settings.common_dir.map(|common_dir| RepoFacts { common_dir, hooks_path });
    (options, facts)
}

/// For commands that run hooks: refuses when git would use other hooks than at start,
/// or another git directory that writes the project's refs.
fn check_repository(request: &Request<'_>, start_dir: &Path, project: &RepoFacts) -> Option<Refusal> {
    let parsed = gitguard::parse(request).ok()?;
    let subcommand = parsed.subcommand.as_deref()?;
    if !HOOKED.contains(&subcommand) {
        return None;
    }
    let now = match &parsed.git_dir {
        Some(git_dir) => repo_facts_of(&gix::open(start_dir.join(git_dir)).ok()?),
        None => repo_facts(start_dir)?,
    };
    let what = format!("git {subcommand}");
    if now.common_dir == project.common_dir {
        if now.hooks_path == project.hooks_path {
            return None;
        }
        let show = |path: &Option<PathBuf>| match path {
            Some(path) => path.display().to_string(),
            None => format!("{}/hooks", project.common_dir.display()),
        };
        return Some(Refusal {
            rule: "hooks-redirected",
            what,
            why: format!(
                "git would run the hooks in {} instead of the repository's {} (the configuration it reads was changed)",
                show(&now.hooks_path),
                show(&project.hooks_path)
            ),
            instead: "run git with the repository's own configuration (no other HOME, XDG_CONFIG_HOME or config files) and let the hooks run".into(),
        });
    }
    // Another repository (a submodule, a scratch repo): fine, unless it writes the
    // project's own refs (its refs directory, packed-refs or HEAD, through links).
    let project_refs =
        [project.common_dir.join("refs"), project.common_dir.join("packed-refs"), project.common_dir.join("HEAD")];
    let shares_refs = ["refs", "refs/heads", "packed-refs", "HEAD"].iter().any(|entry| {
        now.common_dir.join(entry).canonicalize().is_ok_and(|real| project_refs.iter().any(|own| real.starts_with(own)))
    });
    shares_refs.then(|| Refusal {
        rule: "foreign-git-dir",
        what,
        why: format!(
            "{} is another git directory wired to the project's refs, so its commits would land on the project's branches without the project's hooks",
            now.common_dir.display()
        ),
        instead: "work in the project's repository itself and let its hooks run".into(),
    })
}

/// Runs the guard for `git ARGS` (a dashed invocation arrives already turned into
/// `git SUB ARGS`); returns only when git was not exec'd.
pub fn run(args: &[OsString]) -> i32 {
    let run = RuntimeLayout::inside();
    let (options, project) = load_options(&run);
    guard(&run.bin("git"), &options, project.as_ref(), args, PushRoute::Direct)
}

/// What a git command would record in the repository's config, if it would: the sandbox
/// mounts `.git/config` read-only, and git's own error about it is cryptic.
fn writes_repo_config(parsed: &gitguard::Parsed) -> Option<&'static str> {
    let args: Vec<&str> = parsed.args.iter().map(String::as_str).collect();
    let has = |flags: &[&str]| {
        args.iter().any(|arg| flags.iter().any(|flag| *arg == *flag || arg.starts_with(&format!("{flag}="))))
    };
    match parsed.subcommand.as_deref()? {
        "push" if has(&["-u", "--set-upstream"]) => Some("the upstream branch"),
        "branch" if has(&["-u", "--set-upstream-to", "--unset-upstream", "-t", "--track"]) => {
            Some("the upstream branch")
        }
        "branch" if has(&["-m", "-M", "--move", "-c", "-C", "--copy", "--edit-description"]) => {
            Some("the branch's settings")
        }
        "checkout" | "switch" if has(&["-t", "--track"]) => Some("the upstream branch"),
        "remote"
            if args.first().is_some_and(|sub| {
                ["add", "rename", "remove", "rm", "set-url", "set-branches", "set-head"].contains(sub)
            }) =>
        {
            Some("the remote")
        }
        "config"
            if !has(&[
                "--get",
                "--get-all",
                "--get-regexp",
                "-l",
                "--list",
                "--global",
                "--system",
                "-f",
                "--file",
            ]) && !args.first().is_some_and(|sub| ["get", "list"].contains(sub))
                && args.len() >= 2 =>
        {
            Some("the setting")
        }
        _ => None,
    }
}

pub use runtime_layout::CONTAINER_REAL_GIT;

/// The guard in a container (`/.agent-sandbox` marker, this binary installed as git):
/// settings come from the root-owned `/etc/agent-sandbox` only, and since no start
/// snapshot exists, the outcome check compares with the repository as a clean
/// environment shows it.
pub fn run_in_container(args: &[OsString]) -> i32 {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 && std::env::var_os(hostpush::checks::VERIFIER_VAR).is_some() {
        // The push verifier's git (root: the agent's user reaches root only through the
        // image's exact sudo rules), and the git commands git itself runs for it through
        // this entry point: its `-c core.hooksPath` is on purpose.
        return exec_real(Path::new(CONTAINER_REAL_GIT), args, &[]);
    }
    let start = start_dir(args);
    let (options, verified_push) = match config::load_for_container() {
        Ok(config) => (
            GuardOptions {
                allow_branch_deletion: config.git_allow_branch_deletion.value,
                allow_plumbing_commits: config.git_allow_plumbing_commits.value,
                global_config: None,
                quiet_env: Vec::new(),
            },
            config.git_verified_push.value,
        ),
        // An unreadable config means the strictest settings: no push but the verifier's.
        _ => (GuardOptions::default(), true),
    };
    let project = clean_repo_facts(&start);
    let route = if verified_push { PushRoute::Verifier } else { PushRoute::Direct };
    guard(Path::new(CONTAINER_REAL_GIT), &options, project.as_ref(), args, route)
}

/// Where a `git push` the guard lets through goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PushRoute {
    /// The real git, as the agent's user (bwrap: the host's push service when its socket
    /// is there).
    Direct,
    /// A container's verifier (`git.verifiedPush`): root, through the image's sudo rule.
    Verifier,
}

/// The variables through which an invocation can make git read another configuration
/// or repository; [`clean_repo_facts`] reads the repository without them.
const REDIRECTING_VARS: &[&str] = &[
    "XDG_CONFIG_HOME",
    "GIT_DIR",
    "GIT_COMMON_DIR",
    "GIT_WORK_TREE",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS",
];

/// [`repo_facts`] as the user's own setup shows them: `HOME` from the password database,
/// none of [`REDIRECTING_VARS`]. The process is single-threaded here, so changing its
/// environment for the duration of the read is safe; it is restored afterwards.
fn clean_repo_facts(start: &Path) -> Option<RepoFacts> {
    let saved: Vec<(&str, Option<OsString>)> = std::iter::once("HOME")
        .chain(REDIRECTING_VARS.iter().copied())
        .map(|name| (name, std::env::var_os(name)))
        .collect();
    for name in REDIRECTING_VARS {
        std::env::remove_var(name);
    }
    if let Some(home) = util::passwd_home() {
        std::env::set_var("HOME", home);
    }
    let facts = repo_facts(start);
    for (name, value) in saved {
        match value {
            Some(value) => std::env::set_var(name, value),
            None => std::env::remove_var(name),
        }
    }
    facts
}

fn guard(real: &Path, options: &GuardOptions, project: Option<&RepoFacts>, args: &[OsString], route: PushRoute) -> i32 {
    let argv0 = "git";
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let start = start_dir(args);
    let config = RepoConfig { start: start.clone(), values: OnceCell::new() };
    let request = Request { argv0, args, env: &env, config: &config, options };
    let mut verdict = gitguard::judge(&request);
    if let (Verdict::Run { .. }, Some(project)) = (&verdict, project) {
        if let Some(refusal) = check_repository(&request, &start, project) {
            verdict = Verdict::Refuse(refusal);
        }
    }
    match verdict {
        Verdict::Run { strip_env, notices } => {
            for notice in notices {
                eprintln!("agent-sandbox: {notice}");
            }
            let inside = RuntimeLayout::inside();
            let parsed = gitguard::parse(&request).ok();
            if let Some(parsed) = parsed.as_ref().filter(|parsed| parsed.subcommand.as_deref() == Some("push")) {
                if inside.push_socket().exists() {
                    return push_elsewhere(Some(&inside.push_socket()), parsed, &start, args);
                }
                if route == PushRoute::Verifier {
                    return push_elsewhere(None, parsed, &start, args);
                }
            }
            if project.is_some() && inside.marker().exists() {
                if let Some(what) = parsed.as_ref().and_then(writes_repo_config) {
                    eprintln!(
                        "agent-sandbox: note: .git/config is read-only in this sandbox, so {what} will not be recorded \
                         (git may print an error about the config file; push with an explicit `git push origin <branch>`)"
                    );
                }
            }
            // The agent's git is its own (`hostpush::home`): in a container, or under
            // `exec` (the runtime directory's `user-git`).
            let broker = if inside.user_git().is_dir() {
                Some(Broker::Exec { socket: inside.push_socket(), cwd: start.clone() })
            } else if Path::new(runtime_layout::CONTAINER_USER_OBJECTS).is_dir() {
                Some(Broker::Container)
            } else {
                None
            };
            if let Some(broker) = &broker {
                show_told(broker);
            }
            let moves = parsed.as_ref().is_some_and(|parsed| moves_refs(parsed) && parsed.git_dir.is_none());
            // Without a session repository (`exec` with it off, no `@git`, a layout that
            // cannot have one) the user's git directories are read-only here, and git's
            // own error says only "Read-only file system".
            if broker.is_none() && moves && inside.marker().exists() {
                let dot_git = start.ancestors().map(|dir| dir.join(".git")).find(|dot_git| dot_git.exists());
                if let Some(dot_git) = dot_git.filter(|dot_git| util::fs::on_read_only_mount(dot_git)) {
                    eprintln!(
                        "agent-sandbox: note: {} is read-only in this sandbox: there is no session repository \
                         (`git.sessionRepository` is off, the @git preset is off, or the repository's layout cannot \
                         have one), so git here reads the history but cannot commit; the user commits outside",
                        dot_git.display()
                    );
                }
            }
            if let Some(broker) = broker.filter(|_| moves) {
                return run_then_bring_home(real, args, &strip_env, &broker);
            }
            exec_real(real, args, &strip_env)
        }
        // Silently, as git would have succeeded (husky's `prepare` on every `npm install`).
        Verdict::Unchanged { .. } => 0,
        Verdict::Refuse(refusal) => {
            if refusal.rule == "no-verify" && spawned_by_git_sequencer(real) {
                // `git rebase`/`cherry-pick`/`revert` run `git commit -n` themselves.
                return exec_real(real, args, &[]);
            }
            if refusal.rule == "plumbing-push" && spawned_by_git_transport(real) {
                // `git fetch`/`clone`/`ls-remote` over http run `git remote-https`, and a
                // push over http has it run `git send-pack`: git's own transport, for a
                // command the guard already judged.
                return exec_real(real, args, &[]);
            }
            eprintln!("{refusal}");
            let target = format!("git {}", args.iter().map(|arg| arg.to_string_lossy()).collect::<Vec<_>>().join(" "));
            let event = audit::Event::new("git", "exec", &target, "blocked", refusal.rule, Some(refusal.why.clone()));
            audit::send(&event);
            REFUSED
        }
    }
}

/// A push inside a bwrap sandbox leaves only through the host's push service (at
/// `socket`), and in a container with `git.verifiedPush` only through the verifier
/// (`None`): from the project's repository, as they decide (another `--git-dir`, work
/// tree or common directory is refused here already, so the request cannot say one
/// thing and mean another).
fn push_elsewhere(socket: Option<&Path>, parsed: &gitguard::Parsed, start: &Path, args: &[OsString]) -> i32 {
    if parsed.git_dir.is_some() || parsed.work_tree.is_some() || parsed.common_dir.is_some() {
        let refusal = Refusal {
            rule: "push-elsewhere",
            what: "git push".into(),
            why: "pushes leave only once checked, from the project's own repository, and this one names another git \
                  directory or work tree (--git-dir, --work-tree, GIT_DIR, GIT_WORK_TREE or GIT_COMMON_DIR)"
                .into(),
            instead: "push from the project's repository itself, without those options or variables".into(),
        };
        eprintln!("{refusal}");
        let target = format!("git {}", args.iter().map(|arg| arg.to_string_lossy()).collect::<Vec<_>>().join(" "));
        audit::send(&audit::Event::new("git", "exec", &target, "blocked", refusal.rule, Some(refusal.why.clone())));
        return REFUSED;
    }
    match socket {
        Some(socket) => crate::push::forward(socket, start, &parsed.args),
        None => crate::push::verify(start, &parsed.args),
    }
}

/// The subcommands that may move a branch, a tag or `HEAD`.
const MOVES_REFS: &[&str] = &[
    "commit",
    "stash",
    "merge",
    "rebase",
    "reset",
    "cherry-pick",
    "revert",
    "am",
    "pull",
    "fetch",
    "branch",
    "tag",
    "checkout",
    "switch",
    "update-ref",
    "symbolic-ref",
];

fn moves_refs(parsed: &gitguard::Parsed) -> bool {
    parsed.subcommand.as_deref().is_some_and(|sub| MOVES_REFS.contains(&sub))
}

/// In a container with a session repository (`hostpush::home`): git, then the broker
/// (root, through the image's sudo rule) in the background, which brings what the
/// command committed into the user's repository through the checks within about a
/// second. Git's status is the command's; what the broker says is shown after it, in a
/// container once the sync ends within [`TOLD_WAIT`] (else, and under `exec`, whose
/// broker gathers a burst of commands into one sync, at the next git command:
/// [`show_told`]), so that a loop of commits does not wait long for the checks.
fn run_then_bring_home(real: &Path, args: &[OsString], strip_env: &[String], broker: &Broker) -> i32 {
    let mut command = Command::new(real);
    command.arg0("git").args(args);
    for name in strip_env {
        command.env_remove(name);
    }
    let status = match command.status() {
        Ok(status) => status,
        Err(err) => {
            eprintln!("agent-sandbox: cannot run git ({}): {err}", real.display());
            return 126;
        }
    };
    let asked = match broker {
        Broker::Container => bring_home_later().map(|mut sync| {
            let deadline = std::time::Instant::now() + TOLD_WAIT;
            while matches!(sync.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            show_told(broker);
        }),
        Broker::Exec { socket, cwd } => crate::push::ask_home(socket, cwd),
    };
    if let Err(err) = asked {
        eprintln!("agent-sandbox: cannot start the broker ({err}): your commits come home at the next git command");
    }
    status.code().unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0))
}

/// Who brings the session repository's work home.
enum Broker {
    /// Root, through the image's sudo rule (`git-home sync`).
    Container,
    /// The `exec` process on the host, asked on the push socket.
    Exec { socket: PathBuf, cwd: PathBuf },
}

impl Broker {
    /// Where what it told is kept.
    fn told(&self) -> PathBuf {
        match self {
            Broker::Container => PathBuf::from(runtime_layout::CONTAINER_BROKER_TOLD),
            Broker::Exec { .. } => RuntimeLayout::inside().told(),
        }
    }
}

/// Starts `git-home sync` detached (its own session, so sudo sees no terminal), with
/// [`hostpush::home::LATER`] already in its stdin.
fn bring_home_later() -> std::io::Result<std::process::Child> {
    use std::io::Write as _;
    let (reader, mut writer) = std::io::pipe()?;
    writer.write_all(hostpush::home::LATER)?;
    drop(writer);
    let mut command = Command::new("/usr/bin/sudo");
    command
        .args(["-n", "/usr/local/bin/agent-sandbox", "git-home", "sync"])
        .stdin(reader)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: setsid is async-signal-safe and touches no memory of this process.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    command.spawn()
}

/// How long a git command waits for the sync it started before it ends: what the broker
/// says about it then comes right after the command's own output, not at the next git
/// command; a sync the checks make longer is not waited for (its lines come next time).
const TOLD_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Shows the lines the broker told since this user last saw them (the last number seen
/// is kept in the cache directory's `broker-told`). Never fails the git command.
fn show_told(broker: &Broker) {
    // Root (the broker's own git calls) and a user without a home (the checks' user)
    // are told nothing, and read nothing for it.
    // SAFETY: geteuid has no preconditions.
    if matches!(broker, Broker::Container) && unsafe { libc::geteuid() } == 0 {
        return;
    }
    let Some(home) = std::env::var_os("HOME").filter(|home| Path::new(home).is_dir()) else { return };
    let Ok(bytes) = util::fs::read_regular_nofollow(&broker.told(), 4 << 20) else {
        return;
    };
    let seen_file = util::dirs::cache(Path::new(&home)).join("broker-told");
    let seen: u64 = util::fs::read_regular_nofollow(&seen_file, 64)
        .ok()
        .and_then(|bytes| String::from_utf8_lossy(&bytes).trim().parse().ok())
        .unwrap_or(0);
    let told = hostpush::home::parse_told(&bytes);
    let new: Vec<&hostpush::home::Told> = told.iter().filter(|told| told.seq > seen).collect();
    let Some(last) = new.last().map(|told| told.seq) else { return };
    for told in &new {
        eprintln!("agent-sandbox: {}", util::terminal_safe(&told.text));
    }
    if let Some(dir) = seen_file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = util::fs::atomic_write(&seen_file, format!("{last}\n").as_bytes(), 0o600);
}

fn exec_real(real: &Path, args: &[OsString], strip_env: &[String]) -> i32 {
    let mut command = Command::new(real);
    command.arg0("git").args(args);
    for name in strip_env {
        command.env_remove(name);
    }
    let err = command.exec();
    eprintln!("agent-sandbox: cannot run git ({}): {err}", real.display());
    126
}

/// Where git would start looking for the repository: the cwd after any `-C` options
/// before the subcommand. (`--git-dir` and `GIT_DIR` are honoured by gix itself.)
fn start_dir(args: &[OsString]) -> PathBuf {
    let mut dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let text = arg.to_string_lossy();
        if text == "-C" {
            if let Some(path) = iter.next() {
                dir = dir.join(path);
            }
        } else if text == "-c" || text == "--config-env" {
            iter.next();
        } else if !text.starts_with('-') {
            break;
        }
    }
    dir
}

/// The repository's configuration, read on first use.
struct RepoConfig {
    start: PathBuf,
    values: OnceCell<BTreeMap<String, Vec<String>>>,
}

impl ConfigView for RepoConfig {
    fn get_all(&self, key: &str) -> Vec<String> {
        self.values().get(key).cloned().unwrap_or_default()
    }

    fn keys(&self) -> Vec<String> {
        self.values().keys().cloned().collect()
    }
}

impl RepoConfig {
    fn values(&self) -> &BTreeMap<String, Vec<String>> {
        self.values.get_or_init(|| read_config(&self.start))
    }
}

/// Every value of the system, global and repository configuration (includes
/// resolved), keyed canonically: section and name lower-cased, subsection as written.
/// Outside a repository, or when it cannot be read, the result is empty: the guard then
/// judges on the command line alone.
fn read_config(start: &Path) -> BTreeMap<String, Vec<String>> {
    let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let Ok(repo) = gix::ThreadSafeRepository::discover_with_environment_overrides(start) else {
        return values;
    };
    let repo = repo.to_thread_local();
    let snapshot = repo.config_snapshot();
    for section in snapshot.plumbing().sections() {
        let header = section.header();
        let prefix = match header.subsection_name() {
            Some(sub) => format!("{}.{}", header.name().to_string().to_lowercase(), sub),
            None => header.name().to_string().to_lowercase(),
        };
        let body = section.body();
        let mut names: Vec<String> = body.value_names().map(|name| name.to_lowercase()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let entry = values.entry(format!("{prefix}.{name}")).or_default();
            for value in body.values(&name) {
                entry.push(value.to_string());
            }
        }
    }
    values
}

/// True when the parent process is the real git in the middle of a rebase, cherry-pick
/// or revert: git's sequencer commits with `git commit -n` by design. Only git itself
/// execs the guard with no shell in between, and only with arguments it chose.
fn spawned_by_git_sequencer(real: &Path) -> bool {
    let Some(parent) = std::fs::read_to_string("/proc/self/stat").ok().and_then(|stat| parent_pid(&stat)) else {
        return false;
    };
    let Ok(parent_exe) = std::fs::read_link(format!("/proc/{parent}/exe")) else { return false };
    if parent_exe != real {
        return false;
    }
    let Ok(repo) = gix::ThreadSafeRepository::discover_with_environment_overrides(".") else { return false };
    let git_dir = repo.git_dir().to_path_buf();
    // An `exec` step of a rebase is also run by git (through `sh -c 'exec …'`), with
    // whatever arguments the todo list gave it: while one runs, no exemption.
    let done = std::fs::read_to_string(git_dir.join("rebase-merge/done")).unwrap_or_default();
    let last = done.lines().map(str::trim_start).rfind(|line| !line.is_empty() && !line.starts_with('#'));
    if last.and_then(|line| line.split_whitespace().next()).is_some_and(|word| word == "exec" || word == "x") {
        return false;
    }
    ["rebase-merge", "rebase-apply", "sequencer", "CHERRY_PICK_HEAD", "REVERT_HEAD"]
        .iter()
        .any(|state| git_dir.join(state).exists())
}

/// True when git itself runs this transport command: the parent is the real git, or a
/// remote helper from git's own exec-path (`git-remote-https`, which cannot be replaced
/// inside) whose parent is the real git. A helper the agent starts itself has the
/// agent's shell above it.
fn spawned_by_git_transport(real: &Path) -> bool {
    let parent_of = |pid: &str| -> Option<u32> {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|stat| parent_pid(&stat))
    };
    let exe_of = |pid: u32| std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let Some(parent) = parent_of("self") else { return false };
    let Some(parent_exe) = exe_of(parent) else { return false };
    if parent_exe == real {
        return true;
    }
    let helpers = RuntimeLayout::inside().git_exec_real(0);
    let from_git = helpers.parent().is_some_and(|root| parent_exe.starts_with(root));
    let is_helper = parent_exe.file_name().is_some_and(|name| name.to_string_lossy().starts_with("git-remote-"));
    from_git
        && is_helper
        && parent_of(&parent.to_string()).and_then(exe_of).is_some_and(|grandparent| grandparent == real)
}

/// The ppid field of `/proc/self/stat` (after the parenthesised command name, which may
/// itself contain spaces and parentheses).
fn parent_pid(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_pid_survives_odd_command_names() {
        assert_eq!(parent_pid("123 (git) S 45 123 45 0"), Some(45));
        assert_eq!(parent_pid("123 (a) b) (c) R 77 1 1"), Some(77));
        assert_eq!(parent_pid("garbage"), None);
    }

    #[test]
    fn options_round_trip_and_default_to_strict() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = RuntimeLayout::host(dir.path());
        let (strict, facts) = load_options(&run);
        assert!(!strict.allow_branch_deletion && !strict.allow_plumbing_commits && facts.is_none());
        let project = RepoFacts { common_dir: "/p/.git".into(), hooks_path: Some("/p/.husky/_".into()) };
        let settings = GitGuardSettings {
            allow_branch_deletion: true,
            allow_plumbing_commits: false,
            common_dir: Some(project.common_dir.clone()),
            hooks_path: project.hooks_path.clone(),
            global_config: Some("/home/u/.gitconfig".into()),
            quiet_env: vec![("HUSKY".into(), "0".into())],
        };
        fs_err::write(run.git_guard_settings(), settings.to_json().expect("json")).expect("write");
        let (loaded, facts) = load_options(&run);
        assert!(loaded.allow_branch_deletion && !loaded.allow_plumbing_commits);
        assert_eq!(loaded.quiet_env, [("HUSKY".to_owned(), "0".to_owned())]);
        assert_eq!(facts, Some(project));
    }

    #[test]
    fn start_dir_follows_dash_c() {
        let cwd = std::env::current_dir().expect("cwd");
        let args: Vec<OsString> =
            ["-c", "a=b", "-C", "sub", "-C", "deeper", "status", "-C", "x"].iter().map(OsString::from).collect();
        assert_eq!(start_dir(&args), cwd.join("sub/deeper"));
    }
}
