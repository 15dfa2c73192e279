//! Moving a stream's bytes from one descriptor to another through a pipe with
//! `splice(2)`, so that a relay (the allowlist's proxy on the host, its bridge inside
//! the sandbox) never copies them through user space; plain `read`/`write` where the
//! kernel cannot splice these descriptors.

use std::{
    io::{Read, Write},
    os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd},
};

/// How much one `splice` call moves at most (and the pipe's size, where allowed).
const CHUNK: usize = 1 << 20;

/// Copies from `from` to `to` until end of file or an error on either side; returns
/// the number of bytes copied. Never fails: a relay ends the same way either way.
pub fn copy_stream(from: &(impl AsFd + ?Sized), to: &(impl AsFd + ?Sized)) -> u64 {
    let (from, to) = (from.as_fd().as_raw_fd(), to.as_fd().as_raw_fd());
    let Some((pipe_read, pipe_write)) = pipe() else { return copy_plain(from, to, 0) };
    let mut total = 0u64;
    loop {
        // SAFETY: splice(2) on descriptors this function borrows or owns; null offsets
        // (sockets and pipes have none).
        let moved = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                pipe_write.as_raw_fd(),
                std::ptr::null_mut(),
                CHUNK,
                libc::SPLICE_F_MOVE,
            )
        };
        if moved == 0 {
            return total;
        }
        if moved < 0 {
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EINVAL) if total == 0 => return copy_plain(from, to, 0),
                _ => return total,
            }
        }
        let mut left = moved as usize;
        while left > 0 {
            // SAFETY: as above.
            let written = unsafe {
                libc::splice(
                    pipe_read.as_raw_fd(),
                    std::ptr::null_mut(),
                    to,
                    std::ptr::null_mut(),
                    left,
                    libc::SPLICE_F_MOVE,
                )
            };
            if written <= 0 {
                if written < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return total;
            }
            left -= written as usize;
            total += written as u64;
        }
    }
}

fn copy_plain(from: i32, to: i32, mut total: u64) -> u64 {
    // SAFETY: borrowed for the duration of this call only; ManuallyDrop never closes them.
    let mut reader = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(from) });
    // SAFETY: as above.
    let mut writer = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(to) });
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => return total,
            Ok(len) => {
                if writer.write_all(&buffer[..len]).is_err() {
                    return total;
                }
                total += len as u64;
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return total,
        }
    }
}

fn pipe() -> Option<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: pipe2 just created both; each is owned once. F_SETPIPE_SZ is best effort.
    unsafe {
        libc::fcntl(fds[1], libc::F_SETPIPE_SZ, CHUNK as libc::c_int);
        Some((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixStream;

    use super::*;

    #[test]
    fn copies_a_stream_between_sockets_and_counts_it() {
        let (mut source, source_end) = UnixStream::pair().expect("pair");
        let (target_end, mut target) = UnixStream::pair().expect("pair");
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let expected = data.clone();
        let writer = std::thread::spawn(move || {
            source.write_all(&data).expect("write");
        });
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            target.read_to_end(&mut got).expect("read");
            got
        });
        let copied = copy_stream(&source_end, &target_end);
        drop(target_end);
        writer.join().expect("writer");
        assert_eq!(copied, 3_000_000);
        assert_eq!(reader.join().expect("reader"), expected);
    }
}
