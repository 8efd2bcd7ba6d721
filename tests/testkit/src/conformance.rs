//! What every adapter of a kind must do, whatever language it is written
//! in: one set of assertions run over the Rust, TypeScript and Python
//! examples (tests/all/echo.rs, sdk_typescript.rs, sdk_python.rs).

use moat_engine::{AgentEvent, DoneStatus, EventPayload};

use crate::{describe, error_codes, single_done, texts};

/// The echo contract, for `agent` run on `prompt`: `init` first; text
/// deltas that add up to the prompt; the prompt once as `text`; exactly
/// one `done`, last, success, with the prompt as its result, no tool uses
/// and no tokens (absent, not zero); no error; one session and one agent
/// throughout.
pub fn echo(events: &[AgentEvent], prompt: &str, agent: &str) {
    let shown = describe(events);
    assert!(
        matches!(
            events.first().map(|e| &e.payload),
            Some(EventPayload::Init(_))
        ),
        "init first: {shown}"
    );
    let streamed: String = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::TextDelta(d) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, prompt, "the deltas add up to the prompt: {shown}");
    assert_eq!(texts(events), [prompt], "{shown}");
    let done = single_done(events);
    assert!(
        events.last().is_some_and(AgentEvent::is_done),
        "done last: {shown}"
    );
    assert_eq!(done.status, DoneStatus::Success, "{shown}");
    assert_eq!(done.result.as_deref(), Some(prompt));
    assert_eq!(done.usage.tool_uses, 0);
    assert!(done.usage.tokens.is_none(), "echo has no tokens to report");
    assert!(error_codes(events).is_empty(), "{:?}", error_codes(events));
    let session = &events[0].session_id;
    assert!(
        events
            .iter()
            .all(|e| &e.session_id == session && e.agent == agent),
        "one session and agent {agent}: {shown}"
    );
}

/// A run stopped by the host (an abort, its drain, a timeout) whatever the
/// adapter did: exactly one `done`, last, with `status`.
pub fn stopped(events: &[AgentEvent], status: DoneStatus) {
    let done = single_done(events);
    assert!(
        events.last().is_some_and(AgentEvent::is_done),
        "done last: {}",
        describe(events)
    );
    assert_eq!(done.status, status, "{}", describe(events));
}
