//! The run's approvals as an MCP server on its proxy: one tool, `approve`,
//! in the shape Claude Code's `--permission-prompt-tool` calls (`tool_name`,
//! `input`, `tool_use_id`) and answers with (`{"behavior": "allow",
//! "updatedInput": …}` or `{"behavior": "deny", "message": …}`). An agent
//! CLI the run starts asks moat this way before a tool its run puts under
//! `ask`; the question goes to the run's [`crate::Asking`] and the call
//! waits for the answer.
//!
//! MCP over streamable HTTP, as little of it as a client needs: JSON-RPC
//! requests by `POST`, each answered with one JSON response; no server
//! stream (`GET` is refused with 405, as the transport allows).

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

/// A response's body, as the proxy sends one.
type Body = BoxBody<Bytes, hyper::Error>;

/// Where the route starts; the run's token (when its proxy has one) and
/// `/mcp` follow.
pub(crate) const APPROVAL_ROUTE: &str = "/moat-approvals/";

/// The tool's name: a CLI names it `mcp__moat__approve`.
pub const TOOL: &str = "approve";

/// Largest request body read.
const MAX_BODY: usize = 1024 * 1024;

/// Answers one request to the route of a proxy whose credential is
/// `token` (when it has one), for a run that asks `asking` (`None`: it
/// does not ask).
pub(crate) async fn serve(
    request: Request<Incoming>,
    token: Option<&str>,
    asking: Option<crate::Asking>,
) -> Response<Body> {
    let path = request.uri().path().to_owned();
    let rest = &path[APPROVAL_ROUTE.len()..];
    let rest = match token {
        None => Some(rest),
        Some(token) => rest
            .strip_prefix(token)
            .and_then(|rest| rest.strip_prefix('/')),
    };
    if rest != Some("mcp") {
        return text(
            StatusCode::FORBIDDEN,
            "moat's proxy serves only the run it belongs to",
        );
    }
    let Some(asking) = asking else {
        return text(StatusCode::NOT_FOUND, "this run does not ask for approval");
    };
    if request.method() != Method::POST {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "moat's approvals take JSON-RPC by POST only",
        );
    }
    let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "request too large"),
    };
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return rpc(json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32700, "message": "not JSON"}}));
    };
    // A notification (no id) gets no answer.
    let Some(id) = message.get("id").cloned() else {
        return empty(StatusCode::ACCEPTED);
    };
    let reply = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
    let method = message["method"].as_str().unwrap_or_default();
    match method {
        "initialize" => rpc(reply(json!({
            "protocolVersion": message["params"]["protocolVersion"]
                .as_str()
                .unwrap_or("2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "moat", "version": env!("CARGO_PKG_VERSION")},
        }))),
        "ping" => rpc(reply(json!({}))),
        "tools/list" => rpc(reply(json!({"tools": [{
            "name": TOOL,
            "description": "Asks the user, through moat, whether a tool call may be made",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "tool_name": {"type": "string"},
                    "input": {"type": "object"},
                    "tool_use_id": {"type": "string"},
                },
                "required": ["tool_name", "input"],
            },
        }]}))),
        "tools/call" if message["params"]["name"] == TOOL => {
            let arguments = &message["params"]["arguments"];
            let name = arguments["tool_name"].as_str().unwrap_or_default();
            let input = arguments["input"].as_object().cloned().unwrap_or_default();
            if name.is_empty() || name.len() > 256 {
                return rpc(json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32602, "message": "tool_name: a tool's name"}}));
            }
            let tool_use_id = arguments["tool_use_id"]
                .as_str()
                .filter(|id| !id.is_empty() && id.len() <= 256)
                .map_or_else(|| format!("moat-{}", uuid::Uuid::new_v4()), str::to_owned);
            let decision = match asking
                .ask_tool(name.to_owned(), tool_use_id, input.clone(), None)
                .await
            {
                Ok(()) => json!({"behavior": "allow", "updatedInput": input}),
                Err(reason) => json!({"behavior": "deny", "message": reason}),
            };
            rpc(reply(
                json!({"content": [{"type": "text", "text": decision.to_string()}]}),
            ))
        }
        _ => rpc(json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": format!("moat's approvals do not serve {}", cut(method))}})),
    }
}

fn cut(text: &str) -> &str {
    &text[..text.floor_char_boundary(64)]
}

fn rpc(message: Value) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(message.to_string()))
            .map_err(|never| match never {})
            .boxed(),
    );
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn text(status: StatusCode, message: &str) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(format!("{message}\n")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::new())
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response
}
