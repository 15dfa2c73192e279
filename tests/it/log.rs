//! `agent-sandbox log`: a real session's refusals (the git guard, a masked file, a
//! dropped variable, a denied command) read back as a table and as JSONL, filtered by
//! session, time and refusal; the rotated files read too; a corrupt line skipped with a
//! warning; `--follow` seeing a later session's lines.

use crate::support::{require_bwrap, Run, World};

/// A session that meets four refusals; returns its run and the id `--debug` printed.
fn refused_session(world: &World) -> (Run, String) {
    world.write("home/proj/.env", "KEY=1\n");
    let run = world
        .cmd()
        .env("GITHUB_TOKEN", "t")
        .args(["exec", "--debug", "--cmd", "python3=false", "--", "sh", "-c"])
        .arg("git commit --no-verify -qm x --allow-empty; python3 -V; cat .env; echo done")
        .run();
    assert_eq!(run.ok(), "done\n", "{}", run.stderr());
    let session = run
        .stderr()
        .lines()
        .find_map(|line| line.strip_prefix("agent-sandbox: debug: session ")?.split(' ').next().map(str::to_owned))
        .unwrap_or_else(|| panic!("no session id in:\n{}", run.stderr()));
    (run, session)
}

/// The table's rows as cells (columns are separated by at least two spaces), with the
/// time checked for its shape and replaced by `T`.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|line| {
            let mut cells: Vec<String> =
                line.split("  ").map(str::trim).filter(|cell| !cell.is_empty()).map(str::to_owned).collect();
            if cells[0] != "TIME" && !cells[0].starts_with('*') {
                assert!(cells[0].len() == 20 && cells[0].ends_with('Z'), "{line}");
                cells[0] = "T".into();
            }
            cells
        })
        .collect()
}

fn strings(rows: &[&[&str]]) -> Vec<Vec<String>> {
    rows.iter().map(|row| row.iter().map(|cell| (*cell).to_owned()).collect()).collect()
}

#[test]
fn a_sessions_refusals_read_back_as_a_table_and_as_json() {
    require_bwrap!();
    let world = World::new();
    let (_, earlier) = refused_session(&world);
    let (_, session) = refused_session(&world);
    assert_ne!(earlier, session);
    let project = world.project.display().to_string();
    let env = format!("{project}/.env");
    let command = "sh -c 'git commit --no-verify -qm x --allow-empty; python3 -V; cat .env; echo done'".to_owned();
    let table = world.cmd().args(["log", "--session", &session]).run().ok();
    assert_eq!(
        rows(&table),
        strings(&[
            &["TIME", "SESSION", "AGENT", "OPERATION", "TARGET", "RESULT", "POLICY", "REASON"],
            &["T", &session, "sh", "session", &project, "allowed", "session-start", &command],
            &["T", &session, "sh", "read", &env, "masked", "sensitive-file-pattern", "matches .env"],
            &["T", &session, "sh", "env", "GITHUB_TOKEN", "blocked", "env-secret-pattern", "matches *_TOKEN"],
            &[
                "T",
                &session,
                "git",
                "exec",
                "git commit --no-verify -qm x --allow-empty",
                "blocked",
                "no-verify*",
                "it skips the repository's pre-commit checks"
            ],
            &["T", &session, "python3", "exec", "python3", "blocked", "command-deny*", "arguments: -V"],
            &["* sent from inside the sandbox (which could have forged it)"],
        ]),
        "{table}"
    );
    // Both sessions, refusals only, the last three; the session id abbreviated.
    let all = world.cmd().args(["log", "--blocked-only"]).run().ok();
    assert_eq!(rows(&all).len(), 1 + 8 + 1, "{all}");
    assert!(!all.contains("session-start"), "{all}");
    let last = world.cmd().args(["log", "--blocked-only", "-n", "3", "--session", &session[..4]]).run().ok();
    let policies: Vec<String> = rows(&last)[1..4].iter().map(|row| row[6].clone()).collect();
    assert_eq!(policies, ["env-secret-pattern", "no-verify*", "command-deny*"], "{last}");

    let json = world.cmd().args(["log", "--json", "--blocked-only", "--session", &session]).run().ok();
    let events: Vec<serde_json::Value> =
        json.lines().map(|line| serde_json::from_str(line).expect("each line is JSON")).collect();
    let fields: Vec<[&str; 5]> = events
        .iter()
        .map(|event| {
            ["agent", "operation", "result", "policy", "source"].map(|key| event[key].as_str().expect("a string"))
        })
        .collect();
    assert_eq!(
        fields,
        [
            ["sh", "read", "masked", "sensitive-file-pattern", "host"],
            ["sh", "env", "blocked", "env-secret-pattern", "host"],
            ["git", "exec", "blocked", "no-verify", "sandbox"],
            ["python3", "exec", "blocked", "command-deny", "sandbox"],
        ]
    );
    assert!(events.iter().all(|event| event["session"] == session.as_str()), "{json}");
    assert_eq!(events[2]["reason"], "it skips the repository's pre-commit checks");
}

#[test]
fn a_sandbox_cannot_put_its_lines_in_another_session_or_escape_sequences_on_the_terminal() {
    require_bwrap!();
    let world = World::new();
    let forged = r#"{"timestamp":"2020-01-01T00:00:00Z","agent":"claude","operation":"exec","target":"\u001b]0;owned\u0007","result":"allowed","policy":"p","source":"host","session":"00000000"}"#;
    let run = world.sh(&["--debug"], &format!("printf '%s\\n' '{forged}' > /run/agent-sandbox/audit"));
    run.ok();
    let table = world.cmd().args(["log", "--session", "00000000"]).run().ok();
    assert_eq!(rows(&table).len(), 1, "{table}");
    let table = world.cmd().arg("log").run().ok();
    assert!(!table.contains('\u{1b}') && table.contains(r"\u{1b}]0;owned\u{7}"), "{table}");
    assert!(table.contains("  p*\n"), "{table}");
}

#[test]
fn rotated_files_are_read_and_a_corrupt_line_is_skipped_with_a_warning() {
    require_bwrap!();
    let world = World::new();
    // A log just under its cap (4 MiB), of an old session, with one corrupt line.
    let old = r#"{"timestamp":"2020-01-01T00:00:00Z","agent":"claude","operation":"exec","target":"npm publish","result":"blocked","policy":"command-deny","source":"sandbox","session":"01d5e551"}"#;
    let count = 4 * 1024 * 1024 / (old.len() + 1) - 1;
    let mut text = format!("{old}\n").repeat(count);
    text.insert_str(old.len() + 1, "{\"timestamp\": \"2020-01-01T00:0\n");
    world.write("xdg-state/agent-sandbox/audit.jsonl", &text);
    let (_, session) = refused_session(&world);
    let rotated = world.path("xdg-state/agent-sandbox/audit.1.jsonl");
    assert_eq!(fs_err::read_to_string(&rotated).expect("rotated").len(), text.len(), "the old file moved whole");
    assert!(!world.audit_log().contains("01d5e551"), "the new file has only the new session");

    let run = world.cmd().args(["log", "--json"]).run();
    let lines = run.ok();
    assert_eq!(lines.lines().filter(|line| line.contains("01d5e551")).count(), count, "all of the rotated file");
    assert_eq!(lines.lines().filter(|line| line.contains(&session)).count(), 5, "and the new one");
    assert!(lines.find("01d5e551") < lines.find(&session), "oldest first");
    assert_eq!(
        run.stderr(),
        format!(
            "agent-sandbox: warning: {}:2: not an audit event (EOF while parsing a string at line 1 column 30) \
             (skipped)\n",
            rotated.display()
        )
    );
    // --since: the old session is years ago.
    let recent = world.cmd().args(["log", "--json", "--since", "1h"]).run().ok();
    assert_eq!(recent.lines().count(), 5, "{recent}");
    let dated = world.cmd().args(["log", "--json", "--since", "2020-01-01", "-n", "2"]).run().ok();
    assert_eq!(dated.lines().count(), 2, "{dated}");
}

#[test]
fn follow_prints_what_later_sessions_write() {
    require_bwrap!();
    let world = World::new();
    refused_session(&world);
    let mut follow = world.cmd();
    follow.args(["log", "--follow", "--json", "--blocked-only"]);
    let mut child = follow.cmd.stdout(std::process::Stdio::piped()).spawn().expect("log starts");
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // The earlier session's four refusals first.
    let mut seen: Vec<String> =
        (0..4).map(|_| rx.recv_timeout(std::time::Duration::from_secs(10)).expect("a line")).collect();
    let (_, session) = refused_session(&world);
    while seen.len() < 8 {
        seen.push(rx.recv_timeout(std::time::Duration::from_secs(10)).expect("a later line"));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen[4..].iter().all(|line| line.contains(&session)), "{seen:#?}");
    assert!(seen[6].contains(r#""policy":"no-verify""#), "{seen:#?}");
}

#[test]
fn log_is_read_outside_the_sandbox_only() {
    require_bwrap!();
    let world = World::new();
    let run = world.sh(&[], "agent-sandbox log; echo code=$?");
    assert_eq!(run.ok(), "code=125\n");
    assert!(run.stderr().contains("run `agent-sandbox log` in your own shell"), "{}", run.stderr());
}

/// `--summary`: one line per session with its counts by operation and result, the
/// refusals named; `--json` gives the same as objects.
#[test]
fn the_summary_counts_each_sessions_entries_by_operation_and_result() {
    require_bwrap!();
    let world = World::new();
    let (_, session) = refused_session(&world);
    world.sh(&[], "true").ok();
    let table = world.cmd().args(["log", "--summary"]).run().ok();
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("SESSION") && lines[0].contains("ENTRIES BY OPERATION"), "{table}");
    let row = lines.iter().find(|line| line.starts_with(&session)).unwrap_or_else(|| panic!("{session}:\n{table}"));
    for count in ["exec 2 (2 blocked)", "read 1 (1 masked)", "env 1 (1 blocked)"] {
        assert!(row.contains(count), "{count} in {row}");
    }
    let json = world.cmd().args(["log", "--summary", "--json", "--session", &session]).run().ok();
    let summaries: Vec<serde_json::Value> =
        json.lines().map(|line| serde_json::from_str(line).expect("JSON")).collect();
    assert_eq!(summaries.len(), 1, "{json}");
    assert_eq!(summaries[0]["session"], session.as_str());
    assert_eq!(summaries[0]["counts"]["read"]["masked"], 1, "{json}");
    assert!(summaries[0]["refusals"].as_u64().expect("a count") >= 4, "{json}");
}
