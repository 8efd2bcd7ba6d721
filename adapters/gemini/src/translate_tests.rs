//! The translator on the recordings of the real CLI
//! (`tests/fixtures/cli/gemini/`), and on edge cases of untrusted output.

use super::*;
use moat_cli_support::testing::{
    Fixture, assert_ended, assert_succeeded, deltas, done_of, errors, interrupt, texts, tool_call,
    tool_result,
};
use moat_cli_support::{Translator, translate_all};
use moat_guest::{EventKind, TokenCoverage};

fn context() -> RunContext {
    RunContext {
        cwd: Some("/work".into()),
    }
}

fn replay(scenario: &str) -> Vec<Event> {
    Fixture::load("gemini", scenario).translate(&mut GeminiTranslator::new(context()))
}

/// The session id the recording announced on its first line.
fn recorded_session(scenario: &str) -> String {
    Fixture::load("gemini", scenario).first_line_field("session_id")
}

#[test]
fn text_run_streams_deltas_assembles_the_text_and_skips_the_echoed_prompt() {
    let events = replay("text");
    let EventKind::Init(init) = &events[0].kind else {
        panic!("init first")
    };
    assert_eq!(init.model.as_deref(), Some("gemini-2.5-flash"));
    assert_eq!(init.cwd.as_deref(), Some("/work"));
    assert_eq!(deltas(&events), "Hello from the moat backend stub.");
    assert_eq!(texts(&events), ["Hello from the moat backend stub."]);
    assert!(
        !events.iter().any(|e| matches!(&e.kind, EventKind::Text(t) | EventKind::TextDelta(t) if t.contains("Say hello"))),
        "the user's prompt is not assistant output"
    );
    let session = recorded_session("text");
    let done = assert_succeeded(&events, "Hello from the moat backend stub.", &session);
    // The stub: 5100 prompt tokens of which 4096 cached, 6 output.
    let tokens = done.usage.tokens.expect("tokens");
    assert_eq!(tokens.input.total, 5100);
    assert_eq!(tokens.input.cache_read, Some(4096));
    assert_eq!(tokens.output.total, 6);
    assert_eq!(tokens.coverage, TokenCoverage::Complete);
}

#[test]
fn tool_turn_flushes_the_text_before_the_call_and_pairs_the_result() {
    let events = replay("tool-use");
    assert_eq!(
        texts(&events),
        [
            "Let me run a command.",
            "The command printed moat-tool-use."
        ]
    );
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match &e.kind {
            EventKind::Text(_) => "text",
            EventKind::ToolUse(_) => "tool_use",
            EventKind::ToolResult(_) => "tool_result",
            EventKind::Done(_) => "done",
            _ => "",
        })
        .filter(|kind| !kind.is_empty())
        .collect();
    assert_eq!(kinds, ["text", "tool_use", "tool_result", "text", "done"]);
    let call = tool_call(&events);
    assert_eq!(call.tool_name, "run_shell_command");
    let result = tool_result(&events);
    assert_eq!(
        (
            result.tool_use_id.as_str(),
            result.tool_name.as_str(),
            result.status
        ),
        (
            call.tool_use_id.as_str(),
            "run_shell_command",
            ToolStatus::Success
        )
    );
    assert_eq!(result.output, "\"moat-tool-use\"");
    assert_eq!(done_of(&events).usage.tool_uses, 1);
}

#[test]
fn api_error_result_is_an_error_then_done_error_without_made_up_tokens() {
    let events = replay("api-error");
    let errors = errors(&events);
    let [error] = errors.as_slice() else {
        panic!("one error: {errors:?}")
    };
    assert_eq!(error.code.as_deref(), Some(GEMINI_ERROR));
    assert!(error.message.contains("scenario api-error"));
    let done = done_of(&events);
    assert_ended(done, DoneStatus::Error, &recorded_session("api-error"));
    assert!(
        done.usage.tokens.is_none(),
        "all-zero stats of a failed run are not a measurement"
    );
}

#[test]
fn mid_turn_failure_keeps_the_partial_text_then_ends_in_error() {
    let events = replay("mid-turn-failure");
    assert_eq!(texts(&events), ["This answer is cut off "]);
    assert_eq!(done_of(&events).status, DoneStatus::Error);
    assert!(
        errors(&events)
            .iter()
            .any(|e| e.message.contains("terminated"))
    );
}

#[test]
fn the_turn_limit_result_is_done_max_turns_with_usage() {
    let events = replay("max-turns");
    let done = done_of(&events);
    assert_eq!(done.status, DoneStatus::MaxTurns);
    assert!(errors(&events).is_empty());
    let tokens = done.usage.tokens.expect("tokens");
    assert_eq!(tokens.input.total, 5100);
    assert_eq!(tokens.coverage, TokenCoverage::Partial);
}

#[test]
fn exit_code_53_without_a_result_is_max_turns() {
    let fixture = Fixture::load("gemini", "max-turns");
    let lines: Vec<&str> = fixture
        .stdout
        .iter()
        .map(String::as_str)
        .filter(|line| !line.contains("\"type\":\"result\""))
        .collect();
    let events = translate_all(
        &mut GeminiTranslator::new(context()),
        lines,
        Exit::code(EXIT_TURN_LIMIT),
        "",
    );
    assert_eq!(done_of(&events).status, DoneStatus::MaxTurns);
    let events = translate_all(
        &mut GeminiTranslator::new(context()),
        ["{\"type\":\"init\",\"session_id\":\"s\",\"model\":\"m\"}"],
        Exit::code(144),
        "boom",
    );
    assert_eq!(done_of(&events).status, DoneStatus::Error);
}

#[test]
fn error_lines_are_recoverable_and_failed_tools_are_errors() {
    let lines = [
        r#"{"type":"init","session_id":"s","model":"m"}"#,
        r#"{"type":"message","role":"assistant","content":"Trying","delta":true}"#,
        r#"{"type":"error","severity":"warning","message":"Loop detected"}"#,
        r#"{"type":"tool_use","tool_name":"read_file","tool_id":"r1","parameters":{"path":"x"}}"#,
        r#"{"type":"tool_result","tool_id":"r1","status":"error","error":{"type":"not_found","message":"no x"}}"#,
        r#"{"type":"message","role":"assistant","content":"Whole message."}"#,
        r#"{"type":"result","status":"success","stats":{"total_tokens":3,"input_tokens":2,"output_tokens":1,"cached":0}}"#,
    ];
    let events = translate_all(
        &mut GeminiTranslator::new(context()),
        lines,
        Exit::code(0),
        "",
    );
    assert!(errors(&events).iter().all(|e| e.recoverable));
    assert_eq!(texts(&events), ["Trying", "Whole message."]);
    let result = tool_result(&events);
    assert_eq!(result.status, ToolStatus::Error);
    assert!(result.output.contains("no x"));
    assert_eq!(
        done_of(&events).result.as_deref(),
        Some("Whole message."),
        "the text before the tool call is narration, not the answer"
    );
}

#[test]
fn unknown_types_and_bad_lines_are_ignored() {
    let mut translator = GeminiTranslator::new(context());
    for line in [
        r#"{"type":"future_thing"}"#,
        r#"{"type":"message","role":"assistant"}"#,
        r#"{"type":"tool_use","tool_name":"x"}"#,
        r#"{"type":"tool_result"}"#,
        "{not json",
        "",
    ] {
        assert_eq!(translator.line(line), [], "{line:?}");
    }
}

#[test]
fn a_partial_last_line_is_dropped_and_streamed_text_still_flushes() {
    let fixture = Fixture::load("gemini", "text");
    let mut lines: Vec<&str> = fixture.stdout.iter().map(String::as_str).collect();
    let last = lines.pop().unwrap();
    lines.push(&last[..20]);
    let events = translate_all(
        &mut GeminiTranslator::new(context()),
        lines,
        Exit::code(1),
        "",
    );
    assert_eq!(texts(&events), ["Hello from the moat backend stub."]);
    assert_eq!(done_of(&events).status, DoneStatus::Error);
}

#[test]
fn interruption_mid_text_is_resumable() {
    let fixture = Fixture::load("gemini", "text");
    let mut translator = GeminiTranslator::new(context());
    for line in fixture.stdout.iter().take(4) {
        translator.line(line);
    }
    let done = interrupt(&mut translator);
    assert_ended(&done, DoneStatus::Interrupted, &recorded_session("text"));
    assert!(translator.is_done());
}

#[test]
fn a_failing_shell_command_is_what_gemini_says_a_successful_call_with_its_output() {
    // Gemini CLI 0.61.0 reports the shell tool call itself as a success
    // whatever the command's exit code; the adapter passes that on.
    let events = replay("tool-error");
    let result = tool_result(&events);
    assert_eq!(result.status, ToolStatus::Success);
    assert!(result.output.contains("No such file"), "{}", result.output);
    assert_eq!(texts(&events), ["The file does not exist."]);
}

#[test]
fn resuming_a_session_the_cli_does_not_have_is_session_not_found() {
    moat_cli_support::testing::assert_session_not_found(
        &replay("resume-missing"),
        "No previous sessions found",
    );
}
