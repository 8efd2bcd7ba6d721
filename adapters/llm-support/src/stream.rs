//! What every stream translator shares: the [`Translate`] trait the
//! [`Session`](crate::Session) drives, and [`StreamState`], the session id
//! and the events that end a run.

use moat_guest::json::{Map, Value, json};
use moat_guest::sse::{SseEvent, SseParser};
use moat_guest::{DoneEvent, DoneStatus, Event, TURNS_METADATA_KEY};

use crate::failure::{Failure, cut};

/// The code of an event from the server that could not be understood.
pub const MALFORMED_EVENT: &str = "MALFORMED_EVENT";
/// The code of a stream that ended before the answer was complete.
pub const STREAM_CUT: &str = "STREAM_CUT";
/// Longest part of a bad event quoted in an error.
pub const MAX_QUOTED_EVENT: usize = 200;
/// Longest session id (the vendor's message id) kept.
const MAX_SESSION_ID: usize = 200;
/// Longest model name kept.
const MAX_NAME: usize = 200;
/// Longest stop reason kept.
const MAX_REASON: usize = 100;

/// A vendor's translation of one streamed answer into moat events. The
/// vendor reads its events ([`Translate::translate`]); what ends a run is
/// the same for every vendor and provided here.
pub trait Translate {
    /// The done metadata key of the vendor's stop reason (`stopReason`).
    const STOP_REASON: &'static str;

    /// The shared part of the translator's state.
    fn state(&self) -> &StreamState;

    /// The shared part of the translator's state, to change.
    fn state_mut(&mut self) -> &mut StreamState;

    /// The events one SSE event makes while the run goes on; the last one
    /// is the run's `done` when the stream ended with it.
    fn translate(&mut self, event: &SseEvent) -> Vec<Event>;

    /// The events that end a run whose body ended first (the answer, when
    /// the vendor considers it complete, or a `STREAM_CUT` failure).
    fn body_ended(&mut self) -> Vec<Event>;

    /// The tool calls reported so far, counted in the `done` of a run that
    /// fails or is interrupted.
    fn tool_uses(&self) -> u32 {
        0
    }

    /// Whether the run's `done` event was produced.
    fn ended(&self) -> bool {
        self.state().ended()
    }

    /// The events one SSE event of the stream makes; nothing once the run
    /// has ended.
    fn on_event(&mut self, event: &SseEvent) -> Vec<Event> {
        if self.ended() {
            return Vec::new();
        }
        self.translate(event)
    }

    /// The stream's body ended; nothing once the run has ended.
    fn end_of_body(&mut self) -> Vec<Event> {
        if self.ended() {
            return Vec::new();
        }
        self.body_ended()
    }

    /// A failure ends the run: its error, then `done` error with the tool
    /// calls so far and no token report (a broken stream's usage is
    /// unknown, never zero).
    fn fail(&mut self, failure: &Failure) -> Vec<Event> {
        let tool_uses = self.tool_uses();
        self.state_mut().fail(failure, Self::STOP_REASON, tool_uses)
    }

    /// The run was interrupted: `done` interrupted, nothing else.
    fn interrupted(&mut self) -> Event {
        let tool_uses = self.tool_uses();
        self.state_mut().interrupted(tool_uses)
    }

    /// Whether a successful answer with a JSON content type (a server that
    /// ignored `stream: true`) goes to [`Translate::on_complete`] whole;
    /// otherwise it is read as the stream.
    fn takes_whole_answers(&self) -> bool {
        false
    }

    /// A whole, non-streamed answer. By default it is read as the stream
    /// it should have been: its events, then the end of the body.
    fn on_complete(&mut self, body: &[u8]) -> Vec<Event> {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for item in parser.feed(body) {
            events.extend(match item {
                Ok(event) => self.on_event(&event),
                Err(error) => vec![Event::error(
                    MALFORMED_EVENT,
                    format!("the server sent an event moat cannot take: {error}"),
                    true,
                )],
            });
        }
        if let Some(last) = parser.finish() {
            events.extend(self.on_event(&last));
        }
        events.extend(self.end_of_body());
        events
    }
}

/// The state every translator keeps besides the vendor's own: the session
/// id its events carry, the model and stop reason its `done` reports, and
/// whether the run has ended.
#[derive(Debug, Default)]
pub struct StreamState {
    session_id: Option<String>,
    model: Option<String>,
    stop_reason: Option<String>,
    ended: bool,
}

impl StreamState {
    /// Whether the run's `done` event was produced.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Whether a session id was seen.
    pub fn has_session(&self) -> bool {
        self.session_id.is_some()
    }

    /// Takes the server's id of the answer as the session id (bounded);
    /// an empty id is ignored.
    pub fn set_session(&mut self, id: &str) {
        if !id.is_empty() {
            self.session_id = Some(cut(id, MAX_SESSION_ID));
        }
    }

    /// Whether the server named the model.
    pub fn has_model(&self) -> bool {
        self.model.is_some()
    }

    /// Takes the model the server named (bounded).
    pub fn set_model(&mut self, model: Option<&str>) {
        self.model = model.map(|m| cut(m, MAX_NAME));
    }

    /// The vendor's stop reason, once the server gave one.
    pub fn stop_reason(&self) -> Option<&str> {
        self.stop_reason.as_deref()
    }

    /// Takes the vendor's stop reason (bounded).
    pub fn set_stop_reason(&mut self, reason: &str) {
        self.stop_reason = Some(cut(reason, MAX_REASON));
    }

    /// The answer is complete: `done` (success) with the stop reason (as
    /// `reason_key`), the model and the turns in its metadata, tagged.
    pub fn finish(&mut self, mut done: DoneEvent, reason_key: &str) -> Event {
        self.ended = true;
        let mut metadata = Map::new();
        // A turn is a model call, and a run of these adapters makes one.
        metadata.insert(TURNS_METADATA_KEY.into(), json!(1));
        if let Some(reason) = &self.stop_reason {
            metadata.insert(reason_key.into(), json!(reason));
        }
        if let Some(model) = &self.model {
            metadata.insert("model".into(), json!(model));
        }
        if !metadata.is_empty() {
            done = done.with_metadata(&Value::Object(metadata));
        }
        self.tag(done.into())
    }

    /// `event`, with the session id when one was seen.
    pub fn tag(&self, event: Event) -> Event {
        match &self.session_id {
            Some(id) => event.with_session(id.as_str()),
            None => event,
        }
    }

    /// An error ends the run: the error, then `done` error with
    /// `tool_uses` and no token report (a broken stream's usage is
    /// unknown, never zero). The metadata carries the HTTP status, the
    /// `retry-after` and the stop reason (as `reason_key`) when known.
    /// Nothing once the run has ended.
    pub fn fail(&mut self, failure: &Failure, reason_key: &str, tool_uses: u32) -> Vec<Event> {
        if self.ended {
            return Vec::new();
        }
        self.ended = true;
        let mut metadata = Map::new();
        if let Some(status) = failure.status {
            metadata.insert("httpStatus".into(), json!(status));
        }
        if let Some(after) = &failure.retry_after {
            metadata.insert("retryAfter".into(), json!(after));
        }
        if let Some(reason) = &self.stop_reason {
            metadata.insert(reason_key.into(), json!(reason));
        }
        let mut done = DoneEvent::new(DoneStatus::Error).with_tool_uses(tool_uses);
        if !metadata.is_empty() {
            done = done.with_metadata(&Value::Object(metadata));
        }
        vec![
            self.tag(Event::from(failure.error.clone())),
            self.tag(done.into()),
        ]
    }

    /// The run was interrupted: `done` interrupted with `tool_uses`.
    pub fn interrupted(&mut self, tool_uses: u32) -> Event {
        self.ended = true;
        self.tag(
            DoneEvent::new(DoneStatus::Interrupted)
                .with_tool_uses(tool_uses)
                .into(),
        )
    }

    /// A recoverable `MALFORMED_EVENT` error quoting (bounded) the `raw`
    /// event that was skipped.
    pub fn malformed(&self, what: &str, raw: &str) -> Event {
        self.malformed_text(&format!(
            "the server sent {what}; skipped: {}",
            cut(raw, MAX_QUOTED_EVENT)
        ))
    }

    /// A recoverable `MALFORMED_EVENT` error saying `message`.
    pub fn malformed_text(&self, message: &str) -> Event {
        self.tag(Event::error(MALFORMED_EVENT, message, true))
    }
}

#[cfg(test)]
mod tests;
