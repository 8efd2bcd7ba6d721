//! From Messages API stream events to moat events.
//!
//! Every value comes from the server and is untrusted: an event that is not
//! JSON, or not the shape expected, is reported as a recoverable
//! `MALFORMED_EVENT` error and skipped; nothing here panics on input.
//! Unknown event and block types are ignored, as the API asks of clients.

use std::collections::BTreeMap;

use moat_guest::json::json;
use moat_guest::json::{Map, Value};
use moat_guest::sse::SseEvent;
use moat_guest::{
    DoneEvent, DoneStatus, Event, InputTokens, OutputTokens, TokenCoverage, TokenReport,
    ToolUseEvent,
};
use moat_llm_support::loose::{self, Count, Object, Text, present};
use moat_llm_support::mcp::McpTool;
use moat_llm_support::stream::MAX_QUOTED_EVENT;
use moat_llm_support::{
    Conversation, Failure, STREAM_CUT, StreamState, ToolOutput, Translate, cut,
};
use serde::Deserialize;
/// Most content blocks kept from one answer.
const MAX_BLOCKS: usize = 256;
/// Longest text of one block (text, thinking, or a tool's input JSON).
const MAX_BLOCK_TEXT: usize = 512 * 1024;
/// Longest text kept for the done's result; the host refuses events past
/// 1 MiB, and the deltas carried it all anyway.
const MAX_RESULT: usize = 512 * 1024;

#[derive(Debug)]
enum Kind {
    Text,
    Thinking,
    ToolUse {
        id: String,
        name: String,
    },
    /// A block type this adapter does not translate (e.g.
    /// `redacted_thinking`, server tool results), kept as the server sent
    /// it to repeat it back.
    Other(Value),
}

#[derive(Debug)]
struct Block {
    kind: Kind,
    /// The text, the thinking, or the tool input's JSON text.
    content: String,
    /// A tool input given whole in `content_block_start` (used when no
    /// `input_json_delta` follows).
    start_input: Option<Value>,
    /// A thinking block's signature, which must go back with it.
    signature: String,
    too_long: bool,
}

/// Token counts as reported so far.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    input: Option<u64>,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
    output: Option<u64>,
}

/// The state of one streamed answer.
#[derive(Debug, Default)]
pub struct Translator {
    /// The session id, model, stop reason, and whether the run ended.
    state: StreamState,
    blocks: BTreeMap<u64, Block>,
    dropped_blocks: bool,
    result: String,
    result_too_long: bool,
    tool_uses: u32,
    counts: Counts,
    started: bool,
    /// The answer's finished blocks as the Messages API takes them back.
    reply: Vec<Value>,
}

impl Conversation for Translator {
    fn tool_entry(name: &str, tool: &McpTool) -> Value {
        json!({
            "name": name,
            "description": tool.description,
            "input_schema": tool.input_schema,
        })
    }

    fn take_reply(&mut self) -> Value {
        json!({"role": "assistant", "content": std::mem::take(&mut self.reply)})
    }

    /// The outputs go back as one user message of `tool_result` blocks.
    fn append_turn(messages: &mut Vec<Value>, reply: Value, outputs: &[ToolOutput]) {
        messages.push(reply);
        let results: Vec<Value> = outputs
            .iter()
            .map(|output| {
                json!({
                    "type": "tool_result",
                    "tool_use_id": output.id,
                    "content": output.text,
                    "is_error": output.is_error,
                })
            })
            .collect();
        messages.push(json!({"role": "user", "content": results}));
    }
}

impl Translate for Translator {
    const STOP_REASON: &'static str = "stopReason";

    fn state(&self) -> &StreamState {
        &self.state
    }

    fn state_mut(&mut self) -> &mut StreamState {
        &mut self.state
    }

    fn translate(&mut self, event: &SseEvent) -> Vec<Event> {
        let raw = &event.data;
        let Some(head) = loose::object::<Head>(raw) else {
            return vec![self.malformed(
                "an event that is not a JSON object (or that names a field twice)",
                raw,
            )];
        };
        // The data repeats the event name as `type`; either will do.
        let kind = head
            .kind
            .get()
            .or(event.event.as_deref())
            .unwrap_or_default();
        match kind {
            // The events of every delta: read from the typed view alone.
            "content_block_delta" => self.block_delta(head.index.0, head.delta.as_ref(), raw),
            "content_block_stop" => self.block_stop(head.index.0, raw),
            "message_stop" => self.finish(),
            // Once per answer or block: read whole.
            "message_start" | "content_block_start" | "message_delta" | "error" => {
                let data: Value = match moat_guest::serde_json::from_str(raw) {
                    Ok(data) => data,
                    Err(_) => return vec![self.malformed("an event that is not JSON", raw)],
                };
                match kind {
                    "message_start" => self.message_start(&data),
                    "content_block_start" => self.block_start(&data, raw),
                    "message_delta" => {
                        if let Some(reason) =
                            data.pointer("/delta/stop_reason").and_then(Value::as_str)
                        {
                            self.state.set_stop_reason(reason);
                        }
                        if let Some(usage) = data.get("usage") {
                            self.read_usage(usage);
                        }
                        Vec::new()
                    }
                    _ => {
                        let failure = stream_error(&data);
                        self.fail(&failure)
                    }
                }
            }
            // `ping` keeps the connection alive; unknown types are ignored
            // so a newer API does not break the adapter.
            _ => Vec::new(),
        }
    }

    /// The body ended before `message_stop`: the answer is cut.
    fn body_ended(&mut self) -> Vec<Event> {
        let failure = Failure::new(
            STREAM_CUT,
            "the response ended before the answer was complete (no message_stop)",
            true,
        );
        self.fail(&failure)
    }

    fn tool_uses(&self) -> u32 {
        self.tool_uses
    }
}

/// The fields of a stream event that every delta needs: a typed view
/// that borrows its text ([`moat_llm_support::loose`]), a field of an
/// unexpected type reading as absent.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Head<'a> {
    #[serde(rename = "type", borrow)]
    kind: Text<'a>,
    index: Count,
    /// Any value, `null` included, counts as a delta.
    #[serde(borrow, deserialize_with = "present")]
    delta: Option<Object<Delta<'a>>>,
}

/// A `content_block_delta`'s delta.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Delta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Text<'a>,
    #[serde(borrow)]
    text: Text<'a>,
    #[serde(borrow)]
    thinking: Text<'a>,
    #[serde(borrow)]
    partial_json: Text<'a>,
    #[serde(borrow)]
    signature: Text<'a>,
}

impl Translator {
    fn message_start(&mut self, data: &Value) -> Vec<Event> {
        self.started = true;
        if let Some(message) = data.get("message") {
            if let Some(id) = message.get("id").and_then(Value::as_str) {
                self.state.set_session(id);
            }
            self.state
                .set_model(message.get("model").and_then(Value::as_str));
            if let Some(usage) = message.get("usage") {
                self.read_usage(usage);
            }
        }
        Vec::new()
    }

    /// Takes the counts a usage object reports; `message_delta` repeats
    /// them cumulatively, so a later value replaces an earlier one.
    fn read_usage(&mut self, usage: &Value) {
        let get = |key: &str| usage.get(key).and_then(Value::as_u64);
        if let Some(n) = get("input_tokens") {
            self.counts.input = Some(n);
        }
        if let Some(n) = get("cache_read_input_tokens") {
            self.counts.cache_read = Some(n);
        }
        if let Some(n) = get("cache_creation_input_tokens") {
            self.counts.cache_write = Some(n);
        }
        if let Some(n) = get("output_tokens") {
            self.counts.output = Some(n);
        }
    }

    fn block_start(&mut self, data: &Value, raw: &str) -> Vec<Event> {
        let (Some(index), Some(block)) = (
            data.get("index").and_then(Value::as_u64),
            data.get("content_block"),
        ) else {
            return vec![self.malformed("a content_block_start without index or block", raw)];
        };
        if !self.blocks.contains_key(&index) && self.blocks.len() >= MAX_BLOCKS {
            self.dropped_blocks = true;
            return Vec::new();
        }
        let text_of = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .map(|t| cut(t, MAX_BLOCK_TEXT))
                .unwrap_or_default()
        };
        let (kind, content, start_input) = match block.get("type").and_then(Value::as_str) {
            Some("text") => (Kind::Text, text_of("text"), None),
            Some("thinking") => (Kind::Thinking, text_of("thinking"), None),
            Some("tool_use") => {
                let id = cut(
                    block.get("id").and_then(Value::as_str).unwrap_or_default(),
                    200,
                );
                let name = cut(
                    block
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                    200,
                );
                let input = block.get("input").filter(|i| i.is_object()).cloned();
                (Kind::ToolUse { id, name }, String::new(), input)
            }
            _ => (Kind::Other(block.clone()), String::new(), None),
        };
        let mut events = Vec::new();
        if matches!(kind, Kind::Text) && !content.is_empty() {
            events.push(self.tag(Event::text_delta(content.as_str())));
        }
        self.blocks.insert(
            index,
            Block {
                kind,
                content,
                start_input,
                signature: text_of("signature"),
                too_long: false,
            },
        );
        events
    }

    fn block_delta(
        &mut self,
        index: Option<u64>,
        delta: Option<&Object<Delta>>,
        raw: &str,
    ) -> Vec<Event> {
        let (Some(index), Some(delta)) = (index, delta) else {
            return vec![self.malformed("a content_block_delta without index or delta", raw)];
        };
        let Some(block) = self.blocks.get_mut(&index) else {
            if self.dropped_blocks {
                return Vec::new();
            }
            return vec![self.malformed("a delta for a block that never started", raw)];
        };
        // A delta that is not an object carries nothing to translate.
        let Object(Some(delta)) = delta else {
            return Vec::new();
        };
        if let (Some("signature_delta"), Kind::Thinking) = (delta.kind.get(), &block.kind) {
            if let Some(piece) = delta.signature.get()
                && block.signature.len() + piece.len() <= MAX_BLOCK_TEXT
            {
                block.signature.push_str(piece);
            }
            return Vec::new();
        }
        let (field, is_text) = match (delta.kind.get(), &block.kind) {
            (Some("text_delta"), Kind::Text) => (&delta.text, true),
            (Some("thinking_delta"), Kind::Thinking) => (&delta.thinking, false),
            (Some("input_json_delta"), Kind::ToolUse { .. }) => (&delta.partial_json, false),
            // Types this adapter does not know carry nothing to translate.
            _ => return Vec::new(),
        };
        let Some(piece) = field.get() else {
            return vec![self.malformed("a delta without its text", raw)];
        };
        if block.content.len() + piece.len() > MAX_BLOCK_TEXT {
            block.too_long = true;
        } else {
            block.content.push_str(piece);
        }
        if is_text && !piece.is_empty() {
            return vec![self.tag(Event::text_delta(piece))];
        }
        Vec::new()
    }

    fn block_stop(&mut self, index: Option<u64>, raw: &str) -> Vec<Event> {
        let Some(index) = index else {
            return vec![self.malformed("a content_block_stop without index", raw)];
        };
        let Some(block) = self.blocks.remove(&index) else {
            return Vec::new();
        };
        match block.kind {
            Kind::Text if block.content.is_empty() => Vec::new(),
            Kind::Text => {
                if self.result.len() + block.content.len() > MAX_RESULT {
                    self.result_too_long = true;
                } else {
                    self.result.push_str(&block.content);
                }
                if block.too_long {
                    return vec![self.malformed_text("a text block longer than 512 KiB; its deltas went out, the assembled text did not")];
                }
                self.reply
                    .push(json!({"type": "text", "text": block.content}));
                vec![self.tag(Event::text(block.content))]
            }
            Kind::Thinking => {
                self.reply.push(json!({
                    "type": "thinking",
                    "thinking": block.content,
                    "signature": block.signature,
                }));
                if block.content.is_empty() {
                    return Vec::new();
                }
                vec![self.tag(Event::thinking(block.content))]
            }
            Kind::ToolUse { id, name } => {
                match tool_input(
                    &block.content,
                    block.start_input,
                    block.too_long,
                    &name,
                    &id,
                ) {
                    Ok(input) => {
                        self.tool_uses += 1;
                        self.reply.push(json!({
                            "type": "tool_use",
                            "id": id,
                            "name": name,
                            "input": input,
                        }));
                        vec![self.tag(ToolUseEvent::new(name, id, &input).into())]
                    }
                    Err(reason) => {
                        let quoted = cut(&block.content, MAX_QUOTED_EVENT);
                        vec![self.malformed_text(&format!(
                            "tool call `{name}` dropped: {reason}: {quoted}"
                        ))]
                    }
                }
            }
            Kind::Other(raw) => {
                self.reply.push(raw);
                Vec::new()
            }
        }
    }

    /// `message_stop`: the answer is complete.
    fn finish(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        if self.dropped_blocks {
            events.push(self.malformed_text(&format!(
                "the answer had more than {MAX_BLOCKS} content blocks; the rest were dropped"
            )));
        }
        let mut done = DoneEvent::new(DoneStatus::Success).with_tool_uses(self.tool_uses);
        if let Some(tokens) = self.token_report() {
            done = done.with_tokens(tokens);
        }
        if !self.result.is_empty() && !self.result_too_long {
            done = done.with_result(self.result.as_str());
        }
        events.push(self.state.finish(done, Self::STOP_REASON));
        events
    }

    /// The run's tokens: the input total includes the cache reads and
    /// writes, which the API counts apart from `input_tokens`. Absent when
    /// the input or output count never came.
    fn token_report(&self) -> Option<TokenReport> {
        let counts = self.counts;
        let cache_read = counts.cache_read.unwrap_or(0);
        let cache_write = counts.cache_write.unwrap_or(0);
        let total = counts
            .input?
            .checked_add(cache_read)?
            .checked_add(cache_write)?;
        let mut input = InputTokens::new(total);
        if let Some(n) = counts.cache_read {
            input = input.with_cache_read(n);
        }
        if let Some(n) = counts.cache_write {
            input = input.with_cache_write(n);
        }
        Some(TokenReport::new(
            TokenCoverage::Complete,
            input,
            OutputTokens::new(counts.output?),
        ))
    }

    fn malformed(&self, what: &str, raw: &str) -> Event {
        self.state.malformed(what, raw)
    }

    fn malformed_text(&self, message: &str) -> Event {
        self.state.malformed_text(message)
    }

    fn tag(&self, event: Event) -> Event {
        self.state.tag(event)
    }
}

/// A tool call's input: the streamed JSON, or the input given whole at the
/// block's start when nothing was streamed.
fn tool_input(
    json_text: &str,
    start_input: Option<Value>,
    too_long: bool,
    name: &str,
    id: &str,
) -> Result<Value, &'static str> {
    if name.is_empty() || id.is_empty() {
        return Err("the server did not name the tool or its id");
    }
    if too_long {
        return Err("its input is longer than 512 KiB");
    }
    if json_text.trim().is_empty() {
        return Ok(start_input.unwrap_or_else(|| Value::Object(Map::new())));
    }
    match moat_guest::serde_json::from_str(json_text) {
        Ok(Value::Object(input)) => Ok(Value::Object(input)),
        Ok(_) => Err("its input is not a JSON object"),
        Err(_) => Err("its input is not valid JSON"),
    }
}

/// A mid-stream `error` event as a failure, by the API's error type.
fn stream_error(data: &Value) -> Failure {
    let kind = data
        .pointer("/error/type")
        .and_then(Value::as_str)
        .unwrap_or("unknown_error");
    let message = data
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    let (code, recoverable) = match kind {
        "overloaded_error" => ("OVERLOADED", true),
        "rate_limit_error" => ("RATE_LIMITED", true),
        "api_error" | "timeout_error" => ("SERVER_ERROR", true),
        "authentication_error" | "permission_error" => ("AUTH_FAILED", false),
        "not_found_error" => ("MODEL_NOT_FOUND", false),
        "invalid_request_error" | "request_too_large" => ("REQUEST_REJECTED", false),
        _ => ("SERVER_ERROR", true),
    };
    Failure::new(
        code,
        format!(
            "the server failed mid-stream ({}): {}",
            cut(kind, 100),
            cut(message, 500)
        ),
        recoverable,
    )
}

#[cfg(test)]
mod tests;
