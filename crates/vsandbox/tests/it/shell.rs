//! Shell features: quoting and escaping, `$VAR` expansion, `;`, `&&`, `||`, pipes,
//! redirections, comments, syntax errors, the timeout, history and statistics.

use std::time::{Duration, Instant};

use vsandbox::{CommandOutput, Config, Extension, Sandbox, ShellContext};

use crate::support::{check_all, project};

#[test]
fn quoting_and_escaping() {
    check_all(
        project,
        &[
            ("echo 'a  b'", "a  b\n", 0, ""),
            ("echo \"a  b\"", "a  b\n", 0, ""),
            ("echo a\\ b", "a b\n", 0, ""),
            ("echo a   b", "a b\n", 0, ""),
            ("echo \"it's\"", "it's\n", 0, ""),
            ("echo 'say \"hi\"'", "say \"hi\"\n", 0, ""),
            ("echo \"say \\\"hi\\\"\"", "say \"hi\"\n", 0, ""),
            ("echo 'it'\\''s'", "it's\n", 0, ""),
            ("echo \"a\\nb\"", "a\\nb\n", 0, ""),
            ("echo \"back\\\\slash\"", "back\\slash\n", 0, ""),
            ("echo a\"b\"'c'd", "abcd\n", 0, ""),
            ("echo \"\"", "\n", 0, ""),
            ("echo \"\" x", " x\n", 0, ""),
            ("echo ''", "\n", 0, ""),
            ("echo 'a;b' \"c|d\" e\\&\\&f", "a;b c|d e&&f\n", 0, ""),
            ("echo '>' \\> \">>\"", "> > >>\n", 0, ""),
            ("echo \"multi\nline\"", "multi\nline\n", 0, ""),
            ("echo a\\\nb", "ab\n", 0, ""),
            ("echo 'unterminated", "", 1, "syntax error: unterminated single quote"),
            ("echo \"unterminated", "", 1, "syntax error: unterminated double quote"),
            ("echo trailing\\", "trailing\\\n", 0, ""),
        ],
    );
}

#[test]
fn variable_expansion() {
    check_all(
        project,
        &[
            ("echo $HOME", "/\n", 0, ""),
            ("echo \"$PWD\"", "/p\n", 0, ""),
            ("echo '$HOME'", "$HOME\n", 0, ""),
            ("echo \\$HOME \"\\$HOME\"", "$HOME $HOME\n", 0, ""),
            ("export NAME=world; echo \"hello $NAME\"", "hello world\n", 0, ""),
            ("export NAME=world; echo ${NAME}s $NAMEs.", "worlds .\n", 0, ""),
            ("export A=1 && echo $A", "1\n", 0, ""),
            ("echo $UNSET end", "end\n", 0, ""),
            ("echo \"$UNSET\" end", " end\n", 0, ""),
            ("export S='a b'; echo [$S]", "[a b]\n", 0, ""),
            ("export S='a b'; ls $S", "", 1, "ls: /p/a b: No such file or directory"),
            ("export D=src; cat $D/main.rs", "fn main() {}\n", 0, ""),
            ("echo $ $1 a$", "$ $1 a$\n", 0, ""),
            ("cat nope; echo $? ${?}", "1 1\n", 0, "No such file"),
            ("echo ${", "", 1, "syntax error: missing } after ${"),
            ("echo ${a-b}", "", 1, "bad substitution"),
            ("echo $(ls)", "", 1, "command substitution $(...) is not supported"),
            ("echo `ls`", "", 1, "command substitution"),
            ("export X='$HOME'; echo $X", "$HOME\n", 0, ""),
        ],
    );
}

#[test]
fn globbing_expands_unquoted_wildcards_as_sh_does() {
    check_all(
        project,
        &[
            ("echo *", "a.txt b.txt nums src\n", 0, ""),
            ("echo *.txt", "a.txt b.txt\n", 0, ""),
            ("cat *.txt", "alpha\nbeta\ngamma\nBeta Two\n", 0, ""),
            ("echo ?.txt", "a.txt b.txt\n", 0, ""),
            ("echo [ab].txt", "a.txt b.txt\n", 0, ""),
            ("echo [!a].txt", "b.txt\n", 0, ""),
            ("echo [a-b]*", "a.txt b.txt\n", 0, ""),
            ("echo src/*.rs", "src/lib.rs src/main.rs\n", 0, ""),
            ("echo */*.rs", "src/lib.rs src/main.rs\n", 0, ""),
            ("echo /p/src/m*", "/p/src/main.rs\n", 0, ""),
            ("echo ./src/l*", "./src/lib.rs\n", 0, ""),
            ("cd src && echo ../*.txt", "../a.txt ../b.txt\n", 0, ""),
            ("echo */", "src/\n", 0, ""),
            ("echo s*/../n*", "src/../nums\n", 0, ""),
            // Dot files only for a pattern starting with a dot.
            ("echo .*", ".hidden\n", 0, ""),
            ("echo *hidden", "*hidden\n", 0, ""),
            // No match: the word stays as typed, and the command sees it.
            ("echo *.json", "*.json\n", 0, ""),
            ("ls *.json", "", 1, "ls: /p/*.json: No such file or directory"),
            ("echo src/*.py x", "src/*.py x\n", 0, ""),
            // Quoted or escaped wildcards are literal.
            ("echo '*.txt' \"*.txt\" \\*.txt", "*.txt *.txt *.txt\n", 0, ""),
            ("echo '*'.txt", "*.txt\n", 0, ""),
            ("touch '*.txt' && ls *'*'*", "*.txt\n", 0, ""),
            ("touch 'a?' && echo a\\? a?", "a? a?\n", 0, ""),
            // Wildcards and variables: the variable's value is literal.
            ("export D=src; echo $D/*.rs", "src/lib.rs src/main.rs\n", 0, ""),
            ("export P='*.txt'; echo $P", "*.txt\n", 0, ""),
            ("export D='s*'; echo $D/*.rs", "s*/*.rs\n", 0, ""),
            // Everywhere a word is: command names and pipelines; not redirection targets.
            ("echo x > *.txt && cat '*.txt'", "x\n", 0, ""),
            ("cat n* | head -n 2", "1\n2\n", 0, ""),
            ("wc -l *.txt", "3 a.txt\n1 b.txt\n4 total\n", 0, ""),
            ("grep -l beta *", "a.txt\n", 1, "grep: /p/src: Is a directory"),
            ("rm *.txt && ls", "nums\nsrc\n", 0, ""),
            ("cp src/*.rs . && ls", "a.txt\nb.txt\nlib.rs\nmain.rs\nnums\nsrc\n", 0, ""),
            // find -name takes its own pattern: quoted, it reaches find unexpanded.
            ("find . -name '*.rs'", "./src/lib.rs\n./src/main.rs\n", 0, ""),
            ("echo [", "[\n", 0, ""),
            ("echo a[b", "a[b\n", 0, ""),
        ],
    );
}

#[test]
fn globbing_stays_within_the_node_limit() {
    // 60 directories: `*/../*` would look at 60 × 60 names, over the limit of 1000.
    let config = Config {
        limits: vsandbox::Limits { max_node_count: 1000, ..vsandbox::Limits::default() },
        ..Config::default()
    };
    let mut sandbox = Sandbox::new(config).expect("config");
    for idx in 0..60 {
        sandbox.write_file(&format!("/d{idx:02}/f"), b"").expect("within the limits");
    }
    let result = sandbox.execute("echo */*");
    assert_eq!(result.stdout.split(' ').count(), 60, "{result:?}");
    let result = sandbox.execute("echo */../*/../*");
    assert_eq!(result.exit_code, 1);
    assert_eq!(result.stdout, "");
    assert!(result.stderr.contains("the pattern looks at more than 1000 names (the node limit)"), "{result:?}");
    // The refused word stops its command only; the line goes on.
    let result = sandbox.execute("echo */../*/../* ; echo next");
    assert_eq!(result.stdout, "next\n");
}

#[test]
fn lists_chains_and_pipes() {
    check_all(
        project,
        &[
            ("echo a;echo b", "a\nb\n", 0, ""),
            ("echo a\necho b", "a\nb\n", 0, ""),
            ("echo a && echo b", "a\nb\n", 0, ""),
            ("cat nope && echo b", "", 1, "No such file"),
            ("cat nope || echo b", "b\n", 0, "No such file"),
            ("echo a || echo b", "a\n", 0, ""),
            ("cat nope && echo b || echo c", "c\n", 0, "No such file"),
            ("echo a && cat nope; echo d", "a\nd\n", 0, "No such file"),
            ("echo a &&\necho b", "a\nb\n", 0, ""),
            ("cat a.txt | grep beta | wc -l", "1\n", 0, ""),
            ("cat a.txt |\n grep -c a", "3\n", 0, ""),
            ("cat nope | wc -l", "0\n", 0, "No such file"),
            ("echo a | cat nope", "", 1, "No such file"),
            ("echo x | nope", "", 127, "nope: command not found"),
            (";; echo a;", "a\n", 0, ""),
            ("", "", 0, ""),
            ("   # only a comment", "", 0, ""),
            ("echo a # comment", "a\n", 0, ""),
            ("echo a#b", "a#b\n", 0, ""),
            ("echo a |", "", 1, "syntax error: unexpected end of the command line"),
            ("&& echo a", "", 1, "syntax error: unexpected &&"),
            ("echo a | | echo b", "", 1, "syntax error: unexpected |"),
            ("echo a &", "", 1, "background jobs (&) are not supported"),
            ("cat < a.txt", "", 1, "input redirection (<) is not supported"),
            ("(echo a)", "", 1, "subshells"),
        ],
    );
}

#[test]
fn redirections() {
    check_all(
        project,
        &[
            ("echo x > f; cat f", "x\n", 0, ""),
            ("echo x >f; echo y >> f; cat f", "x\ny\n", 0, ""),
            ("echo y >>new; cat new", "y\n", 0, ""),
            ("echo x > f | cat; cat f", "x\n", 0, ""),
            ("cat a.txt > f > g; cat f; cat g", "alpha\nbeta\ngamma\n", 0, ""),
            ("cat a.txt > a.txt; cat a.txt", "alpha\nbeta\ngamma\n", 0, ""),
            ("> empty; wc -c empty", "0 empty\n", 0, ""),
            ("cat nope 2> err; cat err", "cat: /p/nope: No such file or directory\n", 0, ""),
            ("cat nope 2>> err; cat nope 2>>err; wc -l err", "2 err\n", 0, ""),
            ("cat nope 2>&1 | wc -l", "1\n", 0, ""),
            (
                "cat a.txt nope > out 2>&1; cat out",
                "alpha\nbeta\ngamma\ncat: /p/nope: No such file or directory\n",
                0,
                "",
            ),
            ("cat nope 2>&1 > out; cat out", "cat: /p/nope: No such file or directory\n", 0, ""),
            ("echo a 2>e; cat e; wc -c e", "a\n0 e\n", 0, ""),
            ("echo a2>x; cat x", "a2\n", 0, ""),
            ("echo \"2\">x; cat x", "2\n", 0, ""),
            ("export F=out; echo v > $F; cat out", "v\n", 0, ""),
            ("echo v > src", "", 1, "/p/src: Is a directory"),
            ("echo v > nodir/f", "", 1, "No such file or directory"),
            ("echo v >", "", 1, "syntax error: expected a file name after the redirection"),
            ("echo v > ;", "", 1, "syntax error: expected a file name after the redirection, found ;"),
            ("echo v >&3", "", 1, "only the descriptor duplication 2>&1 is supported"),
        ],
    );
}

/// An extension that works until the deadline, checking it as extensions should.
struct Spin;

impl Extension for Spin {
    fn name(&self) -> &str {
        "spin"
    }
    fn aliases(&self) -> &[&str] {
        &["busy"]
    }
    fn description(&self) -> &str {
        "waits until the command times out"
    }
    fn usage(&self) -> &str {
        "spin"
    }
    fn execute(&self, _args: &[String], context: &mut ShellContext<'_>) -> CommandOutput {
        while !context.timed_out() {
            std::thread::sleep(Duration::from_millis(5));
        }
        CommandOutput::error("spin: stopped at the deadline")
    }
}

/// An extension that takes 30 ms and succeeds.
struct Nap;

impl Extension for Nap {
    fn name(&self) -> &str {
        "nap"
    }
    fn aliases(&self) -> &[&str] {
        &[]
    }
    fn description(&self) -> &str {
        "sleeps 30 ms"
    }
    fn usage(&self) -> &str {
        "nap"
    }
    fn execute(&self, _args: &[String], _context: &mut ShellContext<'_>) -> CommandOutput {
        std::thread::sleep(Duration::from_millis(30));
        CommandOutput::default()
    }
}

#[test]
fn a_command_lines_duration_covers_what_ran() {
    let mut sandbox = Sandbox::new(Config::default()).expect("config");
    sandbox.register(Box::new(Nap)).expect("register");
    for line in ["nap", "echo a; nap", "nap | echo b", "false || nap"] {
        let result = sandbox.execute(line);
        assert!(result.duration_ms >= 30.0, "{line}: {result:?}");
        assert_eq!(sandbox.history().last().map(|entry| entry.duration_ms), Some(result.duration_ms));
    }
    let stats = sandbox.stats();
    assert!(stats.total_duration_ms >= 120.0, "{stats:?}");
}

#[test]
fn a_command_line_stops_at_its_timeout() {
    let config = Config { command_timeout: Duration::from_millis(200), ..Config::default() };
    let mut sandbox = Sandbox::new(config).expect("config");
    sandbox.register(Box::new(Spin)).expect("register");
    let start = Instant::now();
    let result = sandbox.execute("echo before; busy; echo after > f");
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    assert_eq!((result.stdout.as_str(), result.exit_code), ("before\n", 1));
    assert!(result.stderr.contains("timed out after 200 ms"), "{}", result.stderr);
    assert!(result.duration_ms >= 200.0, "the duration covers the stopped line: {result:?}");
    assert!(!sandbox.execute("cat f").success, "nothing after the timeout ran");
    assert!(sandbox.execute("echo later").success, "the next command line has its own deadline");
}

#[test]
fn an_interrupt_stops_the_command_line_with_status_130() {
    let mut sandbox = project();
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    sandbox.set_interrupt(std::sync::Arc::clone(&flag));
    assert_eq!(sandbox.execute("echo runs").stdout, "runs\n");
    flag.store(true, std::sync::atomic::Ordering::Relaxed);
    let result = sandbox.execute("cat a.txt; echo never");
    assert_eq!((result.stdout.as_str(), result.exit_code), ("", 130), "{result:?}");
    assert!(result.stderr.contains("interrupted"), "{result:?}");
    // Cleared by the front end, the next line runs as usual.
    flag.store(false, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(sandbox.execute("echo $?").stdout, "130\n");
}

#[test]
fn extensions_cannot_take_a_builtin_name_and_appear_in_help() {
    struct Named(&'static str);
    impl Extension for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "test"
        }
        fn usage(&self) -> &str {
            "test"
        }
        fn execute(&self, args: &[String], context: &mut ShellContext<'_>) -> CommandOutput {
            let text = format!(
                "{} in {} HOME={}\n",
                args.join(","),
                context.current_directory(),
                context.environment()["HOME"]
            );
            CommandOutput::success(text)
        }
    }
    let mut sandbox = project();
    assert!(sandbox.register(Box::new(Named("cat"))).is_err());
    sandbox.register(Box::new(Named("mine"))).expect("a free name");
    assert!(sandbox.register(Box::new(Named("mine"))).is_err());
    assert!(sandbox.register(Box::new(Spin)).is_ok());
    assert!(sandbox.register(Box::new(Spin)).is_err());
    let result = sandbox.execute("mine 'a b' $HOME | cat");
    assert_eq!(result.stdout, "a b,/ in /p HOME=/\n");
    let help = sandbox.execute("help").stdout;
    assert!(help.lines().any(|line| line.starts_with("mine ")), "{help}");
    assert!(sandbox.execute("help busy").stdout.starts_with("spin: waits"));
    let names: Vec<String> = sandbox.available_commands().into_iter().map(|info| info.name).collect();
    assert_eq!(names.len(), 21);
}

#[test]
fn history_and_stats_record_every_command_line() {
    let mut sandbox = Sandbox::new(Config { history_limit: 3, ..Config::default() }).expect("config");
    for command in ["mkdir /d", "echo hi > /d/f", "cat /nope", "cat /d/f"] {
        sandbox.execute(command);
    }
    let history = sandbox.history();
    let summary: Vec<(&str, &str, i32, bool)> =
        history.iter().map(|r| (r.command.as_str(), r.stdout.as_str(), r.exit_code, r.success)).collect();
    assert_eq!(summary, [("echo hi > /d/f", "", 0, true), ("cat /nope", "", 1, false), ("cat /d/f", "hi\n", 0, true)]);
    assert!(history.iter().all(|r| r.duration_ms >= 0.0));
    let stats = sandbox.stats();
    assert_eq!(
        (stats.commands_executed, stats.commands_failed, stats.files, stats.directories, stats.node_count),
        (4, 1, 1, 1, 2)
    );
    assert_eq!((stats.total_size, stats.history_entries, stats.cwd.as_str()), (3, 3, "/"));
    assert_eq!((stats.max_total_size, stats.max_file_size, stats.max_node_count), (104_857_600, 10_485_760, 10_000));
    assert_eq!(stats.command_timeout_ms, 30_000);
}

#[test]
fn the_history_holds_each_result_as_it_was_returned() {
    let mut sandbox = Sandbox::new(Config::default()).expect("config");
    sandbox.write_file("/bin.dat", b"\xff\xfe ok").expect("write");
    let mut returned = Vec::new();
    for command in ["echo out; cat /nope; echo more", "cat /bin.dat", "", "cd /nope || echo é", "echo 'unterminated"] {
        returned.push(sandbox.execute(command));
    }
    let history = sandbox.history();
    assert_eq!(history.len(), 6);
    assert_eq!(history[0].command, "write_file /bin.dat (5 bytes)");
    assert_eq!(history[1..], returned[..]);
    assert_eq!(history[2].stdout, "\u{fffd}\u{fffd} ok");
    assert!(!history[1].stderr.is_empty() && !history[1].stdout.is_empty());
}

#[test]
fn the_history_drops_the_oldest_results_beyond_16_mib() {
    let mut sandbox = Sandbox::new(Config::default()).expect("config");
    sandbox.write_file("/big", &vec![b'x'; 5 * 1024 * 1024]).expect("write");
    for _ in 0..3 {
        sandbox.execute("cat /big");
    }
    // write_file and three cats fit in 16 MiB; a fourth cat pushes out the two oldest.
    assert_eq!(sandbox.history().len(), 4);
    sandbox.execute("cat /big");
    let commands: Vec<String> = sandbox.history().into_iter().map(|result| result.command).collect();
    assert_eq!(commands, ["cat /big", "cat /big", "cat /big"]);
}

#[test]
fn config_sets_the_working_directory_and_environment() {
    let config = Config {
        working_directory: String::from("/home/agent"),
        environment: [(String::from("HOME"), String::from("/home/agent")), (String::from("X"), String::from("1"))]
            .into_iter()
            .collect(),
        ..Config::default()
    };
    let mut sandbox = Sandbox::new(config).expect("config");
    assert_eq!(
        sandbox.execute("pwd; echo $HOME $X; cd /; cd; pwd").stdout,
        "/home/agent\n/home/agent 1\n/home/agent\n"
    );
    let unbounded = Config { command_timeout: Duration::MAX, ..Config::default() };
    assert_eq!(Sandbox::new(unbounded).expect("config").execute("echo no overflow").stdout, "no overflow\n");
    let bad = Config { working_directory: String::from("relative"), ..Config::default() };
    assert!(Sandbox::new(bad).is_err());
    let bad_env =
        Config { environment: [(String::from("1X"), String::new())].into_iter().collect(), ..Config::default() };
    assert!(Sandbox::new(bad_env).is_err());
}
