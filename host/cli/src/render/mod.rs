//! Rendering events for the terminal or for programs.

mod json;
mod lines;
mod live;
mod ndjson;
mod parallel;
mod pretty;
pub mod safe;
mod style;
mod text;
mod text_flow;
pub mod traffic;

use std::io::{self, IsTerminal};

use moat_engine::AgentEvent;

use super::args::OutputFormat;

pub use live::{LogWriter, compile_watcher};
pub use style::usage_summary;

/// Turns a run's events into output.
pub trait Renderer {
    /// One event arrived.
    fn event(&mut self, event: &AgentEvent) -> io::Result<()>;
    /// One event as the run store keeps it: the JSON `moat run --output
    /// ndjson` prints, checked by the store to be an event object. A
    /// renderer that prints events as that JSON writes it as it is and
    /// returns `true`; the others return `false` and are given the event
    /// parsed instead.
    fn stored(&mut self, _json: &[u8]) -> io::Result<bool> {
        Ok(false)
    }
    /// Nothing has arrived for a while.
    fn waiting(&mut self) {}
    /// The terminal is asked about a run's request: `Some(question)` shows
    /// the question (the spinner stays away until it is answered);
    /// `None`: it was answered by a typed line.
    fn asking(&mut self, _question: Option<&str>) -> io::Result<()> {
        Ok(())
    }
    /// The stream has nothing more ready now: show everything rendered so
    /// far (a renderer may gather output while events come quickly).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// The stream is over.
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A time (ms since the Unix epoch) as `moat show` prints it: RFC 3339,
/// to the second, UTC.
pub fn time(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// A renderer that shows nothing (a detached run's events are in the store).
pub fn silent() -> Box<dyn Renderer> {
    struct Silent;
    impl Renderer for Silent {
        fn event(&mut self, _: &AgentEvent) -> io::Result<()> {
            Ok(())
        }
    }
    Box::new(Silent)
}

/// The renderer for the events of run `id` in a format, writing to
/// stdout: NDJSON names the run on its first line, whatever the event.
pub fn for_run(format: OutputFormat, id: Option<&str>) -> Box<dyn Renderer> {
    match (format, id) {
        (OutputFormat::Ndjson, Some(id)) => Box::new(ndjson::Ndjson::of_run(io::stdout(), id)),
        (format, _) => for_format(format),
    }
}

/// The renderer for a format, writing to stdout.
pub fn for_format(format: OutputFormat) -> Box<dyn Renderer> {
    match format {
        OutputFormat::Pretty => Box::new(pretty::Pretty::new(io::stdout())),
        OutputFormat::Ndjson => Box::new(ndjson::Ndjson::new(io::stdout())),
        OutputFormat::Text => Box::new(text::Text::new(io::stdout())),
        OutputFormat::Json => Box::new(json::Json::new(io::stdout())),
    }
}

/// The pretty renderer with each line led by the time of its event.
pub fn pretty_with_times() -> Box<dyn Renderer> {
    Box::new(pretty::Pretty::new(io::stdout()).with_times())
}

/// The format asked for, else pretty on a terminal and ndjson otherwise.
pub fn default_format(asked: Option<OutputFormat>) -> OutputFormat {
    asked.unwrap_or(if io::stdout().is_terminal() {
        OutputFormat::Pretty
    } else {
        OutputFormat::Ndjson
    })
}

/// The next item of `events`; when none is ready at once, what `renderer`
/// gathered is shown first, so nothing waits behind a quiet stream.
pub async fn next_shown<S: futures::Stream + Unpin>(
    events: &mut S,
    renderer: &mut dyn Renderer,
) -> io::Result<Option<S::Item>> {
    use futures::{FutureExt, StreamExt};
    if let Some(item) = events.next().now_or_never() {
        return Ok(item);
    }
    renderer.flush()?;
    Ok(events.next().await)
}

/// The renderer for several tasks at once; `labels` name the tasks as
/// their events' roles do.
pub fn for_parallel(format: OutputFormat, labels: &[String]) -> Box<dyn Renderer> {
    match format {
        OutputFormat::Pretty => Box::new(parallel::Parallel::new(io::stdout(), labels)),
        other => for_format(other),
    }
}
