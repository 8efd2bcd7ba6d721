//! The cluster behind [`RunBook`] and [`Workers`]: its runs execute on its
//! workers, handed to them as jobs with the objects they need; a worker
//! records the run it executes in the cluster itself, and what the run
//! asks is kept in its record there, where any submitter answers it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use moat_runs::{
    Answer, Approval, ApprovalRequest, Job, NewRun, RunBook, RunId, RunLog, RunsError, Spent,
    Workers,
};
use tokio_util::sync::CancellationToken;

use crate::cluster::Cluster;
use crate::runs::runs_error;

#[async_trait::async_trait]
impl RunBook for Cluster {
    fn workers(&self) -> Option<Arc<dyn Workers>> {
        Some(Arc::new(self.clone()))
    }

    /// Refused: a run on the cluster is created by handing it to the
    /// workers ([`Workers::submit`]), and recorded by the worker that
    /// executes it.
    async fn create(
        &self,
        id: RunId,
        _run: &NewRun,
        _abort: CancellationToken,
    ) -> Result<Box<dyn RunLog>, RunsError> {
        Err(RunsError::Invalid(format!(
            "run {id} would execute outside the cluster's workers: runs on a cluster are submitted to them"
        )))
    }

    async fn ask(&self, id: &RunId, request: &ApprovalRequest) -> Result<Approval, RunsError> {
        Cluster::ask(self, id.as_str(), request)
            .await
            .map_err(runs_error)
    }

    async fn answer_of(&self, id: &RunId, number: u32) -> Result<Option<Answer>, RunsError> {
        Cluster::answer_of(self, id.as_str(), number)
            .await
            .map_err(runs_error)
    }

    async fn answer_to(&self, id: &RunId, number: u32) -> Result<Answer, RunsError> {
        Cluster::answer_to(self, id.as_str(), number)
            .await
            .map_err(runs_error)
    }

    /// Kept by the process that meters the run: a cluster's record does
    /// not hold spending.
    fn spent(&self, _id: &RunId, _spent: &Spent) -> Result<(), RunsError> {
        Ok(())
    }

    /// Nothing to stop: the cluster's runs execute on its workers, each
    /// of which stops its own.
    async fn stop_live(&self, _patience: Duration) -> bool {
        true
    }
}

#[async_trait::async_trait]
impl Workers for Cluster {
    async fn submit(&self, job: Job) -> Result<(), RunsError> {
        Cluster::submit(self, job)
            .await
            .map(drop)
            .map_err(runs_error)
    }

    async fn put_component(&self, bytes: &[u8]) -> Result<String, RunsError> {
        Cluster::put_component(self, bytes)
            .await
            .map_err(runs_error)
    }

    async fn put_project(&self, bundle: &[u8]) -> Result<String, RunsError> {
        Cluster::put_project(self, bundle).await.map_err(runs_error)
    }

    async fn fetch_project(&self, sha256: &str, dir: &Path) -> Result<PathBuf, RunsError> {
        Cluster::fetch_project(self, sha256, dir)
            .await
            .map_err(runs_error)
    }

    async fn put_changes(&self, run: &str, changes: &[u8]) -> Result<(), RunsError> {
        Cluster::put_changes(self, run, changes)
            .await
            .map_err(runs_error)
    }

    async fn changes(&self, run: &str) -> Result<Option<Vec<u8>>, RunsError> {
        Cluster::changes(self, run).await.map_err(runs_error)
    }

    async fn remove_changes(&self, run: &str) -> Result<(), RunsError> {
        Cluster::remove_changes(self, run).await.map_err(runs_error)
    }
}
