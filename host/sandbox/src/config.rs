//! Settings of the process-wide sandbox and the wasmtime configuration
//! derived from them.

use std::path::PathBuf;
use std::sync::Arc;
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
    /// Largest function body compiled: what bounds the compiler's memory.
    pub max_function_bytes: usize,
    /// How often running guests are interrupted to yield to other tasks and
    /// to notice deadlines.
    pub epoch_tick: Duration,
    /// How the processes a run starts are kept from outliving it.
    pub containment: moat_contain::Containment,
    /// The memory cap `info()` runs under when a component loads: that of
    /// the runs it will make (`--max-memory`), so a component that needs
    /// more than the default can be loaded once the user raises it.
    pub info_max_memory_bytes: u64,
    /// Told when a component is compiled rather than found in the cache.
    pub compile_watcher: Option<CompileWatcher>,
}

/// What a [`CompileWatcher`] is told.
#[derive(Debug, Clone, Copy)]
pub enum Compiling<'a> {
    /// A component not in the cache is being compiled: its origin (a path
    /// or a built-in's name) and size.
    Started {
        /// Where the component came from.
        origin: &'a str,
        /// Its size in bytes.
        size_bytes: u64,
    },
    /// That compile ended, compiled or not.
    Ended,
}

/// Told when a component is compiled: the first run of a large component
/// (a TypeScript or Python one) compiles for seconds, and a person waiting
/// for it should see why. Called on the compiling thread.
#[derive(Clone)]
pub struct CompileWatcher(pub Arc<dyn Fn(Compiling<'_>) + Send + Sync>);

impl std::fmt::Debug for CompileWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompileWatcher")
    }
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            cache_dir: default_cache_dir(),
            pool_sessions: 10_000,
            max_component_bytes: 64 * 1024 * 1024,
            compile_timeout: Duration::from_secs(60),
            max_function_bytes: crate::precheck::DEFAULT_MAX_FUNCTION_BYTES,
            epoch_tick: Duration::from_millis(1),
            containment: moat_contain::Containment::default(),
            info_max_memory_bytes: moat_engine::RunLimits::DEFAULT_MAX_MEMORY_BYTES,
            compile_watcher: None,
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

/// How much of a pooled linear memory is reset in place when its run ends
/// (only the pages it wrote, found with Linux's `PAGEMAP_SCAN`, 6.7 and
/// later) instead of dropped with `madvise`. A dropped page costs its next
/// run a copy-on-write fault, and each drop or fault a TLB shootdown
/// across the process's threads (an inter-processor interrupt, dear in a
/// virtual machine); these were most of a run's start here.
const KEEP_RESIDENT_MEMORY_BYTES: usize = 1 << 20;
/// The same for a pooled table.
const KEEP_RESIDENT_TABLE_BYTES: usize = 64 << 10;

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
        .max_memory_size(MAX_MEMORY_CEILING as usize)
        .linear_memory_keep_resident(KEEP_RESIDENT_MEMORY_BYTES)
        .table_keep_resident(KEEP_RESIDENT_TABLE_BYTES)
        .pagemap_scan(wasmtime::Enabled::Auto);
    pool
}

/// The share of this machine's memory the runs of one command may have
/// together by default (the sum of their memory caps): half of it, leaving
/// the rest to the host, the programs the runs start and everything else.
pub fn default_memory_budget() -> Option<u64> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let (pages, page_size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let total = u64::try_from(pages)
        .ok()?
        .checked_mul(u64::try_from(page_size).ok()?)?;
    (total > 0).then_some(total / 2)
}
