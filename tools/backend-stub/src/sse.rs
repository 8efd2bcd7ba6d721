//! Server-sent events over a chunked response, paced like a live model.

use std::io;
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::http::ChunkedResponse;

/// How events are framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `event: NAME` then `data: JSON`, LF line ends (Anthropic, OpenAI).
    Named,
    /// `data: JSON` only, CRLF line ends (Google's Gemini API).
    DataOnlyCrlf,
}

/// An SSE response being streamed.
pub struct EventStream<'a> {
    response: ChunkedResponse<'a>,
    framing: Framing,
    delay: Duration,
}

impl<'a> EventStream<'a> {
    /// Sends the response head.
    pub fn start(stream: &'a mut TcpStream, framing: Framing, delay: Duration) -> io::Result<Self> {
        Ok(EventStream {
            response: ChunkedResponse::start(stream, "text/event-stream")?,
            framing,
            delay,
        })
    }

    /// Sends one event, then waits the pacing delay.
    pub fn send(&mut self, name: Option<&str>, data: &Value) -> io::Result<()> {
        let frame = match (self.framing, name) {
            (Framing::Named, Some(name)) => format!("event: {name}\ndata: {data}\n\n"),
            (Framing::Named, None) => format!("data: {data}\n\n"),
            (Framing::DataOnlyCrlf, _) => format!("data: {data}\r\n\r\n"),
        };
        self.response.send(frame.as_bytes())?;
        thread::sleep(self.delay);
        Ok(())
    }

    /// Ends the stream properly.
    pub fn finish(self) -> io::Result<()> {
        self.response.finish()
    }

    /// Cuts the connection mid-stream.
    pub fn cut(self) -> io::Result<()> {
        self.response.cut()
    }
}
