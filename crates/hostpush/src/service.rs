//! The host's side: a thread of the `exec` process serving the push socket for as long
//! as the sandbox runs. Requests are served one at a time, each bounded: a client that
//! does not send its request within [`REQUEST_TIMEOUT`] is dropped, and one that stops
//! reading the answer loses the rest of it (the push goes on; nothing the sandbox does
//! can stall the host's git).

use std::{
    ffi::OsString,
    io::Read,
    os::unix::{
        io::AsRawFd,
        net::{UnixListener, UnixStream},
        process::CommandExt,
    },
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    thread,
    time::Duration,
};

use crate::{
    mirror::Mirror,
    plan::{plan, PushCommand, PushFacts, Refusal},
    protocol::{self, Request},
};

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

use crate::hook::SETTINGS_VAR;

/// Repository files whose change since the start refuses a push (relative to the
/// common directory): what git would read to see another history or other objects,
/// and the per-worktree config (with `extensions.worktreeConfig`, settings such as
/// `core.sshCommand` that the host's git would run).
const WATCHED: &[&str] = &["shallow", "objects/info/alternates", "config.worktree"];

/// What the service needs, decided before the sandbox starts.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub project_root: PathBuf,
    pub common_dir: PathBuf,
    pub allow_branch_deletion: bool,
    /// Holds the host's `pre-push` (see [`crate::hook::hook_script`]).
    pub hooks_dir: PathBuf,
    /// Where the project's refs and objects are copied to be checked and pushed from
    /// ([`crate::mirror`]): a directory the sandbox may show read-only, never writable.
    pub mirror: PathBuf,
    /// The hook guard's settings for pushes from the host ([`SETTINGS_VAR`]).
    pub settings: PathBuf,
    /// The user's environment, from which git's is made (see [`git_env`]).
    pub env: Vec<(OsString, OsString)>,
    /// The sandboxed command, for the audit events.
    pub agent: String,
    /// The host's git and bwrap, found on `PATH` entries the agent cannot write
    /// (`policy::path_search`): never a `git` planted in `node_modules/.bin`.
    pub git: PathBuf,
    pub bwrap: PathBuf,
    /// The session repository's broker, when the agent's git is its own
    /// (`home::exec`): it syncs when asked, and before each push.
    pub home: Option<Arc<crate::home::exec::Broker>>,
}

/// Variables of the user's environment that would make git read another repository,
/// configuration or history than the project's: never passed to the host's git.
const DROPPED: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_SHALLOW_FILE",
    "GIT_REPLACE_REF_BASE",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG",
    "GIT_PREFIX",
];

/// git's environment: the user's (their ssh agent, credential helpers, proxy settings),
/// less [`DROPPED`], with replace refs and grafts off, no terminal prompt (nobody is
/// there to answer one), and the hook's settings.
pub fn git_env(user: &[(OsString, OsString)], settings: &Path) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = user
        .iter()
        .filter(|(name, _)| {
            let name = name.to_string_lossy();
            !DROPPED.contains(&name.as_ref())
                && !name.starts_with("GIT_CONFIG_KEY_")
                && !name.starts_with("GIT_CONFIG_VALUE_")
                && name != SETTINGS_VAR
        })
        .cloned()
        .collect();
    for (name, value) in [
        ("GIT_NO_REPLACE_OBJECTS", OsString::from("1")),
        ("GIT_GRAFT_FILE", OsString::from("/dev/null")),
        ("GIT_TERMINAL_PROMPT", OsString::from("0")),
        (SETTINGS_VAR, settings.as_os_str().to_owned()),
    ] {
        env.retain(|(existing, _)| existing != name);
        env.push((name.into(), value));
    }
    env
}

/// The service; dropping it stops it, and ends a push still running (the session is
/// over).
pub struct Service {
    stop: Arc<AtomicBool>,
    socket: PathBuf,
    running: Arc<Mutex<i32>>,
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        kill_group(&self.running);
        // Wakes the blocking accept.
        let _ = UnixStream::connect(&self.socket);
    }
}

/// Ends the process group of the push running, if any (git, the hook, the checks'
/// sandbox).
fn kill_group(running: &Mutex<i32>) {
    let Ok(mut pid) = running.lock() else { return };
    if *pid > 0 {
        // SAFETY: kill(2) on the group of a child this service started and has not
        // reaped (it is reaped only after this value is cleared, under the same lock).
        unsafe { libc::kill(-*pid, libc::SIGKILL) };
        *pid = 0;
    }
}

/// What the service's thread does before it answers the first request (writes the
/// hook and its settings); its error refuses every push.
pub type Prepare = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// Starts serving `listener` (bound at `socket`). The watched repository files are
/// read now, as the start's state; the rest is prepared on the service's thread (a
/// request that comes meanwhile waits).
pub fn start(listener: UnixListener, socket: PathBuf, config: ServiceConfig, prepare: Prepare) -> Service {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let running = Arc::new(Mutex::new(0));
    let pid = Arc::clone(&running);
    let watched = watched_state(&config.common_dir);
    thread::spawn(move || {
        let start = Start {
            watched,
            // `.git/config` is read-only inside: the remotes cannot change while it runs.
            remotes: gix::open(&config.project_root)
                .map(|repo| repo.remote_names().into_iter().map(|name| name.to_string()).collect())
                .unwrap_or_default(),
            prepared: prepare(),
        };
        for client in listener.incoming() {
            if flag.load(Ordering::SeqCst) {
                return;
            }
            let Ok(client) = client else {
                thread::sleep(Duration::from_millis(50));
                continue;
            };
            let mut next = read_request(client);
            while let Some((client, request)) = next.take() {
                if request.home {
                    next = bring_home(client, &listener, &config, &start);
                } else {
                    serve(client, request, &config, &start, &pid);
                }
            }
        }
    });
    Service { stop, socket, running }
}

/// What the service read when the session started.
struct Start {
    watched: Vec<Option<Vec<u8>>>,
    remotes: Vec<String>,
    prepared: Result<(), String>,
}

/// Each watched file's bytes (`None`: absent; an unreadable or special file reads as
/// a marker that never equals a real content).
fn watched_state(common_dir: &Path) -> Vec<Option<Vec<u8>>> {
    WATCHED
        .iter()
        .map(|name| match util::fs::read_regular_nofollow(&common_dir.join(name), 64 << 20) {
            Ok(bytes) => Some(bytes),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(_) => Some(b"\0unreadable\0".to_vec()),
        })
        .collect()
}

/// A client's request; an unreadable one is answered (refused) here.
fn read_request(client: UnixStream) -> Option<(UnixStream, Request)> {
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(REQUEST_TIMEOUT));
    let _ = client.set_write_timeout(Some(WRITE_TIMEOUT));
    let Ok(request) = Request::read(&client) else {
        let _ = protocol::write_frame(&client, protocol::ERR, b"agent-sandbox: push refused: unreadable request\n");
        let _ = protocol::write_frame(&client, protocol::EXIT, &1i32.to_be_bytes());
        return None;
    };
    Some((client, request))
}

/// How long a `home` request waits for the next before the broker syncs, and at most
/// from the first: a burst of git commands (a rebase's commits, an agent's loop of
/// edit and commit) comes home in one sync rather than one each, which competed with
/// the agent's own work for the CPU; a lone commit is home a moment later.
const HOME_QUIET: Duration = Duration::from_millis(150);
const HOME_WAIT: Duration = Duration::from_millis(600);

/// A `home` request (fire and forget: answered at once): the broker syncs once the
/// requests settle ([`HOME_QUIET`]). Any other request that comes meanwhile is served
/// next instead (a push syncs first anyway).
fn bring_home(
    client: UnixStream,
    listener: &UnixListener,
    config: &ServiceConfig,
    start: &Start,
) -> Option<(UnixStream, Request)> {
    let _ = protocol::write_frame(&client, protocol::EXIT, &0i32.to_be_bytes());
    drop(client);
    let (Some(broker), Ok(())) = (&config.home, &start.prepared) else { return None };
    let first = std::time::Instant::now();
    let mut last = first;
    let mut next = None;
    if listener.set_nonblocking(true).is_ok() {
        while last.elapsed() < HOME_QUIET && first.elapsed() < HOME_WAIT {
            match listener.accept() {
                Ok((client, _)) => match read_request(client) {
                    Some((client, request)) if request.home => {
                        let _ = protocol::write_frame(&client, protocol::EXIT, &0i32.to_be_bytes());
                        last = std::time::Instant::now();
                    }
                    Some(other) => {
                        next = Some(other);
                        break;
                    }
                    None => {}
                },
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => thread::sleep(Duration::from_millis(10)),
                Err(_) => break,
            }
        }
        let _ = listener.set_nonblocking(false);
    }
    if next.is_none() {
        let _ = broker.sync();
    }
    next
}

fn serve(client: UnixStream, request: Request, config: &ServiceConfig, start: &Start, running: &Mutex<i32>) {
    // What the session committed comes home first: pushes leave from the user's
    // repository.
    if let (Some(broker), Ok(())) = (&config.home, &start.prepared) {
        let (said, unread) = match broker.sync() {
            Ok(lines) => (lines, None),
            Err(refusal) => (Vec::new(), Some(refusal)),
        };
        for line in said {
            let line = format!("agent-sandbox: {}\n", util::terminal_safe(&line));
            let _ = protocol::write_frame(&client, protocol::ERR, line.as_bytes());
        }
        // What the session holds could not be read, or a branch of it did not come home:
        // a push would send the user's tip and say it worked.
        if let Some(refusal) = unread.or_else(|| broker.not_home(&request.args)) {
            let _ = protocol::write_frame(&client, protocol::ERR, format!("{refusal}\n").as_bytes());
            let _ = protocol::write_frame(&client, protocol::EXIT, &1i32.to_be_bytes());
            return;
        }
    }
    let code = match decide(&request, config, start).and_then(|command| copy_to_mirror(config).map(|()| command)) {
        Ok(command) => {
            for note in &command.notes {
                let _ = protocol::write_frame(&client, protocol::ERR, format!("{note}\n").as_bytes());
            }
            run_git(&command.argv, config, &client, running)
        }
        Err(refusal) => {
            let _ = protocol::write_frame(&client, protocol::ERR, format!("{refusal}\n").as_bytes());
            let target = format!("git push {}", request.args.join(" "));
            let event = audit::Event::new(&config.agent, "push", &target, "blocked", "host-push", Some(refusal.why));
            if let Some(log) = audit::default_path() {
                let _ = audit::append(&log, &[event]);
            }
            1
        }
    };
    let _ = protocol::write_frame(&client, protocol::EXIT, &code.to_be_bytes());
}

/// The facts of this request, gathered on the host, and the plan.
fn decide(request: &Request, config: &ServiceConfig, start: &Start) -> Result<PushCommand, Refusal> {
    if let Err(err) = &start.prepared {
        return Err(Refusal {
            why: format!("the push service could not be set up: {err}"),
            instead: "fix what the message says and restart the sandbox (pushes leave only through the host)".into(),
        });
    }
    let request_dir = gitfacts::normalize(Path::new(&request.cwd));
    let common_dir = gitfacts::canonical(&config.common_dir);
    let request_common_dir = crate::plan::request_repository(&request_dir, &config.project_root, &common_dir, |dir| {
        dir.join(".git").symlink_metadata().is_ok()
    });
    let now = watched_state(&config.common_dir);
    let changed_since_start = WATCHED
        .iter()
        .zip(now.iter().zip(&start.watched))
        .filter(|(_, (now, then))| now != then)
        .map(|(name, _)| format!(".git/{name}"))
        .collect();
    let facts = PushFacts {
        project_root: config.project_root.clone(),
        common_dir,
        request_dir,
        request_common_dir,
        remotes: start.remotes.clone(),
        allow_branch_deletion: config.allow_branch_deletion,
        changed_since_start,
        hooks_dir: config.hooks_dir.clone(),
    };
    plan(&request.args, &facts)
}

/// Copies the project's refs and objects into the session's mirror, which the push is
/// checked and sent from. What git says is not shown to the agent (git following a link
/// the agent planted in `.git` prints what it read: a line of any file of the user's);
/// the audit log has it.
fn copy_to_mirror(config: &ServiceConfig) -> Result<(), Refusal> {
    // A `commondir`, or a link among the refs and objects, would have the reader copy
    // another repository of the user's: refused, with what to remove. The reader runs in
    // a view of the common directory alone besides, where such a redirection leads
    // nowhere.
    let found = crate::redirect::redirections(&config.common_dir, false);
    if !found.is_empty() {
        return Err(crate::redirect::refusal(&found));
    }
    let env = git_env(&config.env, &config.settings);
    let git = config.git.display().to_string();
    let prefix = crate::mirror::view_prefix(
        &config.bwrap,
        &crate::mirror::system_entries(),
        &crate::mirror::git_installation(&config.git),
        std::slice::from_ref(&config.common_dir),
    );
    let mirror = Mirror {
        path: &config.mirror,
        git: &config.git,
        env: &env,
        reader: crate::mirror::reader(&prefix, &git, Some("/nonexistent")),
    };
    // `.git` is pinned in the sandbox (its read-only config cannot be moved away with it).
    mirror
        .configure(&config.common_dir.join("config"))
        .and_then(|()| mirror.fetch(&config.project_root, &config.common_dir))
        .map_err(|failed| {
            let event =
                audit::Event::new(&config.agent, "push", "git push", "blocked", "host-push", Some(failed.to_string()));
            if let Some(log) = audit::default_path() {
                let _ = audit::append(&log, &[event]);
            }
            Refusal {
                why: "the project's repository could not be copied to be checked: an object one of its branches or \
                  tags leads to is not in the project's own object store, or a file in .git is not a regular one \
                  (git's message is in the audit log: `agent-sandbox log`)"
                    .into(),
                instead:
                    "delete or repair that branch or tag (`git fsck` names broken ones) and keep .git's files plain \
                      files, then push again"
                        .into(),
            }
        })
}

/// Runs the host's git, relaying its output as it comes; its exit status.
fn run_git(argv: &[String], config: &ServiceConfig, client: &UnixStream, running: &Mutex<i32>) -> i32 {
    let spawned = Command::new(&config.git)
        .process_group(0)
        .arg("--git-dir")
        .arg(&config.mirror)
        .args(argv)
        .current_dir(&config.project_root)
        .env_clear()
        .envs(git_env(&config.env, &config.settings))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(err) => {
            let message = format!("agent-sandbox: push failed: cannot run git on the host: {err}\n");
            let _ = protocol::write_frame(client, protocol::ERR, message.as_bytes());
            return 1;
        }
    };
    if let Ok(mut pid) = running.lock() {
        *pid = i32::try_from(child.id()).unwrap_or(0);
    }
    // Once the client stops taking output, the rest is read and dropped; once it hangs
    // up (the agent interrupted its `git push`), the push ends: nothing the repository
    // holds can keep the host's git waiting after that.
    let gone = AtomicBool::new(false);
    let finished = AtomicBool::new(false);
    let writer = Mutex::new(client);
    let relay = |mut pipe: Box<dyn Read + Send>, tag: u8| {
        let mut buf = [0u8; 8192];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) if !gone.load(Ordering::SeqCst) => {
                    let sent = writer.lock().map(|client| protocol::write_frame(*client, tag, &buf[..n]).is_ok());
                    if !sent.unwrap_or(false) {
                        gone.store(true, Ordering::SeqCst);
                    }
                }
                Ok(_) => {}
            }
        }
    };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    thread::scope(|scope| {
        scope.spawn(|| {
            while !finished.load(Ordering::SeqCst) {
                if hung_up(client) {
                    kill_group(running);
                    return;
                }
            }
        });
        if let Some(stdout) = stdout {
            scope.spawn(|| relay(Box::new(stdout), protocol::OUT));
        }
        if let Some(stderr) = stderr {
            relay(Box::new(stderr), protocol::ERR);
        }
        // Waited for without reaping first, so that its pid (the group a hang-up kills)
        // is forgotten before it can be another process's.
        // SAFETY: a zeroed siginfo_t is valid; waitid only writes into it.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, child.id(), &mut info, libc::WEXITED | libc::WNOWAIT);
        }
        if let Ok(mut pid) = running.lock() {
            *pid = 0;
        }
        let status = child.wait();
        finished.store(true, Ordering::SeqCst);
        match status {
            Ok(status) => status.code().unwrap_or(1),
            Err(_) => 1,
        }
    })
}

/// Waits up to 200 ms for the client to hang up; whether it did.
fn hung_up(client: &UnixStream) -> bool {
    let mut poll = libc::pollfd { fd: client.as_raw_fd(), events: libc::POLLRDHUP, revents: 0 };
    // SAFETY: one valid pollfd for the duration of the call.
    let ready = unsafe { libc::poll(&mut poll, 1, 200) };
    ready > 0 && poll.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_env_keeps_the_users_setup_and_drops_redirections() {
        let user: Vec<(OsString, OsString)> = [
            ("HOME", "/home/u"),
            ("SSH_AUTH_SOCK", "/run/user/1/ssh"),
            ("GIT_DIR", "/tmp/x"),
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "core.hooksPath"),
            ("GIT_ALTERNATE_OBJECT_DIRECTORIES", "/tmp/o"),
            ("GIT_SSH_COMMAND", "ssh -i k"),
            ("GIT_TERMINAL_PROMPT", "1"),
            (SETTINGS_VAR, "/elsewhere"),
        ]
        .iter()
        .map(|(name, value)| ((*name).into(), (*value).into()))
        .collect();
        let env = git_env(&user, Path::new("/state/push/s.json"));
        let names: Vec<String> =
            env.iter().map(|(name, value)| format!("{}={}", name.to_string_lossy(), value.to_string_lossy())).collect();
        assert_eq!(
            names,
            [
                "HOME=/home/u",
                "SSH_AUTH_SOCK=/run/user/1/ssh",
                "GIT_SSH_COMMAND=ssh -i k",
                "GIT_NO_REPLACE_OBJECTS=1",
                "GIT_GRAFT_FILE=/dev/null",
                "GIT_TERMINAL_PROMPT=0",
                "AGENT_SANDBOX_PUSH_GUARD=/state/push/s.json",
            ]
        );
    }
}
