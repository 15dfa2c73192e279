//! The virtual sandbox's figures for `cargo xtask bench` (run in release mode by it):
//! simple commands per second through `Sandbox::execute`, and snapshot + restore of a
//! tree at the node limit (10,000 nodes). Prints `name value` lines for xtask to read.

use std::time::{Duration, Instant};

use vsandbox::{Config, Sandbox};

const COMMANDS: &[&str] = &["echo hello", "pwd", "cd /d", "cat /d/f", "ls /d", "echo x > /d/g", "cd /"];
const COMMAND_RUNS: usize = 210_000;
const SNAPSHOT_RUNS: usize = 21;

fn main() {
    let mut sandbox = Sandbox::new(Config::default()).expect("default config");
    sandbox.execute("mkdir /d && echo content > /d/f");
    // Warm up, then time one long run of the rotating simple commands.
    for command in COMMANDS.iter().cycle().take(10_000) {
        sandbox.execute(command);
    }
    let start = Instant::now();
    for command in COMMANDS.iter().cycle().take(COMMAND_RUNS) {
        let result = sandbox.execute(command);
        assert!(result.success, "{command}: {}", result.stderr);
    }
    let per_second = COMMAND_RUNS as f64 / start.elapsed().as_secs_f64();
    println!("commands_per_second {per_second:.0}");

    // 100 directories of 99 files: exactly the default limit of 10,000 nodes.
    let mut sandbox = Sandbox::new(Config::default()).expect("default config");
    for dir in 0..100 {
        for file in 0..99 {
            sandbox
                .write_file(&format!("/d{dir:03}/f{file:02}.txt"), format!("file {dir}/{file}\n").as_bytes())
                .expect("within the limits");
        }
    }
    let nodes = sandbox.stats().node_count;
    assert_eq!(nodes, 10_000);
    let mut round_trips = Vec::new();
    let mut json_round_trips = Vec::new();
    for _ in 0..SNAPSHOT_RUNS {
        let start = Instant::now();
        let snapshot = sandbox.create_snapshot();
        sandbox.restore_snapshot(&snapshot).expect("restore");
        round_trips.push(start.elapsed());
        let start = Instant::now();
        let json = snapshot.to_json();
        let parsed = vsandbox::Snapshot::from_json(&json).expect("parse");
        sandbox.restore_snapshot(&parsed).expect("restore");
        json_round_trips.push(start.elapsed());
    }
    println!("snapshot_nodes {nodes}");
    println!("snapshot_restore_ms {:.3}", median_ms(round_trips));
    println!("snapshot_json_restore_ms {:.3}", median_ms(json_round_trips));
}

fn median_ms(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}
