//! Testing adapter: sleeps on a WASI clock before each event, emitting
//! `text` "tick N" after each sleep, 1000 times, then `done` success.
//!
//! The prompt gives the sleep in milliseconds (the first number in it,
//! default 10000). It ignores interruption, so the host must cut it off
//! while it is blocked in a host call, unless the prompt contains
//! "cooperate": then it checks `interrupted()` after each sleep and ends
//! with `done` interrupted.

use std::time::Duration;

use moat_guest::{Adapter, AdapterInfo, DoneStatus, ErrorInfo, Event, Options};

const DEFAULT_SLEEP_MS: u64 = 10_000;
const TICKS: u32 = 1000;

/// A run that spends its time waiting on the host.
pub struct Sleepy {
    sleep: Duration,
    cooperate: bool,
    ticks: u32,
    done: bool,
}

impl Adapter for Sleepy {
    fn info() -> AdapterInfo {
        AdapterInfo::new("sleepy", env!("CARGO_PKG_VERSION"), "Sleeps between events")
    }

    fn start(prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        let sleep_ms = prompt
            .split_whitespace()
            .find_map(|word| word.parse().ok())
            .unwrap_or(DEFAULT_SLEEP_MS);
        Ok(Sleepy {
            sleep: Duration::from_millis(sleep_ms),
            cooperate: prompt.contains("cooperate"),
            ticks: 0,
            done: false,
        })
    }

    fn next(&mut self) -> Option<Event> {
        if self.done {
            return None;
        }
        if self.ticks == TICKS {
            self.done = true;
            return Some(Event::done(DoneStatus::Success));
        }
        // A blocking WASI `monotonic-clock` subscription: fuel and epochs
        // cannot reach the guest while it waits here.
        std::thread::sleep(self.sleep);
        if self.cooperate && moat_guest::interrupted() {
            self.done = true;
            return Some(Event::done(DoneStatus::Interrupted));
        }
        self.ticks += 1;
        Some(Event::text(format!("tick {}", self.ticks)))
    }
}

moat_guest::export_adapter!(Sleepy);
