//! The record of what the last start of a project masked, by identity (device, inode)
//! and path, in the project's directory of agent-sandbox's state (no sandbox sees it).
//! A rename keeps the identity, so a secret renamed into a dependency tree is still
//! recognised at the next start ([`crate::masks::Earlier`]). Rewritten, atomically, at
//! every start from that start's masks: a deleted or allowed secret drops out. Reading
//! it fails closed: a record that cannot be read exempts nothing.

use std::{
    collections::HashMap,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use crate::masks::{Earlier, Identity, Masked};

/// The record's file in the project's state directory.
const RECORD: &str = "masked.json";

/// More than any project's masks: a bigger file is not ours.
const RECORD_LIMIT: u64 = 64 * 1024 * 1024;

/// The identity of the entry at `path` itself (a symlink's own).
pub fn identity(path: &Path) -> Option<Identity> {
    path.symlink_metadata().ok().map(|meta| (meta.dev(), meta.ino()))
}

/// What earlier sessions masked; none yet when there is no record.
pub fn read(dir: &Path) -> Earlier {
    let path = dir.join(RECORD);
    let bytes = match util::fs::read_regular_nofollow(&path, RECORD_LIMIT) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Earlier::Known(HashMap::new()),
        Err(err) => return Earlier::Unreadable(format!("{}: {err}", path.display())),
    };
    match parse(&bytes) {
        Some(known) => Earlier::Known(known),
        None => Earlier::Unreadable(format!("{}: not a record of masked files", path.display())),
    }
}

/// Records `masked` (with their identities now) as what this start masked.
pub fn write(dir: &Path, masked: &[Masked]) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let entries: Vec<serde_json::Value> = masked
        .iter()
        .filter_map(|masked| {
            let (dev, ino) = identity(&masked.mask.path)?;
            Some(serde_json::json!([dev, ino, masked.mask.path.to_string_lossy()]))
        })
        .collect();
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let text = serde_json::json!({ "masked": entries }).to_string();
    util::fs::atomic_write(&dir.join(RECORD), text.as_bytes(), 0o600)
}

/// `{"masked": [[dev, ino, "path"], …]}`; anything else is `None`.
fn parse(bytes: &[u8]) -> Option<HashMap<Identity, PathBuf>> {
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let mut known = HashMap::new();
    for entry in value.get("masked")?.as_array()? {
        match entry.as_array()?.as_slice() {
            [dev, ino, path] => known.insert((dev.as_u64()?, ino.as_u64()?), PathBuf::from(path.as_str()?)),
            _ => return None,
        };
    }
    Some(known)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_round_trips_and_fails_closed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("sessions/0123");
        assert_eq!(read(&state), Earlier::Known(HashMap::new()), "no record yet: nothing earlier");
        let secret = dir.path().join("server.key");
        std::fs::write(&secret, "k").expect("write");
        let masked = Masked {
            mask: sandbox::plan::Mask { path: secret.clone(), kind: policy::Kind::File },
            found: secret.clone(),
            pattern: "*.key".into(),
            pin: true,
        };
        write(&state, &[masked]).expect("written");
        let id = identity(&secret).expect("an identity");
        assert_eq!(read(&state), Earlier::Known(HashMap::from([(id, secret.clone())])));
        // Renamed, the same identity.
        let renamed = dir.path().join("moved.key");
        std::fs::rename(&secret, &renamed).expect("rename");
        assert_eq!(identity(&renamed), Some(id));
        for broken in ["", "{}", "{\"masked\": [[1, 2]]}", "{\"masked\": [[1, -2, \"x\"]]}", "[]"] {
            std::fs::write(state.join(RECORD), broken).expect("write");
            assert!(matches!(read(&state), Earlier::Unreadable(_)), "{broken:?}");
        }
        std::fs::remove_file(state.join(RECORD)).expect("rm");
        std::os::unix::fs::symlink(dir.path().join("moved.key"), state.join(RECORD)).expect("symlink");
        assert!(matches!(read(&state), Earlier::Unreadable(_)), "a symlink is not the record");
    }
}
