//! Nested runs: start runs of other adapters from inside an adapter (its
//! children), read their events, wait for their results, cancel them, as an
//! orchestrating agent does with sub-agents.
//!
//! ```no_run
//! use moat_guest::runs::{ChildRequest, start};
//!
//! let child = start(&ChildRequest::new("echo", "say hi"))?;
//! while let Some(event) = child.next_event(None)? {
//!     // Every event of the child: forward it, or look at it.
//!     let _ = event["type"].as_str();
//! }
//! let result = child.wait(None)?; // the EngineResult: status, text, usage
//! assert_eq!(result["text"], "say hi");
//! # Ok::<(), moat_guest::runs::RunError>(())
//! ```
//!
//! A child never has more than its parent: the grants it asks for must lie
//! within the parent run's own ([`RunError::Denied`] otherwise), and
//! without any it gets all of them. A child ends when its parent does, and
//! a dropped [`ChildRun`] cancels its child. The host limits how deep
//! children nest and how many live at once ([`RunError::LimitReached`]).
//! Outside a component (native unit tests) there is no host to run
//! children: [`start`] fails with [`RunError::Unsupported`].

use std::fmt;
use std::time::Duration;

use crate::json::Value;

/// A child run to start: a builder.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildRequest {
    adapter: String,
    prompt: String,
    options: Option<Value>,
    grants: Option<Value>,
    timeout: Option<Duration>,
}

impl ChildRequest {
    /// A run of `adapter` (a built-in's name or a component's path) on
    /// `prompt`, with default options, all of the parent's grants and the
    /// adapter's default time limit.
    pub fn new(adapter: impl Into<String>, prompt: impl Into<String>) -> Self {
        Self {
            adapter: adapter.into(),
            prompt: prompt.into(),
            options: None,
            grants: None,
            timeout: None,
        }
    }

    /// Its options, a JSON object of the host's RunOptions (`model`,
    /// `systemPrompt`, `maxTurns`, …).
    pub fn with_options(mut self, options: Value) -> Self {
        self.options = Some(options);
        self
    }

    /// The grants it asks for, a JSON object (`net`, `read`, `write`,
    /// `env`, `run`, as the `--allow-*` flags take them).
    pub fn with_grants(mut self, grants: Value) -> Self {
        self.grants = Some(grants);
        self
    }

    /// Its time limit.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// Why a child could not be started or read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// It asked for more than the parent has, or the host runs no nested
    /// runs; the message says which.
    Denied(String),
    /// No such adapter.
    NotFound(String),
    /// Too deep, or too many children at once.
    LimitReached(String),
    /// It could not start.
    Failed(String),
    /// The parent run was aborted while waiting: end with `done`
    /// interrupted.
    Interrupted,
    /// The wait's own timeout passed.
    TimedOut,
    /// Not running inside a component.
    Unsupported,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Denied(message)
            | RunError::NotFound(message)
            | RunError::LimitReached(message)
            | RunError::Failed(message) => f.write_str(message),
            RunError::Interrupted => f.write_str("the run was interrupted"),
            RunError::TimedOut => f.write_str("timed out waiting for the child"),
            RunError::Unsupported => f.write_str("nested runs need a host: run inside a component"),
        }
    }
}

impl std::error::Error for RunError {}

/// A started child run. Dropping it cancels the child if it still runs.
pub struct ChildRun {
    inner: imp::ChildRun,
}

impl fmt::Debug for ChildRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildRun").field("id", &self.id()).finish()
    }
}

impl ChildRun {
    /// The child's run id.
    pub fn id(&self) -> String {
        self.inner.id()
    }

    /// The child's next event (a Unified Event Stream event as JSON);
    /// `None` after its `done`. Waits at most `timeout` (`None`: until one
    /// comes).
    pub fn next_event(&self, timeout: Option<Duration>) -> Result<Option<Value>, RunError> {
        self.inner.next_event(timeout)
    }

    /// Waits until the child has ended: its result (the EngineResult:
    /// `status`, `text`, `usage`, `error`, …).
    pub fn wait(&self, timeout: Option<Duration>) -> Result<Value, RunError> {
        self.inner.wait(timeout)
    }

    /// Stops the child (it ends with `done` interrupted); idempotent.
    pub fn cancel(&self) {
        self.inner.cancel();
    }
}

/// Starts a child run of this run.
pub fn start(request: &ChildRequest) -> Result<ChildRun, RunError> {
    imp::start(request).map(|inner| ChildRun { inner })
}

/// `event` (one of a child's) as an extension event of this run,
/// `moat:child_event` with the child's id and the event: how a parent
/// surfaces its children's events to its own consumer.
pub fn surfaced(child: &str, event: &Value) -> crate::Event {
    crate::Event::extension(
        "moat:child_event",
        &crate::json::json!({"run": child, "event": event}),
    )
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::{ChildRequest, RunError, Value};
    use crate::bindings::moat::adapter::runs as wit;
    use std::time::Duration;

    /// Milliseconds for the host, saturated.
    fn millis(timeout: Option<Duration>) -> Option<u32> {
        timeout.map(|t| u32::try_from(t.as_millis()).unwrap_or(u32::MAX))
    }

    pub(super) struct ChildRun(wit::ChildRun);

    pub(super) fn start(request: &ChildRequest) -> Result<ChildRun, RunError> {
        let request = wit::ChildRequest {
            adapter: request.adapter.clone(),
            prompt: request.prompt.clone(),
            options: request.options.as_ref().map(Value::to_string),
            grants: request.grants.as_ref().map(Value::to_string),
            timeout_ms: request
                .timeout
                .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        };
        wit::start(&request).map(ChildRun).map_err(error)
    }

    impl ChildRun {
        pub(super) fn id(&self) -> String {
            self.0.id()
        }

        pub(super) fn next_event(
            &self,
            timeout: Option<Duration>,
        ) -> Result<Option<Value>, RunError> {
            match self.0.next_event(millis(timeout)).map_err(error)? {
                Some(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
                    RunError::Failed(format!("the host sent an event that is not JSON: {e}"))
                }),
                None => Ok(None),
            }
        }

        pub(super) fn wait(&self, timeout: Option<Duration>) -> Result<Value, RunError> {
            let text = self.0.wait(millis(timeout)).map_err(error)?;
            serde_json::from_str(&text).map_err(|e| {
                RunError::Failed(format!("the host sent a result that is not JSON: {e}"))
            })
        }

        pub(super) fn cancel(&self) {
            self.0.cancel();
        }
    }

    fn error(error: wit::RunError) -> RunError {
        match error {
            wit::RunError::Denied(message) => RunError::Denied(message),
            wit::RunError::NotFound(message) => RunError::NotFound(message),
            wit::RunError::LimitReached(message) => RunError::LimitReached(message),
            wit::RunError::Failed(message) => RunError::Failed(message),
            wit::RunError::Interrupted => RunError::Interrupted,
            wit::RunError::TimedOut => RunError::TimedOut,
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    //! Natively there is no host: nothing starts.
    use super::{ChildRequest, RunError, Value};
    use std::time::Duration;

    pub(super) struct ChildRun(std::convert::Infallible);

    pub(super) fn start(_request: &ChildRequest) -> Result<ChildRun, RunError> {
        Err(RunError::Unsupported)
    }

    impl ChildRun {
        pub(super) fn id(&self) -> String {
            match self.0 {}
        }

        pub(super) fn next_event(
            &self,
            _timeout: Option<Duration>,
        ) -> Result<Option<Value>, RunError> {
            match self.0 {}
        }

        pub(super) fn wait(&self, _timeout: Option<Duration>) -> Result<Value, RunError> {
            match self.0 {}
        }

        pub(super) fn cancel(&self) {
            match self.0 {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;

    #[test]
    fn natively_no_child_starts_and_events_surface_as_extensions() {
        assert_eq!(
            start(&ChildRequest::new("echo", "hi")).unwrap_err(),
            RunError::Unsupported
        );
        let event = surfaced("r_1", &json!({"type": "text"}));
        let crate::EventKind::Extension(extension) = event.kind else {
            panic!("an extension event")
        };
        assert_eq!(extension.name, "moat:child_event");
        let payload: Value = serde_json::from_str(&extension.payload).unwrap();
        assert_eq!(payload, json!({"run": "r_1", "event": {"type": "text"}}));
    }
}
