//! One running adapter: its store, its instance and its session resource.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;

use futures::future::BoxFuture;
use moat_engine::{
    AdapterEvent, AdapterSession, Denial, RunLimits, SessionControl, SessionFailure,
};
use wasmtime::component::ResourceAny;
use wasmtime::{Engine, Store, UpdateDeadline};

use crate::contract::bindings::Contract;
use crate::control::RunControl;
use crate::failure::{KilledByHost, classify};
use crate::scope::RunScope;
use crate::state::RunState;

/// A store for one run: its grants as a WASI context, the memory cap, the
/// fuel budget, and an epoch callback that yields to other tasks on every
/// tick (so a spinning guest never holds a thread, and deadlines are
/// noticed) and traps once the run is killed.
pub(crate) fn new_store(
    engine: &Engine,
    adapter: Arc<str>,
    limits: &RunLimits,
    scope: &RunScope,
    deadline: Option<tokio::time::Instant>,
    containment: moat_contain::Containment,
) -> wasmtime::Result<Store<RunState>> {
    let control = RunControl::new(engine.clone(), containment);
    let state = RunState::new(adapter, control, limits, scope, deadline)?;
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.memory);
    store.set_fuel(limits.fuel.unwrap_or(u64::MAX))?;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|context| {
        if context.data().control.is_killed() {
            return Err(KilledByHost.into());
        }
        Ok(UpdateDeadline::Yield(1))
    });
    Ok(store)
}

/// How many events the host asks a session for at once. Enough that a
/// guest with events at hand pays one call for many (the call, not the
/// event, is what costs); small enough that a batch stays a small buffer
/// and a run in a parallel merge does not hold the others back for long.
pub(crate) const BATCH_MAX: u32 = 64;

/// A started Wasm adapter session of contract version `C`.
pub(crate) struct WasmSession<C: Contract> {
    store: Store<RunState>,
    instance: C::Instance,
    session: ResourceAny,
    fuel_budget: Option<u64>,
    /// Events of the last batch not yet handed to the engine.
    ready: VecDeque<AdapterEvent>,
}

impl<C: Contract> WasmSession<C> {
    pub(crate) fn new(
        store: Store<RunState>,
        instance: C::Instance,
        session: ResourceAny,
        fuel_budget: Option<u64>,
    ) -> Self {
        Self {
            store,
            instance,
            session,
            fuel_budget,
            ready: VecDeque::new(),
        }
    }

    /// The next held event, unless the run was killed (a killed run's
    /// held events go nowhere: [`pull`](Self::pull) reports the kill).
    fn take_ready(&mut self) -> Option<AdapterEvent> {
        if self.store.data().control.is_killed() {
            return None;
        }
        self.ready.pop_front()
    }

    async fn pull(&mut self) -> Result<Option<AdapterEvent>, SessionFailure> {
        if let Some(event) = self.take_ready() {
            return Ok(Some(event));
        }
        let control = self.store.data().control.clone();
        let batch = {
            let mut call = std::pin::pin!(C::next_batch(
                &self.instance,
                &mut self.store,
                self.session,
                BATCH_MAX
            ));
            // wasmtime sets a yielded guest's next epoch deadline only once
            // it is resumed, so a kill that lands during the pause would not
            // be seen until the following tick: look at the flag first.
            std::future::poll_fn(|cx| {
                if control.is_killed() {
                    return Poll::Ready(None);
                }
                call.as_mut().poll(cx).map(Some)
            })
            .await
        };
        let Some(batch) = batch else {
            return Err(SessionFailure::Killed);
        };
        let batch = batch.map_err(|error| classify(&self.store, &error, self.fuel_budget))?;
        // The list was lifted whole before its length could be seen: its
        // size is bounded by the guest's memory cap, not by `BATCH_MAX`.
        if batch.len() > BATCH_MAX as usize {
            return Err(SessionFailure::Crashed {
                message: format!(
                    "the adapter broke the contract: `next-batch` returned {} events, at most {BATCH_MAX} were asked for",
                    batch.len()
                ),
            });
        }
        self.ready = VecDeque::from(batch);
        Ok(self.ready.pop_front())
    }
}

impl<C: Contract> AdapterSession for WasmSession<C> {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<AdapterEvent>, SessionFailure>> {
        Box::pin(self.pull())
    }

    fn ready(&mut self) -> Option<AdapterEvent> {
        self.take_ready()
    }

    fn control(&self) -> Arc<dyn SessionControl> {
        self.store.data().control.clone()
    }

    fn take_denials(&mut self) -> Vec<Denial> {
        self.store.data().denials.take()
    }

    fn take_limits_hit(&mut self) -> Vec<moat_engine::ProgramLimitHit> {
        self.store.data().control.children.limits_hit()
    }

    fn containment(&self) -> Option<String> {
        self.store.data().processes.containment()
    }

    fn close(mut self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            // Runs the adapter's destructor; whatever it does (trap, spin
            // until killed) the store is freed when `self` drops.
            if let Err(error) = self.session.resource_drop_async(&mut self.store).await {
                tracing::debug!(adapter = %self.store.data().adapter, "session destructor failed: {error:#}");
            }
        })
    }
}
