//! The command line: config errors, `config show`, `--dry-run`, `--debug`, and the
//! errors a user meets first.

use crate::support::{require_bwrap, World};

#[test]
fn unknown_config_keys_name_the_file_position_and_the_fix() {
    let world = World::new();
    let file =
        world.write("home/proj/.agent-sandbox/config.jsonc", "{\n  // mine\n  \"filesystem\": { \"exlude\": [] }\n}\n");
    let run = world.cmd().args(["exec", "--", "true"]).run();
    assert_eq!(run.code(), 125);
    assert_eq!(
        run.stderr(),
        format!(
            "agent-sandbox: error: {}:3:19: unknown key \"filesystem.exlude\" (did you mean \"filesystem.exclude\"?)\n",
            file.display()
        )
    );
}

#[test]
fn json_and_jsonc_side_by_side_is_an_error() {
    let world = World::new();
    world.write("xdg-config/agent-sandbox/config.json", "{}");
    world.write("xdg-config/agent-sandbox/config.jsonc", "{}");
    let run = world.cmd().args(["config", "show"]).run();
    assert_eq!(run.code(), 125);
    assert!(
        run.stderr().contains("config.json and ") && run.stderr().contains("(keep one of them)"),
        "{}",
        run.stderr()
    );
}

#[test]
fn config_show_cites_each_layer() {
    let world = World::new();
    let global = world.write("xdg-config/agent-sandbox/config.jsonc", r#"{"network": "off"}"#);
    let project = world.write("home/proj/.agent-sandbox/config.json", r#"{"filesystem": {"presets": ["!@lint"]}}"#);
    let out = world.cmd().args(["config", "show", "--rw", "/tmp"]).run().ok();
    assert!(
        out.contains(&format!(
            "network                    off                                      # global ({}:1:13)",
            global.display()
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "filesystem.presets         !@lint                                   # project ({}:1:29)",
            project.display()
        )),
        "{out}"
    );
    assert!(out.contains("filesystem.presets         @all                                     # default\n"), "{out}");
    assert!(
        out.contains("filesystem.rw              /tmp                                     # cli (--rw)\n"),
        "{out}"
    );
    let json = world.cmd().args(["config", "show", "--json"]).run().ok();
    let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(value["network"]["mode"]["value"], "off");
    assert_eq!(value["network"]["mode"]["from"], format!("global ({}:1:13)", global.display()));
}

#[test]
fn dry_run_prints_the_bwrap_command_without_running_it() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/.env", "x");
    let out = world.cmd().args(["exec", "--dry-run", "--network", "off", "--", "touch", "ran"]).run().ok();
    let bwrap_line = out.lines().find(|line| line.contains("bwrap ")).expect("a bwrap line");
    assert!(bwrap_line.contains(" --unshare-net "), "{bwrap_line}");
    assert!(bwrap_line.contains(&format!(" --bind {0} {0} ", world.project.display())), "{bwrap_line}");
    assert!(
        bwrap_line.contains(&format!(" --ro-bind '$RUNTIME/empty' {}/.env ", world.project.display())),
        "{bwrap_line}"
    );
    assert!(bwrap_line.ends_with(" --seccomp 3 --json-status-fd 4 -- touch ran"), "{bwrap_line}");
    assert!(!world.path("home/proj/ran").exists());
}

#[test]
fn debug_explains_the_decisions() {
    require_bwrap!();
    let world = World::new();
    world.write("home/proj/.env", "x");
    let run = world.cmd().env("GITHUB_TOKEN", "t").args(["exec", "--debug", "--", "true"]).run();
    run.ok();
    let err = run.stderr();
    for expected in [
        "agent-sandbox: debug: config: no config files found, built-in defaults only",
        "agent-sandbox: debug: presets: @base @caches @settings @agents @git @lint",
        &format!("agent-sandbox: debug: access rw      {} (<project root>, from default)", world.project.display()),
        &format!("agent-sandbox: debug: secret {}/.env masked (matches .env)", world.project.display()),
        "agent-sandbox: debug: env: GITHUB_TOKEN dropped (env-secret-pattern *_TOKEN)",
        "agent-sandbox: debug: command git: @git over [",
        "agent-sandbox: debug: bwrap --die-with-parent",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
}

#[test]
fn missing_bwrap_says_how_to_install_it() {
    let world = World::new();
    let run = world.cmd().env("PATH", world.path("empty-path")).args(["exec", "--", "true"]).run();
    assert_eq!(
        (run.code(), run.stderr()),
        (125, "agent-sandbox: error: bwrap not found in PATH (install with: apt install bubblewrap)\n".to_owned())
    );
}

#[test]
fn the_home_directory_is_not_a_project() {
    let world = World::new();
    let run = world.cmd().current_dir(&world.home).args(["exec", "--", "true"]).run();
    assert_eq!(run.code(), 125);
    assert!(run.stderr().contains("refusing to use") && run.stderr().contains("pass -C DIR"), "{}", run.stderr());
}

#[test]
fn a_bwrap_the_agent_could_have_written_is_never_run() {
    require_bwrap!();
    let world = World::new();
    // Planted in the project and in a writable grant, first on PATH: the real one (later
    // on PATH) is used, never these.
    let plant = "#!/bin/sh\ntouch \"$(dirname \"$0\")/PLANT-RAN\"\nexit 0\n";
    for dir in ["home/proj/bin", "home/tools/bin"] {
        world.write(&format!("{dir}/bwrap"), plant);
        world.chmod(&format!("{dir}/bwrap"), 0o755);
    }
    let path = format!(
        "{}:{}:/usr/local/bin:/usr/bin:/bin",
        world.path("home/proj/bin").display(),
        world.path("home/tools/bin").display()
    );
    let tools = world.path("home/tools");
    let run = world.cmd().env("PATH", &path).args(["exec", "--rw"]).arg(&tools).args(["--", "echo", "inside"]).run();
    assert_eq!(run.ok(), "inside\n");
    assert!(!world.path("home/proj/bin/PLANT-RAN").exists() && !world.path("home/tools/bin/PLANT-RAN").exists());
}

#[test]
fn unknown_flags_and_bad_values_are_usage_errors_with_the_fix() {
    let world = World::new();
    let cases: [(&[&str], &str); 3] = [
        (&["exec", "--bogus", "--", "true"], "to pass '--bogus' as a value, use '-- --bogus'"),
        (&["exec", "--network", "bogus", "--", "true"], "[possible values: allowlist, on, off]"),
        (&["exec", "--cmd", "npm", "--", "true"], "expected NAME=VALUE, e.g. npm=false"),
    ];
    for (args, fix) in cases {
        let run = world.cmd().args(args).run();
        assert_eq!(run.code(), 2, "{args:?}: {}", run.stderr());
        assert!(run.stderr().contains(fix), "{args:?}: {}", run.stderr());
    }
    // The default command takes a workspace: a mistyped command is neither.
    let run = world.cmd().args(["exce", "-c", "true"]).run();
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(
        run.stderr().contains("exce is neither a command nor a directory (the default command is `shell [PATH]`)"),
        "{}",
        run.stderr()
    );
    // The legitimate forms beside them: the command's own flags after it pass through.
    let run = world.cmd().args(["exec", "--dry-run", "echo", "--resume", "-x"]).run();
    assert!(run.ok().contains("-- echo --resume -x"), "{}", run.stdout());
}

#[test]
fn trust_changing_commands_refuse_inside_and_the_prompt_says_where_you_are() {
    require_bwrap!();
    let world = World::new();
    let script = "agent-sandbox config allow; echo \"allow=$?\"; agent-sandbox hooks install; echo \"hooks=$?\"; \
                  echo \"$debian_chroot|$PS1\"";
    let run = world.sh(&[], script);
    let out = run.ok();
    assert!(out.contains("allow=125\nhooks=125\nagent-sandbox|(agent-sandbox) $ \n"), "{out}\n{}", run.stderr());
    assert!(run.stderr().contains("run it outside the sandbox"), "{}", run.stderr());
    // Outside, they work.
    world.project_config("{}");
    world.cmd().args(["hooks", "install"]).run().ok();
}

#[test]
fn completions_and_the_man_page_come_from_the_same_definitions() {
    let world = World::new();
    for (shell, marker) in
        [("bash", "complete -F"), ("zsh", "#compdef agent-sandbox"), ("fish", "complete -c agent-sandbox")]
    {
        let out = world.cmd().args(["completions", shell]).run().ok();
        assert!(out.contains(marker) && out.contains("exec") && out.contains("read-only"), "{shell}: {out}");
    }
    let man = world.cmd().arg("man").run().ok();
    assert!(man.contains(".TH agent-sandbox 1") && man.contains("exec"), "{man}");
    assert_eq!(world.cmd().args(["completions", "nope"]).run().code(), 2);
}

#[test]
fn bash_completes_past_the_first_word_and_offers_no_hidden_command() {
    let world = World::new();
    let script = world.cmd().args(["completions", "bash"]).run().ok();
    let script_path = world.write("completion.bash", &script);
    // What bash's programmable completion does on <TAB>: the function `complete -p`
    // names, called with the command, the word and the word before it.
    let complete = |words: &[&str]| {
        let quoted: Vec<String> = words.iter().map(|word| format!("'{word}'")).collect();
        let cword = words.len() - 1;
        let shell = format!(
            "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={cword}\n\
             function=$(complete -p agent-sandbox | sed -n 's/.*-F \\([^ ]*\\) .*/\\1/p')\n\
             \"$function\" agent-sandbox '{}' '{}'\necho \"${{COMPREPLY[*]}}\"",
            script_path.display(),
            quoted.join(" "),
            words[cword],
            words[cword - 1]
        );
        let out = std::process::Command::new("bash").arg("-c").arg(shell).output().expect("bash");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    // The second word: `config <TAB>`, `hooks in<TAB>`, `exec --re<TAB>`.
    assert_eq!(complete(&["agent-sandbox", "config", ""]), "-h --help show allow help");
    assert_eq!(complete(&["agent-sandbox", "hooks", "in"]), "install");
    assert_eq!(complete(&["agent-sandbox", "exec", "--read"]), "--read-only");
    // The first word: the commands people type, none of those agent-sandbox runs itself.
    let first: Vec<String> = complete(&["agent-sandbox", ""]).split(' ').map(str::to_owned).collect();
    for visible in ["exec", "test", "hooks", "completions", "shell"] {
        assert!(first.iter().any(|word| word == visible), "{visible} missing: {first:?}");
    }
    for hidden in ["hook", "probe", "push-verify", "tool-guard-install", "man"] {
        assert!(!first.iter().any(|word| word == hidden), "{hidden} offered: {first:?}");
    }
    let firewall = complete(&["agent-sandbox", "firewall", ""]);
    assert!(firewall.contains("apply") && !firewall.contains("start") && !firewall.contains("wait"), "{firewall}");
}

#[test]
fn bare_agent_sandbox_without_docker_says_what_it_is_and_the_way_in_without_it() {
    let world = World::new();
    let run = world.cmd().env("DOCKER_HOST", "unix:///nonexistent/docker.sock").run();
    assert_eq!(run.code(), 125, "{}", run.stderr());
    assert!(
        run.stderr().contains("cannot reach the Docker engine at unix:///nonexistent/docker.sock"),
        "{}",
        run.stderr()
    );
    assert!(
        run.stderr().contains("bare `agent-sandbox` is `agent-sandbox shell`, the Docker sandbox of this directory")
            && run.stderr().contains("`agent-sandbox exec -- claude`"),
        "{}",
        run.stderr()
    );
    // A socket this user may not open: the docker group is named for what it is.
    // (Root opens any socket: the unprivileged rerun tests this part.)
    if crate::support::is_root() {
        return;
    }
    let socket_path = world.path("docker.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket_path).expect("bind");
    world.chmod("docker.sock", 0o000);
    let run = world.cmd().env("DOCKER_HOST", format!("unix://{}", socket_path.display())).run();
    assert_eq!(run.code(), 125, "{}", run.stderr());
    assert!(
        run.stderr().contains("permission denied")
            && run.stderr().contains("whoever may use the socket is root on this machine")
            && run.stderr().contains("`agent-sandbox exec -- claude`"),
        "{}",
        run.stderr()
    );
}

#[test]
fn colours_only_on_a_terminal_and_never_with_no_color() {
    let world = World::new();
    let blocked = r#"{"timestamp":"2026-01-28T10:30:00Z","agent":"sh","operation":"exec","target":"npm","result":"blocked","policy":"command-deny","source":"host","session":"0a1b2c3d"}"#;
    world.write("xdg-state/agent-sandbox/audit.jsonl", &format!("{blocked}\n"));
    // `script` runs the command on a pseudo-terminal (util-linux).
    let on_terminal = |args: &str, no_color: Option<&str>| {
        let cmd = world.cmd();
        let mut script = std::process::Command::new("script");
        script.args(["-qec", &format!("{} {args}", *crate::support::BIN), "/dev/null"]);
        script.env_clear().envs(cmd.cmd.get_envs().filter_map(|(key, value)| Some((key, value?))));
        script.current_dir(&world.project).env("TERM", "xterm");
        if let Some(value) = no_color {
            script.env("NO_COLOR", value);
        }
        String::from_utf8_lossy(&script.output().expect("script runs").stdout).into_owned()
    };
    let red = "\u{1b}[31mblocked\u{1b}[0m";
    assert!(on_terminal("log", None).contains(red), "{:?}", on_terminal("log", None));
    assert!(!on_terminal("log", Some("1")).contains('\u{1b}'));
    // An empty NO_COLOR does not count (no-color.org).
    assert!(on_terminal("log", Some("")).contains(red));
    assert!(on_terminal("exec --help", None).contains('\u{1b}'), "clap styles help on a terminal");
    for args in ["exec --help", "exec --bogus", "log --since x"] {
        assert!(!on_terminal(args, Some("1")).contains('\u{1b}'), "{args}");
    }
    // Off a terminal, never.
    for args in [&["log"][..], &["exec", "--help"], &["exec", "--bogus"], &["log", "--json"]] {
        let run = world.cmd().args(args).run();
        assert!(!run.stdout().contains('\u{1b}') && !run.stderr().contains('\u{1b}'), "{args:?}");
    }
}

#[test]
fn check_and_firewall_status_speak_json() {
    require_bwrap!();
    let world = World::new();
    let run = world.cmd().args(["check", "--json"]).run();
    assert_eq!((run.code(), run.stdout()), (1, "{\"inside\":false,\"where\":\"outside\"}\n".to_owned()));
    let run = world.sh(&[], "agent-sandbox check --json; echo code=$?");
    assert_eq!(run.ok(), "{\"inside\":true,\"where\":\"bubblewrap\"}\ncode=0\n");
    // Outside a container: the built-in defaults alone, and never anything to apply;
    // still an answer, not an error.
    let out = world.cmd().args(["firewall", "status", "--json"]).run().ok();
    let status: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(status["health"]["state"], "not-a-container", "{out}");
    assert_eq!(status["policy"]["mode"], "allowlist", "{out}");
    assert!(
        status["policy"]["allow"].as_array().is_some_and(|allow| allow.contains(&"api.anthropic.com".into())),
        "{out}"
    );
}

/// A view of this machine for `agent-sandbox firewall`: the system read-only, this
/// binary, uid 0 (in a user namespace of its own, without capabilities), a network
/// namespace, `/var/lib` and `/tmp` of its own, and with `marked` the root-owned
/// `/.agent-sandbox` a container agent-sandbox set up has. Should the host's refusal
/// ever break, an apply here still cannot touch this machine's filter table or files.
fn firewall_in_view(world: &World, marked: bool, args: &[&str]) -> (i32, String, String) {
    let mut cmd = std::process::Command::new("bwrap");
    cmd.args(["--unshare-user", "--uid", "0", "--gid", "0", "--unshare-net", "--unshare-pid", "--die-with-parent"]);
    for dir in ["/usr", "/etc"] {
        cmd.args(["--ro-bind", dir, dir]);
    }
    for link in ["bin", "lib", "lib64", "sbin"] {
        if let Ok(target) = std::fs::read_link(format!("/{link}")) {
            cmd.arg("--symlink").arg(target).arg(format!("/{link}"));
        }
    }
    cmd.args(["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/var/lib", "--tmpfs", "/run"]);
    cmd.args(["--ro-bind", crate::support::BIN.as_str(), "/run/agent-sandbox-under-test"]);
    if marked {
        let marker = world.write("marker", "");
        cmd.arg("--ro-bind").arg(marker).arg("/.agent-sandbox");
    }
    cmd.args(["--clearenv", "--setenv", "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]);
    cmd.args(["--", "/run/agent-sandbox-under-test", "firewall"]).args(args);
    let out = cmd.output().expect("bwrap runs");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// On a host, `firewall apply` would replace the host's filter table (and closing
/// egress on failure would cut its network): it refuses, as root too, before touching
/// anything, and `status` says the firewall is for containers instead of advising the
/// apply. In a container agent-sandbox set up (the marker), the same binary reports
/// "not applied" and goes on to apply (which fails here, where there is no proxy user).
#[test]
fn firewall_apply_refuses_on_a_host_and_status_says_it_is_for_containers() {
    require_bwrap!();
    let world = World::new();
    let refusal = "agent-sandbox: error: refusing to apply the firewall: this is not a container agent-sandbox set up \
                   (no /.agent-sandbox marker)";
    for command in ["apply", "start"] {
        let (code, stdout, stderr) = firewall_in_view(&world, false, &[command]);
        assert_eq!((code, stdout.as_str()), (125, ""), "{command}: {stderr}");
        assert!(stderr.starts_with(refusal), "{command}: {stderr}");
        assert!(stderr.contains("cuts the host's own network"), "{command}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "the reason once, no banner: {stderr}");
    }
    let on_host = "firewall: not for this machine: this is not a container agent-sandbox set up";
    for status in [firewall_in_view(&world, false, &["status"]).1, world.cmd().args(["firewall", "status"]).run().ok()]
    {
        assert!(status.starts_with(on_host), "{status}");
        assert!(!status.contains("firewall apply"), "no advice to apply on a host: {status}");
        assert!(status.contains("\nnetwork.mode: allowlist\n"), "the policy is still shown: {status}");
    }
    let (code, _, stderr) = firewall_in_view(&world, false, &["wait"]);
    assert_eq!(code, 0, "{stderr}");

    // The container beside it: not refused, and reported as a container's firewall.
    let (code, status, stderr) = firewall_in_view(&world, true, &["status"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(status.starts_with("firewall: NOT APPLIED since this container started"), "{status}");
    let (code, _, stderr) = firewall_in_view(&world, true, &["apply"]);
    assert_eq!(code, 125, "{stderr}");
    assert!(!stderr.contains("refusing to apply"), "{stderr}");
    assert!(stderr.contains("the image has no user agent-sandbox-net for the proxy"), "it went on to apply: {stderr}");
}
