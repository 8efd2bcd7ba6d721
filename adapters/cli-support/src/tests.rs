use super::*;
use moat_guest::json::json;
use moat_guest::{EventKind, Options};

#[test]
fn only_json_objects_parse() {
    assert!(parse_line(r#"{"type":"x"}"#).is_some());
    assert!(parse_line("{\"type\":\"x\"}\r").is_some());
    for bad in ["", "not json", "[1]", "42", r#"{"type":"x""#, "\u{0}"] {
        assert!(parse_line(bad).is_none(), "{bad:?}");
    }
    let huge = format!(r#"{{"a":"{}"}}"#, "x".repeat(MAX_LINE_BYTES));
    assert!(oversize(&huge) && parse_line(&huge).is_none());
}

#[test]
fn session_ids_are_bounded_non_empty_strings() {
    assert_eq!(session_id(&json!("abc")).as_deref(), Some("abc"));
    assert_eq!(session_id(&json!("")), None);
    assert_eq!(session_id(&json!(12)), None);
    assert_eq!(session_id(&json!("x".repeat(300))), None);
}

#[test]
fn clip_cuts_on_a_character_boundary() {
    assert_eq!(clip("héllo", 2), "h");
    assert_eq!(clip("hi", 10), "hi");
}

#[test]
fn stderr_quote_keeps_the_last_non_blank_lines_within_the_bound() {
    assert_eq!(stderr_quote("a\n\n  \nb\n"), "a\nb");
    let long: String = (0..1000).map(|i| format!("line {i}\n")).collect();
    let quote = stderr_quote(&long);
    assert!(quote.len() <= MAX_STDERR_QUOTE && quote.ends_with("line 999"));
    let one = "y".repeat(5000) + "END";
    assert!(stderr_quote(&one).ends_with("END"));
    assert_eq!(stderr_quote(""), "");
}

#[test]
fn failure_is_an_error_then_done_with_the_resume_token() {
    let events = failure(
        "claude",
        Exit::code(2),
        "boom\n",
        DoneStatus::Error,
        CLI_FAILED,
        Some("s1"),
        3,
    );
    let [error, done] = events.as_slice() else {
        panic!("two events")
    };
    let EventKind::Error(error) = &error.kind else {
        panic!("error first")
    };
    assert_eq!(error.code.as_deref(), Some(CLI_FAILED));
    assert!(error.message.contains("exited with code 2") && error.message.contains("boom"));
    let EventKind::Done(done) = &done.kind else {
        panic!("done last")
    };
    assert_eq!(done.status, DoneStatus::Error);
    assert_eq!(done.resume_token.as_deref(), Some("s1"));
    assert_eq!(done.usage.tool_uses, 3);
    assert!(done.usage.tokens.is_none());
}

#[test]
fn interrupted_carries_the_session_when_known() {
    let EventKind::Done(done) = interrupted(Some("s"), 1).kind else {
        panic!("done")
    };
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert_eq!(done.resume_token.as_deref(), Some("s"));
    let EventKind::Done(done) = interrupted(None, 0).kind else {
        panic!("done")
    };
    assert_eq!(done.resume_token, None);
}

#[test]
fn tool_output_joins_text_blocks_and_keeps_other_values() {
    assert_eq!(tool_output(&json!("x")), json!("x"));
    assert_eq!(
        tool_output(&json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])),
        json!("ab")
    );
    let mixed = json!([{"type": "image", "source": {}}]);
    assert_eq!(tool_output(&mixed), mixed);
    assert_eq!(tool_output(&json!([])), json!([]));
}

#[test]
fn tool_input_is_always_an_object() {
    assert_eq!(tool_input(&json!({"a": 1})), json!({"a": 1}));
    assert_eq!(tool_input(&json!(null)), json!({}));
    assert_eq!(tool_input(&json!("ls")), json!({"input": "ls"}));
}

#[test]
fn tracker_counts_distinct_ids_and_names_them() {
    let mut tools = ToolTracker::new();
    assert!(tools.record("t1", "Bash"));
    assert!(!tools.record("t1", "Bash"));
    assert!(tools.record("t2", "Read"));
    assert_eq!(tools.count(), 2);
    assert_eq!(tools.name("t2"), "Read");
    assert_eq!(tools.name("nope"), "unknown");
    assert!(tools.seen("t1") && !tools.seen("t3"));
}

#[test]
fn exact_names_refuse_patterns_and_separators() {
    let ok = vec!["Bash".to_owned(), "mcp__x__y".to_owned()];
    assert!(check_exact_names("claude", "--allowed-tools", &ok).is_ok());
    for bad in ["Bash(git *)", "a,b", "a b", "", "Edit*"] {
        let error = check_exact_names("claude", "--allowed-tools", &[bad.to_owned()]).unwrap_err();
        assert_eq!(error.code.as_deref(), Some("UNSUPPORTED_OPTION"), "{bad}");
    }
}

#[test]
fn the_program_is_the_bare_name_or_an_absolute_path_from_extra() {
    let with_extra = |extra: &str| Options {
        extra: Some(extra.to_owned()),
        ..Options::default()
    };
    assert_eq!(
        program("codex", "codex", &Options::default()).unwrap(),
        "codex"
    );
    assert_eq!(
        program(
            "codex",
            "codex",
            &with_extra(r#"{"program": "/opt/codex/bin/codex"}"#)
        )
        .unwrap(),
        "/opt/codex/bin/codex"
    );
    for bad in [
        r#"{"program": "codex"}"#,
        r#"{"program": 1}"#,
        r#"{"verbose": true}"#,
        "[1]",
    ] {
        assert!(
            program("codex", "codex", &with_extra(bad)).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn testing_helpers_pick_events_by_kind_and_require_one_final_done() {
    use crate::testing::{deltas, done_of, errors, texts, tool_calls, tool_results};
    let events = [
        Event::text_delta("He"),
        Event::text_delta("llo"),
        Event::text("Hello"),
        Event::tool_use("Bash", "t1", &json!({})),
        Event::tool_result("t1", "Bash", moat_guest::ToolStatus::Success, &json!("ok")),
        Event::error("failed", "boom", true),
        Event::done(DoneStatus::Success),
    ];
    assert_eq!(deltas(&events), "Hello");
    assert_eq!(texts(&events), ["Hello"]);
    assert_eq!(tool_calls(&events)[0].tool_name, "Bash");
    assert_eq!(tool_results(&events)[0].output, "\"ok\"");
    assert_eq!(errors(&events)[0].message, "boom");
    assert_eq!(done_of(&events).status, DoneStatus::Success);
}

#[test]
fn run_state_accepts_objects_until_done_and_ends_the_run_once() {
    let mut run = RunState::default();
    let mut out = Vec::new();
    assert!(run.accept("fake", "not json", &mut out).is_none());
    assert!(out.is_empty());
    assert_eq!(
        run.accept("fake", r#"{"type":"x"}"#, &mut out).unwrap()["type"],
        "x"
    );
    run.session = Some("s".into());
    let warning = run.reported_error("W", None, "it failed", true);
    assert_eq!(warning.session_id.as_deref(), Some("s"));
    let EventKind::Error(error) = warning.kind else {
        panic!("error")
    };
    assert_eq!(
        (error.message.as_str(), error.recoverable),
        ("it failed", true)
    );
    let events = run.fail("fake", Exit::code(2), "", DoneStatus::Error, CLI_FAILED);
    assert_eq!(events.len(), 2);
    assert!(run.done && events[1].is_done());
    assert_eq!(
        run.fail("fake", Exit::code(2), "", DoneStatus::Error, CLI_FAILED),
        []
    );
    assert!(run.accept("fake", r#"{"type":"x"}"#, &mut out).is_none());
    assert!(run.interrupt().is_done());
}

#[test]
fn token_reports_of_failed_runs_are_partial() {
    use moat_guest::{InputTokens, TokenCoverage};
    assert_eq!(
        token_report(true, InputTokens::new(1), 2).coverage,
        TokenCoverage::Partial
    );
    assert_eq!(
        token_report(false, InputTokens::new(1), 2).coverage,
        TokenCoverage::Complete
    );
}

#[test]
fn an_invocation_runs_in_the_run_cwd_with_only_the_variables_added() {
    let options = Options {
        cwd: Some("/work".into()),
        ..Options::default()
    };
    let call = Invocation::new("cli".into(), vec!["-p".into()], &options).with_env(&[("A", "1")]);
    assert_eq!(call.cwd.as_deref(), Some("/work"));
    assert_eq!(call.env, [("A".to_owned(), "1".to_owned())]);
    assert!(call.has("-p"));
}

#[test]
fn turns_are_implied_by_model_output_after_tool_results_and_a_reported_count_is_kept() {
    use moat_guest::json::json;
    use moat_guest::{DoneEvent, DoneStatus, Event, TURNS_METADATA_KEY, ToolStatus};

    let run = crate::RunState::default();
    let turns = |run: &crate::RunState, done: Event| -> Option<u64> {
        let moat_guest::EventKind::Done(done) = run.tag(done).kind else {
            panic!("a done");
        };
        let metadata: moat_guest::json::Value =
            moat_guest::serde_json::from_str(done.metadata.as_deref()?).ok()?;
        metadata[TURNS_METADATA_KEY].as_u64()
    };
    for event in [
        Event::thinking("plan"),
        Event::text_delta("Let me look."),
        Event::tool_use("Read", "t1", &json!({})),
        Event::tool_use("Read", "t2", &json!({})),
        Event::tool_result("t1", "Read", ToolStatus::Success, &json!("a")),
        Event::tool_result("t2", "Read", ToolStatus::Success, &json!("b")),
        Event::text("Both read."),
        Event::tool_use("Bash", "t3", &json!({})),
        Event::tool_result("t3", "Bash", ToolStatus::Success, &json!("")),
        Event::text("Done."),
    ] {
        run.tag(event);
    }
    assert_eq!(
        turns(&run, DoneEvent::new(DoneStatus::Success).into()),
        Some(3)
    );
    let reported = DoneEvent::new(DoneStatus::Success).with_metadata(&json!({"turns": 7, "x": 1}));
    assert_eq!(
        turns(&run, reported.into()),
        Some(7),
        "the CLI's own count wins"
    );
    assert_eq!(
        turns(
            &crate::RunState::default(),
            DoneEvent::new(DoneStatus::Error).into()
        ),
        None,
        "no model output: no turns"
    );
}
