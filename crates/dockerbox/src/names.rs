//! Every name seed 002 gives a workspace's Docker objects, derived from the absolute
//! workspace path alone (pure; nothing here talks to Docker or reads files):
//! - hash: the first 12 hex digits of the MD5 of the path (as the seed's original does),
//!   so clones at different paths get different sandboxes on one machine;
//! - container: `agent-sandbox-<repoName>-<hash>` (bind mode) or
//!   `agent-sandbox-<repoName>-<branchSan>-<hash>` (branch mode);
//! - volumes: `agent-sbx-repo-<hash>` (the repo shelf), `agent-sandbox-<hash>-history`,
//!   and the shared `agent-sandbox-claude-code-config` and `agent-sandbox-codex-config`;
//! - the per-repo image: `agent-sandbox-<repoName>-<hash>:latest` (lower case: Docker's
//!   rule for image names).

use std::path::Path;

use md5::{Digest, Md5};

pub use devcontainer::{CLAUDE_VOLUME, CODEX_VOLUME};

/// A workspace as the names see it: its absolute path, the last component and the hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    pub path: String,
    pub repo_name: String,
    pub hash: String,
}

impl Workspace {
    /// `path` must be absolute (the caller canonicalizes it): the hash is of its text.
    pub fn new(path: &Path) -> Workspace {
        let text = path.to_string_lossy().into_owned();
        let repo_name =
            path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_else(|| "root".into());
        Workspace { hash: path_hash(&text), path: text, repo_name }
    }

    /// The container's name in bind mode (`branch` is `None`) or branch mode.
    pub fn container(&self, branch: Option<&str>) -> String {
        let repo = name_part(&self.repo_name);
        match branch {
            None => format!("agent-sandbox-{repo}-{}", self.hash),
            Some(branch) => format!("agent-sandbox-{repo}-{}-{}", name_part(&sanitize_branch(branch)), self.hash),
        }
    }

    /// The per-repo image built from `.agent-sandbox/Dockerfile`.
    pub fn image(&self) -> String {
        format!("agent-sandbox-{}-{}:latest", name_part(&self.repo_name).to_ascii_lowercase(), self.hash)
    }

    /// The repo-shelf volume (one per host repository path, shared by its branch sandboxes).
    pub fn repo_shelf_volume(&self) -> String {
        format!("agent-sbx-repo-{}", self.hash)
    }

    /// The session repository of this workspace's bind-mode sandbox (`hostpush::home`).
    pub fn session_git_volume(&self) -> String {
        format!("{}-{}", devcontainer::SESSION_GIT_VOLUME, self.hash)
    }

    /// The bash history volume of this workspace.
    pub fn history_volume(&self) -> String {
        format!("agent-sandbox-{}-history", self.hash)
    }

    /// Where the host checkout is mounted inside.
    pub fn mount_point(&self) -> String {
        format!("/workspace/{}", self.repo_name)
    }
}

/// The first 12 hex digits of the MD5 of `text`.
pub fn path_hash(text: &str) -> String {
    let digest = Md5::digest(text.as_bytes());
    digest.iter().take(6).map(|byte| format!("{byte:02x}")).collect()
}

/// The seed's sanitization for worktree directory names: `/` and whitespace become `__`.
pub fn sanitize_branch(branch: &str) -> String {
    branch.chars().map(|c| if c == '/' || c.is_whitespace() { "__".to_owned() } else { c.to_string() }).collect()
}

/// The base image of a tag.
pub fn base_image(tag: &str) -> String {
    format!("agent-sandbox-base:{tag}")
}

/// Docker allows `[a-zA-Z0-9_.-]` in container names: anything else becomes `_`.
fn name_part(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || "_.-".contains(c) { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_hash_is_md5_of_the_path_text() {
        // Reference values: `printf %s PATH | md5sum | cut -c1-12`.
        let table = [("", "d41d8cd98f00"), ("/home/me/src/app", "c6786c0286a6"), ("/home/me/src/app/", "92f64dfb2269")];
        for (path, want) in table {
            assert_eq!(path_hash(path), want, "{path:?}");
        }
    }

    #[test]
    fn names_of_a_workspace() {
        let workspace = Workspace::new(Path::new("/home/me/src/App"));
        let hash = path_hash("/home/me/src/App");
        assert_eq!(
            workspace,
            Workspace { path: "/home/me/src/App".into(), repo_name: "App".into(), hash: hash.clone() }
        );
        let got = [
            workspace.container(None),
            workspace.container(Some("feature/login page")),
            workspace.image(),
            workspace.repo_shelf_volume(),
            workspace.history_volume(),
            workspace.mount_point(),
        ];
        let want = [
            format!("agent-sandbox-App-{hash}"),
            format!("agent-sandbox-App-feature__login__page-{hash}"),
            format!("agent-sandbox-app-{hash}:latest"),
            format!("agent-sbx-repo-{hash}"),
            format!("agent-sandbox-{hash}-history"),
            "/workspace/App".to_owned(),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn branch_sanitization_follows_the_seed_and_names_stay_valid() {
        let table = [
            ("main", "main", "main"),
            ("feature/x", "feature__x", "feature__x"),
            ("a b\tc", "a__b__c", "a__b__c"),
            ("fix/ü@{1}", "fix__ü@{1}", "fix_____1_"),
        ];
        let workspace = Workspace::new(Path::new("/r/repo"));
        for (branch, worktree_dir, in_name) in table {
            assert_eq!(sanitize_branch(branch), worktree_dir, "{branch:?}");
            assert_eq!(workspace.container(Some(branch)), format!("agent-sandbox-repo-{in_name}-{}", workspace.hash));
        }
    }

    #[test]
    fn clones_at_different_paths_get_different_names() {
        let one = Workspace::new(Path::new("/a/repo"));
        let two = Workspace::new(Path::new("/b/repo"));
        assert_ne!(one.container(None), two.container(None));
        assert_ne!(one.repo_shelf_volume(), two.repo_shelf_volume());
        assert_ne!(one.history_volume(), two.history_volume());
    }
}
