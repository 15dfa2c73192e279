//! The shim that stands in for a hook: rendered from the templates in the repository's
//! `hooks/` directory with the installing binary's path filled in, recognised by its
//! marker line, and the way to run the hook it displaced as git would have run it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{InstallError, CHAINED_SUFFIX, MARKER};

const PRE_COMMIT: &str = include_str!("../../../hooks/pre-commit");
const PRE_PUSH: &str = include_str!("../../../hooks/pre-push");

/// Where the templates want the install-time path of agent-sandbox, shell-quoted.
const PLACEHOLDER: &str = "@AGENT_SANDBOX@";

/// The shim for `hook` (one of [`crate::HOOKS`]) that falls back to `agent_sandbox`.
pub(crate) fn render(hook: &str, agent_sandbox: &Path) -> Result<String, InstallError> {
    if !agent_sandbox.is_absolute() {
        return Err(InstallError::RelativeBinary { path: agent_sandbox.to_path_buf() });
    }
    let Some(path) = agent_sandbox.to_str() else {
        return Err(InstallError::NonUtf8Binary { path: agent_sandbox.to_path_buf() });
    };
    let template = match hook {
        "pre-commit" => PRE_COMMIT,
        "pre-push" => PRE_PUSH,
        other => unreachable!("no shim template for {other}: HOOKS and the templates disagree"),
    };
    Ok(template.replace(PLACEHOLDER, &util::single_quoted(path)))
}

/// True when `contents` is a shim: it has the marker line.
pub(crate) fn has_marker(contents: &[u8]) -> bool {
    contents.split(|byte| *byte == b'\n').any(|line| line == MARKER.as_bytes())
}

pub(crate) fn chained_path(hooks_dir: &Path, hook: &str) -> PathBuf {
    hooks_dir.join(format!("{hook}{CHAINED_SUFFIX}"))
}

pub(crate) fn chained_hook(hooks_dir: &Path, hook: &str) -> Option<PathBuf> {
    let path = chained_path(hooks_dir, hook);
    let meta = std::fs::metadata(&path).ok()?;
    (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(path)
}

/// Mirrors the end of the shim templates: keep the two in step.
pub(crate) fn chained_command(hooks_dir: &Path, hook: &str) -> Option<Command> {
    let chained = chained_hook(hooks_dir, hook)?;
    let contents = std::fs::read(&chained).ok()?;
    let first_line = contents.split(|byte| *byte == b'\n').next().unwrap_or_default();
    let shell = match first_line {
        b"#!/bin/sh" => Some("/bin/sh"),
        b"#!/usr/bin/env sh" => Some("sh"),
        b"#!/bin/bash" => Some("/bin/bash"),
        b"#!/usr/bin/env bash" => Some("bash"),
        _ => None,
    };
    Some(match shell {
        Some(shell) => {
            let mut command = Command::new(shell);
            command.arg("-c").arg(format!(". \"$0{CHAINED_SUFFIX}\"")).arg(hooks_dir.join(hook));
            command
        }
        None => Command::new(chained),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_quotes_the_path_and_keeps_the_marker() {
        let shim = render("pre-push", Path::new("/opt/it's here/agent-sandbox")).expect("render");
        assert!(shim.contains(r#"elif [ -x '/opt/it'\''s here/agent-sandbox' ]; then"#), "{shim}");
        assert!(shim.contains(r#"    AS='/opt/it'\''s here/agent-sandbox'"#), "{shim}");
        assert!(shim.contains(r#"exec "$AS" hook pre-push "$@""#), "{shim}");
        assert!(!shim.contains(PLACEHOLDER));
        assert!(has_marker(shim.as_bytes()));
    }

    #[test]
    fn render_refuses_relative_paths() {
        let err = render("pre-commit", Path::new("bin/agent-sandbox")).expect_err("relative");
        assert_eq!(
            err.to_string(),
            "the agent-sandbox path bin/agent-sandbox is not absolute (pass the absolute path of the agent-sandbox binary)"
        );
    }

    #[test]
    fn marker_must_be_a_whole_line() {
        assert!(has_marker(b"#!/bin/sh\n# agent-sandbox hook guard\nexit 0\n"));
        assert!(!has_marker(b"#!/bin/sh\necho '# agent-sandbox hook guard'\n"));
        assert!(!has_marker(b"#!/bin/sh\n# agent-sandbox hook guard v2\n"));
    }

    #[test]
    fn templates_differ_only_in_the_hook_name() {
        assert_eq!(PRE_COMMIT.replace("pre-commit", "pre-push"), PRE_PUSH);
    }
}
