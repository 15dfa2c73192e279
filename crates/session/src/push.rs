//! The host's push service of one session (`hostpush::service`): its socket, bound
//! before the sandbox starts so that the git guard inside always finds it, and its
//! private directory in the state directory (which no sandbox shows) with the pre-push
//! hook the host's git runs, its settings and the sandbox its checks run in, decided on
//! the service's thread while the sandbox starts.

use std::{
    ffi::OsString,
    os::unix::fs::DirBuilderExt,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use policy::Context;
use sandbox::plan::Mask;

use crate::{
    caches::{cache_paths, make_read_only},
    stages::{facts::builtin_path, prepare::plan},
};

/// What the checks of a pushed commit run in: the session's sandbox, decided again with
/// the push's private directory granted read-write. Owned, because the push service
/// decides it on its own thread while the sandbox starts.
pub(crate) struct CheckInputs {
    pub(crate) config: config::Config,
    pub(crate) ctx: Context,
    /// Paths whose parents are pinned in the session's policy.
    pub(crate) pinned: Vec<PathBuf>,
    pub(crate) net_policy: policy::network::NetPolicy,
    pub(crate) masks: Vec<Mask>,
    /// The settings copies in the runtime directory, in its order.
    pub(crate) settings: Vec<PathBuf>,
    pub(crate) commands: Vec<sandbox::plan::WrappedCommand>,
    pub(crate) self_exe: PathBuf,
    pub(crate) bwrap: PathBuf,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) hook_settings: guard_settings::HookGuardSettings,
    /// The session's runtime directory (the checks' sandboxes use it too).
    pub(crate) runtime: PathBuf,
}

impl CheckInputs {
    /// Writes into the push directory `dir` the pre-push hook the host's git runs and its
    /// settings: the hook guard's, with the sandbox its checks run in (worktree
    /// `dir/worktree`).
    fn prepare(self, dir: &Path) -> Result<()> {
        let hook = dir.join("hooks/pre-push");
        std::fs::DirBuilder::new().mode(0o700).create(dir.join("hooks")).context("creating the push hooks")?;
        std::fs::write(&hook, hostpush::hook::hook_script(&self.self_exe)).context("writing the push hook")?;
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
pub(crate) struct PushService {
    /// What making the session repository said, and what it cost (for `--debug`).
    pub(crate) said: Option<String>,
    /// What making or refreshing the session repository took (the stage table's
    /// `session-repo`, carved out of `services`).
    pub(crate) home_took: Option<std::time::Duration>,
    broker: Option<std::sync::Arc<hostpush::home::exec::Broker>>,
    _service: hostpush::service::Service,
    _lock: std::fs::File,
    _dir: tempfile::TempDir,
}

impl PushService {
    /// Brings what the session committed home once more (the command has ended), then
    /// tells the user, in one short summary, what came home, what waits and why, what
    /// was stashed, and the commands to act on each.
    pub(crate) fn bring_home(&self) {
        let Some(broker) = &self.broker else { return };
        let _ = broker.last_sync();
        let told = util::fs::read_regular_nofollow(&broker.exec.told, 4 << 20).unwrap_or_default();
        let told: Vec<String> = hostpush::home::parse_told(&told).into_iter().map(|told| told.text).collect();
        let kept = broker.exec.home.work_tree.as_deref().and_then(|top| hostpush::adopt::list(top).ok());
        for line in hostpush::home::summary::summary(&told, &kept.unwrap_or_default()) {
            util::say!("agent-sandbox: {}", util::terminal_safe(&line));
        }
    }
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
pub(crate) fn start_push_service(
    check: CheckInputs,
    state_dir: &Path,
    runtime: &sandbox::runtime::Runtime,
    common_dir: PathBuf,
    (git, host_path_var): (Option<PathBuf>, OsString),
    agent: &str,
    session_git: Option<&sandbox::plan::SessionGit>,
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
    // The user's environment, with the `PATH` the agent cannot have planted in.
    let env: Vec<(OsString, OsString)> = std::env::vars_os()
        .map(|(name, value)| if name == "PATH" { (name, host_path_var.clone()) } else { (name, value) })
        .collect();
    let started = std::time::Instant::now();
    let (broker, said, home_took) = match (session_git, &git) {
        (Some(session_git), Some(git)) => {
            let (broker, said) = broker(session_git, git, &check, &path, runtime, &env)?;
            let took = started.elapsed();
            let said = format!("{said} ({} ms)", took.as_millis());
            (Some(std::sync::Arc::new(broker)), Some(said), Some(took))
        }
        (Some(_), None) => anyhow::bail!(
            "no git on a PATH entry outside the project and every writable grant: the agent's git repository is made \
             and its commits are brought home with such a git only"
        ),
        (None, _) => (None, None, None),
    };
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
            env,
            agent: agent.to_owned(),
            git: git.clone().unwrap_or_default(),
            bwrap: check.bwrap.clone(),
            home: broker.clone(),
        },
        Box::new(move || match git {
            Some(_) => check.prepare(&path).map_err(|err| format!("{err:#}")),
            None => Err("no git on a PATH entry outside the project and every writable grant (the host pushes with \
                         such a git only: one the agent could have planted would hold your credentials)"
                .to_owned()),
        }),
    );
    Ok(PushService { said, home_took, broker, _service: service, _lock: lock, _dir: dir })
}

/// The session repository's broker (`hostpush::home::exec`), its repository made or
/// refreshed now, before the sandbox starts: with the push directory's checks.
fn broker(
    session_git: &sandbox::plan::SessionGit,
    git: &Path,
    check: &CheckInputs,
    dir: &Path,
    runtime: &sandbox::runtime::Runtime,
    env: &[(OsString, OsString)],
) -> Result<(hostpush::home::exec::Broker, String)> {
    let settings = dir.join(PUSH_SETTINGS);
    let exec = hostpush::home::exec::ExecHome {
        home: hostpush::home::Home {
            git: git.to_path_buf(),
            user_git: session_git.user_git.clone(),
            git_dir: session_git.user_git_dir.clone(),
            user_git_inside: runtime_layout::RuntimeLayout::inside().user_git(),
            env: hostpush::service::git_env(env, &settings),
            hooks: dir.join("hooks"),
            settings,
            global: None,
            work_tree: session_git.work_tree().map(Path::to_path_buf),
        },
        top: session_git.session.parent().map(Path::to_path_buf).unwrap_or_default(),
        bwrap: check.bwrap.clone(),
        self_exe: check.self_exe.clone(),
        git_installation: std::sync::OnceLock::new(),
        mirror: dir.join("home.git"),
        told: runtime.layout().told(),
    };
    let prepared = hostpush::home::exec::prepare(&exec)
        .map_err(|refusal| anyhow::anyhow!("the agent's git repository could not be made: {}", refusal.inline()))?;
    for line in &prepared.notice {
        eprintln!("agent-sandbox: {line}");
    }
    Ok((hostpush::home::exec::Broker::new(exec), prepared.said))
}
