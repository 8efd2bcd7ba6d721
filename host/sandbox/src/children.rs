//! Nested runs: the port through which a component's child runs (the
//! contract's `runs` import) reach whoever runs the parent.
//!
//! The sandbox knows how a guest asks for a child and waits on it; it does
//! not know where runs are recorded, how adapters are found or what a
//! parent may grant. The layer that starts runs (moat-launch) implements
//! [`ChildRuns`] for each run and puts it in the run's
//! [`RunScope`](crate::RunScope); a run without one is refused every child.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use moat_engine::{AgentEvent, RunOptions};
use moat_grants::Grants;

/// A child run a component asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildRequest {
    /// A built-in adapter's name, or a component's path.
    pub adapter: String,
    /// What it is asked.
    pub prompt: String,
    /// Its options, as a run's.
    pub options: RunOptions,
    /// What it asks for; `None`: all of the parent's.
    pub grants: Option<Grants>,
    /// Its time limit; `None`: the adapter's default.
    pub timeout: Option<Duration>,
}

/// Why a child could not be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChildError {
    /// It asked for more than its parent has, or nested runs are not
    /// available here.
    #[error("{0}")]
    Denied(String),
    /// No such adapter.
    #[error("{0}")]
    NotFound(String),
    /// Too deep, or too many children at once.
    #[error("{0}")]
    LimitReached(String),
    /// It could not start.
    #[error("{0}")]
    Failed(String),
}

/// A started child, as its parent drives it. Dropping it cancels the child
/// if it still runs.
pub trait ChildRun: Send {
    /// The child's run id.
    fn id(&self) -> String;
    /// The child's next event; `None` after its `done`. Cancel-safe: an
    /// event is never lost when the future is dropped half way.
    fn next_event(&mut self) -> BoxFuture<'_, Option<AgentEvent>>;
    /// Its result once it has ended (the EngineResult, as JSON).
    fn result(&mut self) -> BoxFuture<'_, serde_json::Value>;
    /// Stops it; idempotent.
    fn cancel(&self);
}

/// Starts the child runs of one run.
pub trait ChildRuns: Send + Sync {
    /// Starts a child of the run, within its grants and limits.
    fn start(&self, request: ChildRequest) -> BoxFuture<'_, Result<Box<dyn ChildRun>, ChildError>>;
}

/// A run's [`ChildRuns`], as its scope carries it.
#[derive(Clone)]
pub struct ChildRunner(pub Arc<dyn ChildRuns>);

impl fmt::Debug for ChildRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ChildRunner")
    }
}

/// The same runner, not an equal one: scopes compare equal when they share
/// it.
impl PartialEq for ChildRunner {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ChildRunner {}

/// A child as the guest holds it (a resource of its run's table).
pub struct ChildHandle {
    pub(crate) run: Box<dyn ChildRun>,
    /// The child's `done` came: `next-event` answers `none` from now on.
    pub(crate) ended: bool,
}

impl Drop for ChildHandle {
    fn drop(&mut self) {
        if !self.ended {
            self.run.cancel();
        }
    }
}
