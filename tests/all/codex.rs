//! The built-in `codex` adapter as a real component through the real host,
//! with a fake `codex` replaying recordings of Codex 0.169.0
//! (tests/fixtures/cli/codex) with their timing, granted by its path.

use std::time::Duration;

use moat_engine::{DoneStatus, EventPayload, ToolStatus};
use moat_grants::TrustLevel;
use moat_testkit::fake_cli::{FakeCli, run, run_aborting, stdout_lines_through, survivors};
use moat_testkit::{error_codes, error_message, single_done, texts, tool_result};
use serde_json::json;

fn fake(scenario: &str, config: serde_json::Value) -> FakeCli {
    FakeCli::new("codex", "codex", scenario, config)
}

/// The thread id the recording started.
fn thread_of(scenario: &str) -> String {
    let path = moat_testkit::cli_fixture("codex", scenario);
    let text = std::fs::read_to_string(path).unwrap();
    let start = text.find("01a").expect("a thread id");
    text[start..start + 36].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_turn_is_tool_use_then_result_then_text_and_done_with_usage() {
    let cli = fake("tool-use", json!({}));
    let mut request = cli.request_at("codex", "Run echo.", TrustLevel::Unrestricted);
    request.options.model = Some("gpt-5-codex".into());
    let events = run("codex", request).await;
    let result = tool_result(&events);
    assert_eq!(
        (result.tool_name.as_str(), result.status),
        ("shell", ToolStatus::Success)
    );
    assert_eq!(
        texts(&events).last().copied(),
        Some("The command printed moat-tool-use.")
    );
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(
        done.resume_token.as_deref(),
        Some(thread_of("tool-use").as_str())
    );
    assert_eq!(
        done.usage.tokens.as_ref().expect("tokens").input.total,
        4600
    );
    let args = cli.args();
    assert_eq!(&args[..2], ["exec", "--json"]);
    assert!(
        args.contains(&"--sandbox=danger-full-access".to_string()),
        "{args:?}"
    );
    assert!(
        args.contains(&"--model=gpt-5-codex".to_string()),
        "{args:?}"
    );
    assert_eq!(&args[args.len() - 2..], ["--", "Run echo."]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_is_an_error_then_done_error_and_warnings_are_recoverable() {
    let cli = fake("api-error", json!({}));
    let events = run("codex", cli.request("codex", "x")).await;
    assert!(error_message(&events, "TURN_FAILED").contains("scenario api-error"));
    assert!(error_codes(&events).contains(&"CODEX_WARNING".to_string()));
    assert_eq!(single_done(&events).status, DoneStatus::Error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_thread_names_the_thread_and_reports_no_tokens() {
    let cli = fake("resume", json!({}));
    let mut request = cli.request("codex", "again");
    request.options.resume = Some(thread_of("resume"));
    let events = run("codex", request).await;
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert!(done.usage.tokens.is_none());
    let args = cli.args();
    let n = args.len();
    assert_eq!(
        &args[n - 4..n - 2],
        ["resume", thread_of("resume").as_str()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_mid_command_ends_interrupted_resumable_and_leaves_no_process() {
    let hang = stdout_lines_through("codex", "tool-use", "\"item.started\"");
    let cli = fake(
        "tool-use",
        json!({"hang_after": hang, "spawn_grandchild": true}),
    );
    let request = cli.request_at("codex", "x", TrustLevel::Unrestricted);
    let (events, fired) = run_aborting("codex", request, |e| {
        matches!(e.payload, EventPayload::ToolUse(_))
    })
    .await;
    assert!(fired);
    let done = single_done(&events);
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert_eq!(
        done.resume_token.as_deref(),
        Some(thread_of("tool-use").as_str())
    );
    assert_eq!(survivors(&cli.pids(), Duration::from_secs(10)), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_limit_codex_cannot_enforce_is_refused_before_it_starts() {
    let cli = fake("text", json!({}));
    let mut request = cli.request("codex", "x");
    request.options.max_turns = Some(2);
    let events = run("codex", request).await;
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(error_message(&events, "UNSUPPORTED_OPTION").contains("--max-turns"));
    assert!(cli.recorded().is_none(), "the CLI never started");
}
