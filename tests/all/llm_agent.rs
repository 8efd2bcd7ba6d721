//! The API adapters as agents (`openai`, `anthropic`): with MCP servers the
//! built-in component runs the tool loop itself. Real components through
//! the real host, against a loopback model server speaking each vendor's
//! tool-calling stream turn by turn, and a real MCP server
//! (tools/mcp-stub) started through the process capability on stdio or
//! reached over the streamable HTTP transport through `wasi:http`.
//!
//! What is checked: the tools offered to the model (and withheld by the
//! policy), the calls made with the model's ids, the results fed back in
//! each vendor's shape, usage summed over the turns, the final answer
//! apart from the narration, a tool the policy denies never called, an
//! abort during a tool call, and `max-turns`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use moat_engine::{AgentEvent, DoneStatus, EventPayload, ResultFold, ToolStatus};
use moat_grants::{Grants, NetRule};
use moat_testkit::llm::tool_uses;
use moat_testkit::llm_server::{LlmServer, Recorded, Reply};
use moat_testkit::llm_turns::{
    anthropic_answer, anthropic_tool_turn, openai_answer, openai_tool_turn,
};
use moat_testkit::{Request, describe, error_codes, single_done};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// One vendor's side of the tests: its adapter, the streams its model
/// sends, and where its requests carry tools and results.
struct Vendor {
    adapter: &'static str,
    model: &'static str,
    api_root: &'static str,
    /// An answer that says `narration` and calls `name` with `input` (id
    /// `id`), reporting `input_tokens`/`output_tokens`.
    tool_turn: fn(id: &str, name: &str, input: &Value, tokens: (u64, u64)) -> Vec<u8>,
    /// A final answer `text`.
    answer_turn: fn(text: &str, tokens: (u64, u64)) -> Vec<u8>,
    /// The names of the tools a request offers.
    offered: fn(body: &Value) -> Vec<String>,
    /// The tool results a request gives back: (call id, text, is_error).
    results: fn(body: &Value) -> Vec<(String, String, bool)>,
}

impl Vendor {
    /// The server's reply that calls `name` with `input` as call `id`.
    fn tool(&self, id: &str, name: &str, input: &Value, tokens: (u64, u64)) -> Reply {
        Reply::sse(&(self.tool_turn)(id, name, input, tokens))
    }

    /// The server's reply that answers `text`.
    fn answer(&self, text: &str, tokens: (u64, u64)) -> Reply {
        Reply::sse(&(self.answer_turn)(text, tokens))
    }
}

const OPENAI: Vendor = Vendor {
    adapter: "openai",
    model: "gpt-4o-mini",
    api_root: "/v1",
    tool_turn: openai_tool_turn,
    answer_turn: openai_answer,
    offered: |body| {
        body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect()
    },
    results: |body| {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                let text = m["content"].as_str().unwrap();
                let error = text.starts_with("Error: ");
                (
                    m["tool_call_id"].as_str().unwrap().to_owned(),
                    text.trim_start_matches("Error: ").to_owned(),
                    error,
                )
            })
            .collect()
    },
};

const ANTHROPIC: Vendor = Vendor {
    adapter: "anthropic",
    model: "claude-sonnet-4-5",
    api_root: "",
    tool_turn: anthropic_tool_turn,
    answer_turn: anthropic_answer,
    offered: |body| {
        body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    },
    results: |body| {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user" && m["content"].is_array())
            .flat_map(|m| m["content"].as_array().unwrap().clone())
            .filter(|block| block["type"] == "tool_result")
            .map(|block| {
                (
                    block["tool_use_id"].as_str().unwrap().to_owned(),
                    block["content"].as_str().unwrap().to_owned(),
                    block["is_error"] == true,
                )
            })
            .collect()
    },
};

/// The MCP stub's requests so far, as logged.
fn stub_log(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The names of the tools the stub was asked to call.
fn calls_made(log: &[Value]) -> Vec<String> {
    log.iter()
        .filter(|m| m["method"] == "tools/call")
        .map(|m| m["params"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// A run of `vendor`'s adapter against `server`, with the stub as the MCP
/// server `stub` on stdio (its requests logged in `dir`), granted the
/// server's address, the stub program and the log.
fn agent_request(vendor: &Vendor, server: &LlmServer, dir: &Path) -> Request {
    let log = dir.join("mcp.jsonl");
    let mut request = moat_testkit::request(vendor.adapter, "Use the echo tool on hi");
    request.options.model = Some(vendor.model.into());
    request.options.extra =
        Some(json!({"base_url": format!("{}{}", server.url(), vendor.api_root)}));
    request.options.mcp_servers = Some(json!({"stub": {
        "command": moat_testkit::mcp_stub(),
        "env": {"MOAT_MCP_STUB_LOG": log},
    }}));
    request.scope.grants = Grants {
        net: vec![NetRule::parse(&server.grant()).unwrap()],
        run: vec![moat_testkit::mcp_stub().display().to_string()],
        env: vec!["MOAT_MCP_STUB_LOG".into()],
        write: vec![dir.to_path_buf()],
        ..Grants::none()
    };
    request
}

async fn run(vendor: &Vendor, request: Request) -> Vec<AgentEvent> {
    let registry =
        moat_testkit::registry_of([moat_testkit::llm_server::load_builtin(vendor.adapter).await]);
    moat_testkit::collect(&registry, request).await
}

fn body(request: &Recorded) -> Value {
    request.json()
}

fn init_tools(events: &[AgentEvent]) -> Vec<String> {
    match &events[0].payload {
        EventPayload::Init(init) => init.tools.clone(),
        other => panic!("the first event is init, not {other:?}"),
    }
}

fn tool_results(events: &[AgentEvent]) -> Vec<(String, ToolStatus, Value)> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolResult(r) => {
                Some((r.tool_use_id.clone(), r.status, r.output.clone()))
            }
            _ => None,
        })
        .collect()
}

async fn the_loop_calls_the_tool_and_feeds_the_result_back(vendor: &Vendor) {
    let dir = tempfile::tempdir().unwrap();
    let server = LlmServer::start_turns(vec![
        vendor.tool(
            "call_7",
            "mcp__stub__echo",
            &json!({"text": "hi"}),
            (50, 10),
        ),
        vendor.answer("The tool said hi.", (70, 5)),
    ]);
    let events = run(vendor, agent_request(vendor, &server, dir.path())).await;
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Success, "{}", describe(&events));
    assert_eq!(
        init_tools(&events),
        ["mcp__stub__echo", "mcp__stub__sleep", "mcp__stub__fail"]
    );
    let calls = tool_uses(&events);
    assert_eq!(calls.len(), 1, "{}", describe(&events));
    assert_eq!(
        (calls[0].tool_name.as_str(), calls[0].tool_use_id.as_str()),
        ("mcp__stub__echo", "call_7")
    );
    assert_eq!(
        tool_results(&events),
        [("call_7".to_owned(), ToolStatus::Success, json!("hi"))]
    );
    assert_eq!(
        calls_made(&stub_log(&dir.path().join("mcp.jsonl"))),
        ["echo"]
    );

    // Two model calls: the second offers the same tools, repeats the
    // model's call and carries the result under the model's id.
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let (first, second) = (body(&requests[0]), body(&requests[1]));
    for sent in [&first, &second] {
        assert_eq!(
            (vendor.offered)(sent),
            ["mcp__stub__echo", "mcp__stub__sleep", "mcp__stub__fail"]
        );
    }
    assert!((vendor.results)(&first).is_empty());
    assert_eq!(
        (vendor.results)(&second),
        [("call_7".to_owned(), "hi".to_owned(), false)]
    );
    let echoed = second["messages"].to_string();
    assert!(
        echoed.contains("call_7") && echoed.contains("Let me check."),
        "{echoed}"
    );

    // Usage over both turns; the answer apart from the narration.
    let tokens = done.usage.tokens.as_ref().expect("tokens reported");
    assert_eq!((tokens.input.total, tokens.output.total), (120, 15));
    assert_eq!(done.usage.tool_uses, 1);
    let mut fold = ResultFold::new();
    for event in &events {
        fold.observe(event, &mut ());
    }
    let result = fold.finish();
    assert_eq!(result.text.as_deref(), Some("The tool said hi."));
    assert_eq!(result.turns, Some(2));
    assert_eq!(result.usage.tool_uses, 1);
    assert!(
        error_codes(&events).is_empty(),
        "{:?}",
        error_codes(&events)
    );
    // After `init` (stamped by the host before the backend named one),
    // every event carries the first answer's id, the second turn's too.
    let sessions: std::collections::BTreeSet<_> =
        events[1..].iter().map(|e| e.session_id.clone()).collect();
    assert_eq!(
        sessions.len(),
        1,
        "one session for the whole run: {sessions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_runs_the_tool_loop_over_stdio_mcp() {
    the_loop_calls_the_tool_and_feeds_the_result_back(&OPENAI).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_runs_the_tool_loop_over_stdio_mcp() {
    the_loop_calls_the_tool_and_feeds_the_result_back(&ANTHROPIC).await;
}

async fn a_denied_tool_is_not_offered_nor_called_and_a_failing_one_is_an_error_result(
    vendor: &Vendor,
) {
    let dir = tempfile::tempdir().unwrap();
    let server = LlmServer::start_turns(vec![
        // The model asks for a tool the policy withholds…
        vendor.tool("call_1", "mcp__stub__sleep", &json!({"ms": 1}), (10, 1)),
        // …then for one that fails…
        vendor.tool(
            "call_2",
            "mcp__stub__fail",
            &json!({"message": "disk on fire"}),
            (10, 1),
        ),
        vendor.answer("Both failed.", (10, 1)),
    ]);
    let mut request = agent_request(vendor, &server, dir.path());
    request.options.disallowed_tools = vec!["mcp__stub__sleep".into()];
    let events = run(vendor, request).await;
    assert_eq!(
        single_done(&events).status,
        DoneStatus::Success,
        "{}",
        describe(&events)
    );
    assert_eq!(init_tools(&events), ["mcp__stub__echo", "mcp__stub__fail"]);
    assert_eq!(
        (vendor.offered)(&body(&server.requests()[0])),
        ["mcp__stub__echo", "mcp__stub__fail"],
        "the withheld tool is never offered"
    );
    // Refused visibly, never called, never a tool_use the engine would
    // have to stop.
    assert_eq!(
        error_codes(&events),
        ["TOOL_DENIED"],
        "{}",
        describe(&events)
    );
    assert!(
        tool_uses(&events)
            .iter()
            .all(|c| c.tool_name != "mcp__stub__sleep")
    );
    assert_eq!(
        calls_made(&stub_log(&dir.path().join("mcp.jsonl"))),
        ["fail"]
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let refused = (vendor.results)(&body(&requests[1]));
    assert_eq!(refused.len(), 1);
    assert_eq!((refused[0].0.as_str(), refused[0].2), ("call_1", true));
    assert!(refused[0].1.contains("not allowed"), "{}", refused[0].1);

    assert_eq!(
        tool_results(&events),
        [(
            "call_2".to_owned(),
            ToolStatus::Error,
            json!("disk on fire")
        )]
    );
    assert!((vendor.results)(&body(&requests[2])).contains(&(
        "call_2".to_owned(),
        "disk on fire".to_owned(),
        true
    )));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_refuses_a_denied_tool_and_reports_a_failing_one() {
    a_denied_tool_is_not_offered_nor_called_and_a_failing_one_is_an_error_result(&OPENAI).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_refuses_a_denied_tool_and_reports_a_failing_one() {
    a_denied_tool_is_not_offered_nor_called_and_a_failing_one_is_an_error_result(&ANTHROPIC).await;
}

async fn an_abort_during_a_tool_call_ends_the_run_at_once(vendor: &Vendor) {
    let dir = tempfile::tempdir().unwrap();
    let server = LlmServer::start_turns(vec![
        vendor.tool("call_1", "mcp__stub__sleep", &json!({"ms": 60000}), (10, 1)),
        vendor.answer("never", (10, 1)),
    ]);
    let registry =
        moat_testkit::registry_of([moat_testkit::llm_server::load_builtin(vendor.adapter).await]);
    let mut request = agent_request(vendor, &server, dir.path());
    let abort = CancellationToken::new();
    request.abort = Some(abort.clone());
    // Far longer than the test allows: the adapter must notice the abort
    // while the tool runs, not the engine cut it off after the drain.
    request.drain = Duration::from_secs(20);
    let log = dir.path().join("mcp.jsonl");
    let mut run = moat_engine::run_agent(&registry, request).unwrap();
    let mut events = Vec::new();
    let mut aborted_at = None;
    let all = async {
        loop {
            let next = tokio::time::timeout(Duration::from_millis(20), run.next()).await;
            match next {
                Ok(Some(event)) => events.push(event),
                Ok(None) => break,
                Err(_) => {}
            }
            // Abort once the stub has the call.
            if aborted_at.is_none() && calls_made(&stub_log(&log)) == ["sleep"] {
                abort.cancel();
                aborted_at = Some(Instant::now());
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), all)
        .await
        .expect("the run ends");
    let took = aborted_at.expect("the tool was called").elapsed();
    let done = single_done(&events);
    assert_eq!(
        done.status,
        DoneStatus::Interrupted,
        "{}",
        describe(&events)
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(server.requests().len(), 1, "no model call after the abort");
    assert!(tool_results(&events).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_stops_during_a_tool_call_when_aborted() {
    an_abort_during_a_tool_call_ends_the_run_at_once(&OPENAI).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_stops_during_a_tool_call_when_aborted() {
    an_abort_during_a_tool_call_ends_the_run_at_once(&ANTHROPIC).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_turns_ends_a_model_that_keeps_calling_tools() {
    for vendor in [&OPENAI, &ANTHROPIC] {
        let dir = tempfile::tempdir().unwrap();
        // Every answer asks for the tool again.
        let server = LlmServer::start(vendor.tool(
            "call_1",
            "mcp__stub__echo",
            &json!({"text": "again"}),
            (10, 2),
        ));
        let mut request = agent_request(vendor, &server, dir.path());
        request.options.max_turns = Some(3);
        let events = run(vendor, request).await;
        let done = single_done(&events);
        assert_eq!(done.status, DoneStatus::MaxTurns, "{}", describe(&events));
        assert_eq!(server.requests().len(), 3, "{}", vendor.adapter);
        // The third answer's call is reported but not made.
        assert_eq!(tool_uses(&events).len(), 3);
        assert_eq!(tool_results(&events).len(), 2);
        assert_eq!(done.usage.tool_uses, 3);
        let tokens = done.usage.tokens.as_ref().unwrap();
        assert_eq!((tokens.input.total, tokens.output.total), (30, 6));
    }
}

/// The stub on the streamable HTTP transport; killed when dropped.
struct HttpStub {
    child: Child,
    url: String,
}

impl HttpStub {
    fn start(log: &Path) -> Self {
        let mut child = Command::new(moat_testkit::mcp_stub())
            .arg("--http")
            .env("MOAT_MCP_STUB_LOG", log)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        Self {
            child,
            url: line.trim().to_owned(),
        }
    }

    fn grant(&self) -> String {
        let authority = self.url.trim_start_matches("http://");
        authority.split('/').next().unwrap().to_owned()
    }
}

impl Drop for HttpStub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_mcp_server_is_reached_through_wasi_http_under_the_runs_grants() {
    let dir = tempfile::tempdir().unwrap();
    let log: PathBuf = dir.path().join("http-mcp.jsonl");
    let stub = HttpStub::start(&log);
    let vendor = &OPENAI;
    let turns = || {
        LlmServer::start_turns(vec![
            vendor.tool(
                "call_9",
                "mcp__web__echo",
                &json!({"text": "over http"}),
                (5, 1),
            ),
            vendor.answer("Done.", (5, 1)),
        ])
    };
    let http_request = |server: &LlmServer, granted: bool| {
        let mut request = agent_request(vendor, server, dir.path());
        request.options.mcp_servers = Some(json!({"web": {"url": stub.url}}));
        if granted {
            request
                .scope
                .grants
                .net
                .push(NetRule::parse(&stub.grant()).unwrap());
        }
        request
    };

    let server = turns();
    let events = run(vendor, http_request(&server, true)).await;
    assert_eq!(
        single_done(&events).status,
        DoneStatus::Success,
        "{}",
        describe(&events)
    );
    assert_eq!(
        tool_results(&events),
        [("call_9".to_owned(), ToolStatus::Success, json!("over http"))]
    );
    let sent = stub_log(&log);
    let methods: Vec<&str> = sent.iter().filter_map(|m| m["method"].as_str()).collect();
    // Every request after initialize carried the session (the stub refuses
    // one that does not), and the session was ended.
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
            "DELETE"
        ]
    );

    // Not granted: the run is refused before the model is asked anything,
    // and the host says which grant was missing.
    let server = turns();
    let events = run(vendor, http_request(&server, false)).await;
    assert_eq!(
        single_done(&events).status,
        DoneStatus::Error,
        "{}",
        describe(&events)
    );
    let codes = error_codes(&events);
    assert!(codes.contains(&"CAPABILITY_DENIED".to_owned()), "{codes:?}");
    assert!(codes.contains(&"MCP_ERROR".to_owned()), "{codes:?}");
    assert!(server.requests().is_empty());
}
