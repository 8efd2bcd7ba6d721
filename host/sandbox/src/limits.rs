//! The memory cap of one run, and what bounds the host memory a run holds
//! outside its own linear memory: its resources (streams, header maps, open
//! files, requests, children), each an entry of its resource table.

use wasmtime::ResourceLimiter;

/// Most table elements a run may have; Rust adapters need a few hundred.
const MAX_TABLE_ELEMENTS: usize = 100_000;

/// Most bytes one `wasi:http` header map may take in host memory (the
/// wire bytes and the map's own bookkeeping): headers of real APIs are a
/// few KiB; wasmtime-wasi-http's default is twice this.
pub(crate) const MAX_HEADER_MAP_BYTES: usize = 64 * 1024;

/// Fewest resources a run may hold at once, whatever its memory cap.
const MIN_RESOURCES: usize = 1024;

/// Most resources a run may hold at once: as many of the largest kind (a
/// full header map) as fit in its memory cap, so the host memory a run's
/// resources take is bounded by its cap too, not by the host's RAM.
/// Past it, creating one more traps and the run ends with MEMORY_LIMIT.
pub(crate) fn max_resources(max_memory_bytes: u64) -> usize {
    let fit = usize::try_from(max_memory_bytes / MAX_HEADER_MAP_BYTES as u64).unwrap_or(usize::MAX);
    fit.max(MIN_RESOURCES)
}

/// Caps a run's linear memory. Growing past the cap traps at once: the run
/// ends with MEMORY_LIMIT, whether or not the guest would have handled the
/// failed allocation, so the user always sees that the cap was reached.
#[derive(Debug)]
pub(crate) struct MemoryCap {
    limit_bytes: usize,
    hit: bool,
}

impl MemoryCap {
    pub(crate) fn new(limit_bytes: u64) -> Self {
        Self {
            limit_bytes: usize::try_from(limit_bytes).unwrap_or(usize::MAX),
            hit: false,
        }
    }

    /// The cap in bytes.
    pub(crate) fn limit_bytes(&self) -> u64 {
        self.limit_bytes as u64
    }

    /// Whether the adapter asked for more memory than its cap.
    pub(crate) fn was_hit(&self) -> bool {
        self.hit
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit_bytes {
            self.hit = true;
            return Err(wasmtime::Error::msg(format!(
                "memory cap of {} bytes reached",
                self.limit_bytes
            )));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_past_the_cap_traps_and_is_remembered() {
        let mut cap = MemoryCap::new(1024);
        assert!(cap.memory_growing(0, 1024, None).unwrap());
        assert!(!cap.was_hit());
        assert!(cap.memory_growing(1024, 2048, None).is_err());
        assert!(cap.was_hit());
    }
}
