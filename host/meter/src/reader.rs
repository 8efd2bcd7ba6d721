//! [`UsageReader`]: one answer's body, read as it passes.

use memchr::memchr2;

use crate::scan::Scanner;
use crate::usage::Tally;
use crate::{Reading, Vendor};

/// How a body is read.
#[derive(Debug)]
enum Framing {
    /// Not at all: it is compressed (or encoded some other way).
    Unreadable,
    /// As JSON documents, one after another.
    Json,
    /// As server-sent events whose `data:` lines are JSON documents.
    Events(Lines),
}

/// Where the event stream's reading stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// At the start of a line, `matched` bytes of `data:` read.
    Start { matched: usize },
    /// Just after `data:`, where one space may come.
    DataStart,
    /// In a `data:` line's value.
    Data,
    /// In any other line.
    Other,
}

/// The state of an event stream's lines.
#[derive(Debug)]
struct Lines {
    line: Line,
    /// The last line ended with `\r`: a `\n` right after it belongs to it.
    after_cr: bool,
}

const DATA: &[u8] = b"data:";

/// Reads one answer's usage as its body passes, chunk by chunk.
///
/// It holds no body: its memory is bounded by a small constant (a
/// captured value of at most 64 KiB and a few small buffers) whatever
/// comes, and it never recurses, so a hostile or broken answer costs it
/// nothing more than a well-formed one.
#[derive(Debug)]
pub struct UsageReader {
    framing: Framing,
    scanner: Scanner,
    tally: Tally,
}

impl UsageReader {
    /// A reader of an answer from `vendor`. `content_type`: the
    /// response's `Content-Type` header value (None: none);
    /// `text/event-stream` is read as server-sent events, anything else
    /// as JSON. `content_encoding`: its `Content-Encoding` (None or
    /// `identity`: readable; anything else, a compressed body, is not
    /// read and its usage stays None).
    pub fn new(
        vendor: Vendor,
        content_type: Option<&[u8]>,
        content_encoding: Option<&[u8]>,
    ) -> Self {
        let framing = if !readable(content_encoding) {
            Framing::Unreadable
        } else if content_type.is_some_and(is_event_stream) {
            Framing::Events(Lines {
                line: Line::Start { matched: 0 },
                after_cr: false,
            })
        } else {
            Framing::Json
        };
        UsageReader {
            framing,
            scanner: Scanner::new(),
            tally: Tally::new(vendor),
        }
    }

    /// Reads the body's next bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        match &mut self.framing {
            Framing::Unreadable => {}
            Framing::Json => self.scanner.feed(bytes, &mut self.tally),
            Framing::Events(lines) => feed_events(lines, &mut self.scanner, &mut self.tally, bytes),
        }
    }

    /// What it has read so far (may be called many times, e.g. when the
    /// body is dropped early).
    pub fn reading(&self) -> Reading {
        self.tally.reading()
    }

    /// The bytes it holds on the heap.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.scanner.held() + self.tally.held()
    }
}

/// Whether a body with this `Content-Encoding` can be read as it is.
fn readable(content_encoding: Option<&[u8]>) -> bool {
    match content_encoding {
        None => true,
        Some(value) => {
            let value = value.trim_ascii();
            // An empty header encodes nothing either.
            value.is_empty() || value.eq_ignore_ascii_case(b"identity")
        }
    }
}

/// Whether `content_type` (parameters and all) is `text/event-stream`.
fn is_event_stream(content_type: &[u8]) -> bool {
    let essence = content_type
        .split(|byte| *byte == b';')
        .next()
        .unwrap_or_default();
    essence
        .trim_ascii()
        .eq_ignore_ascii_case(b"text/event-stream")
}

/// Reads an event stream's next bytes: each `data:` line's value goes to
/// a fresh document of `scanner` as it comes, without the line being
/// held; every other line is passed by.
fn feed_events(lines: &mut Lines, scanner: &mut Scanner, tally: &mut Tally, bytes: &[u8]) {
    let mut i = 0;
    while i < bytes.len() {
        if lines.after_cr {
            lines.after_cr = false;
            if bytes[i] == b'\n' {
                i += 1;
                continue;
            }
        }
        match lines.line {
            Line::Start { matched } => {
                let byte = bytes[i];
                if byte == DATA[matched] {
                    i += 1;
                    lines.line = if matched + 1 == DATA.len() {
                        scanner.reset();
                        Line::DataStart
                    } else {
                        Line::Start {
                            matched: matched + 1,
                        }
                    };
                } else {
                    // Another field, a comment or a blank line: its end
                    // is found as any other line's.
                    lines.line = Line::Other;
                }
            }
            Line::DataStart => {
                if bytes[i] == b' ' {
                    i += 1;
                }
                lines.line = Line::Data;
            }
            Line::Data | Line::Other => {
                let rest = &bytes[i..];
                let end = memchr2(b'\n', b'\r', rest);
                if lines.line == Line::Data {
                    scanner.feed(&rest[..end.unwrap_or(rest.len())], tally);
                }
                let Some(end) = end else {
                    return;
                };
                lines.after_cr = rest[end] == b'\r';
                lines.line = Line::Start { matched: 0 };
                i += end + 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        for value in [
            &b"text/event-stream"[..],
            b"text/event-stream; charset=utf-8",
            b"Text/Event-Stream ;charset=UTF-8",
            b"  text/event-stream  ",
        ] {
            assert!(is_event_stream(value), "{value:?}");
        }
        for value in [
            &b"application/json"[..],
            b"text/event-streams",
            b"text/plain; x=text/event-stream",
            b"",
            b"\xff",
        ] {
            assert!(!is_event_stream(value), "{value:?}");
        }
    }

    #[test]
    fn content_encodings() {
        assert!(readable(None));
        assert!(readable(Some(b"identity")));
        assert!(readable(Some(b" Identity ")));
        assert!(readable(Some(b"")));
        for value in [&b"gzip"[..], b"br", b"zstd", b"deflate", b"identity, gzip"] {
            assert!(!readable(Some(value)), "{value:?}");
        }
    }
}
