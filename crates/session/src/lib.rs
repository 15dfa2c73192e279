//! The `exec` pipeline: gather the facts of an invocation (home, cwd, project root,
//! config, repository layout, scan hits, index blobs), decide everything the run needs
//! from them (policy mounts, secret masks with the reason for each, environment,
//! wrapped commands, the guards' settings), then carry it out: the session check's
//! baseline, bwrap, the exit check. The binary's `src/exec.rs` only turns arguments into
//! an [`Invocation`] and prints.
//!
//! The decisions are pure where they can be tested as values: `masks::decide` (table
//! tests), `policy::resolve`, `policy::env`, `sandbox::plan::bwrap_args`, and
//! `gitcare::diff`. The gathering reads files an agent may have written, always with
//! never-blocking reads of regular files only.

mod claude_state;
pub mod index;
mod mask_record;
pub mod masks;
mod settings;
pub mod stages;
mod trees;

use std::{
    ffi::OsString,
    os::unix::fs::DirBuilderExt,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _, Result};
use policy::{Context, Mount};
use sandbox::plan::{Mask, Plan};

/// What the user asked for, as plain values (the binary maps its flags onto this).
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    pub cwd: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub network: Option<String>,
    pub ro: Vec<String>,
    pub rw: Vec<String>,
    pub exclude: Vec<String>,
    pub cmds: Vec<String>,
    /// `--read-only`: the whole project read-only.
    pub read_only: bool,
    /// `--allow-host`: more `network.allow` entries.
    pub allow_hosts: Vec<String>,
    /// `--host-port`: more `network.hostPorts` entries.
    pub host_ports: Vec<String>,
}

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
}

/// A path entry agent-sandbox adds itself (`config show` cites it as built in).
fn builtin_path(path: &Path) -> config::Sourced<String> {
    config::Sourced { value: path.display().to_string(), origin: config::Origin::builtin() }
}

fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set (agent-sandbox needs it to resolve ~ and the presets; set HOME)")
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
    let explicit_inside =
        inv.config.as_ref().and_then(|file| file.canonicalize().ok()).filter(|file| file.starts_with(&project_root));
    let project_config: Vec<(PathBuf, bool)> = config::find_config_file(&project_dir)?
        .into_iter()
        .chain(explicit_inside)
        .map(|path| {
            let allowed = config::approval::is_allowed(&state_dir, &path);
            (path, allowed)
        })
        .collect();
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
    let repo = if project_root.join(".git").symlink_metadata().is_ok() {
        refuse_special_git_files(&project_root)?;
        gitfacts::repo_facts(&project_root)
    } else {
        None
    };
    let hooks_path = repo.as_ref().and_then(|repo| repo.hooks_path.clone());
    Ok(Loaded {
        ctx: Context { home, cwd, project_root, hooks_path },
        config,
        files,
        cache_dir: cache_dir.clone(),
        state_dir: state_dir.clone(),
        own_dirs: [global_dir, cache_dir, state_dir],
        project_config,
        repo,
    })
}

/// The configuration files git reads from the project's repository must be regular
/// files (or absent): opening a FIFO would block every later start.
fn refuse_special_git_files(project_root: &Path) -> Result<()> {
    let Some(layout) = gitfacts::layout(project_root) else { return Ok(()) };
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

/// A config file and the bytes the user allowed.
pub type Allowed = (PathBuf, Vec<u8>);

/// `agent-sandbox config allow`: trusts the project's config files as they are now;
/// returns the project root and each file with the bytes allowed.
pub fn config_allow(inv: &Invocation) -> Result<(PathBuf, Vec<Allowed>)> {
    let loaded = load(inv)?;
    let mut allowed = Vec::new();
    for (path, _) in &loaded.project_config {
        let bytes = config::approval::allow(&loaded.state_dir, path).context("allowing the project config")?;
        allowed.push((path.clone(), bytes));
    }
    Ok((loaded.ctx.project_root, allowed))
}

/// Hidden, for `cargo xtask bench` only: when this variable names a file, `exec` does
/// everything up to running bwrap (the same checks, the same runtime directory), then
/// writes there, as JSON, the bwrap it would run with the exact arguments and
/// environment (`{"bwrap", "args", "env", "runtime"}`), leaves the runtime directory in
/// place and exits 0 without running anything. The bench runs that bwrap as the
/// baseline of `exec`'s own cost and removes the directory. It changes nothing `exec`
/// decides or the sandbox enforces; it only stops short of the run.
pub const BENCH_ARGV_VAR: &str = "AGENT_SANDBOX_BENCH_ARGV";

/// What `exec` did.
pub enum Outcome {
    /// `--dry-run`: the names of the variables passed and the whole bwrap command line.
    DryRun { env_names: Vec<String>, argv: Vec<OsString>, caches: Vec<String> },
    /// The command ran: its exit status to pass on.
    Ran(i32),
    /// The command is not there inside the sandbox (exit status 127): why, and the fix.
    NotFound(String),
}

/// Options of one `exec`.
pub struct ExecOptions<'a> {
    pub command: &'a [OsString],
    pub dry_run: bool,
    /// Receives `--debug` lines.
    pub debug: &'a dyn Fn(&str),
    /// Whether stderr is a terminal (the one-line summaries of masks and dropped
    /// variables are for people).
    pub terminal: bool,
}

/// The skip switches the sandbox sets itself: `HUSKY=0` in a project with a `.husky`
/// directory (husky ≥ 5), unless the environment names `HUSKY` already. husky's `prepare`
/// script (every `npm install`/`npm ci`) rewrites `.husky/_`, which is read-only here
/// (its hooks run on the host), and fails the install; with `HUSKY=0` it skips that.
/// Hooks still run: the git guard removes the variable from git's environment (quietly,
/// since the sandbox set it), and the checks never get it.
fn hook_manager_env(project_root: &Path, env: &[(OsString, OsString)]) -> Vec<(String, String)> {
    let husky = std::fs::symlink_metadata(project_root.join(".husky")).is_ok_and(|meta| meta.is_dir());
    if husky && !env.iter().any(|(name, _)| name == "HUSKY") {
        return vec![("HUSKY".to_owned(), "0".to_owned())];
    }
    Vec::new()
}

pub fn exec(inv: &Invocation, options: &ExecOptions<'_>) -> Result<Outcome> {
    if !cfg!(target_os = "linux") {
        bail!(
            "agent-sandbox exec needs Linux: bubblewrap is built on Linux namespaces (elsewhere, use a devcontainer)"
        );
    }
    if runtime_layout::detect() != runtime_layout::Where::Outside {
        bail!("this is already inside an agent-sandbox; run the command directly (sandboxes do not nest)");
    }
    let debug = options.debug;
    let mut stages = stages::Stages::start();
    // Every audit line of this run carries its id, relayed ones included.
    let session_id = audit::start_session();
    debug(&format!("session {session_id} (its audit trail: agent-sandbox log --session {session_id})"));
    if !options.dry_run {
        // From here on a terminating signal ends the sandbox (once it runs) and the exit
        // check still runs.
        sandbox::run::install_signal_handlers();
    }
    // A session that never ran its exit check is checked before anything reads the
    // repository or the configuration it may have changed.
    if let Ok(home) = home() {
        if let Ok(cwd) = inv.cwd.clone().map_or_else(std::env::current_dir, |dir| dir.canonicalize()) {
            if let Ok(project_root) = policy::find_project_root(&cwd, &home) {
                let state_dir = config::approval::state_dir(&home);
                prepare_own_dirs(std::slice::from_ref(&state_dir))?;
                let (_, stuck) = gitcare::session::recover(&state_dir, &project_root)
                    .context("checking what the last session in this project left")?;
                if stuck > 0 {
                    bail!("the last session left git metadata that could not be moved aside (see above): fix it first");
                }
            }
        }
    }
    stages.end("recover");
    let Loaded { ctx, config, files, cache_dir, state_dir, own_dirs, project_config, repo } = load(inv)?;
    stages.end("facts");
    if let Some((path, _)) = project_config.iter().find(|(_, allowed)| !allowed) {
        bail!(
            "the project config {} is new or changed since you allowed it, and it can widen what the agent may do \
             (review it, then run: agent-sandbox config allow{})",
            path.display(),
            inv.cwd.as_ref().map(|dir| format!(" -C {}", dir.display())).unwrap_or_default()
        );
    }
    let planted = ctx.project_root.join(".git/commondir");
    if ctx.project_root.join(".git").is_dir() && planted.symlink_metadata().is_ok() {
        bail!(
            "{} exists: git would take this repository's configuration, hooks and refs from the directory it names \
             (a sandbox may have planted it); inspect it and delete it, then start again",
            planted.display()
        );
    }
    prepare_own_dirs(&own_dirs)?;
    // The hook guard undone behind the user's back (husky's `npm install`, a new worktree
    // of a husky project): said before the agent's first commit, with the fix.
    if repo.is_some() {
        for problem in hookinstall::problems(&ctx.project_root) {
            eprintln!("agent-sandbox: warning: {problem}");
        }
    }
    // An agent's state directory that does not exist yet would live in the scratch home
    // and vanish with it (and the user's login with it).
    let agent_name = options
        .command
        .first()
        .and_then(|cmd| Path::new(cmd).file_name())
        .map(|name| name.to_string_lossy().into_owned());
    let state = match agent_name.as_deref() {
        Some("claude") => Some(".claude"),
        Some("codex") => Some(".codex"),
        _ => None,
    };
    if let Some(dir) = state.map(|dir| ctx.home.join(dir)).filter(|dir| !dir.exists()) {
        std::fs::DirBuilder::new().mode(0o700).create(&dir).with_context(|| format!("creating {}", dir.display()))?;
        eprintln!("agent-sandbox: created {} so that the agent keeps its state", dir.display());
    }

    let scan_cache =
        cache_dir.join("scan").join(format!("{:016x}", util::fnv1a(ctx.project_root.as_os_str().as_encoded_bytes())));
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
    let mut claude_state = claude_state::ClaudeState::plan(&config, &ctx.home, user_config_dir)?;
    // Project files the host runs later: read-only (parents pinned) when present; the
    // absent ones are watched by the exit check.
    let (host_present, host_absent) = host_executed(&config, &ctx.project_root)?;
    // What the session check watches, the same at start and at exit; copies of host-run
    // files in subdirectories are found by the scan below.
    let watch = gitcare::Watch {
        project_root: ctx.project_root.clone(),
        common_dir: gitfacts::layout(&ctx.project_root).map(|layout| layout.common_dir),
        extra: ctx.hooks_path.iter().cloned().collect(),
        host_files: host_absent,
        copy_rules: config::host_run::subdirectory_rules(config.host_executed.iter().map(|item| item.value.as_str()))
            .into_iter()
            .map(PathBuf::from)
            .collect(),
        copy_exempt: masks::dependency_tree_names().map(OsString::from).collect(),
    };
    let copy_names = watch.copy_names();
    let mut config = config;
    config.ro.extend(host_present.iter().map(|path| builtin_path(path)));
    let mut policy = policy::resolve(&config, &ctx)?;
    // Tools installed under the home directory (`npm --prefix ~/.local`, pipx) are
    // symlinks in a visible PATH directory to an installation that is not: show those
    // installations read-only.
    let installs = hidden_installations(std::env::var_os("PATH").as_deref(), &ctx.home, &policy.mounts);
    if !installs.is_empty() {
        for dir in &installs {
            debug(&format!("tools: {} shown read-only (a PATH entry leads there)", dir.display()));
            config.ro.push(builtin_path(dir));
        }
        policy = policy::resolve(&config, &ctx)?;
    }
    policy::pin_parents(&mut policy.mounts, &host_present);
    // `.git` entries are reported too (never descended into), and `HEAD` files, for the
    // session check; `.git` before any secret or allow pattern (`.g*`) can claim it.
    let patterns: Vec<String> = config.secret_patterns.iter().map(|item| item.value.clone()).collect();
    let matcher = secrets::SecretMatcher::new(
        &patterns,
        &config.secret_allow.iter().map(|item| item.value.clone()).collect::<Vec<_>>(),
    )?
    .with_markers(&[GIT_ENTRY], &[HEAD_ENTRY])
    .with_copies(&copy_names.iter().filter_map(|name| name.to_str()).collect::<Vec<_>>());
    let skip: Vec<PathBuf> = policy
        .mounts
        .iter()
        .filter(|mount| mount.access == policy::Access::Exclude && mount.path.starts_with(&ctx.project_root))
        // An excluded directory with a grant inside is scanned: the grant is visible.
        .filter(|mount| !sandbox::plan::has_descendants(mount, &policy.mounts))
        .map(|mount| mount.path.clone())
        .collect();
    let scan = || secrets::scan_cached(&ctx.project_root, &matcher, &skip, &scan_cache);
    let (found, hits) = split_git_entries(&ctx.project_root, &copy_names, scan()?);
    let index = repo.as_ref().and_then(|_| index::Index::load(&ctx.project_root));
    let hit_facts = index::hit_facts(&ctx.project_root, hits, index.as_ref());
    // What a rename cannot arrange decides the dependency trees' exemption: the tool's
    // marker, and what earlier sessions masked (by inode).
    let record_dir = gitcare::session::project_dir(&state_dir, &ctx.project_root);
    let earlier = mask_record::read(&record_dir);
    let trees = trees::made_trees(
        &ctx.project_root,
        hit_facts.iter().flat_map(|fact| {
            std::iter::once(fact.hit.path.as_path()).chain(fact.target.as_ref().map(|(target, _)| target.as_path()))
        }),
    );
    let (masked, mask_notes) = masks::decide(&hit_facts, &trees, &earlier, &policy.mounts);
    policy.notes.extend(mask_notes);
    let masks: Vec<Mask> = masked.iter().map(|masked| masked.mask.clone()).collect();
    // A masked file that a rename could unmask stays where it is: its parents are pinned
    // up to the project, so that `mv certs target` cannot carry it where the next start
    // would not mask it (`Masked::pin` says which: not inside a dependency tree its tool
    // made, which must stay deletable for `npm ci`).
    let pinned_masks: Vec<PathBuf> =
        masked.iter().filter(|masked| masked.pin).map(|masked| masked.mask.path.clone()).collect();
    policy::pin_parents(&mut policy.mounts, &pinned_masks);
    // Copies of host-run files in subdirectories (`sub/.envrc`, `web/.vscode/tasks.json`):
    // read-only with their parents pinned, like the root's; one made inside is moved
    // aside by the exit check. A symlink cannot be held by a mount: the check compares it.
    let host_copies: Vec<PathBuf> = gitcare::host_copies(&watch, &found)
        .into_iter()
        .filter(|path| path.symlink_metadata().is_ok_and(|meta| !meta.is_symlink()))
        .collect();
    for path in &host_copies {
        debug(&format!("hostExecuted: {} read-only (a copy in a subdirectory)", path.display()));
        policy.mounts.push(policy::Mount {
            path: path.clone(),
            access: policy::Access::Ro,
            kind: if path.is_dir() { policy::Kind::Dir } else { policy::Kind::File },
            link: None,
            rule: "filesystem.hostExecuted (a copy in a subdirectory)".into(),
            origin: config::Origin::builtin(),
        });
    }
    policy::pin_parents(&mut policy.mounts, &host_copies);
    stages.end("scan");

    let filter = policy::env::EnvFilter::new(&config)?;
    let (mut env, dropped) = filter.apply(std::env::vars_os());
    // The checks search only directories the agent cannot write: an `sh`, `npm` or
    // `pytest` planted in `node_modules/.bin` would pass every check.
    let check_path = env.iter().find(|(name, _)| name == "PATH").map(|(_, value)| {
        let search = checks_path(value, &ctx, &policy.mounts);
        for line in search.dropped_lines() {
            debug(&format!("checks: PATH entry {line} not searched by the checks"));
        }
        search
    });
    // `agent-sandbox check` works inside without knowing where the binary came from.
    if let Some((_, path)) = env.iter_mut().find(|(name, _)| name == "PATH") {
        path.push(":");
        path.push(sandbox::plan::RUNTIME_DIR);
    }
    for gone in &dropped {
        policy.notes.push(format!("env: {} dropped ({} {})", gone.name, gone.policy, gone.pattern));
    }
    // A visible marker in the prompt: Debian's and Ubuntu's bash.bashrc show
    // `($debian_chroot)`; other shells read PS1.
    env.retain(|(name, _)| name != "debian_chroot");
    env.push(("debian_chroot".into(), "agent-sandbox".into()));
    if !env.iter().any(|(name, _)| name == "PS1") {
        env.push(("PS1".into(), "(agent-sandbox) $ ".into()));
    }
    if let Some(state) = &claude_state {
        env.retain(|(name, _)| name != claude_state::CONFIG_DIR_VAR);
        env.push((claude_state::CONFIG_DIR_VAR.into(), state.config_dir.clone().into_os_string()));
        policy.notes.push(format!(
            "agents: Claude Code keeps ~/.claude.json in {} inside ({}), copied back at the end",
            state.config_dir.display(),
            claude_state::CONFIG_DIR_VAR
        ));
    }
    if net_policy.mode == config::Network::Allowlist {
        let proxy_env = netproxy::proxy_env(&runtime_layout::RuntimeLayout::inside().marker());
        env.retain(|(name, _)| !proxy_env.iter().any(|(proxy_name, _)| name == proxy_name));
        env.extend(proxy_env.into_iter().map(|(name, value)| (name.into(), value.into())));
    }
    let quiet_env = hook_manager_env(&ctx.project_root, &env);
    for (name, value) in &quiet_env {
        env.push((name.into(), value.into()));
        policy.notes.push(format!(
            "env: {name}={value} (husky's install would rewrite the read-only .husky/_; git's hooks still run: the \
             git guard removes it from git's environment)"
        ));
    }
    let path_var = env.iter().find(|(name, _)| name == "PATH").map(|(_, value)| value.clone());
    let commands = sandbox::commands::wrap(
        &policy.commands,
        path_var.as_deref(),
        &policy.mounts,
        &masks,
        &ctx,
        &cache_dir,
        &mut policy.notes,
    )?;
    let settings_copies = settings::prepare(&policy.copies, &net_policy, &ctx.home, &mut policy.notes);
    for note in &policy.notes {
        debug(note);
    }
    for warning in &settings_copies.warnings {
        eprintln!("{warning}");
    }

    let command: Vec<OsString> = if options.command.is_empty() {
        vec![std::env::var_os("SHELL").filter(|shell| !shell.is_empty()).unwrap_or_else(|| "/bin/sh".into())]
    } else {
        options.command.to_vec()
    };
    let self_exe = std::env::current_exe().context("cannot find the agent-sandbox binary itself")?;
    let bwrap = find_bwrap(&ctx, &policy.mounts, &host_path(&ctx, &policy.mounts))?;
    let wrapped = commands.iter().any(|wrapped| command[0] == *wrapped.name);
    if !wrapped {
        if let Err(why) = find_inside(&command[0], path_var.as_deref(), &ctx.cwd, &policy.mounts) {
            return Ok(Outcome::NotFound(why));
        }
    }

    stages.end("decide");
    // The caches: an overlay each, or read-only (never the host's, read-write).
    let restricted = sandbox::netns::userns_restricted(&sandbox::run::read_userns_settings());
    let cache_layers = CacheLayers::take(&state_dir, &ctx.home, &policy.mounts, restricted, options.dry_run)?;
    for mount in &cache_layers.mounts {
        debug(&mount.describe());
        if let sandbox::caches::CacheMount::ReadOnly { path, .. } = mount {
            make_read_only(&mut policy.mounts, path);
        }
    }
    if options.dry_run {
        let plan = plan(
            &policy,
            &net_policy,
            &masks,
            &settings_copies.paths,
            &commands,
            &ctx,
            Path::new("$RUNTIME"),
            &self_exe,
            &command,
        );
        let mut argv = vec![bwrap.into_os_string()];
        argv.extend(sandbox::plan::bwrap_args(&plan));
        let env_names = env.iter().map(|(name, _)| name.to_string_lossy().into_owned()).collect();
        let caches = cache_layers.mounts.iter().map(sandbox::caches::CacheMount::describe).collect();
        return Ok(Outcome::DryRun { env_names, argv, caches });
    }

    if let Some(state) = &mut claude_state {
        state.seed()?;
    }
    // Nothing masked now and nothing recorded before: the record would say what its
    // absence says, so a project without secrets writes nothing at each start.
    let nothing_to_record = masked.is_empty() && matches!(&earlier, masks::Earlier::Known(known) if known.is_empty());
    if !nothing_to_record {
        mask_record::write(&record_dir, &masked).with_context(|| {
            format!(
                "recording the masked files in {} (without it, the next start could not recognise a renamed \
                 secret; check that directory's permissions and free space)",
                record_dir.display()
            )
        })?;
    }
    let agent = Path::new(&command[0]).file_name().map_or("?".into(), |name| name.to_string_lossy().into_owned());
    record(&agent, &command, &ctx.project_root, &masked, &dropped);
    if !dropped.is_empty() && options.terminal {
        let names: Vec<&str> = dropped.iter().take(6).map(|gone| gone.name.as_str()).collect();
        let more = if dropped.len() > 6 { format!(" and {} more", dropped.len() - 6) } else { String::new() };
        eprintln!(
            "agent-sandbox: not passing {} secret-looking variable(s): {}{more} (pass one with env.allow)",
            dropped.len(),
            names.join(", ")
        );
    }
    if !masks.is_empty() && options.terminal {
        let shown: Vec<String> = masks.iter().take(5).map(|mask| relative(&mask.path, &ctx.project_root)).collect();
        let more = if masks.len() > 5 { format!(" and {} more", masks.len() - 5) } else { String::new() };
        eprintln!(
            "agent-sandbox: hiding {} secret file(s) from the sandbox: {}{more} (expose one with secrets.allow)",
            masks.len(),
            shown.join(", ")
        );
    }

    if policy.network.value == config::Network::On && !sandbox::landlock::supported() {
        eprintln!(
            "agent-sandbox: warning: this kernel cannot scope abstract unix sockets (Landlock ABI {}, needs 6: Linux 6.12); \
             with the network on, the sandbox can reach host services listening on them (--network off closes this)",
            sandbox::landlock::abi()
        );
    }
    for command in &commands {
        for (index, dir) in command.exec_dirs.iter().enumerate() {
            sandbox::commands::ensure_stand_in(index, dir)
                .with_context(|| format!("preparing the stand-in for {}", dir.path.display()))?;
        }
    }
    // The user's global git config as it is now: what the hook guard's git reads, never a
    // file the agent makes in the scratch home.
    let xdg_config = config::xdg_dir(&ctx.home, "XDG_CONFIG_HOME", ".config");
    let pinned_global = [ctx.home.join(".gitconfig"), xdg_config.join("git/config")]
        .into_iter()
        .find(|path| path.is_file())
        .map(|path| path.to_string_lossy().into_owned());
    let git_settings = guard_settings::GitGuardSettings {
        allow_branch_deletion: config.git_allow_branch_deletion.value,
        allow_plumbing_commits: config.git_allow_plumbing_commits.value,
        common_dir: repo.as_ref().map(|repo| repo.common_dir.clone()),
        hooks_path: repo.as_ref().and_then(|repo| repo.hooks_path.clone()),
        global_config: pinned_global.clone(),
        quiet_env: quiet_env.clone(),
    }
    .to_json()
    .context("writing the git guard's settings (the repository's path must be UTF-8)")?;
    let mut hook_settings = guard_settings::HookGuardSettings::from_config(&config);
    hook_settings.masked_paths = masks
        .iter()
        .filter_map(|mask| mask.path.strip_prefix(&ctx.project_root).ok())
        .map(|rel| rel.to_string_lossy().into_owned())
        .collect();
    // The checks search only the kept PATH entries, and get the environment without the
    // sandbox's own skip switches.
    let check_env: Vec<(OsString, OsString)> = env
        .iter()
        .filter(|(name, _)| !quiet_env.iter().any(|(quiet, _)| name.to_str() == Some(quiet)))
        .map(|(name, value)| match &check_path {
            Some(search) if name == "PATH" => (name.clone(), search.joined()),
            _ => (name.clone(), value.clone()),
        })
        .collect();
    hook_settings.check_env = check_env
        .iter()
        .filter_map(|(name, value)| Some((name.to_str()?.to_owned(), value.to_str()?.to_owned())))
        .collect();
    hook_settings.check_path_dropped = check_path.as_ref().map(|search| search.dropped_lines()).unwrap_or_default();
    hook_settings.global_config = pinned_global.clone().unwrap_or_else(|| "/dev/null".to_owned());
    let hook_json = hook_settings.to_json();
    // Login shells get the sandbox's PATH back (not the host's, which may name what the
    // env filter dropped).
    let profile = path_var
        .as_ref()
        .map_or(String::new(), |path| format!("export PATH={}\n", util::single_quoted(&path.to_string_lossy())));
    let (tool_settings, claude_managed, codex_managed) = tool_guard_files(&config)?;
    let resolv_conf = netproxy::resolv_conf();
    let hosts = netproxy::hosts();
    let mut files = vec![
        (runtime_layout::GIT_GUARD_SETTINGS, git_settings.as_str()),
        (runtime_layout::HOOK_GUARD_SETTINGS, hook_json.as_str()),
        (runtime_layout::TOOL_GUARD_SETTINGS, tool_settings.as_str()),
        (runtime_layout::CLAUDE_MANAGED, claude_managed.as_str()),
        (runtime_layout::CODEX_MANAGED, codex_managed.as_str()),
        (sandbox::runtime::PROFILE_FILE, profile.as_str()),
    ];
    if net_policy.mode == config::Network::Allowlist {
        files.push((runtime_layout::RESOLV_CONF, resolv_conf.as_str()));
        files.push((runtime_layout::HOSTS, hosts.as_str()));
    }
    let settings_names: Vec<String> =
        (0..settings_copies.texts.len()).map(runtime_layout::settings_copy_name).collect();
    files.extend(settings_names.iter().map(String::as_str).zip(settings_copies.texts.iter().map(String::as_str)));
    let copies: Vec<&Path> =
        sandbox::plan::copied_files(&policy.mounts).iter().map(|mount| mount.path.as_path()).collect();
    let links: Vec<(&Path, &Path)> = sandbox::plan::copied_links(&policy.mounts)
        .iter()
        .filter(|mount| !sandbox::plan::replaced_by_resolver(net_policy.mode, &mount.path))
        .filter_map(|mount| Some((mount.path.as_path(), mount.link.as_deref()?)))
        .collect();
    let runtime = sandbox::runtime::Runtime::create(&commands, &files, &copies, &links)
        .context("creating the runtime directory")?;
    let premade_network = sandbox::plan::premade_network_namespace(net_policy.mode, restricted);
    if net_policy.mode == config::Network::Allowlist && !premade_network {
        eprintln!(
            "agent-sandbox: warning: this machine keeps user namespaces from programs without an AppArmor profile \
             (kernel.apparmor_restrict_unprivileged_userns = 1): no resolver inside, so only programs that use the \
             proxy variables reach allowed hosts"
        );
    }
    let mut plan = plan(
        &policy,
        &net_policy,
        &masks,
        &settings_copies.paths,
        &commands,
        &ctx,
        runtime.path(),
        &self_exe,
        &command,
    );
    plan.premade_network = premade_network;
    let bwrap_args = sandbox::plan::bwrap_args(&plan);
    stages.end("prepare");
    debug(&format!("bwrap {}", util::shell_line(&bwrap_args)));
    if let Some(file) = std::env::var_os(BENCH_ARGV_VAR).filter(|file| !file.is_empty()) {
        write_bench_argv(Path::new(&file), &bwrap, &bwrap_args, &env, runtime.keep())?;
        return Ok(Outcome::Ran(0));
    }

    // The session check: a baseline now (shared with other sessions running in this
    // project), the comparison when the command has ended, however it ended.
    // Pre-push needs to know which commits are the user's own (for the checks and the
    // protected paths it holds every new commit to).
    let track_commits = repo.is_some();
    let session = gitcare::session::begin(&state_dir, &watch, || found.clone(), track_commits)
        .context("recording the git metadata before the session")?;
    if track_commits {
        hook_settings.known_commits = session.known_commits.clone();
        hook_settings.agent_commits = session.agent_commits.clone();
        std::fs::write(runtime.layout().hook_guard_settings(), hook_settings.to_json())
            .context("writing the hook guard's settings")?;
    }
    // Pushes leave through this process: `git push` inside asks it, and it pushes from
    // here once every new commit passed the checks in a fresh sandbox.
    let push = match (&repo, gitfacts::layout(&ctx.project_root)) {
        (Some(_), Some(layout)) => {
            let check = CheckInputs {
                config: config.clone(),
                ctx: ctx.clone(),
                pinned: host_present.iter().chain(&pinned_masks).chain(&host_copies).cloned().collect(),
                net_policy: net_policy.clone(),
                masks: masks.clone(),
                settings: settings_copies.paths.clone(),
                commands: commands.clone(),
                self_exe: self_exe.clone(),
                bwrap: bwrap.clone(),
                env: check_env.clone(),
                hook_settings: hook_settings.clone(),
                runtime: runtime.path().to_path_buf(),
            };
            debug("pushes leave through this process (push.sock)");
            // Once for both: the push's git, and the `PATH` it runs its helpers from.
            let search = host_path(&ctx, &policy.mounts);
            let git = find_host_program("git", &ctx, &policy.mounts, &search);
            Some(start_push_service(check, &state_dir, &runtime, layout.common_dir, (git, search.joined()), &agent)?)
        }
        _ => None,
    };
    // The proxy lives exactly as long as the sandbox: this process owns it.
    let refused = netproxy::Refused::default();
    let proxy = if net_policy.mode == config::Network::Allowlist {
        let listener = runtime.listen_net().context("creating the network proxy's socket")?;
        let hosts = std::env::var(netproxy::TEST_HOSTS_VAR).map(|text| netproxy::parse_test_hosts(&text));
        let proxy_config = netproxy::ProxyConfig {
            policy: net_policy.clone(),
            hosts: hosts.unwrap_or_default(),
            audit_log: audit::default_path(),
            agent: agent.clone(),
            max_connections: netproxy::MAX_CONNECTIONS,
            upstream: Vec::new(),
            refused: refused.clone(),
        };
        Some(netproxy::start(listener, runtime.layout().net_socket(), proxy_config))
    } else {
        None
    };
    let private_network = premade_network.then(sandbox::netns::PrivateNetwork::for_current_user);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // An unprivileged user mounts only in a user namespace of its own: the network
    // namespace's, or one made for the caches.
    let overlays = sandbox::caches::Prepared::new(&cache_layers.mounts, !root && !premade_network);
    let on_refused = |path: &Path, err: &std::io::Error| {
        eprintln!(
            "agent-sandbox: warning: cache {} is read-only in this session: overlayfs refused its layer ({err}; does \
             the filesystem of {} support user extended attributes?), so downloads are not kept",
            path.display(),
            cache_layers.root.display()
        );
    };
    stages.end("services");
    debug(&stages.line());
    let code = sandbox::run::run(
        &bwrap,
        &bwrap_args,
        &env,
        &runtime.layout(),
        audit::default_path(),
        private_network.as_ref(),
        overlays.as_ref().map(|prepared| sandbox::run::CacheOverlays { prepared, on_refused: &on_refused }),
    );
    drop(cache_layers);
    if let Some(proxy) = proxy {
        proxy.stop();
    }
    // A tool prints only `403` or a closed connection: say here which hosts the
    // allowlist refused, and how to allow one.
    if let Some(lines) = refused_summary(&refused.lock().map(|refused| refused.clone()).unwrap_or_default()) {
        util::say!("{lines}");
    }
    drop(push);
    // What the session left behind, listed the same (cached) way; when the scan fails (a
    // directory made unreadable), the fail-closed walk, which makes it readable again or
    // reports it for quarantine.
    let found_now = || match scan() {
        Ok(hits) => split_git_entries(&ctx.project_root, &copy_names, hits).0,
        Err(_) => {
            let mut found = gitcare::walk::Found::default();
            gitcare::walk::walk(&ctx.project_root, &copy_names, &mut found);
            for dir in &found.repaired {
                util::say!(
                    "agent-sandbox: note: {} was made unreadable inside the sandbox; gave its owner read and search \
                     permission back so that it could be checked",
                    dir.display()
                );
            }
            found
        }
    };
    let checked = gitcare::session::finish(session, &watch, found_now);
    sandbox::run::exit_check_finished();
    if let Some(state) = claude_state {
        state.finish();
    }
    runtime.remove().context("removing the runtime directory")?;
    let (_, stuck) = checked.context(
        "checking the git metadata after the session failed: inspect nested .git entries, .git/config and the hooks \
         before running git here",
    )?;
    if stuck > 0 {
        util::say!(
            "agent-sandbox: WARNING: {stuck} path(s) above could be neither moved aside nor deleted: do not run git \
             in this project until you have removed them"
        );
    }
    Ok(Outcome::Ran(code?))
}

/// The `@caches` directories the policy grants read-write (the preset's rule won).
fn cache_paths(mounts: &[Mount]) -> Vec<PathBuf> {
    mounts
        .iter()
        .filter(|mount| mount.access == policy::Access::Rw && mount.rule.starts_with("@caches:"))
        .map(|mount| mount.path.clone())
        .collect()
}

fn make_read_only(mounts: &mut [Mount], path: &Path) {
    for mount in mounts.iter_mut().filter(|mount| mount.path == path) {
        mount.access = policy::Access::Ro;
    }
}

/// The caches' layers for one session (`sandbox::caches`): the persistent ones under
/// the state directory's `caches/`, held by a lock while the session runs; a session
/// starting while another holds them stacks layers of its own on them, removed at its
/// end.
struct CacheLayers {
    root: PathBuf,
    mounts: Vec<sandbox::caches::CacheMount>,
    _lock: Option<std::fs::File>,
    /// This session's own layers (and their lock), removed when dropped.
    own: Option<(PathBuf, std::fs::File)>,
}

impl CacheLayers {
    fn take(state_dir: &Path, home: &Path, mounts: &[Mount], restricted: bool, dry_run: bool) -> Result<CacheLayers> {
        let root = state_dir.join(CACHE_LAYERS);
        let caches = cache_paths(mounts);
        let unavailable = restricted.then_some(
            "this machine keeps user namespaces from programs without an AppArmor profile \
             (kernel.apparmor_restrict_unprivileged_userns = 1)",
        );
        let mut layers = CacheLayers { root: root.clone(), mounts: Vec::new(), _lock: None, own: None };
        let plan = |session: Option<&Path>| {
            sandbox::caches::plan(&caches, &sandbox::caches::Layers { root: &root, home, session }, unavailable)
        };
        if dry_run || caches.is_empty() || unavailable.is_some() {
            layers.mounts = plan(None);
            return Ok(layers);
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&root)
            .with_context(|| format!("creating {}", root.display()))?;
        let lock = util::fs::lock(&root.join(CACHE_LOCK), false)
            .with_context(|| format!("locking {}", root.join(CACHE_LOCK).display()))?;
        if lock.is_some() {
            remove_stale_session_layers(&root);
            layers._lock = lock;
            layers.mounts = plan(None);
        } else {
            let dir = root.join(format!("{CACHE_SESSION_PREFIX}{}", std::process::id()));
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .with_context(|| format!("creating {}", dir.display()))?;
            let own_lock = util::fs::lock(&dir.join(CACHE_LOCK), false)
                .with_context(|| format!("locking {}", dir.display()))?
                .with_context(|| format!("locking {}", dir.display()))?;
            layers.mounts = plan(Some(&dir));
            layers.own = Some((dir, own_lock));
        }
        if let Err(err) = sandbox::caches::create_layers(&layers.mounts) {
            let why = format!("its layer cannot be made under {}: {err}", root.display());
            layers.mounts = caches
                .iter()
                .map(|path| sandbox::caches::CacheMount::ReadOnly { path: path.clone(), why: why.clone() })
                .collect();
        }
        Ok(layers)
    }
}

impl Drop for CacheLayers {
    fn drop(&mut self) {
        if let Some((dir, _)) = &self.own {
            sandbox::caches::remove_session_layers(dir);
        }
    }
}

/// Removes the layers of concurrent sessions that are gone (their lock is free).
fn remove_stale_session_layers(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        let stale = entry.file_name().to_string_lossy().starts_with(CACHE_SESSION_PREFIX)
            && matches!(util::fs::lock(&entry.path().join(CACHE_LOCK), false), Ok(Some(_)));
        if stale {
            sandbox::caches::remove_session_layers(&entry.path());
        }
    }
}

/// The caches' layers in the state directory (`sandbox::caches::layer_name` inside).
pub const CACHE_LAYERS: &str = "caches";
const CACHE_LOCK: &str = "lock";
const CACHE_SESSION_PREFIX: &str = ".session-";

/// The tool guard's settings and the agents' managed configuration that runs it before
/// every tool call (merged into the host's own, when it has some). Rules that do not
/// parse stop the start: a guard that would deny nothing must not look configured.
fn tool_guard_files(config: &config::Config) -> Result<(String, String, String)> {
    let settings = guard_settings::ToolGuardSettings::from_config(config);
    toolguard::Guard::new(&settings.disallowed, settings.read_only).map_err(anyhow::Error::msg)?;
    let host_file = |path: &str| match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        // One this user cannot read, the agent (running as this user) could not read
        // either: ours takes its place.
        Err(err) if matches!(err.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied) => {
            Ok(None)
        }
        Err(err) => Err(err).with_context(|| format!("reading {path} (the agent's managed configuration)")),
    };
    let command = format!("{} tool-guard", runtime_layout::RuntimeLayout::inside().marker().display());
    let claude = toolguard::claude_managed_settings(
        host_file(runtime_layout::CLAUDE_MANAGED_SETTINGS)?.as_deref(),
        &format!("{command} --agent claude"),
    )
    .map_err(|why| {
        anyhow::anyhow!(
            "{}: {why} (Claude Code would not read it either; fix or remove it)",
            runtime_layout::CLAUDE_MANAGED_SETTINGS
        )
    })?;
    let codex = toolguard::codex_requirements(
        host_file(runtime_layout::CODEX_REQUIREMENTS)?.as_deref(),
        &format!("{command} --agent codex"),
    );
    Ok((settings.to_json(), claude, codex))
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

/// The installation directories of the executables in visible `PATH` directories under
/// `home` whose symlinks lead to where no mount reaches (and nothing hides on purpose):
/// the npm package root (`package.json`), the virtual environment (`pyvenv.cfg`), else
/// the target's own directory (never a directory directly under home, `~/.config` or
/// `~/.local/share`). Only a chain of symlinks none of which the sandbox could have
/// written counts: every link on the way must lie where the sandbox cannot write.
fn hidden_installations(path_var: Option<&std::ffi::OsStr>, home: &Path, mounts: &[Mount]) -> Vec<PathBuf> {
    let covered = |path: &Path| mounts.iter().any(|mount| path.starts_with(&mount.path));
    let most_specific = |path: &Path| {
        mounts.iter().filter(|mount| path.starts_with(&mount.path)).max_by_key(|mount| mount.path.components().count())
    };
    // Writable inside: under a read-write mount (the project, `--rw`, @caches, @agents).
    let writable = |path: &Path| most_specific(path).is_some_and(|mount| mount.access == policy::Access::Rw);
    let read_only = |dir: &Path| most_specific(dir).is_some_and(|mount| mount.access == policy::Access::Ro);
    let too_wide = [home.to_path_buf(), home.join(".config"), home.join(".local/share"), home.join(".local")];
    let mut found: Vec<PathBuf> = Vec::new();
    for dir in std::env::split_paths(path_var.unwrap_or_default()) {
        if !dir.is_absolute() || !dir.starts_with(home) || !read_only(&dir) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|kind| kind.is_symlink()) {
                continue;
            }
            let Some((target, links)) = resolve_tracking(&entry.path()) else { continue };
            if links.iter().any(|link| link.parent().is_none_or(writable)) {
                continue; // the agent could have planted or replaced a link on the way
            }
            // Already shown, or hidden on purpose (an exclude): leave it.
            if covered(&target) || !target.starts_with(home) {
                continue;
            }
            let install = target
                .ancestors()
                .skip(1)
                .take_while(|ancestor| *ancestor != home)
                .find(|ancestor| ancestor.join("package.json").is_file() || ancestor.join("pyvenv.cfg").is_file())
                .or_else(|| target.parent())
                .map(Path::to_path_buf);
            let Some(install) = install else { continue };
            let wide = too_wide.iter().any(|wide| install == *wide || install.parent() == Some(wide.as_path()));
            if !wide && !found.contains(&install) {
                found.push(install);
            }
        }
    }
    found
}

/// `path` resolved as the kernel resolves it, one component at a time, with the path of
/// every symlink met on the way; `None` if it does not resolve (or loops).
fn resolve_tracking(path: &Path) -> Option<(PathBuf, Vec<PathBuf>)> {
    use std::path::Component;
    let mut pending: std::collections::VecDeque<std::ffi::OsString> = std::collections::VecDeque::new();
    let push_front = |pending: &mut std::collections::VecDeque<std::ffi::OsString>, path: &Path| {
        for component in path.components().rev() {
            match component {
                Component::Normal(name) => pending.push_front(name.to_os_string()),
                Component::ParentDir => pending.push_front("..".into()),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
    };
    if !path.is_absolute() {
        return None;
    }
    push_front(&mut pending, path);
    let mut resolved = PathBuf::from("/");
    let mut links = Vec::new();
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        let next = resolved.join(&name);
        let meta = next.symlink_metadata().ok()?;
        if meta.is_symlink() {
            if links.len() >= 40 {
                return None;
            }
            let target = std::fs::read_link(&next).ok()?;
            links.push(next);
            if target.is_absolute() {
                resolved = PathBuf::from("/");
            }
            push_front(&mut pending, &target);
        } else {
            resolved = next;
        }
    }
    Some((resolved, links))
}

/// What `exec` says at the end about the destinations the allowlist refused (`None`:
/// none): each once, at most ten, with the way to allow one.
fn refused_summary(refused: &std::collections::BTreeMap<String, String>) -> Option<String> {
    if refused.is_empty() {
        return None;
    }
    let mut text = format!(
        "agent-sandbox: the network allowlist refused {} destination{} this session (tools show this as 403 or a \
         closed connection):",
        refused.len(),
        if refused.len() == 1 { "" } else { "s" }
    );
    // The names are the agent's: no control character reaches the terminal.
    for (target, reason) in refused.iter().take(10) {
        text.push_str(&format!("\n  {}: {}", util::one_line(target), util::one_line(reason)));
    }
    if refused.len() > 10 {
        text.push_str(&format!("\n  … and {} more (agent-sandbox log --blocked-only)", refused.len() - 10));
    }
    Some(text)
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

/// See [`BENCH_ARGV_VAR`].
fn write_bench_argv(
    file: &Path,
    bwrap: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
    runtime: PathBuf,
) -> Result<()> {
    let text = |value: &std::ffi::OsStr| value.to_string_lossy().into_owned();
    let json = serde_json::json!({
        "bwrap": text(bwrap.as_os_str()),
        "args": args.iter().map(|arg| text(arg)).collect::<Vec<_>>(),
        "env": env.iter().map(|(name, value)| [text(name), text(value)]).collect::<Vec<_>>(),
        "runtime": text(runtime.as_os_str()),
    });
    std::fs::write(file, json.to_string()).with_context(|| format!("writing {}", file.display()))
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

/// Whether `command` can be started inside: found on the sandbox's `PATH` (or at its
/// path), and visible there together with what its symlinks lead to (`~/.local/bin/x`
/// → `~/.local/share/x/versions/1/x`). The error says what is missing and the flag that
/// adds it.
fn find_inside(
    command: &std::ffi::OsStr,
    path_var: Option<&std::ffi::OsStr>,
    cwd: &Path,
    mounts: &[Mount],
) -> std::result::Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let name = Path::new(command);
    let candidates: Vec<PathBuf> = if name.components().count() > 1 || name.is_absolute() {
        vec![cwd.join(name)]
    } else {
        std::env::split_paths(path_var.unwrap_or_default())
            .filter(|dir| !dir.starts_with(sandbox::plan::RUNTIME_DIR))
            .map(|dir| cwd.join(dir).join(name))
            .collect()
    };
    let mut hidden = None;
    for candidate in &candidates {
        let executable =
            candidate.metadata().is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0);
        if !executable {
            continue;
        }
        let real = candidate.canonicalize().unwrap_or_else(|_| candidate.clone());
        match (policy::is_visible(candidate, mounts), policy::is_visible(&real, mounts)) {
            (true, true) => return Ok(()),
            (false, _) => hidden = hidden.or(Some((candidate.clone(), candidate.clone()))),
            (true, false) => hidden = hidden.or(Some((candidate.clone(), real))),
        }
    }
    let shown = name.display();
    match hidden {
        Some((found, missing)) => {
            let dir = missing.parent().unwrap_or(&missing);
            let what = if found == missing {
                format!("{} is not visible inside", found.display())
            } else {
                format!("{} leads to {}, which is not visible inside", found.display(), missing.display())
            };
            Err(format!(
                "{shown}: {what} (show it read-only with --ro {}, or add it to filesystem.ro in the config)",
                dir.display()
            ))
        }
        None if candidates.len() == 1 && !name.is_relative() || name.components().count() > 1 => {
            Err(format!("{shown}: no such executable file"))
        }
        None => Err(format!("{shown}: command not found on the sandbox's PATH")),
    }
}

/// bwrap from a `PATH` entry `policy::path_search` keeps (on the host: absolute, outside
/// the project and every writable grant), and itself not a link into such a place: a
/// relative entry (`node_modules/.bin`) or one the agent can write would run a bwrap the
/// agent planted, on the host, unsandboxed.
fn find_bwrap(ctx: &Context, mounts: &[Mount], host_path: &policy::path_search::SearchPath) -> Result<PathBuf> {
    find_host_program("bwrap", ctx, mounts, host_path).ok_or_else(|| sandbox::run::RunError::BwrapMissing.into())
}

/// A program the host runs on the agent's behalf (bwrap, the push's git), found as
/// [`find_bwrap`] says, in `host_path` ([`host_path`]): only where the agent cannot
/// have put it.
fn find_host_program(
    name: &str,
    ctx: &Context,
    mounts: &[Mount],
    host_path: &policy::path_search::SearchPath,
) -> Option<PathBuf> {
    let real = |path: &Path| path.canonicalize().ok();
    let facts = search_facts(ctx, mounts, &real, None);
    host_path
        .kept
        .iter()
        .map(|dir| dir.join(name))
        .filter(|candidate| candidate.is_file())
        .find(|candidate| policy::path_search::judge(candidate, &facts).is_ok())
}

/// The start `PATH` less every entry the agent can write: what the host's own programs
/// search (the push's git runs `ssh`, `git-receive-pack` and credential helpers from
/// its `PATH`, each with the user's credentials at hand).
fn host_path(ctx: &Context, mounts: &[Mount]) -> policy::path_search::SearchPath {
    let real = |path: &Path| path.canonicalize().ok();
    let path = std::env::var_os("PATH").unwrap_or_default();
    policy::path_search::decide(&path, &search_facts(ctx, mounts, &real, None))
}

/// The `PATH` the checks search (`path_var`, the start `PATH`): only directories shown
/// read-only in the sandbox, outside the project, every writable grant and the runtime
/// directory.
fn checks_path(path_var: &std::ffi::OsStr, ctx: &Context, mounts: &[Mount]) -> policy::path_search::SearchPath {
    let real = |path: &Path| path.canonicalize().ok();
    let runtime = [Path::new(sandbox::plan::RUNTIME_DIR)];
    policy::path_search::decide(path_var, &search_facts(ctx, mounts, &real, Some(&runtime)))
}

/// What `policy::path_search` judges against: for the host's own programs
/// (`inside_runtime` `None`), or for what the sandbox runs (the checks), where its
/// runtime directory and whatever no mount shows read-only are no place for tools either.
fn search_facts<'a>(
    ctx: &'a Context,
    mounts: &'a [Mount],
    real: &'a dyn Fn(&Path) -> Option<PathBuf>,
    inside_runtime: Option<&'a [&'a Path]>,
) -> policy::path_search::SearchFacts<'a> {
    policy::path_search::SearchFacts {
        project_root: &ctx.project_root,
        mounts,
        runtime_dirs: inside_runtime.unwrap_or_default(),
        inside: inside_runtime.is_some(),
        real,
    }
}

/// The scan pattern that finds git directories and gitlinks in the work tree.
const GIT_ENTRY: &str = ".git";

/// The scan pattern that finds what may make a directory a bare repository.
const HEAD_ENTRY: &str = "HEAD";

/// Splits scan hits into the git entries (for the session check) and the secrets.
/// Secret directories are not descended into by the scan (masked or not, the agent may
/// have made them): they are walked for `.git` and `HEAD` here, fail-closed.
fn split_git_entries(
    root: &Path,
    copy_names: &[OsString],
    hits: Vec<secrets::SecretHit>,
) -> (gitcare::walk::Found, Vec<secrets::SecretHit>) {
    let mut found = gitcare::walk::Found::default();
    let mut secrets = Vec::new();
    for hit in hits {
        match hit.pattern.as_str() {
            GIT_ENTRY if hit.path != root.join(GIT_ENTRY) => found.nested.push(hit.path),
            GIT_ENTRY => {}
            HEAD_ENTRY => found.heads.push(hit.path),
            secrets::COPY_PATTERN => found.copies.push(hit.path),
            _ => {
                if hit.kind == secrets::EntryKind::Dir {
                    gitcare::walk::walk(&hit.path, copy_names, &mut found);
                }
                secrets.push(hit);
            }
        }
    }
    (found, secrets)
}

/// What the checks of a pushed commit run in: the session's sandbox, decided again with
/// the push's private directory granted read-write. Owned, because the push service
/// decides it on its own thread while the sandbox starts.
struct CheckInputs {
    config: config::Config,
    ctx: Context,
    /// Paths whose parents are pinned in the session's policy.
    pinned: Vec<PathBuf>,
    net_policy: policy::network::NetPolicy,
    masks: Vec<Mask>,
    /// The settings copies in the runtime directory, in its order.
    settings: Vec<PathBuf>,
    commands: Vec<sandbox::plan::WrappedCommand>,
    self_exe: PathBuf,
    bwrap: PathBuf,
    env: Vec<(OsString, OsString)>,
    hook_settings: guard_settings::HookGuardSettings,
    /// The session's runtime directory (the checks' sandboxes use it too).
    runtime: PathBuf,
}

impl CheckInputs {
    /// Writes into the push directory `dir` the pre-push hook the host's git runs and its
    /// settings: the hook guard's, with the sandbox its checks run in (worktree
    /// `dir/worktree`).
    fn prepare(self, dir: &Path) -> Result<()> {
        let hook = dir.join("hooks/pre-push");
        std::fs::DirBuilder::new().mode(0o700).create(dir.join("hooks")).context("creating the push hooks")?;
        std::fs::write(&hook, hostpush::service::hook_script(&self.self_exe)).context("writing the push hook")?;
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
        let worktree = dir.join("worktree");
        // The mirror the push is checked and sent from: the worktree's git records are
        // there, which the checks read but must not change.
        let mirror = dir.join(PUSH_MIRROR);
        std::fs::DirBuilder::new().mode(0o700).create(&mirror).context("creating the push mirror")?;
        let mut config = self.config;
        config.rw.push(builtin_path(dir));
        config.ro.push(builtin_path(&mirror));
        let mut policy = policy::resolve(&config, &self.ctx)?;
        policy::pin_parents(&mut policy.mounts, &self.pinned);
        // The checks run the agent's code outside the session's namespace, where the
        // caches would be the host's own: read-only there.
        for path in cache_paths(&policy.mounts) {
            make_read_only(&mut policy.mounts, &path);
        }
        let ctx = Context { cwd: worktree.clone(), ..self.ctx };
        let command: Vec<OsString> = vec!["/bin/sh".into(), "-c".into()];
        let plan = plan(
            &policy,
            &self.net_policy,
            &self.masks,
            &self.settings,
            &self.commands,
            &ctx,
            &self.runtime,
            &self.self_exe,
            &command,
        );
        let text = |value: &std::ffi::OsStr| value.to_string_lossy().into_owned();
        let mut settings = self.hook_settings;
        settings.check_sandbox = Some(guard_settings::CheckSandbox {
            bwrap: self.bwrap,
            args: sandbox::plan::bwrap_args(&plan).iter().map(|arg| text(arg)).collect(),
            env: self.env.iter().map(|(name, value)| (text(name), text(value))).collect(),
            runtime: self.runtime,
            worktree,
        });
        util::fs::atomic_write(&dir.join(PUSH_SETTINGS), settings.to_json().as_bytes(), 0o600)
            .context("writing the push's settings")?;
        Ok(())
    }
}

/// The hook guard's settings in the push directory.
const PUSH_SETTINGS: &str = "hook-guard.json";
/// The mirror in the push directory (`hostpush::mirror`).
const PUSH_MIRROR: &str = "mirror.git";

/// The push service and its private directory (removed when dropped; locked while it
/// lives, so that the next start can tell a killed session's from a running one's).
struct PushService {
    _service: hostpush::service::Service,
    _lock: std::fs::File,
    _dir: tempfile::TempDir,
}

/// Removes the push directories of sessions that are gone (killed before removing
/// theirs); `git worktree prune` forgets a check worktree left in one. Only directories
/// older than a minute: a starting session makes its directory, then locks it.
fn remove_stale_push_dirs(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let dir = entry.path();
        let old = entry
            .metadata()
            .ok()
            .filter(|meta| meta.is_dir())
            .and_then(|meta| meta.modified().ok())
            .is_some_and(|modified| modified.elapsed().is_ok_and(|age| age > std::time::Duration::from_secs(60)));
        if old && matches!(util::fs::lock(&dir.join(PUSH_LOCK), false), Ok(Some(_))) {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// Held by the session that owns a push directory.
const PUSH_LOCK: &str = "lock";

/// Starts the host's push service for this session: its socket now (the git guard
/// inside only forwards to one that exists), and a private directory in the state
/// directory (which no sandbox shows) for the pre-push hook the host's git runs, its
/// settings and the worktree checks use, filled on the service's thread.
fn start_push_service(
    check: CheckInputs,
    state_dir: &Path,
    runtime: &sandbox::runtime::Runtime,
    common_dir: PathBuf,
    (git, host_path_var): (Option<PathBuf>, OsString),
    agent: &str,
) -> Result<PushService> {
    let parent = state_dir.join("push");
    std::fs::DirBuilder::new().mode(0o700).recursive(true).create(&parent).context("creating the push directory")?;
    remove_stale_push_dirs(&parent);
    let dir = tempfile::Builder::new().prefix("session-").tempdir_in(&parent).context("creating the push directory")?;
    let lock = util::fs::lock(&dir.path().join(PUSH_LOCK), true)
        .context("locking the push directory")?
        .context("locking the push directory")?;
    let listener = runtime.listen_push().context("creating the push service's socket")?;
    let allow_branch_deletion = check.config.git_allow_branch_deletion.value;
    let project_root = check.ctx.project_root.clone();
    let path = dir.path().to_path_buf();
    let service = hostpush::service::start(
        listener,
        runtime.layout().push_socket(),
        hostpush::service::ServiceConfig {
            project_root,
            common_dir,
            allow_branch_deletion,
            hooks_dir: dir.path().join("hooks"),
            mirror: dir.path().join(PUSH_MIRROR),
            settings: dir.path().join(PUSH_SETTINGS),
            // The user's environment, with the `PATH` the agent cannot have planted in.
            env: std::env::vars_os()
                .map(|(name, value)| if name == "PATH" { (name, host_path_var.clone()) } else { (name, value) })
                .collect(),
            agent: agent.to_owned(),
            git: git.clone().unwrap_or_default(),
            bwrap: check.bwrap.clone(),
        },
        Box::new(move || match git {
            Some(_) => check.prepare(&path).map_err(|err| format!("{err:#}")),
            None => Err("no git on a PATH entry outside the project and every writable grant (the host pushes with \
                         such a git only: one the agent could have planted would hold your credentials)"
                .to_owned()),
        }),
    );
    Ok(PushService { _service: service, _lock: lock, _dir: dir })
}

#[allow(clippy::too_many_arguments)]
fn plan<'a>(
    policy: &'a policy::Policy,
    net_policy: &'a policy::network::NetPolicy,
    masks: &'a [Mask],
    settings: &'a [PathBuf],
    commands: &'a [sandbox::plan::WrappedCommand],
    ctx: &'a Context,
    runtime: &'a Path,
    self_exe: &'a Path,
    command: &'a [OsString],
) -> Plan<'a> {
    Plan {
        network: policy.network.value,
        premade_network: false,
        host_ports: &net_policy.host_ports,
        mounts: &policy.mounts,
        masks,
        settings,
        commands,
        home: &ctx.home,
        cwd: &ctx.cwd,
        runtime,
        self_exe,
        command,
    }
}

/// The session's start (agent, project, command line), then what it hides from the
/// sandbox: masked files and dropped variables.
fn record(
    agent: &str,
    command: &[OsString],
    project_root: &Path,
    masked: &[masks::Masked],
    dropped: &[policy::env::Dropped],
) {
    let Some(path) = audit::default_path() else {
        return;
    };
    let start = audit::Event::new(
        agent,
        "session",
        &project_root.display().to_string(),
        "allowed",
        "session-start",
        Some(util::shell_line(command)),
    );
    let mut events: Vec<audit::Event> = std::iter::once(start)
        .chain(masked.iter().map(|masked| {
            let reason = if masked.mask.path == masked.found {
                format!("matches {}", masked.pattern)
            } else {
                format!("target of {}, which matches {}", masked.found.display(), masked.pattern)
            };
            let target = masked.mask.path.display().to_string();
            audit::Event::new(agent, "read", &target, "masked", "sensitive-file-pattern", Some(reason))
        }))
        .collect();
    events.extend(dropped.iter().map(|gone| {
        audit::Event::new(agent, "env", &gone.name, "blocked", gone.policy, Some(format!("matches {}", gone.pattern)))
    }));
    if let Err(err) = audit::append(&path, &events) {
        eprintln!("agent-sandbox: warning: cannot write the audit log {}: {err}", path.display());
    }
}

fn relative(path: &Path, root: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}
