//! The snapshot: the complete state of a sandbox (every file and directory, the working
//! directory, the environment) and when it was taken, with its JSON file format
//! (version 1, documented in README):
//!
//! ```json
//! {"format": "agent-sandbox-vsandbox-snapshot", "version": 1,
//!  "timestamp": "2026-05-01T12:00:00.000Z", "cwd": "/", "env": {"HOME": "/"},
//!  "nodes": [{"path": "/src", "type": "dir"},
//!            {"path": "/src/a.txt", "type": "file", "text": "hello\n"},
//!            {"path": "/src/b.bin", "type": "file", "base64": "AAEC"}]}
//! ```
//!
//! Files whose bytes are UTF-8 are stored as `text`, others as `base64` (standard
//! alphabet, padded), so the bytes round-trip exactly either way. Nodes are listed
//! parents first, names sorted bytewise.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::fs::Entry;

/// The format name in every snapshot file.
pub const FORMAT: &str = "agent-sandbox-vsandbox-snapshot";
/// The snapshot format version this crate writes and reads.
pub const VERSION: u32 = 1;

/// A sandbox's complete state at `timestamp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// UTC, RFC 3339 with milliseconds: `2026-05-01T12:00:00.000Z`.
    pub timestamp: String,
    pub cwd: String,
    pub env: BTreeMap<String, String>,
    pub nodes: Vec<Entry>,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("not a snapshot: {0}")]
    Json(#[from] serde_json::Error),
    #[error("not a vsandbox snapshot (format {0:?}, expected {FORMAT:?})")]
    Format(String),
    #[error("snapshot version {0} is not supported (this agent-sandbox reads version {VERSION}; upgrade it)")]
    Version(u32),
    #[error("node {path}: invalid base64 content")]
    Base64 { path: String },
    #[error("node {path}: a file needs exactly one of \"text\" and \"base64\"")]
    Content { path: String },
}

impl Snapshot {
    pub fn to_json(&self) -> String {
        let file = SnapshotFile {
            format: FORMAT.to_owned(),
            version: VERSION,
            timestamp: self.timestamp.clone(),
            cwd: self.cwd.clone(),
            env: self.env.clone(),
            nodes: self
                .nodes
                .iter()
                .map(|entry| match entry {
                    Entry::Dir(path) => NodeRecord { path: path.clone(), kind: Kind::Dir, text: None, base64: None },
                    Entry::File(path, data) => match std::str::from_utf8(data) {
                        Ok(text) => NodeRecord {
                            path: path.clone(),
                            kind: Kind::File,
                            text: Some(text.to_owned()),
                            base64: None,
                        },
                        Err(_) => NodeRecord {
                            path: path.clone(),
                            kind: Kind::File,
                            text: None,
                            base64: Some(base64_encode(data)),
                        },
                    },
                })
                .collect(),
        };
        serde_json::to_string(&file).expect("a snapshot of strings and maps always serializes")
    }

    /// Reads a snapshot file; its paths and limits are checked when it is restored.
    pub fn from_json(text: &str) -> Result<Snapshot, SnapshotError> {
        // The version is checked before the rest, so that a newer file gets the version
        // message rather than a complaint about a field this version does not know.
        let header: Header = serde_json::from_str(text)?;
        if header.format != FORMAT {
            return Err(SnapshotError::Format(header.format));
        }
        if header.version != VERSION {
            return Err(SnapshotError::Version(header.version));
        }
        let file: SnapshotFile = serde_json::from_str(text)?;
        let mut nodes = Vec::with_capacity(file.nodes.len());
        for node in file.nodes {
            nodes.push(match (node.kind, node.text, node.base64) {
                (Kind::Dir, None, None) => Entry::Dir(node.path),
                (Kind::File, Some(text), None) => Entry::File(node.path, text.into_bytes()),
                (Kind::File, None, Some(encoded)) => match base64_decode(&encoded) {
                    Some(data) => Entry::File(node.path, data),
                    None => return Err(SnapshotError::Base64 { path: node.path }),
                },
                _ => return Err(SnapshotError::Content { path: node.path }),
            });
        }
        Ok(Snapshot { timestamp: file.timestamp, cwd: file.cwd, env: file.env, nodes })
    }
}

#[derive(Deserialize)]
struct Header {
    format: String,
    version: u32,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotFile {
    format: String,
    version: u32,
    timestamp: String,
    cwd: String,
    env: BTreeMap<String, String>,
    nodes: Vec<NodeRecord>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeRecord {
    path: String,
    #[serde(rename = "type")]
    kind: Kind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base64: Option<String>,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Dir,
    File,
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let bytes = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let group = u32::from(bytes[0]) << 16 | u32::from(bytes[1]) << 8 | u32::from(bytes[2]);
        for idx in 0..4 {
            if idx <= chunk.len() {
                out.push(char::from(ALPHABET[(group >> (18 - 6 * idx) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes standard padded base64; `None` for anything else.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (idx, chunk) in bytes.chunks(4).enumerate() {
        let last = idx == bytes.len() / 4 - 1;
        let padding = chunk.iter().rev().take_while(|&&b| b == b'=').count();
        if padding > 2 || (padding > 0 && !last) {
            return None;
        }
        let mut group = 0u32;
        for &byte in &chunk[..4 - padding] {
            let value = ALPHABET.iter().position(|&c| c == byte)? as u32;
            group = group << 6 | value;
        }
        group <<= 6 * padding as u32;
        let decoded = [(group >> 16) as u8, (group >> 8) as u8, group as u8];
        // Non-canonical encodings (stray bits in the padding) are refused, so that
        // decoding and encoding again gives back the same text.
        if (padding == 1 && decoded[2] != 0) || (padding == 2 && (decoded[1] != 0 || decoded[2] != 0)) {
            return None;
        }
        out.extend_from_slice(&decoded[..3 - padding]);
    }
    Some(out)
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn now_timestamp() -> String {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    format_timestamp(since.as_secs(), since.subsec_millis())
}

fn format_timestamp(secs: u64, millis: u32) -> String {
    util::format_utc(secs, Some(millis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_and_refuses_garbage() {
        for (data, text) in
            [(&b""[..], ""), (b"f", "Zg=="), (b"fo", "Zm8="), (b"foo", "Zm9v"), (b"\x00\xff\xfe", "AP/+")]
        {
            assert_eq!(base64_encode(data), text);
            assert_eq!(base64_decode(text).as_deref(), Some(data));
        }
        for bad in ["Zg=", "Zh==", "Z===", "Zg==Zg==", "Zm9*", "Zm9v\n"] {
            assert_eq!(base64_decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn timestamps_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(format_timestamp(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_timestamp(951_782_400, 7), "2000-02-29T00:00:00.007Z");
    }
}
