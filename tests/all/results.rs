//! The engine contract's result and callbacks (moat_engine::result) over
//! the three CLI adapters as real components through the real host, each
//! with a fake CLI replaying the real one's recording of the same tool
//! turn: the narration before the call goes to `on_assistant_message`, the
//! call to `on_tool_use` with its summary from the shared summarizer, the
//! answer only to the result.

use moat_engine::{EngineCallbacks, JsonObject, run_to_result};
use moat_grants::TrustLevel;
use moat_testkit::fake_cli::{FakeCli, run};
use serde_json::json;

/// Every callback, as a line.
#[derive(Default)]
struct Calls(Vec<String>);

impl EngineCallbacks for Calls {
    fn on_thinking(&mut self) {
        self.0.push("thinking".into());
    }
    fn on_assistant_message(&mut self, text: &str) {
        self.0.push(format!("narration: {text}"));
    }
    fn on_tool_use(&mut self, name: &str, _input: &JsonObject, summary: &str) {
        self.0.push(format!("tool {name}: {summary}"));
    }
}

async fn tool_turn(
    adapter: &str,
    cli: &str,
    tool: &str,
    summary: &str,
) -> moat_engine::EngineResult {
    let fake = FakeCli::new(cli, cli, "tool-use", json!({}));
    let request = fake.request_at(adapter, "Run echo.", TrustLevel::Unrestricted);
    let events = run(adapter, request).await;
    let mut calls = Calls::default();
    let result = run_to_result(futures::stream::iter(events), &mut calls).await;
    assert_eq!(
        calls.0,
        [
            "thinking".to_owned(),
            "narration: Let me run a command.".to_owned(),
            format!("tool {tool}: {summary}"),
            "thinking".to_owned(),
        ],
        "{adapter}"
    );
    assert_eq!(
        result.text.as_deref(),
        Some("The command printed moat-tool-use."),
        "{adapter}: the answer, without the narration"
    );
    assert_eq!(result.status, moat_engine::DoneStatus::Success);
    assert_eq!(result.usage.tool_uses, 1, "{adapter}");
    // Reported by Claude Code, implied by the others' events: the call,
    // then the answer after its result.
    assert_eq!(result.turns, Some(2), "{adapter}");
    assert!(result.resume_token.is_some(), "{adapter}");
    assert!(result.usage.tokens.is_some(), "{adapter}");
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_narration_call_and_answer_apart_with_its_cost() {
    let result = tool_turn("claude-code", "claude", "Bash", "Run `echo moat-tool-use`").await;
    assert!(result.usage.cost.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_narration_call_and_answer_apart() {
    tool_turn(
        "codex",
        "codex",
        "shell",
        "Run `/bin/bash -lc 'echo moat-tool-use'`",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_narration_call_and_answer_apart() {
    tool_turn(
        "gemini",
        "gemini",
        "run_shell_command",
        "Run `echo moat-tool-use`",
    )
    .await;
}
