//! A scripted model on loopback for driving the real agent CLIs: a small HTTP/1.1
//! server that speaks the Anthropic Messages API the way Claude Code calls it
//! (`POST /v1/messages`, streamed as server-sent events: `message_start`,
//! `content_block_*` with `tool_use` and `input_json_delta`, `message_delta`,
//! `message_stop`) and the OpenAI Responses API the way Codex calls it (`POST
//! /v1/responses`: `response.created`, `response.output_item.done` with a
//! `function_call`, `response.completed`), and the OpenAI Chat Completions API the way
//! Qwen Code and OpenCode call it (`POST /v1/chat/completions`: `chat.completion.chunk`s with one
//! `tool_calls` entry, then `[DONE]`), and the Gemini API the way Gemini CLI calls it
//! (`POST /v1beta/models/M:streamGenerateContent?alt=sse` and `:generateContent`: a
//! candidate with one `functionCall` part). It plays a script of tool calls, one per
//! turn of the agent's main loop, then ends the turn; every request is recorded, so a
//! test asserts what the model was shown (the tool results) rather than what the agent
//! printed.
//!
//! Requests that are not the main loop (side calls: titles, summaries, anything without
//! the agent's shell tool, `Bash`, `exec_command`, `run_shell_command` or OpenCode's `bash`) get a short text answer and do not
//! advance the script.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    sync::{Arc, Mutex},
};

use serde_json::{json, Value};

/// One turn of the script: the tool the model calls and its input.
pub struct Step {
    pub tool: &'static str,
    pub input: Value,
}

pub fn tool(tool: &'static str, input: Value) -> Step {
    Step { tool, input }
}

pub fn bash(command: &str) -> Step {
    tool("Bash", json!({ "command": command, "description": "scripted step" }))
}

/// OpenCode's and Copilot CLI's shell tool (`bash`, over the Chat Completions API).
pub fn lowercase_bash(command: &str) -> Step {
    tool("bash", json!({ "command": command, "description": "scripted step" }))
}

#[derive(Default)]
struct State {
    script: Vec<Step>,
    next: usize,
    requests: Vec<Value>,
}

pub struct ScriptedModel {
    pub port: u16,
    state: Arc<Mutex<State>>,
}

impl ScriptedModel {
    /// Starts the server on `127.0.0.1` (a port of its own) with `script`.
    pub fn start(script: Vec<Step>) -> ScriptedModel {
        ScriptedModel::start_on("127.0.0.1", script)
    }

    /// Starts the server on `address` (loopback, or the host's side of a Docker network
    /// the test made), on a port of its own.
    pub fn start_on(address: &str, script: Vec<Step>) -> ScriptedModel {
        let listener = TcpListener::bind((address, 0)).expect("bind the model's address");
        let port = listener.local_addr().expect("address").port();
        let state = Arc::new(Mutex::new(State { script, ..State::default() }));
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, &shared));
            }
        });
        ScriptedModel { port, state }
    }

    /// Every request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.state.lock().expect("lock").requests.clone()
    }

    /// How many steps of the script the agent asked for.
    pub fn steps_played(&self) -> usize {
        self.state.lock().expect("lock").next
    }

    /// The tool results the model was shown (`tool_result`, `function_call_output`), in
    /// order, as text (from the longest conversation it received: the main loop's last
    /// request holds them all).
    pub fn tool_results(&self) -> Vec<String> {
        let requests = self.requests();
        let Some(last) = requests.iter().filter(|request| is_main_loop(request)).max_by_key(|request| {
            let conversation = request["messages"].as_array().or(request["input"].as_array());
            conversation.or(request["contents"].as_array()).map_or(0, Vec::len)
        }) else {
            return Vec::new();
        };
        let mut results = Vec::new();
        for item in last["input"].as_array().into_iter().flatten() {
            if item["type"] == "function_call_output" {
                results.push(text_of(&item["output"]));
            }
        }
        for content in last["contents"].as_array().into_iter().flatten() {
            for part in content["parts"].as_array().into_iter().flatten() {
                let response = &part["functionResponse"]["response"];
                if !response.is_null() {
                    results.push(text_of(if response["output"].is_null() {
                        &response["error"]
                    } else {
                        &response["output"]
                    }));
                }
            }
        }
        for message in last["messages"].as_array().into_iter().flatten() {
            if message["role"] == "tool" {
                results.push(text_of(&message["content"]));
            }
            for block in message["content"].as_array().into_iter().flatten().filter(|_| message["role"] != "tool") {
                if block["type"] == "tool_result" {
                    results.push(text_of(&block["content"]));
                }
            }
        }
        results
    }
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().map(|part| part["text"].as_str().unwrap_or_default()).collect(),
        other => other.to_string(),
    }
}

fn is_main_loop(request: &Value) -> bool {
    request["tools"].as_array().is_some_and(|tools| {
        tools.iter().any(|tool| {
            tool["name"] == "Bash"
                || tool["name"] == "exec_command"
                || tool["function"]["name"] == "run_shell_command"
                // OpenCode's and Copilot CLI's, over the Chat Completions API.
                || tool["function"]["name"] == "bash"
                // Gemini CLI's main loop declares its file tools (its shell tool may be
                // excluded by the rules under test).
                || tool["functionDeclarations"]
                    .as_array()
                    .is_some_and(|declared| declared.iter().any(|function| function["name"] == "read_file"))
        })
    })
}

/// The next scripted step for a main-loop request (its call id, tool and input).
fn next_step(request: &Value, state: &Mutex<State>) -> Option<(String, &'static str, Value)> {
    let mut state = state.lock().expect("lock");
    state.requests.push(request.clone());
    if !is_main_loop(request) || state.next >= state.script.len() {
        return None;
    }
    state.next += 1;
    let step = &state.script[state.next - 1];
    Some((format!("toolu_scripted_{}", state.next), step.tool, step.input.clone()))
}

/// The Responses API's stream for Codex: one `function_call` (its arguments as a JSON
/// string), or a closing message.
fn answer_responses(request: &Value, state: &Mutex<State>) -> (u16, &'static str, Vec<u8>) {
    let item = match next_step(request, state) {
        Some((id, name, input)) => {
            json!({"type": "function_call", "call_id": id, "name": name, "arguments": input.to_string()})
        }
        None => json!({"type": "message", "role": "assistant", "id": "msg_scripted",
                       "content": [{"type": "output_text", "text": "done"}]}),
    };
    let usage = json!({"input_tokens": 0, "input_tokens_details": null, "output_tokens": 0,
                       "output_tokens_details": null, "total_tokens": 0});
    let events = [
        json!({"type": "response.created", "response": {"id": "resp_scripted"}}),
        json!({"type": "response.output_item.done", "item": item}),
        json!({"type": "response.completed", "response": {"id": "resp_scripted", "usage": usage}}),
    ];
    (200, "text/event-stream", sse(&events))
}

/// The Chat Completions API's answer for Qwen Code: one `tool_calls` entry (its
/// arguments as a JSON string), or a closing message; streamed when asked.
fn answer_chat(request: &Value, state: &Mutex<State>) -> (u16, &'static str, Vec<u8>) {
    let (message, finish) = match next_step(request, state) {
        Some((id, name, input)) => (
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": input.to_string()}}
            ]}),
            "tool_calls",
        ),
        None => (json!({"role": "assistant", "content": "done"}), "stop"),
    };
    let usage = json!({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2});
    let model = request["model"].clone();
    if request["stream"] != true {
        let completion = json!({"id": "chat_scripted", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage});
        return (200, "application/json", completion.to_string().into_bytes());
    }
    let chunk = |delta: Value, finish: Value, usage: Value| {
        json!({"id": "chat_scripted", "object": "chat.completion.chunk", "created": 0, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": usage})
    };
    let chunks = [chunk(message, Value::Null, Value::Null), chunk(json!({}), json!(finish), usage)];
    let mut stream: String = chunks.iter().map(|chunk| format!("data: {chunk}\n\n")).collect();
    stream.push_str("data: [DONE]\n\n");
    (200, "text/event-stream", stream.into_bytes())
}

/// The Gemini API's answer for Gemini CLI: a candidate with one `functionCall` part, or
/// a closing text; one server-sent event when streamed (`alt=sse`).
fn answer_gemini(request: &Value, state: &Mutex<State>, streamed: bool) -> (u16, &'static str, Vec<u8>) {
    let part = match next_step(request, state) {
        Some((_, name, input)) => json!({"functionCall": {"name": name, "args": input}}),
        None => json!({"text": "done"}),
    };
    let response = json!({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
    });
    if streamed {
        (200, "text/event-stream", format!("data: {response}\r\n\r\n").into_bytes())
    } else {
        (200, "application/json", response.to_string().into_bytes())
    }
}

fn sse(events: &[Value]) -> Vec<u8> {
    let stream: String = events
        .iter()
        .map(|event| format!("event: {}\ndata: {event}\n\n", event["type"].as_str().unwrap_or("")))
        .collect();
    stream.into_bytes()
}

fn serve(stream: TcpStream, state: &Mutex<State>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let request_line = line.trim_end().to_owned();
        let (mut length, mut chunked) = (0usize, false);
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
                if name == "content-length" {
                    length = value.parse().unwrap_or(0);
                } else if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
                    chunked = true;
                }
            }
        }
        let body = if chunked { read_chunked(&mut reader) } else { read_exact(&mut reader, length) };
        let Some(body) = body else { return };
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let response = if request_line.starts_with("POST ") && request_line.contains("/v1/messages") {
            answer(&request, state)
        } else if request_line.starts_with("POST ") && request_line.contains("/responses") {
            answer_responses(&request, state)
        } else if request_line.starts_with("POST ") && request_line.contains("/chat/completions") {
            answer_chat(&request, state)
        } else if request_line.starts_with("POST ") && request_line.contains(":countTokens") {
            (200, "application/json", br#"{"totalTokens": 1}"#.to_vec())
        } else if request_line.starts_with("POST ") && request_line.contains(":streamGenerateContent") {
            answer_gemini(&request, state, true)
        } else if request_line.starts_with("POST ") && request_line.contains(":generateContent") {
            answer_gemini(&request, state, false)
        } else {
            (404, "text/plain", b"not scripted".to_vec())
        };
        let (status, kind, data) = response;
        let head = format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n",
            if status == 200 { "OK" } else { "Not Found" },
            data.len()
        );
        if writer.write_all(head.as_bytes()).and_then(|()| writer.write_all(&data)).is_err() {
            return;
        }
    }
}

fn read_exact(reader: &mut impl Read, length: usize) -> Option<Vec<u8>> {
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

fn read_chunked(reader: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).ok()?;
        let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
        let mut chunk = read_exact(reader, size + 2)?;
        chunk.truncate(size);
        body.extend(chunk);
        if size == 0 {
            return Some(body);
        }
    }
}

/// The next scripted turn for a main-loop request, else a short text answer.
fn answer(request: &Value, state: &Mutex<State>) -> (u16, &'static str, Vec<u8>) {
    let step = next_step(request, state);
    let model = request["model"].clone();
    let (block, delta, stop) = match &step {
        Some((id, name, input)) => (
            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        ),
        None => (json!({"type": "text", "text": ""}), json!({"type": "text_delta", "text": "done"}), "end_turn"),
    };
    if request["stream"] != true {
        let content = match step {
            Some((id, name, input)) => json!([{"type": "tool_use", "id": id, "name": name, "input": input}]),
            None => json!([{"type": "text", "text": "done"}]),
        };
        let message = json!({
            "id": "msg_scripted", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop, "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1},
        });
        return (200, "application/json", message.to_string().into_bytes());
    }
    let events = [
        json!({"type": "message_start", "message": {
            "id": "msg_scripted", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 1}}),
        json!({"type": "message_stop"}),
    ];
    (200, "text/event-stream", sse(&events))
}
