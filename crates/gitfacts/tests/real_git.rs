//! Each of gitfacts' rules against what the real git does with the same files.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git runs");
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim_end_matches('\n').to_owned())
}

fn repo(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("mkdir");
    git(dir, &["init", "-q", "-b", "main"]).expect("init");
    git(dir, &["commit", "-q", "--allow-empty", "-m", "one"]).expect("commit");
    dir.canonicalize().expect("canonical")
}

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    (dir, root)
}

#[test]
fn gitlink_files_are_read_as_git_reads_them() {
    let (_dir, root) = tmp();
    let real = repo(&root.join("real"));
    let cases: &[&[u8]] = &[
        b"gitdir: ../real/.git\n",
        b"gitdir: ../real/.git\r\n",
        b"gitdir: ../real/.git",
        b"gitdir: ../real/.git\n\n",
        b"# comment\ngitdir: ../real/.git\n",
        b"gitdir:../real/.git\n",
        b"gitdir: ../real/.git \n",
        b"gitdir: ../real/.git\n/x\n",
        b"gitdir: \n",
    ];
    for (index, content) in cases.iter().enumerate() {
        let work = root.join(format!("work{index}"));
        std::fs::create_dir_all(&work).expect("mkdir");
        std::fs::write(work.join(".git"), content).expect("write");
        let by_git = git(&work, &["rev-parse", "--absolute-git-dir"]).map(PathBuf::from);
        let ours = gitfacts::read_gitlink(&work.join(".git")).and_then(|dir| dir.canonicalize().ok());
        assert_eq!(ours, by_git, "{:?}", String::from_utf8_lossy(content));
        if by_git.is_some() {
            assert_eq!(ours, Some(real.join(".git")));
        }
    }
}

#[test]
fn layouts_match_git_for_plain_repositories_worktrees_and_submodules() {
    let (_dir, root) = tmp();
    let main = repo(&root.join("main"));
    git(&main, &["worktree", "add", "-q", "../linked"]).expect("worktree add");
    let linked = root.join("linked");
    let lib = repo(&root.join("lib"));
    git(
        &main,
        &["-c", "protocol.file.allow=always", "submodule", "add", "-q", lib.to_str().expect("utf-8"), "libs/foo"],
    )
    .expect("submodule add");
    for work in [main.clone(), linked, main.join("libs/foo")] {
        let layout = gitfacts::layout(&work).expect("a layout");
        let git_dir = git(&work, &["rev-parse", "--absolute-git-dir"]).expect("git dir");
        let common = git(&work, &["rev-parse", "--path-format=absolute", "--git-common-dir"]).expect("common dir");
        assert_eq!(layout.git_dir.canonicalize().expect("exists"), PathBuf::from(git_dir), "{}", work.display());
        assert_eq!(layout.common_dir.canonicalize().expect("exists"), PathBuf::from(common), "{}", work.display());
    }
}

/// A session repository stands where git looks for the work tree's git directory: the
/// plain `.git`, a linked worktree's record, a submodule's directory; not where that
/// directory holds the project or home, nor behind a symlink (git inside would follow
/// the `.git` file to another path than the one the sandbox covers).
#[test]
fn a_session_repository_stands_where_git_finds_the_git_directory() {
    let (_dir, root) = tmp();
    let home = root.join("home");
    let main = repo(&home.join("main"));
    git(&main, &["worktree", "add", "-q", "../linked"]).expect("worktree add");
    let lib = repo(&root.join("lib"));
    git(
        &main,
        &["-c", "protocol.file.allow=always", "submodule", "add", "-q", lib.to_str().expect("utf-8"), "libs/foo"],
    )
    .expect("submodule add");
    let mount =
        |work: &Path, home: &Path| gitfacts::session_mount(work, home, &gitfacts::layout(work).expect("a layout"));
    assert_eq!(mount(&main, &home), Some(main.join(".git")));
    assert_eq!(mount(&home.join("linked"), &home), Some(main.join(".git/worktrees/linked")));
    assert_eq!(mount(&main.join("libs/foo"), &home), Some(main.join(".git/modules/libs/foo")));
    // A git directory that holds the home directory is never covered.
    assert_eq!(mount(&home.join("linked"), &main.join(".git/worktrees/linked/x")), None);
    // Named through a symlink: git inside would reach it by another path.
    std::os::unix::fs::symlink(&main, root.join("alias")).expect("symlink");
    std::fs::write(
        home.join("linked/.git"),
        format!("gitdir: {}\n", root.join("alias/.git/worktrees/linked").display()),
    )
    .expect("write");
    let layout = gitfacts::layout(&home.join("linked")).expect("git still follows it");
    assert_eq!(gitfacts::session_mount(&home.join("linked"), &home, &layout), None);
}

#[test]
fn repositories_are_recognised_as_git_recognises_them() {
    let (_dir, root) = tmp();
    let real = repo(&root.join("real"));
    let make = |name: &str, head: Option<&[u8]>, objects: bool, refs: bool, commondir: bool| {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).expect("mkdir");
        if let Some(head) = head {
            std::fs::write(dir.join("HEAD"), head).expect("write");
        }
        if objects {
            std::fs::create_dir_all(dir.join("objects")).expect("mkdir");
        }
        if refs {
            std::fs::create_dir_all(dir.join("refs")).expect("mkdir");
        }
        if commondir {
            std::fs::write(dir.join("commondir"), format!("{}\n", real.join(".git").display())).expect("write");
        }
        dir
    };
    let cases = [
        make("bare", Some(b"ref: refs/heads/main\n"), true, true, false),
        make("detached", Some(b"0123456789012345678901234567890123456789\n"), true, true, false),
        make("bad-head", Some(b"ref: heads/main\n"), true, true, false),
        make("no-refs", Some(b"ref: refs/heads/main\n"), true, false, false),
        make("no-head", None, true, true, false),
        make("borrowed", Some(b"ref: refs/heads/main\n"), false, false, true),
    ];
    for dir in cases {
        let by_git = git(&root, &["--git-dir", dir.to_str().expect("utf-8"), "rev-parse", "--git-dir"]).is_some();
        assert_eq!(gitfacts::looks_like_repository(&dir), by_git, "{}", dir.display());
    }
}

#[test]
fn hooks_directories_match_git() {
    let (_dir, root) = tmp();
    let main = repo(&root.join("main"));
    git(&main, &["worktree", "add", "-q", "../linked"]).expect("worktree add");
    let linked = root.join("linked");
    for value in [None, Some("githooks"), Some("/abs/hooks"), Some("~/my-hooks"), Some("../up")] {
        match value {
            Some(value) => git(&main, &["config", "core.hooksPath", value]).expect("config"),
            None => String::new(),
        };
        for work in [&main, &linked] {
            let by_git = git(work, &["rev-parse", "--path-format=absolute", "--git-path", "hooks"]).expect("git-path");
            // HOME is the work tree's parent for `~` (see `git()` above).
            let ours = with_home(work, || {
                let repo = gitfacts::discover(work).expect("discover");
                gitfacts::hooks_dir(&repo).expect("hooks dir").expect("not empty")
            });
            assert_eq!(ours, gitfacts::canonical(Path::new(&by_git)), "{value:?} in {}", work.display());
        }
    }
}

/// Runs `f` with HOME set as `git()` sets it (the test binary is one process: these
/// tests do not read HOME elsewhere).
fn with_home<T>(home: &Path, f: impl FnOnce() -> T) -> T {
    let old = std::env::var_os("HOME");
    std::env::set_var("HOME", home);
    let out = f();
    match old {
        Some(old) => std::env::set_var("HOME", old),
        None => std::env::remove_var("HOME"),
    }
    out
}

#[test]
fn ref_tips_are_what_git_lists() {
    let (_dir, root) = tmp();
    let work = repo(&root.join("work"));
    assert_eq!(gitfacts::ref_tips(&root.join("nothing")), Vec::<String>::new());
    git(&work, &["commit", "-q", "--allow-empty", "-m", "two"]).expect("commit");
    git(&work, &["branch", "old", "HEAD~1"]).expect("branch");
    git(&work, &["tag", "-a", "-m", "annotated", "v1", "HEAD~1"]).expect("tag");
    git(&work, &["update-ref", "refs/remotes/origin/main", "HEAD~1"]).expect("remote ref");
    git(&work, &["symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main"]).expect("symref");
    git(&work, &["pack-refs", "--all"]).expect("pack");
    git(&work, &["checkout", "-q", "--detach", "HEAD"]).expect("detach");
    git(&work, &["commit", "-q", "--allow-empty", "-m", "detached"]).expect("commit");
    let by_git = git(&work, &["rev-parse", "HEAD", "--all"]).expect("rev-parse");
    let mut by_git: Vec<String> = by_git.lines().map(str::to_owned).collect();
    by_git.sort();
    by_git.dedup();
    assert_eq!(gitfacts::ref_tips(&work), by_git);
    assert_eq!(by_git.len(), 4, "detached HEAD, main, old (= origin/main), the tag object: {by_git:?}");
}

#[test]
fn new_commits_are_what_rev_list_finds() {
    let (_dir, root) = tmp();
    let work = repo(&root.join("work"));
    git(&work, &["tag", "-a", "-m", "annotated", "v1"]).expect("tag");
    let then = gitfacts::ref_tips(&work);
    assert_eq!(gitfacts::new_commits(&work, &then), Vec::<String>::new());
    git(&work, &["commit", "-q", "--allow-empty", "-m", "two"]).expect("commit");
    git(&work, &["checkout", "-q", "-b", "side", "HEAD~1"]).expect("branch");
    git(&work, &["commit", "-q", "--allow-empty", "-m", "three"]).expect("commit");
    let mut ours = gitfacts::new_commits(&work, &then);
    ours.sort();
    let by_git = git(&work, &["rev-list", "--all", "--not", "v1"]).expect("rev-list");
    let mut by_git: Vec<String> = by_git.lines().map(str::to_owned).collect();
    by_git.sort();
    assert_eq!(ours, by_git);
    assert_eq!(ours.len(), 2);
    // From an empty repository: everything is new.
    let empty = root.join("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    git(&empty, &["init", "-q"]).expect("init");
    let then = gitfacts::ref_tips(&empty);
    git(&empty, &["commit", "-q", "--allow-empty", "-m", "first"]).expect("commit");
    assert_eq!(gitfacts::new_commits(&empty, &then).len(), 1);
}
