//! The commands of the lifecycle, each in three steps: gather the facts (the workspace,
//! its settings, whether a per-repo Dockerfile exists), decide (names, plan), carry out
//! (the engine). The caller passes what belongs to other crates (the protected paths,
//! the binary that goes into the base image) and prints what comes back; only `shell`
//! prints `start`'s notes itself, so that they come before the shell's own output.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _, Result};

use crate::{
    context,
    engine::{Engine, Listed},
    names::{base_image, Workspace, CLAUDE_VOLUME, CODEX_VOLUME},
    plan::{self, ContainerPlan, LimitSettings, Limits, Mode, Request, Settings},
};

/// What root's execs in a container run: this path, never a name looked up on the
/// image's `PATH`, where a directory may be the agent's (`~/.local/bin`, a toolchain's).
const IMAGE_BINARY: &str = "/usr/local/bin/agent-sandbox";

/// The workspace a command acts on.
#[derive(Debug, Clone)]
pub struct Target {
    pub root: PathBuf,
    pub workspace: Workspace,
    pub mode: Mode,
}

impl Target {
    /// `path` (default: the current directory), which must be a directory.
    pub fn new(path: Option<&Path>, branch: Option<&str>) -> Result<Target> {
        let path = match path {
            Some(path) => path.to_path_buf(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let root = fs_err::canonicalize(&path)
            .with_context(|| format!("{} does not exist (give the workspace directory)", path.display()))?;
        if !root.is_dir() {
            bail!("{} is not a directory (give the workspace directory)", root.display());
        }
        let mode = match branch {
            Some(branch) => Mode::Branch(branch.to_owned()),
            None => Mode::Bind,
        };
        Ok(Target { workspace: Workspace::new(&root), root, mode })
    }

    fn dockerfile(&self) -> PathBuf {
        self.root.join(".agent-sandbox/Dockerfile")
    }

    /// The per-repo image when the workspace has `.agent-sandbox/Dockerfile`, else the base.
    pub fn image(&self, base_tag: &str) -> String {
        match self.dockerfile().is_file() {
            true => self.workspace.image(),
            false => base_image(base_tag),
        }
    }

    pub fn settings(&self) -> Result<Settings> {
        let path = self.root.join(".agent-sandbox/settings.json");
        match fs_err::read_to_string(&path) {
            Ok(text) => Settings::parse(&text).map_err(|err| anyhow::anyhow!("{}: {err}", path.display())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Settings::default()),
            Err(err) => Err(err.into()),
        }
    }

    /// Whether the workspace's `.git` is a directory: a bind-mode container then has a
    /// session repository (`hostpush::home`).
    pub fn session_git(&self) -> bool {
        self.root.join(".git").symlink_metadata().is_ok_and(|meta| meta.is_dir())
    }

    /// The container plan (`protected`: the existing paths to mount read-only).
    pub fn plan(&self, base_tag: &str, protected: &[String], limits: Limits) -> Result<ContainerPlan> {
        let request = Request {
            workspace: self.workspace.clone(),
            mode: self.mode.clone(),
            image: self.image(base_tag),
            protected: protected.to_vec(),
            settings: self.settings()?,
            session_git: self.session_git(),
            limits,
        };
        Ok(plan::plan(&request)?)
    }

    /// Of `paths` (the workspace's protected paths), those to mount: the ones that
    /// exist, and `.git/hooks`, which `start` creates first.
    pub fn existing(&self, paths: Vec<String>) -> Vec<String> {
        paths.into_iter().filter(|path| path == ".git/hooks" || self.root.join(path).exists()).collect()
    }

    /// The `container.*` limits on `engine`: the built-in defaults, the user's global
    /// file and the project's, read like the firewall's policy (without `config
    /// allow`: a limit only constrains).
    pub fn limits(&self, engine: &Engine) -> Result<Limits> {
        let sources = config::Sources {
            global_dir: home().ok().map(|home| config::global_dir(&home)),
            project_dir: Some(self.root.join(".agent-sandbox")),
            explicit: None,
        };
        let (config, _) = config::load(&sources, config::Layer::default())?;
        Ok(plan::limits(&LimitSettings::of(&config), &engine.facts()?)?)
    }
}

/// `$HOME`, else the password database's.
fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .or_else(util::passwd_home)
        .context("HOME is not set (set HOME)")
}

/// The options of `start` and `shell`.
#[derive(Debug, Clone)]
pub struct StartOptions {
    pub base_tag: String,
    pub build: bool,
    pub protected: Vec<String>,
    /// Where branch mode's provisioning lock lives (agent-sandbox's state directory).
    pub lock_dir: PathBuf,
}

impl StartOptions {
    /// The options for `target`, whose protected paths (those that exist) are `protected`;
    /// the lock in agent-sandbox's state directory.
    pub fn new(target: &Target, base_tag: &str, build: bool, protected: Vec<String>) -> Result<StartOptions> {
        let lock_dir = config::approval::state_dir(&home()?).join("docker");
        Ok(StartOptions { base_tag: base_tag.to_owned(), build, protected: target.existing(protected), lock_dir })
    }
}

/// `init`: writes `.agent-sandbox/Dockerfile` (seed 002's template) and `settings.json`
/// when missing (`force` rewrites the Dockerfile and removes the workspace's containers;
/// the directory's other files, the guard configuration among them, stay), builds the
/// image and creates the workspace's volumes. Its report lines.
pub fn init(engine: &Engine, target: &Target, base_tag: &str, force: bool) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    let dir = target.root.join(".agent-sandbox");
    fs_err::create_dir_all(&dir)?;
    if force {
        for listed in engine.list(Some(&target.workspace.path))? {
            engine.remove(&listed.name)?;
            lines.push(format!("removed the container {}", listed.name));
        }
    }
    let files = [
        ("Dockerfile", devcontainer::REPO_DOCKERFILE, force, " (--force rewrites it)"),
        ("settings.json", context::DEFAULT_SETTINGS, false, ""),
    ];
    for (name, content, overwrite, hint) in files {
        let path = dir.join(name);
        if path.exists() && !overwrite {
            lines.push(format!("kept {}{hint}", path.display()));
        } else {
            util::fs::atomic_write(&path, content.as_bytes(), 0o644)
                .with_context(|| format!("writing {}", path.display()))?;
            lines.push(format!("wrote {}", path.display()));
        }
    }
    build(engine, target, base_tag)?;
    lines.push(format!("built {}", target.workspace.image()));
    for volume in [CLAUDE_VOLUME.to_owned(), CODEX_VOLUME.to_owned(), target.workspace.history_volume()] {
        engine.ensure_volume(&volume)?;
    }
    lines.push(format!(
        "volumes: {CLAUDE_VOLUME} {CODEX_VOLUME} {} (next: agent-sandbox shell)",
        target.workspace.history_volume()
    ));
    Ok(lines)
}

/// `build`: the per-repo image from `.agent-sandbox/` with `BASE_IMAGE_TAG`.
pub fn build(engine: &Engine, target: &Target, base_tag: &str) -> Result<()> {
    if !target.dockerfile().is_file() {
        bail!("{} does not exist (create it with: agent-sandbox init)", target.dockerfile().display());
    }
    require_image(engine, &base_image(base_tag))?;
    let context = context::repo_context(&target.root.join(".agent-sandbox"))?;
    let args = HashMap::from([("BASE_IMAGE_TAG".to_owned(), base_tag.to_owned())]);
    engine.build(&target.workspace.image(), context, &args)
}

/// `build-base`'s build arguments: `FROM_IMAGE` when `from` is given, and the version
/// of each tool its flag gives (`versions`: flag and value, one per [`context::TOOLS`]
/// row), `latest` resolved with npm first.
pub fn base_build_args(from: Option<&str>, versions: &[(&str, Option<&str>)]) -> Result<HashMap<String, String>> {
    let mut build_args: HashMap<String, String> = HashMap::new();
    if let Some(from) = from {
        build_args.insert("FROM_IMAGE".into(), from.to_owned());
    }
    for (flag, arg, package) in context::TOOLS {
        let Some((_, version)) = versions.iter().find(|(given, _)| given == flag) else {
            bail!("no flag for the tool option {flag}")
        };
        let Some(version) = version else { continue };
        let version = context::tool_version(flag, *package, (*version).to_owned())?;
        build_args.insert((*arg).into(), version);
    }
    Ok(build_args)
}

/// `build-base`: `agent-sandbox-base:<tag>` from the context built into the binary.
pub fn build_base(engine: &Engine, tag: &str, build_args: &HashMap<String, String>, binary: &Path) -> Result<String> {
    let bytes = fs_err::read(binary).context("reading the agent-sandbox binary for the image")?;
    let image = base_image(tag);
    engine.build(&image, context::base_context(&bytes)?, build_args)?;
    Ok(image)
}

fn require_image(engine: &Engine, image: &str) -> Result<()> {
    if engine.image_exists(image)? {
        return Ok(());
    }
    match image.strip_prefix("agent-sandbox-base:") {
        Some("latest") => bail!("the image {image} does not exist: build it with `agent-sandbox build-base`"),
        Some(tag) => bail!("the image {image} does not exist: build it with `agent-sandbox build-base --tag {tag}`"),
        None => bail!("the image {image} does not exist: build it with `agent-sandbox build` (or `start --build`)"),
    }
}

/// What `start` did.
#[derive(Debug)]
pub struct Started {
    pub plan: ContainerPlan,
    /// The firewall's state line once the entrypoint has applied it (or closed egress).
    pub firewall: String,
    pub notes: Vec<String>,
}

/// `start`: the container of the plan, created when missing, started when stopped,
/// recreated when stopped and out of date (another image ID or plan digest; a running
/// one is left alone with a note, `restart` recreates it).
pub fn start(engine: &Engine, target: &Target, options: &StartOptions) -> Result<Started> {
    if options.build {
        build(engine, target, &options.base_tag)?;
    }
    // The workspace is mounted read-write: only a project, never a home directory or
    // `/` that `agent-sandbox` (shell, the default command) happened to run in.
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let project = target.root.join(".git").exists() || target.root.join(".agent-sandbox").is_dir();
    if !project || home.as_deref() == Some(target.root.as_path()) || target.root == Path::new("/") {
        bail!(
            "{} is not a project (no .git or .agent-sandbox/): the sandbox mounts it read-write; cd into a repository, or run `agent-sandbox init PATH` for another directory",
            target.root.display()
        );
    }
    let limits = target.limits(engine)?;
    let plan = target.plan(&options.base_tag, &options.protected, limits)?;
    require_image(engine, &plan.image)?;
    // The hooks directory exists before the read-only mount covers it, so that the agent
    // cannot create one the host's git would run.
    if target.root.join(".git").is_dir() {
        fs_err::create_dir_all(target.root.join(".git/hooks"))?;
    }
    let image_id = engine.image_id(&plan.image)?;
    let mut notes = Vec::new();
    let facts = engine.container_facts(&plan.name)?;
    let stale = |(_, image, digest): &(bool, String, String)| {
        *image != image_id || Some(digest) != plan.labels.get(plan::LABEL_PLAN)
    };
    let existing = match facts {
        Some(facts) if stale(&facts) && !facts.0 => {
            engine.remove(&plan.name)?;
            notes.push(format!("recreated {} (its image or settings changed)", plan.name));
            None
        }
        Some(facts) if stale(&facts) => {
            notes.push(format!(
                "{} was made from an older image or other settings: `agent-sandbox restart` recreates it",
                plan.name
            ));
            Some(true)
        }
        Some((running, _, _)) => Some(running),
        None => None,
    };
    match existing {
        Some(true) => {}
        Some(false) => engine.start(&plan.name)?,
        None => {
            if let Some(branch) = target.mode.branch() {
                provision(engine, target, branch, options, limits)?;
            }
            engine.create(&plan)?;
            engine.start(&plan.name)?;
        }
    }
    let firewall = firewall_state(engine, &plan.name)?;
    Ok(Started { plan, firewall, notes })
}

/// `checkout` (and `start --branch` before it creates the container): the repo shelf
/// and the branch's worktree, provisioned by a short-lived container (idempotent).
/// Provisioning of one repository is serialized by a lock on the host, so that two
/// sandboxes started at once both succeed. Its report line.
pub fn checkout(engine: &Engine, target: &Target, branch: &str, options: &StartOptions) -> Result<String> {
    provision(engine, target, branch, options, target.limits(engine)?)
}

/// [`checkout`] with the limits of the provisioning container, the sandbox's.
fn provision(engine: &Engine, target: &Target, branch: &str, options: &StartOptions, limits: Limits) -> Result<String> {
    if !target.root.join(".git").exists() {
        bail!("{} is not a git repository: branch mode works on a repository's branches", target.root.display());
    }
    let request = Request {
        workspace: target.workspace.clone(),
        mode: Mode::Branch(branch.to_owned()),
        image: target.image(&options.base_tag),
        // Only `.agent-sandbox` counts here: the firewall's project policy.
        protected: options.protected.clone(),
        settings: target.settings()?,
        session_git: false,
        limits,
    };
    require_image(engine, &request.image)?;
    let origin = origin_url(&target.root);
    let plan = plan::provision_plan(&request, branch, origin.as_deref())?;
    fs_err::create_dir_all(&options.lock_dir)?;
    let lock_path = options.lock_dir.join(format!("{}.lock", target.workspace.repo_shelf_volume()));
    let _lock = Lock::take(&lock_path)?;
    engine.ensure_volume(&target.workspace.repo_shelf_volume())?;
    let (code, output) = engine.run_to_end(&plan)?;
    if code != 0 {
        bail!("provisioning the worktree of {branch:?} failed (status {code}):\n{}", output.trim_end());
    }
    Ok(output.lines().rfind(|line| !line.is_empty()).unwrap_or_default().to_owned())
}

/// The host repository's `origin` URL, read from its config file.
fn origin_url(root: &Path) -> Option<String> {
    crate::workspace::repo_config(root, "remote.origin.url")
}

/// An exclusive `flock` on a file, released when dropped (or when the process dies).
struct Lock {
    _file: std::fs::File,
}

impl Lock {
    fn take(path: &Path) -> Result<Lock> {
        use std::os::fd::AsRawFd as _;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("opening the lock {}", path.display()))?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error()).with_context(|| format!("locking {}", path.display()));
        }
        Ok(Lock { _file: file })
    }
}

/// Waits for the entrypoint's firewall (applied, or closed on failure) and returns its
/// state line.
fn firewall_state(engine: &Engine, name: &str) -> Result<String> {
    let (code, text) = engine.output(name, &["agent-sandbox", "firewall", "wait"], plan::USER)?;
    if code != 0 {
        bail!(
            "`agent-sandbox firewall wait` failed in {name} (status {code}): the image is not an agent-sandbox image"
        );
    }
    Ok(text.trim().to_owned())
}

/// `shell`: starts when needed, then bash (login, or `-c command`) in the workdir.
pub fn shell(
    engine: &Engine,
    target: &Target,
    options: &StartOptions,
    command: Option<&str>,
) -> Result<(i32, Started)> {
    let started = start(engine, target, options)?;
    let plan = &started.plan;
    let argv: Vec<String> = match command {
        Some(command) => vec!["bash".into(), "-c".into(), command.into()],
        None => vec!["bash".into(), "-l".into()],
    };
    use std::io::IsTerminal as _;
    let tty = command.is_none() && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    // What start has to say comes before the shell's own output.
    for note in &started.notes {
        eprintln!("agent-sandbox: {note}");
    }
    if !started.firewall.starts_with("firewall: on") {
        eprintln!("agent-sandbox: WARNING: {}", started.firewall);
    }
    let code = engine.exec(&plan.name, &argv, &plan.user, &plan.workdir, tty)?;
    if target.session_git() {
        // The git guard brings commits home in the background: when the shell ends,
        // what it committed is home (or said not to be, on stderr) before this returns.
        if let Err(err) = engine.output(&plan.name, &[IMAGE_BINARY, "git-home", "sync"], "root") {
            eprintln!("agent-sandbox: WARNING: the session's commits were not brought home: {err:#}");
        }
    }
    Ok((code, started))
}

/// `stop`: the container's name, and whether it was running.
pub fn stop(engine: &Engine, target: &Target) -> Result<(String, bool)> {
    let name = target.workspace.container(target.mode.branch());
    match engine.container_state(&name)? {
        Some(true) => {
            if target.mode == Mode::Bind && target.session_git() {
                // What the session committed comes home, or is said not to (the broker
                // speaks on stderr), before the container stops; a failure stops it anyway.
                engine.output(&name, &[IMAGE_BINARY, "git-home", "sync"], "root")?;
            }
            engine.stop(&name)?;
            Ok((name, true))
        }
        _ => Ok((name, false)),
    }
}

/// `stop --all`: every running sandbox container on the engine (found by its label, as
/// `list` finds them), stopped at once; their names.
pub fn stop_all(engine: &Engine) -> Result<Vec<String>> {
    let running: Vec<String> =
        engine.list(None)?.into_iter().filter(|item| item.state == "running").map(|item| item.name).collect();
    engine.stop_all(&running)?;
    Ok(running)
}

/// `restart`: stop, then start (which recreates a container whose plan changed).
pub fn restart(engine: &Engine, target: &Target, options: &StartOptions) -> Result<Started> {
    stop(engine, target)?;
    start(engine, target, options)
}

/// `list`: every sandbox container on the engine, the running ones with their usage.
pub fn list(engine: &Engine) -> Result<Vec<Listed>> {
    engine.with_usage(engine.list(None)?)
}

/// `list --json`: one object per sandbox container.
pub fn list_json(listed: &[Listed]) -> serde_json::Value {
    let label = |item: &Listed, key: &str| item.labels.get(key).cloned().map(serde_json::Value::String);
    serde_json::Value::Array(
        listed
            .iter()
            .map(|item| {
                serde_json::json!({
                    "name": item.name,
                    "repo": label(item, plan::LABEL_REPO),
                    "workspace": label(item, plan::LABEL_WORKSPACE),
                    "mode": label(item, plan::LABEL_MODE),
                    "branch": label(item, plan::LABEL_BRANCH),
                    "workdir": label(item, plan::LABEL_WORKDIR),
                    "volumes": item.volumes,
                    "state": item.state,
                    "usage": item.usage.map(|usage| serde_json::json!({
                        "cpu_percent": (usage.cpu_percent * 10.0).round() / 10.0,
                        "memory_bytes": usage.memory,
                        "memory_limit_bytes": usage.memory_limit,
                        "pids": usage.pids,
                        "pids_limit": usage.pids_limit,
                    })),
                })
            })
            .collect(),
    )
}

/// `list`: one line per sandbox container.
pub fn list_lines(listed: &[Listed]) -> Vec<String> {
    let mut lines = vec!["NAME\tSTATE\tCPU\tMEMORY\tPIDS\tMODE\tWORKDIR\tREPO\tVOLUMES".to_owned()];
    for item in listed {
        let label = |key: &str| item.labels.get(key).cloned().unwrap_or_else(|| "-".into());
        let usage = match &item.usage {
            Some(usage) => {
                let pids_limit = usage.pids_limit.map(|limit| format!("/{limit}")).unwrap_or_default();
                format!(
                    "{:.1}%\t{} / {}\t{}{pids_limit}",
                    usage.cpu_percent,
                    mib(usage.memory),
                    mib(usage.memory_limit),
                    usage.pids
                )
            }
            None => "-\t-\t-".to_owned(),
        };
        lines.push(format!(
            "{}\t{}\t{usage}\t{}\t{}\t{}\t{}",
            item.name,
            item.state,
            label(plan::LABEL_MODE),
            label(plan::LABEL_WORKDIR),
            label(plan::LABEL_WORKSPACE),
            item.volumes.join(",")
        ));
    }
    lines
}

/// Bytes in MiB, one decimal.
fn mib(bytes: u64) -> String {
    format!("{:.1}MiB", bytes as f64 / f64::from(1u32 << 20))
}

/// `volume`: the volumes a workspace's sandboxes use, with what each holds.
pub fn volumes(workspace: &Workspace) -> Vec<(&'static str, String)> {
    vec![
        ("claude-code-config", CLAUDE_VOLUME.to_owned()),
        ("codex-config", CODEX_VOLUME.to_owned()),
        ("history", workspace.history_volume()),
        ("repo-shelf", workspace.repo_shelf_volume()),
        ("session-repository", workspace.session_git_volume()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Usage;

    fn listed() -> Vec<Listed> {
        let labels = |mode: &str, workdir: &str| {
            HashMap::from([
                (plan::LABEL_MODE.to_owned(), mode.to_owned()),
                (plan::LABEL_WORKDIR.to_owned(), workdir.to_owned()),
                (plan::LABEL_WORKSPACE.to_owned(), "/src/app".to_owned()),
                (plan::LABEL_REPO.to_owned(), "app".to_owned()),
            ])
        };
        vec![
            Listed {
                name: "agent-sandbox-app-b0-h".into(),
                labels: HashMap::from([(plan::LABEL_BRANCH.to_owned(), "b0".to_owned())])
                    .into_iter()
                    .chain(labels("branch", "/repo-shelf/worktrees/b0"))
                    .collect(),
                volumes: vec!["agent-sbx-repo-h".into()],
                state: "running".into(),
                usage: Some(Usage {
                    cpu_percent: 49.96,
                    memory: 3 << 20,
                    memory_limit: 256 << 20,
                    pids: 256,
                    pids_limit: Some(256),
                }),
            },
            Listed {
                name: "agent-sandbox-app-h".into(),
                labels: labels("bind", "/workspace/app"),
                volumes: vec![],
                state: "exited".into(),
                usage: None,
            },
        ]
    }

    #[test]
    fn list_shows_the_usage_of_running_sandboxes() {
        assert_eq!(
            list_lines(&listed()),
            [
                "NAME\tSTATE\tCPU\tMEMORY\tPIDS\tMODE\tWORKDIR\tREPO\tVOLUMES",
                "agent-sandbox-app-b0-h\trunning\t50.0%\t3.0MiB / 256.0MiB\t256/256\tbranch\t/repo-shelf/worktrees/b0\t/src/app\tagent-sbx-repo-h",
                "agent-sandbox-app-h\texited\t-\t-\t-\tbind\t/workspace/app\t/src/app\t",
            ]
        );
        assert_eq!(
            list_json(&listed()),
            serde_json::json!([
                {
                    "name": "agent-sandbox-app-b0-h", "repo": "app", "workspace": "/src/app", "mode": "branch",
                    "branch": "b0", "workdir": "/repo-shelf/worktrees/b0", "volumes": ["agent-sbx-repo-h"],
                    "state": "running",
                    "usage": {
                        "cpu_percent": 50.0, "memory_bytes": 3 << 20, "memory_limit_bytes": 256 << 20,
                        "pids": 256, "pids_limit": 256
                    }
                },
                {
                    "name": "agent-sandbox-app-h", "repo": "app", "workspace": "/src/app", "mode": "bind",
                    "branch": null, "workdir": "/workspace/app", "volumes": [], "state": "exited", "usage": null
                }
            ])
        );
    }
}
