//! `agent-sandbox test`: proves on this machine, with the effective configuration, in a
//! real sandbox, the guarantees README claims. It runs `exec` itself (the same flags),
//! first as `--dry-run --debug` to learn which files it masks, then for real with the
//! hidden `probe` inside (`inside::probe`), which looks at the sandbox from the agent's
//! side; here the observations become one row per guarantee: held, not held (with the
//! fix), or not applicable.
//!
//! Inside a container sandbox (the Feature's image) there is no sandbox to start: the
//! container is the sandbox, and `test` probes its own guarantees in process
//! (`inside::probe::container`) as the agent's user: the marker, the git guard, the
//! read-only paths as `devcontainer init` mounts them, the firewall (its state as
//! `firewall status` reads it, and a connection the rules must refuse) and the tool
//! guard's managed files.

use std::{
    ffi::OsString,
    io::Write as _,
    path::PathBuf,
    process::{Command, Stdio},
};

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};

use crate::cli::PolicyArgs;

#[derive(clap::Args)]
pub struct TestArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Print JSON instead of the table
    #[arg(long)]
    pub json: bool,
}

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Held,
    NotHeld,
    NotApplicable,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Held => "held",
            Status::NotHeld => "NOT HELD",
            Status::NotApplicable => "not applicable",
        }
    }
}

struct Row {
    guarantee: &'static str,
    status: Status,
    probe: String,
    fix: Option<String>,
}

/// A guarantee probed: held, or not held with `fix`.
fn row(guarantee: &'static str, held: bool, probe: String, fix: String) -> Row {
    Row { guarantee, status: if held { Status::Held } else { Status::NotHeld }, probe, fix: (!held).then_some(fix) }
}

/// A guarantee the setup has nothing to hold (no repository, no secret files).
fn not_applicable(guarantee: &'static str, probe: &str) -> Row {
    Row { guarantee, status: Status::NotApplicable, probe: probe.into(), fix: None }
}

pub fn test(args: &TestArgs) -> Result<i32> {
    match runtime_layout::detect() {
        runtime_layout::Where::Bubblewrap => {
            bail!("`agent-sandbox test` starts sandboxes of its own: run it outside, in your own shell")
        }
        runtime_layout::Where::Container => return container_test(args),
        runtime_layout::Where::Outside => {}
    }
    let inv = crate::exec::invocation(&args.policy);
    let loaded = session::load(&inv)?;
    let exe = std::env::current_exe().context("cannot find the agent-sandbox binary itself")?;
    let flags = policy_flags(&args.policy);

    // What exec masks, as it says with --debug (the same decision the real run takes).
    let dry = Command::new(&exe)
        .arg("exec")
        .args(&flags)
        .args(["--dry-run", "--debug", "--", "true"])
        .stdin(Stdio::null())
        .output()
        .context("running agent-sandbox exec --dry-run")?;
    let dry_err = String::from_utf8_lossy(&dry.stderr);
    if !dry.status.success() {
        bail!("exec cannot start with this configuration:\n{}", dry_err.trim_end());
    }
    let masked: Vec<String> = dry_err
        .lines()
        .filter_map(|line| {
            line.strip_prefix("agent-sandbox: debug: secret ")?.split_once(" masked (").map(|(path, _)| path.to_owned())
        })
        .collect();

    // The shared caches that exist here, however they are mounted (an explicit grant
    // may replace the overlay); a marker left in the host's cache by an earlier, broken
    // run must not count against this one.
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
    let run = Command::new(&exe)
        .arg("exec")
        .args(&flags)
        .args(["--", "sh", "-c", "exec /run/agent-sandbox/agent-sandbox probe \"$1\"", "sh"])
        .arg(spec.to_string())
        .env(CANARY, "canary-value")
        .stdin(Stdio::null())
        .output()
        .context("running the probe in a sandbox")?;
    let observed: Value = String::from_utf8_lossy(&run.stdout)
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

    let git_preset = policy::presets::expand(&loaded.config.presets)?.iter().any(|(preset, _)| preset.name == "git")
        && loaded
            .config
            .commands
            .get("git")
            .is_some_and(|rule| rule.value == config::CommandRule::Preset("git".into()));
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
    print(&rows, args.json)?;
    Ok(if rows.iter().any(|row| row.status == Status::NotHeld) { 1 } else { 0 })
}

/// The observations against the configuration: one row per guarantee.
fn judge(observed: &Value, network: config::Network, git_preset: bool, landlock: bool) -> Vec<Row> {
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

    let git = &observed["git"];
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
        rows.push(row(
            "pushes leave through the host",
            git["pushAnsweredByHost"] == true,
            "ran git push --dry-run to a remote that is not configured: the host's push service must refuse it".into(),
            "git push does not reach the host's push service: set commands.git to \"@git\" and keep the @git preset"
                .into(),
        ));
    }
    rows
}

/// `test` inside a container sandbox: the container's guarantees, probed from here.
/// The container's push row.
const PUSH_VERIFIED: &str = "pushes checked by root before they leave";

const SUDO_ROW: &str = "no sudo beyond the Feature's rules";

fn container_test(args: &TestArgs) -> Result<i32> {
    if !policy_flags(&args.policy).is_empty() || args.policy.read_only {
        bail!(
            "inside a container, `agent-sandbox test` checks the container's own guarantees: exec's flags do not \
             apply here (run it without them)"
        );
    }
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
    let observed = inside::probe::container(&spec);
    let rows = judge_container(&observed, &firewall::health(), config.git_verified_push.value);
    print(&rows, args.json)?;
    Ok(if rows.iter().any(|row| row.status == Status::NotHeld) { 1 } else { 0 })
}

/// The container's observations, the firewall's state and whether `git.verifiedPush` is
/// on: one row per guarantee.
fn judge_container(observed: &Value, firewall: &firewall::Health, verified_push: bool) -> Vec<Row> {
    let rebuild =
        "rebuild the container's image with the agent-sandbox Feature (agent-sandbox devcontainer init, then \
                   Rebuild Container)";
    let mut rows = Vec::new();

    let marker = &observed["marker"];
    rows.push(row(
        "marker present",
        marker["present"] == true && marker["rootOwned"] == true && marker["writable"] == false,
        "/.agent-sandbox looked for, its owner read and opened for writing, from inside".into(),
        format!("the marker is missing, not root's or writable: {rebuild}"),
    ));

    let git = &observed["git"];
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
            format!("git is not the guard here (the Feature puts it in front of every git): {rebuild}"),
        ));
        let session = &git["session"];
        rows.push(if session.is_null() {
            row(
                ".git/hooks and .git/config read-only",
                git["configWritable"] == false && git["hooksWritable"] == false,
                "opened .git/config for writing and created a file in .git/hooks, from inside".into(),
                format!("git metadata is writable inside: devcontainer.json lacks the read-only mounts: {rebuild}"),
            )
        } else {
            row(
                "your .git out of reach (a session repository inside)",
                session["gitIsMount"] == true
                    && session["homeListable"] == false
                    && session["objectsWritable"] == false,
                ".git looked up among the mounts, the broker's directory listed, a file created among your objects, \
                 from inside"
                    .into(),
                format!("the session repository's mounts are not as devcontainer init writes them: {rebuild}"),
            )
        });
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
                    false => format!("git push does not reach the verifier (its sudo rule is missing): {rebuild}"),
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
    rows.push(match protected.is_empty() {
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
    });

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
    rows.push(row(
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
    ));

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
    rows.push(row(
        "tool guard's managed files root-owned",
        !managed.is_empty() && problems.is_empty(),
        format!(
            "owner, mode and contents of {}, and a write to each and its directory, from inside",
            managed.iter().filter_map(|item| item["path"].as_str()).collect::<Vec<_>>().join(", ")
        ),
        format!("{}: {rebuild}", problems.join("; ")),
    ));
    rows
}

fn print(rows: &[Row], as_json: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if as_json {
        let rows: Vec<Value> = rows
            .iter()
            .map(|row| {
                let result = match row.status {
                    Status::Held => "held",
                    Status::NotHeld => "not held",
                    Status::NotApplicable => "not applicable",
                };
                json!({ "guarantee": row.guarantee, "result": result, "probe": row.probe, "fix": row.fix })
            })
            .collect();
        let held = rows.iter().all(|row| row["result"] != "not held");
        writeln!(out, "{}", json!({ "held": held, "rows": rows }))?;
        return Ok(());
    }
    let width = rows.iter().map(|row| row.guarantee.len()).max().unwrap_or(0);
    writeln!(out, "{:<width$}  {:<14}  HOW IT WAS PROBED", "GUARANTEE", "RESULT")?;
    for row in rows {
        writeln!(out, "{:<width$}  {:<14}  {}", row.guarantee, row.status.as_str(), row.probe)?;
        if let Some(fix) = &row.fix {
            writeln!(out, "{:<width$}  {:<14}  fix: {fix}", "", "")?;
        }
    }
    Ok(())
}

/// The flags of `exec` that form the configuration, as given.
fn policy_flags(args: &PolicyArgs) -> Vec<OsString> {
    let mut flags: Vec<OsString> = Vec::new();
    let mut push = |flag: &str, value: &std::ffi::OsStr| {
        flags.push(flag.into());
        flags.push(value.to_owned());
    };
    if let Some(dir) = &args.cwd {
        push("--cwd", dir.as_os_str());
    }
    if let Some(file) = &args.config {
        push("--config", file.as_os_str());
    }
    if let Some(network) = &args.network {
        push("--network", network.as_ref());
    }
    for (flag, values) in [("--ro", &args.ro), ("--rw", &args.rw), ("--exclude", &args.exclude), ("--cmd", &args.cmds)]
    {
        for value in values {
            push(flag, value.as_ref());
        }
    }
    if args.read_only {
        flags.push("--read-only".into());
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

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
        const ROW: &str = "your .git out of reach (a session repository inside)";
        let session = || {
            let mut observed = good();
            observed["git"]["configWritable"] = true.into();
            observed["git"]["hooksWritable"] = true.into();
            observed["git"]["session"] = json!({"gitIsMount": true, "homeListable": false, "objectsWritable": false});
            observed
        };
        let rows = results(&session(), &firewall::Health::Applied);
        assert!(rows.iter().all(|(_, status)| *status == Status::Held), "{rows:?}");
        assert!(rows.iter().any(|(name, _)| *name == ROW), "{rows:?}");
        for (key, broken) in [("gitIsMount", false), ("homeListable", true), ("objectsWritable", true)] {
            let mut observed = session();
            observed["git"]["session"][key] = broken.into();
            let not_held: Vec<&str> = results(&observed, &firewall::Health::Applied)
                .into_iter()
                .filter(|(_, status)| *status == Status::NotHeld)
                .map(|(name, _)| name)
                .collect();
            assert_eq!(not_held, [ROW], "{key}");
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
