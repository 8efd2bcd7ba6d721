//! Testing adapter: spins forever inside `start`, before any session
//! exists. The host must stop it (fuel, epoch deadline) and end the run
//! itself.

use moat_guest::{Adapter, AdapterInfo, ErrorInfo, Event, Options};

/// A run that never finishes starting.
pub struct SpinCtor;

impl Adapter for SpinCtor {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "spin-ctor",
            env!("CARGO_PKG_VERSION"),
            "Spins forever in start",
        )
    }

    fn start(_prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        let mut counter = 0u64;
        loop {
            // `black_box` keeps the optimizer from proving the loop useless.
            counter = core::hint::black_box(counter.wrapping_add(1));
        }
    }

    fn next(&mut self) -> Option<Event> {
        None
    }
}

moat_guest::export_adapter!(SpinCtor);
