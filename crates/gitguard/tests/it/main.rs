//! Integration tests of the git guard: table tests pairing every refused form with the
//! legitimate neighbour that must pass, per topic module, and a differential test
//! against the real git (`real_git`). A case is written as git's arguments plus the
//! environment, configuration and options it runs with; the expected outcome is `run`
//! or the name of the rule that refuses it.

mod agents;
mod alias;
mod commit;
mod config;
mod display;
mod env;
mod fuzz;
mod global;
mod merge_family;
mod parse;
mod plumbing;
mod push;
mod real_git;

use std::collections::BTreeMap;
use std::ffi::OsString;

use gitguard::{judge, GuardOptions, MapConfig, Request, Verdict};

/// One invocation to judge.
#[derive(Clone, Debug)]
pub struct Case {
    pub argv0: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub config: BTreeMap<String, Vec<String>>,
    pub options: GuardOptions,
}

/// `git ARGS` with an empty environment and configuration.
pub fn git(args: &[&str]) -> Case {
    Case {
        argv0: "git".to_owned(),
        args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        env: Vec::new(),
        config: BTreeMap::new(),
        options: GuardOptions::default(),
    }
}

impl Case {
    pub fn argv0(mut self, argv0: &str) -> Case {
        self.argv0 = argv0.to_owned();
        self
    }

    pub fn env(mut self, name: &str, value: &str) -> Case {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Adds one value of a canonical key.
    pub fn config(mut self, key: &str, value: &str) -> Case {
        self.config.entry(key.to_owned()).or_default().push(value.to_owned());
        self
    }

    pub fn allow_branch_deletion(mut self) -> Case {
        self.options.allow_branch_deletion = true;
        self
    }

    /// The global config file the sandbox pinned (see `GuardOptions::global_config`).
    pub fn pinned_global(mut self, path: &str) -> Case {
        self.options.global_config = Some(path.to_owned());
        self
    }

    pub fn allow_plumbing_commits(mut self) -> Case {
        self.options.allow_plumbing_commits = true;
        self
    }

    /// Calls `f` with the request this case describes.
    pub fn with_request<T>(&self, f: impl FnOnce(&Request<'_>) -> T) -> T {
        let args: Vec<OsString> = self.args.iter().map(OsString::from).collect();
        let env: Vec<(OsString, OsString)> =
            self.env.iter().map(|(name, value)| (OsString::from(name), OsString::from(value))).collect();
        let config = MapConfig(self.config.clone());
        let request = Request { argv0: &self.argv0, args: &args, env: &env, config: &config, options: &self.options };
        f(&request)
    }

    pub fn verdict(&self) -> Verdict {
        self.with_request(judge)
    }

    /// `run`, or the rule of the refusal.
    pub fn outcome(&self) -> String {
        match self.verdict() {
            Verdict::Run { .. } => "run".to_owned(),
            Verdict::Refuse(refusal) => refusal.rule.to_owned(),
            Verdict::Unchanged { .. } => "unchanged".to_owned(),
        }
    }

    fn describe(&self) -> String {
        let mut parts: Vec<String> = self.env.iter().map(|(name, value)| format!("{name}={value:?}")).collect();
        parts.push(self.argv0.clone());
        parts.extend(self.args.iter().map(|arg| format!("{arg:?}")));
        let config: Vec<String> = self.config.iter().map(|(key, values)| format!("{key}={values:?}")).collect();
        if !config.is_empty() {
            parts.push(format!("[config {}]", config.join(", ")));
        }
        parts.join(" ")
    }
}

/// Judges every case and fails once, listing every case whose outcome differs.
pub fn check(cases: &[(Case, &str)]) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(case, expected)| {
            let outcome = case.outcome();
            (outcome != *expected)
                .then(|| format!("  {}\n    expected {expected}, got {outcome}: {:?}", case.describe(), case.verdict()))
        })
        .collect();
    assert!(failures.is_empty(), "{} case(s) judged wrongly:\n{}", failures.len(), failures.join("\n"));
}

/// `check` for plain `git ARGS` cases.
pub fn check_args(cases: &[(&[&str], &str)]) {
    let cases: Vec<(Case, &str)> = cases.iter().map(|(args, expected)| (git(args), *expected)).collect();
    check(&cases);
}
