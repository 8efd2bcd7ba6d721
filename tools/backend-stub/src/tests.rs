//! The stub answered over real sockets, as the CLIs see it.

use std::io::{Read, Write};

use super::*;

/// Sends `method target` with a JSON body and returns the status and the
/// de-chunked body; `complete` is false when a chunked body was cut.
fn call(server: &StubServer, method: &str, target: &str, body: &Value) -> (u16, String, bool) {
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    let body = body.to_string();
    write!(
        stream,
        "{method} {target} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, rest) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return (status, rest.to_owned(), true);
    }
    let (mut body, mut rest, mut complete) = (String::new(), rest, false);
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size, 16).unwrap();
        if size == 0 {
            complete = true;
            break;
        }
        body.push_str(&tail[..size]);
        rest = &tail[size + 2..];
    }
    (status, body, complete)
}

/// The `data:` payloads of an SSE body, with their `event:` names.
fn events(body: &str) -> Vec<(Option<String>, Value)> {
    body.split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .map(|frame| {
            let mut name = None;
            let mut data = Value::Null;
            for line in frame.lines() {
                if let Some(value) = line.strip_prefix("event: ") {
                    name = Some(value.to_owned());
                } else if let Some(value) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(value.trim_end()).unwrap();
                }
            }
            (name, data)
        })
        .collect()
}

fn stub(scenario: Scenario) -> StubServer {
    let config = StubConfig::new(scenario).with_event_delay(Duration::ZERO);
    StubServer::start("127.0.0.1:0", config).unwrap()
}

#[test]
fn anthropic_text_streams_named_events_ending_in_message_stop() {
    let server = stub(Scenario::Text);
    let request = json!({"model": "claude-x", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let (status, body, complete) = call(&server, "POST", "/v1/messages?beta=true", &request);
    assert_eq!((status, complete), (200, true));
    let events = events(&body);
    let names: Vec<&str> = events.iter().filter_map(|(n, _)| n.as_deref()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    let text: String = events
        .iter()
        .filter_map(|(_, data)| data["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, scenario::TEXT_REPLY);
    assert_eq!(events[0].1["message"]["model"], "claude-x");
    assert_eq!(server.requests()[0].api, "anthropic");
}

#[test]
fn anthropic_tool_use_streams_the_bash_input_as_json_deltas() {
    let server = stub(Scenario::ToolUse);
    let request = json!({"model": "m", "stream": true, "tools": [{"name": "Bash"}],
        "messages": [{"role": "user", "content": "hi"}]});
    let (_, body, _) = call(&server, "POST", "/v1/messages", &request);
    let events = events(&body);
    let json: String = events
        .iter()
        .filter_map(|(_, data)| data["delta"]["partial_json"].as_str())
        .collect();
    let input: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(input["command"], scenario::TOOL_COMMAND);
    assert!(
        events
            .iter()
            .any(|(_, data)| data["delta"]["stop_reason"] == "tool_use")
    );
}

#[test]
fn api_error_is_an_http_400_with_the_vendor_error_body() {
    let server = stub(Scenario::ApiError);
    let (status, body, _) = call(&server, "POST", "/v1/messages", &json!({"stream": true}));
    assert_eq!(status, 400);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    let (status, _, _) = call(&server, "POST", "/v1/responses", &json!({"stream": true}));
    assert_eq!(status, 400);
    let (status, body, _) = call(
        &server,
        "POST",
        "/v1beta/models/g:streamGenerateContent?alt=sse",
        &json!({}),
    );
    assert_eq!(status, 400);
    assert!(body.contains("INVALID_ARGUMENT"));
}

#[test]
fn mid_turn_failure_cuts_the_chunked_body() {
    let server = stub(Scenario::MidTurnFailure);
    for target in [
        "/v1/messages",
        "/v1/responses",
        "/v1beta/models/g:streamGenerateContent?alt=sse",
    ] {
        let (status, body, complete) = call(&server, "POST", target, &json!({"stream": true}));
        assert_eq!(status, 200, "{target}");
        assert!(!complete, "{target}: the body must not end properly");
        assert!(body.contains("answer "), "{target}: {body}");
        assert!(!body.contains("sentence"), "{target}: {body}");
    }
}

#[test]
fn openai_responses_number_events_and_end_with_completed_usage() {
    let server = stub(Scenario::Thinking);
    let (status, body, complete) = call(
        &server,
        "POST",
        "/v1/responses",
        &json!({"model": "gpt-x", "stream": true, "input": []}),
    );
    assert_eq!((status, complete), (200, true));
    let events = events(&body);
    for (index, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["sequence_number"], index as u64);
        assert_eq!(data["type"].as_str(), name.as_deref());
    }
    let (name, last) = events.last().unwrap();
    assert_eq!(name.as_deref(), Some("response.completed"));
    let usage = &last["response"]["usage"];
    assert!(usage["output_tokens_details"]["reasoning_tokens"].as_u64() > Some(0));
    assert!(
        events
            .iter()
            .any(|(name, _)| name.as_deref() == Some("response.reasoning_summary_text.delta"))
    );
}

#[test]
fn gemini_streams_data_only_chunks_with_usage_on_the_last() {
    let server = stub(Scenario::Text);
    let (status, body, complete) = call(
        &server,
        "POST",
        "/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
        &json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
    );
    assert_eq!((status, complete), (200, true));
    assert!(!body.contains("event:"));
    let chunks: Vec<Value> = body
        .split("\r\n\r\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|chunk| chunk["candidates"][0]["content"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, scenario::TEXT_REPLY);
    let last = chunks.last().unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert!(last["usageMetadata"]["promptTokenCount"].is_u64());
    assert_eq!(server.requests()[0].model.as_deref(), Some("gemini-x"));
}

#[test]
fn unknown_routes_get_404_and_are_logged() {
    let server = stub(Scenario::Text);
    let (status, _, _) = call(&server, "GET", "/telemetry", &json!({}));
    assert_eq!(status, 404);
    assert_eq!(server.requests()[0].api, "unknown");
}

#[test]
fn mid_turn_failure_cuts_a_non_streaming_answer_too() {
    let server = stub(Scenario::MidTurnFailure);
    let (status, body, _) = call(&server, "POST", "/v1/messages", &json!({"stream": false}));
    assert_eq!(status, 200);
    assert!(serde_json::from_str::<Value>(&body).is_err(), "{body}");
}
