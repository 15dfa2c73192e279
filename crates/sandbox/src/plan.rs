//! The bwrap plan: a pure function from a resolved policy (plus the secret masks, the
//! wrapped commands and the runtime directory) to bwrap's whole argument vector. Nothing
//! here touches the filesystem, so every guarantee that bwrap enforces can be read off
//! (and is tested against) one `Vec`.
//!
//! Order matters to bwrap: namespaces and hardening first; then the filesystem from the
//! outside in (a fresh tmpfs root, `/dev`, `/proc`, private `/tmp`, a scratch `$HOME`,
//! the policy's mounts parents-first, secret masks, the settings copies, the agents' managed configuration,
//! the runtime directory, command overlays); then `/` remounted read-only so nothing can be added beside the marker.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
};

use config::{CommandRule, Network};
use policy::{Access, Kind, Mount};
use runtime_layout::RuntimeLayout;

/// The fd bwrap reads the seccomp program from.
pub const SECCOMP_FD: i32 = 3;
/// The fd bwrap reports the sandboxed command's start and exit on (`--json-status-fd`),
/// which tells bwrap's own setup failures from the command's exit status.
pub const STATUS_FD: i32 = 4;
/// Where the runtime directory appears inside the sandbox (kept for callers that
/// want the text; [`RuntimeLayout::inside`] has every entry).
pub const RUNTIME_DIR: &str = runtime_layout::INSIDE;

/// A secret inside the project, hidden behind an empty read-only file or directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mask {
    pub path: PathBuf,
    pub kind: Kind,
}

/// A command the sandbox intercepts (`commands.<name>` other than `true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrappedCommand {
    pub name: String,
    pub rule: CommandRule,
    /// Every executable the name resolves to on PATH, symlinks resolved, deduplicated.
    pub targets: Vec<PathBuf>,
    /// The real executable, mounted at `/run/agent-sandbox/bin/<name>` for presets and
    /// wrapper scripts that call it.
    pub real: Option<PathBuf>,
    /// The installation `real` belongs to (the nearest directory above it with a
    /// `package.json`), mounted whole at `/run/agent-sandbox/packages/<name>` so that a
    /// script finds the files it loads relative to itself; `bin/<name>` is then a
    /// symlink into it (see `runtime`).
    pub package: Option<PathBuf>,
    /// The wrapper script (for [`CommandRule::Wrapper`]), resolved on the host.
    pub wrapper: Option<PathBuf>,
    /// For git: the directories it runs its own programs from (`git --exec-path`), each
    /// replaced as a whole so that dashed builtins (`git-commit`) reach the launcher too.
    pub exec_dirs: Vec<ExecDir>,
}

/// A directory of git programs and what each entry becomes inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecDir {
    pub path: PathBuf,
    /// Entry names, with `true` for those that are git itself (hard links, symlinks to
    /// it, `git`): they lead to the launcher; the others to the original files.
    pub entries: Vec<(std::ffi::OsString, bool)>,
    /// The host directory of symlinks mounted in its place (see
    /// `commands::ensure_stand_in`): built once, named after a hash of its contents.
    pub stand_in: PathBuf,
}

/// The agent's git is its own (`hostpush::home::exec`): the session repository is
/// shown where git inside finds the project's git directory (`dot_git`: `.git`, or what
/// the project's `.git` file names), over whatever the policy shows there, and the
/// user's common git directory read-only at the runtime directory's `user-git`, the
/// session's alternate. Nothing of the user's repository is writable inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionGit {
    pub session: PathBuf,
    pub dot_git: PathBuf,
    /// The project's `.git` when it is a file naming `dot_git` (a linked worktree, a
    /// submodule): shown read-only, so that it keeps naming the session.
    pub gitfile: Option<PathBuf>,
    /// The user's common git directory (objects, refs, config, hooks).
    pub user_git: PathBuf,
    /// The user's git directory of this work tree (`HEAD`, the index): `user_git`, or
    /// a linked worktree's record in it.
    pub user_git_dir: PathBuf,
}

impl SessionGit {
    /// The project's `.git` (a directory or a file).
    pub fn project_dot_git(&self) -> &Path {
        self.gitfile.as_deref().unwrap_or(&self.dot_git)
    }

    /// The project's work tree.
    pub fn work_tree(&self) -> Option<&Path> {
        self.project_dot_git().parent()
    }
}

pub struct Plan<'a> {
    pub network: Network,
    /// The executor has made the network namespace (allowlist mode, where it can:
    /// [`premade_network_namespace`]), so bwrap does not.
    pub premade_network: bool,
    /// `network.hostPorts`, bridged into the namespace in allowlist mode.
    pub host_ports: &'a [u16],
    pub mounts: &'a [Mount],
    pub masks: &'a [Mask],
    /// Settings files shown as the runtime directory's redacted copies
    /// ([`RuntimeLayout::settings_copy`], in this order), read-only at these paths.
    pub settings: &'a [PathBuf],
    pub commands: &'a [WrappedCommand],
    pub home: &'a Path,
    pub cwd: &'a Path,
    /// The runtime directory on the host (its layout: [`RuntimeLayout`]).
    pub runtime: &'a Path,
    /// This binary, mounted as the marker, the launcher and the multicall dispatcher.
    pub self_exe: &'a Path,
    pub command: &'a [OsString],
    pub session_git: Option<&'a SessionGit>,
}

/// Up to this many masks, bwrap mounts them; beyond, `mask-init` does, as the
/// sandbox's first process (`crates/inside/src/masks.rs`): bwrap re-reads
/// `/proc/self/mountinfo` after each mount it makes, so its cost grows with the square of
/// the mount count (a thousand `.env` files in `node_modules` took seconds), while
/// `mask-init` costs one exec and two `mount(2)` calls a mask.
pub const MASKS_BY_BWRAP: usize = 32;

/// How the session repository is shown: as the policy shows the project's `.git`;
/// `None` when it is not shown.
fn session_access(git: &SessionGit, mounts: &[Mount]) -> Option<Access> {
    policy::access_of(git.project_dot_git(), mounts).filter(|access| *access != Access::Exclude)
}

pub fn bwrap_args(plan: &Plan<'_>) -> Vec<OsString> {
    let host = RuntimeLayout::host(plan.runtime);
    let inside = RuntimeLayout::inside();
    let mut args = Args(Vec::new());
    args.push_all(&["--die-with-parent", "--unshare-user", "--disable-userns", "--unshare-pid", "--unshare-ipc"]);
    args.push_all(&["--unshare-uts", "--unshare-cgroup-try"]);
    if plan.network != Network::On && !plan.premade_network {
        args.push("--unshare-net");
    }
    args.push_all(&["--cap-drop", "ALL"]);
    if plan.masks.len() > MASKS_BY_BWRAP {
        // For `mask-init` alone, which gives them up before the command runs.
        // `mask-init` is the sandbox's pid 1 too: bwrap's own init would stay in the
        // mount namespace without the masks, readable through `/proc/1/root`.
        args.push_all(&["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP", "--as-pid-1"]);
    }
    args.push_all(&["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]);
    if plan.home != Path::new("/") {
        args.push("--tmpfs");
        args.push_path(plan.home);
        // Login shells reset PATH from /etc/profile; this puts the sandbox's back.
        args.bind("--ro-bind", &host.profile(), &plan.home.join(".profile"));
    }

    let copied = copied_files(plan.mounts);
    let copied_links = copied_links(plan.mounts);
    let mut copied_dirs: Vec<&Path> = copied.iter().filter_map(|mount| mount.path.parent()).collect();
    copied_dirs.dedup();
    // Writable while bwrap makes the mount points of what is granted inside it, then
    // read-only (the copy lives in the private runtime directory).
    let mut remount: Vec<PathBuf> = Vec::new();
    for dir in copied_dirs {
        args.bind("--bind", &host.copied(dir), dir);
        remount.push(dir.to_path_buf());
    }
    // What the policy shows at or under the git directory that the session repository
    // is bound over would never be seen: not mounted (each bind costs bwrap a read of
    // the whole mount table).
    let covered = plan.session_git.filter(|git| session_access(git, plan.mounts).is_some()).map(|git| &git.dot_git);
    for mount in plan.mounts {
        if copied.iter().any(|copy| copy.path == mount.path) {
            continue;
        }
        if covered.is_some_and(|dot_git| mount.path.starts_with(dot_git)) {
            continue;
        }
        if replaced_by_resolver(plan.network, &mount.path) {
            continue;
        }
        if let Some(link) = &mount.link {
            if copied_links.iter().any(|copy| copy.path == mount.path) {
                continue;
            }
            args.push("--symlink");
            args.push_path(link);
            args.push_path(&mount.path);
            continue;
        }
        match (mount.access, mount.kind) {
            (Access::Rw, _) => args.bind("--bind", &mount.path, &mount.path),
            (Access::Ro, _) => args.bind("--ro-bind", &mount.path, &mount.path),
            // Something is granted inside: bwrap must be able to make its mount point, so
            // an empty tmpfs, made read-only once everything is mounted.
            (Access::Exclude, Kind::Dir) if has_descendants(mount, plan.mounts) => {
                args.push("--tmpfs");
                args.push_path(&mount.path);
                remount.push(mount.path.clone());
            }
            (Access::Exclude, Kind::Dir) => args.bind("--ro-bind", &host.empty_dir(), &mount.path),
            (Access::Exclude, Kind::File) => args.bind("--ro-bind", &host.empty_file(), &mount.path),
        }
    }
    let masked_by_bwrap = plan.masks.len() <= MASKS_BY_BWRAP;
    for mask in plan.masks.iter().filter(|_| masked_by_bwrap) {
        let empty = match mask.kind {
            Kind::Dir => host.empty_dir(),
            Kind::File => host.empty_file(),
        };
        args.bind("--ro-bind", &empty, &mask.path);
    }
    // Over whatever the policy shows or hides there (`~/.npmrc` is a built-in exclude).
    for (index, path) in plan.settings.iter().enumerate() {
        args.bind("--ro-bind", &host.settings_copy(index), path);
    }
    // The agents' managed configuration (the tool guard as their PreToolUse hook), over
    // whatever is granted there: read-only, in a read-only `/etc`.
    args.bind("--ro-bind", &host.claude_managed(), Path::new(runtime_layout::CLAUDE_MANAGED_SETTINGS));
    args.bind("--ro-bind", &host.codex_managed(), Path::new(runtime_layout::CODEX_REQUIREMENTS));
    for (name, path) in runtime_layout::AGENT_MANAGED {
        args.bind("--ro-bind", &host.agent_managed(name), Path::new(path));
    }
    if plan.network == Network::Allowlist {
        // The resolver inside is the only DNS there is: /etc/hosts names loopback only.
        args.bind("--ro-bind", &host.resolv_conf(), Path::new(RESOLV_CONF));
        args.bind("--ro-bind", &host.hosts(), Path::new(HOSTS));
    }

    args.bind("--ro-bind", host.root(), inside.root());
    args.bind("--ro-bind", plan.self_exe, &inside.marker());
    if let Some(git) = plan.session_git {
        // As the policy would have shown the project's `.git`: writable in a writable
        // project, read-only in a read-only one; its hooks and config read-only always
        // (mount points: they cannot be renamed away either), as the user's were.
        let project = git.project_dot_git();
        if git.user_git != git.dot_git && policy::is_visible(&git.user_git, plan.mounts) {
            // Another rule shows the user's repository (a parent of it granted): not writable.
            args.bind("--ro-bind", &git.user_git, &git.user_git);
        }
        match session_access(git, plan.mounts) {
            Some(Access::Rw) => args.bind("--bind", &git.session, &git.dot_git),
            Some(Access::Ro) => args.bind("--ro-bind", &git.session, &git.dot_git),
            Some(Access::Exclude) | None => {}
        }
        if policy::is_visible(project, plan.mounts) {
            for name in ["hooks", "config"] {
                args.bind("--ro-bind", &git.session.join(name), &git.dot_git.join(name));
            }
            if let Some(file) = &git.gitfile {
                args.bind("--ro-bind", file, file);
            }
        }
        args.bind("--ro-bind", &git.user_git, &inside.user_git());
    }
    // The real executables first: an installation mounted whole must be copied before
    // any launcher is laid over a file in it (mounts made later do not reach the copy).
    for command in plan.commands {
        match (&command.real, &command.package) {
            (Some(_), Some(package)) => args.bind("--ro-bind", package, &inside.package(&command.name)),
            (Some(real), None) => args.bind("--ro-bind", real, &inside.bin(&command.name)),
            (None, _) => {}
        }
        if let Some(wrapper) = &command.wrapper {
            args.bind("--ro-bind", wrapper, &inside.wrapper(&command.name));
        }
    }
    for command in plan.commands {
        for (index, dir) in command.exec_dirs.iter().enumerate() {
            args.bind("--ro-bind", &dir.path, &inside.git_exec_real(index));
            args.bind("--ro-bind", &dir.stand_in, &dir.path);
        }
        for target in &command.targets {
            // The binary dispatches on argv[0]; a target whose file name is not the
            // command's (python3 -> python3.11) gets a shim that names the command.
            let launcher = if target.file_name().is_some_and(|name| *name == *command.name) {
                plan.self_exe.to_path_buf()
            } else {
                host.shim(&command.name)
            };
            args.bind("--ro-bind", &launcher, target);
        }
    }

    for path in &remount {
        args.push("--remount-ro");
        args.push_path(path);
    }
    args.push_all(&["--remount-ro", "/"]);
    args.push("--chdir");
    args.push_path(plan.cwd);
    args.push("--seccomp");
    args.push(&SECCOMP_FD.to_string());
    args.push("--json-status-fd");
    args.push(&STATUS_FD.to_string());
    args.push("--");
    if !masked_by_bwrap {
        args.push_path(&inside.marker());
        args.push("mask-init");
        for mask in plan.masks {
            args.push(match mask.kind {
                Kind::Dir => "d",
                Kind::File => "f",
            });
            args.push_path(&mask.path);
        }
        args.push("--");
    }
    if plan.network == Network::Allowlist {
        // The bridge to the host's proxy runs first, and the command as its child.
        args.push_path(&inside.marker());
        args.push("net-bridge");
        if plan.premade_network {
            args.push("--resolver");
        }
        for port in plan.host_ports {
            args.push("--host-port");
            args.push(&port.to_string());
        }
        args.push("--");
    }
    args.0.extend(plan.command.iter().cloned());
    args.0
}

/// The resolver configuration every program reads, the runtime directory's own in
/// allowlist mode.
const RESOLV_CONF: &str = "/etc/resolv.conf";

/// The names file every program reads, the runtime directory's own (loopback names
/// only) in allowlist mode.
const HOSTS: &str = "/etc/hosts";

/// Whether a granted `path` gives way to the resolver's `/etc/resolv.conf` or the
/// loopback-only `/etc/hosts` (allowlist mode): it is not mounted, nor copied as a link
/// (`copied_links`), because bwrap could not mount over a link to a file it does not
/// show (systemd-resolved's stub).
pub fn replaced_by_resolver(network: Network, path: &Path) -> bool {
    network == Network::Allowlist && (path == Path::new(RESOLV_CONF) || path == Path::new(HOSTS))
}

/// Whether the executor makes the sandbox's network namespace before bwrap starts
/// ([`crate::netns::PrivateNetwork`]) rather than bwrap (`--unshare-net`): in allowlist
/// mode, whose namespace lets the bridge bind ports below 1024 (the resolver's and the
/// transparent listeners'), unless the machine restricts unprivileged user namespaces
/// to programs with a profile of their own (bwrap has one, agent-sandbox not): then
/// bwrap makes it and only proxy-aware programs have a network.
pub fn premade_network_namespace(network: Network, userns_restricted: bool) -> bool {
    network == Network::Allowlist && !userns_restricted
}

/// Directories whose granted files are copied into the runtime directory at start and
/// mounted as one directory, instead of one bind mount per file: bwrap's cost grows
/// with the number of mounts, and `@base` grants some twenty single files in `/etc`.
pub const COPIED_DIRS: &[&str] = &["/etc"];

/// The read-only files of `mounts` that are copied rather than bound (see
/// [`COPIED_DIRS`]): plain files directly in such a directory, when the directory
/// itself is not mounted.
pub fn copied_files(mounts: &[Mount]) -> Vec<&Mount> {
    mounts
        .iter()
        .filter(|mount| mount.access == Access::Ro && mount.kind == Kind::File && mount.link.is_none())
        .filter(|mount| {
            mount.path.parent().is_some_and(|parent| {
                COPIED_DIRS.iter().any(|dir| Path::new(dir) == parent)
                    && !mounts.iter().any(|other| other.path == parent)
            })
        })
        .collect()
}

/// The symlinks of `mounts` that lie in a copied directory (`/etc/localtime`): made in
/// the copy when the runtime directory is created, not by bwrap, which would make them
/// in the host's copy through the writable bind and fail on the next sandbox that uses
/// the same runtime directory (a push's checks do).
pub fn copied_links(mounts: &[Mount]) -> Vec<&Mount> {
    let copied = copied_files(mounts);
    mounts
        .iter()
        .filter(|mount| mount.link.is_some())
        .filter(|mount| copied.iter().any(|file| file.path.parent() == mount.path.parent()))
        .collect()
}

/// Whether any other mount lies inside `mount`.
pub fn has_descendants(mount: &Mount, mounts: &[Mount]) -> bool {
    mounts.iter().any(|other| other.path != mount.path && other.path.starts_with(&mount.path))
}

struct Args(Vec<OsString>);

impl Args {
    fn push(&mut self, arg: &str) {
        self.0.push(arg.into());
    }
    fn push_all(&mut self, items: &[&str]) {
        self.0.extend(items.iter().map(OsString::from));
    }
    fn push_path(&mut self, path: &Path) {
        self.0.push(path.as_os_str().to_owned());
    }
    fn bind(&mut self, flag: &str, source: &Path, dest: &Path) {
        self.push(flag);
        self.push_path(source);
        self.push_path(dest);
    }
}

/// The plan as one shell-quoted command line, for `--dry-run` and `--debug`.
pub fn shell_quote(argv: &[OsString]) -> String {
    util::shell_line(argv)
}

#[cfg(test)]
mod tests {
    use config::{LayerKind, Location, Origin};

    use super::*;

    fn mount(path: &str, access: Access, kind: Kind) -> Mount {
        Mount {
            path: path.into(),
            access,
            kind,
            link: None,
            rule: String::new(),
            origin: Origin { layer: LayerKind::Default, location: Location::Builtin },
        }
    }

    fn strings(args: Vec<OsString>) -> Vec<String> {
        args.into_iter().map(|arg| arg.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn whole_argv_for_a_typical_project() {
        let mounts = [
            mount("/usr", Access::Ro, Kind::Dir),
            mount("/home/u/.ssh", Access::Exclude, Kind::Dir),
            mount("/home/u/proj", Access::Rw, Kind::Dir),
            mount("/home/u/.netrc", Access::Exclude, Kind::File),
            mount("/home/u/proj/.git/hooks", Access::Ro, Kind::Dir),
        ];
        let masks = [
            Mask { path: "/home/u/proj/.env".into(), kind: Kind::File },
            Mask { path: "/home/u/proj/secrets".into(), kind: Kind::Dir },
        ];
        let commands = [
            WrappedCommand {
                name: "git".into(),
                rule: CommandRule::Preset("git".into()),
                targets: vec!["/usr/bin/git".into()],
                real: Some("/usr/bin/git".into()),
                package: None,
                wrapper: None,
                exec_dirs: vec![ExecDir {
                    path: "/usr/lib/git-core".into(),
                    entries: vec![("git".into(), true), ("git-sh-setup".into(), false)],
                    stand_in: "/home/u/.cache/agent-sandbox/git-exec/0123".into(),
                }],
            },
            WrappedCommand {
                name: "python3".into(),
                rule: CommandRule::Deny,
                targets: vec!["/usr/bin/python3.11".into()],
                real: None,
                package: None,
                wrapper: None,
                exec_dirs: Vec::new(),
            },
            WrappedCommand {
                name: "npm".into(),
                rule: CommandRule::Wrapper("/home/u/npm-guard".into()),
                targets: vec!["/usr/share/nodejs/npm/bin/npm-cli.js".into()],
                real: Some("/usr/share/nodejs/npm/bin/npm-cli.js".into()),
                package: Some("/usr/share/nodejs/npm".into()),
                wrapper: Some("/home/u/npm-guard".into()),
                exec_dirs: Vec::new(),
            },
        ];
        let command = ["claude".into(), "--resume".into()];
        let plan = Plan {
            network: Network::Off,
            premade_network: false,
            host_ports: &[],
            mounts: &mounts,
            masks: &masks,
            settings: &["/home/u/.npmrc".into(), "/etc/pip.conf".into()],
            commands: &commands,
            home: Path::new("/home/u"),
            cwd: Path::new("/home/u/proj/src"),
            runtime: Path::new("/tmp/rt"),
            self_exe: Path::new("/opt/as/agent-sandbox"),
            command: &command,
            session_git: None,
        };
        let expected = [
            "--die-with-parent",
            "--unshare-user",
            "--disable-userns",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--unshare-net",
            "--cap-drop",
            "ALL",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--tmpfs",
            "/home/u",
            "--ro-bind",
            "/tmp/rt/profile",
            "/home/u/.profile",
            "--ro-bind",
            "/usr",
            "/usr",
            "--ro-bind",
            "/tmp/rt/emptydir",
            "/home/u/.ssh",
            "--bind",
            "/home/u/proj",
            "/home/u/proj",
            "--ro-bind",
            "/tmp/rt/empty",
            "/home/u/.netrc",
            "--ro-bind",
            "/home/u/proj/.git/hooks",
            "/home/u/proj/.git/hooks",
            "--ro-bind",
            "/tmp/rt/empty",
            "/home/u/proj/.env",
            "--ro-bind",
            "/tmp/rt/emptydir",
            "/home/u/proj/secrets",
            "--ro-bind",
            "/tmp/rt/settings.0",
            "/home/u/.npmrc",
            "--ro-bind",
            "/tmp/rt/settings.1",
            "/etc/pip.conf",
            "--ro-bind",
            "/tmp/rt/claude-managed-settings.json",
            "/etc/claude-code/managed-settings.json",
            "--ro-bind",
            "/tmp/rt/codex-requirements.toml",
            "/etc/codex/requirements.toml",
            "--ro-bind",
            "/tmp/rt/qwen-system-settings.json",
            "/etc/qwen-code/settings.json",
            "--ro-bind",
            "/tmp/rt/opencode-managed.json",
            "/etc/opencode/opencode.json",
            "--ro-bind",
            "/tmp/rt",
            "/run/agent-sandbox",
            "--ro-bind",
            "/opt/as/agent-sandbox",
            "/run/agent-sandbox/agent-sandbox",
            "--ro-bind",
            "/usr/bin/git",
            "/run/agent-sandbox/bin/git",
            "--ro-bind",
            "/usr/share/nodejs/npm",
            "/run/agent-sandbox/packages/npm",
            "--ro-bind",
            "/home/u/npm-guard",
            "/run/agent-sandbox/wrappers/npm",
            "--ro-bind",
            "/usr/lib/git-core",
            "/run/agent-sandbox/git-exec-real/0",
            "--ro-bind",
            "/home/u/.cache/agent-sandbox/git-exec/0123",
            "/usr/lib/git-core",
            "--ro-bind",
            "/opt/as/agent-sandbox",
            "/usr/bin/git",
            "--ro-bind",
            "/tmp/rt/shims/python3",
            "/usr/bin/python3.11",
            "--ro-bind",
            "/tmp/rt/shims/npm",
            "/usr/share/nodejs/npm/bin/npm-cli.js",
            "--remount-ro",
            "/",
            "--chdir",
            "/home/u/proj/src",
            "--seccomp",
            "3",
            "--json-status-fd",
            "4",
            "--",
            "claude",
            "--resume",
        ];
        assert_eq!(strings(bwrap_args(&plan)), expected);
    }

    #[test]
    fn network_on_keeps_the_host_network_namespace_only() {
        let plan = Plan {
            network: Network::On,
            premade_network: false,
            host_ports: &[],
            mounts: &[],
            masks: &[],
            settings: &[],
            commands: &[],
            home: Path::new("/"),
            cwd: Path::new("/p"),
            runtime: Path::new("/rt"),
            self_exe: Path::new("/as"),
            command: &["true".into()],
            session_git: None,
        };
        let expected = [
            "--die-with-parent",
            "--unshare-user",
            "--disable-userns",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--cap-drop",
            "ALL",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--ro-bind",
            "/rt/claude-managed-settings.json",
            "/etc/claude-code/managed-settings.json",
            "--ro-bind",
            "/rt/codex-requirements.toml",
            "/etc/codex/requirements.toml",
            "--ro-bind",
            "/rt/qwen-system-settings.json",
            "/etc/qwen-code/settings.json",
            "--ro-bind",
            "/rt/opencode-managed.json",
            "/etc/opencode/opencode.json",
            "--ro-bind",
            "/rt",
            "/run/agent-sandbox",
            "--ro-bind",
            "/as",
            "/run/agent-sandbox/agent-sandbox",
            "--remount-ro",
            "/",
            "--chdir",
            "/p",
            "--seccomp",
            "3",
            "--json-status-fd",
            "4",
            "--",
            "true",
        ];
        assert_eq!(strings(bwrap_args(&plan)), expected);
    }

    #[test]
    fn allowlist_has_a_premade_network_namespace_its_resolver_and_the_bridge() {
        let plan = Plan {
            network: Network::Allowlist,
            premade_network: true,
            host_ports: &[5432, 6379],
            mounts: &[],
            masks: &[],
            settings: &[],
            commands: &[],
            home: Path::new("/"),
            cwd: Path::new("/p"),
            runtime: Path::new("/rt"),
            self_exe: Path::new("/as"),
            command: &["curl".into(), "https://example.org".into()],
            session_git: None,
        };
        let args = strings(bwrap_args(&plan));
        assert!(premade_network_namespace(plan.network, false));
        // A granted /etc/resolv.conf that is a link (systemd-resolved's stub) gives way.
        let mut link = mount("/etc/resolv.conf", Access::Ro, Kind::File);
        link.link = Some("../run/systemd/resolve/stub-resolv.conf".into());
        let mounts = [link];
        let with_link = strings(bwrap_args(&Plan { mounts: &mounts, ..plan }));
        assert!(!with_link.iter().any(|arg| arg.contains("stub-resolv")), "{with_link:?}");
        assert_eq!(with_link.iter().filter(|arg| *arg == "/etc/resolv.conf").count(), 1, "{with_link:?}");
        assert!(!premade_network_namespace(plan.network, true));
        assert!(!premade_network_namespace(Network::Off, false));
        assert!(!args.iter().any(|arg| arg == "--unshare-net"), "the executor makes it: {args:?}");
        let resolv = args.windows(3).position(|window| window == ["--ro-bind", "/rt/resolv.conf", "/etc/resolv.conf"]);
        let hosts = args.windows(3).position(|window| window == ["--ro-bind", "/rt/hosts", "/etc/hosts"]);
        let runtime = args.windows(3).position(|window| window == ["--ro-bind", "/rt", "/run/agent-sandbox"]);
        assert!(resolv.is_some_and(|resolv| runtime.is_some_and(|runtime| resolv < runtime)), "{args:?}");
        assert!(hosts.is_some_and(|hosts| runtime.is_some_and(|runtime| hosts < runtime)), "{args:?}");
        // The host's /etc/hosts, granted and copied, is mounted over by the loopback-only one.
        let mounts = [mount("/etc/hosts", Access::Ro, Kind::File)];
        let with_hosts = strings(bwrap_args(&Plan { mounts: &mounts, ..plan }));
        let host_copy = with_hosts.windows(3).position(|window| window == ["--bind", "/rt/copied/etc", "/etc"]);
        let own = with_hosts.windows(3).position(|window| window == ["--ro-bind", "/rt/hosts", "/etc/hosts"]);
        assert!(host_copy.is_some_and(|copy| own.is_some_and(|own| copy < own)), "{with_hosts:?}");
        let tail: Vec<&str> = args.iter().skip_while(|arg| *arg != "--").map(String::as_str).collect();
        assert_eq!(
            tail,
            [
                "--",
                "/run/agent-sandbox/agent-sandbox",
                "net-bridge",
                "--resolver",
                "--host-port",
                "5432",
                "--host-port",
                "6379",
                "--",
                "curl",
                "https://example.org"
            ]
        );
    }

    /// Beyond [`MASKS_BY_BWRAP`] masks, bwrap mounts none of them: its child gets the two
    /// capabilities `mask-init` needs, and `mask-init` runs first, before the bridge.
    #[test]
    fn many_masks_are_mounted_by_mask_init_before_the_bridge() {
        let masks: Vec<Mask> = (0..=MASKS_BY_BWRAP)
            .map(|index| Mask {
                path: format!("/p/node_modules/m{index}/.env").into(),
                kind: if index == 0 { Kind::Dir } else { Kind::File },
            })
            .collect();
        let plan = Plan {
            network: Network::Allowlist,
            premade_network: true,
            host_ports: &[],
            mounts: &[],
            masks: &masks,
            settings: &[],
            commands: &[],
            home: Path::new("/"),
            cwd: Path::new("/p"),
            runtime: Path::new("/rt"),
            self_exe: Path::new("/as"),
            command: &["true".into()],
            session_git: None,
        };
        let args = strings(bwrap_args(&plan));
        assert!(!args.iter().any(|arg| arg == "/rt/empty" || arg == "/rt/emptydir"), "bwrap mounts no mask: {args:?}");
        let caps = args.windows(7).position(|w| {
            w == ["--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP", "--as-pid-1"]
        });
        assert!(caps.is_some(), "{args:?}");
        let tail: Vec<&str> = args.iter().skip_while(|arg| *arg != "--").map(String::as_str).collect();
        let mut expected = vec!["--", "/run/agent-sandbox/agent-sandbox", "mask-init"];
        let specs: Vec<String> = masks.iter().map(|mask| mask.path.display().to_string()).collect();
        for (index, path) in specs.iter().enumerate() {
            expected.extend([if index == 0 { "d" } else { "f" }, path.as_str()]);
        }
        expected.extend(["--", "/run/agent-sandbox/agent-sandbox", "net-bridge", "--resolver", "--", "true"]);
        assert_eq!(tail, expected);
        // At the threshold, bwrap mounts them and no capability is kept.
        let few = strings(bwrap_args(&Plan { masks: &masks[..MASKS_BY_BWRAP], ..plan }));
        assert!(!few.iter().any(|arg| arg == "--cap-add" || arg == "--as-pid-1" || arg == "mask-init"), "{few:?}");
        assert_eq!(few.iter().filter(|arg| *arg == "/rt/empty").count(), MASKS_BY_BWRAP - 1, "{few:?}");
    }

    /// A plan of `mounts` with the session repository `git`, the network off.
    fn session_plan<'a>(mounts: &'a [Mount], git: &'a SessionGit, cwd: &'a Path, command: &'a [OsString]) -> Plan<'a> {
        Plan {
            network: Network::Off,
            premade_network: false,
            host_ports: &[],
            mounts,
            masks: &[],
            settings: &[],
            commands: &[],
            home: Path::new("/"),
            cwd,
            runtime: Path::new("/rt"),
            self_exe: Path::new("/as"),
            command,
            session_git: Some(git),
        }
    }

    /// The `count` arguments after the runtime's marker binary is bound.
    fn after_marker(args: &[String], count: usize) -> Vec<&str> {
        args.iter()
            .skip_while(|arg| *arg != "/run/agent-sandbox/agent-sandbox")
            .skip(1)
            .take(count)
            .map(String::as_str)
            .collect()
    }

    #[test]
    fn the_session_repository_covers_dot_git_and_the_users_is_read_only_beside_the_runtime() {
        let mounts = [mount("/p", Access::Rw, Kind::Dir), mount("/p/.git/hooks", Access::Ro, Kind::Dir)];
        let git = SessionGit {
            session: "/state/home/.git".into(),
            dot_git: "/p/.git".into(),
            gitfile: None,
            user_git: "/p/.git".into(),
            user_git_dir: "/p/.git".into(),
        };
        let command = ["true".into()];
        let plan = session_plan(&mounts, &git, Path::new("/p"), &command);
        let args = strings(bwrap_args(&plan));
        let tail = after_marker(&args, 12);
        // After the policy's mounts and after the runtime directory, whose `user-git` is
        // the mount point.
        assert_eq!(
            tail,
            [
                "--bind",
                "/state/home/.git",
                "/p/.git",
                "--ro-bind",
                "/state/home/.git/hooks",
                "/p/.git/hooks",
                "--ro-bind",
                "/state/home/.git/config",
                "/p/.git/config",
                "--ro-bind",
                "/p/.git",
                "/run/agent-sandbox/user-git"
            ]
        );
        // The policy's mount of the user's hooks, which the session covers, is left out.
        assert_eq!(args.iter().filter(|arg| *arg == "/p/.git/hooks").count(), 1, "{args:?}");
        // A read-only project has a read-only session.
        let read_only = [mount("/p", Access::Ro, Kind::Dir)];
        let args = strings(bwrap_args(&Plan { mounts: &read_only, ..plan }));
        let at = args.iter().position(|arg| arg == "/state/home/.git").expect("the session");
        assert_eq!(args[at - 1], "--ro-bind", "{args:?}");
        let without = strings(bwrap_args(&Plan { session_git: None, ..plan }));
        assert!(!without.iter().any(|arg| arg.contains("user-git")), "{without:?}");
    }

    /// A linked worktree: the session stands at the record its `.git` file names, the
    /// file is read-only, and the user's repository, shown by a granted parent, is
    /// read-only before the session covers the record in it.
    #[test]
    fn a_linked_worktrees_session_stands_at_its_record_and_the_users_repository_is_read_only() {
        let mounts = [mount("/w", Access::Rw, Kind::Dir), mount("/w/p", Access::Rw, Kind::Dir)];
        let git = SessionGit {
            session: "/state/home/.git".into(),
            dot_git: "/w/main/.git/worktrees/p".into(),
            gitfile: Some("/w/p/.git".into()),
            user_git: "/w/main/.git".into(),
            user_git_dir: "/w/main/.git/worktrees/p".into(),
        };
        let command = ["true".into()];
        let plan = session_plan(&mounts, &git, Path::new("/w/p"), &command);
        let args = strings(bwrap_args(&plan));
        let tail = after_marker(&args, 18);
        assert_eq!(
            tail,
            [
                "--ro-bind",
                "/w/main/.git",
                "/w/main/.git",
                "--bind",
                "/state/home/.git",
                "/w/main/.git/worktrees/p",
                "--ro-bind",
                "/state/home/.git/hooks",
                "/w/main/.git/worktrees/p/hooks",
                "--ro-bind",
                "/state/home/.git/config",
                "/w/main/.git/worktrees/p/config",
                "--ro-bind",
                "/w/p/.git",
                "/w/p/.git",
                "--ro-bind",
                "/w/main/.git",
                "/run/agent-sandbox/user-git"
            ]
        );
        // Without the granted parent, the user's repository is not shown but as `user-git`.
        let only = [mount("/w/p", Access::Rw, Kind::Dir)];
        let args = strings(bwrap_args(&Plan { mounts: &only, ..plan }));
        assert_eq!(args.iter().filter(|arg| *arg == "/w/main/.git").count(), 1, "{args:?}");
    }

    #[test]
    fn single_files_in_etc_are_copied_and_mounted_as_one_directory() {
        let mounts = [
            mount("/etc/passwd", Access::Ro, Kind::File),
            mount("/etc/hosts", Access::Ro, Kind::File),
            mount("/etc/ssl", Access::Ro, Kind::Dir),
            Mount { link: Some("/usr/share/zoneinfo/UTC".into()), ..mount("/etc/localtime", Access::Ro, Kind::File) },
            Mount { link: Some("../x".into()), ..mount("/opt/link", Access::Ro, Kind::File) },
            mount("/p", Access::Rw, Kind::Dir),
        ];
        let plan = Plan {
            network: Network::On,
            premade_network: false,
            host_ports: &[],
            mounts: &mounts,
            masks: &[],
            settings: &[],
            commands: &[],
            home: Path::new("/"),
            cwd: Path::new("/p"),
            runtime: Path::new("/rt"),
            self_exe: Path::new("/as"),
            command: &["true".into()],
            session_git: None,
        };
        let args = strings(bwrap_args(&plan));
        let mounts_part: Vec<&str> = args
            .iter()
            .skip_while(|arg| *arg != "/tmp")
            .skip(1)
            .take_while(|arg| *arg != "/run/agent-sandbox")
            .map(String::as_str)
            .collect();
        assert_eq!(
            mounts_part,
            [
                "--bind",
                "/rt/copied/etc",
                "/etc",
                "--ro-bind",
                "/etc/ssl",
                "/etc/ssl",
                // Made in the copy by the runtime (not by bwrap, through the bind).
                "--symlink",
                "../x",
                "/opt/link",
                "--bind",
                "/p",
                "/p",
                "--ro-bind",
                "/rt/claude-managed-settings.json",
                "/etc/claude-code/managed-settings.json",
                "--ro-bind",
                "/rt/codex-requirements.toml",
                "/etc/codex/requirements.toml",
                "--ro-bind",
                "/rt/qwen-system-settings.json",
                "/etc/qwen-code/settings.json",
                "--ro-bind",
                "/rt/opencode-managed.json",
                "/etc/opencode/opencode.json",
                "--ro-bind",
                "/rt"
            ]
        );
        let copied: Vec<&Path> = copied_files(&mounts).iter().map(|mount| mount.path.as_path()).collect();
        assert_eq!(copied, [Path::new("/etc/passwd"), Path::new("/etc/hosts")]);
        let links: Vec<&Path> = copied_links(&mounts).iter().map(|mount| mount.path.as_path()).collect();
        assert_eq!(links, [Path::new("/etc/localtime")]);
    }

    #[test]
    fn shell_quoting() {
        let argv: Vec<OsString> = ["bwrap", "--bind", "/a b", "it's", ""].iter().map(OsString::from).collect();
        assert_eq!(shell_quote(&argv), r"bwrap --bind '/a b' 'it'\''s' ''");
    }
}
