//! Adapters written in TypeScript (guest-sdk/typescript, adapters/typescript),
//! built from source by this test process with the project's own npm tools
//! (`npm ci`, then `npm run build`: esbuild and componentize-js from
//! adapters/typescript/node_modules), then run as real components through
//! the real host, like every other component test.
//!
//! When the tools cannot be installed (no npm, no registry), the tests say
//! so and skip; with `MOAT_REQUIRE_SDKS=1` (CI) they fail with that line
//! instead. A build that fails once the tools are installed always fails.

use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use moat_engine::{DoneStatus, EventPayload, InputTokens, OutputTokens};
use moat_grants::Grants;
use moat_testkit::llm::{deltas, error, grant, metadata};
use moat_testkit::llm_server::{LlmServer, Reply};
use moat_testkit::{
    Request, describe, error_codes, repo_root, run_large_component, single_done, texts,
};
use serde_json::{Value, json};

use crate::cli::common::{Started, moat_in, ok_in};
use tokio_util::sync::CancellationToken;

const TEXT_USAGE: &[u8] = include_bytes!("../../adapters/openai/fixtures/text_usage.sse");

/// The components built from adapters/typescript.
struct Built {
    echo: String,
    openai: String,
    spin: String,
    ask: String,
}

/// Why the TypeScript toolchain is unavailable, or the built components.
fn build() -> Result<Built, String> {
    let root = repo_root().join("adapters/typescript");
    let npm = |args: &[&str]| -> Result<std::process::Output, String> {
        Command::new("npm")
            .args(args)
            .current_dir(&root)
            .output()
            .map_err(|e| format!("npm cannot be run ({e}); install Node.js 20 and npm"))
    };
    // Installs go to adapters/typescript/node_modules, from the lock file;
    // `--prefer-offline` uses npm's cache when it has the packages.
    let install = npm(&["ci", "--no-audit", "--no-fund", "--prefer-offline"])?;
    if !install.status.success() {
        let stderr = String::from_utf8_lossy(&install.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(format!(
            "`npm ci` in adapters/typescript failed (is the npm registry reachable?): {}",
            last.unwrap_or("no output")
        ));
    }
    // Past this point the tools are there: a failing build is a bug.
    let output = npm(&["run", "build"]).expect("npm ran once already");
    assert!(
        output.status.success(),
        "building the TypeScript adapters failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let component = |path: &str| -> String {
        let path = root.join(path);
        assert!(path.is_file(), "no {}", path.display());
        path.to_str().expect("a UTF-8 path").to_owned()
    };
    Ok(Built {
        echo: component("echo/dist/echo.wasm"),
        openai: component("openai/dist/openai.wasm"),
        spin: component("testing/spin/dist/spin.wasm"),
        ask: component("testing/ask/dist/ask.wasm"),
    })
}

/// The components, built once per test process; `None` (after saying why)
/// when the toolchain is unavailable and `MOAT_REQUIRE_SDKS` is not `1`.
fn built() -> Option<&'static Built> {
    static BUILT: OnceLock<Result<Built, String>> = OnceLock::new();
    match BUILT.get_or_init(build) {
        Ok(built) => Some(built),
        Err(reason) if std::env::var("MOAT_REQUIRE_SDKS").as_deref() == Ok("1") => {
            panic!("MOAT_REQUIRE_SDKS=1 but the TypeScript SDK cannot be built: {reason}")
        }
        Err(reason) => {
            eprintln!("skipped: the TypeScript SDK cannot be built here: {reason}");
            None
        }
    }
}

/// The components, in a blocking section (the build runs npm).
async fn components() -> Option<&'static Built> {
    tokio::task::spawn_blocking(built)
        .await
        .expect("the build thread")
}

fn text_deltas(events: &[moat_engine::AgentEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::TextDelta(d) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_echo_streams_the_prompt_word_by_word_then_text_then_one_done() {
    let Some(built) = components().await else {
        return;
    };
    let prompt = "hello,  sandboxed\nworld from TypeScript";
    let events = run_large_component(&built.echo, prompt, |_| {}).await;
    // The same contract as the Rust and Python echoes.
    moat_testkit::conformance::echo(&events, prompt, "echo-ts");
    assert_eq!(
        text_deltas(&events),
        ["hello,  ", "sandboxed\n", "world ", "from ", "TypeScript"],
        "one delta per word, each with the whitespace after it"
    );
}

/// A run of the TypeScript openai adapter against the server at `url`,
/// granted `grants`.
fn openai_request(url: &str, grants: Grants) -> impl FnOnce(&mut Request) {
    let base_url = format!("{url}/v1");
    move |request| {
        request.options.model = Some("gpt-4o-mini".into());
        request.options.extra = Some(json!({"base_url": base_url}));
        request.scope.grants = grants;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_openai_adapter_streams_deltas_in_order_with_usage_and_one_done() {
    let Some(built) = components().await else {
        return;
    };
    // The recorded answer, sent in awkward chunks (single bytes inside
    // UTF-8 characters, pieces across event boundaries).
    let server = LlmServer::start(Reply::sse(TEXT_USAGE));
    let events = run_large_component(
        &built.openai,
        "Say hello",
        openai_request(&server.url(), grant(&[server.grant()])),
    )
    .await;
    let EventPayload::Init(init) = &events[0].payload else {
        panic!("init first: {}", describe(&events));
    };
    assert_eq!(init.model.as_deref(), Some("gpt-4o-mini"));
    assert_eq!(
        text_deltas(&events),
        [
            "Hello", "!", " How", " can", " I", " help", "é ü", " today", "?"
        ]
    );
    assert_eq!(texts(&events), ["Hello! How can I helpé ü today?"]);
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Success, "{}", describe(&events));
    assert_eq!(
        done.result.as_deref(),
        Some("Hello! How can I helpé ü today?")
    );
    let tokens = done.usage.tokens.expect("the server reported usage");
    assert_eq!(
        tokens.input,
        InputTokens {
            total: 19,
            cache_read: Some(0),
            cache_write: None
        }
    );
    assert_eq!(
        tokens.output,
        OutputTokens {
            total: 10,
            reasoning: Some(0)
        }
    );
    assert_eq!(metadata(&events)["finishReason"], "stop");
    assert_eq!(metadata(&events)["turns"], 1);
    assert!(
        error_codes(&events).is_empty(),
        "{:?}",
        error_codes(&events)
    );
    assert_eq!(
        events.last().unwrap().session_id,
        "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "the response's id is the session id"
    );

    // What it sent: Chat Completions, streamed, with usage asked for, and
    // no key (OPENAI_API_KEY is not granted to this run).
    let request = server.single_request();
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("accept"), Some("text/event-stream"));
    assert_eq!(request.header("authorization"), None);
    let body = request.json();
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "Say hello"}])
    );
    assert!(body.get("base_url").is_none(), "the adapter's, not sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_to_a_host_not_granted_is_refused_visibly_and_never_sent() {
    let Some(built) = components().await else {
        return;
    };
    let server = LlmServer::start(Reply::sse(TEXT_USAGE));
    let events = run_large_component(
        &built.openai,
        "Say hello",
        openai_request(&server.url(), Grants::none()),
    )
    .await;
    // The host says what was refused and how to grant it...
    let (denied, recoverable) = error(&events, "CAPABILITY_DENIED");
    assert!(
        denied.contains(&format!("grant net access to {}", server.grant())),
        "{denied}"
    );
    assert!(recoverable);
    // ...and the run ends in error with exactly one done. The adapter
    // means to report CONNECTION_FAILED, but the JavaScript engine
    // (componentize-js 0.23) aborts the component when a POST with a body
    // is refused, which the host reports as ADAPTER_ERROR: either way the
    // user sees the refusal and one `done` error.
    let codes = error_codes(&events);
    assert_eq!(codes.len(), 2, "{codes:?}");
    assert!(
        codes[1] == "CONNECTION_FAILED" || codes[1] == "ADAPTER_ERROR",
        "{codes:?}"
    );
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(server.requests().is_empty(), "nothing reached the server");
}

/// A token cancelled `delay` from now (made inside the request closure,
/// which runs once the component is loaded, so the abort lands mid-run).
fn abort_after(delay: Duration) -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        trigger.cancel();
    });
    token
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typescript_adapter_ignoring_abort_is_stopped_by_the_host_with_one_done() {
    let Some(built) = components().await else {
        return;
    };
    // From the run's start: loading the component may wait its turn
    // behind the other large components the suite compiles.
    let mut started = None;
    let events = run_large_component(&built.spin, "", |r| {
        started = Some(Instant::now());
        r.abort = Some(abort_after(Duration::from_millis(300)));
        r.drain = Duration::from_millis(200);
        r.options.resume = Some("inbound-token".into());
    })
    .await;
    assert!(
        matches!(events[0].payload, EventPayload::Init(_)),
        "it was running: {}",
        describe(&events)
    );
    // The same contract as the Rust and Python adapters that ignore abort.
    moat_testkit::conformance::stopped(&events, DoneStatus::Interrupted);
    let done = single_done(&events);
    assert_eq!(
        done.resume_token.as_deref(),
        Some("inbound-token"),
        "synthesized by the host at the drain deadline"
    );
    assert!(error_codes(&events).is_empty(), "an abort is not an error");
    let took = started.expect("the request was made").elapsed();
    assert!(
        took < Duration::from_secs(20),
        "ended {took:?} after the run started"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_typescript_adapter_is_stopped_by_the_timeout() {
    let Some(built) = components().await else {
        return;
    };
    let events = run_large_component(&built.spin, "", |r| {
        r.limits.timeout = Some(Duration::from_millis(500));
    })
    .await;
    assert_eq!(error_codes(&events), ["TIMEOUT"], "{}", describe(&events));
    assert_eq!(single_done(&events).status, DoneStatus::Error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_while_the_typescript_openai_adapter_waits_on_a_stalled_server_ends_it_at_once() {
    let Some(built) = components().await else {
        return;
    };
    // Half the answer, then nothing: the adapter waits in an SSE read.
    let server = LlmServer::start(Reply::sse(&TEXT_USAGE[..TEXT_USAGE.len() / 2]).then_stall());
    let adapter = moat_testkit::load_large(&built.openai).await;
    let registry = moat_testkit::registry_of([adapter]);
    let mut request = moat_testkit::request("openai-ts", "Say hello");
    openai_request(&server.url(), grant(&[server.grant()]))(&mut request);
    // A drain far longer than the test allows: the SDK itself must see the
    // abort while the adapter waits, not the host cut it off.
    request.drain = Duration::from_secs(20);
    let (events, took) = moat_testkit::run_aborting_at_first_delta(&registry, request).await;
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
        !deltas(&events).is_empty(),
        "the first deltas came through before the abort"
    );
}

/// Checks that the component at `path` was built against contract 0.4.0
/// and imports its `approvals` (loading it also compiles it into the
/// cache the `moat` binary of the tests shares, with the suite's longer
/// compile timeout).
pub(crate) async fn built_against_0_4_with_approvals(path: &str) {
    let adapter = moat_testkit::load_large(path).await;
    let details = adapter.details();
    assert_eq!(details.contract.to_string(), "0.4.0", "{path}");
    assert!(
        details
            .imports
            .iter()
            .any(|import| import == "moat:adapter/approvals@0.4.0"),
        "{path} imports {:?}",
        details.imports
    );
}

/// An SDK's `ask` test adapter (`name`, the component at `path`: one probe
/// a line, `TOOL INPUT` or `ask-tools`) asking through the SDK's approvals
/// API and the contract's `request-approval`, run by the real `moat`
/// binary: without `--ask` it is denied at once and nothing is recorded;
/// with `--ask-tools` it learns the tools, each request arrives as a
/// `permission_request` and waits until another process approves (it goes
/// on, allowed) or denies it (it goes on, told why). Shared with the
/// Python SDK's tests (tests/all/sdk_python.rs).
pub(crate) fn asks_through_the_real_binary(path: &str, name: &str) {
    // Nobody to ask: denied at once. An input that is not a JSON object
    // is refused by the SDK before the host is asked.
    let store = tempfile::tempdir().unwrap();
    let output = moat_in(store.path())
        .args([
            "run",
            path,
            "Deploy {\"env\":\"prod\"}\nDeploy [1]\nask-tools",
        ])
        .args(["--output", "ndjson"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events = crate::cli::common::events(&output);
    let said = texts(&events);
    assert_eq!(said.len(), 3, "{said:?}");
    assert_eq!(
        said[0],
        "denied: this run does not ask: nobody can answer (start it with --ask)"
    );
    assert!(
        said[1].starts_with("invalid: ") && said[1].contains("must be a JSON object"),
        "{said:?}"
    );
    assert_eq!(said[2], "ask-tools: ", "a run that does not ask names none");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.payload, EventPayload::PermissionRequest(_))),
        "nobody was asked"
    );
    assert_eq!(single_done(&events).status, DoneStatus::Success);
    assert!(events.iter().all(|e| e.agent == name), "{events:?}");

    // Asking: each request waits for another process's answer.
    let store = tempfile::tempdir().unwrap();
    let mut command = moat_in(store.path());
    command
        .args([
            "run",
            path,
            "ask-tools\nDeploy {\"env\":\"prod\"}\nWrite {\"path\":\"a\"}",
        ])
        .args(["--ask-tools", "Deploy,Write", "--output", "ndjson"]);
    let run = Started::new(command);
    let mut seen = Vec::new();
    let request = run.next_request(&mut seen);
    assert_eq!(texts(&seen), ["ask-tools: Deploy,Write"]);
    assert_eq!(request.kind.as_deref(), Some("tool"));
    assert_eq!(request.request_id.as_deref(), Some("1"));
    assert_eq!(
        (request.tool_name.as_str(), request.tool_use_id.as_str()),
        ("Deploy", "call-2")
    );
    assert_eq!(Value::Object(request.input), json!({"env": "prod"}));
    assert_eq!(
        request.reason.as_deref(),
        Some(format!("the {name} test adapter asks").as_str())
    );
    // Nothing goes on until it is answered.
    std::thread::sleep(Duration::from_millis(300));
    assert!(run.try_next().is_none(), "the run waits for the answer");
    ok_in(store.path(), &["approve", "@last"]);

    let request = run.next_request(&mut seen);
    assert_eq!(request.request_id.as_deref(), Some("2"));
    assert_eq!(
        (request.tool_name.as_str(), request.tool_use_id.as_str()),
        ("Write", "call-3")
    );
    assert_eq!(Value::Object(request.input), json!({"path": "a"}));
    ok_in(store.path(), &["deny", "@last", "--reason", "not today"]);

    let (rest, code) = run.finish();
    seen.extend(rest);
    assert_eq!(code, Some(0), "{seen:?}");
    let said = texts(&seen);
    assert_eq!(said.len(), 3, "{said:?}");
    assert_eq!(said[1], "ok: allowed");
    assert!(
        said[2].starts_with("denied: ") && said[2].ends_with("not today"),
        "{said:?}"
    );
    assert_eq!(single_done(&seen).status, DoneStatus::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typescript_component_asks_through_request_approval_and_goes_on_as_answered() {
    let Some(built) = components().await else {
        return;
    };
    // The SDK builds against contract 0.4.0, which has `approvals`.
    built_against_0_4_with_approvals(&built.ask).await;
    let path = built.ask.clone();
    tokio::task::spawn_blocking(move || asks_through_the_real_binary(&path, "ask-ts"))
        .await
        .expect("the run through the binary");
}
