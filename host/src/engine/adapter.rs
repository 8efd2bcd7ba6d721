//! The seam between the engine and whatever runs an adapter.
//!
//! The engine drives any [`Adapter`] through these traits: the Wasm sandbox
//! implements them for components, tests implement them with native doubles.
//! Nothing here knows about wasmtime.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::event::{DoneStatus, ToolStatus, Usage};
use crate::grants::Grants;

/// How much an adapter may let its backend do on its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustLevel {
    /// No backend-native file, web or shell tools.
    #[default]
    Sandbox,
    /// Files and web, no shell.
    Controlled,
    /// Everything, including a shell.
    Unrestricted,
}

/// Options for one run, as the adapter receives them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RunOptions {
    pub cwd: Option<String>,
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    pub max_budget_usd: Option<f64>,
    pub effort: Option<String>,
    /// Resume token of an earlier session.
    pub resume: Option<String>,
    /// `None`: no restriction from the caller; `Some(vec![])`: no tools.
    pub allowed_tools: Option<Vec<String>>,
    pub disallowed_tools: Vec<String>,
    pub trust: TrustLevel,
    pub system_prompt: Option<String>,
    /// Adapter-specific options (a JSON object).
    pub extra: Option<serde_json::Value>,
}

/// Resource limits the runtime enforces on one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLimits {
    /// Wall-clock limit for the whole run, including time blocked in host
    /// calls. `None`: no limit.
    pub timeout: Option<Duration>,
    /// CPU budget in fuel units. `None`: unlimited.
    pub fuel: Option<u64>,
    /// Cap on the adapter's linear memory, in bytes.
    pub max_memory_bytes: u64,
    /// Largest event (its text and JSON fields together) the engine
    /// accepts; larger ones are dropped with an INVALID_EVENT error.
    pub max_event_bytes: usize,
}

impl RunLimits {
    /// Default memory cap for one run.
    pub const DEFAULT_MAX_MEMORY_BYTES: u64 = 256 * 1024 * 1024;
    /// Default largest accepted event.
    pub const DEFAULT_MAX_EVENT_BYTES: usize = 1024 * 1024;
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            timeout: None,
            fuel: None,
            max_memory_bytes: Self::DEFAULT_MAX_MEMORY_BYTES,
            max_event_bytes: Self::DEFAULT_MAX_EVENT_BYTES,
        }
    }
}

/// What an adapter needs from the host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Needs {
    /// Network hosts, as "host" or "host:port".
    pub hosts: Vec<String>,
    /// Environment variable names.
    pub env: Vec<String>,
    /// Programs to spawn.
    pub programs: Vec<String>,
}

/// An adapter's description of itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdapterInfo {
    pub name: String,
    pub version: String,
    pub description: String,
    pub needs: Needs,
    /// Whether tool lists may hold patterns the adapter understands.
    pub tool_patterns: bool,
}

/// An error reported by an adapter: a refusal to start or an error event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub code: Option<String>,
    pub message: String,
    pub recoverable: bool,
}

/// The payload of an adapter's own `done`.
#[derive(Debug, Clone, PartialEq)]
pub struct DoneInfo {
    pub status: DoneStatus,
    pub result: Option<String>,
    pub resume_token: Option<String>,
    pub usage: Usage,
    /// The adapter's own measurement; the engine fills it in when absent.
    pub duration_ms: Option<u64>,
    /// Backend-specific details, as JSON text (an object).
    pub metadata: Option<String>,
}

/// One event as an adapter emitted it, before the engine validated it.
/// JSON-carrying fields are raw text, exactly as they crossed the boundary.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterEvent {
    /// The backend's session id, when the adapter knows it.
    pub session_id: Option<String>,
    pub kind: AdapterEventKind,
}

/// The kinds of event an adapter can emit (see DESIGN.md §4).
#[derive(Debug, Clone, PartialEq)]
pub enum AdapterEventKind {
    Init {
        model: Option<String>,
        cwd: Option<String>,
        tools: Vec<String>,
        /// JSON object text.
        capabilities: Option<String>,
    },
    Text(String),
    TextDelta(String),
    Thinking(String),
    ToolUse {
        tool_name: String,
        tool_use_id: String,
        /// JSON object text.
        input: String,
        description: Option<String>,
    },
    ToolResult {
        tool_use_id: String,
        tool_name: String,
        status: ToolStatus,
        /// Any JSON value, as text.
        output: String,
        duration_ms: Option<u64>,
    },
    Error(ErrorInfo),
    PermissionRequest {
        tool_name: String,
        tool_use_id: String,
        /// JSON object text.
        input: String,
        reason: Option<String>,
    },
    Done(DoneInfo),
    Extension {
        /// "vendor:name".
        name: String,
        /// Any JSON value, as text.
        payload: String,
    },
}

impl AdapterEvent {
    /// An event without a session id.
    pub fn new(kind: AdapterEventKind) -> Self {
        Self {
            session_id: None,
            kind,
        }
    }
}

/// Why an adapter stopped abnormally. Each maps to an error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionFailure {
    /// The adapter crashed: a trap, a panic, a host-side error.
    /// Maps to ADAPTER_ERROR.
    #[error("{message}")]
    Crashed { message: String },
    /// The run's CPU budget ran out. Maps to FUEL_EXHAUSTED.
    #[error("the adapter used up its CPU budget of {budget} fuel; raise it with --fuel")]
    FuelExhausted { budget: u64 },
    /// The adapter tried to grow its memory past the cap. Maps to MEMORY_LIMIT.
    #[error(
        "the adapter tried to use more than its memory cap of {limit_bytes} bytes; raise it with --max-memory"
    )]
    MemoryLimit { limit_bytes: u64 },
    /// The runtime stopped the adapter on the engine's request
    /// ([`SessionControl::kill`]).
    #[error("the adapter was stopped")]
    Killed,
}

/// Why an adapter did not start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StartError {
    /// The adapter refused the run (its `run` returned an error), maybe
    /// after asking for something it was refused: those refusals are
    /// reported to the user before the adapter's own error.
    #[error("the adapter refused the run: {}", .refusal.message)]
    Refused {
        refusal: ErrorInfo,
        denials: Vec<Denial>,
    },
    /// The adapter failed while starting.
    #[error(transparent)]
    Failed(#[from] SessionFailure),
}

impl StartError {
    /// The adapter's refusal, with nothing refused to it.
    pub fn refused(refusal: ErrorInfo) -> Self {
        Self::Refused {
            refusal,
            denials: Vec::new(),
        }
    }
}

/// Something the adapter asked for and the runtime refused because the run
/// was not granted it, reported so the user sees it (as a recoverable
/// `CAPABILITY_DENIED` error event) and not only the adapter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// The kind of grant that was missing: "net", "read", "env", "run".
    pub capability: String,
    /// What was asked for, e.g. `http://example.com:80`.
    pub target: String,
    /// Why it was refused, e.g. "not granted" or "resolves to a loopback
    /// address".
    pub reason: String,
    /// What would allow it, e.g. `--allow-net=example.com:80`.
    pub hint: String,
}

impl Denial {
    /// The text of the error event that reports it.
    pub fn message(&self) -> String {
        format!(
            "{} access to {} refused: {}; to allow it, run with {}",
            self.capability, self.target, self.reason, self.hint
        )
    }
}

/// A way to reach a running session from outside the task that drives it.
pub trait SessionControl: Send + Sync {
    /// Ask the adapter to wrap up: its `interrupted()` turns true and it is
    /// woken if it is computing or blocked, so the driver can drain it.
    fn interrupt(&self);
    /// Stop the adapter now: its pending and later calls fail with
    /// [`SessionFailure::Killed`].
    fn kill(&self);
}

/// A started run of an adapter: the engine pulls events until `None`.
pub trait AdapterSession: Send {
    /// The next event, `Ok(None)` when the stream is over.
    ///
    /// Dropping the returned future before it completes abandons the
    /// session: the engine then only drops it.
    fn next(&mut self) -> BoxFuture<'_, Result<Option<AdapterEvent>, SessionFailure>>;
    /// A handle that interrupts or kills this session from anywhere.
    fn control(&self) -> Arc<dyn SessionControl>;
    /// The refusals recorded since the last call, oldest first. The engine
    /// asks after every [`next`](AdapterSession::next) and reports each
    /// before the event `next` returned. The default: none (a session that
    /// refuses nothing, such as a native adapter).
    fn take_denials(&mut self) -> Vec<Denial> {
        Vec::new()
    }
    /// Release the session after its stream ended: the adapter's own cleanup
    /// runs (bounded by the runtime) and its failures are ignored.
    fn close(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// Something that can run: a Wasm component or a native test double.
pub trait Adapter: Send + Sync {
    /// Describe the adapter.
    fn info(&self) -> &AdapterInfo;
    /// Start a run that may reach what `grants` allow, and nothing else.
    /// A sandboxed adapter applies them; a native one (trusted code of the
    /// host process) may ignore them. The returned future may be dropped to
    /// abandon the start.
    fn start<'a>(
        &'a self,
        prompt: &'a str,
        options: &'a RunOptions,
        limits: &'a RunLimits,
        grants: &'a Grants,
    ) -> BoxFuture<'a, Result<Box<dyn AdapterSession>, StartError>>;
}
