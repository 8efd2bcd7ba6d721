//! Only the assistant's text on stdout; errors on stderr.

use std::io::{self, Write};

use moat::engine::{
    AgentEvent, DoneStatus, ErrorPayload, EventPayload, TextDeltaPayload, TextPayload,
};

use super::Renderer;

pub struct Text<W: Write> {
    out: W,
    /// Deltas were printed since the last full text, which repeats them.
    streamed: bool,
    line_open: bool,
}

impl<W: Write> Text<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            streamed: false,
            line_open: false,
        }
    }
}

impl<W: Write> Renderer for Text<W> {
    fn event(&mut self, event: &AgentEvent) -> io::Result<()> {
        match &event.payload {
            EventPayload::TextDelta(TextDeltaPayload { delta }) => {
                self.out.write_all(delta.as_bytes())?;
                self.streamed = true;
                self.line_open = !delta.ends_with('\n');
            }
            EventPayload::Text(TextPayload { content }) => {
                if !self.streamed {
                    self.out.write_all(content.as_bytes())?;
                    self.line_open = !content.ends_with('\n');
                }
                if self.line_open {
                    self.out.write_all(b"\n")?;
                    self.line_open = false;
                }
                self.streamed = false;
            }
            EventPayload::Error(ErrorPayload { code, message, .. }) => {
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
        if self.line_open {
            self.out.write_all(b"\n")?;
        }
        self.out.flush()
    }
}
