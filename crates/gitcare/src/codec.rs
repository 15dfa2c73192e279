//! Paths in the saved baseline: JSON strings, with every byte that is not part of valid
//! UTF-8 (and `%` itself) written `%XX`, so that any path round-trips exactly. File
//! contents are written the same way ([`bytes`]): a hooks directory's sample scripts as
//! arrays of numbers made the baseline ~100 KB, and its writing and reading a
//! millisecond of every start and exit.

use std::{
    collections::{BTreeMap, BTreeSet},
    ffi::OsStr,
    os::unix::ffi::{OsStrExt, OsStringExt},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub fn encode(path: &Path) -> String {
    let mut out = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        out.push_str(&chunk.valid().replace('%', "%25"));
        for byte in chunk.invalid() {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

pub fn decode(text: &str) -> Option<PathBuf> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = std::str::from_utf8(bytes.get(index + 1..index + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    Some(PathBuf::from(OsStr::from_bytes(&out)))
}

fn invalid<E: serde::de::Error>(text: &str) -> E {
    E::custom(format!("not an encoded path: {text}"))
}

pub mod path {
    use super::*;

    pub fn serialize<S: Serializer>(path: &Path, serializer: S) -> Result<S::Ok, S::Error> {
        encode(path).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<PathBuf, D::Error> {
        let text = String::deserialize(deserializer)?;
        decode(&text).ok_or_else(|| invalid(&text))
    }
}

pub mod bytes {
    use super::*;

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        encode(Path::new(OsStr::from_bytes(bytes))).serialize(serializer)
    }

    /// Also reads the array of numbers older versions wrote, so that the baseline of a
    /// session that ended without its exit check is still checked after an upgrade.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Text(String),
            Numbers(Vec<u8>),
        }
        match Form::deserialize(deserializer)? {
            Form::Text(text) => {
                decode(&text).map(|path| path.into_os_string().into_vec()).ok_or_else(|| invalid(&text))
            }
            Form::Numbers(bytes) => Ok(bytes),
        }
    }
}

pub mod set {
    use super::*;

    pub fn serialize<S: Serializer>(set: &BTreeSet<PathBuf>, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(set.iter().map(|path| encode(path)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<BTreeSet<PathBuf>, D::Error> {
        Vec::<String>::deserialize(deserializer)?.iter().map(|text| decode(text).ok_or_else(|| invalid(text))).collect()
    }
}

pub mod map {
    use super::*;

    pub fn serialize<S: Serializer, V: Serialize>(
        map: &BTreeMap<PathBuf, V>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_map(map.iter().map(|(path, value)| (encode(path), value)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>, V: Deserialize<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<PathBuf, V>, D::Error> {
        BTreeMap::<String, V>::deserialize(deserializer)?
            .into_iter()
            .map(|(text, value)| Ok((decode(&text).ok_or_else(|| invalid(&text))?, value)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_round_trips() {
        let raw: &[&[u8]] = &[b"/a/b", b"/100%", b"/x\xff\xfe/y", b"/\"q\"\\\n\t", b"/%25", "/ü".as_bytes()];
        for bytes in raw {
            let path = PathBuf::from(OsStr::from_bytes(bytes));
            assert_eq!(decode(&encode(&path)).as_ref(), Some(&path), "{path:?}");
        }
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Holder(#[serde(with = "bytes")] Vec<u8>);

    #[test]
    fn contents_round_trip_and_the_old_form_is_read() {
        for raw in [&b"#!/bin/sh\n\"%\"\n"[..], b"\xff\x00\x80%25", b""] {
            let text = serde_json::to_string(&Holder(raw.to_vec())).expect("serialize");
            assert!(text.starts_with('"'), "{text}");
            assert_eq!(serde_json::from_str::<Holder>(&text).expect("deserialize").0, raw);
        }
        assert_eq!(serde_json::from_str::<Holder>("[104,105]").expect("old form").0, b"hi");
    }
}
