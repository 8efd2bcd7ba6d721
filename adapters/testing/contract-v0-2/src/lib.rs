//! A component built against contract `moat:adapter@0.2.0` directly from
//! its WIT (`wit/v0.2.0`), without the guest SDK (which builds against the
//! newest version): the host must keep running it through its 0.2.0
//! module, and refuse there the options 0.2.0 cannot carry. It answers
//! every prompt with one text naming its contract, then `done`.

use std::cell::RefCell;

wit_bindgen::generate!({
    path: "../../../wit/v0.2.0",
    world: "adapter-world",
});

use exports::moat::adapter::adapter::{Guest, GuestSession, Session};
use moat::adapter::types::{
    AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, EventKind, Needs, Options, Usage,
};

struct V02;

struct Run {
    events: RefCell<Vec<Event>>,
}

impl Guest for V02 {
    type Session = Run;

    fn info() -> AdapterInfo {
        AdapterInfo {
            name: "contract-v0-2".into(),
            version: "0.0.0".into(),
            description: "Built against moat:adapter@0.2.0".into(),
            needs: Needs {
                hosts: Vec::new(),
                env: Vec::new(),
                programs: Vec::new(),
            },
            tool_patterns: false,
        }
    }

    fn run(prompt: String, _options: Options) -> Result<Session, ErrorInfo> {
        let event = |kind| Event {
            session_id: None,
            kind,
        };
        let done = DoneEvent {
            status: DoneStatus::Success,
            result: Some(format!("0.2.0: {prompt}")),
            resume_token: None,
            usage: Usage {
                tool_uses: 0,
                tokens: None,
                cost: None,
            },
            duration_ms: None,
            metadata: None,
        };
        // Popped from the end.
        let events = vec![
            event(EventKind::Done(done)),
            event(EventKind::Text(format!("0.2.0: {prompt}"))),
        ];
        Ok(Session::new(Run {
            events: RefCell::new(events),
        }))
    }
}

impl GuestSession for Run {
    fn next(&self) -> Option<Event> {
        self.events.borrow_mut().pop()
    }
}

export!(V02);
