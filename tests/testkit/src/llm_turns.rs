//! Model answers in each vendor's streaming wire format, for tests of the
//! API adapters' tool loop: an answer that says a line and calls a tool,
//! and a final answer, each with its token counts.

use serde_json::{Value, json};

fn sse(events: &[Value]) -> Vec<u8> {
    let mut body = String::new();
    for event in events {
        body.push_str(&format!("data: {event}\n\n"));
    }
    body.into_bytes()
}

/// A Chat Completions stream that says "Let me check." and calls `name`
/// with `input` (its arguments split over two chunks) as call `id`.
pub fn openai_tool_turn(id: &str, name: &str, input: &Value, (inp, out): (u64, u64)) -> Vec<u8> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let arguments = input.to_string();
    let mut middle = arguments.len() / 2;
    while !arguments.is_char_boundary(middle) {
        middle -= 1;
    }
    let (first, second) = arguments.split_at(middle);
    let mut body = sse(&[
        chunk(
            json!({"role": "assistant", "content": "Let me check."}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                                   "function": {"name": name, "arguments": first}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": second}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        json!({"id": "chatcmpl-1", "choices": [],
               "usage": {"prompt_tokens": inp, "completion_tokens": out}}),
    ]);
    body.extend_from_slice(b"data: [DONE]\n\n");
    body
}

/// A Chat Completions stream answering `text`.
pub fn openai_answer(text: &str, (inp, out): (u64, u64)) -> Vec<u8> {
    let mut body = sse(&[
        json!({"id": "chatcmpl-2", "model": "gpt-4o-mini",
               "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}),
        json!({"id": "chatcmpl-2", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        json!({"id": "chatcmpl-2", "choices": [],
               "usage": {"prompt_tokens": inp, "completion_tokens": out}}),
    ]);
    body.extend_from_slice(b"data: [DONE]\n\n");
    body
}

fn anthropic_events(
    message: &str,
    blocks: &[Value],
    stop: &str,
    (inp, out): (u64, u64),
) -> Vec<u8> {
    let mut events = vec![json!({"type": "message_start", "message": {
        "id": message, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [], "usage": {"input_tokens": inp, "output_tokens": 1}}})];
    for (index, block) in blocks.iter().enumerate() {
        match block["type"].as_str().unwrap() {
            "text" => events.extend([
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "text", "text": ""}}),
                json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "text_delta", "text": block["text"]}}),
            ]),
            _ => events.extend([
                json!({"type": "content_block_start", "index": index, "content_block": {
                    "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}),
                json!({"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta", "partial_json": block["input"].to_string()}}),
            ]),
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    events.extend([
        json!({"type": "message_delta", "delta": {"stop_reason": stop},
               "usage": {"output_tokens": out}}),
        json!({"type": "message_stop"}),
    ]);
    let mut body = String::new();
    for event in events {
        body.push_str(&format!(
            "event: {}\ndata: {event}\n\n",
            event["type"].as_str().unwrap()
        ));
    }
    body.into_bytes()
}

/// A Messages stream that says "Let me check." and calls `name` with
/// `input` as tool use `id`.
pub fn anthropic_tool_turn(id: &str, name: &str, input: &Value, tokens: (u64, u64)) -> Vec<u8> {
    anthropic_events(
        "msg_1",
        &[
            json!({"type": "text", "text": "Let me check."}),
            json!({"type": "tool_use", "id": id, "name": name, "input": input}),
        ],
        "tool_use",
        tokens,
    )
}

/// A Messages stream answering `text`.
pub fn anthropic_answer(text: &str, tokens: (u64, u64)) -> Vec<u8> {
    anthropic_events(
        "msg_2",
        &[json!({"type": "text", "text": text})],
        "end_turn",
        tokens,
    )
}
