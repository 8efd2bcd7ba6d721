//! The translator on the recordings of the real CLI
//! (`tests/fixtures/cli/codex/`), and on edge cases of untrusted output.

use super::*;
use moat_cli_support::testing::{
    Fixture, assert_all_in_session, assert_ended, done_of, errors, interrupt, tool_result,
};
use moat_cli_support::{Exit, Translator, translate_all};
use moat_guest::EventKind;

fn context() -> RunContext {
    RunContext {
        model: Some("gpt-5-codex".into()),
        cwd: Some("/work".into()),
        resumed: false,
    }
}

fn replay(scenario: &str) -> Vec<Event> {
    Fixture::load("codex", scenario).translate(&mut CodexTranslator::new(context()))
}

/// The thread id the recording announced on its first line.
fn recorded_thread(scenario: &str) -> String {
    Fixture::load("codex", scenario).first_line_field("thread_id")
}

#[test]
fn thread_started_is_init_and_the_thread_id_is_session_and_resume_token() {
    let events = replay("text");
    let thread = recorded_thread("text");
    let EventKind::Init(init) = &events[0].kind else {
        panic!("init first")
    };
    assert_eq!(init.model.as_deref(), Some("gpt-5-codex"));
    assert_eq!(init.cwd.as_deref(), Some("/work"));
    assert_all_in_session(&events, &thread);
    let done = done_of(&events);
    assert_ended(done, DoneStatus::Success, &thread);
    assert_eq!(
        done.result.as_deref(),
        Some("Hello from the moat backend stub.")
    );
    assert!(
        events.contains(&Event::text("Hello from the moat backend stub.").with_session(thread))
    );
}

#[test]
fn turn_usage_of_a_fresh_thread_is_reported_with_cache_and_reasoning_details() {
    let events = replay("thinking");
    let tokens = done_of(&events).usage.tokens.expect("tokens");
    // The stub's numbers: 2300 input of which 2048 cached; 16 output of
    // which 11 reasoning. Codex's cache-write zero is not a measurement.
    assert_eq!(tokens.input.total, 2300);
    assert_eq!(tokens.input.cache_read, Some(2048));
    assert_eq!(tokens.input.cache_write, None);
    assert_eq!(tokens.output.total, 16);
    assert_eq!(tokens.output.reasoning, Some(11));
    assert_eq!(tokens.coverage, TokenCoverage::Complete);
}

#[test]
fn a_resumed_thread_leaves_tokens_out_and_keeps_the_cumulative_counters_as_metadata() {
    // The recording continues the thread of the `text` recording: its
    // counters cover both turns (2 × 2300 input, 2 × 6 output).
    let fixture = Fixture::load("codex", "resume");
    let events = fixture.translate(&mut CodexTranslator::new(RunContext {
        resumed: true,
        ..context()
    }));
    let done = done_of(&events);
    assert_ended(done, DoneStatus::Success, &recorded_thread("resume"));
    assert!(done.usage.tokens.is_none());
    let metadata: Value =
        moat_guest::serde_json::from_str(done.metadata.as_deref().unwrap()).unwrap();
    assert_eq!(metadata["threadUsage"]["input_tokens"], 4600);
    assert_eq!(metadata["threadUsage"]["output_tokens"], 12);
}

#[test]
fn reasoning_is_thinking() {
    let events = replay("thinking");
    assert!(events.iter().any(|e| e.kind
        == EventKind::Thinking(
            "The user wants a short greeting, so I will answer briefly.".into()
        )));
}

#[test]
fn command_execution_is_tool_use_then_tool_result_with_its_output() {
    let events = replay("tool-use");
    let (use_at, call) = events
        .iter()
        .enumerate()
        .find_map(|(at, e)| match &e.kind {
            EventKind::ToolUse(call) => Some((at, call)),
            _ => None,
        })
        .expect("a tool call");
    assert_eq!(call.tool_name, SHELL_TOOL);
    let input: Value = moat_guest::serde_json::from_str(&call.input).unwrap();
    assert!(
        input["command"]
            .as_str()
            .unwrap()
            .contains("echo moat-tool-use")
    );
    let (result_at, result) = events
        .iter()
        .enumerate()
        .find_map(|(at, e)| match &e.kind {
            EventKind::ToolResult(result) => Some((at, result)),
            _ => None,
        })
        .expect("a tool result");
    assert!(use_at < result_at);
    assert_eq!(result.tool_use_id, call.tool_use_id);
    assert_eq!(result.status, ToolStatus::Success);
    assert_eq!(result.output, "\"moat-tool-use\\n\"");
    let done = done_of(&events);
    assert_eq!(done.usage.tool_uses, 1);
    assert_eq!(
        done.result.as_deref(),
        Some("The command printed moat-tool-use.")
    );
}

#[test]
fn error_items_and_error_lines_are_recoverable() {
    // Every recording starts with a model-metadata warning item.
    let events = replay("text");
    let warnings = errors(&events);
    assert!(!warnings.is_empty());
    assert!(
        warnings
            .iter()
            .all(|w| w.recoverable && w.code.as_deref() == Some(CODEX_WARNING))
    );
    assert_eq!(done_of(&events).status, DoneStatus::Success);
}

#[test]
fn turn_failed_is_a_fatal_error_then_done_error() {
    for scenario in ["api-error", "mid-turn-failure"] {
        let events = replay(scenario);
        let errors = errors(&events);
        let fatal = errors.last().expect("errors");
        assert_eq!(fatal.code.as_deref(), Some(TURN_FAILED), "{scenario}");
        assert!(!fatal.recoverable);
        let done = done_of(&events);
        assert_eq!(done.status, DoneStatus::Error, "{scenario}");
        assert!(done.usage.tokens.is_none());
        assert_eq!(
            done.resume_token.as_deref(),
            Some(recorded_thread(scenario).as_str())
        );
    }
    let events = replay("api-error");
    assert!(
        errors(&events)
            .iter()
            .any(|e| e.message.contains("scenario api-error"))
    );
}

#[test]
fn declined_and_failed_commands_and_mcp_calls_get_their_status() {
    let lines = [
        r#"{"type":"thread.started","thread_id":"t"}"#,
        r#"{"type":"item.completed","item":{"id":"c1","type":"command_execution","command":"rm -rf /","aggregated_output":"","exit_code":null,"status":"declined"}}"#,
        r#"{"type":"item.completed","item":{"id":"c2","type":"command_execution","command":"false","aggregated_output":"","exit_code":1,"status":"failed"}}"#,
        r#"{"type":"item.started","item":{"id":"m1","type":"mcp_tool_call","server":"gh","tool":"issue","arguments":{"n":1},"status":"in_progress"}}"#,
        r#"{"type":"item.completed","item":{"id":"m1","type":"mcp_tool_call","server":"gh","tool":"issue","arguments":{"n":1},"result":{"content":[]},"status":"completed"}}"#,
        r#"{"type":"item.completed","item":{"id":"f1","type":"file_change","changes":[{"path":"a.rs","kind":"update"}],"status":"completed"}}"#,
        r#"{"type":"error","message":"Reconnecting... 1/5"}"#,
        r#"{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":2,"reasoning_output_tokens":0}}"#,
    ];
    let events = translate_all(
        &mut CodexTranslator::new(context()),
        lines,
        Exit::code(0),
        "",
    );
    let results: Vec<(String, ToolStatus)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult(r) => Some((r.tool_name.clone(), r.status)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            ("shell".to_owned(), ToolStatus::Denied),
            ("shell".to_owned(), ToolStatus::Error),
            ("mcp__gh__issue".to_owned(), ToolStatus::Success),
        ]
    );
    let uses = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ToolUse(_)))
        .count();
    assert_eq!(uses, 3, "one tool_use per call, started or not");
    assert!(events.iter().any(|e| matches!(&e.kind,
        EventKind::Extension(x) if x.name == "codex:file_change" && x.payload.contains("a.rs"))));
    assert_eq!(errors(&events).len(), 1);
    let done = done_of(&events);
    assert_eq!(done.usage.tool_uses, 3);
    assert_eq!(done.usage.tokens.unwrap().input.cache_read, Some(0));
}

#[test]
fn unknown_types_and_bad_lines_are_ignored() {
    let mut translator = CodexTranslator::new(context());
    for line in [
        r#"{"type":"turn.started"}"#,
        r#"{"type":"item.updated","item":{"id":"x","type":"todo_list"}}"#,
        r#"{"type":"brand.new"}"#,
        r#"{"type":"item.completed","item":{"type":"agent_message","text":"no id"}}"#,
        r#"{"type":"item.completed"}"#,
        "garbage",
        "",
    ] {
        assert_eq!(translator.line(line), [], "{line:?}");
    }
}

#[test]
fn a_partial_last_line_is_dropped_and_the_exit_ends_the_run() {
    let fixture = Fixture::load("codex", "text");
    let mut lines: Vec<&str> = fixture.stdout.iter().map(String::as_str).collect();
    let last = lines.pop().unwrap();
    lines.push(&last[..last.len() - 5]);
    let events = translate_all(
        &mut CodexTranslator::new(context()),
        lines,
        Exit {
            code: None,
            signal: Some(9),
        },
        "",
    );
    let fatal = errors(&events).into_iter().last().unwrap();
    assert!(
        fatal.message.contains("killed by signal 9"),
        "{}",
        fatal.message
    );
    let done = done_of(&events);
    assert_ended(done, DoneStatus::Error, &recorded_thread("text"));
}

#[test]
fn interruption_mid_tool_is_resumable() {
    let fixture = Fixture::load("codex", "tool-use");
    let mut translator = CodexTranslator::new(context());
    fixture.feed_until(&mut translator, |l| {
        l.contains("item.completed\",\"item\":{\"id\":\"item_2\"")
    });
    let done = interrupt(&mut translator);
    assert_ended(&done, DoneStatus::Interrupted, &recorded_thread("tool-use"));
    assert_eq!(done.usage.tool_uses, 1);
    assert!(translator.is_done());
    assert_eq!(translator.line(&fixture.stdout[0]), []);
}

#[test]
fn a_failing_command_is_an_error_result_with_its_output() {
    let events = replay("tool-error");
    let result = tool_result(&events);
    assert_eq!(
        (result.tool_name.as_str(), result.status),
        (SHELL_TOOL, ToolStatus::Error)
    );
    assert!(result.output.contains("No such file"), "{}", result.output);
    let done = done_of(&events);
    assert_eq!(
        (done.status, done.usage.tool_uses),
        (DoneStatus::Success, 1)
    );
}

#[test]
fn a_command_the_read_only_sandbox_refuses_leaves_no_item_and_none_is_invented() {
    // Codex 0.169.0 in --sandbox=read-only prints no item at all for the
    // write it refused (the recording has only the agent's reply).
    let events = replay("permission-denial");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::ToolUse(_) | EventKind::ToolResult(_)))
    );
    assert_eq!(done_of(&events).usage.tool_uses, 0);
}

#[test]
fn resuming_a_session_the_cli_does_not_have_is_session_not_found() {
    moat_cli_support::testing::assert_session_not_found(
        &replay("resume-missing"),
        "no rollout found",
    );
}
