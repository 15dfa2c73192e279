//! Landlock scoping, applied to bwrap itself between fork and exec and so inherited by
//! everything in the sandbox. With the network on, the sandbox shares the host's network
//! namespace and with it the abstract unix socket namespace, where host services (X11,
//! D-Bus, language servers) listen with no file to hide. A ruleset scoped to abstract
//! sockets and signals (Linux ≥ 6.12, Landlock ABI 6) refuses connections to sockets
//! created outside the sandbox. Only raw syscalls: this runs in a forked child.

const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1 << 0;
const LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const LANDLOCK_SCOPE_SIGNAL: u64 = 1 << 1;
const SCOPE_ABI: i64 = 6;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// The kernel's Landlock ABI version (negative without Landlock).
pub fn abi() -> i64 {
    // SAFETY: the version query takes no pointer.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    }
}

/// Whether [`restrict_self`] can work here.
pub fn supported() -> bool {
    abi() >= SCOPE_ABI
}

/// Restricts the calling process and its descendants: no connecting to abstract unix
/// sockets and no signals to processes created outside. Sets no_new_privs first, as
/// Landlock requires. Async-signal-safe: meant for `pre_exec`.
pub fn restrict_self() -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let attr = RulesetAttr {
        handled_access_fs: 0,
        handled_access_net: 0,
        scoped: LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL,
    };
    // SAFETY: attr is a valid ruleset_attr of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is the ruleset just created; it is closed right after.
    let res = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd as libc::c_int, 0u32) };
    let err = std::io::Error::last_os_error();
    // SAFETY: fd is owned here and not used again.
    unsafe { libc::close(fd as libc::c_int) };
    if res != 0 {
        return Err(err);
    }
    Ok(())
}
