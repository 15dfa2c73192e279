//! Snapshots: restore gives back exactly the snapshot's state after any sequence of
//! commands (property test, on each store, and from one store into the other), the JSON
//! form round-trips exactly (binary files included), and malformed or newer files are
//! refused with a clear message.

use proptest::prelude::*;
use vsandbox::{fs::Entry, Config, Sandbox, Snapshot};

use crate::support::{open, BACKENDS};

/// Commands over a few paths, so that sequences collide (overwrite, remove, move into).
fn command() -> impl Strategy<Value = String> {
    let path = prop::sample::select(vec!["a", "b", "d", "d/a", "d/e", "d/e/f", "/a", "../b", "."]);
    let text = prop::sample::select(vec!["x", "hello world", "", "ü-ñ", "'quoted'"]);
    let name = prop::sample::select(vec!["A", "B", "PATH"]);
    prop_oneof![
        (path.clone(), text.clone()).prop_map(|(p, t)| format!("echo \"{t}\" > {p}")),
        (path.clone(), text.clone()).prop_map(|(p, t)| format!("echo \"{t}\" >> {p}")),
        path.clone().prop_map(|p| format!("mkdir -p {p}")),
        path.clone().prop_map(|p| format!("touch {p}")),
        path.clone().prop_map(|p| format!("rm -rf {p}")),
        path.clone().prop_map(|p| format!("cd {p}")),
        (path.clone(), path.clone()).prop_map(|(a, b)| format!("cp -r {a} {b}")),
        (path.clone(), path.clone()).prop_map(|(a, b)| format!("mv {a} {b}")),
        (name, text).prop_map(|(n, t)| format!("export {n}=\"{t}\"")),
        Just(String::from("cd /")),
    ]
}

/// Some writes go through `write_file` with arbitrary bytes (not UTF-8 either).
fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => command().prop_map(Step::Command),
        1 => (prop::sample::select(vec!["/bin1", "/d/bin2", "b"]), prop::collection::vec(any::<u8>(), 0..64))
            .prop_map(|(p, bytes)| Step::Bytes(p.to_owned(), bytes)),
    ]
}

#[derive(Debug, Clone)]
enum Step {
    Command(String),
    Bytes(String, Vec<u8>),
}

fn apply(sandbox: &mut Sandbox, steps: &[Step]) {
    for step in steps {
        match step {
            Step::Command(command) => {
                sandbox.execute(command);
            }
            Step::Bytes(path, bytes) => {
                let _ = sandbox.write_file(path, bytes);
            }
        }
    }
}

/// The state without the moment it was taken.
fn state(sandbox: &Sandbox, like: &Snapshot) -> Snapshot {
    Snapshot { timestamp: like.timestamp.clone(), ..sandbox.create_snapshot().expect("snapshot") }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn restore_gives_back_exactly_the_snapshot_state(
        before in prop::collection::vec(step(), 0..24),
        after in prop::collection::vec(step(), 0..24),
        backend in prop::sample::select(BACKENDS.to_vec()),
        other_backend in prop::sample::select(BACKENDS.to_vec()),
    ) {
        let mut sandbox = open(backend, Config::default());
        apply(&mut sandbox, &before);
        let snapshot = sandbox.create_snapshot().expect("snapshot");
        let json = snapshot.to_json();
        prop_assert_eq!(&Snapshot::from_json(&json).expect("parses"), &snapshot);
        apply(&mut sandbox, &after);
        sandbox.restore_snapshot(&snapshot).expect("restore");
        prop_assert_eq!(state(&sandbox, &snapshot), snapshot.clone());
        // And through the JSON file, into a fresh sandbox on either store.
        let mut other = open(other_backend, Config::default());
        apply(&mut other, &after);
        other.restore_snapshot(&Snapshot::from_json(&json).expect("parses")).expect("restore");
        prop_assert_eq!(state(&other, &snapshot).to_json(), json);
    }
}

#[test]
fn the_json_form_is_documented_field_by_field() {
    let mut sandbox = Sandbox::new(Config::default()).expect("config");
    sandbox.execute("mkdir -p /src/empty && echo hello > /src/a.txt && cd /src && export GREETING='hi there'");
    sandbox.write_file("/src/b.bin", &[0, 1, 2, 0xff]).expect("write");
    let snapshot = sandbox.create_snapshot().expect("snapshot");
    let json: serde_json::Value = serde_json::from_str(&snapshot.to_json()).expect("json");
    let timestamp = json["timestamp"].as_str().expect("a timestamp");
    assert!(timestamp.len() == 24 && timestamp.ends_with('Z') && timestamp.as_bytes()[10] == b'T', "{timestamp}");
    let expected = serde_json::json!({
        "format": "agent-sandbox-vsandbox-snapshot",
        "version": 1,
        "timestamp": timestamp,
        "cwd": "/src",
        "env": {"GREETING": "hi there", "HOME": "/", "PATH": "/bin:/usr/bin", "PWD": "/src"},
        "nodes": [
            {"path": "/src", "type": "dir"},
            {"path": "/src/a.txt", "type": "file", "text": "hello\n"},
            {"path": "/src/b.bin", "type": "file", "base64": "AAEC/w=="},
            {"path": "/src/empty", "type": "dir"},
        ],
    });
    assert_eq!(json, expected);
    assert_eq!(
        snapshot.nodes[2],
        Entry::File(String::from("/src/b.bin"), vec![0, 1, 2, 0xff]),
        "bytes that are not UTF-8 survive"
    );
}

#[test]
fn malformed_and_newer_snapshots_are_refused() {
    let valid = Sandbox::new(Config::default()).expect("config").create_snapshot().expect("snapshot").to_json();
    let newer = valid.replace("\"version\":1", "\"version\":2");
    let cases = [
        (String::from("{"), "not a snapshot"),
        (valid.replace("agent-sandbox-vsandbox-snapshot", "other"), "not a vsandbox snapshot"),
        (newer, "snapshot version 2 is not supported (this agent-sandbox reads version 1; upgrade it)"),
        (valid.replace("\"nodes\":[]", "\"nodes\":[],\"extra\":1"), "unknown field"),
        (valid.replace("\"nodes\":[]", "\"nodes\":[{\"path\":\"/f\",\"type\":\"file\"}]"), "exactly one of"),
        (
            valid.replace("\"nodes\":[]", "\"nodes\":[{\"path\":\"/f\",\"type\":\"file\",\"base64\":\"!!\"}]"),
            "invalid base64",
        ),
    ];
    for (text, message) in cases {
        let err = Snapshot::from_json(&text).expect_err(&text);
        assert!(err.to_string().contains(message), "{text}: {err}");
    }
    let mut sandbox = Sandbox::new(Config::default()).expect("config");
    for (nodes, message) in [
        ("[{\"path\":\"relative\",\"type\":\"dir\"}]", "must be absolute and normalized"),
        ("[{\"path\":\"/a/../b\",\"type\":\"dir\"}]", "must be absolute and normalized"),
        (
            "[{\"path\":\"/f\",\"type\":\"file\",\"text\":\"\"},{\"path\":\"/f\",\"type\":\"file\",\"text\":\"\"}]",
            "File exists",
        ),
        ("[{\"path\":\"/f\",\"type\":\"file\",\"text\":\"\"},{\"path\":\"/f/g\",\"type\":\"dir\"}]", "Not a directory"),
    ] {
        let snapshot =
            Snapshot::from_json(&valid.replace("\"nodes\":[]", &format!("\"nodes\":{nodes}"))).expect("parses");
        let err = sandbox.restore_snapshot(&snapshot).expect_err(nodes);
        assert!(err.to_string().contains(message), "{nodes}: {err}");
    }
    let bad_cwd = Snapshot::from_json(&valid.replace("\"cwd\":\"/\"", "\"cwd\":\"x\"")).expect("parses");
    assert!(sandbox.restore_snapshot(&bad_cwd).is_err());
}
