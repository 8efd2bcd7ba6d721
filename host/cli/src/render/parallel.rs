//! `moat parallel` for people: each task's lines carry its label in its
//! own colour, streamed text is printed a whole line at a time so tasks do
//! not garble each other, and one summary row per task ends the output.

use std::collections::HashMap;
use std::io::{self, IsTerminal, Write};

use moat_engine::{AgentEvent, DonePayload, EventPayload};

use super::Renderer;
use super::lines::{done_line, event_line};
use super::style::Style;

/// Colours given to task labels in turn.
const LABEL_COLOURS: [&str; 6] = ["36", "35", "33", "34", "32", "91"];

/// A task's partial line of streamed text and its outcome.
#[derive(Debug, Default)]
struct TaskState {
    colour: usize,
    pending: String,
    streamed: bool,
    done: Option<DonePayload>,
}

pub struct Parallel<W: Write> {
    out: W,
    style: Style,
    /// Tasks in the order they first spoke, by label.
    order: Vec<String>,
    tasks: HashMap<String, TaskState>,
    width: usize,
}

impl<W: Write> Parallel<W> {
    /// `labels` are the tasks' labels, in task order.
    pub fn new(out: W, labels: &[String]) -> Self {
        let style = Style {
            color: io::stdout().is_terminal(),
        };
        let mut renderer = Self {
            out,
            style,
            order: Vec::new(),
            tasks: HashMap::new(),
            width: labels.iter().map(|l| l.chars().count()).max().unwrap_or(0),
        };
        for label in labels {
            renderer.task(label);
        }
        renderer
    }

    fn task(&mut self, label: &str) -> &mut TaskState {
        if !self.tasks.contains_key(label) {
            let colour = self.order.len() % LABEL_COLOURS.len();
            self.order.push(label.to_string());
            self.width = self.width.max(label.chars().count());
            self.tasks.insert(
                label.to_string(),
                TaskState {
                    colour,
                    ..TaskState::default()
                },
            );
        }
        self.tasks.get_mut(label).expect("inserted above")
    }

    fn prefix(&self, label: &str) -> String {
        let colour = self.tasks.get(label).map_or(0, |t| t.colour);
        let padded = format!("{label:<width$}", width = self.width);
        if self.style.color {
            format!("\x1b[{}m{padded}\x1b[0m │ ", LABEL_COLOURS[colour])
        } else {
            format!("{padded} │ ")
        }
    }

    fn line(&mut self, label: &str, text: &str) -> io::Result<()> {
        let prefix = self.prefix(label);
        writeln!(self.out, "{prefix}{text}")
    }

    /// Prints the task's complete lines; with `all`, the partial one too.
    fn flush_text(&mut self, label: &str, all: bool) -> io::Result<()> {
        let task = self.task(label);
        let mut lines: Vec<String> = Vec::new();
        while let Some(end) = task.pending.find('\n') {
            lines.push(task.pending[..end].to_string());
            task.pending.drain(..=end);
        }
        if all && !task.pending.is_empty() {
            lines.push(std::mem::take(&mut task.pending));
        }
        for line in lines {
            self.line(label, &line)?;
        }
        Ok(())
    }
}

/// The label of an event's task: its role (the command gives every task
/// one for this renderer), else its agent.
fn label_of(event: &AgentEvent) -> &str {
    event.role.as_deref().unwrap_or(&event.agent)
}

impl<W: Write> Renderer for Parallel<W> {
    fn event(&mut self, event: &AgentEvent) -> io::Result<()> {
        let event = &*super::safe::for_terminal(event);
        let label = label_of(event).to_string();
        let s = self.style;
        match &event.payload {
            EventPayload::TextDelta(delta) => {
                let task = self.task(&label);
                task.pending.push_str(&delta.delta);
                task.streamed = true;
                self.flush_text(&label, false)?;
            }
            EventPayload::Text(text) => {
                let task = self.task(&label);
                if !task.streamed {
                    task.pending.push_str(&text.content);
                }
                task.streamed = false;
                self.flush_text(&label, true)?;
            }
            EventPayload::Done(done) => {
                self.flush_text(&label, true)?;
                self.task(&label).done = Some((**done).clone());
            }
            _ => {
                if let Some(line) = event_line(s, event) {
                    self.flush_text(&label, true)?;
                    self.line(&label, &line)?;
                }
            }
        }
        self.out.flush()
    }

    fn finish(&mut self) -> io::Result<()> {
        writeln!(self.out)?;
        for label in self.order.clone() {
            self.flush_text(&label, true)?;
            let summary = match &self.tasks[&label].done {
                Some(done) => done_line(self.style, done),
                None => self.style.red("✗ no result"),
            };
            self.line(&label, &summary)?;
        }
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use moat_engine::{EventPayload, create_event};

    use super::*;

    fn event(role: &str, payload: EventPayload) -> AgentEvent {
        let mut event = create_event("echo", payload, Some("s"));
        event.role = Some(role.to_string());
        event
    }

    #[test]
    fn streamed_text_is_printed_a_whole_line_at_a_time_per_task() {
        let mut out = Vec::new();
        {
            let mut renderer = Parallel::new(&mut out, &["a".into(), "bb".into()]);
            renderer
                .event(&event("a", EventPayload::text_delta("hel")))
                .unwrap();
            renderer
                .event(&event("bb", EventPayload::text_delta("other\n")))
                .unwrap();
            renderer
                .event(&event("a", EventPayload::text_delta("lo\nwor")))
                .unwrap();
            renderer
                .event(&event("a", EventPayload::text("hello\nwor")))
                .unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "bb │ other\na  │ hello\na  │ wor\n");
    }
}
