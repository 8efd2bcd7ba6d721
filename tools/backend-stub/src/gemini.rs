//! Gemini API (`POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`),
//! what Gemini CLI speaks.

use std::io;
use std::net::TcpStream;

use serde_json::{Value, json};

use crate::http::{Request, last_of, write_json};
use crate::scenario::{Block, deltas, deltas_before_cut};
use crate::sse::{EventStream, Framing};
use crate::{Ids, StubConfig};

/// Prompt tokens reported for every call, and how many were cached.
const PROMPT_TOKENS: u64 = 5100;
const CACHED_TOKENS: u64 = 4096;

/// Whether the last content carries a function response.
pub fn after_tool_result(body: &Value) -> bool {
    last_of(body, "contents")
        .and_then(|content| content["parts"].as_array())
        .is_some_and(|parts| {
            parts
                .iter()
                .any(|part| part["functionResponse"].is_object())
        })
}

/// The function call for `command` on the client's shell tool.
pub fn shell_call(body: &Value, command: &str) -> Option<Value> {
    let offered = body["tools"]
        .as_array()?
        .iter()
        .filter_map(|tool| tool["functionDeclarations"].as_array())
        .flatten()
        .any(|declaration| declaration["name"] == "run_shell_command");
    offered.then(|| {
        json!({"functionCall": {"name": "run_shell_command",
            "args": {"command": command, "description": "Run a command for the moat test"}}})
    })
}

/// Answers one `generateContent` or `streamGenerateContent` call.
pub fn handle(
    request: &Request,
    stream: &mut TcpStream,
    config: &StubConfig,
    ids: &Ids,
) -> io::Result<()> {
    let body = request.json();
    let model = request
        .path()
        .rsplit('/')
        .next()
        .and_then(|last| last.split(':').next())
        .unwrap_or("gemini-stub")
        .to_owned();
    let plan = config.plan(after_tool_result(&body));
    let Some((blocks, cut)) = plan.blocks_or_error(stream, |status, message| {
        let error =
            json!({"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}});
        (None, error)
    })?
    else {
        return Ok(());
    };
    // Each streamed chunk carries a list of parts.
    let mut chunks: Vec<Vec<Value>> = Vec::new();
    let mut thought_tokens = 0;
    let mut output_tokens = 0;
    for block in &blocks {
        match block {
            Block::Text(text) => {
                let pieces = if cut {
                    deltas_before_cut(text)
                } else {
                    deltas(text)
                };
                output_tokens += pieces.len() as u64;
                chunks.extend(pieces.into_iter().map(|piece| vec![json!({"text": piece})]));
            }
            Block::Thinking(text) => {
                thought_tokens += deltas(text).len() as u64;
                chunks.push(vec![json!({"text": text, "thought": true})]);
            }
            Block::Shell(command) => {
                output_tokens += 12;
                chunks.push(vec![shell_call(&body, command).unwrap_or_else(
                    || json!({"text": format!("No shell tool was offered to run `{command}`.")}),
                )]);
            }
        }
    }
    let response_id = ids.next("stub-response");
    let usage = json!({
        "promptTokenCount": PROMPT_TOKENS,
        "candidatesTokenCount": output_tokens,
        "thoughtsTokenCount": thought_tokens,
        "cachedContentTokenCount": CACHED_TOKENS,
        "totalTokenCount": PROMPT_TOKENS + output_tokens + thought_tokens,
    });
    let chunk = |parts: Vec<Value>, last: bool| {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        let mut value = json!({"modelVersion": model, "responseId": response_id});
        if last {
            candidate["finishReason"] = json!("STOP");
            value["usageMetadata"] = usage.clone();
        }
        value["candidates"] = json!([candidate]);
        value
    };
    if !request.path().ends_with(":streamGenerateContent") {
        let parts: Vec<Value> = chunks.into_iter().flatten().collect();
        if cut {
            return crate::http::write_json_cut(stream, &chunk(parts, true));
        }
        return write_json(stream, 200, &[], &chunk(parts, true));
    }
    let mut events = EventStream::start(stream, Framing::DataOnlyCrlf, config.event_delay)?;
    let count = chunks.len();
    for (index, parts) in chunks.into_iter().enumerate() {
        events.send(None, &chunk(parts, !cut && index + 1 == count))?;
    }
    if cut {
        return events.cut();
    }
    events.finish()
}

/// Answers `:countTokens`.
pub fn count_tokens(stream: &mut TcpStream) -> io::Result<()> {
    write_json(stream, 200, &[], &json!({"totalTokens": PROMPT_TOKENS}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_call_needs_the_shell_tool_on_offer() {
        let body = json!({"tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]});
        let call = shell_call(&body, "ls").unwrap();
        assert_eq!(call["functionCall"]["args"]["command"], "ls");
        let without = json!({"tools": [{"functionDeclarations": [{"name": "read_file"}]}]});
        assert!(shell_call(&without, "ls").is_none());
    }

    #[test]
    fn a_function_response_ends_the_tool_turn() {
        let body = json!({"contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "x"}}]},
        ]});
        assert!(after_tool_result(&body));
        assert!(!after_tool_result(
            &json!({"contents": [{"parts": [{"text": "hi"}]}]})
        ));
    }
}
