//! The runtime directory: a private host directory, created for one `exec` and removed
//! after it, that appears read-only inside the sandbox as `/run/agent-sandbox`. Its
//! entries are named by `runtime_layout::RuntimeLayout` (the layout is documented there);
//! this module creates and removes them.
//!
//! Why a host directory bound read-only rather than bwrap's `--ro-bind-data` memfds:
//! one mount instead of one per file (bwrap's cost grows with its mounts), and it doubles
//! as the skeleton of mount points for the real binaries of wrapped commands.
//!
//! The directories are mode 0111 once populated, so `ls /run/agent-sandbox/bin` fails
//! inside. That is deterrence only (`/proc/self/mountinfo` still lists the mounts); what
//! protects the runtime is that it is mounted read-only and `/` is remounted read-only.

use std::{
    ffi::CString,
    os::unix::{ffi::OsStrExt, fs::PermissionsExt},
    path::{Path, PathBuf},
};

use config::CommandRule;
use runtime_layout::RuntimeLayout;

use crate::plan::WrappedCommand;

pub struct Runtime {
    dir: tempfile::TempDir,
}

/// `$HOME/.profile` inside: for login shells, which reset PATH from /etc/profile. A
/// name for the `files` of [`Runtime::create`] (kept for `exec`).
pub const PROFILE_FILE: &str = runtime_layout::PROFILE;

impl Runtime {
    /// Creates and populates the runtime directory under `$XDG_RUNTIME_DIR`, else
    /// `/dev/shm`, else the system temp directory: tmpfs first, because removing
    /// directories from a disk-backed `/tmp` costs milliseconds on every start.
    /// `files` are written at the root, for the guards inside (their settings);
    /// `copies` are host files copied into [`RuntimeLayout::copied`] (see
    /// `plan::COPIED_DIRS`), `links` symlinks made there. A
    /// file that cannot be read is left out: the sandbox could not have read it either.
    pub fn create(
        commands: &[WrappedCommand],
        files: &[(&str, &str)],
        copies: &[&Path],
        links: &[(&Path, &Path)],
    ) -> std::io::Result<Runtime> {
        let parent = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|dir| dir.is_dir())
            .or_else(|| Some(PathBuf::from("/dev/shm")).filter(|dir| dir.is_dir()))
            .unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new().prefix("agent-sandbox-").tempdir_in(parent)?;
        let host = RuntimeLayout::host(dir.path());
        let inside = RuntimeLayout::inside();
        fs_err::write(host.marker(), "")?;
        fs_err::write(host.empty_file(), "")?;
        fs_err::create_dir(host.empty_dir())?;
        fs_err::write(host.seccomp(), seccomp::deny_terminal_injection())?;
        // Filled by the caller (`files`) with the sandbox's PATH; bound as `~/.profile`.
        fs_err::write(host.profile(), "")?;
        // Mounted whatever the caller writes (`files`): empty documents by default.
        fs_err::write(host.claude_managed(), "{}")?;
        fs_err::write(host.codex_managed(), "")?;
        for (name, content) in files {
            fs_err::write(host.root().join(name), content)?;
        }
        for source in copies {
            let Some(dir) = source.parent() else { continue };
            let target_dir = host.copied(dir);
            fs_err::create_dir_all(&target_dir)?;
            if let (Ok(content), Some(name)) = (std::fs::read(source), source.file_name()) {
                fs_err::write(target_dir.join(name), content)?;
            }
        }
        // The symlinks of the copied directories (`plan::copied_links`): path, target.
        for (path, target) in links {
            let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { continue };
            let target_dir = host.copied(dir);
            fs_err::create_dir_all(&target_dir)?;
            fs_err::os::unix::fs::symlink(target, target_dir.join(name))?;
        }
        make_fifo(&host.audit_fifo())?;
        for sub in host.command_dirs() {
            fs_err::create_dir(sub)?;
        }
        for command in commands {
            write_command(&host, &inside, command)?;
        }
        fs_err::set_permissions(host.empty_file(), std::fs::Permissions::from_mode(0o444))?;
        fs_err::set_permissions(host.audit_fifo(), std::fs::Permissions::from_mode(0o600))?;
        fs_err::set_permissions(host.empty_dir(), std::fs::Permissions::from_mode(0o555))?;
        for sub in host.command_dirs() {
            fs_err::set_permissions(sub, std::fs::Permissions::from_mode(0o111))?;
        }
        fs_err::set_permissions(host.root(), std::fs::Permissions::from_mode(0o111))?;
        Ok(Runtime { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Binds the network proxy's unix socket ([`RuntimeLayout::net_socket`]), which the
    /// sandbox can connect to (a socket on a read-only mount still accepts connections)
    /// but not replace.
    pub fn listen_net(&self) -> std::io::Result<std::os::unix::net::UnixListener> {
        self.listen(&self.layout().net_socket())
    }

    /// Binds the push service's unix socket ([`RuntimeLayout::push_socket`]), likewise.
    pub fn listen_push(&self) -> std::io::Result<std::os::unix::net::UnixListener> {
        self.listen(&self.layout().push_socket())
    }

    /// Makes the mount point of the user's `.git` ([`RuntimeLayout::user_git`]) and the
    /// broker's told file ([`RuntimeLayout::told`], written by this process in place):
    /// only when the agent's git is its own, which the git guard inside tells by them.
    pub fn make_session_git_entries(&self) -> std::io::Result<()> {
        let host = self.layout();
        fs_err::set_permissions(host.root(), std::fs::Permissions::from_mode(0o700))?;
        let made = fs_err::create_dir(host.user_git()).and_then(|()| fs_err::write(host.told(), ""));
        fs_err::set_permissions(host.root(), std::fs::Permissions::from_mode(0o111))?;
        made?;
        fs_err::set_permissions(host.told(), std::fs::Permissions::from_mode(0o644))
    }

    /// Bound under a name of its own and renamed into place once its mode is set: the
    /// socket never stands at its path before it is ready.
    fn listen(&self, socket: &Path) -> std::io::Result<std::os::unix::net::UnixListener> {
        let host = self.layout();
        let binding = socket.with_extension("binding");
        fs_err::set_permissions(host.root(), std::fs::Permissions::from_mode(0o700))?;
        let listener = std::os::unix::net::UnixListener::bind(&binding).and_then(|listener| {
            fs_err::set_permissions(&binding, std::fs::Permissions::from_mode(0o600))?;
            fs_err::rename(&binding, socket)?;
            Ok(listener)
        });
        if listener.is_err() {
            let _ = std::fs::remove_file(&binding);
        }
        fs_err::set_permissions(host.root(), std::fs::Permissions::from_mode(0o111))?;
        listener
    }

    /// The directory's layout on the host.
    pub fn layout(&self) -> RuntimeLayout {
        RuntimeLayout::host(self.dir.path())
    }

    pub fn fifo(&self) -> PathBuf {
        self.layout().audit_fifo()
    }

    pub fn seccomp(&self) -> PathBuf {
        self.layout().seccomp()
    }

    /// Leaves the directory in place and returns its path: for `cargo xtask bench`
    /// (see `session::BENCH_ARGV_VAR`), which runs bwrap again on it and removes it.
    pub fn keep(self) -> PathBuf {
        self.dir.keep()
    }

    /// Removes the directory (restoring the permissions that removal needs).
    pub fn remove(self) -> std::io::Result<()> {
        let host = self.layout();
        fs_err::set_permissions(host.root(), std::fs::Permissions::from_mode(0o700))?;
        for sub in host.command_dirs().iter().chain([host.empty_dir()].iter()) {
            fs_err::set_permissions(sub, std::fs::Permissions::from_mode(0o700))?;
        }
        self.dir.close()
    }
}

fn make_fifo(path: &Path) -> std::io::Result<()> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: c_path is a valid NUL-terminated string for the duration of the call.
    if unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A wrapped command's files in the runtime directory: its real program (or package),
/// wrapper, rule and the shim that runs the guard for it.
fn write_command(host: &RuntimeLayout, inside: &RuntimeLayout, command: &WrappedCommand) -> std::io::Result<()> {
    for index in 0..command.exec_dirs.len() {
        fs_err::create_dir_all(host.git_exec_real(index))?;
    }
    let name = &command.name;
    match (&command.real, &command.package) {
        (Some(real), Some(package)) => {
            fs_err::create_dir(host.package(name))?;
            let relative = real.strip_prefix(package).unwrap_or(real);
            fs_err::os::unix::fs::symlink(inside.package(name).join(relative), host.bin(name))?;
        }
        (Some(_), None) => fs_err::write(host.bin(name), "")?,
        (None, _) => {}
    }
    if command.wrapper.is_some() {
        fs_err::write(host.wrapper(name), "")?;
    }
    match &command.rule {
        CommandRule::Preset(preset) => fs_err::write(host.preset(name), preset)?,
        CommandRule::Deny => fs_err::write(host.preset(name), "deny")?,
        CommandRule::Allow | CommandRule::Wrapper(_) => {}
    }
    let shim = host.shim(name);
    let launcher = inside.marker();
    fs_err::write(&shim, format!("#!/bin/sh\nexec {} multicall {name} \"$@\"\n", launcher.display()))?;
    fs_err::set_permissions(&shim, std::fs::Permissions::from_mode(0o555))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ExecDir;

    /// The host side creates every entry the plan maps in and the code inside looks for.
    #[test]
    fn create_makes_every_entry_of_the_layout() {
        let command = |name: &str, rule: CommandRule| WrappedCommand {
            name: name.into(),
            rule,
            targets: Vec::new(),
            real: Some("/usr/bin/true".into()),
            package: None,
            wrapper: Some("/usr/bin/true".into()),
            exec_dirs: Vec::new(),
        };
        let mut git = command("git", CommandRule::Preset("git".into()));
        git.exec_dirs = vec![ExecDir { path: "/x".into(), entries: Vec::new(), stand_in: "/y".into() }];
        let mut npm = command("npm", CommandRule::Wrapper("/usr/bin/true".into()));
        npm.real = Some("/usr/lib/node_modules/npm/bin/npm-cli.js".into());
        npm.package = Some("/usr/lib/node_modules/npm".into());
        let commands = [git, npm, command("sh", CommandRule::Deny)];
        let runtime =
            Runtime::create(&commands, &[(runtime_layout::GIT_GUARD_SETTINGS, "{}")], &[], &[]).expect("runtime");
        let host = runtime.layout();
        for path in [
            host.marker(),
            host.audit_fifo(),
            host.empty_file(),
            host.empty_dir(),
            host.profile(),
            host.seccomp(),
            host.git_guard_settings(),
            host.bin("git"),
            host.wrapper("npm"),
            host.package("npm"),
            host.git_exec_real(0),
        ] {
            assert!(path.exists(), "{}", path.display());
        }
        assert_eq!(
            fs_err::read_link(host.bin("npm")).expect("npm's real is a link into its package"),
            Path::new("/run/agent-sandbox/packages/npm/bin/npm-cli.js")
        );
        assert_eq!(fs_err::read_to_string(host.preset("git")).expect("preset"), "git");
        assert_eq!(fs_err::read_to_string(host.preset("sh")).expect("preset"), "deny");
        assert_eq!(
            fs_err::read_to_string(host.shim("npm")).expect("shim"),
            "#!/bin/sh\nexec /run/agent-sandbox/agent-sandbox multicall npm \"$@\"\n"
        );
        let root = runtime.path().to_path_buf();
        runtime.remove().expect("remove");
        assert!(!root.exists());
    }
}
