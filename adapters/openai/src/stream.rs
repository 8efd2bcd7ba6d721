//! From Chat Completions stream chunks to moat events.
//!
//! Every value comes from the server and is untrusted: a chunk that is not
//! JSON, or not the shape expected, is reported as a recoverable
//! `MALFORMED_EVENT` error and skipped; nothing here panics on input.

use std::collections::BTreeMap;

use moat_guest::json::{Map, Value, json};
use moat_guest::sse::SseEvent;
use moat_guest::{
    DoneEvent, DoneStatus, Event, InputTokens, OutputTokens, TokenCoverage, TokenReport,
    ToolUseEvent, Usage,
};
use moat_llm_support::loose::{self, Count, List, Object, Text, present};
use moat_llm_support::mcp::McpTool;
use moat_llm_support::stream::MAX_QUOTED_EVENT;
use moat_llm_support::{
    Conversation, Failure, STREAM_CUT, StreamState, ToolOutput, Translate, cut,
};
use serde::Deserialize;
/// Most tool calls kept from one answer.
const MAX_TOOL_CALLS: usize = 128;
/// Longest arguments text of one tool call.
const MAX_ARGUMENTS: usize = 1024 * 1024;
/// Longest text repeated in the `text` event and the done's result; the
/// host refuses events past 1 MiB, and the deltas carried it all anyway.
const MAX_ASSEMBLED_TEXT: usize = 512 * 1024;

/// A Chat Completions stream chunk, as far as it is read: a typed view
/// that borrows its text ([`moat_llm_support::loose`]), a field of an
/// unexpected type reading as absent.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Chunk<'a> {
    /// Any value, `null` included, says the server failed.
    #[serde(deserialize_with = "present")]
    error: Option<Value>,
    #[serde(borrow)]
    id: Text<'a>,
    #[serde(borrow)]
    model: Text<'a>,
    usage: Option<Value>,
    #[serde(borrow)]
    choices: List<Object<Choice<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Choice<'a> {
    index: Count,
    #[serde(borrow)]
    delta: Object<Delta<'a>>,
    #[serde(borrow)]
    finish_reason: Text<'a>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Delta<'a> {
    #[serde(borrow)]
    content: Text<'a>,
    /// Reasoning, as vLLM and DeepSeek name it, then as OpenRouter and
    /// llama.cpp do.
    #[serde(borrow)]
    reasoning_content: Text<'a>,
    #[serde(borrow)]
    reasoning: Text<'a>,
    tool_calls: Option<Value>,
}

/// A tool call being streamed.
#[derive(Debug, Default)]
struct ToolCall {
    id: String,
    name: String,
    arguments: String,
    too_long: bool,
}

/// The state of one streamed answer.
#[derive(Debug, Default)]
pub struct Translator {
    /// The session id, model, finish reason, and whether the run ended.
    state: StreamState,
    text: String,
    text_too_long: bool,
    /// Reasoning streamed by OpenAI-compatible servers (vLLM, DeepSeek,
    /// llama.cpp, OpenRouter) as `reasoning_content` or `reasoning`, until
    /// it is emitted as one `thinking` event.
    reasoning: String,
    tools: BTreeMap<u64, ToolCall>,
    dropped_tools: bool,
    usage: Option<TokenReport>,
    /// The answer's tool calls as Chat Completions takes them back
    /// (`tool_calls` of an assistant message), once it is complete.
    reply_calls: Vec<Value>,
}

impl Conversation for Translator {
    fn tool_entry(name: &str, tool: &McpTool) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": name,
                "description": tool.description,
                "parameters": tool.input_schema,
            }
        })
    }

    fn take_reply(&mut self) -> Value {
        let content = if self.text.is_empty() {
            Value::Null
        } else {
            Value::String(std::mem::take(&mut self.text))
        };
        let mut reply = json!({"role": "assistant", "content": content});
        if !self.reply_calls.is_empty() {
            reply["tool_calls"] = Value::Array(std::mem::take(&mut self.reply_calls));
        }
        reply
    }

    /// Each output is a `tool` message answering its call by id; Chat
    /// Completions has no error flag, so a failure says so in its text.
    fn append_turn(messages: &mut Vec<Value>, reply: Value, outputs: &[ToolOutput]) {
        messages.push(reply);
        for output in outputs {
            let content = if output.is_error {
                format!("Error: {}", output.text)
            } else {
                output.text.clone()
            };
            messages.push(json!({
                "role": "tool",
                "tool_call_id": output.id,
                "content": content,
            }));
        }
    }
}

impl Translate for Translator {
    const STOP_REASON: &'static str = "finishReason";

    fn state(&self) -> &StreamState {
        &self.state
    }

    fn state_mut(&mut self) -> &mut StreamState {
        &mut self.state
    }

    fn translate(&mut self, event: &SseEvent) -> Vec<Event> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return self.finish();
        }
        let Some(chunk) = loose::object::<Chunk>(data) else {
            return vec![self.malformed(
                "a chunk that is not a JSON object (or that names a field twice)",
                data,
            )];
        };
        if let Some(error) = &chunk.error {
            // OpenAI-compatible servers (vLLM, OpenRouter, llama.cpp) report
            // a failure mid-stream as a chunk with an `error` object.
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .or_else(|| error.as_str())
                .unwrap_or("no message");
            let failure = Failure::new(
                "SERVER_ERROR",
                format!("the server failed mid-stream: {}", cut(message, 500)),
                true,
            );
            return self.fail(&failure);
        }
        let mut events = Vec::new();
        if !self.state.has_session()
            && let Some(id) = chunk.id.get()
        {
            self.state.set_session(id);
        }
        if !self.state.has_model() {
            self.state.set_model(chunk.model.get());
        }
        if let Some(usage) = &chunk.usage {
            match token_report(usage) {
                Some(report) => self.usage = Some(report),
                None => events.push(self.malformed("a usage object without token counts", data)),
            }
        }
        // Only the first choice is followed (`n` is left at 1); an entry
        // that is not an object counts as one without fields.
        let choice = chunk.choices.0.as_deref().and_then(|choices| {
            choices
                .iter()
                .find(|c| c.0.as_ref().map_or(0, |c| c.index.0.unwrap_or(0)) == 0)
        });
        if let Some(Object(Some(choice))) = choice {
            if let Object(Some(delta)) = &choice.delta {
                if let Some(reasoning) = delta
                    .reasoning_content
                    .get()
                    .or(delta.reasoning.get())
                    .filter(|r| !r.is_empty())
                    && self.reasoning.len() + reasoning.len() <= MAX_ASSEMBLED_TEXT
                {
                    self.reasoning.push_str(reasoning);
                }
                let content = delta.content.get().filter(|c| !c.is_empty());
                if content.is_some() || delta.tool_calls.is_some() {
                    // The reasoning is over once the answer starts.
                    events.extend(self.take_thinking());
                }
                if let Some(content) = content {
                    self.push_text(content);
                    events.push(self.tag(Event::text_delta(content)));
                }
                if let Some(calls) = delta.tool_calls.as_ref().and_then(Value::as_array) {
                    for (position, call) in calls.iter().enumerate() {
                        if let Some(error) = self.tool_fragment(position, call) {
                            events.push(self.malformed(error, data));
                        }
                    }
                }
            }
            if let Some(reason) = choice.finish_reason.get() {
                self.state.set_stop_reason(reason);
            }
        }
        events
    }

    /// OpenAI-compatible servers (Ollama, llama.cpp) may ignore
    /// `stream: true` and answer with one `chat.completion`.
    fn takes_whole_answers(&self) -> bool {
        true
    }

    /// A whole, non-streamed completion (`chat.completion`), translated as
    /// one chunk carrying the whole message, then the end of the answer.
    fn on_complete(&mut self, body: &[u8]) -> Vec<Event> {
        let completion: Value = match moat_guest::serde_json::from_slice(body) {
            Ok(Value::Object(completion)) => Value::Object(completion),
            _ => {
                let text = String::from_utf8_lossy(body);
                let mut events = vec![self.malformed("a JSON answer that is not an object", &text)];
                events.extend(self.end_of_body());
                return events;
            }
        };
        let mut chunk = completion.clone();
        if let Some(choices) = completion.get("choices").and_then(Value::as_array) {
            let choices: Vec<Value> = choices
                .iter()
                .map(|choice| {
                    json!({
                        "index": choice.get("index").cloned().unwrap_or(json!(0)),
                        "delta": choice.get("message").cloned().unwrap_or(Value::Null),
                        "finish_reason": choice.get("finish_reason").cloned().unwrap_or(Value::Null),
                    })
                })
                .collect();
            chunk["choices"] = Value::Array(choices);
        }
        let mut events = self.on_event(&SseEvent {
            data: chunk.to_string(),
            ..SseEvent::default()
        });
        events.extend(self.end_of_body());
        events
    }

    /// The stream's body ended without `[DONE]`.
    fn body_ended(&mut self) -> Vec<Event> {
        // Some servers end the body without `[DONE]`; a finish reason says
        // the answer was complete all the same.
        if self.state.stop_reason().is_some() {
            return self.finish();
        }
        let failure = Failure::new(
            STREAM_CUT,
            "the response ended before the answer was complete (no finish_reason, no [DONE])",
            true,
        );
        self.fail(&failure)
    }
}

impl Translator {
    /// The answer is complete: the assembled text, the tool calls, done.
    fn finish(&mut self) -> Vec<Event> {
        let mut events: Vec<Event> = self.take_thinking().into_iter().collect();
        let keep_text = !self.text.is_empty() && !self.text_too_long;
        if keep_text {
            events.push(self.tag(Event::text(self.text.as_str())));
        }
        let mut tool_uses = 0u32;
        for (index, call) in std::mem::take(&mut self.tools) {
            match parse_arguments(&call) {
                Ok(input) => {
                    tool_uses += 1;
                    let id = if call.id.is_empty() {
                        format!("call_{index}")
                    } else {
                        call.id
                    };
                    let arguments = if call.arguments.trim().is_empty() {
                        "{}".to_owned()
                    } else {
                        call.arguments
                    };
                    self.reply_calls.push(json!({
                        "id": id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": arguments},
                    }));
                    events.push(self.tag(ToolUseEvent::new(call.name, id, &input).into()));
                }
                Err(reason) => {
                    let quoted = cut(&call.arguments, MAX_QUOTED_EVENT);
                    events.push(self.state.malformed_text(&format!(
                        "tool call `{}` dropped: {reason}: {quoted}",
                        call.name
                    )));
                }
            }
        }
        if self.dropped_tools {
            events.push(self.state.malformed_text(&format!(
                "the answer had more than {MAX_TOOL_CALLS} tool calls; the rest were dropped"
            )));
        }
        let mut usage = Usage::new(tool_uses);
        if let Some(tokens) = self.usage {
            usage = usage.with_tokens(tokens);
        }
        let mut done = DoneEvent::new(DoneStatus::Success).with_usage(usage);
        if keep_text {
            done = done.with_result(self.text.as_str());
        }
        events.push(self.state.finish(done, Self::STOP_REASON));
        events
    }

    /// The reasoning so far as a `thinking` event, once.
    fn take_thinking(&mut self) -> Option<Event> {
        if self.reasoning.is_empty() {
            return None;
        }
        let summary = std::mem::take(&mut self.reasoning);
        Some(self.tag(Event::thinking(summary)))
    }

    fn push_text(&mut self, content: &str) {
        if self.text.len() + content.len() > MAX_ASSEMBLED_TEXT {
            self.text_too_long = true;
            self.text = String::new();
        }
        if !self.text_too_long {
            self.text.push_str(content);
        }
    }

    /// Adds one fragment of a streamed tool call; an error says why it was
    /// skipped.
    fn tool_fragment(&mut self, position: usize, call: &Value) -> Option<&'static str> {
        if !call.is_object() {
            return Some("a tool call fragment that is not an object");
        }
        // The first fragment of a call carries id and name, later ones more
        // arguments; `index` ties them (servers that send whole calls may
        // leave it out).
        let index = call
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position as u64);
        if !self.tools.contains_key(&index) && self.tools.len() >= MAX_TOOL_CALLS {
            self.dropped_tools = true;
            return None;
        }
        let entry = self.tools.entry(index).or_default();
        if let Some(id) = call.get("id").and_then(Value::as_str)
            && !id.is_empty()
        {
            entry.id = cut(id, 200);
        }
        let function = call.get("function");
        if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str)
            && !name.is_empty()
        {
            entry.name = cut(name, 200);
        }
        if let Some(arguments) = function
            .and_then(|f| f.get("arguments"))
            .and_then(Value::as_str)
        {
            if entry.arguments.len() + arguments.len() > MAX_ARGUMENTS {
                entry.too_long = true;
            } else {
                entry.arguments.push_str(arguments);
            }
        }
        None
    }

    fn malformed(&self, what: &str, data: &str) -> Event {
        self.state.malformed(what, data)
    }

    fn tag(&self, event: Event) -> Event {
        self.state.tag(event)
    }
}

/// The tool call's input: its arguments as a JSON object (empty arguments
/// are an empty object).
fn parse_arguments(call: &ToolCall) -> Result<Value, &'static str> {
    if call.name.is_empty() {
        return Err("the server never named the tool");
    }
    if call.too_long {
        return Err("its arguments are longer than 1 MiB");
    }
    if call.arguments.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match moat_guest::serde_json::from_str(&call.arguments) {
        Ok(Value::Object(input)) => Ok(Value::Object(input)),
        Ok(_) => Err("its arguments are not a JSON object"),
        Err(_) => Err("its arguments are not valid JSON"),
    }
}

/// The token report of a `usage` object: `prompt_tokens` and
/// `completion_tokens` are required, their details taken when present.
fn token_report(usage: &Value) -> Option<TokenReport> {
    let input = usage.get("prompt_tokens")?.as_u64()?;
    let output = usage.get("completion_tokens")?.as_u64()?;
    let mut input = InputTokens::new(input);
    // A detail larger than its total is inconsistent: left out, not
    // corrected (a number moat reports is the vendor's, or absent).
    if let Some(cached) = usage
        .pointer("/prompt_tokens_details/cached_tokens")
        .and_then(Value::as_u64)
        .filter(|cached| *cached <= input.total)
    {
        input = input.with_cache_read(cached);
    }
    let mut output = OutputTokens::new(output);
    if let Some(reasoning) = usage
        .pointer("/completion_tokens_details/reasoning_tokens")
        .and_then(Value::as_u64)
        .filter(|reasoning| *reasoning <= output.total)
    {
        output = output.with_reasoning(reasoning);
    }
    Some(TokenReport::new(TokenCoverage::Complete, input, output))
}

#[cfg(test)]
mod tests;
