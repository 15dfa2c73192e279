//! `agent-sandbox mcp` end to end with a real MCP client: rmcp's client spawns the real
//! binary and speaks the protocol over its stdio, calling every tool.

use rmcp::{
    model::{CallToolRequestParams, CallToolResult},
    service::RunningService,
    transport::{ConfigureCommandExt, TokioChildProcess},
    RoleClient, ServiceExt,
};
use serde_json::{json, Value};

use crate::support::BIN;

async fn call(client: &RunningService<RoleClient, ()>, tool: &'static str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else { panic!("arguments are an object") };
    client.call_tool(CallToolRequestParams::new(tool).with_arguments(arguments)).await.expect("the tool call completes")
}

fn text_of(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|block| block.as_text()).map(|text| text.text.clone()).collect()
}

fn json_of(result: &CallToolResult) -> Value {
    serde_json::from_str(&text_of(result)).expect("the tool answers JSON")
}

#[test]
fn mcp_serves_the_sandbox_tools_to_a_real_client() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot_file = dir.path().join("mcp-state.json");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let transport = TokioChildProcess::new(tokio::process::Command::new(&*BIN).configure(|cmd| {
            cmd.arg("mcp").arg("--snapshot").arg(&snapshot_file).current_dir(dir.path());
        }))
        .expect("spawn agent-sandbox mcp");
        let client = ().serve(transport).await.expect("the MCP handshake succeeds");
        let server = client.peer_info().expect("server info");
        assert_eq!(server.server_info.as_ref().map(|info| info.name.as_str()), Some("agent-sandbox"));
        let mut tools: Vec<String> =
            client.list_all_tools().await.expect("tools/list").into_iter().map(|tool| tool.name.into_owned()).collect();
        tools.sort();
        assert_eq!(tools, ["execute", "history", "read_file", "restore", "snapshot", "stats", "write_file"]);

        let result = json_of(
            &call(&client, "execute", json!({"command": "mkdir /w && cd /w && echo hello > f && cat f"})).await,
        );
        assert_eq!(
            (result["stdout"].clone(), result["exit_code"].clone(), result["success"].clone()),
            (json!("hello\n"), json!(0), json!(true))
        );
        let result = json_of(&call(&client, "execute", json!({"command": "nope"})).await);
        assert_eq!(result["exit_code"], json!(127));

        let written = call(&client, "write_file", json!({"path": "notes/todo.md", "content": "- ship it\n"})).await;
        assert_eq!(
            (text_of(&written), written.is_error),
            (String::from("wrote 10 bytes to notes/todo.md"), Some(false))
        );
        let read = call(&client, "read_file", json!({"path": "/w/notes/todo.md"})).await;
        assert_eq!(text_of(&read), "- ship it\n");
        let missing = call(&client, "read_file", json!({"path": "/nope"})).await;
        assert_eq!(
            (text_of(&missing), missing.is_error),
            (String::from("/nope: No such file or directory"), Some(true))
        );

        let snapshot = json_of(&call(&client, "snapshot", json!({})).await);
        assert_eq!(
            (snapshot["id"].clone(), snapshot["nodes"].clone(), snapshot["cwd"].clone()),
            (json!(1), json!(4), json!("/w"))
        );
        call(&client, "execute", json!({"command": "cd / && rm -r /w && touch /other"})).await;
        let restored = call(&client, "restore", json!({"id": 1})).await;
        assert!(text_of(&restored).starts_with("restored snapshot 1 taken "), "{}", text_of(&restored));
        let result = json_of(&call(&client, "execute", json!({"command": "pwd; ls /; cat f"})).await);
        assert_eq!(result["stdout"], json!("/w\nw\nhello\n"));
        let unknown = call(&client, "restore", json!({"id": 7})).await;
        assert_eq!(
            (text_of(&unknown), unknown.is_error),
            (String::from("no snapshot 7 (ids so far: 1 to 1)"), Some(true))
        );

        let stats = json_of(&call(&client, "stats", json!({})).await);
        assert_eq!(
            (stats["files"].clone(), stats["directories"].clone(), stats["max_node_count"].clone()),
            (json!(2), json!(2), json!(10_000))
        );
        let history = json_of(&call(&client, "history", json!({"limit": 2})).await);
        let commands: Vec<&str> =
            history.as_array().expect("a list").iter().map(|r| r["command"].as_str().expect("command")).collect();
        assert_eq!(commands, ["cd / && rm -r /w && touch /other", "pwd; ls /; cat f"]);

        client.cancel().await.expect("the session ends");
    });
    // Closing the session ends the server, which saves the sandbox where it was asked to.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !snapshot_file.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let saved = std::fs::read_to_string(&snapshot_file).expect("the snapshot was saved at the end");
    let saved: Value = serde_json::from_str(&saved).expect("json");
    assert_eq!((saved["version"].clone(), saved["cwd"].clone()), (json!(1), json!("/w")));
}

/// Connects a client to a new `agent-sandbox mcp ARGS`, retrying while the server
/// refuses to start (the last one may still be letting go of its store).
async fn connect(dir: &std::path::Path, args: &[&std::ffi::OsStr]) -> RunningService<RoleClient, ()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let transport = TokioChildProcess::new(tokio::process::Command::new(&*BIN).configure(|cmd| {
            cmd.arg("mcp").args(args).current_dir(dir).stderr(std::process::Stdio::null());
        }))
        .expect("spawn agent-sandbox mcp");
        match ().serve(transport).await {
            Ok(client) => return client,
            Err(err) if std::time::Instant::now() < deadline => {
                let _ = err;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(err) => panic!("the MCP handshake failed: {err}"),
        }
    }
}

#[test]
fn with_a_store_the_sandbox_survives_the_client_reconnecting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("sandbox.redb");
    let args = [std::ffi::OsStr::new("--store"), store.as_os_str()];
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let client = connect(dir.path(), &args).await;
        let result = json_of(
            &call(&client, "execute", json!({"command": "mkdir -p /w/src && cd /w && echo hello > f && export X=1"}))
                .await,
        );
        assert_eq!(result["exit_code"], json!(0), "{result}");
        call(&client, "write_file", json!({"path": "src/a.rs", "content": "fn main() {}\n"})).await;

        // A second server on the same store while the first lives: refused, loudly,
        // and the first one's state is untouched.
        let second = std::process::Command::new(&*BIN)
            .arg("mcp")
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run a second agent-sandbox mcp");
        let stderr = String::from_utf8_lossy(&second.stderr);
        assert_eq!(second.status.code(), Some(125), "{stderr}");
        assert!(stderr.contains("the store is open in another process"), "{stderr}");
        let result = json_of(&call(&client, "execute", json!({"command": "cat f"})).await);
        assert_eq!(result["stdout"], json!("hello\n"));
        client.cancel().await.expect("the session ends");

        // A new server on the store: the files, the working directory and the
        // environment are as the first left them.
        let client = connect(dir.path(), &args).await;
        let result = json_of(&call(&client, "execute", json!({"command": "pwd; cat f src/a.rs; echo $X"})).await);
        assert_eq!(result["stdout"], json!("/w\nhello\nfn main() {}\n1\n"), "{result}");
        // snapshot and restore work on the store as in memory.
        let snapshot = json_of(&call(&client, "snapshot", json!({})).await);
        assert_eq!((snapshot["id"].clone(), snapshot["nodes"].clone()), (json!(1), json!(4)));
        call(&client, "execute", json!({"command": "cd / && rm -r /w && export X=2"})).await;
        let restored = call(&client, "restore", json!({"id": 1})).await;
        assert!(text_of(&restored).starts_with("restored snapshot 1 taken "), "{}", text_of(&restored));
        client.cancel().await.expect("the session ends");

        // The restore was committed to the store too.
        let client = connect(dir.path(), &args).await;
        let result = json_of(&call(&client, "execute", json!({"command": "pwd; ls; echo $X"})).await);
        assert_eq!(result["stdout"], json!("/w\nf\nsrc\n1\n"), "{result}");
        let stats = json_of(&call(&client, "stats", json!({})).await);
        assert_eq!((stats["files"].clone(), stats["directories"].clone()), (json!(2), json!(2)));
        client.cancel().await.expect("the session ends");
    });
}

#[test]
fn store_and_snapshot_cannot_be_combined() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(&*BIN)
        .args(["mcp", "--store", "s.redb", "--snapshot", "s.json"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run agent-sandbox mcp");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("'--store <FILE>' cannot be used with '--snapshot <FILE>'"), "{stderr}");
    assert!(!dir.path().join("s.redb").exists(), "nothing was created");
}
