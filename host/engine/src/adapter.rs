//! The seam between the engine and whatever runs an adapter.
//!
//! The engine drives any [`Adapter`] through these traits: the Wasm sandbox
//! implements them for components, tests implement them with native doubles.
//! Nothing here knows about wasmtime.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::event::{DoneStatus, ToolStatus, Usage};
use super::names::{Setting, SettingNames};

// A `Denial`'s remedy, defined with the other things a user can change
// (`names`) and named here as well, where it always was: the crate's
// re-exports and `moat_engine::adapter::Grant` take it from this module.
pub use super::names::Grant;

/// Options for one run, as the adapter receives them.
///
/// What a run may reach, and how far its backend may go on its own (the
/// trust level), are not options: the layer that runs the adapter takes
/// them as the run's scope (see [`Adapter`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RunOptions {
    /// The working directory the backend should use.
    pub cwd: Option<String>,
    /// The model the backend should use.
    pub model: Option<String>,
    /// Most agent turns the backend may take.
    pub max_turns: Option<u32>,
    /// Most the backend may spend, in US dollars.
    pub max_budget_usd: Option<f64>,
    /// How hard the model should think (backend-specific words).
    pub effort: Option<String>,
    /// Resume token of an earlier session.
    pub resume: Option<String>,
    /// `None`: no restriction from the caller; `Some(vec![])`: no tools.
    pub allowed_tools: Option<Vec<String>>,
    /// Tools removed from the allowed set.
    pub disallowed_tools: Vec<String>,
    /// A system prompt for the backend.
    pub system_prompt: Option<String>,
    /// Adapter-specific options (a JSON object).
    pub extra: Option<serde_json::Value>,
    /// Directories the backend may use besides `cwd` (absolute; the layer
    /// that runs the adapter grants them).
    pub directories: Vec<String>,
    /// MCP servers for the backend, the common `mcpServers` JSON object.
    pub mcp_servers: Option<serde_json::Value>,
    /// Sub-agents for backends that have them (a JSON object by name).
    pub agents: Option<serde_json::Value>,
}

impl RunOptions {
    /// The options a contract without directories, MCP servers and
    /// sub-agents cannot carry, by their field names, when set.
    pub fn beyond_contract_0_2(&self) -> Vec<&'static str> {
        let mut set = Vec::new();
        if !self.directories.is_empty() {
            set.push("directories");
        }
        if self.mcp_servers.is_some() {
            set.push("mcpServers");
        }
        if self.agents.is_some() {
            set.push("agents");
        }
        set
    }
}

/// A limit of the run's programs that held them back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramLimitHit {
    /// A fork or a new thread was refused: the programs had this many
    /// processes and threads ([`RunLimits::max_processes`]).
    Processes(u64),
    /// The kernel killed a program for memory: the programs may use this
    /// many bytes together ([`RunLimits::max_program_memory_bytes`]).
    Memory(u64),
}

/// Resource limits the runtime enforces on one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLimits {
    /// Wall-clock limit for the whole run, including time blocked in host
    /// calls; [`RunLimits::DEFAULT_TIMEOUT`] unless set. `None`: no limit,
    /// which the caller must ask for explicitly.
    pub timeout: Option<Duration>,
    /// CPU budget in fuel units. `None`: unlimited.
    pub fuel: Option<u64>,
    /// Cap on the adapter's linear memory, in bytes (the sandbox holds it
    /// to at most its own ceiling).
    pub max_memory_bytes: u64,
    /// Cap on the memory of the run's programs together, in bytes (the
    /// run's cgroup's `memory.max`, swap off).
    pub max_program_memory_bytes: u64,
    /// Largest event (its text and JSON fields together) the engine
    /// accepts; larger ones are dropped with an INVALID_EVENT error.
    pub max_event_bytes: usize,
    /// Most network connections the adapter may have open at once (the
    /// host's sockets are shared by every run).
    pub max_connections: usize,
    /// Most files and directories the adapter may have open at once
    /// (the host's file descriptors are shared by every run).
    pub max_open_files: usize,
    /// Most processes and threads the run's programs may have at once
    /// (the run's cgroup's `pids.max`): a fork bomb stops there.
    pub max_processes: u64,
    /// CPU time the run's programs may use, in thousandths of a CPU (the
    /// run's cgroup's `cpu.max`); `None`: no limit.
    pub milli_cpus: Option<u64>,
}

impl RunLimits {
    /// Default wall-clock limit: runs are bounded unless someone decides
    /// otherwise.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60 * 60);
    /// Default memory cap for one run.
    pub const DEFAULT_MAX_MEMORY_BYTES: u64 = 256 * 1024 * 1024;
    /// Default memory of a run's programs together: an agent CLI (Claude
    /// Code's takes about half a GiB) with a build or a test suite beside.
    pub const DEFAULT_MAX_PROGRAM_MEMORY_BYTES: u64 = 4 * 1024 * 1024 * 1024;
    /// Default largest accepted event.
    pub const DEFAULT_MAX_EVENT_BYTES: usize = 1024 * 1024;
    /// Default open connections per run: an adapter streams from one or
    /// two backends.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
    /// Default open files per run.
    pub const DEFAULT_MAX_OPEN_FILES: usize = 256;
    /// Default processes and threads of a run's programs: a parallel
    /// build's compilers and an agent CLI's runtime threads fit, a fork
    /// bomb stops long before it takes the machine.
    pub const DEFAULT_MAX_PROCESSES: u64 = 4096;
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            timeout: Some(Self::DEFAULT_TIMEOUT),
            fuel: None,
            max_memory_bytes: Self::DEFAULT_MAX_MEMORY_BYTES,
            max_program_memory_bytes: Self::DEFAULT_MAX_PROGRAM_MEMORY_BYTES,
            max_event_bytes: Self::DEFAULT_MAX_EVENT_BYTES,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_open_files: Self::DEFAULT_MAX_OPEN_FILES,
            max_processes: Self::DEFAULT_MAX_PROCESSES,
            milli_cpus: None,
        }
    }
}

/// An adapter's description of itself, as far as the engine cares: what
/// it declares it needs from the host is the runtime's business (the
/// sandbox reads it with the rest of the component's `info()`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdapterInfo {
    /// The name runs ask for it by (the registry key).
    pub name: String,
    /// Its own version.
    pub version: String,
    /// One line on what it runs.
    pub description: String,
    /// Whether tool lists may hold patterns the adapter understands.
    pub tool_patterns: bool,
}

/// An error reported by an adapter: a refusal to start or an error event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// A machine-readable code, e.g. `AUTH_FAILED`.
    pub code: Option<String>,
    /// What went wrong, for people.
    pub message: String,
    /// Whether the run can go on after it.
    pub recoverable: bool,
}

/// The payload of an adapter's own `done`.
#[derive(Debug, Clone, PartialEq)]
pub struct DoneInfo {
    /// How the run ended.
    pub status: DoneStatus,
    /// The final answer, when there is one.
    pub result: Option<String>,
    /// What resumes the backend's session, when it can be resumed.
    pub resume_token: Option<String>,
    /// What the run used, authentic or absent.
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
    /// What happened.
    pub kind: AdapterEventKind,
}

/// The kinds of event an adapter can emit: the Unified Event Stream's
/// (docs/architecture.md), as raw values from the adapter.
#[derive(Debug, Clone, PartialEq)]
pub enum AdapterEventKind {
    /// The session started.
    Init {
        /// The model the backend uses.
        model: Option<String>,
        /// The backend's working directory.
        cwd: Option<String>,
        /// The tools the backend offers the model.
        tools: Vec<String>,
        /// JSON object text.
        capabilities: Option<String>,
    },
    /// A whole piece of the assistant's text.
    Text(String),
    /// A streamed fragment of the assistant's text.
    TextDelta(String),
    /// A summary of the model's reasoning.
    Thinking(String),
    /// The agent calls a tool.
    ToolUse {
        /// The tool's name.
        tool_name: String,
        /// The call's id, which its result refers to.
        tool_use_id: String,
        /// JSON object text.
        input: String,
        /// A short description of the call for people.
        description: Option<String>,
    },
    /// A tool call's result.
    ToolResult {
        /// The id of the call it answers.
        tool_use_id: String,
        /// The tool's name.
        tool_name: String,
        /// Whether the call succeeded, failed or was denied.
        status: ToolStatus,
        /// Any JSON value, as text.
        output: String,
        /// How long the call took, in milliseconds.
        duration_ms: Option<u64>,
    },
    /// Something went wrong.
    Error(ErrorInfo),
    /// The backend asks whether it may use a tool.
    PermissionRequest {
        /// The tool's name.
        tool_name: String,
        /// The call's id.
        tool_use_id: String,
        /// JSON object text.
        input: String,
        /// Why the backend asks.
        reason: Option<String>,
    },
    /// The run ended.
    Done(DoneInfo),
    /// A vendor's own event (`vendor:name`), which consumers may ignore.
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
///
/// The messages state what happened; the engine adds how to change the
/// limit in the caller's words ([`SettingNames`]) when it reports one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionFailure {
    /// The adapter crashed: a trap, a panic, a host-side error.
    /// Maps to ADAPTER_ERROR.
    #[error("{message}")]
    Crashed {
        /// What happened, with the adapter's last words when there are any.
        message: String,
    },
    /// The run's CPU budget ran out. Maps to FUEL_EXHAUSTED.
    #[error("the adapter used up its CPU budget of {budget} fuel")]
    FuelExhausted {
        /// The budget, in fuel units.
        budget: u64,
    },
    /// The adapter tried to grow its memory past the cap. Maps to MEMORY_LIMIT.
    #[error("the adapter tried to use more than its memory cap of {limit_bytes} bytes")]
    MemoryLimit {
        /// The cap, in bytes.
        limit_bytes: u64,
    },
    /// The adapter held more host resources at once (streams, open files,
    /// requests, header maps…) than its memory cap allows: the host memory
    /// they take counts against the cap too. Maps to MEMORY_LIMIT.
    #[error(
        "the adapter held more than {resources} resources at once (streams, open files, requests, header maps), the most its memory cap of {limit_bytes} bytes allows"
    )]
    ResourceLimit {
        /// The most it may hold.
        resources: usize,
        /// The cap, in bytes.
        limit_bytes: u64,
    },
    /// The runtime stopped the adapter on the engine's request
    /// ([`SessionControl::kill`]).
    #[error("the adapter was stopped")]
    Killed,
}

impl SessionFailure {
    /// The setting that would have let the run go on, when raising one
    /// would.
    pub fn limit(&self) -> Option<Setting> {
        match self {
            Self::FuelExhausted { .. } => Some(Setting::Fuel),
            Self::MemoryLimit { .. } | Self::ResourceLimit { .. } => Some(Setting::MaxMemory),
            Self::Crashed { .. } | Self::Killed => None,
        }
    }
}

/// Why an adapter did not start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StartError {
    /// The adapter refused the run (its `run` returned an error), maybe
    /// after asking for something it was refused: those refusals are
    /// reported to the user before the adapter's own error.
    #[error("the adapter refused the run: {}", .refusal.message)]
    Refused {
        /// The adapter's own error.
        refusal: ErrorInfo,
        /// What it asked for and was refused before it gave up.
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
///
/// Plain data: what was asked, why it was refused, and which grant would
/// allow it. How the user gives that grant (a flag, a request field) is
/// the caller's to say ([`SettingNames::grant`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// What the adapter asked for.
    pub request: DeniedRequest,
    /// Why it was refused, e.g. "not granted" or "it resolves to 10.0.0.1,
    /// a private address".
    pub reason: String,
    /// The grant that would allow it; `None` when no grant would.
    pub remedy: Option<Grant>,
}

/// What an adapter asked for and was refused. Strings that came from the
/// adapter are already cut to a length fit for a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeniedRequest {
    /// An outgoing HTTP(S) request.
    Net {
        /// `http` or `https`.
        scheme: String,
        /// The host as the URL names it (a name, an IPv4 address or a
        /// bracketed IPv6 one).
        host: String,
        /// The port, explicit or the scheme's default.
        port: u16,
    },
    /// A program to start.
    Program {
        /// The program as the adapter named it.
        program: String,
    },
    /// A working directory for a program.
    ProgramDir {
        /// The program as the adapter named it.
        program: String,
        /// The directory it was to run in.
        dir: String,
    },
    /// An environment variable the adapter set for a program.
    ProgramEnv {
        /// The program as the adapter named it.
        program: String,
        /// The variable's name.
        name: String,
    },
    /// A named Unix socket a program of the run connected to.
    UnixSocket {
        /// The socket's path, symbolic links resolved.
        path: String,
    },
    /// A symbolic link the adapter asked to make.
    Symlink {
        /// Where the link was to be, as the adapter named it.
        link: String,
        /// What it was to point to.
        target: String,
    },
}

impl DeniedRequest {
    /// The kind of capability asked for: "net", "socket", "run", "env" or
    /// "write".
    pub fn capability(&self) -> &'static str {
        match self {
            Self::Net { .. } => "net",
            Self::UnixSocket { .. } => "socket",
            Self::Program { .. } | Self::ProgramDir { .. } => "run",
            Self::ProgramEnv { .. } => "env",
            Self::Symlink { .. } => "write",
        }
    }
}

impl fmt::Display for DeniedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Net { scheme, host, port } => write!(f, "{scheme}://{host}:{port}"),
            Self::UnixSocket { path } => write!(f, "the Unix socket {path:?}"),
            Self::Program { program } => write!(f, "{program:?}"),
            Self::ProgramDir { program, dir } => write!(f, "{program:?} in {dir:?}"),
            Self::ProgramEnv { program, name } => write!(f, "{name} for {program:?}"),
            Self::Symlink { link, target } => write!(f, "a link {link:?} to {target:?}"),
        }
    }
}

impl fmt::Display for Denial {
    /// What was refused and why, without the remedy (the message the
    /// adapter itself gets back).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} access to {} refused: {}",
            self.request.capability(),
            self.request,
            self.reason
        )
    }
}

impl Denial {
    /// The text of the error event that reports it: what was refused, why,
    /// and how to allow it in the caller's words.
    pub fn message(&self, names: &dyn SettingNames) -> String {
        match &self.remedy {
            Some(grant) => format!("{self}; to allow it, {}", names.grant(grant)),
            None => self.to_string(),
        }
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
    /// An event the session already holds, handed over without waiting: a
    /// session that pulls several events at a time keeps the rest here,
    /// and the engine takes them before it awaits [`next`](Self::next)
    /// (no future per event). `None`: nothing held. The default holds none.
    fn ready(&mut self) -> Option<AdapterEvent> {
        None
    }
    /// A handle that interrupts or kills this session from anywhere.
    fn control(&self) -> Arc<dyn SessionControl>;
    /// The refusals recorded since the last call, oldest first. The engine
    /// asks after every [`next`](AdapterSession::next) and reports each
    /// before the event `next` returned. The default: none (a session that
    /// refuses nothing, such as a native adapter).
    fn take_denials(&mut self) -> Vec<Denial> {
        Vec::new()
    }
    /// The limits of the run's programs the kernel held them to since the
    /// last call (a fork refused at the process limit), asked after every
    /// [`next`](AdapterSession::next) with the refusals. The default: none.
    fn take_limits_hit(&mut self) -> Vec<ProgramLimitHit> {
        Vec::new()
    }
    /// How the programs this session starts are contained, in a word, for
    /// the run's `init` event; `None` (the default): it starts none.
    fn containment(&self) -> Option<String> {
        None
    }
    /// Release the session after its stream ended: the adapter's own cleanup
    /// runs (bounded by the runtime) and its failures are ignored.
    fn close(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// Something that can run: a Wasm component or a native test double.
///
/// `S` is the run's scope: what the layer that runs the adapter needs for
/// each run beside its prompt, options and limits. For a sandboxed
/// component it is what the run may reach and how far its backend may go
/// (`moat_sandbox::RunScope`); a native adapter, trusted code of the host
/// process, takes `()` or ignores it. The engine carries it, untouched,
/// from the [`RunRequest`](crate::RunRequest) to [`start`](Adapter::start).
pub trait Adapter<S = ()>: Send + Sync {
    /// Describe the adapter.
    fn info(&self) -> &AdapterInfo;
    /// Start a run within `scope`. The returned future may be dropped to
    /// abandon the start.
    fn start<'a>(
        &'a self,
        prompt: &'a str,
        options: &'a RunOptions,
        limits: &'a RunLimits,
        scope: &'a S,
    ) -> BoxFuture<'a, Result<Box<dyn AdapterSession>, StartError>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::FieldNames;

    #[test]
    fn a_denial_says_what_was_refused_and_how_to_allow_it_in_the_callers_words() {
        struct Flags;
        impl SettingNames for Flags {
            fn setting(&self, _: Setting) -> String {
                unreachable!()
            }
            fn grant(&self, grant: &Grant) -> String {
                match grant {
                    Grant::Net { host, port } => format!("run with --allow-net={host}:{port}"),
                    _ => unreachable!(),
                }
            }
        }
        let denial = Denial {
            request: DeniedRequest::Net {
                scheme: "http".into(),
                host: "example.com".into(),
                port: 80,
            },
            reason: "not granted".into(),
            remedy: Some(Grant::Net {
                host: "example.com".into(),
                port: 80,
            }),
        };
        assert_eq!(
            denial.to_string(),
            "net access to http://example.com:80 refused: not granted"
        );
        assert_eq!(
            denial.message(&Flags),
            "net access to http://example.com:80 refused: not granted; to allow it, run with --allow-net=example.com:80"
        );
        assert_eq!(
            denial.message(&FieldNames),
            "net access to http://example.com:80 refused: not granted; to allow it, grant net access to example.com:80"
        );
        let no_remedy = Denial {
            remedy: None,
            ..denial
        };
        assert_eq!(no_remedy.message(&Flags), no_remedy.to_string());
    }

    #[test]
    fn programs_are_quoted_as_the_adapter_named_them() {
        let denial = Denial {
            request: DeniedRequest::ProgramDir {
                program: "sh".into(),
                dir: "/etc".into(),
            },
            reason: "the working directory is outside the granted directories".into(),
            remedy: Some(Grant::Read { dir: "/etc".into() }),
        };
        assert_eq!(
            denial.message(&FieldNames),
            "run access to \"sh\" in \"/etc\" refused: the working directory is outside the granted directories; to allow it, grant read access to \"/etc\""
        );
    }
}
