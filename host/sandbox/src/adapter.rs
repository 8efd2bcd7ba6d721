//! A loaded component as an engine [`Adapter`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use moat_engine::{
    Adapter, AdapterInfo, AdapterSession, RunLimits, RunOptions, SessionControl, SessionFailure,
    StartError,
};
use moat_grants::Needs;
use wasmtime::Engine;
use wasmtime::component::InstancePre;

use crate::cache::CacheOutcome;
use crate::contract::bindings::Contract;
use crate::contract::version::ContractVersion;
use crate::error::LoadError;
use crate::failure::classify;
use crate::scope::RunScope;
use crate::session::{WasmSession, new_store};
use crate::state::RunState;

/// Where a component came from and what loading it found, for `moat inspect`.
#[derive(Debug, Clone)]
pub struct ComponentDetails {
    /// A path, or "built-in NAME".
    pub origin: String,
    /// The component's size in bytes.
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

/// An adapter component, compiled and linked, ready to start runs.
/// Cheap to clone; every run gets its own store.
#[derive(Clone)]
pub struct WasmAdapter {
    component: Arc<LoadedComponent>,
}

struct LoadedComponent {
    runner: Box<dyn Runner>,
    name: Arc<str>,
    info: AdapterInfo,
    needs: Needs,
    details: ComponentDetails,
}

impl WasmAdapter {
    pub(crate) fn new(linked: Linked, details: ComponentDetails) -> Self {
        let name = linked.info.name.as_str().into();
        Self {
            component: Arc::new(LoadedComponent {
                runner: linked.runner,
                name,
                info: linked.info,
                needs: linked.needs,
                details,
            }),
        }
    }

    /// What loading the component found.
    pub fn details(&self) -> &ComponentDetails {
        &self.component.details
    }

    /// What the component declares it needs from the host (its `info()`):
    /// a request, granted only as the run's grant sources decide.
    pub fn needs(&self) -> &Needs {
        &self.component.needs
    }
}

impl std::fmt::Debug for WasmAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmAdapter")
            .field("name", &self.component.name)
            .field("contract", &self.component.details.contract)
            .finish_non_exhaustive()
    }
}

impl Adapter<RunScope> for WasmAdapter {
    fn info(&self) -> &AdapterInfo {
        &self.component.info
    }

    /// A run within its scope: files and environment of its grants in its
    /// WASI context, network through its checked `wasi:http`, programs
    /// through the process capability; the trust level in its options.
    fn start<'a>(
        &'a self,
        prompt: &'a str,
        options: &'a RunOptions,
        limits: &'a RunLimits,
        scope: &'a RunScope,
    ) -> BoxFuture<'a, Result<Box<dyn AdapterSession>, StartError>> {
        let component = &self.component;
        component.runner.start(Start {
            name: component.name.clone(),
            prompt,
            options,
            limits,
            scope,
        })
    }
}

/// What starting a run needs, whatever the contract version.
struct Start<'a> {
    name: Arc<str>,
    prompt: &'a str,
    options: &'a RunOptions,
    limits: &'a RunLimits,
    scope: &'a RunScope,
}

/// A linked component of some contract version: the one place where the
/// version is chosen per run (a session is then of that version only).
trait Runner: Send + Sync {
    fn start<'a>(
        &'a self,
        start: Start<'a>,
    ) -> BoxFuture<'a, Result<Box<dyn AdapterSession>, StartError>>;
}

/// A component linked as contract version `C`.
struct LinkedAs<C: Contract> {
    engine: Engine,
    pre: C::Pre,
    /// [`SandboxConfig::containment`](crate::SandboxConfig::containment).
    containment: moat_contain::Containment,
}

impl<C: Contract> Runner for LinkedAs<C> {
    fn start<'a>(
        &'a self,
        start: Start<'a>,
    ) -> BoxFuture<'a, Result<Box<dyn AdapterSession>, StartError>> {
        Box::pin(start_run::<C>(self, start))
    }
}

async fn start_run<C: Contract>(
    linked: &LinkedAs<C>,
    start: Start<'_>,
) -> Result<Box<dyn AdapterSession>, StartError> {
    let (engine, pre) = (&linked.engine, &linked.pre);
    let Start {
        name,
        prompt,
        options,
        limits,
        scope,
    } = start;
    // Captured now, as the engine does when it starts the run: an HTTP
    // request gets only what is left of the run's time.
    let deadline = limits.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut store =
        new_store(engine, name, limits, scope, deadline, linked.containment).map_err(|e| {
            SessionFailure::Crashed {
                message: format!("cannot set up the run: {e:#}"),
            }
        })?;
    let instance = match C::instantiate(pre, &mut store).await {
        Ok(instance) => instance,
        Err(error) => return Err(classify(&store, &error, limits.fuel).into()),
    };
    let started = C::run(&instance, &mut store, prompt, options, scope.trust).await;
    match started {
        Ok(Ok(session)) => Ok(Box::new(WasmSession::<C>::new(
            store,
            instance,
            session,
            limits.fuel,
        ))),
        Ok(Err(refusal)) => Err(StartError::Refused {
            refusal,
            // Lost with the store otherwise: a spawn refused in `run`
            // must still show as CAPABILITY_DENIED.
            denials: store.data().denials.take(),
        }),
        Err(error) => Err(classify(&store, &error, limits.fuel).into()),
    }
}

/// The entry point of a contract version's module into loading: links a
/// compiled component (its `InstancePre`) as version `C` and asks it to
/// describe itself.
pub(crate) type LinkFn = fn(Linking<'_>) -> BoxFuture<'_, Result<Linked, LoadError>>;

/// What [`link`] needs.
pub(crate) struct Linking<'a> {
    pub(crate) engine: &'a Engine,
    pub(crate) pre: InstancePre<RunState>,
    /// Names the component in logs until it has named itself.
    pub(crate) origin: &'a str,
    /// [`SandboxConfig::containment`](crate::SandboxConfig::containment).
    pub(crate) containment: moat_contain::Containment,
    /// [`SandboxConfig::info_max_memory_bytes`](crate::SandboxConfig::info_max_memory_bytes).
    pub(crate) info_max_memory_bytes: u64,
}

/// A linked component and what it says of itself.
pub(crate) struct Linked {
    runner: Box<dyn Runner>,
    pub(crate) info: AdapterInfo,
    pub(crate) needs: Needs,
}

/// Links a component as contract version `C` (see [`LinkFn`]).
pub(crate) fn link<C: Contract>(linking: Linking<'_>) -> BoxFuture<'_, Result<Linked, LoadError>> {
    Box::pin(async move {
        let pre = C::pre(linking.pre).map_err(|e| LoadError::ContractMismatch(format!("{e:#}")))?;
        let (info, needs) = describe::<C>(
            linking.engine,
            &pre,
            linking.origin.into(),
            linking.info_max_memory_bytes,
        )
        .await?;
        Ok(Linked {
            runner: Box::new(LinkedAs::<C> {
                engine: linking.engine.clone(),
                pre,
                containment: linking.containment,
            }),
            info,
            needs,
        })
    })
}

/// Calls the component's `info()` in a throw-away store, bounded in fuel,
/// memory and time, since it is untrusted code like the rest.
async fn describe<C: Contract>(
    engine: &Engine,
    pre: &C::Pre,
    name_hint: Arc<str>,
    max_memory_bytes: u64,
) -> Result<(AdapterInfo, Needs), LoadError> {
    const INFO_FUEL: u64 = 1_000_000_000;
    const INFO_TIMEOUT: Duration = Duration::from_secs(5);
    let mut store = new_store(
        engine,
        name_hint,
        &RunLimits {
            max_memory_bytes,
            fuel: Some(INFO_FUEL),
            ..RunLimits::default()
        },
        &RunScope::none(),
        None,
        moat_contain::Containment::default(),
    )
    .map_err(|e| LoadError::Info {
        message: format!("{e:#}"),
        limit: None,
    })?;
    let control = store.data().control.clone();
    let call = async {
        let instance = C::instantiate(pre, &mut store).await?;
        C::info(&instance, &mut store).await
    };
    let result = tokio::time::timeout(INFO_TIMEOUT, call).await;
    match result {
        Ok(Ok(described)) => Ok(described),
        Ok(Err(error)) => {
            let failure = classify(&store, &error, Some(INFO_FUEL));
            Err(LoadError::Info {
                message: failure.to_string(),
                // Its fuel is fixed; its memory cap is the run's.
                limit: failure
                    .limit()
                    .filter(|l| *l == moat_engine::Setting::MaxMemory),
            })
        }
        Err(_) => {
            control.kill();
            Err(LoadError::Info {
                message: format!("info() did not return within {} s", INFO_TIMEOUT.as_secs()),
                limit: None,
            })
        }
    }
}
