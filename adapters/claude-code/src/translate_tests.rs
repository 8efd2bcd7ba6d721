//! The translator on the recordings of the real CLI
//! (`tests/fixtures/cli/claude/`), and on edge cases of untrusted output.

use super::*;
use moat_cli_support::testing::{
    Fixture, assert_all_in_session, assert_ended, assert_succeeded, deltas, done_of, errors,
    interrupt, texts, tool_calls, tool_result, tool_results,
};
use moat_cli_support::{Exit, Translator, translate_all};
use moat_guest::{EventKind, TokenCoverage};

fn replay(scenario: &str) -> Vec<Event> {
    Fixture::load("claude", scenario).translate(&mut ClaudeTranslator::new())
}

/// The session id the recording announced on its first line.
fn recorded_session(scenario: &str) -> String {
    Fixture::load("claude", scenario).first_line_field("session_id")
}

#[test]
fn text_run_is_init_deltas_text_then_done_with_usage_cost_and_resume_token() {
    let events = replay("text");
    let EventKind::Init(init) = &events[0].kind else {
        panic!("init first: {:?}", events[0])
    };
    assert_eq!(init.model.as_deref(), Some("claude-sonnet-4-5"));
    assert!(init.tools.iter().any(|tool| tool == "Bash"));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Init(_)))
            .count(),
        1
    );
    assert_eq!(deltas(&events), "Hello from the moat backend stub.");
    assert_eq!(texts(&events), ["Hello from the moat backend stub."]);

    let session = recorded_session("text");
    let done = assert_succeeded(&events, "Hello from the moat backend stub.", &session);
    // The stub reported 12 uncached + 2048 cache-read + 256 cache-write
    // input tokens and 6 output tokens; modelUsage carries them.
    let tokens = done.usage.tokens.expect("tokens");
    assert_eq!(tokens.coverage, TokenCoverage::Complete);
    assert_eq!(tokens.input.total, 12 + 2048 + 256);
    assert_eq!(tokens.input.cache_read, Some(2048));
    assert_eq!(tokens.input.cache_write, Some(256));
    assert_eq!(tokens.output.total, 6);
    let cost = done.usage.cost.expect("cost");
    assert_eq!(cost.source, CostSource::AgentEstimate);
    assert!(cost.usd > 0.0);
    assert_all_in_session(&events, &session);
}

#[test]
fn tool_use_turn_pairs_the_bash_call_with_its_result() {
    let events = replay("tool-use");
    let calls: Vec<_> = tool_calls(&events);
    let [call] = calls.as_slice() else {
        panic!("one tool call: {calls:?}")
    };
    assert_eq!(call.tool_name, "Bash");
    let input: Value = moat_guest::serde_json::from_str(&call.input).unwrap();
    assert_eq!(input["command"], "echo moat-tool-use");
    let result = tool_result(&events);
    assert_eq!(result.tool_use_id, call.tool_use_id);
    assert_eq!(result.tool_name, "Bash");
    assert_eq!(result.status, ToolStatus::Success);
    assert_eq!(result.output, "\"moat-tool-use\"");
    assert_eq!(
        texts(&events),
        [
            "Let me run a command.",
            "The command printed moat-tool-use."
        ]
    );
    let done = done_of(&events);
    assert_eq!(done.status, DoneStatus::Success);
    assert_eq!(done.usage.tool_uses, 1);
    // Two model calls, each 12 + 2048 + 256 input tokens.
    assert_eq!(
        done.usage.tokens.unwrap().input.total,
        2 * (12 + 2048 + 256)
    );
}

#[test]
fn thinking_blocks_become_thinking_events_before_the_text() {
    let events = replay("thinking");
    let thinking = events
        .iter()
        .position(|e| {
            e.kind
                == EventKind::Thinking(
                    "The user wants a short greeting, so I will answer briefly.".into(),
                )
        })
        .expect("a thinking event");
    let text = events
        .iter()
        .position(|e| e.kind == EventKind::Text("Hello after thinking it over.".into()))
        .expect("the text");
    assert!(thinking < text);
    assert_eq!(done_of(&events).status, DoneStatus::Success);
}

#[test]
fn permission_denial_is_reported_as_a_visible_error_with_the_denied_tool() {
    let events = replay("permission-denial");
    let result = tool_result(&events);
    // 2.1.197 answers the call with an error result and lists the denial
    // only in the final result line.
    assert_eq!(result.status, ToolStatus::Error);
    let denial = errors(&events)
        .into_iter()
        .find(|error| error.code.as_deref() == Some(PERMISSION_DENIED))
        .expect("a PERMISSION_DENIED error");
    assert!(denial.recoverable);
    assert!(denial.message.contains("Bash") && denial.message.contains(&result.tool_use_id));
    let done = done_of(&events);
    assert_eq!(done.status, DoneStatus::Success);
    let metadata: Value =
        moat_guest::serde_json::from_str(done.metadata.as_deref().unwrap()).unwrap();
    assert_eq!(metadata["permissionDenials"], json!(["Bash"]));
}

#[test]
fn a_permission_denied_line_makes_the_result_denied() {
    let mut translator = ClaudeTranslator::new();
    let lines = [
        r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"x"}}]},"session_id":"s"}"#,
        r#"{"type":"system","subtype":"permission_denied","tool_name":"Write","tool_use_id":"t1","message":"Write needs approval","session_id":"s"}"#,
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"denied","is_error":true}]},"session_id":"s"}"#,
        r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s","permission_denials":[{"tool_name":"Write","tool_use_id":"t1"}]}"#,
    ];
    let events = translate_all(&mut translator, lines, Exit::code(0), "");
    let results: Vec<_> = tool_results(&events);
    let [result] = results.as_slice() else {
        panic!("one result per call: {results:?}")
    };
    assert_eq!(
        (result.status, result.tool_name.as_str()),
        (ToolStatus::Denied, "Write")
    );
    let denials = errors(&events)
        .into_iter()
        .filter(|error| error.code.as_deref() == Some(PERMISSION_DENIED))
        .count();
    assert_eq!(denials, 1, "one error per denial, not one per report");
}

#[test]
fn api_error_is_an_error_event_then_done_error_without_tokens() {
    let events = replay("api-error");
    let errors = errors(&events);
    let [error] = errors.as_slice() else {
        panic!("one error: {errors:?}")
    };
    assert_eq!(error.code.as_deref(), Some(API_ERROR));
    assert!(error.message.contains("400"), "{}", error.message);
    assert!(
        texts(&events).is_empty(),
        "the synthetic message is not assistant text"
    );
    let done = done_of(&events);
    assert_ended(done, DoneStatus::Error, &recorded_session("api-error"));
    assert_eq!(done.result, None);
    assert!(done.usage.tokens.is_none(), "no model call was counted");
}

#[test]
fn mid_turn_failure_ends_in_an_error_and_done_error() {
    let events = replay("mid-turn-failure");
    let errors = errors(&events);
    assert!(
        errors
            .iter()
            .any(|error| error.message.contains("Connection")),
        "{errors:?}"
    );
    assert_eq!(done_of(&events).status, DoneStatus::Error);
}

#[test]
fn max_turns_result_is_done_max_turns() {
    let events = replay("max-turns");
    let done = done_of(&events);
    assert_eq!(done.status, DoneStatus::MaxTurns);
    assert_eq!(done.usage.tool_uses, 1);
    assert_eq!(done.result, None);
    assert!(
        errors(&events).is_empty(),
        "max turns is a status, not an error"
    );
}

#[test]
fn unknown_types_and_non_json_lines_are_ignored() {
    let mut translator = ClaudeTranslator::new();
    for line in [
        r#"{"type":"something_new","session_id":"s"}"#,
        r#"{"type":"system","subtype":"status","status":"requesting"}"#,
        "not json at all",
        "[1,2]",
        "",
        r#"{"type":"assistant","message":{"content":"not a list"}}"#,
        r#"{"type":"assistant","message":{"content":[{"type":"tool_use"}]}}"#,
        r#"{"type":"user","message":{"content":[{"type":"tool_result"}]}}"#,
    ] {
        assert_eq!(translator.line(line), [], "{line:?}");
    }
    assert!(!translator.is_done());
}

#[test]
fn init_is_sent_once() {
    let mut translator = ClaudeTranslator::new();
    let init = r#"{"type":"system","subtype":"init","session_id":"s","model":"m","cwd":"/w","tools":["Bash"]}"#;
    assert_eq!(translator.line(init).len(), 1);
    assert_eq!(translator.line(init), []);
}

#[test]
fn a_partial_last_line_is_dropped_and_the_exit_ends_the_run() {
    let fixture = Fixture::load("claude", "text");
    let result_line = fixture.stdout.last().unwrap();
    let cut = &result_line[..result_line.len() / 2];
    let mut lines: Vec<&str> = fixture.stdout.iter().map(String::as_str).collect();
    *lines.last_mut().unwrap() = cut;
    let events = translate_all(
        &mut ClaudeTranslator::new(),
        lines,
        Exit::code(1),
        "fatal: out of memory\n",
    );
    let errors = errors(&events);
    let [error] = errors.as_slice() else {
        panic!("one error: {errors:?}")
    };
    assert_eq!(error.code.as_deref(), Some(moat_cli_support::CLI_FAILED));
    assert!(error.message.contains("exited with code 1"));
    assert!(error.message.contains("out of memory"));
    let done = done_of(&events);
    assert_ended(done, DoneStatus::Error, &recorded_session("text"));
}

#[test]
fn nothing_follows_done() {
    let fixture = Fixture::load("claude", "text");
    let mut translator = ClaudeTranslator::new();
    for line in &fixture.stdout {
        translator.line(line);
    }
    assert!(translator.is_done());
    assert_eq!(translator.line(&fixture.stdout[0]), []);
    assert_eq!(translator.finish(Exit::code(0), ""), []);
}

#[test]
fn interruption_is_done_interrupted_resumable_once_a_session_started() {
    let mut translator = ClaudeTranslator::new();
    let done = interrupt(&mut translator);
    assert_eq!(
        (done.status, done.resume_token),
        (DoneStatus::Interrupted, None)
    );

    let fixture = Fixture::load("claude", "tool-use");
    let mut translator = ClaudeTranslator::new();
    // Up to the tool call: the session has started, a tool is running.
    fixture.feed_until(&mut translator, |line| line.contains("\"tool_result\""));
    let done = interrupt(&mut translator);
    assert_ended(
        &done,
        DoneStatus::Interrupted,
        &recorded_session("tool-use"),
    );
    assert_eq!(done.usage.tool_uses, 1);
    assert!(translator.is_done());
}

#[test]
fn oversize_lines_are_skipped_with_an_error() {
    let mut translator = ClaudeTranslator::new();
    let huge = format!(
        r#"{{"type":"assistant","message":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "x".repeat(moat_cli_support::MAX_LINE_BYTES)
    );
    let events = translator.line(&huge);
    assert!(matches!(&events[..], [Event { kind: EventKind::Error(e), .. }] if e.recoverable));
}

#[test]
fn model_usage_sums_models_and_is_absent_when_none_is_listed() {
    let models = json!({
        "a": {"inputTokens": 10, "outputTokens": 5, "cacheReadInputTokens": 100, "cacheCreationInputTokens": 7},
        "b": {"inputTokens": 1, "outputTokens": 2},
    });
    let tokens = model_usage(&models, DoneStatus::Success).unwrap();
    assert_eq!(tokens.input.total, 10 + 100 + 7 + 1);
    assert_eq!(
        (tokens.input.cache_read, tokens.input.cache_write),
        (Some(100), Some(7))
    );
    assert_eq!(tokens.output.total, 7);
    assert_eq!(model_usage(&json!({}), DoneStatus::Success), None);
    assert_eq!(model_usage(&json!(null), DoneStatus::Success), None);
    assert_eq!(
        model_usage(&models, DoneStatus::Error).unwrap().coverage,
        TokenCoverage::Partial
    );
}

#[test]
fn a_failing_command_is_an_error_result_with_its_output() {
    let events = replay("tool-error");
    let result = tool_result(&events);
    assert_eq!(
        (result.tool_name.as_str(), result.status),
        ("Bash", ToolStatus::Error)
    );
    assert!(result.output.contains("No such file"), "{}", result.output);
    assert!(
        !errors(&events)
            .iter()
            .any(|e| e.code.as_deref() == Some(PERMISSION_DENIED)),
        "a failed command is not a denial"
    );
    assert_eq!(done_of(&events).status, DoneStatus::Success);
}

#[test]
fn resuming_a_session_the_cli_does_not_have_is_session_not_found() {
    moat_cli_support::testing::assert_session_not_found(
        &replay("resume-missing"),
        "No conversation found",
    );
}
