//! moat: a WebAssembly-sandboxed runtime for AI-agent adapters.
//!
//! Layers (DESIGN.md §1), each knowing only the one below it:
//! - [`engine`]: the registry, `run_agent` and the stream rules. Knows
//!   nothing of wasmtime.
//! - [`sandbox`]: runs adapter components under wasmtime with the limits
//!   and capabilities of each run. Applies no event rules.
//! - the `moat` binary (`src/cli/`): parses arguments and renders events.
//!
//! Beside them, [`grants`]: what a run may reach, as plain data the CLI
//! decides, the engine carries and the sandbox enforces.

pub mod builtin;
pub mod engine;
pub mod grants;
pub mod sandbox;
