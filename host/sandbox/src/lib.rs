//! moat's sandbox: runs adapter components under wasmtime, as untrusted
//! code.
//!
//! One [`Sandbox`] per process holds the engine (component model, fuel,
//! epoch interruption, instance pool), the linker with exactly the imports
//! an adapter may use, and the compiled-component cache. A loaded component
//! is a [`WasmAdapter`]: an engine [`Adapter`](moat_engine::Adapter) whose
//! runs each get their own store with their memory cap and fuel budget, a
//! WASI context built from their grants (files and environment), outgoing
//! HTTP checked against their network grants, and child processes exactly
//! as granted ([`RunScope`]). This layer converts and contains; the engine
//! (`moat-engine`) applies the event rules.
//!
//! This crate loads and contains; it does not start runs. A program
//! embedding moat starts them through `moat-launch` (its `Launcher`:
//! admission under a ceiling, the record, the run, written once), which
//! hands the engine this crate's [`WasmAdapter`] scoped by a [`RunScope`]:
//!
//! ```
//! use moat_sandbox::{Sandbox, SandboxConfig};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! // One sandbox per process; it compiles components once and caches them.
//! let sandbox = Sandbox::new(SandboxConfig::default())?;
//! let echo = moat_builtins::component("echo").expect("echo is built in");
//! let adapter = sandbox.load_bytes("built-in".into(), echo.to_vec()).await?;
//! // Or any component on disk: `sandbox.load_file(path).await?`.
//! // What it declares it needs, before any run is admitted.
//! println!("{:?}", adapter.needs());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! Modules, by what they own:
//! - [`contract`]: the `moat:adapter` versions this host runs, side by side.
//! - runtime: the process-wide engine, linker and cache; loading.
//! - adapter, session, state, control: one component, one run, its store.
//! - capabilities, http: what a component reaches, exactly as granted;
//!   the programs it starts are contained by `moat-contain` (its
//!   `ProcessTable`, the `process` import's host side), which also asks
//!   for what a run's grants do not cover (`moat_contain::approvals`).
//! - limits, failure, output: caps, failures and guest output, turned
//!   into what the engine understands.

mod adapter;
mod cache;
mod capabilities;
pub mod children;
mod config;
pub mod contract;
mod control;
mod error;
mod failure;
mod filesystem;
mod http;
mod info;
mod limits;
mod output;
mod precheck;
mod runtime;
mod scope;
mod session;
mod state;

pub use adapter::{ComponentDetails, WasmAdapter};
pub use cache::{CacheOutcome, FileIdentity};
pub use children::{ChildError, ChildRequest, ChildRun, ChildRunner, ChildRuns};
pub use config::{
    CompileWatcher, Compiling, MAX_MEMORY_CEILING, SandboxConfig, default_cache_dir,
    default_memory_budget,
};
pub use contract::{ADAPTER_INTERFACE, CONTRACT_PACKAGE, ContractVersion};
pub use control::stop_all_runs;
pub use error::{LoadError, SandboxError};
pub use http::{MAX_REQUEST_BODY_BYTES, MAX_RESPONSE_BODY_BYTES};
pub use precheck::DEFAULT_MAX_FUNCTION_BYTES;
pub use runtime::{CompileReport, Sandbox};
pub use scope::RunScope;
