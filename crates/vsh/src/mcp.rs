//! The Model Context Protocol server on stdio (the official Rust SDK, `rmcp`) that gives
//! an agent one virtual sandbox as tools: `execute`, `read_file`, `write_file`,
//! `snapshot`, `restore`, `stats`, `history`. Snapshots taken with the `snapshot` tool
//! stay in the server's memory under an id; `--store FILE` keeps the sandbox in a redb
//! file, committed after every tool call, so that a client reconnecting (a new server
//! on the same file) finds it as it was; `--snapshot FILE` persists it across sessions
//! as for `vsh`. This is the only code that builds a tokio runtime (rmcp
//! needs one), and it builds it only here: a current-thread runtime, since tool calls
//! run one at a time on the one sandbox anyway.

use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use rmcp::{
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig},
    schemars, tool, tool_handler, tool_router, ServerHandler, ServiceExt,
};
use serde::Deserialize;
use vsandbox::{Sandbox, Snapshot};

use crate::session::{close, open, SessionOptions};

/// Serves MCP on stdio until the client disconnects.
pub fn mcp(session: &SessionOptions) -> Result<i32> {
    let (sandbox, notes) = open(session)?;
    // stdout is the protocol channel: everything for the user goes to stderr.
    for note in &notes {
        eprintln!("agent-sandbox mcp: {note}");
    }
    let state = Arc::new(Mutex::new(State { sandbox, snapshots: Vec::new() }));
    let server = VirtualSandboxServer { state: Arc::clone(&state), tool_router: VirtualSandboxServer::tool_router() };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting tokio")?;
    runtime.block_on(async {
        let service = server.serve(rmcp::transport::stdio()).await.context("starting the MCP session on stdio")?;
        service.waiting().await.context("serving MCP on stdio")?;
        anyhow::Ok(())
    })?;
    let state = state.lock().map_err(|_| anyhow::anyhow!("a tool call panicked"))?;
    for note in close(&state.sandbox, session)? {
        eprintln!("agent-sandbox mcp: {note}");
    }
    Ok(0)
}

struct State {
    sandbox: Sandbox,
    /// Snapshots taken with the `snapshot` tool; the id is the index plus one.
    snapshots: Vec<Snapshot>,
}

#[derive(Clone)]
struct VirtualSandboxServer {
    state: Arc<Mutex<State>>,
    tool_router: ToolRouter<VirtualSandboxServer>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct ExecuteRequest {
    /// A command line: built-ins (help lists them), quotes, $VAR, > and >>, ;, &&, || and |
    command: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct PathRequest {
    /// Absolute, or relative to the shell's working directory
    path: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct WriteRequest {
    /// Absolute, or relative to the shell's working directory; parents are created
    path: String,
    /// The whole new content (UTF-8 text)
    content: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct RestoreRequest {
    /// The id the snapshot tool returned
    id: u64,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct HistoryRequest {
    /// Only the last this many entries (default: all kept, up to 1000)
    #[serde(default)]
    limit: Option<usize>,
}

fn text(value: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(value)])
}

fn json(value: &(impl serde::Serialize + ?Sized)) -> CallToolResult {
    text(serde_json::to_string_pretty(value).unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}")))
}

fn failure(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

impl VirtualSandboxServer {
    fn with<T>(&self, action: impl FnOnce(&mut State) -> T) -> Result<T, rmcp::ErrorData> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| rmcp::ErrorData::internal_error("an earlier tool call panicked; restart the server", None))?;
        Ok(action(&mut state))
    }
}

#[tool_router]
impl VirtualSandboxServer {
    #[tool(
        description = "Run a command line in the virtual sandbox (a virtual filesystem; nothing touches the host). Returns JSON: command, stdout, stderr, exit_code (0 ok, 1 error, 127 not found), success, duration_ms."
    )]
    fn execute(&self, Parameters(request): Parameters<ExecuteRequest>) -> Result<CallToolResult, rmcp::ErrorData> {
        self.with(|state| json(&state.sandbox.execute(&request.command)))
    }

    #[tool(description = "Read a file of the virtual sandbox (bytes that are not UTF-8 are replaced).")]
    fn read_file(&self, Parameters(request): Parameters<PathRequest>) -> Result<CallToolResult, rmcp::ErrorData> {
        self.with(|state| match state.sandbox.read_file(&request.path) {
            Ok(data) => text(String::from_utf8_lossy(&data)),
            Err(err) => failure(err.to_string()),
        })
    }

    #[tool(description = "Create or replace a file of the virtual sandbox with the given text (parents are created).")]
    fn write_file(&self, Parameters(request): Parameters<WriteRequest>) -> Result<CallToolResult, rmcp::ErrorData> {
        self.with(|state| match state.sandbox.write_file(&request.path, request.content.as_bytes()) {
            Ok(()) => text(format!("wrote {} bytes to {}", request.content.len(), request.path)),
            Err(err) => failure(err.to_string()),
        })
    }

    #[tool(
        description = "Save the sandbox's complete state (files, working directory, environment) and return an id for restore."
    )]
    fn snapshot(&self) -> Result<CallToolResult, rmcp::ErrorData> {
        self.with(|state| {
            let snapshot = match state.sandbox.create_snapshot() {
                Ok(snapshot) => snapshot,
                Err(err) => return failure(err.to_string()),
            };
            let summary = serde_json::json!({
                "id": state.snapshots.len() + 1,
                "timestamp": snapshot.timestamp,
                "nodes": snapshot.nodes.len(),
                "cwd": snapshot.cwd,
            });
            state.snapshots.push(snapshot);
            json(&summary)
        })
    }

    #[tool(description = "Put back exactly the state saved by the snapshot tool under this id.")]
    fn restore(&self, Parameters(request): Parameters<RestoreRequest>) -> Result<CallToolResult, rmcp::ErrorData> {
        self.with(|state| {
            let found = usize::try_from(request.id)
                .ok()
                .and_then(|id| id.checked_sub(1))
                .and_then(|idx| state.snapshots.get(idx))
                .cloned();
            match found {
                None => failure(format!("no snapshot {} (ids so far: 1 to {})", request.id, state.snapshots.len())),
                Some(snapshot) => match state.sandbox.restore_snapshot(&snapshot) {
                    Ok(()) => text(format!("restored snapshot {} taken {}", request.id, snapshot.timestamp)),
                    Err(err) => failure(err.to_string()),
                },
            }
        })
    }

    #[tool(description = "Usage and limits of the sandbox, and command counts, as JSON.")]
    fn stats(&self) -> Result<CallToolResult, rmcp::ErrorData> {
        self.with(|state| json(&state.sandbox.stats()))
    }

    #[tool(description = "The commands run so far with their results, oldest first, as JSON.")]
    fn history(&self, Parameters(request): Parameters<HistoryRequest>) -> Result<CallToolResult, rmcp::ErrorData> {
        self.with(|state| {
            let history = state.sandbox.history();
            let skip = request.limit.map_or(0, |limit| history.len().saturating_sub(limit));
            json(&history[skip..])
        })
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for VirtualSandboxServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agent-sandbox", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "A virtual sandbox: a virtual filesystem with a small shell (run `help` through execute). \
             Nothing you do here touches the real machine; curl reaches only allowlisted hosts. \
             Take a snapshot before risky changes and restore it to roll back.",
            )
    }
}
