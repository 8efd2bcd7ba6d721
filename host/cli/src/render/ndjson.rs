//! One JSON event per line, nothing else on stdout.

use std::io::{self, Write};

use moat_engine::AgentEvent;

use super::Renderer;

pub struct Ndjson<W: Write> {
    out: W,
}

impl<W: Write> Ndjson<W> {
    pub fn new(out: W) -> Self {
        Self { out }
    }
}

impl<W: Write> Renderer for Ndjson<W> {
    fn event(&mut self, event: &AgentEvent) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, event)?;
        self.out.write_all(b"\n")?;
        // A consumer reading the pipe sees each event when it happens.
        self.out.flush()
    }
}
