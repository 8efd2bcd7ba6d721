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

/// Largest tool input asked about, as JSON: it becomes an event and a
/// record of the run.
const MAX_INPUT: usize = 64 * 1024;

/// Answers one request to the route of a proxy whose credential is
/// `token` (when it has one), for a run that asks `asking` (`None`: it
/// does not ask).
pub(crate) async fn serve<B>(
    request: Request<B>,
    token: Option<&str>,
    asking: Option<crate::Asking>,
) -> Response<Body>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
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
            if arguments["input"].to_string().len() > MAX_INPUT {
                let decision = json!({"behavior": "deny",
                    "message": "moat: the call's input is too large to ask about"});
                return rpc(reply(
                    json!({"content": [{"type": "text", "text": decision.to_string()}]}),
                ));
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use futures::future::BoxFuture;

    use super::*;
    use crate::{Approver, Question, Verdict};

    /// Approves `Bash`, denies the rest; keeps what it was asked.
    struct Answering(Mutex<Vec<Question>>);

    impl Approver for Answering {
        fn ask(&self, question: Question) -> BoxFuture<'static, Verdict> {
            let verdict = match &question {
                Question::Tool { name, .. } if name == "Bash" => Verdict::Approved,
                _ => Verdict::Denied("not that one".into()),
            };
            self.0.lock().unwrap().push(question);
            Box::pin(async move { verdict })
        }
    }

    fn post(path: &str, body: Value) -> Request<Full<Bytes>> {
        Request::post(path)
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap()
    }

    async fn json_of(response: Response<Body>) -> Value {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice(&bytes).unwrap()
    }

    fn call(tool: &str, input: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": TOOL, "arguments": {"tool_name": tool, "input": input, "tool_use_id": "toolu_1"}}})
    }

    #[tokio::test]
    async fn a_cli_asks_through_the_route_and_gets_claude_codes_answer_shape() {
        let approver = Arc::new(Answering(Mutex::default()));
        let asking = || {
            Some(crate::Asking {
                approver: approver.clone(),
                tools: Vec::new(),
            })
        };
        let route = format!("{APPROVAL_ROUTE}secret/mcp");
        let initialized = json_of(
            serve(
                post(
                    &route,
                    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-03-26"}}),
                ),
                Some("secret"),
                asking(),
            )
            .await,
        )
        .await;
        assert_eq!(initialized["result"]["protocolVersion"], "2025-03-26");
        let listed = json_of(
            serve(
                post(
                    &route,
                    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
                ),
                Some("secret"),
                asking(),
            )
            .await,
        )
        .await;
        assert_eq!(listed["result"]["tools"][0]["name"], TOOL);

        let allowed = json_of(
            serve(
                post(&route, call("Bash", json!({"command": "ls"}))),
                Some("secret"),
                asking(),
            )
            .await,
        )
        .await;
        let text: Value =
            serde_json::from_str(allowed["result"]["content"][0]["text"].as_str().unwrap())
                .unwrap();
        assert_eq!(
            text,
            json!({"behavior": "allow", "updatedInput": {"command": "ls"}})
        );
        let denied = json_of(
            serve(
                post(&route, call("Write", json!({}))),
                Some("secret"),
                asking(),
            )
            .await,
        )
        .await;
        let text: Value =
            serde_json::from_str(denied["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, json!({"behavior": "deny", "message": "not that one"}));
        let asked = approver.0.lock().unwrap();
        assert!(matches!(&asked[0], Question::Tool { name, tool_use_id, .. }
            if name == "Bash" && tool_use_id == "toolu_1"));
    }

    #[tokio::test]
    async fn the_route_serves_only_its_run_and_only_what_it_knows() {
        let approver = Arc::new(Answering(Mutex::default()));
        let asking = || {
            Some(crate::Asking {
                approver: approver.clone(),
                tools: Vec::new(),
            })
        };
        let wrong = format!("{APPROVAL_ROUTE}other/mcp");
        let response = serve(
            post(&wrong, call("Bash", json!({}))),
            Some("secret"),
            asking(),
        )
        .await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        let route = format!("{APPROVAL_ROUTE}secret/mcp");
        let not_asking = serve(post(&route, call("Bash", json!({}))), Some("secret"), None).await;
        assert_eq!(not_asking.status(), StatusCode::NOT_FOUND);
        let get = Request::get(&route).body(Full::new(Bytes::new())).unwrap();
        let response = serve(get, Some("secret"), asking()).await;
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
        let garbage = Request::post(&route)
            .body(Full::new(Bytes::from_static(b"{not json")))
            .unwrap();
        let response = json_of(serve(garbage, Some("secret"), asking()).await).await;
        assert_eq!(response["error"]["code"], -32700);
        let unknown = json_of(
            serve(
                post(
                    &route,
                    json!({"jsonrpc": "2.0", "id": 3, "method": "resources/list"}),
                ),
                Some("secret"),
                asking(),
            )
            .await,
        )
        .await;
        assert_eq!(unknown["error"]["code"], -32601);
        let notification = serve(
            post(
                &route,
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            ),
            Some("secret"),
            asking(),
        )
        .await;
        assert_eq!(notification.status(), StatusCode::ACCEPTED);
        let huge = json!({"blob": "x".repeat(MAX_INPUT)});
        let too_big =
            json_of(serve(post(&route, call("Bash", huge)), Some("secret"), asking()).await).await;
        assert!(
            too_big["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("too large")
        );
        assert!(approver.0.lock().unwrap().is_empty(), "nothing was asked");
    }
}
