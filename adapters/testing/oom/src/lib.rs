//! Testing adapter: `next` allocates and touches memory in 1 MiB chunks,
//! keeping all of it, until allocation fails. The host's memory cap must
//! stop it (MEMORY_LIMIT) without harming the host or other runs.

use moat_guest::{Adapter, AdapterInfo, DoneStatus, ErrorInfo, Event, Options};

const CHUNK: usize = 1 << 20;

/// A run that eats memory.
pub struct Oom {
    /// Everything allocated so far, kept alive so none of it is freed.
    chunks: Vec<Vec<u8>>,
    reported: bool,
}

impl Adapter for Oom {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "oom",
            env!("CARGO_PKG_VERSION"),
            "Allocates until memory runs out",
        )
    }

    fn start(_prompt: String, _options: Options) -> Result<Self, ErrorInfo> {
        Ok(Oom {
            chunks: Vec::new(),
            reported: false,
        })
    }

    fn next(&mut self) -> Option<Event> {
        if self.reported {
            return Some(Event::done(DoneStatus::Error));
        }
        // `try_reserve` instead of plain allocation: an allocation failure
        // then comes back here instead of aborting, so the component keeps
        // asking for more only as long as the host grants it.
        while self.chunks.try_reserve(1).is_ok() {
            let mut chunk = Vec::new();
            if chunk.try_reserve_exact(CHUNK).is_err() {
                break;
            }
            // Touch every byte so the memory is really used.
            chunk.resize(CHUNK, 0xA5);
            self.chunks.push(core::hint::black_box(chunk));
        }
        // Only reached when the host made allocation fail instead of
        // trapping: say so, then end with an error.
        self.reported = true;
        Some(Event::text(format!(
            "allocation failed after {} MiB",
            self.chunks.len()
        )))
    }
}

moat_guest::export_adapter!(Oom);
