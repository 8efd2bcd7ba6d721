//! Gemini CLI's `--output-format stream-json` lines → events.
//!
//! One JSON object per line (recorded from Gemini CLI 0.61.0, see
//! `tests/fixtures/cli/gemini/`):
//!
//! - `init {session_id, model}` → `init`; the session id is the resume
//!   token;
//! - `message {role, content, delta?}`: assistant `delta: true` fragments →
//!   `text_delta`, and the text they assemble → one `text` when the
//!   message ends (at the next tool call, result, error or message of
//!   another kind); a whole assistant message → `text`; the echoed user
//!   prompt (`role: "user"`) is not assistant output and is ignored;
//! - `tool_use {tool_name, tool_id, parameters}` → `tool_use`;
//! - `tool_result {tool_id, status, output?, error?}` → `tool_result`;
//! - `error {message}` → recoverable `error`;
//! - `result {status, error?, stats}` → `done`: `FatalTurnLimitedError` →
//!   max_turns, other errors → error (with an `error` event first); tokens
//!   from `stats` (input inclusive of `cached`), left out when a failed run
//!   reports all zeros (the CLI counted nothing, which is not a
//!   measurement).
//!
//! Without a `result` line the exit code decides: 53 → max_turns (Gemini's
//! turn-limit code), anything else → error.

use moat_cli_support::{Exit, LineTranslator, RunState, summary, token_report, tool_input};
use moat_guest::json::{Value, json};
use moat_guest::{
    DoneEvent, DoneStatus, Event, InitEvent, InputTokens, TokenReport, ToolStatus, ToolUseEvent,
    Usage,
};

/// The CLI's name in messages.
const CLI: &str = "gemini";

/// Gemini CLI's exit code when the session hit its turn limit.
pub const EXIT_TURN_LIMIT: i32 = 53;

/// Error code of Gemini's non-fatal errors.
pub const GEMINI_WARNING: &str = "GEMINI_WARNING";

/// Error code of the error a failed result reports.
pub const GEMINI_ERROR: &str = "GEMINI_ERROR";

/// The error type of a result that hit the turn limit.
const TURN_LIMIT_ERROR: &str = "FatalTurnLimitedError";

/// The most assistant text assembled into one `text` event; past it the
/// deltas still stream and the assembled text is sent in pieces.
const MAX_ASSEMBLED: usize = 4 * 1024 * 1024;

/// What the translator knows of the run from its options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunContext {
    /// The working directory (Gemini's init line has none).
    pub cwd: Option<String>,
}

/// The state of one Gemini CLI run's translation.
#[derive(Debug, Default)]
pub struct GeminiTranslator {
    context: RunContext,
    run: RunState,
    init_sent: bool,
    /// Assistant text streamed since the last flush.
    text: String,
    /// The assistant text since the last tool call: the result (text
    /// before a call is narration, not the answer).
    answer: String,
}

impl GeminiTranslator {
    /// A translator for a run with `context`.
    pub fn new(context: RunContext) -> Self {
        GeminiTranslator {
            context,
            ..Self::default()
        }
    }

    /// Sends the assembled assistant text, if any.
    fn flush_text(&mut self, out: &mut Vec<Event>) {
        if self.text.is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.text);
        out.push(self.run.tag(Event::text(text)));
    }

    fn message(&mut self, line: &Value, out: &mut Vec<Event>) {
        if line["role"] != "assistant" {
            // The echoed prompt ends any assistant message before it.
            self.flush_text(out);
            return;
        }
        let Some(content) = line["content"].as_str() else {
            return;
        };
        if line["delta"] == true {
            if content.is_empty() {
                return;
            }
            out.push(self.run.tag(Event::text_delta(content)));
            if self.text.len() + content.len() > MAX_ASSEMBLED {
                self.flush_text(out);
            }
            self.text.push_str(content);
            if self.answer.len() + content.len() <= MAX_ASSEMBLED {
                self.answer.push_str(content);
            }
        } else {
            self.flush_text(out);
            if !content.is_empty() {
                if self.answer.len() + content.len() <= MAX_ASSEMBLED {
                    self.answer.push_str(content);
                }
                out.push(self.run.tag(Event::text(content)));
            }
        }
    }

    fn tool_use(&mut self, line: &Value, out: &mut Vec<Event>) {
        self.flush_text(out);
        self.answer.clear();
        let (Some(id), Some(name)) = (line["tool_id"].as_str(), line["tool_name"].as_str()) else {
            return;
        };
        if id.is_empty() || !self.run.tools.record(id, name) {
            return;
        }
        let input = tool_input(&line["parameters"]);
        let summary = summary::summarize(summary::GEMINI, name, &input);
        let call = ToolUseEvent::new(name, id, &input).with_description(summary);
        out.push(self.run.tag(call.into()));
    }

    fn tool_result(&mut self, line: &Value, out: &mut Vec<Event>) {
        self.flush_text(out);
        let Some(id) = line["tool_id"].as_str().filter(|id| !id.is_empty()) else {
            return;
        };
        let status = match line["status"].as_str() {
            Some("success") => ToolStatus::Success,
            _ => ToolStatus::Error,
        };
        let output = if !line["output"].is_null() {
            line["output"].clone()
        } else {
            line["error"].clone()
        };
        let name = self.run.tools.name(id).to_owned();
        out.push(self.run.tag(Event::tool_result(id, name, status, &output)));
    }

    fn result(&mut self, line: &Value, out: &mut Vec<Event>) {
        self.flush_text(out);
        let failed = line["status"] != "success";
        let error_type = line["error"]["type"].as_str().unwrap_or_default();
        let status = match (failed, error_type) {
            (false, _) => DoneStatus::Success,
            (true, TURN_LIMIT_ERROR) => DoneStatus::MaxTurns,
            (true, _) => DoneStatus::Error,
        };
        if status == DoneStatus::Error {
            out.push(self.run.reported_error(
                GEMINI_ERROR,
                line["error"]["message"].as_str(),
                "Gemini CLI reported an error",
                false,
            ));
        }
        let mut usage = Usage::new(self.run.tools.count());
        if let Some(tokens) = stats_tokens(&line["stats"], failed) {
            usage = usage.with_tokens(tokens);
        }
        let mut done = DoneEvent::new(status).with_usage(usage);
        if status == DoneStatus::Success {
            done = done.with_result(self.answer.as_str());
        }
        if let Some(session) = &self.run.session {
            done = done.with_resume_token(session.as_str());
        }
        let metadata = json!({
            "status": line["status"],
            "errorType": line["error"]["type"],
            "totalTokens": line["stats"]["total_tokens"],
            "cliDurationMs": line["stats"]["duration_ms"],
        });
        done = done.with_metadata(&metadata);
        self.run.done = true;
        out.push(self.run.tag(done.into()));
    }
}

/// The run's tokens from the result's `stats`: input inclusive of `cached`
/// (Gemini's `input` is the uncached part), output as reported. `None`
/// when absent, or when a failed run reports nothing but zeros.
fn stats_tokens(stats: &Value, failed: bool) -> Option<TokenReport> {
    let input = stats["input_tokens"].as_u64()?;
    let output = stats["output_tokens"].as_u64()?;
    let total = stats["total_tokens"].as_u64().unwrap_or(input + output);
    if failed && input == 0 && output == 0 && total == 0 {
        return None;
    }
    let mut input_tokens = InputTokens::new(input);
    if let Some(cached) = stats["cached"].as_u64().filter(|cached| *cached <= input) {
        input_tokens = input_tokens.with_cache_read(cached);
    }
    Some(token_report(failed, input_tokens, output))
}

impl LineTranslator for GeminiTranslator {
    const CLI: &'static str = CLI;
    const SESSION_FIELD: Option<&'static str> = Some("session_id");
    /// Gemini CLI 0.61.0, `--resume` of a session it does not have (exit
    /// 42; "No previous sessions found for this project." or "Invalid
    /// session identifier …": tests/fixtures/cli/gemini/resume-missing.jsonl).
    const SESSION_GONE: &'static [&'static str] = &["Error resuming session"];
    fn run(&self) -> &RunState {
        &self.run
    }

    fn run_mut(&mut self) -> &mut RunState {
        &mut self.run
    }

    fn object(&mut self, line: &Value, out: &mut Vec<Event>) {
        match line["type"].as_str() {
            Some("init") if !self.init_sent => {
                self.init_sent = true;
                let init = InitEvent::new(
                    line["model"].as_str(),
                    self.context.cwd.as_deref(),
                    Vec::new(),
                );
                out.push(self.run.tag(init.into()));
            }
            Some("message") => self.message(line, out),
            Some("tool_use") => self.tool_use(line, out),
            Some("tool_result") => self.tool_result(line, out),
            Some("error") => {
                self.flush_text(out);
                out.push(self.run.reported_error(
                    GEMINI_WARNING,
                    line["message"].as_str(),
                    "Gemini CLI reported an error",
                    true,
                ));
            }
            Some("result") => self.result(line, out),
            _ => {}
        }
    }

    fn ended(&mut self, exit: Exit, out: &mut Vec<Event>) -> DoneStatus {
        self.flush_text(out);
        if exit.code == Some(EXIT_TURN_LIMIT) {
            DoneStatus::MaxTurns
        } else {
            DoneStatus::Error
        }
    }
}

#[cfg(test)]
#[path = "translate_tests.rs"]
mod tests;
