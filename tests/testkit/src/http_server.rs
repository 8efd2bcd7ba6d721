//! A tiny HTTP/1.1 server on 127.0.0.1 for the network tests.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// What the test server answers.
pub const SERVED: &str = "hello from the test server";

/// How the test server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Answer,
    Silent,
    Hold,
}

/// A tiny HTTP/1.1 server on 127.0.0.1 (the only address these tests
/// send traffic to). It counts the connections it accepts, so a test can
/// prove a refused request made none.
pub struct TestServer {
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    connections: Arc<AtomicUsize>,
}

impl TestServer {
    /// Answers every request with [`SERVED`] (a `GET /echo-host` with
    /// `host: ` and the request's `Host` header, lowercased).
    pub fn answering() -> Self {
        Self::start(Mode::Answer)
    }

    /// Accepts connections and never answers.
    pub fn silent() -> Self {
        Self::start(Mode::Silent)
    }

    /// Answers every request with a response head, then holds the
    /// connection open without sending the body it announced.
    pub fn holding() -> Self {
        Self::start(Mode::Hold)
    }

    fn start(mode: Mode) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                counted.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    if mode == Mode::Silent {
                        // Hold the connection open, saying nothing.
                        std::thread::sleep(Duration::from_secs(30));
                        return;
                    }
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match stream.read(&mut byte) {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    // A request with a body gets it back, after `got: `.
                    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                    let length = head
                        .lines()
                        .find_map(|line| line.strip_prefix("content-length:"))
                        .and_then(|n| n.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if mode == Mode::Hold {
                        let head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
                        let _ = stream.write_all(head.as_bytes());
                        std::thread::sleep(Duration::from_secs(30));
                        return;
                    }
                    let mut body = vec![0u8; length];
                    if stream.read_exact(&mut body).is_err() {
                        return;
                    }
                    let host = head
                        .lines()
                        .find_map(|line| line.strip_prefix("host:"))
                        .map(str::trim)
                        .unwrap_or_default()
                        .to_string();
                    let answer = if head.starts_with("get /echo-host ") {
                        format!("host: {host}")
                    } else if length == 0 {
                        SERVED.to_string()
                    } else {
                        format!("got: {}", String::from_utf8_lossy(&body))
                    };
                    let response = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                        answer.len()
                    );
                    let _ = stream.write_all(response.as_bytes());
                });
            }
        });
        Self { port, connections }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}
