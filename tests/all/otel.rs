//! OpenTelemetry export through the real binary: a collector started here
//! (OTLP/HTTP, decoding the official protobufs) receives the spans of a
//! fanout's tree as one trace, a tool loop's tool and model calls under its
//! run, and a cluster worker's run in its submitter's trace.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use moat_engine::{AgentEvent, DoneStatus, EventPayload};
use moat_testkit::llm_server::{LlmServer, Reply};
use moat_testkit::llm_turns::{openai_answer, openai_tool_turn};
use moat_testkit::nats;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::{Span, status::StatusCode};
use prost::Message;
use serde_json::json;

use crate::cli::common::{events, moat};
use crate::cluster::Worker;

/// A span as received, with its service's name.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    span: Span,
}

/// An OTLP/HTTP receiver on 127.0.0.1, keeping every span it is sent.
struct Collector {
    address: SocketAddr,
    spans: Arc<Mutex<Vec<Received>>>,
    _runtime: tokio::runtime::Runtime,
}

impl Collector {
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let address = listener.local_addr().unwrap();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = spans.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let kept = kept.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let kept = kept.clone();
                        async move { Ok::<_, hyper::Error>(receive(request, &kept).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            address,
            spans,
            _runtime: runtime,
        }
    }

    /// The base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it.
    fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The spans received once `enough` says so, waiting at most 20 s.
    fn wait_for(&self, enough: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let spans = self.spans.lock().unwrap().clone();
            if enough(&spans) || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Decodes one export request (`POST /v1/traces`, protobuf).
async fn receive(request: Request<Incoming>, kept: &Mutex<Vec<Received>>) -> Response<Full<Bytes>> {
    let answer = |status: u16, body: Vec<u8>| {
        Response::builder()
            .status(status)
            .header("content-type", "application/x-protobuf")
            .body(Full::new(Bytes::from(body)))
            .unwrap()
    };
    if request.uri().path() != "/v1/traces"
        || request.headers().get("content-type").map(|v| v.as_bytes())
            != Some(b"application/x-protobuf")
    {
        return answer(404, Vec::new());
    }
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let Ok(export) = ExportTraceServiceRequest::decode(body) else {
        return answer(400, Vec::new());
    };
    let mut spans = kept.lock().unwrap();
    for resource in export.resource_spans {
        let service = resource
            .resource
            .as_ref()
            .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
            .and_then(|a| a.value.as_ref()?.value.as_ref())
            .map(|v| match v {
                AnyValue::StringValue(s) => s.clone(),
                other => format!("{other:?}"),
            })
            .unwrap_or_default();
        for scope in resource.scope_spans {
            for span in scope.spans {
                spans.push(Received {
                    service: service.clone(),
                    span,
                });
            }
        }
    }
    answer(200, ExportTraceServiceResponse::default().encode_to_vec())
}

/// A span's attribute.
fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a AnyValue> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.as_ref())
}

fn text<'a>(span: &'a Span, key: &str) -> &'a str {
    match attr(span, key) {
        Some(AnyValue::StringValue(s)) => s,
        other => panic!("{} has {key} = {other:?}", span.name),
    }
}

fn int(span: &Span, key: &str) -> i64 {
    match attr(span, key) {
        Some(AnyValue::IntValue(n)) => *n,
        other => panic!("{} has {key} = {other:?}", span.name),
    }
}

fn named<'a>(spans: &'a [Received], name: &str) -> Vec<&'a Span> {
    spans
        .iter()
        .filter(|r| r.span.name == name)
        .map(|r| &r.span)
        .collect()
}

fn status(span: &Span) -> i32 {
    span.status.as_ref().map_or(0, |s| s.code)
}

/// `moat` with its store in `dir`, exporting to `collector`.
fn moat_exporting(dir: &Path, collector: &Collector) -> Command {
    let mut command = moat();
    command
        .env("MOAT_STORE", dir.join("moat.db"))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("OTEL_SERVICE_NAME");
    command
}

#[test]
fn a_fanout_and_its_two_children_are_one_trace() {
    let collector = Collector::start();
    let dir = tempfile::tempdir().unwrap();
    let agents = json!({"agents": [
        {"adapter": "echo", "prompt": "first child"},
        {"adapter": "echo", "prompt": "second child"},
    ]});
    let output = moat_exporting(dir.path(), &collector)
        .args(["run", "fanout", "hello", "--output", "ndjson"])
        .args(["--extra", &agents.to_string()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let done = events(&output)
        .last()
        .and_then(AgentEvent::as_done)
        .cloned();
    assert_eq!(done.map(|d| d.status), Some(DoneStatus::Success));
    // Exported before the process ended: no waiting needed, but the
    // collector's thread may still be decoding.
    let spans = collector.wait_for(|spans| {
        named(spans, "invoke_agent fanout").len() == 1
            && named(spans, "invoke_agent echo").len() == 2
    });
    let parents = named(&spans, "invoke_agent fanout");
    assert_eq!(parents.len(), 1, "{spans:#?}");
    let parent = parents[0];
    assert!(
        parent.parent_span_id.is_empty(),
        "the fanout's span is the root"
    );
    assert_eq!(text(parent, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(text(parent, "gen_ai.agent.name"), "fanout");
    assert_eq!(text(parent, "moat.done.status"), "success");
    assert_eq!(status(parent), StatusCode::Ok as i32);
    let parent_run = text(parent, "moat.run.id");
    let children = named(&spans, "invoke_agent echo");
    assert_eq!(children.len(), 2, "{spans:#?}");
    let mut runs = HashSet::new();
    for child in &children {
        assert_eq!(child.trace_id, parent.trace_id, "one trace");
        assert_eq!(
            child.parent_span_id, parent.span_id,
            "the fanout's children"
        );
        assert_eq!(text(child, "gen_ai.operation.name"), "invoke_agent");
        assert_eq!(text(child, "gen_ai.agent.name"), "echo");
        assert_eq!(text(child, "moat.run.parent_id"), parent_run);
        assert_eq!(status(child), StatusCode::Ok as i32);
        assert!(child.start_time_unix_nano >= parent.start_time_unix_nano);
        assert!(child.end_time_unix_nano <= parent.end_time_unix_nano);
        runs.insert(text(child, "moat.run.id").to_owned());
    }
    assert_eq!(runs.len(), 2, "two runs");
    assert!(spans.iter().all(|r| r.service == "moat"));
    // The runs the spans name are the runs recorded.
    let ps = moat()
        .env("MOAT_STORE", dir.path().join("moat.db"))
        .args(["show", parent_run])
        .output()
        .unwrap();
    assert!(
        ps.status.success(),
        "{}",
        String::from_utf8_lossy(&ps.stderr)
    );
}

/// A stand-in answering twice with a tool call (1,000 input and 100 output
/// tokens each), then with an answer.
fn tool_turns() -> LlmServer {
    let mut replies: Vec<Reply> = (0..2)
        .map(|n| {
            Reply::sse(&openai_tool_turn(
                &format!("call_{n}"),
                "mcp__stub__echo",
                &json!({"text": "again"}),
                (1000, 100),
            ))
        })
        .collect();
    replies.push(Reply::sse(&openai_answer("done at last", (1000, 100))));
    LlmServer::start_turns(replies)
}

#[test]
fn a_tool_loop_has_its_tool_calls_and_model_calls_under_its_run() {
    let collector = Collector::start();
    let dir = tempfile::tempdir().unwrap();
    let server = tool_turns();
    let stub = moat_testkit::mcp_stub().display().to_string();
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"stub": {"command": stub}}}).to_string(),
    )
    .unwrap();
    let output = moat_exporting(dir.path(), &collector)
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url()))
        .args([
            "run", "openai", "Loop", "--model", "llama3.2", "--output", "ndjson",
        ])
        .arg(format!("--allow-net={}", server.grant()))
        .args([
            "--mcp-config",
            &config.display().to_string(),
            "--allow-run",
            &stub,
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events = events(&output);
    let tool_ids: HashSet<String> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolUse(tool) => Some(tool.tool_use_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(tool_ids.len(), 2, "two tool calls");
    let done = events.last().and_then(AgentEvent::as_done).expect("done");
    let tokens = done.usage.tokens.expect("tokens");
    let spans = collector.wait_for(|spans| {
        named(spans, "invoke_agent openai").len() == 1
            && named(spans, "execute_tool mcp__stub__echo").len() == 2
            && named(spans, "chat llama3.2").len() == 3
    });
    let runs = named(&spans, "invoke_agent openai");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    let run = runs[0];
    assert_eq!(text(run, "gen_ai.request.model"), "llama3.2");
    assert_eq!(text(run, "gen_ai.agent.name"), "openai");
    assert_eq!(
        int(run, "gen_ai.usage.input_tokens"),
        i64::try_from(tokens.input.total).unwrap()
    );
    assert_eq!(
        int(run, "gen_ai.usage.output_tokens"),
        i64::try_from(tokens.output.total).unwrap()
    );
    assert_eq!(int(run, "moat.usage.tool_uses"), 2);
    // Each request the run made through moat is an event of its span: its
    // method, path and status, never a body or a header's value.
    let traffic: Vec<_> = run
        .events
        .iter()
        .filter(|event| event.name == "moat.traffic")
        .collect();
    assert_eq!(traffic.len(), 3, "one per request: {:#?}", run.events);
    for event in &traffic {
        let value = |key: &str| {
            event
                .attributes
                .iter()
                .find(|a| a.key == key)
                .and_then(|a| a.value.as_ref()?.value.clone())
        };
        assert_eq!(
            value("moat.traffic.path"),
            Some(AnyValue::StringValue("/v1/chat/completions".into()))
        );
        assert_eq!(value("moat.traffic.status"), Some(AnyValue::IntValue(200)));
        assert_eq!(
            value("moat.traffic.who"),
            Some(AnyValue::StringValue("component".into()))
        );
    }
    let tools = named(&spans, "execute_tool mcp__stub__echo");
    assert_eq!(tools.len(), 2, "{spans:#?}");
    let mut seen = HashSet::new();
    for tool in &tools {
        assert_eq!(tool.trace_id, run.trace_id);
        assert_eq!(tool.parent_span_id, run.span_id);
        assert_eq!(text(tool, "gen_ai.operation.name"), "execute_tool");
        assert_eq!(text(tool, "gen_ai.tool.name"), "mcp__stub__echo");
        assert_eq!(text(tool, "moat.tool.status"), "success");
        assert_eq!(status(tool), StatusCode::Ok as i32);
        assert!(tool.end_time_unix_nano >= tool.start_time_unix_nano);
        seen.insert(text(tool, "gen_ai.tool.call.id").to_owned());
    }
    assert_eq!(seen, tool_ids, "one span per tool call, by its id");
    let chats = named(&spans, "chat llama3.2");
    assert_eq!(chats.len(), 3, "one per model call: {spans:#?}");
    let (mut input, mut output) = (0, 0);
    for chat in &chats {
        assert_eq!(chat.parent_span_id, run.span_id);
        assert_eq!(text(chat, "gen_ai.operation.name"), "chat");
        input += int(chat, "gen_ai.usage.input_tokens");
        output += int(chat, "gen_ai.usage.output_tokens");
    }
    assert_eq!((input, output), (3000, 300), "the calls' usage, as served");
    // Each model call spans its own time, in turn; the tool calls it asked
    // for began while it streamed.
    let mut chats = chats;
    chats.sort_by_key(|chat| chat.start_time_unix_nano);
    assert!(chats[0].start_time_unix_nano >= run.start_time_unix_nano);
    for pair in chats.windows(2) {
        assert!(pair[0].end_time_unix_nano <= pair[1].start_time_unix_nano);
    }
    let first_tool = tools
        .iter()
        .map(|tool| tool.start_time_unix_nano)
        .min()
        .unwrap();
    assert!(
        (chats[0].start_time_unix_nano..=chats[0].end_time_unix_nano).contains(&first_tool),
        "the first tool call began during the first model call"
    );
}

#[test]
fn a_failed_run_is_an_error_span_with_its_error_as_an_event() {
    let collector = Collector::start();
    let dir = tempfile::tempdir().unwrap();
    // No answer at all: the backend is unreachable.
    let output = moat_exporting(dir.path(), &collector)
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .args(["run", "openai", "hi", "--model", "m", "--output", "ndjson"])
        .arg("--allow-net=127.0.0.1:9")
        .output()
        .unwrap();
    let events = events(&output);
    let message = events
        .iter()
        .filter_map(AgentEvent::as_error)
        .map(|e| e.message.clone())
        .next_back()
        .expect("an error");
    let spans = collector.wait_for(|spans| !named(spans, "invoke_agent openai").is_empty());
    let runs = named(&spans, "invoke_agent openai");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    let run = runs[0];
    let status = run.status.as_ref().expect("a status");
    assert_eq!(status.code, StatusCode::Error as i32);
    assert_eq!(status.message, message);
    let errors: Vec<_> = run
        .events
        .iter()
        .filter(|e| e.name == "exception")
        .collect();
    assert!(!errors.is_empty(), "{run:#?}");
    assert!(errors.iter().any(|e| {
        e.attributes.iter().any(|a| {
            a.key == "exception.message"
                && matches!(a.value.as_ref().and_then(|v| v.value.as_ref()),
                    Some(AnyValue::StringValue(s)) if *s == message)
        })
    }));
}

/// A nats-server, a collector and a worker exporting to it; `None` (said)
/// without nats-server.
fn exporting_cluster() -> Option<(nats::NatsServer, Collector, Worker)> {
    if !nats::available() {
        eprintln!("skipped: no nats-server");
        return None;
    }
    let server = nats::server(&[]);
    let collector = Collector::start();
    let mut worker = moat();
    worker
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        // Its spans go out soon after they end: it never exits.
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .args(["worker", "--nats", &server.url(), "--worker-timeout", "4s"]);
    let worker = Worker::spawned(worker);
    Some((server, collector, worker))
}

#[test]
fn a_run_on_a_cluster_worker_is_in_its_submitters_trace() {
    let Some((server, collector, _worker)) = exporting_cluster() else {
        return;
    };
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let output = moat_exporting(dir.path(), &collector)
        .args([
            "run",
            "--nats",
            &url,
            "echo",
            "across machines",
            "--output",
            "ndjson",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let spans = collector.wait_for(|spans| named(spans, "invoke_agent echo").len() == 2);
    let echo = named(&spans, "invoke_agent echo");
    assert_eq!(
        echo.len(),
        2,
        "the submitter's and the worker's: {spans:#?}"
    );
    // The submitter's span (kind client) is the root; the worker's
    // (internal) is its child, in the same trace.
    let client = 3; // SPAN_KIND_CLIENT
    let submitter = echo
        .iter()
        .find(|s| s.kind == client)
        .expect("the submitter's");
    let worker = echo
        .iter()
        .find(|s| s.kind != client)
        .expect("the worker's");
    assert!(submitter.parent_span_id.is_empty());
    assert_eq!(worker.trace_id, submitter.trace_id, "one trace");
    assert_eq!(worker.parent_span_id, submitter.span_id);
    assert_eq!(text(worker, "moat.run.id"), text(submitter, "moat.run.id"));
    assert_eq!(text(worker, "moat.done.status"), "success");
    assert_eq!(text(submitter, "moat.done.status"), "success");
}

/// The example pipeline's files, copied into `dir`.
fn copy_pipeline(dir: &Path) {
    let example = moat_testkit::repo_root().join("examples/workflows/pipeline");
    for entry in std::fs::read_dir(example).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
    }
}

/// How many task attempts a successful `moat workflow run --output
/// ndjson` started.
fn started_tasks(output: &std::process::Output) -> usize {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let attempts = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.contains("\"type\":\"task_started\""))
        .count();
    assert!(attempts >= 4, "every task started");
    attempts
}

#[test]
fn a_workflows_tasks_are_children_of_the_workflows_span() {
    let collector = Collector::start();
    let dir = tempfile::tempdir().unwrap();
    copy_pipeline(dir.path());
    let output = moat_exporting(dir.path(), &collector)
        .current_dir(dir.path())
        .args(["workflow", "run", "workflow.toml", "--output", "ndjson"])
        .output()
        .unwrap();
    let attempts = started_tasks(&output);
    let spans = collector.wait_for(|spans| {
        named(spans, "invoke_agent workflow").len() == 1
            && named(spans, "invoke_agent echo").len() == attempts
    });
    let workflows = named(&spans, "invoke_agent workflow");
    assert_eq!(workflows.len(), 1, "{spans:#?}");
    let workflow = workflows[0];
    assert_eq!(text(workflow, "moat.workflow.name"), "pipeline");
    assert_eq!(text(workflow, "moat.done.status"), "success");
    let tasks = named(&spans, "invoke_agent echo");
    assert_eq!(tasks.len(), attempts, "one run per attempt: {spans:#?}");
    for task in &tasks {
        assert_eq!(task.trace_id, workflow.trace_id, "one trace");
        assert_eq!(task.parent_span_id, workflow.span_id);
        assert_eq!(
            text(task, "moat.run.parent_id"),
            text(workflow, "moat.run.id")
        );
    }
}

#[test]
fn a_workflow_on_a_cluster_is_one_trace_with_its_tasks_and_their_workers_spans() {
    let Some((server, collector, _worker)) = exporting_cluster() else {
        return;
    };
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    copy_pipeline(dir.path());
    let output = moat_exporting(dir.path(), &collector)
        .current_dir(dir.path())
        .args(["workflow", "run", "workflow.toml", "--nats", &url])
        .args(["--output", "ndjson"])
        .output()
        .unwrap();
    let attempts = started_tasks(&output);
    // Each attempt: the submitter's span and the worker's.
    let spans = collector.wait_for(|spans| {
        named(spans, "invoke_agent workflow").len() == 1
            && named(spans, "invoke_agent echo").len() == 2 * attempts
    });
    let workflows = named(&spans, "invoke_agent workflow");
    assert_eq!(workflows.len(), 1, "{spans:#?}");
    let workflow = workflows[0];
    assert_eq!(text(workflow, "moat.done.status"), "success");
    let echo = named(&spans, "invoke_agent echo");
    assert_eq!(echo.len(), 2 * attempts, "{spans:#?}");
    let client = 3; // SPAN_KIND_CLIENT
    let submitted: Vec<_> = echo.iter().filter(|s| s.kind == client).collect();
    assert_eq!(submitted.len(), attempts);
    for span in &echo {
        assert_eq!(span.trace_id, workflow.trace_id, "one trace: {span:#?}");
    }
    for task in &submitted {
        assert_eq!(task.parent_span_id, workflow.span_id, "under the workflow");
        let on_worker = echo
            .iter()
            .find(|s| s.kind != client && s.parent_span_id == task.span_id)
            .expect("the worker's span under the submitter's");
        assert_eq!(text(on_worker, "moat.run.id"), text(task, "moat.run.id"));
    }
}

#[test]
fn an_unreachable_collector_changes_nothing_for_the_run_and_is_reported_once() {
    // A port nobody listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let run = |otel: bool| {
        let mut command = moat();
        command
            .env("MOAT_STORE", dir.path().join("moat.db"))
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .args(["run", "echo", "still here", "--output", "text"]);
        if otel {
            command.arg(format!("--otel=http://{closed}"));
        }
        let started = Instant::now();
        let output = command.output().unwrap();
        (output, started.elapsed())
    };
    let (without, _) = run(false);
    let (with, took) = run(true);
    assert!(
        with.status.success(),
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
    assert_eq!(with.stdout, without.stdout, "the run's output is the same");
    let stderr = String::from_utf8_lossy(&with.stderr);
    assert_eq!(
        stderr.matches("traces cannot be exported").count(),
        1,
        "reported once: {stderr}"
    );
    // Refused at once: the flush at exit does not wait for it.
    assert!(took < Duration::from_secs(2), "{took:?}");
}
