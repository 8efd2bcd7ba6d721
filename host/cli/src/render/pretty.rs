//! For people at a terminal, with the engine contract's split (the fold of
//! moat_engine::result): narration and tool calls (with their summaries)
//! as they happen, errors set apart, a spinner while the agent is silent
//! or writing, and the answer set apart at the end with a summary line.

use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use moat_engine::{AgentEvent, EngineCallbacks, EventPayload, JsonObject, ResultFold};

use super::Renderer;
use super::lines::{done_line, event_line, tool_line};
use super::style::Style;

pub struct Pretty<W: Write> {
    out: W,
    style: Style,
    spinner: Option<ProgressBar>,
    /// Tells narration from the answer.
    fold: ResultFold,
    /// Characters of assistant text held back until it is known whether
    /// they are narration or the answer.
    writing: usize,
}

/// What the fold says to print as it goes: narration, and tool calls as
/// one line each.
struct Lines {
    style: Style,
    lines: Vec<String>,
}

impl EngineCallbacks for Lines {
    fn on_assistant_message(&mut self, text: &str) {
        self.lines.push(text.trim_end().to_owned());
    }

    fn on_tool_use(&mut self, name: &str, input: &JsonObject, summary: &str) {
        // The fold names the tool when the adapter gave no summary.
        let summary = (summary != name).then_some(summary);
        self.lines.push(tool_line(self.style, name, input, summary));
    }
}

impl<W: Write> Pretty<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            style: Style {
                color: io::stdout().is_terminal(),
            },
            spinner: None,
            fold: ResultFold::new(),
            writing: 0,
        }
    }

    fn stop_spinner(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }

    fn line(&mut self, text: String) -> io::Result<()> {
        writeln!(self.out, "{text}")
    }
}

impl<W: Write> Renderer for Pretty<W> {
    fn event(&mut self, event: &AgentEvent) -> io::Result<()> {
        let event = &*super::safe::for_terminal(event);
        let s = self.style;
        let mut said = Lines {
            style: s,
            lines: Vec::new(),
        };
        self.fold.observe(event, &mut said);
        match &event.payload {
            EventPayload::TextDelta(delta) => {
                self.writing += delta.delta.chars().count();
                if let Some(spinner) = &self.spinner {
                    spinner.set_message(format!(
                        "the agent is writing… ({} characters)",
                        self.writing
                    ));
                }
                return Ok(());
            }
            EventPayload::Text(_) => return Ok(()),
            _ => {}
        }
        self.stop_spinner();
        self.writing = 0;
        for line in said.lines {
            self.line(line)?;
        }
        match &event.payload {
            EventPayload::Done(done) => {
                let (result, leftover) = std::mem::take(&mut self.fold).finish_with_leftover();
                if let Some(text) = leftover {
                    self.line(text.trim_end().to_owned())?;
                }
                if let Some(answer) = &result.text {
                    // The answer, set apart from what led to it.
                    self.line(String::new())?;
                    self.line(answer.trim_end().to_owned())?;
                    self.line(String::new())?;
                }
                self.line(done_line(s, done))?;
                if let Some(token) = &done.resume_token {
                    self.line(s.dim(&format!("  resume with --resume {token}")))?;
                }
            }
            // Printed by the fold's callbacks, with its summary.
            EventPayload::ToolUse(_) => {}
            _ => {
                if let Some(line) = event_line(s, event) {
                    self.line(line)?;
                }
            }
        }
        self.out.flush()
    }

    fn waiting(&mut self) {
        if self.spinner.is_some() || !io::stderr().is_terminal() {
            return;
        }
        let spinner = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
            spinner.set_style(style);
        }
        spinner.set_message("waiting for the agent…");
        spinner.enable_steady_tick(Duration::from_millis(100));
        self.spinner = Some(spinner);
    }

    fn finish(&mut self) -> io::Result<()> {
        self.stop_spinner();
        self.out.flush()
    }
}
