//! A client of MCP servers, for the API adapters' tool loop, over either
//! transport of the protocol:
//!
//! - stdio: the server is a program started through the process
//!   capability (so only when the run was granted it, and contained like
//!   any other), spoken to in JSON-RPC 2.0, one message per line;
//! - streamable HTTP: each message is POSTed to the server's URL through
//!   `wasi:http` (so only when the run was granted its host), and the
//!   reply comes back as one JSON body or as server-sent events; the
//!   session id the server gives at `initialize` goes with every later
//!   request.
//!
//! Either way the client says `initialize`, `notifications/initialized`,
//! `tools/list` and `tools/call`.
//!
//! Written here rather than taken from the official Rust SDK (rmcp): rmcp
//! runs on tokio and does not build for wasm32-wasip2
//! (modelcontextprotocol/rust-sdk#571); the part a client needs is small.
//!
//! What a server says is untrusted: replies are matched by id, anything
//! else on the line (notifications, requests to the client, garbage) is
//! skipped, and every string kept is bounded.

use std::time::Duration;

use moat_guest::ErrorInfo;
use moat_guest::http::{self, Request, Response};
use moat_guest::json::{Value, json};
use moat_guest::process::{Child, Command, ProcessError, Stdin};
use moat_guest::sse::{ReadError, SseReader};

use crate::failure::cut;

/// The error code of an MCP server that cannot be started or misbehaves.
pub const MCP_ERROR: &str = "MCP_ERROR";

/// The protocol version asked for.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// How long a server may take to answer `initialize` and `tools/list`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Most tools kept from one server.
pub const MAX_TOOLS: usize = 256;

/// The longest tool name, description or result text kept.
const MAX_TEXT: usize = 64 * 1024;

/// Most bytes of one HTTP reply read.
const MAX_HTTP_REPLY: u64 = 16 * 1024 * 1024;

/// The header carrying an HTTP server's session id.
const SESSION_HEADER: &str = "mcp-session-id";

/// The header naming the protocol version after the handshake.
const VERSION_HEADER: &str = "mcp-protocol-version";

/// One tool a server offers.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// The server's name (the key in the run's `mcpServers`).
    pub server: String,
    /// The tool's name on that server.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// Its arguments' JSON Schema.
    pub input_schema: Value,
}

impl McpTool {
    /// The name the model and the run's events know it by:
    /// `mcp__SERVER__TOOL`, as Claude Code names MCP tools.
    pub fn qualified_name(&self) -> String {
        format!("mcp__{}__{}", self.server, self.name)
    }
}

/// What a tool call gave.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    /// The tool answered: its text content, and whether it is an error.
    Answered {
        /// The result's text parts, joined.
        text: String,
        /// The tool said the call failed.
        is_error: bool,
    },
    /// The run was aborted while the tool ran.
    Interrupted,
}

/// A running MCP server.
pub struct McpServer {
    name: String,
    transport: Transport,
    next_id: u64,
}

/// How messages reach a server.
enum Transport {
    /// A child process: a line each way.
    Stdio(Child),
    /// An HTTP endpoint: a POST per message.
    Http(HttpEndpoint),
}

/// A server reached over the streamable HTTP transport.
struct HttpEndpoint {
    url: String,
    headers: Vec<(String, String)>,
    /// The session the server opened at `initialize`, if it keeps one.
    session: Option<String>,
    /// The protocol version the server agreed to.
    version: Option<String>,
}

impl McpServer {
    /// Starts the server `name` as `config` says (`{"command", "args"?,
    /// "env"?}` for a program, `{"url", "headers"?}` for an HTTP server)
    /// and completes the handshake.
    pub fn start(name: &str, config: &Value) -> Result<Self, ErrorInfo> {
        let transport = if let Some(command) = config["command"].as_str() {
            Transport::Stdio(spawn(name, command, config)?)
        } else if let Some(url) = config["url"].as_str() {
            let headers = config["headers"]
                .as_object()
                .map(|headers| {
                    headers
                        .iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default();
            Transport::Http(HttpEndpoint {
                url: url.to_owned(),
                headers,
                session: None,
                version: None,
            })
        } else {
            return Err(error(name, "it has neither a command nor a url"));
        };
        let mut server = Self {
            name: name.to_owned(),
            transport,
            next_id: 1,
        };
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "moat", "version": env!("CARGO_PKG_VERSION")}
        });
        let agreed = server.request("initialize", params, Some(HANDSHAKE_TIMEOUT))?;
        if let Transport::Http(endpoint) = &mut server.transport {
            endpoint.version = agreed["protocolVersion"].as_str().map(|v| cut(v, 100));
        }
        server.notify("notifications/initialized")?;
        Ok(server)
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tools it offers (at most [`MAX_TOOLS`]).
    pub fn tools(&mut self) -> Result<Vec<McpTool>, ErrorInfo> {
        let listed = self.request("tools/list", json!({}), Some(HANDSHAKE_TIMEOUT))?;
        Ok(listed_tools(&self.name, &listed))
    }

    /// Calls `tool` with `arguments`; waits as long as the tool takes (the
    /// run's own timeout bounds it), and gives up at once when the run is
    /// aborted.
    pub fn call(&mut self, tool: &str, arguments: &Value) -> Result<CallOutcome, ErrorInfo> {
        let params = json!({"name": tool, "arguments": arguments});
        let result = match self.request("tools/call", params, None) {
            Ok(result) => result,
            Err(RequestError::Interrupted) => return Ok(CallOutcome::Interrupted),
            Err(RequestError::Failed(info)) => return Err(info),
        };
        Ok(call_outcome(&result))
    }

    fn notify(&mut self, method: &str) -> Result<(), ErrorInfo> {
        let message = json!({"jsonrpc": "2.0", "method": method});
        match &mut self.transport {
            Transport::Stdio(child) => send_line(&self.name, child, &message),
            Transport::Http(endpoint) => match endpoint.post(&message) {
                // A notification is accepted with 202 and no body; the
                // reply is not read.
                Ok(response) if response.status < 300 => Ok(()),
                Ok(response) => Err(error(
                    &self.name,
                    &format!("{method} was refused with HTTP {}", response.status),
                )),
                Err(e) => Err(error(&self.name, &format!("{method} was not sent: {e}"))),
            },
        }
    }

    /// Sends a request and reads until its reply.
    fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, RequestError> {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let reply = match &mut self.transport {
            Transport::Stdio(child) => {
                send_line(&self.name, child, &message).map_err(RequestError::Failed)?;
                read_reply(&self.name, child, method, id, timeout)?
            }
            Transport::Http(endpoint) => endpoint.exchange(&self.name, method, id, &message)?,
        };
        if let Some(failure) = reply.get("error") {
            let said = failure["message"].as_str().unwrap_or("an error");
            return Err(RequestError::Failed(error(
                &self.name,
                &format!("{method} failed: {}", cut(said, 2000)),
            )));
        }
        Ok(reply["result"].clone())
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        match &self.transport {
            // Closing stdin is how an MCP server is told to end; the host
            // kills whatever is left when the run ends.
            Transport::Stdio(child) => child.close_stdin(),
            // A session the server keeps is ended with a DELETE.
            Transport::Http(endpoint) => {
                if endpoint.session.is_some() {
                    let _ = http::send(&endpoint.request("DELETE"));
                }
            }
        }
    }
}

/// Starts a stdio server's program.
fn spawn(name: &str, command: &str, config: &Value) -> Result<Child, ErrorInfo> {
    let mut program = Command::new(command).stdin(Stdin::Piped);
    if let Some(args) = config["args"].as_array() {
        program = program.args(args.iter().filter_map(Value::as_str));
    }
    if let Some(env) = config["env"].as_object() {
        for (var, value) in env {
            if let Some(value) = value.as_str() {
                program = program.env(var, value);
            }
        }
    }
    program
        .spawn()
        .map_err(|e| error(name, &format!("cannot start {command}: {e}")))
}

fn send_line(name: &str, child: &Child, message: &Value) -> Result<(), ErrorInfo> {
    let mut line = message.to_string();
    line.push('\n');
    child.write_stdin(line.as_bytes()).map_err(|e| {
        let said = cut(&child.stderr_tail(), 2000);
        error(name, &format!("it is not running ({e}): {said}"))
    })
}

/// Reads a stdio server's lines until the reply to request `id`.
fn read_reply(
    name: &str,
    child: &Child,
    method: &str,
    id: u64,
    timeout: Option<Duration>,
) -> Result<Value, RequestError> {
    loop {
        let line = match timeout {
            Some(timeout) => child.read_line_timeout(timeout),
            None => child.read_line(),
        };
        let line = match line {
            Ok(Some(line)) => line,
            Ok(None) => {
                let said = cut(&child.stderr_tail(), 2000);
                return Err(RequestError::Failed(error(
                    name,
                    &format!("it ended before answering {method}: {said}"),
                )));
            }
            Err(ProcessError::Interrupted) => return Err(RequestError::Interrupted),
            Err(ProcessError::LineTooLong(_)) => continue,
            Err(other) => {
                return Err(RequestError::Failed(error(
                    name,
                    &format!("no answer to {method}: {other}"),
                )));
            }
        };
        if let Some(reply) = reply_to(&line, id) {
            return Ok(reply);
        }
    }
}

/// The tools of server `server` in its answer to `tools/list` (at most
/// [`MAX_TOOLS`], each cut to size; a tool without a name is left out).
pub fn listed_tools(server: &str, listed: &Value) -> Vec<McpTool> {
    let tools = listed["tools"].as_array().cloned().unwrap_or_default();
    tools
        .iter()
        .filter_map(|tool| {
            let name = tool["name"].as_str().filter(|n| !n.is_empty())?;
            Some(McpTool {
                server: server.to_owned(),
                name: cut(name, MAX_TEXT),
                description: cut(tool["description"].as_str().unwrap_or_default(), MAX_TEXT),
                input_schema: match &tool["inputSchema"] {
                    Value::Object(schema) => Value::Object(schema.clone()),
                    _ => json!({"type": "object"}),
                },
            })
        })
        .take(MAX_TOOLS)
        .collect()
}

/// What a `tools/call` answered: its text parts joined (cut to size), and
/// whether it is an error.
pub fn call_outcome(result: &Value) -> CallOutcome {
    let text = result["content"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|part| part["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    CallOutcome::Answered {
        text: cut(&text, MAX_TEXT),
        is_error: result["isError"] == true,
    }
}

/// The message in `text` when it is the reply to request `id`; anything
/// else (a notification, a request to the client, garbage) is `None`.
pub fn reply_to(text: &str, id: u64) -> Option<Value> {
    let message = moat_guest::serde_json::from_str::<Value>(text).ok()?;
    (message["id"] == id && message.get("method").is_none()).then_some(message)
}

impl HttpEndpoint {
    /// A request to the server's URL with its headers, the session and the
    /// agreed version.
    fn request(&self, method: &str) -> Request {
        let mut request = Request::new(method, &self.url)
            .with_header("accept", "application/json, text/event-stream");
        for (name, value) in &self.headers {
            request = request.with_header(name, value.as_str());
        }
        if let Some(session) = &self.session {
            request = request.with_header(SESSION_HEADER, session.as_str());
        }
        if let Some(version) = &self.version {
            request = request.with_header(VERSION_HEADER, version.as_str());
        }
        request
    }

    fn post(&self, message: &Value) -> Result<Response, http::Error> {
        let request = self
            .request("POST")
            .with_header("content-type", "application/json")
            .with_body(message.to_string());
        http::send(&request)
    }

    /// POSTs request `id` and reads its reply from a JSON body or from the
    /// events of a stream; keeps the session id the server hands out.
    fn exchange(
        &mut self,
        name: &str,
        method: &str,
        id: u64,
        message: &Value,
    ) -> Result<Value, RequestError> {
        let failed = |problem: String| RequestError::Failed(error(name, &problem));
        let response = match self.post(message) {
            Ok(response) => response,
            Err(http::Error::Interrupted) => return Err(RequestError::Interrupted),
            Err(e) => return Err(failed(format!("{method} was not sent: {e}"))),
        };
        if let Some(session) = header(&response, SESSION_HEADER) {
            self.session = Some(cut(&session, 1000));
        }
        let streamed = header(&response, "content-type")
            .is_some_and(|t| t.to_ascii_lowercase().starts_with("text/event-stream"));
        let status = response.status;
        if !(200..300).contains(&status) {
            let body = response.read_to_end(64 * 1024).unwrap_or_default();
            return Err(failed(format!(
                "{method} was answered with HTTP {status}: {}",
                cut(&String::from_utf8_lossy(&body), 500)
            )));
        }
        if streamed {
            for event in SseReader::from_response(response) {
                match event {
                    Ok(event) => {
                        if let Some(reply) = reply_to(&event.data, id) {
                            return Ok(reply);
                        }
                    }
                    Err(ReadError::Http(http::Error::Interrupted)) => {
                        return Err(RequestError::Interrupted);
                    }
                    Err(ReadError::Http(e)) => {
                        return Err(failed(format!("the reply to {method} broke off: {e}")));
                    }
                    Err(ReadError::Sse(_)) => {}
                }
            }
            return Err(failed(format!(
                "its stream ended before answering {method}"
            )));
        }
        let body = match response.read_to_end(MAX_HTTP_REPLY) {
            Ok(body) => body,
            Err(http::Error::Interrupted) => return Err(RequestError::Interrupted),
            Err(e) => return Err(failed(format!("the reply to {method} broke off: {e}"))),
        };
        reply_to(&String::from_utf8_lossy(&body), id)
            .ok_or_else(|| failed(format!("it answered {method} with something else")))
    }
}

/// A response header's value (trimmed; not cut short, as a session id must
/// go back whole), when present and not empty.
fn header(response: &Response, name: &str) -> Option<String> {
    response
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, value)| String::from_utf8_lossy(value).trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// Why a request got no reply.
enum RequestError {
    /// The run was aborted while waiting.
    Interrupted,
    /// The server failed or misbehaved.
    Failed(ErrorInfo),
}

impl From<RequestError> for ErrorInfo {
    fn from(error: RequestError) -> Self {
        match error {
            RequestError::Interrupted => ErrorInfo::new(
                MCP_ERROR,
                "interrupted while an MCP server was answering",
                false,
            ),
            RequestError::Failed(info) => info,
        }
    }
}

fn error(server: &str, problem: &str) -> ErrorInfo {
    ErrorInfo::new(MCP_ERROR, format!("MCP server {server}: {problem}"), false)
}
