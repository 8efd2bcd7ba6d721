//! One line of human-readable text per non-text event, shared by the
//! single-run and parallel renderers.

use std::time::Duration;

use moat_engine::{AgentEvent, DonePayload, DoneStatus, EventPayload, JsonObject};
use serde_json::Value;

use super::style::{Style, clip, status_word, tool_status_word, usage_summary};

/// Longest tool input or output shown.
const CLIP: usize = 200;

/// A tool call's line: its summary for people when the adapter gave one,
/// else its input.
pub fn tool_line(s: Style, name: &str, input: &JsonObject, summary: Option<&str>) -> String {
    let detail = match summary {
        Some(summary) => clip(summary, CLIP),
        None => s.dim(&clip(&Value::Object(input.clone()).to_string(), CLIP)),
    };
    format!("{} {} {detail}", s.cyan("→"), s.cyan(name))
}

/// The line for an event, or `None` for assistant text (which streams) and
/// `done` (see [`done_line`]).
pub fn event_line(s: Style, event: &AgentEvent) -> Option<String> {
    let line = match &event.payload {
        EventPayload::Init(init) => {
            let model = init.model.as_deref().unwrap_or("default model");
            let run = init
                .run_id
                .as_deref()
                .map(|id| format!(" · {id}"))
                .unwrap_or_default();
            s.dim(&format!(
                "● {}{run} · {model} · session {}",
                event.agent, event.session_id
            ))
        }
        EventPayload::Thinking(thinking) => s.dim(&format!("… {}", clip(&thinking.summary, CLIP))),
        EventPayload::ToolUse(tool) => {
            tool_line(s, &tool.tool_name, &tool.input, tool.description.as_deref())
        }
        EventPayload::ToolResult(result) => {
            let output = match &result.output {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            format!(
                "{} {} {} {}",
                s.cyan("←"),
                result.tool_name,
                s.dim(tool_status_word(result.status)),
                s.dim(&clip(output.trim(), CLIP))
            )
        }
        EventPayload::Error(error) => {
            let code = error
                .code
                .as_deref()
                .map(|c| format!(" [{c}]"))
                .unwrap_or_default();
            s.red(&format!("✗ error{code}: {}", error.message))
        }
        EventPayload::PermissionRequest(request) => match held_open(request) {
            Some((number, what)) => s.yellow(&format!(
                "? {} asks for {what} (request {number}): `moat approve` or `moat deny` answers",
                event.agent
            )),
            None => {
                let reason = request.reason.as_deref().unwrap_or("");
                s.yellow(&format!(
                    "? {} asks to use {} {reason}",
                    event.agent, request.tool_name
                ))
            }
        },
        EventPayload::Extension(extension) if extension.name == moat_launch::ANSWER_EVENT => {
            answer_line(s, &extension.payload)
        }
        // Counted for the budget; the summary line shows the run's usage,
        // and `moat show --net` its traffic.
        EventPayload::Extension(extension)
            if extension.name == moat_engine::USAGE_EVENT
                || extension.name == moat_engine::TRAFFIC_EVENT =>
        {
            return None;
        }
        EventPayload::Extension(extension) => s.dim(&format!(
            "· {} {}",
            extension.name,
            clip(&extension.payload.to_string(), CLIP)
        )),
        EventPayload::Text(_) | EventPayload::TextDelta(_) | EventPayload::Done(_) => return None,
    };
    Some(line)
}

/// The number and the words of a request moat holds open for an answer.
fn held_open(request: &moat_engine::PermissionRequestPayload) -> Option<(&str, String)> {
    let number = request.request_id.as_deref()?;
    if request.kind.as_deref() == Some("tool") {
        return Some((number, format!("tool {}", request.tool_name)));
    }
    let mut what = request.input.clone();
    what.insert("kind".into(), Value::String(request.kind.clone()?));
    let what: moat_runs::Requested = serde_json::from_value(Value::Object(what)).ok()?;
    Some((number, what.to_string()))
}

/// How a request was answered: "✓ request 1 approved by …".
fn answer_line(s: Style, answer: &Value) -> String {
    let text = |key: &str| answer.get(key).and_then(Value::as_str).unwrap_or("");
    let reason = match text("reason") {
        "" => String::new(),
        reason => format!(": {reason}"),
    };
    let line = format!(
        "request {} {} by {}{reason}",
        text("requestId"),
        text("decision"),
        text("by")
    );
    if answer.get("approved").and_then(Value::as_bool) == Some(true) {
        s.green(&format!("✓ {line}"))
    } else {
        s.yellow(&format!("✗ {line}"))
    }
}

/// "✓ success · 1.20s · 0 tool uses", coloured by status.
pub fn done_line(s: Style, done: &DonePayload) -> String {
    let seconds = Duration::from_millis(done.duration_ms).as_secs_f64();
    let summary = format!(
        "{} · {seconds:.2}s · {}",
        status_word(done.status),
        usage_summary(&done.usage)
    );
    match done.status {
        DoneStatus::Success => s.green(&format!("✓ {summary}")),
        DoneStatus::Interrupted => s.yellow(&format!("■ {summary}")),
        _ => s.red(&format!("✗ {summary}")),
    }
}
