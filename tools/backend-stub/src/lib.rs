//! A loopback stand-in for the model APIs the agent CLIs call, so the real
//! CLIs can run offline in tests and when recording fixtures.
//!
//! One server answers all three wire formats, framed as the vendors frame
//! them (server-sent events over a chunked body):
//!
//! - Anthropic Messages, `POST /v1/messages` (Claude Code adds `?beta=true`),
//!   and `POST /v1/messages/count_tokens`;
//! - OpenAI Responses, `POST /v1/responses` (Codex), and `GET /v1/models`;
//! - Gemini, `POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`,
//!   `:generateContent` and `:countTokens` (Gemini CLI).
//!
//! What it answers is a [`Scenario`], the same for every request it gets:
//! a text reply, a shell tool call then a reply, thinking, a tool call a
//! CLI denies, an HTTP 400, or a stream cut mid-way. Requests are recorded
//! so a test can check the CLI talked to the stub (and only to it).
//!
//! ```no_run
//! use moat_backend_stub::{Scenario, StubConfig, StubServer};
//!
//! let server = StubServer::start("127.0.0.1:0", StubConfig::new(Scenario::Text))?;
//! // ANTHROPIC_BASE_URL=<server.base_url()> claude -p hi …
//! println!("{}", server.base_url());
//! # Ok::<(), std::io::Error>(())
//! ```

pub mod anthropic;
pub mod gemini;
pub mod http;
pub mod openai;
pub mod scenario;
pub mod sse;

use std::io::{self, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::{Value, json};

pub use scenario::{ALL as ALL_SCENARIOS, Scenario};

/// How many requests the log keeps (the most recent ones).
const MAX_LOGGED: usize = 512;

/// How the stub behaves.
#[derive(Debug, Clone)]
pub struct StubConfig {
    /// What every model call gets.
    pub scenario: Scenario,
    /// The pause after each streamed event, so a recording has realistic
    /// timing.
    pub event_delay: Duration,
    /// The shell command of a tool call, instead of the scenario's own.
    pub tool_command: Option<String>,
}

impl StubConfig {
    /// `scenario`, with a 15 ms pause between streamed events.
    pub fn new(scenario: Scenario) -> Self {
        StubConfig {
            scenario,
            event_delay: Duration::from_millis(15),
            tool_command: None,
        }
    }

    /// Makes the tool calls run `command` (e.g. to see what a CLI's shell
    /// tool finds).
    pub fn with_tool_command(mut self, command: &str) -> Self {
        self.tool_command = Some(command.to_owned());
        self
    }

    /// What to answer to a model call: the scenario's plan
    /// ([`Scenario::plan`]) with the tool command set here.
    pub fn plan(&self, after_tool_result: bool) -> scenario::Plan {
        let plan = self.scenario.plan(after_tool_result);
        let Some(command) = &self.tool_command else {
            return plan;
        };
        match plan {
            scenario::Plan::Reply(blocks) => scenario::Plan::Reply(
                blocks
                    .into_iter()
                    .map(|block| match block {
                        scenario::Block::Shell(_) => scenario::Block::Shell(command.clone()),
                        other => other,
                    })
                    .collect(),
            ),
            other => other,
        }
    }

    /// Sets the pause between streamed events.
    pub fn with_event_delay(mut self, delay: Duration) -> Self {
        self.event_delay = delay;
        self
    }
}

impl From<Scenario> for StubConfig {
    fn from(scenario: Scenario) -> Self {
        Self::new(scenario)
    }
}

/// A request the stub received, as recorded in its log.
#[derive(Debug, Clone)]
pub struct LoggedRequest {
    /// `GET`, `POST`, …
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Which API answered it: `anthropic`, `openai`, `gemini`, or
    /// `unknown` (answered 404).
    pub api: &'static str,
    /// The body's `model` field (Gemini: the model in the path), if any.
    pub model: Option<String>,
    /// Whether the request asked for a stream.
    pub stream: bool,
    /// The names of the tools the request offered the model (a CLI's
    /// permission switches show here).
    pub tools: Vec<String>,
    /// The API key it carried: `x-api-key`, `x-goog-api-key`, or the
    /// bearer token of `Authorization` (what a test checks moat added).
    pub api_key: Option<String>,
}

impl LoggedRequest {
    /// The entry as a JSON object (for the binary's `--log` file).
    pub fn to_json(&self) -> Value {
        json!({"method": self.method, "target": self.target, "api": self.api,
            "model": self.model, "stream": self.stream, "tools": self.tools})
    }
}

/// Called with every request as it arrives.
pub type RequestHook = Box<dyn Fn(&LoggedRequest) + Send + Sync>;

/// Unique ids for messages, tool calls and responses.
pub struct Ids {
    counter: AtomicU64,
}

impl Ids {
    fn new() -> Self {
        Ids {
            counter: AtomicU64::new(1),
        }
    }

    /// The next id with `prefix`, e.g. `toolu_stub_07`.
    pub fn next(&self, prefix: &str) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        format!("{prefix}_{n:02}")
    }
}

/// What the connection threads share.
struct Shared {
    config: StubConfig,
    ids: Ids,
    log: Mutex<Vec<LoggedRequest>>,
    on_request: Option<RequestHook>,
}

/// A running stub server; stops accepting when dropped.
pub struct StubServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl StubServer {
    /// Listens on `addr` (use port 0 for any free port) and serves in
    /// background threads.
    pub fn start(addr: impl ToSocketAddrs, config: StubConfig) -> io::Result<Self> {
        Self::start_with_hook(addr, config, None)
    }

    /// Like [`start`](Self::start), calling `on_request` for every request
    /// as it arrives (the binary logs them to a file this way).
    pub fn start_with_hook(
        addr: impl ToSocketAddrs,
        config: StubConfig,
        on_request: Option<RequestHook>,
    ) -> io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            config,
            ids: Ids::new(),
            log: Mutex::new(Vec::new()),
            on_request,
        });
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let shared = shared.clone();
            let stop = stop.clone();
            thread::Builder::new()
                .name("backend-stub-accept".into())
                .spawn(move || {
                    for connection in listener.incoming() {
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                        let Ok(connection) = connection else { continue };
                        let shared = shared.clone();
                        // A connection thread that fails just ends: the
                        // client sees the connection close.
                        let _ = thread::Builder::new()
                            .name("backend-stub-conn".into())
                            .spawn(move || serve(connection, &shared));
                    }
                })?
        };
        Ok(StubServer {
            addr,
            shared,
            stop,
            accept: Some(accept),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, the base URL to give a CLI.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests received so far (the most recent 512).
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared
            .log
            .lock()
            .map(|log| log.clone())
            .unwrap_or_default()
    }
}

impl Drop for StubServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Serves the requests of one connection (keep-alive) until it closes.
fn serve(connection: TcpStream, shared: &Shared) {
    // A stuck client must not pin a thread forever.
    let _ = connection.set_read_timeout(Some(Duration::from_secs(120)));
    let Ok(mut writer) = connection.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(connection);
    while let Ok(Some(request)) = http::read_request(&mut reader) {
        let keep_going = answer(&request, &mut writer, shared).is_ok();
        let close = request
            .header("connection")
            .is_some_and(|value| value.eq_ignore_ascii_case("close"));
        // A cut stream leaves the connection unusable.
        if !keep_going || close || matches!(shared.config.scenario, Scenario::MidTurnFailure) {
            return;
        }
    }
}

/// The names of the tools a model call offers, in any of the three
/// formats (Anthropic and OpenAI `tools[].name`, OpenAI built-ins by
/// `type`, Gemini `tools[].functionDeclarations[].name`).
fn tool_names(body: &Value) -> Vec<String> {
    let Some(tools) = body["tools"].as_array() else {
        return Vec::new();
    };
    tools
        .iter()
        .flat_map(|tool| match tool["functionDeclarations"].as_array() {
            Some(declarations) => declarations
                .iter()
                .filter_map(|declaration| declaration["name"].as_str())
                .collect::<Vec<_>>(),
            None => tool["name"]
                .as_str()
                .or_else(|| tool["type"].as_str())
                .into_iter()
                .collect(),
        })
        .map(str::to_owned)
        .collect()
}

/// Routes one request to its API and records it.
fn answer(request: &http::Request, stream: &mut TcpStream, shared: &Shared) -> io::Result<()> {
    let body = request.json();
    let path = request.path();
    let api = if path.starts_with("/v1/messages") {
        "anthropic"
    } else if path.starts_with("/v1/responses") || path == "/v1/models" {
        "openai"
    } else if path.starts_with("/v1beta/models/") {
        "gemini"
    } else {
        "unknown"
    };
    let model = body["model"].as_str().map(str::to_owned).or_else(|| {
        (api == "gemini")
            .then(|| {
                path.rsplit('/')
                    .next()?
                    .split(':')
                    .next()
                    .map(str::to_owned)
            })
            .flatten()
    });
    let logged = LoggedRequest {
        method: request.method.clone(),
        target: request.target.clone(),
        api,
        model,
        stream: body["stream"] == true || path.ends_with(":streamGenerateContent"),
        tools: tool_names(&body),
        api_key: request
            .header("x-api-key")
            .or_else(|| request.header("x-goog-api-key"))
            .or_else(|| {
                request
                    .header("authorization")
                    .and_then(|value| value.strip_prefix("Bearer "))
            })
            .map(str::to_owned),
    };
    if let Some(hook) = &shared.on_request {
        hook(&logged);
    }
    if let Ok(mut log) = shared.log.lock() {
        if log.len() >= MAX_LOGGED {
            log.remove(0);
        }
        log.push(logged);
    }
    let (config, ids) = (&shared.config, &shared.ids);
    match (request.method.as_str(), path) {
        // Claude Code probes the base URL with `HEAD /` before its first call.
        ("HEAD", _) => http::write_head_ok(stream),
        ("POST", "/v1/messages") => anthropic::handle(request, stream, config, ids),
        ("POST", "/v1/messages/count_tokens") => anthropic::count_tokens(stream),
        ("POST", "/v1/responses") => openai::handle(request, stream, config, ids),
        ("GET", "/v1/models") => openai::models(stream),
        ("POST", path) if path.starts_with("/v1beta/models/") && path.ends_with(":countTokens") => {
            gemini::count_tokens(stream)
        }
        ("POST", path)
            if path.starts_with("/v1beta/models/") && path.contains("enerateContent") =>
        {
            gemini::handle(request, stream, config, ids)
        }
        _ => http::write_json(
            stream,
            404,
            &[],
            &json!({"error": {"message": format!("moat backend stub: no route for {} {}", request.method, request.target)}}),
        ),
    }
}

#[cfg(test)]
mod tests;
