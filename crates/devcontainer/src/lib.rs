//! `agent-sandbox devcontainer init`: the `.devcontainer/` that gives VS Code's
//! "Reopen in Container" the same guard rails as `exec`.
//!
//! [`document`] is the pure plan (the whole devcontainer.json text, with a comment on
//! each guard); [`merge`] folds it into a user's existing file through jsonc-parser's
//! CST, so their comments, formatting and keys stay; [`init`] is the executor: it
//! never overwrites a user's file without `force`, and then keeps a backup.

use std::path::{Path, PathBuf};

use jsonc_parser::cst::{CstInputValue, CstNode, CstObject, CstRootNode};
use serde_json::Value;

/// The per-repo Dockerfile, exactly seed 002's template.
pub const REPO_DOCKERFILE: &str = include_str!("../../../devcontainer/repo/Dockerfile");

/// Where the workspace is mounted inside the container.
pub const WORKSPACE: &str = "/workspace";

/// Paths every devcontainer protects besides the configuration's `checks.protectedPaths`:
/// git's hooks and config (a planted `core.fsmonitor` or hook would run on the host's
/// next git command) and `.devcontainer` itself (its `initializeCommand` runs on the host).
pub const ALWAYS_PROTECTED: &[&str] = &[".git/hooks", ".git/config", ".devcontainer"];

/// The firewall command the container runs on every start, and the only one sudo allows.
pub const FIREWALL_APPLY: &str = "sudo /usr/local/bin/agent-sandbox firewall apply";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `agent-sandbox-base:<tag>` is the image the Dockerfile builds on.
    pub base_tag: String,
    /// Paths relative to the workspace, mounted read-only inside.
    pub protected: Vec<Protected>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    pub path: String,
    /// Whether `initializeCommand` creates it (as a directory) when missing, so the
    /// bind mount has a source. Files are protected only if they exist.
    pub create_dir: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: not valid JSONC: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {conflicts} (run again with --force to replace these; a backup is kept)", conflicts = .conflicts.join("; "))]
    Conflicts { path: PathBuf, conflicts: Vec<String> },
    #[error("{path} exists and differs from agent-sandbox's template (run again with --force to replace it; a backup is kept)")]
    Differs { path: PathBuf },
    #[error("protected path {0:?} must be relative to the workspace and stay inside it")]
    BadPath(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The protected-path list for a workspace: [`ALWAYS_PROTECTED`] then `configured`,
/// each checked to stay inside the workspace. A path that exists as a file is mounted
/// as that file; a missing path whose name has no extension is treated as a directory
/// to create; a missing file is protected through its parent directory.
pub fn protected_paths(root: &Path, configured: &[String]) -> Result<Vec<Protected>, Error> {
    let mut out: Vec<Protected> = Vec::new();
    for raw in ALWAYS_PROTECTED.iter().map(|s| s.to_string()).chain(configured.iter().cloned()) {
        let path = raw.trim_end_matches('/').trim_start_matches("./").to_owned();
        if path.is_empty()
            || path.starts_with('/')
            || path.split('/').any(|part| part == ".." || part == "." || part.is_empty())
        {
            return Err(Error::BadPath(raw));
        }
        if path.starts_with(".git/") && !root.join(".git").is_dir() {
            continue; // not a repository, or `.git` is a file (worktree): nothing of git's here
        }
        let on_disk = root.join(&path);
        let entry = if on_disk.is_file() {
            Protected { path, create_dir: false }
        } else if on_disk.is_dir() || Path::new(&path).extension().is_none() || path.starts_with(".git/") {
            Protected { path, create_dir: true }
        } else {
            // A file not there yet (e.g. `.agent-precommit/user-context.json`): its
            // directory, so the agent cannot create it either.
            let parent = Path::new(&path).parent().map(|p| p.display().to_string()).unwrap_or_default();
            if parent.is_empty() {
                continue;
            }
            Protected { path: parent, create_dir: true }
        };
        if !out.iter().any(|seen| seen.path == entry.path) {
            out.push(entry);
        }
    }
    Ok(out)
}

fn quote(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// The whole generated devcontainer.json.
pub fn document(options: &Options) -> String {
    let mut mounts = String::new();
    for protected in &options.protected {
        mounts.push_str(&format!(
            "    {},\n",
            quote(&format!(
                "source=${{localWorkspaceFolder}}/{path},target={WORKSPACE}/{path},type=bind,readonly",
                path = protected.path
            ))
        ));
    }
    let mut dirs: Vec<String> =
        options.protected.iter().filter(|p| p.create_dir).map(|p| shell_quote(&p.path)).collect();
    if !dirs.iter().any(|dir| dir == ".agent-sandbox") {
        dirs.push(".agent-sandbox".into());
    }
    let initialize = format!("mkdir -p {}", dirs.join(" "));
    format!(
        r#"// Generated by `agent-sandbox devcontainer init`; edit freely, `init` merges into it.
{{
  "name": "agent-sandbox",
  // The per-repo image: FROM agent-sandbox-base:<tag> (build it with `cargo xtask build-base`).
  "build": {{
    "dockerfile": "Dockerfile",
    "args": {{ "BASE_IMAGE_TAG": {tag} }}
  }},
  "workspaceMount": "source=${{localWorkspaceFolder}},target={WORKSPACE},type=bind",
  "workspaceFolder": "{WORKSPACE}",
  // The agent works as the unprivileged `node`; sudo allows only the firewall.
  "remoteUser": "node",
  // The firewall needs these to install its rules; `node` never holds them.
  "capAdd": ["NET_ADMIN", "NET_RAW"],
  // Runs on the host before the container is created: the read-only mounts below
  // need their sources to exist.
  "initializeCommand": {initialize},
  // Applied as root on every start, from root-owned policy files only; the container
  // is not reported ready before it is.
  "postStartCommand": {{ "agent-sandbox-firewall": {firewall} }},
  "waitFor": "postStartCommand",
  "mounts": [
    // Protected paths: read-only inside, so hooks, git config, the sandbox's own
    // configuration and this directory cannot be changed by the agent.
{mounts}    // The project's firewall additions (.agent-sandbox/firewall.jsonc), read-only.
    "source=${{localWorkspaceFolder}}/.agent-sandbox,target=/etc/agent-sandbox/project,type=bind,readonly",
    // One set of volumes per workspace: shell history, Claude Code and Codex config.
    "source=agent-sandbox-history-${{devcontainerId}},target=/commandhistory,type=volume",
    "source=agent-sandbox-claude-${{devcontainerId}},target=/home/node/.claude,type=volume",
    "source=agent-sandbox-codex-${{devcontainerId}},target=/home/node/.codex,type=volume"
  ],
  // Only these variables: nothing from the host's environment (no tokens, no keys).
  "containerEnv": {{
    "CLAUDE_CONFIG_DIR": "/home/node/.claude",
    "CODEX_HOME": "/home/node/.codex",
    "HISTFILE": "/commandhistory/.bash_history"
  }},
  "customizations": {{
    "vscode": {{
      "extensions": ["anthropic.claude-code", "openai.chatgpt"]
    }}
  }}
}}
"#,
        tag = quote(&options.base_tag),
        initialize = quote(&initialize),
        firewall = quote(FIREWALL_APPLY),
    )
}

fn shell_quote(text: &str) -> String {
    if text.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b)) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// `existing` with every setting of `ours` merged in. Objects merge key by key, arrays
/// gain the elements they lack, equal values are left alone; a different scalar (or an
/// `image`/`dockerComposeFile`, which would replace our Dockerfile) is a conflict,
/// replaced only under `force`. A user's string `postStartCommand` is kept beside ours.
/// Returns the new text and the conflicts it replaced.
pub fn merge(existing: &str, ours: &str, force: bool, path: &Path) -> Result<(String, Vec<String>), Error> {
    let parse = |text: &str| {
        CstRootNode::parse(text, &Default::default())
            .map_err(|err| Error::Parse { path: path.to_path_buf(), message: err.to_string() })
    };
    let theirs_root = parse(existing)?;
    let ours_root = parse(ours)?;
    let ours_value = ours_root.to_serde_value().unwrap_or(Value::Null);
    let Some(theirs) = theirs_root.object_value() else {
        return Err(Error::Parse { path: path.to_path_buf(), message: "the top level is not an object".into() });
    };
    let Value::Object(ours_map) = ours_value else { unreachable!("our document is an object") };
    let mut conflicts = Vec::new();
    for key in ["image", "dockerComposeFile"] {
        if let Some(prop) = theirs.get(key) {
            conflicts.push(format!("\"{key}\" is set, and agent-sandbox's guard rails need its own image (\"build\")"));
            if force {
                prop.remove();
            }
        }
    }
    if let Some(prop) = theirs.get("postStartCommand") {
        let user = prop.value().and_then(|value| value.to_serde_value());
        if let Some(user @ (Value::String(_) | Value::Array(_))) = user {
            prop.set_value(CstInputValue::Object(vec![("user".into(), input(&user))]));
        }
    }
    merge_object(&theirs, &ours_map, "", force, &mut conflicts);
    if !conflicts.is_empty() && !force {
        return Err(Error::Conflicts { path: path.to_path_buf(), conflicts });
    }
    Ok((theirs_root.to_string(), conflicts))
}

fn merge_object(
    theirs: &CstObject,
    ours: &serde_json::Map<String, Value>,
    at: &str,
    force: bool,
    conflicts: &mut Vec<String>,
) {
    for (key, our_value) in ours {
        let here = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
        let Some(prop) = theirs.get(key) else {
            theirs.append(key, input(our_value));
            continue;
        };
        let their_node = prop.value();
        let their_value = their_node.as_ref().and_then(CstNode::to_serde_value).unwrap_or(Value::Null);
        match (our_value, &their_value) {
            (Value::Object(our_map), Value::Object(_)) => {
                if let Some(object) = prop.object_value() {
                    merge_object(&object, our_map, &here, force, conflicts);
                }
            }
            (Value::Array(our_items), Value::Array(their_items)) => {
                if let Some(array) = prop.array_value() {
                    for item in our_items.iter().filter(|item| !their_items.contains(item)) {
                        array.append(input(item));
                    }
                }
            }
            (ours, theirs) if ours == theirs => {}
            // The user's name for their container stays.
            _ if here == "name" => {}
            (ours, theirs) => {
                conflicts.push(format!("\"{here}\" is {theirs}, agent-sandbox needs {ours}"));
                if force {
                    prop.set_value(input(ours));
                }
            }
        }
    }
}

fn input(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(input).collect()),
        Value::Object(map) => CstInputValue::Object(map.iter().map(|(k, v)| (k.clone(), input(v))).collect()),
    }
}

/// What `init` did, a line per file.
#[derive(Debug, Default)]
pub struct Report {
    pub lines: Vec<String>,
}

/// Writes `.devcontainer/devcontainer.json` and `.devcontainer/Dockerfile` under `root`.
pub fn init(root: &Path, options: &Options, force: bool) -> Result<Report, Error> {
    let dir = root.join(".devcontainer");
    fs_err::create_dir_all(&dir)?;
    let mut report = Report::default();
    let json_path = dir.join("devcontainer.json");
    let ours = document(options);
    match fs_err::read_to_string(&json_path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            fs_err::write(&json_path, &ours)?;
            report.lines.push(format!("wrote {}", json_path.display()));
        }
        Err(err) => return Err(err.into()),
        Ok(existing) => {
            let (merged, replaced) = merge(&existing, &ours, force, &json_path)?;
            if merged == existing {
                report.lines.push(format!("{} already has every setting", json_path.display()));
            } else {
                let backup = backup(&json_path)?;
                fs_err::write(&json_path, &merged)?;
                report.lines.push(format!(
                    "merged agent-sandbox's settings into {} (previous version: {})",
                    json_path.display(),
                    backup.display()
                ));
                for conflict in replaced {
                    report.lines.push(format!("  replaced: {conflict}"));
                }
            }
        }
    }
    let dockerfile = dir.join("Dockerfile");
    match fs_err::read_to_string(&dockerfile) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            fs_err::write(&dockerfile, REPO_DOCKERFILE)?;
            report.lines.push(format!("wrote {}", dockerfile.display()));
        }
        Err(err) => return Err(err.into()),
        Ok(existing) if existing == REPO_DOCKERFILE => {
            report.lines.push(format!("{} is agent-sandbox's template", dockerfile.display()))
        }
        Ok(existing) if existing.lines().any(|line| line.trim_start().starts_with("FROM agent-sandbox-base:")) => {
            report.lines.push(format!("{} builds on agent-sandbox-base: kept as it is", dockerfile.display()))
        }
        Ok(_) if !force => return Err(Error::Differs { path: dockerfile }),
        Ok(_) => {
            let backup = backup(&dockerfile)?;
            fs_err::write(&dockerfile, REPO_DOCKERFILE)?;
            report.lines.push(format!("replaced {} (previous version: {})", dockerfile.display(), backup.display()));
        }
    }
    Ok(report)
}

/// Copies `path` to the first free `<name>.bak`, `<name>.bak.1`, …
fn backup(path: &Path) -> Result<PathBuf, Error> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut idx = 0;
    loop {
        let suffix = if idx == 0 { ".bak".to_owned() } else { format!(".bak.{idx}") };
        let candidate = path.with_file_name(format!("{name}{suffix}"));
        if !candidate.exists() {
            fs_err::copy(path, &candidate)?;
            return Ok(candidate);
        }
        idx += 1;
    }
}

#[cfg(test)]
mod tests;
