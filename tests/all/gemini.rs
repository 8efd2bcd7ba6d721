//! The built-in `gemini` adapter as a real component through the real host,
//! with a fake `gemini` replaying recordings of Gemini CLI 0.61.0
//! (tests/fixtures/cli/gemini) with their timing, granted by its path.

use std::time::Duration;

use moat_engine::{DoneStatus, EventPayload, ToolStatus};
use moat_grants::TrustLevel;
use moat_testkit::fake_cli::{FakeCli, run, run_aborting, stdout_lines_through, survivors};
use moat_testkit::{error_message, single_done, texts, tool_result};
use serde_json::json;

fn fake(scenario: &str, config: serde_json::Value) -> FakeCli {
    FakeCli::new("gemini", "gemini", scenario, config)
}

fn controlled(cli: &FakeCli, prompt: &str) -> moat_testkit::Request {
    cli.request_at("gemini", prompt, TrustLevel::Controlled)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_turn_streams_text_around_the_call_and_skips_the_echoed_prompt() {
    let cli = fake("tool-use", json!({}));
    let request = cli.request_at("gemini", "Run echo.", TrustLevel::Unrestricted);
    let events = run("gemini", request).await;
    assert_eq!(
        texts(&events),
        [
            "Let me run a command.",
            "The command printed moat-tool-use."
        ]
    );
    let result = tool_result(&events);
    assert_eq!(
        (result.tool_name.as_str(), result.status),
        ("run_shell_command", ToolStatus::Success)
    );
    let done = single_done(&events);
    assert_eq!(
        (done.status, done.usage.tool_uses),
        (DoneStatus::Success, 1)
    );
    assert!(done.resume_token.is_some());
    let args = cli.args();
    assert_eq!(args[0], "--prompt=Run echo.");
    assert!(
        args.contains(&"--approval-mode=yolo".to_string()),
        "{args:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_limit_is_done_max_turns() {
    let cli = fake("max-turns", json!({}));
    let events = run("gemini", controlled(&cli, "x")).await;
    assert_eq!(single_done(&events).status, DoneStatus::MaxTurns);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_error_is_an_error_then_done_error() {
    let cli = fake("api-error", json!({}));
    let events = run("gemini", controlled(&cli, "x")).await;
    assert!(error_message(&events, "GEMINI_ERROR").contains("scenario api-error"));
    assert_eq!(single_done(&events).status, DoneStatus::Error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_mid_text_ends_interrupted_and_leaves_no_process() {
    let hang = stdout_lines_through("gemini", "text", r#""delta":true"#);
    let cli = fake("text", json!({"hang_after": hang}));
    let (events, fired) = run_aborting("gemini", controlled(&cli, "x"), |e| {
        matches!(e.payload, EventPayload::TextDelta(_))
    })
    .await;
    assert!(fired);
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert!(done.resume_token.is_some());
    assert_eq!(survivors(&cli.pids(), Duration::from_secs(10)), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_trust_is_refused_before_the_cli_starts() {
    let cli = fake("text", json!({}));
    let events = run("gemini", cli.request("gemini", "x")).await;
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(error_message(&events, "UNSUPPORTED_OPTION").contains("sandbox"));
    assert!(cli.recorded().is_none());
}
