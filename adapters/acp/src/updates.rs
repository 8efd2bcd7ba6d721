//! `session/update` notifications → Unified Event Stream events, and the
//! bookkeeping of the agent's tool calls.
//!
//! ACP has no tool names: a tool call carries a `kind` (`read`, `edit`,
//! `execute`, …; anything unknown is `other`) and a human title. The kind
//! is the tool's name in moat's events — a small, fixed vocabulary the run's
//! tool policy (`--allowed-tools edit,read`) can name — and the title its
//! description.
//!
//! A call is announced (`tool_use`) once it leaves `pending`, or when its
//! permission request is allowed: an agent reports a call as pending before
//! asking whether it may make it, and a call that is then refused was never
//! made.

use std::collections::HashMap;
use std::time::Instant;

use moat_cli_support::clip;
use moat_guest::json::{Map, Value, json};
use moat_guest::{Event, ToolResultEvent, ToolStatus, ToolUseEvent};

/// The tool kinds of ACP protocol version 1.
pub const KINDS: &[&str] = &[
    "read",
    "edit",
    "delete",
    "move",
    "search",
    "execute",
    "think",
    "fetch",
    "switch_mode",
    "other",
];

/// The most tool calls tracked in one run (an agent could invent ids
/// forever).
const MAX_CALLS: usize = 10_000;

/// The longest tool call id and title kept.
const MAX_ID: usize = 256;
const MAX_TITLE: usize = 1_000;

/// The most of the agent's answer kept as the run's result.
const MAX_RESULT: usize = 1024 * 1024;

/// Where a tool call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Reported, not (yet) made.
    Pending,
    /// Announced with `tool_use`.
    Announced,
    /// Its `tool_result` was emitted, or it was refused: later updates are
    /// dropped.
    Closed,
}

/// One tool call of the agent.
#[derive(Debug, Clone)]
struct ToolCall {
    kind: String,
    title: Option<String>,
    input: Value,
    stage: Stage,
    announced_at: Option<Instant>,
    /// Allowed through a permission request.
    permitted: bool,
}

/// The fields of a tool call the agent reported (in `tool_call`,
/// `tool_call_update` or a permission request).
#[derive(Debug, Clone, PartialEq)]
pub struct Reported {
    /// The call's id.
    pub id: String,
    /// Its kind, [`KINDS`] only; `None` when not given.
    pub kind: Option<String>,
    /// Its title.
    pub title: Option<String>,
    /// Its input (`rawInput`), as a JSON object.
    pub input: Option<Value>,
    /// Its status (`pending`, `in_progress`, `completed`, `failed`).
    pub status: Option<String>,
    /// What it produced: `rawOutput`, or its content.
    pub output: Option<Value>,
}

impl Reported {
    /// The fields of a tool call object; `Err` says what is wrong with it.
    pub fn parse(call: &Value) -> Result<Reported, String> {
        let id = call["toolCallId"]
            .as_str()
            .filter(|id| !id.is_empty() && id.len() <= MAX_ID)
            .ok_or("a tool call without a toolCallId (a string of 1 to 256 bytes)")?;
        let kind = call["kind"].as_str().map(|kind| {
            if KINDS.contains(&kind) {
                kind.to_owned()
            } else {
                "other".to_owned()
            }
        });
        let status = match call["status"].as_str() {
            None => None,
            Some(status @ ("pending" | "in_progress" | "completed" | "failed")) => {
                Some(status.to_owned())
            }
            Some(other) => {
                return Err(format!(
                    "a tool call status {:?} that is none of pending, in_progress, completed, failed",
                    clip(other, 100)
                ));
            }
        };
        let input = match &call["rawInput"] {
            Value::Null => None,
            other => Some(moat_cli_support::tool_input(other)),
        };
        let output = match (&call["rawOutput"], &call["content"]) {
            (Value::Null, Value::Null) => None,
            (Value::Null, content) => Some(content_output(content)),
            (raw, _) => Some(raw.clone()),
        };
        Ok(Reported {
            id: id.to_owned(),
            kind,
            title: call["title"]
                .as_str()
                .map(|title| clip(title, MAX_TITLE).to_owned()),
            input,
            status,
            output,
        })
    }
}

/// A tool call's content as an event's output: its text when it is all
/// text, else the content as it came.
fn content_output(content: &Value) -> Value {
    let Some(items) = content.as_array() else {
        return content.clone();
    };
    // ACP wraps each block: {"type":"content","content":{"type":"text",…}}.
    let blocks: Vec<Value> = items
        .iter()
        .map(|item| match item["type"].as_str() {
            Some("content") => item["content"].clone(),
            _ => item.clone(),
        })
        .collect();
    moat_cli_support::tool_output(&Value::Array(blocks))
}

/// The agent's session updates, translated one by one.
#[derive(Debug, Default)]
pub struct Updates {
    calls: HashMap<String, ToolCall>,
    tool_uses: u32,
    answer: String,
}

impl Updates {
    /// Distinct tool calls announced so far.
    pub fn tool_uses(&self) -> u32 {
        self.tool_uses
    }

    /// The agent's answer so far (its message text), bounded.
    pub fn answer(&self) -> &str {
        &self.answer
    }

    /// Translates the `update` of one `session/update` notification.
    pub fn translate(&mut self, update: &Value) -> Vec<Event> {
        let Some(tag) = update["sessionUpdate"].as_str() else {
            return vec![malformed("a session/update without a sessionUpdate tag")];
        };
        match tag {
            "agent_message_chunk" => self.message(&update["content"]),
            "agent_thought_chunk" => match update["content"]["text"].as_str() {
                Some(text) => vec![Event::thinking(text)],
                None => Vec::new(),
            },
            "tool_call" | "tool_call_update" => match Reported::parse(update) {
                Ok(reported) => self.report(reported),
                Err(why) => vec![malformed(&format!("{tag}: {why}"))],
            },
            "plan" => match update["entries"].as_array() {
                Some(entries) => vec![Event::extension("acp:plan", &json!({"entries": entries}))],
                None => vec![malformed("a plan without entries")],
            },
            // The prompt echoed back, and the agent's menus and modes:
            // nothing a run's consumer acts on.
            _ => Vec::new(),
        }
    }

    /// A chunk of the agent's message: text is streamed; any other block
    /// (an image, a resource) is passed on as an `acp:content` event.
    fn message(&mut self, content: &Value) -> Vec<Event> {
        match (content["type"].as_str(), content["text"].as_str()) {
            (Some("text"), Some(text)) => {
                if self.answer.len() + text.len() <= MAX_RESULT {
                    self.answer.push_str(text);
                }
                vec![Event::text_delta(text)]
            }
            (Some(_), _) => vec![Event::extension(
                "acp:content",
                &json!({"role": "agent", "content": content}),
            )],
            _ => vec![malformed("an agent message chunk without a content block")],
        }
    }

    /// A tool call reported in `tool_call` or `tool_call_update`.
    fn report(&mut self, reported: Reported) -> Vec<Event> {
        let Some(call) = self.remember(&reported) else {
            return vec![malformed("more tool calls than a run keeps track of")];
        };
        if call.stage == Stage::Closed {
            return Vec::new();
        }
        let status = reported.status.as_deref();
        let mut events = Vec::new();
        if call.stage == Stage::Pending && matches!(status, Some(s) if s != "pending") {
            events.push(self.announce(&reported.id));
        }
        if let Some(status @ ("completed" | "failed")) = status {
            events.push(self.finish(&reported.id, status, reported.output));
        }
        events
    }

    /// Records what the agent reported of a call, merging it into what was
    /// known; the call, unless too many are tracked.
    fn remember(&mut self, reported: &Reported) -> Option<&ToolCall> {
        if !self.calls.contains_key(&reported.id) {
            if self.calls.len() >= MAX_CALLS {
                return None;
            }
            self.calls.insert(
                reported.id.clone(),
                ToolCall {
                    kind: "other".into(),
                    title: None,
                    input: Value::Object(Map::new()),
                    stage: Stage::Pending,
                    announced_at: None,
                    permitted: false,
                },
            );
        }
        let call = self.calls.get_mut(&reported.id)?;
        // Once announced, what the consumer saw stays as it was.
        if call.stage == Stage::Pending {
            if let Some(kind) = &reported.kind {
                call.kind = kind.clone();
            }
            if let Some(title) = &reported.title {
                call.title = Some(title.clone());
            }
            if let Some(input) = &reported.input {
                call.input = input.clone();
            }
        }
        Some(call)
    }

    /// The tool name (kind) of a call the agent asks about, recording it.
    pub fn asked(&mut self, reported: &Reported) -> Option<String> {
        self.remember(reported).map(|call| call.kind.clone())
    }

    /// The input of a known call.
    pub fn input(&self, id: &str) -> Value {
        self.calls
            .get(id)
            .map(|call| call.input.clone())
            .unwrap_or_else(|| Value::Object(Map::new()))
    }

    /// The call was allowed: its `tool_use`, unless already announced.
    pub fn allowed(&mut self, id: &str) -> Vec<Event> {
        let Some(call) = self.calls.get_mut(id) else {
            return Vec::new();
        };
        call.permitted = true;
        if call.stage == Stage::Pending {
            vec![self.announce(id)]
        } else {
            Vec::new()
        }
    }

    /// Whether the call was allowed through a permission request.
    pub fn permitted(&self, id: &str) -> bool {
        self.calls.get(id).is_some_and(|call| call.permitted)
    }

    /// The call was refused: it ends here, and later updates of it are
    /// dropped. (The refusal is reported by the caller: a `tool_result`
    /// would answer a `tool_use` the run never saw, the call never having
    /// been made.)
    pub fn refused(&mut self, id: &str) {
        if let Some(call) = self.calls.get_mut(id) {
            call.stage = Stage::Closed;
        }
    }

    fn announce(&mut self, id: &str) -> Event {
        let call = self.calls.get_mut(id).expect("the call is tracked");
        call.stage = Stage::Announced;
        call.announced_at = Some(Instant::now());
        self.tool_uses += 1;
        let mut event = ToolUseEvent::new(call.kind.clone(), id, &call.input);
        if let Some(title) = &call.title {
            event = event.with_description(title.clone());
        }
        event.into()
    }

    fn finish(&mut self, id: &str, status: &str, output: Option<Value>) -> Event {
        let call = self.calls.get_mut(id).expect("the call is tracked");
        call.stage = Stage::Closed;
        let status = if status == "completed" {
            ToolStatus::Success
        } else {
            ToolStatus::Error
        };
        let mut result = ToolResultEvent::new(
            id,
            call.kind.clone(),
            status,
            &output.unwrap_or(Value::Null),
        );
        if let Some(at) = call.announced_at {
            result = result.with_duration_ms(u64::try_from(at.elapsed().as_millis()).unwrap_or(0));
        }
        result.into()
    }
}

/// A recoverable error for an update that is not what ACP says: it is
/// skipped and the run goes on.
fn malformed(what: &str) -> Event {
    Event::error(
        "INVALID_AGENT_MESSAGE",
        format!("skipped a session/update from the agent: {what}"),
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use moat_guest::EventKind;

    fn kinds(events: &[Event]) -> Vec<&'static str> {
        events
            .iter()
            .map(|event| match &event.kind {
                EventKind::TextDelta(_) => "text_delta",
                EventKind::Thinking(_) => "thinking",
                EventKind::ToolUse(_) => "tool_use",
                EventKind::ToolResult(_) => "tool_result",
                EventKind::Extension(_) => "extension",
                EventKind::Error(_) => "error",
                _ => "other",
            })
            .collect()
    }

    #[test]
    fn text_thoughts_and_plans_become_events() {
        let mut updates = Updates::default();
        let text = updates.translate(
            &json!({"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}),
        );
        assert_eq!(text, [Event::text_delta("hi")]);
        let thought = updates.translate(
            &json!({"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"}}),
        );
        assert_eq!(thought, [Event::thinking("hmm")]);
        let plan = updates.translate(&json!({"sessionUpdate":"plan","entries":[{"content":"a","priority":"high","status":"pending"}]}));
        assert_eq!(kinds(&plan), ["extension"]);
        assert!(
            updates
                .translate(&json!({"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"x"}}))
                .is_empty()
        );
        assert_eq!(updates.answer(), "hi");
    }

    #[test]
    fn a_call_is_announced_when_it_leaves_pending_and_finished_once() {
        let mut updates = Updates::default();
        let pending = updates.translate(&json!({"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read a","kind":"read","status":"pending","rawInput":{"path":"/a"}}));
        assert!(pending.is_empty());
        let running = updates.translate(
            &json!({"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"in_progress"}),
        );
        let EventKind::ToolUse(call) = &running[0].kind else {
            panic!("{running:?}")
        };
        assert_eq!(
            (call.tool_name.as_str(), call.input.as_str()),
            ("read", r#"{"path":"/a"}"#)
        );
        assert_eq!(call.description.as_deref(), Some("Read a"));
        let done = updates.translate(&json!({"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"data"}}]}));
        let EventKind::ToolResult(result) = &done[0].kind else {
            panic!("{done:?}")
        };
        assert_eq!(
            (result.status, result.output.as_str()),
            (ToolStatus::Success, r#""data""#)
        );
        assert!(
            updates
                .translate(
                    &json!({"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"failed"})
                )
                .is_empty()
        );
        assert_eq!(updates.tool_uses(), 1);
    }

    #[test]
    fn a_call_first_seen_finished_is_announced_then_finished_and_unknown_kinds_are_other() {
        let mut updates = Updates::default();
        let events = updates.translate(&json!({"sessionUpdate":"tool_call","toolCallId":"t2","kind":"mcp__x","status":"failed","rawOutput":{"error":"no"}}));
        assert_eq!(kinds(&events), ["tool_use", "tool_result"]);
        let EventKind::ToolResult(result) = &events[1].kind else {
            panic!()
        };
        assert_eq!(
            (result.tool_name.as_str(), result.status),
            ("other", ToolStatus::Error)
        );
    }

    #[test]
    fn malformed_updates_are_recoverable_errors() {
        let mut updates = Updates::default();
        for bad in [
            json!({"content": {}}),
            json!({"sessionUpdate":"tool_call","title":"no id"}),
            json!({"sessionUpdate":"tool_call","toolCallId":"t","status":"exploded"}),
            json!({"sessionUpdate":"agent_message_chunk"}),
        ] {
            let events = updates.translate(&bad);
            assert_eq!(kinds(&events), ["error"], "{bad}");
        }
    }

    #[test]
    fn a_refused_call_ends_and_its_updates_are_dropped() {
        let mut updates = Updates::default();
        let reported =
            Reported::parse(&json!({"toolCallId":"t3","kind":"execute","title":"rm -rf /"}))
                .unwrap();
        assert_eq!(updates.asked(&reported).as_deref(), Some("execute"));
        updates.refused("t3");
        assert!(
            updates
                .translate(
                    &json!({"sessionUpdate":"tool_call_update","toolCallId":"t3","status":"failed"})
                )
                .is_empty()
        );
        assert_eq!(updates.tool_uses(), 0);
    }
}
