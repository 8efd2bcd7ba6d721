//! Shared parts of moat's LLM API adapters (`openai`, `anthropic`).
//!
//! Both adapters send streamed HTTP requests to a vendor's API over
//! `wasi:http` and translate the server-sent events into Unified Event
//! Stream events: one request, or, with MCP servers, one per turn of the
//! tool loop. What differs is the vendor's wire format (the request
//! body and the stream's events), kept in each adapter; what is the same
//! lives here, with the vendor's names passed in as a [`Vendor`]:
//!
//! - [`config`]: the checks every run passes and the request's parts;
//! - [`endpoint`]: the base URL (options, then the vendor's variable, then
//!   the public API), the `--allow-net` grant it needs, the key, and the
//!   option checks both make before anything is sent;
//! - [`failure`]: HTTP error statuses and connection failures as error
//!   events a user can act on;
//! - [`stream`]: the bookkeeping every translator shares (the session id,
//!   the events that end a run) and the [`Translate`] trait;
//! - [`session`]: one run's phases: `init`, the request, the stream, the
//!   end; interruption and failures handled the same for every vendor;
//!   with MCP servers, the tool loop: tools called, results sent back,
//!   until the answer;
//! - [`mcp`], [`toolbox`]: the MCP client (stdio and streamable HTTP) and
//!   a run's servers with the tools its policy offers;
//! - [`conversation`]: the vendor's part of a conversation with tools;
//! - [`tally`]: usage summed over a run's model calls;
//! - [`loose`]: typed, lenient views of the servers' JSON events, which
//!   borrow their text instead of allocating it.
//!
//! Everything a server sends is untrusted: nothing here panics on its
//! input, and every string kept or quoted is bounded.

pub mod config;
pub mod conversation;
pub mod endpoint;
pub mod failure;
pub mod loose;
pub mod mcp;
pub mod session;
pub mod stream;
pub mod tally;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
pub mod toolbox;

pub use config::{Config, Prepared, Rules, prepare};
pub use conversation::{Conversation, ToolOutput};
pub use endpoint::{BaseSource, Endpoint, UNSUPPORTED_OPTION, Vendor, grant_of};
pub use failure::{Failure, cut, header, server_message, status_failure, transport_failure};
pub use session::{DEFAULT_MAX_TURNS, Session, TOOL_DENIED, UNKNOWN_TOOL};
pub use stream::{MALFORMED_EVENT, STREAM_CUT, StreamState, Translate};
pub use toolbox::Toolbox;
