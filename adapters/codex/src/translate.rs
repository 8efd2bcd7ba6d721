//! Codex's `exec --json` lines → events.
//!
//! One JSON object per line (recorded from Codex 0.169.0, see
//! `tests/fixtures/cli/codex/`):
//!
//! - `thread.started {thread_id}` → `init`; the thread id is the session id
//!   and the resume token;
//! - `item.started` / `item.completed {item}`: `command_execution` and
//!   `mcp_tool_call` → `tool_use` (when first seen) then `tool_result` (when
//!   completed); `agent_message` → `text`; `reasoning` → `thinking`;
//!   `file_change`, `web_search`, `todo_list` → extension events
//!   `codex:<type>`; `error` items are non-fatal → recoverable `error`;
//! - `error {message}` → recoverable `error` (Codex also prints reconnection
//!   notices this way);
//! - `turn.failed {error}` → `error`, then `done` error;
//! - `turn.completed {usage}` → `done` success. Its usage counts the turn of
//!   a fresh thread; on a resumed thread it has no baseline that makes it
//!   this turn's, so tokens are left out (the raw counters go in the done
//!   metadata).
//!
//! `turn.started`, `item.updated` and unknown types are ignored.

use moat_cli_support::{LineTranslator, RunState, session_id, summary, tool_input};
use moat_guest::json::{Value, json};
use moat_guest::{
    DoneEvent, DoneStatus, Event, InitEvent, InputTokens, OutputTokens, TokenCoverage, TokenReport,
    ToolStatus, ToolUseEvent, Usage,
};

/// The CLI's name in messages.
const CLI: &str = "codex";

/// The tool name of Codex's command executions.
pub const SHELL_TOOL: &str = "shell";

/// Error code of Codex's non-fatal errors and warnings.
pub const CODEX_WARNING: &str = "CODEX_WARNING";

/// Error code of a failed turn.
pub const TURN_FAILED: &str = "TURN_FAILED";

/// What the translator knows of the run from its options (Codex's output
/// does not repeat them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunContext {
    /// The model asked for, if any.
    pub model: Option<String>,
    /// The working directory.
    pub cwd: Option<String>,
    /// Whether the run resumes an earlier thread.
    pub resumed: bool,
}

/// The state of one Codex run's translation.
#[derive(Debug, Default)]
pub struct CodexTranslator {
    context: RunContext,
    run: RunState,
    init_sent: bool,
    /// The last agent message: the run's result.
    last_message: Option<String>,
}

impl CodexTranslator {
    /// A translator for a run with `context`.
    pub fn new(context: RunContext) -> Self {
        CodexTranslator {
            context,
            ..Self::default()
        }
    }

    fn thread_started(&mut self, line: &Value, out: &mut Vec<Event>) {
        if let Some(thread) = session_id(&line["thread_id"]) {
            self.run.session = Some(thread);
        }
        if self.init_sent {
            return;
        }
        self.init_sent = true;
        let init = InitEvent::new(
            self.context.model.as_deref(),
            self.context.cwd.as_deref(),
            Vec::new(),
        );
        out.push(self.run.tag(init.into()));
    }

    /// A tool call's name and input, for the item types that are tool
    /// calls.
    fn tool_call(item: &Value) -> Option<(String, Value)> {
        match item["type"].as_str()? {
            "command_execution" => Some((
                SHELL_TOOL.to_owned(),
                json!({"command": item["command"].as_str().unwrap_or_default()}),
            )),
            "mcp_tool_call" => {
                let server = item["server"].as_str().unwrap_or("unknown");
                let tool = item["tool"].as_str().unwrap_or("unknown");
                Some((
                    format!("mcp__{server}__{tool}"),
                    tool_input(&item["arguments"]),
                ))
            }
            _ => None,
        }
    }

    fn item(&mut self, line: &Value, completed: bool, out: &mut Vec<Event>) {
        let item = &line["item"];
        let Some(id) = item["id"].as_str().filter(|id| !id.is_empty()) else {
            return;
        };
        if let Some((name, input)) = Self::tool_call(item) {
            if self.run.tools.record(id, &name) {
                let summary = summary::summarize(summary::CODEX, &name, &input);
                let call = ToolUseEvent::new(name.as_str(), id, &input).with_description(summary);
                out.push(self.run.tag(call.into()));
            }
            if completed {
                let (status, output) = tool_outcome(item);
                out.push(self.run.tag(Event::tool_result(id, name, status, &output)));
            }
            return;
        }
        if !completed {
            return;
        }
        match item["type"].as_str() {
            Some("agent_message") => {
                if let Some(text) = item["text"].as_str() {
                    self.last_message = Some(text.to_owned());
                    out.push(self.run.tag(Event::text(text)));
                }
            }
            Some("reasoning") => {
                if let Some(text) = item["text"].as_str().filter(|text| !text.is_empty()) {
                    out.push(self.run.tag(Event::thinking(text)));
                }
            }
            Some("error") => {
                out.push(self.run.reported_error(
                    CODEX_WARNING,
                    item["message"].as_str(),
                    "Codex reported an error",
                    true,
                ));
            }
            Some(kind @ ("file_change" | "web_search" | "todo_list")) => {
                out.push(
                    self.run
                        .tag(Event::extension(format!("codex:{kind}"), item)),
                );
            }
            _ => {}
        }
    }

    fn turn_completed(&mut self, line: &Value, out: &mut Vec<Event>) {
        let usage = &line["usage"];
        let mut done =
            DoneEvent::new(DoneStatus::Success).with_usage(Usage::new(self.run.tools.count()));
        if let Some(result) = &self.last_message {
            done = done.with_result(result.as_str());
        }
        if self.context.resumed {
            // The counters have no baseline here: keep them, unnamed as
            // this turn's tokens.
            done = done.with_metadata(&json!({"threadUsage": usage}));
        } else if let Some(tokens) = turn_tokens(usage) {
            done = done.with_tokens(tokens);
        }
        if let Some(thread) = &self.run.session {
            done = done.with_resume_token(thread.as_str());
        }
        self.run.done = true;
        out.push(self.run.tag(done.into()));
    }

    fn turn_failed(&mut self, line: &Value, out: &mut Vec<Event>) {
        out.push(self.run.reported_error(
            TURN_FAILED,
            line["error"]["message"].as_str(),
            "the turn failed",
            false,
        ));
        let mut done = DoneEvent::new(DoneStatus::Error).with_tool_uses(self.run.tools.count());
        if let Some(thread) = &self.run.session {
            done = done.with_resume_token(thread.as_str());
        }
        self.run.done = true;
        out.push(self.run.tag(done.into()));
    }
}

/// A completed tool item's status and output.
fn tool_outcome(item: &Value) -> (ToolStatus, Value) {
    let status = match (item["status"].as_str(), item["exit_code"].as_i64()) {
        (Some("declined"), _) => ToolStatus::Denied,
        (Some("completed"), Some(0) | None) => ToolStatus::Success,
        _ => ToolStatus::Error,
    };
    let output = match item["type"].as_str() {
        Some("command_execution") => json!(item["aggregated_output"].as_str().unwrap_or_default()),
        _ if !item["error"].is_null() => item["error"].clone(),
        _ => item["result"].clone(),
    };
    (status, output)
}

/// A fresh thread's turn usage: input inclusive of cached input, output
/// inclusive of reasoning. Codex reports `cache_write_input_tokens` as 0
/// for OpenAI, whose API has no such counter: a zero there is not a
/// measurement, so it is kept only when positive.
fn turn_tokens(usage: &Value) -> Option<TokenReport> {
    let input = usage["input_tokens"].as_u64()?;
    let output = usage["output_tokens"].as_u64()?;
    let mut input_tokens = InputTokens::new(input);
    if let Some(cached) = usage["cached_input_tokens"]
        .as_u64()
        .filter(|c| *c <= input)
    {
        input_tokens = input_tokens.with_cache_read(cached);
    }
    if let Some(written) = usage["cache_write_input_tokens"]
        .as_u64()
        .filter(|w| *w > 0 && *w <= input)
    {
        input_tokens = input_tokens.with_cache_write(written);
    }
    let mut output_tokens = OutputTokens::new(output);
    if let Some(reasoning) = usage["reasoning_output_tokens"]
        .as_u64()
        .filter(|r| *r <= output)
    {
        output_tokens = output_tokens.with_reasoning(reasoning);
    }
    Some(TokenReport::new(
        TokenCoverage::Complete,
        input_tokens,
        output_tokens,
    ))
}

impl LineTranslator for CodexTranslator {
    const CLI: &'static str = CLI;
    /// Codex 0.169.0, `exec resume` of a thread it has no rollout for
    /// (tests/fixtures/cli/codex/resume-missing.jsonl).
    const SESSION_GONE: &'static [&'static str] = &["no rollout found for thread id"];
    fn run(&self) -> &RunState {
        &self.run
    }

    fn run_mut(&mut self) -> &mut RunState {
        &mut self.run
    }

    fn object(&mut self, line: &Value, out: &mut Vec<Event>) {
        match line["type"].as_str() {
            Some("thread.started") => self.thread_started(line, out),
            Some("item.started") => self.item(line, false, out),
            Some("item.completed") => self.item(line, true, out),
            Some("turn.completed") => self.turn_completed(line, out),
            Some("turn.failed") => self.turn_failed(line, out),
            Some("error") => {
                out.push(self.run.reported_error(
                    CODEX_WARNING,
                    line["message"].as_str(),
                    "Codex reported an error",
                    true,
                ));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "translate_tests.rs"]
mod tests;
