//! Settings of the process-wide sandbox and the wasmtime configuration
//! derived from them.

use std::path::PathBuf;
use std::time::Duration;

use wasmtime::{Config, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Largest linear memory any run may be given: the virtual reservation of
/// each memory slot. `--max-memory` cannot exceed it.
pub const MAX_MEMORY_CEILING: u64 = 1 << 30;

/// Settings of a [`Sandbox`](crate::Sandbox).
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Where compiled components are cached; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Live sessions the pooling allocator holds at once; 0 allocates
    /// each instance on demand instead.
    pub pool_sessions: u32,
    /// Largest component file accepted.
    pub max_component_bytes: u64,
    /// How long compiling one component may take.
    pub compile_timeout: Duration,
    /// How often running guests are interrupted to yield to other tasks and
    /// to notice deadlines.
    pub epoch_tick: Duration,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            cache_dir: default_cache_dir(),
            pool_sessions: 10_000,
            max_component_bytes: 64 * 1024 * 1024,
            compile_timeout: Duration::from_secs(60),
            epoch_tick: Duration::from_millis(1),
        }
    }
}

/// `$MOAT_CACHE_DIR`, else `$XDG_CACHE_HOME/moat`, else `~/.cache/moat`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("MOAT_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("moat"));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache").join("moat"))
}

/// The wasmtime configuration every run shares. Everything here that
/// affects code generation is part of the cache key.
pub(crate) fn wasmtime_config(pool_sessions: u32) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        // The component-model async machinery slows every call 2-3x and no
        // adapter uses it.
        .concurrency_support(false)
        .consume_fuel(true)
        .epoch_interruption(true)
        .memory_reservation(MAX_MEMORY_CEILING)
        .max_wasm_stack(512 * 1024)
        .async_stack_size(1024 * 1024);
    if pool_sessions > 0 {
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling(pool_sessions)));
    }
    config
}

fn pooling(sessions: u32) -> PoolingAllocationConfig {
    // A Rust wasip2 adapter is one component instance holding a handful of
    // core instances and one linear memory; leave headroom for both.
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(sessions)
        .total_core_instances(sessions.saturating_mul(4))
        .total_memories(sessions.saturating_add(sessions / 10))
        .total_tables(sessions.saturating_mul(2))
        .total_stacks(sessions)
        .max_core_instances_per_component(16)
        .max_memories_per_component(2)
        .max_tables_per_component(4)
        .max_memory_size(MAX_MEMORY_CEILING as usize);
    pool
}
