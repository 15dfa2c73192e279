//! `agent-sandbox test`: proves on this machine, with the effective configuration, in a
//! real sandbox, the guarantees README claims. It runs `exec` itself (the same flags),
//! first as `--dry-run --debug` to learn which files it masks, then for real with the
//! hidden `probe` inside (`inside::probe`), which looks at the sandbox from the agent's
//! side; here the observations become one row per guarantee: held, not held (with the
//! fix), or not applicable.

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

pub fn test(args: &TestArgs) -> Result<i32> {
    if runtime_layout::detect() != runtime_layout::Where::Outside {
        bail!("`agent-sandbox test` starts sandboxes of its own: run it outside, in your own shell");
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

    let network_on = loaded.config.network.value == config::Network::On;
    let git_preset = policy::presets::expand(&loaded.config.presets)?.iter().any(|(preset, _)| preset.name == "git")
        && loaded
            .config
            .commands
            .get("git")
            .is_some_and(|rule| rule.value == config::CommandRule::Preset("git".into()));
    let rows = judge(&observed, network_on, git_preset, sandbox::landlock::supported());
    print(&rows, args.json)?;
    Ok(if rows.iter().any(|row| row.status == Status::NotHeld) { 1 } else { 0 })
}

/// The observations against the configuration: one row per guarantee.
fn judge(observed: &Value, network_on: bool, git_preset: bool, landlock: bool) -> Vec<Row> {
    let list = |key: &str| observed[key].as_array().cloned().unwrap_or_default();
    let path = |item: &Value| item["path"].as_str().unwrap_or_default().to_owned();
    let row = |guarantee, held: bool, probe: String, fix: String| Row {
        guarantee,
        status: if held { Status::Held } else { Status::NotHeld },
        probe,
        fix: (!held).then_some(fix),
    };
    let not_applicable =
        |guarantee, probe: &str| Row { guarantee, status: Status::NotApplicable, probe: probe.into(), fix: None };
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

    let reachable = observed["tcpReachable"] == true;
    rows.push(row(
        "network as configured",
        reachable == network_on,
        format!(
            "network {}: a listener on the host's loopback was {} from inside",
            if network_on { "on" } else { "off" },
            if reachable { "reachable" } else { "unreachable" }
        ),
        "the network namespace does not match the configuration: report this as a bug".into(),
    ));

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
    }
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
