//! The run stage: bwrap with the prepared command line, its audit FIFO relayed and its
//! exit status passed on (`sandbox::run`); then the exit check, however the command
//! ended: what the session left in the project's git metadata, compared with the
//! baseline and moved aside (`gitcare::session::finish`), Claude Code's state copied
//! back, the runtime directory removed; each part timed (`exit-check stages:`).

use std::path::Path;

use anyhow::{Context as _, Result};

use super::{decide::Decision, prepare::Prepared, scan::Lister, services::Services, Stages};
use crate::{caches::CacheLayers, claude_state::ClaudeState};

/// Runs the sandbox; its exit status, or why it could not run.
pub(crate) fn run(
    decision: &Decision,
    prepared: &Prepared,
    services: &Services,
    cache_layers: &CacheLayers,
) -> Result<i32, sandbox::run::RunError> {
    let on_refused = |path: &Path, err: &std::io::Error| {
        eprintln!(
            "agent-sandbox: warning: cache {} is read-only in this session: overlayfs refused its layer ({err}; does \
             the filesystem of {} support user extended attributes?), so downloads are not kept",
            path.display(),
            cache_layers.root.display()
        );
    };
    sandbox::run::run(
        &decision.bwrap,
        &prepared.bwrap_args,
        &decision.env.vars,
        &prepared.runtime.layout(),
        audit::default_path(),
        services.private_network.as_ref(),
        services.overlays.as_ref().map(|prepared| sandbox::run::CacheOverlays { prepared, on_refused: &on_refused }),
    )
}

/// The exit check, once the services have stopped; each part ends a stage of `timer`
/// (`--debug` prints its `exit-check stages:` line).
pub(crate) fn exit_check(
    session: gitcare::session::Session,
    watch: &gitcare::Watch,
    lister: &Lister,
    claude_state: Option<ClaudeState>,
    runtime: sandbox::runtime::Runtime,
    timer: &mut Stages,
    debug: &dyn Fn(&str),
) -> Result<()> {
    let checked = gitcare::session::finish(session, watch, || lister.found_now(), &mut |phase| timer.end(phase));
    sandbox::run::exit_check_finished();
    if let Some(state) = claude_state {
        state.finish();
    }
    timer.end("claude");
    let removed = runtime.remove();
    timer.end("runtime");
    debug(&timer.exit_line());
    removed.context("removing the runtime directory")?;
    let (_, stuck) = checked.context(
        "checking the git metadata after the session failed: inspect nested .git entries, .git/config and the hooks \
         before running git here",
    )?;
    if stuck > 0 {
        util::say!(
            "agent-sandbox: WARNING: {stuck} path(s) above could be neither moved aside nor deleted: do not run git \
             in this project until you have removed them"
        );
    }
    Ok(())
}
