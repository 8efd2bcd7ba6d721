//! What a caller gets from one run, as the engine contract defines it: an
//! [`EngineResult`] at the end and [`EngineCallbacks`] for live progress,
//! both built by folding the event stream, so every adapter has them
//! without doing anything.
//!
//! The fold tells narration from the answer: assistant text that a tool
//! call follows is narration (`on_assistant_message`); the text after the
//! last tool activity is the answer of a run that succeeded, and it is
//! only in the result (the `done`'s own `result` wins when the adapter
//! gives one). Text arrives as
//! `text_delta` fragments and/or a full `text`; a `text` after deltas
//! repeats them and replaces them.

use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};

use crate::{AgentEvent, DoneStatus, EventPayload, JsonObject, Usage};

/// The `done.metadata` key under which an adapter reports its turns (model
/// round trips) when the backend reports or implies them.
pub const TURNS_METADATA_KEY: &str = "turns";

/// The `vendor:name` suffix of an extension event carrying a backend's own
/// summary of tool calls (`{"summary": "…"}`), for `on_tool_use_summary`.
pub const TOOL_USE_SUMMARY_EVENT: &str = ":tool_use_summary";

/// The result of one run: the final answer, the session to resume, what it
/// used and, when it failed, why. Every field is what the stream said, or
/// absent — never made up.
///
/// The engine contract names the usage figures flat (`inputTokens`,
/// `costUsd`…); moat gives `usage` the one shape its `done` events have
/// (cligent's `DoneUsage`), so a figure reads the same wherever it is
/// seen, and keeps the run's duration and turns beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EngineResult {
    /// How the run ended (`error` when the stream ended without a `done`).
    pub status: DoneStatus,
    /// The final answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The session the run's events belong to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// What resumes this session later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_token: Option<String>,
    /// The run's id in the run store, as its `init` said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// What the run used, as its `done` said.
    pub usage: Usage,
    /// How long the run took, as its `done` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Model round trips, when the adapter reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u64>,
    /// Why it failed, when it did and said so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ResultError>,
}

/// What the `done` of a run said, as the result keeps it.
#[derive(Debug)]
struct DoneSaid {
    status: DoneStatus,
    result: Option<String>,
    resume_token: Option<String>,
    usage: Usage,
    duration_ms: u64,
    turns: Option<u64>,
}

/// The error a failed run reported last (the last one that ended it, else
/// the last one at all).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultError {
    /// Its code, e.g. `TIMEOUT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// What went wrong.
    pub message: String,
}

/// Live progress of a run, as the engine contract names it. Every method
/// has a default that does nothing: implement the ones you need.
pub trait EngineCallbacks {
    /// The run waits for the model: at its start and after tool results.
    fn on_thinking(&mut self) {}
    /// Assistant text that accompanies tool use (narration). A text-only
    /// final answer is not given here: it is in the result.
    fn on_assistant_message(&mut self, _text: &str) {}
    /// A tool call: its name, its input and a short summary for people.
    fn on_tool_use(&mut self, _name: &str, _input: &JsonObject, _summary: &str) {}
    /// The backend's own summary of tool calls, when it gives one.
    fn on_tool_use_summary(&mut self, _summary: &str) {}
    /// Every event, before the callbacks above.
    fn on_event(&mut self, _event: &AgentEvent) {}
}

/// Callbacks that do nothing.
impl EngineCallbacks for () {}

/// Folds a run's events into its [`EngineResult`], calling the callbacks
/// as it goes.
#[derive(Debug, Default)]
pub struct ResultFold {
    started: bool,
    /// Finished texts since the last tool activity.
    texts: Vec<String>,
    /// Deltas since the last finished text.
    streaming: String,
    session_id: Option<String>,
    run_id: Option<String>,
    last_error: Option<ResultError>,
    fatal_error: Option<ResultError>,
    /// The `done`, once it came.
    done: Option<DoneSaid>,
}

impl ResultFold {
    /// A fold before any event.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one event in.
    pub fn observe(&mut self, event: &AgentEvent, callbacks: &mut dyn EngineCallbacks) {
        callbacks.on_event(event);
        if !self.started {
            self.started = true;
            callbacks.on_thinking();
        }
        self.session_id = Some(event.session_id.clone());
        match &event.payload {
            EventPayload::Init(init) if init.run_id.is_some() => {
                self.run_id.clone_from(&init.run_id);
            }
            EventPayload::TextDelta(delta) => self.streaming.push_str(&delta.delta),
            EventPayload::Text(text) => {
                self.streaming.clear();
                self.texts.push(text.content.clone());
            }
            EventPayload::ToolUse(call) => {
                if let Some(narration) = self.take_text() {
                    callbacks.on_assistant_message(&narration);
                }
                let summary = call.description.as_deref().unwrap_or(&call.tool_name);
                callbacks.on_tool_use(&call.tool_name, &call.input, summary);
            }
            EventPayload::ToolResult(_) => {
                // Text before a result belongs to the call, not the answer.
                if let Some(narration) = self.take_text() {
                    callbacks.on_assistant_message(&narration);
                }
                callbacks.on_thinking();
            }
            EventPayload::Error(error) => {
                let reported = ResultError {
                    code: error.code.clone(),
                    message: error.message.clone(),
                };
                if !error.recoverable {
                    self.fatal_error = Some(reported.clone());
                }
                self.last_error = Some(reported);
            }
            EventPayload::Extension(extension)
                if extension.name.ends_with(TOOL_USE_SUMMARY_EVENT) =>
            {
                if let Some(summary) = extension.payload.get("summary").and_then(|s| s.as_str()) {
                    callbacks.on_tool_use_summary(summary);
                }
            }
            EventPayload::Done(done) => {
                self.done = Some(DoneSaid {
                    status: done.status,
                    result: done.result.clone().filter(|r| !r.is_empty()),
                    resume_token: done.resume_token.clone(),
                    usage: done.usage,
                    duration_ms: done.duration_ms,
                    turns: done
                        .metadata
                        .as_ref()
                        .and_then(|m| m.get(TURNS_METADATA_KEY))
                        .and_then(|t| t.as_u64()),
                });
            }
            _ => {}
        }
    }

    /// The result of what was observed.
    pub fn finish(self) -> EngineResult {
        self.finish_with_leftover().0
    }

    /// The result, and the text that was neither narration nor answer: what
    /// a run that failed said after its last tool activity (a renderer for
    /// people shows it; the result leaves it out).
    pub fn finish_with_leftover(mut self) -> (EngineResult, Option<String>) {
        let answer = self.take_text();
        let done = self.done.take();
        let status = done.as_ref().map_or(DoneStatus::Error, |done| done.status);
        let error = (status != DoneStatus::Success)
            .then(|| self.fatal_error.or(self.last_error))
            .flatten();
        // Text before a failure is not an answer: only a run that
        // succeeded has one, unless its done names it.
        let (answer, leftover) = match status {
            DoneStatus::Success => (answer, None),
            _ => (None, answer),
        };
        let result = EngineResult {
            status,
            text: done.as_ref().and_then(|d| d.result.clone()).or(answer),
            session_id: self.session_id,
            resume_token: done.as_ref().and_then(|d| d.resume_token.clone()),
            run_id: self.run_id,
            usage: done.as_ref().map(|d| d.usage).unwrap_or_default(),
            duration_ms: done.as_ref().map(|d| d.duration_ms),
            turns: done.and_then(|d| d.turns),
            error,
        };
        (result, leftover)
    }

    /// The text since the last tool activity, if any, and starts afresh.
    fn take_text(&mut self) -> Option<String> {
        let mut texts = std::mem::take(&mut self.texts);
        let streaming = std::mem::take(&mut self.streaming);
        if !streaming.is_empty() {
            texts.push(streaming);
        }
        let text = texts.join("\n");
        (!text.trim().is_empty()).then_some(text)
    }
}

/// Runs a stream of one run's events to its end and returns its result,
/// calling `callbacks` as events arrive.
pub async fn run_to_result(
    events: impl Stream<Item = AgentEvent>,
    callbacks: &mut dyn EngineCallbacks,
) -> EngineResult {
    let mut fold = ResultFold::new();
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        fold.observe(&event, callbacks);
    }
    fold.finish()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{
        Cost, CostSource, DonePayload, ErrorPayload, ExtensionPayload, InitPayload, InputTokens,
        OutputTokens, TokenCoverage, TokenReport, ToolResultPayload, ToolStatus, ToolUsePayload,
    };

    fn event(payload: EventPayload) -> AgentEvent {
        AgentEvent {
            agent: "a".into(),
            timestamp: 1,
            session_id: "s-1".into(),
            role: None,
            payload,
        }
    }

    fn tool_use(id: &str, description: Option<&str>) -> EventPayload {
        EventPayload::ToolUse(Box::new(ToolUsePayload {
            tool_name: "Read".into(),
            tool_use_id: id.into(),
            input: json!({"path": "a.rs"}).as_object().unwrap().clone(),
            description: description.map(str::to_owned),
        }))
    }

    fn tool_result(id: &str) -> EventPayload {
        EventPayload::ToolResult(Box::new(ToolResultPayload {
            tool_use_id: id.into(),
            tool_name: "Read".into(),
            status: ToolStatus::Success,
            output: json!("fn main() {}"),
            duration_ms: None,
        }))
    }

    fn done(status: DoneStatus, usage: Usage, metadata: Option<serde_json::Value>) -> EventPayload {
        EventPayload::Done(Box::new(DonePayload {
            status,
            result: None,
            resume_token: Some("resume-1".into()),
            usage,
            duration_ms: 1234,
            metadata: metadata.map(|m| m.as_object().unwrap().clone()),
        }))
    }

    /// Records every callback as a line.
    #[derive(Default)]
    struct Log(Vec<String>);

    impl EngineCallbacks for Log {
        fn on_thinking(&mut self) {
            self.0.push("thinking".into());
        }
        fn on_assistant_message(&mut self, text: &str) {
            self.0.push(format!("message {text}"));
        }
        fn on_tool_use(&mut self, name: &str, input: &JsonObject, summary: &str) {
            self.0
                .push(format!("tool {name} {} {summary}", input["path"]));
        }
        fn on_tool_use_summary(&mut self, summary: &str) {
            self.0.push(format!("summary {summary}"));
        }
    }

    fn fold(payloads: Vec<EventPayload>) -> (EngineResult, Vec<String>) {
        let mut log = Log::default();
        let mut fold = ResultFold::new();
        for payload in payloads {
            fold.observe(&event(payload), &mut log);
        }
        (fold.finish(), log.0)
    }

    #[test]
    fn narration_goes_to_the_callbacks_and_the_answer_only_to_the_result() {
        let tokens = TokenReport {
            coverage: TokenCoverage::Complete,
            input: InputTokens {
                total: 100,
                cache_read: Some(40),
                cache_write: None,
            },
            output: OutputTokens {
                total: 7,
                reasoning: None,
            },
        };
        let usage = Usage {
            tool_uses: 1,
            tokens: Some(tokens),
            cost: Some(Cost {
                usd: 0.25,
                source: CostSource::ProviderReported,
            }),
        };
        let (result, log) = fold(vec![
            EventPayload::Init(Box::new(InitPayload {
                run_id: Some("r_1".into()),
                ..InitPayload::default()
            })),
            EventPayload::text_delta("Let me "),
            EventPayload::text_delta("look."),
            tool_use("t1", Some("Read a.rs")),
            tool_result("t1"),
            EventPayload::Extension(Box::new(ExtensionPayload {
                name: "claude:tool_use_summary".into(),
                payload: json!({"summary": "Read one file"}),
            })),
            EventPayload::text_delta("It is "),
            EventPayload::text_delta("empty."),
            EventPayload::text("It is empty."),
            done(DoneStatus::Success, usage, Some(json!({"turns": 2}))),
        ]);
        assert_eq!(
            log,
            [
                "thinking",
                "message Let me look.",
                "tool Read \"a.rs\" Read a.rs",
                "thinking",
                "summary Read one file",
            ]
        );
        assert_eq!(result.status, DoneStatus::Success);
        assert_eq!(result.text.as_deref(), Some("It is empty."));
        assert_eq!(result.session_id.as_deref(), Some("s-1"));
        assert_eq!(result.resume_token.as_deref(), Some("resume-1"));
        assert_eq!(result.error, None);
        assert_eq!(result.run_id.as_deref(), Some("r_1"));
        assert_eq!(result.usage, usage, "the done's usage, whole");
        assert_eq!((result.turns, result.duration_ms), (Some(2), Some(1234)));
    }

    #[test]
    fn what_nobody_reported_stays_absent_and_a_failure_carries_its_error() {
        let (result, log) = fold(vec![
            EventPayload::text("half an answer, then the crash"),
            EventPayload::Error(Box::new(ErrorPayload {
                code: Some("INVALID_EVENT".into()),
                message: "dropped".into(),
                recoverable: true,
            })),
            EventPayload::Error(Box::new(ErrorPayload {
                code: Some("TIMEOUT".into()),
                message: "the run took longer than 1s".into(),
                recoverable: false,
            })),
            done(DoneStatus::Error, Usage::default(), None),
        ]);
        assert_eq!(log, ["thinking"]);
        assert_eq!(result.text, None, "text before a failure is no answer");
        assert_eq!(
            result.error.as_ref().unwrap().code.as_deref(),
            Some("TIMEOUT")
        );
        let json = serde_json::to_value(&result).unwrap();
        assert_eq!(json["usage"], json!({"toolUses": 0}));
        assert_eq!(json["durationMs"], json!(1234));
        assert!(json.get("turns").is_none() && json.get("runId").is_none());
    }

    #[test]
    fn the_dones_own_result_is_the_answer_and_a_success_has_no_error() {
        let mut with_result = done(DoneStatus::Success, Usage::default(), None);
        if let EventPayload::Done(done) = &mut with_result {
            done.result = Some("forty-two".into());
        }
        let (result, _) = fold(vec![
            EventPayload::Error(Box::new(ErrorPayload {
                code: None,
                message: "a hiccup".into(),
                recoverable: true,
            })),
            EventPayload::text("thinking out loud"),
            with_result,
        ]);
        assert_eq!(result.text.as_deref(), Some("forty-two"));
        assert_eq!(result.error, None);
    }
}
