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
