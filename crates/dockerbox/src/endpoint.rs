//! Where the engine is and how to reach it, decided the way the docker CLI decides it:
//! `DOCKER_HOST` (with `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH` for a `tcp://` one),
//! else the context named by `DOCKER_CONTEXT` or by `currentContext` in
//! `$DOCKER_CONFIG/config.json` (default `~/.docker`), its TLS material in
//! `contexts/tls/<digest>/docker/`, else the local socket. The decision is an
//! [`Endpoint`] value; nothing here connects (`transport` and `engine` do). The only I/O
//! is reading the CLI's configuration directory and checking that certificate files exist.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};

/// What the docker CLI would read from the environment, gathered once.
#[derive(Debug, Clone, Default)]
pub struct EndpointEnv {
    pub docker_host: Option<String>,
    pub docker_context: Option<String>,
    /// `DOCKER_TLS_VERIFY` is set to a non-empty value.
    pub tls_verify: bool,
    /// `DOCKER_TLS` is set to a non-empty value (TLS without checking the engine).
    pub tls_unverified: bool,
    pub cert_path: Option<PathBuf>,
    /// The docker CLI's configuration directory (`DOCKER_CONFIG`, else `~/.docker`).
    pub config_dir: PathBuf,
}

impl EndpointEnv {
    pub fn from_process() -> EndpointEnv {
        let set = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        EndpointEnv {
            docker_host: set("DOCKER_HOST"),
            docker_context: set("DOCKER_CONTEXT"),
            tls_verify: set("DOCKER_TLS_VERIFY").is_some(),
            tls_unverified: set("DOCKER_TLS").is_some(),
            cert_path: set("DOCKER_CERT_PATH").map(PathBuf::from),
            config_dir: config_dir(),
        }
    }
}

/// The docker CLI's configuration directory.
pub fn config_dir() -> PathBuf {
    match std::env::var_os("DOCKER_CONFIG") {
        Some(dir) => PathBuf::from(dir),
        None => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(".docker"),
    }
}

/// How to reach the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// The local default socket.
    Local,
    /// `unix:///path`.
    Unix(String),
    /// `tcp://host:port`, plain HTTP (a trusted network only).
    Tcp(String),
    Tls(TlsEndpoint),
    Ssh(SshEndpoint),
}

/// A `tcp://` engine spoken to over TLS: the engine's certificate must chain to `ca`
/// (and only to it: no system roots), and `client` is the certificate and key it may ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsEndpoint {
    /// `host:port`.
    pub address: String,
    pub ca: PathBuf,
    pub client: Option<(PathBuf, PathBuf)>,
}

/// An `ssh://[user@]host[:port]` engine: the user's own `ssh` runs `docker system
/// dial-stdio` there, one process per connection, and HTTP goes over its stdin/stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshEndpoint {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

impl SshEndpoint {
    /// The argv that runs `command` there as the docker CLI runs `docker system
    /// dial-stdio` (`-T`: no terminal; the user's ssh config, agent and known hosts apply
    /// as to any ssh).
    pub fn argv(&self, command: &[&str]) -> Vec<String> {
        let mut argv: Vec<String> = ["ssh", "-o", "ConnectTimeout=30", "-T"].map(str::to_owned).to_vec();
        if let Some(user) = &self.user {
            argv.extend(["-l".to_owned(), user.clone()]);
        }
        if let Some(port) = self.port {
            argv.extend(["-p".to_owned(), port.to_string()]);
        }
        argv.extend(["--", &self.host].map(str::to_owned));
        argv.extend(command.iter().map(|word| (*word).to_owned()));
        argv
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Local => write!(f, "unix:///var/run/docker.sock"),
            Endpoint::Unix(host) | Endpoint::Tcp(host) => write!(f, "{host}"),
            Endpoint::Tls(tls) => write!(f, "tcp://{} (TLS, CA {})", tls.address, tls.ca.display()),
            Endpoint::Ssh(ssh) => {
                write!(f, "ssh://")?;
                if let Some(user) = &ssh.user {
                    write!(f, "{user}@")?;
                }
                write!(f, "{}", ssh.host)?;
                match ssh.port {
                    Some(port) => write!(f, ":{port}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// The endpoint of `env`, or why it cannot be used and what to do instead.
pub fn endpoint(env: &EndpointEnv) -> Result<Endpoint> {
    if let Some(host) = &env.docker_host {
        let tls = match host.strip_prefix("https://") {
            Some(_) => Some(cert_dir_tls(env)?),
            None if host.starts_with("tcp://") && env.tls_verify => Some(cert_dir_tls(env)?),
            None if host.starts_with("tcp://") && env.tls_unverified => bail!(
                "DOCKER_TLS without DOCKER_TLS_VERIFY speaks TLS without checking the engine's certificate, which \
                 agent-sandbox does not do: set DOCKER_TLS_VERIFY=1, with the engine's ca.pem (and your cert.pem \
                 and key.pem) in DOCKER_CERT_PATH"
            ),
            None => None,
        };
        return match tls {
            Some((ca, client)) => Ok(Endpoint::Tls(TlsEndpoint { address: address(host)?, ca, client })),
            None => of_host(host, "DOCKER_HOST"),
        };
    }
    let context = match &env.docker_context {
        Some(name) => Some(name.clone()),
        None => current_context(&env.config_dir)?,
    };
    let Some(context) = context.filter(|name| name != "default") else { return Ok(Endpoint::Local) };
    context_endpoint(&env.config_dir, &context)
}

/// The context's endpoint, found by its `meta.json` (the directory name is a digest the
/// CLI computes; the `Name` field is what counts), with the TLS material of the same digest.
fn context_endpoint(config_dir: &Path, context: &str) -> Result<Endpoint> {
    let meta_dir = config_dir.join("contexts/meta");
    for entry in fs_err::read_dir(&meta_dir).into_iter().flatten().flatten() {
        let Ok(text) = fs_err::read_to_string(entry.path().join("meta.json")) else { continue };
        let Ok(meta) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        if meta.get("Name").and_then(|name| name.as_str()) != Some(context) {
            continue;
        }
        let Some(host) = meta.pointer("/Endpoints/docker/Host").and_then(|host| host.as_str()) else {
            bail!("docker context {context:?} has no Docker endpoint ({})", entry.path().display())
        };
        let tls_dir = config_dir.join("contexts/tls").join(entry.file_name()).join("docker");
        let skip_verify = meta.pointer("/Endpoints/docker/SkipTLSVerify").and_then(|skip| skip.as_bool());
        if skip_verify == Some(true) {
            bail!(
                "docker context {context:?} skips checking the engine's TLS certificate (SkipTLSVerify), which \
                 agent-sandbox does not do: recreate it with the engine's CA (docker context update {context} \
                 --docker \"host={host},ca=CA.pem,cert=CERT.pem,key=KEY.pem\")"
            );
        }
        if (host.starts_with("tcp://") || host.starts_with("https://")) && tls_dir.is_dir() {
            let what = format!("docker context {context:?}");
            let (ca, client) = tls_files(&tls_dir, &what)?;
            return Ok(Endpoint::Tls(TlsEndpoint { address: address(host)?, ca, client }));
        }
        return of_host(host, &format!("docker context {context:?}"));
    }
    bail!("docker context {context:?} not found in {} (list them with: docker context ls)", meta_dir.display())
}

/// `currentContext` of `config.json`, if any.
fn current_context(config_dir: &Path) -> Result<Option<String>> {
    let path = config_dir.join("config.json");
    let Ok(text) = fs_err::read_to_string(&path) else { return Ok(None) };
    let config: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", path.display()))?;
    Ok(config.get("currentContext").and_then(|value| value.as_str()).map(str::to_owned))
}

/// A host without TLS material: unix, plain tcp or ssh.
fn of_host(host: &str, from: &str) -> Result<Endpoint> {
    if host.starts_with("unix://") {
        return Ok(Endpoint::Unix(host.to_owned()));
    }
    if host.starts_with("tcp://") || host.starts_with("http://") {
        return Ok(Endpoint::Tcp(host.to_owned()));
    }
    if let Some(rest) = host.strip_prefix("ssh://") {
        return ssh(rest).with_context(|| format!("{from}: {host}"));
    }
    bail!("{from}: {host}: agent-sandbox reaches an engine by unix://, tcp:// (with TLS or not) or ssh://")
}

/// `[user@]host[:port]` of an `ssh://` URL; no password, no path (as the docker CLI).
fn ssh(rest: &str) -> Result<Endpoint> {
    let (user, host_port) = match rest.rsplit_once('@') {
        Some((user, host_port)) => (Some(user), host_port),
        None => (None, rest),
    };
    if user.is_some_and(|user| user.contains(':')) {
        bail!("a password in the URL is not supported: use an ssh key or agent");
    }
    if host_port.contains('/') {
        bail!("extra path after the host: give ssh://[user@]host[:port]");
    }
    let (host, port) = match host_port.strip_prefix('[') {
        // [::1]:22
        Some(bracketed) => match bracketed.split_once(']') {
            Some((host, "")) => (host, None),
            Some((host, port)) => (host, Some(port.strip_prefix(':').unwrap_or(port))),
            None => bail!("unclosed [ in the host"),
        },
        None => match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        },
    };
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok().filter(|port| *port > 0).context("the port is not a number")?),
        None => None,
    };
    if host.is_empty() || host.starts_with('-') || user.is_some_and(|user| user.is_empty() || user.starts_with('-')) {
        bail!("give ssh://[user@]host[:port]");
    }
    Ok(Endpoint::Ssh(SshEndpoint { user: user.map(str::to_owned), host: host.to_owned(), port }))
}

/// `host:port` of a `tcp://` or `https://` endpoint.
fn address(host: &str) -> Result<String> {
    let rest = host.strip_prefix("tcp://").or_else(|| host.strip_prefix("https://")).unwrap_or(host);
    let rest = rest.trim_end_matches('/');
    if rest.is_empty() || rest.contains('/') {
        bail!("{host}: give tcp://HOST:PORT");
    }
    Ok(rest.to_owned())
}

/// The TLS files of `DOCKER_CERT_PATH` (default: the configuration directory).
fn cert_dir_tls(env: &EndpointEnv) -> Result<(PathBuf, Option<(PathBuf, PathBuf)>)> {
    let dir = env.cert_path.clone().unwrap_or_else(|| env.config_dir.clone());
    tls_files(&dir, "DOCKER_TLS_VERIFY")
}

/// `ca.pem`, and `cert.pem` with `key.pem`, in `dir`: the CA must be there (it is what
/// the engine's certificate is checked against), the client pair both or neither.
fn tls_files(dir: &Path, what: &str) -> Result<(PathBuf, Option<(PathBuf, PathBuf)>)> {
    let [ca, cert, key] = ["ca.pem", "cert.pem", "key.pem"].map(|name| dir.join(name));
    if !ca.is_file() {
        bail!(
            "{what}: the engine's CA certificate {} is missing, so its certificate cannot be checked: put ca.pem \
             (with your cert.pem and key.pem) in {}, or point DOCKER_CERT_PATH at the directory that holds them",
            ca.display(),
            dir.display()
        );
    }
    match (cert.is_file(), key.is_file()) {
        (true, true) => Ok((ca, Some((cert, key)))),
        (false, false) => Ok((ca, None)),
        (has_cert, _) => {
            let (present, missing) = if has_cert { (&cert, &key) } else { (&key, &cert) };
            bail!(
                "{what}: {} is there but {} is missing: the client certificate and its key go together",
                present.display(),
                missing.display()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(config_dir: &Path) -> EndpointEnv {
        EndpointEnv { config_dir: config_dir.to_path_buf(), ..Default::default() }
    }

    fn ssh_endpoint(user: Option<&str>, host: &str, port: Option<u16>) -> Endpoint {
        Endpoint::Ssh(SshEndpoint { user: user.map(str::to_owned), host: host.to_owned(), port })
    }

    #[test]
    fn endpoint_follows_the_docker_clis_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path();
        // Nothing configured: the local socket.
        assert_eq!(endpoint(&env(config)).expect("ok"), Endpoint::Local);
        // A context named in config.json, found by its meta.json.
        fs_err::write(config.join("config.json"), r#"{"currentContext": "remote"}"#).expect("write");
        fs_err::create_dir_all(config.join("contexts/meta/abc")).expect("mkdir");
        fs_err::write(
            config.join("contexts/meta/abc/meta.json"),
            r#"{"Name":"remote","Endpoints":{"docker":{"Host":"tcp://127.0.0.1:2399"}}}"#,
        )
        .expect("write");
        assert_eq!(endpoint(&env(config)).expect("ok"), Endpoint::Tcp("tcp://127.0.0.1:2399".into()));
        // DOCKER_CONTEXT wins over config.json, DOCKER_HOST over both.
        let named = |name: &str| EndpointEnv { docker_context: Some(name.into()), ..env(config) };
        assert_eq!(endpoint(&named("default")).expect("ok"), Endpoint::Local);
        let host = EndpointEnv { docker_host: Some("unix:///tmp/d.sock".into()), ..named("remote") };
        assert_eq!(endpoint(&host).expect("ok"), Endpoint::Unix("unix:///tmp/d.sock".into()));
        let missing = endpoint(&named("gone")).expect_err("unknown context");
        assert!(missing.to_string().contains("docker context \"gone\" not found"), "{missing}");
        // The context's TLS material, in the directory of the same digest.
        let tls_dir = config.join("contexts/tls/abc/docker");
        fs_err::create_dir_all(&tls_dir).expect("mkdir");
        let refused = endpoint(&env(config)).expect_err("no CA");
        assert!(refused.to_string().contains("ca.pem is missing"), "{refused}");
        for name in ["ca.pem", "cert.pem", "key.pem"] {
            fs_err::write(tls_dir.join(name), "pem").expect("write");
        }
        assert_eq!(
            endpoint(&env(config)).expect("ok"),
            Endpoint::Tls(TlsEndpoint {
                address: "127.0.0.1:2399".into(),
                ca: tls_dir.join("ca.pem"),
                client: Some((tls_dir.join("cert.pem"), tls_dir.join("key.pem"))),
            })
        );
        // A context that skips the check is refused, with the fix.
        fs_err::write(
            config.join("contexts/meta/abc/meta.json"),
            r#"{"Name":"remote","Endpoints":{"docker":{"Host":"tcp://h:2376","SkipTLSVerify":true}}}"#,
        )
        .expect("write");
        let skipped = endpoint(&env(config)).expect_err("skip verify");
        assert!(skipped.to_string().contains("docker context update remote"), "{skipped}");
        // An ssh context.
        fs_err::write(
            config.join("contexts/meta/abc/meta.json"),
            r#"{"Name":"remote","Endpoints":{"docker":{"Host":"ssh://me@box:2222"}}}"#,
        )
        .expect("write");
        assert_eq!(endpoint(&env(config)).expect("ok"), ssh_endpoint(Some("me"), "box", Some(2222)));
    }

    #[test]
    fn tls_is_taken_from_the_environment_as_the_docker_cli_takes_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let certs = dir.path().join("certs");
        fs_err::create_dir_all(&certs).expect("mkdir");
        let tls = |host: &str, verify: bool, unverified: bool, cert_path: Option<&Path>| EndpointEnv {
            docker_host: Some(host.into()),
            tls_verify: verify,
            tls_unverified: unverified,
            cert_path: cert_path.map(Path::to_path_buf),
            ..env(dir.path())
        };
        // Plain tcp stays plain; TLS_VERIFY without the files says which is missing and where.
        assert_eq!(
            endpoint(&tls("tcp://h:2375", false, false, None)).expect("ok"),
            Endpoint::Tcp("tcp://h:2375".into())
        );
        let refused = endpoint(&tls("tcp://h:2376", true, false, Some(&certs))).expect_err("no files");
        assert!(refused.to_string().contains(&format!("{}/ca.pem is missing", certs.display())), "{refused}");
        fs_err::write(certs.join("ca.pem"), "pem").expect("write");
        fs_err::write(certs.join("cert.pem"), "pem").expect("write");
        let half = endpoint(&tls("tcp://h:2376", true, false, Some(&certs))).expect_err("no key");
        assert!(half.to_string().contains("key.pem is missing"), "{half}");
        fs_err::write(certs.join("key.pem"), "pem").expect("write");
        let want = Endpoint::Tls(TlsEndpoint {
            address: "h:2376".into(),
            ca: certs.join("ca.pem"),
            client: Some((certs.join("cert.pem"), certs.join("key.pem"))),
        });
        assert_eq!(endpoint(&tls("tcp://h:2376", true, false, Some(&certs))).expect("ok"), want);
        assert_eq!(want.to_string(), format!("tcp://h:2376 (TLS, CA {}/ca.pem)", certs.display()));
        // An https:// host asks for TLS by itself.
        assert_eq!(endpoint(&tls("https://h:2376/", false, false, Some(&certs))).expect("ok"), want);
        // The default certificate directory is the configuration directory.
        let default = endpoint(&tls("tcp://h:2376", true, false, None)).expect_err("none in ~/.docker");
        assert!(default.to_string().contains(&format!("{}/ca.pem", dir.path().display())), "{default}");
        // TLS that checks nothing is refused.
        let unverified = endpoint(&tls("tcp://h:2376", false, true, Some(&certs))).expect_err("DOCKER_TLS");
        assert!(unverified.to_string().contains("set DOCKER_TLS_VERIFY=1"), "{unverified}");
    }

    const DIAL: &[&str] = &["docker", "system", "dial-stdio"];

    #[test]
    fn ssh_urls_are_read_as_the_docker_cli_reads_them() {
        let host = |url: &str| EndpointEnv { docker_host: Some(url.into()), ..Default::default() };
        let cases: &[(&str, Option<Endpoint>)] = &[
            ("ssh://box", Some(ssh_endpoint(None, "box", None))),
            ("ssh://me@box", Some(ssh_endpoint(Some("me"), "box", None))),
            ("ssh://me@127.0.0.1:2222", Some(ssh_endpoint(Some("me"), "127.0.0.1", Some(2222)))),
            ("ssh://[::1]:22", Some(ssh_endpoint(None, "::1", Some(22)))),
            ("ssh://me:pw@box", None),
            ("ssh://box/var/run/docker.sock", None),
            ("ssh://box:port", None),
            ("ssh://-oProxyCommand=x", None),
            ("ssh://", None),
        ];
        for (url, want) in cases {
            assert_eq!(endpoint(&host(url)).ok().as_ref(), want.as_ref(), "{url}");
        }
        let Endpoint::Ssh(ssh) = ssh_endpoint(Some("me"), "box", Some(2222)) else { unreachable!() };
        assert_eq!(
            ssh.argv(DIAL),
            [
                "ssh",
                "-o",
                "ConnectTimeout=30",
                "-T",
                "-l",
                "me",
                "-p",
                "2222",
                "--",
                "box",
                "docker",
                "system",
                "dial-stdio"
            ]
        );
        let Endpoint::Ssh(plain) = ssh_endpoint(None, "box", None) else { unreachable!() };
        assert_eq!(
            plain.argv(DIAL),
            ["ssh", "-o", "ConnectTimeout=30", "-T", "--", "box", "docker", "system", "dial-stdio"]
        );
        assert_eq!(ssh_endpoint(Some("me"), "box", Some(2222)).to_string(), "ssh://me@box:2222");
        let other = endpoint(&host("npipe:////./pipe/docker_engine")).expect_err("npipe");
        assert!(other.to_string().contains("unix://, tcp:// (with TLS or not) or ssh://"), "{other}");
    }
}
