//! The decide stage: from the facts and the scan, what the sandbox is given besides its
//! mounts: the environment (filtered, with the sandbox's own variables), the wrapped
//! commands, the settings copies, the command and the programs that run it (bwrap,
//! agent-sandbox itself); and, for the prepare stage, the guards' settings
//! ([`guards`]). Nothing here writes: the decisions are values.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};

use super::{facts::Facts, scan::Scanned};
use crate::{programs, settings, ExecOptions};

/// What the run needs besides the policy and the masks.
pub(crate) struct Decision {
    pub(crate) env: Environment,
    /// The sandbox's `PATH`.
    pub(crate) path_var: Option<OsString>,
    pub(crate) commands: Vec<sandbox::plan::WrappedCommand>,
    pub(crate) settings_copies: settings::Copies,
    /// The command to run, the user's shell when none was given.
    pub(crate) command: Vec<OsString>,
    /// Its name, as the audit log records it.
    pub(crate) agent: String,
    pub(crate) self_exe: PathBuf,
    pub(crate) bwrap: PathBuf,
}

/// The sandbox's environment, and what the checks of a commit search.
pub(crate) struct Environment {
    pub(crate) vars: Vec<(OsString, OsString)>,
    pub(crate) dropped: Vec<policy::env::Dropped>,
    /// The `PATH` the checks search: only directories the agent cannot write.
    pub(crate) check_path: Option<policy::path_search::SearchPath>,
    /// The skip switches the sandbox sets itself ([`hook_manager_env`]).
    pub(crate) quiet_env: Vec<(String, String)>,
}

/// The decisions, or why the command cannot start inside (exit status 127).
pub(crate) fn decide(
    facts: &Facts,
    scanned: &mut Scanned,
    options: &ExecOptions<'_>,
) -> Result<std::result::Result<Decision, String>> {
    let debug = options.debug;
    let ctx = &facts.ctx;
    let env = environment(facts, scanned, debug)?;
    let policy = &mut scanned.policy;
    let path_var = env.vars.iter().find(|(name, _)| name == "PATH").map(|(_, value)| value.clone());
    let commands = sandbox::commands::wrap(
        &policy.commands,
        path_var.as_deref(),
        &policy.mounts,
        &scanned.masks,
        ctx,
        &facts.cache_dir,
        &mut policy.notes,
    )?;
    let mut settings_copies = settings::prepare(&policy.copies, &facts.net_policy, &ctx.home, &mut policy.notes);
    gemini_settings_copy(&scanned.config, &ctx.home, &env.vars, &mut settings_copies);
    for note in &policy.notes {
        debug(note);
    }
    for warning in &settings_copies.warnings {
        eprintln!("{warning}");
    }
    let command: Vec<OsString> = if options.command.is_empty() {
        vec![std::env::var_os("SHELL").filter(|shell| !shell.is_empty()).unwrap_or_else(|| "/bin/sh".into())]
    } else {
        options.command.to_vec()
    };
    let self_exe = std::env::current_exe().context("cannot find the agent-sandbox binary itself")?;
    let bwrap = programs::find_bwrap(ctx, &policy.mounts, &programs::host_path(ctx, &policy.mounts))?;
    let wrapped = commands.iter().any(|wrapped| command[0] == *wrapped.name);
    if !wrapped {
        if let Err(why) = programs::find_inside(&command[0], path_var.as_deref(), &ctx.cwd, &policy.mounts) {
            return Ok(Err(why));
        }
    }
    let agent = Path::new(&command[0]).file_name().map_or("?".into(), |name| name.to_string_lossy().into_owned());
    Ok(Ok(Decision { env, path_var, commands, settings_copies, command, agent, self_exe, bwrap }))
}

/// The environment filter's result, the checks' `PATH`, and the variables the sandbox
/// sets itself: the prompt's marker, Claude Code's state directory, the proxy, the hook
/// managers' skip switches. Each dropped or added variable is a note.
fn environment(facts: &Facts, scanned: &mut Scanned, debug: &dyn Fn(&str)) -> Result<Environment> {
    let (ctx, policy) = (&facts.ctx, &mut scanned.policy);
    let filter = policy::env::EnvFilter::new(&scanned.config)?;
    let (mut env, dropped) = filter.apply(std::env::vars_os());
    // The checks search only directories the agent cannot write: an `sh`, `npm` or
    // `pytest` planted in `node_modules/.bin` would pass every check.
    let check_path = env.iter().find(|(name, _)| name == "PATH").map(|(_, value)| {
        let search = programs::checks_path(value, ctx, &policy.mounts);
        for line in search.dropped_lines() {
            debug(&format!("checks: PATH entry {line} not searched by the checks"));
        }
        search
    });
    // `agent-sandbox check` works inside without knowing where the binary came from.
    if let Some((_, path)) = env.iter_mut().find(|(name, _)| name == "PATH") {
        path.push(":");
        path.push(sandbox::plan::RUNTIME_DIR);
    }
    for gone in &dropped {
        policy.notes.push(format!("env: {} dropped ({} {})", gone.name, gone.policy, gone.pattern));
    }
    // A visible marker in the prompt: Debian's and Ubuntu's bash.bashrc show
    // `($debian_chroot)`; other shells read PS1.
    env.retain(|(name, _)| name != "debian_chroot");
    env.push(("debian_chroot".into(), "agent-sandbox".into()));
    if !env.iter().any(|(name, _)| name == "PS1") {
        env.push(("PS1".into(), "(agent-sandbox) $ ".into()));
    }
    if let Some(state) = &facts.claude_state {
        env.retain(|(name, _)| name != crate::claude_state::CONFIG_DIR_VAR);
        env.push((crate::claude_state::CONFIG_DIR_VAR.into(), state.config_dir.clone().into_os_string()));
        policy.notes.push(format!(
            "agents: Claude Code keeps ~/.claude.json in {} inside ({}), copied back at the end",
            state.config_dir.display(),
            crate::claude_state::CONFIG_DIR_VAR
        ));
    }
    // Qwen Code reads its system settings where this names them: ours, whatever the
    // host's environment says; Gemini CLI its user settings below `GEMINI_CLI_HOME`:
    // the home's, where the copy with the rules is.
    env.retain(|(var, _)| var != "QWEN_CODE_SYSTEM_SETTINGS_PATH" && var != "GEMINI_CLI_HOME");
    env.push(("QWEN_CODE_SYSTEM_SETTINGS_PATH".into(), runtime_layout::QWEN_SYSTEM_SETTINGS.into()));
    // Gemini CLI's and Qwen Code's Google sign-in opens a browser whose answer comes back
    // to a port on loopback: the sandbox's own loopback in a private network namespace,
    // which the browser outside never reaches. Without a browser they print the address
    // and ask for the code instead.
    if facts.net_policy.mode != config::Network::On && !env.iter().any(|(name, _)| name == "NO_BROWSER") {
        env.push(("NO_BROWSER".into(), "true".into()));
        policy.notes.push("env: NO_BROWSER=true (a sign-in's browser cannot answer to the sandbox's loopback)".into());
    }
    if facts.net_policy.mode == config::Network::Allowlist {
        let proxy_env = netproxy::proxy_env(&runtime_layout::RuntimeLayout::inside().marker());
        env.retain(|(name, _)| !proxy_env.iter().any(|(proxy_name, _)| name == proxy_name));
        env.extend(proxy_env.into_iter().map(|(name, value)| (name.into(), value.into())));
    }
    let quiet_env = hook_manager_env(&ctx.project_root, &env);
    for (name, value) in &quiet_env {
        env.push((name.into(), value.into()));
        policy.notes.push(format!(
            "env: {name}={value} (husky's install would rewrite the read-only .husky/_; git's hooks still run: the \
             git guard removes it from git's environment)"
        ));
    }
    Ok(Environment { vars: env, dropped, check_path, quiet_env })
}

/// The skip switches the sandbox sets itself: `HUSKY=0` in a project with a `.husky`
/// directory (husky ≥ 5), unless the environment names `HUSKY` already. husky's `prepare`
/// script (every `npm install`/`npm ci`) rewrites `.husky/_`, which is read-only here
/// (its hooks run on the host), and fails the install; with `HUSKY=0` it skips that.
/// Hooks still run: the git guard removes the variable from git's environment (quietly,
/// since the sandbox set it), and the checks never get it.
fn hook_manager_env(project_root: &Path, env: &[(OsString, OsString)]) -> Vec<(String, String)> {
    let husky = std::fs::symlink_metadata(project_root.join(".husky")).is_ok_and(|meta| meta.is_dir());
    if husky && !env.iter().any(|(name, _)| name == "HUSKY") {
        return vec![("HUSKY".to_owned(), "0".to_owned())];
    }
    Vec::new()
}

/// The guards' settings as the runtime directory holds them, and what the checks of a
/// commit run with.
pub(crate) struct Guards {
    pub(crate) git_settings: String,
    pub(crate) hook_settings: guard_settings::HookGuardSettings,
    /// The checks' environment: the sandbox's, with the checks' `PATH` and without the
    /// sandbox's own skip switches.
    pub(crate) check_env: Vec<(OsString, OsString)>,
    /// What login shells source: the sandbox's `PATH`.
    pub(crate) profile: String,
    pub(crate) tool_settings: String,
    pub(crate) claude_managed: String,
    pub(crate) codex_managed: String,
    /// Gemini CLI's, Qwen Code's and OpenCode's managed files (`runtime_layout::AGENT_MANAGED`
    /// names, contents).
    pub(crate) agent_managed: Vec<(&'static str, String)>,
}

/// The guards' settings. Decided only for a real run (the prepare stage asks), so that
/// `--dry-run` stops on nothing it did not stop on before: tool rules that do not parse
/// stop a real start only.
pub(crate) fn guards(facts: &Facts, scanned: &Scanned, decision: &Decision) -> Result<Guards> {
    let (ctx, config, env) = (&facts.ctx, &scanned.config, &decision.env);
    // The user's global git config as it is now: what the hook guard's git reads, never a
    // file the agent makes in the scratch home.
    let xdg_config = config::xdg_dir(&ctx.home, "XDG_CONFIG_HOME", ".config");
    let pinned_global = [ctx.home.join(".gitconfig"), xdg_config.join("git/config")]
        .into_iter()
        .find(|path| path.is_file())
        .map(|path| path.to_string_lossy().into_owned());
    let git_settings = guard_settings::GitGuardSettings {
        allow_branch_deletion: config.git_allow_branch_deletion.value,
        allow_plumbing_commits: config.git_allow_plumbing_commits.value,
        common_dir: facts.repo.as_ref().map(|repo| repo.common_dir.clone()),
        hooks_path: facts.repo.as_ref().and_then(|repo| repo.hooks_path.clone()),
        global_config: pinned_global.clone(),
        quiet_env: env.quiet_env.clone(),
    }
    .to_json()
    .context("writing the git guard's settings (the repository's path must be UTF-8)")?;
    let mut hook_settings = guard_settings::HookGuardSettings::from_config(config);
    hook_settings.masked_paths = scanned
        .masks
        .iter()
        .filter_map(|mask| mask.path.strip_prefix(&ctx.project_root).ok())
        .map(|rel| rel.to_string_lossy().into_owned())
        .collect();
    // The checks search only the kept PATH entries, and get the environment without the
    // sandbox's own skip switches.
    let check_env: Vec<(OsString, OsString)> = env
        .vars
        .iter()
        .filter(|(name, _)| !env.quiet_env.iter().any(|(quiet, _)| name.to_str() == Some(quiet)))
        .map(|(name, value)| match &env.check_path {
            Some(search) if name == "PATH" => (name.clone(), search.joined()),
            _ => (name.clone(), value.clone()),
        })
        .collect();
    hook_settings.check_env = check_env
        .iter()
        .filter_map(|(name, value)| Some((name.to_str()?.to_owned(), value.to_str()?.to_owned())))
        .collect();
    hook_settings.check_path_dropped = env.check_path.as_ref().map(|search| search.dropped_lines()).unwrap_or_default();
    hook_settings.global_config = pinned_global.unwrap_or_else(|| "/dev/null".to_owned());
    // Login shells get the sandbox's PATH back (not the host's, which may name what the
    // env filter dropped).
    let profile = decision
        .path_var
        .as_ref()
        .map_or(String::new(), |path| format!("export PATH={}\n", util::single_quoted(&path.to_string_lossy())));
    let (tool_settings, claude_managed, codex_managed) = tool_guard_files(config)?;
    let agent_managed = agent_managed_files(config)?;
    Ok(Guards {
        git_settings,
        hook_settings,
        check_env,
        profile,
        tool_settings,
        claude_managed,
        codex_managed,
        agent_managed,
    })
}

/// Gemini CLI's user settings inside: a read-only copy of the user's
/// `~/.gemini/settings.json` with `tools.exclude`/`mcp.excluded` merged in, and the
/// sign-in method when the user's names none (`gemini_auth`), shown where Gemini CLI
/// reads it (it ignores a system settings file unless it and its parents are root's,
/// which nothing is inside an unprivileged sandbox). Over the guard's read-only mount of
/// the same file; made when there are rules or when `~/.gemini` is kept. Rules that do
/// not parse are left to the guards' check (a real start stops there); a settings file
/// that is not JSON(C) is shown as it is, the rules unenforced, said so.
fn gemini_settings_copy(
    config: &config::Config,
    home: &Path,
    env: &[(OsString, OsString)],
    copies: &mut settings::Copies,
) {
    let settings = guard_settings::ToolGuardSettings::from_config(config);
    let Ok(disallowed) =
        settings.disallowed.iter().map(|text| toolguard::Rule::parse(text)).collect::<Result<Vec<_>, _>>()
    else {
        return;
    };
    let rules = !disallowed.is_empty() || settings.read_only;
    let kept = home.join(".gemini").symlink_metadata().is_ok_and(|meta| meta.is_dir());
    if !rules && !kept {
        return;
    }
    let path = home.join(".gemini/settings.json");
    // The user's file: read-only inside (the agent guard), read without following a
    // link and never a special file.
    let existing =
        util::fs::read_regular_nofollow(&path, 1 << 20).ok().map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    let tools = toolguard::agents::Tools { disallowed: &disallowed, read_only: settings.read_only };
    let document = match toolguard::agents::gemini(&tools, existing.as_deref()) {
        Ok(plan) => plan.document.unwrap_or_default(),
        Err(why) => {
            if rules {
                copies.warnings.push(format!(
                    "agent-sandbox: warning: {} is {why}: tools.disallowed and tools.readOnly are not enforced in \
                     Gemini CLI",
                    path.display()
                ));
            }
            return;
        }
    };
    let mut document: serde_json::Value = serde_json::from_str(&document).unwrap_or_default();
    let sign_in = crate::gemini_auth::sign_in(&document, env);
    if let Some(method) = sign_in {
        crate::gemini_auth::select(&mut document, method);
    }
    if !rules && sign_in.is_none() {
        return;
    }
    copies.paths.push(path);
    copies.texts.push(serde_json::to_string_pretty(&document).unwrap_or_default());
}

/// `tools.*` as Qwen Code's and OpenCode's own managed configuration
/// (`toolguard::agents`), each merged into the host's own file when there is one.
fn agent_managed_files(config: &config::Config) -> Result<Vec<(&'static str, String)>> {
    let settings = guard_settings::ToolGuardSettings::from_config(config);
    let disallowed: Vec<toolguard::Rule> = settings
        .disallowed
        .iter()
        .map(|text| toolguard::Rule::parse(text))
        .collect::<Result<_, _>>()
        .map_err(anyhow::Error::msg)?;
    let tools = toolguard::agents::Tools { disallowed: &disallowed, read_only: settings.read_only };
    let mut files = Vec::new();
    for (name, path) in runtime_layout::AGENT_MANAGED {
        let existing = host_file(path)?;
        let plan = match path {
            runtime_layout::QWEN_SYSTEM_SETTINGS => toolguard::agents::qwen(&tools, existing.as_deref()),
            _ => toolguard::agents::opencode(&tools, existing.as_deref()),
        }
        .map_err(|why| anyhow::anyhow!("{path}: {why} (the agent would not read it either; fix or remove it)"))?;
        files.push((name, plan.document.unwrap_or_default()));
    }
    Ok(files)
}

/// The host's own managed file at `path`: one this user cannot read, the agent (running
/// as this user) could not read either, and ours takes its place.
fn host_file(path: &str) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if matches!(err.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied) => {
            Ok(None)
        }
        Err(err) => Err(err).with_context(|| format!("reading {path} (the agent's managed configuration)")),
    }
}

/// The tool guard's settings and the agents' managed configuration that runs it before
/// every tool call (merged into the host's own, when it has some). Rules that do not
/// parse stop the start: a guard that would deny nothing must not look configured.
fn tool_guard_files(config: &config::Config) -> Result<(String, String, String)> {
    let settings = guard_settings::ToolGuardSettings::from_config(config);
    toolguard::Guard::new(&settings.disallowed, settings.read_only).map_err(anyhow::Error::msg)?;
    let command = format!("{} tool-guard", runtime_layout::RuntimeLayout::inside().marker().display());
    let claude = toolguard::claude_managed_settings(
        host_file(runtime_layout::CLAUDE_MANAGED_SETTINGS)?.as_deref(),
        &format!("{command} --agent claude"),
    )
    .map_err(|why| {
        anyhow::anyhow!(
            "{}: {why} (Claude Code would not read it either; fix or remove it)",
            runtime_layout::CLAUDE_MANAGED_SETTINGS
        )
    })?;
    let codex = toolguard::codex_requirements(
        host_file(runtime_layout::CODEX_REQUIREMENTS)?.as_deref(),
        &format!("{command} --agent codex"),
    );
    Ok((settings.to_json(), claude, codex))
}
