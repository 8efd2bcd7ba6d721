//! Testing adapter: emits one `text`, then panics on the next call. A panic
//! in a component is a trap; the host must turn it into `error`
//! ADAPTER_ERROR then `done` error.

use moat_guest::{Adapter, AdapterInfo, ErrorInfo, Event, Options};

/// A run that panics on its second event.
pub struct Panic {
    calls: u32,
}

impl Adapter for Panic {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "panic",
            env!("CARGO_PKG_VERSION"),
            "Panics on the second event",
        )
    }

    fn start(_prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        Ok(Panic { calls: 0 })
    }

    fn next(&mut self) -> Option<Event> {
        self.calls += 1;
        if self.calls == 1 {
            return Some(Event::text("about to panic"));
        }
        panic!("testing adapter panicked on purpose");
    }
}

moat_guest::export_adapter!(Panic);
