//! Testing adapter: emits a `text` and `done` success normally, but its
//! session panics when dropped, so the component traps in the resource
//! destructor. The host must swallow a failure after `done`.

use std::collections::VecDeque;

use moat_guest::{Adapter, AdapterInfo, DoneStatus, ErrorInfo, Event, Options};

/// A run whose destructor traps.
pub struct DropTrap {
    pending: VecDeque<Event>,
}

impl Adapter for DropTrap {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "drop-trap",
            env!("CARGO_PKG_VERSION"),
            "Traps when its session is dropped",
        )
    }

    fn start(_prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        let pending = VecDeque::from([Event::text("hello"), Event::done(DoneStatus::Success)]);
        Ok(DropTrap { pending })
    }

    fn next(&mut self) -> Option<Event> {
        self.pending.pop_front()
    }
}

impl Drop for DropTrap {
    fn drop(&mut self) {
        panic!("testing adapter panicked in drop on purpose");
    }
}

moat_guest::export_adapter!(DropTrap);
