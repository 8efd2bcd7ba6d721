//! Why a run could not be launched.

use moat_runs::{RunId, RunsError};

use crate::refusal::Refusal;
use crate::resolve::ResolveError;

/// Why a run could not be launched. Nothing was recorded, except for a
/// run the store could no longer write (then its record ends `failed`).
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// Its adapter could not be resolved.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// It asked for more than whoever starts it may give (worded in
    /// field names here; [`Refusal::message`] words it for a caller).
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// It lacks or gets wrong what no bound decides (a model its adapter
    /// needs, a workspace of a project it may not see): worded in field
    /// names here; [`crate::Invalid::message`] words it for a caller.
    #[error(transparent)]
    Invalid(#[from] crate::Invalid),
    /// Its parent could not be found, or the place its runs are kept (the
    /// store, the cluster) failed.
    #[error(transparent)]
    Runs(#[from] RunsError),
    /// Its parent has ended: a run can only start under a live one.
    #[error("run {0} has ended; a child run needs a live parent")]
    ParentEnded(RunId),
    /// The run store could not record it.
    #[error("cannot record the run: {0}")]
    Record(String),
    /// A secret it was granted is not set where it runs.
    #[error(transparent)]
    Secret(#[from] crate::SecretError),
    /// Its workspace could not be made or given.
    #[error("workspace: {0}")]
    Workspace(#[from] moat_workspace::WorkspaceError),
    /// Whoever launches runs here is stopping.
    #[error("runs are no longer started here: it is shutting down")]
    Stopping,
}
