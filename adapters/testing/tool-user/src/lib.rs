//! Testing adapter: calls every tool named in the prompt (comma-separated),
//! each as a `tool_use` followed by its `tool_result`, then ends with
//! `done` success. It records the tool lists it was given in `init`, so a
//! test can see what the host passed on; the host must stop it the moment
//! it calls a tool outside the run's allowed set.

use std::collections::VecDeque;

use moat_guest::serde_json::json;
use moat_guest::{
    Adapter, AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, InitEvent, Options, ToolStatus,
};

/// A run that calls the tools it was told to.
pub struct ToolUser {
    pending: VecDeque<Event>,
}

impl Adapter for ToolUser {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "tool-user",
            env!("CARGO_PKG_VERSION"),
            "Calls the tools named in the prompt",
        )
    }

    fn start(prompt: String, options: Options) -> Result<Self, ErrorInfo> {
        let tools: Vec<&str> = prompt
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        let capabilities = json!({
            "allowedTools": options.allowed_tools,
            "disallowedTools": options.disallowed_tools,
        });
        let mut pending = VecDeque::from([Event::from(
            InitEvent::new(None, None, Vec::new()).with_capabilities(&capabilities),
        )]);
        for (index, &tool) in tools.iter().enumerate() {
            let id = format!("call-{index}");
            pending.push_back(Event::tool_use(tool, &id, &json!({ "n": index })));
            pending.push_back(Event::tool_result(
                &id,
                tool,
                ToolStatus::Success,
                &json!("ok"),
            ));
        }
        let done = DoneEvent::new(DoneStatus::Success).with_tool_uses(tools.len() as u32);
        pending.push_back(done.into());
        Ok(ToolUser { pending })
    }

    fn next(&mut self) -> Option<Event> {
        self.pending.pop_front()
    }
}

moat_guest::export_adapter!(ToolUser);
