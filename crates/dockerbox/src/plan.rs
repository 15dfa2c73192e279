//! The container a workspace gets, decided in one value (pure): image, name, user,
//! working directory, mounts, environment, labels, capabilities and network. The
//! executor turns a [`ContainerPlan`] into bollard's create request, and `show-run`
//! into the `docker run` command that creates the same container ([`docker_run_args`]).
//!
//! The guard rails are the image's (the git guard as `git`, the marker, the firewall
//! applied by the entrypoint at every start); the plan adds what the devcontainer adds:
//! the protected paths read-only (their parents pinned), the project's `.agent-sandbox`
//! once more where the firewall reads its additions, the firewall's two capabilities,
//! the unprivileged user, and an environment of exactly these variables (nothing from
//! the host).

use std::collections::BTreeMap;

use crate::names::{sanitize_branch, Workspace, CLAUDE_VOLUME, CODEX_VOLUME};

/// The unprivileged user of the base image.
pub const USER: &str = "node";
/// Where the repo-shelf volume is mounted.
pub const REPO_SHELF: &str = runtime_layout::CONTAINER_REPO_SHELF;
/// The label every sandbox container carries: the host workspace path.
pub const LABEL_WORKSPACE: &str = "agent-sandbox.workspace";
pub const LABEL_MODE: &str = "agent-sandbox.mode";
pub const LABEL_BRANCH: &str = "agent-sandbox.branch";
pub const LABEL_WORKDIR: &str = "agent-sandbox.workdir";
pub const LABEL_REPO: &str = "agent-sandbox.repo";

/// Bind mode (the host checkout is the working directory) or branch mode (a worktree
/// of the repo shelf).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Bind,
    Branch(String),
}

impl Mode {
    pub fn branch(&self) -> Option<&str> {
        match self {
            Mode::Bind => None,
            Mode::Branch(branch) => Some(branch),
        }
    }
}

/// `.agent-sandbox/settings.json`: the container settings a repository may set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    /// A Docker network to join instead of the default bridge (`none` for loopback only).
    pub network: Option<String>,
    /// DNS servers for the container (the firewall lets DNS go only to these).
    pub dns: Vec<String>,
}

impl Settings {
    /// Reads `.agent-sandbox/settings.json` (`{"network": null | "NAME", "dns": ["IP", ...]}`);
    /// an unknown key is an error, so that a typo is not silently ignored.
    pub fn parse(text: &str) -> Result<Settings, String> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|err| err.to_string())?;
        let serde_json::Value::Object(object) = value else { return Err("expected an object".into()) };
        let mut settings = Settings::default();
        for (key, value) in object {
            match (key.as_str(), value) {
                ("network", serde_json::Value::Null) => {}
                ("network", serde_json::Value::String(network)) => settings.network = Some(network),
                ("dns", serde_json::Value::Array(items)) => {
                    for item in items {
                        let serde_json::Value::String(server) = item else {
                            return Err("dns: expected an array of addresses".into());
                        };
                        settings.dns.push(server);
                    }
                }
                ("network", _) => return Err("network: expected a Docker network name or null".into()),
                ("dns", _) => return Err("dns: expected an array of addresses".into()),
                (other, _) => return Err(format!("unknown key {other:?} (known: network, dns)")),
            }
        }
        Ok(settings)
    }
}

/// What the plan is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub workspace: Workspace,
    pub mode: Mode,
    pub image: String,
    /// Existing paths relative to the workspace, mounted read-only (see
    /// `devcontainer::protected_paths`).
    pub protected: Vec<String>,
    pub settings: Settings,
    /// The workspace's `.git` is a directory: in bind mode, inside it is the session
    /// repository (`hostpush::home`), a volume of this workspace's.
    pub session_git: bool,
    /// The resource limits, resolved against the engine ([`limits`]).
    pub limits: Limits,
}

/// What one container may use; `None`: no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// In billionths of a CPU (`--cpus`).
    pub nano_cpus: Option<u64>,
    /// Bytes of memory, swap included (`--memory` and `--memory-swap` alike).
    pub memory: Option<u64>,
    /// Processes and threads (`--pids-limit`).
    pub pids: Option<u64>,
    /// Bytes of the container's own filesystem (`--storage-opt size=`).
    pub disk: Option<u64>,
}

/// What the engine has, from its `docker info`: the totals a share is of, and the
/// storage driver that decides whether a disk limit is possible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineFacts {
    pub cpus: u64,
    pub memory: u64,
    pub storage_driver: String,
    /// `Backing Filesystem` of the driver's status (`extfs`, `xfs`, ...), if it says.
    pub backing_filesystem: Option<String>,
}

/// The `container.*` values as written (see `config::limits`), each with its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSettings {
    pub cpus: String,
    pub memory: String,
    pub pids: String,
    pub disk: String,
}

impl LimitSettings {
    /// The merged configuration's values.
    pub fn of(config: &config::Config) -> LimitSettings {
        LimitSettings {
            cpus: config.container_cpus.value.clone(),
            memory: config.container_memory.value.clone(),
            pids: config.container_pids.value.clone(),
            disk: config.container_disk.value.clone(),
        }
    }
}

/// The limits of `settings` on an engine with `facts`: a share becomes an amount of
/// the engine's total (never below a hundredth of a CPU or 6 MiB, Docker's minimum);
/// a disk limit is refused where the storage driver cannot enforce one.
pub fn limits(settings: &LimitSettings, facts: &EngineFacts) -> Result<Limits, PlanError> {
    use config::limits::{parse, Limit, Unit};
    let resolve = |key: &str, text: &str, unit: Unit, total: u64, floor: u64| match parse(text, unit) {
        Ok(Limit::Unlimited) => Ok(None),
        Ok(Limit::Amount(amount)) => Ok(Some(amount)),
        Ok(Limit::Percent(percent)) => {
            let share = u128::from(total) * u128::from(percent) / 100;
            Ok(Some(u64::try_from(share).unwrap_or(u64::MAX).max(floor)))
        }
        Err(message) => Err(PlanError::Limit(format!("container.{key}: {message}"))),
    };
    let limits = Limits {
        nano_cpus: resolve("cpus", &settings.cpus, Unit::Cpus, facts.cpus * 1_000_000_000, 10_000_000)?,
        memory: resolve("memory", &settings.memory, Unit::Memory, facts.memory, 6 << 20)?,
        pids: resolve("pids", &settings.pids, Unit::Count, 0, 0)?,
        disk: resolve("disk", &settings.disk, Unit::Disk, 0, 0)?,
    };
    if limits.disk.is_some() {
        let backing = facts.backing_filesystem.as_deref().unwrap_or("unknown");
        let supported = match facts.storage_driver.as_str() {
            "overlay2" | "vfs" => backing == "xfs",
            "btrfs" | "zfs" | "devicemapper" | "windowsfilter" => true,
            _ => false,
        };
        if !supported {
            return Err(PlanError::Disk { driver: facts.storage_driver.clone(), backing: backing.to_owned() });
        }
    }
    Ok(limits)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountKind {
    Bind,
    Volume,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub kind: MountKind,
    pub source: String,
    pub target: String,
    pub read_only: bool,
}

/// The whole container create request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPlan {
    pub name: String,
    pub image: String,
    pub user: String,
    pub workdir: String,
    pub mounts: Vec<Mount>,
    pub env: Vec<(String, String)>,
    pub labels: BTreeMap<String, String>,
    pub cap_add: Vec<String>,
    pub network: Option<String>,
    pub dns: Vec<String>,
    /// The command after the image's entrypoint (which applies the firewall first).
    pub command: Vec<String>,
    pub limits: Limits,
}

#[derive(Debug, PartialEq, Eq)]
pub enum PlanError {
    /// Networks that would put the container's firewall on the host (or another container).
    Network(String),
    /// `dns` servers on the `none` network (Docker refuses the pair).
    DnsWithoutNetwork,
    /// A `container.*` value that does not parse.
    Limit(String),
    /// `container.disk` on a storage driver that cannot cap a container's filesystem.
    Disk { driver: String, backing: String },
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanError::Network(network) => write!(
                f,
                ".agent-sandbox/settings.json: network {network:?} shares a network namespace, where the container's firewall (NET_ADMIN) would rewrite another's rules: name a Docker network, or \"none\""
            ),
            PlanError::DnsWithoutNetwork => write!(
                f,
                ".agent-sandbox/settings.json: dns servers with network \"none\" (there is no network to reach them on): remove one of the two"
            ),
            PlanError::Limit(message) => f.write_str(message),
            PlanError::Disk { driver, backing } => write!(
                f,
                "container.disk: this engine's storage driver ({driver} on {backing}) cannot cap a container's filesystem (overlay2 needs xfs mounted with pquota; btrfs, zfs and devicemapper can): set container.disk to \"none\", or move the engine's data root"
            ),
        }
    }
}

impl std::error::Error for PlanError {}

/// The worktree of `branch` in the repo shelf.
pub fn worktree_dir(branch: &str) -> String {
    format!("{REPO_SHELF}/worktrees/{}", sanitize_branch(branch))
}

pub fn plan(request: &Request) -> Result<ContainerPlan, PlanError> {
    let workspace = &request.workspace;
    if let Some(network) = &request.settings.network {
        if network == "host" || network.starts_with("container:") {
            return Err(PlanError::Network(network.clone()));
        }
        if network == "none" && !request.settings.dns.is_empty() {
            return Err(PlanError::DnsWithoutNetwork);
        }
    }
    let inside = workspace.mount_point();
    let workdir = match &request.mode {
        Mode::Bind => inside.clone(),
        Mode::Branch(branch) => worktree_dir(branch),
    };
    let home = format!("/home/{USER}");
    let bind =
        |source: String, target: String, read_only: bool| Mount { kind: MountKind::Bind, source, target, read_only };
    let volume = |source: String, target: String| Mount { kind: MountKind::Volume, source, target, read_only: false };
    // Branch mode works in the shelf: the host's checkout is only the `host` remote, and
    // read-only (its `.git` included) whenever the broker brings the work home instead.
    let branch = matches!(request.mode, Mode::Branch(_));
    let host_read_only = branch && request.session_git;
    let mut mounts = vec![bind(workspace.path.clone(), inside.clone(), host_read_only)];
    let session = request.session_git && request.mode == Mode::Bind;
    let protected: Vec<String> = request
        .protected
        .iter()
        .filter(|path| !(host_read_only || session && devcontainer::in_git_dir(path)))
        .cloned()
        .collect();
    for path in devcontainer::pinned_parents(&protected) {
        mounts.push(bind(format!("{}/{path}", workspace.path), format!("{inside}/{path}"), false));
    }
    for path in &protected {
        mounts.push(bind(format!("{}/{path}", workspace.path), format!("{inside}/{path}"), true));
    }
    if request.protected.iter().any(|p| p == ".agent-sandbox") {
        mounts.push(bind(format!("{}/.agent-sandbox", workspace.path), PROJECT_POLICY_DIR.into(), true));
    }
    if request.session_git {
        for (path, target, read_only) in devcontainer::session_binds() {
            mounts.push(bind(format!("{}/{path}", workspace.path), target.to_owned(), read_only));
        }
    }
    if session {
        mounts.push(volume(workspace.session_git_volume(), format!("{inside}/.git")));
    }
    mounts.push(volume(workspace.repo_shelf_volume(), REPO_SHELF.into()));
    mounts.push(volume(workspace.history_volume(), "/commandhistory".into()));
    mounts.push(volume(CLAUDE_VOLUME.into(), format!("{home}/.claude")));
    mounts.push(volume(CODEX_VOLUME.into(), format!("{home}/.codex")));
    let env = vec![
        ("CLAUDE_CONFIG_DIR".to_owned(), format!("{home}/.claude")),
        ("CODEX_HOME".to_owned(), format!("{home}/.codex")),
        ("HISTFILE".to_owned(), "/commandhistory/.bash_history".to_owned()),
    ];
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_WORKSPACE.to_owned(), workspace.path.clone());
    labels.insert(LABEL_REPO.to_owned(), workspace.repo_name.clone());
    labels.insert(LABEL_WORKDIR.to_owned(), workdir.clone());
    match &request.mode {
        Mode::Bind => {
            labels.insert(LABEL_MODE.to_owned(), "bind".to_owned());
        }
        Mode::Branch(branch) => {
            labels.insert(LABEL_MODE.to_owned(), "branch".to_owned());
            labels.insert(LABEL_BRANCH.to_owned(), branch.clone());
        }
    }
    let mut plan = ContainerPlan {
        name: workspace.container(request.mode.branch()),
        image: request.image.clone(),
        user: USER.to_owned(),
        workdir,
        mounts,
        env,
        labels,
        cap_add: vec!["NET_ADMIN".to_owned(), "NET_RAW".to_owned()],
        network: request.settings.network.clone(),
        dns: request.settings.dns.clone(),
        command: vec!["sleep".to_owned(), "infinity".to_owned()],
        limits: request.limits,
    };
    let digest = plan_digest(&plan);
    plan.labels.insert(LABEL_PLAN.to_owned(), digest);
    Ok(plan)
}

/// The label with [`plan_digest`]: a container whose label differs from today's plan
/// (other settings, protected paths, image name) is out of date.
pub const LABEL_PLAN: &str = "agent-sandbox.plan";

/// A digest of everything in the plan but its own label.
pub fn plan_digest(plan: &ContainerPlan) -> String {
    let mut plan = plan.clone();
    plan.labels.remove(LABEL_PLAN);
    format!("{:016x}", util::fnv1a(docker_run_args(&plan).join("\0").as_bytes()))
}

/// Where the firewall reads the project's policy (`config::CONTAINER_PROJECT_DIR`): the
/// project's `.agent-sandbox/`, mounted read-only.
const PROJECT_POLICY_DIR: &str = "/etc/agent-sandbox/project";

/// The label of the short-lived provisioning container (never listed as a sandbox).
pub const LABEL_PROVISION: &str = "agent-sandbox.provision";

/// Branch mode's provisioning, idempotent, as the seed's steps, run by
/// [`provision_plan`]'s container: as root only to hand the fresh volume to the user,
/// then as the user with the real git. The shelf is the agent's to write (its hooks
/// and config may be the agent's): this container has no more than a sandbox has, the
/// host's checkout read-only and the same firewall.
/// The host's checkout is the clone's source and the `host` remote (read-only here);
/// `origin` is set to the host's origin URL when it has one, and a new worktree is made
/// only after origin was fetched: a failed fetch stops with status 3 and says why,
/// rather than starting the branch from the host's `main`.
pub const PROVISION_SCRIPT: &str = r#"set -eu
chown node:node /repo-shelf
exec runuser -u node -- sh -eu -c '
git() { /usr/libexec/agent-sandbox/git -c safe.directory="*" "$@"; }
host="file://$HOST_PATH"
if [ ! -e /repo-shelf/repo/.git ]; then git clone -q --no-checkout "$host" /repo-shelf/repo; fi
cd /repo-shelf/repo
git remote add host "$host" 2>/dev/null || git remote set-url host "$host"
git fetch -q --prune host
if [ -e "$BR_DIR/.git" ]; then echo "worktree $BR_DIR exists"; exit 0; fi
if [ -n "$ORIGIN_URL" ]; then
  git remote set-url origin "$ORIGIN_URL"
  if ! git fetch -q --prune origin; then
    echo "agent-sandbox: cannot fetch origin ($ORIGIN_URL), so $BRANCH was not checked out (it would have started from the host, not from origin): this container has the project'"'"'s network policy, so allow the remote'"'"'s host in .agent-sandbox/config.jsonc (network.allow, see agent-sandbox config show) or fix the remote (git remote -v), then run it again" >&2
    exit 3
  fi
fi
mkdir -p /repo-shelf/worktrees
for start in "origin/$BRANCH" "host/$BRANCH"; do
  if git rev-parse -q --verify "refs/remotes/$start" >/dev/null; then
    git worktree add -q -B "$BRANCH" "$BR_DIR" "$start"; echo "worktree $BR_DIR from $start"; exit 0
  fi
done
for start in origin/main host/main; do
  if git rev-parse -q --verify "refs/remotes/$start" >/dev/null; then
    git worktree add -q -b "$BRANCH" "$BR_DIR" "$start"; echo "worktree $BR_DIR: new branch from $start"; exit 0
  fi
done
git fetch -q host HEAD
git worktree add -q -b "$BRANCH" "$BR_DIR" FETCH_HEAD; echo "worktree $BR_DIR: new branch from the host HEAD"
'
"#;

/// The short-lived container that provisions `branch` in the repo shelf: the sandbox's
/// image, network and firewall (with the project's `.agent-sandbox/` read-only where
/// the firewall reads the project's policy, as in the sandbox), the host checkout
/// read-only and the shelf, nothing else.
pub fn provision_plan(request: &Request, branch: &str, origin_url: Option<&str>) -> Result<ContainerPlan, PlanError> {
    let sandbox = plan(&Request { mode: Mode::Branch(branch.to_owned()), ..request.clone() })?;
    let workspace = &request.workspace;
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_PROVISION.to_owned(), workspace.path.clone());
    let mut mounts = vec![
        Mount {
            kind: MountKind::Bind,
            source: workspace.path.clone(),
            target: workspace.mount_point(),
            read_only: true,
        },
        Mount {
            kind: MountKind::Volume,
            source: workspace.repo_shelf_volume(),
            target: REPO_SHELF.into(),
            read_only: false,
        },
    ];
    if request.protected.iter().any(|path| path == ".agent-sandbox") {
        mounts.push(Mount {
            kind: MountKind::Bind,
            source: format!("{}/.agent-sandbox", workspace.path),
            target: PROJECT_POLICY_DIR.into(),
            read_only: true,
        });
    }
    Ok(ContainerPlan {
        name: format!("{}-provision", sandbox.name),
        user: "root".to_owned(),
        workdir: "/".to_owned(),
        mounts,
        env: vec![
            ("HOST_PATH".to_owned(), workspace.mount_point()),
            ("ORIGIN_URL".to_owned(), origin_url.unwrap_or_default().to_owned()),
            ("BRANCH".to_owned(), branch.to_owned()),
            ("BR_DIR".to_owned(), worktree_dir(branch)),
        ],
        labels,
        command: vec!["sh".to_owned(), "-c".to_owned(), PROVISION_SCRIPT.to_owned()],
        ..sandbox
    })
}

/// `docker run`'s arguments (after `docker`) that create the container of `plan`.
pub fn docker_run_args(plan: &ContainerPlan) -> Vec<String> {
    let mut args: Vec<String> = ["run", "--detach", "--init", "--name"].map(String::from).to_vec();
    args.push(plan.name.clone());
    for (key, value) in &plan.labels {
        args.extend(["--label".to_owned(), format!("{key}={value}")]);
    }
    args.extend(["--user".to_owned(), plan.user.clone(), "--workdir".to_owned(), plan.workdir.clone()]);
    for cap in &plan.cap_add {
        args.extend(["--cap-add".to_owned(), cap.clone()]);
    }
    if let Some(network) = &plan.network {
        args.extend(["--network".to_owned(), network.clone()]);
    }
    for dns in &plan.dns {
        args.extend(["--dns".to_owned(), dns.clone()]);
    }
    for mount in &plan.mounts {
        let kind = match mount.kind {
            MountKind::Bind => "bind",
            MountKind::Volume => "volume",
        };
        let mut fields = vec![format!("type={kind}"), csv_field(&format!("source={}", mount.source))];
        fields.push(csv_field(&format!("target={}", mount.target)));
        if mount.read_only {
            fields.push("readonly".to_owned());
        }
        args.extend(["--mount".to_owned(), fields.join(",")]);
    }
    for (key, value) in &plan.env {
        args.extend(["--env".to_owned(), format!("{key}={value}")]);
    }
    let limits = &plan.limits;
    if let Some(nano_cpus) = limits.nano_cpus {
        let cpus = format!("{}.{:09}", nano_cpus / 1_000_000_000, nano_cpus % 1_000_000_000);
        args.extend(["--cpus".to_owned(), cpus.trim_end_matches('0').trim_end_matches('.').to_owned()]);
    }
    if let Some(memory) = limits.memory {
        args.extend(["--memory".to_owned(), memory.to_string(), "--memory-swap".to_owned(), memory.to_string()]);
    }
    if let Some(pids) = limits.pids {
        args.extend(["--pids-limit".to_owned(), pids.to_string()]);
    }
    if let Some(disk) = limits.disk {
        args.extend(["--storage-opt".to_owned(), format!("size={disk}")]);
    }
    args.push(plan.image.clone());
    args.extend(plan.command.iter().cloned());
    args
}

/// `--mount` is CSV: a field with a comma or a quote is quoted (paths may have either).
fn csv_field(field: &str) -> String {
    if field.contains([',', '"']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_owned()
    }
}

/// The `docker run` command line, quoted for a POSIX shell.
pub fn docker_run_line(plan: &ContainerPlan) -> String {
    let mut words = vec!["docker".to_owned()];
    words.extend(docker_run_args(plan).iter().map(|arg| util::shell_word(arg)));
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn request(mode: Mode) -> Request {
        Request {
            workspace: Workspace::new(Path::new("/src/app")),
            mode,
            image: "agent-sandbox-base:latest".into(),
            protected: vec![".git/hooks".into(), ".agent-sandbox".into()],
            settings: Settings::default(),
            session_git: false,
            limits: LIMITS,
        }
    }

    const LIMITS: Limits =
        Limits { nano_cpus: Some(1_500_000_000), memory: Some(512 << 20), pids: Some(4096), disk: None };

    fn expected(name: &str, workdir: &str, mode_labels: &[(&str, &str)]) -> ContainerPlan {
        let hash = crate::names::path_hash("/src/app");
        let mount = |kind, source: &str, target: &str, read_only| Mount {
            kind,
            source: source.into(),
            target: target.into(),
            read_only,
        };
        let mut labels: BTreeMap<String, String> =
            [(LABEL_WORKSPACE, "/src/app"), (LABEL_REPO, "app"), (LABEL_WORKDIR, workdir)]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        labels.extend(mode_labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let mut plan = ContainerPlan {
            name: name.replace("HASH", &hash),
            image: "agent-sandbox-base:latest".into(),
            user: "node".into(),
            workdir: workdir.into(),
            mounts: vec![
                mount(MountKind::Bind, "/src/app", "/workspace/app", false),
                // Pinned: the read-only hooks cannot be renamed away with it.
                mount(MountKind::Bind, "/src/app/.git", "/workspace/app/.git", false),
                mount(MountKind::Bind, "/src/app/.git/hooks", "/workspace/app/.git/hooks", true),
                mount(MountKind::Bind, "/src/app/.agent-sandbox", "/workspace/app/.agent-sandbox", true),
                mount(MountKind::Bind, "/src/app/.agent-sandbox", "/etc/agent-sandbox/project", true),
                mount(MountKind::Volume, &format!("agent-sbx-repo-{hash}"), "/repo-shelf", false),
                mount(MountKind::Volume, &format!("agent-sandbox-{hash}-history"), "/commandhistory", false),
                mount(MountKind::Volume, "agent-sandbox-claude-code-config", "/home/node/.claude", false),
                mount(MountKind::Volume, "agent-sandbox-codex-config", "/home/node/.codex", false),
            ],
            env: vec![
                ("CLAUDE_CONFIG_DIR".into(), "/home/node/.claude".into()),
                ("CODEX_HOME".into(), "/home/node/.codex".into()),
                ("HISTFILE".into(), "/commandhistory/.bash_history".into()),
            ],
            labels,
            cap_add: vec!["NET_ADMIN".into(), "NET_RAW".into()],
            network: None,
            dns: vec![],
            command: vec!["sleep".into(), "infinity".into()],
            limits: LIMITS,
        };
        let digest = plan_digest(&plan);
        plan.labels.insert(LABEL_PLAN.into(), digest);
        plan
    }

    #[test]
    fn bind_mode_plan() {
        let want = expected("agent-sandbox-app-HASH", "/workspace/app", &[(LABEL_MODE, "bind")]);
        assert_eq!(plan(&request(Mode::Bind)), Ok(want));
    }

    /// With a session repository, nothing in `.git` is protected (it is not the user's):
    /// the user's `.git` goes to root's directory, its objects read-only, and a volume
    /// of the workspace's is `.git`. Branch mode keeps the protected binds.
    #[test]
    fn bind_mode_with_a_session_repository() {
        let session = Request { session_git: true, ..request(Mode::Bind) };
        let got = plan(&session).expect("plan");
        let hash = crate::names::path_hash("/src/app");
        let mounts: Vec<(MountKind, &str, &str, bool)> = got
            .mounts
            .iter()
            .map(|mount| (mount.kind, mount.source.as_str(), mount.target.as_str(), mount.read_only))
            .collect();
        let volume = format!("agent-sandbox-git-{hash}");
        assert_eq!(
            mounts[..6],
            [
                (MountKind::Bind, "/src/app", "/workspace/app", false),
                (MountKind::Bind, "/src/app/.agent-sandbox", "/workspace/app/.agent-sandbox", true),
                (MountKind::Bind, "/src/app/.agent-sandbox", "/etc/agent-sandbox/project", true),
                (MountKind::Bind, "/src/app/.git", "/var/lib/agent-sandbox/home/git", false),
                (MountKind::Bind, "/src/app/.git/objects", "/var/lib/agent-sandbox/user-objects", true),
                (MountKind::Bind, "/src/app/.git", "/var/lib/agent-sandbox/user-git", true),
            ]
        );
        assert_eq!(mounts[6], (MountKind::Volume, volume.as_str(), "/workspace/app/.git", false));
        // Branch mode: the host's checkout read-only as a whole (its `.git` with it), the
        // broker's mounts, and no session volume: the shelf is the session repository.
        let branch = plan(&Request { session_git: true, ..request(Mode::Branch("x".into())) }).expect("plan");
        let targets: Vec<(&str, bool)> =
            branch.mounts.iter().map(|mount| (mount.target.as_str(), mount.read_only)).collect();
        assert_eq!(
            targets[..6],
            [
                ("/workspace/app", true),
                ("/etc/agent-sandbox/project", true),
                ("/var/lib/agent-sandbox/home/git", false),
                ("/var/lib/agent-sandbox/user-objects", true),
                ("/var/lib/agent-sandbox/user-git", true),
                ("/repo-shelf", false),
            ]
        );
        assert!(!targets.iter().any(|(target, _)| target.starts_with("/workspace/app/")), "{targets:?}");
    }

    #[test]
    fn branch_mode_plan_differs_only_in_name_workdir_and_labels() {
        let want = expected(
            "agent-sandbox-app-feature__x-HASH",
            "/repo-shelf/worktrees/feature__x",
            &[(LABEL_MODE, "branch"), (LABEL_BRANCH, "feature/x")],
        );
        assert_eq!(plan(&request(Mode::Branch("feature/x".into()))), Ok(want));
    }

    #[test]
    fn the_plan_digest_changes_with_what_the_container_is() {
        let base = plan(&request(Mode::Bind)).expect("plan");
        let mut other = request(Mode::Bind);
        other.protected.push(".husky".into());
        let changed = plan(&other).expect("plan");
        assert_ne!(base.labels[LABEL_PLAN], changed.labels[LABEL_PLAN]);
        assert_eq!(plan(&request(Mode::Bind)).expect("plan").labels[LABEL_PLAN], base.labels[LABEL_PLAN]);
    }

    #[test]
    fn networks_sharing_a_namespace_are_refused_and_named_ones_kept() {
        for bad in ["host", "container:db"] {
            let mut request = request(Mode::Bind);
            request.settings.network = Some(bad.into());
            assert_eq!(plan(&request), Err(PlanError::Network(bad.into())));
        }
        let mut none_with_dns = request(Mode::Bind);
        none_with_dns.settings = Settings { network: Some("none".into()), dns: vec!["10.0.0.53".into()] };
        assert_eq!(plan(&none_with_dns), Err(PlanError::DnsWithoutNetwork));
        for (good, dns) in [("none", vec![]), ("my-net", vec!["10.0.0.53".to_owned()])] {
            let mut request = request(Mode::Bind);
            request.settings = Settings { network: Some(good.into()), dns: dns.clone() };
            let got = plan(&request).expect("a named network is fine");
            assert_eq!((got.network.as_deref(), got.dns), (Some(good), dns));
        }
    }

    #[test]
    fn provisioning_plan_mounts_the_host_read_only_and_only_the_shelf_beside_it() {
        let mut request = request(Mode::Bind);
        request.settings.network = Some("none".into());
        let protected = std::mem::take(&mut request.protected);
        let got = provision_plan(&request, "feature/x", Some("https://example.invalid/app.git")).expect("plan");
        let hash = &request.workspace.hash;
        let want = ContainerPlan {
            name: format!("agent-sandbox-app-feature__x-{hash}-provision"),
            image: "agent-sandbox-base:latest".into(),
            user: "root".into(),
            workdir: "/".into(),
            mounts: vec![
                Mount {
                    kind: MountKind::Bind,
                    source: "/src/app".into(),
                    target: "/workspace/app".into(),
                    read_only: true,
                },
                Mount {
                    kind: MountKind::Volume,
                    source: format!("agent-sbx-repo-{hash}"),
                    target: "/repo-shelf".into(),
                    read_only: false,
                },
            ],
            env: vec![
                ("HOST_PATH".into(), "/workspace/app".into()),
                ("ORIGIN_URL".into(), "https://example.invalid/app.git".into()),
                ("BRANCH".into(), "feature/x".into()),
                ("BR_DIR".into(), "/repo-shelf/worktrees/feature__x".into()),
            ],
            labels: [(LABEL_PROVISION.to_owned(), "/src/app".to_owned())].into_iter().collect(),
            cap_add: vec!["NET_ADMIN".into(), "NET_RAW".into()],
            network: Some("none".into()),
            dns: vec![],
            command: vec!["sh".into(), "-c".into(), PROVISION_SCRIPT.into()],
            limits: LIMITS,
        };
        assert_eq!(got, want);
        // The project's policy where the firewall reads it, as in the sandbox.
        assert!(protected.iter().any(|path| path == ".agent-sandbox"), "{protected:?}");
        request.protected = protected;
        let got = provision_plan(&request, "feature/x", Some("https://example.invalid/app.git")).expect("plan");
        let project = Mount {
            kind: MountKind::Bind,
            source: "/src/app/.agent-sandbox".into(),
            target: "/etc/agent-sandbox/project".into(),
            read_only: true,
        };
        assert_eq!(got.mounts, [want.mounts.clone(), vec![project]].concat());
    }

    #[test]
    fn limits_resolve_shares_against_the_engine_and_refuse_a_disk_cap_it_cannot_keep() {
        let gib: u64 = 1 << 30;
        let engine = |driver: &str, backing: Option<&str>| EngineFacts {
            cpus: 2,
            memory: 24 * gib,
            storage_driver: driver.into(),
            backing_filesystem: backing.map(str::to_owned),
        };
        let here = engine("overlay2", Some("extfs"));
        let settings = |cpus: &str, memory: &str, pids: &str, disk: &str| LimitSettings {
            cpus: cpus.into(),
            memory: memory.into(),
            pids: pids.into(),
            disk: disk.into(),
        };
        let table: &[(LimitSettings, &EngineFacts, Result<Limits, PlanError>)] = &[
            // The built-in defaults on this machine: half of each, 4096 processes.
            (
                settings("50%", "50%", "4096", "none"),
                &here,
                Ok(Limits { nano_cpus: Some(1_000_000_000), memory: Some(12 * gib), pids: Some(4096), disk: None }),
            ),
            (settings("none", "none", "none", "none"), &here, Ok(Limits::default())),
            (
                settings("0.5", "64m", "100", "none"),
                &here,
                Ok(Limits { nano_cpus: Some(500_000_000), memory: Some(64 << 20), pids: Some(100), disk: None }),
            ),
            // A share never falls below what Docker accepts.
            (
                settings("1%", "1%", "none", "none"),
                &EngineFacts { cpus: 1, memory: 100 << 20, ..here.clone() },
                Ok(Limits { nano_cpus: Some(10_000_000), memory: Some(6 << 20), pids: None, disk: None }),
            ),
            (
                settings("none", "none", "none", "20g"),
                &here,
                Err(PlanError::Disk { driver: "overlay2".into(), backing: "extfs".into() }),
            ),
            (
                settings("none", "none", "none", "20g"),
                &engine("overlay2", Some("xfs")),
                Ok(Limits { disk: Some(20 * gib), ..Limits::default() }),
            ),
            (
                settings("none", "none", "none", "20g"),
                &engine("btrfs", None),
                Ok(Limits { disk: Some(20 * gib), ..Limits::default() }),
            ),
            (
                settings("lots", "none", "none", "none"),
                &here,
                Err(PlanError::Limit(
                    "container.cpus: expected a number of CPUs (1.5), a share of the engine's (\"50%\") or \"none\", got \"lots\"".into(),
                )),
            ),
        ];
        for (settings, facts, want) in table {
            assert_eq!(&limits(settings, facts), want, "{settings:?} on {facts:?}");
        }
        assert_eq!(
            PlanError::Disk { driver: "overlay2".into(), backing: "extfs".into() }.to_string(),
            "container.disk: this engine's storage driver (overlay2 on extfs) cannot cap a container's filesystem (overlay2 needs xfs mounted with pquota; btrfs, zfs and devicemapper can): set container.disk to \"none\", or move the engine's data root"
        );
    }

    #[test]
    fn settings_parse_whole_and_refuse_unknown_keys() {
        let table: &[(&str, Result<Settings, String>)] = &[
            (crate::context::DEFAULT_SETTINGS, Ok(Settings::default())),
            (
                r#"{"network": "none", "dns": ["10.1.1.1"]}"#,
                Ok(Settings { network: Some("none".into()), dns: vec!["10.1.1.1".into()] }),
            ),
            (r#"{"netwrok": "none"}"#, Err(r#"unknown key "netwrok" (known: network, dns)"#.into())),
            (r#"{"dns": "10.1.1.1"}"#, Err("dns: expected an array of addresses".into())),
            ("[]", Err("expected an object".into())),
        ];
        for (text, want) in table {
            assert_eq!(&Settings::parse(text), want, "{text}");
        }
    }

    #[test]
    fn docker_run_command_of_a_plan() {
        let mut request = request(Mode::Bind);
        request.protected = vec![".git/hooks".into()];
        request.settings = Settings { network: Some("none".into()), dns: vec![] };
        let plan = plan(&request).expect("plan");
        let hash = &request.workspace.hash;
        let digest = plan_digest(&plan);
        let want = format!(
            "docker run --detach --init --name agent-sandbox-app-{hash} \
             --label agent-sandbox.mode=bind --label agent-sandbox.plan={digest} --label agent-sandbox.repo=app \
             --label agent-sandbox.workdir=/workspace/app --label agent-sandbox.workspace=/src/app \
             --user node --workdir /workspace/app --cap-add NET_ADMIN --cap-add NET_RAW --network none \
             --mount type=bind,source=/src/app,target=/workspace/app \
             --mount type=bind,source=/src/app/.git,target=/workspace/app/.git \
             --mount type=bind,source=/src/app/.git/hooks,target=/workspace/app/.git/hooks,readonly \
             --mount type=volume,source=agent-sbx-repo-{hash},target=/repo-shelf \
             --mount type=volume,source=agent-sandbox-{hash}-history,target=/commandhistory \
             --mount type=volume,source=agent-sandbox-claude-code-config,target=/home/node/.claude \
             --mount type=volume,source=agent-sandbox-codex-config,target=/home/node/.codex \
             --env CLAUDE_CONFIG_DIR=/home/node/.claude --env CODEX_HOME=/home/node/.codex \
             --env HISTFILE=/commandhistory/.bash_history \
             --cpus 1.5 --memory 536870912 --memory-swap 536870912 --pids-limit 4096 \
             agent-sandbox-base:latest sleep infinity"
        );
        assert_eq!(docker_run_line(&plan), want);
    }
}
