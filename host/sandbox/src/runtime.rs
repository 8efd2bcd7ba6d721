//! The process-wide sandbox: one wasmtime engine, its linker, the epoch
//! ticker and the compiled-component cache.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use crate::adapter::{ComponentDetails, Linking, WasmAdapter};
use crate::cache::{CacheOutcome, ComponentCache, DIGEST_LEN, hex};
use crate::config::{Compiling, SandboxConfig, wasmtime_config};
use crate::contract::{self, ContractVersion};
use crate::error::{LoadError, SandboxError};
use crate::info;
use crate::state::RunState;

/// Runs adapter components. Create one per process and share it: it owns
/// the wasmtime engine, whose compiled code and instance pool every run
/// uses.
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    linker: Linker<RunState>,
    cache: ComponentCache,
    config: SandboxConfig,
    _ticker: EpochTicker,
}

/// What compiling a component ahead of time found (`moat compile`).
#[derive(Debug, Clone)]
pub struct CompileReport {
    /// The contract version the component was built against.
    pub contract: ContractVersion,
    /// What the compiled-component cache did.
    pub cache: CacheOutcome,
    /// The cache entry, when the cache is enabled.
    pub cache_path: Option<std::path::PathBuf>,
    /// Time to compile or load the compiled form.
    pub load_time: Duration,
}

impl Sandbox {
    /// Sets up the engine. Falls back to on-demand instance allocation when
    /// the pooling allocator cannot reserve its address space here.
    pub fn new(config: SandboxConfig) -> Result<Self, SandboxError> {
        let engine = match Engine::new(&wasmtime_config(config.pool_sessions)) {
            Ok(engine) => engine,
            Err(error) if config.pool_sessions > 0 => {
                tracing::warn!(
                    "instance pool unavailable ({error:#}); allocating instances on demand"
                );
                Engine::new(&wasmtime_config(0))
                    .map_err(|e| SandboxError::Engine(format!("{e:#}")))?
            }
            Err(error) => return Err(SandboxError::Engine(format!("{error:#}"))),
        };
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|e| SandboxError::Engine(format!("{e:#}")))?;
        crate::filesystem::add_to_linker(&mut linker)
            .map_err(|e| SandboxError::Engine(format!("{e:#}")))?;
        // Only `wasi:http/types` and `outgoing-handler`: every request goes
        // through the run's checks (sandbox/http.rs).
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
            .map_err(|e| SandboxError::Engine(format!("{e:#}")))?;
        contract::add_to_linker(&mut linker).map_err(|e| SandboxError::Engine(format!("{e:#}")))?;
        // The process's runs are contained as this sandbox's say.
        config.containment.for_this_process();
        let cache = ComponentCache::new(&engine, config.cache_dir.clone());
        let ticker = EpochTicker::start(engine.clone(), config.epoch_tick)
            .map_err(|e| SandboxError::Engine(format!("cannot start the epoch thread: {e}")))?;
        Ok(Self {
            inner: Arc::new(Inner {
                engine,
                linker,
                cache,
                config,
                _ticker: ticker,
            }),
        })
    }

    /// The settings this sandbox was made with.
    pub fn config(&self) -> &SandboxConfig {
        &self.inner.config
    }

    /// Loads a component file.
    pub async fn load_file(&self, path: &Path) -> Result<WasmAdapter, LoadError> {
        let origin = path.display().to_string();
        self.load(origin, Source::File(path.to_path_buf())).await
    }

    /// Loads a component from memory; `origin` names it in messages.
    pub async fn load_bytes(
        &self,
        origin: String,
        bytes: Vec<u8>,
    ) -> Result<WasmAdapter, LoadError> {
        self.load(origin, Source::Bytes(bytes)).await
    }

    async fn load(&self, origin: String, source: Source) -> Result<WasmAdapter, LoadError> {
        let started = Instant::now();
        let compiled = self.compile(&origin, source).await?;
        let load_time = started.elapsed();
        let Compiled {
            component,
            cache,
            digest,
            size_bytes,
        } = compiled;
        let cache_path = self.inner.cache.entry_path(&digest);
        let inner = &self.inner;
        let supported = contract::version_of(&inner.engine, &component)?;
        let imports = component
            .component_type()
            .imports(&inner.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let instance_pre = inner
            .linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::UnsupportedImports(format!("{e:#}")))?;
        let linked = (supported.link)(Linking {
            engine: &inner.engine,
            pre: instance_pre,
            origin: &origin,
            containment: inner.config.containment,
            info_max_memory_bytes: inner.config.info_max_memory_bytes,
        })
        .await?;
        info::validate(&linked.info, &linked.needs).map_err(LoadError::InvalidInfo)?;
        tracing::debug!(adapter = %linked.info.name, %origin, contract = %supported.version, ?cache, ?load_time, "component loaded");
        let details = ComponentDetails {
            origin,
            size_bytes,
            sha256: hex(&digest),
            contract: supported.version,
            imports,
            cache,
            cache_path,
            load_time,
        };
        Ok(WasmAdapter::new(linked, details))
    }

    /// Compiles a component file into the cache without running it.
    pub async fn compile_file(&self, path: &Path) -> Result<CompileReport, LoadError> {
        let started = Instant::now();
        let origin = path.display().to_string();
        let compiled = self
            .compile(&origin, Source::File(path.to_path_buf()))
            .await?;
        let supported = contract::version_of(&self.inner.engine, &compiled.component)?;
        Ok(CompileReport {
            contract: supported.version,
            cache_path: self.inner.cache.entry_path(&compiled.digest),
            cache: compiled.cache,
            load_time: started.elapsed(),
        })
    }

    /// Compiles (or loads from the cache) off the async threads, bounded in
    /// time: compiling untrusted input must not stall the process.
    async fn compile(&self, origin: &str, source: Source) -> Result<Compiled, LoadError> {
        let inner = self.inner.clone();
        let timeout = inner.config.compile_timeout;
        let origin = origin.to_owned();
        let task = tokio::task::spawn_blocking(move || inner.compile(&origin, source));
        match tokio::time::timeout(timeout, task).await {
            Ok(Ok(Ok(compiled))) => Ok(compiled),
            Ok(Ok(Err(error))) => Err(error),
            Ok(Err(join_error)) => Err(LoadError::Compile(format!(
                "the compiler failed: {join_error}"
            ))),
            Err(_) => Err(LoadError::CompileTimeout {
                seconds: timeout.as_secs(),
            }),
        }
    }
}

/// A component to load.
enum Source {
    /// Its bytes (a built-in's, or given by an embedder).
    Bytes(Vec<u8>),
    /// A file, not read yet.
    File(PathBuf),
}

/// A loaded component and what loading it found.
struct Compiled {
    component: Component,
    cache: CacheOutcome,
    /// The SHA-256 of the component's bytes.
    digest: [u8; DIGEST_LEN],
    size_bytes: u64,
}

impl Inner {
    /// The compiled component of `source`, from the cache or compiled now
    /// (on a blocking thread).
    fn compile(&self, origin: &str, source: Source) -> Result<Compiled, LoadError> {
        let (bytes, file) = match source {
            Source::Bytes(bytes) => (bytes, None),
            Source::File(path) => match self.read_file(&path)? {
                Read::Remembered(compiled) => return Ok(compiled),
                Read::Bytes { bytes, file } => (bytes, Some(file)),
            },
        };
        let size_bytes = bytes.len() as u64;
        self.check_size(size_bytes)?;
        let digest = sha256(&bytes);
        if let Some(file) = file {
            let after = file.handle.metadata().ok();
            if let Some(after) = after {
                self.cache
                    .remember_digest(&file.before, &after, file.read_at, &digest);
            }
        }
        contract::check_binary_kind(&bytes)?;
        let engine = &self.engine;
        let (component, cache) = self.cache.load_or_compile(engine, &digest, || {
            // Guards the compiler (its time and memory); a cached
            // entry was compiled after passing it and is not parsed.
            crate::precheck::check_functions(&bytes, self.config.max_function_bytes)?;
            tracing::info!(%origin, size_bytes, "compiling a component");
            let watcher = self.config.compile_watcher.as_ref();
            if let Some(watcher) = watcher {
                (watcher.0)(Compiling::Started { origin, size_bytes });
            }
            let compiled =
                Component::new(engine, &bytes).map_err(|e| LoadError::Compile(format!("{e:#}")));
            if let Some(watcher) = watcher {
                (watcher.0)(Compiling::Ended);
            }
            compiled
        })?;
        Ok(Compiled {
            component,
            cache,
            digest,
            size_bytes,
        })
    }

    /// Opens a component file: its compiled form straight from the cache
    /// when the cache remembers the file's digest (unchanged since it was
    /// last read) and holds that digest's entry; otherwise its bytes.
    fn read_file(&self, path: &Path) -> Result<Read, LoadError> {
        let read_error = |source| LoadError::Read {
            path: path.to_path_buf(),
            source,
        };
        // Taken before the file's metadata: see `remember_digest`.
        let read_at = SystemTime::now();
        let mut handle = std::fs::File::open(path).map_err(read_error)?;
        let before = handle.metadata().map_err(read_error)?;
        let size = before.len();
        self.check_size(size)?;
        if let Some(digest) = self.cache.remembered_digest(&before)
            && let Some(component) = self.cache.load(&self.engine, &digest)
        {
            return Ok(Read::Remembered(Compiled {
                component,
                cache: CacheOutcome::Hit,
                digest,
                size_bytes: size,
            }));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        // At most one byte past the limit: a file grown since is refused,
        // not read whole.
        let limit = self.config.max_component_bytes.saturating_add(1);
        std::io::Read::read_to_end(&mut std::io::Read::take(&mut handle, limit), &mut bytes)
            .map_err(read_error)?;
        Ok(Read::Bytes {
            bytes,
            file: OpenFile {
                handle,
                before,
                read_at,
            },
        })
    }

    fn check_size(&self, size: u64) -> Result<(), LoadError> {
        let limit = self.config.max_component_bytes;
        if size > limit {
            return Err(LoadError::TooLarge { size, limit });
        }
        Ok(())
    }
}

/// What [`Inner::read_file`] found.
enum Read {
    /// The compiled form of the file's remembered digest.
    Remembered(Compiled),
    /// The file's bytes, read whole.
    Bytes { bytes: Vec<u8>, file: OpenFile },
}

/// A component file being read: what the cache needs to remember its
/// digest.
struct OpenFile {
    handle: std::fs::File,
    /// Its metadata before it was read.
    before: std::fs::Metadata,
    /// The time just before that.
    read_at: SystemTime,
}

fn sha256(bytes: &[u8]) -> [u8; DIGEST_LEN] {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).into()
}

/// Advances the engine's epoch on a fixed tick, on its own thread, until
/// dropped.
struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    fn start(engine: Engine, tick: Duration) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::Builder::new()
            .name("moat-epoch".into())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    // No guest runs while every run waits for an answer.
                    crate::control::idle_while_all_wait(Duration::from_millis(250));
                    engine.increment_epoch();
                }
            })?;
        Ok(Self { stop })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
