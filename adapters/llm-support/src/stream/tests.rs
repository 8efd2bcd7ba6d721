use moat_guest::{EventKind, Usage};

use super::*;
use crate::testing::{done, errors, metadata};

#[test]
fn a_failure_is_the_error_then_done_error_with_status_retry_and_reason() {
    let mut state = StreamState::default();
    state.set_session("msg_1");
    state.set_stop_reason("length");
    let failure = Failure {
        status: Some(429),
        retry_after: Some("7".into()),
        ..Failure::new("RATE_LIMITED", "slow down", true)
    };
    let events = state.fail(&failure, "finishReason", 2);
    assert_eq!(errors(&events)[0].code.as_deref(), Some("RATE_LIMITED"));
    let done = done(&events);
    assert_eq!(done.status, DoneStatus::Error);
    assert_eq!(done.usage, Usage::new(2), "tool calls counted, no tokens");
    assert_eq!(
        metadata(done),
        json!({"httpStatus": 429, "retryAfter": "7", "finishReason": "length"})
    );
    assert!(
        events
            .iter()
            .all(|e| e.session_id.as_deref() == Some("msg_1"))
    );
    assert!(state.ended());
    assert!(state.fail(&failure, "finishReason", 2).is_empty(), "once");
}

#[test]
fn finish_reports_the_reason_and_model_and_interruption_only_done() {
    let mut state = StreamState::default();
    state.set_model(Some("m".repeat(300).as_str()));
    state.set_stop_reason("end_turn");
    let event = state.finish(DoneEvent::new(DoneStatus::Success), "stopReason");
    let EventKind::Done(done) = &event.kind else {
        panic!("{event:?}");
    };
    let metadata = metadata(done);
    assert_eq!(metadata["stopReason"], "end_turn");
    assert!(metadata["model"].as_str().unwrap().len() <= MAX_NAME + "…".len());
    assert_eq!(event.session_id, None, "no id seen, none made up");

    let mut state = StreamState::default();
    state.set_session("");
    let event = state.interrupted(3);
    let EventKind::Done(done) = &event.kind else {
        panic!("{event:?}");
    };
    assert_eq!(done.status, DoneStatus::Interrupted);
    assert_eq!(done.usage.tool_uses, 3);
    assert_eq!(done.metadata, None);
    assert!(!state.has_session(), "an empty id is no id");
}

#[test]
fn malformed_events_quote_the_event_bounded_and_recoverably() {
    let state = StreamState::default();
    let event = state.malformed("a chunk that is not JSON", &"x".repeat(1000));
    let EventKind::Error(error) = &event.kind else {
        panic!("{event:?}");
    };
    assert_eq!(error.code.as_deref(), Some(MALFORMED_EVENT));
    assert!(error.recoverable);
    assert!(
        error
            .message
            .starts_with("the server sent a chunk that is not JSON; skipped: xxx")
    );
    assert!(error.message.len() < 300, "{}", error.message.len());
}
