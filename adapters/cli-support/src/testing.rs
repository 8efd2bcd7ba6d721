//! Replaying recorded fixtures (`tests/fixtures/cli/<cli>/<scenario>.jsonl`,
//! written by `scripts/record-cli-fixtures`) through a translator, for the
//! adapters' native unit tests, and picking the events they check out of
//! the result.

use std::path::{Path, PathBuf};

use moat_guest::json::Value;
use moat_guest::{
    DoneEvent, DoneStatus, ErrorInfo, Event, EventKind, Options, ToolResultEvent, ToolUseEvent,
};

use crate::{Exit, Invocation, Translator, translate_all};

/// A recorded CLI run.
#[derive(Debug, Clone)]
pub struct Fixture {
    /// The stdout lines, in order.
    pub stdout: Vec<String>,
    /// Everything on stderr, one line per recorded line.
    pub stderr: String,
    /// How the CLI ended.
    pub exit: Exit,
}

/// The fixture directory of `cli` in the workspace.
pub fn fixture_dir(cli: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/cli")
        .join(cli)
}

impl Fixture {
    /// Loads `<scenario>.jsonl` and its `.meta.json` for `cli`; panics with
    /// the path when they are missing or malformed (a test setup error).
    pub fn load(cli: &str, scenario: &str) -> Fixture {
        let dir = fixture_dir(cli);
        let path = dir.join(format!("{scenario}.jsonl"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("read {}: {error}", path.display()));
        let mut fixture = Fixture {
            stdout: Vec::new(),
            stderr: String::new(),
            exit: Exit::default(),
        };
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            let entry: Value = moat_guest::serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            if let Some(out) = entry["stdout"].as_str() {
                fixture.stdout.push(out.to_owned());
            } else if let Some(err) = entry["stderr"].as_str() {
                fixture.stderr.push_str(err);
                fixture.stderr.push('\n');
            }
        }
        let meta_path = dir.join(format!("{scenario}.meta.json"));
        let meta: Value = moat_guest::serde_json::from_str(
            &std::fs::read_to_string(&meta_path)
                .unwrap_or_else(|error| panic!("read {}: {error}", meta_path.display())),
        )
        .unwrap_or_else(|error| panic!("{}: {error}", meta_path.display()));
        fixture.exit = Exit {
            code: meta["exit_code"]
                .as_i64()
                .and_then(|c| i32::try_from(c).ok()),
            signal: meta["signal"].as_i64().and_then(|s| i32::try_from(s).ok()),
        };
        fixture
    }

    /// The stdout lines parsed, for tests that look at the raw lines.
    pub fn parsed(&self) -> Vec<Value> {
        self.stdout
            .iter()
            .filter_map(|line| moat_guest::serde_json::from_str(line).ok())
            .collect()
    }

    /// The string `field` of the recording's first stdout line: the session
    /// (or thread) id the CLI announced, which the events must carry.
    pub fn first_line_field(&self, field: &str) -> String {
        self.parsed()[0][field]
            .as_str()
            .unwrap_or_else(|| panic!("the first line has no string {field:?}"))
            .to_owned()
    }

    /// Feeds `translator` the stdout lines before the first one `stop`
    /// accepts (all of them when none does), dropping the events: the state
    /// of a run cut off at that point.
    pub fn feed_until(&self, translator: &mut impl Translator, stop: impl Fn(&str) -> bool) {
        for line in self.stdout.iter().take_while(|line| !stop(line)) {
            translator.line(line);
        }
    }

    /// Runs every line and the exit through `translator`.
    pub fn translate(&self, translator: &mut impl Translator) -> Vec<Event> {
        translate_all(
            translator,
            self.stdout.iter().map(String::as_str),
            self.exit,
            &self.stderr,
        )
    }
}

/// The run's `done` event, checking that it is the last event and the only
/// `done` (every translated run must end that way).
pub fn done_of(events: &[Event]) -> &DoneEvent {
    let last = events.last().expect("events");
    let EventKind::Done(done) = &last.kind else {
        panic!("the last event is not done: {last:?}")
    };
    assert_eq!(
        events.iter().filter(|event| event.is_done()).count(),
        1,
        "exactly one done"
    );
    done
}

/// The complete texts, in order.
pub fn texts(events: &[Event]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The text deltas joined: what a client streaming the run would show.
pub fn deltas(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::TextDelta(delta) => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

/// The error events' details, in order.
pub fn errors(events: &[Event]) -> Vec<&ErrorInfo> {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::Error(error) => Some(error),
            _ => None,
        })
        .collect()
}

/// The tool calls, in order.
pub fn tool_calls(events: &[Event]) -> Vec<&ToolUseEvent> {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::ToolUse(call) => Some(call),
            _ => None,
        })
        .collect()
}

/// The tool results, in order.
pub fn tool_results(events: &[Event]) -> Vec<&ToolResultEvent> {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::ToolResult(result) => Some(result),
            _ => None,
        })
        .collect()
}

/// Aborts the run: the `done` event `translator` answers with, checking
/// that it is one.
pub fn interrupt(translator: &mut impl Translator) -> DoneEvent {
    let event = translator.interrupted();
    let EventKind::Done(done) = event.kind else {
        panic!("an abort is answered with done: {event:?}")
    };
    done
}

/// Checks that the run ended with `status`, resumable in `session`.
pub fn assert_ended(done: &DoneEvent, status: DoneStatus, session: &str) {
    assert_eq!(done.status, status);
    assert_eq!(done.resume_token.as_deref(), Some(session));
}

/// Checks that every event carries `session`.
pub fn assert_all_in_session(events: &[Event], session: &str) {
    for event in events {
        assert_eq!(event.session_id.as_deref(), Some(session), "{event:?}");
    }
}

/// Checks that `invocation` refuses each of `refused` as an unsupported
/// option, and not as something a retry could fix.
pub fn assert_refused(
    invocation: impl Fn(&str, &Options) -> Result<Invocation, ErrorInfo>,
    refused: &[Options],
) {
    for options in refused {
        let error = invocation("x", options).unwrap_err();
        assert_eq!(
            error.code.as_deref(),
            Some(crate::args::UNSUPPORTED_OPTION),
            "{options:?}"
        );
        assert!(!error.recoverable, "{options:?}");
    }
}

/// The first tool call; fails the test when there is none.
pub fn tool_call(events: &[Event]) -> &ToolUseEvent {
    tool_calls(events)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no tool call in {events:?}"))
}

/// The first tool result; fails the test when there is none.
pub fn tool_result(events: &[Event]) -> &ToolResultEvent {
    tool_results(events)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no tool result in {events:?}"))
}

/// Checks that the run succeeded with `result` as its result, resumable in
/// `session`; its `done` event.
pub fn assert_succeeded<'a>(events: &'a [Event], result: &str, session: &str) -> &'a DoneEvent {
    let done = done_of(events);
    assert_ended(done, DoneStatus::Success, session);
    assert_eq!(done.result.as_deref(), Some(result));
    done
}

/// Checks a run whose resumed session the CLI did not have: one error,
/// `SESSION_NOT_FOUND` and fatal, quoting the CLI, then `done` error (what
/// the host turns into a fresh session).
pub fn assert_session_not_found(events: &[Event], quoting: &str) {
    let errors = errors(events);
    let [error] = errors.as_slice() else {
        panic!("one error: {errors:?}");
    };
    assert_eq!(error.code.as_deref(), Some(moat_guest::SESSION_NOT_FOUND));
    assert!(!error.recoverable);
    assert!(error.message.contains(quoting), "{}", error.message);
    assert_eq!(done_of(events).status, moat_guest::DoneStatus::Error);
}
