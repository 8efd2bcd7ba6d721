//! One JSON object at the end, nothing else on stdout: the run's
//! `EngineResult` (moat_engine::result), folded from its events.

use std::io::{self, Write};

use moat_engine::{AgentEvent, ResultFold};

use super::Renderer;

pub struct Json<W: Write> {
    out: W,
    fold: Option<ResultFold>,
}

impl<W: Write> Json<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            fold: Some(ResultFold::new()),
        }
    }
}

impl<W: Write> Renderer for Json<W> {
    fn event(&mut self, event: &AgentEvent) -> io::Result<()> {
        if let Some(fold) = self.fold.as_mut() {
            fold.observe(event, &mut ());
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        if let Some(fold) = self.fold.take() {
            serde_json::to_writer(&mut self.out, &fold.finish())?;
            self.out.write_all(b"\n")?;
        }
        self.out.flush()
    }
}
