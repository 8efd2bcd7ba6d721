//! Claude Code's `--output-format stream-json --verbose` lines → events.
//!
//! One JSON object per line (recorded from Claude Code 2.1.197, see
//! `tests/fixtures/cli/claude/`):
//!
//! - `system` / `init`: the session starts → `init` (once);
//! - `stream_event` (with `--include-partial-messages`): a raw Anthropic SSE
//!   event; top-level `text_delta`s → `text_delta`;
//! - `assistant`: one line per content block → `text`, `thinking`,
//!   `tool_use`; an API failure is an assistant message of model
//!   `<synthetic>` → `error`;
//! - `user`: `tool_result` blocks → `tool_result`;
//! - `system` / `permission_denied` (newer CLIs) → a denied `tool_result` and
//!   an `error` PERMISSION_DENIED; a denial only listed in the result's
//!   `permission_denials` (2.1.197 reports it there) → that `error` before
//!   `done`;
//! - `result` → `done`: status from `subtype` and `is_error`, tokens from
//!   `modelUsage`, cost from `total_cost_usd` (agent estimate), resume token
//!   = the session id.
//!
//! Everything else (`system` / `status`, `thinking_tokens`, hooks, unknown
//! types, lines that are not JSON) is ignored.

use std::collections::HashSet;

use moat_cli_support::{
    LineTranslator, MAX_MESSAGE, RunState, clip, error_code, session_id, summary, token_report,
    tool_input, tool_output,
};
use moat_guest::json::{Value, json};
use moat_guest::{
    Cost, CostSource, DoneEvent, DoneStatus, Event, InitEvent, InputTokens, TURNS_METADATA_KEY,
    TokenReport, ToolStatus, ToolUseEvent, Usage,
};

/// The CLI's name in messages.
const CLI: &str = "claude";

/// Error code of a tool call the CLI denied.
pub const PERMISSION_DENIED: &str = "PERMISSION_DENIED";

/// Error code of a failed model call the CLI reported.
pub const API_ERROR: &str = "API_ERROR";

/// The model name Claude Code gives the messages it makes up itself (API
/// errors).
const SYNTHETIC_MODEL: &str = "<synthetic>";

/// The state of one Claude Code run's translation.
#[derive(Debug, Default)]
pub struct ClaudeTranslator {
    run: RunState,
    init_sent: bool,
    /// Tool calls already answered with a `tool_result`.
    answered: HashSet<String>,
    /// Tool calls reported denied (and shown as an error).
    denied: HashSet<String>,
    /// An error event already showed why the run failed.
    error_shown: bool,
}

impl ClaudeTranslator {
    /// A translator for a new run.
    pub fn new() -> Self {
        Self::default()
    }

    fn system(&mut self, line: &Value, out: &mut Vec<Event>) {
        match line["subtype"].as_str() {
            Some("init") if !self.init_sent => {
                self.init_sent = true;
                let tools = line["tools"]
                    .as_array()
                    .map(|tools| {
                        tools
                            .iter()
                            .filter_map(Value::as_str)
                            .map(|name| clip(name, 512).to_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                let capabilities = json!({
                    "permissionMode": line["permissionMode"],
                    "claudeCodeVersion": line["claude_code_version"],
                    "mcpServers": line["mcp_servers"],
                });
                let init = InitEvent::new(line["model"].as_str(), line["cwd"].as_str(), tools)
                    .with_capabilities(&capabilities);
                out.push(self.run.tag(init.into()));
            }
            Some("permission_denied") => {
                let id = line["tool_use_id"].as_str().unwrap_or_default().to_owned();
                let name = line["tool_name"]
                    .as_str()
                    .unwrap_or_else(|| self.run.tools.name(&id))
                    .to_owned();
                let message = line["message"]
                    .as_str()
                    .unwrap_or("permission denied")
                    .to_owned();
                if !id.is_empty() && self.answered.insert(id.clone()) {
                    out.push(self.run.tag(Event::tool_result(
                        id.as_str(),
                        name.as_str(),
                        ToolStatus::Denied,
                        &json!(clip(&message, MAX_MESSAGE)),
                    )));
                }
                self.deny(&id, &name, Some(&message), out);
            }
            _ => {}
        }
    }

    /// Shows a denial as an error event, once per tool call.
    fn deny(&mut self, id: &str, name: &str, reason: Option<&str>, out: &mut Vec<Event>) {
        if !self.denied.insert(id.to_owned()) {
            return;
        }
        let mut message = format!(
            "Claude Code denied {name} ({id}): headless mode cannot ask for permission; \
             allow the tool with --allowed-tools or a higher --trust"
        );
        if let Some(reason) = reason {
            message.push_str(": ");
            message.push_str(clip(reason, MAX_MESSAGE));
        }
        out.push(self.run.tag(Event::error(PERMISSION_DENIED, message, true)));
    }

    fn stream_event(&mut self, line: &Value, out: &mut Vec<Event>) {
        // A sub-agent's stream would interleave with the main answer.
        if !line["parent_tool_use_id"].is_null() {
            return;
        }
        let event = &line["event"];
        if event["type"] == "content_block_delta"
            && event["delta"]["type"] == "text_delta"
            && let Some(text) = event["delta"]["text"].as_str().filter(|t| !t.is_empty())
        {
            out.push(self.run.tag(Event::text_delta(text)));
        }
    }

    fn assistant(&mut self, line: &Value, out: &mut Vec<Event>) {
        let message = &line["message"];
        let synthetic = message["model"] == SYNTHETIC_MODEL;
        let Some(blocks) = message["content"].as_array() else {
            return;
        };
        for block in blocks {
            match block["type"].as_str() {
                Some("text") => {
                    let Some(text) = block["text"].as_str() else {
                        continue;
                    };
                    if synthetic {
                        // Claude Code's own report of a failed API call.
                        self.error_shown = true;
                        out.push(self.run.tag(Event::error(
                            API_ERROR,
                            clip(text, MAX_MESSAGE),
                            false,
                        )));
                    } else if !text.is_empty() {
                        out.push(self.run.tag(Event::text(text)));
                    }
                }
                Some("thinking") => {
                    if let Some(thinking) = block["thinking"].as_str().filter(|t| !t.is_empty()) {
                        out.push(self.run.tag(Event::thinking(thinking)));
                    }
                }
                Some("tool_use") => {
                    let (Some(id), Some(name)) = (block["id"].as_str(), block["name"].as_str())
                    else {
                        continue;
                    };
                    if id.is_empty() || !self.run.tools.record(id, name) {
                        continue;
                    }
                    let input = tool_input(&block["input"]);
                    let summary = summary::summarize(summary::CLAUDE_CODE, name, &input);
                    let call = ToolUseEvent::new(name, id, &input).with_description(summary);
                    out.push(self.run.tag(call.into()));
                }
                _ => {}
            }
        }
    }

    fn user(&mut self, line: &Value, out: &mut Vec<Event>) {
        let Some(blocks) = line["message"]["content"].as_array() else {
            return;
        };
        for block in blocks.iter().filter(|block| block["type"] == "tool_result") {
            let Some(id) = block["tool_use_id"].as_str().filter(|id| !id.is_empty()) else {
                continue;
            };
            if !self.answered.insert(id.to_owned()) {
                continue;
            }
            let status = if self.denied.contains(id) {
                ToolStatus::Denied
            } else if block["is_error"] == true {
                ToolStatus::Error
            } else {
                ToolStatus::Success
            };
            let name = self.run.tools.name(id).to_owned();
            out.push(self.run.tag(Event::tool_result(
                id,
                name,
                status,
                &tool_output(&block["content"]),
            )));
        }
    }

    fn result(&mut self, line: &Value, out: &mut Vec<Event>) {
        let subtype = line["subtype"].as_str().unwrap_or("");
        let is_error = line["is_error"] == true;
        let status = match subtype {
            "success" if !is_error => DoneStatus::Success,
            "error_max_turns" => DoneStatus::MaxTurns,
            "error_max_budget_usd" => DoneStatus::MaxBudget,
            _ => DoneStatus::Error,
        };
        if status == DoneStatus::Error && !self.error_shown {
            let message = line["result"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| {
                    line["errors"].as_array().map(|errors| {
                        errors
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                })
                .filter(|message| !message.is_empty())
                .unwrap_or_else(|| format!("Claude Code ended with {subtype}"));
            let code = error_code::<Self>(&message, "CLI_ERROR");
            out.push(
                self.run
                    .tag(Event::error(code, clip(&message, MAX_MESSAGE), false)),
            );
        }
        let mut denied_names = Vec::new();
        if let Some(denials) = line["permission_denials"].as_array() {
            for denial in denials {
                let id = denial["tool_use_id"].as_str().unwrap_or_default();
                let name = denial["tool_name"].as_str().unwrap_or("unknown");
                denied_names.push(json!(name));
                self.deny(id, name, None, out);
            }
        }

        let mut usage = Usage::new(self.run.tools.count());
        if let Some(tokens) = model_usage(&line["modelUsage"], status) {
            usage = usage.with_tokens(tokens);
        }
        if let Some(usd) = line["total_cost_usd"]
            .as_f64()
            .filter(|usd| usd.is_finite() && *usd >= 0.0)
        {
            usage = usage.with_cost(Cost::new(usd, CostSource::AgentEstimate));
        }
        let mut done = DoneEvent::new(status).with_usage(usage);
        if status == DoneStatus::Success
            && let Some(result) = line["result"].as_str()
        {
            done = done.with_result(result);
        }
        if let Some(session) = session_id(&line["session_id"]).or(self.run.session.clone()) {
            self.run.session = Some(session.clone());
            done = done.with_resume_token(session);
        }
        let mut metadata = json!({
            "subtype": subtype,
            "stopReason": line["stop_reason"],
            "apiErrorStatus": line["api_error_status"],
            "permissionDenials": denied_names,
            "cliDurationMs": line["duration_ms"],
        });
        if let Some(turns) = line["num_turns"].as_u64() {
            metadata[TURNS_METADATA_KEY] = turns.into();
        }
        done = done.with_metadata(&metadata);
        self.run.done = true;
        out.push(self.run.tag(done.into()));
    }
}

/// The run's tokens from the result's `modelUsage` (summed over models):
/// input inclusive of cache reads and writes, with those as details; output
/// total. `None` when it lists no model (no call was counted).
fn model_usage(models: &Value, status: DoneStatus) -> Option<TokenReport> {
    let models = models.as_object().filter(|models| !models.is_empty())?;
    let (mut input, mut cache_read, mut cache_write, mut output) = (0u64, 0u64, 0u64, 0u64);
    for model in models.values() {
        let count = |field: &str| model[field].as_u64().unwrap_or(0);
        input = input.saturating_add(count("inputTokens"));
        cache_read = cache_read.saturating_add(count("cacheReadInputTokens"));
        cache_write = cache_write.saturating_add(count("cacheCreationInputTokens"));
        output = output.saturating_add(count("outputTokens"));
    }
    let total = input.saturating_add(cache_read).saturating_add(cache_write);
    Some(token_report(
        status == DoneStatus::Error,
        InputTokens::new(total)
            .with_cache_read(cache_read)
            .with_cache_write(cache_write),
        output,
    ))
}

impl LineTranslator for ClaudeTranslator {
    const CLI: &'static str = CLI;
    const SESSION_FIELD: Option<&'static str> = Some("session_id");
    /// Claude Code 2.1.197, `--resume` of an id it has no conversation for
    /// (tests/fixtures/cli/claude/resume-missing.jsonl).
    const SESSION_GONE: &'static [&'static str] = &["No conversation found with session ID"];
    fn run(&self) -> &RunState {
        &self.run
    }

    fn run_mut(&mut self) -> &mut RunState {
        &mut self.run
    }

    fn object(&mut self, line: &Value, out: &mut Vec<Event>) {
        match line["type"].as_str() {
            Some("system") => self.system(line, out),
            Some("stream_event") => self.stream_event(line, out),
            Some("assistant") => self.assistant(line, out),
            Some("user") => self.user(line, out),
            Some("result") => self.result(line, out),
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "translate_tests.rs"]
mod tests;
