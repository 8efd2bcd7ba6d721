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

use crate::{AgentEvent, CostSource, DoneStatus, EventPayload, JsonObject};

/// The `done.metadata` key under which an adapter reports its turns (model
/// round trips) when the backend reports or implies them.
pub const TURNS_METADATA_KEY: &str = "turns";

/// The `vendor:name` suffix of an extension event carrying a backend's own
/// summary of tool calls (`{"summary": "…"}`), for `on_tool_use_summary`.
pub const TOOL_USE_SUMMARY_EVENT: &str = ":tool_use_summary";

/// The result of one run: the final answer, the session to resume, what it
/// used and, when it failed, why. Every field is what the stream said, or
/// absent — never made up.
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
    /// What the run used.
    pub usage: ResultUsage,
    /// Why it failed, when it did and said so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ResultError>,
}

/// What a run used, flattened as the engine contract names it; each figure
/// authentic or absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultUsage {
    /// All input tokens, cache reads and writes included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// All output tokens, reasoning included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Input tokens read from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// What the run cost, in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Where the cost figure comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_source: Option<CostSource>,
    /// How long the run took, as its `done` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Model round trips, when the adapter reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u64>,
    /// Distinct tool calls.
    pub tool_uses: u32,
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
    last_error: Option<ResultError>,
    fatal_error: Option<ResultError>,
    /// The `done`, once it came.
    done: Option<(DoneStatus, Option<String>, Option<String>, ResultUsage)>,
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
                let tokens = done.usage.tokens;
                let usage = ResultUsage {
                    input_tokens: tokens.map(|t| t.input.total),
                    output_tokens: tokens.map(|t| t.output.total),
                    cache_read_tokens: tokens.and_then(|t| t.input.cache_read),
                    cache_write_tokens: tokens.and_then(|t| t.input.cache_write),
                    cost_usd: done.usage.cost.map(|c| c.usd),
                    cost_source: done.usage.cost.map(|c| c.source),
                    duration_ms: Some(done.duration_ms),
                    turns: done
                        .metadata
                        .as_ref()
                        .and_then(|m| m.get(TURNS_METADATA_KEY))
                        .and_then(|t| t.as_u64()),
                    tool_uses: done.usage.tool_uses,
                };
                let result = done.result.clone().filter(|r| !r.is_empty());
                self.done = Some((done.status, result, done.resume_token.clone(), usage));
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
        let (status, result, resume_token, usage) =
            self.done
                .take()
                .unwrap_or((DoneStatus::Error, None, None, ResultUsage::default()));
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
            text: result.or(answer),
            session_id: self.session_id,
            resume_token,
            usage,
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
        Cost, DonePayload, ErrorPayload, ExtensionPayload, InputTokens, OutputTokens,
        TokenCoverage, TokenReport, ToolResultPayload, ToolStatus, ToolUsePayload, Usage,
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
                source: CostSource::Vendor,
            }),
        };
        let (result, log) = fold(vec![
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
        let usage = &result.usage;
        assert_eq!(
            (
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens
            ),
            (Some(100), Some(7), Some(40))
        );
        assert_eq!(usage.cache_write_tokens, None, "absent, not zero");
        assert_eq!(
            (usage.cost_usd, usage.cost_source),
            (Some(0.25), Some(CostSource::Vendor))
        );
        assert_eq!(
            (usage.turns, usage.tool_uses, usage.duration_ms),
            (Some(2), 1, Some(1234))
        );
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
        assert_eq!(result.error.unwrap().code.as_deref(), Some("TIMEOUT"));
        let json = serde_json::to_value(&result.usage).unwrap();
        assert_eq!(json, json!({"durationMs": 1234, "toolUses": 0}));
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
