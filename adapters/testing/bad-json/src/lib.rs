//! Testing adapter: emits a `tool_use` whose input is not JSON, then a
//! `text` "still here", then `done` success. The host must drop the bad
//! event with a recoverable INVALID_EVENT error and go on.

use std::collections::VecDeque;

use moat_guest::{
    Adapter, AdapterInfo, DoneStatus, ErrorInfo, Event, EventKind, Options, ToolUseEvent,
};

/// A run with one malformed event.
pub struct BadJson {
    pending: VecDeque<Event>,
}

impl Adapter for BadJson {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "bad-json",
            env!("CARGO_PKG_VERSION"),
            "Emits a tool_use with invalid JSON",
        )
    }

    fn start(_prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        // Built by hand: the SDK's builders only produce valid JSON.
        let bad = EventKind::ToolUse(ToolUseEvent {
            tool_name: "bad_tool".into(),
            tool_use_id: "bad-1".into(),
            input: "{not json".into(),
            description: None,
        });
        let pending = VecDeque::from([
            Event::new(bad),
            Event::text("still here"),
            Event::done(DoneStatus::Success),
        ]);
        Ok(BadJson { pending })
    }

    fn next(&mut self) -> Option<Event> {
        self.pending.pop_front()
    }
}

moat_guest::export_adapter!(BadJson);
