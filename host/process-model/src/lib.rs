//! How a child process of a moat run behaves, as its adapter sees it.
//!
//! The host's process capability (`moat-sandbox`) and the guest SDK
//! (`moat-guest`, whose native stand-in runs an adapter's logic in unit
//! tests without a host) must agree, or an adapter tested natively meets a
//! different child in the sandbox. Everything both of them decide lives
//! here once: the types of the calls (what a child reads on stdin, the
//! signals, exit statuses and errors), the limits, how stdout is cut into
//! lines, and how much of stderr is kept. The I/O around it (tokio in the
//! host, threads in the stand-in) stays with each of them. No dependencies,
//! so it builds for the guest's `wasm32-wasip2` too.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

/// Children a run may have at a time (started and not yet released).
pub const MAX_LIVE_CHILDREN: usize = 8;
/// Longest stdout line handed to the adapter; a longer one is skipped and
/// reported with its length.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;
/// How much of a child's stderr is kept: its last bytes.
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// How long `wait` lets a child's stderr drain after the child exited, so
/// the stderr tail read after `wait` holds the child's last words; a
/// grandchild keeping stderr open must not hold the adapter up longer.
pub const STDERR_SETTLE: Duration = Duration::from_millis(200);
/// Most arguments plus environment variables one spawn may pass.
pub const MAX_ARGS_AND_VARS: usize = 4096;
/// Most bytes of arguments and environment variables one spawn may pass.
pub const MAX_ARGS_AND_VARS_BYTES: usize = 1024 * 1024;

/// What a child reads on its standard input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Stdin {
    /// Nothing: stdin is `/dev/null` (what most headless CLIs want).
    #[default]
    Null,
    /// A pipe the adapter writes.
    Piped,
}

/// A signal for a child (and its process group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// `SIGINT`, as Ctrl-C would send.
    Interrupt,
    /// `SIGTERM`: please stop.
    Terminate,
    /// `SIGKILL`: stop now.
    Kill,
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

impl ExitStatus {
    /// Whether it exited with code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit code {code}"),
            (None, Some(signal)) => write!(f, "signal {signal}"),
            (None, None) => f.write_str("unknown exit status"),
        }
    }
}

/// Why a process call failed, as the adapter is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessError {
    /// The run was not granted this; the message says what was refused
    /// (the user is told how to grant it).
    Denied(String),
    /// The program is not installed: the message says where it was
    /// looked for; the remedy is the adapter's to give (it knows how its
    /// program is installed), or the generic one [`fmt::Display`] adds.
    NotFound(String),
    /// A per-run limit ([`MAX_LIVE_CHILDREN`]) was reached.
    LimitReached(String),
    /// The run was aborted: stop and end with `done` interrupted.
    Interrupted,
    /// The timeout given to the call passed.
    TimedOut,
    /// A stdout line longer than [`MAX_LINE_BYTES`] (its length) was
    /// skipped.
    LineTooLong(u64),
    /// Stdin is closed, or was never piped.
    StdinClosed,
    /// Any other failure, described.
    Io(String),
}

impl fmt::Display for ProcessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Denied(message) => write!(f, "refused: {message}"),
            Self::NotFound(message) => write!(
                f,
                "not found: {message}; install it, or grant its absolute path"
            ),
            Self::LimitReached(message) => write!(f, "limit reached: {message}"),
            Self::Interrupted => f.write_str("the run was interrupted"),
            Self::TimedOut => f.write_str("timed out"),
            Self::LineTooLong(bytes) => write!(f, "an output line of {bytes} bytes was skipped"),
            Self::StdinClosed => f.write_str("stdin is closed"),
            Self::Io(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ProcessError {}

/// What reading one line of stdout gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A whole line, without its `\n` or `\r\n`; invalid UTF-8 replaced.
    Text(String),
    /// A line longer than the limit, skipped whole; its length in bytes.
    TooLong(u64),
    /// Stdout is closed.
    End,
}

/// Cuts a byte stream into [`Line`]s: a line ends at `\n` (a `\r` before
/// it is dropped), a last line needs no `\n`, and a line longer than the
/// limit is skipped whole while the lines after it go on.
///
/// It holds only the current line, so a reader can be cancelled between
/// two [`feed`](Self::feed)s and resume without losing anything.
#[derive(Debug, Clone)]
pub struct LineSplitter {
    partial: Vec<u8>,
    /// Bytes of an overlong line seen so far, while skipping one.
    skipping: Option<u64>,
    max: usize,
}

impl LineSplitter {
    /// A splitter for lines of at most `max` bytes.
    pub fn new(max: usize) -> Self {
        Self {
            partial: Vec::new(),
            skipping: None,
            max,
        }
    }

    /// Takes bytes from the front of `input`: returns how many it used and
    /// the line they completed, if any. It uses everything up to and
    /// including the first `\n`, or all of `input` when there is none.
    pub fn feed(&mut self, input: &[u8]) -> (usize, Option<Line>) {
        let (chunk, found_end) = match input.iter().position(|&b| b == b'\n') {
            Some(at) => (&input[..at], true),
            None => (input, false),
        };
        let used = chunk.len() + usize::from(found_end);
        if let Some(skipped) = self.skipping.as_mut() {
            *skipped += chunk.len() as u64;
        } else if self.partial.len() + chunk.len() > self.max {
            self.skipping = Some((self.partial.len() + chunk.len()) as u64);
            self.partial.clear();
        } else {
            self.partial.extend_from_slice(chunk);
        }
        if !found_end {
            return (used, None);
        }
        let line = match self.skipping.take() {
            Some(skipped) => Line::TooLong(skipped),
            None => Line::Text(self.take_line()),
        };
        (used, Some(line))
    }

    /// The stream ended: the last line if it had no `\n`, else
    /// [`Line::End`]. Calling it again gives [`Line::End`].
    pub fn finish(&mut self) -> Line {
        if let Some(skipped) = self.skipping.take() {
            return Line::TooLong(skipped);
        }
        if self.partial.is_empty() {
            return Line::End;
        }
        Line::Text(self.take_line())
    }

    fn take_line(&mut self) -> String {
        if self.partial.last() == Some(&b'\r') {
            self.partial.pop();
        }
        let line = String::from_utf8_lossy(&self.partial).into_owned();
        self.partial.clear();
        line
    }
}

/// The last [`STDERR_TAIL_BYTES`] a child wrote to stderr.
#[derive(Debug, Clone, Default)]
pub struct StderrTail {
    bytes: VecDeque<u8>,
}

impl StderrTail {
    /// Adds what the child wrote, forgetting the oldest bytes past the
    /// limit.
    pub fn push(&mut self, bytes: &[u8]) {
        self.bytes.extend(bytes);
        let excess = self.bytes.len().saturating_sub(STDERR_TAIL_BYTES);
        self.bytes.drain(..excess);
    }

    /// The tail as text, invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        let (a, b) = self.bytes.as_slices();
        let mut bytes = Vec::with_capacity(self.bytes.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line of `input` fed in pieces of `piece` bytes.
    fn lines(input: &[u8], max: usize, piece: usize) -> Vec<Line> {
        let mut splitter = LineSplitter::new(max);
        let mut lines = Vec::new();
        for mut chunk in input.chunks(piece) {
            while !chunk.is_empty() {
                let (used, line) = splitter.feed(chunk);
                lines.extend(line);
                chunk = &chunk[used..];
            }
        }
        loop {
            let line = splitter.finish();
            let end = line == Line::End;
            lines.push(line);
            if end {
                return lines;
            }
        }
    }

    fn text(s: &str) -> Line {
        Line::Text(s.into())
    }

    #[test]
    fn lines_end_at_lf_or_crlf_and_a_last_line_needs_no_newline() {
        for piece in [1, 2, 3, 100] {
            assert_eq!(
                lines(b"one\r\ntwo\n\nthree", 100, piece),
                [text("one"), text("two"), text(""), text("three"), Line::End]
            );
        }
        assert_eq!(lines(b"", 100, 1), [Line::End]);
        assert_eq!(
            lines(b"bad \xff utf8\n", 100, 100),
            [text("bad \u{fffd} utf8"), Line::End]
        );
    }

    #[test]
    fn a_line_over_the_limit_is_skipped_whole_and_reading_goes_on() {
        let long = "x".repeat(50);
        let input = format!("ok\n{long}\nafter\n{long}");
        for piece in [1, 7, 1000] {
            assert_eq!(
                lines(input.as_bytes(), 10, piece),
                [
                    text("ok"),
                    Line::TooLong(50),
                    text("after"),
                    Line::TooLong(50),
                    Line::End
                ]
            );
        }
        // Exactly the limit is fine.
        assert_eq!(
            lines(b"0123456789\n", 10, 3),
            [text("0123456789"), Line::End]
        );
    }

    #[test]
    fn the_stderr_tail_keeps_the_last_bytes() {
        let mut tail = StderrTail::default();
        tail.push(&vec![b'a'; STDERR_TAIL_BYTES]);
        tail.push(b"end");
        let text = tail.text();
        assert_eq!(text.len(), STDERR_TAIL_BYTES);
        assert!(text.ends_with("aend"));
    }
}
