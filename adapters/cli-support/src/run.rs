//! The state every CLI translator keeps (session, whether `done` was sent,
//! the tool calls) and the steps built on it that do not depend on the
//! CLI's line format: taking a line in, ending a run the CLI did not end,
//! aborting, and the events most lines turn into.

use std::cell::Cell;

use moat_guest::json::Value;
use moat_guest::{
    DoneStatus, Event, EventKind, InputTokens, OutputTokens, SESSION_NOT_FOUND, TURNS_METADATA_KEY,
    TokenCoverage, TokenReport,
};

use crate::{
    CLI_FAILED, Exit, ToolTracker, Translator, clip, oversize, oversize_error, parse_line,
    session_id, with_session,
};

/// The longest CLI message forwarded in an error event.
pub const MAX_MESSAGE: usize = 4000;

/// What a translator knows of any run, whatever the CLI.
#[derive(Debug, Default)]
pub struct RunState {
    /// The CLI's session (Codex: thread) id once announced: the resume
    /// token, and the session every event carries.
    pub session: Option<String>,
    /// Whether `done` was produced: nothing follows it.
    pub done: bool,
    /// The tool calls seen.
    pub tools: ToolTracker,
    /// The model round trips the events imply.
    pub turns: TurnCounter,
}

/// Model round trips (turns) as a run's events imply them, for CLIs that do
/// not report them: a turn starts with model output (text, thinking, a tool
/// call) and ends at a tool result, after which the model is called again.
#[derive(Debug, Default)]
pub struct TurnCounter {
    turns: Cell<u64>,
    in_turn: Cell<bool>,
}

impl TurnCounter {
    /// Takes one event in.
    pub fn saw(&self, kind: &EventKind) {
        let model_output = matches!(
            kind,
            EventKind::Text(_)
                | EventKind::TextDelta(_)
                | EventKind::Thinking(_)
                | EventKind::ToolUse(_)
        );
        if model_output && !self.in_turn.replace(true) {
            self.turns.set(self.turns.get() + 1);
        }
        if matches!(kind, EventKind::ToolResult(_)) {
            self.in_turn.set(false);
        }
    }

    /// The turns so far.
    pub fn count(&self) -> u64 {
        self.turns.get()
    }
}

impl RunState {
    /// The session id, once known.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// `event` with the run's session id, when known. Every event a
    /// translator emits passes here, so this is also where the turns are
    /// counted, and where a `done` gets them (under
    /// [`TURNS_METADATA_KEY`]) unless the CLI reported its own.
    pub fn tag(&self, mut event: Event) -> Event {
        self.turns.saw(&event.kind);
        if let EventKind::Done(done) = &mut event.kind
            && self.turns.count() > 0
        {
            let mut metadata = done
                .metadata
                .as_deref()
                .and_then(|m| moat_guest::serde_json::from_str::<Value>(m).ok())
                .filter(Value::is_object)
                .unwrap_or_else(|| Value::Object(Default::default()));
            if metadata.get(TURNS_METADATA_KEY).is_none() {
                metadata[TURNS_METADATA_KEY] = self.turns.count().into();
                done.metadata = Some(metadata.to_string());
            }
        }
        with_session(event, self.session())
    }

    /// The start of [`Translator::line`](crate::Translator::line): the
    /// JSON object on `line`, or `None` when there is nothing to translate
    /// — the run is done, the line is not an object, or it is oversize
    /// (then with the error saying so, naming `cli`, pushed to `out`).
    pub fn accept(&self, cli: &str, line: &str, out: &mut Vec<Event>) -> Option<Value> {
        if self.done {
            return None;
        }
        if oversize(line) {
            out.push(self.tag(oversize_error(cli, line)));
            return None;
        }
        parse_line(line).map(Value::Object)
    }

    /// The events ending a run the CLI ended without a result line
    /// ([`failure`](crate::failure) with `status`), or none when `done` was
    /// already sent; the run is done afterwards.
    pub fn fail(
        &mut self,
        cli: &str,
        exit: Exit,
        stderr: &str,
        status: DoneStatus,
        code: &str,
    ) -> Vec<Event> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        crate::failure(
            cli,
            exit,
            stderr,
            status,
            code,
            self.session(),
            self.tools.count(),
        )
    }

    /// The aborted run's `done` ([`interrupted`](crate::interrupted)); the
    /// run is done afterwards.
    pub fn interrupt(&mut self) -> Event {
        self.done = true;
        crate::interrupted(self.session(), self.tools.count())
    }

    /// An error event with `code` for a message the CLI reported
    /// (`fallback` when it gave none), clipped to [`MAX_MESSAGE`].
    pub fn reported_error(
        &self,
        code: &str,
        message: Option<&str>,
        fallback: &str,
        recoverable: bool,
    ) -> Event {
        let message = message.unwrap_or(fallback);
        self.tag(Event::error(code, clip(message, MAX_MESSAGE), recoverable))
    }
}

/// A translator keeping its state in a [`RunState`]: it handles the CLI's
/// line objects; taking lines in, ending and aborting the run — the rest of
/// [`Translator`] — are the same for every CLI and come with it.
pub trait LineTranslator {
    /// The CLI's name in messages.
    const CLI: &'static str;

    /// The field of any line that carries the session id, for CLIs that
    /// repeat it on every line (Codex announces its thread only once, in a
    /// line its translator handles).
    const SESSION_FIELD: Option<&'static str> = None;

    /// The run's state.
    fn run(&self) -> &RunState;

    /// The run's state, to change.
    fn run_mut(&mut self) -> &mut RunState;

    /// What the CLI says (on stderr, or in its result's error) when the
    /// session it was asked to resume is gone: such a failure is reported
    /// as [`SESSION_NOT_FOUND`], which the host retries as a fresh session.
    const SESSION_GONE: &'static [&'static str] = &[];

    /// Translates the JSON object of one stdout line of a run not yet done.
    fn object(&mut self, line: &Value, out: &mut Vec<Event>);

    /// The CLI ended (with `exit`) without a result line: pushes what must
    /// come before the failure events (such as text still being assembled)
    /// and returns the `done` status. An error unless the CLI says more.
    fn ended(&mut self, exit: Exit, out: &mut Vec<Event>) -> DoneStatus {
        let _ = (exit, out);
        DoneStatus::Error
    }
}

impl<T: LineTranslator> Translator for T {
    fn line(&mut self, line: &str) -> Vec<Event> {
        let mut out = Vec::new();
        if let Some(object) = self.run().accept(T::CLI, line, &mut out) {
            if let Some(session) = T::SESSION_FIELD.and_then(|field| session_id(&object[field])) {
                self.run_mut().session = Some(session);
            }
            self.object(&object, &mut out);
        }
        out
    }

    fn finish(&mut self, exit: Exit, stderr: &str) -> Vec<Event> {
        if self.run().done {
            return Vec::new();
        }
        let mut out = Vec::new();
        let status = self.ended(exit, &mut out);
        let code = error_code::<T>(stderr, CLI_FAILED);
        out.extend(self.run_mut().fail(T::CLI, exit, stderr, status, code));
        out
    }

    fn interrupted(&mut self) -> Event {
        self.run_mut().interrupt()
    }

    fn is_done(&self) -> bool {
        self.run().done
    }
}

/// [`SESSION_NOT_FOUND`] when `message` is what `T`'s CLI says of a
/// session it does not have, else `otherwise`.
pub fn error_code<T: LineTranslator>(message: &str, otherwise: &'static str) -> &'static str {
    if T::SESSION_GONE
        .iter()
        .any(|marker| message.contains(marker))
    {
        SESSION_NOT_FOUND
    } else {
        otherwise
    }
}

/// A token report of `input` and `output` tokens: partial for a failed run,
/// which may have lost the call that failed, complete otherwise.
pub fn token_report(failed: bool, input: InputTokens, output: u64) -> TokenReport {
    let coverage = if failed {
        TokenCoverage::Partial
    } else {
        TokenCoverage::Complete
    };
    TokenReport::new(coverage, input, OutputTokens::new(output))
}
