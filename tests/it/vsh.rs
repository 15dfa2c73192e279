//! `agent-sandbox vsh` end to end: the interactive shell fed through stdin and on a real
//! pseudo-terminal (line editing, history, completion, Ctrl-C, Ctrl-D, signals), the
//! `--json` line protocol, a snapshot file and a store carried across sessions (a killed
//! one included), and a host
//! project imported, changed and exported. No bwrap needed: nothing runs on the host.

use std::{
    io::Write,
    path::Path,
    process::{Command, Output, Stdio},
};

use crate::support::BIN;

fn vsh(dir: &Path, args: &[&str], input: &str) -> Output {
    let mut child = Command::new(&*BIN)
        .arg("vsh")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agent-sandbox runs");
    if let Err(err) = child.stdin.take().expect("stdin").write_all(input.as_bytes()) {
        // vsh may refuse before the session and exit without reading (a non-empty export target).
        assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {err}");
    }
    child.wait_with_output().expect("wait")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn vsh_runs_commands_and_carries_a_snapshot_across_sessions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = vsh(dir.path(), &["--snapshot", "state.json"], "mkdir /w\ncd /w\necho hi > f\nexport K=v\ncat f\nnope\n");
    assert_eq!(text(&out.stdout), "hi\n");
    assert_eq!(out.status.code(), Some(127), "the last command's status");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("nope: command not found") && stderr.contains("saved the sandbox to state.json"),
        "{stderr}"
    );
    // The second session starts where the first ended: files, working directory, variables.
    let out = vsh(dir.path(), &["--snapshot", "state.json"], "pwd; cat f; echo $K\nexit 3\necho never\n");
    assert_eq!(text(&out.stdout), "/w\nhi\nv\n");
    assert_eq!(out.status.code(), Some(3));
    // A broken snapshot file stops the start and is left alone.
    std::fs::write(dir.path().join("state.json"), "{\"format\": \"agent-sandbox-vsandbox-snapshot\", \"version\": 9}")
        .expect("write");
    let out = vsh(dir.path(), &["--snapshot", "state.json"], "");
    assert_eq!(out.status.code(), Some(125));
    assert!(text(&out.stderr).contains("snapshot version 9 is not supported"), "{}", text(&out.stderr));
}

#[test]
fn vsh_keeps_the_sandbox_in_a_store_file_across_sessions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = vsh(dir.path(), &["--store", "state.redb"], "mkdir /w\ncd /w\necho hi > f\nexport K=v\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("created the store state.redb"), "{}", text(&out.stderr));
    let out = vsh(dir.path(), &["--store", "state.redb"], "pwd; cat f; echo $K\n");
    assert_eq!(text(&out.stdout), "/w\nhi\nv\n");
    assert!(text(&out.stderr).contains("using the store state.redb: 1 files, 1 directories"), "{}", text(&out.stderr));
    // A snapshot file is not a store: refused, and left as it was.
    std::fs::write(dir.path().join("state.json"), "{}").expect("write");
    let out = vsh(dir.path(), &["--store", "state.json"], "");
    assert_eq!(out.status.code(), Some(125));
    assert!(text(&out.stderr).contains("state.json: cannot open the store"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("state.json")).expect("read"), "{}");
}

/// Each command line is committed to the store when it ends: a session killed with
/// SIGKILL (no chance to save anything) loses nothing that had finished.
#[test]
fn a_killed_vsh_loses_no_finished_command_of_its_store() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(&*BIN)
        .args(["vsh", "--json", "--store", "state.redb"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("agent-sandbox runs");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"{\"command\": \"mkdir /w && cd /w && echo hi > f\"}\n").expect("write");
    stdin.flush().expect("flush");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("one result");
    assert!(line.contains("\"success\":true"), "{line}");
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    let out = vsh(dir.path(), &["--store", "state.redb"], "pwd; cat f\n");
    assert_eq!(text(&out.stdout), "/w\nhi\n", "{}", text(&out.stderr));
}

#[test]
fn vsh_json_mode_answers_one_result_per_request_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = "{\"command\": \"echo 'a b' > /f && cat /f\"}\n\nnot json\n{\"command\": \"cat /missing\"}\n";
    let out = vsh(dir.path(), &["--json"], input);
    assert_eq!(out.status.code(), Some(0));
    let results: Vec<serde_json::Value> =
        text(&out.stdout).lines().map(|line| serde_json::from_str(line).expect("one JSON object per line")).collect();
    assert_eq!(results.len(), 3);
    let summary: Vec<(&str, &str, i64, bool)> = results
        .iter()
        .map(|r| {
            (
                r["command"].as_str().expect("command"),
                r["stdout"].as_str().expect("stdout"),
                r["exit_code"].as_i64().expect("exit_code"),
                r["success"].as_bool().expect("success"),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [("echo 'a b' > /f && cat /f", "a b\n", 0, true), ("not json", "", 1, false), ("cat /missing", "", 1, false),]
    );
    assert!(results[1]["stderr"].as_str().expect("stderr").contains("send one JSON object per line"));
    assert!(results[0]["duration_ms"].as_f64().is_some());
    assert_eq!(text(&out.stderr), "", "--json keeps stderr quiet");
}

#[test]
fn vsh_imports_a_host_project_and_exports_the_changed_copy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join("src")).expect("mkdir");
    std::fs::write(project.join("src/lib.rs"), "old\n").expect("write");
    let import = format!("{}:/work", project.display());
    let export = format!("{}:/work", dir.path().join("out").display());
    let out = vsh(
        dir.path(),
        &["--import", &import, "--export", &export],
        "cd /work && cat src/lib.rs && echo new > src/lib.rs && touch added\n",
    );
    assert_eq!((text(&out.stdout).as_str(), out.status.code()), ("old\n", Some(0)), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(project.join("src/lib.rs")).expect("read"),
        "old\n",
        "the host copy is untouched"
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("out/src/lib.rs")).expect("read"), "new\n");
    assert!(dir.path().join("out/added").is_file());
    // A second export into the now non-empty directory is refused before the session.
    let out = vsh(dir.path(), &["--export", &export], "echo never\n");
    assert_eq!(out.status.code(), Some(125));
    assert!(text(&out.stderr).contains("exists and is not empty"), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
}

/// `agent-sandbox vsh` on the slave side of a fresh pseudo-terminal (its controlling
/// terminal, 80×24), as a person's terminal runs it; everything it writes is collected.
struct Terminal {
    master: std::fs::File,
    child: std::process::Child,
    output: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    prompts: usize,
}

/// What the line editor writes whenever it starts reading a line (it turns bracketed
/// paste on): a prompt is up and keys go to the editor, not to a running command.
const EDITING: &str = "\x1b[?2004h";

impl Terminal {
    fn start(dir: &Path, args: &[&str]) -> Terminal {
        use std::os::fd::FromRawFd;
        use std::os::unix::process::CommandExt;
        // SAFETY: plain libc calls on descriptors this function owns, each result checked.
        let (master, slave) = unsafe {
            let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            assert!(master >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
            assert_eq!(libc::grantpt(master), 0, "grantpt");
            assert_eq!(libc::unlockpt(master), 0, "unlockpt");
            let mut name = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0, "ptsname_r");
            let slave = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            assert!(slave >= 0, "open the pty slave: {}", std::io::Error::last_os_error());
            let size = libc::winsize { ws_row: 24, ws_col: 80, ws_xpixel: 0, ws_ypixel: 0 };
            assert_eq!(libc::ioctl(master, libc::TIOCSWINSZ, &size), 0, "TIOCSWINSZ");
            (std::fs::File::from_raw_fd(master), std::fs::File::from_raw_fd(slave))
        };
        let mut command = Command::new(&*BIN);
        command
            .arg("vsh")
            .args(args)
            .current_dir(dir)
            .env("HOME", dir)
            .env_remove("XDG_STATE_HOME")
            .env("TERM", "xterm")
            .stdin(slave.try_clone().expect("dup"))
            .stdout(slave.try_clone().expect("dup"))
            .stderr(slave);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("agent-sandbox runs");
        drop(command);
        let output = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut reader = master.try_clone().expect("dup");
        let sink = std::sync::Arc::clone(&output);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once the child and its terminal are gone.
            while let Ok(read @ 1..) = std::io::Read::read(&mut reader, &mut buf) {
                sink.lock().expect("output").extend_from_slice(&buf[..read]);
            }
        });
        Terminal { master, child, output, prompts: 0 }
    }

    fn screen(&self) -> String {
        text(&self.output.lock().expect("output"))
    }

    /// Waits until the output holds `needle` `count` times in all.
    fn expect_n(&self, needle: &str, count: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while self.screen().matches(needle).count() < count {
            assert!(
                std::time::Instant::now() < deadline,
                "waited for {needle:?} ×{count}; the terminal shows:\n{}",
                self.screen()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn expect(&self, needle: &str) {
        self.expect_n(needle, 1);
    }

    /// Waits for the next prompt.
    fn ready(&mut self) {
        self.prompts += 1;
        self.expect_n(EDITING, self.prompts);
    }

    fn send(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).expect("type");
    }

    fn wait(mut self) -> (Option<i32>, String) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                std::thread::sleep(std::time::Duration::from_millis(100));
                return (status.code(), self.screen());
            }
            assert!(std::time::Instant::now() < deadline, "vsh did not leave; the terminal shows:\n{}", self.screen());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

#[test]
fn vsh_on_a_terminal_edits_recalls_history_completes_and_saves_on_ctrl_d() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut term = Terminal::start(dir.path(), &["--snapshot", "state.json"]);
    term.ready();
    term.expect("vsh:/$ ");
    term.send("mkdir /w && cd /w && echo hello > file.txt\r");
    // The prompt shows the working directory.
    term.ready();
    term.expect("vsh:/w$ ");
    // Tab completes a command, then a path inside the sandbox.
    term.send("ca\t");
    term.expect("cat ");
    term.send("fi\t");
    term.expect("cat file.txt");
    term.send("\r");
    term.ready();
    term.expect_n("hello\r\n", 1);
    // Up arrow recalls the last line.
    term.send("\x1b[A\r");
    term.ready();
    term.expect_n("hello\r\n", 2);
    // Ctrl-C drops the line being edited: it never runs.
    term.send("echo never-run\x03");
    term.ready();
    term.send("echo after-ctrl-c\r");
    term.ready();
    term.expect("after-ctrl-c\r\n");
    term.send("help exit\r");
    term.ready();
    term.expect("exit: leave vsh, saving the snapshot");
    // Ctrl-D leaves, saves, and the host's prompt gets a line of its own.
    term.send("\x04");
    let (code, screen) = term.wait();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains("never-run\r\n"), "{screen}");
    assert!(screen.ends_with("vsh: saved the sandbox to state.json\r\n"), "{screen:?}");
    let snapshot = std::fs::read_to_string(dir.path().join("state.json")).expect("saved");
    assert!(snapshot.contains("\"path\":\"/w/file.txt\""), "{snapshot}");
    // The history is on the host beside the snapshot, not in the sandbox; the next
    // session recalls it.
    let history = std::fs::read_to_string(dir.path().join("state.json.history")).expect("history");
    assert!(history.contains("cat file.txt") && !history.contains("never-run"), "{history}");
    let mut term = Terminal::start(dir.path(), &["--snapshot", "state.json"]);
    term.ready();
    term.expect("vsh:/w$ ");
    term.send("\x1b[A\r");
    term.ready();
    term.expect("exit: leave vsh");
    term.send("exit 4\r");
    assert_eq!(term.wait().0, Some(4));
}

#[test]
fn vsh_ctrl_c_stops_a_running_command_and_the_shell_goes_on() {
    // A server on loopback that accepts and never answers: curl would wait for the
    // whole 30 s timeout.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (accepted, connected) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let held = listener.accept();
        let _ = accepted.send(());
        std::thread::sleep(std::time::Duration::from_secs(60));
        drop(held);
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let allow = addr.to_string();
    let mut term = Terminal::start(dir.path(), &["--allow-host", &allow]);
    term.ready();
    term.send(&format!("curl -s http://{addr}/ ; echo not-after-interrupt\r"));
    // curl is running (connected, waiting for a response) when Ctrl-C comes.
    connected.recv_timeout(std::time::Duration::from_secs(20)).expect("curl connects");
    std::thread::sleep(std::time::Duration::from_millis(100));
    let start = std::time::Instant::now();
    term.send("\x03");
    term.expect("interrupted");
    assert!(start.elapsed() < std::time::Duration::from_secs(5), "{:?}", start.elapsed());
    term.ready();
    term.send("echo $?\r");
    term.ready();
    term.expect("130\r\n");
    term.send("exit\r");
    let (code, screen) = term.wait();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains("not-after-interrupt\r\n"), "the rest of the line did not run:\n{screen}");
}

#[test]
fn vsh_saves_the_snapshot_on_sigterm_and_sighup() {
    for (signal, code) in [(libc::SIGTERM, 143), (libc::SIGHUP, 129)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut term = Terminal::start(dir.path(), &["--snapshot", "state.json"]);
        term.ready();
        term.send("echo kept > /f\r");
        term.ready();
        let pid = i32::try_from(term.child.id()).expect("pid");
        // SAFETY: kill on our own child's pid.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let (status, screen) = term.wait();
        assert_eq!(status, Some(code), "{screen}");
        assert!(screen.contains("vsh: saved the sandbox to state.json"), "{screen}");
        let snapshot = std::fs::read_to_string(dir.path().join("state.json")).expect("saved");
        assert!(snapshot.contains("\"path\":\"/f\",\"type\":\"file\",\"text\":\"kept\\n\""), "{snapshot}");
    }
    // Off a terminal too (scripts, the JSON mode): SIGTERM saves.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(&*BIN)
        .args(["vsh", "--json", "--snapshot", "state.json"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agent-sandbox runs");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"{\"command\": \"echo kept > /f\"}\n").expect("write");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).expect("one result");
    // SAFETY: kill on our own child's pid.
    assert_eq!(unsafe { libc::kill(i32::try_from(child.id()).expect("pid"), libc::SIGTERM) }, 0);
    assert_eq!(child.wait().expect("wait").code(), Some(143));
    let snapshot = std::fs::read_to_string(dir.path().join("state.json")).expect("saved");
    assert!(snapshot.contains("\"text\":\"kept\\n\""), "{snapshot}");
    drop(stdin);
}
