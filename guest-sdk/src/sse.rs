//! An incremental parser for server-sent events (`text/event-stream`), the
//! framing the OpenAI and Anthropic streaming APIs use.
//!
//! Feed it the body as it arrives, in chunks of any size and split at any
//! byte; it hands back each event as soon as the blank line that ends it has
//! been read:
//!
//! ```
//! use moat_guest::sse::SseParser;
//!
//! let mut parser = SseParser::new();
//! let mut events = Vec::new();
//! for chunk in [&b"event: ping\nda"[..], b"ta: {}\n\ndata: [DONE]\n\n"] {
//!     for item in parser.feed(chunk) {
//!         events.push(item?);
//!     }
//! }
//! assert_eq!(events[0].event.as_deref(), Some("ping"));
//! assert_eq!(events[0].data, "{}");
//! assert_eq!(events[1].data, "[DONE]");
//! // `finish` would return a last event the server left without a blank
//! // line; this stream ended cleanly.
//! assert!(parser.finish().is_none());
//! # Ok::<(), moat_guest::sse::SseError>(())
//! ```
//!
//! It follows the WHATWG HTML "event stream interpretation": `event`,
//! `data`, `id` and `retry` fields; one optional space after the colon is
//! stripped; several `data` lines are joined with `\n`; lines starting with
//! `:` are comments; CRLF, LF and a lone CR all end a line; a blank line
//! dispatches the event, unless it had no `data` line; unknown fields are
//! ignored; a leading UTF-8 byte order mark is skipped; invalid UTF-8
//! becomes U+FFFD. One deliberate difference: [`SseParser::finish`] returns
//! an event the stream ended without a blank line, where a browser would
//! drop it, because a model's last event is worth more than strictness.
//!
//! Memory is bounded: an event (its partial line plus its buffered fields)
//! larger than [`SseParser::max_event_size`] yields an [`SseError`] item in
//! place of the event, and the rest of that event is skipped without being
//! buffered; the events after it are parsed as usual. An error item rather
//! than a failed `feed` lets the events around the oversize one through, so
//! an adapter can report the error and carry on.

use std::collections::VecDeque;
use std::fmt;

/// The default [`SseParser::max_event_size`]: 1 MiB.
pub const DEFAULT_MAX_EVENT_SIZE: usize = 1024 * 1024;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` name; `None` when absent or empty (a browser would call
    /// it `message`).
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The last event ID: the latest `id:` field seen in the stream, in this
    /// event or an earlier one (it persists, as the spec's last event ID
    /// buffer does); `None` when none was set or it was set to empty.
    pub id: Option<String>,
}

/// Why the parser returned an error item instead of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// An event exceeded the parser's maximum size (in bytes, the value
    /// carried); it was skipped.
    TooLarge(usize),
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::TooLarge(limit) => {
                write!(f, "a server-sent event exceeds {limit} bytes; skipped")
            }
        }
    }
}

impl std::error::Error for SseError {}

/// An incremental server-sent-events parser. See the [module](self) docs.
#[derive(Debug, Clone)]
pub struct SseParser {
    max_event_size: usize,
    /// The current, unfinished line.
    line: Vec<u8>,
    /// The rest of the current line is dropped unbuffered: it is a comment,
    /// or part of an oversize event. The line is then known not to be blank.
    skip_line: bool,
    /// The last line ended with `\r`: a `\n` right after it (perhaps in the
    /// next chunk) belongs to the same line ending.
    after_cr: bool,
    /// No line has ended yet, so the first may start with a byte order mark.
    first_line: bool,
    /// The current event was too large; its lines are dropped until the
    /// blank line that ends it.
    discarding: bool,
    event: String,
    data: String,
    has_data: bool,
    last_id: Option<String>,
    retry: Option<u64>,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    /// A parser with the default maximum event size
    /// ([`DEFAULT_MAX_EVENT_SIZE`]).
    pub fn new() -> Self {
        Self::with_max_event_size(DEFAULT_MAX_EVENT_SIZE)
    }

    /// A parser that refuses events larger than `max` bytes (counting the
    /// unfinished line and the event's buffered name and data).
    pub fn with_max_event_size(max: usize) -> Self {
        Self {
            max_event_size: max,
            line: Vec::new(),
            skip_line: false,
            after_cr: false,
            first_line: true,
            discarding: false,
            event: String::new(),
            data: String::new(),
            has_data: false,
            last_id: None,
            retry: None,
        }
    }

    /// The largest event, in bytes, this parser buffers.
    pub fn max_event_size(&self) -> usize {
        self.max_event_size
    }

    /// The latest valid `retry:` field (the server's reconnection time, in
    /// milliseconds), if any has been seen.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// Parses the next `bytes` of the stream and returns the events they
    /// complete, in order, with an [`SseError`] item in place of each event
    /// that was too large.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Vec<Result<SseEvent, SseError>> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if bytes[0] == b'\n' {
                    bytes = &bytes[1..];
                    continue;
                }
            }
            let end = bytes.iter().position(|&b| b == b'\r' || b == b'\n');
            let (segment, ending) = match end {
                Some(i) => (&bytes[..i], Some(bytes[i])),
                None => (bytes, None),
            };
            self.push_segment(segment, &mut out);
            match ending {
                Some(terminator) => {
                    self.after_cr = terminator == b'\r';
                    self.end_line(&mut out);
                    bytes = &bytes[segment.len() + 1..];
                }
                None => bytes = &[],
            }
        }
        out
    }

    /// Ends the stream: returns the last event if the stream ended without
    /// the blank line that would have dispatched it (its unfinished last
    /// line counts as a line). `None` if there is none, or it was too large.
    pub fn finish(mut self) -> Option<SseEvent> {
        if !self.line.is_empty() || self.skip_line {
            // The error item, if any, was already returned by `feed`: an
            // unfinished line is checked as it grows.
            self.end_line(&mut Vec::new());
        }
        if self.discarding {
            return None;
        }
        self.take_event()
    }

    /// Appends part of the current line, within the size bound.
    fn push_segment(&mut self, segment: &[u8], out: &mut Vec<Result<SseEvent, SseError>>) {
        if segment.is_empty() || self.skip_line {
            return;
        }
        // A comment is ignored whole, so it need not be buffered. The first
        // line may start with a byte order mark, so its `:` comes later and
        // it is buffered; that costs nothing but memory within the bound.
        if self.line.is_empty() && segment[0] == b':' {
            self.skip_line = true;
            return;
        }
        if self.discarding {
            self.skip_line = true;
            return;
        }
        let buffered = self.line.len() + self.event.len() + self.data.len();
        if buffered + segment.len() > self.max_event_size {
            out.push(Err(SseError::TooLarge(self.max_event_size)));
            self.line.clear();
            self.reset_event();
            self.discarding = true;
            self.skip_line = true;
            return;
        }
        self.line.extend_from_slice(segment);
    }

    /// Handles the line just ended.
    fn end_line(&mut self, out: &mut Vec<Result<SseEvent, SseError>>) {
        let first = std::mem::replace(&mut self.first_line, false);
        if std::mem::take(&mut self.skip_line) {
            return;
        }
        let mut line = std::mem::take(&mut self.line);
        if first && line.starts_with(BOM) {
            line.drain(..BOM.len());
            // A line that was only a byte order mark is a blank line, as if
            // the mark were not there.
        }
        if line.is_empty() {
            if std::mem::take(&mut self.discarding) {
                self.reset_event();
            } else if let Some(event) = self.take_event() {
                out.push(Ok(event));
            }
        } else if !self.discarding {
            self.process_line(&line);
        }
        // The buffer's capacity is kept for the next line.
        line.clear();
        self.line = line;
    }

    fn process_line(&mut self, line: &[u8]) {
        // Valid UTF-8 (nearly every line) is checked by the faster
        // validator; only a line that fails it is decoded lossily.
        let line = match std::str::from_utf8(line) {
            Ok(line) => std::borrow::Cow::Borrowed(line),
            Err(_) => String::from_utf8_lossy(line),
        };
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (&*line, ""),
        };
        match field {
            "event" => {
                self.event.clear();
                self.event.push_str(value);
            }
            "data" => {
                // Joined with `\n`: each line adds its own, and the last
                // one is removed at dispatch.
                self.data.reserve(value.len() + 1);
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            // The spec ignores an ID containing NUL, as it cannot be sent
            // back in a `Last-Event-ID` header.
            "id" if !value.contains('\0') => {
                self.last_id = (!value.is_empty()).then(|| value.to_owned());
            }
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                // Digits too many for a u64 are not a usable time either.
                if let Ok(ms) = value.parse() {
                    self.retry = Some(ms);
                }
            }
            _ => {}
        }
    }

    /// The buffered event, if it had data, leaving the buffers empty.
    fn take_event(&mut self) -> Option<SseEvent> {
        if !self.has_data {
            self.reset_event();
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        let event = std::mem::take(&mut self.event);
        self.has_data = false;
        Some(SseEvent {
            event: (!event.is_empty()).then_some(event),
            data,
            id: self.last_id.clone(),
        })
    }

    fn reset_event(&mut self) {
        self.event.clear();
        self.data.clear();
        self.has_data = false;
    }
}

/// Why [`SseReader`] could not return the next event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// Reading the body failed.
    Http(crate::http::Error),
    /// An event was too large (the reader goes on after it).
    Sse(SseError),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Http(error) => error.fmt(f),
            ReadError::Sse(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for ReadError {}

/// The events of a streamed body, read chunk by chunk as they are needed,
/// so an adapter's `next` can return each as it arrives.
///
/// ```no_run
/// use moat_guest::http::{Request, send};
/// use moat_guest::sse::SseReader;
///
/// let response = send(&Request::get("https://api.example.com/v1/stream"))?;
/// let mut events = SseReader::from_response(response);
/// while let Some(event) = events.next() {
///     let event = event?;
///     if event.data == "[DONE]" { break; }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// After a body error the reader returns `None`: the stream is unusable.
pub struct SseReader<F> {
    read_chunk: F,
    parser: Option<SseParser>,
    ready: VecDeque<Result<SseEvent, SseError>>,
}

impl SseReader<()> {
    /// Reads the events of `response`'s body with a default [`SseParser`].
    pub fn from_response(
        mut response: crate::http::Response,
    ) -> SseReader<impl FnMut() -> Result<Option<Vec<u8>>, crate::http::Error>> {
        SseReader::new(SseParser::new(), move || response.read_chunk())
    }
}

impl<F> SseReader<F>
where
    F: FnMut() -> Result<Option<Vec<u8>>, crate::http::Error>,
{
    /// Reads the events `parser` finds in the chunks `read_chunk` returns,
    /// until it returns `None` (the end of the body).
    pub fn new(parser: SseParser, read_chunk: F) -> Self {
        Self {
            read_chunk,
            parser: Some(parser),
            ready: VecDeque::new(),
        }
    }
}

impl<F> SseReader<F> {
    /// Whether the next [`next`](Iterator::next) returns an event already
    /// parsed, without reading the body.
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }
}

impl<F> Iterator for SseReader<F>
where
    F: FnMut() -> Result<Option<Vec<u8>>, crate::http::Error>,
{
    type Item = Result<SseEvent, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some(item.map_err(ReadError::Sse));
            }
            let parser = self.parser.as_mut()?;
            match (self.read_chunk)() {
                Ok(Some(chunk)) => self.ready.extend(parser.feed(&chunk)),
                Ok(None) => return self.parser.take()?.finish().map(Ok),
                Err(error) => {
                    self.parser = None;
                    return Some(Err(ReadError::Http(error)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
