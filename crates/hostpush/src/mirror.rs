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

impl Failed {
    /// What git said last, its hints left out.
    pub fn last_line(&self) -> &str {
        self.stderr.lines().rfind(|line| !line.starts_with("hint:")).unwrap_or_default()
    }
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`git {}` failed: {}", self.command, self.stderr)
    }
}

/// The reader's command: `prefix` (e.g. a change of user, or [`view_prefix`]), then git's
/// `upload-pack` with replace refs and grafts off and any owner's repository served.
pub fn reader(prefix: &str, git: &str, home: Option<&str>) -> String {
    let home = home.map(|home| format!("HOME={home} ")).unwrap_or_default();
    format!(
        "{prefix}/usr/bin/env {home}GIT_NO_REPLACE_OBJECTS=1 GIT_GRAFT_FILE=/dev/null {git} -c safe.directory='*' \
         -c advice.graftFileDeprecated=false -c uploadpack.allowAnySHA1InWant=true upload-pack"
    )
}

/// The entries of the host's `/` a program needs to run: its binaries and libraries.
pub const SYSTEM_PATHS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache"];

/// One of [`SYSTEM_PATHS`] as the host has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemEntry {
    /// A directory or file, shown read-only.
    Bind(PathBuf),
    /// A link (`/bin` → `usr/bin`), made again as the same link.
    Link { path: PathBuf, target: PathBuf },
}

/// The host's [`SYSTEM_PATHS`] (those it has).
pub fn system_entries() -> Vec<SystemEntry> {
    SYSTEM_PATHS
        .iter()
        .map(Path::new)
        .filter_map(|path| {
            let meta = path.symlink_metadata().ok()?;
            if meta.file_type().is_symlink() {
                Some(SystemEntry::Link { path: path.to_path_buf(), target: std::fs::read_link(path).ok()? })
            } else {
                Some(SystemEntry::Bind(path.to_path_buf()))
            }
        })
        .collect()
}

/// The start of a reader's command that runs it in a view showing nothing of the host
/// but the system's programs ([`SystemEntry`]), `extra` (where git is installed, when
/// outside them) and, read-only, the git directories `shown`: a `commondir`, a gitfile
/// or a link in `.git` naming another of the user's repositories leads nowhere there.
/// No network, no capabilities, its own session and namespaces, and it dies with git.
pub fn view_prefix(bwrap: &Path, system: &[SystemEntry], extra: &[PathBuf], shown: &[PathBuf]) -> String {
    let binds: Vec<ViewBind> =
        shown.iter().map(|path| ViewBind { source: path.clone(), at: path.clone(), writable: false }).collect();
    let mut prefix: String = view_args(bwrap, system, extra, &binds)
        .iter()
        .map(|arg| util::single_quoted(arg))
        .collect::<Vec<_>>()
        .join(" ");
    prefix.push(' ');
    prefix
}

/// A directory a view shows (read-only unless `writable`) at `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewBind {
    pub source: PathBuf,
    pub at: PathBuf,
    pub writable: bool,
}

/// The view's bwrap command line up to and including `--` (see [`view_prefix`]):
/// `extra` read-only at their own paths, then `binds`.
pub fn view_args(bwrap: &Path, system: &[SystemEntry], extra: &[PathBuf], binds: &[ViewBind]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        bwrap.display().to_string(),
        "--unshare-all".into(),
        "--die-with-parent".into(),
        "--new-session".into(),
        "--cap-drop".into(),
        "ALL".into(),
        "--dev".into(),
        "/dev".into(),
        "--tmpfs".into(),
        "/tmp".into(),
    ];
    for entry in system {
        match entry {
            SystemEntry::Bind(path) => {
                args.extend(["--ro-bind".into(), path.display().to_string(), path.display().to_string()])
            }
            SystemEntry::Link { path, target } => {
                args.extend(["--symlink".into(), target.display().to_string(), path.display().to_string()])
            }
        }
    }
    for path in extra {
        args.extend(["--ro-bind".into(), path.display().to_string(), path.display().to_string()]);
    }
    for bind in binds {
        let how = if bind.writable { "--bind" } else { "--ro-bind" };
        args.extend([how.into(), bind.source.display().to_string(), bind.at.display().to_string()]);
    }
    args.extend(["--chdir".into(), "/".into(), "--".into()]);
    args
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
        self.run(args, None)
    }

    /// git in the mirror with `input` on its stdin; its stdout.
    pub fn git_with_input(&self, args: &[&str], input: &[u8]) -> Result<Vec<u8>, Failed> {
        self.run(args, Some(input))
    }

    fn run(&self, args: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>, Failed> {
        use std::io::Write as _;
        let failed = |stderr: String| Failed { command: args.join(" "), stderr };
        let mut child = Command::new(self.git)
            .arg("--git-dir")
            .arg(self.path)
            .args(args)
            .current_dir(self.path)
            .env_clear()
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|err| failed(err.to_string()))?;
        if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin.write_all(input).map_err(|err| failed(err.to_string()))?;
        }
        let out = child.wait_with_output().map_err(|err| failed(err.to_string()))?;
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
    /// no longer has. `git_dir` is the repository the reader serves (the project's
    /// common directory); `top` the work tree, whose `HEAD` is the one checked out.
    pub fn fetch(&self, top: &Path, git_dir: &Path) -> Result<(), Failed> {
        let source = format!("file://{}", git_dir.display());
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
        self.take_head(top, &source)
    }

    /// Copies the named refs of the repository `git_dir` serves into the mirror (the
    /// caller has deleted the mirror's own refs of those names), offering only
    /// `negotiation_tips` as what the mirror has (commits of its alternate, so that a
    /// repository of thousands of refs is not walked for each), then takes its `HEAD`
    /// as [`Mirror::fetch`] does.
    pub fn fetch_named(
        &self,
        top: &Path,
        git_dir: &Path,
        names: &[&str],
        negotiation_tips: &[&str],
    ) -> Result<(), Failed> {
        let source = format!("file://{}", git_dir.display());
        if !names.is_empty() {
            let mut args: Vec<String> =
                ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--upload-pack", &self.reader]
                    .map(String::from)
                    .to_vec();
            args.extend(negotiation_tips.iter().map(|tip| format!("--negotiation-tip={tip}")));
            args.push(source.clone());
            args.extend(names.iter().map(|name| format!("+{name}:{name}")));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            self.git(&args)?;
        }
        self.take_head(top, &source)
    }

    /// Points the mirror's `HEAD` where the work tree's is (a branch, or a detached
    /// commit fetched from `source`).
    fn take_head(&self, top: &Path, source: &str) -> Result<(), Failed> {
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
                source,
                &refspec,
            ]);
            if fetched.is_ok() {
                self.git(&["update-ref", "--no-deref", "HEAD", &head])?;
            }
        }
        Ok(())
    }
}

/// Where the host's `git` is installed, when outside the system directories the view
/// shows anyway: its own directory and its exec-path.
pub fn git_installation(git: &Path) -> Vec<PathBuf> {
    let system = |path: &Path| {
        SYSTEM_PATHS.iter().any(|dir| path.starts_with(dir))
            || path.canonicalize().is_ok_and(|real| SYSTEM_PATHS.iter().any(|dir| real.starts_with(dir)))
    };
    let mut dirs = Vec::new();
    if let Some(dir) = git.canonicalize().ok().and_then(|real| real.parent().map(Path::to_path_buf)) {
        dirs.push(dir);
    }
    let exec_path = Command::new(git).arg("--exec-path").env_clear().stdin(Stdio::null()).output();
    if let Some(out) = exec_path.ok().filter(|out| out.status.success()) {
        dirs.push(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    }
    dirs.retain(|dir| dir.is_absolute() && !system(dir));
    dirs.dedup();
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The view is the whole argv: namespaces, the system's directories as the host has
    /// them (links as links), git's installation and the git directory, all read-only.
    #[test]
    fn the_view_shows_the_system_and_the_git_directory_alone() {
        let system = [
            SystemEntry::Bind(PathBuf::from("/usr")),
            SystemEntry::Link { path: PathBuf::from("/bin"), target: PathBuf::from("usr/bin") },
        ];
        let prefix = view_prefix(
            Path::new("/usr/bin/bwrap"),
            &system,
            &[PathBuf::from("/opt/git")],
            &[PathBuf::from("/p/.git")],
        );
        assert_eq!(
            prefix,
            "'/usr/bin/bwrap' '--unshare-all' '--die-with-parent' '--new-session' '--cap-drop' 'ALL' '--dev' '/dev' \
             '--tmpfs' '/tmp' '--ro-bind' '/usr' '/usr' '--symlink' 'usr/bin' '/bin' '--ro-bind' '/opt/git' \
             '/opt/git' '--ro-bind' '/p/.git' '/p/.git' '--chdir' '/' '--' "
        );
    }

    /// A reader in the view, asked for a repository whose `commondir` and links lead to
    /// another one, copies nothing of that other one: it is not there.
    #[test]
    fn a_reader_in_the_view_cannot_follow_a_redirection() {
        let Some(bwrap) = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join("bwrap"))
            .find(|path| path.is_file())
        else {
            assert!(std::env::var_os("CI").is_none(), "bwrap is required in CI");
            eprintln!("skipping: bwrap is not installed");
            return;
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let git = |cwd: &Path, args: &[&str]| {
            let out = Command::new("git").args(args).current_dir(cwd).output().expect("git");
            assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        let private = dir.path().join("private");
        let top = dir.path().join("p");
        for repo in [&private, &top] {
            std::fs::create_dir_all(repo).expect("mkdir");
            git(repo, &["init", "-q", "-b", "main"]);
            git(repo, &["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "x"]);
        }
        git(&private, &["branch", "secret"]);
        let env: Vec<(OsString, OsString)> = std::env::vars_os().filter(|(name, _)| name == "PATH").collect();
        let git_dir = top.join(".git");
        let real_git = Command::new("sh").args(["-c", "command -v git"]).output().expect("sh");
        let real_git = String::from_utf8_lossy(&real_git.stdout).trim().to_owned();
        let prefix = view_prefix(&bwrap, &system_entries(), &[], std::slice::from_ref(&git_dir));
        let path = dir.path().join("mirror.git");
        let mirror = Mirror { path: &path, git: Path::new("git"), env: &env, reader: reader(&prefix, &real_git, None) };
        mirror.configure(&git_dir.join("config")).expect("configure");
        mirror.fetch(&top, &git_dir).expect("the project's own repository is read in the view");
        // The project's refs lead to the other repository now.
        std::fs::rename(git_dir.join("refs"), dir.path().join("refs.away")).expect("mv");
        std::os::unix::fs::symlink(private.join(".git/refs"), git_dir.join("refs")).expect("ln");
        std::fs::write(git_dir.join("commondir"), private.join(".git").display().to_string()).expect("write");
        let _ = mirror.fetch(&top, &git_dir);
        let refs =
            String::from_utf8_lossy(&mirror.git(&["for-each-ref", "--format=%(refname)"]).expect("refs")).into_owned();
        assert!(!refs.contains("secret"), "the other repository's branch was read: {refs}");
    }

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
        mirror.fetch(&top, &top.join(".git")).expect("fetch");
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
        let err = mirror.fetch(&top, &top.join(".git")).expect_err("a swapped object is not stored under another name");
        assert!(!err.stderr.is_empty(), "{err}");
        assert!(mirror.git(&["cat-file", "-e", &blob]).is_err(), "the swapped object is not in the mirror");
        std::fs::remove_file(&file).expect("rm");
        std::fs::rename(&original, &file).expect("restore");
        mirror.fetch(&top, &top.join(".git")).expect("fetch");
        assert_eq!(String::from_utf8_lossy(&mirror.git(&["cat-file", "-p", &blob]).expect("blob")), "FAIL again\n");
        let refs =
            String::from_utf8_lossy(&mirror.git(&["for-each-ref", "--format=%(refname)"]).expect("refs")).into_owned();
        assert_eq!(refs.lines().collect::<Vec<_>>(), ["refs/heads/main", "refs/tags/v1"]);
    }
}
