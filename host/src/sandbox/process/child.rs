//! One started child: its stdout read line by line (bounded), a bounded
//! tail of its stderr, its stdin, its exit status.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};

use super::STDERR_TAIL_BYTES;
use super::groups::ChildGroups;

/// What reading one line of stdout gave.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A whole line, without its `\n` or `\r\n`.
    Text(String),
    /// A line longer than the limit, skipped; its length in bytes.
    TooLong(u64),
    /// Stdout is closed.
    End,
}

/// Reads lines of at most `max` bytes. Cancel-safe: a read dropped half
/// way keeps what it had, and the next read goes on from there.
pub(crate) struct LineReader<R> {
    reader: BufReader<R>,
    partial: Vec<u8>,
    /// Bytes of an overlong line skipped so far, while skipping one.
    skipping: Option<u64>,
    max: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(crate) fn new(reader: R, max: usize) -> Self {
        Self {
            reader: BufReader::new(reader),
            partial: Vec::new(),
            skipping: None,
            max,
        }
    }

    pub(crate) async fn next_line(&mut self) -> std::io::Result<Line> {
        loop {
            let buffer = self.reader.fill_buf().await?;
            if buffer.is_empty() {
                // End of stream: a last line without `\n` still counts.
                if let Some(skipped) = self.skipping.take() {
                    return Ok(Line::TooLong(skipped));
                }
                if self.partial.is_empty() {
                    return Ok(Line::End);
                }
                return Ok(Line::Text(self.take_line()));
            }
            let (chunk, found_end) = match buffer.iter().position(|&b| b == b'\n') {
                Some(at) => (&buffer[..at], true),
                None => (buffer, false),
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
            self.reader.consume(used);
            if found_end {
                return Ok(match self.skipping.take() {
                    Some(skipped) => Line::TooLong(skipped),
                    None => Line::Text(self.take_line()),
                });
            }
        }
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

/// The last bytes a child wrote to stderr, filled by a task of its own.
#[derive(Debug, Clone)]
pub(crate) struct StderrTail {
    bytes: Arc<Mutex<VecDeque<u8>>>,
    /// Turns true once stderr has ended.
    ended: tokio::sync::watch::Receiver<bool>,
}

impl Default for StderrTail {
    fn default() -> Self {
        Self {
            bytes: Arc::default(),
            ended: tokio::sync::watch::channel(true).1,
        }
    }
}

impl StderrTail {
    /// Reads `stderr` to its end in the background, keeping the tail.
    pub(crate) fn collect(stderr: impl AsyncRead + Unpin + Send + 'static) -> Self {
        let (end, ended) = tokio::sync::watch::channel(false);
        let tail = Self {
            bytes: Arc::default(),
            ended,
        };
        let kept = tail.clone();
        tokio::spawn(async move {
            let mut stderr = stderr;
            let mut buffer = [0u8; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut buffer).await {
                kept.push(&buffer[..n]);
            }
            let _ = end.send(true);
        });
        tail
    }

    /// Waits, at most `within`, for stderr to end: once a child has
    /// exited, what it wrote last is usually still in the pipe.
    pub(crate) async fn settle(&self, within: std::time::Duration) {
        let mut ended = self.ended.clone();
        let _ = tokio::time::timeout(within, ended.wait_for(|ended| *ended)).await;
    }

    fn push(&self, bytes: &[u8]) {
        let mut tail = self.bytes.lock().unwrap_or_else(PoisonError::into_inner);
        tail.extend(bytes);
        let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
        tail.drain(..excess);
    }

    pub(crate) fn text(&self) -> String {
        let tail = self.bytes.lock().unwrap_or_else(PoisonError::into_inner);
        let (a, b) = tail.as_slices();
        let mut bytes = Vec::with_capacity(tail.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// A child of a run, as the guest's `child` resource. Dropping it kills
/// its process group.
pub struct RunningChild {
    pub(crate) pid: u32,
    pub(crate) process: tokio::process::Child,
    pub(crate) stdout: LineReader<ChildStdout>,
    pub(crate) stderr: StderrTail,
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) groups: ChildGroups,
}

impl RunningChild {
    /// Writes all of `data` to stdin.
    pub(crate) async fn write_stdin(&mut self, data: &[u8]) -> Result<(), StdinError> {
        let stdin = self.stdin.as_mut().ok_or(StdinError::Closed)?;
        let written = async {
            stdin.write_all(data).await?;
            stdin.flush().await
        };
        written.await.map_err(|error| {
            self.stdin = None;
            if error.kind() == std::io::ErrorKind::BrokenPipe {
                StdinError::Closed
            } else {
                StdinError::Io(error)
            }
        })
    }
}

/// Why writing stdin failed.
pub(crate) enum StdinError {
    Closed,
    Io(std::io::Error),
}

impl Drop for RunningChild {
    fn drop(&mut self) {
        self.groups.kill_and_remove(self.pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        let mut reader = LineReader::new(input, max);
        let mut lines = Vec::new();
        loop {
            let line = reader.next_line().await.unwrap();
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

    #[tokio::test]
    async fn lines_end_at_lf_or_crlf_and_a_last_line_needs_no_newline() {
        assert_eq!(
            lines(b"one\r\ntwo\n\nthree", 100).await,
            [text("one"), text("two"), text(""), text("three"), Line::End]
        );
        assert_eq!(lines(b"", 100).await, [Line::End]);
        assert_eq!(
            lines(b"bad \xff utf8\n", 100).await,
            [text("bad \u{fffd} utf8"), Line::End]
        );
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_skipped_whole_and_reading_goes_on() {
        let long = "x".repeat(50);
        let input = format!("ok\n{long}\nafter\n{long}");
        assert_eq!(
            lines(input.as_bytes(), 10).await,
            [
                text("ok"),
                Line::TooLong(50),
                text("after"),
                Line::TooLong(50),
                Line::End
            ]
        );
        // Exactly the limit is fine.
        assert_eq!(
            lines(b"0123456789\n", 10).await,
            [text("0123456789"), Line::End]
        );
    }

    #[tokio::test]
    async fn lines_split_across_reads_are_joined() {
        let (mut writer, reader) = tokio::io::duplex(4);
        tokio::spawn(async move {
            for piece in [&b"hel"[..], b"lo\nwor", b"ld", b"\n"] {
                writer.write_all(piece).await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        let mut reader = LineReader::new(reader, 100);
        assert_eq!(reader.next_line().await.unwrap(), text("hello"));
        assert_eq!(reader.next_line().await.unwrap(), text("world"));
        assert_eq!(reader.next_line().await.unwrap(), Line::End);
    }

    #[test]
    fn the_stderr_tail_keeps_the_last_bytes() {
        let tail = StderrTail::default();
        tail.push(&vec![b'a'; STDERR_TAIL_BYTES]);
        tail.push(b"end");
        let text = tail.text();
        assert_eq!(text.len(), STDERR_TAIL_BYTES);
        assert!(text.ends_with("aend"));
    }
}
