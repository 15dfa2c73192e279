//! `test` outside a sandbox: the probe in a real sandbox started by the binary's own
//! `exec`, and the judge of what it saw.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};

use crate::{not_applicable, row, Row};

/// A variable that looks secret: the sandbox must not pass it.
const CANARY: &str = "AGENT_SANDBOX_TEST_TOKEN";
/// The file the probe writes into each shared cache.
const CACHE_MARKER: &str = ".agent-sandbox-test";

/// In allowlist mode: a name no allowlist holds (`.invalid` never resolves anywhere), and
/// a raw address (TEST-NET-1, never routed), both asked for from inside.
const OFF_LIST_NAME: &str = "agent-sandbox-test.invalid";
const RAW_ADDRESS: &str = "192.0.2.1";

/// The network row for the configured mode: `on` reaches the host's loopback, `off`
/// does not; `allowlist` does not either, and its proxy must be running and deciding (a
/// `403` for a name off the list and for a raw address, with the reason), the resolver
/// must give the name no address, and the raw address must have no route.
fn judge_network(observed: &Value, network: config::Network) -> Row {
    let reachable = observed["tcpReachable"] == true;
    let loopback =
        format!("a listener on the host's loopback was {}", if reachable { "reachable" } else { "unreachable" });
    match network {
        config::Network::On | config::Network::Off => {
            let on = network == config::Network::On;
            row(
                NETWORK_ROW,
                reachable == on,
                format!("network {}: {loopback} from inside", if on { "on" } else { "off" }),
                "the network namespace does not match the configuration: report this as a bug".into(),
            )
        }
        config::Network::Allowlist => {
            let allowlist = &observed["allowlist"];
            let off_list = &allowlist["offList"];
            let raw = &allowlist["rawAddress"];
            let name = off_list["name"].as_str().unwrap_or(OFF_LIST_NAME);
            let address = raw["address"].as_str().unwrap_or(RAW_ADDRESS);
            let refused = |answer: &Value| answer["status"] == 403 && answer["reason"].is_string();
            let said = |answer: &Value| match answer["status"].as_u64() {
                Some(status) => status.to_string(),
                None => format!("nothing ({})", answer["error"].as_str().unwrap_or("no answer")),
            };
            let resolved: Vec<&str> =
                off_list["resolved"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let mut broken = Vec::new();
            let answered = !off_list["proxy"]["status"].is_null() || !raw["proxy"]["status"].is_null();
            if !answered {
                broken.push(
                    "the proxy did not answer inside: it is not running (nothing leaves the sandbox, allowed names \
                     included): report this as a bug"
                        .to_owned(),
                );
            } else {
                if !refused(&off_list["proxy"]) {
                    broken.push(format!("the proxy answered {} for {name}, not 403", said(&off_list["proxy"])));
                }
                if !refused(&raw["proxy"]) {
                    broken.push(format!("the proxy answered {} for {address}, not 403", said(&raw["proxy"])));
                }
            }
            if !resolved.is_empty() {
                broken.push(format!("{name} resolved to {} inside", resolved.join(", ")));
            }
            if raw["direct"]["connected"] != false {
                broken.push(format!("a direct connection to {address}:443 was not refused"));
            }
            if reachable {
                broken.push("the host's loopback was reachable".to_owned());
            }
            let fix = match broken.is_empty() {
                true => String::new(),
                false if !answered => broken.join("; "),
                false => format!(
                    "{}: check network.allow (agent-sandbox config show), else report this as a bug",
                    broken.join("; ")
                ),
            };
            row(
                NETWORK_ROW,
                broken.is_empty(),
                format!(
                    "network allowlist: {name} (off the list) resolved to {}, the proxy answered {}; raw address \
                     {address}: the proxy answered {}, directly {}; {loopback}",
                    if resolved.is_empty() { "nothing".to_owned() } else { resolved.join(", ") },
                    said(&off_list["proxy"]),
                    said(&raw["proxy"]),
                    match raw["direct"]["connected"].as_bool() {
                        Some(false) => format!("refused ({})", raw["direct"]["error"].as_str().unwrap_or("?")),
                        Some(true) => "connected".to_owned(),
                        None => "not tried".to_owned(),
                    },
                ),
                fix,
            )
        }
    }
}

const NETWORK_ROW: &str = "network as configured";

/// The shared caches' row: the probe wrote into each (`caches`) from inside; `leaked`
/// are those whose host directory received the file.
fn judge_caches(caches: &[PathBuf], leaked: &[String]) -> Row {
    if caches.is_empty() {
        return not_applicable("host caches never written", "no @caches directory exists here");
    }
    row(
        "host caches never written",
        leaked.is_empty(),
        format!(
            "wrote {CACHE_MARKER} into {} from inside, looked for it outside",
            caches.iter().map(|cache| cache.display().to_string()).collect::<Vec<_>>().join(", ")
        ),
        format!(
            "{} received the sandbox's write: an explicit read-write grant of the cache (agent-sandbox config show \
             cites it) replaces its overlay",
            leaked.join(", ")
        ),
    )
}

/// `test` outside a sandbox: `flags` are exec's flags that form the configuration of
/// `inv`, as given, for the child `exec`s. One row per guarantee.
pub fn bubblewrap(inv: &session::Invocation, flags: &[OsString]) -> Result<Vec<Row>> {
    let loaded = session::load(inv)?;
    let exe = std::env::current_exe().context("cannot find the agent-sandbox binary itself")?;
    let masked = masked_by_exec(&exe, flags)?;
    let caches = shared_caches(&loaded)?;
    let home = &loaded.ctx.home;
    let credentials: Vec<PathBuf> = loaded
        .config
        .exclude
        .iter()
        .filter(|item| item.origin.layer == config::LayerKind::Default)
        .filter_map(|item| item.value.strip_prefix("~/").map(|rel| home.join(rel)))
        .filter(|path| path.symlink_metadata().is_ok())
        .collect();
    let ssh_agent = std::env::var_os("SSH_AUTH_SOCK").map(PathBuf::from);
    let sockets: Vec<PathBuf> = [PathBuf::from("/var/run/docker.sock"), PathBuf::from("/run/docker.sock")]
        .into_iter()
        .chain(ssh_agent)
        .filter(|path| path.exists())
        .collect();
    let repo = loaded.ctx.project_root.join(".git").exists().then(|| loaded.ctx.project_root.clone());
    let network = loaded.config.network.value;
    // Host services the sandbox must (abstract socket) or may (TCP, per `network`) reach.
    let tcp = std::net::TcpListener::bind(("127.0.0.1", 0)).context("opening a loopback listener to probe")?;
    let abstract_name = format!("agent-sandbox-test-{}", std::process::id());
    let _abstract = {
        use std::os::linux::net::SocketAddrExt as _;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name)
            .context("naming an abstract socket to probe")?;
        std::os::unix::net::UnixListener::bind_addr(&addr).context("opening an abstract socket to probe")?
    };
    let spec = json!({
        "hidden": credentials,
        "masked": masked,
        "sockets": sockets,
        "abstract": abstract_name,
        "tcp": tcp.local_addr()?.port(),
        "canary": CANARY,
        "git": repo,
        "caches": caches,
        "cacheMarker": CACHE_MARKER,
        "allowlist": (network == config::Network::Allowlist)
            .then(|| json!({ "offList": OFF_LIST_NAME, "rawAddress": RAW_ADDRESS })),
    });
    let observed = run_probe(&exe, flags, &spec)?;
    let git_preset = git_preset(&loaded.config)?;
    let mut rows = judge(&observed, network, git_preset, sandbox::landlock::supported());
    // What the probe wrote into each cache must not be in the host's.
    let leaked: Vec<String> = caches
        .iter()
        .filter(|cache| cache.join(CACHE_MARKER).symlink_metadata().is_ok())
        .map(|cache| cache.display().to_string())
        .collect();
    for cache in &caches {
        let _ = std::fs::remove_file(cache.join(CACHE_MARKER));
    }
    rows.push(judge_caches(&caches, &leaked));
    let path = std::env::var_os("PATH").unwrap_or_default();
    let installed = |agent: &config::agents::Agent| {
        std::env::split_paths(&path).any(|dir| agent.commands.iter().any(|command| dir.join(command).is_file()))
    };
    rows.extend(crate::agents::rows(&loaded.config, &installed).map_err(anyhow::Error::msg)?);
    Ok(rows)
}

/// What exec masks, as it says with --debug (the same decision the real run takes).
fn masked_by_exec(exe: &Path, flags: &[OsString]) -> Result<Vec<String>> {
    let dry = Command::new(exe)
        .arg("exec")
        .args(flags)
        .args(["--dry-run", "--debug", "--", "true"])
        .stdin(Stdio::null())
        .output()
        .context("running agent-sandbox exec --dry-run")?;
    let dry_err = String::from_utf8_lossy(&dry.stderr);
    if !dry.status.success() {
        bail!("exec cannot start with this configuration:\n{}", dry_err.trim_end());
    }
    let masked = dry_err
        .lines()
        .filter_map(|line| {
            line.strip_prefix("agent-sandbox: debug: secret ")?.split_once(" masked (").map(|(path, _)| path.to_owned())
        })
        .collect();
    Ok(masked)
}

/// The shared caches that exist here, however they are mounted (an explicit grant may
/// replace the overlay); a marker left in the host's cache by an earlier, broken run
/// must not count against this one.
fn shared_caches(loaded: &session::Loaded) -> Result<Vec<PathBuf>> {
    let caches: Vec<PathBuf> = policy::presets::expand(&loaded.config.presets)?
        .iter()
        .filter(|(preset, _)| preset.name == "caches")
        .flat_map(|(preset, _)| preset.rw.iter())
        .map(|path| loaded.ctx.home.join(path.path))
        .filter(|path| path.is_dir())
        .collect();
    for cache in &caches {
        let _ = std::fs::remove_file(cache.join(CACHE_MARKER));
    }
    Ok(caches)
}

/// The probe's observations, from a real sandbox `exec` starts with `flags`.
fn run_probe(exe: &Path, flags: &[OsString], spec: &Value) -> Result<Value> {
    let run = Command::new(exe)
        .arg("exec")
        .args(flags)
        .args(["--", "sh", "-c", "exec /run/agent-sandbox/agent-sandbox probe \"$1\"", "sh"])
        .arg(spec.to_string())
        .env(CANARY, "canary-value")
        .stdin(Stdio::null())
        .output()
        .context("running the probe in a sandbox")?;
    let observed = String::from_utf8_lossy(&run.stdout)
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .with_context(|| {
            format!(
                "the probe did not report (exit status {:?}):\n{}",
                run.status.code(),
                String::from_utf8_lossy(&run.stderr).trim_end()
            )
        })?;
    Ok(observed)
}

/// Whether git inside is the guard: the `@git` preset on and `commands.git` its rule.
fn git_preset(config: &config::Config) -> Result<bool> {
    Ok(policy::presets::expand(&config.presets)?.iter().any(|(preset, _)| preset.name == "git")
        && config.commands.get("git").is_some_and(|rule| rule.value == config::CommandRule::Preset("git".into())))
}

/// The observations against the configuration: one row per guarantee.
fn judge(observed: &Value, network: config::Network, git_preset: bool, landlock: bool) -> Vec<Row> {
    let list = |key: &str| observed[key].as_array().cloned().unwrap_or_default();
    let path = |item: &Value| item["path"].as_str().unwrap_or_default().to_owned();
    let mut rows = judge_files(observed);

    rows.push(row(
        "environment filtered",
        observed["canaryPresent"] == false,
        format!("{CANARY} set outside, looked for inside"),
        format!("{CANARY} reached the sandbox: env.allow lets secret-looking variables through"),
    ));

    let sockets: Vec<String> = list("sockets").iter().filter(|item| item["visible"] == true).map(path).collect();
    let abstract_reachable = observed["abstractReachable"] == true;
    rows.push(row(
        "host sockets unreachable",
        sockets.is_empty() && !abstract_reachable,
        "connected to an abstract unix socket opened outside; looked for the Docker and ssh-agent sockets".into(),
        if abstract_reachable {
            "an abstract socket of the host was reachable: needs Landlock (Linux 6.12), or use --network off".into()
        } else {
            format!("{} visible inside: remove the grant that shows it", sockets.join(", "))
        },
    ));

    rows.push(row(
        "terminal injection refused",
        observed["tiocstiErrno"] == libc::EPERM,
        "ioctl(TIOCSTI) inside: refused with EPERM".into(),
        format!("TIOCSTI was not refused (errno {}): the seccomp filter is missing", observed["tiocstiErrno"]),
    ));

    rows.push(judge_network(observed, network));

    rows.push(row(
        "marker present",
        observed["marker"] == true,
        "agent-sandbox check's marker looked for inside".into(),
        "the runtime marker is missing inside: report this as a bug".into(),
    ));

    rows.push(row(
        "seccomp and no_new_privs active",
        observed["seccomp"] == "2" && observed["noNewPrivs"] == "1",
        format!(
            "/proc/self/status inside: Seccomp {}, NoNewPrivs {}",
            observed["seccomp"].as_str().unwrap_or("?"),
            observed["noNewPrivs"].as_str().unwrap_or("?")
        ),
        "the seccomp filter is not loaded: report this as a bug".into(),
    ));

    rows.push(row(
        "Landlock scope active",
        landlock && !abstract_reachable,
        "the kernel's Landlock ABI, and the abstract socket probe above".into(),
        "this kernel has no Landlock scoping (Linux 6.12 or later): abstract sockets and signals are not scoped".into(),
    ));

    rows.extend(judge_git(&observed["git"], git_preset));
    rows
}

/// The files' rows: the home's credentials hidden, the project's secrets masked.
fn judge_files(observed: &Value) -> Vec<Row> {
    let list = |key: &str| observed[key].as_array().cloned().unwrap_or_default();
    let path = |item: &Value| item["path"].as_str().unwrap_or_default().to_owned();
    let mut rows = Vec::new();
    let hidden = list("hidden");
    let seen: Vec<String> = hidden.iter().filter(|item| item["visible"] == true).map(path).collect();
    rows.push(match hidden.is_empty() {
        true => {
            not_applicable("home credentials hidden", "none of the credential paths (~/.ssh, ~/.aws, …) exists here")
        }
        false => row(
            "home credentials hidden",
            seen.is_empty(),
            format!(
                "read {} (those that exist here) from inside",
                hidden.iter().map(path).collect::<Vec<_>>().join(", ")
            ),
            format!(
                "{} readable inside: remove the grant that shows it (agent-sandbox config show cites it)",
                seen.join(", ")
            ),
        ),
    });

    let masked = list("masked");
    let leaks: Vec<String> =
        masked.iter().filter(|item| item["empty"] != true || item["writable"] == true).map(path).collect();
    rows.push(match masked.is_empty() {
        true => not_applicable("project secrets masked", "no file in the project matches secrets.patterns"),
        false => row(
            "project secrets masked",
            leaks.is_empty(),
            format!("read and opened for writing the {} masked file(s) from inside", masked.len()),
            format!("{} readable or writable inside: report this as a bug", leaks.join(", ")),
        ),
    });
    rows
}

/// The repository's rows: its metadata read-only, the guard in front of git, pushes
/// through the host.
fn judge_git(git: &Value, git_preset: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    if git.is_null() {
        rows.push(not_applicable(".git/hooks and .git/config read-only", "the project is not a git repository"));
        rows.push(not_applicable(
            "git guard refuses --no-verify and force pushes",
            "the project is not a git repository",
        ));
        rows.push(not_applicable("pushes leave through the host", "the project is not a git repository"));
    } else {
        let writable = git["configWritable"] == true || git["hooksWritable"] == true;
        rows.push(row(
            ".git/hooks and .git/config read-only",
            !writable,
            "opened .git/config for writing and created a file in .git/hooks, from inside".into(),
            if git_preset {
                "git metadata is writable inside: report this as a bug".into()
            } else {
                "the @git preset is off: remove !@git from filesystem.presets".into()
            },
        ));
        rows.push(row(
            "git guard refuses --no-verify and force pushes",
            git["noVerifyRefused"] == true && git["forcePushRefused"] == true,
            "ran git commit --no-verify and git push --force (both --dry-run) inside".into(),
            "git is not the guard inside: set commands.git to \"@git\" and keep the @git preset".into(),
        ));
        // A push the host refused for another reason reached it: what it said is the fix
        // (a session repository that no longer matches its repository says so there).
        let fix = match git["pushRefusedOtherwise"].as_str() {
            Some(said) => format!("the host's push service answered, but refused for another reason: {said}"),
            None => "git push does not reach the host's push service: set commands.git to \"@git\" and keep the @git \
                     preset"
                .into(),
        };
        rows.push(row(
            "pushes leave through the host",
            git["pushAnsweredByHost"] == true,
            "ran git push --dry-run to a remote that is not configured: the host's push service must refuse it".into(),
            fix,
        ));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;

    /// A push the host refused for another reason reached it: the row's fix is what the
    /// host said (a session that no longer matches its repository), not `commands.git`.
    #[test]
    fn a_push_the_host_refused_otherwise_names_the_hosts_reason() {
        let git = |otherwise: Value| {
            json!({ "configWritable": false, "hooksWritable": false, "noVerifyRefused": true,
                    "forcePushRefused": true, "pushAnsweredByHost": false, "pushRefusedOtherwise": otherwise })
        };
        let fix = |otherwise: Value| {
            let rows = judge_git(&git(otherwise), true);
            let row = rows.into_iter().find(|row| row.guarantee == "pushes leave through the host").expect("the row");
            row.fix.unwrap_or_default()
        };
        let said = "agent-sandbox: push refused: cannot read the session's commits. Instead: `agent-sandbox git \
                    sessions remove home` starts afresh.";
        assert_eq!(
            fix(json!(said)),
            format!("the host's push service answered, but refused for another reason: {said}")
        );
        assert!(fix(Value::Null).contains("set commands.git to \"@git\""));
    }

    /// Allowlist mode: held only when the proxy answers 403 for both, the name has no
    /// address, the raw address no route and the host's loopback is out of reach; each
    /// break says what it saw.
    #[test]
    fn the_allowlist_row_needs_a_running_proxy_that_refuses() {
        let answer = |status: Value, reason: Value| json!({ "status": status, "reason": reason, "error": null });
        let seen = |off: Value, resolved: Value, raw: Value, connected: bool, loopback: bool| {
            json!({
                "tcpReachable": loopback,
                "allowlist": {
                    "offList": { "name": OFF_LIST_NAME, "resolved": resolved, "proxy": off },
                    "rawAddress": { "address": RAW_ADDRESS, "proxy": raw,
                                    "direct": { "connected": connected, "error": "Network is unreachable" } },
                },
            })
        };
        let refused = answer(json!(403), json!("not on the network allowlist"));
        let dead = json!({ "status": null, "error": "Resource temporarily unavailable (os error 11)" });
        let judge = |observed: Value| {
            let row = judge_network(&observed, config::Network::Allowlist);
            (row.status == Status::Held, row.fix.unwrap_or_default())
        };
        let good = judge(seen(refused.clone(), json!([]), refused.clone(), false, false));
        assert_eq!(good, (true, String::new()));
        let cases = [
            (
                seen(dead.clone(), json!([]), dead.clone(), false, false),
                "the proxy did not answer inside: it is not running",
            ),
            (
                seen(answer(json!(200), Value::Null), json!([]), refused.clone(), false, false),
                "the proxy answered 200 for agent-sandbox-test.invalid, not 403",
            ),
            (
                seen(refused.clone(), json!([]), answer(json!(502), Value::Null), false, false),
                "the proxy answered 502 for 192.0.2.1, not 403",
            ),
            (
                seen(refused.clone(), json!(["10.0.0.1"]), refused.clone(), false, false),
                "agent-sandbox-test.invalid resolved to 10.0.0.1 inside",
            ),
            (
                seen(refused.clone(), json!([]), refused.clone(), true, false),
                "a direct connection to 192.0.2.1:443 was not refused",
            ),
            (seen(refused.clone(), json!([]), refused.clone(), false, true), "the host's loopback was reachable"),
        ];
        for (observed, why) in cases {
            let (held, fix) = judge(observed);
            assert!(!held && fix.starts_with(why), "{why}: {fix}");
        }
        // The other modes: the host's loopback alone, labelled with the mode.
        let off = judge_network(&json!({ "tcpReachable": false }), config::Network::Off);
        assert!(off.status == Status::Held && off.probe.starts_with("network off: "), "{}", off.probe);
        let on = judge_network(&json!({ "tcpReachable": false }), config::Network::On);
        assert!(on.status == Status::NotHeld && on.probe.starts_with("network on: "), "{}", on.probe);
    }
}
