//! Runs recorded `pending` whose job may never have been queued: their
//! submitter, or a search for lost workers queueing a run again, stopped
//! between writing the record and queueing the job. Nothing else would
//! ever start such a run, so whoever waits for it queues its job again,
//! once per attempt: the work queue drops a copy of a job it was given
//! already ([`Cluster::enqueue`]), and a copy that gets through starts
//! nothing twice (a run is claimed only while pending).

use std::time::Duration;

use moat_runs::RunStatus;

use super::Cluster;
use crate::record::ClusterRun;

/// How long a run is pending before a waiter queues its job again. A
/// submitter queues it right after writing the record: past this, the run
/// waits behind others or its job was lost.
const QUEUE_AGAIN_AFTER: Duration = Duration::from_secs(5);

/// What a waiter for one run remembers: the attempt whose job it queued
/// again, so that it does so once.
#[derive(Debug, Default)]
pub(crate) struct Requeuer {
    queued: Option<u32>,
}

impl Requeuer {
    /// Queues `run`'s job again when `run` (as just read) has been pending
    /// for a while with no worker and no cancel, once per attempt. Whether
    /// a job was queued (not when the queue held it already). A failure is
    /// logged, not returned: this is the waiter's help, not its job.
    pub(crate) async fn look(&mut self, cluster: &Cluster, run: &ClusterRun) -> bool {
        if !stalled(run, moat_engine::now_ms()) || self.queued == Some(run.attempt) {
            return false;
        }
        self.queued = Some(run.attempt);
        match cluster.enqueue(&run.job, run.attempt).await {
            Ok(queued) => {
                if queued {
                    tracing::info!(run = run.job.id, "queued again: its job was missing");
                }
                queued
            }
            Err(error) => {
                tracing::debug!(run = run.job.id, "queueing the run's job again: {error}");
                false
            }
        }
    }
}

/// Whether `run` may be missing its job at `now_ms`: pending, unclaimed,
/// not cancelled, and recorded longer ago than [`QUEUE_AGAIN_AFTER`].
fn stalled(run: &ClusterRun, now_ms: u64) -> bool {
    run.status() == RunStatus::Pending
        && run.worker.is_none()
        && run.cancel.is_none()
        && now_ms.saturating_sub(run.created_ms) > QUEUE_AGAIN_AFTER.as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::records::Change;
    use crate::cluster::tests::connected;
    use moat_runs::job::{ComponentRef, Job};

    /// How many jobs the work queue holds.
    async fn queued(cluster: &Cluster) -> u64 {
        cluster
            .runs
            .get_info()
            .await
            .expect("queue info")
            .state
            .messages
    }

    /// An echo run recorded `pending` `age` ago whose job was never
    /// queued: what a submitter killed between the two writes leaves.
    async fn recorded_only(cluster: &Cluster, age: Duration) -> ClusterRun {
        let echo = ComponentRef::Builtin {
            name: "echo".into(),
        };
        let mut run = ClusterRun::submitted(Job::new(echo, "echo", "hi"));
        run.created_ms -= age.as_millis() as u64;
        cluster
            .records
            .create(&run.job.id, run.to_bytes())
            .await
            .expect("recorded");
        run
    }

    /// A run left pending without its job gets it from whoever waits for
    /// it, once: not while it is young (its submitter is queueing it), not
    /// twice by one waiter, and not as a second copy by another waiter
    /// (the queue drops it); a run claimed or cancelled gets none.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_pending_without_its_job_is_queued_again_once() {
        let Some((_server, cluster)) = connected().await else {
            return;
        };
        let young = recorded_only(&cluster, Duration::ZERO).await;
        assert!(!Requeuer::default().look(&cluster, &young).await);
        assert_eq!(queued(&cluster).await, 0);

        let lost = recorded_only(&cluster, QUEUE_AGAIN_AFTER * 2).await;
        let mut waiter = Requeuer::default();
        assert!(waiter.look(&cluster, &lost).await, "queued");
        assert_eq!(queued(&cluster).await, 1);
        assert!(!waiter.look(&cluster, &lost).await, "once");
        let mut other = Requeuer::default();
        assert!(!other.look(&cluster, &lost).await, "a copy");
        assert_eq!(queued(&cluster).await, 1);

        let mut claimed = recorded_only(&cluster, QUEUE_AGAIN_AFTER * 2).await;
        claimed.status = RunStatus::Running.as_str().into();
        claimed.worker = Some("w1".into());
        let mut cancelled = recorded_only(&cluster, QUEUE_AGAIN_AFTER * 2).await;
        cancelled.cancel = Some("cancelled".into());
        for run in [&claimed, &cancelled] {
            assert!(!Requeuer::default().look(&cluster, run).await);
        }
        assert_eq!(queued(&cluster).await, 1);
        cluster.close().await;
    }

    /// `Cluster::wait` is such a waiter: the job of the run it waits for
    /// is queued while it waits, and the wait ends with the run.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_for_a_run_that_lost_its_job_queues_it() {
        let Some((_server, cluster)) = connected().await else {
            return;
        };
        let lost = recorded_only(&cluster, QUEUE_AGAIN_AFTER * 2).await;
        let id = lost.job.id.clone();
        let waiting = tokio::spawn({
            let (cluster, id) = (cluster.clone(), id.clone());
            async move { cluster.wait(&id).await }
        });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while queued(&cluster).await == 0 {
            assert!(tokio::time::Instant::now() < deadline, "never queued");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        cluster
            .cancel(&id, moat_runs::FailReason::Cancelled)
            .await
            .expect("cancelled");
        let ended = waiting.await.unwrap().expect("waited");
        assert!(ended.is_terminal());
        assert_eq!(queued(&cluster).await, 1, "queued once");
        cluster.close().await;
    }

    /// A search for lost workers finds a run that a requeue made pending
    /// but stopped before queueing (its live entry still names the lost
    /// worker) and queues its job.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_requeue_stopped_before_its_job_is_finished_by_the_next_search() {
        let Some((_server, cluster)) = connected().await else {
            return;
        };
        let run = recorded_only(&cluster, Duration::ZERO).await;
        let id = run.job.id.clone();
        cluster
            .update(&id, |run| {
                run.attempt = 1;
                Change::Write
            })
            .await
            .expect("claimed once, then made pending again");
        cluster
            .live
            .create(&id, "w_gone".into())
            .await
            .expect("the lost worker's entry");

        cluster.reap_lost_workers().await.expect("searched");
        assert_eq!(queued(&cluster).await, 1);
        assert!(cluster.live.get(&id).await.expect("read").is_none());
        // The job queued is the attempt's: the requeue's own, had it got
        // through, would have been dropped as a copy.
        assert!(!cluster.enqueue(&run.job, 1).await.expect("published"));
        cluster.close().await;
    }
}
