//! The prepare stage: the caches' layers, then (for a real run) what the start records
//! and says (the masks' record, the audit log's session start, the one-line summaries),
//! the git exec-path stand-ins, the runtime directory with the guards' settings and the
//! copied files, and the whole bwrap command line (`sandbox::plan::bwrap_args`).

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use policy::Context;
use sandbox::plan::{Mask, Plan};

use super::{
    decide::{self, Decision, Guards},
    facts::Facts,
    scan::Scanned,
};
use crate::{caches::CacheLayers, mask_record, masks, ExecOptions, Outcome};

/// What the services and the run start from.
pub(crate) struct Prepared {
    pub(crate) runtime: sandbox::runtime::Runtime,
    pub(crate) bwrap_args: Vec<OsString>,
    /// Allowlist mode's network namespace is made before bwrap (see `sandbox::netns`).
    pub(crate) premade_network: bool,
    pub(crate) guards: Guards,
}

/// The caches: an overlay each, or read-only (never the host's, read-write). Whether
/// this machine restricts user namespaces comes along: the network namespace asks too.
pub(crate) fn caches(facts: &Facts, scanned: &mut Scanned, options: &ExecOptions<'_>) -> Result<(CacheLayers, bool)> {
    let restricted = sandbox::netns::userns_restricted(&sandbox::run::read_userns_settings());
    let policy = &mut scanned.policy;
    let cache_layers =
        CacheLayers::take(&facts.state_dir, &facts.ctx.home, &policy.mounts, restricted, options.dry_run)?;
    for mount in &cache_layers.mounts {
        (options.debug)(&mount.describe());
        if let sandbox::caches::CacheMount::ReadOnly { path, .. } = mount {
            crate::caches::make_read_only(&mut policy.mounts, path);
        }
    }
    Ok((cache_layers, restricted))
}

/// `--dry-run`: the names of the variables passed and the whole bwrap command line, with
/// `$RUNTIME` for the runtime directory no dry run creates.
pub(crate) fn dry_run(facts: &Facts, scanned: &Scanned, decision: &Decision, cache_layers: &CacheLayers) -> Outcome {
    let plan = plan_of(facts, scanned, decision, Path::new("$RUNTIME"));
    let mut argv = vec![decision.bwrap.clone().into_os_string()];
    argv.extend(sandbox::plan::bwrap_args(&plan));
    let env_names = decision.env.vars.iter().map(|(name, _)| name.to_string_lossy().into_owned()).collect();
    let caches = cache_layers.mounts.iter().map(sandbox::caches::CacheMount::describe).collect();
    Outcome::DryRun { env_names, argv, caches }
}

/// Everything a real run needs on disk, and its bwrap command line.
pub(crate) fn prepare(
    facts: &mut Facts,
    scanned: &Scanned,
    decision: &Decision,
    restricted: bool,
    options: &ExecOptions<'_>,
) -> Result<Prepared> {
    if let Some(state) = &mut facts.claude_state {
        state.seed()?;
    }
    record_masks(scanned)?;
    record(&decision.agent, &decision.command, &facts.ctx.project_root, &scanned.masked, &decision.env.dropped);
    if options.terminal {
        summarise(&facts.ctx.project_root, scanned, decision);
    }
    if scanned.policy.network.value == config::Network::On && !sandbox::landlock::supported() {
        eprintln!(
            "agent-sandbox: warning: this kernel cannot scope abstract unix sockets (Landlock ABI {}, needs 6: Linux 6.12); \
             with the network on, the sandbox can reach host services listening on them (--network off closes this)",
            sandbox::landlock::abi()
        );
    }
    for command in &decision.commands {
        for (index, dir) in command.exec_dirs.iter().enumerate() {
            sandbox::commands::ensure_stand_in(index, dir)
                .with_context(|| format!("preparing the stand-in for {}", dir.path.display()))?;
        }
    }
    let guards = decide::guards(facts, scanned, decision)?;
    let runtime = runtime(facts, scanned, decision, &guards)?;
    if facts.session_git.is_some() {
        runtime.make_session_git_entries().context("creating the runtime directory")?;
    }
    let premade_network = sandbox::plan::premade_network_namespace(facts.net_policy.mode, restricted);
    if facts.net_policy.mode == config::Network::Allowlist && !premade_network {
        eprintln!(
            "agent-sandbox: warning: this machine keeps user namespaces from programs without an AppArmor profile \
             (kernel.apparmor_restrict_unprivileged_userns = 1): no resolver inside, so only programs that use the \
             proxy variables reach allowed hosts"
        );
    }
    let mut plan = plan_of(facts, scanned, decision, runtime.path());
    plan.premade_network = premade_network;
    let bwrap_args = sandbox::plan::bwrap_args(&plan);
    Ok(Prepared { runtime, bwrap_args, premade_network, guards })
}

/// Nothing masked now and nothing recorded before: the record would say what its
/// absence says, so a project without secrets writes nothing at each start.
fn record_masks(scanned: &Scanned) -> Result<()> {
    let nothing_to_record =
        scanned.masked.is_empty() && matches!(&scanned.earlier, masks::Earlier::Known(known) if known.is_empty());
    if nothing_to_record {
        return Ok(());
    }
    mask_record::write(&scanned.record_dir, &scanned.masked).with_context(|| {
        format!(
            "recording the masked files in {} (without it, the next start could not recognise a renamed secret; \
             check that directory's permissions and free space)",
            scanned.record_dir.display()
        )
    })
}

/// The one-line summaries for people: dropped variables and hidden files.
fn summarise(project_root: &Path, scanned: &Scanned, decision: &Decision) {
    let dropped = &decision.env.dropped;
    if !dropped.is_empty() {
        let names: Vec<&str> = dropped.iter().take(6).map(|gone| gone.name.as_str()).collect();
        let more = if dropped.len() > 6 { format!(" and {} more", dropped.len() - 6) } else { String::new() };
        eprintln!(
            "agent-sandbox: not passing {} secret-looking variable(s): {}{more} (pass one with env.allow)",
            dropped.len(),
            names.join(", ")
        );
    }
    let masks = &scanned.masks;
    if !masks.is_empty() {
        let shown: Vec<String> = masks.iter().take(5).map(|mask| relative(&mask.path, project_root)).collect();
        let more = if masks.len() > 5 { format!(" and {} more", masks.len() - 5) } else { String::new() };
        eprintln!(
            "agent-sandbox: hiding {} secret file(s) from the sandbox: {}{more} (expose one with secrets.allow)",
            masks.len(),
            shown.join(", ")
        );
    }
}

/// The runtime directory: the guards' settings, the managed configuration, the login
/// profile, the resolver's files, the settings copies, the copied `/etc` files and links.
fn runtime(
    facts: &Facts,
    scanned: &Scanned,
    decision: &Decision,
    guards: &Guards,
) -> Result<sandbox::runtime::Runtime> {
    let allowlist = facts.net_policy.mode == config::Network::Allowlist;
    let hook_json = guards.hook_settings.to_json();
    let resolv_conf = netproxy::resolv_conf();
    let hosts = netproxy::hosts();
    let mut files = vec![
        (runtime_layout::GIT_GUARD_SETTINGS, guards.git_settings.as_str()),
        (runtime_layout::HOOK_GUARD_SETTINGS, hook_json.as_str()),
        (runtime_layout::TOOL_GUARD_SETTINGS, guards.tool_settings.as_str()),
        (runtime_layout::CLAUDE_MANAGED, guards.claude_managed.as_str()),
        (runtime_layout::CODEX_MANAGED, guards.codex_managed.as_str()),
        (sandbox::runtime::PROFILE_FILE, guards.profile.as_str()),
    ];
    files.extend(guards.agent_managed.iter().map(|(name, text)| (*name, text.as_str())));
    if allowlist {
        files.push((runtime_layout::RESOLV_CONF, resolv_conf.as_str()));
        files.push((runtime_layout::HOSTS, hosts.as_str()));
    }
    let settings = &decision.settings_copies;
    let settings_names: Vec<String> = (0..settings.texts.len()).map(runtime_layout::settings_copy_name).collect();
    files.extend(settings_names.iter().map(String::as_str).zip(settings.texts.iter().map(String::as_str)));
    let mounts = &scanned.policy.mounts;
    let copies: Vec<&Path> = sandbox::plan::copied_files(mounts).iter().map(|mount| mount.path.as_path()).collect();
    let links: Vec<(&Path, &Path)> = sandbox::plan::copied_links(mounts)
        .iter()
        .filter(|mount| !sandbox::plan::replaced_by_resolver(facts.net_policy.mode, &mount.path))
        .filter_map(|mount| Some((mount.path.as_path(), mount.link.as_deref()?)))
        .collect();
    sandbox::runtime::Runtime::create(&decision.commands, &files, &copies, &links)
        .context("creating the runtime directory")
}

/// The session's plan, with the runtime directory at `runtime`.
fn plan_of<'a>(facts: &'a Facts, scanned: &'a Scanned, decision: &'a Decision, runtime: &'a Path) -> Plan<'a> {
    let plan = plan(
        &scanned.policy,
        &facts.net_policy,
        &scanned.masks,
        &decision.settings_copies.paths,
        &decision.commands,
        &facts.ctx,
        runtime,
        &decision.self_exe,
        &decision.command,
    );
    Plan { session_git: facts.session_git.as_ref(), ..plan }
}

/// A plan from its parts: the session's, and the push checks' (`push::CheckInputs`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan<'a>(
    policy: &'a policy::Policy,
    net_policy: &'a policy::network::NetPolicy,
    masks: &'a [Mask],
    settings: &'a [PathBuf],
    commands: &'a [sandbox::plan::WrappedCommand],
    ctx: &'a Context,
    runtime: &'a Path,
    self_exe: &'a Path,
    command: &'a [OsString],
) -> Plan<'a> {
    Plan {
        network: policy.network.value,
        premade_network: false,
        host_ports: &net_policy.host_ports,
        mounts: &policy.mounts,
        masks,
        settings,
        commands,
        home: &ctx.home,
        cwd: &ctx.cwd,
        runtime,
        self_exe,
        command,
        session_git: None,
    }
}

/// The session's start (agent, project, command line), then what it hides from the
/// sandbox: masked files and dropped variables.
fn record(
    agent: &str,
    command: &[OsString],
    project_root: &Path,
    masked: &[masks::Masked],
    dropped: &[policy::env::Dropped],
) {
    let Some(path) = audit::default_path() else {
        return;
    };
    let start = audit::Event::new(
        agent,
        "session",
        &project_root.display().to_string(),
        "allowed",
        "session-start",
        Some(util::shell_line(command)),
    );
    let mut events: Vec<audit::Event> = std::iter::once(start)
        .chain(masked.iter().map(|masked| {
            let reason = if masked.mask.path == masked.found {
                format!("matches {}", masked.pattern)
            } else {
                format!("target of {}, which matches {}", masked.found.display(), masked.pattern)
            };
            let target = masked.mask.path.display().to_string();
            audit::Event::new(agent, "read", &target, "masked", "sensitive-file-pattern", Some(reason))
        }))
        .collect();
    events.extend(dropped.iter().map(|gone| {
        audit::Event::new(agent, "env", &gone.name, "blocked", gone.policy, Some(format!("matches {}", gone.pattern)))
    }));
    if let Err(err) = audit::append(&path, &events) {
        eprintln!("agent-sandbox: warning: cannot write the audit log {}: {err}", path.display());
    }
}

fn relative(path: &Path, root: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

/// See [`crate::BENCH_ARGV_VAR`].
pub(crate) fn write_bench_argv(
    file: &Path,
    bwrap: &Path,
    args: &[OsString],
    env: &[(OsString, OsString)],
    runtime: PathBuf,
) -> Result<()> {
    let text = |value: &std::ffi::OsStr| value.to_string_lossy().into_owned();
    let json = serde_json::json!({
        "bwrap": text(bwrap.as_os_str()),
        "args": args.iter().map(|arg| text(arg)).collect::<Vec<_>>(),
        "env": env.iter().map(|(name, value)| [text(name), text(value)]).collect::<Vec<_>>(),
        "runtime": text(runtime.as_os_str()),
    });
    std::fs::write(file, json.to_string()).with_context(|| format!("writing {}", file.display()))
}
