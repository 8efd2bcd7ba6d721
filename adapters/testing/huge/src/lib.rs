//! Testing adapter: emits a 64 MiB `text`, then a `text` "after huge", then
//! `done` success. The host must bound what it copies out of the component
//! (INVALID_EVENT for an oversize event, or the memory cap) and stay up.

use std::collections::VecDeque;

use moat_guest::{Adapter, AdapterInfo, DoneStatus, ErrorInfo, Event, Options};

const HUGE_LEN: usize = 64 << 20;

/// A run with one enormous event.
pub struct Huge {
    sent_huge: bool,
    pending: VecDeque<Event>,
}

impl Adapter for Huge {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "huge",
            env!("CARGO_PKG_VERSION"),
            "Emits a 64 MiB text event",
        )
    }

    fn start(_prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        let pending = VecDeque::from([Event::text("after huge"), Event::done(DoneStatus::Success)]);
        Ok(Huge {
            sent_huge: false,
            pending,
        })
    }

    fn next(&mut self) -> Option<Event> {
        if !self.sent_huge {
            // Built on demand so the memory is only taken when it is sent.
            self.sent_huge = true;
            return Some(Event::text("x".repeat(HUGE_LEN)));
        }
        self.pending.pop_front()
    }
}

moat_guest::export_adapter!(Huge);
