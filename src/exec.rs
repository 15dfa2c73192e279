//! `agent-sandbox exec` and `config show`: gathers the facts of the invocation (home,
//! cwd, project root), loads the configuration, resolves the policy, finds the secrets
//! to mask and the commands to wrap, then prints (`--dry-run`) or runs the bwrap plan.

use std::{
    ffi::OsString,
    io::IsTerminal,
    os::unix::fs::DirBuilderExt,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _, Result};
use policy::{Context, Kind, Mount};
use sandbox::plan::{Mask, Plan};

use crate::cli::{ExecArgs, PolicyArgs};

struct Loaded {
    ctx: Context,
    config: config::Config,
    files: Vec<PathBuf>,
    /// agent-sandbox's cache: scan listings, git exec-path stand-ins.
    cache_dir: PathBuf,
    /// Its own directories (config, cache, state), hidden or read-only inside.
    own_dirs: [PathBuf; 3],
    /// Config files the agent could have written (the project's, a `-c` file inside the
    /// project), each with whether the user allowed it as it is.
    project_config: Vec<(PathBuf, bool)>,
    repo: Option<sandbox::git::RepoFacts>,
}

fn load(args: &PolicyArgs) -> Result<Loaded> {
    let home = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set (agent-sandbox needs it to resolve ~ and the presets; set HOME)")?;
    let cwd = match &args.cwd {
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
        explicit: args.config.clone(),
    };
    let cli = config::cli_layer(args.network.as_deref(), &args.ro, &args.rw, &args.exclude, &args.cmds)?;
    let explicit_inside =
        args.config.as_ref().and_then(|file| file.canonicalize().ok()).filter(|file| file.starts_with(&project_root));
    let project_config: Vec<(PathBuf, bool)> = config::find_config_file(&project_dir)?
        .into_iter()
        .chain(explicit_inside)
        .map(|path| {
            let allowed = config::approval::is_allowed(&state_dir, &path);
            (path, allowed)
        })
        .collect();
    let (mut config, files) = config::load(&sources, cli)?;
    // agent-sandbox's own files stay out of reach even when a parent is granted: the
    // sandbox must not loosen the next run's config, nor poison its scan cache, nor
    // rewrite the audit log.
    let builtin = config::Origin { layer: config::LayerKind::Default, location: config::Location::Builtin };
    let own = |dir: &Path| config::Sourced { value: dir.display().to_string(), origin: builtin.clone() };
    config.ro.push(own(&global_dir));
    config.exclude.push(own(&cache_dir));
    config.exclude.push(own(&state_dir));
    // The repository as git sees it (every config file), for @git and the guard.
    let repo = project_root.join(".git").exists().then(|| sandbox::git::repo_facts(&project_root)).flatten();
    let hooks_path = repo.as_ref().and_then(|repo| repo.hooks_path.clone());
    Ok(Loaded {
        ctx: Context { home, cwd, project_root, hooks_path },
        config,
        files,
        cache_dir: cache_dir.clone(),
        own_dirs: [global_dir, cache_dir, state_dir],
        project_config,
        repo,
    })
}

/// `agent-sandbox config allow`: trusts the project's config file as it is now.
pub fn config_allow(args: &PolicyArgs) -> Result<i32> {
    let loaded = load(args)?;
    if loaded.project_config.is_empty() {
        println!(
            "{} has no .agent-sandbox/config.jsonc or config.json: nothing to allow",
            loaded.ctx.project_root.display()
        );
        return Ok(0);
    }
    let state_dir = &loaded.own_dirs[2];
    for (path, _) in &loaded.project_config {
        let bytes = config::approval::allow(state_dir, path).context("allowing the project config")?;
        println!("allowed {} as it is now:", path.display());
        // Shown with control characters escaped: an escape sequence could hide lines.
        let text: String = String::from_utf8_lossy(&bytes)
            .chars()
            .flat_map(|c| match c {
                '\n' | '\t' => vec![c],
                c if c.is_control() => c.escape_default().collect(),
                c => vec![c],
            })
            .collect();
        print!("{text}");
    }
    Ok(0)
}

pub fn config_show(args: &PolicyArgs, json: bool) -> Result<i32> {
    let loaded = load(args)?;
    for (path, _) in loaded.project_config.iter().filter(|(_, allowed)| !allowed) {
        eprintln!(
            "agent-sandbox: note: {} is not allowed as it is: exec refuses to start until `agent-sandbox config allow`",
            path.display()
        );
    }
    if json {
        let text = serde_json::to_string_pretty(&loaded.config.to_json()).context("formatting JSON")?;
        println!("{text}");
    } else {
        print!("{}", loaded.config.to_text());
    }
    Ok(0)
}

pub fn exec(args: ExecArgs) -> Result<i32> {
    if !cfg!(target_os = "linux") {
        bail!(
            "agent-sandbox exec needs Linux: bubblewrap is built on Linux namespaces (elsewhere, use a devcontainer)"
        );
    }
    if sandbox::check::detect() != sandbox::check::Where::Outside {
        bail!("this is already inside an agent-sandbox; run the command directly (sandboxes do not nest)");
    }
    let debug = |line: &str| {
        if args.debug {
            eprintln!("agent-sandbox: debug: {line}");
        }
    };
    let Loaded { ctx, config, files, cache_dir, own_dirs, project_config, repo } = load(&args.policy)?;
    if let Some((path, _)) = project_config.iter().find(|(_, allowed)| !allowed) {
        bail!(
            "the project config {} is new or changed since you allowed it, and it can widen what the agent may do \
             (review it, then run: agent-sandbox config allow{})",
            path.display(),
            args.policy.cwd.as_ref().map(|dir| format!(" -C {}", dir.display())).unwrap_or_default()
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
    // An agent's state directory that does not exist yet would live in the scratch home
    // and vanish with it (and the user's login with it).
    let agent_name =
        args.command.first().and_then(|cmd| Path::new(cmd).file_name()).map(|name| name.to_string_lossy().into_owned());
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

    let mut policy = policy::resolve(&config, &ctx)?;
    // `.git` entries are reported too (and not descended into), and `HEAD` files: see
    // gitcare.rs.
    // `.git` before any secret or allow pattern (`.g*`) can claim it.
    let patterns: Vec<String> = config.secret_patterns.iter().map(|item| item.value.clone()).collect();
    let matcher = secrets::SecretMatcher::new(
        &patterns,
        &config.secret_allow.iter().map(|item| item.value.clone()).collect::<Vec<_>>(),
    )?
    .with_markers(&[GIT_ENTRY], &[HEAD_ENTRY]);
    let skip: Vec<PathBuf> = policy
        .mounts
        .iter()
        .filter(|mount| mount.access == policy::Access::Exclude && mount.path.starts_with(&ctx.project_root))
        // An excluded directory with a grant inside is scanned: the grant is visible.
        .filter(|mount| !sandbox::plan::has_descendants(mount, &policy.mounts))
        .map(|mount| mount.path.clone())
        .collect();
    let (nested_git, heads, hits) =
        split_git_entries(&ctx.project_root, secrets::scan_cached(&ctx.project_root, &matcher, &skip, &scan_cache)?);
    let hits = if repo.is_some() { untracked_or_changed(&ctx.project_root, hits, &mut policy.notes) } else { hits };
    let hits = outside_dependency_trees(hits, &mut policy.notes);
    let masked = masks_for(&hits, &policy.mounts, &mut policy.notes);
    let masks: Vec<Mask> = masked.iter().map(|(mask, _)| mask.clone()).collect();
    // A secret named by a path pattern (`config/prod.yaml`) would be unmasked next time by
    // renaming its parent: pin the parents.
    let by_path: Vec<PathBuf> =
        masked.iter().filter(|(_, hit)| hit.pattern.contains('/')).map(|(mask, _)| mask.path.clone()).collect();
    policy::pin_parents(&mut policy.mounts, &by_path);

    let filter = policy::env::EnvFilter::new(&config)?;
    let (mut env, dropped) = filter.apply(std::env::vars_os());
    // `agent-sandbox check` works inside without knowing where the binary came from.
    if let Some((_, path)) = env.iter_mut().find(|(name, _)| name == "PATH") {
        path.push(":");
        path.push(sandbox::plan::RUNTIME_DIR);
    }
    for gone in &dropped {
        policy.notes.push(format!("env: {} dropped ({} {})", gone.name, gone.policy, gone.pattern));
    }
    let path_var = env.iter().find(|(name, _)| name == "PATH").map(|(_, value)| value.clone());
    let commands = sandbox::commands::wrap(
        &policy.commands,
        path_var.as_deref(),
        &policy.mounts,
        &ctx,
        &cache_dir,
        &mut policy.notes,
    )?;
    for note in &policy.notes {
        debug(note);
    }

    let command: Vec<OsString> = if args.command.is_empty() {
        vec![std::env::var_os("SHELL").filter(|shell| !shell.is_empty()).unwrap_or_else(|| "/bin/sh".into())]
    } else {
        args.command.clone()
    };
    let self_exe = std::env::current_exe().context("cannot find the agent-sandbox binary itself")?;
    let bwrap = find_bwrap(&ctx, &policy.mounts)?;

    if args.dry_run {
        let plan = plan(&policy, &masks, &commands, &ctx, Path::new("$RUNTIME"), &self_exe, &command);
        let names: Vec<String> = env.iter().map(|(name, _)| name.to_string_lossy().into_owned()).collect();
        println!("# environment passed: {}", names.join(" "));
        let mut argv = vec![bwrap.into_os_string()];
        argv.extend(sandbox::plan::bwrap_args(&plan));
        println!("{}", util::shell_line(&argv));
        return Ok(0);
    }

    let agent = Path::new(&command[0]).file_name().map_or("?".into(), |name| name.to_string_lossy().into_owned());
    record(&agent, &masked, &dropped);
    if !dropped.is_empty() && std::io::stderr().is_terminal() {
        let names: Vec<&str> = dropped.iter().take(6).map(|gone| gone.name.as_str()).collect();
        let more = if dropped.len() > 6 { format!(" and {} more", dropped.len() - 6) } else { String::new() };
        eprintln!(
            "agent-sandbox: not passing {} secret-looking variable(s): {}{more} (pass one with env.allow)",
            dropped.len(),
            names.join(", ")
        );
    }
    if !masks.is_empty() && std::io::stderr().is_terminal() {
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
    let git_options = sandbox::git::options_json(
        config.git_allow_branch_deletion.value,
        config.git_allow_plumbing_commits.value,
        repo.as_ref(),
    );
    let mut hook_settings = hookguard::Settings::from_config(&config);
    hook_settings.masked_paths = masks
        .iter()
        .filter_map(|mask| mask.path.strip_prefix(&ctx.project_root).ok())
        .map(|rel| rel.to_string_lossy().into_owned())
        .collect();
    hook_settings.check_env =
        env.iter().filter_map(|(name, value)| Some((name.to_str()?.to_owned(), value.to_str()?.to_owned()))).collect();
    let hook_settings = hook_settings.to_json();
    // Login shells get the sandbox's PATH back (not the host's, which may name what the
    // env filter dropped).
    let profile = path_var
        .as_ref()
        .map_or(String::new(), |path| format!("export PATH='{}'\n", path.to_string_lossy().replace('\'', "'\\''")));
    let files = [
        (sandbox::git::OPTIONS_FILE, git_options.as_str()),
        (hookguard::SETTINGS_FILE, hook_settings.as_str()),
        (sandbox::runtime::PROFILE_FILE, profile.as_str()),
    ];
    let copies: Vec<&Path> =
        sandbox::plan::copied_files(&policy.mounts).iter().map(|mount| mount.path.as_path()).collect();
    let runtime =
        sandbox::runtime::Runtime::create(&commands, &files, &copies).context("creating the runtime directory")?;
    let plan = plan(&policy, &masks, &commands, &ctx, runtime.path(), &self_exe, &command);
    let bwrap_args = sandbox::plan::bwrap_args(&plan);
    debug(&format!("bwrap {}", util::shell_line(&bwrap_args)));
    let common_dir = policy::git::layout(&ctx.project_root).map(|layout| layout.common_dir);
    let git_before = crate::gitcare::snapshot(
        &ctx.project_root,
        common_dir.as_deref(),
        &nested_git,
        &crate::gitcare::bare_layouts(&heads, common_dir.as_deref()),
        ctx.hooks_path.as_slice(),
    );
    let code = sandbox::run::run(&bwrap, &bwrap_args, &env, &runtime, audit::default_path());
    // What the session left behind, listed the same (cached) way; if the scan fails
    // (a directory made unreadable), a plain walk that skips what git could not read
    // either.
    let (nested_now, heads_now) = match secrets::scan_cached(&ctx.project_root, &matcher, &skip, &scan_cache) {
        Ok(hits) => {
            let (nested, heads, _) = split_git_entries(&ctx.project_root, hits);
            (nested, heads)
        }
        Err(_) => {
            let (mut nested, mut heads) = (Vec::new(), Vec::new());
            crate::gitcare::find_git_entries(&ctx.project_root, &mut nested, &mut heads);
            nested.retain(|entry| *entry != ctx.project_root.join(GIT_ENTRY));
            (nested, heads)
        }
    };
    let bare_now = crate::gitcare::bare_layouts(&heads_now, common_dir.as_deref());
    crate::gitcare::after(&git_before, &ctx.project_root, common_dir.as_deref(), &nested_now, &bare_now);
    runtime.remove().context("removing the runtime directory")?;
    Ok(code?)
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

/// bwrap from an absolute `PATH` entry outside the project and outside every writable
/// grant: a relative entry (`node_modules/.bin`) or one the agent can write would run a
/// bwrap the agent planted, on the host, unsandboxed.
fn find_bwrap(ctx: &Context, mounts: &[Mount]) -> Result<PathBuf> {
    let writable = |path: &Path| {
        path.starts_with(&ctx.project_root)
            || mounts.iter().any(|mount| mount.access == policy::Access::Rw && path.starts_with(&mount.path))
    };
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("bwrap"))
        .filter(|candidate| candidate.is_file())
        .find(|candidate| {
            let real = candidate.canonicalize().unwrap_or_else(|_| candidate.clone());
            !writable(&real) && !writable(candidate)
        })
        .ok_or_else(|| sandbox::run::RunError::BwrapMissing.into())
}

/// Directories of installed dependencies and build output, which package managers and
/// build tools delete and rewrite wholesale.
const DEPENDENCY_TREES: &[&str] = &["node_modules", "target", ".venv", "vendor"];

/// Drops secrets found in dependency and build trees by a wildcard pattern
/// (`*secret*` matching `client-secret.js` in a package): masked, they make `npm ci` or
/// `cargo clean` fail with EBUSY. Exact names (`.env`, `id_rsa`) stay masked there too.
fn outside_dependency_trees(hits: Vec<secrets::SecretHit>, notes: &mut Vec<String>) -> Vec<secrets::SecretHit> {
    hits.into_iter()
        .filter(|hit| {
            let in_tree =
                hit.rel_path.components().any(|part| DEPENDENCY_TREES.iter().any(|tree| part.as_os_str() == *tree));
            let keep = !(in_tree && hit.pattern.starts_with('*'));
            if !keep {
                notes.push(format!("secret {}: in a dependency or build tree, not masked", hit.rel_path.display()));
            }
            keep
        })
        .collect()
}

/// The scan pattern that finds git directories and gitlinks in the work tree.
const GIT_ENTRY: &str = ".git";

/// The scan pattern that finds what may make a directory a bare repository.
const HEAD_ENTRY: &str = "HEAD";

/// Splits scan hits into the `.git` entries below the project root, the `HEAD` files,
/// and the secrets. Secret directories are not descended into by the scan (masked or
/// not, the agent may have made them): they are walked for `.git` and `HEAD` here.
fn split_git_entries(
    root: &Path,
    hits: Vec<secrets::SecretHit>,
) -> (Vec<PathBuf>, Vec<PathBuf>, Vec<secrets::SecretHit>) {
    let (mut nested, mut heads, mut secrets) = (Vec::new(), Vec::new(), Vec::new());
    for hit in hits {
        match hit.pattern.as_str() {
            GIT_ENTRY if hit.path != root.join(GIT_ENTRY) => nested.push(hit.path),
            GIT_ENTRY => {}
            HEAD_ENTRY => heads.push(hit.path),
            _ => {
                if hit.kind == secrets::EntryKind::Dir {
                    crate::gitcare::find_git_entries(&hit.path, &mut nested, &mut heads);
                }
                secrets.push(hit);
            }
        }
    }
    (nested, heads, secrets)
}

fn plan<'a>(
    policy: &'a policy::Policy,
    masks: &'a [Mask],
    commands: &'a [sandbox::plan::WrappedCommand],
    ctx: &'a Context,
    runtime: &'a Path,
    self_exe: &'a Path,
    command: &'a [OsString],
) -> Plan<'a> {
    Plan {
        network: policy.network.value,
        mounts: &policy.mounts,
        masks,
        commands,
        home: &ctx.home,
        cwd: &ctx.cwd,
        runtime,
        self_exe,
        command,
    }
}

/// git for agent-sandbox's own look at a repository the agent may have written: no
/// fsmonitor (a command the config can name), no hooks, no untracked cache, and (with
/// `--no-filters` where it matters) no filter drivers. A plain `.git` with a `commondir`
/// is refused before this ever runs.
fn host_git(root: &Path) -> std::process::Command {
    let mut command = std::process::Command::new("git");
    command
        .arg("-C")
        .arg(root)
        .args(["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.untrackedCache=false"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    command
}

/// Of `paths` (relative to `root`), those whose bytes are exactly the blob the index
/// records: their content is in `.git` for anyone to read. The index's flags and stat
/// data are the agent's to set (`--assume-unchanged`, `--cacheinfo`), so only a hash of
/// the file itself counts. `None` when git cannot answer.
fn same_as_index(root: &Path, paths: &[String]) -> Option<Vec<String>> {
    let paths: Vec<&String> = paths.iter().filter(|path| !path.contains('\n')).collect();
    if paths.is_empty() {
        return Some(Vec::new());
    }
    let staged = host_git(root).args(["ls-files", "-s", "-z", "--"]).args(&paths).output().ok()?;
    if !staged.status.success() {
        return None;
    }
    // "<mode> <blob> <stage>\t<path>"
    let index: Vec<(String, String)> = staged
        .stdout
        .split(|b| *b == 0)
        .filter_map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (meta, path) = entry.split_once('\t')?;
            let mut fields = meta.split(' ');
            let (mode, blob, stage) = (fields.next()?, fields.next()?, fields.next()?);
            (stage == "0" && (mode == "100644" || mode == "100755")).then(|| (path.to_owned(), blob.to_owned()))
        })
        .collect();
    let tracked: Vec<&(String, String)> = index.iter().filter(|(path, _)| root.join(path).is_file()).collect();
    if tracked.is_empty() {
        return Some(Vec::new());
    }
    let mut hasher = host_git(root)
        .args(["hash-object", "--no-filters", "--stdin-paths"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    {
        use std::io::Write as _;
        let mut input = hasher.stdin.take()?;
        for (path, _) in &tracked {
            writeln!(input, "{path}").ok()?;
        }
    }
    let hashed = hasher.wait_with_output().ok()?;
    if !hashed.status.success() {
        return None;
    }
    let hashes: Vec<String> = String::from_utf8_lossy(&hashed.stdout).lines().map(str::to_owned).collect();
    if hashes.len() != tracked.len() {
        return None;
    }
    Some(
        tracked
            .iter()
            .zip(hashes)
            .filter(|((_, blob), hash)| *blob == *hash)
            .map(|((path, _), _)| path.clone())
            .collect(),
    )
}

/// Drops, from the secrets to mask, files whose content git already holds (see
/// [`same_as_index`]): masking them hides nothing and only shows the agent an empty file
/// that `git commit -a` would record. A secret directory holding such files is replaced
/// by its other files. When git cannot answer, every hit stays.
fn untracked_or_changed(
    root: &Path,
    hits: Vec<secrets::SecretHit>,
    notes: &mut Vec<String>,
) -> Vec<secrets::SecretHit> {
    let rel = |hit: &secrets::SecretHit| hit.rel_path.to_string_lossy().into_owned();
    let files: Vec<String> = hits.iter().filter(|hit| matches!(hit.kind, secrets::EntryKind::File)).map(rel).collect();
    let Some(known) = same_as_index(root, &files) else { return hits };
    let mut kept = Vec::new();
    for hit in hits {
        let path = rel(&hit);
        match hit.kind {
            secrets::EntryKind::File if known.contains(&path) => {
                notes.push(format!("secret {path}: its exact content is committed to git, not masked"));
            }
            secrets::EntryKind::Dir => {
                let mut inside = Vec::new();
                collect_files(&hit.path, root, &mut inside);
                match same_as_index(root, &inside) {
                    Some(known) if !known.is_empty() => {
                        notes.push(format!("secret {path}/: holds committed files, masking only its others"));
                        for file in inside.into_iter().filter(|file| !known.contains(file)) {
                            kept.push(secrets::SecretHit {
                                path: root.join(&file),
                                rel_path: PathBuf::from(&file),
                                kind: secrets::EntryKind::File,
                                pattern: hit.pattern.clone(),
                            });
                        }
                    }
                    _ => kept.push(hit),
                }
            }
            _ => kept.push(hit),
        }
    }
    kept
}

/// Every non-directory entry under `dir` (symlinks not followed), relative to `root`.
fn collect_files(dir: &Path, root: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            collect_files(&path, root, out);
        } else if let Ok(rel) = path.strip_prefix(root) {
            out.push(rel.to_string_lossy().into_owned());
        }
    }
}

/// What to mount over each secret, with the hit that asked for it: the entry itself, or
/// for a symlink its target when the sandbox can see it (a dangling or hidden target
/// needs nothing).
fn masks_for<'a>(
    hits: &'a [secrets::SecretHit],
    mounts: &[Mount],
    notes: &mut Vec<String>,
) -> Vec<(Mask, &'a secrets::SecretHit)> {
    let mut masks: Vec<(Mask, &secrets::SecretHit)> = Vec::new();
    for hit in hits {
        let (path, kind) = match hit.kind {
            secrets::EntryKind::Dir => (hit.path.clone(), Kind::Dir),
            secrets::EntryKind::File | secrets::EntryKind::Other => (hit.path.clone(), Kind::File),
            secrets::EntryKind::Symlink => match hit.path.canonicalize() {
                Ok(target) if policy::is_visible(&target, mounts) => {
                    let kind = if target.is_dir() { Kind::Dir } else { Kind::File };
                    (target, kind)
                }
                _ => {
                    notes.push(format!("secret {}: symlink to nothing visible, nothing to mask", hit.path.display()));
                    continue;
                }
            },
        };
        notes.push(format!("secret {} masked (matches {})", path.display(), hit.pattern));
        if !masks.iter().any(|(mask, _)| mask.path == path) {
            masks.push((Mask { path, kind }, hit));
        }
    }
    masks.sort_by(|(a, _), (b, _)| {
        a.path.components().count().cmp(&b.path.components().count()).then(a.path.cmp(&b.path))
    });
    masks
}

fn record(agent: &str, masked: &[(Mask, &secrets::SecretHit)], dropped: &[policy::env::Dropped]) {
    let Some(path) = audit::default_path() else {
        return;
    };
    let mut events: Vec<audit::Event> = masked
        .iter()
        .map(|(mask, hit)| {
            let reason = if mask.path == hit.path {
                format!("matches {}", hit.pattern)
            } else {
                format!("target of {}, which matches {}", hit.path.display(), hit.pattern)
            };
            let target = mask.path.display().to_string();
            audit::Event::new(agent, "read", &target, "masked", "sensitive-file-pattern", Some(reason))
        })
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
