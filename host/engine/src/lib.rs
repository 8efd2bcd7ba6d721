//! moat's engine: runs adapters and normalizes their event streams.
//!
//! It drives anything implementing [`Adapter`] (a WebAssembly component
//! through `moat-sandbox`, or a native adapter of the host process) and
//! guarantees the engine rules of `docs/engine-rules.md` (ENG-001 to
//! ENG-013) whatever the adapter does: exactly one terminal `done`, errors
//! synthesized for failures, the abort drain, the parallel merge and the
//! tool policy. It knows nothing of WebAssembly, of the operating system's
//! processes or of the command line.
//!
//! - [`event`]: the Unified Event Stream consumers see.
//! - [`adapter`]: the seam to whatever runs an adapter.
//! - [`registry`]: adapters by name (ENG-001).
//! - [`run`]: [`run_agent`] and the stream rules (ENG-003 to ENG-009).
//! - [`parallel`]: [`run_parallel`], several runs merged (ENG-010 to
//!   ENG-012).
//! - [`tool_policy`]: which tools a run may use (ENG-013).
//! - [`validate`]: checking what an adapter emits.
//! - [`names`]: the caller's words for settings, in the engine's messages.
//!
//! ```
//! use std::sync::Arc;
//!
//! use futures::future::BoxFuture;
//! use moat_engine::{
//!     Adapter, AdapterEvent, AdapterEventKind, AdapterInfo, AdapterSession, DoneStatus,
//!     EventPayload, Registry, RunLimits, RunOptions, RunRequest, SessionControl,
//!     SessionFailure, StartError, run_agent,
//! };
//!
//! /// A native adapter that says hello and ends without a `done`.
//! struct Hello(AdapterInfo);
//! struct Said(bool);
//! struct Nothing;
//!
//! impl SessionControl for Nothing {
//!     fn interrupt(&self) {}
//!     fn kill(&self) {}
//! }
//!
//! impl AdapterSession for Said {
//!     fn next(&mut self) -> BoxFuture<'_, Result<Option<AdapterEvent>, SessionFailure>> {
//!         let first = !std::mem::replace(&mut self.0, true);
//!         let text = AdapterEventKind::Text("hello".into());
//!         Box::pin(async move { Ok(first.then(|| AdapterEvent::new(text))) })
//!     }
//!     fn control(&self) -> Arc<dyn SessionControl> {
//!         Arc::new(Nothing)
//!     }
//!     fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
//!         Box::pin(async {})
//!     }
//! }
//!
//! impl Adapter for Hello {
//!     fn info(&self) -> &AdapterInfo {
//!         &self.0
//!     }
//!     fn start<'a>(
//!         &'a self,
//!         _: &'a str,
//!         _: &'a RunOptions,
//!         _: &'a RunLimits,
//!         _: &'a (),
//!     ) -> BoxFuture<'a, Result<Box<dyn AdapterSession>, StartError>> {
//!         Box::pin(async { Ok(Box::new(Said(false)) as Box<dyn AdapterSession>) })
//!     }
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let mut registry = Registry::new();
//! let info = AdapterInfo { name: "hello".into(), ..AdapterInfo::default() };
//! registry.register(Arc::new(Hello(info)))?;
//! let mut run = run_agent(&registry, RunRequest::new("hello", "hi"))?;
//! let mut kinds = Vec::new();
//! while let Some(event) = run.next().await {
//!     kinds.push(event.type_name().to_owned());
//!     if let EventPayload::Done(done) = &event.payload {
//!         // The adapter forgot its `done`: the engine reports it (ENG-008).
//!         assert_eq!(done.status, DoneStatus::Error);
//!     }
//! }
//! assert_eq!(kinds, ["text", "error", "done"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

pub mod adapter;
pub mod codes;
mod dormant;
pub mod event;
pub mod mcp;
pub mod names;
pub mod parallel;
pub mod price;
mod read_clock;
pub mod registry;
pub mod result;
pub mod run;
pub mod tool_policy;
pub mod validate;

pub use adapter::*;
pub use event::*;
pub use mcp::{McpConfigError, McpServer, McpServers};
pub use names::{FieldNames, Setting, SettingNames, likely_meant};
pub use parallel::{ParallelRun, ParallelTask, TaskEvent, run_parallel};
pub use price::{ModelPrice, PriceTable, PriceTableError};
pub use registry::{Registry, RegistryError};
pub use result::{
    EngineCallbacks, EngineResult, ResultError, ResultFold, TOOL_USE_SUMMARY_EVENT,
    TURNS_METADATA_KEY, run_to_result,
};
pub use run::{
    AgentRun, DEFAULT_DRAIN, EngineError, MAX_CALL_IDS, RESUME_FALLBACK_EVENT, RunRequest,
    UNKNOWN_MODEL, run_agent,
};
pub use tool_policy::{ToolPolicy, ToolPolicyViolation};
pub use validate::{InvalidEvent, MAX_CALL_ID_BYTES, MAX_SAFE_INTEGER, ValidEvent, validate_event};
