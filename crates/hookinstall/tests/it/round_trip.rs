//! Install → the expected layout → install again changes nothing → uninstall → the tree
//! is byte-for-byte and mode-for-mode what it was, for each kind of hooks directory an
//! install meets: none, git's samples, a user's script or symlink, the pre-commit
//! framework, lefthook, husky v9, a linked worktree, `core.hooksPath` in the global
//! config.

use std::path::Path;

use hookinstall::{CHAINED_SUFFIX, HOOKS, MARKER, STATE_FILE};

use crate::support::{
    assert_same_tree, key, quote, snapshot, unused_binary, write_script, ChildOutcome, Entry, Sandbox,
};

/// The round trip on the whole of `sandbox.root`, starting from `start`: the hooks land in
/// `expected_dir` (which git agrees on), the hooks in `chained` are moved aside
/// unchanged, and everything comes back.
fn round_trip(sandbox: &Sandbox, start: &Path, expected_dir: &Path, chained: &[&str]) {
    let before = snapshot(&sandbox.root);
    let binary = unused_binary();

    let report = hookinstall::install(start, &binary, false).expect("install");
    assert_eq!(report.hooks_dir, expected_dir);
    assert_eq!(sandbox.git_hooks_dir(start), expected_dir, "git uses another hooks directory");
    let installed = snapshot(&sandbox.root);
    assert_installed_layout(sandbox, &before, &installed, expected_dir, chained);

    let again = hookinstall::install(start, &binary, false).expect("second install");
    assert_eq!(again.hooks_dir, expected_dir);
    let expected_actions: Vec<String> = HOOKS
        .iter()
        .map(|hook| {
            format!(
                "{hook}: the guard shim {} is already installed; nothing changed",
                expected_dir.join(hook).display()
            )
        })
        .collect();
    assert_eq!(again.actions, expected_actions);
    assert_same_tree(&installed, &snapshot(&sandbox.root));

    let report = hookinstall::uninstall(start).expect("uninstall");
    assert_eq!(report.hooks_dir, expected_dir);
    assert_same_tree(&before, &snapshot(&sandbox.root));

    let report = hookinstall::uninstall(start).expect("second uninstall");
    assert_eq!(
        report.actions,
        [format!("no agent-sandbox hooks are installed in {}; nothing to do", expected_dir.display())]
    );
    assert_same_tree(&before, &snapshot(&sandbox.root));
}

fn assert_installed_layout(
    sandbox: &Sandbox,
    before: &std::collections::BTreeMap<String, Entry>,
    installed: &std::collections::BTreeMap<String, Entry>,
    dir: &Path,
    chained: &[&str],
) {
    for hook in HOOKS {
        let hook_key = key(&sandbox.root, &dir.join(hook));
        let chained_key = key(&sandbox.root, &dir.join(format!("{hook}{CHAINED_SUFFIX}")));
        let Some(Entry::File { mode, contents }) = installed.get(&hook_key) else {
            panic!("{hook_key} is not a regular file: {:?}", installed.get(&hook_key));
        };
        assert_eq!(*mode, 0o755, "{hook_key}");
        let text = String::from_utf8_lossy(contents);
        assert!(text.lines().any(|line| line == MARKER), "{hook_key} has no marker:\n{text}");
        assert!(text.contains(&format!("AS={}\n", quote(&unused_binary()))), "{hook_key}:\n{text}");
        assert!(text.contains(&format!("exec \"$AS\" hook {hook} \"$@\"")), "{hook_key}:\n{text}");
        if chained.contains(hook) {
            assert_eq!(installed.get(&chained_key), before.get(&hook_key), "{chained_key} is not the original");
            assert!(before.contains_key(&hook_key), "test bug: {hook_key} did not exist before");
        } else {
            assert_eq!(installed.get(&chained_key), None);
        }
    }
    assert!(installed.contains_key(&key(&sandbox.root, &dir.join(STATE_FILE))), "no state file");
    // Nothing but the hooks, their chained originals, the state file (and the
    // directories install had to create) changed.
    let ours: Vec<String> = HOOKS
        .iter()
        .flat_map(|hook| [dir.join(hook), dir.join(format!("{hook}{CHAINED_SUFFIX}"))])
        .chain([dir.join(STATE_FILE)])
        .map(|path| key(&sandbox.root, &path))
        .collect();
    for (path, entry) in before {
        if !ours.contains(path) {
            assert_eq!(installed.get(path), Some(entry), "install changed {path}");
        }
    }
    for path in installed.keys() {
        let created_dir =
            matches!(installed.get(path), Some(Entry::Dir { .. })) && dir.starts_with(sandbox.root.join(path));
        assert!(before.contains_key(path) || ours.contains(path) || created_dir, "install added {path}");
    }
}

#[test]
fn round_trip_without_a_hooks_directory() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    std::fs::remove_dir_all(repo.join(".git/hooks")).expect("remove hooks");
    round_trip(&sandbox, &repo, &repo.join(".git/hooks"), &[]);
}

#[test]
fn round_trip_with_only_gits_sample_hooks() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    let samples: Vec<_> = std::fs::read_dir(repo.join(".git/hooks"))
        .expect("hooks dir")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(samples.iter().any(|name| name == "pre-commit.sample"), "git's templates are missing: {samples:?}");
    assert!(samples.iter().all(|name| name.ends_with(".sample")), "{samples:?}");
    round_trip(&sandbox, &repo, &repo.join(".git/hooks"), &[]);
}

#[test]
fn round_trip_with_a_plain_user_hook_started_from_a_subdirectory() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    write_script(&repo.join(".git/hooks/pre-commit"), "#!/bin/sh\nexec make lint\n");
    super::support::set_mode(&repo.join(".git/hooks/pre-commit"), 0o750);
    std::fs::create_dir_all(repo.join("src/deep")).expect("mkdir");
    round_trip(&sandbox, &repo.join("src/deep"), &repo.join(".git/hooks"), &["pre-commit"]);
}

#[test]
fn round_trip_with_a_symlinked_hook() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    write_script(&repo.join("scripts/check.sh"), "#!/bin/sh\necho checked\n");
    std::os::unix::fs::symlink("../../scripts/check.sh", repo.join(".git/hooks/pre-commit")).expect("symlink");
    // A dangling one is kept as it is too.
    std::os::unix::fs::symlink("../../scripts/gone.sh", repo.join(".git/hooks/pre-push")).expect("symlink");
    round_trip(&sandbox, &repo, &repo.join(".git/hooks"), &["pre-commit", "pre-push"]);
}

/// What `pre-commit install` (the pre-commit framework, v3/v4) writes.
pub const PRE_COMMIT_FRAMEWORK_HOOK: &str = r#"#!/usr/bin/env bash
# File generated by pre-commit: https://pre-commit.com
# ID: 138fd403232d2ddd5efb44317e38bf03

# start templated
INSTALL_PYTHON=/usr/bin/python3
ARGS=(hook-impl --config=.pre-commit-config.yaml --hook-type=pre-commit)
# end templated

HERE="$(cd "$(dirname "$0")" && pwd)"
ARGS+=(--hook-dir "$HERE" -- "$@")

if [ -x "$INSTALL_PYTHON" ]; then
    exec "$INSTALL_PYTHON" -mpre_commit "${ARGS[@]}"
elif command -v pre-commit > /dev/null; then
    exec pre-commit "${ARGS[@]}"
else
    echo '`pre-commit` not found.  Did you forget to activate your virtualenv?' 1>&2
    exit 1
fi
"#;

#[test]
fn round_trip_with_the_pre_commit_framework() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    std::fs::write(repo.join(".pre-commit-config.yaml"), "repos: []\n").expect("config");
    write_script(&repo.join(".git/hooks/pre-commit"), PRE_COMMIT_FRAMEWORK_HOOK);
    round_trip(&sandbox, &repo, &repo.join(".git/hooks"), &["pre-commit"]);
}

/// What `lefthook install` (v1) writes, for `hook`.
pub fn lefthook_hook(hook: &str) -> String {
    format!(
        r#"#!/bin/sh

if [ "$LEFTHOOK_VERBOSE" = "1" -o "$LEFTHOOK_VERBOSE" = "true" ]; then
  set -x
fi

if [ "$LEFTHOOK" = "0" ]; then
  exit 0
fi

call_lefthook()
{{
  if test -n "$LEFTHOOK_BIN"
  then
    "$LEFTHOOK_BIN" "$@"
  elif lefthook -h >/dev/null 2>&1
  then
    lefthook "$@"
  else
    dir="$(git rev-parse --show-toplevel)"
    if test -f "$dir/node_modules/lefthook/bin/index.js"
    then
      "$dir/node_modules/lefthook/bin/index.js" "$@"
    else
      echo "Can't find lefthook in PATH"
    fi
  fi
}}

call_lefthook run "{hook}" "$@"
"#
    )
}

#[test]
fn round_trip_with_lefthook() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    std::fs::write(repo.join("lefthook.yml"), "pre-commit:\n  commands:\n    lint:\n      run: make lint\n")
        .expect("config");
    for hook in ["pre-commit", "pre-push", "prepare-commit-msg"] {
        write_script(&repo.join(".git/hooks").join(hook), &lefthook_hook(hook));
    }
    round_trip(&sandbox, &repo, &repo.join(".git/hooks"), &["pre-commit", "pre-push"]);
}

/// husky 9's `.husky/_/h`.
pub const HUSKY_H: &str = r#"#!/usr/bin/env sh
[ "$HUSKY" = "2" ] && set -x
n=$(basename "$0")
s=$(dirname "$(dirname "$0")")/$n

[ ! -f "$s" ] && exit 0

if [ -f "$HOME/.huskyrc" ]; then
	echo "husky - '~/.huskyrc' is DEPRECATED, please move your code to ~/.config/husky/init.sh"
fi
i="${XDG_CONFIG_HOME:-$HOME/.config}/husky/init.sh"
[ -f "$i" ] && . "$i"

[ "${HUSKY-}" = "0" ] && exit 0

export PATH="node_modules/.bin:$PATH"
sh -e "$s" "$@"
c=$?

[ $c != 0 ] && echo "husky - $n script failed (code $c)"
[ $c = 127 ] && echo "husky - command not found in PATH=$PATH"
exit $c
"#;

/// husky 9's generated `.husky/_/<hook>`.
pub const HUSKY_HOOK: &str = "#!/usr/bin/env sh\n. \"$(dirname \"$0\")/h\"";

/// What `husky` (its `prepare` script) leaves in `repo`: `.husky/_` with `h` and one
/// generated script per hook, `core.hooksPath=.husky/_`. The user's `.husky/pre-commit`
/// runs `user_command`.
pub fn husky_layout(sandbox: &Sandbox, repo: &Path, user_command: &str) {
    husky_regenerate(repo);
    std::fs::write(repo.join(".husky/pre-commit"), user_command).expect("user hook");
    sandbox.git(repo, &["config", "core.hooksPath", ".husky/_"]);
}

/// What `npm install` does to `.husky/_` each time: rewrite every file.
pub fn husky_regenerate(repo: &Path) {
    let dir = repo.join(".husky/_");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join(".gitignore"), "*").expect("gitignore");
    std::fs::write(dir.join("h"), HUSKY_H).expect("h");
    for hook in ["commit-msg", "post-checkout", "pre-commit", "pre-push"] {
        write_script(&dir.join(hook), HUSKY_HOOK);
    }
}

#[test]
fn round_trip_with_husky() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    husky_layout(&sandbox, &repo, "npm test\n");
    round_trip(&sandbox, &repo, &repo.join(".husky/_"), &["pre-commit", "pre-push"]);
}

#[test]
fn round_trip_from_a_linked_worktree_uses_the_main_repositorys_hooks() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init_with_commit("repo");
    write_script(&repo.join(".git/hooks/pre-push"), "#!/bin/sh\nexit 0\n");
    sandbox.git(&repo, &["worktree", "add", "-q", "-b", "feature", "../wt"]);
    let worktree = sandbox.root.join("wt");
    round_trip(&sandbox, &worktree, &repo.join(".git/hooks"), &["pre-push"]);
}

#[test]
fn round_trip_with_hooks_path_in_the_global_config() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    std::fs::write(sandbox.home.join(".gitconfig"), "[core]\n\thooksPath = ~/git-hooks\n").expect("gitconfig");
    let hooks = sandbox.home.join("git-hooks");
    write_script(&hooks.join("pre-commit"), "#!/bin/sh\nexit 0\n");
    let before = snapshot(&sandbox.root);

    // gix reads HOME: only a child process may see this sandbox's.
    let binary = unused_binary();
    let ChildOutcome::Ok(report) = sandbox.in_child("install", &repo, &binary) else { panic!("install failed") };
    assert_eq!(report.hooks_dir, hooks);
    assert_eq!(sandbox.git_hooks_dir(&repo), hooks);
    let installed = snapshot(&sandbox.root);
    assert_installed_layout(&sandbox, &before, &installed, &hooks, &["pre-commit"]);

    let ChildOutcome::Ok(again) = sandbox.in_child("install", &repo, &binary) else { panic!("install failed") };
    assert!(again.actions.iter().all(|line| line.contains("is already installed; nothing changed")), "{again:?}");
    assert_same_tree(&installed, &snapshot(&sandbox.root));

    assert!(matches!(sandbox.in_child("uninstall", &repo, &binary), ChildOutcome::Ok(_)));
    assert_same_tree(&before, &snapshot(&sandbox.root));
}

#[test]
fn round_trip_creates_and_removes_a_missing_hooks_path_directory() {
    let sandbox = Sandbox::new();
    let repo = sandbox.init("repo");
    sandbox.git(&repo, &["config", "core.hooksPath", "tools/git/hooks"]);
    let before = snapshot(&sandbox.root);
    let dir = repo.join("tools/git/hooks");

    let report = hookinstall::install(&repo, &unused_binary(), false).expect("install");
    assert_eq!(report.actions[0], format!("created the hooks directory {}", dir.display()));
    assert_eq!(sandbox.git_hooks_dir(&repo), dir);

    let report = hookinstall::uninstall(&repo).expect("uninstall");
    let tail: Vec<String> = report.actions[report.actions.len() - 3..].to_vec();
    assert_eq!(
        tail,
        [
            format!("removed the directory {} that install created", dir.display()),
            format!("removed the directory {} that install created", repo.join("tools/git").display()),
            format!("removed the directory {} that install created", repo.join("tools").display()),
        ]
    );
    assert_same_tree(&before, &snapshot(&sandbox.root));
}
