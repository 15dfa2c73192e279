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
//!
//! The exit check has a line of its own, `exit-check stages:`, printed once it is done:
//! `stop` (the proxy and push service ended), then `gitcare::session::FINISH_PHASES`
//! (`baseline`, `list`: the project listed again, the cached way, `observe`, `apply`,
//! `records`), `claude` (Claude Code's state copied back) and `runtime` (the runtime
//! directory removed).

pub(crate) mod decide;
pub(crate) mod facts;
pub(crate) mod prepare;
pub(crate) mod run;
pub(crate) mod scan;
pub(crate) mod services;

use std::time::{Duration, Instant};

/// The line's prefix, the one fact `cargo xtask bench` parses.
pub const PREFIX: &str = "start-up stages:";

/// The exit check's line's prefix, parsed the same way.
pub const EXIT_PREFIX: &str = "exit-check stages:";

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

    /// Shows `took` of the last stage as a stage of its own, `name`, before it (the
    /// session repository's start inside `services`).
    pub(crate) fn carve(&mut self, name: &'static str, took: Duration) {
        if let Some(last) = self.took.pop() {
            self.took.push((name, took.min(last.1)));
            self.took.push((last.0, last.1.saturating_sub(took)));
        }
    }

    /// `start-up stages: recover 0.41 ms, facts 2.03 ms, …`.
    pub(crate) fn line(&self) -> String {
        self.line_after(PREFIX)
    }

    /// `exit-check stages: stop 0.10 ms, baseline 0.20 ms, list 40.12 ms, …`.
    pub(crate) fn exit_line(&self) -> String {
        self.line_after(EXIT_PREFIX)
    }

    fn line_after(&self, prefix: &str) -> String {
        let parts: Vec<String> =
            self.took.iter().map(|(name, took)| format!("{name} {:.2} ms", took.as_secs_f64() * 1000.0)).collect();
        format!("{prefix} {}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_carved_stage_comes_before_the_one_it_was_part_of() {
        let mut stages = Stages::start();
        stages.took.push(("services", Duration::from_millis(10)));
        stages.carve("session-repo", Duration::from_millis(4));
        assert_eq!(stages.line(), "start-up stages: session-repo 4.00 ms, services 6.00 ms");
    }

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

    #[test]
    fn the_exit_checks_line_has_its_own_prefix() {
        let mut stages = Stages::start();
        stages.end("list");
        let line = stages.exit_line();
        assert!(line.starts_with("exit-check stages: list ") && line.ends_with(" ms"), "{line}");
    }
}
