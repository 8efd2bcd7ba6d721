//! One started child: its stdout read line by line (bounded), a bounded
//! tail of its stderr, its stdin, its exit status.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};

use moat_process_model::{Line, LineSplitter};

use super::groups::ChildGroups;

/// Reads lines of at most `max` bytes, cut as the process model says
/// ([`LineSplitter`]). Cancel-safe: a read dropped half way keeps what it
/// had, and the next read goes on from there.
pub(crate) struct LineReader<R> {
    reader: BufReader<R>,
    splitter: LineSplitter,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(crate) fn new(reader: R, max: usize) -> Self {
        Self {
            reader: BufReader::new(reader),
            splitter: LineSplitter::new(max),
        }
    }

    pub(crate) async fn next_line(&mut self) -> std::io::Result<Line> {
        loop {
            let buffer = self.reader.fill_buf().await?;
            if buffer.is_empty() {
                return Ok(self.splitter.finish());
            }
            let (used, line) = self.splitter.feed(buffer);
            self.reader.consume(used);
            if let Some(line) = line {
                return Ok(line);
            }
        }
    }
}

/// The last bytes a child wrote to stderr, filled by a task of its own.
#[derive(Debug, Clone)]
pub(crate) struct StderrTail {
    bytes: Arc<Mutex<moat_process_model::StderrTail>>,
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
        self.bytes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(bytes);
    }

    pub(crate) fn text(&self) -> String {
        self.bytes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .text()
    }
}

/// A child of a run, as the guest's `child` resource. Dropping it kills
/// its process group.
pub struct RunningChild {
    pub(crate) pid: u32,
    pub(crate) process: ChildProcess,
    pub(crate) stdout: LineReader<ChildStdout>,
    pub(crate) stderr: StderrTail,
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) groups: ChildGroups,
}

impl RunningChild {
    /// Its process id, as moat sees it.
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

/// How moat follows a child: its own (an uncontained run's), or one its
/// run's init started.
pub(crate) enum ChildProcess {
    Direct(tokio::process::Child),
    Contained(super::init::InitChild),
}

impl ChildProcess {
    /// Waits for the child's end.
    pub(crate) async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Self::Direct(child) => child.wait().await,
            Self::Contained(child) => child.wait().await,
        }
    }
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

    fn text(s: &str) -> Line {
        Line::Text(s.into())
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

    #[tokio::test]
    async fn an_overlong_line_is_skipped_and_the_stream_goes_on() {
        let mut reader = LineReader::new(&b"ok\nxxxxxxxxxxxx\nafter"[..], 5);
        assert_eq!(reader.next_line().await.unwrap(), text("ok"));
        assert_eq!(reader.next_line().await.unwrap(), Line::TooLong(12));
        assert_eq!(reader.next_line().await.unwrap(), text("after"));
        assert_eq!(reader.next_line().await.unwrap(), Line::End);
    }

    #[tokio::test]
    async fn the_stderr_tail_is_collected_in_the_background() {
        let tail = StderrTail::collect(&b"last words"[..]);
        tail.settle(std::time::Duration::from_secs(5)).await;
        assert_eq!(tail.text(), "last words");
    }
}
