//! The engine: runs adapters and normalizes their event streams.
//!
//! It drives anything implementing [`Adapter`] (a Wasm component through
//! the sandbox, or a native double) and guarantees the rules of DESIGN.md §5
//! whatever the adapter does.

pub mod adapter;
pub mod event;

pub use adapter::*;
pub use event::*;
