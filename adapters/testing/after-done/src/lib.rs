//! Testing adapter: emits a `text` and `done` success, then more `text`
//! events, then traps. The host must yield nothing after the `done` and
//! swallow the trap.

use std::collections::VecDeque;

use moat_guest::{Adapter, AdapterInfo, DoneStatus, ErrorInfo, Event, Options};

/// A run that goes on after its `done`.
pub struct AfterDone {
    pending: VecDeque<Event>,
}

impl Adapter for AfterDone {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "after-done",
            env!("CARGO_PKG_VERSION"),
            "Emits after done, then traps",
        )
    }

    fn start(_prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        let pending = VecDeque::from([
            Event::text("before done"),
            Event::done(DoneStatus::Success),
            Event::text("after done 1"),
            Event::text("after done 2"),
        ]);
        Ok(AfterDone { pending })
    }

    fn next(&mut self) -> Option<Event> {
        match self.pending.pop_front() {
            Some(event) => Some(event),
            None => panic!("testing adapter trapped after done on purpose"),
        }
    }
}

moat_guest::export_adapter!(AfterDone);
