//! The executor: the only code here that talks to Docker, through bollard, on a
//! current-thread tokio runtime that only these commands start. Each method carries out
//! one decision made elsewhere (a [`ContainerPlan`], a build context) and says what to
//! do next when the engine or an image is missing.
//!
//! The engine is the one the docker CLI would use ([`crate::endpoint`]): local, or
//! remote over TLS or ssh ([`crate::transport`]); every call below is the same for all.

use std::{
    collections::HashMap,
    io::{IsTerminal as _, Read as _, Write as _},
};

use anyhow::{bail, Context as _, Result};
use bollard::{
    exec::{CreateExecOptions, StartExecOptions, StartExecResults},
    models::{ContainerCreateBody, HostConfig, MountType, VolumeCreateRequest},
    query_parameters::{
        BuildImageOptionsBuilder, CreateContainerOptionsBuilder, ListContainersOptionsBuilder,
        RemoveContainerOptionsBuilder, StatsOptionsBuilder, StopContainerOptionsBuilder,
    },
    Docker,
};
use futures_util::StreamExt as _;
use tokio::io::AsyncWriteExt as _;

use crate::{
    endpoint::{self, Endpoint, EndpointEnv},
    plan::{self, ContainerPlan, EngineFacts, MountKind},
    transport,
};

/// A connected engine and the runtime its calls run on.
pub struct Engine {
    docker: Docker,
    runtime: tokio::runtime::Runtime,
    endpoint: String,
    /// On another machine (tcp, TLS, ssh): bind mounts are that machine's paths.
    remote: bool,
}

/// The state of a sandbox container as `list` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub name: String,
    pub labels: HashMap<String, String>,
    pub volumes: Vec<String>,
    pub state: String,
    /// What it uses now (running containers only; see [`Engine::with_usage`]).
    pub usage: Option<Usage>,
}

/// A running container's use of the machine, from one stats answer of the engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    /// Of one CPU (200 is two CPUs busy), over the engine's last sampling interval.
    pub cpu_percent: f64,
    /// Bytes in use, the page cache the kernel can drop left out (as `docker stats`).
    pub memory: u64,
    /// The memory limit (the machine's memory when there is none).
    pub memory_limit: u64,
    pub pids: u64,
    pub pids_limit: Option<u64>,
}

/// `docker stats`' CPU percentage: the container's CPU time over the machine's in one
/// interval, times the CPUs online. `None` without a previous sample.
pub fn cpu_percent(container_delta: u64, system_delta: u64, online_cpus: u32) -> Option<f64> {
    (system_delta > 0).then(|| container_delta as f64 / system_delta as f64 * f64::from(online_cpus) * 100.0)
}

impl Engine {
    /// Connects and checks that the engine answers.
    pub fn connect() -> Result<Engine> {
        let endpoint = endpoint::endpoint(&EndpointEnv::from_process())?;
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the tokio runtime")?;
        let docker = match &endpoint {
            Endpoint::Local => Docker::connect_with_local_defaults(),
            Endpoint::Unix(host) | Endpoint::Tcp(host) => Docker::connect_with_host(host),
            Endpoint::Tls(tls) => Ok(transport::tls(tls)?),
            Endpoint::Ssh(ssh) => Ok(transport::ssh(ssh)?),
        };
        let fix = match &endpoint {
            Endpoint::Ssh(ssh) => format!(
                "check that `{}` answers (ssh's own message, if any, is above), or point DOCKER_HOST or `docker \
                 context use` at another engine",
                ssh.argv(&["docker", "version"]).join(" ")
            ),
            Endpoint::Tls(_) => "check the address, that the engine listens with --tlsverify, and that its \
                 certificate is signed by that CA for this host name or address (and accepts your client \
                 certificate), or point DOCKER_HOST or `docker context use` at another engine"
                .to_owned(),
            _ => "start it (`sudo systemctl start docker`, or `dockerd &`), or point DOCKER_HOST or `docker context \
                  use` at a running one"
                .to_owned(),
        };
        let remote = matches!(endpoint, Endpoint::Tcp(_) | Endpoint::Tls(_) | Endpoint::Ssh(_));
        let endpoint = endpoint.to_string();
        let docker = match docker {
            Ok(docker) => docker,
            Err(err) => bail!("cannot reach the Docker engine at {endpoint} ({err}): {fix}"),
        };
        if let Err(err) = runtime.block_on(docker.version()) {
            // The commonest first-day cause: the socket is there, but this user may not
            // use it (not in the `docker` group). Joining that group is the usual advice
            // and makes the user, and every program the user runs, root: say so.
            if let Some(path) = endpoint.strip_prefix("unix://") {
                if socket_refuses_this_user(path) {
                    bail!(
                        "this user may not use the Docker engine's socket {path} (permission denied): point \
                         DOCKER_HOST at an engine you may use (rootless Docker), or join the socket's group \
                         (`sudo usermod -aG docker $USER`, then log in again) only if you accept what that means: \
                         whoever may use the socket is root on this machine, and so is every program you run, \
                         agents included"
                    );
                }
            }
            let err = anyhow::Error::from(err);
            bail!("the Docker engine at {endpoint} does not answer ({err:#}): {fix}");
        }
        Ok(Engine { docker, runtime, endpoint, remote })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The engine's totals and storage driver (`docker info`).
    pub fn facts(&self) -> Result<EngineFacts> {
        let info = self.runtime.block_on(self.docker.info()).context("reading the engine's info")?;
        let backing_filesystem = info.driver_status.unwrap_or_default().into_iter().find_map(|pair| match &pair[..] {
            [key, value] if key == "Backing Filesystem" => Some(value.clone()),
            _ => None,
        });
        Ok(EngineFacts {
            cpus: info.ncpu.unwrap_or(1).max(1) as u64,
            memory: info.mem_total.unwrap_or(0).max(0) as u64,
            storage_driver: info.driver.unwrap_or_default(),
            backing_filesystem,
        })
    }

    pub fn image_exists(&self, image: &str) -> Result<bool> {
        match self.runtime.block_on(self.docker.inspect_image(image)) {
            Ok(_) => Ok(true),
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(false),
            Err(err) => Err(err).with_context(|| format!("inspecting the image {image}")),
        }
    }

    /// Builds `tag` from the tar `context` with the legacy builder; progress as a bar on
    /// a terminal (stderr), as the build's own lines otherwise.
    pub fn build(&self, tag: &str, context: Vec<u8>, build_args: &HashMap<String, String>) -> Result<()> {
        let options =
            BuildImageOptionsBuilder::default().dockerfile("Dockerfile").t(tag).rm(true).buildargs(build_args).build();
        let bar = std::io::stderr().is_terminal();
        let mut log = String::new();
        self.runtime.block_on(async {
            let mut stream = self.docker.build_image(options, None, Some(bollard::body_full(context.into())));
            while let Some(info) = stream.next().await {
                let info = info.with_context(|| format!("building {tag}"))?;
                if let Some(detail) = info.error_detail {
                    if bar {
                        eprintln!();
                        eprint!("{log}");
                    }
                    bail!("building {tag} failed: {}", detail.message.unwrap_or_default());
                }
                let Some(text) = info.stream else { continue };
                if !bar {
                    eprint!("{text}");
                    continue;
                }
                log.push_str(&text);
                if let Some((step, steps, what)) = step_of(&text) {
                    let done = step * 30 / steps.max(1);
                    let what: String = what.chars().take(60).collect();
                    eprint!("\r\x1b[K[{}{}] {step}/{steps} {what}", "#".repeat(done), "-".repeat(30 - done));
                }
            }
            if bar {
                eprintln!();
            }
            Ok(())
        })
    }

    pub fn ensure_volume(&self, name: &str) -> Result<()> {
        let request = VolumeCreateRequest { name: Some(name.to_owned()), ..Default::default() };
        self.runtime
            .block_on(self.docker.create_volume(request))
            .with_context(|| format!("creating the volume {name}"))?;
        Ok(())
    }

    /// What `start` needs to know of an existing container: running, its image's ID and
    /// its plan digest label.
    pub fn container_facts(&self, name: &str) -> Result<Option<(bool, String, String)>> {
        match self.runtime.block_on(self.docker.inspect_container(name, None)) {
            Ok(info) => {
                let running = info.state.and_then(|state| state.running).unwrap_or(false);
                let digest = info
                    .config
                    .and_then(|config| config.labels)
                    .and_then(|labels| labels.get(plan::LABEL_PLAN).cloned());
                Ok(Some((running, info.image.unwrap_or_default(), digest.unwrap_or_default())))
            }
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(None),
            Err(err) => Err(err).with_context(|| format!("inspecting the container {name}")),
        }
    }

    /// The ID of an image.
    pub fn image_id(&self, image: &str) -> Result<String> {
        let info =
            self.runtime.block_on(self.docker.inspect_image(image)).with_context(|| format!("inspecting {image}"))?;
        Ok(info.id.unwrap_or_default())
    }

    /// `Some(running)` when the container exists.
    pub fn container_state(&self, name: &str) -> Result<Option<bool>> {
        match self.runtime.block_on(self.docker.inspect_container(name, None)) {
            Ok(info) => Ok(Some(info.state.and_then(|state| state.running).unwrap_or(false))),
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(None),
            Err(err) => Err(err).with_context(|| format!("inspecting the container {name}")),
        }
    }

    /// Creates the container of `plan` (and its volumes).
    pub fn create(&self, plan: &ContainerPlan) -> Result<()> {
        for mount in plan.mounts.iter().filter(|mount| mount.kind == MountKind::Volume) {
            self.ensure_volume(&mount.source)?;
        }
        let body = create_body(plan);
        let options = CreateContainerOptionsBuilder::default().name(&plan.name).build();
        match self.runtime.block_on(self.docker.create_container(Some(options), body)) {
            Err(bollard::errors::Error::DockerResponseServerError { message, .. })
                if self.remote && message.contains("bind source path does not exist") =>
            {
                bail!(
                    "creating the container {}: {message}: the engine at {} mounts the workspace from its own \
                     machine, at the same absolute path as here, and nothing is copied: put a clone of the \
                     workspace there at that path",
                    plan.name,
                    self.endpoint
                )
            }
            res => res.map(drop).with_context(|| format!("creating the container {}", plan.name)),
        }
    }

    /// Creates the container of `plan`, runs it to its end and removes it; its exit
    /// status and output (stdout and stderr in order).
    pub fn run_to_end(&self, plan: &ContainerPlan) -> Result<(i64, String)> {
        if self.container_state(&plan.name)?.is_some() {
            self.remove(&plan.name)?; // left by an interrupted run
        }
        self.create(plan)?;
        let result = self.runtime.block_on(async {
            self.docker.start_container(&plan.name, None).await.with_context(|| format!("starting {}", plan.name))?;
            let mut code = 0;
            let mut waiting = self.docker.wait_container(&plan.name, None);
            while let Some(status) = waiting.next().await {
                match status {
                    Ok(status) => code = status.status_code,
                    Err(bollard::errors::Error::DockerContainerWaitError { code: failed, .. }) => code = failed,
                    Err(err) => return Err(err).with_context(|| format!("waiting for {}", plan.name)),
                }
            }
            let options = bollard::query_parameters::LogsOptionsBuilder::default().stdout(true).stderr(true).build();
            let mut logs = self.docker.logs(&plan.name, Some(options));
            let mut text = Vec::new();
            while let Some(chunk) = logs.next().await {
                text.extend_from_slice(
                    &chunk.with_context(|| format!("reading the output of {}", plan.name))?.into_bytes(),
                );
            }
            anyhow::Ok((code, String::from_utf8_lossy(&text).into_owned()))
        });
        self.remove(&plan.name)?;
        result
    }

    /// A container that is created, never started unless [`Engine::run_created`] runs
    /// it: `volume` at `target`, as root, no network, `command` without the image's
    /// entrypoint. For reading and writing a volume's files through the archive API.
    pub fn scratch(&self, name: &str, image: &str, volume: &str, target: &str, command: &[&str]) -> Result<()> {
        if self.container_state(name)?.is_some() {
            self.remove(name)?;
        }
        self.ensure_volume(volume)?;
        let body = ContainerCreateBody {
            image: Some(image.to_owned()),
            user: Some("root".to_owned()),
            entrypoint: Some(command.iter().map(|s| s.to_string()).collect()),
            host_config: Some(HostConfig {
                network_mode: Some("none".to_owned()),
                mounts: Some(vec![bollard::models::Mount {
                    target: Some(target.to_owned()),
                    source: Some(volume.to_owned()),
                    typ: Some(MountType::VOLUME),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let options = CreateContainerOptionsBuilder::default().name(name).build();
        self.runtime
            .block_on(self.docker.create_container(Some(options), body))
            .with_context(|| format!("creating the container {name}"))?;
        Ok(())
    }

    /// Whether `path` exists in the container (its volumes included).
    pub fn path_exists(&self, container: &str, path: &str) -> Result<bool> {
        let options = bollard::query_parameters::DownloadFromContainerOptions { path: path.to_owned() };
        let mut stream = self.docker.download_from_container(container, Some(options));
        match self.runtime.block_on(stream.next()) {
            Some(Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. })) => Ok(false),
            Some(Err(err)) => Err(err).with_context(|| format!("reading {path} in {container}")),
            _ => Ok(true),
        }
    }

    /// Extracts the tar `archive` into `dir` of the container.
    pub fn upload(&self, container: &str, dir: &str, archive: Vec<u8>) -> Result<()> {
        let options =
            bollard::query_parameters::UploadToContainerOptions { path: dir.to_owned(), ..Default::default() };
        self.runtime
            .block_on(self.docker.upload_to_container(container, Some(options), bollard::body_full(archive.into())))
            .with_context(|| format!("writing into {dir} of {container}"))
    }

    /// Starts a created container and waits for its end; its exit status.
    pub fn run_created(&self, name: &str) -> Result<i64> {
        self.runtime.block_on(async {
            self.docker.start_container(name, None).await.with_context(|| format!("starting {name}"))?;
            let mut code = 0;
            let mut waiting = self.docker.wait_container(name, None);
            while let Some(status) = waiting.next().await {
                match status {
                    Ok(status) => code = status.status_code,
                    Err(bollard::errors::Error::DockerContainerWaitError { code: failed, .. }) => code = failed,
                    Err(err) => return Err(err).with_context(|| format!("waiting for {name}")),
                }
            }
            Ok(code)
        })
    }

    pub fn start(&self, name: &str) -> Result<()> {
        self.runtime.block_on(self.docker.start_container(name, None)).with_context(|| format!("starting {name}"))
    }

    pub fn stop(&self, name: &str) -> Result<()> {
        self.stop_all(&[name.to_owned()])
    }

    /// Stops the containers at once (each given 5 s before it is killed); one that
    /// stopped or went meanwhile counts as stopped.
    pub fn stop_all(&self, names: &[String]) -> Result<()> {
        let options = StopContainerOptionsBuilder::default().t(5).build();
        let stops = names.iter().map(|name| {
            let options = options.clone();
            async move {
                match self.docker.stop_container(name, Some(options)).await {
                    Err(bollard::errors::Error::DockerResponseServerError { status_code: 304 | 404, .. }) => Ok(()),
                    res => res.with_context(|| format!("stopping {name}")),
                }
            }
        });
        self.runtime.block_on(futures_util::future::join_all(stops)).into_iter().collect()
    }

    /// `listed` with each running container's [`Usage`], asked of the engine for all at
    /// once: one answer each (not a stream), which the engine gives after its next
    /// sample, about a second.
    pub fn with_usage(&self, mut listed: Vec<Listed>) -> Result<Vec<Listed>> {
        let options = StatsOptionsBuilder::default().stream(false).one_shot(false).build();
        let asks = listed.iter().map(|item| {
            let options = options.clone();
            async move {
                if item.state != "running" {
                    return Ok(None);
                }
                let mut stream = self.docker.stats(&item.name, Some(options));
                match stream.next().await {
                    Some(Ok(stats)) => Ok(Some(usage(stats))),
                    // Stopped meanwhile.
                    Some(Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. })) | None => {
                        Ok(None)
                    }
                    Some(Err(err)) => Err(err).with_context(|| format!("reading the stats of {}", item.name)),
                }
            }
        });
        let usages: Vec<Result<Option<Usage>>> = self.runtime.block_on(futures_util::future::join_all(asks));
        for (item, usage) in listed.iter_mut().zip(usages) {
            item.usage = usage?;
        }
        Ok(listed)
    }

    pub fn remove(&self, name: &str) -> Result<()> {
        let options = RemoveContainerOptionsBuilder::default().force(true).build();
        self.runtime
            .block_on(self.docker.remove_container(name, Some(options)))
            .with_context(|| format!("removing {name}"))
    }

    /// Every sandbox container (running or not), or those of one workspace.
    pub fn list(&self, workspace: Option<&str>) -> Result<Vec<Listed>> {
        let label = match workspace {
            Some(path) => format!("{}={path}", plan::LABEL_WORKSPACE),
            None => plan::LABEL_WORKSPACE.to_owned(),
        };
        let filters: HashMap<String, Vec<String>> = HashMap::from([("label".to_owned(), vec![label])]);
        let options = ListContainersOptionsBuilder::default().all(true).filters(&filters).build();
        let containers =
            self.runtime.block_on(self.docker.list_containers(Some(options))).context("listing the containers")?;
        let mut listed: Vec<Listed> = containers
            .into_iter()
            .map(|summary| {
                let name = summary.names.unwrap_or_default().first().map(|n| n.trim_start_matches('/').to_owned());
                let mut volumes: Vec<String> = summary
                    .mounts
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|mount| mount.typ.as_deref() == Some("volume"))
                    .filter_map(|mount| mount.name)
                    .collect();
                volumes.sort();
                Listed {
                    name: name.unwrap_or_default(),
                    labels: summary.labels.unwrap_or_default(),
                    volumes,
                    state: summary.state.map(|state| state.to_string()).unwrap_or_default(),
                    usage: None,
                }
            })
            .collect();
        listed.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(listed)
    }

    /// Runs `command` in the container as `user` in `workdir`; its exit status. With
    /// `tty`, the terminal is put in raw mode and attached (size included); otherwise
    /// stdin, stdout and stderr are passed through as streams.
    pub fn exec(&self, name: &str, command: &[String], user: &str, workdir: &str, tty: bool) -> Result<i32> {
        let options = CreateExecOptions {
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(tty),
            cmd: Some(command.to_vec()),
            user: Some(user.to_owned()),
            working_dir: Some(workdir.to_owned()),
            ..Default::default()
        };
        self.runtime.block_on(async {
            let exec = self.docker.create_exec(name, options).await.with_context(|| format!("exec in {name}"))?;
            let started = self
                .docker
                .start_exec(&exec.id, Some(StartExecOptions { detach: false, tty, output_capacity: None }))
                .await
                .with_context(|| format!("exec in {name}"))?;
            let StartExecResults::Attached { mut output, mut input } = started else {
                bail!("exec in {name}: the engine did not attach")
            };
            let _raw = if tty { RawMode::enter() } else { None };
            // The terminal's size follows the host's: polled, which also covers the
            // moment before the engine has made the exec's terminal.
            let resize = async {
                let mut sent = None;
                loop {
                    let size = terminal_size();
                    if tty && size.is_some() && size != sent {
                        if let Some((height, width)) = size {
                            let options = bollard::query_parameters::ResizeExecOptions {
                                h: i32::from(height),
                                w: i32::from(width),
                            };
                            if self.docker.resize_exec(&exec.id, options).await.is_ok() {
                                sent = size;
                            }
                        }
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
            };
            // stdin on a thread of its own (a blocking read); the process exits without
            // waiting for it.
            let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
            std::thread::spawn(move || {
                let mut stdin = std::io::stdin();
                let mut buffer = [0u8; 4096];
                while let Ok(count) = stdin.read(&mut buffer) {
                    if count == 0 || sender.send(buffer[..count].to_vec()).is_err() {
                        break;
                    }
                }
            });
            let pump = async move {
                while let Some(bytes) = receiver.recv().await {
                    if input.write_all(&bytes).await.is_err() || input.flush().await.is_err() {
                        return;
                    }
                }
                let _ = input.shutdown().await;
            };
            let copy = async {
                while let Some(chunk) = output.next().await {
                    match chunk.with_context(|| format!("exec in {name}"))? {
                        bollard::container::LogOutput::StdErr { message } => {
                            let mut stderr = std::io::stderr();
                            stderr.write_all(&message).ok();
                            stderr.flush().ok();
                        }
                        other => {
                            let mut stdout = std::io::stdout();
                            stdout.write_all(&other.into_bytes()).ok();
                            stdout.flush().ok();
                        }
                    }
                }
                anyhow::Ok(())
            };
            tokio::pin!(pump);
            tokio::pin!(copy);
            let copied = async {
                tokio::select! {
                    copied = &mut copy => copied,
                    () = &mut pump => copy.await,
                }
            };
            tokio::select! {
                copied = copied => copied?,
                () = resize => {}
            }
            self.exit_status(&exec.id).await
        })
    }

    /// Runs `command` as `user`, collecting stdout (stderr is passed on, terminal-safe);
    /// its exit status.
    pub fn output(&self, name: &str, command: &[&str], user: &str) -> Result<(i32, String)> {
        let options = CreateExecOptions {
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            cmd: Some(command.iter().map(|s| s.to_string()).collect::<Vec<String>>()),
            user: Some(user.to_owned()),
            ..Default::default()
        };
        self.runtime.block_on(async {
            let exec = self.docker.create_exec(name, options).await.with_context(|| format!("exec in {name}"))?;
            let started = self.docker.start_exec(&exec.id, None).await.with_context(|| format!("exec in {name}"))?;
            let mut text = Vec::new();
            // What the container says reaches the user's terminal: the broker's
            // messages carry what the agent's checks printed.
            let mut said = util::TerminalSafeLines::default();
            if let StartExecResults::Attached { mut output, .. } = started {
                while let Some(chunk) = output.next().await {
                    match chunk.with_context(|| format!("exec in {name}"))? {
                        bollard::container::LogOutput::StdErr { message } => {
                            std::io::stderr().write_all(said.push(&message).as_bytes()).ok();
                        }
                        other => text.extend_from_slice(&other.into_bytes()),
                    }
                }
            }
            std::io::stderr().write_all(said.finish().as_bytes()).ok();
            Ok((self.exit_status(&exec.id).await?, String::from_utf8_lossy(&text).into_owned()))
        })
    }
}

impl Engine {
    /// An exec's exit status once the engine has recorded it (the output can end a moment
    /// before), waiting at most 5 s.
    async fn exit_status(&self, exec_id: &str) -> Result<i32> {
        for _ in 0..250 {
            let inspect = self.docker.inspect_exec(exec_id).await.context("reading the exit status")?;
            if inspect.running != Some(true) {
                if let Some(code) = inspect.exit_code {
                    return Ok(code as i32);
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        bail!("the engine did not report the command's exit status")
    }
}

/// What one stats answer says a container uses.
fn usage(stats: bollard::models::ContainerStatsResponse) -> Usage {
    let total = |cpu: &Option<bollard::models::ContainerCpuStats>| {
        let cpu = cpu.as_ref();
        let usage = cpu.and_then(|cpu| cpu.cpu_usage.as_ref()).and_then(|usage| usage.total_usage).unwrap_or(0);
        (usage, cpu.and_then(|cpu| cpu.system_cpu_usage).unwrap_or(0))
    };
    let (now, system_now) = total(&stats.cpu_stats);
    let (before, system_before) = total(&stats.precpu_stats);
    let online = stats.cpu_stats.as_ref().and_then(|cpu| cpu.online_cpus).unwrap_or(1);
    let cpu = match before {
        0 => None,
        _ => cpu_percent(now.saturating_sub(before), system_now.saturating_sub(system_before), online),
    };
    let memory = stats.memory_stats.unwrap_or_default();
    // cgroup v1 names the page cache `total_inactive_file`, v2 `inactive_file`.
    let cache = memory
        .stats
        .as_ref()
        .and_then(|stats| stats.get("total_inactive_file").or_else(|| stats.get("inactive_file")).copied());
    let pids = stats.pids_stats.unwrap_or_default();
    Usage {
        cpu_percent: cpu.unwrap_or(0.0),
        memory: memory.usage.unwrap_or(0).saturating_sub(cache.unwrap_or(0)),
        memory_limit: memory.limit.unwrap_or(0),
        pids: pids.current.unwrap_or(0),
        // An unlimited cgroup reports the kernel's maximum.
        pids_limit: pids.limit.filter(|limit| *limit > 0 && *limit < u64::from(u32::MAX)),
    }
}

/// bollard's create request for `plan`.
fn create_body(plan: &ContainerPlan) -> ContainerCreateBody {
    let mounts = plan
        .mounts
        .iter()
        .map(|mount| bollard::models::Mount {
            target: Some(mount.target.clone()),
            source: Some(mount.source.clone()),
            typ: Some(match mount.kind {
                MountKind::Bind => MountType::BIND,
                MountKind::Volume => MountType::VOLUME,
            }),
            read_only: Some(mount.read_only),
            ..Default::default()
        })
        .collect();
    ContainerCreateBody {
        image: Some(plan.image.clone()),
        user: Some(plan.user.clone()),
        working_dir: Some(plan.workdir.clone()),
        env: Some(plan.env.iter().map(|(key, value)| format!("{key}={value}")).collect()),
        labels: Some(plan.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        cmd: Some(plan.command.clone()),
        host_config: Some(HostConfig {
            init: Some(true),
            mounts: Some(mounts),
            cap_add: Some(plan.cap_add.clone()),
            network_mode: plan.network.clone(),
            dns: (!plan.dns.is_empty()).then(|| plan.dns.clone()),
            nano_cpus: plan.limits.nano_cpus.map(|nano_cpus| nano_cpus as i64),
            memory: plan.limits.memory.map(|memory| memory as i64),
            memory_swap: plan.limits.memory.map(|memory| memory as i64),
            pids_limit: plan.limits.pids.map(|pids| pids as i64),
            storage_opt: plan.limits.disk.map(|disk| HashMap::from([("size".to_owned(), disk.to_string())])),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `Step 3/12 : RUN ...` of the legacy builder's stream: (3, 12, "RUN ...").
pub fn step_of(line: &str) -> Option<(usize, usize, String)> {
    let rest = line.trim().strip_prefix("Step ")?;
    let (counts, what) = rest.split_once(" : ")?;
    let (step, steps) = counts.split_once('/')?;
    Some((step.parse().ok()?, steps.parse().ok()?, what.trim().to_owned()))
}

fn terminal_size() -> Option<(u16, u16)> {
    // SAFETY: TIOCGWINSZ fills a winsize we own.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let res = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (res == 0 && size.ws_row > 0).then_some((size.ws_row, size.ws_col))
}

/// The terminal in raw mode while this lives; restored on drop (errors and panics too).
struct RawMode(libc::termios);

impl RawMode {
    fn enter() -> Option<RawMode> {
        // SAFETY: tcgetattr/tcsetattr on stdin with termios values we own.
        unsafe {
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(libc::STDIN_FILENO, &mut saved) != 0 {
                return None;
            }
            let mut raw = saved;
            libc::cfmakeraw(&mut raw);
            if libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &raw) != 0 {
                return None;
            }
            Some(RawMode(saved))
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: restores the attributes saved by `enter`.
        unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &self.0) };
    }
}

/// Whether the unix socket at `path` exists but this process may not connect to it.
fn socket_refuses_this_user(path: &str) -> bool {
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => false,
        Err(err) => err.kind() == std::io::ErrorKind::PermissionDenied,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_this_user_may_not_use_is_told_apart() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("docker.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let text = path.to_str().expect("utf-8");
        assert!(!socket_refuses_this_user(text), "a socket this user may use");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert_eq!(socket_refuses_this_user(text), !root, "mode 000: refused unless root");
        let missing = dir.path().join("missing.sock");
        assert!(!socket_refuses_this_user(missing.to_str().expect("utf-8")), "no socket is another failure");
    }

    #[test]
    fn cpu_percent_is_docker_stats_own() {
        // Half of one interval's machine time on a 2-CPU machine: one CPU busy.
        assert_eq!(cpu_percent(500, 1000, 2), Some(100.0));
        assert_eq!(cpu_percent(0, 1000, 2), Some(0.0));
        assert_eq!(cpu_percent(10, 0, 2), None);
    }

    #[test]
    fn build_steps_are_read_from_the_legacy_builders_lines() {
        assert_eq!(step_of("Step 3/12 : RUN apt-get update\n"), Some((3, 12, "RUN apt-get update".into())));
        assert_eq!(step_of(" ---> Using cache\n"), None);
        assert_eq!(step_of("Step x/12 : RUN\n"), None);
    }
}
