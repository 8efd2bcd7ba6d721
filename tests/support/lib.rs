//! Shared helpers for the end-to-end tests: the testing components, one
//! sandbox per test process, and assertions about event streams.

pub mod components {
    //! Paths of the misbehaving adapters in `adapters/testing/`, built for
    //! wasm32-wasip2 by this crate's build script.
    include!(concat!(env!("OUT_DIR"), "/testing_components.rs"));
}

pub mod fake_cli;
mod harness;
pub mod http_server;
pub mod llm;
pub mod llm_server;

pub use harness::*;
