//! Adapter-controlled text made safe to print on a terminal.
//!
//! Every string in an event came from the adapter (the engine only checked
//! its shape). Printed raw, an escape sequence in it could move the
//! cursor, clear the screen, rewrite a line (hiding a `CAPABILITY_DENIED`
//! above it), set the window title or the clipboard (OSC 52), and a
//! bidirectional override could make text read differently than it is.
//! The human renderers print events through [`for_terminal`], which shows
//! each such character as a visible escape (`\x1b`, `\u{202e}`) instead.
//! Newlines and tabs stay: they are how text is laid out. The ndjson
//! output needs none of this: JSON escapes control characters itself, and
//! it is read by programs.

use std::borrow::Cow;

use moat_engine::{AgentEvent, EventPayload};
use serde_json::Value;

/// `event` with every string made safe ([`text`]); borrowed when nothing
/// needed it.
pub fn for_terminal(event: &AgentEvent) -> Cow<'_, AgentEvent> {
    let mut safe = event.clone();
    let changed = std::cell::Cell::new(false);
    let mut fix = |s: &mut String| {
        if let Cow::Owned(fixed) = text(s) {
            *s = fixed;
            changed.set(true);
        }
    };
    // The role is the user's own label for a task, not the adapter's.
    fix(&mut safe.agent);
    fix(&mut safe.session_id);
    let mut fix_json = |value: &mut Value| {
        if let Some(fixed) = json(value) {
            *value = fixed;
            changed.set(true);
        }
    };
    match &mut safe.payload {
        EventPayload::Init(init) => {
            init.model.iter_mut().for_each(&mut fix);
            init.cwd.iter_mut().for_each(&mut fix);
            init.tools.iter_mut().for_each(&mut fix);
            if let Some(capabilities) = init.capabilities.as_mut() {
                fix_object(capabilities, &mut fix_json);
            }
        }
        EventPayload::Text(text) => fix(&mut text.content),
        EventPayload::TextDelta(delta) => fix(&mut delta.delta),
        EventPayload::Thinking(thinking) => fix(&mut thinking.summary),
        EventPayload::ToolUse(tool) => {
            fix(&mut tool.tool_name);
            fix(&mut tool.tool_use_id);
            tool.description.iter_mut().for_each(&mut fix);
            fix_object(&mut tool.input, &mut fix_json);
        }
        EventPayload::ToolResult(result) => {
            fix(&mut result.tool_use_id);
            fix(&mut result.tool_name);
            fix_json(&mut result.output);
        }
        EventPayload::Error(error) => {
            error.code.iter_mut().for_each(&mut fix);
            fix(&mut error.message);
        }
        EventPayload::PermissionRequest(request) => {
            fix(&mut request.tool_name);
            fix(&mut request.tool_use_id);
            request.reason.iter_mut().for_each(&mut fix);
            fix_object(&mut request.input, &mut fix_json);
        }
        EventPayload::Done(done) => {
            done.result.iter_mut().for_each(&mut fix);
            done.resume_token.iter_mut().for_each(&mut fix);
            if let Some(metadata) = done.metadata.as_mut() {
                fix_object(metadata, &mut fix_json);
            }
        }
        EventPayload::Extension(extension) => {
            fix(&mut extension.name);
            fix_json(&mut extension.payload);
        }
    }
    if changed.get() {
        Cow::Owned(safe)
    } else {
        Cow::Borrowed(event)
    }
}

fn fix_object(object: &mut serde_json::Map<String, Value>, fix_json: &mut impl FnMut(&mut Value)) {
    let mut whole = Value::Object(std::mem::take(object));
    fix_json(&mut whole);
    if let Value::Object(fixed) = whole {
        *object = fixed;
    }
}

/// `value` with every string (keys too) made safe, or `None` when none
/// needed it.
fn json(value: &Value) -> Option<Value> {
    match value {
        Value::String(s) => match text(s) {
            Cow::Owned(fixed) => Some(Value::String(fixed)),
            Cow::Borrowed(_) => None,
        },
        Value::Array(items) => {
            let fixed: Vec<Option<Value>> = items.iter().map(json).collect();
            fixed.iter().any(Option::is_some).then(|| {
                Value::Array(
                    fixed
                        .into_iter()
                        .zip(items)
                        .map(|(fixed, item)| fixed.unwrap_or_else(|| item.clone()))
                        .collect(),
                )
            })
        }
        Value::Object(map) => {
            let needs = map
                .iter()
                .any(|(key, item)| matches!(text(key), Cow::Owned(_)) || json(item).is_some());
            needs.then(|| {
                Value::Object(
                    map.iter()
                        .map(|(key, item)| {
                            let item = json(item).unwrap_or_else(|| item.clone());
                            (text(key).into_owned(), item)
                        })
                        .collect(),
                )
            })
        }
        _ => None,
    }
}

/// `s` with every character a terminal would act on shown as an escape;
/// borrowed when there is none.
pub fn text(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) {
            match u32::from(c) {
                code @ 0..=0xff => out.push_str(&format!("\\x{code:02x}")),
                code => out.push_str(&format!("\\u{{{code:x}}}")),
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Control characters but newline and tab (C0, DEL, C1), and the
/// bidirectional formatting characters.
fn is_unsafe(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        // Marks, embeddings, overrides and isolates that reorder text.
        '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use moat_engine::{ErrorPayload, ToolUsePayload, create_event};
    use serde_json::json;

    use super::*;

    #[test]
    fn escape_sequences_and_controls_become_visible_text() {
        assert_eq!(text("plain\ttext\n"), "plain\ttext\n");
        assert!(matches!(text("plain"), Cow::Borrowed(_)));
        // OSC 52 (clipboard), a clear screen, a carriage return, C1 CSI.
        assert_eq!(
            text("a\x1b]52;c;ZXZpbA==\x07b\x1b[2J\rc\u{9b}d"),
            "a\\x1b]52;c;ZXZpbA==\\x07b\\x1b[2J\\x0dc\\x9bd"
        );
        assert_eq!(text("abc\u{202e}fed"), "abc\\u{202e}fed");
    }

    fn collect_strings(value: &Value, into: &mut Vec<String>) {
        match value {
            Value::String(s) => into.push(s.clone()),
            Value::Array(items) => items.iter().for_each(|v| collect_strings(v, into)),
            Value::Object(map) => {
                for (key, item) in map {
                    into.push(key.clone());
                    collect_strings(item, into);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn every_string_of_an_event_is_made_safe() {
        let event = create_event(
            "evil\x1b[2J",
            EventPayload::ToolUse(Box::new(ToolUsePayload {
                tool_name: "Read\x1b[1A".into(),
                tool_use_id: "t\r1".into(),
                input: json!({"path\x1b": ["a\x1b[K", 1, {"k": "\u{9d}x"}]})
                    .as_object()
                    .unwrap()
                    .clone(),
                description: Some("d\x07".into()),
            })),
            Some("s\x1b"),
        );
        let safe = for_terminal(&event);
        let mut strings = Vec::new();
        collect_strings(&serde_json::to_value(&*safe).unwrap(), &mut strings);
        assert!(strings.len() > 8, "{strings:?}");
        for s in &strings {
            assert!(!s.chars().any(is_unsafe), "{s:?}");
        }
        assert!(strings.contains(&"Read\\x1b[1A".to_string()), "{strings:?}");
        assert!(strings.contains(&"path\\x1b".to_string()), "{strings:?}");

        let harmless = create_event(
            "echo",
            EventPayload::Error(Box::new(ErrorPayload {
                code: None,
                message: "fine\n".into(),
                recoverable: true,
            })),
            None,
        );
        assert!(matches!(for_terminal(&harmless), Cow::Borrowed(_)));
    }
}
