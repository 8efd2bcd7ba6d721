//! The built-in `anthropic` adapter as a real component through the real
//! host, against a server on 127.0.0.1 that speaks the Messages API's
//! streaming byte for byte (the fixtures in adapters/anthropic/fixtures,
//! named events and pings included, sent in awkward chunks): what the user
//! sees for each answer and each failure, and what the adapter sends.

use moat_engine::{DoneStatus, EventPayload, InputTokens};
use moat_testkit::llm::{LlmAdapter, deltas, error, metadata, tool_uses};
use moat_testkit::llm_server::{LlmServer, Reply};
use moat_testkit::{describe, error_codes, single_done, texts};
use serde_json::{Value, json};

const TEXT_USAGE: &[u8] = include_bytes!("../../adapters/anthropic/fixtures/text_usage.sse");
const THINKING_TEXT: &[u8] = include_bytes!("../../adapters/anthropic/fixtures/thinking_text.sse");
const TOOL_USE: &[u8] = include_bytes!("../../adapters/anthropic/fixtures/tool_use.sse");
const ERROR_MID_STREAM: &[u8] =
    include_bytes!("../../adapters/anthropic/fixtures/error_mid_stream.sse");

/// The adapter under test.
const ANTHROPIC: LlmAdapter = LlmAdapter {
    name: "anthropic",
    model: "claude-sonnet-4-5",
    api_root: "",
    path: "/v1/messages",
    key_var: "ANTHROPIC_API_KEY",
    key_header: "x-api-key",
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_streams_deltas_then_text_then_done_with_usage_inclusive_of_the_cache() {
    let server = LlmServer::start(Reply::sse(TEXT_USAGE));
    let events = ANTHROPIC.run_on(&server, |_| {}).await;
    let text = "Hello! How can I helpé ü you today?";
    assert_eq!(deltas(&events), text);
    assert_eq!(texts(&events), [text]);
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(done.result.as_deref(), Some(text));
    let tokens = done.usage.tokens.expect("usage reported");
    assert_eq!(
        tokens.input,
        InputTokens {
            total: 2125,
            cache_read: Some(2000),
            cache_write: Some(100)
        }
    );
    assert_eq!(tokens.output.total, 15);
    assert_eq!(metadata(&events)["stopReason"], "end_turn");
    assert_eq!(metadata(&events)["turns"], 1, "one model call");
    assert_eq!(
        events.last().unwrap().session_id,
        "msg_01XFDUDYJgAACzvnptvVoYEL"
    );
    assert!(error_codes(&events).is_empty(), "ping is ignored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_has_the_path_version_model_stream_and_system_prompt() {
    let body = ANTHROPIC.check_request(TEXT_USAGE).await;
    assert_eq!(body["system"], "You are terse.");
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "Say hello"}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_then_text_becomes_a_thinking_event_and_max_tokens_is_visible() {
    let server = LlmServer::start(Reply::sse(THINKING_TEXT));
    let events = ANTHROPIC.run_on(&server, |_| {}).await;
    let thinking: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Thinking(t) => Some(t.summary.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thinking, ["Let me workout 27 * 453. That is 12231."]);
    assert_eq!(texts(&events), ["27 * 453 = 12231"]);
    let done = single_done(&events);
    assert_eq!(
        done.status,
        DoneStatus::Success,
        "max_tokens is not an error"
    );
    assert_eq!(metadata(&events)["stopReason"], "max_tokens");
}

fn tool(name: &str) -> Value {
    json!({"name": name, "input_schema": {"type": "object"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_use_inputs_are_accumulated_and_only_allowed_tools_are_sent() {
    let server = LlmServer::start(Reply::sse(TOOL_USE));
    let events = ANTHROPIC
        .run_on(&server, |request| {
            request.options.extra = Some(json!({
                "base_url": server.url(),
                "tools": [tool("read_file"), tool("bash"), tool("grep")],
            }));
            request.options.disallowed_tools = vec!["bash".into()];
        })
        .await;
    let body = server.single_request().json();
    assert_eq!(body["tools"], json!([tool("read_file"), tool("grep")]));
    let calls = tool_uses(&events);
    assert_eq!(calls.len(), 2, "{}", describe(&events));
    assert_eq!(
        (calls[0].tool_name.as_str(), calls[0].tool_use_id.as_str()),
        ("read_file", "toolu_01A")
    );
    assert_eq!(
        Value::Object(calls[0].input.clone()),
        json!({"path": "src/lib.rs"})
    );
    assert_eq!(
        Value::Object(calls[1].input.clone()),
        json!({"pattern": "fn main", "path": "."})
    );
    let done = single_done(&events);
    assert_eq!(done.usage.tool_uses, 2);
    assert_eq!(metadata(&events)["stopReason"], "tool_use");
}

// ---- errors ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_event_mid_stream_is_a_recoverable_error_and_done_error_without_usage() {
    let server = LlmServer::start(Reply::sse(ERROR_MID_STREAM));
    let events = ANTHROPIC.run_on(&server, |_| {}).await;
    assert_eq!(deltas(&events), "Partial");
    let (message, recoverable) = error(&events, "OVERLOADED");
    assert!(message.contains("Overloaded"), "{message}");
    assert!(recoverable);
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Error);
    assert_eq!(done.usage.tokens, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_401_names_the_key_variable() {
    ANTHROPIC
        .check_auth_failure(
            401,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_1"}"#,
            "invalid x-api-key",
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_404_names_the_model() {
    ANTHROPIC
        .check_model_not_found(
            r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}"#,
            "claude-nope",
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overloaded_529_and_429_are_recoverable_with_retry_after() {
    for (status, code) in [(529, "OVERLOADED"), (429, "RATE_LIMITED")] {
        let server = LlmServer::start(
            Reply::error(
                status,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            )
            .with_header("retry-after", "12"),
        );
        let events = ANTHROPIC.run_on(&server, |_| {}).await;
        let (message, recoverable) = error(&events, code);
        assert!(recoverable);
        assert!(message.contains("retry after 12s"), "{message}");
        assert_eq!(metadata(&events)["retryAfter"], "12");
        assert_eq!(metadata(&events)["httpStatus"], status);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refused_dns_failure_and_a_host_not_granted_say_what_to_do() {
    ANTHROPIC.check_connection_refused().await;
    ANTHROPIC.check_unresolvable_host().await;
    ANTHROPIC.check_host_not_granted().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cut_mid_stream_is_an_error_and_done_error_with_usage_absent() {
    ANTHROPIC
        .check_cut_mid_stream(&TEXT_USAGE[..TEXT_USAGE.len() - 80])
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_sse_event_is_reported_and_the_run_goes_on() {
    let end = b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let mut body = TEXT_USAGE[..TEXT_USAGE.len() - end.len()].to_vec();
    body.extend_from_slice(b"event: content_block_delta\ndata: {\"type\": oops}\n\n");
    body.extend_from_slice(end);
    ANTHROPIC.check_malformed_event(&body, "oops").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_mid_stream_ends_with_done_interrupted_at_once_and_drops_the_request() {
    ANTHROPIC.check_abort_mid_stream(TEXT_USAGE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stalls_forever_is_ended_by_the_runs_timeout() {
    ANTHROPIC.check_stall_ends_by_timeout().await;
}
