//! The `curl` extension: real HTTP/1.1 requests, only to hosts on its allowlist (empty
//! unless the embedding program fills it). The host is checked against the allowlist
//! before anything else happens, name resolution included, so a refused host is never
//! contacted; each redirect followed with `-L` is checked again.
//!
//! The client is a small blocking one over `std::net::TcpStream` (plain `http://` only:
//! a TLS stack would be the largest dependency of the crate for a sandbox that is
//! offline by default). Responses are bounded by the file size limit and every socket
//! operation by the command's deadline.

use std::{
    io::{Read, Write},
    net::{TcpStream, ToSocketAddrs},
    time::Duration,
};

use crate::extension::{CommandOutput, Extension, ShellContext};

/// The `curl` command with its allowlist: entries are `host`, `host:port` or
/// `*.domain` (any subdomain), compared without regard to case.
pub struct Curl {
    allowlist: Vec<String>,
}

const MAX_REDIRECTS: usize = 10;
const MAX_HEADER_BYTES: usize = 64 * 1024;

impl Curl {
    pub fn new(allowlist: &[String]) -> Curl {
        Curl { allowlist: allowlist.iter().map(|entry| entry.to_ascii_lowercase()).collect() }
    }

    /// Whether a request to `host:port` may be made.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = host.to_ascii_lowercase();
        self.allowlist.iter().any(|entry| {
            let (entry_host, entry_port) = split_host_port(entry);
            let port_ok = entry_port.is_none_or(|wanted| wanted == port);
            let host_ok = match entry_host.strip_prefix("*.") {
                Some(domain) => host.len() > domain.len() + 1 && host.ends_with(&format!(".{domain}")),
                None => entry_host == host,
            };
            host_ok && port_ok
        })
    }
}

/// `host` or `host:port` (IPv6 literals in brackets).
fn split_host_port(text: &str) -> (&str, Option<u16>) {
    if let Some(rest) = text.strip_prefix('[') {
        if let Some((host, after)) = rest.split_once(']') {
            return (host, after.strip_prefix(':').and_then(|port| port.parse().ok()));
        }
    }
    match text.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => match port.parse() {
            Ok(port) => (host, Some(port)),
            Err(_) => (text, None),
        },
        _ => (text, None),
    }
}

#[derive(Debug, Default)]
struct Options {
    method: Option<String>,
    headers: Vec<String>,
    data: Option<String>,
    output: Option<String>,
    include: bool,
    follow: bool,
    fail: bool,
    url: Option<String>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut options = Options::default();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let mut take = |name: &str, inline: &str| -> Result<String, String> {
            if !inline.is_empty() {
                return Ok(inline.to_owned());
            }
            iter.next().cloned().ok_or_else(|| format!("option {name} needs a value"))
        };
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = long.split_once('=').unwrap_or((long, ""));
            match name {
                "request" => options.method = Some(take("--request", inline)?),
                "header" => options.headers.push(take("--header", inline)?),
                "data" | "data-raw" | "data-binary" => options.data = Some(take("--data", inline)?),
                "output" => options.output = Some(take("--output", inline)?),
                "silent" | "show-error" => {}
                "include" => options.include = true,
                "location" => options.follow = true,
                "fail" => options.fail = true,
                "url" => options.url = Some(take("--url", inline)?),
                _ => return Err(format!("unknown option --{name} (see: help curl)")),
            }
            continue;
        }
        match arg.strip_prefix('-') {
            Some(letters) if !letters.is_empty() => {
                for (idx, letter) in letters.char_indices() {
                    let rest = &letters[idx + letter.len_utf8()..];
                    let value_flag = matches!(letter, 'X' | 'H' | 'd' | 'o');
                    if value_flag {
                        let value = take(&format!("-{letter}"), rest)?;
                        match letter {
                            'X' => options.method = Some(value),
                            'H' => options.headers.push(value),
                            'd' => options.data = Some(value),
                            _ => options.output = Some(value),
                        }
                        break;
                    }
                    match letter {
                        's' | 'S' => {}
                        'i' => options.include = true,
                        'L' => options.follow = true,
                        'f' => options.fail = true,
                        other => return Err(format!("unknown option -{other} (see: help curl)")),
                    }
                }
            }
            _ if options.url.is_none() => options.url = Some(arg.clone()),
            _ => return Err(String::from("only one URL per command is supported")),
        }
    }
    Ok(options)
}

/// A parsed `http://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Url {
    host: String,
    port: u16,
    /// Path and query, starting with `/`.
    target: String,
}

fn parse_url(text: &str) -> Result<Url, String> {
    let rest = match text.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some((scheme, _)) if scheme.eq_ignore_ascii_case("https") => {
            return Err(String::from(
                "https is not supported: the sandbox's curl speaks plain http:// only (no TLS stack inside)",
            ))
        }
        Some((scheme, _)) => return Err(format!("protocol {scheme:?} is not supported (http:// only)")),
        None => text,
    };
    let (authority, target) = match rest.find(['/', '?', '#']) {
        Some(idx) => (&rest[..idx], &rest[idx..]),
        None => (rest, "/"),
    };
    let target = target.split('#').next().unwrap_or("/");
    let target = if target.starts_with('/') { target.to_owned() } else { format!("/{target}") };
    if authority.contains('@') {
        return Err(String::from("credentials in the URL are not supported (use -H 'Authorization: ...')"));
    }
    let bad_port = || format!("bad port in URL {text:?}");
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => {
            let (host, after) = bracketed.split_once(']').ok_or_else(|| format!("unclosed [ in URL {text:?}"))?;
            match after {
                "" => (host, None),
                _ => (host, Some(after.strip_prefix(':').and_then(|port| port.parse().ok()).ok_or_else(bad_port)?)),
            }
        }
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port.parse::<u16>().map_err(|_| bad_port())?)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return Err(format!("no host in URL {text:?}"));
    }
    Ok(Url { host: host.to_ascii_lowercase(), port: port.unwrap_or(80), target })
}

struct Response {
    status: u16,
    /// Status line and headers as received, with the blank line.
    head: Vec<u8>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Extension for Curl {
    fn name(&self) -> &str {
        "curl"
    }

    fn description(&self) -> &str {
        "HTTP requests to allowlisted hosts (http:// only)"
    }

    fn usage(&self) -> &str {
        "curl [-X METHOD] [-H 'Name: value']... [-d DATA|@FILE] [-o FILE] [-s] [-i] [-L] [-f] http://HOST[:PORT]/PATH"
    }

    fn execute(&self, args: &[String], context: &mut ShellContext<'_>) -> CommandOutput {
        match self.run(args, context) {
            Ok(output) => output,
            Err(message) => CommandOutput::error(format!("curl: {message}")),
        }
    }
}

impl Curl {
    fn run(&self, args: &[String], context: &mut ShellContext<'_>) -> Result<CommandOutput, String> {
        let options = parse_args(args)?;
        let url = options.url.as_deref().ok_or("no URL given (usage: curl http://HOST/PATH)")?;
        let mut url = parse_url(url)?;
        let mut body = match options.data.as_deref() {
            Some(data) => Some(match data.strip_prefix('@') {
                Some(path) => {
                    let path = context.resolve_path(path);
                    context.fs().read(&path).map_err(|err| err.to_string())?.into_owned()
                }
                None => data.as_bytes().to_vec(),
            }),
            None => None,
        };
        let mut method =
            options.method.clone().unwrap_or_else(|| String::from(if body.is_some() { "POST" } else { "GET" }));
        let limit = usize::try_from(context.fs().limits().max_file_size).unwrap_or(usize::MAX);
        let mut redirects = 0;
        let response = loop {
            if !self.allows(&url.host, url.port) {
                return Err(format!(
                    "host {}:{} is not on the allowlist ({}); nothing was sent. The sandbox's owner can allow it (agent-sandbox vsh/mcp --allow-host HOST)",
                    url.host,
                    url.port,
                    if self.allowlist.is_empty() { String::from("it is empty") } else { format!("allowed: {}", self.allowlist.join(", ")) }
                ));
            }
            let response = request(&url, &method, &options.headers, body.as_deref(), context, limit)?;
            let location = response.headers.iter().find(|(name, _)| name == "location").map(|(_, value)| value.clone());
            match (options.follow, response.status, location) {
                (true, 301 | 302 | 303 | 307 | 308, Some(location)) => {
                    redirects += 1;
                    if redirects > MAX_REDIRECTS {
                        return Err(format!("more than {MAX_REDIRECTS} redirects"));
                    }
                    if response.status == 303 || (matches!(response.status, 301 | 302) && method == "POST") {
                        method = String::from("GET");
                        body = None;
                    }
                    url = join_location(&url, &location)?;
                }
                _ => break response,
            }
        };
        if options.fail && response.status >= 400 {
            return Err(format!("(22) The requested URL returned error: {}", response.status));
        }
        let mut data = Vec::new();
        if options.include {
            data.extend_from_slice(&response.head);
        }
        data.extend_from_slice(&response.body);
        match options.output {
            Some(file) => {
                let path = context.resolve_path(&file);
                context.fs().write(&path, &data, false).map_err(|err| err.to_string())?;
                Ok(CommandOutput::default())
            }
            None => Ok(CommandOutput::success(data)),
        }
    }
}

fn join_location(base: &Url, location: &str) -> Result<Url, String> {
    if location.contains("://") {
        return parse_url(location);
    }
    let target = if location.starts_with('/') {
        location.to_owned()
    } else {
        let path = base.target.split('?').next().unwrap_or("/");
        let dir = &path[..path.rfind('/').map_or(0, |idx| idx + 1)];
        format!("{dir}{location}")
    };
    Ok(Url { host: base.host.clone(), port: base.port, target })
}

fn request(
    url: &Url,
    method: &str,
    headers: &[String],
    body: Option<&[u8]>,
    context: &ShellContext<'_>,
    limit: usize,
) -> Result<Response, String> {
    let timeout = || {
        let left = context.remaining();
        if context.interrupted() {
            Err(String::from("interrupted"))
        } else if left.is_zero() {
            Err(String::from("timed out (the command timeout)"))
        } else {
            Ok(left.max(Duration::from_millis(1)))
        }
    };
    // The response is awaited in slices of at most 100 ms, so that an interrupt stops
    // curl soon even when the server sends nothing.
    let slice = || timeout().map(|left| left.min(Duration::from_millis(100)));
    let addrs: Vec<_> = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|err| format!("(6) could not resolve host {}: {err}", url.host))?
        .collect();
    let mut stream = None;
    let mut last_error = String::from("no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout()?) {
            Ok(connected) => {
                stream = Some(connected);
                break;
            }
            Err(err) => last_error = err.to_string(),
        }
    }
    let mut stream =
        stream.ok_or_else(|| format!("(7) failed to connect to {}:{}: {last_error}", url.host, url.port))?;
    let host_header = match (url.host.contains(':'), url.port) {
        (true, 80) => format!("[{}]", url.host),
        (true, port) => format!("[{}]:{port}", url.host),
        (false, 80) => url.host.clone(),
        (false, port) => format!("{}:{port}", url.host),
    };
    let mut head = format!("{method} {} HTTP/1.1\r\nHost: {host_header}\r\n", url.target);
    let has = |name: &str| {
        headers.iter().any(|header| header.split(':').next().is_some_and(|h| h.trim().eq_ignore_ascii_case(name)))
    };
    if !has("user-agent") {
        head.push_str("User-Agent: agent-sandbox-vsandbox-curl\r\n");
    }
    if !has("accept") {
        head.push_str("Accept: */*\r\n");
    }
    for header in headers {
        if header.contains(['\r', '\n']) {
            return Err(String::from("a header must not contain line breaks"));
        }
        head.push_str(header);
        head.push_str("\r\n");
    }
    if let Some(body) = body {
        if !has("content-type") {
            head.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("Connection: close\r\n\r\n");
    stream.set_write_timeout(Some(timeout()?)).map_err(|err| err.to_string())?;
    stream.write_all(head.as_bytes()).map_err(|err| format!("(55) sending the request: {err}"))?;
    if let Some(body) = body {
        stream.write_all(body).map_err(|err| format!("(55) sending the request: {err}"))?;
    }
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        stream.set_read_timeout(Some(slice()?)).map_err(|err| err.to_string())?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(read) => {
                raw.extend_from_slice(&buf[..read]);
                if raw.len() > limit + MAX_HEADER_BYTES {
                    return Err(format!("the response is larger than {limit} bytes (the file size limit)"));
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) if matches!(err.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                // One slice passed; `timeout` above says whether the whole time did.
                timeout().map_err(|reason| format!("(28) {reason}"))?;
            }
            Err(err) => return Err(format!("(56) receiving the response: {err}")),
        }
    }
    parse_response(&raw, method == "HEAD", limit)
}

fn parse_response(raw: &[u8], head_only: bool, limit: usize) -> Result<Response, String> {
    let end = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .ok_or("(8) the server's response has no complete header")?;
    let head = &raw[..end + 4];
    let text = String::from_utf8_lossy(&raw[..end]);
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .filter(|_| status_line.starts_with("HTTP/1."))
        .ok_or_else(|| format!("(8) not an HTTP response: {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let header = |name: &str| headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str());
    let rest = &raw[end + 4..];
    let body = if head_only || status == 204 || status == 304 || (100..200).contains(&status) {
        Vec::new()
    } else if header("transfer-encoding").is_some_and(|value| value.eq_ignore_ascii_case("chunked")) {
        dechunk(rest, limit)?
    } else if let Some(length) = header("content-length") {
        let length: usize = length.parse().map_err(|_| format!("(8) bad Content-Length {length:?}"))?;
        if rest.len() < length {
            return Err(format!("(18) the response ended after {} of {length} bytes", rest.len()));
        }
        rest[..length].to_vec()
    } else {
        rest.to_vec()
    };
    if body.len() > limit {
        return Err(format!("the response is larger than {limit} bytes (the file size limit)"));
    }
    Ok(Response { status, head: head.to_vec(), headers, body })
}

fn dechunk(mut data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n").ok_or("(18) a chunk size line is incomplete")?;
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| format!("(8) bad chunk size {size_text:?}"))?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        if data.len() < size + 2 || body.len() + size > limit {
            return Err(String::from("(18) a chunk is incomplete or too large"));
        }
        body.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let url = |host: &str, port, target: &str| Ok(Url { host: host.into(), port, target: target.into() });
        assert_eq!(parse_url("http://Example.com"), url("example.com", 80, "/"));
        assert_eq!(parse_url("example.com:8080/a?b=c#frag"), url("example.com", 8080, "/a?b=c"));
        assert_eq!(parse_url("http://[::1]:9/x"), url("::1", 9, "/x"));
        assert_eq!(parse_url("http://h?q"), url("h", 80, "/?q"));
        assert!(parse_url("https://example.com").is_err_and(|err| err.contains("https is not supported")));
        assert!(parse_url("http://user:pw@h/").is_err());
        assert!(parse_url("http://h:notaport/").is_err());
        assert!(parse_url("ftp://h/").is_err());
    }

    #[test]
    fn allowlist_entries() {
        let curl = Curl::new(&["example.com".into(), "127.0.0.1:8080".into(), "*.Internal.test".into()]);
        for (host, port, want) in [
            ("example.com", 80, true),
            ("EXAMPLE.com", 1234, true),
            ("www.example.com", 80, false),
            ("127.0.0.1", 8080, true),
            ("127.0.0.1", 8081, false),
            ("a.internal.test", 80, true),
            ("internal.test", 80, false),
            ("evilinternal.test", 80, false),
        ] {
            assert_eq!(curl.allows(host, port), want, "{host}:{port}");
        }
        assert!(!Curl::new(&[]).allows("localhost", 80));
    }

    #[test]
    fn chunked_bodies() {
        assert_eq!(dechunk(b"5\r\nhello\r\n1;x=y\r\n!\r\n0\r\n\r\n", 100), Ok(b"hello!".to_vec()));
        assert!(dechunk(b"5\r\nhel", 100).is_err());
        assert!(dechunk(b"zz\r\n", 100).is_err());
    }
}
