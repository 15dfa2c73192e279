//! What the sandbox's side and the host's side say on the push socket. The client sends
//! one JSON [`Request`] line; the host answers with frames (a tag byte, a big-endian
//! `u32` length, the bytes): [`OUT`] and [`ERR`] carry the push's output as it comes,
//! [`EXIT`] ends the answer with the exit status (four bytes, `i32`).

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

/// Output for the client's stdout.
pub const OUT: u8 = b'o';
/// Output for the client's stderr.
pub const ERR: u8 = b'e';
/// The push's exit status; the last frame.
pub const EXIT: u8 = b'x';

/// No request is legitimately longer (a push's arguments).
pub const MAX_REQUEST: u64 = 256 * 1024;
/// A frame longer than this is a broken peer.
const MAX_FRAME: u32 = 16 * 1024 * 1024;

/// One push, as the git guard inside saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Where git would have started (after any `-C`), as the sandbox names it: the
    /// project is mounted at the same path inside as on the host.
    pub cwd: String,
    /// The arguments after `push`, aliases expanded.
    pub args: Vec<String>,
    /// Not a push: the session repository's refs may have moved, bring its work home
    /// (`home::exec`). Answered at once; the broker runs after.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub home: bool,
}

impl Request {
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        line
    }

    /// Reads the request line (at most [`MAX_REQUEST`] bytes).
    pub fn read(reader: impl Read) -> std::io::Result<Request> {
        let mut line = Vec::new();
        let mut limited = reader.take(MAX_REQUEST);
        let mut byte = [0u8; 1];
        loop {
            match limited.read(&mut byte)? {
                0 => break,
                _ if byte[0] == b'\n' => break,
                _ => line.push(byte[0]),
            }
        }
        serde_json::from_slice(&line).map_err(|err| std::io::Error::new(std::io::ErrorKind::InvalidData, err))
    }
}

pub fn write_frame(mut writer: impl Write, tag: u8, bytes: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(bytes.len()).map_err(|_| std::io::Error::other("frame too long"))?;
    let mut frame = Vec::with_capacity(5 + bytes.len());
    frame.push(tag);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(bytes);
    writer.write_all(&frame)
}

/// The next frame; `None` at the end of the stream.
pub fn read_frame(mut reader: impl Read) -> std::io::Result<Option<(u8, Vec<u8>)>> {
    let mut header = [0u8; 5];
    match reader.read_exact(&mut header) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(err) => return Err(err),
    }
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
    if len > MAX_FRAME {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "frame too long"));
    }
    let mut bytes = vec![0; len as usize];
    reader.read_exact(&mut bytes)?;
    Ok(Some((header[0], bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_frames_round_trip() {
        let request = Request { cwd: "/p".into(), args: vec!["origin".into(), "a b\nc".into()], home: false };
        let line = request.to_line();
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1, "one line whatever the arguments hold");
        assert_eq!(Request::read(&line[..]).expect("read"), request);
        let mut stream = Vec::new();
        write_frame(&mut stream, ERR, b"hello").expect("frame");
        write_frame(&mut stream, EXIT, &1i32.to_be_bytes()).expect("frame");
        let mut reader = &stream[..];
        assert_eq!(read_frame(&mut reader).expect("read"), Some((ERR, b"hello".to_vec())));
        assert_eq!(read_frame(&mut reader).expect("read"), Some((EXIT, 1i32.to_be_bytes().to_vec())));
        assert_eq!(read_frame(&mut reader).expect("read"), None);
        assert!(Request::read(&b"{\"cwd\":1}\n"[..]).is_err());
        let huge = [EXIT, 0xff, 0xff, 0xff, 0xff];
        assert!(read_frame(&huge[..]).is_err());
    }
}
