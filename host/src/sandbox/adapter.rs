//! A loaded component as an engine [`Adapter`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use wasmtime::Engine;

use super::bindings::AdapterWorldPre;
use super::cache::CacheOutcome;
use super::contract::ContractVersion;
use super::convert;
use super::failure::classify;
use super::session::{WasmSession, new_store};
use super::state::RunState;
use crate::engine::{
    Adapter, AdapterInfo, AdapterSession, RunLimits, RunOptions, SessionControl, SessionFailure,
    StartError,
};
use crate::grants::Grants;

/// Where a component came from and what loading it found, for `moat inspect`.
#[derive(Debug, Clone)]
pub struct ComponentDetails {
    /// A path, or "built-in".
    pub origin: String,
    pub size_bytes: u64,
    /// SHA-256 of the component's bytes, lowercase hex: what a policy file
    /// pins an adapter's entry to.
    pub sha256: String,
    /// The contract version the component was built against.
    pub contract: ContractVersion,
    /// Interfaces the component imports.
    pub imports: Vec<String>,
    /// What the compiled-component cache did.
    pub cache: CacheOutcome,
    /// The cache entry, when the cache is enabled.
    pub cache_path: Option<PathBuf>,
    /// Time to compile or load the compiled form.
    pub load_time: Duration,
}

pub(crate) struct LoadedComponent {
    pub(crate) engine: Engine,
    pub(crate) pre: AdapterWorldPre<RunState>,
    pub(crate) name: Arc<str>,
    pub(crate) info: AdapterInfo,
    pub(crate) details: ComponentDetails,
}

/// An adapter component, compiled and linked, ready to start runs.
/// Cheap to clone; every run gets its own store.
#[derive(Clone)]
pub struct WasmAdapter {
    component: Arc<LoadedComponent>,
}

impl WasmAdapter {
    pub(crate) fn new(component: LoadedComponent) -> Self {
        Self {
            component: Arc::new(component),
        }
    }

    /// What loading the component found.
    pub fn details(&self) -> &ComponentDetails {
        &self.component.details
    }

    async fn start_run(
        &self,
        prompt: &str,
        options: &RunOptions,
        limits: &RunLimits,
        grants: &Grants,
    ) -> Result<Box<dyn AdapterSession>, StartError> {
        let component = &self.component;
        // Captured now, as the engine does when it starts the run: an HTTP
        // request gets only what is left of the run's time.
        let deadline = limits.timeout.map(|t| tokio::time::Instant::now() + t);
        let mut store = new_store(
            &component.engine,
            component.name.clone(),
            limits.max_memory_bytes,
            limits.fuel,
            grants,
            deadline,
        )
        .map_err(|e| SessionFailure::Crashed {
            message: format!("cannot set up the run: {e:#}"),
        })?;
        let world = match component.pre.instantiate_async(&mut store).await {
            Ok(world) => world,
            Err(error) => return Err(classify(&store, &error, limits.fuel).into()),
        };
        let started = world
            .moat_adapter_adapter()
            .call_run(&mut store, prompt, &convert::options(options))
            .await;
        match started {
            Ok(Ok(session)) => Ok(Box::new(WasmSession::new(
                store,
                world,
                session,
                limits.fuel,
            ))),
            Ok(Err(refusal)) => Err(StartError::Refused {
                refusal: convert::error_info(refusal),
                // Lost with the store otherwise: a spawn refused in `run`
                // must still show as CAPABILITY_DENIED.
                denials: store.data().denials.take(),
            }),
            Err(error) => Err(classify(&store, &error, limits.fuel).into()),
        }
    }
}

impl Adapter for WasmAdapter {
    fn info(&self) -> &AdapterInfo {
        &self.component.info
    }

    /// A run with its grants applied: files and environment in its WASI
    /// context, network through its checked `wasi:http`, programs through
    /// the process capability.
    fn start<'a>(
        &'a self,
        prompt: &'a str,
        options: &'a RunOptions,
        limits: &'a RunLimits,
        grants: &'a Grants,
    ) -> BoxFuture<'a, Result<Box<dyn AdapterSession>, StartError>> {
        Box::pin(self.start_run(prompt, options, limits, grants))
    }
}

/// Calls the component's `info()` in a throw-away store, bounded in fuel,
/// memory and time, since it is untrusted code like the rest.
pub(crate) async fn describe(
    engine: &Engine,
    pre: &AdapterWorldPre<RunState>,
    name_hint: Arc<str>,
) -> Result<AdapterInfo, String> {
    const INFO_FUEL: u64 = 1_000_000_000;
    const INFO_TIMEOUT: Duration = Duration::from_secs(5);
    let mut store = new_store(
        engine,
        name_hint,
        RunLimits::DEFAULT_MAX_MEMORY_BYTES,
        Some(INFO_FUEL),
        &Grants::none(),
        None,
    )
    .map_err(|e| format!("{e:#}"))?;
    let control = store.data().control.clone();
    let call = async {
        let world = pre.instantiate_async(&mut store).await?;
        world.moat_adapter_adapter().call_info(&mut store).await
    };
    let result = tokio::time::timeout(INFO_TIMEOUT, call).await;
    match result {
        Ok(Ok(info)) => Ok(convert::info(info)),
        Ok(Err(error)) => Err(classify(&store, &error, Some(INFO_FUEL)).to_string()),
        Err(_) => {
            control.kill();
            Err(format!(
                "info() did not return within {} s",
                INFO_TIMEOUT.as_secs()
            ))
        }
    }
}
