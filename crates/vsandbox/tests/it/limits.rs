//! The limits hold through every write path: redirections, `cp`, `mv`, `touch`,
//! `mkdir`, extensions, `write_file`, snapshot restore and host import, and for the
//! environment and command output too. Small limits make each case cheap. Every test
//! runs against each store (in memory, redb): the limits are enforced above the store,
//! so none can bypass them; and a store file holding more than the limits is refused.

use vsandbox::{CommandOutput, Config, Extension, Limits, Sandbox, ShellContext};

use crate::support::{open, Backend, BACKENDS};

const LIMITS: Limits = Limits { max_total_size: 250, max_file_size: 100, max_node_count: 10 };

fn small(backend: Backend) -> Sandbox {
    open(backend, Config { limits: LIMITS, ..Config::default() })
}

fn run(sandbox: &mut Sandbox, command: &str) -> (i32, String) {
    let result = sandbox.execute(command);
    (result.exit_code, result.stderr)
}

fn x(count: usize) -> String {
    "x".repeat(count)
}

#[test]
fn redirections_respect_the_file_size_limit() {
    for backend in BACKENDS {
        redirections_respect_the_file_size_limit_on(backend);
    }
}

fn redirections_respect_the_file_size_limit_on(backend: Backend) {
    let mut sandbox = small(backend);
    // 99 x's plus echo's newline: exactly the limit.
    assert_eq!(run(&mut sandbox, &format!("echo {} > f", x(99))), (0, String::new()));
    let (code, stderr) = run(&mut sandbox, &format!("echo {} > g", x(100)));
    assert_eq!(code, 1);
    assert!(stderr.contains("/g: the file would be 101 bytes, over the file size limit of 100 bytes"), "{stderr}");
    let (code, stderr) = run(&mut sandbox, "echo more >> f");
    assert!(code == 1 && stderr.contains("file size limit"), "{stderr}");
    assert_eq!(sandbox.execute("wc -c f").stdout, "100 f\n", "a refused append leaves the file as it was");
}

#[test]
fn the_total_size_limit_holds_across_files_and_commands() {
    for backend in BACKENDS {
        the_total_size_limit_holds_across_files_and_commands_on(backend);
    }
}

fn the_total_size_limit_holds_across_files_and_commands_on(backend: Backend) {
    let mut sandbox = small(backend);
    sandbox.write_file("/a", x(100).as_bytes()).expect("100 bytes");
    sandbox.write_file("/b", x(100).as_bytes()).expect("200 bytes");
    let (code, stderr) = run(&mut sandbox, "cp /a /c");
    assert!(
        code == 1 && stderr.contains("the sandbox would hold 300 bytes, over its total size limit of 250"),
        "{stderr}"
    );
    let (code, stderr) = run(&mut sandbox, &format!("echo {} > /c", x(60)));
    assert!(code == 1 && stderr.contains("total size limit"), "{stderr}");
    // Replacing a file counts its old size out first.
    assert_eq!(run(&mut sandbox, "cp /b /a").0, 0);
    assert!(sandbox.write_file("/d", x(51).as_bytes()).is_err_and(|err| err.to_string().contains("total size limit")));
    assert_eq!(sandbox.stats().total_size, 200);
    // mv never adds bytes.
    assert_eq!(run(&mut sandbox, "mkdir /m && mv /a /m/a && mv /m /n").0, 0);
    assert_eq!(sandbox.stats().total_size, 200);
}

#[test]
fn the_node_count_limit_holds_for_every_kind_of_node() {
    for backend in BACKENDS {
        the_node_count_limit_holds_for_every_kind_of_node_on(backend);
    }
}

fn the_node_count_limit_holds_for_every_kind_of_node_on(backend: Backend) {
    let mut sandbox = small(backend);
    let (code, stderr) = run(&mut sandbox, "mkdir -p /1/2/3/4/5/6/7/8/9/10/11");
    assert!(code == 1 && stderr.contains("would hold 11 files and directories, over its limit of 10"), "{stderr}");
    assert_eq!(sandbox.stats().node_count, 10);
    let (code, stderr) = run(&mut sandbox, "touch /t");
    assert!(code == 1 && stderr.contains("over its limit of 10"), "{stderr}");
    assert_eq!(run(&mut sandbox, "echo a > /x").0, 1);
    assert_eq!(run(&mut sandbox, "rm -r /1/2/3 && cp -r /1/2 /c && mkdir -p /1/2/a/b/c").0, 0);
    let (code, stderr) = run(&mut sandbox, "cp -r /1 /d");
    assert!(code == 1 && stderr.contains("over its limit of 10"), "{stderr}");
    assert_eq!(sandbox.stats().node_count, 10);
}

#[test]
fn names_longer_than_255_bytes_are_refused() {
    for backend in BACKENDS {
        names_longer_than_255_bytes_are_refused_on(backend);
    }
}

fn names_longer_than_255_bytes_are_refused_on(backend: Backend) {
    let mut sandbox = small(backend);
    let (code, stderr) = run(&mut sandbox, &format!("touch {}", x(256)));
    assert!(code == 1 && stderr.contains("a name is longer than 255 bytes"), "{stderr}");
    assert_eq!(run(&mut sandbox, &format!("mkdir {}", x(255))).0, 0);
    assert_eq!(run(&mut sandbox, &format!("mv {} {}", x(255), x(256))).0, 1);
}

/// An extension that tries to write more than the limits allow, straight through the
/// filesystem it is given.
struct Greedy;

impl Extension for Greedy {
    fn name(&self) -> &str {
        "greedy"
    }
    fn description(&self) -> &str {
        "writes N bytes to FILE"
    }
    fn usage(&self) -> &str {
        "greedy N FILE"
    }
    fn execute(&self, args: &[String], context: &mut ShellContext<'_>) -> CommandOutput {
        let size: usize = args[0].parse().expect("a number");
        let path = context.resolve_path(&args[1]);
        match context.fs().write(&path, &vec![b'g'; size], false) {
            Ok(()) => CommandOutput::success(""),
            Err(err) => CommandOutput::error(format!("greedy: {err}")),
        }
    }
}

#[test]
fn extensions_cannot_bypass_the_limits() {
    for backend in BACKENDS {
        extensions_cannot_bypass_the_limits_on(backend);
    }
}

fn extensions_cannot_bypass_the_limits_on(backend: Backend) {
    let mut sandbox = small(backend);
    sandbox.register(Box::new(Greedy)).expect("register");
    assert_eq!(run(&mut sandbox, "greedy 100 f").0, 0);
    let (code, stderr) = run(&mut sandbox, "greedy 101 g");
    assert!(code == 1 && stderr.contains("file size limit"), "{stderr}");
    assert_eq!(run(&mut sandbox, "greedy 100 g").0, 0);
    let (code, stderr) = run(&mut sandbox, "greedy 51 h");
    assert!(code == 1 && stderr.contains("total size limit"), "{stderr}");
}

#[test]
fn restore_refuses_a_snapshot_over_the_limits_and_changes_nothing() {
    for backend in BACKENDS {
        restore_refuses_a_snapshot_over_the_limits_and_changes_nothing_on(backend);
    }
}

fn restore_refuses_a_snapshot_over_the_limits_and_changes_nothing_on(backend: Backend) {
    let mut big = Sandbox::new(Config::default()).expect("config");
    big.execute(&format!("echo {} > /big", x(150)));
    let too_large_file = big.create_snapshot().expect("snapshot");
    let mut sandbox = small(backend);
    sandbox.execute("mkdir /mine && cd /mine && export MINE=1");
    let before = sandbox.create_snapshot().expect("snapshot");
    let err = sandbox.restore_snapshot(&too_large_file).expect_err("over the file size limit");
    assert!(err.to_string().contains("file size limit"), "{err}");
    let many = Sandbox::new(Config::default()).map(|mut sandbox| {
        sandbox.execute("mkdir -p /1/2/3/4/5/6/7/8/9/10/11");
        sandbox.create_snapshot().expect("snapshot")
    });
    let err = sandbox.restore_snapshot(&many.expect("config")).expect_err("over the node limit");
    assert!(err.to_string().contains("over its limit of 10"), "{err}");
    let mut after = sandbox.create_snapshot().expect("snapshot");
    after.timestamp.clone_from(&before.timestamp);
    assert_eq!(after, before);
}

#[test]
fn import_refuses_a_tree_over_the_limits_and_changes_nothing() {
    for backend in BACKENDS {
        import_refuses_a_tree_over_the_limits_and_changes_nothing_on(backend);
    }
}

fn import_refuses_a_tree_over_the_limits_and_changes_nothing_on(backend: Backend) {
    let host = tempfile::tempdir().expect("tempdir");
    std::fs::write(host.path().join("ok"), x(10)).expect("write");
    std::fs::write(host.path().join("too-big"), x(101)).expect("write");
    let mut sandbox = small(backend);
    let err = sandbox.import_dir(host.path(), "/in").expect_err("a file over the limit");
    assert!(err.to_string().contains("/in/too-big: the file would be 101 bytes"), "{err}");
    assert_eq!(sandbox.stats().node_count, 0, "nothing of a refused import stays");
    std::fs::remove_file(host.path().join("too-big")).expect("rm");
    for idx in 0..10 {
        std::fs::write(host.path().join(format!("f{idx}")), "1").expect("write");
    }
    let err = sandbox.import_dir(host.path(), "/in").expect_err("too many files");
    assert!(err.to_string().contains("over its limit of 10"), "{err}");
    assert_eq!(sandbox.stats().node_count, 0);
}

#[test]
fn the_environment_and_output_are_bounded_too() {
    for backend in BACKENDS {
        the_environment_and_output_are_bounded_too_on(backend);
    }
}

fn the_environment_and_output_are_bounded_too_on(backend: Backend) {
    let mut sandbox = small(backend);
    let (code, stderr) = run(&mut sandbox, &format!("export A={}", x(100)));
    assert!(code == 1 && stderr.contains("the environment would exceed 100 bytes"), "{stderr}");
    sandbox.write_file("/f", x(60).as_bytes()).expect("write");
    // Output may exceed a file (a pipe of several files) but not the total size limit.
    assert_eq!(sandbox.execute("cat /f /f | wc -c").stdout, "120\n");
    let result = sandbox.execute("cat /f /f /f /f /f");
    assert_eq!(result.exit_code, 1);
    assert!(result.stderr.contains("output stopped: more than 250 bytes"), "{}", result.stderr);
    let result = sandbox.execute("cat /f; cat /f; cat /f; cat /f; cat /f; echo never");
    assert!(result.exit_code == 1 && result.stderr.contains("the command line printed more than 250 bytes"));
    assert!(!result.stdout.contains("never"));
    let result = sandbox.execute("export B=12345678901234567890123456789012345678901234567890; echo $B$B$B$B$B$B");
    assert!(result.exit_code == 1 && result.stderr.contains("variables expand to more than 250 bytes in one command"));
}
