//! The translator fed byte-for-byte streams (the fixtures in `fixtures/`,
//! as the Messages API sends them) through the SDK's SSE parser, split at
//! every chunk size that matters: the events must not depend on the split.

use moat_guest::EventKind;
use moat_guest::json::json;
use moat_llm_support::MALFORMED_EVENT;
use moat_llm_support::testing::{self, done, errors, metadata};

use super::*;

const TEXT_USAGE: &[u8] = include_bytes!("../../fixtures/text_usage.sse");
const THINKING_TEXT: &[u8] = include_bytes!("../../fixtures/thinking_text.sse");
const TOOL_USE: &[u8] = include_bytes!("../../fixtures/tool_use.sse");
const ERROR_MID_STREAM: &[u8] = include_bytes!("../../fixtures/error_mid_stream.sse");

fn translate(body: &[u8]) -> Vec<Event> {
    testing::translate(Translator::default, body, &[1, 2, 5, 13, 100])
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| match e.kind {
            EventKind::Text(_) => "text",
            EventKind::TextDelta(_) => "text_delta",
            EventKind::Thinking(_) => "thinking",
            EventKind::ToolUse(_) => "tool_use",
            EventKind::Error(_) => "error",
            EventKind::Done(_) => "done",
            _ => "other",
        })
        .collect()
}

#[test]
fn text_deltas_then_text_then_done_with_usage_inclusive_of_the_cache() {
    let events = translate(TEXT_USAGE);
    assert_eq!(
        kinds(&events),
        [
            "text_delta",
            "text_delta",
            "text_delta",
            "text_delta",
            "text_delta",
            "text",
            "done"
        ],
        "ping is ignored"
    );
    let text = "Hello! How can I helpé ü you today?";
    assert_eq!(events[5].kind, EventKind::Text(text.into()));
    let done = done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(done.result.as_deref(), Some(text));
    let tokens = done.usage.tokens.unwrap();
    assert_eq!(
        tokens.input,
        InputTokens::new(25 + 100 + 2000)
            .with_cache_read(2000)
            .with_cache_write(100)
    );
    assert_eq!(
        tokens.output,
        OutputTokens::new(15),
        "message_delta's count wins"
    );
    assert_eq!(metadata(done)["stopReason"], "end_turn");
    assert!(
        events
            .iter()
            .all(|e| e.session_id.as_deref() == Some("msg_01XFDUDYJgAACzvnptvVoYEL"))
    );
}

#[test]
fn thinking_becomes_one_thinking_event_and_max_tokens_is_visible() {
    let events = translate(THINKING_TEXT);
    assert_eq!(kinds(&events), ["thinking", "text_delta", "text", "done"]);
    assert_eq!(
        events[0].kind,
        EventKind::Thinking("Let me workout 27 * 453. That is 12231.".into())
    );
    let done = done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(metadata(done)["stopReason"], "max_tokens");
    assert_eq!(done.usage.tokens.unwrap().output, OutputTokens::new(120));
    assert!(errors(&events).is_empty());
}

#[test]
fn tool_inputs_are_accumulated_from_input_json_delta_and_parsed_at_block_stop() {
    let events = translate(TOOL_USE);
    assert_eq!(
        kinds(&events),
        ["text_delta", "text", "tool_use", "tool_use", "done"]
    );
    let calls: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolUse(call) => Some(call),
            _ => None,
        })
        .collect();
    assert_eq!(
        (calls[0].tool_name.as_str(), calls[0].tool_use_id.as_str()),
        ("read_file", "toolu_01A")
    );
    let input: Value = moat_guest::serde_json::from_str(&calls[0].input).unwrap();
    assert_eq!(input, json!({"path": "src/lib.rs"}));
    let input: Value = moat_guest::serde_json::from_str(&calls[1].input).unwrap();
    assert_eq!(input, json!({"pattern": "fn main", "path": "."}));
    let done = done(&events);
    assert_eq!(done.usage.tool_uses, 2);
    assert_eq!(metadata(done)["stopReason"], "tool_use");
}

#[test]
fn an_error_event_mid_stream_ends_the_run_recoverably_without_usage() {
    let events = translate(ERROR_MID_STREAM);
    assert_eq!(kinds(&events), ["text_delta", "error", "done"]);
    let error = errors(&events)[0];
    assert_eq!(error.code.as_deref(), Some("OVERLOADED"));
    assert!(error.recoverable);
    assert!(error.message.contains("Overloaded"));
    let done = done(&events);
    assert_eq!(done.status, DoneStatus::Error);
    assert_eq!(done.usage.tokens, None, "unknown, never zero");
}

#[test]
fn a_body_cut_before_message_stop_is_an_error_and_done_error_without_usage() {
    let cut_at = TEXT_USAGE.len() - 60;
    let events = translate(&TEXT_USAGE[..cut_at]);
    let errors = errors(&events);
    assert_eq!(errors.last().unwrap().code.as_deref(), Some(STREAM_CUT));
    let done = done(&events);
    assert_eq!(done.status, DoneStatus::Error);
    assert_eq!(done.usage.tokens, None);
}

#[test]
fn malformed_events_are_reported_and_the_stream_goes_on() {
    let mut body = TEXT_USAGE.to_vec();
    // Malformed events before the message's end.
    let at = body.len() - b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".len();
    body.splice(
        at..at,
        b"event: content_block_delta\ndata: {broken\n\ndata: {\"type\":\"content_block_delta\",\"index\":9,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\nevent: brand_new_type\ndata: {\"type\":\"brand_new_type\"}\n\n"
            .iter()
            .copied(),
    );
    let events = translate(&body);
    let errors = errors(&events);
    assert_eq!(errors.len(), 2, "the unknown type is ignored: {errors:?}");
    assert!(
        errors
            .iter()
            .all(|e| e.code.as_deref() == Some(MALFORMED_EVENT) && e.recoverable)
    );
    assert_eq!(done(&events).status, DoneStatus::Success);
}

#[test]
fn fields_of_an_unexpected_type_read_as_absent_and_a_field_named_twice_is_malformed() {
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "model": "m"}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        // A delta that is not an object, or null: nothing to translate.
        json!({"type": "content_block_delta", "index": 0, "delta": "x"}),
        json!({"type": "content_block_delta", "index": 0, "delta": null}),
        // A type that is not text: the event's name decides.
        json!({"type": 5, "index": 0, "delta": {"type": "text_delta", "text": "a"}}),
        // Text that is not text: a delta without its text.
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 1}}),
        // An index that is not a count: no index.
        json!({"type": "content_block_delta", "index": "0", "delta": {"type": "text_delta", "text": "?"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "b"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
        json!({"type": "message_stop"}),
    ];
    let mut body = String::new();
    for data in events {
        body.push_str(&format!("event: content_block_delta\ndata: {data}\n\n"));
        if data["type"] == "content_block_stop" {
            // Which index the server meant is anyone's guess.
            body.push_str("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"index\":1,\"delta\":{}}\n\n");
        }
    }
    let events = translate(body.as_bytes());
    let messages: Vec<String> = errors(&events)
        .into_iter()
        .map(|e| e.message.clone())
        .collect();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert!(
        messages[0].contains("a delta without its text"),
        "{messages:?}"
    );
    assert!(
        messages[1].contains("without index or delta"),
        "{messages:?}"
    );
    assert!(messages[2].contains("names a field twice"), "{messages:?}");
    let text: String = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "ab");
    assert_eq!(done(&events).status, DoneStatus::Success);
}

#[test]
fn a_tool_input_that_is_not_an_object_drops_the_call_with_an_error() {
    let mut body = String::new();
    for data in [
        json!({"type":"message_start","message":{"id":"m","usage":{"input_tokens":1,"output_tokens":1}}}),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"x","input":{}}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"[1, 2"}}),
        json!({"type":"content_block_stop","index":0}),
        json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"u","name":"y","input":{"given":"whole"}}}),
        json!({"type":"content_block_stop","index":1}),
        json!({"type":"message_stop"}),
    ] {
        body.push_str(&format!("data: {data}\n\n"));
    }
    let events = translate(body.as_bytes());
    assert_eq!(kinds(&events), ["error", "tool_use", "done"]);
    let EventKind::ToolUse(call) = &events[1].kind else {
        unreachable!()
    };
    let input: Value = moat_guest::serde_json::from_str(&call.input).unwrap();
    assert_eq!(
        input,
        json!({"given": "whole"}),
        "an input given whole is kept"
    );
    let done = done(&events);
    assert_eq!(done.usage.tool_uses, 1);
    assert_eq!(
        done.usage.tokens.unwrap().input,
        InputTokens::new(1),
        "no cache fields: no details"
    );
}

#[test]
fn interruption_is_one_done_interrupted_and_then_nothing() {
    let mut translator = Translator::default();
    assert_eq!(
        translator.interrupted(),
        Event::done(DoneStatus::Interrupted)
    );
    assert!(translator.end_of_body().is_empty());
}
