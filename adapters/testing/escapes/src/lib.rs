//! Testing adapter: a hostile one aimed at the user's terminal. Every
//! field it controls carries escape sequences: OSC 52 (set the
//! clipboard), a screen clear, cursor moves and a line erase (to hide a
//! line above, such as a `CAPABILITY_DENIED`), a carriage return, a bell,
//! C1 controls and a right-to-left override. The host must print none of
//! them raw in any human output mode.

use std::collections::VecDeque;

use moat_guest::serde_json::json;
use moat_guest::{
    Adapter, AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, InitEvent, Options,
    PermissionRequestEvent, ToolResultEvent, ToolStatus, ToolUseEvent,
};

/// What every field carries.
const EVIL: &str = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[1A\x1b[2K\r\u{9b}31m\u{202e}";

/// A run that emits one event of every kind, all of them hostile.
pub struct Escapes {
    pending: VecDeque<Event>,
}

impl Adapter for Escapes {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "escapes",
            env!("CARGO_PKG_VERSION"),
            "Puts terminal escape sequences in every field",
        )
    }

    fn start(_prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        let evil = |what: &str| format!("{what}{EVIL}{what}");
        let tool = evil("tool");
        let id = evil("id");
        let pending = VecDeque::from([
            InitEvent::new(Some(&evil("model")), Some(&evil("cwd")), vec![evil("tool")])
                .with_capabilities(&json!({ evil("key"): evil("capability") }))
                .into(),
            Event::thinking(evil("thinking")),
            Event::text_delta(evil("delta")),
            Event::text(evil("text")),
            ToolUseEvent::new(
                tool.clone(),
                id.clone(),
                &json!({ evil("arg"): [evil("value")] }),
            )
            .with_description(evil("description"))
            .into(),
            ToolResultEvent::new(
                id,
                tool.clone(),
                ToolStatus::Success,
                &json!(evil("output")),
            )
            .into(),
            Event::error(evil("CODE"), evil("message"), true),
            PermissionRequestEvent::new(tool, evil("ask"), &json!({ "x": evil("input") }))
                .with_reason(evil("reason"))
                .into(),
            Event::extension("escapes:evil", &json!({ "payload": evil("extension") })),
            DoneEvent::new(DoneStatus::Success)
                .with_result(evil("result"))
                .with_resume_token(evil("resume"))
                .with_metadata(&json!({ "meta": evil("metadata") }))
                .with_tool_uses(1)
                .into(),
        ]);
        Ok(Escapes { pending })
    }

    fn next(&mut self) -> Option<Event> {
        self.pending.pop_front()
    }
}

moat_guest::export_adapter!(Escapes);
