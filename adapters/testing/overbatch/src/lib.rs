//! A component built against contract 0.3.0 directly from its WIT, without
//! the guest SDK (which never breaks these rules), that abuses `next-batch`:
//!
//! - prompt `over`: one event more than `max`. The host must fail the run
//!   saying the contract was broken, and take none of them.
//! - prompt `after-done`: a text, a `done`, then more texts in the same
//!   list. The host must end the run at the `done` and show nothing after.

wit_bindgen::generate!({
    path: "../../../wit/v0.3.0",
    world: "adapter-world",
});

use exports::moat::adapter::adapter::{Guest, GuestSession, Session};
use moat::adapter::types::{
    AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, EventKind, Needs, Options, Usage,
};

struct Overbatch;

struct Run {
    prompt: String,
}

impl Guest for Overbatch {
    type Session = Run;

    fn info() -> AdapterInfo {
        AdapterInfo {
            name: "overbatch".into(),
            version: "0.0.0".into(),
            description: "Returns more events than asked for".into(),
            needs: Needs {
                hosts: Vec::new(),
                env: Vec::new(),
                programs: Vec::new(),
            },
            tool_patterns: false,
        }
    }

    fn run(prompt: String, _options: Options) -> Result<Session, ErrorInfo> {
        Ok(Session::new(Run { prompt }))
    }
}

impl GuestSession for Run {
    fn next_batch(&self, max: u32) -> Vec<Event> {
        let event = |kind| Event {
            session_id: None,
            kind,
        };
        if self.prompt == "after-done" {
            let done = DoneEvent {
                status: DoneStatus::Success,
                result: Some("before".into()),
                resume_token: None,
                usage: Usage {
                    tool_uses: 0,
                    tokens: None,
                    cost: None,
                },
                duration_ms: None,
                metadata: None,
            };
            return vec![
                event(EventKind::Text("before".into())),
                event(EventKind::Done(done)),
                event(EventKind::Text("after".into())),
                event(EventKind::Text("after".into())),
            ];
        }
        (0..=max)
            .map(|n| event(EventKind::TextDelta(n.to_string())))
            .collect()
    }
}

export!(Overbatch);
