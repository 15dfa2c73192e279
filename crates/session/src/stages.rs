//! `exec`'s stages, one module each, and what each cost: `--debug` prints the times
//! before the command runs, as one `start-up stages:` line that `cargo xtask bench`
//! reads back into its stage table, so a slower start points at its stage.
//!
//! The stages, in order (`lib.rs`'s `exec` runs them): `facts` (home, project,
//! repository, config, approvals), `scan` (policy mounts, the secret scan, the masks),
//! `decide` (environment, wrapped commands, settings copies, the guards' settings),
//! `prepare` (caches, runtime directory, the bwrap plan), `services` (session baseline,
//! push service, proxy), `run` (bwrap and what the session leaves behind, the exit
//! check). Each takes the values the earlier ones returned.

pub(crate) mod decide;
pub(crate) mod facts;
pub(crate) mod prepare;
pub(crate) mod run;
pub(crate) mod scan;
pub(crate) mod services;

use std::time::{Duration, Instant};

/// The line's prefix, the one fact `cargo xtask bench` parses.
pub const PREFIX: &str = "start-up stages:";

pub(crate) struct Stages {
    last: Instant,
    took: Vec<(&'static str, Duration)>,
}

impl Stages {
    pub(crate) fn start() -> Stages {
        Stages { last: Instant::now(), took: Vec::new() }
    }

    /// Ends the stage called `name` (its time is since the stage before ended).
    pub(crate) fn end(&mut self, name: &'static str) {
        let now = Instant::now();
        self.took.push((name, now - self.last));
        self.last = now;
    }

    /// `start-up stages: recover 0.41 ms, facts 2.03 ms, …`.
    pub(crate) fn line(&self) -> String {
        let parts: Vec<String> =
            self.took.iter().map(|(name, took)| format!("{name} {:.2} ms", took.as_secs_f64() * 1000.0)).collect();
        format!("{PREFIX} {}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_each_stage_in_order_with_its_time() {
        let mut stages = Stages::start();
        stages.end("facts");
        std::thread::sleep(Duration::from_millis(2));
        stages.end("scan");
        let line = stages.line();
        let rest = line.strip_prefix("start-up stages: facts ").expect("prefix and first stage");
        let (facts, scan) = rest.split_once(" ms, scan ").expect("both stages");
        let scan: f64 = scan.strip_suffix(" ms").expect("unit").parse().expect("a number");
        assert!(facts.parse::<f64>().is_ok() && scan >= 2.0, "{line}");
    }
}
