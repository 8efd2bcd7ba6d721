//! What the tests of the built-in LLM adapters (`openai`, `anthropic`)
//! share: running one against an [`LlmServer`], reading its events, and
//! the checks that are the same for every vendor (an abort mid-stream, a
//! server that stalls).

use crate::Request;
use std::time::{Duration, Instant};

use moat_engine::{AgentEvent, DoneStatus, EventPayload, ToolUsePayload};
use moat_grants::{Grants, NetRule};
use serde_json::{Value, json};

use crate::llm_server::{LlmServer, Reply, Step, closed_port, load_builtin, run_builtin};
use crate::{error_codes, single_done};

/// A built-in LLM adapter as the tests run it.
#[derive(Debug, Clone, Copy)]
pub struct LlmAdapter {
    /// Its name (`openai`).
    pub name: &'static str,
    /// The model every run asks for.
    pub model: &'static str,
    /// What follows the server's address in the base URL (`/v1` for
    /// OpenAI, whose base URL is the API root; empty for Anthropic).
    pub api_root: &'static str,
    /// The path the request goes to on the server.
    pub path: &'static str,
    /// The variable holding the API key.
    pub key_var: &'static str,
    /// The header carrying the key.
    pub key_header: &'static str,
}

impl LlmAdapter {
    /// The base URL of a server at `url` (`http://127.0.0.1:PORT`).
    pub fn base_url(&self, url: &str) -> String {
        format!("{url}{}", self.api_root)
    }

    /// Runs the adapter with "Say hello" against the server at `url`
    /// (granted `grants`); `configure` may change the request.
    pub async fn run_at(
        &self,
        url: &str,
        grants: Grants,
        configure: impl FnOnce(&mut Request),
    ) -> Vec<AgentEvent> {
        run_builtin(self.name, "Say hello", |request| {
            self.prepare(request, url, grants);
            configure(request);
        })
        .await
    }

    /// Runs the adapter against `server`, its address granted.
    pub async fn run_on(
        &self,
        server: &LlmServer,
        configure: impl FnOnce(&mut Request),
    ) -> Vec<AgentEvent> {
        self.run_at(&server.url(), grant(&[server.grant()]), configure)
            .await
    }

    /// Aborts a run at its first text delta while `server` stalls after
    /// the first half of `fixture`: the run must end with `done`
    /// interrupted at once, and drop the request.
    pub async fn check_abort_mid_stream(&self, fixture: &[u8]) {
        let server = LlmServer::start(Reply::sse(&fixture[..fixture.len() / 2]).then_stall());
        let registry = crate::registry_of([load_builtin(self.name).await]);
        let mut request = crate::request(self.name, "Say hello");
        self.prepare(&mut request, &server.url(), grant(&[server.grant()]));
        // A drain far longer than the test allows: the adapter itself must
        // notice the abort while it waits on the stalled body, not the
        // engine cut it off at the end of the drain.
        request.drain = Duration::from_secs(20);
        let (events, took) = crate::run_aborting_at_first_delta(&registry, request).await;
        assert_eq!(single_done(&events).status, DoneStatus::Interrupted);
        assert!(
            error_codes(&events).is_empty(),
            "{:?}",
            error_codes(&events)
        );
        // The SDK looks at the abort flag every 20 ms while it waits; the
        // margin is for a loaded machine.
        assert!(took < Duration::from_secs(3), "took {took:?}");
        assert!(
            server.wait_client_gone(Duration::from_secs(10)),
            "the request was dropped: the server saw the connection close"
        );
    }

    /// Runs against a server that never sends a byte of its answer: the
    /// run's timeout must end it, with `done` error and no usage, and the
    /// request must be dropped.
    pub async fn check_stall_ends_by_timeout(&self) {
        let server = LlmServer::start(Reply::stream(vec![Step::Stall]));
        let started = Instant::now();
        let events = self
            .run_on(&server, |request| {
                request.limits.timeout = Some(Duration::from_millis(800));
            })
            .await;
        assert!(
            error_codes(&events).contains(&"TIMEOUT".to_string()),
            "{:?}",
            error_codes(&events)
        );
        assert_eq!(single_done(&events).status, DoneStatus::Error);
        assert_eq!(single_done(&events).usage.tokens, None);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert!(server.wait_client_gone(Duration::from_secs(10)));
    }

    /// Runs with a system prompt against a server answering `fixture` and
    /// checks what every vendor's request has: a POST of JSON to the
    /// vendor's path accepting a stream, the model, `stream`, and no key
    /// (the variable is not granted). The body, for the vendor's checks.
    pub async fn check_request(&self, fixture: &[u8]) -> Value {
        let server = LlmServer::start(Reply::sse(fixture));
        self.run_on(&server, |request| {
            request.options.system_prompt = Some("You are terse.".into());
        })
        .await;
        let request = server.single_request();
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, self.path);
        assert_eq!(request.header("content-type"), Some("application/json"));
        assert_eq!(request.header("accept"), Some("text/event-stream"));
        assert_eq!(
            request.header(self.key_header),
            None,
            "{} is not granted to this run, so no key is sent",
            self.key_var
        );
        let body = request.json();
        assert_eq!(body["model"], self.model);
        assert_eq!(body["stream"], true);
        assert!(body.get("base_url").is_none(), "the adapter's, not sent");
        body
    }

    /// A server answering HTTP `status` (401 or 403) with `body`: an
    /// `AUTH_FAILED` error naming the key variable and quoting the server's
    /// `quoted` message, not recoverable.
    pub async fn check_auth_failure(&self, status: u16, body: &str, quoted: &str) {
        let events = self.run_on_error(status, body).await;
        let (message, recoverable) = error(&events, "AUTH_FAILED");
        assert!(message.contains(self.key_var), "{message}");
        assert!(message.contains(quoted), "{message}");
        assert!(!recoverable);
        assert_eq!(single_done(&events).status, DoneStatus::Error);
        assert_eq!(metadata(&events)["httpStatus"], status);
    }

    /// A server answering HTTP 404 with `body`, which names `missing`: a
    /// `MODEL_NOT_FOUND` error naming the run's model and quoting the
    /// server, not recoverable.
    pub async fn check_model_not_found(&self, body: &str, missing: &str) {
        let events = self.run_on_error(404, body).await;
        let (message, recoverable) = error(&events, "MODEL_NOT_FOUND");
        assert!(
            message.contains(self.model) && message.contains(missing),
            "{message}"
        );
        assert!(!recoverable);
        assert_eq!(single_done(&events).status, DoneStatus::Error);
    }

    /// A port nothing listens on: `CONNECTION_FAILED`, saying the
    /// connection was refused, recoverable; no usage.
    pub async fn check_connection_refused(&self) {
        let port = closed_port();
        let url = format!("http://127.0.0.1:{port}");
        let events = self
            .run_at(&url, grant(&[format!("127.0.0.1:{port}")]), |_| {})
            .await;
        let (message, recoverable) = error(&events, "CONNECTION_FAILED");
        assert!(message.contains("refused"), "{message}");
        assert!(recoverable);
        assert_eq!(single_done(&events).status, DoneStatus::Error);
        assert_eq!(single_done(&events).usage.tokens, None);
    }

    /// A host name that does not resolve: `CONNECTION_FAILED`, saying so,
    /// not recoverable (it will not resolve on a retry either).
    pub async fn check_unresolvable_host(&self) {
        // `.invalid` never resolves (RFC 2606); granted, so the host looks
        // it up.
        let url = "http://llm.moat-test.invalid:8080";
        let grants = grant(&["llm.moat-test.invalid:8080".into()]);
        let events = self.run_at(url, grants, |_| {}).await;
        let (message, recoverable) = error(&events, "CONNECTION_FAILED");
        assert!(message.contains("resolve"), "{message}");
        assert!(!recoverable);
        assert_eq!(single_done(&events).status, DoneStatus::Error);
    }

    /// A server the run may not reach: the adapter's `HOST_NOT_GRANTED`
    /// names the `--allow-net` flag, the host's `CAPABILITY_DENIED` the
    /// grant (in the library's words), and nothing reaches the server.
    pub async fn check_host_not_granted(&self) {
        let server = LlmServer::start(Reply::error(500, "{}"));
        let events = self.run_at(&server.url(), Grants::none(), |_| {}).await;
        let flag = format!("--allow-net={}", server.grant());
        let (message, recoverable) = error(&events, "HOST_NOT_GRANTED");
        assert!(message.contains(&flag), "{message}");
        assert!(!recoverable);
        let (host_message, _) = error(&events, "CAPABILITY_DENIED");
        let grant = format!("to allow it, grant net access to {}", server.grant());
        assert!(host_message.contains(&grant), "{host_message}");
        assert_eq!(single_done(&events).status, DoneStatus::Error);
        assert!(server.requests().is_empty(), "nothing reached the server");
    }

    /// A server that cuts the connection after `partial`, an answer's
    /// beginning: the first deltas come through, then `STREAM_CUT` and
    /// `done` error with no usage (unknown, never zero).
    pub async fn check_cut_mid_stream(&self, partial: &[u8]) {
        let server = LlmServer::start(Reply::sse(partial).then_cut());
        let events = self.run_on(&server, |_| {}).await;
        assert!(!deltas(&events).is_empty(), "the first deltas came through");
        let codes = error_codes(&events);
        assert!(codes.contains(&"STREAM_CUT".to_string()), "{codes:?}");
        let done = single_done(&events);
        assert_eq!(done.status, DoneStatus::Error);
        assert_eq!(done.usage.tokens, None, "never zero");
    }

    /// A stream `body` with a malformed event quoted as `quoted`: a
    /// recoverable `MALFORMED_EVENT`, and the run goes on to succeed. The
    /// events, for the vendor's checks.
    pub async fn check_malformed_event(&self, body: &[u8], quoted: &str) -> Vec<AgentEvent> {
        let server = LlmServer::start(Reply::sse(body));
        let events = self.run_on(&server, |_| {}).await;
        let (message, recoverable) = error(&events, "MALFORMED_EVENT");
        assert!(message.contains(quoted), "{message}");
        assert!(recoverable);
        assert_eq!(single_done(&events).status, DoneStatus::Success);
        events
    }

    /// Runs against a server answering every request with HTTP `status`
    /// and the JSON `body`.
    pub async fn run_on_error(&self, status: u16, body: &str) -> Vec<AgentEvent> {
        let server = LlmServer::start(Reply::error(status, body));
        self.run_on(&server, |_| {}).await
    }

    /// The request of a run against the server at `url`.
    fn prepare(&self, request: &mut Request, url: &str, grants: Grants) {
        request.options.model = Some(self.model.into());
        request.options.extra = Some(json!({"base_url": self.base_url(url)}));
        request.scope.grants = grants;
    }
}

/// Grants of the network `rules` (`host:port`), and nothing else.
pub fn grant(rules: &[String]) -> Grants {
    Grants {
        net: rules.iter().map(|r| NetRule::parse(r).unwrap()).collect(),
        ..Grants::none()
    }
}

/// The tool calls of the run, in order.
pub fn tool_uses(events: &[AgentEvent]) -> Vec<&ToolUsePayload> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolUse(call) => Some(&**call),
            _ => None,
        })
        .collect()
}

/// The text of every text delta, joined.
pub fn deltas(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::TextDelta(d) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect()
}

/// The first error with `code`: its message and recoverability.
pub fn error(events: &[AgentEvent], code: &str) -> (String, bool) {
    events
        .iter()
        .filter_map(AgentEvent::as_error)
        .find(|e| e.code.as_deref() == Some(code))
        .map(|e| (e.message.clone(), e.recoverable))
        .unwrap_or_else(|| panic!("no {code} error in {:?}", error_codes(events)))
}

/// The `done` event's metadata (an empty object when there is none).
pub fn metadata(events: &[AgentEvent]) -> Value {
    Value::Object(single_done(events).metadata.clone().unwrap_or_default())
}
