//! A run's events as ACP `session/update`s, and its `done` as the prompt's
//! stop reason. What has no place in ACP (`init`, usage, moat's own
//! events) is left out: the run's record keeps it.

use std::collections::HashMap;

use serde_json::{Value, json};

use moat_engine::{AgentEvent, DoneStatus, EventPayload, ToolStatus};

/// Turns one run's events into updates, in order. It remembers what the
/// run streamed: the full `text` that follows a run's deltas repeats
/// them, and a `tool_result` needs its call's name.
#[derive(Debug, Default)]
pub struct Updates {
    /// Deltas were sent since the last full text.
    streamed: bool,
    /// The tool calls reported so far, by id.
    calls: HashMap<String, String>,
}

impl Updates {
    /// The `update` objects `event` becomes (none, one or two).
    pub fn of(&mut self, event: &AgentEvent) -> Vec<Value> {
        match &event.payload {
            EventPayload::TextDelta(text) => {
                self.streamed = true;
                vec![chunk("agent_message_chunk", &text.delta)]
            }
            EventPayload::Text(text) => {
                let streamed = std::mem::take(&mut self.streamed);
                match streamed || text.content.is_empty() {
                    true => Vec::new(),
                    false => vec![chunk("agent_message_chunk", &text.content)],
                }
            }
            EventPayload::Thinking(thinking) => {
                vec![chunk("agent_thought_chunk", &thinking.summary)]
            }
            EventPayload::ToolUse(call) => {
                self.calls
                    .insert(call.tool_use_id.clone(), call.tool_name.clone());
                vec![json!({
                    "sessionUpdate": "tool_call",
                    "toolCallId": call.tool_use_id,
                    "title": call.description.as_deref().unwrap_or(&call.tool_name),
                    "kind": kind_of(&call.tool_name),
                    "status": "in_progress",
                    "rawInput": call.input,
                })]
            }
            EventPayload::ToolResult(result) => {
                let mut updates = Vec::new();
                // A result whose call was never reported still shows: the
                // editor learns of the call here.
                if !self.calls.contains_key(&result.tool_use_id) {
                    self.calls
                        .insert(result.tool_use_id.clone(), result.tool_name.clone());
                    updates.push(json!({
                        "sessionUpdate": "tool_call",
                        "toolCallId": result.tool_use_id,
                        "title": result.tool_name,
                        "kind": kind_of(&result.tool_name),
                        "status": "in_progress",
                    }));
                }
                let status = match result.status {
                    ToolStatus::Success => "completed",
                    ToolStatus::Error | ToolStatus::Denied => "failed",
                };
                let mut update = json!({
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": result.tool_use_id,
                    "status": status,
                    "rawOutput": result.output,
                });
                if let Some(text) = output_text(&result.output, result.status) {
                    update["content"] =
                        json!([{"type": "content", "content": {"type": "text", "text": text}}]);
                }
                updates.push(update);
                updates
            }
            // A warning the run goes on after: the user sees it set apart,
            // in the agent's thoughts. A fatal one is the prompt's error.
            EventPayload::Error(error) if error.recoverable => {
                vec![chunk(
                    "agent_thought_chunk",
                    &format!("moat: {}\n", error.message),
                )]
            }
            EventPayload::Extension(extension) => plan(&extension.payload)
                .filter(|_| extension.name.ends_with(":plan"))
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// A streamed piece of text of `kind` (`agent_message_chunk`,
/// `agent_thought_chunk`).
fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
}

/// A plan an adapter reported as a `vendor:plan` event in ACP's shape
/// (`{entries: [{content, priority, status}]}`), checked entry by entry.
fn plan(payload: &Value) -> Option<Value> {
    let entries = payload.get("entries")?.as_array()?;
    let checked: Option<Vec<Value>> = entries
        .iter()
        .map(|entry| {
            let content = entry.get("content")?.as_str()?;
            let priority = entry.get("priority")?.as_str()?;
            let status = entry.get("status")?.as_str()?;
            let known = ["high", "medium", "low"].contains(&priority)
                && ["pending", "in_progress", "completed"].contains(&status);
            known.then(|| json!({"content": content, "priority": priority, "status": status}))
        })
        .collect();
    Some(json!({"sessionUpdate": "plan", "entries": checked?}))
}

/// What the editor shows of a tool's output: text as it is, other JSON
/// printed; a denied call says so.
fn output_text(output: &Value, status: ToolStatus) -> Option<String> {
    let text = match output {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    match (status, text.is_empty()) {
        (ToolStatus::Denied, true) => Some("denied".to_owned()),
        (ToolStatus::Denied, false) => Some(format!("denied: {text}")),
        (_, true) => None,
        (_, false) => Some(text),
    }
}

/// The ACP kind of a tool, for the editor's icon, from the names the
/// agent CLIs use.
fn kind_of(tool: &str) -> &'static str {
    let tool = tool.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|word| tool.contains(word));
    if has(&["bash", "shell", "exec", "command", "terminal"]) {
        "execute"
    } else if has(&["grep", "glob", "search", "find"]) {
        "search"
    } else if has(&["edit", "write", "patch", "replace"]) {
        "edit"
    } else if has(&["delete", "remove"]) {
        "delete"
    } else if has(&["move", "rename"]) {
        "move"
    } else if has(&["fetch", "web", "http"]) {
        "fetch"
    } else if has(&["read", "view", "cat", "ls", "list"]) {
        "read"
    } else if has(&["think", "todo", "plan"]) {
        "think"
    } else {
        "other"
    }
}

/// How a prompt turn ended, from its run's `done`: ACP's stop reason, or
/// the run's failure as the prompt's error message.
pub fn stop_reason(status: DoneStatus) -> Option<&'static str> {
    match status {
        DoneStatus::Success => Some("end_turn"),
        DoneStatus::Interrupted => Some("cancelled"),
        DoneStatus::MaxTurns => Some("max_turn_requests"),
        DoneStatus::MaxBudget => Some("max_tokens"),
        DoneStatus::Error => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moat_engine::{TextDeltaPayload, TextPayload, ToolResultPayload, ToolUsePayload};

    fn event(payload: EventPayload) -> AgentEvent {
        AgentEvent {
            agent: "a".into(),
            timestamp: 0,
            session_id: "s".into(),
            role: None,
            payload,
        }
    }

    #[test]
    fn streamed_text_is_sent_once_and_a_text_without_deltas_is_sent_whole() {
        let mut updates = Updates::default();
        let delta = |d: &str| {
            event(EventPayload::TextDelta(TextDeltaPayload {
                delta: d.into(),
            }))
        };
        let text = |t: &str| event(EventPayload::Text(TextPayload { content: t.into() }));
        assert_eq!(updates.of(&delta("he"))[0]["content"]["text"], "he");
        assert!(updates.of(&text("he")).is_empty());
        assert_eq!(updates.of(&text("whole"))[0]["content"]["text"], "whole");
    }

    #[test]
    fn a_tool_call_and_its_result_become_a_call_and_its_update() {
        let mut updates = Updates::default();
        let call = updates.of(&event(EventPayload::ToolUse(Box::new(ToolUsePayload {
            tool_name: "Bash".into(),
            tool_use_id: "t1".into(),
            input: serde_json::from_value(json!({"command": "ls"})).unwrap(),
            description: Some("List files".into()),
        }))));
        assert_eq!(call[0]["sessionUpdate"], "tool_call");
        assert_eq!(call[0]["kind"], "execute");
        assert_eq!(call[0]["title"], "List files");
        let result = |status| {
            event(EventPayload::ToolResult(Box::new(ToolResultPayload {
                tool_use_id: "t1".into(),
                tool_name: "Bash".into(),
                status,
                output: json!("a\nb"),
                duration_ms: None,
            })))
        };
        let done = updates.of(&result(ToolStatus::Success));
        assert_eq!(done.len(), 1);
        assert_eq!(done[0]["status"], "completed");
        assert_eq!(done[0]["content"][0]["content"]["text"], "a\nb");
        let denied = updates.of(&result(ToolStatus::Denied));
        assert_eq!(denied[0]["status"], "failed");
        assert_eq!(denied[0]["content"][0]["content"]["text"], "denied: a\nb");
    }

    #[test]
    fn a_plan_in_acps_shape_is_a_plan_and_anything_else_is_left_out() {
        let good =
            json!({"entries": [{"content": "read", "priority": "high", "status": "pending"}]});
        assert_eq!(plan(&good).unwrap()["entries"][0]["content"], "read");
        let bad =
            json!({"entries": [{"content": "read", "priority": "urgent", "status": "pending"}]});
        assert!(plan(&bad).is_none());
        assert!(plan(&json!("x")).is_none());
    }
}
