//! Adapters written in Python (guest-sdk/python, `moat-adapter`): the
//! examples in adapters/python/ are built from source with componentize-py
//! (in a venv under target/py-sdk, set up once per test process) and run as
//! real components through the real host, as the Rust ones are.
//!
//! Without the tools (no network to install them) each test prints why it
//! is skipped and returns; with `MOAT_REQUIRE_SDKS=1` it fails instead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use moat_engine::{AgentEvent, DoneStatus, EventPayload, InputTokens, OutputTokens};
use moat_grants::Grants;
use moat_sandbox::WasmAdapter;
use moat_testkit::llm::{deltas, error, grant, metadata};
use moat_testkit::llm_server::{LlmServer, Reply};
use moat_testkit::{describe, error_codes, registry_of, repo_root, single_done, texts};
use serde_json::json;

const TEXT_USAGE: &[u8] = include_bytes!("../../adapters/openai/fixtures/text_usage.sse");

/// The components built from adapters/python/.
struct PythonComponents {
    echo: PathBuf,
    openai: PathBuf,
    ignores_abort: PathBuf,
    ask: PathBuf,
}

/// Builds the Python components once per test process; `None` (after
/// saying why) when the SDK's tools cannot be installed here.
fn components() -> Option<&'static PythonComponents> {
    static BUILT: OnceLock<Option<PythonComponents>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = repo_root();
            if let Err(why) = setup_venv(&root) {
                let line = format!(
                    "the Python SDK's tools (componentize-py 0.25.1) cannot be installed: {why}"
                );
                assert!(
                    std::env::var("MOAT_REQUIRE_SDKS").as_deref() != Ok("1"),
                    "MOAT_REQUIRE_SDKS=1 but {line}"
                );
                eprintln!("skipped: {line}");
                return None;
            }
            let out = root.join("target/py-sdk/components");
            Some(PythonComponents {
                echo: build(
                    &root,
                    "adapters/python/echo/build.sh",
                    &out.join("echo.wasm"),
                ),
                openai: build(
                    &root,
                    "adapters/python/openai/build.sh",
                    &out.join("openai.wasm"),
                ),
                ignores_abort: build(
                    &root,
                    "adapters/python/testing/ignores_abort/build.sh",
                    &out.join("ignores_abort.wasm"),
                ),
                ask: build(
                    &root,
                    "adapters/python/testing/ask/build.sh",
                    &out.join("ask.wasm"),
                ),
            })
        })
        .as_ref()
}

/// Creates the venv with componentize-py and the SDK; the last line of its
/// output when that fails.
fn setup_venv(root: &Path) -> Result<(), String> {
    let output = Command::new("bash")
        .arg(root.join("guest-sdk/python/setup-venv.sh"))
        .output()
        .map_err(|e| format!("cannot run setup-venv.sh: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output");
    Err(format!(
        "setup-venv.sh exited with {}: {last}",
        output.status
    ))
}

/// Runs an adapter's build script; a failure here is a failure of the SDK
/// or the adapter, never a skip.
fn build(root: &Path, script: &str, out: &Path) -> PathBuf {
    let started = Instant::now();
    let output = Command::new("bash")
        .arg(root.join(script))
        .arg(out)
        .output()
        .expect("bash runs");
    assert!(
        output.status.success(),
        "{script} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("{script}: built in {:.1?}", started.elapsed());
    out.to_path_buf()
}

/// Loads a component through the shared sandbox, one at a time: a Python
/// component is ~18 MiB of Wasm, and compiling two at once on a small
/// machine would bring each near the sandbox's compile timeout.
async fn load(path: &Path) -> WasmAdapter {
    let started = Instant::now();
    let adapter = moat_testkit::load_large(path.to_str().expect("a UTF-8 path")).await;
    eprintln!("loaded {} in {:.1?}", path.display(), started.elapsed());
    adapter
}

/// Runs the component at `path` on `prompt`; `configure` sets the request.
async fn run(
    path: &Path,
    prompt: &str,
    configure: impl FnOnce(&mut moat_testkit::Request),
) -> Vec<AgentEvent> {
    let adapter = load(path).await;
    let name = moat_engine::Adapter::info(&adapter).name.clone();
    let mut request = moat_testkit::request(name, prompt);
    configure(&mut request);
    moat_testkit::collect(&registry_of([adapter]), request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_echo_streams_the_prompt_word_by_word_then_text_then_one_done() {
    let Some(built) = components() else { return };
    let prompt = "hello,  sandboxed\nworld";
    let events = run(&built.echo, prompt, |_| {}).await;
    // The same contract as the Rust and TypeScript echoes.
    moat_testkit::conformance::echo(&events, prompt, "echo-py");
    let EventPayload::Init(init) = &events[0].payload else {
        panic!("init first: {}", describe(&events));
    };
    assert_eq!(init.model.as_deref(), Some("echo"));
}

/// What the openai-py adapter is run with against a loopback server.
fn against(server_url: &str, grants: Grants) -> impl FnOnce(&mut moat_testkit::Request) {
    let base_url = format!("{server_url}/v1");
    move |request| {
        request.options.model = Some("gpt-4o-mini".into());
        request.options.extra = Some(json!({"base_url": base_url}));
        request.scope.grants = grants;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_openai_streams_text_deltas_in_order_then_usage_and_done() {
    let Some(built) = components() else { return };
    // The fixture goes out in awkward pieces (single bytes inside UTF-8
    // characters, between \r and \n): the SDK's SSE parser reassembles it.
    let server = LlmServer::start(Reply::sse(TEXT_USAGE));
    let events = run(
        &built.openai,
        "Say hello",
        against(&server.url(), grant(&[server.grant()])),
    )
    .await;
    assert!(
        matches!(events[0].payload, EventPayload::Init(_)),
        "{}",
        describe(&events)
    );
    assert_eq!(deltas(&events), "Hello! How can I helpé ü today?");
    assert_eq!(texts(&events), ["Hello! How can I helpé ü today?"]);
    assert!(
        error_codes(&events).is_empty(),
        "{:?}",
        error_codes(&events)
    );
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(
        done.result.as_deref(),
        Some("Hello! How can I helpé ü today?")
    );
    let tokens = done.usage.tokens.expect("the server's usage");
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
    assert_eq!(
        events.last().unwrap().session_id,
        "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "the response's id is the session id"
    );

    let request = server.single_request();
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(request.header("accept"), Some("text/event-stream"));
    assert_eq!(
        request.header("authorization"),
        None,
        "OPENAI_API_KEY is not granted"
    );
    let body = request.json();
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "Say hello"}])
    );
    assert!(
        body.get("base_url").is_none(),
        "the adapter's option, not sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_openai_request_to_a_host_not_granted_is_refused_visibly() {
    let Some(built) = components() else { return };
    let server = LlmServer::start(Reply::error(500, "{}"));
    let events = run(
        &built.openai,
        "Say hello",
        against(&server.url(), Grants::none()),
    )
    .await;
    let flag = format!("--allow-net={}", server.grant());
    let (message, recoverable) = error(&events, "HOST_NOT_GRANTED");
    assert!(message.contains(&flag), "{message}");
    assert!(!recoverable);
    let (host_message, _) = error(&events, "CAPABILITY_DENIED");
    assert!(host_message.contains(&server.grant()), "{host_message}");
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(server.requests().is_empty(), "nothing reached the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_openai_refuses_what_it_cannot_honour_before_sending() {
    let Some(built) = components() else { return };
    let server = LlmServer::start(Reply::sse(TEXT_USAGE));
    let events = run(&built.openai, "Say hello", |request| {
        against(&server.url(), grant(&[server.grant()]))(request);
        request.options.resume = Some("an-old-session".into());
    })
    .await;
    let (message, _) = error(&events, "UNSUPPORTED_OPTION");
    assert!(message.contains("resume"), "{message}");
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(
        server.requests().is_empty(),
        "refused before anything was sent"
    );
}

/// Aborts a run of the ignores-abort adapter (`mode`: "spin" loops in
/// Python without yielding, "yield" swallows `Interrupted` and yields on)
/// at its first delta: the host must end it at the end of the drain, with
/// exactly one `done`, interrupted.
async fn check_abort_is_enforced(path: &Path, mode: &str) {
    let adapter = load(path).await;
    let registry = registry_of([adapter]);
    let mut request = moat_testkit::request("ignores-abort-py", mode);
    request.drain = Duration::from_millis(300);
    let (events, took) = moat_testkit::run_aborting_at_first_delta(&registry, request).await;
    // The same contract as the Rust and TypeScript adapters that ignore
    // abort.
    moat_testkit::conformance::stopped(&events, DoneStatus::Interrupted);
    // The drain (300 ms) plus a loaded machine's margin.
    assert!(
        took < Duration::from_secs(5),
        "{mode}: stopped after {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_adapter_that_ignores_abort_is_still_stopped_by_the_host() {
    let Some(built) = components() else { return };
    check_abort_is_enforced(&built.ignores_abort, "spin").await;
    check_abort_is_enforced(&built.ignores_abort, "yield").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_component_asks_through_request_approval_and_goes_on_as_answered() {
    let Some(built) = components() else { return };
    let path = built.ask.to_str().expect("a UTF-8 path").to_owned();
    // The SDK builds against contract 0.4.0, which has `approvals`.
    crate::sdk_typescript::built_against_0_4_with_approvals(&path).await;
    // The same run as the TypeScript SDK's `ask` adapter's.
    tokio::task::spawn_blocking(move || {
        crate::sdk_typescript::asks_through_the_real_binary(&path, "ask-py")
    })
    .await
    .expect("the run through the binary");
}
