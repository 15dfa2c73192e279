//! The facts stage: where `exec` runs (home, cwd, project root), the configuration with
//! its approvals, the repository (its layout and what git reads of its configuration)
//! and the project files the host runs later. The repository's layout is read here
//! once; the later stages (the session check's watch, the push service) take it from
//! [`Facts`]. Before anything reads the repository, [`recover`] checks a session that
//! never ran its exit check.

use std::{
    ffi::OsString,
    os::unix::fs::DirBuilderExt,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _, Result};
use policy::Context;

use crate::{agent_guard, claude_state, masks, ExecOptions, Invocation};

/// The configuration and the facts of where it runs.
pub struct Loaded {
    pub ctx: Context,
    pub config: config::Config,
    pub files: Vec<PathBuf>,
    /// agent-sandbox's cache: scan listings, git exec-path stand-ins.
    pub cache_dir: PathBuf,
    /// Its state: approvals, session baselines, the audit log.
    pub state_dir: PathBuf,
    /// Its own directories (config, cache, state), hidden or read-only inside.
    pub own_dirs: [PathBuf; 3],
    /// Config files the agent could have written (the project's, a `-c` file inside the
    /// project), each with whether the user allowed it as it is.
    pub project_config: Vec<(PathBuf, bool)>,
    pub repo: Option<gitfacts::RepoFacts>,
    /// Where the project's repository keeps its metadata (`gitfacts::layout`).
    pub layout: Option<gitfacts::Layout>,
}

/// What the later stages start from. The configuration travels beside it (see
/// [`gather`]): the scan stage adds read-only entries of its own.
pub(crate) struct Facts {
    pub(crate) ctx: Context,
    pub(crate) cache_dir: PathBuf,
    pub(crate) state_dir: PathBuf,
    pub(crate) repo: Option<gitfacts::RepoFacts>,
    pub(crate) layout: Option<gitfacts::Layout>,
    pub(crate) net_policy: policy::network::NetPolicy,
    /// Where Claude Code keeps `~/.claude.json` inside, when it does.
    pub(crate) claude_state: Option<claude_state::ClaudeState>,
    /// `filesystem.hostExecuted` files present at the start (read-only, parents pinned).
    pub(crate) host_present: Vec<PathBuf>,
    /// What the session check watches, the same at start and at exit.
    pub(crate) watch: gitcare::Watch,
    /// Where the agent's own git repository is, when it has one (`hostpush::home::exec`).
    pub(crate) session_git: Option<sandbox::plan::SessionGit>,
    /// The agents' host-executed settings the guard created to mount them read-only,
    /// removed again when this is dropped (`agent_guard`).
    pub(crate) _agent_guard: agent_guard::Created,
}

/// A session that never ran its exit check is checked before anything reads the
/// repository or the configuration it may have changed.
pub(crate) fn recover(inv: &Invocation) -> Result<()> {
    let Ok(home) = home() else { return Ok(()) };
    let Ok(cwd) = inv.cwd.clone().map_or_else(std::env::current_dir, |dir| dir.canonicalize()) else { return Ok(()) };
    let Ok(project_root) = policy::find_project_root(&cwd, &home) else { return Ok(()) };
    let state_dir = config::approval::state_dir(&home);
    prepare_own_dirs(std::slice::from_ref(&state_dir))?;
    let (_, stuck) = gitcare::session::recover(&state_dir, &project_root)
        .context("checking what the last session in this project left")?;
    if stuck > 0 {
        bail!("the last session left git metadata that could not be moved aside (see above): fix it first");
    }
    Ok(())
}

/// The project at or above `cwd` and its directory in the state directory (its kept
/// session repositories, the record of its masks), as `exec` finds them.
pub fn project_state(cwd: &Path) -> Result<(PathBuf, PathBuf)> {
    let home = home()?;
    let cwd = cwd.canonicalize().with_context(|| format!("{}: cannot use this directory", cwd.display()))?;
    let project_root = policy::find_project_root(&cwd, &home)?;
    let state_dir = config::approval::state_dir(&home);
    Ok((project_root.clone(), gitcare::session::project_dir(&state_dir, &project_root)))
}

/// Loads the configuration for `inv`. Before anything reads the repository (gix reads
/// its configs), a session that never ran its exit check is checked.
pub fn load(inv: &Invocation) -> Result<Loaded> {
    let home = home()?;
    let cwd = match &inv.cwd {
        Some(dir) => dir.canonicalize().with_context(|| format!("-C {}: cannot use this directory", dir.display()))?,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let project_root = policy::find_project_root(&cwd, &home)?;
    let global_dir = config::global_dir(&home);
    let cache_dir = config::xdg_dir(&home, "XDG_CACHE_HOME", ".cache");
    let state_dir = config::approval::state_dir(&home);
    let project_dir = project_root.join(".agent-sandbox");
    let sources = config::Sources {
        global_dir: Some(global_dir.clone()),
        project_dir: Some(project_dir.clone()),
        explicit: inv.config.clone(),
    };
    let cli = config::cli_layer(inv.network.as_deref(), &inv.ro, &inv.rw, &inv.exclude, &inv.cmds)?
        .with_network_flags(&inv.allow_hosts, &inv.host_ports);
    let project_config = project_config(inv, &project_root, &project_dir, &state_dir)?;
    let (mut config, files) = config::load(&sources, cli)?;
    if inv.read_only {
        config.project_read_only = config::Sourced {
            value: true,
            origin: config::Origin {
                layer: config::LayerKind::Cli,
                location: config::Location::Flag("--read-only".into()),
            },
        };
    }
    // agent-sandbox's own files stay out of reach even when a parent is granted: the
    // sandbox must not loosen the next run's config, nor poison its scan cache, nor
    // rewrite the audit log or the session baselines.
    config.ro.push(builtin_path(&global_dir));
    config.exclude.push(builtin_path(&cache_dir));
    config.exclude.push(builtin_path(&state_dir));
    // The repository as git sees it (every config file), for @git and the guard. gix
    // opens its config files without O_NONBLOCK: refuse special files first.
    let layout = gitfacts::layout(&project_root);
    let repo = if project_root.join(".git").symlink_metadata().is_ok() {
        refuse_special_git_files(layout.as_ref())?;
        gitfacts::repo_facts(&project_root)
    } else {
        None
    };
    let hooks_path = repo.as_ref().and_then(|repo| repo.hooks_path.clone());
    // The session repository needs the git guard (`@git`: its hooks, its push service);
    // `.git` inside is the session's, or the user's read-only (`policy::git::dir_rules`).
    let session_git = config.git_session_repository.value
        && has_git_preset(&config)
        && layout.as_ref().is_some_and(|layout| gitfacts::session_mount(&project_root, &home, layout).is_some());
    Ok(Loaded {
        ctx: Context { home, cwd, project_root, hooks_path, session_git },
        config,
        files,
        cache_dir: cache_dir.clone(),
        state_dir: state_dir.clone(),
        own_dirs: [global_dir, cache_dir, state_dir],
        project_config,
        repo,
        layout,
    })
}

/// The facts of this start, and its configuration: the approvals and the repository
/// checked, agent-sandbox's and the agent's own directories made.
pub(crate) fn gather(inv: &Invocation, options: &ExecOptions<'_>) -> Result<(Facts, config::Config)> {
    let debug = options.debug;
    let Loaded { ctx, mut config, files, cache_dir, state_dir, own_dirs, project_config, repo, layout } = load(inv)?;
    refuse_unapproved(inv, &project_config)?;
    refuse_planted_commondir(&ctx.project_root)?;
    prepare_own_dirs(&own_dirs)?;
    // The hook guard undone behind the user's back (husky's `npm install`, a new worktree
    // of a husky project): said before the agent's first commit, with the fix.
    if repo.is_some() {
        for problem in hookinstall::problems(&ctx.project_root) {
            eprintln!("agent-sandbox: warning: {problem}");
        }
    }
    let agent = options.command.first().and_then(|command| command.to_str()).and_then(config::agents::for_command);
    create_agent_state_dir(&ctx.home, agent)?;
    keep_agent_hosts(&mut config, agent);
    debug(&format!("project root {}, cwd {}", ctx.project_root.display(), ctx.cwd.display()));
    if files.is_empty() {
        debug("config: no config files found, built-in defaults only");
    }
    for file in &files {
        debug(&format!("config: loaded {}", file.display()));
    }
    debug(&format!("config: network {} (from {})", config.network.value.as_str(), config.network.origin));
    let net_policy = policy::network::NetPolicy::from_config(&config)?;
    create_tool_caches(&config, &ctx.home, debug)?;
    let user_config_dir = std::env::var_os(claude_state::CONFIG_DIR_VAR).is_some_and(|dir| !dir.is_empty());
    let claude_state = claude_state::ClaudeState::plan(&config, &ctx.home, user_config_dir)?;
    // Project files the host runs later: read-only (parents pinned) when present; the
    // absent ones are watched by the exit check.
    let (host_present, host_absent) = host_executed(&config, &ctx.project_root)?;
    let session_git = session_git(&state_dir, &ctx, layout.as_ref());
    if let (Some(layout), None) = (&layout, &session_git) {
        eprintln!("agent-sandbox: note: {}", read_only_git(&config, layout));
    }
    // What the session check watches, the same at start and at exit; copies of host-run
    // files in subdirectories are found by the scan.
    let watch = gitcare::Watch {
        project_root: ctx.project_root.clone(),
        common_dir: layout.as_ref().map(|layout| layout.common_dir.clone()),
        extra: ctx.hooks_path.iter().cloned().collect(),
        host_files: host_absent,
        copy_rules: config::host_run::subdirectory_rules(config.host_executed.iter().map(|item| item.value.as_str()))
            .into_iter()
            .map(PathBuf::from)
            .collect(),
        copy_exempt: masks::dependency_tree_names().map(OsString::from).collect(),
        session_repository: session_git.is_some(),
    };
    config.ro.extend(host_present.iter().map(|path| builtin_path(path)));
    // The agents' host-executed settings: read-only, created first when absent (not for
    // a dry run, which changes nothing).
    let agent_guard = match has_preset(&config, "agents") && !options.dry_run {
        true => guard_agents_settings(&ctx.home, &mut config, debug)?,
        false => agent_guard::Created::default(),
    };
    let facts = Facts {
        ctx,
        cache_dir,
        state_dir,
        repo,
        layout,
        net_policy,
        claude_state,
        host_present,
        watch,
        session_git,
        _agent_guard: agent_guard,
    };
    Ok((facts, config))
}

/// The agents' host-executed settings (`agent_guard`): each made read-only in `config`,
/// created first when absent; what was created, removed again when it is dropped.
fn guard_agents_settings(
    home: &Path,
    config: &mut config::Config,
    debug: &dyn Fn(&str),
) -> Result<agent_guard::Created> {
    let steps = agent_guard::plan(home, &|dir| dir.symlink_metadata().is_ok_and(|meta| meta.is_dir()), &|path| {
        path.symlink_metadata().is_ok()
    });
    // A link there cannot be mounted read-only in its place (a mount follows it), and
    // inside the directory is writable: the agent could replace the link. Refused loudly
    // rather than left writable.
    let linked: Vec<String> = steps
        .iter()
        .filter_map(|step| match step {
            agent_guard::Step::ReadOnly(path) | agent_guard::Step::KeepKeys { path, .. }
                if path.symlink_metadata().is_ok_and(|meta| meta.is_symlink()) =>
            {
                Some(path.display().to_string())
            }
            _ => None,
        })
        .collect();
    if !linked.is_empty() {
        bail!(
            "{} is a symbolic link: its agent's host process runs what it holds, so agent-sandbox keeps it read-only \
             inside, and a link in a directory the agent writes can be replaced. Make it a regular file or directory \
             (for a file: `cp --remove-destination \"$(readlink -f F)\" F`), then start again",
            linked.join(", ")
        );
    }
    let (read_only, created) = agent_guard::prepare(&steps);
    for path in &read_only {
        debug(&format!("agents: {} read-only (its host process runs it)", path.display()));
    }
    config.ro.extend(read_only.iter().map(|path| builtin_path(path)));
    Ok(created)
}

fn has_git_preset(config: &config::Config) -> bool {
    has_preset(config, "git")
}

fn has_preset(config: &config::Config, name: &str) -> bool {
    policy::presets::expand(&config.presets).is_ok_and(|presets| presets.iter().any(|(preset, _)| preset.name == name))
}

/// The built-in allowlist has every catalogued agent's hosts: a session running one
/// agent keeps that agent's only (a shell or a script keeps them all: it may start any
/// agent). The user's own entries for the same hosts stay.
fn keep_agent_hosts(config: &mut config::Config, agent: Option<&config::agents::Agent>) {
    let keep = config::agents::hosts_for(agent);
    let agent_hosts = config::agents::all_hosts();
    config.net_allow.retain(|item| {
        item.origin.layer != config::LayerKind::Default
            || !agent_hosts.contains(&item.value.as_str())
            || keep.contains(&item.value.as_str())
    });
}

/// Why the user's git directories are read-only inside, and what that means.
fn read_only_git(config: &config::Config, layout: &gitfacts::Layout) -> String {
    let why = if !config.git_session_repository.value {
        format!("`git.sessionRepository` is off ({})", config.git_session_repository.origin)
    } else if !has_git_preset(config) {
        "the `@git` preset is off".to_owned()
    } else {
        format!(
            "no session repository can stand in for {} (a `.git` file naming it through a symlink, or a git \
             directory holding the project or your home)",
            layout.git_dir.display()
        )
    };
    format!(
        "{why}: the project's git directories are read-only inside; git there reads the history but cannot \
         commit"
    )
}

/// With `git.sessionRepository` and the `@git` preset, the agent's git is its own: the
/// session repository per project in the state directory, where git inside looks for
/// the project's git directory ([`gitfacts::session_mount`]: `.git`, or what a `.git`
/// file names). Without it (the key off, no `@git`, a layout it cannot stand in for),
/// the user's git directories are read-only inside.
fn session_git(
    state_dir: &Path,
    ctx: &Context,
    layout: Option<&gitfacts::Layout>,
) -> Option<sandbox::plan::SessionGit> {
    if !ctx.session_git {
        return None;
    }
    let layout = layout?;
    let at = gitfacts::session_mount(&ctx.project_root, &ctx.home, layout)?;
    let dot_git = ctx.project_root.join(".git");
    let top = hostpush::home::exec::session_top(&gitcare::session::project_dir(state_dir, &ctx.project_root));
    Some(sandbox::plan::SessionGit {
        session: top.join(".git"),
        gitfile: (at != dot_git).then_some(dot_git),
        dot_git: at,
        user_git: layout.common_dir.clone(),
        user_git_dir: layout.git_dir.clone(),
    })
}

/// A path entry agent-sandbox adds itself (`config show` cites it as built in).
pub(crate) fn builtin_path(path: &Path) -> config::Sourced<String> {
    config::Sourced { value: path.display().to_string(), origin: config::Origin::builtin() }
}

fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set (agent-sandbox needs it to resolve ~ and the presets; set HOME)")
}

/// The config files the agent could have written, each with whether the user allowed
/// it as it is.
fn project_config(
    inv: &Invocation,
    project_root: &Path,
    project_dir: &Path,
    state_dir: &Path,
) -> Result<Vec<(PathBuf, bool)>> {
    let explicit_inside =
        inv.config.as_ref().and_then(|file| file.canonicalize().ok()).filter(|file| file.starts_with(project_root));
    Ok(config::find_config_file(project_dir)?
        .into_iter()
        .chain(explicit_inside)
        .map(|path| {
            let allowed = config::approval::is_allowed(state_dir, &path);
            (path, allowed)
        })
        .collect())
}

fn refuse_unapproved(inv: &Invocation, project_config: &[(PathBuf, bool)]) -> Result<()> {
    if let Some((path, _)) = project_config.iter().find(|(_, allowed)| !allowed) {
        bail!(
            "the project config {} is new or changed since you allowed it, and it can widen what the agent may do \
             (review it, then run: agent-sandbox config allow{})",
            path.display(),
            inv.cwd.as_ref().map(|dir| format!(" -C {}", dir.display())).unwrap_or_default()
        );
    }
    Ok(())
}

fn refuse_planted_commondir(project_root: &Path) -> Result<()> {
    let planted = project_root.join(".git/commondir");
    if project_root.join(".git").is_dir() && planted.symlink_metadata().is_ok() {
        bail!(
            "{} exists: git would take this repository's configuration, hooks and refs from the directory it names \
             (a sandbox may have planted it); inspect it and delete it, then start again",
            planted.display()
        );
    }
    Ok(())
}

/// An agent's state directory that does not exist yet would live in the scratch home
/// and vanish with it (and the user's login with it).
fn create_agent_state_dir(home: &Path, agent: Option<&config::agents::Agent>) -> Result<()> {
    // Its first state directory is where it logs in (`~/.claude`, `~/.gemini`,
    // `~/.local/share/opencode`); a directory that does not exist is not mounted.
    let Some(first) = agent.and_then(|agent| agent.state.first()) else { return Ok(()) };
    let dir = home.join(first);
    if dir.symlink_metadata().is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("creating {}", dir.display()))?;
        eprintln!("agent-sandbox: created {} so that the agent keeps its state", dir.display());
    }
    Ok(())
}

/// The configuration files git reads from the project's repository must be regular
/// files (or absent): opening a FIFO would block every later start.
fn refuse_special_git_files(layout: Option<&gitfacts::Layout>) -> Result<()> {
    let Some(layout) = layout else { return Ok(()) };
    for path in [
        layout.common_dir.join("config"),
        layout.git_dir.join("config.worktree"),
        layout.common_dir.join("config.worktree"),
        layout.git_dir.join("index"),
    ] {
        match path.metadata() {
            Ok(meta) if !meta.is_file() => bail!(
                "{} is not a regular file (a FIFO, socket or device, probably planted by a sandbox): git would hang or \
                 misread it; inspect it and move it aside, then start again",
                path.display()
            ),
            _ => {}
        }
    }
    Ok(())
}

/// `filesystem.hostExecuted` under the project root: those present, and those absent.
fn host_executed(config: &config::Config, project_root: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let (mut present, mut absent) = (Vec::new(), Vec::new());
    for item in &config.host_executed {
        let rel = Path::new(&item.value);
        if rel.is_absolute() || rel.components().any(|part| !matches!(part, std::path::Component::Normal(_))) {
            bail!(
                "filesystem.hostExecuted: {:?} must be a path relative to the project root, without `..` (from {})",
                item.value,
                item.origin
            );
        }
        let path = project_root.join(rel);
        if path.symlink_metadata().is_ok() {
            present.push(path);
        } else {
            absent.push(path);
        }
    }
    Ok((present, absent))
}

/// With `@caches` on, creates the cache directories of the tools installed on the host
/// (`policy::presets::CACHE_TOOLS`) that do not exist yet: a missing directory is not
/// mounted, so the first session's downloads would vanish with its scratch home.
fn create_tool_caches(config: &config::Config, home: &Path, debug: &dyn Fn(&str)) -> Result<()> {
    let enabled = policy::presets::expand(&config.presets)?;
    if !enabled.iter().any(|(preset, _)| preset.name == "caches") {
        return Ok(());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let installed =
        |tool: &str| std::env::split_paths(&path).filter(|dir| dir.is_absolute()).any(|dir| dir.join(tool).is_file());
    for (rel, tools) in policy::presets::CACHE_TOOLS {
        let dir = home.join(rel);
        if dir.symlink_metadata().is_ok() {
            continue;
        }
        let Some(tool) = tools.iter().find(|tool| installed(tool)) else { continue };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("creating {} for {tool}'s downloads", dir.display()))?;
        debug(&format!("caches: created {} ({tool} is installed) so that its downloads persist", dir.display()));
    }
    Ok(())
}

/// agent-sandbox's own directories exist before the policy is resolved, so that their
/// excludes apply from the first run, even under a granted parent.
fn prepare_own_dirs(own_dirs: &[PathBuf]) -> Result<()> {
    for dir in own_dirs {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    Ok(())
}
