//! How the inside hands its listening sockets to the proxy (`SCM_RIGHTS` over the
//! proxy's socket): the bridge's own at its start, the resolver's for each allowed name.

use std::{
    io::Read,
    net::TcpListener,
    os::{fd::AsRawFd, unix::net::UnixStream},
};

use runtime_layout::RuntimeLayout;

/// Sends the listening sockets to the proxy with `LISTEN <role>...` (one role per
/// socket: the proxy port, a host port, or `name:port` for the resolver's) and waits
/// for `OK`.
pub fn hand_over(listeners: &[(TcpListener, String)]) -> Result<(), String> {
    let proxy = UnixStream::connect(RuntimeLayout::inside().net_socket()).map_err(|err| err.to_string())?;
    let roles: Vec<&str> = listeners.iter().map(|(_, role)| role.as_str()).collect();
    let line = format!("LISTEN {}\n", roles.join(" "));
    let fds: Vec<i32> = listeners.iter().map(|(listener, _)| listener.as_raw_fd()).collect();
    let mut iov = libc::iovec { iov_base: line.as_ptr().cast_mut().cast(), iov_len: line.len() };
    let payload = std::mem::size_of_val(fds.as_slice());
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(payload as u32) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: a zeroed msghdr is valid; the buffers it points to live until sendmsg
    // returns, and the one control message fits the buffer CMSG_SPACE sized.
    let sent = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(payload as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast::<i32>(), fds.len());
        libc::sendmsg(proxy.as_raw_fd(), &msg, 0)
    };
    if sent != line.len() as isize {
        return Err(std::io::Error::last_os_error().to_string());
    }
    let mut answer = String::new();
    let _ = (&proxy).take(1024).read_to_string(&mut answer);
    match answer.as_str() {
        "OK\n" => Ok(()),
        other => Err(other.trim_end().to_owned()),
    }
}
