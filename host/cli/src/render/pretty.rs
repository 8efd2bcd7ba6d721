//! For people at a terminal: streamed text, tool calls and errors set
//! apart, a spinner while the agent is silent, and a summary line.

use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use moat_engine::{AgentEvent, EventPayload};

use super::Renderer;
use super::lines::{done_line, event_line};
use super::style::Style;
use super::text_flow::TextFlow;

pub struct Pretty<W: Write> {
    out: W,
    style: Style,
    spinner: Option<ProgressBar>,
    flow: TextFlow,
}

impl<W: Write> Pretty<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            style: Style {
                color: io::stdout().is_terminal(),
            },
            spinner: None,
            flow: TextFlow::default(),
        }
    }

    fn stop_spinner(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }

    /// Starts a line of its own for a non-text event.
    fn line(&mut self, text: String) -> io::Result<()> {
        self.flow.end_line(&mut self.out)?;
        writeln!(self.out, "{text}")
    }
}

impl<W: Write> Renderer for Pretty<W> {
    fn event(&mut self, event: &AgentEvent) -> io::Result<()> {
        let event = &*super::safe::for_terminal(event);
        self.stop_spinner();
        let s = self.style;
        match &event.payload {
            EventPayload::TextDelta(delta) => self.flow.delta(&mut self.out, &delta.delta)?,
            EventPayload::Text(text) => self.flow.text(&mut self.out, &text.content)?,
            EventPayload::Done(done) => {
                self.line(done_line(s, done))?;
                if let Some(token) = &done.resume_token {
                    self.line(s.dim(&format!("  resume with --resume {token}")))?;
                }
            }
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
        self.flow.end_line(&mut self.out)?;
        self.out.flush()
    }
}
