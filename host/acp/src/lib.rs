//! moat as an ACP agent (the Agent Client Protocol, version 1: JSON-RPC
//! 2.0, one message per line on stdio): an editor configures `moat acp
//! ADAPTER [flags]` as its agent server, and each of its prompts becomes a
//! run of ADAPTER started through the launch layer — contained, granted
//! only what the flags give, recorded in the run store like any other.
//!
//! - [`jsonrpc`]: the frames, checked;
//! - [`agent`]: the methods moat answers and how a turn runs, for an
//!   [`editor`] (the connection, [`serve`]);
//! - [`updates`]: a run's events as `session/update`s, its `done` as the
//!   stop reason;
//! - [`transcript`]: the conversation carried for adapters that keep no
//!   session; [`prompt`]: content blocks as prompt text; [`mcp`]: the
//!   editor's MCP servers as moat's.
//!
//! docs/acp.md says how to configure editors.

pub mod agent;
mod connection;
pub mod editor;
pub mod jsonrpc;
pub mod mcp;
pub mod prompt;
pub mod transcript;
pub mod updates;

pub use agent::{AcpAgent, Turn, TurnSpecs};
pub use connection::serve;
pub use editor::Editor;

/// The ACP version moat speaks.
pub const PROTOCOL_VERSION: u64 = 1;
