//! The tool guard: Claude Code's and Codex's `PreToolUse` hook contract driven end to
//! end inside a real sandbox (the agents themselves need an account to make a tool
//! call): each disallowed form denied with the documented JSON and audited, the
//! legitimate calls beside them passing, a read-only agent's edit tools denied, and the
//! managed configuration that runs the guard unchangeable from inside.

use crate::support::{require_bwrap, World};

/// A shell line that feeds `input` (JSON) to the guard as `agent` and prints its
/// answer and exit status.
fn ask(agent: &str, input: &serde_json::Value) -> String {
    let json = input.to_string().replace('\'', r"'\''");
    format!("a=$(printf '%s' '{json}' | /run/agent-sandbox/agent-sandbox tool-guard --agent {agent}); echo \"$a code=$?\"; ")
}

fn call(tool: &str, tool_input: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "session_id": "abc", "transcript_path": "/tmp/t.jsonl", "cwd": "/p", "permission_mode": "default",
        "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input, "tool_use_id": "toolu_01",
    })
}

#[test]
fn each_disallowed_form_is_denied_with_the_documented_json_and_audited() {
    require_bwrap!();
    let world = World::new();
    world.project_config(r#"{"tools": {"disallowed": ["Write", "Edit", "Bash(git push:*)", "WebFetch"]}}"#);
    let mut subagent = call("Edit", serde_json::json!({"file_path": "/p/src/a.rs", "old_string": "a"}));
    subagent["agent_type"] = "code-architect".into();
    let cases = [
        ("claude", call("Write", serde_json::json!({"file_path": "/p/a.txt", "content": "x"})), Some("Write")),
        // Write covers every edit tool, Edit included.
        ("claude", subagent, Some("Write")),
        (
            "claude",
            call("Bash", serde_json::json!({"command": "git status && git push --force"})),
            Some("Bash(git push:*)"),
        ),
        (
            "claude",
            call("WebFetch", serde_json::json!({"url": "https://example.com", "prompt": "x"})),
            Some("WebFetch"),
        ),
        ("codex", call("apply_patch", serde_json::json!({"command": "*** Begin Patch"})), Some("Write")),
        ("claude", call("Read", serde_json::json!({"file_path": "/p/a.txt"})), None),
        ("claude", call("Bash", serde_json::json!({"command": "git status"})), None),
        ("codex", call("Bash", serde_json::json!({"command": "cargo test"})), None),
    ];
    let script: String = cases.iter().map(|(agent, input, _)| ask(agent, input)).collect();
    let out = world.sh(&[], &script).ok();
    let answers: Vec<&str> = out.lines().collect();
    assert_eq!(answers.len(), cases.len(), "{out}");
    for ((_, input, denied_by), answer) in cases.iter().zip(&answers) {
        match denied_by {
            Some(rule) => {
                let (json, code) = answer.rsplit_once(' ').expect("answer and code");
                assert_eq!(code, "code=0", "{input}");
                let value: serde_json::Value = serde_json::from_str(json).expect("the answer is JSON");
                let output = &value["hookSpecificOutput"];
                assert_eq!(
                    (&output["hookEventName"], &output["permissionDecision"]),
                    (&"PreToolUse".into(), &"deny".into())
                );
                let reason = output["permissionDecisionReason"].as_str().expect("a reason");
                assert!(reason.contains(&format!("tools.disallowed has {rule:?}")), "{reason}");
            }
            None => assert_eq!(*answer, " code=0", "allowed: no answer, exit 0 ({input})"),
        }
    }
    let log = world.cmd().args(["log", "--json", "--blocked-only"]).run().ok();
    let tools: Vec<(String, String, String)> = log
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("JSON"))
        .filter(|event| event["operation"] == "tool")
        .map(|event| {
            let text = |key: &str| event[key].as_str().unwrap_or_default().to_owned();
            (text("agent"), text("target"), text("reason"))
        })
        .collect();
    let expected = [
        ("claude", "Write /p/a.txt", "Write"),
        ("code-architect", "Edit /p/src/a.rs", "Write"),
        ("claude", "Bash git status && git push --force", "Bash(git push:*)"),
        ("claude", "WebFetch https://example.com", "WebFetch"),
        ("codex", "apply_patch *** Begin Patch", "Write"),
    ]
    .map(|(agent, target, rule)| (agent.to_owned(), target.to_owned(), rule.to_owned()));
    assert_eq!(tools, expected, "{log}");
}

#[test]
fn a_read_only_agent_has_its_edit_tools_denied_and_unusable_input_is_blocked() {
    require_bwrap!();
    let world = World::new();
    let script = format!(
        "{}{}a=$(printf 'not json' | agent-sandbox tool-guard); echo \"$a code=$?\"",
        ask("claude", &call("Write", serde_json::json!({"file_path": "/p/a", "content": ""}))),
        ask("claude", &call("Grep", serde_json::json!({"pattern": "x"}))),
    );
    let run = world.sh(&["--read-only"], &script);
    let out = run.ok();
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].contains("this agent is read-only (tools.readOnly)") && lines[0].ends_with(" code=0"), "{out}");
    assert_eq!(lines[1..], [" code=0", " code=2"], "{out}");
    assert!(run.stderr().contains("tool-guard: the hook input is not JSON"), "{}", run.stderr());
    // Outside a sandbox there are no settings: it blocks rather than allow everything.
    let outside = world.cmd().arg("tool-guard").run();
    assert_eq!(outside.code(), 2, "{}", outside.stderr());
}

#[test]
fn the_managed_configuration_cannot_be_changed_or_shadowed_from_inside() {
    require_bwrap!();
    let world = World::new();
    world.project_config(r#"{"tools": {"disallowed": ["WebFetch"]}}"#);
    let attacks = "for f in /etc/claude-code/managed-settings.json /etc/codex/requirements.toml; do \
           echo '{}' > $f && echo WROTE; rm -f $f && echo REMOVED; mv $f /tmp/x && echo MOVED; \
           umount $f 2>/dev/null && echo UNMOUNTED; done; \
         mkdir /etc/claude-code/managed-settings.d && echo SHADOWED; \
         mv /etc/claude-code /tmp/cc 2>/dev/null && echo MOVED-DIR; \
         mount -t tmpfs none /etc/claude-code 2>/dev/null && echo MOUNTED; \
         unshare -rm true 2>/dev/null && echo USERNS; \
         echo legit > /tmp/scratch && cat /tmp/scratch; \
         cat /etc/claude-code/managed-settings.json /etc/codex/requirements.toml";
    let run = world.sh(&[], attacks);
    let out = run.ok();
    let (legit, files) = out.split_once("legit\n").unwrap_or_else(|| panic!("{out}\n{}", run.stderr()));
    assert_eq!(legit, "", "every attack failed:\n{out}");
    let (claude, codex) = files.split_once("}#").expect("both files");
    let codex = format!("#{codex}");
    let settings: serde_json::Value = serde_json::from_str(&format!("{claude}}}")).expect("JSON");
    assert_eq!(settings["allowManagedHooksOnly"], true);
    assert_eq!(
        settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
        "/run/agent-sandbox/agent-sandbox tool-guard --agent claude"
    );
    assert!(codex.contains("command = \"/run/agent-sandbox/agent-sandbox tool-guard --agent codex\""), "{codex}");
    assert!(codex.starts_with("# Added by agent-sandbox: only managed hooks run"), "{codex}");
    assert!(codex.lines().any(|line| line == "allow_managed_hooks_only = true"), "{codex}");
}

/// What the Feature's install runs in an image is refused on a host (as root it would
/// hand every Claude Code and Codex session there to a guard that blocks them all, and
/// comment out the host's own sudo rules).
#[test]
fn the_images_managed_files_are_never_written_on_a_host() {
    let world = World::new();
    for (command, file) in
        [("tool-guard-install", "/etc/claude-code/managed-settings.json"), ("sudo-restrict", "/etc/sudoers")]
    {
        let before = std::fs::read(file).ok();
        let run = world.cmd().args([command]).run();
        assert_eq!(run.code(), 125, "{command}: {}", run.stderr());
        let refusal = format!("{command} changes a container image: only the Feature runs it");
        assert!(run.stderr().contains(&refusal), "{}", run.stderr());
        assert_eq!(std::fs::read(file).ok(), before, "{command}");
    }
}

#[test]
fn a_rule_that_does_not_parse_stops_the_start() {
    let world = World::new();
    world.project_config(r#"{"tools": {"disallowed": ["Bash(git push"]}}"#);
    let run = world.cmd().args(["exec", "--", "true"]).run();
    assert_eq!(run.code(), 125);
    assert!(
        run.stderr().contains("tools.disallowed: \"Bash(git push\" has no closing parenthesis"),
        "{}",
        run.stderr()
    );
}

/// Path rules hold however the path is spelled: `..`, `.`, a symlink into the denied
/// tree, and a search whose root holds it are denied (the search with a reason that
/// says how to narrow it); the same tools on the files beside the tree pass.
#[test]
fn path_rules_hold_for_every_spelling_and_for_searches_over_the_tree() {
    require_bwrap!();
    let world = World::new();
    world.project_config(r#"{"tools": {"disallowed": ["Read(./secrets/**)", "Edit(./ci/**)"]}}"#);
    world.write("home/proj/secrets/token.txt", "t0ken\n");
    world.write("home/proj/ci/check.sh", "true\n");
    world.write("home/proj/src/main.rs", "fn main() {}\n");
    std::os::unix::fs::symlink("../secrets/token.txt", world.project.join("src/notes.txt")).expect("symlink");
    let p = world.project.to_str().expect("UTF-8 path").to_owned();
    let at = |tool: &str, tool_input: serde_json::Value| {
        let mut input = call(tool, tool_input);
        input["cwd"] = p.clone().into();
        input
    };
    let cases = [
        (
            at("Read", serde_json::json!({"file_path": format!("{p}/src/../secrets/token.txt")})),
            Some("Read(./secrets/**)"),
        ),
        (at("Read", serde_json::json!({"file_path": format!("{p}/src/notes.txt")})), Some("Read(./secrets/**)")),
        (at("Read", serde_json::json!({"file_path": format!("{p}/src/../src/main.rs")})), None),
        (at("Edit", serde_json::json!({"file_path": format!("{p}/./ci/check.sh")})), Some("Edit(./ci/**)")),
        (at("Edit", serde_json::json!({"file_path": format!("{p}/./src/main.rs")})), None),
        (at("Grep", serde_json::json!({"pattern": "t0ken", "path": p.clone()})), Some("Read(./secrets/**)")),
        (at("Glob", serde_json::json!({"pattern": "**/*.txt"})), Some("Read(./secrets/**)")),
        (at("Grep", serde_json::json!({"pattern": "main", "path": format!("{p}/src")})), None),
        (at("Glob", serde_json::json!({"pattern": "*.rs", "path": format!("{p}/src")})), None),
    ];
    let script: String = cases.iter().map(|(input, _)| ask("claude", input)).collect();
    let out = world.sh(&[], &script).ok();
    let answers: Vec<&str> = out.lines().collect();
    assert_eq!(answers.len(), cases.len(), "{out}");
    for ((input, denied_by), answer) in cases.iter().zip(&answers) {
        match denied_by {
            Some(rule) => {
                let (json, code) = answer.rsplit_once(' ').expect("answer and code");
                assert_eq!(code, "code=0", "{input}");
                let value: serde_json::Value =
                    serde_json::from_str(json).unwrap_or_else(|err| panic!("{input}: not denied ({err}): {out}"));
                let reason = value["hookSpecificOutput"]["permissionDecisionReason"].as_str().expect("a reason");
                assert!(reason.contains(&format!("tools.disallowed has {rule:?}")), "{input}: {reason}");
                if input["tool_name"] == "Grep" || input["tool_name"] == "Glob" {
                    assert!(
                        reason.contains(&format!(
                            "this search covers {p}/secrets; search a directory that does not hold it"
                        )),
                        "{reason}"
                    );
                }
            }
            None => assert_eq!(*answer, " code=0", "allowed: no answer, exit 0 ({input})"),
        }
    }
}
