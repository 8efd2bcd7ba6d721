//! For people at a terminal: the answer streams as the agent writes it,
//! tool calls (with their summaries) and errors are lines of their own, a
//! spinner shows only while the agent is silent, and a summary line ends
//! the run. The run's id is in the first line, to find the run again.

use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use indicatif::ProgressBar;
use moat_engine::{AgentEvent, EngineCallbacks, EventPayload, JsonObject, ResultFold, codes};

use super::Renderer;
use super::lines::{done_line, event_line, tool_line};
use super::live;
use super::style::Style;
use super::text_flow::TextFlow;

pub struct Pretty<W: Write> {
    out: W,
    style: Style,
    spinner: Option<ProgressBar>,
    /// Tells the answer from narration, for the `done`'s own answer.
    fold: ResultFold,
    /// Where the streamed text stands.
    flow: TextFlow,
    /// The text block streaming now (its deltas so far).
    block: String,
    /// The text blocks finished since the last other event.
    said: Vec<String>,
    /// Something other than text was printed last: the next text is set
    /// apart from it by a blank line.
    after_lines: bool,
    /// Each line led by its event's time, when asked for (`logs -t`).
    times: bool,
    /// The time of the event being shown, in ms since the epoch.
    at: u64,
    /// The grant flags refusals of this run named (`--allow-net=…`): an
    /// adapter's own error naming one again says nothing new.
    remedies: Vec<String>,
    /// A question to the terminal is on the last line, unanswered.
    asking: bool,
}

/// The tool calls the fold reports, one line each (narration needs no
/// line of its own: it streamed as it came).
struct ToolLines {
    style: Style,
    lines: Vec<String>,
}

impl EngineCallbacks for ToolLines {
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
            flow: TextFlow::default(),
            block: String::new(),
            said: Vec::new(),
            after_lines: false,
            times: false,
            at: 0,
            remedies: Vec::new(),
            asking: false,
        }
    }

    /// Leads each line with the time of its event.
    pub fn with_times(mut self) -> Self {
        self.times = true;
        self
    }

    /// The time the line of the current event starts with, if asked for.
    fn time(&self) -> String {
        if !self.times {
            return String::new();
        }
        let at = std::time::UNIX_EPOCH + Duration::from_millis(self.at);
        format!(
            "{} ",
            self.style
                .dim(&humantime::format_rfc3339_millis(at).to_string())
        )
    }

    fn stop_spinner(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            live::set_spinner(None);
            spinner.finish_and_clear();
        }
    }

    fn line(&mut self, text: String) -> io::Result<()> {
        self.end_text()?;
        self.after_lines = true;
        writeln!(self.out, "{}{text}", self.time())
    }

    /// Starts a block of streamed text, set apart from the lines before.
    fn start_text(&mut self) -> io::Result<()> {
        if self.after_lines {
            self.after_lines = false;
            self.out.write_all(b"\n")?;
        }
        let time = self.time();
        self.out.write_all(time.as_bytes())
    }

    /// Ends the line streamed text left unfinished (unless a log line
    /// ended it meanwhile).
    fn end_text(&mut self) -> io::Result<()> {
        if !live::line_open() {
            self.flow.line_closed();
        }
        self.flow.end_line(&mut self.out)?;
        live::set_line_open(false);
        Ok(())
    }
}

impl<W: Write> Renderer for Pretty<W> {
    fn event(&mut self, event: &AgentEvent) -> io::Result<()> {
        if matches!(&event.payload, EventPayload::Extension(e)
            if e.name == moat_engine::USAGE_EVENT || e.name == moat_engine::TRAFFIC_EVENT)
        {
            // A model call's usage, for budgets, and the run's traffic
            // (`moat show --net`): nothing to show, and the answer
            // streaming around them goes on as one.
            return Ok(());
        }
        let event = &*super::safe::for_terminal(event);
        let s = self.style;
        self.at = event.timestamp;
        let mut tools = ToolLines {
            style: s,
            lines: Vec::new(),
        };
        self.fold.observe(event, &mut tools);
        if std::mem::take(&mut self.asking) {
            // Answered elsewhere: the next line starts below the question.
            self.out.write_all(b"\n")?;
        }
        match &event.payload {
            EventPayload::TextDelta(delta) => {
                self.stop_spinner();
                if self.block.is_empty() {
                    self.start_text()?;
                }
                self.flow.delta(&mut self.out, &delta.delta)?;
                self.block.push_str(&delta.delta);
                live::set_line_open(self.flow.line_open());
                return self.out.flush();
            }
            EventPayload::Text(text) => {
                self.stop_spinner();
                if self.block.is_empty() {
                    self.start_text()?;
                } else if self.block.trim() != text.content.trim() {
                    // A text replaces the deltas before it; when it says
                    // something else than they did, it is shown too.
                    self.end_text()?;
                    self.flow = TextFlow::default();
                    self.start_text()?;
                }
                self.flow.text(&mut self.out, &text.content)?;
                self.block.clear();
                self.said.push(text.content.clone());
                live::set_line_open(false);
                return self.out.flush();
            }
            _ => {}
        }
        self.stop_spinner();
        let mut streamed = std::mem::take(&mut self.said);
        if !self.block.is_empty() {
            streamed.push(std::mem::take(&mut self.block));
        }
        let streamed = streamed.join("\n");
        for line in tools.lines {
            self.line(line)?;
        }
        match &event.payload {
            EventPayload::Done(done) => {
                // The answer streamed; a `done` that names another one
                // (a backend's own final result) shows it too.
                let named = done.result.as_deref().map(str::trim);
                if let Some(answer) = named.filter(|a| !a.is_empty() && *a != streamed.trim()) {
                    self.end_text()?;
                    self.start_text()?;
                    writeln!(self.out, "{}", answer.trim_end())?;
                }
                self.end_text()?;
                if !self.after_lines {
                    self.out.write_all(b"\n")?;
                }
                self.line(done_line(s, done))?;
                if let Some(token) = &done.resume_token {
                    self.line(s.dim(&format!("  resume with --resume {token}")))?;
                }
            }
            // Printed by the fold's callbacks, with its summary.
            EventPayload::ToolUse(_) => {}
            EventPayload::Error(error) => {
                let flags = grant_flags(&error.message);
                if error.code.as_deref() == Some(codes::CAPABILITY_DENIED) {
                    self.remedies.extend(flags.iter().map(|f| (*f).to_owned()));
                } else if !flags.is_empty()
                    && flags.iter().all(|f| self.remedies.iter().any(|r| r == f))
                {
                    // One missing grant is one line: the refusal said it.
                    return self.out.flush();
                }
                if let Some(line) = event_line(s, event) {
                    self.line(line)?;
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
        // The spinner only while the agent is silent, and never over a
        // line of answer it has not finished.
        if self.spinner.is_some() || self.asking || !io::stderr().is_terminal() || live::line_open()
        {
            return;
        }
        let spinner = live::spinner("{spinner} {msg}", "waiting for the agent…".into());
        live::set_spinner(Some(spinner.clone()));
        self.spinner = Some(spinner);
    }

    fn asking(&mut self, question: Option<&str>) -> io::Result<()> {
        self.stop_spinner();
        match question {
            Some(question) => {
                self.end_text()?;
                write!(self.out, "{}", self.style.yellow(question))?;
                self.asking = true;
            }
            None => self.asking = false,
        }
        self.out.flush()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.stop_spinner();
        self.end_text()?;
        self.out.flush()
    }
}

/// The grant flags a message names (`--allow-net=example.com:443`).
fn grant_flags(message: &str) -> Vec<&str> {
    message
        .split(|c: char| c.is_whitespace() || c == '`' || c == ',' || c == ';')
        .filter(|word| word.starts_with("--allow-"))
        .map(|word| word.trim_end_matches(['.', ')']))
        .collect()
}
