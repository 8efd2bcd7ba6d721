//! The error codes the engine puts in `error` events (docs/engine-rules.md).

/// The adapter crashed (trap, panic, host error) or was stopped.
pub const ADAPTER_ERROR: &str = "ADAPTER_ERROR";
/// The adapter refused the run without a code of its own.
pub const RUN_REFUSED: &str = "RUN_REFUSED";
/// The stream ended without a `done`.
pub const MISSING_DONE: &str = "MISSING_DONE";
/// The run's wall-clock limit passed.
pub const TIMEOUT: &str = "TIMEOUT";
/// The run's CPU budget ran out.
pub const FUEL_EXHAUSTED: &str = "FUEL_EXHAUSTED";
/// The adapter tried to grow past its memory cap (the run ends), or the
/// kernel killed one of the run's programs at theirs (recoverable).
pub const MEMORY_LIMIT: &str = "MEMORY_LIMIT";
/// A program of the run was refused a process or thread at the run's
/// process limit (`limits.max_processes`); recoverable: the program, and
/// the adapter, decide what follows.
pub const PROCESS_LIMIT: &str = "PROCESS_LIMIT";
/// An event broke the contract; it was dropped and the run went on.
pub const INVALID_EVENT: &str = "INVALID_EVENT";
/// The adapter asked for something it was not granted.
pub const CAPABILITY_DENIED: &str = "CAPABILITY_DENIED";
/// The adapter used a tool outside the run's effective tool set.
pub const TOOL_POLICY_VIOLATION: &str = "TOOL_POLICY_VIOLATION";
/// The host could not record the run (its run store failed mid-run) and
/// stopped it rather than go on without recording.
pub const STORE_ERROR: &str = "STORE_ERROR";
/// The backend no longer has the session a run asked to resume; unless the
/// caller turned the fallback off, the engine starts the run again as a
/// fresh session (`moat:resume_fallback`).
pub const SESSION_NOT_FOUND: &str = "SESSION_NOT_FOUND";
/// The run asks for more than whoever executes it may give (a cluster
/// worker's ceiling).
pub const BOUNDARY_VIOLATION: &str = "BOUNDARY_VIOLATION";
/// The cluster worker executing the run stopped answering.
pub const WORKER_LOST: &str = "WORKER_LOST";
