//! Shared parts of moat's agent-CLI adapters (`claude-code`, `codex`,
//! `gemini`).
//!
//! Each of those adapters runs a coding-agent CLI in its headless JSON mode
//! and turns every line it prints into Unified Event Stream events. The
//! translation is a [`Translator`]: a state machine fed one stdout line at a
//! time, then the exit status, with no dependency on how the process is run,
//! so it is unit-tested natively on recorded fixtures. This crate holds what
//! the three have in common: the adapter itself ([`CliAdapter`], given a
//! [`Cli`]), the translator plumbing ([`LineTranslator`] on a
//! [`RunState`]), bounded JSON line parsing, tool bookkeeping, the events
//! that end a run the CLI did not end itself, argument checks, one
//! summarizer of tool calls for people ([`summary`]), and — for
//! native builds — the helpers of the adapters' unit tests ([`testing`]).
//!
//! Everything a CLI prints is untrusted: nothing here panics on bad input,
//! and every string kept or forwarded is bounded.

mod adapter;
mod args;
mod child;
mod run;
mod session;
pub mod summary;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
mod tools;

use moat_guest::json::{Map, Value};
use moat_guest::{DoneEvent, DoneStatus, Event};

pub use adapter::{Cli, CliAdapter};
pub use args::{Invocation, check_exact_names, program, refuse_ask_tools, unsupported};
pub use child::{CLI_NOT_FOUND, ChildProcess, spawn};
pub use run::{LineTranslator, MAX_MESSAGE, RunState, TurnCounter, error_code, token_report};
pub use session::{AFTER_RESULT_GRACE, CliProcess, CliSession, EXIT_GRACE, ReadError};
pub use tools::ToolTracker;

/// The longest stdout line translated; a longer one is skipped with an
/// error event (the CLIs' lines are a few KiB; a tool result can be large).
/// The same as the host's limit (`moat::sandbox::MAX_LINE_BYTES`), which
/// skips longer lines before they reach the adapter; this check is what
/// applies natively, where there is no host.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// The longest session id kept.
const MAX_SESSION_ID: usize = 256;

/// The most of the CLI's stderr quoted in an error message.
const MAX_STDERR_QUOTE: usize = 2000;

/// Error code: the CLI ended (or failed) without the line that ends its run.
pub const CLI_FAILED: &str = "CLI_FAILED";

/// How a CLI process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Exit {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

impl Exit {
    /// An exit with `code`.
    pub fn code(code: i32) -> Self {
        Exit {
            code: Some(code),
            signal: None,
        }
    }

    /// Whether it exited with code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// "exited with code 1", "was killed by signal 9".
    pub fn describe(&self) -> String {
        match (self.code, self.signal) {
            (Some(code), _) => format!("exited with code {code}"),
            (None, Some(signal)) => format!("was killed by signal {signal}"),
            (None, None) => "ended".to_owned(),
        }
    }
}

/// Translates one CLI's output into events.
pub trait Translator {
    /// Translates one stdout line (without its newline). Lines that are not
    /// JSON objects, and objects of unknown types, yield nothing.
    fn line(&mut self, line: &str) -> Vec<Event>;

    /// The CLI's stdout ended and the process ended with `exit`; `stderr`
    /// is the tail of what it wrote there. Returns the events that end the
    /// run — an error and `done` — unless a `done` was already produced.
    fn finish(&mut self, exit: Exit, stderr: &str) -> Vec<Event>;

    /// The run was aborted: the `done` interrupted event, carrying the
    /// session id as resume token when the CLI had started a session.
    fn interrupted(&mut self) -> Event;

    /// Whether `done` was produced: nothing follows it.
    fn is_done(&self) -> bool;
}

/// Parses a line into a JSON object; `None` for an oversize line, a line
/// that is not JSON, or JSON that is not an object.
pub fn parse_line(line: &str) -> Option<Map<String, Value>> {
    if line.len() > MAX_LINE_BYTES {
        return None;
    }
    match moat_guest::serde_json::from_str(line.trim_end_matches('\r')) {
        Ok(Value::Object(object)) => Some(object),
        _ => None,
    }
}

/// Whether a line is too large to translate.
pub fn oversize(line: &str) -> bool {
    line.len() > MAX_LINE_BYTES
}

/// The error event for a skipped oversize line.
pub fn oversize_error(cli: &str, line: &str) -> Event {
    Event::error(
        "OVERSIZE_LINE",
        format!(
            "skipped a {} byte line from {cli}: larger than {MAX_LINE_BYTES} bytes",
            line.len()
        ),
        true,
    )
}

/// A session id from untrusted output: a non-empty string of at most 256
/// bytes, else `None`.
pub fn session_id(value: &Value) -> Option<String> {
    value
        .as_str()
        .filter(|id| !id.is_empty() && id.len() <= MAX_SESSION_ID)
        .map(str::to_owned)
}

/// `text` cut to at most `max` bytes, on a character boundary.
pub fn clip(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

/// The last lines of a CLI's stderr worth quoting in an error message:
/// blank lines dropped, at most 2000 bytes from the end.
pub fn stderr_quote(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .collect();
    let mut quote = String::new();
    for line in lines.iter().rev() {
        if quote.len() + line.len() + 1 > MAX_STDERR_QUOTE {
            break;
        }
        quote.insert_str(0, &format!("{line}\n"));
    }
    if let (true, Some(last)) = (quote.is_empty(), lines.last()) {
        // One huge line: its end is the informative part.
        let start = last.ceil_char_boundary(last.len().saturating_sub(MAX_STDERR_QUOTE));
        quote = last[start..].to_owned();
    }
    quote.trim_end().to_owned()
}

/// The events that end a run the CLI did not end with its own result
/// line: an error (`code`) naming how the CLI ended (with the tail of its
/// stderr), then `done` with `status`.
pub fn failure(
    cli: &str,
    exit: Exit,
    stderr: &str,
    status: DoneStatus,
    code: &str,
    session: Option<&str>,
    tool_uses: u32,
) -> Vec<Event> {
    let mut message = format!("{cli} {} before it reported a result", exit.describe());
    let quote = stderr_quote(stderr);
    if !quote.is_empty() {
        message.push_str(": ");
        message.push_str(&quote);
    }
    let mut done = DoneEvent::new(status).with_tool_uses(tool_uses);
    if let Some(session) = session {
        done = done.with_resume_token(session);
    }
    vec![
        with_session(Event::error(code, message, false), session),
        with_session(done.into(), session),
    ]
}

/// `done` interrupted, resumable when the session is known.
pub fn interrupted(session: Option<&str>, tool_uses: u32) -> Event {
    let mut done = DoneEvent::new(DoneStatus::Interrupted).with_tool_uses(tool_uses);
    if let Some(session) = session {
        done = done.with_resume_token(session);
    }
    with_session(done.into(), session)
}

/// Sets the event's session id when one is known.
pub fn with_session(event: Event, session: Option<&str>) -> Event {
    match session {
        Some(session) => event.with_session(session),
        None => event,
    }
}

/// A tool's output as the event carries it: text stays a JSON string, an
/// array of text blocks (`[{"type":"text","text":…}]`) becomes the joined
/// text, anything else stays as it is.
pub fn tool_output(content: &Value) -> Value {
    if let Some(blocks) = content.as_array() {
        let texts: Option<Vec<&str>> = blocks
            .iter()
            .map(|block| {
                (block["type"] == "text")
                    .then(|| block["text"].as_str())
                    .flatten()
            })
            .collect();
        if let Some(texts) = texts.filter(|texts| !texts.is_empty()) {
            return Value::String(texts.concat());
        }
    }
    content.clone()
}

/// A tool's input as the event carries it: a JSON object; anything else
/// (which the CLIs do not send) is wrapped as `{"input": …}`.
pub fn tool_input(input: &Value) -> Value {
    match input {
        Value::Object(_) => input.clone(),
        Value::Null => Value::Object(Map::new()),
        other => {
            let mut object = Map::new();
            object.insert("input".to_owned(), other.clone());
            Value::Object(object)
        }
    }
}

/// Feeds every line to `translator`, then the exit: the whole run's
/// events, as a session would produce them. For tests and replays.
pub fn translate_all<'a>(
    translator: &mut impl Translator,
    lines: impl IntoIterator<Item = &'a str>,
    exit: Exit,
    stderr: &str,
) -> Vec<Event> {
    let mut events = Vec::new();
    for line in lines {
        if translator.is_done() {
            break;
        }
        events.extend(translator.line(line));
    }
    if !translator.is_done() {
        events.extend(translator.finish(exit, stderr));
    }
    events
}

#[cfg(test)]
mod tests;
