//! The copy of the project's refs and objects a push is checked and sent from, on the
//! host (in the session's push directory) and in a container (root's). The agent
//! writes its repository while the push runs: git reads object files without checking
//! their hashes, so an object swapped between the checks and the push would be checked
//! as one thing and sent as another, and git following the agent's symlinks in `.git`
//! would read (and print: `unexpected line in .git/packed-refs: …`) or write files
//! elsewhere. So the project's repository is read once, by an `upload-pack` (the
//! reader), and everything it sends is stored by index-pack, which hashes every object:
//! the checks and the push see only the mirror, whose objects are what their names say.
//! The mirror's configuration is the project's `.git/config` (the user's: read-only in
//! every sandbox) under settings of the mirror's own, which win.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

/// A mirror at `path`, worked on with `git` in the environment `env`.
pub struct Mirror<'a> {
    pub path: &'a Path,
    pub git: &'a Path,
    pub env: &'a [(OsString, OsString)],
    /// The command that reads the project's repository (`--upload-pack`): git clears
    /// `-c` options and git's own variables for a local transport, so it carries its own.
    pub reader: String,
}

/// A git command that failed: its arguments and what it said.
#[derive(Debug)]
pub struct Failed {
    pub command: String,
    pub stderr: String,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`git {}` failed: {}", self.command, self.stderr)
    }
}

/// The reader's command: `prefix` (e.g. a change of user), then git's `upload-pack`
/// with replace refs and grafts off and any owner's repository served.
pub fn reader(prefix: &str, git: &str, home: Option<&str>) -> String {
    let home = home.map(|home| format!("HOME={home} ")).unwrap_or_default();
    format!(
        "{prefix}/usr/bin/env {home}GIT_NO_REPLACE_OBJECTS=1 GIT_GRAFT_FILE=/dev/null {git} -c safe.directory='*' \
         -c advice.graftFileDeprecated=false -c uploadpack.allowAnySHA1InWant=true upload-pack"
    )
}

/// The mirror's configuration: the project's file first, the mirror's own settings
/// after it (the later value wins): bare, no hooks, no fsmonitor, no automatic gc, the
/// local reader allowed.
pub fn config_text(project_config: &Path) -> String {
    let quoted = format!("\"{}\"", project_config.display().to_string().replace('\\', "\\\\").replace('"', "\\\""));
    format!(
        "[include]\n\tpath = {quoted}\n[core]\n\trepositoryformatversion = 0\n\tbare = true\n\thooksPath = /dev/null\n\
         \tfsmonitor = false\n[gc]\n\tauto = 0\n[advice]\n\tgraftFileDeprecated = false\n[protocol \"file\"]\n\
         \tallow = always\n"
    )
}

impl Mirror<'_> {
    /// git in the mirror; its stdout.
    pub fn git(&self, args: &[&str]) -> Result<Vec<u8>, Failed> {
        let failed = |stderr: String| Failed { command: args.join(" "), stderr };
        let out = Command::new(self.git)
            .arg("--git-dir")
            .arg(self.path)
            .args(args)
            .current_dir(self.path)
            .env_clear()
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .output()
            .map_err(|err| failed(err.to_string()))?;
        if !out.status.success() {
            return Err(failed(String::from_utf8_lossy(&out.stderr).trim().to_owned()));
        }
        Ok(out.stdout)
    }

    /// Creates the mirror in `path` (which may exist, empty) if it is not one yet, and
    /// writes its configuration over the project's (`project_config`: its `.git/config`,
    /// or a copy of it the agent cannot change).
    pub fn configure(&self, project_config: &Path) -> Result<(), Failed> {
        let failed = |what: &str, err: std::io::Error| Failed { command: what.to_owned(), stderr: err.to_string() };
        if !self.path.join("HEAD").exists() {
            std::fs::create_dir_all(self.path).map_err(|err| failed("init", err))?;
            self.git(&["init", "--bare", "-q"])?;
        }
        util::fs::atomic_write(&self.path.join("config"), config_text(project_config).as_bytes(), 0o644)
            .map_err(|err| failed("config", err))
    }

    /// The files git reads the mirror's configuration from, besides its own and the
    /// project's (`project_config`).
    pub fn other_config_files(&self, project_config: &Path) -> Result<Vec<PathBuf>, Failed> {
        let listing = self.git(&["config", "--list", "--show-origin", "--includes", "-z"])?;
        let own = [project_config.to_path_buf(), self.path.join("config")];
        let mut files: Vec<PathBuf> = listing
            .split(|b| *b == 0)
            .step_by(2)
            .filter_map(|origin| String::from_utf8_lossy(origin).strip_prefix("file:").map(PathBuf::from))
            .filter(|file| !own.contains(file))
            .collect();
        files.dedup();
        Ok(files)
    }

    /// Copies the project's branches, tags, remote-tracking refs and `HEAD` (the branch
    /// checked out, or the detached commit) into the mirror, removing what the project
    /// no longer has.
    pub fn fetch(&self, top: &Path) -> Result<(), Failed> {
        let source = format!("file://{}", top.join(".git").display());
        self.git(&[
            "fetch",
            "--quiet",
            "--no-tags",
            "--prune",
            "--no-write-fetch-head",
            "--upload-pack",
            &self.reader,
            &source,
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
            "+refs/remotes/*:refs/remotes/*",
        ])?;
        // Read without following a link, never blocking on a FIFO.
        let head = util::fs::read_regular_nofollow(&top.join(".git/HEAD"), 4096).unwrap_or_default();
        let head = String::from_utf8_lossy(&head).trim().to_owned();
        if let Some(branch) = head.strip_prefix("ref: ").filter(|name| name.starts_with("refs/heads/")) {
            if self.git(&["check-ref-format", branch]).is_ok() {
                self.git(&["symbolic-ref", "HEAD", branch])?;
            }
        } else if head.len() >= 40 && head.bytes().all(|b| b.is_ascii_hexdigit()) {
            let refspec = format!("+{head}:refs/agent-sandbox/head");
            let fetched = self.git(&[
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                "--upload-pack",
                &self.reader,
                &source,
                &refspec,
            ]);
            if fetched.is_ok() {
                self.git(&["update-ref", "--no-deref", "HEAD", &head])?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mirror of a real repository holds its refs and HEAD, and nothing swapped in
    /// its object store reaches the mirror under the swapped object's name.
    #[test]
    fn a_mirror_holds_the_projects_refs_and_only_objects_that_are_what_they_say() {
        let dir = tempfile::tempdir().expect("tempdir");
        let top = dir.path().join("p");
        let git = |args: &[&str]| {
            let out = Command::new("git").args(args).current_dir(&top).output().expect("git");
            assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        std::fs::create_dir_all(&top).expect("mkdir");
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(top.join("a"), "FAIL\n").expect("write");
        git(&["add", "a"]);
        git(&["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "one"]);
        git(&["tag", "v1"]);
        git(&["switch", "-q", "-c", "topic"]);
        let env: Vec<(OsString, OsString)> = std::env::vars_os().filter(|(name, _)| name == "PATH").collect();
        let path = dir.path().join("mirror.git");
        let mirror = Mirror { path: &path, git: Path::new("git"), env: &env, reader: reader("", "git", None) };
        mirror.configure(&top.join(".git/config")).expect("configure");
        assert!(mirror
            .other_config_files(&top.join(".git/config"))
            .expect("config")
            .iter()
            .all(|file| !file.starts_with(&top)));
        mirror.fetch(&top).expect("fetch");
        let refs =
            String::from_utf8_lossy(&mirror.git(&["for-each-ref", "--format=%(refname)"]).expect("refs")).into_owned();
        assert_eq!(refs.lines().collect::<Vec<_>>(), ["refs/heads/main", "refs/heads/topic", "refs/tags/v1"]);
        assert_eq!(
            String::from_utf8_lossy(&mirror.git(&["symbolic-ref", "HEAD"]).expect("head")).trim(),
            "refs/heads/topic"
        );
        // A new commit's blob swapped in the project's store (git reads loose objects
        // without checking their hash) is not taken: the fetch fails instead. With the
        // object restored, it is, and a branch the project no longer has goes.
        git(&["switch", "-q", "main"]);
        git(&["branch", "-q", "-D", "topic"]);
        std::fs::write(top.join("a"), "FAIL again\n").expect("write");
        git(&["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qam", "two"]);
        let blob = git(&["rev-parse", "HEAD:a"]);
        let file = top.join(".git/objects").join(&blob[..2]).join(&blob[2..]);
        let other = dir.path().join("other");
        std::fs::create_dir_all(&other).expect("mkdir");
        let out = Command::new("git").args(["init", "-q"]).current_dir(&other).output().expect("git");
        assert!(out.status.success());
        std::fs::write(other.join("good"), "GOOD ag\n").expect("write");
        let good = Command::new("git").args(["hash-object", "-w", "good"]).current_dir(&other).output().expect("git");
        let good = String::from_utf8_lossy(&good.stdout).trim().to_owned();
        let good_file = other.join(".git/objects").join(&good[..2]).join(&good[2..]);
        let original = dir.path().join("original");
        std::fs::rename(&file, &original).expect("mv");
        std::fs::copy(&good_file, &file).expect("swap");
        assert_eq!(git(&["cat-file", "-p", &blob]), "GOOD ag", "git itself reads the swapped object");
        let err = mirror.fetch(&top).expect_err("a swapped object is not stored under another name");
        assert!(!err.stderr.is_empty(), "{err}");
        assert!(mirror.git(&["cat-file", "-e", &blob]).is_err(), "the swapped object is not in the mirror");
        std::fs::remove_file(&file).expect("rm");
        std::fs::rename(&original, &file).expect("restore");
        mirror.fetch(&top).expect("fetch");
        assert_eq!(String::from_utf8_lossy(&mirror.git(&["cat-file", "-p", &blob]).expect("blob")), "FAIL again\n");
        let refs =
            String::from_utf8_lossy(&mirror.git(&["for-each-ref", "--format=%(refname)"]).expect("refs")).into_owned();
        assert_eq!(refs.lines().collect::<Vec<_>>(), ["refs/heads/main", "refs/tags/v1"]);
    }
}
