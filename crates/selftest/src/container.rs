//! `test` inside a container sandbox: the spec of what to probe, and the judge of what
//! the probe saw, the firewall's state and the configuration.

use anyhow::Result;
use serde_json::{json, Value};

use crate::{not_applicable, row, Row};

/// The container's push row.
const PUSH_VERIFIED: &str = "pushes checked by root before they leave";

const SUDO_ROW: &str = "no sudo beyond the Feature's rules";

/// `test` inside a container sandbox: the container's guarantees, probed in process by
/// `probe` (`inside::probe::container`) from the spec made here. One row per guarantee.
pub fn container(probe: impl FnOnce(&Value) -> Value) -> Result<Vec<Row>> {
    let config = config::load_for_container()?;
    let mut protected: Vec<String> = devcontainer::ALWAYS_PROTECTED.iter().map(|path| (*path).to_owned()).collect();
    protected.extend(config.protected_paths.iter().map(|path| path.value.clone()));
    let spec = json!({
        "protected": protected,
        "refusalProbe": firewall::PROBE_V4,
        "managed": [
            runtime_layout::CLAUDE_MANAGED_SETTINGS,
            runtime_layout::CODEX_REQUIREMENTS,
            guard_settings::ToolGuardSettings::CONTAINER_PATH,
        ],
    });
    let observed = probe(&spec);
    Ok(judge_container(&observed, &firewall::health(), config.git_verified_push.value))
}

/// The container's observations, the firewall's state and whether `git.verifiedPush` is
/// on: one row per guarantee.
fn judge_container(observed: &Value, firewall: &firewall::Health, verified_push: bool) -> Vec<Row> {
    let mut rows = Vec::new();

    let marker = &observed["marker"];
    rows.push(row(
        "marker present",
        marker["present"] == true && marker["rootOwned"] == true && marker["writable"] == false,
        "/.agent-sandbox looked for, its owner read and opened for writing, from inside".into(),
        format!("the marker is missing, not root's or writable: {REBUILD}"),
    ));

    rows.extend(judge_container_git(&observed["git"], verified_push));

    rows.push(judge_protected(observed));
    rows.push(judge_egress(observed, firewall));

    let sudo = &observed["sudo"];
    // The Feature's rule is NOPASSWD, so its user lists without a password: a listing
    // that fails hides what the user may run (e.g. `%sudo ALL=(ALL:ALL) ALL` alone).
    let mut beyond = match sudo["list"].as_str() {
        Some(listing) => devcontainer::sudo::beyond_feature(listing),
        None => vec!["`sudo -n -l` lists nothing without a password: the Feature's rule is not this user's".into()],
    };
    if sudo["trueRan"] == true {
        beyond.push("`sudo -n true` ran as root".into());
    }
    rows.push(row(
        SUDO_ROW,
        beyond.is_empty(),
        "sudo -n -l listed, and sudo -n true tried, as the agent's user".into(),
        format!(
            "the agent's user can become root ({}): remove the other grants for it (/etc/sudoers.d/, the sudo or \
             admin group) in the image, then rebuild; the Feature allows only its own rules",
            beyond.join("; ")
        ),
    ));

    rows.push(judge_managed(observed));
    rows
}

/// The fix for what the Feature's image should have set up.
const REBUILD: &str = "rebuild the container's image with the agent-sandbox Feature (agent-sandbox devcontainer \
                       init, then Rebuild Container)";

/// The user's git metadata out of the agent's reach: a session repository inside
/// (`hostpush::home`: `.git` a mount of its own, the broker's directory unlistable, the
/// user's objects read-only), or, in a container made before it, `.git/hooks` and
/// `.git/config` read-only.
fn metadata_row(git: &Value) -> Row {
    let session = &git["session"];
    if session.is_null() {
        return row(
            ".git/hooks and .git/config read-only",
            git["configWritable"] == false && git["hooksWritable"] == false,
            "opened .git/config for writing and created a file in .git/hooks, from inside".into(),
            format!("git metadata is writable inside: devcontainer.json lacks the read-only mounts: {REBUILD}"),
        );
    }
    row(
        SESSION_ROW,
        session["gitIsMount"] == true
            && session["homeListable"] == false
            && session["objectsWritable"] == false
            && session["userGitWritable"] == false,
        ".git looked up among the mounts, the broker's directory listed, a file created among your objects and in \
         the read-only view of your .git, from inside"
            .into(),
        format!("the session repository's mounts are not as devcontainer init writes them: {REBUILD}"),
    )
}

/// The metadata row with a session repository.
const SESSION_ROW: &str = "your .git out of reach (a session repository inside)";

/// The repository's rows: the guard in front of git, its metadata read-only, pushes
/// checked by root (with `git.verifiedPush`).
fn judge_container_git(git: &Value, verified_push: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    if git.is_null() {
        rows.push(not_applicable(
            "git guard refuses --no-verify and force pushes",
            "the current directory is in no git repository",
        ));
        rows.push(not_applicable(
            ".git/hooks and .git/config read-only",
            "the current directory is in no git repository",
        ));
        rows.push(not_applicable(PUSH_VERIFIED, "the current directory is in no git repository"));
    } else {
        rows.push(row(
            "git guard refuses --no-verify and force pushes",
            git["noVerifyRefused"] == true && git["forcePushRefused"] == true,
            "ran git commit --no-verify and git push --force (both --dry-run) inside".into(),
            format!("git is not the guard here (the Feature puts it in front of every git): {REBUILD}"),
        ));
        rows.push(metadata_row(git));
        rows.push(match verified_push {
            false => not_applicable(
                PUSH_VERIFIED,
                "git.verifiedPush is off: a push here is the in-container pre-push guard's deterrence and the \
                 server's protection",
            ),
            true => {
                let credentials: Vec<&str> =
                    git["pushCredentials"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                let fix = match git["pushAnsweredByHost"] == true {
                    false => format!("git push does not reach the verifier (its sudo rule is missing): {REBUILD}"),
                    true => format!(
                        "your user holds push credentials, so its own git can push past the checks ({}): start VS \
                         Code without SSH_AUTH_SOCK and set dev.containers.gitCredentialHelperConfigLocation to \
                         \"none\" (or use the Docker sandbox), then rebuild",
                        credentials.join(", ")
                    ),
                };
                row(
                    PUSH_VERIFIED,
                    git["pushAnsweredByHost"] == true && credentials.is_empty(),
                    "ran git push --dry-run to a remote that is not configured (root's verifier must refuse it), and \
                     looked for an ssh agent or credential helper your user could push with"
                        .into(),
                    fix,
                )
            }
        });
    }
    rows
}

/// The protected paths' row: read-only, and their parents pinned.
fn judge_protected(observed: &Value) -> Row {
    let protected = observed["protected"].as_array().cloned().unwrap_or_default();
    let writable: Vec<&str> =
        protected.iter().filter(|item| item["writable"] != false).filter_map(|item| item["path"].as_str()).collect();
    // A parent that can be renamed takes the read-only mount inside it along, and frees
    // the path for a file of the agent's.
    let mut unpinned: Vec<&str> = protected
        .iter()
        .flat_map(|item| item["unpinned"].as_array().into_iter().flatten().filter_map(Value::as_str))
        .collect();
    unpinned.sort();
    unpinned.dedup();
    let mut broken: Vec<String> = writable.iter().map(|path| format!("{path} writable inside")).collect();
    broken.extend(unpinned.iter().map(|dir| format!("{dir} can be renamed with a read-only path inside it")));
    match protected.is_empty() {
        true => not_applicable("protected paths read-only", "none of the protected paths exists here"),
        false => row(
            "protected paths read-only",
            broken.is_empty(),
            format!(
                "wrote to the {} protected path(s) that exist here (.devcontainer, .agent-sandbox, the hooks \
                 directory, checks.protectedPaths, …) and looked for their parents' mounts",
                protected.len()
            ),
            format!(
                "{} (created after init, or made by an earlier init): run agent-sandbox devcontainer init again, then \
                 Rebuild Container",
                broken.join("; ")
            ),
        ),
    }
}

/// The egress row: the firewall applied, and a connection outside the allowlist refused
/// by its reset.
fn judge_egress(observed: &Value, firewall: &firewall::Health) -> Row {
    let refusal = &observed["refusal"];
    // Refused at once by the firewall's reset, or (no route but loopback's: Docker's
    // `none` network) nowhere to go at all.
    let no_route = refusal["errno"] == libc::ENETUNREACH && observed["routes"] == 0;
    let reset = refusal["errno"] == libc::ECONNREFUSED || no_route;
    let outcome = match (&refusal["connected"], refusal["errno"].as_i64()) {
        (Value::Bool(true), _) => "connected".to_owned(),
        (_, Some(errno)) if errno == i64::from(libc::ECONNREFUSED) => "refused by the firewall's reset".to_owned(),
        _ if no_route => "no route (the container has no network but loopback)".to_owned(),
        (_, Some(errno)) => format!("failed with errno {errno}, not the firewall's reset"),
        _ => "timed out, not refused by the firewall".to_owned(),
    };
    let address = refusal["address"].as_str().unwrap_or("?");
    row(
        "egress closed except the allowlist",
        *firewall == firewall::Health::Applied && reset,
        format!(
            "firewall state (as `firewall status` reads it): {}; a connection to {address} (never routed, outside \
             the allowlist): {outcome}",
            firewall.to_json()["state"].as_str().unwrap_or("?")
        ),
        match firewall {
            firewall::Health::Applied => "the firewall's rules are not in force as they were applied: sudo \
                                          agent-sandbox firewall apply (or restart the container)"
                .into(),
            other => other.banner(),
        },
    )
}

/// The tool guard's managed files' row: root's, not writable, running the guard.
fn judge_managed(observed: &Value) -> Row {
    let managed = observed["managed"].as_array().cloned().unwrap_or_default();
    let problems: Vec<String> = managed
        .iter()
        .filter_map(|item| {
            let path = item["path"].as_str().unwrap_or("?");
            let safe =
                |owner: &Value| owner["uid"] == 0 && owner["mode"].as_u64().is_some_and(|mode| mode & 0o022 == 0);
            let why = if item["file"].is_null() {
                "missing"
            } else if !safe(&item["file"]) || item["writable"] != false {
                "not root's, or writable"
            } else if !safe(&item["dir"]) || item["dirWritable"] != false {
                "in a directory that is not root's, or writable (it could be replaced)"
            } else if item["runsGuard"] != true {
                "does not run the tool guard"
            } else {
                return None;
            };
            Some(format!("{path}: {why}"))
        })
        .collect();
    row(
        "tool guard's managed files root-owned",
        !managed.is_empty() && problems.is_empty(),
        format!(
            "owner, mode and contents of {}, and a write to each and its directory, from inside",
            managed.iter().filter_map(|item| item["path"].as_str()).collect::<Vec<_>>().join(", ")
        ),
        format!("{}: {REBUILD}", problems.join("; ")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;

    /// What a correct container shows.
    fn good() -> Value {
        let managed = |path: &str| {
            json!({ "path": path, "file": {"uid": 0, "mode": 0o644}, "dir": {"uid": 0, "mode": 0o755},
                    "writable": false, "dirWritable": false, "runsGuard": true })
        };
        json!({
            "marker": {"present": true, "rootOwned": true, "writable": false},
            "git": {"root": "/w", "configWritable": false, "hooksWritable": false, "noVerifyRefused": true, "forcePushRefused": true, "pushAnsweredByHost": true, "pushCredentials": []},
            "protected": [{"path": "/w/.devcontainer", "writable": false, "unpinned": []}, {"path": "/w/.git/hooks", "writable": false, "unpinned": []}],
            "refusal": {"address": "192.0.2.1:443", "connected": false, "errno": libc::ECONNREFUSED},
            "routes": 2,
            "managed": [managed("/etc/claude-code/managed-settings.json"), managed("/etc/codex/requirements.toml")],
            "sudo": {"list": FEATURE_LISTING, "trueRan": false},
        })
    }

    /// `sudo -n -l` in the Feature's image (sudo 1.9, Debian), for `vscode`.
    const FEATURE_LISTING: &str = "Matching Defaults entries for vscode on c0ffee:\n    env_reset, mail_badpass, \
        secure_path=/usr/local/sbin\\:/usr/local/bin\\:/usr/sbin\\:/usr/bin\\:/sbin\\:/bin, use_pty, env_reset\n\n\
        User vscode may run the following commands on c0ffee:\n    (root) NOPASSWD: /usr/local/bin/agent-sandbox \
        firewall apply, /usr/local/bin/agent-sandbox firewall status, /usr/local/bin/agent-sandbox firewall start, \
        /usr/local/bin/agent-sandbox push-verify\n";

    fn results(observed: &Value, firewall: &firewall::Health) -> Vec<(&'static str, Status)> {
        judge_container(observed, firewall, true).into_iter().map(|row| (row.guarantee, row.status)).collect()
    }

    /// Each broken guarantee fails its own row and no other; a correct container holds
    /// every one.
    #[test]
    fn each_broken_container_guarantee_fails_its_row() {
        let all_held = results(&good(), &firewall::Health::Applied);
        assert_eq!(
            all_held,
            [
                ("marker present", Status::Held),
                ("git guard refuses --no-verify and force pushes", Status::Held),
                (".git/hooks and .git/config read-only", Status::Held),
                (PUSH_VERIFIED, Status::Held),
                ("protected paths read-only", Status::Held),
                ("egress closed except the allowlist", Status::Held),
                (SUDO_ROW, Status::Held),
                ("tool guard's managed files root-owned", Status::Held),
            ]
        );
        type Break = fn(&mut Value);
        let cases: [(&str, Break); 16] = [
            (SUDO_ROW, |o| o["sudo"]["trueRan"] = true.into()),
            (SUDO_ROW, |o| o["sudo"]["list"] = Value::Null),
            (SUDO_ROW, |o| o["sudo"]["list"] = format!("{FEATURE_LISTING}    (root) NOPASSWD: ALL\n").into()),
            ("marker present", |o| o["marker"]["writable"] = true.into()),
            // A container from an earlier init: `.git` is not bound onto itself.
            ("protected paths read-only", |o| o["protected"][1]["unpinned"] = json!(["/w/.git"])),
            (PUSH_VERIFIED, |o| o["git"]["pushAnsweredByHost"] = false.into()),
            // VS Code's forwarded ssh agent: the agent's own git could push past the checks.
            (PUSH_VERIFIED, |o| o["git"]["pushCredentials"] = json!(["/tmp/vscode-ssh-auth-1.sock"])),
            ("git guard refuses --no-verify and force pushes", |o| o["git"]["forcePushRefused"] = false.into()),
            (".git/hooks and .git/config read-only", |o| o["git"]["hooksWritable"] = true.into()),
            ("protected paths read-only", |o| o["protected"][1]["writable"] = true.into()),
            // Rules flushed under a DROP policy: EPERM, not the firewall's reset.
            ("egress closed except the allowlist", |o| o["refusal"]["errno"] = libc::EPERM.into()),
            ("egress closed except the allowlist", |o| o["refusal"] = json!({"connected": false, "errno": null})),
            // No route to it while the container has routes out: not the firewall's doing.
            ("egress closed except the allowlist", |o| o["refusal"]["errno"] = libc::ENETUNREACH.into()),
            ("tool guard's managed files root-owned", |o| o["managed"][1]["file"]["mode"] = 0o666.into()),
            ("tool guard's managed files root-owned", |o| o["managed"][0]["dirWritable"] = true.into()),
            ("tool guard's managed files root-owned", |o| o["managed"][0]["runsGuard"] = false.into()),
        ];
        for (guarantee, break_it) in cases {
            let mut observed = good();
            break_it(&mut observed);
            let got = results(&observed, &firewall::Health::Applied);
            let expected: Vec<(&str, Status)> = all_held
                .iter()
                .map(|(name, _)| (*name, if *name == guarantee { Status::NotHeld } else { Status::Held }))
                .collect();
            assert_eq!(got, expected, "{guarantee}: {observed}");
        }
        for health in [firewall::Health::NotApplied, firewall::Health::Closed("no resolver".into())] {
            let rows = judge_container(&good(), &health, true);
            let row = rows.iter().find(|row| row.guarantee == "egress closed except the allowlist").expect("row");
            assert_eq!((row.status, row.fix.clone()), (Status::NotHeld, Some(health.banner())));
        }
    }

    /// With a session repository the git row is about the user's `.git` being out of
    /// reach; each of its three facts broken fails it alone.
    #[test]
    fn a_session_repository_holds_when_the_users_git_is_out_of_reach() {
        let session = || {
            let mut observed = good();
            observed["git"]["configWritable"] = true.into();
            observed["git"]["hooksWritable"] = true.into();
            observed["git"]["session"] =
                json!({"gitIsMount": true, "homeListable": false, "objectsWritable": false, "userGitWritable": false});
            observed
        };
        let rows = results(&session(), &firewall::Health::Applied);
        assert!(rows.iter().all(|(_, status)| *status == Status::Held), "{rows:?}");
        assert!(rows.iter().any(|(name, _)| *name == SESSION_ROW), "{rows:?}");
        for (key, broken) in
            [("gitIsMount", false), ("homeListable", true), ("objectsWritable", true), ("userGitWritable", true)]
        {
            let mut observed = session();
            observed["git"]["session"][key] = broken.into();
            let not_held: Vec<&str> = results(&observed, &firewall::Health::Applied)
                .into_iter()
                .filter(|(_, status)| *status == Status::NotHeld)
                .map(|(name, _)| name)
                .collect();
            assert_eq!(not_held, [SESSION_ROW], "{key}");
        }
    }

    #[test]
    fn a_container_without_a_network_has_no_egress_to_close() {
        let mut observed = good();
        observed["refusal"]["errno"] = libc::ENETUNREACH.into();
        observed["routes"] = 0.into();
        let rows = judge_container(&observed, &firewall::Health::Applied, true);
        let row = rows.iter().find(|row| row.guarantee == "egress closed except the allowlist").expect("row");
        assert_eq!(row.status, Status::Held, "{}", row.probe);
        assert!(row.probe.ends_with("no route (the container has no network but loopback)"), "{}", row.probe);
    }

    #[test]
    fn outside_a_repository_the_git_rows_do_not_apply() {
        let mut observed = good();
        observed["git"] = Value::Null;
        observed["protected"] = json!([]);
        let got = results(&observed, &firewall::Health::Applied);
        assert_eq!(got[1..5].iter().map(|(_, status)| *status).collect::<Vec<_>>(), [Status::NotApplicable; 4]);
    }

    /// Without `git.verifiedPush` the push row does not apply, whatever the probe saw.
    #[test]
    fn without_verified_pushes_the_push_row_does_not_apply() {
        let mut observed = good();
        observed["git"]["pushAnsweredByHost"] = false.into();
        let rows = judge_container(&observed, &firewall::Health::Applied, false);
        let row = rows.iter().find(|row| row.guarantee == PUSH_VERIFIED).expect("row");
        assert_eq!(row.status, Status::NotApplicable);
        assert!(row.probe.contains("git.verifiedPush is off"), "{}", row.probe);
    }
}
