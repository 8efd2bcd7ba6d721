//! `moat worker`: pulls runs from the work queue and executes each here,
//! under the job's grants, which must lie within the worker's own ceiling;
//! publishes every event; beats so a lost worker is noticed; stops a run
//! when asked, within a second.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_nats::jetstream::{AckKind, consumer};
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use moat_engine::{AgentEvent, EventPayload, codes};
use moat_runs::{FailReason, Outcome, RunStatus};
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::cluster::records::{Change, Ending};
use crate::cluster::{ACK_WAIT, Cluster};
use crate::error::{ClusterError, nats, settled};
use crate::layout;
use crate::record::{BOUNDARY_VIOLATION, ClusterRun};
use moat_runs::job::{ComponentRef, Job};
use moat_runs::workers::{Executor, JobRefusal as Refusal};

/// How often a worker beats, looks at its runs' records and looks for
/// lost workers.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// How often a run's message is told JetStream it is still in hand.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// How long one pull waits for a run before looking again.
const PULL_WAIT: Duration = Duration::from_secs(1);
/// How long a worker keeps trying to end a run it ran through a cluster
/// that fails it (each try itself waits out a failover of
/// [`SETTLE`](crate::error::SETTLE)); past that the failure is logged and
/// the run is left as the cluster holds it.
const END_PATIENCE: Duration = Duration::from_secs(300);
/// The pause between two tries at ending a run.
const END_RETRY_PAUSE: Duration = Duration::from_secs(1);
/// How long a worker waits for a pull's answer (a run, or the server's
/// "nothing came"): past it the pull was lost (sent while the consumer's
/// leader was being elected, say) and is made again, rather than leave
/// the worker idle until the client gives up on it (seconds later).
const PULL_ANSWER: Duration = Duration::from_secs(2);

/// A worker's settings.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Its id, as records and heartbeats name it.
    pub id: String,
    /// Most runs at once.
    pub max_runs: usize,
    /// Where fetched components are kept.
    pub components: PathBuf,
}

/// A fresh worker id: `w_` and a time-ordered unique suffix.
pub fn new_worker_id() -> String {
    let run = moat_runs::RunId::new();
    format!("w_{}", &run.as_str()[moat_runs::RUN_ID_PREFIX.len()..])
}

/// What a worker's heartbeat says.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Beat<'a> {
    id: &'a str,
    host: String,
    pid: u32,
    max_runs: usize,
    runs: Vec<String>,
    beat_ms: u64,
}

/// A run this worker is executing: how to stop it and why it was stopped.
struct Running {
    abort: CancellationToken,
    cancel: Mutex<Option<FailReason>>,
}

impl Running {
    fn stop(&self, reason: FailReason) {
        self.cancel
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(reason);
        self.abort.cancel();
    }
}

type Runs = Arc<Mutex<HashMap<String, Arc<Running>>>>;

/// The runs this worker is taking (claiming, then executing): one take of
/// a run at a time. A run's message may come again while its first take
/// is still under way (a claim that waits out a failover past the ack
/// wait); a second take would find the first one's live entry naming this
/// worker, use it, and on losing the claim clear it from under the run.
#[derive(Clone, Default)]
struct Taking(Arc<Mutex<HashSet<String>>>);

impl Taking {
    /// Marks run `id` as being taken here for as long as the guard lives;
    /// `None` when it is already.
    fn start(&self, id: &str) -> Option<Taken> {
        let fresh = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.to_owned());
        fresh.then(|| Taken {
            taking: self.clone(),
            id: id.to_owned(),
        })
    }
}

/// A run being taken here; dropped when its take is over.
struct Taken {
    taking: Taking,
    id: String,
}

impl Drop for Taken {
    fn drop(&mut self) {
        self.taking
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

/// Runs a worker until `stop` is cancelled: then it takes no more runs,
/// stops the ones it has (each ends with its `done` interrupted) and
/// leaves the cluster.
pub async fn run_worker(
    cluster: Cluster,
    config: WorkerConfig,
    executor: Arc<dyn Executor>,
    stop: CancellationToken,
) -> Result<(), ClusterError> {
    let config = Arc::new(config);
    let runs: Runs = Arc::default();
    let taking = Taking::default();
    settled(|| beat(&cluster, &config, &runs)).await?;
    let consumer: consumer::PullConsumer = settled(|| async {
        nats(
            "work queue",
            cluster
                .runs
                .get_or_create_consumer(
                    layout::WORKERS_CONSUMER,
                    consumer::pull::Config {
                        durable_name: Some(layout::WORKERS_CONSUMER.into()),
                        ack_policy: consumer::AckPolicy::Explicit,
                        ack_wait: ACK_WAIT,
                        ..Default::default()
                    },
                )
                .await,
        )
    })
    .await?;
    let mut cancels = nats(
        "cancel subscription",
        cluster.client.subscribe(layout::CANCEL_SUBJECTS).await,
    )?;
    let beating = {
        let (cluster, config, runs, stop) =
            (cluster.clone(), config.clone(), runs.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(HEARTBEAT) => {}
                }
                if let Err(error) = beat(&cluster, &config, &runs).await {
                    tracing::warn!("heartbeat: {error}");
                }
                check_runs(&cluster, &config, &runs).await;
                if let Err(error) = cluster.reap_lost_workers().await {
                    tracing::warn!("looking for lost workers: {error}");
                }
            }
        })
    };
    let listening = {
        let runs = runs.clone();
        tokio::spawn(async move {
            while let Some(message) = cancels.next().await {
                let Some(id) = message.subject.as_str().rsplit('.').next() else {
                    continue;
                };
                // Only the reasons moat sends; anything else is a cancel.
                let reason = match &message.payload[..] {
                    b"parent ended" => FailReason::ParentEnded,
                    _ => FailReason::Cancelled,
                };
                let running = runs
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(id)
                    .cloned();
                if let Some(running) = running {
                    running.stop(reason);
                }
            }
        })
    };
    let slots = Arc::new(Semaphore::new(config.max_runs.max(1)));
    tracing::info!(worker = config.id, "taking runs");
    loop {
        let permit = tokio::select! {
            () = stop.cancelled() => break,
            permit = slots.clone().acquire_owned() => permit.expect("never closed"),
        };
        let pulled = tokio::select! {
            () = stop.cancelled() => break,
            pulled = consumer.batch().max_messages(1).expires(PULL_WAIT).messages() => pulled,
        };
        let mut batch = match pulled {
            Ok(batch) => batch,
            Err(error) => {
                tracing::warn!("pulling runs: {error}");
                tokio::time::sleep(PULL_WAIT).await;
                continue;
            }
        };
        let message = tokio::select! {
            () = stop.cancelled() => break,
            message = tokio::time::timeout(PULL_ANSWER, batch.next()) => message,
        };
        let message = match message {
            Err(_) => {
                tracing::debug!("a pull went unanswered; pulling again");
                tokio::spawn(release_late(batch));
                continue;
            }
            Ok(message) => message,
        };
        let message = match message {
            Some(Ok(message)) => message,
            Some(Err(error)) => {
                tracing::debug!("pulling runs: {error}");
                continue;
            }
            None => continue,
        };
        let (cluster, config, runs, taking, executor) = (
            cluster.clone(),
            config.clone(),
            runs.clone(),
            taking.clone(),
            executor.clone(),
        );
        tokio::spawn(async move {
            take(
                &cluster,
                &config,
                &runs,
                &taking,
                executor.as_ref(),
                message,
            )
            .await;
            drop(permit);
        });
    }
    // Stopping: every run ends with its done, then the worker leaves.
    tracing::info!(worker = config.id, "stopping");
    for running in runs.lock().unwrap_or_else(PoisonError::into_inner).values() {
        running.stop(FailReason::Other("worker stopped".into()));
    }
    let _ = slots.acquire_many(config.max_runs.max(1) as u32).await;
    beating.abort();
    listening.abort();
    let _ = cluster.workers.purge(&config.id).await;
    cluster.close().await;
    Ok(())
}

/// Hands back what a pull given up on still brings. The server may yet
/// answer it with a run; dropped unread, that run would wait out the ack
/// wait (30 s) before any worker had it. A nak offers it again at once.
/// Ends when the server closes the pull, or after the ack wait.
async fn release_late(mut batch: consumer::pull::Batch) {
    let _ = tokio::time::timeout(ACK_WAIT, async {
        while let Some(message) = batch.next().await {
            if let Ok(message) = message {
                tracing::debug!("a late answer to a pull given up on: offered again");
                let _ = message.ack_with(AckKind::Nak(None)).await;
            }
        }
    })
    .await;
}

/// Says this worker is alive, and which runs it has.
async fn beat(cluster: &Cluster, config: &WorkerConfig, runs: &Runs) -> Result<(), ClusterError> {
    let held: Vec<String> = runs
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .keys()
        .cloned()
        .collect();
    let beat = Beat {
        id: &config.id,
        host: hostname(),
        pid: std::process::id(),
        max_runs: config.max_runs,
        runs: held,
        beat_ms: moat_engine::now_ms(),
    };
    let value: Bytes = serde_json::to_vec(&beat).unwrap_or_default().into();
    nats("heartbeat", cluster.workers.put(&config.id, value).await)?;
    Ok(())
}

/// Stops runs whose record asks for a cancel (a cancel message may be
/// lost) or no longer names this worker (the cluster gave up on it).
async fn check_runs(cluster: &Cluster, config: &WorkerConfig, runs: &Runs) {
    let held: Vec<(String, Arc<Running>)> = runs
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|(id, running)| (id.clone(), running.clone()))
        .collect();
    for (id, running) in held {
        match cluster.get(&id).await {
            Ok(Some(run))
                if run.worker.as_deref() != Some(config.id.as_str()) || run.is_terminal() =>
            {
                running.stop(FailReason::Other("taken from this worker".into()));
            }
            Ok(Some(run)) => {
                if let Some(reason) = &run.cancel {
                    running.stop(FailReason::from_stored(reason));
                }
            }
            Ok(None) => running.stop(FailReason::Cancelled),
            Err(error) => tracing::debug!(run = id, "reading the run's record: {error}"),
        }
    }
}

/// Handles one message of the work queue: claims its run (once, whatever
/// the redeliveries) and executes it to its `done`.
async fn take(
    cluster: &Cluster,
    config: &WorkerConfig,
    runs: &Runs,
    taking: &Taking,
    executor: &dyn Executor,
    message: async_nats::jetstream::Message,
) {
    let job = match Job::from_bytes(&message.payload) {
        Ok(job) => job,
        Err(error) => {
            tracing::warn!("dropping a job: {error}");
            let _ = message.ack_with(AckKind::Term).await;
            return;
        }
    };
    let id = job.id.clone();
    let Some(_taken) = taking.start(&id) else {
        // The take under way acks the message, or offers it again.
        tracing::debug!(
            run = id,
            "the run's message came again while it is taken here"
        );
        let _ = message.ack_with(AckKind::Nak(Some(PULL_WAIT))).await;
        return;
    };
    match claim(cluster, config, &job).await {
        Ok(Some(claimed)) => {
            let adapter = claimed.run.job.adapter.clone();
            if let Err(error) = execute(cluster, config, runs, executor, claimed, &message).await {
                // Whatever stopped it, the claimed run ends here, saying
                // why, rather than stay `running` under a live worker.
                tracing::warn!(run = id, "{error}");
                let text = format!("the worker could not run it: {error}");
                let ending = Ending {
                    before: vec![error_event(&adapter, codes::ADAPTER_ERROR, text.clone())],
                    ..Ending::of(Outcome {
                        status: RunStatus::Failed,
                        reason: Some(FailReason::Other(text)),
                        done: None,
                    })
                };
                if let Err(error) = end_run(cluster, &id, &config.id, ending).await {
                    tracing::warn!(run = id, "cannot end the run: {error}");
                }
            }
        }
        Ok(None) => {}
        Err(error) => {
            tracing::warn!(run = id, "cannot claim the run: {error}");
            // Someone else may: offered again after a pause.
            let _ = message.ack_with(AckKind::Nak(Some(PULL_WAIT))).await;
            return;
        }
    }
    let _ = message.ack().await;
}

/// A run this worker claimed: its record as the claim wrote it.
#[derive(Debug)]
struct Claimed {
    run: ClusterRun,
    /// The revision the claim's write made; `None` when its answer was
    /// lost (the write seen on reading the record again).
    revision: Option<u64>,
}

/// Makes run `job` this worker's, when it is pending and not cancelled:
/// its record then. A run already claimed, ended or cancelled is left.
async fn claim(
    cluster: &Cluster,
    config: &WorkerConfig,
    job: &Job,
) -> Result<Option<Claimed>, ClusterError> {
    let Some((record, revision)) = cluster.entry(&job.id).await? else {
        tracing::warn!(run = job.id, "a job without a record: dropped");
        return Ok(None);
    };
    if record.status() != RunStatus::Pending {
        return Ok(None);
    }
    if let Some(reason) = &record.cancel {
        let outcome = Outcome {
            status: RunStatus::Failed,
            reason: Some(FailReason::from_stored(reason)),
            done: None,
        };
        cluster.end(&job.id, None, Ending::of(outcome)).await?;
        return Ok(None);
    }
    // The live entry first: if this worker dies from here on, the search
    // for lost workers finds the run. Made only where there is none: one
    // there is another worker's claim in progress, or a dead worker's that
    // the search clears; either way this message comes back later.
    if let Err(error) = cluster
        .live
        .create(&job.id, Bytes::from(config.id.clone()))
        .await
        && !names_this_worker(cluster, &job.id, config).await
    {
        return Err(ClusterError::Nats {
            what: "live runs",
            message: format!("another worker is claiming the run ({error})"),
        });
    }
    let mut written = false;
    let mut landed = None;
    let claim = |run: &mut ClusterRun| match claim_record(run, &config.id, written) {
        Claim::Write => {
            written = true;
            Change::Write
        }
        Claim::Landed => {
            landed = Some(run.clone());
            Change::Keep
        }
        Claim::Lost => Change::Keep,
    };
    // Written on the record as read above (one read fewer); changed since,
    // it is read again.
    let claimed = cluster
        .update_from(&job.id, Some((record, revision)), claim)
        .await
        .map(|written| match written {
            Some((run, revision)) => Some(Claimed {
                run,
                revision: Some(revision),
            }),
            None => landed.map(|run| Claimed {
                run,
                revision: None,
            }),
        });
    if !matches!(claimed, Ok(Some(_))) {
        cluster.clear_live(&job.id).await;
    }
    claimed
}

/// What a claim does with the run's record as it reads it.
#[derive(Debug, PartialEq, Eq)]
enum Claim {
    /// It is pending and not cancelled: claimed, `run` changed to say so.
    Write,
    /// It is running here after this claim's write (`written`): the
    /// write landed though its answer was lost, and the update read the
    /// record again. The claim is made.
    Landed,
    /// Someone else has it, it ended, or it was cancelled.
    Lost,
}

/// Claims `run`'s record for `worker` if it is there to claim.
fn claim_record(run: &mut ClusterRun, worker: &str, written: bool) -> Claim {
    if written && run.status() == RunStatus::Running && run.worker.as_deref() == Some(worker) {
        return Claim::Landed;
    }
    if run.status() != RunStatus::Pending || run.cancel.is_some() {
        return Claim::Lost;
    }
    run.status = RunStatus::Running.as_str().into();
    run.worker = Some(worker.to_owned());
    run.attempt += 1;
    run.started_ms = Some(moat_engine::now_ms());
    Claim::Write
}

/// Whether run `id`'s live entry names this worker. Then it is this
/// claim's to use: made by this very claim, whose answer was lost in a
/// failover (the client, finding the key there, says it exists), or left
/// by an earlier claim of this worker that failed before it could clear
/// it. Refused, either would keep the run from every worker for good, as
/// no search for lost workers clears a live worker's entry; and no other
/// take of the run is under way here ([`Taking`]).
async fn names_this_worker(cluster: &Cluster, id: &str, config: &WorkerConfig) -> bool {
    matches!(cluster.live.get(id).await, Ok(Some(worker)) if worker == config.id.as_bytes())
}

/// Executes a claimed run and publishes its events; ends its record.
async fn execute(
    cluster: &Cluster,
    config: &WorkerConfig,
    runs: &Runs,
    executor: &dyn Executor,
    claimed: Claimed,
    message: &async_nats::jetstream::Message,
) -> Result<(), ClusterError> {
    let run = &claimed.run;
    let job = &run.job;
    let id = job.id.as_str();
    let first_seq = if run.attempt > 1 {
        cluster.next_seq(id).await?
    } else {
        0
    };
    let fail = |code: &str, text: String, reason: FailReason| {
        let error = error_event(&job.adapter, code, text);
        Ending {
            seq: Some(first_seq),
            before: vec![error],
            ..Ending::of(Outcome {
                status: RunStatus::Failed,
                reason: Some(reason),
                done: None,
            })
        }
    };
    let component = match &job.component {
        ComponentRef::Builtin { .. } => None,
        ComponentRef::Stored { sha256 } => {
            match cluster.fetch_component(sha256, &config.components).await {
                Ok(path) => Some(path),
                Err(error) => {
                    let ending = fail(
                        codes::ADAPTER_ERROR,
                        error.to_string(),
                        FailReason::AdapterError,
                    );
                    cluster.end(id, Some(&config.id), ending).await?;
                    return Ok(());
                }
            }
        }
    };
    let running = Arc::new(Running {
        abort: CancellationToken::new(),
        cancel: Mutex::new(None),
    });
    runs.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id.to_owned(), running.clone());
    let result = match executor.start(job, component, running.abort.clone()).await {
        Ok(events) => {
            pump(
                cluster, config, &running, &claimed, first_seq, events, message,
            )
            .await
        }
        Err(Refusal::Boundary(text)) => {
            let ending = fail(
                codes::BOUNDARY_VIOLATION,
                text,
                FailReason::Other(BOUNDARY_VIOLATION.into()),
            );
            cluster.end(id, Some(&config.id), ending).await.map(drop)
        }
        Err(Refusal::Failed(text)) => {
            let ending = fail(codes::ADAPTER_ERROR, text, FailReason::AdapterError);
            cluster.end(id, Some(&config.id), ending).await.map(drop)
        }
        Err(Refusal::ParentEnded(text)) => {
            let ending = fail(codes::RUN_REFUSED, text, FailReason::ParentEnded);
            cluster.end(id, Some(&config.id), ending).await.map(drop)
        }
    };
    runs.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(id);
    result
}

/// Publishes a run's events as they come, its `done` last, once its
/// record has ended; keeps the run's message in hand meanwhile.
async fn pump(
    cluster: &Cluster,
    config: &WorkerConfig,
    running: &Running,
    claimed: &Claimed,
    first_seq: u64,
    mut events: BoxStream<'static, AgentEvent>,
    message: &async_nats::jetstream::Message,
) -> Result<(), ClusterError> {
    let run = &claimed.run;
    let id = run.job.id.as_str();
    let mut publisher = cluster.publisher(id, first_seq);
    let mut progress = tokio::time::interval(PROGRESS_EVERY);
    progress.tick().await;
    let mut timed_out = false;
    loop {
        // The events ready now go out together; the batch is sent as soon
        // as the run has no more to give at once.
        let event = match events.next().now_or_never() {
            Some(event) => event,
            None => {
                if let Err(error) = publisher.send().await {
                    return undelivered(cluster, config, running, run, error).await;
                }
                tokio::select! {
                    event = events.next() => event,
                    _ = progress.tick() => {
                        let _ = message.ack_with(AckKind::Progress).await;
                        continue;
                    }
                }
            }
        };
        if progress_due(&mut progress) {
            let _ = message.ack_with(AckKind::Progress).await;
        }
        let Some(event) = event else {
            // The engine always ends with a done; if it did not, say so.
            if let Err(error) = publisher.flush().await {
                return undelivered(cluster, config, running, run, error).await;
            }
            let ending = Ending {
                seq: Some(publisher.seq()),
                ..Ending::of(Outcome {
                    status: RunStatus::Failed,
                    reason: Some(FailReason::AdapterError),
                    done: None,
                })
            };
            cluster.end(id, Some(&config.id), ending).await?;
            return Ok(());
        };
        match &event.payload {
            EventPayload::Error(error) if error.code.as_deref() == Some(codes::TIMEOUT) => {
                timed_out = true;
            }
            EventPayload::Done(done) => {
                if let Err(error) = publisher.flush().await {
                    return undelivered(cluster, config, running, run, error).await;
                }
                let mut outcome = Outcome::of_done(done.status, timed_out, &event);
                if let Some(reason) = running
                    .cancel
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
                    && outcome.status == RunStatus::Failed
                    && !timed_out
                {
                    outcome.reason = Some(reason);
                }
                let ending = Ending {
                    seq: Some(publisher.seq()),
                    done: Some(event),
                    // Nothing else writes most runs' records while they
                    // run: the end goes on the claim's write (a read
                    // saved); one written since is read again.
                    read: claimed.revision.map(|revision| (run.clone(), revision)),
                    ..Ending::of(outcome)
                };
                if !end_run(cluster, id, &config.id, ending).await? {
                    tracing::info!(
                        run = id,
                        "the run was ended elsewhere: its done is not published"
                    );
                }
                return Ok(());
            }
            _ => {}
        }
        if let Err(error) = publisher.push(&event).await {
            return undelivered(cluster, config, running, run, error).await;
        }
    }
}

/// Ends run `id`, which this worker ran, as `ending` says; tried again
/// through failures that pass for up to [`END_PATIENCE`]. A run whose
/// outcome the worker knows must not stay `running`: while the worker
/// beats, no search for lost workers would end it.
async fn end_run(
    cluster: &Cluster,
    id: &str,
    worker: &str,
    ending: Ending,
) -> Result<bool, ClusterError> {
    let deadline = tokio::time::Instant::now() + END_PATIENCE;
    loop {
        match cluster.end(id, Some(worker), ending.clone()).await {
            Err(error) if error.is_transient() && tokio::time::Instant::now() < deadline => {
                tracing::warn!(run = id, "cannot end the run yet: {error}; trying again");
                tokio::time::sleep(END_RETRY_PAUSE).await;
            }
            other => return other,
        }
    }
}

/// Whether the run's message is due a sign of progress (a tick passed).
fn progress_due(progress: &mut tokio::time::Interval) -> bool {
    progress.tick().now_or_never().is_some()
}

/// The run's events cannot reach the cluster: it is stopped and ends
/// failed, saying why where it still can.
async fn undelivered(
    cluster: &Cluster,
    config: &WorkerConfig,
    running: &Running,
    run: &ClusterRun,
    error: ClusterError,
) -> Result<(), ClusterError> {
    running.abort.cancel();
    let id = run.job.id.as_str();
    let text = format!("the run's events could not be delivered: {error}");
    tracing::warn!(run = id, "{text}");
    let ending = Ending {
        before: vec![error_event(
            &run.job.adapter,
            codes::ADAPTER_ERROR,
            text.clone(),
        )],
        ..Ending::of(Outcome {
            status: RunStatus::Failed,
            reason: Some(FailReason::Other(text)),
            done: None,
        })
    };
    cluster.end(id, Some(&config.id), ending).await.map(drop)
}

/// An `error` event of `adapter`.
fn error_event(adapter: &str, code: &str, message: String) -> AgentEvent {
    AgentEvent::by_host(adapter, EventPayload::error(code, message, false))
}

/// This machine's name, for heartbeats.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_nats::jetstream;
    use moat_testkit::nats;

    /// A claim whose live entry is there already, naming this worker (its
    /// creation landed but its answer was lost in a failover, so the
    /// client said the key exists), goes ahead; one naming another worker
    /// is refused and leaves the run pending.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_goes_ahead_on_its_own_live_entry_and_not_on_another_workers() {
        let Some((_server, cluster)) = crate::cluster::tests::connected().await else {
            return;
        };
        let config = |id: &str| WorkerConfig {
            id: id.into(),
            max_runs: 1,
            components: std::env::temp_dir(),
        };
        let (this, other) = (config("w_this"), config("w_other"));
        let echo = || {
            Job::new(
                ComponentRef::Builtin {
                    name: "echo".into(),
                },
                "echo",
                "hi",
            )
        };
        let (mine, theirs) = (echo(), echo());
        for (job, worker) in [(&mine, &this), (&theirs, &other)] {
            cluster.submit(job.clone()).await.expect("submitted");
            cluster
                .live
                .create(&job.id, Bytes::from(worker.id.clone()))
                .await
                .expect("the entry a lost answer left");
        }

        let claimed = claim(&cluster, &this, &mine).await.expect("claimed");
        let claimed = claimed.expect("the run is this worker's");
        let run = &claimed.run;
        assert_eq!(run.status(), RunStatus::Running);
        assert_eq!(run.worker.as_deref(), Some("w_this"));
        // What the claim wrote is the record at the revision it gives: an
        // end written on it needs no read.
        let stored = cluster.entry(&mine.id).await.expect("read").expect("kept");
        assert_eq!((&stored.0, Some(stored.1)), (run, claimed.revision));

        let refused = claim(&cluster, &this, &theirs).await;
        assert!(refused.is_err(), "another worker's claim: {refused:?}");
        let left = cluster.get(&theirs.id).await.expect("read").expect("kept");
        assert_eq!(left.status(), RunStatus::Pending);
        cluster.close().await;
    }

    /// A claim's write that landed though its answer was lost is seen, on
    /// the record read again, as the claim made; a run running under
    /// another worker, or under this one before this claim wrote, is not
    /// this claim's.
    #[test]
    fn a_claim_knows_its_own_write_when_it_reads_the_record_again() {
        let echo = ComponentRef::Builtin {
            name: "echo".into(),
        };
        let mut run = ClusterRun::submitted(Job::new(echo, "echo", "hi"));
        assert_eq!(claim_record(&mut run, "w_this", false), Claim::Write);
        assert_eq!(run.status(), RunStatus::Running);
        assert_eq!((run.worker.as_deref(), run.attempt), (Some("w_this"), 1));

        let mut read_again = run.clone();
        assert_eq!(claim_record(&mut read_again, "w_this", true), Claim::Landed);
        assert_eq!(read_again, run, "left as it is");
        assert_eq!(claim_record(&mut run.clone(), "w_this", false), Claim::Lost);
        assert_eq!(claim_record(&mut run.clone(), "w_other", true), Claim::Lost);

        let mut cancelled = ClusterRun::submitted(run.job.clone());
        cancelled.cancel = Some("cancelled".into());
        assert_eq!(claim_record(&mut cancelled, "w_this", false), Claim::Lost);
    }

    /// A second take of a run while one is under way here is told no; the
    /// run can be taken again once the first is over.
    #[test]
    fn a_run_is_taken_once_at_a_time_in_a_worker() {
        let taking = Taking::default();
        let first = taking.start("r_1").expect("the first take");
        assert!(taking.start("r_1").is_none(), "a second take at once");
        assert!(taking.start("r_2").is_some(), "another run");
        drop(first);
        assert!(taking.start("r_1").is_some(), "taken again after");
    }

    /// The case `release_late` is for: a run delivered to a pull the worker
    /// gave up on reaches the next pull at once, not after the ack wait.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_answering_a_pull_given_up_on_is_offered_again_at_once() {
        if !nats::available() {
            return;
        }
        let server = nats::server(&[]);
        let client = async_nats::connect(server.url()).await.expect("connects");
        let js = jetstream::new(client);
        let stream = js
            .create_stream(jetstream::stream::Config {
                name: "LATE".into(),
                subjects: vec!["late".into()],
                ..Default::default()
            })
            .await
            .expect("a stream");
        let consumer: consumer::PullConsumer = stream
            .create_consumer(consumer::pull::Config {
                durable_name: Some("late".into()),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: ACK_WAIT,
                ..Default::default()
            })
            .await
            .expect("a consumer");
        let given_up = consumer
            .batch()
            .max_messages(1)
            .expires(Duration::from_secs(10))
            .messages()
            .await
            .expect("a pull");
        // The server holds the pull before the run arrives, so the run is
        // delivered to it.
        tokio::time::sleep(Duration::from_millis(200)).await;
        tokio::spawn(release_late(given_up));
        js.publish("late", "a run".into())
            .await
            .expect("published")
            .await
            .expect("stored");

        let mut next = consumer
            .batch()
            .max_messages(1)
            .expires(Duration::from_secs(5))
            .messages()
            .await
            .expect("a pull");
        let message = tokio::time::timeout(Duration::from_secs(5), next.next())
            .await
            .expect("the run comes well before the ack wait")
            .expect("a message")
            .expect("not an error");
        assert_eq!(&message.payload[..], b"a run");
        let info = message.info().expect("a JetStream message");
        assert_eq!(
            info.delivered, 2,
            "first to the pull given up on, then here"
        );
    }
}
