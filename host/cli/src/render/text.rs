//! Only the assistant's text on stdout; errors on stderr.

use std::io::{self, Write};

use moat_engine::{
    AgentEvent, DoneStatus, ErrorPayload, EventPayload, TextDeltaPayload, TextPayload,
};

use super::Renderer;
use super::text_flow::TextFlow;

pub struct Text<W: Write> {
    out: W,
    flow: TextFlow,
}

impl<W: Write> Text<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            flow: TextFlow::default(),
        }
    }
}

impl<W: Write> Renderer for Text<W> {
    fn event(&mut self, event: &AgentEvent) -> io::Result<()> {
        let event = &*super::safe::for_terminal(event);
        match &event.payload {
            EventPayload::TextDelta(TextDeltaPayload { delta }) => {
                self.flow.delta(&mut self.out, delta)?
            }
            EventPayload::Text(TextPayload { content }) => {
                self.flow.text(&mut self.out, content)?
            }
            EventPayload::Error(error) => {
                let ErrorPayload { code, message, .. } = &**error;
                eprintln!(
                    "moat: error{}: {message}",
                    code.as_deref()
                        .map(|c| format!(" [{c}]"))
                        .unwrap_or_default()
                );
            }
            EventPayload::Done(done) if done.status != DoneStatus::Success => {
                eprintln!(
                    "moat: the run ended: {}",
                    super::style::status_word(done.status)
                );
            }
            _ => {}
        }
        self.out.flush()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.flow.end_line(&mut self.out)?;
        self.out.flush()
    }
}
