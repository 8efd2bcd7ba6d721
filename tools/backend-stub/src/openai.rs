//! OpenAI Responses API (`POST /v1/responses`), what Codex speaks.

use std::io;
use std::net::TcpStream;

use serde_json::{Value, json};

use crate::http::{Request, last_of, write_json};
use crate::scenario::{Block, deltas, deltas_before_cut};
use crate::sse::{EventStream, Framing};
use crate::{Ids, StubConfig};

/// Input tokens reported for every call, and how many of them were cached.
const INPUT_TOKENS: u64 = 2300;
const CACHED_TOKENS: u64 = 2048;

/// Whether the input's last item is a tool call's output.
pub fn after_tool_result(body: &Value) -> bool {
    last_of(body, "input")
        .and_then(|item| item["type"].as_str())
        .is_some_and(|kind| kind.ends_with("call_output"))
}

/// The function call for `command` on the shell tool the client offered:
/// its name and arguments, shaped by the tool's parameter schema (Codex
/// has offered `shell` with an argv array, `shell_command` with a string
/// and `exec_command` with `cmd`, depending on version and model).
pub fn shell_call(body: &Value, command: &str) -> Option<(String, Value)> {
    let tools = body["tools"].as_array()?;
    let preferred = ["shell", "shell_command", "exec_command", "container.exec"];
    let tool = preferred
        .iter()
        .find_map(|name| tools.iter().find(|tool| tool["name"] == *name))?;
    let name = tool["name"].as_str()?.to_owned();
    let properties = &tool["parameters"]["properties"];
    let arguments = if properties["cmd"].is_object() {
        json!({"cmd": command})
    } else if properties["command"]["type"] == "array" {
        json!({"command": ["bash", "-lc", command]})
    } else {
        json!({"command": command})
    };
    Some((name, arguments))
}

/// Answers one Responses call.
pub fn handle(
    request: &Request,
    stream: &mut TcpStream,
    config: &StubConfig,
    ids: &Ids,
) -> io::Result<()> {
    let body = request.json();
    let model = body["model"].as_str().unwrap_or("gpt-stub").to_owned();
    let plan = config.plan(after_tool_result(&body));
    let Some((blocks, cut)) = plan.blocks_or_error(stream, |_, message| {
        let error = json!({"error": {
            "message": message, "type": "invalid_request_error", "param": null,
            "code": "invalid_request",
        }});
        (Some(("x-request-id", ids.next("req_stub"))), error)
    })?
    else {
        return Ok(());
    };
    let response_id = ids.next("resp_stub");
    let items: Vec<Value> = blocks
        .iter()
        .map(|block| output_item(block, &body, ids))
        .collect();
    let output_tokens: u64 = blocks
        .iter()
        .map(|block| match block {
            Block::Text(text) | Block::Thinking(text) => deltas(text).len() as u64,
            Block::Shell(_) => 20,
        })
        .sum();
    let reasoning_tokens: u64 = blocks
        .iter()
        .map(|block| match block {
            Block::Thinking(text) => deltas(text).len() as u64,
            _ => 0,
        })
        .sum();
    let usage = json!({
        "input_tokens": INPUT_TOKENS,
        "input_tokens_details": {"cached_tokens": CACHED_TOKENS},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": INPUT_TOKENS + output_tokens,
    });
    let response = |status: &str, output: &[Value], usage: Value| {
        json!({
            "id": response_id, "object": "response", "created_at": 1_763_769_600,
            "status": status, "model": model, "output": output, "usage": usage,
            "error": null, "incomplete_details": null,
        })
    };
    if body["stream"] != true {
        let complete = response("completed", &items, usage);
        if cut {
            return crate::http::write_json_cut(stream, &complete);
        }
        return write_json(stream, 200, &[], &complete);
    }

    let mut events = Sequenced {
        stream: EventStream::start(stream, Framing::Named, config.event_delay)?,
        sequence: 0,
    };
    events.send(
        "response.created",
        json!({"response": response("in_progress", &[], Value::Null)}),
    )?;
    events.send(
        "response.in_progress",
        json!({"response": response("in_progress", &[], Value::Null)}),
    )?;
    for (output_index, item) in items.iter().enumerate() {
        let item_id = item["id"].clone();
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        match item["type"].as_str() {
            Some("message") => {
                added["content"] = json!([]);
                events.send(
                    "response.output_item.added",
                    json!({"output_index": output_index, "item": added}),
                )?;
                let text = item["content"][0]["text"].as_str().unwrap_or("");
                let empty = json!({"type": "output_text", "text": "", "annotations": []});
                events.send(
                    "response.content_part.added",
                    json!({"item_id": item_id, "output_index": output_index,
                        "content_index": 0, "part": empty}),
                )?;
                let pieces = if cut {
                    deltas_before_cut(text)
                } else {
                    deltas(text)
                };
                for piece in pieces {
                    events.send(
                        "response.output_text.delta",
                        json!({"item_id": item_id, "output_index": output_index,
                            "content_index": 0, "delta": piece, "logprobs": []}),
                    )?;
                }
                if cut {
                    return events.stream.cut();
                }
                events.send(
                    "response.output_text.done",
                    json!({"item_id": item_id, "output_index": output_index,
                        "content_index": 0, "text": text, "logprobs": []}),
                )?;
                events.send(
                    "response.content_part.done",
                    json!({"item_id": item_id, "output_index": output_index,
                        "content_index": 0, "part": item["content"][0]}),
                )?;
            }
            Some("reasoning") => {
                added["summary"] = json!([]);
                events.send(
                    "response.output_item.added",
                    json!({"output_index": output_index, "item": added}),
                )?;
                let text = item["summary"][0]["text"].as_str().unwrap_or("");
                let part = |text: &str| json!({"type": "summary_text", "text": text});
                events.send(
                    "response.reasoning_summary_part.added",
                    json!({"item_id": item_id, "output_index": output_index,
                        "summary_index": 0, "part": part("")}),
                )?;
                for piece in deltas(text) {
                    events.send(
                        "response.reasoning_summary_text.delta",
                        json!({"item_id": item_id, "output_index": output_index,
                            "summary_index": 0, "delta": piece}),
                    )?;
                }
                events.send(
                    "response.reasoning_summary_text.done",
                    json!({"item_id": item_id, "output_index": output_index,
                        "summary_index": 0, "text": text}),
                )?;
                events.send(
                    "response.reasoning_summary_part.done",
                    json!({"item_id": item_id, "output_index": output_index,
                        "summary_index": 0, "part": part(text)}),
                )?;
            }
            _ => {
                added["arguments"] = json!("");
                events.send(
                    "response.output_item.added",
                    json!({"output_index": output_index, "item": added}),
                )?;
                let arguments = item["arguments"].as_str().unwrap_or("");
                let (head, tail) = arguments.split_at(arguments.len() / 2);
                for piece in [head, tail] {
                    events.send(
                        "response.function_call_arguments.delta",
                        json!({"item_id": item_id, "output_index": output_index, "delta": piece}),
                    )?;
                }
                events.send(
                    "response.function_call_arguments.done",
                    json!({"item_id": item_id, "output_index": output_index,
                        "arguments": arguments}),
                )?;
            }
        }
        events.send(
            "response.output_item.done",
            json!({"output_index": output_index, "item": item}),
        )?;
    }
    events.send(
        "response.completed",
        json!({"response": response("completed", &items, usage)}),
    )?;
    events.stream.finish()
}

/// The complete output item for `block`.
fn output_item(block: &Block, body: &Value, ids: &Ids) -> Value {
    let message = |text: &str| {
        json!({"id": ids.next("msg_stub"), "type": "message", "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]})
    };
    match block {
        Block::Text(text) => message(text),
        Block::Thinking(text) => json!({
            "id": ids.next("rs_stub"), "type": "reasoning",
            "summary": [{"type": "summary_text", "text": text}],
        }),
        Block::Shell(command) => match shell_call(body, command) {
            Some((name, arguments)) => json!({
                "id": ids.next("fc_stub"), "type": "function_call", "status": "completed",
                "call_id": ids.next("call_stub"), "name": name,
                "arguments": arguments.to_string(),
            }),
            None => message(&format!("No shell tool was offered to run `{command}`.")),
        },
    }
}

/// Adds the rising `sequence_number` and the repeated `type` every
/// Responses event carries.
struct Sequenced<'a> {
    stream: EventStream<'a>,
    sequence: u64,
}

impl Sequenced<'_> {
    fn send(&mut self, name: &str, mut data: Value) -> io::Result<()> {
        data["type"] = json!(name);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        self.stream.send(Some(name), &data)
    }
}

/// Answers `GET /v1/models` with an empty list.
pub fn models(stream: &mut TcpStream) -> io::Result<()> {
    write_json(
        stream,
        200,
        &[],
        &json!({"object": "list", "data": [], "models": []}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_arguments_follow_the_offered_schema() {
        let argv = json!({"tools": [{"type": "function", "name": "shell",
            "parameters": {"properties": {"command": {"type": "array"}}}}]});
        assert_eq!(
            shell_call(&argv, "ls").unwrap().1,
            json!({"command": ["bash", "-lc", "ls"]})
        );
        let string = json!({"tools": [{"type": "function", "name": "shell_command",
            "parameters": {"properties": {"command": {"type": "string"}}}}]});
        assert_eq!(
            shell_call(&string, "ls").unwrap().1,
            json!({"command": "ls"})
        );
        let cmd = json!({"tools": [{"type": "function", "name": "exec_command",
            "parameters": {"properties": {"cmd": {"type": "string"}}}}]});
        assert_eq!(shell_call(&cmd, "ls").unwrap().1, json!({"cmd": "ls"}));
        assert!(shell_call(&json!({"tools": []}), "ls").is_none());
    }

    #[test]
    fn a_function_call_output_ends_the_tool_turn() {
        assert!(after_tool_result(&json!({"input": [
            {"type": "message"}, {"type": "function_call_output"}]})));
        assert!(!after_tool_result(&json!({"input": [{"type": "message"}]})));
    }
}
