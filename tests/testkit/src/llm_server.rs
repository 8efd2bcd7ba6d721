//! A scriptable LLM API server on 127.0.0.1 for the `openai` and
//! `anthropic` tests and the benchmark: it records each request (method,
//! path, headers, body) for the tests to check, and answers with a
//! [`Reply`]: a streamed body sent in chunks of chosen sizes with chosen
//! pauses, that may stall forever or be cut off mid-stream, or an error
//! status with its headers (e.g. `retry-after`) and body.
//!
//! Streamed bodies go out with `Transfer-Encoding: chunked`, as the vendors
//! send them; each piece of the script is written and flushed on its own
//! (with Nagle off), so the chunk boundaries reach the client where the
//! script puts them, not where a buffer happened to fill.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Sizes the body of [`Reply::sse`] is cut into, in turn: single bytes
/// (inside a UTF-8 character, between `\r` and `\n`), odd sizes that fall
/// inside field names and JSON, and a larger piece.
pub const AWKWARD_SPLITS: &[usize] = &[1, 3, 17, 2, 64, 5, 1, 250, 7];

/// Longest request head or body the server reads.
const MAX_REQUEST: usize = 4 * 1024 * 1024;

/// One step of a streamed answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Write these bytes as one HTTP chunk and flush.
    Send(Vec<u8>),
    /// Wait this long.
    Pause(Duration),
    /// Say nothing more and keep the connection open until the client goes.
    Stall,
    /// Close the connection without ending the body.
    Cut,
}

/// What the server answers every request with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// Response headers, in order.
    pub headers: Vec<(String, String)>,
    /// A streamed (chunked) body.
    pub steps: Vec<Step>,
}

impl Reply {
    /// `200` with `text/event-stream`, `body` cut at [`AWKWARD_SPLITS`]
    /// with a short pause between pieces.
    pub fn sse(body: &[u8]) -> Self {
        Self::sse_split(body, AWKWARD_SPLITS, Duration::from_millis(1))
    }

    /// `200` with `text/event-stream`, `body` cut in pieces of `sizes` (in
    /// turn) with `pause` between them.
    pub fn sse_split(body: &[u8], sizes: &[usize], pause: Duration) -> Self {
        let mut steps = Vec::new();
        let mut rest = body;
        let mut sizes = sizes.iter().copied().filter(|s| *s > 0).cycle();
        while !rest.is_empty() {
            let size = sizes.next().unwrap_or(rest.len()).min(rest.len());
            let (piece, tail) = rest.split_at(size);
            steps.push(Step::Send(piece.to_vec()));
            if !pause.is_zero() && !tail.is_empty() {
                steps.push(Step::Pause(pause));
            }
            rest = tail;
        }
        Self::stream(steps)
    }

    /// `200` with `text/event-stream` and the given steps.
    pub fn stream(steps: Vec<Step>) -> Self {
        Self {
            status: 200,
            headers: vec![
                ("content-type".into(), "text/event-stream".into()),
                ("cache-control".into(), "no-cache".into()),
            ],
            steps,
        }
    }

    /// `200` with a JSON body (an answer that is not streamed).
    pub fn json(json: &str) -> Self {
        Self::error(200, json)
    }

    /// `status` with a JSON body.
    pub fn error(status: u16, json: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            steps: vec![Step::Send(json.as_bytes().to_vec())],
        }
    }

    /// Adds a response header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Ends the script by stalling instead of ending the body.
    pub fn then_stall(mut self) -> Self {
        self.steps.push(Step::Stall);
        self
    }

    /// Ends the script by cutting the connection instead of ending the
    /// body.
    pub fn then_cut(mut self) -> Self {
        self.steps.push(Step::Cut);
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Header names in lowercase, values as sent.
    pub headers: Vec<(String, String)>,
    /// The request body.
    pub body: Vec<u8>,
}

impl Recorded {
    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("the request body is JSON")
    }
}

#[derive(Debug, Default)]
struct Shared {
    requests: Vec<Recorded>,
    /// Connections the client closed while the server still held them
    /// (a stall, or a write that failed).
    client_gone: usize,
}

/// The server; it stops accepting when dropped (its threads end with their
/// connections).
pub struct LlmServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    shared: Arc<(Mutex<Shared>, Condvar)>,
}

impl LlmServer {
    /// Starts a server answering every request with `reply`.
    pub fn start(reply: Reply) -> Self {
        Self::start_turns(vec![reply])
    }

    /// Starts a server answering its n-th request with the n-th of
    /// `replies`, and every request past them with the last: a
    /// conversation, turn by turn.
    pub fn start_turns(replies: Vec<Reply>) -> Self {
        assert!(!replies.is_empty(), "at least one reply");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("a local address").port();
        let shared = Arc::new((Mutex::new(Shared::default()), Condvar::new()));
        let state = shared.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let state = state.clone();
                let replies = replies.clone();
                std::thread::spawn(move || serve(stream, &replies, &state));
            }
        });
        Self { port, shared }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:PORT`, as `--allow-net` takes it.
    pub fn grant(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    /// The only request received; fails the test if there was not exactly
    /// one.
    pub fn single_request(&self) -> Recorded {
        let requests = self.requests();
        assert_eq!(requests.len(), 1, "exactly one request: {requests:?}");
        requests.into_iter().next().expect("one request")
    }

    /// Waits until the client has closed a connection the server was still
    /// answering; whether it did within `timeout`.
    pub fn wait_client_gone(&self, timeout: Duration) -> bool {
        let (lock, changed) = &*self.shared;
        let deadline = Instant::now() + timeout;
        let mut shared = lock.lock().unwrap_or_else(PoisonError::into_inner);
        while shared.client_gone == 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            shared = changed
                .wait_timeout(shared, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn serve(mut stream: TcpStream, replies: &[Reply], state: &Arc<(Mutex<Shared>, Condvar)>) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let Some(request) = read_request(&mut stream) else {
        return;
    };
    let reply = {
        let mut shared = state.0.lock().unwrap_or_else(PoisonError::into_inner);
        shared.requests.push(request);
        &replies[(shared.requests.len() - 1).min(replies.len() - 1)]
    };
    let gone = || {
        let (lock, changed) = &**state;
        lock.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .client_gone += 1;
        changed.notify_all();
    };

    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    if stream.write_all(head.as_bytes()).is_err() {
        return gone();
    }
    for step in &reply.steps {
        match step {
            Step::Send(bytes) if bytes.is_empty() => {}
            Step::Send(bytes) => {
                let mut chunk = format!("{:x}\r\n", bytes.len()).into_bytes();
                chunk.extend_from_slice(bytes);
                chunk.extend_from_slice(b"\r\n");
                if stream
                    .write_all(&chunk)
                    .and_then(|()| stream.flush())
                    .is_err()
                {
                    return gone();
                }
            }
            Step::Pause(duration) => std::thread::sleep(*duration),
            Step::Stall => {
                // The client sends nothing more: a read ends only when it
                // closes the connection (or after the read timeout).
                let _ = stream.set_read_timeout(Some(Duration::from_secs(120)));
                let mut byte = [0u8; 1];
                if matches!(stream.read(&mut byte), Ok(0) | Err(_)) {
                    gone();
                }
                return;
            }
            Step::Cut => {
                let _ = stream.shutdown(std::net::Shutdown::Both);
                return;
            }
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n");
}

/// Reads one request: the head, then a `content-length` body.
fn read_request(stream: &mut TcpStream) -> Option<Recorded> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
        if buffer.len() > MAX_REQUEST {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_REQUEST);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Some(Recorded {
        method,
        path,
        headers,
        body,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// A port on 127.0.0.1 nothing listens on (bound, then released).
pub fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    listener.local_addr().expect("a local address").port()
}

/// Runs the built-in adapter `name` (its component, embedded in the `moat`
/// crate) through the shared sandbox, as `moat run NAME` would, and
/// collects every event; `configure` sets the request's options, grants,
/// limits or abort token.
pub async fn run_builtin(
    name: &str,
    prompt: &str,
    configure: impl FnOnce(&mut crate::Request),
) -> Vec<moat_engine::AgentEvent> {
    let registry = crate::registry_of([load_builtin(name).await]);
    let mut request = crate::request(name, prompt);
    configure(&mut request);
    crate::collect(&registry, request).await
}

/// Loads the built-in adapter `name` through the shared sandbox.
pub async fn load_builtin(name: &str) -> moat_sandbox::WasmAdapter {
    let bytes = moat_builtins::component(name)
        .unwrap_or_else(|| panic!("`{name}` is not a built-in adapter"));
    match crate::sandbox()
        .load_bytes(format!("built-in {name}"), bytes.to_vec())
        .await
    {
        Ok(adapter) => adapter,
        Err(error) => panic!("cannot load the built-in {name}: {error}"),
    }
}
