//! Contract `moat:adapter@0.2.0` (`wit/v0.2.0`), run through the newest
//! version's module: only what 0.3.0 changed is its own.
//!
//! 0.3.0 left the imports `host` and `process` as they were, and of `types`
//! changed only `options` (it added `directories`, `mcp-servers` and
//! `agents`); 0.4.0 changed none of them. So the bindings generated here
//! take those interfaces from the newest's (bindgen's `with`): their host
//! side is the newest's, and the infos, events and errors a 0.2.0
//! component returns are its types, converted by its code. What is 0.2.0's own: its `options` ([`types`]), refusing
//! the options it cannot carry, the session's one-event `next` where 0.3.0
//! has `next-batch`, and no `runs` import.

pub mod types;

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
    path: "../../wit/v0.2.0",
    world: "adapter-world",
    exports: { default: async },
    with: {
        // The same in the newest: its bindings, and with them its host side.
        "moat:adapter/host": unchanged::host,
        "moat:adapter/process": unchanged::process,
        // The newest's but for `options`.
        "moat:adapter/types": types,
    },
});

/// The code of the refusal of an option this contract cannot carry.
const UNSUPPORTED_OPTION: &str = "UNSUPPORTED_OPTION";

/// Contract 0.2.0, as the sandbox runs it.
pub(crate) struct Contract;

impl bindings::Contract for Contract {
    const VERSION: ContractVersion =
        ContractVersion::of_wit(include_str!("../../../../../wit/v0.2.0/adapter.wit"));
    type Options = types::Options;

    /// The newest's host side, under 0.2.0's names. Not the generated
    /// world's `add_to_linker`: the interfaces it takes from the newest
    /// would add themselves under the newest's names, which its module
    /// adds.
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
        )
    }

    /// The newest's options, refused when they set what 0.2.0 has no field for.
    fn options(options: &RunOptions, trust: TrustLevel) -> Result<Self::Options, ErrorInfo> {
        let beyond = options.beyond_contract_0_2();
        if !beyond.is_empty() {
            return Err(ErrorInfo {
                code: Some(UNSUPPORTED_OPTION.to_owned()),
                message: format!(
                    "this adapter was built against moat:adapter@0.2.0, which cannot carry {}; \
                     rebuild it with the current moat SDK",
                    beyond.join(", ")
                ),
                recoverable: false,
            });
        }
        Ok(types::Options::from(convert::options(options, trust)))
    }

    bindings::generated_calls! {
        convert: convert,
        // No batched pull: one event per call, whatever `max`.
        pull: |session, store, handle, _| session.call_next(store, handle),
    }
}

/// The linker's instance for 0.2.0's interface `name`.
fn interface<'a>(
    linker: &'a mut Linker<RunState>,
    name: &str,
) -> wasmtime::Result<LinkerInstance<'a, RunState>> {
    super::interface_instance(linker, <Contract as bindings::Contract>::VERSION, name)
}
