//! Turns an [`AdapterEvent`] (untrusted guest values) into an
//! [`EventPayload`], checking everything the types cannot: JSON text
//! fields, ids, extension names, event size and token arithmetic.
//!
//! A violation is an [`InvalidEvent`]; the run loop reports it as a
//! recoverable `INVALID_EVENT` error, drops the event and goes on.

use std::time::Duration;

use serde_json::Value;

use super::adapter::{AdapterEvent, AdapterEventKind, DoneInfo};
use super::event::{
    DonePayload, ErrorPayload, EventPayload, ExtensionPayload, InitPayload, JsonObject,
    PermissionRequestPayload, TextDeltaPayload, TextPayload, ThinkingPayload, ToolResultPayload,
    ToolUsePayload, Usage, is_extension_name,
};

/// An event that broke the contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidEvent {
    /// One field holds a bad value.
    #[error("invalid `{event}` event: `{field}` {problem}")]
    Field {
        /// The event's type (`tool_use`, …).
        event: &'static str,
        /// The field, by its JSON name.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// The event's text and JSON fields together are too large.
    #[error("invalid `{event}` event: {size} bytes is over the limit of {limit} bytes per event")]
    TooLarge {
        /// The event's type.
        event: &'static str,
        /// Its size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
}

/// A checked event: the payload and the session id it carried, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidEvent {
    /// The adapter's session id; an empty one counts as absent.
    pub session_id: Option<String>,
    /// The checked content.
    pub payload: EventPayload,
}

/// Checks `event` and converts it.
///
/// `max_event_bytes` bounds the sum of the lengths of its string fields;
/// `elapsed` gives the run's measured duration, used for a `done` that
/// carries none (asked only then: reading the clock is a noticeable part of
/// an event's cost).
pub fn validate_event(
    event: AdapterEvent,
    max_event_bytes: usize,
    elapsed: impl FnOnce() -> Duration,
) -> Result<ValidEvent, InvalidEvent> {
    let name = kind_name(&event.kind);
    // Size first, so an oversize event is never parsed.
    let size = event.session_id.as_ref().map_or(0, String::len) + text_size(&event.kind);
    if size > max_event_bytes {
        return Err(InvalidEvent::TooLarge {
            event: name,
            size,
            limit: max_event_bytes,
        });
    }
    let payload = payload(event.kind, elapsed)?;
    Ok(ValidEvent {
        session_id: event.session_id.filter(|s| !s.is_empty()),
        payload,
    })
}

/// The `type` string of an event kind; extensions report as "extension"
/// since their own name is what may be broken.
fn kind_name(kind: &AdapterEventKind) -> &'static str {
    match kind {
        AdapterEventKind::Init { .. } => "init",
        AdapterEventKind::Text(_) => "text",
        AdapterEventKind::TextDelta(_) => "text_delta",
        AdapterEventKind::Thinking(_) => "thinking",
        AdapterEventKind::ToolUse { .. } => "tool_use",
        AdapterEventKind::ToolResult { .. } => "tool_result",
        AdapterEventKind::Error(_) => "error",
        AdapterEventKind::PermissionRequest { .. } => "permission_request",
        AdapterEventKind::Done(_) => "done",
        AdapterEventKind::Extension { .. } => "extension",
    }
}

/// What each entry of a list counts toward an event's size beside its own
/// bytes: about what it takes in memory apart from them.
const LIST_ENTRY_BYTES: usize = std::mem::size_of::<String>();

/// The largest integer a JSON consumer in JavaScript reads exactly
/// (`Number.MAX_SAFE_INTEGER`, 2^53 - 1): a count above it would reach
/// such a consumer changed.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// The sum of the lengths of every string an event kind carries.
fn text_size(kind: &AdapterEventKind) -> usize {
    fn opt(s: &Option<String>) -> usize {
        s.as_ref().map_or(0, String::len)
    }
    match kind {
        AdapterEventKind::Init {
            model,
            cwd,
            tools,
            capabilities,
        } => {
            // Each entry counts its bytes and the room a name takes apart
            // from them, so a list of a million empty names is not free.
            let tools: usize = tools.iter().map(|t| t.len() + LIST_ENTRY_BYTES).sum();
            opt(model) + opt(cwd) + tools + opt(capabilities)
        }
        AdapterEventKind::Text(s)
        | AdapterEventKind::TextDelta(s)
        | AdapterEventKind::Thinking(s) => s.len(),
        AdapterEventKind::ToolUse {
            tool_name,
            tool_use_id,
            input,
            description,
        } => tool_name.len() + tool_use_id.len() + input.len() + opt(description),
        AdapterEventKind::ToolResult {
            tool_use_id,
            tool_name,
            output,
            ..
        } => tool_use_id.len() + tool_name.len() + output.len(),
        AdapterEventKind::Error(e) => opt(&e.code) + e.message.len(),
        AdapterEventKind::PermissionRequest {
            tool_name,
            tool_use_id,
            input,
            reason,
        } => tool_name.len() + tool_use_id.len() + input.len() + opt(reason),
        AdapterEventKind::Done(d) => opt(&d.result) + opt(&d.resume_token) + opt(&d.metadata),
        AdapterEventKind::Extension { name, payload } => name.len() + payload.len(),
    }
}

fn payload(
    kind: AdapterEventKind,
    elapsed: impl FnOnce() -> Duration,
) -> Result<EventPayload, InvalidEvent> {
    Ok(match kind {
        AdapterEventKind::Init {
            model,
            cwd,
            tools,
            capabilities,
        } => EventPayload::Init(Box::new(InitPayload {
            model,
            cwd,
            tools,
            capabilities: capabilities
                .map(|c| json_object("init", "capabilities", &c))
                .transpose()?,
            containment: None,
            run_id: None,
        })),
        AdapterEventKind::Text(content) => EventPayload::Text(TextPayload { content }),
        AdapterEventKind::TextDelta(delta) => EventPayload::TextDelta(TextDeltaPayload { delta }),
        AdapterEventKind::Thinking(summary) => EventPayload::Thinking(ThinkingPayload { summary }),
        AdapterEventKind::ToolUse {
            tool_name,
            tool_use_id,
            input,
            description,
        } => {
            non_empty("tool_use", "toolName", &tool_name)?;
            call_id("tool_use", &tool_use_id)?;
            EventPayload::ToolUse(Box::new(ToolUsePayload {
                input: json_object("tool_use", "input", &input)?,
                tool_name,
                tool_use_id,
                description,
            }))
        }
        AdapterEventKind::ToolResult {
            tool_use_id,
            tool_name,
            status,
            output,
            duration_ms,
        } => {
            call_id("tool_result", &tool_use_id)?;
            safe_integer("tool_result", "durationMs", duration_ms)?;
            EventPayload::ToolResult(Box::new(ToolResultPayload {
                output: json_value("tool_result", "output", &output)?,
                tool_use_id,
                tool_name,
                status,
                duration_ms,
            }))
        }
        AdapterEventKind::Error(e) => EventPayload::Error(Box::new(ErrorPayload {
            code: e.code,
            message: e.message,
            recoverable: e.recoverable,
        })),
        AdapterEventKind::PermissionRequest {
            tool_name,
            tool_use_id,
            input,
            reason,
        } => {
            non_empty("permission_request", "toolName", &tool_name)?;
            call_id("permission_request", &tool_use_id)?;
            EventPayload::PermissionRequest(Box::new(PermissionRequestPayload {
                input: json_object("permission_request", "input", &input)?,
                tool_name,
                tool_use_id,
                reason,
                // An adapter reports requests; only the host holds one
                // open (numbered) for an answer.
                request_id: None,
                kind: None,
            }))
        }
        AdapterEventKind::Done(done) => EventPayload::Done(Box::new(done_payload(done, elapsed)?)),
        AdapterEventKind::Extension { name, payload } => {
            if !is_extension_name(&name) {
                return Err(InvalidEvent::Field {
                    event: "extension",
                    field: "name",
                    problem: format!(
                        "{name:?} is not of the form \"vendor:name\" (two non-empty parts, no spaces, not a built-in type)"
                    ),
                });
            }
            EventPayload::Extension(Box::new(ExtensionPayload {
                payload: json_value("extension", "payload", &payload)?,
                name,
            }))
        }
    })
}

fn done_payload(
    done: DoneInfo,
    elapsed: impl FnOnce() -> Duration,
) -> Result<DonePayload, InvalidEvent> {
    check_usage(&done.usage)?;
    safe_integer("done", "durationMs", done.duration_ms)?;
    Ok(DonePayload {
        status: done.status,
        result: done.result,
        resume_token: done.resume_token,
        usage: done.usage,
        duration_ms: done.duration_ms.unwrap_or_else(|| millis(elapsed())),
        metadata: done
            .metadata
            .map(|m| json_object("done", "metadata", &m))
            .transpose()?,
    })
}

/// Token details are exact subsets of their totals, and a cost is a real,
/// non-negative amount: anything else is not an authentic report.
fn check_usage(usage: &Usage) -> Result<(), InvalidEvent> {
    let bad = |field, problem: String| {
        Err(InvalidEvent::Field {
            event: "done",
            field,
            problem,
        })
    };
    if let Some(tokens) = &usage.tokens {
        let counts = [
            ("usage.tokens.input.total", Some(tokens.input.total)),
            ("usage.tokens.input.cacheRead", tokens.input.cache_read),
            ("usage.tokens.input.cacheWrite", tokens.input.cache_write),
            ("usage.tokens.output.total", Some(tokens.output.total)),
            ("usage.tokens.output.reasoning", tokens.output.reasoning),
        ];
        for (field, count) in counts {
            safe_integer("done", field, count)?;
        }
        let input = &tokens.input;
        let cached = input
            .cache_read
            .unwrap_or(0)
            .checked_add(input.cache_write.unwrap_or(0));
        if cached.is_none_or(|c| c > input.total) {
            return bad(
                "usage.tokens.input",
                format!(
                    "has cache details ({:?} read, {:?} written) over its total of {}",
                    input.cache_read, input.cache_write, input.total
                ),
            );
        }
        let output = &tokens.output;
        if output.reasoning.is_some_and(|r| r > output.total) {
            return bad(
                "usage.tokens.output",
                format!(
                    "has {} reasoning tokens, over its total of {}",
                    output.reasoning.unwrap_or(0),
                    output.total
                ),
            );
        }
    }
    if let Some(cost) = &usage.cost
        && !(cost.usd.is_finite() && cost.usd >= 0.0)
    {
        return bad(
            "usage.cost.usd",
            format!("is {}, not a non-negative amount", cost.usd),
        );
    }
    Ok(())
}

/// Longest tool-call id accepted: vendors' ids are a few dozen bytes, and
/// the engine keeps every id of a run.
pub const MAX_CALL_ID_BYTES: usize = 512;

/// A tool call's id: present and short.
fn call_id(event: &'static str, id: &str) -> Result<(), InvalidEvent> {
    non_empty(event, "toolUseId", id)?;
    if id.len() > MAX_CALL_ID_BYTES {
        return Err(InvalidEvent::Field {
            event,
            field: "toolUseId",
            problem: format!("is {} bytes, over {MAX_CALL_ID_BYTES}", id.len()),
        });
    }
    Ok(())
}

/// A number a JavaScript consumer reads exactly, or absent.
fn safe_integer(
    event: &'static str,
    field: &'static str,
    value: Option<u64>,
) -> Result<(), InvalidEvent> {
    match value {
        Some(value) if value > MAX_SAFE_INTEGER => Err(InvalidEvent::Field {
            event,
            field,
            problem: format!(
                "is {value}, over 2^53 - 1, the largest integer JSON consumers read exactly"
            ),
        }),
        _ => Ok(()),
    }
}

/// Whole milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn non_empty(event: &'static str, field: &'static str, value: &str) -> Result<(), InvalidEvent> {
    if value.is_empty() {
        Err(InvalidEvent::Field {
            event,
            field,
            problem: "is empty".into(),
        })
    } else {
        Ok(())
    }
}

fn json_value(event: &'static str, field: &'static str, text: &str) -> Result<Value, InvalidEvent> {
    serde_json::from_str(text).map_err(|e| InvalidEvent::Field {
        event,
        field,
        problem: format!("is not valid JSON ({e})"),
    })
}

fn json_object(
    event: &'static str,
    field: &'static str,
    text: &str,
) -> Result<JsonObject, InvalidEvent> {
    match json_value(event, field, text)? {
        Value::Object(map) => Ok(map),
        other => Err(InvalidEvent::Field {
            event,
            field,
            problem: format!("is not a JSON object (found {})", json_kind(&other)),
        }),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::ErrorInfo;
    use crate::event::{
        Cost, CostSource, DoneStatus, InputTokens, OutputTokens, TokenCoverage, TokenReport,
        ToolStatus,
    };
    use serde_json::json;

    const LIMIT: usize = 1024;

    fn check(kind: AdapterEventKind) -> Result<EventPayload, InvalidEvent> {
        validate_event(AdapterEvent::new(kind), LIMIT, || Duration::from_millis(42))
            .map(|v| v.payload)
    }

    fn field_error(kind: AdapterEventKind) -> (&'static str, &'static str, String) {
        match check(kind) {
            Err(InvalidEvent::Field {
                event,
                field,
                problem,
            }) => (event, field, problem),
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    fn tool_use(id: &str, input: &str) -> AdapterEventKind {
        AdapterEventKind::ToolUse {
            tool_name: "read".into(),
            tool_use_id: id.into(),
            input: input.into(),
            description: None,
        }
    }

    fn done(usage: Usage, metadata: Option<&str>) -> AdapterEventKind {
        AdapterEventKind::Done(DoneInfo {
            status: DoneStatus::Success,
            result: None,
            resume_token: None,
            usage,
            duration_ms: None,
            metadata: metadata.map(str::to_owned),
        })
    }

    fn tokens(input: (u64, Option<u64>, Option<u64>), output: (u64, Option<u64>)) -> Usage {
        Usage {
            tool_uses: 0,
            tokens: Some(TokenReport {
                coverage: TokenCoverage::Complete,
                input: InputTokens {
                    total: input.0,
                    cache_read: input.1,
                    cache_write: input.2,
                },
                output: OutputTokens {
                    total: output.0,
                    reasoning: output.1,
                },
            }),
            cost: None,
        }
    }

    #[test]
    fn valid_json_fields_are_parsed() {
        let EventPayload::ToolUse(p) = check(tool_use("t1", r#"{"path":"a"}"#)).unwrap() else {
            panic!()
        };
        assert_eq!(p.input.get("path"), Some(&json!("a")));

        let result = AdapterEventKind::ToolResult {
            tool_use_id: "t1".into(),
            tool_name: "read".into(),
            status: ToolStatus::Success,
            output: r#""plain text""#.into(),
            duration_ms: Some(3),
        };
        let EventPayload::ToolResult(p) = check(result).unwrap() else {
            panic!()
        };
        assert_eq!(p.output, json!("plain text"));

        let ext = AdapterEventKind::Extension {
            name: "codex:file_change".into(),
            payload: "[1,2]".into(),
        };
        assert_eq!(check(ext).unwrap().type_name(), "codex:file_change");
    }

    #[test]
    fn invalid_event_tool_input_must_be_a_json_object() {
        let (event, field, problem) = field_error(tool_use("t1", "[1]"));
        assert_eq!((event, field), ("tool_use", "input"));
        assert!(problem.contains("not a JSON object (found an array)"));

        let (_, field, problem) = field_error(tool_use("t1", "{not json"));
        assert_eq!(field, "input");
        assert!(problem.contains("not valid JSON"));

        let permission = AdapterEventKind::PermissionRequest {
            tool_name: "bash".into(),
            tool_use_id: "p1".into(),
            input: "\"ls\"".into(),
            reason: None,
        };
        assert_eq!(field_error(permission).1, "input");
    }

    #[test]
    fn invalid_event_ids_must_not_be_empty() {
        let (event, field, problem) = field_error(tool_use("", "{}"));
        assert_eq!(
            (event, field, problem.as_str()),
            ("tool_use", "toolUseId", "is empty")
        );
        let result = AdapterEventKind::ToolResult {
            tool_use_id: String::new(),
            tool_name: "read".into(),
            status: ToolStatus::Error,
            output: "null".into(),
            duration_ms: None,
        };
        assert_eq!(field_error(result).1, "toolUseId");
    }

    #[test]
    fn invalid_event_output_and_extension_payload_must_be_json() {
        let result = AdapterEventKind::ToolResult {
            tool_use_id: "t".into(),
            tool_name: "read".into(),
            status: ToolStatus::Success,
            output: "plain text".into(),
            duration_ms: None,
        };
        assert_eq!(field_error(result).1, "output");
        let ext = AdapterEventKind::Extension {
            name: "a:b".into(),
            payload: "".into(),
        };
        assert_eq!(field_error(ext).1, "payload");
    }

    #[test]
    fn invalid_event_extension_names_need_vendor_and_name() {
        for name in ["text", "nocolon", ":x", "x:", "a b:c", ""] {
            let ext = AdapterEventKind::Extension {
                name: name.into(),
                payload: "{}".into(),
            };
            let (event, field, _) = field_error(ext);
            assert_eq!((event, field), ("extension", "name"), "{name:?}");
        }
    }

    #[test]
    fn invalid_event_capabilities_and_metadata_must_be_objects() {
        let init = AdapterEventKind::Init {
            model: None,
            cwd: None,
            tools: vec![],
            capabilities: Some("true".into()),
        };
        assert_eq!(
            field_error(init),
            (
                "init",
                "capabilities",
                "is not a JSON object (found a boolean)".into()
            )
        );
        assert_eq!(
            field_error(done(Usage::default(), Some("[]"))).1,
            "metadata"
        );
    }

    #[test]
    fn invalid_event_over_the_size_limit() {
        let at_limit = AdapterEventKind::Text("x".repeat(LIMIT));
        assert!(check(at_limit).is_ok());
        let over = AdapterEvent {
            session_id: Some("s".into()),
            kind: AdapterEventKind::Text("x".repeat(LIMIT)),
        };
        let err = validate_event(over, LIMIT, || Duration::ZERO).unwrap_err();
        assert_eq!(
            err,
            InvalidEvent::TooLarge {
                event: "text",
                size: LIMIT + 1,
                limit: LIMIT
            }
        );
        // Oversize JSON is refused before it is parsed.
        let big = tool_use("t", &format!("{{\"a\":\"{}\"}}", "y".repeat(LIMIT)));
        assert!(matches!(check(big), Err(InvalidEvent::TooLarge { .. })));
    }

    #[test]
    fn invalid_event_token_details_must_fit_their_totals() {
        assert!(check(done(tokens((10, Some(4), Some(6)), (5, Some(5))), None)).is_ok());
        assert_eq!(
            field_error(done(tokens((10, Some(8), Some(3)), (5, None)), None)).1,
            "usage.tokens.input"
        );
        assert_eq!(
            field_error(done(tokens((10, Some(u64::MAX), Some(1)), (5, None)), None)).1,
            "usage.tokens.input.cacheRead",
            "a count no JavaScript consumer can hold is refused before the sum"
        );
        assert_eq!(
            field_error(done(tokens((10, None, None), (5, Some(6))), None)).1,
            "usage.tokens.output"
        );
        for usd in [-1.0, f64::NAN, f64::INFINITY] {
            let usage = Usage {
                tool_uses: 0,
                tokens: None,
                cost: Some(Cost {
                    usd,
                    source: CostSource::ProviderReported,
                }),
            };
            assert_eq!(field_error(done(usage, None)).1, "usage.cost.usd");
        }
    }

    #[test]
    fn done_duration_is_filled_in_only_when_missing() {
        let EventPayload::Done(d) = check(done(Usage::default(), Some(r#"{"k":1}"#))).unwrap()
        else {
            panic!()
        };
        assert_eq!(d.duration_ms, 42);
        assert_eq!(d.metadata.unwrap().get("k"), Some(&json!(1)));
        let own = AdapterEventKind::Done(DoneInfo {
            status: DoneStatus::Success,
            result: Some("r".into()),
            resume_token: Some("t".into()),
            usage: Usage::default(),
            duration_ms: Some(7),
            metadata: None,
        });
        let EventPayload::Done(d) = check(own).unwrap() else {
            panic!()
        };
        assert_eq!(d.duration_ms, 7);
        assert_eq!(d.resume_token.as_deref(), Some("t"));
    }

    #[test]
    fn error_events_pass_through_and_empty_session_ids_count_as_absent() {
        let event = AdapterEvent {
            session_id: Some(String::new()),
            kind: AdapterEventKind::Error(ErrorInfo {
                code: Some("RATE_LIMIT".into()),
                message: "slow down".into(),
                recoverable: true,
            }),
        };
        let valid = validate_event(event, LIMIT, || Duration::ZERO).unwrap();
        assert_eq!(valid.session_id, None);
        assert_eq!(
            valid.payload,
            EventPayload::error("RATE_LIMIT", "slow down", true)
        );
    }

    #[test]
    fn messages_name_the_field_and_the_problem() {
        let err = check(tool_use("t1", "[]")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid `tool_use` event: `input` is not a JSON object (found an array)"
        );
    }

    #[test]
    fn numbers_a_javascript_consumer_cannot_read_exactly_are_refused() {
        let big = MAX_SAFE_INTEGER + 1;
        let (event, field, problem) = field_error(done(tokens((big, None, None), (1, None)), None));
        assert_eq!((event, field), ("done", "usage.tokens.input.total"));
        assert!(problem.contains("2^53"), "{problem}");
        let (_, field, _) = field_error(done(tokens((1, None, None), (big, Some(big))), None));
        assert_eq!(field, "usage.tokens.output.total");
        let mut late = DoneInfo {
            status: DoneStatus::Success,
            result: None,
            resume_token: None,
            usage: Usage::default(),
            duration_ms: Some(big),
            metadata: None,
        };
        let (_, field, _) = field_error(AdapterEventKind::Done(late.clone()));
        assert_eq!(field, "durationMs");
        late.duration_ms = Some(MAX_SAFE_INTEGER);
        assert!(check(AdapterEventKind::Done(late)).is_ok());
        let slow_tool = AdapterEventKind::ToolResult {
            tool_use_id: "t1".into(),
            tool_name: "read".into(),
            status: ToolStatus::Success,
            output: "1".into(),
            duration_ms: Some(u64::MAX),
        };
        assert_eq!(field_error(slow_tool).1, "durationMs");
    }

    #[test]
    fn an_init_tool_list_counts_toward_the_event_size_entry_by_entry() {
        let init = |count: usize| AdapterEventKind::Init {
            model: None,
            cwd: None,
            tools: vec![String::new(); count],
            capabilities: None,
        };
        assert!(check(init(LIMIT / LIST_ENTRY_BYTES)).is_ok());
        assert!(matches!(
            check(init(LIMIT / LIST_ENTRY_BYTES + 1)),
            Err(InvalidEvent::TooLarge { event: "init", .. })
        ));
    }
}
