//! [`Contract`]: what the sandbox needs of one contract version's
//! generated bindings, whichever the version. The adapter and its sessions
//! are written against it once; each version module implements it, the
//! calls into its bindings by [`generated_calls!`].

use std::future::Future;

use moat_engine::{AdapterEvent, AdapterInfo, ErrorInfo, RunOptions};
use moat_grants::{Needs, TrustLevel};
use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker, ResourceAny};

use super::version::ContractVersion;
use crate::state::RunState;

/// One version of the contract as the host runs it: its generated bindings
/// behind the few operations the sandbox needs. Implemented once per
/// version module: its version, imports and options by hand, the rest by
/// [`generated_calls!`].
pub(crate) trait Contract: 'static {
    /// The version, read from the package line of its WIT.
    const VERSION: ContractVersion;
    /// A component linked against this version's imports, ready to
    /// instantiate.
    type Pre: Clone + Send + Sync + 'static;
    /// A live instance of such a component.
    type Instance: Send + Sync + 'static;
    /// The options its `run` takes.
    type Options;

    /// Adds this version's imports (the host services) to the linker.
    fn add_to_linker(linker: &mut Linker<RunState>) -> wasmtime::Result<()>;

    /// A run's options as this version carries them, or the refusal, before
    /// the guest runs, of what it cannot carry.
    fn options(options: &RunOptions, trust: TrustLevel) -> Result<Self::Options, ErrorInfo>;

    /// Checks the component's exports against this version's and keeps
    /// what instantiating it needs.
    fn pre(pre: InstancePre<RunState>) -> wasmtime::Result<Self::Pre>;

    /// Instantiates the component in `store`.
    fn instantiate(
        pre: &Self::Pre,
        store: &mut Store<RunState>,
    ) -> impl Future<Output = wasmtime::Result<Self::Instance>> + Send;

    /// Calls `info()`.
    fn info(
        instance: &Self::Instance,
        store: &mut Store<RunState>,
    ) -> impl Future<Output = wasmtime::Result<(AdapterInfo, Needs)>> + Send;

    /// Calls `run(prompt, options)`: the session resource, or the
    /// adapter's refusal (or this version's, see [`Contract::options`]).
    fn run(
        instance: &Self::Instance,
        store: &mut Store<RunState>,
        prompt: &str,
        options: &RunOptions,
        trust: TrustLevel,
    ) -> impl Future<Output = wasmtime::Result<Result<ResourceAny, ErrorInfo>>> + Send;

    /// Pulls at most `max` events from the session: `next-batch(max)` from
    /// 0.3.0 on, one `next()` before. An empty list: the stream is over.
    /// The list is the guest's: its length is not checked here.
    fn next_batch(
        instance: &Self::Instance,
        store: &mut Store<RunState>,
        session: ResourceAny,
        max: u32,
    ) -> impl Future<Output = wasmtime::Result<Vec<AdapterEvent>>> + Send;
}

/// Writes the items of a version module's `impl Contract` that only call
/// the bindings `wasmtime::component::bindgen!` generated in that module:
/// pre-instantiating and instantiating its world, `info`, `run` and the
/// session's pull. bindgen names what it generates for `adapter-world`
/// alike in every version, so these are written once, here, and a
/// version's `impl` holds only what is its own (its version, imports and
/// options).
///
/// `convert` names the module in scope that converts the bindings' infos,
/// errors and events to the engine's: the newest version's, since older
/// versions' bindings return its types. `pull`, the one call that differs
/// between versions, is written as a closure of the generated
/// `GuestSession`, the store, the session resource and `max`; what it
/// returns (a list, or an option where a version pulls one event a call)
/// is the events pulled.
macro_rules! generated_calls {
    (
        convert: $convert:ident,
        pull: |$guest:ident, $store:ident, $session:ident, $max:pat_param| $pull:expr $(,)?
    ) => {
        type Pre = AdapterWorldPre<$crate::state::RunState>;
        type Instance = AdapterWorld;

        fn pre(
            pre: ::wasmtime::component::InstancePre<$crate::state::RunState>,
        ) -> ::wasmtime::Result<Self::Pre> {
            AdapterWorldPre::new(pre)
        }

        async fn instantiate(
            pre: &Self::Pre,
            store: &mut ::wasmtime::Store<$crate::state::RunState>,
        ) -> ::wasmtime::Result<Self::Instance> {
            pre.instantiate_async(store).await
        }

        async fn info(
            instance: &Self::Instance,
            store: &mut ::wasmtime::Store<$crate::state::RunState>,
        ) -> ::wasmtime::Result<(::moat_engine::AdapterInfo, ::moat_grants::Needs)> {
            let info = instance.moat_adapter_adapter().call_info(store).await?;
            Ok($convert::info(info))
        }

        async fn run(
            instance: &Self::Instance,
            store: &mut ::wasmtime::Store<$crate::state::RunState>,
            prompt: &str,
            options: &::moat_engine::RunOptions,
            trust: ::moat_grants::TrustLevel,
        ) -> ::wasmtime::Result<
            ::std::result::Result<::wasmtime::component::ResourceAny, ::moat_engine::ErrorInfo>,
        > {
            let options =
                match <Self as $crate::contract::bindings::Contract>::options(options, trust) {
                    Ok(options) => options,
                    Err(refusal) => return Ok(Err(refusal)),
                };
            let started = instance
                .moat_adapter_adapter()
                .call_run(store, prompt, &options)
                .await?;
            Ok(started.map_err($convert::error_info))
        }

        async fn next_batch(
            instance: &Self::Instance,
            $store: &mut ::wasmtime::Store<$crate::state::RunState>,
            $session: ::wasmtime::component::ResourceAny,
            $max: u32,
        ) -> ::wasmtime::Result<::std::vec::Vec<::moat_engine::AdapterEvent>> {
            let $guest = instance.moat_adapter_adapter().session();
            let pulled = $pull.await?;
            Ok(pulled.into_iter().map($convert::event).collect())
        }
    };
}

pub(crate) use generated_calls;
