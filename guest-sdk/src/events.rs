//! Builders for [`Event`]s.
//!
//! Every event kind has a shortcut on [`Event`] (`Event::text("hi")`) for
//! the common case; kinds with optional fields also have a constructor on
//! their record type with `with_*` setters, and convert into an [`Event`]
//! with `.into()`:
//!
//! ```
//! use moat_guest::{DoneStatus, DoneEvent, Event, ToolUseEvent, Usage};
//! use moat_guest::json::json;
//!
//! let call: Event = ToolUseEvent::new("read_file", "t1", &json!({"path": "a.txt"}))
//!     .with_description("read the notes")
//!     .into();
//! let done: Event = DoneEvent::new(DoneStatus::Success)
//!     .with_result("all read")
//!     .with_usage(Usage::new(1))
//!     .into();
//! # let _ = (call, done);
//! ```

use crate::json::{Value, encode};
use crate::{
    DoneEvent, DoneStatus, ErrorInfo, Event, EventKind, ExtensionEvent, InitEvent,
    PermissionRequestEvent, TokenReport, ToolResultEvent, ToolStatus, ToolUseEvent, Usage,
};

impl Event {
    /// An event of `kind` without a session id (the host fills in the last
    /// one it saw).
    pub fn new(kind: EventKind) -> Self {
        Event {
            session_id: None,
            kind,
        }
    }

    /// Sets the backend's session id.
    pub fn with_session(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    /// The session has started: the model, working directory and tools the
    /// backend uses. See [`InitEvent::new`] to add capabilities.
    pub fn init(model: Option<&str>, cwd: Option<&str>, tools: Vec<String>) -> Self {
        InitEvent::new(model, cwd, tools).into()
    }

    /// A complete piece of assistant text.
    pub fn text(content: impl Into<String>) -> Self {
        Event::new(EventKind::Text(content.into()))
    }

    /// A streamed fragment of assistant text.
    pub fn text_delta(delta: impl Into<String>) -> Self {
        Event::new(EventKind::TextDelta(delta.into()))
    }

    /// A summary of the agent's reasoning.
    pub fn thinking(summary: impl Into<String>) -> Self {
        Event::new(EventKind::Thinking(summary.into()))
    }

    /// The agent calls tool `tool_name`; `input` should be a JSON object.
    pub fn tool_use(
        tool_name: impl Into<String>,
        tool_use_id: impl Into<String>,
        input: &Value,
    ) -> Self {
        ToolUseEvent::new(tool_name, tool_use_id, input).into()
    }

    /// A tool call finished; `output` is any JSON value (a JSON string for
    /// plain text).
    pub fn tool_result(
        tool_use_id: impl Into<String>,
        tool_name: impl Into<String>,
        status: ToolStatus,
        output: &Value,
    ) -> Self {
        ToolResultEvent::new(tool_use_id, tool_name, status, output).into()
    }

    /// An error event with a machine-readable `code`. Use
    /// [`ErrorInfo::without_code`] and `.into()` for one without.
    pub fn error(code: impl Into<String>, message: impl Into<String>, recoverable: bool) -> Self {
        ErrorInfo::new(code, message, recoverable).into()
    }

    /// The agent asks for permission to use a tool; `input` should be a
    /// JSON object.
    pub fn permission_request(
        tool_name: impl Into<String>,
        tool_use_id: impl Into<String>,
        input: &Value,
    ) -> Self {
        PermissionRequestEvent::new(tool_name, tool_use_id, input).into()
    }

    /// The run is over, with `status` and nothing else known. See
    /// [`DoneEvent::new`] to add a result, resume token, usage or metadata.
    pub fn done(status: DoneStatus) -> Self {
        DoneEvent::new(status).into()
    }

    /// A namespaced extension event (`"vendor:name"`) with any JSON payload.
    pub fn extension(name: impl Into<String>, payload: &Value) -> Self {
        ExtensionEvent::new(name, payload).into()
    }

    /// Whether this is the terminal `done` event.
    pub fn is_done(&self) -> bool {
        matches!(self.kind, EventKind::Done(_))
    }
}

impl From<EventKind> for Event {
    fn from(kind: EventKind) -> Self {
        Event::new(kind)
    }
}

/// Implements `From<$record> for Event` through the matching kind.
macro_rules! into_event {
    ($($record:ty => $kind:ident),* $(,)?) => {$(
        impl From<$record> for Event {
            fn from(record: $record) -> Self {
                Event::new(EventKind::$kind(record))
            }
        }
    )*};
}

into_event! {
    InitEvent => Init,
    ToolUseEvent => ToolUse,
    ToolResultEvent => ToolResult,
    ErrorInfo => Error,
    PermissionRequestEvent => PermissionRequest,
    DoneEvent => Done,
    ExtensionEvent => Extension,
}

impl InitEvent {
    /// The session has started; capabilities unknown.
    pub fn new(model: Option<&str>, cwd: Option<&str>, tools: Vec<String>) -> Self {
        InitEvent {
            model: model.map(str::to_owned),
            cwd: cwd.map(str::to_owned),
            tools,
            capabilities: None,
        }
    }

    /// Sets the backend's capabilities (a JSON object).
    pub fn with_capabilities(mut self, capabilities: &Value) -> Self {
        self.capabilities = Some(encode(capabilities));
        self
    }
}

impl ToolUseEvent {
    /// A tool call without a description; `input` should be a JSON object.
    pub fn new(
        tool_name: impl Into<String>,
        tool_use_id: impl Into<String>,
        input: &Value,
    ) -> Self {
        ToolUseEvent {
            tool_name: tool_name.into(),
            tool_use_id: tool_use_id.into(),
            input: encode(input),
            description: None,
        }
    }

    /// Sets a human-readable description of the call.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

impl ToolResultEvent {
    /// A finished tool call, duration unknown.
    pub fn new(
        tool_use_id: impl Into<String>,
        tool_name: impl Into<String>,
        status: ToolStatus,
        output: &Value,
    ) -> Self {
        ToolResultEvent {
            tool_use_id: tool_use_id.into(),
            tool_name: tool_name.into(),
            status,
            output: encode(output),
            duration_ms: None,
        }
    }

    /// Sets how long the call took.
    pub fn with_duration_ms(mut self, duration_ms: u64) -> Self {
        self.duration_ms = Some(duration_ms);
        self
    }
}

impl PermissionRequestEvent {
    /// A permission request without a reason; `input` should be a JSON
    /// object.
    pub fn new(
        tool_name: impl Into<String>,
        tool_use_id: impl Into<String>,
        input: &Value,
    ) -> Self {
        PermissionRequestEvent {
            tool_name: tool_name.into(),
            tool_use_id: tool_use_id.into(),
            input: encode(input),
            reason: None,
        }
    }

    /// Sets why the agent asks.
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }
}

impl DoneEvent {
    /// The end of a run with `status`: no result, no resume token, no tool
    /// calls, tokens and cost unknown, duration left to the host.
    pub fn new(status: DoneStatus) -> Self {
        DoneEvent {
            status,
            result: None,
            resume_token: None,
            usage: Usage::default(),
            duration_ms: None,
            metadata: None,
        }
    }

    /// Sets the final answer.
    pub fn with_result(mut self, result: impl Into<String>) -> Self {
        self.result = Some(result.into());
        self
    }

    /// Sets the token that continues this session later (`options.resume`).
    pub fn with_resume_token(mut self, resume_token: impl Into<String>) -> Self {
        self.resume_token = Some(resume_token.into());
        self
    }

    /// Replaces the whole usage record.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    /// Sets the number of distinct tool calls in the run.
    pub fn with_tool_uses(mut self, tool_uses: u32) -> Self {
        self.usage.tool_uses = tool_uses;
        self
    }

    /// Sets the token report. Only numbers the backend reported: never
    /// estimate.
    pub fn with_tokens(mut self, tokens: TokenReport) -> Self {
        self.usage.tokens = Some(tokens);
        self
    }

    /// Sets the run time as the adapter measured it.
    pub fn with_duration_ms(mut self, duration_ms: u64) -> Self {
        self.duration_ms = Some(duration_ms);
        self
    }

    /// Sets backend-specific details (a JSON object, e.g. a stop reason).
    /// Put the run's turns (model round trips), when the backend reports
    /// or implies them, under [`TURNS_METADATA_KEY`]: the host's result
    /// reads them there.
    pub fn with_metadata(mut self, metadata: &Value) -> Self {
        self.metadata = Some(encode(metadata));
        self
    }
}

/// The error code for a resume the backend cannot honour because it no
/// longer has (or never had) the session. A run that ends with it before
/// anything else happened is retried by the host as a fresh session,
/// unless the caller said not to (`moat_engine::codes::SESSION_NOT_FOUND`,
/// the same words).
pub const SESSION_NOT_FOUND: &str = "SESSION_NOT_FOUND";

/// The `done` metadata key for the run's turns, as the host's result reads
/// it (`moat_engine::TURNS_METADATA_KEY`, the same words).
pub const TURNS_METADATA_KEY: &str = "turns";

impl ExtensionEvent {
    /// A namespaced extension event (`"vendor:name"`) with any JSON payload.
    pub fn new(name: impl Into<String>, payload: &Value) -> Self {
        ExtensionEvent {
            name: name.into(),
            payload: encode(payload),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{Value, json};
    use crate::{Cost, CostSource, InputTokens, OutputTokens, TokenCoverage};

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("builders produce valid JSON")
    }

    #[test]
    fn simple_kinds_carry_their_text_and_no_session() {
        assert_eq!(Event::text("hi").kind, EventKind::Text("hi".into()));
        assert_eq!(
            Event::text_delta("h").kind,
            EventKind::TextDelta("h".into())
        );
        assert_eq!(
            Event::thinking("hmm").kind,
            EventKind::Thinking("hmm".into())
        );
        assert_eq!(Event::text("hi").session_id, None);
        assert_eq!(
            Event::text("hi").with_session("s1").session_id.as_deref(),
            Some("s1")
        );
    }

    #[test]
    fn json_fields_are_valid_json_text() {
        let input = json!({"path": "a \"quoted\"\nname", "n": 1});
        let EventKind::ToolUse(call) = Event::tool_use("read", "t1", &input).kind else {
            panic!("not a tool_use");
        };
        assert_eq!(parse(&call.input), input);
        assert_eq!(
            (call.tool_name.as_str(), call.tool_use_id.as_str()),
            ("read", "t1")
        );

        let output = json!("plain text output");
        let EventKind::ToolResult(result) =
            Event::tool_result("t1", "read", ToolStatus::Success, &output).kind
        else {
            panic!("not a tool_result");
        };
        assert_eq!(parse(&result.output), output);

        let EventKind::PermissionRequest(request) =
            Event::permission_request("bash", "t2", &json!({"cmd": "ls"})).kind
        else {
            panic!("not a permission_request");
        };
        assert_eq!(parse(&request.input), json!({"cmd": "ls"}));

        let payload = json!([1, {"a": null}]);
        let EventKind::Extension(extension) = Event::extension("codex:thing", &payload).kind else {
            panic!("not an extension");
        };
        assert_eq!(extension.name, "codex:thing");
        assert_eq!(parse(&extension.payload), payload);

        let init = InitEvent::new(Some("m"), None, vec!["read".into()])
            .with_capabilities(&json!({"streaming": true}));
        assert_eq!(
            parse(init.capabilities.as_deref().unwrap()),
            json!({"streaming": true})
        );
    }

    #[test]
    fn optional_fields_are_set_by_the_record_builders() {
        let call = ToolUseEvent::new("read", "t1", &json!({})).with_description("why");
        assert_eq!(call.description.as_deref(), Some("why"));
        let result = ToolResultEvent::new("t1", "read", ToolStatus::Error, &json!(null))
            .with_duration_ms(12);
        assert_eq!(result.duration_ms, Some(12));
        let request = PermissionRequestEvent::new("bash", "t2", &json!({})).with_reason("shell");
        assert_eq!(request.reason.as_deref(), Some("shell"));
    }

    #[test]
    fn error_events_carry_code_message_and_recoverability() {
        let EventKind::Error(error) = Event::error("AUTH_FAILED", "no key", false).kind else {
            panic!("not an error");
        };
        assert_eq!(error, ErrorInfo::new("AUTH_FAILED", "no key", false));
        assert_eq!(error.code.as_deref(), Some("AUTH_FAILED"));
        let EventKind::Error(error) = Event::from(ErrorInfo::without_code("odd", true)).kind else {
            panic!("not an error");
        };
        assert_eq!((error.code, error.recoverable), (None, true));
    }

    #[test]
    fn done_defaults_to_nothing_known() {
        let event = Event::done(DoneStatus::Success);
        assert!(event.is_done());
        let EventKind::Done(done) = event.kind else {
            panic!("not done");
        };
        assert_eq!(done, DoneEvent::new(DoneStatus::Success));
        assert_eq!(done.usage, Usage::new(0));
        assert_eq!(
            (done.result, done.resume_token, done.duration_ms),
            (None, None, None)
        );
        assert!(done.usage.tokens.is_none() && done.usage.cost.is_none());
        assert!(!Event::text("x").is_done());
    }

    #[test]
    fn done_builder_sets_every_field() {
        let tokens = TokenReport::new(
            TokenCoverage::Complete,
            InputTokens::new(100)
                .with_cache_read(40)
                .with_cache_write(10),
            OutputTokens::new(20).with_reasoning(5),
        );
        let done = DoneEvent::new(DoneStatus::Interrupted)
            .with_result("partial")
            .with_resume_token("resume-me")
            .with_tool_uses(3)
            .with_tokens(tokens)
            .with_duration_ms(1500)
            .with_metadata(&json!({"stopReason": "user"}));
        assert_eq!(done.result.as_deref(), Some("partial"));
        assert_eq!(done.resume_token.as_deref(), Some("resume-me"));
        assert_eq!(done.usage.tool_uses, 3);
        assert_eq!(done.usage.tokens, Some(tokens));
        assert_eq!(done.duration_ms, Some(1500));
        assert_eq!(
            parse(done.metadata.as_deref().unwrap()),
            json!({"stopReason": "user"})
        );

        let usage = Usage::new(2).with_cost(Cost::new(0.25, CostSource::Vendor));
        let done = DoneEvent::new(DoneStatus::Success).with_usage(usage);
        assert_eq!(done.usage, usage);
        let event: Event = done.into();
        assert!(event.is_done());
    }
}
