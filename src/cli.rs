//! Command-line parsing (clap) and the mapping of results to exit codes:
//! 0 success, 1 `check` outside a sandbox, 2 usage errors, 125 agent-sandbox itself
//! failed before the command ran; otherwise `exec` passes on the command's own status.

use std::{ffi::OsString, path::PathBuf};

use crate::exec::{ExecArgs, PolicyArgs};

use clap::{Parser, Subcommand};

/// Exit code for errors of agent-sandbox itself (the command did not run).
pub const EXIT_ERROR: i32 = 125;

#[derive(Parser)]
#[command(
    name = "agent-sandbox",
    version,
    about = "Guard rails for AI coding agents: run them under bubblewrap or in Docker, with a layered policy"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    /// Default: `shell` (the Docker sandbox of the current directory), with `shell`'s arguments
    #[command(subcommand)]
    command: Option<Commands>,
    /// `shell`'s arguments, for the default command (`agent-sandbox [PATH] [-c COMMAND]`)
    #[command(flatten)]
    shell: crate::docker::ShellArgs,
}

/// `git-home`'s steps.
#[derive(Subcommand, Debug)]
pub enum GitHomeAction {
    /// Take the user's refs as the session's start; seed a new session volume
    Start,
    /// Bring the session's commits home, through the checks
    Sync,
    /// Make the session repository in DIR from the plan on stdin (as the agent's user)
    Seed { dir: PathBuf },
}

#[derive(Subcommand)]
enum Commands {
    /// Run a command (default: $SHELL) in the sandbox
    Exec(ExecArgs),
    /// Exit 0 inside an agent-sandbox (bubblewrap or container), 1 outside
    Check {
        /// Print nothing, only set the exit status
        #[arg(short, long)]
        quiet: bool,
        /// Print JSON: {"inside", "where", and in a container "firewall"}
        #[arg(long, conflicts_with = "quiet")]
        json: bool,
    },
    /// Inspect the configuration
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Show the audit log: what sessions ran and what was refused (newest last)
    Log(crate::log::LogArgs),
    /// Prove each guarantee in a real sandbox with your effective config (exit 1 when one does not hold)
    Test(crate::selftest::TestArgs),
    /// Install or remove the hook guard in front of a repository's pre-commit and pre-push hooks
    #[command(subcommand)]
    Hooks(HooksCommand),
    /// Your repository and a container's session repository (see the book: Dev containers)
    #[command(subcommand)]
    Git(GitCommand),
    /// The container's egress firewall (run as root through the image's one sudo rule)
    #[command(subcommand)]
    Firewall(FirewallCommand),
    /// Generate the VS Code devcontainer that gives "Reopen in Container" the same guard rails
    #[command(subcommand)]
    Devcontainer(DevcontainerCommand),
    /// Docker sandbox: write .agent-sandbox/ (the per-repo Dockerfile, settings), build the image, create the volumes
    Init(crate::docker::InitArgs),
    /// Docker sandbox: build the per-repo image from .agent-sandbox/Dockerfile
    Build(crate::docker::BuildArgs),
    /// Docker sandbox: build the shared base image agent-sandbox-base:<tag> (its context is built into this binary)
    BuildBase(crate::docker::BuildBaseArgs),
    /// Docker sandbox: create or start the workspace's container (the firewall is applied before it counts as started)
    Start(crate::docker::StartArgs),
    /// Docker sandbox: stop the workspace's container (--all: every sandbox on the engine)
    Stop(crate::docker::StopArgs),
    /// Docker sandbox: stop and start again (the firewall is applied again)
    Restart(crate::docker::StartArgs),
    /// Docker sandbox: a shell in the workspace's container, started if needed (the default command)
    Shell(crate::docker::ShellArgs),
    /// Docker sandbox: print the `docker run` command that creates the workspace's container
    ShowRun(crate::docker::ModeArgs),
    /// Docker sandbox: provision the repo shelf and a branch's worktree (no container start)
    Checkout(crate::docker::CheckoutArgs),
    /// Docker sandbox: every sandbox container (repo, mode, workdir, volumes, state)
    List(crate::docker::ListArgs),
    /// Docker sandbox: the volumes of the workspace's sandboxes (config, history, repo shelf)
    Volume(crate::docker::WorkspaceArg),
    /// Docker sandbox: config.toml (the `high` profile) and AGENTS.md in the shared Codex volume; --auth imports the host's login
    CodexInitConfig(crate::docker::CodexInitArgs),
    /// Docker sandbox: remove auth.json and profile.json from the shared Codex volume
    CodexLogout(crate::docker::CodexVolumeArgs),
    /// An interactive shell over a virtual sandbox (in-memory files; nothing touches the host)
    Vsh(crate::vsh::VshArgs),
    /// Serve a virtual sandbox to an agent as MCP tools on stdio
    Mcp(crate::vsh::McpArgs),
    /// Judge an agent's tool call (Claude Code's or Codex's PreToolUse hook input on stdin) against tools.*
    ToolGuard {
        /// The agent whose hook runs it (the audit log's agent when the input names none)
        #[arg(long, default_value = "claude")]
        agent: String,
    },
    /// Print the shell completion script (e.g. `agent-sandbox completions bash > /etc/bash_completion.d/agent-sandbox`)
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// What `test` runs inside the sandbox: look at it from the agent's side, print JSON
    #[command(hide = true)]
    Probe {
        /// What to probe (JSON, written by `test`)
        spec: String,
    },
    /// What the Dev Container Feature's install.sh runs as root: the tool guard's managed files, root-owned in the image
    #[command(hide = true)]
    ToolGuardInstall {
        /// The tool guard's settings (the Feature's tool-guard.json, written by `devcontainer init`)
        settings: Option<PathBuf>,
    },
    /// What the Dev Container Feature runs as root, at build and at every start: no sudo for the agent's user beyond the Feature's rule
    #[command(hide = true)]
    SudoRestrict,
    /// A container's push verifier (root, through the image's sudo rule): the request on stdin, from the git guard
    #[command(hide = true)]
    PushVerify,
    /// A container's git broker (root: `start` from the entrypoint, `sync` through the image's sudo rule; `seed` as the agent's user, from `start`)
    #[command(hide = true)]
    GitHome {
        #[command(subcommand)]
        action: GitHomeAction,
    },
    /// A container's audit relay (root, started by `firewall start`): the guards' reports into root's log
    #[command(hide = true)]
    AuditRelay,
    /// Print the man page (roff); `cargo xtask man` writes it to target/man/
    #[command(hide = true)]
    Man,
    /// Run the hook guard (what the installed hooks call)
    #[command(hide = true)]
    Hook {
        /// pre-commit or pre-push
        name: String,
        /// git's arguments to the hook
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
}

#[derive(Subcommand)]
enum FirewallCommand {
    /// Enforce the network section of config.jsonc: only the proxy leaves, DNS only through its resolver; verify
    Apply,
    /// Show the policy, what was applied last and whether the proxy runs
    Status {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Apply at container start (the Feature's entrypoint, as root): loopback only until done, closed on failure
    #[command(hide = true)]
    Start,
    /// Wait until the entrypoint has applied (or closed) the firewall, then say which (at most 60 s)
    #[command(hide = true)]
    Wait,
    /// The proxy's process (started by apply as its own user, with the sockets it bound)
    #[command(hide = true)]
    Serve {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
}

#[derive(Subcommand)]
enum DevcontainerCommand {
    /// Add the agent-sandbox Feature to .devcontainer/ (merging into your image, Dockerfile or compose setup)
    Init {
        /// The workspace (default: the current directory)
        path: Option<PathBuf>,
        /// The base image tag of agent-sandbox's template (agent-sandbox-base:<tag>); sets it in an existing file too
        #[arg(long, value_name = "TAG")]
        base_tag: Option<String>,
        /// Keep settings that defeat a guard rail (the Docker socket, credentials, secrets, privileged, root)
        #[arg(long)]
        force: bool,
        /// Claude Code and Codex config in volumes of this workspace, not the shared ones
        #[arg(long)]
        per_workspace_config: bool,
    },
}

#[derive(Subcommand)]
enum GitCommand {
    /// Take a branch tip a broker kept (refused by its checks, or waiting because both sides moved the branch), after seeing why: lists them, shows one, and with --yes takes it
    Adopt {
        /// The branch (its kept tip is refs/agent-sandbox/refused/heads/BRANCH or refs/agent-sandbox/waiting/heads/BRANCH); without it, every kept tip is listed
        branch: Option<String>,
        /// Take it (a fast-forward of the branch); without it, only show
        #[arg(long)]
        yes: bool,
        /// The repository (default: the current directory)
        #[arg(short = 'C', value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// List the session repositories `exec` keeps for this project (the current one, and
    /// any put aside because they belonged to another repository at this path): what of
    /// each did not reach your repository, and its stash entries
    Sessions {
        #[command(subcommand)]
        command: Option<SessionsCommand>,
        /// The project (default: the current directory)
        #[arg(short = 'C', value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum SessionsCommand {
    /// Delete a kept session repository and everything in it (its name from the list)
    Remove { name: String },
}

#[derive(Subcommand)]
enum HooksCommand {
    /// Put the guard in front of the existing pre-commit and pre-push hooks (they keep running after it)
    Install {
        /// The repository (default: the current directory)
        #[arg(short = 'C', value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Rewrite agent-sandbox's own hook shims (never anyone else's hooks)
        #[arg(long)]
        force: bool,
    },
    /// Remove the guard and put back exactly the hooks that were there
    Uninstall {
        /// The repository (default: the current directory)
        #[arg(short = 'C', value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print the effective configuration and the layer each value came from
    Show {
        #[command(flatten)]
        policy: PolicyArgs,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Trust the project's .agent-sandbox/config file as it is now (exec refuses a new or changed one)
    Allow {
        #[command(flatten)]
        policy: PolicyArgs,
    },
}

/// Commands that change what the host trusts (approvals, hooks) refuse to run inside a
/// sandbox: there they would act on the sandbox's view, or be the agent's doing.
/// The completion script for `shell`: the commands people type, without the hidden ones
/// agent-sandbox runs for itself (`hook`, `probe`, `firewall start`, …).
fn completion_script(shell: clap_complete::Shell) -> String {
    use clap::CommandFactory as _;
    let mut command = without_hidden(&Cli::command());
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "agent-sandbox", &mut script);
    let script = String::from_utf8_lossy(&script).into_owned();
    match shell {
        // clap_complete's bash script spells the cases of a hyphenated binary's
        // subcommands `agent__subcmd__sandbox__subcmd__config` but looks them up as
        // `agent__sandbox__subcmd__config`, so nothing after the first word completes.
        clap_complete::Shell::Bash => script.replace("agent__subcmd__sandbox", "agent__sandbox"),
        _ => script,
    }
}

/// A copy of `command` with what completion needs (name, about, version, visible
/// arguments) and only its visible subcommands, at every level: clap has no way to
/// remove a subcommand, and the generators offer hidden ones.
fn without_hidden(command: &clap::Command) -> clap::Command {
    let mut visible = clap::Command::new(command.get_name().to_owned())
        .args(command.get_arguments().filter(|arg| !arg.is_hide_set()).cloned())
        .subcommands(command.get_subcommands().filter(|sub| !sub.is_hide_set()).map(without_hidden));
    if let Some(about) = command.get_about() {
        visible = visible.about(about.clone());
    }
    if let Some(version) = command.get_version() {
        visible = visible.version(version.to_owned());
    }
    visible
}

fn refuse_inside(what: &str) -> anyhow::Result<()> {
    if runtime_layout::detect() != runtime_layout::Where::Outside {
        anyhow::bail!("{what} changes what the host trusts: run it outside the sandbox, in your own shell");
    }
    Ok(())
}

pub fn main(args: Vec<OsString>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return if err.use_stderr() { 2 } else { 0 };
        }
    };
    let Some(command) = cli.command else {
        // `agent-sandbox PATH`: a word that is neither a command nor a directory is most
        // likely a mistyped command.
        if let Some(path) = cli.shell.path.as_ref().filter(|path| !path.exists()) {
            eprintln!(
                "agent-sandbox: error: {} is neither a command nor a directory (the default command is `shell \
                 [PATH]`): see agent-sandbox --help",
                path.display()
            );
            return 2;
        }
        // The first thing people type: say what it was and the way in without Docker.
        return finish(crate::docker::shell(cli.shell).map_err(|err| {
            anyhow::anyhow!(
                "{err:#}\n(bare `agent-sandbox` is `agent-sandbox shell`, the Docker sandbox of this directory; \
                 without Docker, run the agent under bubblewrap: `agent-sandbox exec -- claude`)"
            )
        }));
    };
    let result = match command {
        Commands::Init(args) => crate::docker::init(args),
        Commands::Build(args) => crate::docker::build(args),
        Commands::BuildBase(args) => crate::docker::build_base(args),
        Commands::Start(args) => crate::docker::start(args),
        Commands::Stop(args) => crate::docker::stop(args),
        Commands::Restart(args) => crate::docker::restart(args),
        Commands::Shell(args) => crate::docker::shell(args),
        Commands::ShowRun(args) => crate::docker::show_run(args),
        Commands::List(args) => crate::docker::list(args),
        Commands::Checkout(args) => crate::docker::checkout(args),
        Commands::CodexInitConfig(args) => crate::docker::codex_init_config(args),
        Commands::CodexLogout(args) => crate::docker::codex_logout(args),
        Commands::Volume(args) => crate::docker::volume(args),
        Commands::Exec(args) => crate::exec::exec(args),
        Commands::Check { quiet, json } => Ok(check(quiet, json)),
        Commands::Config(ConfigCommand::Show { policy, json }) => crate::exec::config_show(&policy, json),
        Commands::Config(ConfigCommand::Allow { policy }) => {
            refuse_inside("`agent-sandbox config allow`").and_then(|()| crate::exec::config_allow(&policy))
        }
        Commands::Log(args) => crate::log::log(&args),
        Commands::Test(args) => crate::selftest::test(&args),
        Commands::Probe { spec } => Ok(inside::probe::run(&spec)),
        Commands::Hooks(command) => refuse_inside("`agent-sandbox hooks`").and_then(|()| hooks(command)),
        Commands::Git(GitCommand::Adopt { branch, yes, dir }) => {
            refuse_inside("`agent-sandbox git adopt`").and_then(|()| git_adopt(branch.as_deref(), yes, dir))
        }
        Commands::Git(GitCommand::Sessions { command, dir }) => {
            refuse_inside("`agent-sandbox git sessions`").and_then(|()| git_sessions(command, dir))
        }
        Commands::Firewall(command) => firewall(command),
        Commands::Devcontainer(DevcontainerCommand::Init { path, base_tag, force, per_workspace_config }) => {
            devcontainer_init(path, base_tag, force, per_workspace_config)
        }
        Commands::ToolGuard { agent } => Ok(inside::tool_guard::run(&agent)),
        Commands::ToolGuardInstall { settings } => {
            devcontainer::feature::install_tool_guard(settings.as_deref()).map_err(anyhow::Error::from).map(|lines| {
                for line in lines {
                    println!("agent-sandbox Feature: {line}");
                }
                0
            })
        }
        Commands::GitHome { action } => Ok(match action {
            GitHomeAction::Start => hostpush::home::start(),
            GitHomeAction::Sync => hostpush::home::sync(config::load_for_container().map_err(|err| err.to_string())),
            GitHomeAction::Seed { dir } => match hostpush::home::seed(&dir) {
                Ok(()) => 0,
                Err(why) => {
                    eprintln!("agent-sandbox: cannot seed the session repository: {why}");
                    1
                }
            },
        }),
        Commands::AuditRelay => devcontainer::audit_relay::run().map_err(anyhow::Error::msg).map(|()| 0),
        Commands::SudoRestrict => devcontainer::sudo::restrict().map_err(anyhow::Error::from).map(|lines| {
            for line in lines {
                println!("agent-sandbox Feature: {line}");
            }
            0
        }),
        Commands::PushVerify => {
            let config = config::load_for_container().map_err(|err| err.to_string());
            Ok(hostpush::verify::run(config, std::path::Path::new(devcontainer::feature::IMAGE_BINARY)))
        }
        Commands::Completions { shell } => {
            print!("{}", completion_script(shell));
            Ok(0)
        }
        Commands::Man => {
            use clap::CommandFactory as _;
            clap_mangen::Man::new(Cli::command())
                .render(&mut std::io::stdout())
                .map(|()| 0)
                .map_err(|err| anyhow::anyhow!("writing the man page: {err}"))
        }
        Commands::Vsh(args) => crate::vsh::vsh(args),
        Commands::Mcp(args) => crate::vsh::mcp(args),
        Commands::Hook { name, args } => match hookinstall::HOOKS.contains(&name.as_str()) {
            true => Ok(hookguard::run(&name, &args)),
            false => {
                Err(anyhow::anyhow!("unknown hook {name:?} (the guard handles: {})", hookinstall::HOOKS.join(", ")))
            }
        },
    };
    finish(result)
}

fn finish(result: anyhow::Result<i32>) -> i32 {
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("agent-sandbox: error: {err:#}");
            EXIT_ERROR
        }
    }
}

/// `git adopt`: what the checks said and what would come, and with `yes` the branch taken.
fn git_adopt(branch: Option<&str>, yes: bool, dir: Option<PathBuf>) -> anyhow::Result<i32> {
    let repo = match dir {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    let lines = match branch {
        Some(branch) => hostpush::adopt::adopt(&repo, branch, yes),
        None => hostpush::adopt::list(&repo),
    };
    for line in lines.map_err(anyhow::Error::msg)? {
        println!("{line}");
    }
    Ok(0)
}

/// `git sessions`: the kept session repositories of the project, or one removed.
fn git_sessions(command: Option<SessionsCommand>, dir: Option<PathBuf>) -> anyhow::Result<i32> {
    use hostpush::home::sessions;
    let cwd = match dir {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    let (root, project) = session::project_state(&cwd)?;
    match command {
        Some(SessionsCommand::Remove { name }) => {
            let removed =
                sessions::remove(&project, &name).map_err(|refusal| anyhow::anyhow!("{}", refusal.inline()))?;
            println!("removed {}", removed.display());
        }
        None => {
            let kept = sessions::list(&project);
            if kept.is_empty() {
                println!("no session repository is kept for {}", root.display());
            }
            let user = hostpush::home::list_session_refs(&root.join(".git")).unwrap_or_default();
            for kept in &kept {
                for line in sessions::describe(kept, &user) {
                    println!("{line}");
                }
            }
        }
    }
    Ok(0)
}

fn hooks(command: HooksCommand) -> anyhow::Result<i32> {
    use anyhow::Context as _;
    let here = |dir: Option<PathBuf>| -> anyhow::Result<PathBuf> {
        match dir {
            Some(dir) => Ok(dir),
            None => std::env::current_dir().context("cannot read the current directory"),
        }
    };
    let installing = matches!(command, HooksCommand::Install { .. });
    let report = match command {
        HooksCommand::Install { dir, force } => {
            let exe = std::env::current_exe().context("cannot find the agent-sandbox binary itself")?;
            hookinstall::install(&here(dir)?, &exe, force)?
        }
        HooksCommand::Uninstall { dir } => hookinstall::uninstall(&here(dir)?)?,
    };
    println!("hooks directory: {}", report.hooks_dir.display());
    for action in report.actions {
        println!("  {action}");
    }
    if installing {
        println!("what runs where:");
        for line in HOOKS_WHERE {
            println!("  {line}");
        }
    }
    Ok(0)
}

/// What `hooks install` leaves running, and where (README's "Hooks" says the same).
const HOOKS_WHERE: &[&str] = &[
    "your own commits and pushes (outside a sandbox): your earlier hooks, as before (the guard's checks too with checks.humans)",
    "commits inside a sandbox: the guard's checks, then your earlier pre-commit hook, both in the sandbox",
    "the agent's pushes (carried out by the host): the guard's checks and then your earlier pre-push hook (or a plain \
     pre-push hook), each in a fresh check sandbox on a worktree of what is pushed, never on the host itself; in a \
     container's verified push, checks.commands only",
];

fn firewall(command: FirewallCommand) -> anyhow::Result<i32> {
    let paths = firewall::policy_dirs();
    match command {
        // Fail closed: whatever goes wrong, egress ends up loopback only and the
        // error says so.
        FirewallCommand::Apply | FirewallCommand::Start => {
            let starting = matches!(command, FirewallCommand::Start);
            if starting && runtime_layout::detect() == runtime_layout::Where::Container {
                // What the guards refuse is kept in root's log (no guard depends on it:
                // the firewall is applied whatever happens here). Off a container the
                // refusal below says all.
                let started = std::env::current_exe()
                    .map_err(|err| err.to_string())
                    .and_then(|exe| devcontainer::audit_relay::start(&exe));
                match started {
                    Ok(what) => println!("audit: relay {what}, log {}", runtime_layout::CONTAINER_AUDIT_LOG),
                    Err(err) => eprintln!("audit: warning: {err}: refusals in this container are not logged"),
                }
            }
            match firewall::apply_or_close(&paths, starting) {
                Ok(report) => {
                    for line in &report.lines {
                        println!("firewall: {line}");
                    }
                    for warning in &report.warnings {
                        eprintln!("firewall: warning: {warning}");
                    }
                }
                // Off a container nothing was touched: the error says all.
                Err(err @ firewall::Error::NotAContainer) => return Err(err.into()),
                Err(err) => {
                    eprintln!("{}", firewall::health().banner());
                    return Err(err.into());
                }
            }
        }
        FirewallCommand::Status { json: true } => {
            let text = serde_json::to_string_pretty(&firewall::status_json(firewall::load(&paths).as_ref()))?;
            println!("{text}");
        }
        FirewallCommand::Status { json: false } => {
            let lines = match firewall::load(&paths) {
                Ok(policy) => firewall::status(&policy),
                Err(err) => vec![firewall::health().banner(), format!("policy: does not load: {err}")],
            };
            // A reader that stops early (`| head -1`) is no error.
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            for line in lines {
                if writeln!(out, "{line}").is_err() {
                    break;
                }
            }
        }
        FirewallCommand::Wait => {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while firewall::health() == firewall::Health::NotApplied && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            println!("{}", firewall::health().banner());
        }
        FirewallCommand::Serve { args } => firewall::serve(&args)?,
    }
    Ok(0)
}

fn devcontainer_init(
    path: Option<PathBuf>,
    base_tag: Option<String>,
    force: bool,
    per_workspace_config: bool,
) -> anyhow::Result<i32> {
    use anyhow::Context as _;
    let root = match path {
        Some(path) => path,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let binary = std::env::current_exe().context("cannot find the agent-sandbox binary itself")?;
    for line in dockerbox::workspace::devcontainer_init(&root, base_tag, force, per_workspace_config, &binary)? {
        println!("{line}");
    }
    Ok(0)
}

fn check(quiet: bool, json: bool) -> i32 {
    let place = runtime_layout::detect();
    let (code, name, text) = match place {
        runtime_layout::Where::Bubblewrap => (0, "bubblewrap", "inside an agent-sandbox (bubblewrap)"),
        runtime_layout::Where::Container => (0, "container", "inside an agent-sandbox (container)"),
        runtime_layout::Where::Outside => (1, "outside", "not inside an agent-sandbox"),
    };
    if json {
        let mut value = serde_json::json!({ "inside": code == 0, "where": name });
        if matches!(place, runtime_layout::Where::Container) {
            value["firewall"] = firewall::health().to_json();
        }
        println!("{value}");
    } else if !quiet {
        println!("{text}");
    }
    // In a container, a firewall that is not in force is said loudly (stderr, always).
    if matches!(place, runtime_layout::Where::Container) {
        let health = firewall::health();
        if health != firewall::Health::Applied {
            eprintln!("agent-sandbox: WARNING: {}", health.banner());
        }
        if let Some(failure) = hostpush::home::start_failure() {
            eprintln!("agent-sandbox: WARNING: {failure}");
        }
    }
    code
}

#[cfg(test)]
#[path = "help_tests.rs"]
mod tests;
