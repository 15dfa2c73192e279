//! The Docker sandbox lifecycle of seed 002 (`init`, `build`, `build-base`, `start`,
//! `stop`, `restart`, `shell`, `show-run`, `checkout`, `list`, `volume`,
//! `codex-init-config`, `codex-logout`): their flags, the one fact from another crate
//! they need (the protected paths, `cli::protected_paths`) and the printing; the work,
//! every decision included, is in crates/dockerbox.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::Args;
use dockerbox::{
    engine::Engine,
    lifecycle::{self, StartOptions, Target},
};

/// The workspace argument every command takes.
#[derive(Args, Clone, Debug)]
pub struct WorkspaceArg {
    /// The workspace (default: the current directory)
    pub path: Option<PathBuf>,
}

/// The base image tag (`agent-sandbox-base:<tag>`).
#[derive(Args, Clone, Debug)]
pub struct BaseTagArg {
    /// The base image tag: agent-sandbox-base:<TAG>
    #[arg(long, value_name = "TAG", default_value = "latest")]
    pub base_tag: String,
}

/// Branch mode.
#[derive(Args, Clone, Debug, Default)]
pub struct BranchArg {
    /// Branch mode: work in a worktree of BRANCH in the repository's shared repo-shelf volume
    #[arg(long, value_name = "BRANCH")]
    pub branch: Option<String>,
}

#[derive(Args, Clone, Debug)]
pub struct InitArgs {
    #[command(flatten)]
    pub workspace: WorkspaceArg,
    #[command(flatten)]
    pub base: BaseTagArg,
    /// Rewrite .agent-sandbox/Dockerfile and remove the workspace's containers
    #[arg(long)]
    pub force: bool,
}

#[derive(Args, Clone, Debug)]
pub struct BuildArgs {
    #[command(flatten)]
    pub workspace: WorkspaceArg,
    #[command(flatten)]
    pub base: BaseTagArg,
}

#[derive(Args, Clone, Debug)]
pub struct BuildBaseArgs {
    /// The tag to build: agent-sandbox-base:<TAG>
    #[arg(long, value_name = "TAG", default_value = "latest")]
    pub tag: String,
    /// The image to build on (default: the Dockerfile's, node:20-bookworm-slim; Debian or Ubuntu based)
    #[arg(long, value_name = "IMAGE")]
    pub from: Option<String>,
    /// Claude Code's version (`latest` is resolved with npm first; `none` leaves it out)
    #[arg(long, value_name = "V")]
    pub claude_code_version: Option<String>,
    /// Codex's version (`latest` is resolved with npm first; `none` leaves it out)
    #[arg(long, value_name = "V")]
    pub codex_version: Option<String>,
    /// git-delta's version (`none` leaves it out)
    #[arg(long, value_name = "V")]
    pub git_delta_version: Option<String>,
    /// ast-grep's version (`latest` is resolved with npm first; `none` leaves it out)
    #[arg(long, value_name = "V")]
    pub ast_grep_version: Option<String>,
}

#[derive(Args, Clone, Debug)]
pub struct StartArgs {
    #[command(flatten)]
    pub workspace: WorkspaceArg,
    #[command(flatten)]
    pub branch: BranchArg,
    #[command(flatten)]
    pub base: BaseTagArg,
    /// Build the per-repo image first
    #[arg(long)]
    pub build: bool,
}

#[derive(Args, Clone, Debug, Default)]
pub struct ShellArgs {
    /// The workspace (default: the current directory)
    pub path: Option<PathBuf>,
    #[command(flatten)]
    pub branch: BranchArg,
    /// The base image tag: agent-sandbox-base:<TAG>
    #[arg(long, value_name = "TAG", default_value = "latest")]
    pub base_tag: String,
    /// Build the per-repo image first
    #[arg(long)]
    pub build: bool,
    /// Run this command with bash -c instead of an interactive shell
    #[arg(short = 'c', value_name = "COMMAND")]
    pub command: Option<String>,
}

/// `show-run`, `stop`: a workspace and a mode.
#[derive(Args, Clone, Debug)]
pub struct ModeArgs {
    #[command(flatten)]
    pub workspace: WorkspaceArg,
    #[command(flatten)]
    pub branch: BranchArg,
    #[command(flatten)]
    pub base: BaseTagArg,
}

/// `stop`: a workspace and a mode, or every sandbox.
#[derive(Args, Clone, Debug)]
pub struct StopArgs {
    #[command(flatten)]
    pub mode: ModeArgs,
    /// Stop every agent-sandbox container on the engine (of any workspace)
    #[arg(long, conflicts_with_all = ["path", "branch"])]
    pub all: bool,
}

#[derive(Args, Clone, Debug)]
pub struct CheckoutArgs {
    /// The branch whose worktree to provision in the repo shelf
    pub branch_name: String,
    #[command(flatten)]
    pub workspace: WorkspaceArg,
    #[command(flatten)]
    pub base: BaseTagArg,
}

#[derive(Args, Clone, Debug)]
pub struct CodexInitArgs {
    /// Also import the host's Codex credentials ($CODEX_HOME or ~/.codex: auth.json, profile.json)
    #[arg(long)]
    pub auth: bool,
    /// Overwrite config.toml, AGENTS.md and profile.json in the volume
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub volume: CodexVolumeArgs,
}

/// The volume and the image that reads and writes it.
#[derive(Args, Clone, Debug)]
pub struct CodexVolumeArgs {
    /// The base image tag used to reach the volume: agent-sandbox-base:<TAG>
    #[arg(long, value_name = "TAG", default_value = "latest")]
    pub base_tag: String,
    /// Another Codex config volume than the shared one
    #[arg(long, value_name = "NAME", default_value = dockerbox::names::CODEX_VOLUME, hide = true)]
    pub volume: String,
}

#[derive(Args, Clone, Debug)]
pub struct ListArgs {
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

fn target(path: Option<&std::path::Path>) -> Result<Target> {
    Target::new(path, None)
}

fn branch_target(path: Option<&std::path::Path>, branch: &BranchArg) -> Result<Target> {
    Target::new(path, branch.branch.as_deref())
}

/// `start`'s options, with the workspace's protected paths (the devcontainer's list:
/// git's hooks, config and info, the guard configuration, `core.hooksPath`'s directory,
/// the project's `checks.protectedPaths`).
fn start_options(target: &Target, base_tag: &str, build: bool) -> Result<StartOptions> {
    StartOptions::new(target, base_tag, build, dockerbox::workspace::protected_paths(&target.root)?)
}

fn report(started: &lifecycle::Started) {
    for note in &started.notes {
        eprintln!("agent-sandbox: {note}");
    }
    match started.firewall.starts_with("firewall: on") {
        true => eprintln!("agent-sandbox: {}", started.firewall),
        false => eprintln!("agent-sandbox: WARNING: {}", started.firewall),
    }
}

pub fn init(args: InitArgs) -> Result<i32> {
    let target = target(args.workspace.path.as_deref())?;
    let engine = Engine::connect()?;
    for line in lifecycle::init(&engine, &target, &args.base.base_tag, args.force)? {
        println!("{line}");
    }
    Ok(0)
}

pub fn build(args: BuildArgs) -> Result<i32> {
    let target = target(args.workspace.path.as_deref())?;
    let engine = Engine::connect()?;
    lifecycle::build(&engine, &target, &args.base.base_tag)?;
    println!("built {}", target.workspace.image());
    Ok(0)
}

pub fn build_base(args: BuildBaseArgs) -> Result<i32> {
    let versions = [
        ("--claude-code-version", args.claude_code_version.as_deref()),
        ("--codex-version", args.codex_version.as_deref()),
        ("--ast-grep-version", args.ast_grep_version.as_deref()),
        ("--git-delta-version", args.git_delta_version.as_deref()),
    ];
    let build_args = lifecycle::base_build_args(args.from.as_deref(), &versions)?;
    let binary = std::env::current_exe().context("cannot find the agent-sandbox binary itself")?;
    let engine = Engine::connect()?;
    let image = lifecycle::build_base(&engine, &args.tag, &build_args, &binary)?;
    println!("built {image}");
    Ok(0)
}

pub fn start(args: StartArgs) -> Result<i32> {
    let target = branch_target(args.workspace.path.as_deref(), &args.branch)?;
    let engine = Engine::connect()?;
    let options = start_options(&target, &args.base.base_tag, args.build)?;
    let started = lifecycle::start(&engine, &target, &options)?;
    report(&started);
    println!(
        "{} running (workdir {}; open a shell with: agent-sandbox shell)",
        started.plan.name, started.plan.workdir
    );
    Ok(0)
}

pub fn stop(args: StopArgs) -> Result<i32> {
    let engine = Engine::connect()?;
    if args.all {
        let stopped = lifecycle::stop_all(&engine)?;
        for name in &stopped {
            println!("stopped {name}");
        }
        if stopped.is_empty() {
            println!("no sandbox container is running");
        }
        return Ok(0);
    }
    let target = branch_target(args.mode.workspace.path.as_deref(), &args.mode.branch)?;
    match lifecycle::stop(&engine, &target)? {
        (name, true) => println!("stopped {name}"),
        (name, false) => println!("{name} is not running"),
    }
    Ok(0)
}

pub fn restart(args: StartArgs) -> Result<i32> {
    let target = branch_target(args.workspace.path.as_deref(), &args.branch)?;
    let engine = Engine::connect()?;
    let options = start_options(&target, &args.base.base_tag, args.build)?;
    let started = lifecycle::restart(&engine, &target, &options)?;
    report(&started);
    println!("{} restarted", started.plan.name);
    Ok(0)
}

pub fn shell(args: ShellArgs) -> Result<i32> {
    let target = branch_target(args.path.as_deref(), &args.branch)?;
    let engine = Engine::connect()?;
    let options = start_options(&target, &args.base_tag, args.build)?;
    let (code, _started) = lifecycle::shell(&engine, &target, &options, args.command.as_deref())?;
    Ok(code)
}

pub fn show_run(args: ModeArgs) -> Result<i32> {
    let target = branch_target(args.workspace.path.as_deref(), &args.branch)?;
    // The limits' shares are of this engine's totals.
    let engine = Engine::connect()?;
    let protected = target.existing(dockerbox::workspace::protected_paths(&target.root)?);
    let plan = target.plan(&args.base.base_tag, &protected, target.limits(&engine)?)?;
    println!("{}", dockerbox::plan::docker_run_line(&plan));
    Ok(0)
}

pub fn checkout(args: CheckoutArgs) -> Result<i32> {
    let target = target(args.workspace.path.as_deref())?;
    let engine = Engine::connect()?;
    let options = start_options(&target, &args.base.base_tag, false)?;
    println!("{}", lifecycle::checkout(&engine, &target, &args.branch_name, &options)?);
    Ok(0)
}

pub fn codex_init_config(args: CodexInitArgs) -> Result<i32> {
    let host = match args.auth {
        true => Some(dockerbox::codex::host_auth(&dockerbox::codex::host_codex_home()?)?),
        false => None,
    };
    let engine = Engine::connect()?;
    let image = dockerbox::codex::image(&engine, &args.volume.base_tag)?;
    for line in dockerbox::codex::init(&engine, &image, &args.volume.volume, host.as_ref(), args.force)? {
        println!("{line}");
    }
    Ok(0)
}

pub fn codex_logout(args: CodexVolumeArgs) -> Result<i32> {
    let engine = Engine::connect()?;
    let image = dockerbox::codex::image(&engine, &args.base_tag)?;
    for line in dockerbox::codex::logout(&engine, &image, &args.volume)? {
        println!("{line}");
    }
    Ok(0)
}

pub fn list(args: ListArgs) -> Result<i32> {
    let engine = Engine::connect()?;
    let listed = lifecycle::list(&engine)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&lifecycle::list_json(&listed))?);
    } else {
        for line in lifecycle::list_lines(&listed) {
            println!("{line}");
        }
    }
    Ok(0)
}

pub fn volume(args: WorkspaceArg) -> Result<i32> {
    let target = target(args.path.as_deref())?;
    for (what, name) in lifecycle::volumes(&target.workspace) {
        println!("{what}\t{name}");
    }
    Ok(0)
}
