//! The built-in `openai` adapter as a real component through the real host,
//! against a server on 127.0.0.1 that speaks Chat Completions streaming
//! byte for byte (the fixtures in adapters/openai/fixtures, sent in
//! awkward chunks): what the user sees for each answer and each failure,
//! and what the adapter sends.

use std::time::{Duration, Instant};

use moat_engine::{CostSource, DoneStatus, EventPayload, InputTokens, OutputTokens, PriceTable};
use moat_testkit::llm::{LlmAdapter, deltas, error, grant, metadata, tool_uses};
use moat_testkit::llm_server::{LlmServer, Reply};
use moat_testkit::{describe, error_codes, single_done, texts};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const TEXT_USAGE: &[u8] = include_bytes!("../../adapters/openai/fixtures/text_usage.sse");
const TEXT_PLAIN: &[u8] = include_bytes!("../../adapters/openai/fixtures/text_plain.sse");
const TOOL_CALLS: &[u8] = include_bytes!("../../adapters/openai/fixtures/tool_calls.sse");
const LENGTH: &[u8] = include_bytes!("../../adapters/openai/fixtures/length.sse");

/// The adapter under test.
const OPENAI: LlmAdapter = LlmAdapter {
    name: "openai",
    model: "gpt-4o-mini",
    api_root: "/v1",
    path: "/v1/chat/completions",
    key_var: "OPENAI_API_KEY",
    key_header: "authorization",
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_text_streams_deltas_then_the_text_then_done_without_usage() {
    let server = LlmServer::start(Reply::sse(TEXT_PLAIN));
    let events = OPENAI.run_on(&server, |_| {}).await;
    assert!(
        matches!(events[0].payload, EventPayload::Init(_)),
        "{}",
        describe(&events)
    );
    assert_eq!(deltas(&events), "Plain text.");
    assert_eq!(texts(&events), ["Plain text."]);
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(done.result.as_deref(), Some("Plain text."));
    assert_eq!(done.usage.tokens, None, "not reported: absent, not zero");
    assert!(
        error_codes(&events).is_empty(),
        "{:?}",
        error_codes(&events)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_price_table_gives_a_run_with_tokens_a_cost_marked_as_its_own() {
    let table = |models: Value| {
        std::sync::Arc::new(
            PriceTable::from_json(&json!({"source": "test", "models": models}).to_string())
                .unwrap(),
        )
    };
    let server = LlmServer::start(Reply::sse(TEXT_USAGE));
    let priced = table(json!({"gpt-4o-mini*": {"inputPerMTok": 0.15, "outputPerMTok": 0.6}}));
    let events = OPENAI
        .run_on(&server, |request| request.price_table = Some(priced))
        .await;
    let cost = single_done(&events)
        .usage
        .cost
        .expect("a cost from the table");
    assert_eq!(cost.source, CostSource::AccountEstimate);
    // 19 input tokens at $0.15 and 10 output at $0.60 per million.
    assert!(
        (cost.usd - (19.0 * 0.15 + 10.0 * 0.6) / 1e6).abs() < 1e-15,
        "{cost:?}"
    );

    let server = LlmServer::start(Reply::sse(TEXT_USAGE));
    let other = table(json!({"llama3": {"inputPerMTok": 1, "outputPerMTok": 1}}));
    let events = OPENAI
        .run_on(&server, |request| request.price_table = Some(other))
        .await;
    assert_eq!(single_done(&events).usage.cost, None, "no price: absent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_usage_reach_the_done_exactly_with_the_session_id() {
    let server = LlmServer::start(Reply::sse(TEXT_USAGE));
    let events = OPENAI.run_on(&server, |_| {}).await;
    assert_eq!(deltas(&events), "Hello! How can I helpé ü today?");
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    let tokens = done.usage.tokens.expect("usage reported");
    assert_eq!(
        tokens.input,
        InputTokens {
            total: 19,
            cache_read: Some(0),
            cache_write: None
        }
    );
    assert_eq!(
        tokens.output,
        OutputTokens {
            total: 10,
            reasoning: Some(0)
        }
    );
    assert_eq!(metadata(&events)["finishReason"], "stop");
    assert_eq!(metadata(&events)["turns"], 1, "one model call");
    let last = events.last().unwrap();
    assert_eq!(last.session_id, "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_has_the_path_model_stream_flags_system_prompt_and_no_key_unless_granted() {
    let body = OPENAI.check_request(TEXT_PLAIN).await;
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say hello"}
        ])
    );
}

fn tool(name: &str) -> Value {
    json!({"type": "function", "function": {"name": name, "parameters": {"type": "object"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tool_calls_interleaved_by_index_become_tool_use_events_and_only_allowed_tools_are_sent()
 {
    let server = LlmServer::start(Reply::sse(TOOL_CALLS));
    let events = OPENAI
        .run_on(&server, |request| {
            request.options.extra = Some(json!({
                "base_url": OPENAI.base_url(&server.url()),
                "tools": [tool("read_file"), tool("shell"), tool("grep")],
                "tool_choice": "auto",
            }));
            request.options.allowed_tools = Some(vec!["read_file".into(), "grep".into()]);
        })
        .await;
    let body = server.single_request().json();
    assert_eq!(body["tools"], json!([tool("read_file"), tool("grep")]));
    let EventPayload::Init(init) = &events[0].payload else {
        panic!("init first: {}", describe(&events));
    };
    assert_eq!(init.tools, ["read_file", "grep"]);

    let calls = tool_uses(&events);
    assert_eq!(calls.len(), 2, "{}", describe(&events));
    assert_eq!(calls[0].tool_name, "read_file");
    assert_eq!(calls[0].tool_use_id, "call_read_1");
    assert_eq!(
        Value::Object(calls[0].input.clone()),
        json!({"path": "src/lib.rs"})
    );
    assert_eq!(calls[1].tool_name, "grep");
    assert_eq!(
        Value::Object(calls[1].input.clone()),
        json!({"pattern": "fn main", "path": "."})
    );
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(done.usage.tool_uses, 2);
    let tokens = done.usage.tokens.unwrap();
    assert_eq!(
        (tokens.input.total, tokens.input.cache_read),
        (120, Some(64))
    );
    assert_eq!(
        (tokens.output.total, tokens.output.reasoning),
        (48, Some(16))
    );
    assert_eq!(metadata(&events)["finishReason"], "tool_calls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_reason_length_is_no_error_but_is_in_the_done_metadata() {
    let server = LlmServer::start(Reply::sse(LENGTH));
    let events = OPENAI.run_on(&server, |_| {}).await;
    assert!(error_codes(&events).is_empty());
    assert_eq!(single_done(&events).status, DoneStatus::Success);
    assert_eq!(metadata(&events)["finishReason"], "length");
}

// ---- errors ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_401_and_403_name_the_key_variable() {
    for status in [401, 403] {
        OPENAI
            .check_auth_failure(
                status,
                r#"{"error":{"message":"Incorrect API key provided: sk-bad.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
                "Incorrect API key provided",
            )
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_404_says_the_model_or_base_url_is_wrong() {
    OPENAI
        .check_model_not_found(
            r#"{"error":{"message":"The model `gpt-nope` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
            "gpt-nope",
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_429_and_5xx_are_recoverable_and_carry_retry_after() {
    let cases = [
        (429, "RATE_LIMITED", Some("20")),
        (500, "SERVER_ERROR", None),
        (503, "OVERLOADED", Some("3")),
    ];
    for (status, code, retry_after) in cases {
        let mut reply = Reply::error(status, r#"{"error":{"message":"try later","type":"x"}}"#);
        if let Some(after) = retry_after {
            reply = reply.with_header("retry-after", after);
        }
        let server = LlmServer::start(reply);
        let events = OPENAI.run_on(&server, |_| {}).await;
        let (message, recoverable) = error(&events, code);
        assert!(recoverable, "{status}");
        assert!(message.contains("try later"), "{message}");
        assert_eq!(single_done(&events).status, DoneStatus::Error);
        if let Some(after) = retry_after {
            assert!(
                message.contains(&format!("retry after {after}s")),
                "{message}"
            );
            assert_eq!(metadata(&events)["retryAfter"], after);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_says_the_server_is_not_running() {
    OPENAI.check_connection_refused().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_does_not_resolve_is_a_dns_failure() {
    OPENAI.check_unresolvable_host().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_url_whose_host_is_not_granted_names_the_flag() {
    OPENAI.check_host_not_granted().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cut_mid_stream_is_an_error_and_done_error_with_usage_absent() {
    OPENAI
        .check_cut_mid_stream(&TEXT_USAGE[..TEXT_USAGE.len() / 2])
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_sse_event_is_reported_and_the_run_goes_on() {
    let mut body =
        b"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"one \"}}]}\n\n"
            .to_vec();
    body.extend_from_slice(b"data: {\"choices\": [oops\n\n");
    body.extend_from_slice(
        b"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"two\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
    );
    let events = OPENAI.check_malformed_event(&body, "[oops").await;
    assert_eq!(deltas(&events), "one two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_mid_stream_ends_with_done_interrupted_at_once_and_drops_the_request() {
    OPENAI.check_abort_mid_stream(TEXT_USAGE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stalls_forever_is_ended_by_the_runs_timeout() {
    OPENAI.check_stall_ends_by_timeout().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_while_the_server_has_not_answered_yet_ends_the_run_at_once() {
    // Accepts the connection and never answers: the adapter waits for the
    // response head, not for the body.
    let server = moat_testkit::http_server::TestServer::silent();
    let abort = CancellationToken::new();
    let trigger = abort.clone();
    let started = Instant::now();
    let events = OPENAI
        .run_at(
            &format!("http://127.0.0.1:{}", server.port),
            grant(&[format!("127.0.0.1:{}", server.port)]),
            |request| {
                request.abort = Some(abort);
                request.drain = Duration::from_secs(20);
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    trigger.cancel();
                });
            },
        )
        .await;
    assert_eq!(single_done(&events).status, DoneStatus::Interrupted);
    assert!(
        error_codes(&events).is_empty(),
        "{:?}",
        error_codes(&events)
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the adapter ended the run itself, long before the 20 s drain: {:?}",
        started.elapsed()
    );
    assert_eq!(
        server.connections(),
        1,
        "the request had reached the server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_the_run_does_not_allow_ends_the_run_fail_closed() {
    // The server answers with `grep` although only `read_file` was
    // offered: moat's own check stops the run, whatever the backend does.
    let server = LlmServer::start(Reply::sse(TOOL_CALLS));
    let events = OPENAI
        .run_on(&server, |request| {
            request.options.extra = Some(json!({
                "base_url": OPENAI.base_url(&server.url()),
                "tools": [tool("read_file"), tool("grep")],
            }));
            request.options.allowed_tools = Some(vec!["read_file".into()]);
        })
        .await;
    assert_eq!(
        server.single_request().json()["tools"],
        json!([tool("read_file")])
    );
    let (message, _) = error(&events, "TOOL_POLICY_VIOLATION");
    assert!(message.contains("grep"), "{message}");
    assert_eq!(single_done(&events).status, DoneStatus::Error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_over_the_size_limit_is_skipped_with_an_error_and_the_run_goes_on() {
    // 2 MiB in one `data:` line, past the SSE parser's 1 MiB bound.
    let huge = format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{}\"}}}}]}}\n\n",
        "x".repeat(2 * 1024 * 1024)
    );
    let mut body = huge.into_bytes();
    body.extend_from_slice(TEXT_PLAIN);
    let server = LlmServer::start(Reply::sse_split(&body, &[64 * 1024], Duration::ZERO));
    let events = OPENAI.run_on(&server, |_| {}).await;
    let (message, recoverable) = error(&events, "MALFORMED_EVENT");
    assert!(message.contains("exceeds"), "{message}");
    assert!(recoverable);
    assert_eq!(deltas(&events), "Plain text.", "the oversize delta is gone");
    assert_eq!(single_done(&events).status, DoneStatus::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ignores_stream_and_answers_with_one_json_is_understood() {
    let server = LlmServer::start(Reply::error(
        200,
        r#"{"id":"chatcmpl-1","object":"chat.completion","model":"local","choices":[{"index":0,"message":{"role":"assistant","content":"Whole answer."},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}"#,
    ));
    let events = OPENAI.run_on(&server, |_| {}).await;
    assert_eq!(texts(&events), ["Whole answer."]);
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(done.usage.tokens.map(|t| t.output.total), Some(2));
}
