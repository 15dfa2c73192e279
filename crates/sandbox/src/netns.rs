//! The private network namespace of `network.mode = "allowlist"`, made between fork and
//! exec of bwrap instead of by bwrap's `--unshare-net`, for one setting bwrap cannot
//! make: `net.ipv4.ip_unprivileged_port_start = 0` in that namespace, so that the bridge
//! inside can bind the resolver's port 53 and the transparent listeners' 80 and 443
//! without any capability. The namespace has only loopback, as bwrap's would.
//!
//! Why not a capability for the bridge (`--cap-add CAP_NET_BIND_SERVICE`): for an
//! unprivileged user bwrap's network namespace belongs to a user namespace above the one
//! the sandbox runs in, so the capability does not reach it (binding port 53 fails, as
//! tried), and for root it would have to be dropped again before the agent runs. Here,
//! the namespace belongs to a user namespace of agent-sandbox's own, which maps only the
//! caller's uid and gid onto themselves; bwrap then makes its own user namespace inside
//! it as usual, so nothing in the sandbox holds a capability over the network namespace
//! (it cannot add a route or an address) and the agent gains none.

use std::ffi::CStr;

/// What [`PrivateNetwork::enter`] writes, prepared before the fork (nothing may allocate
/// between fork and exec).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateNetwork {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl PrivateNetwork {
    /// For the current user: its effective uid and gid mapped onto themselves.
    pub fn for_current_user() -> PrivateNetwork {
        // SAFETY: geteuid and getegid have no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        PrivateNetwork::new(uid, gid)
    }

    pub fn new(uid: u32, gid: u32) -> PrivateNetwork {
        PrivateNetwork {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }

    /// Moves the calling process into a new user and network namespace, maps its ids,
    /// lets every port be bound in the namespace and brings loopback up. Only
    /// async-signal-safe calls (unshare, open, write, close, socket, ioctl): it runs in
    /// the child between fork and exec.
    ///
    /// # Safety
    /// Call only in a single-threaded child between fork and exec (`pre_exec`).
    pub unsafe fn enter(&self) -> std::io::Result<()> {
        // SAFETY: the caller's contract; every buffer passed below outlives its call.
        unsafe {
            enter_user_namespace(libc::CLONE_NEWNET, &self.uid_map, &self.gid_map)?;
            write_file(c"/proc/sys/net/ipv4/ip_unprivileged_port_start", b"0")?;
            loopback_up()
        }
    }
}

/// Moves the calling process into a new user namespace (and the namespaces of `flags`)
/// with the given id maps.
///
/// # Safety
/// Call only in a single-threaded child between fork and exec (`pre_exec`).
pub(crate) unsafe fn enter_user_namespace(flags: libc::c_int, uid_map: &[u8], gid_map: &[u8]) -> std::io::Result<()> {
    // SAFETY: the caller's contract.
    unsafe {
        if libc::unshare(libc::CLONE_NEWUSER | flags) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", uid_map)?;
        write_file(c"/proc/self/gid_map", gid_map)
    }
}

/// One write of `data` to `path`.
unsafe fn write_file(path: &CStr, data: &[u8]) -> std::io::Result<()> {
    // SAFETY: a NUL-terminated path and a buffer of data.len() bytes.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if written != data.len() as isize {
            return Err(err);
        }
        Ok(())
    }
}

/// `ip link set lo up`, with the ioctls (no netlink needed for one flag).
unsafe fn loopback_up() -> std::io::Result<()> {
    // SAFETY: ifreq is plain data; the socket is closed on every path.
    unsafe {
        let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if sock < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
            *dst = *src as libc::c_char;
        }
        // `as _`: the request is an unsigned long in glibc, an int in musl (the Feature's
        // static binary).
        let mut res = libc::ioctl(sock, libc::SIOCGIFFLAGS as _, &mut ifr);
        if res == 0 {
            ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            res = libc::ioctl(sock, libc::SIOCSIFFLAGS as _, &ifr);
        }
        let err = std::io::Error::last_os_error();
        libc::close(sock);
        if res != 0 {
            return Err(err);
        }
        Ok(())
    }
}

/// Whether unprivileged user namespaces are kept from programs without an AppArmor
/// profile of their own (Ubuntu 24.04's `kernel.apparmor_restrict_unprivileged_userns`),
/// from [`crate::run::read_userns_settings`] (empty for root, who is not restricted).
pub fn userns_restricted(settings: &[(&str, String)]) -> bool {
    settings.iter().any(|(name, value)| *name == "kernel/apparmor_restrict_unprivileged_userns" && value == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_only_the_callers_ids_onto_themselves() {
        let net = PrivateNetwork::new(1001, 1002);
        assert_eq!(net.uid_map, b"1001 1001 1\n");
        assert_eq!(net.gid_map, b"1002 1002 1\n");
    }

    #[test]
    fn only_apparmors_restriction_counts() {
        let setting = |name: &'static str, value: &str| vec![(name, value.to_owned())];
        assert!(userns_restricted(&setting("kernel/apparmor_restrict_unprivileged_userns", "1")));
        assert!(!userns_restricted(&setting("kernel/apparmor_restrict_unprivileged_userns", "0")));
        assert!(!userns_restricted(&setting("user/max_user_namespaces", "1")));
        assert!(!userns_restricted(&[]));
    }
}
