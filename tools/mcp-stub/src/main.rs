//! `moat-mcp-stub`: an MCP server for offline tests of MCP clients, on
//! either transport of the protocol:
//!
//! - stdio (the default): JSON-RPC 2.0, one message per line;
//! - `--http`: the streamable HTTP transport on 127.0.0.1 (its URL,
//!   `http://127.0.0.1:PORT/mcp`, is printed on the first line of stdout):
//!   a POST per message; a session id (`Mcp-Session-Id`) handed out at
//!   `initialize` and required on every later request; `tools/call`
//!   answered as server-sent events, everything else as one JSON body;
//!   notifications accepted with 202; DELETE ends the session.
//!
//! It answers `initialize`, `notifications/initialized`, `ping`,
//! `tools/list` and `tools/call`, with three tools:
//!
//! - `echo {text}` → the text back;
//! - `sleep {ms}` → waits that long, then "slept" (a call to abort);
//! - `fail {message}` → a tool error (`isError: true`).
//!
//! Every request it gets is appended to the file named by
//! `MOAT_MCP_STUB_LOG`, when set, so a test can see what the client sent.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use serde_json::{Value, json};

/// The protocol version it answers with when the client's is not one of
/// these.
const VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];

/// The session id the HTTP transport hands out.
const SESSION: &str = "stub-session-1";

fn main() {
    if std::env::args().any(|arg| arg == "--http") {
        serve_http();
        return;
    }
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        if let Some(reply) = reply_to_text(&line)
            && writeln!(stdout, "{reply}")
                .and_then(|()| stdout.flush())
                .is_err()
        {
            break;
        }
    }
}

/// Appends a message received to the log file named by
/// `MOAT_MCP_STUB_LOG`, when set.
fn log(line: &str) {
    if let Some(log) = std::env::var_os("MOAT_MCP_STUB_LOG") {
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .and_then(|mut file| writeln!(file, "{line}"));
    }
}

/// The reply to one message as text, logged; none for a notification.
fn reply_to_text(text: &str) -> Option<Value> {
    log(text);
    match serde_json::from_str::<Value>(text) {
        Ok(message) => answer(&message),
        Err(error) => Some(failure(
            Value::Null,
            -32700,
            &format!("parse error: {error}"),
        )),
    }
}

/// Serves the streamable HTTP transport until killed.
fn serve_http() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("a local address").port();
    println!("http://127.0.0.1:{port}/mcp");
    let _ = std::io::stdout().flush();
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        std::thread::spawn(move || {
            let _ = serve_connection(stream);
        });
    }
}

/// Answers one request on `stream` (the client opens a connection per
/// request here: every answer closes it).
fn serve_connection(mut stream: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let method = request_line
        .split(' ')
        .next()
        .unwrap_or_default()
        .to_owned();
    let mut length = 0usize;
    let mut session = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "mcp-session-id" => session = Some(value.trim().to_owned()),
                _ => {}
            }
        }
    }
    let mut body = vec![0u8; length.min(4 * 1024 * 1024)];
    reader.read_exact(&mut body)?;
    let respond = |stream: &mut TcpStream, status: &str, headers: &str, body: &str| {
        write!(
            stream,
            "HTTP/1.1 {status}\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    if method == "DELETE" {
        log(r#"{"method":"DELETE"}"#);
        return respond(&mut stream, "200 OK", "", "");
    }
    if method != "POST" {
        return respond(&mut stream, "405 Method Not Allowed", "", "");
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    let message: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let initializing = message["method"] == "initialize";
    if !initializing && session.as_deref() != Some(SESSION) {
        log(&text);
        return respond(
            &mut stream,
            "400 Bad Request",
            "content-type: text/plain\r\n",
            "missing or unknown Mcp-Session-Id",
        );
    }
    let Some(reply) = reply_to_text(&text) else {
        return respond(&mut stream, "202 Accepted", "", "");
    };
    if initializing {
        let headers = format!("content-type: application/json\r\nmcp-session-id: {SESSION}\r\n");
        return respond(&mut stream, "200 OK", &headers, &reply.to_string());
    }
    if message["method"] == "tools/call" {
        // As a stream: a notification first, which the client must skip,
        // then the reply.
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "working"}});
        let events =
            format!("event: message\ndata: {progress}\n\nevent: message\ndata: {reply}\n\n");
        return respond(
            &mut stream,
            "200 OK",
            "content-type: text/event-stream\r\n",
            &events,
        );
    }
    respond(
        &mut stream,
        "200 OK",
        "content-type: application/json\r\n",
        &reply.to_string(),
    )
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
