//! The sandbox: runs adapter components under wasmtime.
//!
//! One [`Sandbox`] per process holds the engine (component model, fuel,
//! epoch interruption, instance pool), the linker with exactly the imports
//! an adapter may use, and the compiled-component cache. Each run gets its
//! own store with its memory cap, fuel budget and a WASI context built from
//! its grants (files and environment), outgoing HTTP checked against its
//! network grants, and child processes exactly as granted.
//! This layer converts and contains; the engine applies the event rules.

mod adapter;
mod bindings;
mod cache;
mod capabilities;
mod config;
mod contract;
mod convert;
mod denials;
mod error;
mod failure;
mod http;
mod info;
mod limits;
mod output;
mod process;
mod runtime;
mod session;
mod state;

pub use adapter::{ComponentDetails, WasmAdapter};
pub use cache::CacheOutcome;
pub use config::{MAX_MEMORY_CEILING, SandboxConfig, default_cache_dir};
pub use contract::{ADAPTER_INTERFACE, CONTRACT_PACKAGE, ContractVersion, HOST_CONTRACT};
pub use error::{LoadError, SandboxError};
pub use http::{MAX_REQUEST_BODY_BYTES, MAX_RESPONSE_BODY_BYTES};
pub use process::{MAX_LINE_BYTES, MAX_LIVE_CHILDREN, RunningChild, STDERR_TAIL_BYTES};
pub use runtime::{CompileReport, Sandbox};
