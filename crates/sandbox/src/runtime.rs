//! The runtime directory: a private host directory, created for one `exec` and removed
//! after it, that appears read-only inside the sandbox as `/run/agent-sandbox`:
//!
//! ```text
//! agent-sandbox     mount point for this binary (the marker `check` looks for)
//! audit             FIFO: the only way sandboxed processes reach the audit log
//! empty, emptydir/  what a masked secret file or directory shows
//! profile           `$HOME/.profile`: restores PATH for login shells
//! seccomp.bpf       the program bwrap loads (also passed as fd 3)
//! git-guard.json    the git guard's settings (`git.*` in the config)
//! hook-guard.json   the hook guard's settings, so it never reads them through the
//!                   agent's HOME or XDG_CONFIG_HOME
//! bin/<cmd>         mount points for real executables
//! presets/<cmd>     which built-in preset handles <cmd> (`git`, `deny`)
//! wrappers/<cmd>    mount points for wrapper scripts
//! shims/<cmd>       `exec /run/agent-sandbox/agent-sandbox multicall <cmd> "$@"`
//! copied/etc/       copies of the single files granted in /etc, mounted as /etc
//! git-exec-real/<n> mount point for git's n-th exec-path directory, whose place a
//!                   stand-in directory takes (`commands::ensure_stand_in`)
//! ```
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

use crate::plan::{WrappedCommand, RUNTIME_DIR};

pub struct Runtime {
    dir: tempfile::TempDir,
}

/// `$HOME/.profile` inside: for login shells, which reset PATH from /etc/profile.
pub const PROFILE_FILE: &str = "profile";

const SUBDIRS: [&str; 4] = ["bin", "presets", "wrappers", "shims"];

impl Runtime {
    /// Creates and populates the runtime directory under `$XDG_RUNTIME_DIR`, else
    /// `/dev/shm`, else the system temp directory: tmpfs first, because removing
    /// directories from a disk-backed `/tmp` costs milliseconds on every start.
    /// `files` are written at the root, for the guards inside (their settings);
    /// `copies` are host files copied under `copied/` (see `plan::COPIED_DIRS`). A
    /// file that cannot be read is left out: the sandbox could not have read it either.
    pub fn create(commands: &[WrappedCommand], files: &[(&str, &str)], copies: &[&Path]) -> std::io::Result<Runtime> {
        let parent = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|dir| dir.is_dir())
            .or_else(|| Some(PathBuf::from("/dev/shm")).filter(|dir| dir.is_dir()))
            .unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new().prefix("agent-sandbox-").tempdir_in(parent)?;
        let root = dir.path();
        fs_err::write(root.join("agent-sandbox"), "")?;
        fs_err::write(root.join("empty"), "")?;
        fs_err::create_dir(root.join("emptydir"))?;
        fs_err::write(root.join("seccomp.bpf"), seccomp::deny_terminal_injection())?;
        // Filled by the caller (`files`) with the sandbox's PATH; bound as `~/.profile`.
        fs_err::write(root.join(PROFILE_FILE), "")?;
        for (name, content) in files {
            fs_err::write(root.join(name), content)?;
        }
        for source in copies {
            let Some(dir) = source.parent() else { continue };
            let target_dir = crate::plan::copied_dir(root, dir);
            fs_err::create_dir_all(&target_dir)?;
            if let (Ok(content), Some(name)) = (std::fs::read(source), source.file_name()) {
                fs_err::write(target_dir.join(name), content)?;
            }
        }
        make_fifo(&root.join("audit"))?;
        for sub in SUBDIRS {
            fs_err::create_dir(root.join(sub))?;
        }
        for command in commands {
            for index in 0..command.exec_dirs.len() {
                fs_err::create_dir_all(root.join("git-exec-real").join(index.to_string()))?;
            }
            let name = &command.name;
            if command.real.is_some() {
                fs_err::write(root.join("bin").join(name), "")?;
            }
            if command.wrapper.is_some() {
                fs_err::write(root.join("wrappers").join(name), "")?;
            }
            match &command.rule {
                CommandRule::Preset(preset) => fs_err::write(root.join("presets").join(name), preset)?,
                CommandRule::Deny => fs_err::write(root.join("presets").join(name), "deny")?,
                CommandRule::Allow | CommandRule::Wrapper(_) => {}
            }
            let shim = root.join("shims").join(name);
            fs_err::write(&shim, format!("#!/bin/sh\nexec {RUNTIME_DIR}/agent-sandbox multicall {name} \"$@\"\n"))?;
            fs_err::set_permissions(&shim, std::fs::Permissions::from_mode(0o555))?;
        }
        for path in ["empty", "audit"] {
            let mode = if path == "audit" { 0o600 } else { 0o444 };
            fs_err::set_permissions(root.join(path), std::fs::Permissions::from_mode(mode))?;
        }
        fs_err::set_permissions(root.join("emptydir"), std::fs::Permissions::from_mode(0o555))?;
        for sub in SUBDIRS {
            fs_err::set_permissions(root.join(sub), std::fs::Permissions::from_mode(0o111))?;
        }
        fs_err::set_permissions(root, std::fs::Permissions::from_mode(0o111))?;
        Ok(Runtime { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn fifo(&self) -> PathBuf {
        self.dir.path().join("audit")
    }

    pub fn seccomp(&self) -> PathBuf {
        self.dir.path().join("seccomp.bpf")
    }

    /// Removes the directory (restoring the permissions that removal needs).
    pub fn remove(self) -> std::io::Result<()> {
        let root = self.dir.path();
        fs_err::set_permissions(root, std::fs::Permissions::from_mode(0o700))?;
        for sub in SUBDIRS.iter().chain(["emptydir"].iter()) {
            fs_err::set_permissions(root.join(sub), std::fs::Permissions::from_mode(0o700))?;
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
