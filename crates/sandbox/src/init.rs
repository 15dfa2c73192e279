//! The first process inside the sandbox (`agent-sandbox sandbox-init -- CMD…`): applies
//! what bwrap cannot, then execs the command. With the network on, the sandbox shares the
//! host's network namespace and with it the abstract unix socket namespace, where host
//! services (X11, D-Bus, language servers) listen with no file to hide. A Landlock
//! ruleset scoped to abstract sockets and signals (Linux ≥ 6.12, Landlock ABI 6) closes
//! it. bwrap has already set no_new_privs, which Landlock requires.

use std::{ffi::OsString, os::unix::process::CommandExt, process::Command};

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

/// What the scoping achieved, for the caller to report.
#[derive(Debug)]
pub enum Scope {
    Applied,
    /// The kernel's Landlock ABI (or -1 without Landlock) is older than 6.
    Unsupported(i64),
    Failed(std::io::Error),
}

/// Restricts this process and its descendants: no connecting to abstract unix sockets
/// and no signals to processes created outside the sandbox.
pub fn scope_abstract_sockets_and_signals() -> Scope {
    // SAFETY: the version query takes no pointer.
    let abi = unsafe {
        libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<RulesetAttr>(), 0usize, LANDLOCK_CREATE_RULESET_VERSION)
    };
    if abi < SCOPE_ABI {
        return Scope::Unsupported(abi);
    }
    let attr = RulesetAttr {
        handled_access_fs: 0,
        handled_access_net: 0,
        scoped: LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL,
    };
    // SAFETY: attr is a valid ruleset_attr of the size passed.
    let fd = unsafe {
        libc::syscall(libc::SYS_landlock_create_ruleset, &attr as *const RulesetAttr, std::mem::size_of::<RulesetAttr>(), 0u32)
    };
    if fd < 0 {
        return Scope::Failed(std::io::Error::last_os_error());
    }
    // SAFETY: fd is the ruleset just created; it is closed right after.
    let res = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd as libc::c_int, 0u32) };
    let err = std::io::Error::last_os_error();
    // SAFETY: fd is owned here and not used again.
    unsafe { libc::close(fd as libc::c_int) };
    if res != 0 {
        return Scope::Failed(err);
    }
    Scope::Applied
}

/// Entry point: `args` is `[--network-on] -- CMD ARGS…`. Returns only on failure.
pub fn run(args: &[OsString]) -> i32 {
    let network_on = args.first().is_some_and(|arg| arg == "--network-on");
    let Some(split) = args.iter().position(|arg| arg == "--") else {
        eprintln!("agent-sandbox: usage: agent-sandbox sandbox-init [--network-on] -- CMD [ARGS...]");
        return 125;
    };
    let command = &args[split + 1..];
    let Some(program) = command.first() else {
        eprintln!("agent-sandbox: sandbox-init: no command");
        return 125;
    };
    match scope_abstract_sockets_and_signals() {
        Scope::Applied => {}
        // Without the network the sandbox has its own abstract namespace: nothing to close.
        _ if !network_on => {}
        Scope::Unsupported(abi) => eprintln!(
            "agent-sandbox: warning: this kernel cannot scope abstract unix sockets (Landlock ABI {abi}, needs 6, Linux 6.12); \
             with the network on, the sandbox can reach host services listening on them (use --network off to close this)"
        ),
        Scope::Failed(err) => {
            eprintln!("agent-sandbox: cannot restrict abstract unix sockets: {err} (use --network off, or report this)");
            return 125;
        }
    }
    let err = Command::new(program).args(&command[1..]).exec();
    eprintln!("agent-sandbox: cannot run {}: {err}", program.to_string_lossy());
    if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}
