//! Anthropic Messages API (`POST /v1/messages`), what Claude Code speaks.

use std::io;
use std::net::TcpStream;

use serde_json::{Value, json};

use crate::http::{Request, last_of, write_json};
use crate::scenario::{Block, Plan, Scenario, deltas, deltas_before_cut};
use crate::sse::{EventStream, Framing};
use crate::{Ids, StubConfig};

/// Input tokens reported for every call: uncached, read from and written
/// to the prompt cache (the usage shape Claude Code sees from the API).
const INPUT_TOKENS: u64 = 12;
const CACHE_READ_TOKENS: u64 = 2048;
const CACHE_CREATION_TOKENS: u64 = 256;

/// Whether the conversation's last message carries a tool result.
pub fn after_tool_result(body: &Value) -> bool {
    last_of(body, "messages")
        .and_then(|message| message["content"].as_array())
        .is_some_and(|blocks| blocks.iter().any(|block| block["type"] == "tool_result"))
}

/// The shell tool call for `command`, using the client's `Bash` tool (or
/// any tool taking a `command` string).
fn shell_call(body: &Value, command: &str) -> Option<(String, Value)> {
    let tools = body["tools"].as_array()?;
    let tool = tools
        .iter()
        .find(|tool| tool["name"] == "Bash")
        .or_else(|| {
            tools
                .iter()
                .find(|tool| tool["input_schema"]["properties"]["command"]["type"] == "string")
        })?;
    let name = tool["name"].as_str()?.to_owned();
    Some((
        name,
        json!({"command": command, "description": "Run a command for the moat test"}),
    ))
}

/// Answers one Messages call.
pub fn handle(
    request: &Request,
    stream: &mut TcpStream,
    config: &StubConfig,
    ids: &Ids,
) -> io::Result<()> {
    let body = request.json();
    let model = body["model"].as_str().unwrap_or("claude-stub").to_owned();
    let plan = config.plan(after_tool_result(&body));
    let request_id = ids.next("req_stub");
    let Some((blocks, cut)) = plan.blocks_or_error(stream, |_, message| {
        let error = json!({
            "type": "error",
            "error": {"type": "invalid_request_error", "message": message},
            "request_id": request_id,
        });
        (Some(("request-id", request_id.clone())), error)
    })?
    else {
        return Ok(());
    };
    let content: Vec<Value> = blocks
        .iter()
        .map(|block| content_block(block, &body, ids))
        .collect();
    let stop_reason = if content.iter().any(|block| block["type"] == "tool_use") {
        "tool_use"
    } else {
        "end_turn"
    };
    let output_tokens = output_tokens(&blocks);
    let message_id = ids.next("msg_stub");
    if body["stream"] != true {
        let message = json!({
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop_reason, "stop_sequence": null,
            "usage": usage(output_tokens),
        });
        // Claude Code retries a failed stream without streaming: that call
        // must fail the same way.
        if cut {
            return crate::http::write_json_cut(stream, &message);
        }
        return write_json(stream, 200, &[("request-id", &request_id)], &message);
    }

    let mut events = EventStream::start(stream, Framing::Named, config.event_delay)?;
    let mut start_usage = usage(1);
    start_usage["output_tokens"] = json!(1);
    events.send(
        Some("message_start"),
        &json!({"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage,
        }}),
    )?;
    events.send(Some("ping"), &json!({"type": "ping"}))?;
    for (index, (block, started)) in blocks.iter().zip(&content).enumerate() {
        let mut opening = started.clone();
        match block {
            Block::Text(_) => opening["text"] = json!(""),
            Block::Thinking(_) => {
                opening["thinking"] = json!("");
                opening["signature"] = json!("");
            }
            Block::Shell(_) => opening["input"] = json!({}),
        }
        events.send(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": opening}),
        )?;
        let pieces: Vec<(&str, Value)> = match (block, started["type"].as_str()) {
            (Block::Text(text), _) if cut => deltas_before_cut(text)
                .into_iter()
                .map(|piece| ("text_delta", json!({"type": "text_delta", "text": piece})))
                .collect(),
            (Block::Thinking(text), _) => deltas(text)
                .into_iter()
                .map(|piece| {
                    (
                        "thinking_delta",
                        json!({"type": "thinking_delta", "thinking": piece}),
                    )
                })
                .chain(std::iter::once((
                    "signature_delta",
                    json!({"type": "signature_delta", "signature": "c3R1Yi1zaWduYXR1cmU="}),
                )))
                .collect(),
            (_, Some("tool_use")) => {
                let input = started["input"].to_string();
                let (head, tail) = input.split_at(input.len() / 2);
                [head, tail]
                    .into_iter()
                    .map(|part| {
                        (
                            "input_json_delta",
                            json!({"type": "input_json_delta", "partial_json": part}),
                        )
                    })
                    .collect()
            }
            (_, _) => deltas(started["text"].as_str().unwrap_or(""))
                .into_iter()
                .map(|piece| ("text_delta", json!({"type": "text_delta", "text": piece})))
                .collect(),
        };
        for (_, delta) in pieces {
            events.send(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            )?;
        }
        if cut {
            return events.cut();
        }
        events.send(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": index}),
        )?;
    }
    events.send(
        Some("message_delta"),
        &json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": output_tokens}}),
    )?;
    events.send(Some("message_stop"), &json!({"type": "message_stop"}))?;
    events.finish()
}

/// The complete content block for `block`.
fn content_block(block: &Block, body: &Value, ids: &Ids) -> Value {
    match block {
        Block::Text(text) => json!({"type": "text", "text": text}),
        Block::Thinking(text) => {
            json!({"type": "thinking", "thinking": text, "signature": "c3R1Yi1zaWduYXR1cmU="})
        }
        Block::Shell(command) => match shell_call(body, command) {
            Some((name, input)) => {
                json!({"type": "tool_use", "id": ids.next("toolu_stub"), "name": name, "input": input})
            }
            // The client offered no shell tool: say so instead.
            None => {
                json!({"type": "text", "text": format!("No shell tool was offered to run `{command}`.")})
            }
        },
    }
}

/// Output tokens of a reply: one per word, as an honest stand-in count.
fn output_tokens(blocks: &[Block]) -> u64 {
    blocks
        .iter()
        .map(|block| match block {
            Block::Text(text) | Block::Thinking(text) => deltas(text).len() as u64,
            Block::Shell(_) => 24,
        })
        .sum()
}

/// The usage object of a message.
fn usage(output_tokens: u64) -> Value {
    json!({
        "input_tokens": INPUT_TOKENS,
        "cache_creation_input_tokens": CACHE_CREATION_TOKENS,
        "cache_read_input_tokens": CACHE_READ_TOKENS,
        "output_tokens": output_tokens,
    })
}

/// Answers `POST /v1/messages/count_tokens`.
pub fn count_tokens(stream: &mut TcpStream) -> io::Result<()> {
    write_json(stream, 200, &[], &json!({"input_tokens": INPUT_TOKENS}))
}

/// Whether this scenario's reply for `body` is a tool call; for tests.
pub fn plans_tool_call(scenario: Scenario, body: &Value) -> bool {
    matches!(scenario.plan(after_tool_result(body)), Plan::Reply(blocks)
        if blocks.iter().any(|block| matches!(block, Block::Shell(_))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_result_as_last_message_ends_the_tool_turn() {
        let first = json!({"messages": [{"role": "user", "content": "hi"}]});
        let second = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
        ]});
        assert!(plans_tool_call(Scenario::ToolUse, &first));
        assert!(!plans_tool_call(Scenario::ToolUse, &second));
    }

    #[test]
    fn the_shell_call_uses_the_offered_bash_tool() {
        let body = json!({"tools": [{"name": "Read"}, {"name": "Bash"}]});
        let (name, input) = shell_call(&body, "ls").unwrap();
        assert_eq!(name, "Bash");
        assert_eq!(input["command"], "ls");
        assert!(shell_call(&json!({"tools": []}), "ls").is_none());
    }
}
