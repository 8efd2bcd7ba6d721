//! The API adapters' MCP client (moat_llm_support::mcp), run natively (its
//! process capability is then `std::process`) against a real MCP server on
//! stdio, tools/mcp-stub: the handshake as the protocol orders it, the
//! tools listed with their schemas, calls answered, tool errors and
//! protocol errors told apart, a server that cannot start.

use moat_llm_support::mcp::{CallOutcome, MCP_ERROR, McpServer, PROTOCOL_VERSION};
use serde_json::{Value, json};

fn stub_config(log: &std::path::Path) -> Value {
    json!({
        "command": moat_testkit::mcp_stub(),
        "env": {"MOAT_MCP_STUB_LOG": log}
    })
}

#[test]
fn the_client_shakes_hands_lists_the_tools_and_calls_them() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let mut server = McpServer::start("stub", &stub_config(&log)).unwrap();
    let tools = server.tools().unwrap();
    let names: Vec<String> = tools.iter().map(|t| t.qualified_name()).collect();
    assert_eq!(
        names,
        ["mcp__stub__echo", "mcp__stub__sleep", "mcp__stub__fail"]
    );
    assert_eq!(
        tools[0].input_schema["properties"]["text"]["type"],
        "string"
    );
    assert!(!tools[0].description.is_empty());

    assert_eq!(
        server.call("echo", &json!({"text": "hello"})).unwrap(),
        CallOutcome::Answered {
            text: "hello".into(),
            is_error: false
        }
    );
    assert_eq!(
        server
            .call("fail", &json!({"message": "no such file"}))
            .unwrap(),
        CallOutcome::Answered {
            text: "no such file".into(),
            is_error: true
        },
        "a tool's own failure is a result, not a protocol error"
    );
    let unknown = server.call("nope", &json!({})).unwrap_err();
    assert_eq!(unknown.code.as_deref(), Some(MCP_ERROR));
    assert!(
        unknown.message.contains("no tool nope"),
        "{}",
        unknown.message
    );
    drop(server);

    let sent: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let methods: Vec<&str> = sent.iter().map(|m| m["method"].as_str().unwrap()).collect();
    assert_eq!(
        &methods[..3],
        ["initialize", "notifications/initialized", "tools/list"]
    );
    assert_eq!(sent[0]["params"]["protocolVersion"], PROTOCOL_VERSION);
    assert!(sent[1].get("id").is_none(), "a notification has no id");
}

#[test]
fn a_server_that_cannot_start_or_dies_is_an_mcp_error_naming_it() {
    let missing = McpServer::start("gone", &json!({"command": "/no/such/mcp-server"}))
        .err()
        .unwrap();
    assert_eq!(missing.code.as_deref(), Some(MCP_ERROR));
    assert!(
        missing.message.starts_with("MCP server gone:"),
        "{}",
        missing.message
    );

    let quits = McpServer::start("quits", &json!({"command": "true"}))
        .err()
        .unwrap();
    // Whichever it notices first: the pipe closed, or the end of output.
    assert!(
        quits.message.contains("ended before answering initialize")
            || quits.message.contains("is not running"),
        "{}",
        quits.message
    );
    // Natively there is no wasi:http: the HTTP transport is tested through
    // the real component (tests/all/llm_agent.rs).
    let http = McpServer::start("web", &json!({"url": "http://127.0.0.1:1/mcp"}))
        .err()
        .unwrap();
    assert!(
        http.message
            .starts_with("MCP server web: initialize was not sent"),
        "{}",
        http.message
    );
}
