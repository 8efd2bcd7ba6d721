//! Testing adapter: `info()` touches 300 MiB before it answers (more than
//! the default memory cap of 256 MiB), then a run says `done`. A user who
//! raises `--max-memory` must be able to load, inspect and run it: `info()`
//! runs under the run's cap, not a fixed one.

use moat_guest::{Adapter, AdapterInfo, DoneEvent, DoneStatus, ErrorInfo, Event, Options};

/// What `info()` allocates and touches.
const INFO_BYTES: usize = 300 << 20;

/// A run that is done at once.
pub struct BigInfo {
    done: bool,
}

impl Adapter for BigInfo {
    fn info() -> AdapterInfo {
        let touched = vec![1u8; INFO_BYTES];
        let sum: u64 = touched.iter().step_by(4096).map(|&b| u64::from(b)).sum();
        AdapterInfo::new(
            "big-info",
            env!("CARGO_PKG_VERSION"),
            format!("Touches {sum} pages to describe itself"),
        )
    }

    fn start(_prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        Ok(BigInfo { done: false })
    }

    fn next(&mut self) -> Option<Event> {
        if std::mem::replace(&mut self.done, true) {
            return None;
        }
        Some(DoneEvent::new(DoneStatus::Success).into())
    }
}

moat_guest::export_adapter!(BigInfo);
