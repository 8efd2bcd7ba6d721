//! The engine: runs adapters and normalizes their event streams.
//!
//! It drives anything implementing [`Adapter`] (a Wasm component through
//! the sandbox, or a native double) and guarantees the rules of DESIGN.md §5
//! whatever the adapter does.
//!
//! - [`event`]: the Unified Event Stream consumers see (DESIGN.md §4).
//! - [`registry`]: adapters by name (ENG-001).
//! - [`run`]: [`run_agent`] and the stream rules (ENG-003 to ENG-009).
//! - [`parallel`]: [`run_parallel`], several runs merged (ENG-010 to
//!   ENG-012).
//! - [`tool_policy`]: which tools a run may use (ENG-013).
//! - [`validate`]: checking what an adapter emits.
//! - [`scripted`]: native adapters for tests and benchmarks.

pub mod adapter;
pub mod codes;
pub mod event;
pub mod parallel;
pub mod registry;
pub mod run;
pub mod scripted;
pub mod tool_policy;
pub mod validate;

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod properties;
#[cfg(test)]
mod testkit;

pub use adapter::*;
pub use event::*;
pub use parallel::{ParallelRun, ParallelTask, TaskEvent, run_parallel};
pub use registry::{Registry, RegistryError};
pub use run::{AgentRun, DEFAULT_DRAIN, EngineError, RunRequest, run_agent};
pub use scripted::{NativeEcho, ScriptedAdapter};
pub use tool_policy::{ToolPolicy, ToolPolicyViolation};
pub use validate::{InvalidEvent, ValidEvent, validate_event};
