//! Contract `moat:adapter@0.3.0` (`wit/v0.3.0`), run through the newest
//! version's module: nothing of it is its own.
//!
//! 0.4.0 added the import `approvals` and changed nothing else: 0.3.0's
//! `types`, `host`, `process` and `runs` are 0.4.0's. So the bindings
//! generated here take all four from 0.4.0's (bindgen's `with`): their host
//! side is 0.4.0's, and what a 0.3.0 component returns is 0.4.0's types,
//! converted by 0.4.0's code. Only its exports are generated here.

use moat_engine::{ErrorInfo, RunOptions};
use moat_grants::TrustLevel;
use wasmtime::component::{HasSelf, Linker, LinkerInstance};

use super::bindings;
use super::v0_4_0 as latest;
use super::version::ContractVersion;
use crate::state::RunState;
use latest::convert;
use latest::moat::adapter as unchanged;

wasmtime::component::bindgen!({
    path: "../../wit/v0.3.0",
    world: "adapter-world",
    exports: { default: async },
    with: {
        // The same in 0.4.0: its bindings, and with them its host side.
        "moat:adapter/types": unchanged::types,
        "moat:adapter/host": unchanged::host,
        "moat:adapter/process": unchanged::process,
        "moat:adapter/runs": unchanged::runs,
    },
});

/// Contract 0.3.0, as the sandbox runs it.
pub(crate) struct Contract;

impl bindings::Contract for Contract {
    const VERSION: ContractVersion =
        ContractVersion::of_wit(include_str!("../../../../../wit/v0.3.0/adapter.wit"));
    type Options = unchanged::types::Options;

    /// 0.4.0's host side, under 0.3.0's names. Not the generated world's
    /// `add_to_linker`: the interfaces it takes from 0.4.0 would add
    /// themselves under 0.4.0's names, which 0.4.0's module adds.
    fn add_to_linker(linker: &mut Linker<RunState>) -> wasmtime::Result<()> {
        unchanged::types::add_to_linker_instance::<RunState, HasSelf<RunState>>(
            &mut interface(linker, "types")?,
            |state| state,
        )?;
        unchanged::host::add_to_linker_instance::<RunState, HasSelf<RunState>>(
            &mut interface(linker, "host")?,
            |state| state,
        )?;
        unchanged::process::add_to_linker_instance::<RunState, HasSelf<RunState>>(
            &mut interface(linker, "process")?,
            |state| state,
        )?;
        unchanged::runs::add_to_linker_instance::<RunState, HasSelf<RunState>>(
            &mut interface(linker, "runs")?,
            |state| state,
        )
    }

    /// 0.3.0 carries every option.
    fn options(options: &RunOptions, trust: TrustLevel) -> Result<Self::Options, ErrorInfo> {
        Ok(convert::options(options, trust))
    }

    bindings::generated_calls! {
        convert: convert,
        pull: |session, store, handle, max| session.call_next_batch(store, handle, max),
    }
}

/// The linker's instance for 0.3.0's interface `name`.
fn interface<'a>(
    linker: &'a mut Linker<RunState>,
    name: &str,
) -> wasmtime::Result<LinkerInstance<'a, RunState>> {
    super::interface_instance(linker, <Contract as bindings::Contract>::VERSION, name)
}
