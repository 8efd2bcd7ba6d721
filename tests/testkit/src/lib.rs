//! What moat's tests and benchmarks share, kept out of the shipped crates:
//!
//! - [`native`]: native, in-process adapters: a scripted double that
//!   misbehaves on cue, and the native echo the benchmarks set beside the
//!   Wasm one;
//! - [`engine`]: helpers for the engine's tests with those doubles;
//! - [`components`]: the misbehaving components of `adapters/testing/`,
//!   built by this crate's build script;
//! - the sandbox harness (at the root): one sandbox per test process,
//!   running components, assertions about event streams;
//! - [`http_server`], [`llm_server`], [`llm`]: loopback servers speaking
//!   plain HTTP and the vendors' streaming formats;
//! - [`fake_cli`]: a fake agent CLI replaying recordings of the real ones.

pub mod components {
    //! Paths of the misbehaving adapters in `adapters/testing/`, built for
    //! wasm32-wasip2 by this crate's build script.
    include!(concat!(env!("OUT_DIR"), "/testing_components.rs"));
}

pub mod engine;
pub mod fake_cli;
mod harness;
pub mod http_server;
pub mod llm;
pub mod llm_server;
pub mod native;
pub mod wasm;

pub use harness::*;
