//! Runs executed elsewhere: [`Workers`], where a launcher hands a run it
//! does not execute itself (a cluster's workers), with the objects that
//! travel with it; and [`Executor`], what executes a handed run on the
//! worker's machine. The launch layer is written against these, the
//! cluster implements them.

use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use moat_engine::AgentEvent;
use tokio_util::sync::CancellationToken;

use crate::job::Job;
use crate::runs::RunsError;

/// Workers elsewhere, to which runs are handed: each run as a [`Job`],
/// with the objects it needs (its component, its project) stored where
/// its worker fetches them, and its changes sent back the same way.
#[async_trait::async_trait]
pub trait Workers: Send + Sync {
    /// Hands `job` to the workers: its record is created, pending, and a
    /// worker takes it.
    async fn submit(&self, job: Job) -> Result<(), RunsError>;

    /// Stores a component's bytes for the workers: their SHA-256, by
    /// which a job names it.
    async fn put_component(&self, bytes: &[u8]) -> Result<String, RunsError>;

    /// Stores a project (a git bundle) for the workers: its SHA-256.
    async fn put_project(&self, bundle: &[u8]) -> Result<String, RunsError>;

    /// Fetches the project `sha256` into `dir`: the bundle's path.
    async fn fetch_project(&self, sha256: &str, dir: &Path) -> Result<PathBuf, RunsError>;

    /// Keeps run `run`'s changes (a patch), sent back by its worker.
    async fn put_changes(&self, run: &str, changes: &[u8]) -> Result<(), RunsError>;

    /// Run `run`'s changes, once its worker sent them back.
    async fn changes(&self, run: &str) -> Result<Option<Vec<u8>>, RunsError>;

    /// Forgets run `run`'s changes (its workspace is removed).
    async fn remove_changes(&self, run: &str) -> Result<(), RunsError>;
}

/// Why a worker does not execute a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobRefusal {
    /// It asks for more than the worker's ceiling (BOUNDARY_VIOLATION).
    Boundary(String),
    /// It cannot run here: an unknown adapter, a component that does not
    /// load, limits no run may have.
    Failed(String),
    /// Its parent ended before it could start (the cancel its parent's end
    /// sent may have come before the worker took it).
    ParentEnded(String),
}

/// What executes a job on a worker's machine: the launch layer, wired by
/// the binary.
pub trait Executor: Send + Sync + 'static {
    /// Starts `job`'s run — its component at `component` when it is not a
    /// built-in — stopped by `abort`. Its events end with exactly one
    /// `done`.
    fn start<'a>(
        &'a self,
        job: &'a Job,
        component: Option<PathBuf>,
        abort: CancellationToken,
    ) -> BoxFuture<'a, Result<BoxStream<'static, AgentEvent>, JobRefusal>>;
}
