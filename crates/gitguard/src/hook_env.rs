//! Environment switches with which hook managers skip their own hooks (`HUSKY=0`,
//! `SKIP=lint`, `LEFTHOOK=0`, …). git runs the hook either way, but the hook then does
//! nothing; the guard removes these variables from git's environment and says so. Only
//! switches the tools document are listed, each with its source.

/// When a variable counts as a skip switch.
enum When {
    /// Any non-empty value.
    NonEmpty,
    /// `0` or `false` (the tool's "off" spelling; `1`/`true` mean "on" and are left alone).
    Off,
    /// Any non-empty value other than `0`.
    NotZero,
}

/// `(variable, when, tool)`.
const SWITCHES: &[(&str, When, &str)] = &[
    // husky ≥ 5: `HUSKY=0 git …` disables the hooks (typicode.github.io/husky, "Skipping
    // Git Hooks"); husky 4: `HUSKY_SKIP_HOOKS=1`. HUSKY_SKIP_INSTALL only matters at
    // install time and is left alone.
    ("HUSKY", When::Off, "husky"),
    ("HUSKY_SKIP_HOOKS", When::NonEmpty, "husky 4"),
    // pre-commit (pre-commit.com, "Temporarily disabling hooks"): SKIP=<hook ids>;
    // PRE_COMMIT_ALLOW_NO_CONFIG=1 makes a missing config pass. overcommit (README,
    // "Skipping Hooks"/"Disabling Overcommit"): SKIP=<hooks>, ONLY=<hooks>,
    // OVERCOMMIT_DISABLE=1.
    ("SKIP", When::NonEmpty, "pre-commit/overcommit"),
    ("PRE_COMMIT_ALLOW_NO_CONFIG", When::NonEmpty, "pre-commit"),
    ("ONLY", When::NonEmpty, "overcommit"),
    ("OVERCOMMIT_DISABLE", When::NotZero, "overcommit"),
    // lefthook (lefthook.dev/usage/env): LEFTHOOK=0|false disables it, LEFTHOOK_EXCLUDE
    // skips tags/commands, LEFTHOOK_BIN and LEFTHOOK_CONFIG swap the binary or the config.
    ("LEFTHOOK", When::Off, "lefthook"),
    ("LEFTHOOK_EXCLUDE", When::NonEmpty, "lefthook"),
    ("LEFTHOOK_BIN", When::NonEmpty, "lefthook"),
    ("LEFTHOOK_CONFIG", When::NonEmpty, "lefthook"),
    // simple-git-hooks (README, "Skip git hooks"): SKIP_SIMPLE_GIT_HOOKS=1.
    ("SKIP_SIMPLE_GIT_HOOKS", When::NonEmpty, "simple-git-hooks"),
];

/// The switches present in `env` (first occurrence of each name, as `getenv` sees it):
/// names to remove and one notice per name, except for a name and value in `quiet`
/// (the sandbox's own: removed all the same).
pub(crate) fn skip_switches(env: &[(String, String)], quiet: &[(String, String)]) -> (Vec<String>, Vec<String>) {
    let mut strip = Vec::new();
    let mut notices = Vec::new();
    for (name, when, tool) in SWITCHES {
        let Some((_, value)) = env.iter().find(|(key, _)| key == name) else {
            continue;
        };
        let is_switch = match when {
            When::NonEmpty => !value.is_empty(),
            When::Off => value == "0" || value.eq_ignore_ascii_case("false"),
            When::NotZero => !value.is_empty() && value != "0",
        };
        if is_switch {
            strip.push((*name).to_owned());
            if quiet.iter().any(|(quiet_name, quiet_value)| quiet_name == name && quiet_value == value) {
                continue;
            }
            notices.push(format!(
                "removed {name}={value} from git's environment: it makes {tool} skip the repository's hooks"
            ));
        }
    }
    (strip, notices)
}
