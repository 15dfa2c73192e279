//! The services stage: what lives exactly as long as the sandbox, owned by this
//! process: the session check's baseline, the push service (socket bound here, before
//! the sandbox starts; its hook, settings and checks' sandbox decided on its own thread
//! meanwhile), the allowlist's proxy, the private network namespace and the caches'
//! overlays. [`Services::stop`] ends them after the run, before the exit check.

use std::path::Path;

use anyhow::{Context as _, Result};

use super::{decide::Decision, facts::Facts, prepare::Prepared, scan::Scanned};
use crate::{caches::CacheLayers, programs, push};

pub(crate) struct Services {
    /// The session check's baseline, compared at exit.
    pub(crate) session: gitcare::session::Session,
    push: Option<push::PushService>,
    proxy: Option<netproxy::Proxy>,
    /// The destinations the allowlist refused, said at the end.
    refused: netproxy::Refused,
    pub(crate) private_network: Option<sandbox::netns::PrivateNetwork>,
    pub(crate) overlays: Option<sandbox::caches::Prepared>,
}

impl Services {
    /// What making or refreshing the session repository took at this start.
    pub(crate) fn home_took(&self) -> Option<std::time::Duration> {
        self.push.as_ref()?.home_took
    }
}

pub(crate) fn start(
    facts: &Facts,
    scanned: &Scanned,
    decision: &Decision,
    prepared: &mut Prepared,
    cache_layers: &CacheLayers,
    debug: &dyn Fn(&str),
) -> Result<Services> {
    let session = baseline(facts, scanned, prepared)?;
    let push = match (&facts.repo, &facts.layout) {
        (Some(_), Some(layout)) => Some(push_service(facts, scanned, decision, prepared, &layout.common_dir, debug)?),
        _ => None,
    };
    // The proxy lives exactly as long as the sandbox: this process owns it.
    let refused = netproxy::Refused::default();
    let proxy = match facts.net_policy.mode {
        config::Network::Allowlist => Some(proxy(facts, decision, prepared, &refused)?),
        _ => None,
    };
    let private_network = prepared.premade_network.then(sandbox::netns::PrivateNetwork::for_current_user);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // An unprivileged user mounts only in a user namespace of its own: the network
    // namespace's, or one made for the caches.
    let overlays = sandbox::caches::Prepared::new(&cache_layers.mounts, !root && !prepared.premade_network);
    Ok(Services { session, push, proxy, refused, private_network, overlays })
}

impl Services {
    /// Ends the proxy and the push service once the sandbox has ended, and says which
    /// destinations the allowlist refused; the baseline is left for the exit check.
    pub(crate) fn stop(self) -> gitcare::session::Session {
        if let Some(proxy) = self.proxy {
            proxy.stop();
        }
        // A tool prints only `403` or a closed connection: say here which hosts the
        // allowlist refused, and how to allow one.
        if let Some(lines) = refused_summary(&self.refused.lock().map(|refused| refused.clone()).unwrap_or_default()) {
            util::say!("{lines}");
        }
        if let Some(push) = &self.push {
            push.bring_home();
        }
        drop(self.push);
        self.session
    }
}

/// The session check: a baseline now (shared with other sessions running in this
/// project), the comparison when the command has ended, however it ended. Pre-push
/// needs to know which commits are the user's own (for the checks and the protected
/// paths it holds every new commit to).
fn baseline(facts: &Facts, scanned: &Scanned, prepared: &mut Prepared) -> Result<gitcare::session::Session> {
    let track_commits = facts.repo.is_some();
    let session = gitcare::session::begin(&facts.state_dir, &facts.watch, || scanned.found.clone(), track_commits)
        .context("recording the git metadata before the session")?;
    if track_commits {
        let hook_settings = &mut prepared.guards.hook_settings;
        hook_settings.known_commits = session.known_commits.clone();
        hook_settings.agent_commits = session.agent_commits.clone();
        std::fs::write(prepared.runtime.layout().hook_guard_settings(), hook_settings.to_json())
            .context("writing the hook guard's settings")?;
    }
    Ok(session)
}

/// Pushes leave through this process: `git push` inside asks it, and it pushes from
/// here once every new commit passed the checks in a fresh sandbox. Its socket is bound
/// now; the checks' sandbox is decided on the service's own thread.
fn push_service(
    facts: &Facts,
    scanned: &Scanned,
    decision: &Decision,
    prepared: &Prepared,
    common_dir: &Path,
    debug: &dyn Fn(&str),
) -> Result<push::PushService> {
    let (ctx, policy) = (&facts.ctx, &scanned.policy);
    let check = push::CheckInputs {
        config: scanned.config.clone(),
        ctx: ctx.clone(),
        pinned: facts.host_present.iter().chain(&scanned.pinned_masks).chain(&scanned.host_copies).cloned().collect(),
        net_policy: facts.net_policy.clone(),
        masks: scanned.masks.clone(),
        settings: decision.settings_copies.paths.clone(),
        commands: decision.commands.clone(),
        self_exe: decision.self_exe.clone(),
        bwrap: decision.bwrap.clone(),
        env: prepared.guards.check_env.clone(),
        hook_settings: prepared.guards.hook_settings.clone(),
        runtime: prepared.runtime.path().to_path_buf(),
    };
    debug("pushes leave through this process (push.sock)");
    // Once for both: the push's git, and the `PATH` it runs its helpers from.
    let search = programs::host_path(ctx, &policy.mounts);
    let git = programs::find_host_program("git", ctx, &policy.mounts, &search);
    let service = push::start_push_service(
        check,
        &facts.state_dir,
        &prepared.runtime,
        common_dir.to_path_buf(),
        (git, search.joined()),
        &decision.agent,
        facts.session_git.as_ref(),
    )?;
    if let Some(said) = &service.said {
        debug(said);
    }
    Ok(service)
}

/// The allowlist's proxy on the runtime directory's socket, bound before the sandbox
/// starts (the bridge inside hands it its listeners).
fn proxy(
    facts: &Facts,
    decision: &Decision,
    prepared: &Prepared,
    refused: &netproxy::Refused,
) -> Result<netproxy::Proxy> {
    let listener = prepared.runtime.listen_net().context("creating the network proxy's socket")?;
    let hosts = std::env::var(netproxy::TEST_HOSTS_VAR).map(|text| netproxy::parse_test_hosts(&text));
    let proxy_config = netproxy::ProxyConfig {
        policy: facts.net_policy.clone(),
        hosts: hosts.unwrap_or_default(),
        audit_log: audit::default_path(),
        agent: decision.agent.clone(),
        max_connections: netproxy::MAX_CONNECTIONS,
        upstream: Vec::new(),
        refused: refused.clone(),
    };
    Ok(netproxy::start(listener, prepared.runtime.layout().net_socket(), proxy_config))
}

/// What `exec` says at the end about the destinations the allowlist refused (`None`:
/// none): each once, at most ten, with the way to allow one.
fn refused_summary(refused: &std::collections::BTreeMap<String, String>) -> Option<String> {
    if refused.is_empty() {
        return None;
    }
    let mut text = format!(
        "agent-sandbox: the network allowlist refused {} destination{} this session (tools show this as 403 or a \
         closed connection):",
        refused.len(),
        if refused.len() == 1 { "" } else { "s" }
    );
    // The names are the agent's: no control character reaches the terminal.
    for (target, reason) in refused.iter().take(10) {
        text.push_str(&format!("\n  {}: {}", util::one_line(target), util::one_line(reason)));
    }
    if refused.len() > 10 {
        text.push_str(&format!("\n  … and {} more (agent-sandbox log --blocked-only)", refused.len() - 10));
    }
    Some(text)
}
