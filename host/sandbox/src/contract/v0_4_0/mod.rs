//! Contract `moat:adapter@0.4.0` (`wit/v0.4.0`), the newest: the bindings
//! generated from its WIT, the conversions between them and the sandbox's
//! own types, and the host side of its imports.
//!
//! Older versions' modules are built on this one: what did not change
//! since is these bindings, this host side and these conversions there too
//! (see `v0_3_0`, `v0_2_0`).

mod approvals;
pub(super) mod convert;
mod host;
mod process;
mod runs;

use moat_engine::{ErrorInfo, RunOptions};
use moat_grants::TrustLevel;
use wasmtime::component::{HasSelf, Linker};

use super::bindings;
use super::version::ContractVersion;
use crate::state::RunState;

wasmtime::component::bindgen!({
    path: "../../wit/v0.4.0",
    world: "adapter-world",
    imports: {
        // Waiting for a child is async on the host; to the guest it blocks.
        "moat:adapter/process": async | trappable,
        // Waiting for a child run is async on the host too.
        "moat:adapter/runs": async | trappable,
        // And waiting for an answer.
        "moat:adapter/approvals": async,
    },
    exports: { default: async },
    with: {
        "moat:adapter/process.child": moat_contain::process::RunningChild,
        "moat:adapter/runs.child-run": crate::children::ChildHandle,
    },
});

/// Contract 0.4.0, as the sandbox runs it.
pub(crate) struct Contract;

impl bindings::Contract for Contract {
    const VERSION: ContractVersion =
        ContractVersion::of_wit(include_str!("../../../../../wit/v0.4.0/adapter.wit"));
    type Options = moat::adapter::types::Options;

    fn add_to_linker(linker: &mut Linker<RunState>) -> wasmtime::Result<()> {
        AdapterWorld::add_to_linker::<RunState, HasSelf<RunState>>(linker, |state| state)
    }

    /// 0.4.0 carries every option.
    fn options(options: &RunOptions, trust: TrustLevel) -> Result<Self::Options, ErrorInfo> {
        Ok(convert::options(options, trust))
    }

    bindings::generated_calls! {
        convert: convert,
        pull: |session, store, handle, max| session.call_next_batch(store, handle, max),
    }
}
