//! `agent-sandbox vsh` end to end: the interactive shell fed through stdin, the
//! `--json` line protocol, a snapshot file carried across two sessions, and a host
//! project imported, changed and exported. No bwrap needed: nothing runs on the host.

use std::{
    io::Write,
    path::Path,
    process::{Command, Output, Stdio},
};

use crate::support::BIN;

fn vsh(dir: &Path, args: &[&str], input: &str) -> Output {
    let mut child = Command::new(&*BIN)
        .arg("vsh")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agent-sandbox runs");
    if let Err(err) = child.stdin.take().expect("stdin").write_all(input.as_bytes()) {
        // vsh may refuse before the session and exit without reading (a non-empty export target).
        assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {err}");
    }
    child.wait_with_output().expect("wait")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn vsh_runs_commands_and_carries_a_snapshot_across_sessions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = vsh(dir.path(), &["--snapshot", "state.json"], "mkdir /w\ncd /w\necho hi > f\nexport K=v\ncat f\nnope\n");
    assert_eq!(text(&out.stdout), "hi\n");
    assert_eq!(out.status.code(), Some(127), "the last command's status");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("nope: command not found") && stderr.contains("saved the sandbox to state.json"),
        "{stderr}"
    );
    // The second session starts where the first ended: files, working directory, variables.
    let out = vsh(dir.path(), &["--snapshot", "state.json"], "pwd; cat f; echo $K\nexit 3\necho never\n");
    assert_eq!(text(&out.stdout), "/w\nhi\nv\n");
    assert_eq!(out.status.code(), Some(3));
    // A broken snapshot file stops the start and is left alone.
    std::fs::write(dir.path().join("state.json"), "{\"format\": \"agent-sandbox-vsandbox-snapshot\", \"version\": 9}")
        .expect("write");
    let out = vsh(dir.path(), &["--snapshot", "state.json"], "");
    assert_eq!(out.status.code(), Some(125));
    assert!(text(&out.stderr).contains("snapshot version 9 is not supported"), "{}", text(&out.stderr));
}

#[test]
fn vsh_json_mode_answers_one_result_per_request_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = "{\"command\": \"echo 'a b' > /f && cat /f\"}\n\nnot json\n{\"command\": \"cat /missing\"}\n";
    let out = vsh(dir.path(), &["--json"], input);
    assert_eq!(out.status.code(), Some(0));
    let results: Vec<serde_json::Value> =
        text(&out.stdout).lines().map(|line| serde_json::from_str(line).expect("one JSON object per line")).collect();
    assert_eq!(results.len(), 3);
    let summary: Vec<(&str, &str, i64, bool)> = results
        .iter()
        .map(|r| {
            (
                r["command"].as_str().expect("command"),
                r["stdout"].as_str().expect("stdout"),
                r["exit_code"].as_i64().expect("exit_code"),
                r["success"].as_bool().expect("success"),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [("echo 'a b' > /f && cat /f", "a b\n", 0, true), ("not json", "", 1, false), ("cat /missing", "", 1, false),]
    );
    assert!(results[1]["stderr"].as_str().expect("stderr").contains("send one JSON object per line"));
    assert!(results[0]["duration_ms"].as_f64().is_some());
    assert_eq!(text(&out.stderr), "", "--json keeps stderr quiet");
}

#[test]
fn vsh_imports_a_host_project_and_exports_the_changed_copy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join("src")).expect("mkdir");
    std::fs::write(project.join("src/lib.rs"), "old\n").expect("write");
    let import = format!("{}:/work", project.display());
    let export = format!("{}:/work", dir.path().join("out").display());
    let out = vsh(
        dir.path(),
        &["--import", &import, "--export", &export],
        "cd /work && cat src/lib.rs && echo new > src/lib.rs && touch added\n",
    );
    assert_eq!((text(&out.stdout).as_str(), out.status.code()), ("old\n", Some(0)), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(project.join("src/lib.rs")).expect("read"),
        "old\n",
        "the host copy is untouched"
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("out/src/lib.rs")).expect("read"), "new\n");
    assert!(dir.path().join("out/added").is_file());
    // A second export into the now non-empty directory is refused before the session.
    let out = vsh(dir.path(), &["--export", &export], "echo never\n");
    assert_eq!(out.status.code(), Some(125));
    assert!(text(&out.stderr).contains("exists and is not empty"), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
}
