//! Testing adapter: emits N `text_delta` events as fast as it can, then
//! `done` success. The prompt is N (default 1000), optionally followed by
//! each delta's size in bytes (default 1). Used to measure and bound the
//! cost of many small events, and the memory large ones take.

use moat_guest::{Adapter, AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, Options};

const DEFAULT_COUNT: u64 = 1000;

/// A run of many tiny events.
pub struct Flood {
    remaining: u64,
    delta: String,
    done: bool,
}

impl Adapter for Flood {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "flood",
            env!("CARGO_PKG_VERSION"),
            "Emits N text deltas (N = prompt)",
        )
    }

    fn start(prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        let mut words = prompt.split_whitespace();
        let remaining = words
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(DEFAULT_COUNT);
        let size = words.next().and_then(|n| n.parse().ok()).unwrap_or(1usize);
        Ok(Flood {
            remaining,
            delta: "x".repeat(size.max(1)),
            done: false,
        })
    }

    fn next(&mut self) -> Option<Event> {
        if self.remaining > 0 {
            self.remaining -= 1;
            return Some(Event::text_delta(self.delta.clone()));
        }
        if self.done {
            return None;
        }
        self.done = true;
        Some(DoneEvent::new(DoneStatus::Success).into())
    }

    /// Every event is made on the spot: the host takes them in batches.
    fn ready(&self) -> bool {
        !self.done
    }
}

moat_guest::export_adapter!(Flood);
