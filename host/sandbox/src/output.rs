//! Guest stdout and stderr: forwarded line by line to the host's logs, and
//! the last few KiB of stderr kept so a trap's error can carry a guest
//! panic's text.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// How much of the tail of a stream is kept for error messages.
const TAIL_BYTES: usize = 8 * 1024;
/// Longest line forwarded to the log; longer lines are split.
const MAX_LINE_BYTES: usize = 4 * 1024;

/// Which guest stream an output is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum StreamName {
    Stdout,
    Stderr,
}

#[derive(Debug, Default)]
struct Buffers {
    line: Vec<u8>,
    tail: VecDeque<u8>,
}

/// One guest output stream. Clones share the same buffers.
#[derive(Debug, Clone)]
pub(crate) struct GuestOutput {
    adapter: Arc<str>,
    stream: StreamName,
    buffers: Arc<Mutex<Buffers>>,
}

impl GuestOutput {
    pub(crate) fn new(adapter: Arc<str>, stream: StreamName) -> Self {
        Self {
            adapter,
            stream,
            buffers: Arc::default(),
        }
    }

    /// The last bytes written, lossily decoded, trimmed.
    pub(crate) fn tail(&self) -> String {
        let buffers = self.buffers.lock().unwrap_or_else(PoisonError::into_inner);
        let (a, b) = buffers.tail.as_slices();
        let mut bytes = Vec::with_capacity(a.len() + b.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        String::from_utf8_lossy(&bytes).trim().to_string()
    }

    fn accept(&self, bytes: &[u8]) {
        let mut buffers = self.buffers.lock().unwrap_or_else(PoisonError::into_inner);
        let keep_from = bytes.len().saturating_sub(TAIL_BYTES);
        buffers.tail.extend(&bytes[keep_from..]);
        let excess = buffers.tail.len().saturating_sub(TAIL_BYTES);
        buffers.tail.drain(..excess);
        for &byte in bytes {
            if byte == b'\n' || buffers.line.len() >= MAX_LINE_BYTES {
                let line = std::mem::take(&mut buffers.line);
                self.log_line(&line);
                if byte == b'\n' {
                    continue;
                }
            }
            buffers.line.push(byte);
        }
    }

    fn log_line(&self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        match self.stream {
            StreamName::Stdout => {
                tracing::debug!(target: "moat::guest", adapter = %self.adapter, stream = "stdout", "{line}")
            }
            StreamName::Stderr => {
                tracing::info!(target: "moat::guest", adapter = %self.adapter, stream = "stderr", "{line}")
            }
        }
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.accept(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Always writable: only the tail is kept, so memory stays bounded.
        Ok(64 * 1024)
    }
}

#[async_trait::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl AsyncWrite for GuestOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.accept(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_only_the_last_bytes() {
        let out = GuestOutput::new("t".into(), StreamName::Stderr);
        out.accept(&vec![b'a'; TAIL_BYTES * 2]);
        out.accept(b"panicked at the end\n");
        let tail = out.tail();
        assert!(tail.len() <= TAIL_BYTES);
        assert!(tail.ends_with("panicked at the end"));
    }
}
