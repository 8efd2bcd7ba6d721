//! The translator fed byte-for-byte streams (the fixtures in `fixtures/`,
//! as OpenAI sends them) through the SDK's SSE parser, split at every
//! chunk size that matters: the events must not depend on the split.

use moat_guest::{EventKind, ToolUseEvent};
use moat_llm_support::MALFORMED_EVENT;
use moat_llm_support::testing::{self, deltas, done, errors, metadata};

use super::*;

const TEXT_USAGE: &[u8] = include_bytes!("../../fixtures/text_usage.sse");
const TEXT_PLAIN: &[u8] = include_bytes!("../../fixtures/text_plain.sse");
const TOOL_CALLS: &[u8] = include_bytes!("../../fixtures/tool_calls.sse");
const LENGTH: &[u8] = include_bytes!("../../fixtures/length.sse");

/// The events of `body`, checked to be the same for every chunking.
fn translate(body: &[u8]) -> Vec<Event> {
    testing::translate(Translator::default, body, &[1, 2, 3, 7, 64, 1000])
}

fn sse(chunks: &[Value]) -> Vec<u8> {
    let mut body = String::new();
    for chunk in chunks {
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    body.into_bytes()
}

#[test]
fn text_deltas_then_the_assembled_text_then_done_with_exact_usage() {
    let events = translate(TEXT_USAGE);
    let expected = "Hello! How can I helpé ü today?";
    assert_eq!(deltas(&events), expected);
    let texts: Vec<_> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Text(_)))
        .collect();
    assert_eq!(texts.len(), 1);
    assert_eq!(texts[0].kind, EventKind::Text(expected.into()));
    let done = done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(done.result.as_deref(), Some(expected));
    let tokens = done.usage.tokens.expect("usage was reported");
    assert_eq!(tokens.input, InputTokens::new(19).with_cache_read(0));
    assert_eq!(tokens.output, OutputTokens::new(10).with_reasoning(0));
    assert_eq!(tokens.coverage, TokenCoverage::Complete);
    assert_eq!(metadata(done)["finishReason"], "stop");
    assert!(
        events
            .iter()
            .all(|e| e.session_id.as_deref() == Some("chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG"))
    );
    assert!(errors(&events).is_empty());
}

#[test]
fn a_stream_without_usage_reports_no_tokens_and_crlf_framing_works() {
    let events = translate(TEXT_PLAIN);
    assert_eq!(deltas(&events), "Plain text.");
    let done = done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(done.usage.tokens, None, "absent, not zero");
}

#[test]
fn interleaved_tool_calls_are_accumulated_by_index_and_parsed() {
    let events = translate(TOOL_CALLS);
    let calls: Vec<&ToolUseEvent> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolUse(call) => Some(call),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].tool_name.as_str(), calls[0].tool_use_id.as_str()),
        ("read_file", "call_read_1")
    );
    let input: Value = moat_guest::serde_json::from_str(&calls[0].input).unwrap();
    assert_eq!(input, json!({"path": "src/lib.rs"}));
    assert_eq!(calls[1].tool_name, "grep");
    let input: Value = moat_guest::serde_json::from_str(&calls[1].input).unwrap();
    assert_eq!(input, json!({"pattern": "fn main", "path": "."}));
    let done = done(&events);
    assert_eq!(done.usage.tool_uses, 2);
    let tokens = done.usage.tokens.unwrap();
    assert_eq!(tokens.input, InputTokens::new(120).with_cache_read(64));
    assert_eq!(tokens.output, OutputTokens::new(48).with_reasoning(16));
    assert_eq!(metadata(done)["finishReason"], "tool_calls");
    assert_eq!(done.result, None, "no text, no result");
}

#[test]
fn finish_reason_length_is_success_with_the_reason_in_metadata() {
    let events = translate(LENGTH);
    let done = done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(metadata(done)["finishReason"], "length");
    assert!(errors(&events).is_empty());
}

#[test]
fn a_body_cut_mid_stream_is_an_error_and_done_error_without_usage() {
    let end = TEXT_USAGE.len() / 2;
    let events = translate(&TEXT_USAGE[..end]);
    // The cut falls inside an event: the half event the body ended with is
    // reported as malformed, then the cut itself.
    let errors = errors(&events);
    assert_eq!(errors.last().unwrap().code.as_deref(), Some(STREAM_CUT));
    assert!(errors.iter().all(|e| e.recoverable));
    let done = done(&events);
    assert_eq!(done.status, DoneStatus::Error);
    assert_eq!(done.usage.tokens, None);
}

#[test]
fn a_body_that_ends_after_finish_reason_without_done_marker_is_complete() {
    let cut_at = TEXT_USAGE.len() - b"data: [DONE]\n\n".len();
    let done_event = translate(&TEXT_USAGE[..cut_at]);
    let done = done(&done_event);
    assert_eq!(done.status, DoneStatus::Success);
    assert!(done.usage.tokens.is_some());
}

#[test]
fn a_malformed_chunk_is_reported_and_the_stream_goes_on() {
    let mut body =
        b"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"
            .to_vec();
    body.extend_from_slice(b"data: {not json\n\n");
    body.extend_from_slice(b"data: [1,2]\n\n");
    body.extend_from_slice(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"},\"finish_reason\":\"stop\"}]}\n\n");
    body.extend_from_slice(b"data: [DONE]\n\n");
    let events = translate(&body);
    let errors = errors(&events);
    assert_eq!(errors.len(), 2);
    assert!(
        errors
            .iter()
            .all(|e| e.code.as_deref() == Some(MALFORMED_EVENT) && e.recoverable)
    );
    assert!(errors[0].message.contains("{not json"));
    assert_eq!(deltas(&events), "ab");
    assert_eq!(done(&events).status, DoneStatus::Success);
}

#[test]
fn fields_of_an_unexpected_type_read_as_absent_and_a_field_named_twice_is_malformed() {
    let body = sse(&[
        // None of these is of the type read: no text, no session, no error.
        json!({"id": 7, "model": ["m"], "choices": [{"index": 0, "delta": {"content": 5, "reasoning": {}}, "finish_reason": 1}]}),
        json!({"choices": {"index": 0}}),
        json!({"choices": [3, {"index": "0", "delta": "x"}]}),
        // An entry that is not an object is followed as the first choice.
        json!({"choices": ["x", {"index": 0, "delta": {"content": "never"}}]}),
        json!({"id": "c2", "choices": [{"index": 1, "delta": {"content": "other"}}, {"delta": {"content": "a"}}]}),
    ]);
    let mut body = body;
    // Which `content` the server meant is anyone's guess.
    body.extend_from_slice(
        b"data: {\"choices\":[{\"delta\":{\"content\":\"x\",\"content\":\"y\"}}]}\n\n",
    );
    body.extend_from_slice(
        b"data: {\"choices\":[{\"delta\":{\"content\":\"b\"},\"finish_reason\":\"stop\"}]}\n\n",
    );
    body.extend_from_slice(b"data: [DONE]\n\n");
    let events = translate(&body);
    let errors = errors(&events);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].message.contains("names a field twice"));
    assert_eq!(deltas(&events), "ab");
    assert!(
        events
            .iter()
            .all(|e| e.session_id.as_deref() == Some("c2") || e.session_id.is_none()),
        "the first id that is text is the session's"
    );
    assert_eq!(done(&events).status, DoneStatus::Success);
}

#[test]
fn bad_tool_arguments_drop_the_call_with_an_error_not_a_panic() {
    let body = sse(&[
        json!({"choices":[{"index":0,"delta":{"tool_calls":[
            {"index":0,"id":"a","function":{"name":"ok","arguments":""}},
            {"index":1,"id":"b","function":{"name":"broken","arguments":"{\"x\":"}},
            {"index":2,"id":"c","function":{"name":"list","arguments":"[1]"}},
            {"index":3,"function":{"arguments":"{}"}},
            "not an object"
        ]}}]}),
        json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
    ]);
    let events = translate(&body);
    let calls: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolUse(call) => Some(call.tool_name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(calls, ["ok"], "empty arguments are an empty object");
    assert_eq!(errors(&events).len(), 4);
    assert_eq!(done(&events).usage.tool_uses, 1);
}

#[test]
fn an_error_chunk_mid_stream_ends_the_run_with_done_error() {
    let body = sse(&[
        json!({"choices":[{"index":0,"delta":{"content":"par"}}]}),
        json!({"error":{"message":"upstream overloaded","code":502}}),
        json!({"choices":[{"index":0,"delta":{"content":"ignored"}}]}),
    ]);
    let events = translate(&body);
    assert_eq!(deltas(&events), "par");
    assert!(errors(&events)[0].message.contains("upstream overloaded"));
    assert_eq!(done(&events).status, DoneStatus::Error);
}

#[test]
fn inconsistent_usage_details_are_left_out_not_corrected() {
    let body = sse(&[
        json!({"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}),
        json!({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,
            "prompt_tokens_details":{"cached_tokens":9},"completion_tokens_details":{"reasoning_tokens":5}}}),
        json!({"choices":[],"usage":{"prompt_tokens":"many"}}),
    ]);
    let events = translate(&body);
    let tokens = done(&events).usage.tokens.unwrap();
    assert_eq!(tokens.input, InputTokens::new(3));
    assert_eq!(tokens.output, OutputTokens::new(1));
    assert_eq!(errors(&events).len(), 1, "the unreadable usage is reported");
}

#[test]
fn interruption_is_one_done_interrupted_and_then_nothing() {
    let mut translator = Translator::default();
    let event = translator.interrupted();
    assert_eq!(event, Event::done(DoneStatus::Interrupted));
    assert!(translator.ended());
    assert!(translator.end_of_body().is_empty());
}

#[test]
fn reasoning_from_compatible_servers_becomes_one_thinking_event_before_the_answer() {
    let body = sse(&[
        json!({"id":"r","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Two plus"}}]}),
        json!({"id":"r","choices":[{"index":0,"delta":{"reasoning_content":" two is four."}}]}),
        json!({"id":"r","choices":[{"index":0,"delta":{"content":"4"}}]}),
        json!({"id":"r","choices":[{"index":0,"delta":{"reasoning":"late"},"finish_reason":"stop"}]}),
        json!({"id":"r","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,
            "completion_tokens_details":{"reasoning_tokens":7}}}),
    ]);
    let events = translate(&body);
    let kinds: Vec<_> = events
        .iter()
        .map(|e| match &e.kind {
            EventKind::Thinking(t) => format!("thinking:{t}"),
            EventKind::TextDelta(d) => format!("delta:{d}"),
            EventKind::Text(t) => format!("text:{t}"),
            EventKind::Done(_) => "done".into(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "thinking:Two plus two is four.",
            "delta:4",
            "thinking:late",
            "text:4",
            "done"
        ]
    );
    let tokens = done(&events).usage.tokens.unwrap();
    assert_eq!(tokens.output, OutputTokens::new(9).with_reasoning(7));
}

#[test]
fn a_server_that_ignores_stream_and_answers_whole_is_translated_too() {
    let body = json!({
        "id": "chatcmpl-whole", "object": "chat.completion", "model": "local",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Let me look.",
            "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    });
    let mut translator = Translator::default();
    let events = translator.on_complete(body.to_string().as_bytes());
    assert_eq!(deltas(&events), "Let me look.");
    let call = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolUse(call) => Some(call),
            _ => None,
        })
        .expect("the tool call");
    assert_eq!(
        (call.tool_name.as_str(), call.tool_use_id.as_str()),
        ("read_file", "call_1")
    );
    let whole = done(&events);
    assert_eq!(whole.status, DoneStatus::Success);
    assert_eq!(whole.usage.tokens.unwrap().input, InputTokens::new(3));
    assert!(
        events
            .iter()
            .all(|e| e.session_id.as_deref() == Some("chatcmpl-whole"))
    );

    let mut translator = Translator::default();
    let events = translator.on_complete(b"<html>not json</html>");
    assert_eq!(
        errors(&events).len(),
        2,
        "malformed, then the answer never came"
    );
    assert_eq!(done(&events).status, DoneStatus::Error);
}
