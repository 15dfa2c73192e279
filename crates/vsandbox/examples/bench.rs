//! The virtual sandbox's figures for `cargo xtask bench` (run in release mode by it), for
//! each store (`memory`, `redb`: a store file in a temporary directory): simple commands
//! per second through `Sandbox::execute`, and snapshot + restore of a tree at the node
//! limit (10,000 nodes). Prints `STORE.name value` lines for xtask to read; the
//! arguments name the stores to measure (default: both).

use std::time::{Duration, Instant};

use vsandbox::{Config, MemoryStore, RedbStore, Sandbox, Store};

const COMMANDS: &[&str] = &["echo hello", "pwd", "cd /d", "cat /d/f", "ls /d", "echo x > /d/g", "cd /"];
const SNAPSHOT_RUNS: usize = 21;

fn main() {
    let mut stores: Vec<String> = std::env::args().skip(1).collect();
    if stores.is_empty() {
        stores = vec![String::from("memory"), String::from("redb")];
    }
    let scratch = std::env::temp_dir().join(format!("vsandbox-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    for name in stores {
        // The persistent store commits (durably) after every command line that changed
        // something, so it gets fewer runs.
        let (runs, snapshot_runs) = if name == "memory" { (210_000, SNAPSHOT_RUNS) } else { (7_000, 5) };
        let mut serial = 0;
        let mut store = || -> Box<dyn Store> {
            serial += 1;
            match name.as_str() {
                "memory" => Box::new(MemoryStore::new()),
                "redb" => Box::new(RedbStore::open(&scratch.join(format!("store{serial}.redb"))).expect("a store")),
                other => panic!("unknown store {other:?} (memory or redb)"),
            }
        };
        let (per_second, nodes, round_trip, json_round_trip) = measure(&mut store, runs, snapshot_runs);
        println!("{name}.commands_per_second {per_second:.0}");
        println!("{name}.snapshot_nodes {nodes}");
        println!("{name}.snapshot_restore_ms {round_trip:.3}");
        println!("{name}.snapshot_json_restore_ms {json_round_trip:.3}");
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

fn measure(store: &mut dyn FnMut() -> Box<dyn Store>, runs: usize, snapshot_runs: usize) -> (f64, u64, f64, f64) {
    let mut sandbox = Sandbox::open(Config::default(), store()).expect("default config");
    sandbox.execute("mkdir /d && echo content > /d/f");
    // Warm up, then time one long run of the rotating simple commands.
    for command in COMMANDS.iter().cycle().take(runs / 20) {
        sandbox.execute(command);
    }
    let start = Instant::now();
    for command in COMMANDS.iter().cycle().take(runs) {
        let result = sandbox.execute(command);
        assert!(result.success, "{command}: {}", result.stderr);
    }
    let per_second = runs as f64 / start.elapsed().as_secs_f64();
    drop(sandbox);

    // 100 directories of 99 files: exactly the default limit of 10,000 nodes.
    let mut sandbox = Sandbox::open(Config::default(), store()).expect("default config");
    let mut tree = Sandbox::new(Config::default()).expect("default config");
    for dir in 0..100 {
        for file in 0..99 {
            tree.write_file(&format!("/d{dir:03}/f{file:02}.txt"), format!("file {dir}/{file}\n").as_bytes())
                .expect("within the limits");
        }
    }
    sandbox.restore_snapshot(&tree.create_snapshot().expect("snapshot")).expect("restore");
    let nodes = sandbox.stats().node_count;
    assert_eq!(nodes, 10_000);
    let mut round_trips = Vec::new();
    let mut json_round_trips = Vec::new();
    for _ in 0..snapshot_runs {
        let start = Instant::now();
        let snapshot = sandbox.create_snapshot().expect("snapshot");
        sandbox.restore_snapshot(&snapshot).expect("restore");
        round_trips.push(start.elapsed());
        let start = Instant::now();
        let json = snapshot.to_json();
        let parsed = vsandbox::Snapshot::from_json(&json).expect("parse");
        sandbox.restore_snapshot(&parsed).expect("restore");
        json_round_trips.push(start.elapsed());
    }
    (per_second, nodes, median_ms(round_trips), median_ms(json_round_trips))
}

fn median_ms(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}
