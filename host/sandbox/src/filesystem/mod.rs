//! What moat adds to wasmtime-wasi's `wasi:filesystem`: checks its
//! definitions do not make. Each shadows wasmtime-wasi's definition in the
//! linker and calls it when the check passes.

mod open_files;
mod symlinks;

use wasmtime::component::Linker;

use crate::state::RunState;

/// The `wasi:filesystem/types` interface wasmtime-wasi defines (older
/// minor versions a component imports resolve to it).
const TYPES: &str = "wasi:filesystem/types@0.2.12";

/// Shadows, in `linker` (which has wasmtime-wasi's definitions already),
/// the definitions moat checks.
pub(crate) fn add_to_linker(linker: &mut Linker<RunState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(TYPES)?;
    symlinks::shadow(&mut types)?;
    open_files::shadow(&mut types)?;
    linker.allow_shadowing(false);
    Ok(())
}
