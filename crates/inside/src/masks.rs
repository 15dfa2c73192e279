//! `agent-sandbox mask-init (f|d PATH)... -- CMD [ARGS...]`: what bwrap starts in place
//! of the command when a project has many secret files to mask. bwrap re-reads
//! `/proc/self/mountinfo` after every bind mount it makes, so a thousand masks cost it
//! seconds (quadratic); here each mask is two `mount(2)` calls. bwrap gives this first
//! process `CAP_SYS_ADMIN` and `CAP_SETPCAP` in the sandbox's user namespace (it
//! forbids nested ones, `--disable-userns`); it mounts the masks (an empty file or
//! directory of the read-only runtime directory, bound read-only over each path), then
//! gives up every capability (bounding set, ambient, inheritable, permitted, effective),
//! checks in `/proc/self/status` that none is left, and only then starts the command,
//! staying as the sandbox's pid 1 (bwrap runs it `--as-pid-1`) to reap and to pass on
//! the command's status: no process is left in the mount namespace without the masks
//! (bwrap's own init would be, and `/proc/1/root` would show the secrets through it).
//! Anything that fails ends here with status 125: the command never runs with a mask
//! missing or a capability kept.
//!
//! The masks live in a mount namespace of its own, made here (bwrap's child sits in a
//! user namespace nested in the one owning bwrap's mounts). They cannot be undone from
//! inside: unmounting needs `CAP_SYS_ADMIN` in the user namespace that owns that mount
//! namespace, which nothing after this exec has, and no other user namespace can be
//! made; bwrap's mounts come into it locked.

use std::{
    ffi::{CString, OsString},
    os::unix::ffi::OsStrExt as _,
    process::Command,
};

use runtime_layout::RuntimeLayout;

const FAILED: i32 = 125;

/// Runs `mask-init`; returns only on failure (the exit status), else execs the command.
pub fn run(args: &[OsString]) -> i32 {
    // Only where bwrap started it: elsewhere (root on the host) it would mount over
    // the host's own files.
    if runtime_layout::detect() != runtime_layout::Where::Bubblewrap {
        eprintln!("agent-sandbox: mask-init runs only as the first process of an agent-sandbox sandbox");
        return FAILED;
    }
    let Some(split) = args.iter().position(|arg| arg == "--") else { return usage() };
    let (specs, command) = (&args[..split], &args[split + 1..]);
    if specs.len() % 2 != 0 || command.is_empty() {
        return usage();
    }
    // bwrap runs its child in a user namespace nested in the one that owns the
    // sandbox's mounts (`--disable-userns`), so the masks go into a mount namespace of
    // this one: a copy of bwrap's, whose mounts come locked (none can be unmounted or
    // made writable from here), with the masks on top.
    // SAFETY: unshare(2) with a flag; no memory is involved.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        eprintln!(
            "agent-sandbox: cannot make the masks' mount namespace: {}; the command does not run",
            std::io::Error::last_os_error()
        );
        return FAILED;
    }
    let layout = RuntimeLayout::inside();
    let (empty_file, empty_dir) = (layout.empty_file(), layout.empty_dir());
    for spec in specs.chunks(2) {
        let source = match spec[0].to_str() {
            Some("f") => &empty_file,
            Some("d") => &empty_dir,
            _ => return usage(),
        };
        if let Err(err) = mask(source.as_os_str(), &spec[1]) {
            eprintln!(
                "agent-sandbox: cannot mask {}: {err}; the command does not run",
                std::path::Path::new(&spec[1]).display()
            );
            return FAILED;
        }
    }
    if let Err(err) = drop_capabilities() {
        eprintln!("agent-sandbox: cannot give up the capabilities the masks needed ({err}); the command does not run");
        return FAILED;
    }
    // This process stays as the sandbox's init (bwrap runs it `--as-pid-1`): were it
    // bwrap's own init, that process would sit in the mount namespace without the masks,
    // and `/proc/1/root/…` would read every masked file.
    let child = match Command::new(&command[0]).args(&command[1..]).spawn() {
        Ok(child) => child.id() as i32,
        Err(err) => {
            eprintln!("agent-sandbox: cannot run {}: {err}", command[0].to_string_lossy());
            return if err.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
        }
    };
    reap_until(child)
}

/// pid 1's work: reaps every process that ends (orphans come here) until `child` does,
/// and returns its status (or 128 + the signal that ended it); the kernel then ends
/// whatever is left in the pid namespace.
fn reap_until(child: i32) -> i32 {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only `status`.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == child {
            if libc::WIFEXITED(status) {
                return libc::WEXITSTATUS(status);
            }
            if libc::WIFSIGNALED(status) {
                return 128 + libc::WTERMSIG(status);
            }
        } else if pid < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return FAILED;
        }
    }
}

fn usage() -> i32 {
    eprintln!("agent-sandbox: usage: agent-sandbox mask-init (f|d PATH)... -- CMD [ARGS...]");
    2
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

/// Binds `source` over `target`, then makes that mount read-only, without devices or
/// set-id programs.
fn mask(source: &std::ffi::OsStr, target: &std::ffi::OsStr) -> std::io::Result<()> {
    let (source, target) = (cstring(source.as_bytes())?, cstring(target.as_bytes())?);
    // SAFETY: NUL-terminated paths; null filesystem type and data are allowed for
    // MS_BIND and MS_REMOUNT.
    unsafe {
        if libc::mount(source.as_ptr(), target.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
        if libc::mount(std::ptr::null(), target.as_ptr(), std::ptr::null(), flags, std::ptr::null()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Empties every capability set of this process and checks that the kernel agrees.
fn drop_capabilities() -> std::io::Result<()> {
    // SAFETY: prctl and capset with valid arguments; the header and data are plain
    // structs the kernel reads.
    unsafe {
        if libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // Up to the highest capability the kernel knows (EINVAL beyond it).
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                let err = std::io::Error::last_os_error();
                if err.raw_os_error() == Some(libc::EINVAL) {
                    break;
                }
                return Err(err);
            }
        }
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        const VERSION_3: u32 = 0x2008_0522;
        let mut header = Header { version: VERSION_3, pid: 0 };
        let data = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
        if libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    let status = std::fs::read_to_string("/proc/self/status")?;
    for line in status.lines().filter(|line| line.starts_with("Cap")) {
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        if value.trim().trim_start_matches('0').is_empty() {
            continue;
        }
        return Err(std::io::Error::other(format!("{name} is still {}", value.trim())));
    }
    Ok(())
}
