//! The one spelling of the runtime directory's layout: the private host directory
//! `exec` creates for one sandbox (`sandbox::runtime`), which appears read-only inside
//! it as `/run/agent-sandbox`. The host side creates entries and maps them in
//! ([`RuntimeLayout::host`]); the code running inside (multicall, the git and hook
//! guards, `check`, `audit::send`) finds them ([`RuntimeLayout::inside`]). Both ask
//! [`RuntimeLayout`], so a name cannot drift between the two sides.
//!
//! ```text
//! agent-sandbox     mount point for this binary (the marker `check` looks for, and the
//!                   launcher wrapped commands lead to)
//! audit             FIFO: the only way sandboxed processes reach the audit log
//! empty, emptydir/  what a masked secret file or directory shows
//! profile           `$HOME/.profile`: restores PATH for login shells
//! seccomp.bpf       the program bwrap loads (also passed as fd 3)
//! git-guard.json    the git guard's settings (`git.*` in the config)
//! hook-guard.json   the hook guard's settings, so it never reads them through the
//!                   agent's HOME or XDG_CONFIG_HOME
//! tool-guard.json   the tool guard's settings (`tools.*`)
//! claude-managed-settings.json, codex-requirements.toml
//!                   mounted read-only as Claude Code's and Codex's managed configuration
//!                   ([`CLAUDE_MANAGED_SETTINGS`], [`CODEX_REQUIREMENTS`]): the tool
//!                   guard as their PreToolUse hook
//! qwen-system-settings.json, opencode-managed.json
//!                   mounted read-only as Qwen Code's and OpenCode's managed
//!                   configuration ([`AGENT_MANAGED`]): `tools.*` as their own deny
//!                   rules
//! bin/<cmd>         mount point for the real executable, or, when it belongs to an
//!                   installation (npm's `npm-cli.js` requires `../lib/cli.js`), a
//!                   symlink to it in packages/<cmd>/
//! packages/<cmd>/   mount point for that installation's directory, mounted whole
//! presets/<cmd>     which built-in preset handles <cmd> (`git`, `deny`)
//! wrappers/<cmd>    mount points for wrapper scripts
//! shims/<cmd>       `exec /run/agent-sandbox/agent-sandbox multicall <cmd> "$@"`
//! copied/etc/       copies of the single files granted in /etc, mounted as /etc
//! git-exec-real/<n> mount point for git's n-th exec-path directory, whose place a
//!                   stand-in directory takes
//! net.sock          the network proxy's unix socket (`network.mode` allowlist): the
//!                   only way out of the sandbox's private network namespace
//! push.sock         the host's push service (`hostpush`): `git push` inside becomes a
//!                   request there, carried out outside the sandbox
//! resolv.conf       mounted as `/etc/resolv.conf` in allowlist mode: names the resolver
//!                   the bridge runs inside ([`RESOLVER`])
//! settings.<n>      the n-th package manager settings file (`@settings`) without its
//!                   credential lines, mounted read-only at its own path
//! hosts             mounted as `/etc/hosts` in allowlist mode: the loopback names only
//! user-git/         mount point for the user's `.git`, read-only, when the agent's git
//!                   is its own (`hostpush::home::exec`): the session repository's
//!                   alternates lead there
//! told              what the host's broker told, as JSON lines (`{"seq", "text"}`),
//!                   shown by the git guard at the next git command
//! ```
//!
//! Nothing here touches the filesystem, except [`detect`], which asks whether the
//! markers exist.

#![forbid(unsafe_code)]

mod detect;

use std::path::{Path, PathBuf};

pub use detect::{
    detect, detect_in, Where, CONTAINER_AUDIT_LOG, CONTAINER_BROKER_DIR, CONTAINER_BROKER_TOLD, CONTAINER_HOME_DIR,
    CONTAINER_HOME_GIT, CONTAINER_MARKER, CONTAINER_REAL_GIT, CONTAINER_REPO_SHELF, CONTAINER_USER_GIT,
    CONTAINER_USER_OBJECTS,
};

/// Where the runtime directory appears inside the sandbox.
pub const INSIDE: &str = "/run/agent-sandbox";

/// The settings files at the root, by name: `exec` hands their contents to
/// `Runtime::create` as `(name, content)` pairs.
pub const PROFILE: &str = "profile";
pub const GIT_GUARD_SETTINGS: &str = "git-guard.json";
pub const HOOK_GUARD_SETTINGS: &str = "hook-guard.json";
pub const TOOL_GUARD_SETTINGS: &str = "tool-guard.json";
pub const CLAUDE_MANAGED: &str = "claude-managed-settings.json";
pub const CODEX_MANAGED: &str = "codex-requirements.toml";

/// Where Claude Code reads its managed settings on Linux (users and projects cannot
/// override them).
pub const CLAUDE_MANAGED_SETTINGS: &str = "/etc/claude-code/managed-settings.json";
/// Where Codex reads its managed requirements on Unix.
pub const CODEX_REQUIREMENTS: &str = "/etc/codex/requirements.toml";
/// Where Qwen Code reads its system settings on Linux.
pub const QWEN_SYSTEM_SETTINGS: &str = "/etc/qwen-code/settings.json";
/// OpenCode's managed config directory's file on Linux (it wins over every other config).
pub const OPENCODE_MANAGED_CONFIG: &str = "/etc/opencode/opencode.json";
/// The other agents' managed files (`toolguard::agents`): the name at the runtime
/// directory's root, and where the agent reads it. (Gemini CLI's rules go into a copy
/// of the user's settings instead: `config::agents::Managed::HomeCopy`.)
pub const AGENT_MANAGED: [(&str, &str); 2] =
    [("qwen-system-settings.json", QWEN_SYSTEM_SETTINGS), ("opencode-managed.json", OPENCODE_MANAGED_CONFIG)];

const MARKER: &str = "agent-sandbox";
const AUDIT_FIFO: &str = "audit";
const EMPTY_FILE: &str = "empty";
const EMPTY_DIR: &str = "emptydir";
const SECCOMP: &str = "seccomp.bpf";
const BIN: &str = "bin";
const PRESETS: &str = "presets";
const WRAPPERS: &str = "wrappers";
const SHIMS: &str = "shims";
const PACKAGES: &str = "packages";
const COPIED: &str = "copied";
const GIT_EXEC_REAL: &str = "git-exec-real";
const NET_SOCKET: &str = "net.sock";
const PUSH_SOCKET: &str = "push.sock";
const USER_GIT: &str = "user-git";
const TOLD: &str = "told";
/// The sandbox's `/etc/resolv.conf` in allowlist mode (written by `exec`).
pub const RESOLV_CONF: &str = "resolv.conf";
/// The sandbox's `/etc/hosts` in allowlist mode (written by `exec`).
pub const HOSTS: &str = "hosts";

/// The name of the `index`-th settings copy at the root, for `Runtime::create`'s files.
pub fn settings_copy_name(index: usize) -> String {
    format!("settings.{index}")
}

/// The loopback port inside the sandbox's network namespace where the bridge listens for
/// proxy clients (HTTP CONNECT, absolute-URI HTTP and SOCKS5 on the same port).
pub const PROXY_PORT: u16 = 3128;

/// Where the bridge's resolver answers inside the sandbox's network namespace (UDP port
/// 53), which the sandbox's `/etc/resolv.conf` names.
pub const RESOLVER: [u8; 4] = [127, 0, 0, 1];

/// The first two octets of the loopback addresses the resolver gives allowed names, one
/// per name for the session (`127.77.x.y`).
pub const NAME_RANGE: [u8; 2] = [127, 77];

/// The runtime directory rooted somewhere: inside the sandbox, on the host, or in a
/// test's temporary tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeLayout {
    root: PathBuf,
}

impl RuntimeLayout {
    /// As the sandbox sees it: `/run/agent-sandbox`.
    pub fn inside() -> RuntimeLayout {
        RuntimeLayout { root: PathBuf::from(INSIDE) }
    }

    /// As the sandbox would see it with `/` at `fs_root` (for tests of code that runs
    /// inside): `<fs_root>/run/agent-sandbox`.
    pub fn inside_of(fs_root: &Path) -> RuntimeLayout {
        RuntimeLayout { root: fs_root.join(INSIDE.trim_start_matches('/')) }
    }

    /// The host directory `dir` that is mounted there.
    pub fn host(dir: &Path) -> RuntimeLayout {
        RuntimeLayout { root: dir.to_path_buf() }
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// This binary: the marker `check` looks for, and the launcher wrapped commands run.
    pub fn marker(&self) -> PathBuf {
        self.root.join(MARKER)
    }

    /// The FIFO sandboxed processes send audit events to.
    pub fn audit_fifo(&self) -> PathBuf {
        self.root.join(AUDIT_FIFO)
    }

    /// The empty file a masked file shows.
    pub fn empty_file(&self) -> PathBuf {
        self.root.join(EMPTY_FILE)
    }

    /// The empty directory a masked directory shows.
    pub fn empty_dir(&self) -> PathBuf {
        self.root.join(EMPTY_DIR)
    }

    /// Bound as `$HOME/.profile`.
    pub fn profile(&self) -> PathBuf {
        self.root.join(PROFILE)
    }

    /// The seccomp program bwrap loads.
    pub fn seccomp(&self) -> PathBuf {
        self.root.join(SECCOMP)
    }

    /// The git guard's settings.
    pub fn git_guard_settings(&self) -> PathBuf {
        self.root.join(GIT_GUARD_SETTINGS)
    }

    /// The hook guard's settings.
    pub fn hook_guard_settings(&self) -> PathBuf {
        self.root.join(HOOK_GUARD_SETTINGS)
    }

    /// The tool guard's settings.
    pub fn tool_guard_settings(&self) -> PathBuf {
        self.root.join(TOOL_GUARD_SETTINGS)
    }

    /// Claude Code's managed settings, as mounted at [`CLAUDE_MANAGED_SETTINGS`].
    pub fn claude_managed(&self) -> PathBuf {
        self.root.join(CLAUDE_MANAGED)
    }

    /// Codex's managed requirements, as mounted at [`CODEX_REQUIREMENTS`].
    pub fn codex_managed(&self) -> PathBuf {
        self.root.join(CODEX_MANAGED)
    }

    /// One of [`AGENT_MANAGED`]'s files, by its name.
    pub fn agent_managed(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// The real executable of wrapped command `name`.
    pub fn bin(&self, name: &str) -> PathBuf {
        self.root.join(BIN).join(name)
    }

    /// Where the installation directory of wrapped command `name` is mounted whole, when
    /// its real executable is part of one (a script that loads files beside it).
    pub fn package(&self, name: &str) -> PathBuf {
        self.root.join(PACKAGES).join(name)
    }

    /// Which built-in preset handles `name` (its content: `git`, `deny`).
    pub fn preset(&self, name: &str) -> PathBuf {
        self.root.join(PRESETS).join(name)
    }

    /// The wrapper script of `name`.
    pub fn wrapper(&self, name: &str) -> PathBuf {
        self.root.join(WRAPPERS).join(name)
    }

    /// The shim that runs the launcher as `multicall <name>`.
    pub fn shim(&self, name: &str) -> PathBuf {
        self.root.join(SHIMS).join(name)
    }

    /// The directories holding one entry per wrapped command (`bin`, `presets`,
    /// `wrappers`, `shims`, `packages`).
    pub fn command_dirs(&self) -> [PathBuf; 5] {
        [BIN, PRESETS, WRAPPERS, SHIMS, PACKAGES].map(|dir| self.root.join(dir))
    }

    /// Where the copies of the files granted in the absolute directory `dir` are.
    pub fn copied(&self, dir: &Path) -> PathBuf {
        self.root.join(COPIED).join(dir.strip_prefix("/").unwrap_or(dir))
    }

    /// The network proxy's unix socket.
    pub fn net_socket(&self) -> PathBuf {
        self.root.join(NET_SOCKET)
    }

    /// The host's push service's unix socket.
    pub fn push_socket(&self) -> PathBuf {
        self.root.join(PUSH_SOCKET)
    }

    /// The mount point of the user's `.git` when the agent's git is its own.
    pub fn user_git(&self) -> PathBuf {
        self.root.join(USER_GIT)
    }

    /// What the host's broker told.
    pub fn told(&self) -> PathBuf {
        self.root.join(TOLD)
    }

    /// What is mounted as `/etc/resolv.conf` in allowlist mode.
    pub fn resolv_conf(&self) -> PathBuf {
        self.root.join(RESOLV_CONF)
    }

    /// The copy of the `index`-th settings file (`@settings`), named
    /// [`settings_copy_name`] at the root.
    pub fn settings_copy(&self, index: usize) -> PathBuf {
        self.root.join(settings_copy_name(index))
    }

    /// What is mounted as `/etc/hosts` in allowlist mode.
    pub fn hosts(&self) -> PathBuf {
        self.root.join(HOSTS)
    }

    /// Where git's exec-path directory `index` is, as the host has it.
    pub fn git_exec_real(&self, index: usize) -> PathBuf {
        self.root.join(GIT_EXEC_REAL).join(index.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every entry, spelled out: a change here changes what agents and users see.
    #[test]
    fn every_entry_inside() {
        let inside = RuntimeLayout::inside();
        let entries = [
            (inside.root().to_path_buf(), "/run/agent-sandbox"),
            (inside.marker(), "/run/agent-sandbox/agent-sandbox"),
            (inside.audit_fifo(), "/run/agent-sandbox/audit"),
            (inside.empty_file(), "/run/agent-sandbox/empty"),
            (inside.empty_dir(), "/run/agent-sandbox/emptydir"),
            (inside.profile(), "/run/agent-sandbox/profile"),
            (inside.seccomp(), "/run/agent-sandbox/seccomp.bpf"),
            (inside.git_guard_settings(), "/run/agent-sandbox/git-guard.json"),
            (inside.hook_guard_settings(), "/run/agent-sandbox/hook-guard.json"),
            (inside.tool_guard_settings(), "/run/agent-sandbox/tool-guard.json"),
            (inside.claude_managed(), "/run/agent-sandbox/claude-managed-settings.json"),
            (inside.codex_managed(), "/run/agent-sandbox/codex-requirements.toml"),
            (inside.bin("git"), "/run/agent-sandbox/bin/git"),
            (inside.package("npm"), "/run/agent-sandbox/packages/npm"),
            (inside.preset("git"), "/run/agent-sandbox/presets/git"),
            (inside.wrapper("npm"), "/run/agent-sandbox/wrappers/npm"),
            (inside.shim("python3"), "/run/agent-sandbox/shims/python3"),
            (inside.copied(Path::new("/etc")), "/run/agent-sandbox/copied/etc"),
            (inside.git_exec_real(0), "/run/agent-sandbox/git-exec-real/0"),
            (inside.net_socket(), "/run/agent-sandbox/net.sock"),
            (inside.push_socket(), "/run/agent-sandbox/push.sock"),
            (inside.resolv_conf(), "/run/agent-sandbox/resolv.conf"),
            (inside.hosts(), "/run/agent-sandbox/hosts"),
            (inside.user_git(), "/run/agent-sandbox/user-git"),
            (inside.told(), "/run/agent-sandbox/told"),
        ];
        for (path, expected) in entries {
            assert_eq!(path, Path::new(expected));
        }
        let dirs = inside.command_dirs().map(|dir| dir.display().to_string());
        assert_eq!(
            dirs,
            [
                "/run/agent-sandbox/bin",
                "/run/agent-sandbox/presets",
                "/run/agent-sandbox/wrappers",
                "/run/agent-sandbox/shims",
                "/run/agent-sandbox/packages"
            ]
        );
    }

    #[test]
    fn host_and_test_roots() {
        assert_eq!(RuntimeLayout::host(Path::new("/tmp/rt")).bin("git"), Path::new("/tmp/rt/bin/git"));
        assert_eq!(RuntimeLayout::inside_of(Path::new("/")), RuntimeLayout::inside());
        assert_eq!(RuntimeLayout::inside_of(Path::new("/t")).marker(), Path::new("/t/run/agent-sandbox/agent-sandbox"));
    }
}
