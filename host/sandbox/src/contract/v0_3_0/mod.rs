//! Contract `moat:adapter@0.3.0` (`wit/v0.3.0`): the bindings generated
//! from its WIT, the conversions between them and the sandbox's own types,
//! and the host side of its imports.

mod convert;
mod host;
mod process;
mod runs;

use moat_engine::{AdapterEvent, AdapterInfo, ErrorInfo, RunOptions};
use moat_grants::{Needs, TrustLevel};
use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker, ResourceAny};

use super::ContractVersion;
use crate::state::RunState;

wasmtime::component::bindgen!({
    path: "../../wit/v0.3.0",
    world: "adapter-world",
    imports: {
        // Waiting for a child is async on the host; to the guest it blocks.
        "moat:adapter/process": async | trappable,
        // Waiting for a child run is async on the host too.
        "moat:adapter/runs": async | trappable,
    },
    exports: { default: async },
    with: {
        "moat:adapter/process.child": crate::process::RunningChild,
        "moat:adapter/runs.child-run": crate::children::ChildHandle,
    },
});

/// Contract 0.3.0, as the sandbox runs it.
pub(crate) struct Contract;

impl super::Contract for Contract {
    const VERSION: ContractVersion =
        ContractVersion::of_wit(include_str!("../../../../../wit/v0.3.0/adapter.wit"));
    type Pre = AdapterWorldPre<RunState>;
    type Instance = AdapterWorld;

    fn add_to_linker(linker: &mut Linker<RunState>) -> wasmtime::Result<()> {
        AdapterWorld::add_to_linker::<RunState, HasSelf<RunState>>(linker, |state| state)
    }

    fn pre(pre: InstancePre<RunState>) -> wasmtime::Result<Self::Pre> {
        AdapterWorldPre::new(pre)
    }

    async fn instantiate(
        pre: &Self::Pre,
        store: &mut Store<RunState>,
    ) -> wasmtime::Result<Self::Instance> {
        pre.instantiate_async(store).await
    }

    async fn info(
        instance: &Self::Instance,
        store: &mut Store<RunState>,
    ) -> wasmtime::Result<(AdapterInfo, Needs)> {
        let info = instance.moat_adapter_adapter().call_info(store).await?;
        Ok(convert::info(info))
    }

    async fn run(
        instance: &Self::Instance,
        store: &mut Store<RunState>,
        prompt: &str,
        options: &RunOptions,
        trust: TrustLevel,
    ) -> wasmtime::Result<Result<ResourceAny, ErrorInfo>> {
        let options = convert::options(options, trust);
        let started = instance
            .moat_adapter_adapter()
            .call_run(store, prompt, &options)
            .await?;
        Ok(started.map_err(convert::error_info))
    }

    async fn next_batch(
        instance: &Self::Instance,
        store: &mut Store<RunState>,
        session: ResourceAny,
        max: u32,
    ) -> wasmtime::Result<Vec<AdapterEvent>> {
        let events = instance
            .moat_adapter_adapter()
            .session()
            .call_next_batch(store, session, max)
            .await?;
        Ok(events.into_iter().map(convert::event).collect())
    }
}
