//! A client of MCP servers on stdio, for the API adapters' tool loop: the
//! server is a program started through the process capability (so only
//! when the run was granted it, and contained like any other), spoken to in
//! JSON-RPC 2.0, one message per line (the MCP stdio transport):
//! `initialize`, `notifications/initialized`, `tools/list`, `tools/call`.
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
use moat_guest::json::{Value, json};
use moat_guest::process::{Child, Command, ProcessError, Stdin};

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
    child: Child,
    next_id: u64,
}

impl McpServer {
    /// Starts the server `name` as `config` says (`{"command", "args"?,
    /// "env"?}`) and completes the handshake.
    pub fn start(name: &str, config: &Value) -> Result<Self, ErrorInfo> {
        let Some(command) = config["command"].as_str() else {
            return Err(error(
                name,
                "only stdio servers (a command) are run by this adapter",
            ));
        };
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
        let child = program
            .spawn()
            .map_err(|e| error(name, &format!("cannot start {command}: {e}")))?;
        let mut server = Self {
            name: name.to_owned(),
            child,
            next_id: 1,
        };
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "moat", "version": env!("CARGO_PKG_VERSION")}
        });
        server.request("initialize", params, Some(HANDSHAKE_TIMEOUT))?;
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
        let tools = listed["tools"].as_array().cloned().unwrap_or_default();
        Ok(tools
            .iter()
            .filter_map(|tool| {
                let name = tool["name"].as_str().filter(|n| !n.is_empty())?;
                Some(McpTool {
                    server: self.name.clone(),
                    name: cut(name, MAX_TEXT),
                    description: cut(tool["description"].as_str().unwrap_or_default(), MAX_TEXT),
                    input_schema: match &tool["inputSchema"] {
                        Value::Object(schema) => Value::Object(schema.clone()),
                        _ => json!({"type": "object"}),
                    },
                })
            })
            .take(MAX_TOOLS)
            .collect())
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
        Ok(CallOutcome::Answered {
            text: cut(&text, MAX_TEXT),
            is_error: result["isError"] == true,
        })
    }

    fn notify(&mut self, method: &str) -> Result<(), ErrorInfo> {
        self.send(&json!({"jsonrpc": "2.0", "method": method}))
    }

    fn send(&mut self, message: &Value) -> Result<(), ErrorInfo> {
        let mut line = message.to_string();
        line.push('\n');
        self.child.write_stdin(line.as_bytes()).map_err(|e| {
            let said = cut(&self.child.stderr_tail(), 2000);
            error(&self.name, &format!("it is not running ({e}): {said}"))
        })
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
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .map_err(RequestError::Failed)?;
        loop {
            let line = match timeout {
                Some(timeout) => self.child.read_line_timeout(timeout),
                None => self.child.read_line(),
            };
            let line = match line {
                Ok(Some(line)) => line,
                Ok(None) => {
                    let said = cut(&self.child.stderr_tail(), 2000);
                    return Err(RequestError::Failed(error(
                        &self.name,
                        &format!("it ended before answering {method}: {said}"),
                    )));
                }
                Err(ProcessError::Interrupted) => return Err(RequestError::Interrupted),
                Err(ProcessError::LineTooLong(_)) => continue,
                Err(other) => {
                    return Err(RequestError::Failed(error(
                        &self.name,
                        &format!("no answer to {method}: {other}"),
                    )));
                }
            };
            let Ok(message) = moat_guest::serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["id"] != id || message.get("method").is_some() {
                continue;
            }
            if let Some(failure) = message.get("error") {
                let said = failure["message"].as_str().unwrap_or("an error");
                return Err(RequestError::Failed(error(
                    &self.name,
                    &format!("{method} failed: {}", cut(said, 2000)),
                )));
            }
            return Ok(message["result"].clone());
        }
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        // Closing stdin is how an MCP server is told to end; the host
        // kills whatever is left when the run ends.
        self.child.close_stdin();
    }
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
