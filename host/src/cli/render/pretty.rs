//! For people at a terminal: streamed text, tool calls and errors set
//! apart, a spinner while the agent is silent, and a summary line.

use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use moat::engine::{AgentEvent, DoneStatus, EventPayload};

use super::Renderer;
use super::style::{Style, clip, status_word, tool_status_word, usage_summary};

/// Longest tool input or output shown.
const CLIP: usize = 200;

pub struct Pretty<W: Write> {
    out: W,
    style: Style,
    spinner: Option<ProgressBar>,
    /// Deltas were printed since the last full text, which repeats them.
    streamed: bool,
    line_open: bool,
}

impl<W: Write> Pretty<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            style: Style {
                color: io::stdout().is_terminal(),
            },
            spinner: None,
            streamed: false,
            line_open: false,
        }
    }

    fn stop_spinner(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }

    /// Starts a line of its own for a non-text event.
    fn line(&mut self, text: String) -> io::Result<()> {
        if self.line_open {
            self.out.write_all(b"\n")?;
            self.line_open = false;
        }
        writeln!(self.out, "{text}")
    }
}

impl<W: Write> Renderer for Pretty<W> {
    fn event(&mut self, event: &AgentEvent) -> io::Result<()> {
        self.stop_spinner();
        let s = self.style;
        match &event.payload {
            EventPayload::Init(init) => {
                let model = init.model.as_deref().unwrap_or("default model");
                self.line(s.dim(&format!(
                    "● {} · {model} · session {}",
                    event.agent, event.session_id
                )))?;
            }
            EventPayload::TextDelta(delta) => {
                self.out.write_all(delta.delta.as_bytes())?;
                self.streamed = true;
                self.line_open = !delta.delta.ends_with('\n');
            }
            EventPayload::Text(text) => {
                if !self.streamed {
                    if self.line_open {
                        self.out.write_all(b"\n")?;
                    }
                    self.out.write_all(text.content.as_bytes())?;
                    self.line_open = !text.content.ends_with('\n');
                }
                if self.line_open {
                    self.out.write_all(b"\n")?;
                    self.line_open = false;
                }
                self.streamed = false;
            }
            EventPayload::Thinking(thinking) => {
                self.line(s.dim(&format!("… {}", clip(&thinking.summary, CLIP))))?;
            }
            EventPayload::ToolUse(tool) => {
                let input = clip(
                    &serde_json::Value::Object(tool.input.clone()).to_string(),
                    CLIP,
                );
                self.line(format!(
                    "{} {} {}",
                    s.cyan("→"),
                    s.cyan(&tool.tool_name),
                    s.dim(&input)
                ))?;
            }
            EventPayload::ToolResult(result) => {
                let output = match &result.output {
                    serde_json::Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                let status = tool_status_word(result.status);
                self.line(format!(
                    "{} {} {} {}",
                    s.cyan("←"),
                    result.tool_name,
                    s.dim(status),
                    s.dim(&clip(output.trim(), CLIP))
                ))?;
            }
            EventPayload::Error(error) => {
                let code = error
                    .code
                    .as_deref()
                    .map(|c| format!(" [{c}]"))
                    .unwrap_or_default();
                self.line(s.red(&format!("✗ error{code}: {}", error.message)))?;
            }
            EventPayload::PermissionRequest(request) => {
                let reason = request.reason.as_deref().unwrap_or("");
                self.line(s.yellow(&format!(
                    "? {} asks to use {} {reason}",
                    event.agent, request.tool_name
                )))?;
            }
            EventPayload::Done(done) => {
                let seconds = Duration::from_millis(done.duration_ms).as_secs_f64();
                let summary = format!(
                    "{} · {seconds:.2}s · {}",
                    status_word(done.status),
                    usage_summary(&done.usage)
                );
                let line = match done.status {
                    DoneStatus::Success => s.green(&format!("✓ {summary}")),
                    DoneStatus::Interrupted => s.yellow(&format!("■ {summary}")),
                    _ => s.red(&format!("✗ {summary}")),
                };
                self.line(line)?;
                if let Some(token) = &done.resume_token {
                    self.line(s.dim(&format!("  resume with --resume {token}")))?;
                }
            }
            EventPayload::Extension(extension) => {
                self.line(s.dim(&format!(
                    "· {} {}",
                    extension.name,
                    clip(&extension.payload.to_string(), CLIP)
                )))?;
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
        if self.line_open {
            self.out.write_all(b"\n")?;
            self.line_open = false;
        }
        self.out.flush()
    }
}
