//! The connections to a remote engine, as bollard custom transports (bollard's own TLS
//! trusts the system's roots beside the endpoint's CA, and its ssh connector runs an
//! OpenSSH control master per connection): TLS that trusts only the endpoint's
//! `ca.pem` and presents `cert.pem`/`key.pem`, as the docker CLI does; ssh as the docker
//! CLI does it, one `ssh … docker system dial-stdio` per connection, HTTP over its
//! stdin and stdout. Connections are kept for reuse (hyper's pool), so a command runs
//! a few ssh processes, not one per request.

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use anyhow::{Context as _, Result};
use bollard::{BollardRequest, Docker, API_DEFAULT_VERSION};
use hyper_util::{
    client::legacy::{
        connect::{Connected, Connection, HttpConnector},
        Client,
    },
    rt::{TokioExecutor, TokioIo},
};
use rustls::pki_types::{pem::PemObject as _, CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::endpoint::{SshEndpoint, TlsEndpoint};

/// Seconds a request may take to its response's head (bollard's default).
const TIMEOUT: u64 = 120;

/// A client for the TLS endpoint; reads the certificates now, so a bad file is named
/// before any connection.
pub fn tls(endpoint: &TlsEndpoint) -> Result<Docker> {
    let mut roots = rustls::RootCertStore::empty();
    let read_error = |path: &std::path::Path| format!("reading {} (a PEM certificate)", path.display());
    for cert in CertificateDer::pem_file_iter(&endpoint.ca).with_context(|| read_error(&endpoint.ca))? {
        roots.add(cert.with_context(|| read_error(&endpoint.ca))?).with_context(|| read_error(&endpoint.ca))?;
    }
    if roots.is_empty() {
        anyhow::bail!("{} holds no certificate (it should be the engine's CA, PEM)", endpoint.ca.display());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("setting up TLS")?
        .with_root_certificates(roots);
    let config = match &endpoint.client {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .with_context(|| read_error(cert))?;
            let key_der = PrivateKeyDer::from_pem_file(key)
                .with_context(|| format!("reading {} (the client certificate's PEM private key)", key.display()))?;
            builder.with_client_auth_cert(chain, key_der).context("the client certificate and key do not match")?
        }
        None => builder.with_no_client_auth(),
    };
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .wrap_connector(http);
    let client = Client::builder(TokioExecutor::new()).build(https);
    let transport = move |request: BollardRequest| {
        let client = client.clone();
        async move { client.request(request).await.map_err(bollard::errors::Error::from) }
    };
    Docker::connect_with_custom_transport(
        transport,
        Some(format!("https://{}", endpoint.address)),
        TIMEOUT,
        API_DEFAULT_VERSION,
    )
    .context("setting up the TLS client")
}

/// A client for the ssh endpoint. Nothing runs until the first request.
pub fn ssh(endpoint: &SshEndpoint) -> Result<Docker> {
    let client = Client::builder(TokioExecutor::new())
        .build(SshConnector { argv: Arc::new(endpoint.argv(&["docker", "system", "dial-stdio"])) });
    let transport = move |request: BollardRequest| {
        let client = client.clone();
        async move { client.request(request).await.map_err(bollard::errors::Error::from) }
    };
    // The authority only names the pool's connections: every one goes through ssh.
    Docker::connect_with_custom_transport(transport, Some("http://docker"), TIMEOUT, API_DEFAULT_VERSION)
        .context("setting up the ssh client")
}

/// Starts `argv` (ssh) for each new connection.
#[derive(Clone)]
struct SshConnector {
    argv: Arc<Vec<String>>,
}

impl tower_service::Service<hyper::Uri> for SshConnector {
    type Response = TokioIo<SshStream>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn std::future::Future<Output = std::io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: hyper::Uri) -> Self::Future {
        let argv = Arc::clone(&self.argv);
        Box::pin(async move {
            // stderr is the user's: ssh's own prompts and refusals reach them as they would.
            let mut child = tokio::process::Command::new(&argv[0])
                .args(&argv[1..])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .map_err(|err| std::io::Error::new(err.kind(), format!("running {}: {err}", argv.join(" "))))?;
            let stdin = child.stdin.take().ok_or_else(|| std::io::Error::other("ssh without stdin"))?;
            let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("ssh without stdout"))?;
            Ok(TokioIo::new(SshStream { _child: child, stdin: Some(stdin), stdout }))
        })
    }
}

/// One connection: what is written goes to ssh's stdin, what is read comes from its
/// stdout; shutting down the write side closes stdin (dial-stdio half-closes the
/// engine's socket). Dropping it kills ssh.
struct SshStream {
    _child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    stdout: tokio::process::ChildStdout,
}

impl SshStream {
    fn stdin(&mut self) -> std::io::Result<Pin<&mut tokio::process::ChildStdin>> {
        self.stdin.as_mut().map(Pin::new).ok_or_else(|| std::io::ErrorKind::BrokenPipe.into())
    }
}

impl AsyncRead for SshStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stdout).poll_read(cx, buf)
    }
}

impl AsyncWrite for SshStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.get_mut().stdin()?.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut().stdin()?.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.stdin.is_none() {
            return Poll::Ready(Ok(()));
        }
        std::task::ready!(this.stdin()?.poll_shutdown(cx))?;
        this.stdin = None; // closes the pipe: ssh passes the EOF on
        Poll::Ready(Ok(()))
    }
}

impl Connection for SshStream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}
