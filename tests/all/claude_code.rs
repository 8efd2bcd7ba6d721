//! The built-in `claude-code` adapter as a real component through the real
//! host, with a fake `claude` replaying recordings of Claude Code 2.1.197
//! (tests/fixtures/cli/claude) with their timing, granted by its path.

use std::time::Duration;

use moat_engine::{AgentEvent, DoneStatus, EventPayload, ToolStatus};
use moat_grants::TrustLevel;
use moat_testkit::fake_cli::{FakeCli, run, run_aborting, stdout_lines_through, survivors};
use moat_testkit::{error_codes, error_message, single_done, texts, tool_call, tool_result};
use serde_json::json;

fn fake(scenario: &str, config: serde_json::Value) -> FakeCli {
    FakeCli::new("claude", "claude", scenario, config)
}

fn session_of(events: &[AgentEvent]) -> String {
    events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::Init(_) => Some(e.session_id.clone()),
            _ => None,
        })
        .expect("an init event")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_reply_streams_and_ends_with_usage_cost_and_the_session_to_resume() {
    let cli = fake("text", json!({}));
    let mut request = cli.request("claude-code", "Say hello.");
    request.options.model = Some("claude-sonnet-4-5".into());
    let events = run("claude-code", request).await;
    let EventPayload::Init(init) = &events[0].payload else {
        panic!("{events:?}");
    };
    // The host says how the CLI is contained, whatever the adapter claims.
    assert_eq!(
        init.containment.as_deref(),
        Some(moat_contain::NetworkContainment::detect().name())
    );
    let deltas: String = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::TextDelta(d) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, "Hello from the moat backend stub.");
    assert_eq!(texts(&events), ["Hello from the moat backend stub."]);
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(
        done.resume_token.as_deref(),
        Some(session_of(&events).as_str())
    );
    let tokens = done.usage.tokens.as_ref().expect("tokens");
    assert_eq!(tokens.input.total, 12 + 2048 + 256);
    assert!(done.usage.cost.is_some());

    let args = cli.args();
    assert_eq!(&args[..2], ["-p", "--output-format=stream-json"]);
    assert!(args.contains(&"--model=claude-sonnet-4-5".to_string()));
    assert_eq!(&args[args.len() - 2..], ["--", "Say hello."]);
    assert!(
        args.contains(&"--permission-mode=dontAsk".to_string()),
        "sandbox trust: {args:?}"
    );
    let env = &cli.recorded().unwrap()["env"];
    assert_eq!(env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"], "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_turn_reports_the_call_and_its_result_with_allowed_tools_mapped() {
    let cli = fake("tool-use", json!({}));
    let mut request = cli.request_at("claude-code", "Run echo.", TrustLevel::Unrestricted);
    request.options.allowed_tools = Some(vec!["Bash".into()]);
    let events = run("claude-code", request).await;
    let call = tool_call(&events);
    assert_eq!(call.tool_name, "Bash");
    let result = tool_result(&events);
    assert_eq!(
        (result.tool_use_id.as_str(), result.status),
        (call.tool_use_id.as_str(), ToolStatus::Success)
    );
    let done = single_done(&events);
    assert_eq!(
        (done.status, done.usage.tool_uses),
        (DoneStatus::Success, 1)
    );
    let args = cli.args();
    assert!(args.contains(&"--tools=Bash".to_string()), "{args:?}");
    assert!(
        args.contains(&"--allowedTools=Bash".to_string()),
        "{args:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_error_is_an_error_then_done_error() {
    let cli = fake("api-error", json!({}));
    let events = run("claude-code", cli.request("claude-code", "x")).await;
    assert!(error_message(&events, "API_ERROR").contains("400"));
    assert_eq!(single_done(&events).status, DoneStatus::Error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_tool_is_shown_as_a_permission_error() {
    let cli = fake("permission-denial", json!({}));
    let events = run("claude-code", cli.request("claude-code", "x")).await;
    assert!(error_message(&events, "PERMISSION_DENIED").contains("Bash"));
    assert_eq!(single_done(&events).status, DoneStatus::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_mid_text_ends_interrupted_with_the_session_and_leaves_no_process() {
    // Hangs after the first text delta, as a model that stalls.
    let hang = stdout_lines_through("claude", "text", "text_delta");
    let cli = fake("text", json!({"hang_after": hang}));
    let (events, fired) = run_aborting("claude-code", cli.request("claude-code", "x"), |e| {
        matches!(e.payload, EventPayload::TextDelta(_))
    })
    .await;
    assert!(fired, "a delta arrived");
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert_eq!(
        done.resume_token.as_deref(),
        Some(session_of(&events).as_str())
    );
    assert!(
        error_codes(&events).is_empty(),
        "{:?}",
        error_codes(&events)
    );
    assert_eq!(survivors(&cli.pids(), Duration::from_secs(10)), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_mid_tool_kills_a_cli_that_ignores_sigterm_and_its_grandchild() {
    // Hangs while its tool runs, ignores SIGTERM and has a child of its own.
    let hang = stdout_lines_through(
        "claude",
        "tool-use",
        r#""type":"assistant","message":{"content":[{"id":"toolu"#,
    );
    let cli = fake(
        "tool-use",
        json!({"hang_after": hang, "ignore_sigterm": true, "spawn_grandchild": true}),
    );
    let mut request = cli.request_at("claude-code", "x", TrustLevel::Unrestricted);
    request.drain = Duration::from_millis(300);
    let (events, fired) = run_aborting("claude-code", request, |e| {
        matches!(e.payload, EventPayload::ToolUse(_))
    })
    .await;
    assert!(fired, "the tool call arrived");
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert_eq!(
        done.resume_token.as_deref(),
        Some(session_of(&events).as_str())
    );
    let pids = cli.pids();
    assert_eq!(pids.len(), 2, "the CLI and its grandchild");
    assert_eq!(survivors(&pids, Duration::from_secs(10)), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_list_it_cannot_enforce_is_refused_before_the_cli_starts() {
    let cli = fake("text", json!({}));
    let mut request = cli.request("claude-code", "x");
    request.options.allowed_tools = Some(vec!["Bash(git *)".into()]);
    request.scope.trust = TrustLevel::Unrestricted;
    let events = run("claude-code", request).await;
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(error_message(&events, "UNSUPPORTED_OPTION").contains("Bash(git *)"));
    assert!(cli.recorded().is_none(), "the CLI never started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_cli_says_how_to_install_it() {
    let cli = fake("text", json!({}));
    let missing = cli.dir().join("not-installed/claude");
    let mut request = cli.request("claude-code", "x");
    request.scope.grants.run = vec![missing.to_string_lossy().into_owned()];
    request.options.extra = Some(json!({"program": missing}));
    let events = run("claude-code", request).await;
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    let codes = error_codes(&events);
    assert!(
        events.iter().any(|e| matches!(&e.payload, EventPayload::Error(err) if err.message.contains("npm install -g @anthropic-ai/claude-code"))),
        "{codes:?}"
    );
}
