//! The built-in `anthropic` adapter as a real component through the real
//! host, against a server on 127.0.0.1 that speaks the Messages API's
//! streaming byte for byte (the fixtures in adapters/anthropic/fixtures,
//! named events and pings included, sent in awkward chunks): what the user
//! sees for each answer and each failure, and what the adapter sends.

use std::time::{Duration, Instant};

use moat::engine::{AgentEvent, DoneStatus, EventPayload, InputTokens};
use moat::grants::{Grants, NetRule};
use moat_e2e::llm_server::{LlmServer, Reply, Step, closed_port, load_builtin, run_builtin};
use moat_e2e::{describe, error_codes, single_done, texts};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const TEXT_USAGE: &[u8] = include_bytes!("../adapters/anthropic/fixtures/text_usage.sse");
const THINKING_TEXT: &[u8] = include_bytes!("../adapters/anthropic/fixtures/thinking_text.sse");
const TOOL_USE: &[u8] = include_bytes!("../adapters/anthropic/fixtures/tool_use.sse");
const ERROR_MID_STREAM: &[u8] =
    include_bytes!("../adapters/anthropic/fixtures/error_mid_stream.sse");

fn grant(rules: &[String]) -> Grants {
    Grants {
        net: rules.iter().map(|r| NetRule::parse(r).unwrap()).collect(),
        ..Grants::none()
    }
}

async fn run_at(
    base_url: &str,
    grants: Grants,
    configure: impl FnOnce(&mut moat::engine::RunRequest),
) -> Vec<AgentEvent> {
    run_builtin("anthropic", "Say hello", |request| {
        request.options.model = Some("claude-sonnet-4-5".into());
        request.options.extra = Some(json!({"base_url": base_url}));
        request.grants = grants;
        configure(request);
    })
    .await
}

async fn run_on(
    server: &LlmServer,
    configure: impl FnOnce(&mut moat::engine::RunRequest),
) -> Vec<AgentEvent> {
    run_at(&server.url(), grant(&[server.grant()]), configure).await
}

fn deltas(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::TextDelta(d) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect()
}

fn error(events: &[AgentEvent], code: &str) -> (String, bool) {
    events
        .iter()
        .filter_map(AgentEvent::as_error)
        .find(|e| e.code.as_deref() == Some(code))
        .map(|e| (e.message.clone(), e.recoverable))
        .unwrap_or_else(|| panic!("no {code} error in {:?}", error_codes(events)))
}

fn metadata(events: &[AgentEvent]) -> Value {
    Value::Object(single_done(events).metadata.clone().unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_streams_deltas_then_text_then_done_with_usage_inclusive_of_the_cache() {
    let server = LlmServer::start(Reply::sse(TEXT_USAGE));
    let events = run_on(&server, |_| {}).await;
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
    assert_eq!(
        events.last().unwrap().session_id,
        "msg_01XFDUDYJgAACzvnptvVoYEL"
    );
    assert!(error_codes(&events).is_empty(), "ping is ignored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_has_the_path_version_model_stream_and_system_prompt() {
    let server = LlmServer::start(Reply::sse(TEXT_USAGE));
    run_on(&server, |request| {
        request.options.system_prompt = Some("You are terse.".into());
    })
    .await;
    let request = server.single_request();
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(
        request.header("x-api-key"),
        None,
        "ANTHROPIC_API_KEY is not granted to this run, so no key is sent"
    );
    let body = request.json();
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["stream"], true);
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
    let events = run_on(&server, |_| {}).await;
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
    let events = run_on(&server, |request| {
        request.options.extra = Some(json!({
            "base_url": server.url(),
            "tools": [tool("read_file"), tool("bash"), tool("grep")],
        }));
        request.options.disallowed_tools = vec!["bash".into()];
    })
    .await;
    let body = server.single_request().json();
    assert_eq!(body["tools"], json!([tool("read_file"), tool("grep")]));
    let calls: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolUse(call) => Some(call),
            _ => None,
        })
        .collect();
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
    let events = run_on(&server, |_| {}).await;
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
    let server = LlmServer::start(Reply::error(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_1"}"#,
    ));
    let events = run_on(&server, |_| {}).await;
    let (message, recoverable) = error(&events, "AUTH_FAILED");
    assert!(message.contains("ANTHROPIC_API_KEY"), "{message}");
    assert!(message.contains("invalid x-api-key"), "{message}");
    assert!(!recoverable);
    assert_eq!(single_done(&events).status, DoneStatus::Error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_404_names_the_model() {
    let server = LlmServer::start(Reply::error(
        404,
        r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}"#,
    ));
    let events = run_on(&server, |_| {}).await;
    let (message, _) = error(&events, "MODEL_NOT_FOUND");
    assert!(
        message.contains("claude-sonnet-4-5") && message.contains("claude-nope"),
        "{message}"
    );
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
        let events = run_on(&server, |_| {}).await;
        let (message, recoverable) = error(&events, code);
        assert!(recoverable);
        assert!(message.contains("retry after 12s"), "{message}");
        assert_eq!(metadata(&events)["retryAfter"], "12");
        assert_eq!(metadata(&events)["httpStatus"], status);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refused_dns_failure_and_a_host_not_granted_say_what_to_do() {
    let port = closed_port();
    let events = run_at(
        &format!("http://127.0.0.1:{port}"),
        grant(&[format!("127.0.0.1:{port}")]),
        |_| {},
    )
    .await;
    let (message, _) = error(&events, "CONNECTION_FAILED");
    assert!(message.contains("refused"), "{message}");

    let events = run_at(
        "http://llm.moat-test.invalid",
        grant(&["llm.moat-test.invalid:80".into()]),
        |_| {},
    )
    .await;
    let (message, recoverable) = error(&events, "CONNECTION_FAILED");
    assert!(message.contains("resolve"), "{message}");
    assert!(
        !recoverable,
        "a name that does not resolve will not on a retry"
    );

    let server = LlmServer::start(Reply::sse(TEXT_USAGE));
    let events = run_at(&server.url(), Grants::none(), |_| {}).await;
    let (message, _) = error(&events, "HOST_NOT_GRANTED");
    assert!(
        message.contains(&format!("--allow-net={}", server.grant())),
        "{message}"
    );
    assert!(server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cut_mid_stream_is_an_error_and_done_error_with_usage_absent() {
    let server = LlmServer::start(Reply::sse(&TEXT_USAGE[..TEXT_USAGE.len() - 80]).then_cut());
    let events = run_on(&server, |_| {}).await;
    assert!(
        error_codes(&events).contains(&"STREAM_CUT".to_string()),
        "{:?}",
        error_codes(&events)
    );
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Error);
    assert_eq!(done.usage.tokens, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_sse_event_is_reported_and_the_run_goes_on() {
    let end = b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let mut body = TEXT_USAGE[..TEXT_USAGE.len() - end.len()].to_vec();
    body.extend_from_slice(b"event: content_block_delta\ndata: {\"type\": oops}\n\n");
    body.extend_from_slice(end);
    let server = LlmServer::start(Reply::sse(&body));
    let events = run_on(&server, |_| {}).await;
    let (message, recoverable) = error(&events, "MALFORMED_EVENT");
    assert!(message.contains("oops"), "{message}");
    assert!(recoverable);
    assert_eq!(single_done(&events).status, DoneStatus::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_mid_stream_ends_with_done_interrupted_at_once_and_drops_the_request() {
    let server = LlmServer::start(Reply::sse(&TEXT_USAGE[..TEXT_USAGE.len() / 2]).then_stall());
    let registry = moat_e2e::registry_of([load_builtin("anthropic").await]);
    let abort = CancellationToken::new();
    let mut request = moat::engine::RunRequest::new("anthropic", "Say hello");
    request.options.model = Some("m".into());
    request.options.extra = Some(json!({"base_url": server.url()}));
    request.grants = grant(&[server.grant()]);
    request.abort = Some(abort.clone());
    // A drain far longer than the test allows: the adapter itself must
    // notice the abort while it waits on the stalled body, not the engine
    // cut it off at the end of the drain.
    request.drain = Duration::from_secs(20);
    let mut run = moat::engine::run_agent(&registry, request).unwrap();
    let mut events = Vec::new();
    let mut aborted_at = None;
    let all = async {
        while let Some(event) = run.next().await {
            if aborted_at.is_none() && matches!(event.payload, EventPayload::TextDelta(_)) {
                abort.cancel();
                aborted_at = Some(Instant::now());
            }
            events.push(event);
        }
    };
    tokio::time::timeout(Duration::from_secs(30), all)
        .await
        .expect("the run ends");
    let took = aborted_at.expect("a delta arrived").elapsed();
    assert_eq!(single_done(&events).status, DoneStatus::Interrupted);
    assert!(
        error_codes(&events).is_empty(),
        "{:?}",
        error_codes(&events)
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(server.wait_client_gone(Duration::from_secs(10)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stalls_forever_is_ended_by_the_runs_timeout() {
    let server = LlmServer::start(Reply::stream(vec![Step::Stall]));
    let started = Instant::now();
    let events = run_on(&server, |request| {
        request.limits.timeout = Some(Duration::from_millis(800));
    })
    .await;
    assert!(
        error_codes(&events).contains(&"TIMEOUT".to_string()),
        "{:?}",
        error_codes(&events)
    );
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(server.wait_client_gone(Duration::from_secs(10)));
}
