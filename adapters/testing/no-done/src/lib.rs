//! Testing adapter: emits `init` and a `text`, then ends the stream without
//! a `done`. The host must add `error` MISSING_DONE then `done` error.

use std::collections::VecDeque;

use moat_guest::{Adapter, AdapterInfo, ErrorInfo, Event, Options};

/// A run that forgets its `done`.
pub struct NoDone {
    pending: VecDeque<Event>,
}

impl Adapter for NoDone {
    fn info() -> AdapterInfo {
        AdapterInfo::new("no-done", env!("CARGO_PKG_VERSION"), "Ends without done")
    }

    fn start(_prompt: String, options: Options) -> Result<Self, ErrorInfo> {
        let pending = VecDeque::from([
            Event::init(Some("no-done"), options.cwd.as_deref(), Vec::new()),
            Event::text("no done follows"),
        ]);
        Ok(NoDone { pending })
    }

    fn next(&mut self) -> Option<Event> {
        self.pending.pop_front()
    }
}

moat_guest::export_adapter!(NoDone);
