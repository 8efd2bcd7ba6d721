//! Runs whose worker stopped beating: found through the live bucket (a
//! run's worker, while it runs) and the workers bucket (whose entries
//! expire), each ended `worker lost` or queued again, once; and a run's
//! live entry cleared when it ends.

use moat_runs::{FailReason, Outcome, RunStatus};

use super::records::{Change, Ending};
use super::{Cluster, keys};
use crate::error::{ClusterError, nats};
use crate::layout;
use crate::record::WORKER_LOST;

impl Cluster {
    /// Ends the runs of workers that stopped beating: each fails `worker
    /// lost` with one `done` — or, when its job allows a retry, goes back
    /// on the work queue. Any moat process may do this; each run is ended
    /// (or queued again) once. The runs it dealt with.
    pub async fn reap_lost_workers(&self) -> Result<Vec<String>, ClusterError> {
        let mut reaped = Vec::new();
        for id in keys(&self.live).await? {
            let Some(worker) = nats("live runs", self.live.get(&id).await)? else {
                continue;
            };
            let worker = String::from_utf8_lossy(&worker).into_owned();
            if nats("workers", self.workers.get(&worker).await)?.is_some() {
                continue;
            }
            let Some(run) = self.get(&id).await? else {
                self.clear_live(&id).await;
                continue;
            };
            let held = run.status() == RunStatus::Running
                && run.worker.as_deref() == Some(worker.as_str());
            if !held {
                // Stale: the worker died before it claimed the run, or the
                // run moved on. A run left pending with no worker may have
                // no job either (a requeue below stopped before queueing
                // it): queued again. A second job for a run is harmless:
                // a run is claimed only while pending, by compare and set.
                if run.status() == RunStatus::Pending && run.worker.is_none() {
                    self.enqueue(&run.job, run.attempt).await?;
                }
                self.clear_live(&id).await;
                continue;
            }
            tracing::info!(run = id, worker, "the run's worker stopped beating");
            if run.job.retry_on_worker_loss && run.cancel.is_none() {
                if self.requeue(&id, &worker).await? {
                    reaped.push(id);
                }
                continue;
            }
            let lost = Outcome {
                status: RunStatus::Failed,
                reason: Some(FailReason::Other(WORKER_LOST.into())),
                done: None,
            };
            // The error first, so a consumer sees why; then the done.
            let error = moat_engine::AgentEvent::by_host(
                run.job.adapter.clone(),
                moat_engine::EventPayload::error(
                    moat_engine::codes::WORKER_LOST,
                    format!(
                        "the worker running this run ({worker}) stopped answering; the run did not finish"
                    ),
                    false,
                ),
            );
            let ending = Ending {
                before: vec![error],
                ..Ending::of(lost)
            };
            if self.end(&id, Some(&worker), ending).await? {
                reaped.push(id);
            }
        }
        Ok(reaped)
    }

    /// Puts a lost worker's run back on the queue, once.
    async fn requeue(&self, id: &str, worker: &str) -> Result<bool, ClusterError> {
        let queued = self
            .update(id, |run| {
                if run.status() != RunStatus::Running || run.worker.as_deref() != Some(worker) {
                    return Change::Keep;
                }
                run.status = RunStatus::Pending.as_str().into();
                run.worker = None;
                run.started_ms = None;
                Change::Write
            })
            .await?;
        let Some(run) = queued else { return Ok(false) };
        // The live entry goes once the job is queued: whoever stops in
        // between leaves it to the next search, which queues the job.
        self.enqueue(&run.job, run.attempt).await?;
        self.clear_live(id).await;
        tracing::info!(run = id, "queued again after its worker was lost");
        Ok(true)
    }

    /// Forgets that run `id` is live: its entry purged, marker and all,
    /// so the search for lost workers reads only live runs.
    pub(crate) async fn clear_live(&self, id: &str) {
        let subject = format!("$KV.{}.{id}", layout::LIVE_BUCKET);
        if let Err(error) = self.live_stream.purge().filter(subject).await {
            tracing::warn!(run = id, "cannot clear the run's live entry: {error}");
        }
    }
}
