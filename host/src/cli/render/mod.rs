//! Rendering events for the terminal or for programs.

mod ndjson;
mod pretty;
mod style;
mod text;

use std::io;

use moat::engine::AgentEvent;

use super::args::OutputFormat;

/// Turns a run's events into output.
pub trait Renderer {
    /// One event arrived.
    fn event(&mut self, event: &AgentEvent) -> io::Result<()>;
    /// Nothing has arrived for a while.
    fn waiting(&mut self) {}
    /// The stream is over.
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The renderer for a format, writing to stdout.
pub fn for_format(format: OutputFormat) -> Box<dyn Renderer> {
    match format {
        OutputFormat::Pretty => Box::new(pretty::Pretty::new(io::stdout())),
        OutputFormat::Ndjson => Box::new(ndjson::Ndjson::new(io::stdout())),
        OutputFormat::Text => Box::new(text::Text::new(io::stdout())),
    }
}
