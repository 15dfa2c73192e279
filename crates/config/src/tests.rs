//! Table tests for parsing, layering and error messages.

use std::path::Path;

use super::*;

fn project(text: &str) -> Result<Layer, ConfigError> {
    parse_layer(text, Path::new("/p/.agent-sandbox/config.jsonc"), LayerKind::Project)
}

fn values(items: &[Sourced<String>]) -> Vec<&str> {
    items.iter().map(|item| item.value.as_str()).collect()
}

#[test]
fn builtin_defaults_parse() {
    let layer = defaults();
    assert_eq!(layer.network.map(|n| n.value), Some(Network::Allowlist));
    assert!(values(&layer.net_allow).contains(&"api.anthropic.com"));
    assert!(values(&layer.net_allow).contains(&"github.com:22"));
    assert_eq!(values(&layer.presets), ["@all"]);
    assert!(values(&layer.exclude).contains(&"~/.ssh"));
    assert!(values(&layer.secret_patterns).contains(&".env"));
    assert!(values(&layer.secret_allow).contains(&".env.example"));
    assert!(values(&layer.env_secret_patterns).contains(&"AWS_*"));
}

#[test]
fn invalid_files_are_reported_with_position_and_hint() {
    let cases: &[(&str, &str)] = &[
        ("{\n  \"netwrk\": \"off\"\n}", "/p/.agent-sandbox/config.jsonc:2:3: unknown key \"netwrk\" (did you mean \"network\"?)"),
        ("{\"filesystem\": {\"excludes\": []}}", "/p/.agent-sandbox/config.jsonc:1:17: unknown key \"filesystem.excludes\" (did you mean \"filesystem.exclude\"?)"),
        ("{\"env\": {\"alow\": []}}", "/p/.agent-sandbox/config.jsonc:1:10: unknown key \"env.alow\" (did you mean \"env.allow\"?)"),
        ("{\"zzzzzz\": 1}", "/p/.agent-sandbox/config.jsonc:1:2: unknown key \"zzzzzz\" (valid keys: network, project, filesystem, secrets, env, commands, git, checks, tools, container, $schema)"),
        ("{\"git\": {\"allowBranchDelete\": true}}", "/p/.agent-sandbox/config.jsonc:1:10: unknown key \"git.allowBranchDelete\" (did you mean \"git.allowBranchDeletion\"?)"),
        ("{\"git\": {\"allowPlumbingCommits\": \"yes\"}}", "/p/.agent-sandbox/config.jsonc:1:34: git.allowPlumbingCommits: expected true or false"),
        ("{\"network\": \"maybe\"}", "/p/.agent-sandbox/config.jsonc:1:13: network: expected \"allowlist\", \"on\" or \"off\", got \"maybe\""),
        ("{\"network\": true}", "/p/.agent-sandbox/config.jsonc:1:13: network: expected a string or an object"),
        ("{\"network\": {\"mode\": \"of\"}}", "/p/.agent-sandbox/config.jsonc:1:22: network.mode: expected \"allowlist\", \"on\" or \"off\", got \"of\""),
        ("{\"network\": {\"alow\": []}}", "/p/.agent-sandbox/config.jsonc:1:14: unknown key \"network.alow\" (did you mean \"network.allow\"?)"),
        ("{\"network\": {\"allow\": [443]}}", "/p/.agent-sandbox/config.jsonc:1:24: network.allow: expected a string"),
        ("{\"filesystem\": {\"ro\": \"/x\"}}", "/p/.agent-sandbox/config.jsonc:1:23: filesystem.ro: expected an array of strings"),
        ("{\"filesystem\": {\"ro\": [1]}}", "/p/.agent-sandbox/config.jsonc:1:24: filesystem.ro: expected a string"),
        ("{\"commands\": {\"git\": 3}}", "/p/.agent-sandbox/config.jsonc:1:22: commands.git: expected true, false, \"@preset\" or a wrapper script path"),
        ("{\"commands\": {\"npm\": \"false\"}}", "/p/.agent-sandbox/config.jsonc:1:22: commands.npm: write false without quotes"),
        ("{\"commands\": {\"a/b\": true}}", "/p/.agent-sandbox/config.jsonc:1:15: commands: \"a/b\" is not a command name (use the bare name, e.g. \"npm\")"),
        ("{\"network\": \"on\",,}", "/p/.agent-sandbox/config.jsonc:1:18: "),
    ];
    for (text, expected) in cases {
        let err = project(text).expect_err(text).to_string();
        assert!(err.starts_with(expected), "{text}\n  got:      {err}\n  expected: {expected}");
    }
}

#[test]
fn positions_count_a_lone_carriage_return_as_a_line_break_like_syntax_errors_do() {
    // Found by the fuzz target: schema errors counted only `\n`, jsonc-parser's syntax
    // errors count a lone `\r` too, so one file had two sets of line numbers.
    let cases: &[(&str, &str)] = &[
        ("{\r  \"netwrk\": \"off\"\r}\r", "/p/.agent-sandbox/config.jsonc:2:3: unknown key \"netwrk\""),
        ("{\r  \"network\": \"off\",,\r}", "/p/.agent-sandbox/config.jsonc:2:20: "),
        ("{\r\n  \"netwrk\": \"off\"\r\n}", "/p/.agent-sandbox/config.jsonc:2:3: unknown key \"netwrk\""),
    ];
    for (text, expected) in cases {
        let err = project(text).expect_err(text).to_string();
        assert!(err.starts_with(expected), "{text:?}\n  got:      {err}\n  expected: {expected}");
    }
    let layer = project("{\r\r \"filesystem\": {\"ro\": [\"a\"]}}").expect("valid");
    assert_eq!(
        layer.ro[0].origin.location,
        Location::File { path: "/p/.agent-sandbox/config.jsonc".into(), line: 3, column: 24 }
    );
    // Columns count characters, not bytes; a value on the last line, after a `\r\n`.
    let layer = project("{\r\n\"filesystem\": {\"ro\": [\"é\",\r\n \"ü\", \"b\"]}}").expect("valid");
    let at = |index: usize| layer.ro[index].origin.location.clone();
    assert_eq!(at(0), Location::File { path: "/p/.agent-sandbox/config.jsonc".into(), line: 2, column: 23 });
    assert_eq!(at(2), Location::File { path: "/p/.agent-sandbox/config.jsonc".into(), line: 3, column: 7 });
}

#[test]
fn comments_and_trailing_commas_are_accepted() {
    let layer =
        project("// top\n{\n  /* block */ \"network\": \"off\", // why\n  \"filesystem\": {\"ro\": [\"a\",],},\n}\n")
            .expect("valid jsonc");
    assert_eq!(layer.network.map(|n| n.value), Some(Network::Off));
    assert_eq!(values(&layer.ro), ["a"]);
}

#[test]
fn empty_file_is_an_empty_layer() {
    assert_eq!(project("").expect("empty is fine"), Layer::default());
    assert_eq!(project("// only a comment\n").expect("comment only is fine"), Layer::default());
}

#[test]
fn later_layers_replace_scalars_and_map_keys_and_extend_lists() {
    let global = parse_layer(
        r#"{"network": "off", "filesystem": {"ro": ["~/g"]}, "commands": {"npm": false, "git": "@git"}}"#,
        Path::new("/home/u/.config/agent-sandbox/config.json"),
        LayerKind::Global,
    )
    .expect("valid");
    let project =
        project(r#"{"filesystem": {"presets": ["!@lint"], "ro": ["p"]}, "commands": {"npm": "./npm-guard.sh"}}"#)
            .expect("valid");
    let cli = cli_layer(Some("on"), &["c".into()], &[], &[], &["curl=false".into()]).expect("valid flags");
    let config = merge(vec![defaults(), global, project, cli]);

    assert_eq!(config.network.value, Network::On);
    assert_eq!(config.network.origin.to_string(), "cli (--network)");
    assert_eq!(values(&config.presets), ["@all", "!@lint"]);
    assert_eq!(values(&config.ro), ["~/g", "p", "c"]);
    assert_eq!(
        config.ro.iter().map(|item| item.origin.to_string()).collect::<Vec<_>>(),
        [
            "global (/home/u/.config/agent-sandbox/config.json:1:42)",
            "project (/p/.agent-sandbox/config.jsonc:1:47)",
            "cli (--ro)",
        ]
    );
    let commands: Vec<(String, String)> =
        config.commands.iter().map(|(name, rule)| (name.clone(), rule.value.to_string())).collect();
    assert_eq!(
        commands,
        [
            ("curl".to_owned(), "false".to_owned()),
            ("git".to_owned(), "@git".to_owned()),
            ("npm".to_owned(), "./npm-guard.sh".to_owned()),
        ]
    );
}

#[test]
fn command_rule_forms() {
    let cases = [
        ("true", CommandRule::Allow),
        ("false", CommandRule::Deny),
        ("@git", CommandRule::Preset("git".into())),
        ("/usr/local/bin/npm-guard", CommandRule::Wrapper("/usr/local/bin/npm-guard".into())),
        ("./guard.sh", CommandRule::Wrapper("./guard.sh".into())),
    ];
    for (text, expected) in cases {
        assert_eq!(CommandRule::parse(text), expected, "{text}");
    }
}

#[test]
fn bad_flags_say_what_is_expected() {
    let cases: &[(Option<&str>, &[&str], &str)] = &[
        (Some("offline"), &[], "--network: expected \"allowlist\", \"on\" or \"off\", got \"offline\""),
        (None, &["git"], "--cmd: expected NAME=VALUE (e.g. git=@git, npm=false), got \"git\""),
        (
            None,
            &["/usr/bin/git=false"],
            "--cmd: \"/usr/bin/git\" is not a command name (use the bare name, e.g. \"npm\")",
        ),
    ];
    for (network, cmds, expected) in cases {
        let cmds: Vec<String> = cmds.iter().map(|cmd| cmd.to_string()).collect();
        let err = cli_layer(*network, &[], &[], &[], &cmds).expect_err(expected).to_string();
        assert_eq!(&err, expected);
    }
}

#[test]
fn both_json_and_jsonc_in_one_place_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs_err::write(dir.path().join("config.json"), "{}").expect("write");
    assert_eq!(
        find_config_file(dir.path()).expect("one file").as_deref(),
        Some(dir.path().join("config.json").as_path())
    );
    fs_err::write(dir.path().join("config.jsonc"), "{}").expect("write");
    let err = find_config_file(dir.path()).expect_err("two files").to_string();
    assert_eq!(
        err,
        format!(
            "both {}/config.json and {}/config.jsonc exist (keep one of them)",
            dir.path().display(),
            dir.path().display()
        )
    );
}

#[test]
fn load_reads_global_project_and_explicit_layers_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let global = dir.path().join("global");
    let project_dir = dir.path().join("proj/.agent-sandbox");
    fs_err::create_dir_all(&global).expect("mkdir");
    fs_err::create_dir_all(&project_dir).expect("mkdir");
    fs_err::write(global.join("config.jsonc"), r#"{"network": "off", "env": {"allow": ["G"]}}"#).expect("write");
    fs_err::write(project_dir.join("config.json"), r#"{"env": {"allow": ["P"]}}"#).expect("write");
    let explicit = dir.path().join("extra.jsonc");
    fs_err::write(&explicit, r#"{"network": "on", "env": {"allow": ["E"]}}"#).expect("write");
    let sources =
        Sources { global_dir: Some(global), project_dir: Some(project_dir), explicit: Some(explicit.clone()) };
    let (config, files) = load(&sources, Layer::default()).expect("loads");
    assert_eq!(values(&config.env_allow), ["G", "P", "E"]);
    assert_eq!(config.network.value, Network::On);
    assert_eq!(config.network.origin.layer, LayerKind::Explicit);
    assert_eq!(files.len(), 3);
    assert_eq!(files[2], explicit);
}

#[test]
fn suggestions_only_for_plausible_typos() {
    assert_eq!(suggest("netwrok", TOP), Some("network"));
    assert_eq!(suggest("Network", TOP), Some("network"));
    assert_eq!(suggest("comands", TOP), Some("commands"));
    assert_eq!(suggest("xyz", TOP), None);
}
const TOP: &[&str] = &["network", "filesystem", "secrets", "env", "commands"];

#[test]
fn show_text_cites_origins() {
    let cli = cli_layer(Some("off"), &[], &[], &[], &[]).expect("valid");
    let text = merge(vec![defaults(), cli]).to_text();
    assert!(text.lines().next().expect("a line").starts_with("network                    off"));
    assert!(text.contains("# cli (--network)"));
    assert!(text.contains("filesystem.exclude         ~/.ssh"));
}

/// Both forms of `network`, the mode from the last layer that sets it, the lists
/// accumulated with their origins, ports written as numbers or strings.
#[test]
fn network_section_and_its_older_string_form() {
    let old = project(r#"{"network": "off"}"#).expect("older form");
    assert_eq!(old.network.map(|n| n.value), Some(Network::Off));
    let new = project(
        r#"{"network": {"mode": "allowlist", "allow": ["*.npmjs.org", "github.com:22"], "deny": ["gist.github.com"], "hostPorts": [5432, "6379"], "allowPrivate": ["10.0.0.0/8"]}}"#,
    )
    .expect("section");
    assert_eq!(new.network.as_ref().map(|n| n.value), Some(Network::Allowlist));
    assert_eq!(values(&new.net_allow), ["*.npmjs.org", "github.com:22"]);
    assert_eq!(values(&new.net_deny), ["gist.github.com"]);
    assert_eq!(values(&new.net_host_ports), ["5432", "6379"]);
    assert_eq!(values(&new.net_allow_private), ["10.0.0.0/8"]);
    let cli = cli_layer(Some("on"), &[], &[], &[], &[])
        .expect("flags")
        .with_network_flags(&["example.org".into()], &["8080".into()]);
    let config = merge(vec![defaults(), new, cli]);
    assert_eq!(config.network.value, Network::On);
    let allow = values(&config.net_allow);
    assert_eq!(&allow[allow.len() - 3..], ["*.npmjs.org", "github.com:22", "example.org"]);
    assert_eq!(config.net_allow.last().map(|item| item.origin.to_string()).as_deref(), Some("cli (--allow-host)"));
    assert_eq!(values(&config.net_host_ports), ["5432", "6379", "8080"]);
    let json = config.to_json();
    assert_eq!(json["network"]["mode"]["value"], "on");
    assert_eq!(json["network"]["hostPorts"][2]["from"], "cli (--host-port)");
}

#[test]
fn every_table_key_is_a_section_key_once() {
    let keys: Vec<&str> = LIST_KEYS
        .iter()
        .map(|list_key| list_key.key)
        .chain(BOOL_KEYS.iter().map(|k| k.key))
        .chain(VALUE_KEYS.iter().map(|k| k.key))
        .collect();
    for (idx, key) in keys.iter().enumerate() {
        let (section, name) = key.split_once('.').expect("section.name");
        assert!(!name.contains('.') && !name.is_empty(), "{key}");
        assert!(TOP_KEYS.contains(&section) && !["project", "commands", "$schema"].contains(&section), "{key}");
        assert!(!keys[..idx].contains(key), "{key} twice");
    }
}

/// Every list key, set by a file layer, reaches the merged config with its origin and
/// `config show` (text and JSON) under the same dotted key.
#[test]
fn every_list_key_round_trips_from_file_to_show() {
    for list_key in LIST_KEYS {
        let (section, name) = list_key.key.split_once('.').expect("section.name");
        let value = format!("value of {}", list_key.key);
        let text = format!("{{\"{section}\": {{\"{name}\": [\"{value}\"]}}}}");
        let column = text.find("[\"").expect("the list") + 2;
        let config = merge(vec![project(&text).expect(list_key.key)]);
        let origin = format!("project (/p/.agent-sandbox/config.jsonc:1:{column})");

        let items = (list_key.config)(&config);
        assert_eq!(values(items), [value.as_str()], "{}", list_key.key);
        assert_eq!(items[0].origin.to_string(), origin, "{}", list_key.key);

        let text = config.to_text();
        let lines: Vec<&str> = text.lines().filter(|line| line.contains(&value)).collect();
        assert_eq!(lines, [format!("{:<26} {value:<40} # {origin}", list_key.key)], "{}", list_key.key);

        let json = config.to_json();
        assert_eq!(json[section][name], serde_json::json!([{ "value": value, "from": origin }]), "{}", list_key.key);
    }
}

/// The same for every boolean: a file layer sets it (to the other value than its
/// default), it is merged with its origin and shown under the same dotted key.
#[test]
fn every_bool_key_round_trips_from_file_to_show() {
    for bool_key in BOOL_KEYS {
        let (section, name) = bool_key.key.split_once('.').expect("section.name");
        let default = merge(vec![]);
        // Only `git.sessionRepository` is on unless turned off.
        let on_by_default = bool_key.key == "git.sessionRepository";
        assert_eq!((bool_key.config)(&default).value, on_by_default, "{}'s default", bool_key.key);
        let set = !on_by_default;
        let text = format!("{{\"{section}\": {{\"{name}\": {set}}}}}");
        let column = text.find(&set.to_string()).expect("the value") + 1;
        let config = merge(vec![project(&text).expect(bool_key.key)]);
        let origin = format!("project (/p/.agent-sandbox/config.jsonc:1:{column})");

        let value = (bool_key.config)(&config);
        assert_eq!(value.value, set, "{}", bool_key.key);
        assert_eq!(value.origin.to_string(), origin, "{}", bool_key.key);
        assert!(
            config.to_text().contains(&format!("{:<26} {:<40} # {origin}\n", bool_key.key, set.to_string())),
            "{}",
            bool_key.key
        );
        assert_eq!(config.to_json()[section][name], serde_json::json!({ "value": set, "from": origin }));
    }
}

#[test]
fn unknown_keys_in_a_section_suggest_from_the_tables() {
    let cases: &[(&str, &str)] = &[
        ("{\"checks\": {\"hmans\": true}}", "unknown key \"checks.hmans\" (did you mean \"checks.humans\"?)"),
        (
            "{\"checks\": {\"zzzzzzzz\": 1}}",
            "unknown key \"checks.zzzzzzzz\" (valid keys: commands, protectedPaths, humans)",
        ),
        ("{\"secrets\": {\"zzzzzzzz\": 1}}", "unknown key \"secrets.zzzzzzzz\" (valid keys: patterns, allow)"),
        (
            "{\"filesystem\": {\"zzzzzzzz\": 1}}",
            "unknown key \"filesystem.zzzzzzzz\" (valid keys: presets, ro, rw, exclude, hostExecuted)",
        ),
        ("{\"env\": {\"zzzzzzzz\": 1}}", "unknown key \"env.zzzzzzzz\" (valid keys: secretPatterns, allow, block)"),
        (
            "{\"git\": {\"zzzzzzzz\": 1}}",
            "unknown key \"git.zzzzzzzz\" (valid keys: allowBranchDeletion, allowPlumbingCommits, verifiedPush, sessionRepository)",
        ),
        ("{\"tools\": {\"zzzzzzzz\": 1}}", "unknown key \"tools.zzzzzzzz\" (valid keys: disallowed, readOnly)"),
        ("{\"container\": {\"memroy\": 1}}", "unknown key \"container.memroy\" (did you mean \"container.memory\"?)"),
        ("{\"container\": {\"pids\": true}}", "container.pids: expected a string or a number"),
        ("{\"container\": {\"pids\": 1.5}}", "container.pids: expected a whole number or \"none\", got \"1.5\""),
        ("{\"container\": {\"disk\": \"10%\"}}", "container.disk: expected a size (\"20g\") or \"none\", got \"10%\""),
        ("{\"checks\": 1}", "checks: expected an object"),
        ("{\"checks\": {\"humans\": \"yes\"}}", "checks.humans: expected true or false"),
    ];
    for (text, expected) in cases {
        let err = project(text).expect_err(text).to_string();
        assert!(err.ends_with(expected), "{text}\n  got:      {err}\n  expected: …{expected}");
    }
}

/// Every single value: the built-in layer sets it to a valid value, a file layer
/// replaces it (string or number) with its origin, and `config show` shows it under the
/// same dotted key.
#[test]
fn every_value_key_round_trips_from_file_to_show() {
    let builtin = merge(vec![defaults()]);
    let shown: Vec<(&str, &str)> =
        VALUE_KEYS.iter().map(|value_key| (value_key.key, (value_key.config)(&builtin).value.as_str())).collect();
    assert_eq!(
        shown,
        [
            ("container.cpus", "50%"),
            ("container.memory", "50%"),
            ("container.pids", "4096"),
            ("container.disk", "none")
        ]
    );
    for value_key in VALUE_KEYS {
        let (section, name) = value_key.key.split_once('.').expect("section.name");
        assert!(limits::parse(&(value_key.config)(&builtin).value, value_key.unit).is_ok(), "{}", value_key.key);
        for (written, value) in [("\"none\"", "none"), ("7", "7")] {
            let text = format!("{{\"{section}\": {{\"{name}\": {written}}}}}");
            let column = text.find(written).expect("the value") + 1;
            let config = merge(vec![defaults(), project(&text).expect(value_key.key)]);
            let origin = format!("project (/p/.agent-sandbox/config.jsonc:1:{column})");
            let got = (value_key.config)(&config);
            assert_eq!((got.value.as_str(), got.origin.to_string()), (value, origin.clone()), "{}", value_key.key);
            assert!(
                config.to_text().contains(&format!("{:<26} {value:<40} # {origin}\n", value_key.key)),
                "{}",
                value_key.key
            );
            assert_eq!(config.to_json()[section][name], serde_json::json!({ "value": value, "from": origin }));
        }
    }
}

/// The book's reference of configuration keys (`docs/src/reference/config.md`), generated
/// from the key tables and the built-in layer, compared with the checked-in page;
/// `UPDATE_SNAPSHOTS=1 cargo test -p config` rewrites it.
#[test]
fn the_books_key_reference_is_the_key_tables() {
    let config = merge(vec![defaults()]);
    let code = |text: &str| format!("`{text}`");
    let mut page = String::from(
        "# Configuration keys\n\nEvery key a config file (`config.jsonc`) may hold, with its built-in value. This page is \
         generated from the code's tables of keys, and a test fails when the two differ. What each key does, and how \
         the layers combine, is in [Configuration](../guide/configuration.md).\n\n## Sections\n\n",
    );
    page.push_str(&format!(
        "The top-level keys: {}. `network` may also be written as the mode alone (`\"network\": \"off\"`).\n",
        keys::TOP_KEYS.iter().map(|key| code(key)).collect::<Vec<_>>().join(", ")
    ));
    let mode = match config.network.value {
        Network::Allowlist => "allowlist",
        Network::On => "on",
        Network::Off => "off",
    };
    page.push_str(&format!(
        "\n`network.mode` is `allowlist`, `on` or `off` (built-in: `{mode}`); `project` is `\"rw\"` or `\"ro\"`.\n"
    ));
    page.push_str("\n## Lists\n\nEvery list accumulates across layers: a later layer adds to it, never removes.\n\n");
    page.push_str("| key | built-in entries |\n|---|---|\n");
    for key in keys::LIST_KEYS {
        let entries = (key.config)(&config).iter().map(|item| code(&item.value)).collect::<Vec<_>>();
        let shown = if entries.is_empty() { "none".to_owned() } else { entries.join(", ") };
        page.push_str(&format!("| `{}` | {} |\n", key.key, shown.replace('|', "\\|")));
    }
    page.push_str("\n## Booleans\n\nA later layer replaces an earlier one.\n\n| key | built-in |\n|---|---|\n");
    for key in keys::BOOL_KEYS {
        page.push_str(&format!("| `{}` | `{}` |\n", key.key, (key.config)(&config).value));
    }
    page.push_str("\n## Values\n\nA later layer replaces an earlier one.\n\n| key | built-in |\n|---|---|\n");
    for key in keys::VALUE_KEYS {
        page.push_str(&format!("| `{}` | `{}` |\n", key.key, (key.config)(&config).value));
    }
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/reference/config.md");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&file, &page).expect("writing the reference page");
    } else {
        let checked_in = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            page == checked_in,
            "docs/src/reference/config.md differs from the key tables; run UPDATE_SNAPSHOTS=1 cargo test -p config and \
             review the change"
        );
    }
}
