use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use moat_engine::{
    AgentEvent, DonePayload, EventPayload, Registry, RunRequest, ToolResultPayload, ToolUsePayload,
    run_agent,
};
use moat_sandbox::{RunScope, Sandbox, SandboxConfig, WasmAdapter};

/// The request of a sandboxed run: the engine's request within a
/// [`RunScope`] (grants and trust).
pub type Request = RunRequest<RunScope>;

/// A sandboxed run of `agent` on `prompt` with nothing granted.
pub fn request(agent: impl Into<String>, prompt: impl Into<String>) -> Request {
    RunRequest::new(agent, prompt).with_scope(RunScope::none())
}

/// No end-to-end run may take longer than this; a hang fails the test.
pub const TEST_DEADLINE: Duration = Duration::from_secs(60);

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A recording of a real agent CLI: `tests/fixtures/cli/<cli>/<scenario>.jsonl`.
pub fn cli_fixture(cli: &str, scenario: &str) -> PathBuf {
    repo_root()
        .join("tests/fixtures/cli")
        .join(cli)
        .join(format!("{scenario}.jsonl"))
}

/// The compiled-component cache the tests share, kept between test runs
/// in the target directory.
pub fn shared_cache_dir() -> PathBuf {
    repo_root().join("target/e2e-cache")
}

/// One sandbox per test process, as in the real host.
pub fn sandbox() -> &'static Sandbox {
    static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
    SANDBOX.get_or_init(|| {
        let config = SandboxConfig {
            cache_dir: Some(shared_cache_dir()),
            pool_sessions: 1000,
            // The suite compiles the TypeScript and Python SDKs' 12–18 MiB
            // components while the rest of it runs on two cores: more time
            // than a user's moat gives (its default stays 60 s).
            compile_timeout: Duration::from_secs(300),
            ..SandboxConfig::default()
        };
        Sandbox::new(config).expect("the sandbox starts")
    })
}

/// Loads a component through the shared sandbox.
pub async fn load(path: &str) -> WasmAdapter {
    match sandbox().load_file(Path::new(path)).await {
        Ok(adapter) => adapter,
        Err(error) => panic!("cannot load {path}: {error}"),
    }
}

/// Loads a large component (an interpreter or engine inside: the
/// TypeScript and Python SDKs' 12–18 MiB ones) through the shared sandbox,
/// one at a time in the test process: compiling two at once on a 2-core
/// machine, beside the rest of the suite, comes near the sandbox's compile
/// timeout, and a second load of the same component then hits the cache.
pub async fn load_large(path: &str) -> WasmAdapter {
    static LOADING: OnceLock<tokio::sync::Mutex<()>> = OnceLock::new();
    let _one_at_a_time = LOADING.get_or_init(Default::default).lock().await;
    load(path).await
}

/// [`run_component`] for a large component ([`load_large`]).
pub async fn run_large_component(
    path: &str,
    prompt: &str,
    configure: impl FnOnce(&mut Request),
) -> Vec<AgentEvent> {
    let adapter = load_large(path).await;
    let name = moat_engine::Adapter::info(&adapter).name.clone();
    let registry = registry_of([adapter]);
    let mut request = request(name, prompt);
    configure(&mut request);
    collect(&registry, request).await
}

/// Runs `request`, aborting it (`request.abort` is set here) at its first
/// text delta: its events, and how long it took to end after the abort.
/// Panics when it has not ended 30 s after starting, or sent no delta.
pub async fn run_aborting_at_first_delta(
    registry: &Registry<RunScope>,
    mut request: Request,
) -> (Vec<AgentEvent>, Duration) {
    let abort = tokio_util::sync::CancellationToken::new();
    request.abort = Some(abort.clone());
    let mut run = moat_engine::run_agent(registry, request).expect("the run starts");
    let mut events = Vec::new();
    let mut aborted_at = None;
    let all = async {
        while let Some(event) = run.next().await {
            if aborted_at.is_none() && matches!(event.payload, EventPayload::TextDelta(_)) {
                abort.cancel();
                aborted_at = Some(std::time::Instant::now());
            }
            events.push(event);
        }
    };
    tokio::time::timeout(Duration::from_secs(30), all)
        .await
        .expect("the run ends after its abort");
    let took = aborted_at.expect("a text delta arrived").elapsed();
    (events, took)
}

/// A registry holding the given adapters.
pub fn registry_of(adapters: impl IntoIterator<Item = WasmAdapter>) -> Registry<RunScope> {
    let mut registry = Registry::scoped();
    for adapter in adapters {
        registry
            .register(Arc::new(adapter))
            .expect("unique adapter names");
    }
    registry
}

/// Runs the component at `path` on `prompt` and collects every event,
/// letting `configure` adjust the request (limits, abort, options).
pub async fn run_component(
    path: &str,
    prompt: &str,
    configure: impl FnOnce(&mut Request),
) -> Vec<AgentEvent> {
    let adapter = load(path).await;
    let name = moat_engine::Adapter::info(&adapter).name.clone();
    let registry = registry_of([adapter]);
    let mut request = request(name, prompt);
    configure(&mut request);
    collect(&registry, request).await
}

/// Runs a request to its end, failing the test if it outlives
/// [`TEST_DEADLINE`].
pub async fn collect(registry: &Registry<RunScope>, request: Request) -> Vec<AgentEvent> {
    let mut run = run_agent(registry, request).expect("the adapter is registered");
    let mut events = Vec::new();
    let all = async {
        while let Some(event) = run.next().await {
            events.push(event);
        }
    };
    tokio::time::timeout(TEST_DEADLINE, all)
        .await
        .expect("the run ended before the test deadline");
    events
}

/// Asserts the stream holds exactly one `done` and that it is the last
/// event, and returns it.
pub fn single_done(events: &[AgentEvent]) -> &DonePayload {
    let dones = events
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::Done(_)))
        .count();
    assert_eq!(
        dones,
        1,
        "exactly one done expected in {}",
        describe(events)
    );
    match &events.last().expect("events").payload {
        EventPayload::Done(done) => done,
        _ => panic!("done must be the last event in {}", describe(events)),
    }
}

/// The codes of the `error` events, in order.
pub fn error_codes(events: &[AgentEvent]) -> Vec<String> {
    errors(events)
        .map(|(code, _)| code.unwrap_or_default().to_string())
        .collect()
}

/// The message of the first error with `code`.
pub fn error_message<'a>(events: &'a [AgentEvent], code: &str) -> &'a str {
    errors(events)
        .find(|(c, _)| *c == Some(code))
        .map(|(_, message)| message)
        .unwrap_or_else(|| panic!("no {code} error in {}", describe(events)))
}

/// The messages of every error with `code`, in order.
pub fn error_messages<'a>(events: &'a [AgentEvent], code: &str) -> Vec<&'a str> {
    errors(events)
        .filter(|(c, _)| *c == Some(code))
        .map(|(_, message)| message)
        .collect()
}

/// The payloads of the run's extension events named `name`, in order.
pub fn extensions(events: &[AgentEvent], name: &str) -> Vec<serde_json::Value> {
    events
        .iter()
        .filter_map(|event| match &event.payload {
            EventPayload::Extension(extension) if extension.name == name => {
                Some(extension.payload.clone())
            }
            _ => None,
        })
        .collect()
}

fn errors(events: &[AgentEvent]) -> impl Iterator<Item = (Option<&str>, &str)> {
    events.iter().filter_map(|e| match &e.payload {
        EventPayload::Error(error) => Some((error.code.as_deref(), error.message.as_str())),
        _ => None,
    })
}

/// The text of all `text` events.
pub fn texts(events: &[AgentEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Text(text) => Some(text.content.as_str()),
            _ => None,
        })
        .collect()
}

/// The first tool call; fails the test when there is none.
pub fn tool_call(events: &[AgentEvent]) -> &ToolUsePayload {
    events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::ToolUse(call) => Some(call),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tool call in {}", describe(events)))
}

/// The first tool result; fails the test when there is none.
pub fn tool_result(events: &[AgentEvent]) -> &ToolResultPayload {
    events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::ToolResult(result) => Some(result),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tool result in {}", describe(events)))
}

/// The event types in order, for failure messages.
pub fn describe(events: &[AgentEvent]) -> String {
    // An error says what it was: a failing test's message is all a CI log
    // keeps of the run.
    let types: Vec<_> = events
        .iter()
        .map(|e| match &e.payload {
            EventPayload::Error(error) => format!(
                "error({}: {})",
                error.code.as_deref().unwrap_or("-"),
                error.message
            ),
            other => other.type_name().to_string(),
        })
        .collect();
    format!("[{}]", types.join(", "))
}
