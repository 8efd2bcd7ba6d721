//! `moat-mcp-stub`: an MCP server on stdio for offline tests of MCP
//! clients. It speaks JSON-RPC 2.0, one message per line, as the MCP stdio
//! transport does: `initialize`, `notifications/initialized`, `ping`,
//! `tools/list` and `tools/call`, with three tools:
//!
//! - `echo {text}` → the text back;
//! - `sleep {ms}` → waits that long, then "slept" (a call to abort);
//! - `fail {message}` → a tool error (`isError: true`).
//!
//! Every request it gets is appended to the file named by
//! `MOAT_MCP_STUB_LOG`, when set, so a test can see what the client sent.

use std::io::{BufRead, Write};
use std::time::Duration;

use serde_json::{Value, json};

/// The protocol version it answers with when the client's is not one of
/// these.
const VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];

fn main() {
    let log = std::env::var_os("MOAT_MCP_STUB_LOG");
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        if let Some(log) = &log {
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .and_then(|mut file| writeln!(file, "{line}"));
        }
        let reply = match serde_json::from_str::<Value>(&line) {
            Ok(message) => answer(&message),
            Err(error) => Some(failure(
                Value::Null,
                -32700,
                &format!("parse error: {error}"),
            )),
        };
        if let Some(reply) = reply
            && writeln!(stdout, "{reply}")
                .and_then(|()| stdout.flush())
                .is_err()
        {
            break;
        }
    }
}

/// The reply to one message; none for a notification.
fn answer(message: &Value) -> Option<Value> {
    let id = message.get("id")?.clone();
    let params = &message["params"];
    let result = match message["method"].as_str().unwrap_or_default() {
        "initialize" => {
            let asked = params["protocolVersion"].as_str().unwrap_or_default();
            let version = VERSIONS
                .iter()
                .find(|v| **v == asked)
                .unwrap_or(&VERSIONS[0]);
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "moat-mcp-stub", "version": env!("CARGO_PKG_VERSION")}
            })
        }
        "ping" => json!({}),
        "tools/list" => json!({"tools": [
            tool("echo", "Returns the text it is given", json!({"text": {"type": "string"}}), "text"),
            tool("sleep", "Waits ms milliseconds", json!({"ms": {"type": "integer"}}), "ms"),
            tool("fail", "Fails with the message", json!({"message": {"type": "string"}}), "message"),
        ]}),
        "tools/call" => {
            let args = &params["arguments"];
            match params["name"].as_str().unwrap_or_default() {
                "echo" => content(args["text"].as_str().unwrap_or_default(), false),
                "sleep" => {
                    let ms = args["ms"].as_u64().unwrap_or(0).min(600_000);
                    std::thread::sleep(Duration::from_millis(ms));
                    content("slept", false)
                }
                "fail" => content(args["message"].as_str().unwrap_or("failed"), true),
                other => return Some(failure(id, -32602, &format!("no tool {other}"))),
            }
        }
        other => return Some(failure(id, -32601, &format!("no method {other}"))),
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn tool(name: &str, description: &str, properties: Value, required: &str) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": [required]}
    })
}

fn content(text: &str, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

fn failure(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}
