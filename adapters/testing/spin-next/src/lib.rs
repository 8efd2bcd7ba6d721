//! Testing adapter: `start` succeeds, then the first `next` spins forever.
//! The host must stop it (fuel, epoch deadline) and end the run itself.

use moat_guest::{Adapter, AdapterInfo, ErrorInfo, Event, Options};

/// A run that never yields an event.
pub struct SpinNext;

impl Adapter for SpinNext {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "spin-next",
            env!("CARGO_PKG_VERSION"),
            "Spins forever in next",
        )
    }

    fn start(_prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        Ok(SpinNext)
    }

    fn next(&mut self) -> Option<Event> {
        let mut counter = 0u64;
        loop {
            // `black_box` keeps the optimizer from proving the loop useless.
            counter = core::hint::black_box(counter.wrapping_add(1));
        }
    }
}

moat_guest::export_adapter!(SpinNext);
