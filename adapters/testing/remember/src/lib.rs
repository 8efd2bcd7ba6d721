//! Testing adapter: reports what it finds in its own memory at start, then
//! scribbles over it. Every run must find its memory as the component
//! defines it (a pooled slot reused from an earlier run is reset), so its
//! one `text` is always `fresh`; anything else names what was left.

use std::collections::VecDeque;

use moat_guest::{Adapter, AdapterInfo, DoneStatus, ErrorInfo, Event, Options};

/// Zero-initialized, spanning many pages (`.bss`).
const SCRATCH_BYTES: usize = 256 * 1024;
static mut SCRATCH: [u8; SCRATCH_BYTES] = [0; SCRATCH_BYTES];
/// Initialized from the data segment (`.data`).
static mut MARK: u64 = 7;

pub struct Remember {
    pending: VecDeque<Event>,
}

/// What an earlier run left, if anything.
fn leftovers() -> Option<String> {
    // SAFETY: a component instance runs one thread; nothing else touches
    // these statics while this reads and writes them.
    unsafe {
        let scratch = &mut *std::ptr::addr_of_mut!(SCRATCH);
        let mark = &mut *std::ptr::addr_of_mut!(MARK);
        let dirty = scratch.iter().filter(|byte| **byte != 0).count();
        let found = (dirty != 0 || *mark != 7)
            .then(|| format!("left over: {dirty} scratch bytes, mark {}", *mark));
        scratch.fill(0xAB);
        *mark = 99;
        found
    }
}

impl Adapter for Remember {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "remember",
            env!("CARGO_PKG_VERSION"),
            "Reports what an earlier run left in its memory",
        )
    }

    fn start(_prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        let report = leftovers().unwrap_or_else(|| "fresh".to_owned());
        Ok(Remember {
            pending: VecDeque::from([Event::text(report), Event::done(DoneStatus::Success)]),
        })
    }

    fn next(&mut self) -> Option<Event> {
        self.pending.pop_front()
    }
}

moat_guest::export_adapter!(Remember);
