//! A connection to the cluster and the operations on runs every moat
//! process shares: submit, read, list, cancel, end, follow and wait, and
//! finding runs whose worker was lost.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv, object_store, stream};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use moat_engine::AgentEvent;
use moat_runs::{FailReason, Outcome, RunStatus};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use crate::error::{ClusterError, SETTLE, nats, settled};
use crate::events::{self, Publisher};
use crate::job::{Job, is_sha256};
use crate::layout;
use crate::record::{ClusterRun, WORKER_LOST};
use crate::settings::{Auth, Settings};

/// How long stored events are kept.
const EVENTS_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// How long a worker may hold a run's message without a sign of progress
/// before JetStream offers it to another worker (which then finds the run
/// claimed and leaves it).
pub(crate) const ACK_WAIT: Duration = Duration::from_secs(30);
/// How often a waiting or following client looks for lost workers and
/// at the run's record.
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// How many times a change of a record is tried against concurrent ones.
const CAS_ATTEMPTS: usize = 64;
/// How long one JetStream request waits for its answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a read of a consumer through to its end may wait: for the
/// whole listing of a bucket's keys, for each delivery of a run's stored
/// messages (a long run has many). A failover can leave a consumer waiting
/// for deliveries that never come (seen with a NATS node killed): each
/// request in it has its timeout, the wait between them has none.
const LISTING_PATIENCE: Duration = Duration::from_secs(10);
/// The largest component the cluster carries.
pub const MAX_COMPONENT_BYTES: u64 = 512 * 1024 * 1024;

/// One moat process's connection to the cluster.
#[derive(Clone)]
pub struct Cluster {
    pub(crate) client: async_nats::Client,
    pub(crate) js: jetstream::Context,
    pub(crate) runs: stream::Stream,
    events: stream::Stream,
    pub(crate) records: kv::Store,
    pub(crate) live: kv::Store,
    live_stream: stream::Stream,
    pub(crate) workers: kv::Store,
    components: object_store::ObjectStore,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").finish_non_exhaustive()
    }
}

/// What [`Cluster::update`]'s change does with a record.
pub(crate) enum Change {
    /// Write the record as changed.
    Write,
    /// Leave it as it is.
    Keep,
}

impl Cluster {
    /// Connects (`name` is how servers list this client) and makes the
    /// streams and buckets that are missing.
    pub async fn connect(settings: &Settings, name: &str) -> Result<Self, ClusterError> {
        let client = connect_client(settings, name).await?;
        // A cluster that just started may not have elected its JetStream
        // leader yet: its first requests time out. Give it a while.
        settled(|| Self::with_layout(client.clone(), settings)).await
    }

    /// The streams and buckets, made when missing.
    async fn with_layout(
        client: async_nats::Client,
        settings: &Settings,
    ) -> Result<Self, ClusterError> {
        // Short requests, tried again (`settled`): while a cluster elects a
        // new leader, one request may go unanswered where the next is not.
        let js = jetstream::ContextBuilder::new()
            .timeout(REQUEST_TIMEOUT)
            .build(client.clone());
        let replicas = settings.replicas.max(1);
        let runs = nats(
            "work queue",
            js.get_or_create_stream(stream::Config {
                name: layout::RUNS_STREAM.into(),
                subjects: vec![layout::RUNS_SUBJECT.into()],
                retention: stream::RetentionPolicy::WorkQueue,
                storage: stream::StorageType::File,
                num_replicas: replicas,
                ..Default::default()
            })
            .await,
        )?;
        let events = nats(
            "event stream",
            js.get_or_create_stream(stream::Config {
                name: layout::EVENTS_STREAM.into(),
                subjects: vec![layout::EVENTS_SUBJECTS.into()],
                retention: stream::RetentionPolicy::Limits,
                storage: stream::StorageType::File,
                max_age: EVENTS_MAX_AGE,
                num_replicas: replicas,
                ..Default::default()
            })
            .await,
        )?;
        let records = key_value(&js, layout::RECORDS_BUCKET, Duration::ZERO, replicas).await?;
        let live = key_value(&js, layout::LIVE_BUCKET, Duration::ZERO, replicas).await?;
        let workers = key_value(
            &js,
            layout::WORKERS_BUCKET,
            settings.worker_timeout,
            replicas,
        )
        .await?;
        let live_stream = nats(
            "bucket",
            js.get_stream(format!("KV_{}", layout::LIVE_BUCKET)).await,
        )?;
        let components = match js.get_object_store(layout::COMPONENTS_BUCKET).await {
            Ok(store) => store,
            Err(_) => match js
                .create_object_store(object_store::Config {
                    bucket: layout::COMPONENTS_BUCKET.into(),
                    storage: stream::StorageType::File,
                    num_replicas: replicas,
                    ..Default::default()
                })
                .await
            {
                Ok(store) => store,
                // Made meanwhile (by another moat, or by this request
                // whose answer was lost): use it.
                Err(error) => js
                    .get_object_store(layout::COMPONENTS_BUCKET)
                    .await
                    .map_err(|_| ClusterError::nats("component store")(&error))?,
            },
        };
        Ok(Self {
            client,
            js,
            runs,
            events,
            records,
            live,
            live_stream,
            workers,
            components,
        })
    }

    /// Records `job` (`pending`) and puts it on the work queue. A child
    /// run is added to its parent's children; a parent that ended takes
    /// none.
    pub async fn submit(&self, job: Job) -> Result<ClusterRun, ClusterError> {
        job.check()?;
        if let Some(parent) = &job.parent {
            let child = job.id.clone();
            let mut ended = false;
            let found = self
                .update(parent, |run| {
                    if run.is_terminal() {
                        ended = true;
                        return Change::Keep;
                    }
                    run.children.push(child.clone());
                    Change::Write
                })
                .await?;
            if found.is_none() && !ended {
                return Err(ClusterError::NotFound(parent.clone()));
            }
            if ended {
                return Err(ClusterError::Invalid(format!(
                    "the parent run {parent} has ended: a run can only be started under a live one"
                )));
            }
        }
        let record = ClusterRun::submitted(job);
        let id = record.job.id.clone();
        settled(|| async {
            match self.records.create(&id, record.to_bytes()).await {
                Ok(_) => Ok(()),
                // Run ids are unique: the record there is this one, made
                // by an attempt whose answer was lost.
                Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => {
                    match self.get(&id).await? {
                        Some(stored) if stored.job == record.job => Ok(()),
                        _ => Err(ClusterError::Invalid(format!("run {id} exists already"))),
                    }
                }
                Err(error) => Err(ClusterError::nats("record")(&error)),
            }
        })
        .await?;
        self.enqueue(&record.job).await?;
        // A parent that ended between taking the child and the child's
        // record being there could not stop it: stop it now.
        if let Some(parent) = &record.job.parent
            && self.get(parent).await?.is_none_or(|run| run.is_terminal())
        {
            self.cancel(&id, FailReason::ParentEnded).await?;
        }
        Ok(record)
    }

    /// Puts `job` on the work queue.
    pub(crate) async fn enqueue(&self, job: &Job) -> Result<(), ClusterError> {
        let payload: Bytes = serde_json::to_vec(job)
            .map_err(|e| ClusterError::Invalid(format!("cannot encode a job: {e}")))?
            .into();
        settled(|| async {
            let ack = nats(
                "work queue",
                self.js.publish(layout::RUNS_SUBJECT, payload.clone()).await,
            )?;
            nats("work queue", ack.await).map(drop)
        })
        .await
    }

    /// The run `id`'s record and its revision.
    pub(crate) async fn entry(&self, id: &str) -> Result<Option<(ClusterRun, u64)>, ClusterError> {
        if !layout::is_run_id(id) {
            return Ok(None);
        }
        let entry = settled(|| async { nats("record", self.records.entry(id).await) }).await?;
        match entry {
            Some(entry) if entry.operation == kv::Operation::Put => Ok(Some((
                ClusterRun::from_bytes(&entry.value)?,
                entry.revision,
            ))),
            _ => Ok(None),
        }
    }

    /// The run `id`'s record.
    pub async fn get(&self, id: &str) -> Result<Option<ClusterRun>, ClusterError> {
        Ok(self.entry(id).await?.map(|(run, _)| run))
    }

    /// Changes run `id`'s record with `change`, against concurrent changes
    /// (compare and set on its revision, retried). The record as written,
    /// or `None` when there is no such run or `change` kept it.
    pub(crate) async fn update(
        &self,
        id: &str,
        mut change: impl FnMut(&mut ClusterRun) -> Change,
    ) -> Result<Option<ClusterRun>, ClusterError> {
        for _ in 0..CAS_ATTEMPTS {
            let Some((mut run, revision)) = self.entry(id).await? else {
                return Ok(None);
            };
            if let Change::Keep = change(&mut run) {
                return Ok(None);
            }
            match self.records.update(id, run.to_bytes(), revision).await {
                Ok(_) => return Ok(Some(run)),
                Err(error) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => continue,
                Err(error) => {
                    let error = ClusterError::nats("record")(&error);
                    if !error.is_transient() {
                        return Err(error);
                    }
                    // The write may or may not have landed: read again.
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
        Err(ClusterError::Nats {
            what: "record",
            message: format!("run {id} changed {CAS_ATTEMPTS} times while it was being changed"),
        })
    }

    /// Every run's record, newest first.
    pub async fn list(&self) -> Result<Vec<ClusterRun>, ClusterError> {
        let mut ids = self.ids().await?;
        ids.sort_unstable_by(|a, b| b.cmp(a));
        let mut runs = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(run) = self.get(&id).await? {
                runs.push(run);
            }
        }
        Ok(runs)
    }

    pub(crate) async fn ids(&self) -> Result<Vec<String>, ClusterError> {
        keys(&self.records).await
    }

    /// The run `text` names: its id, or a prefix of exactly one run's id.
    pub async fn resolve(&self, text: &str) -> Result<String, ClusterError> {
        if layout::is_run_id(text) && self.get(text).await?.is_some() {
            return Ok(text.to_owned());
        }
        let matches: Vec<String> = self
            .ids()
            .await?
            .into_iter()
            .filter(|id| id.starts_with(text))
            .collect();
        match matches.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(ClusterError::NotFound(text.to_owned())),
            _ => Err(ClusterError::Ambiguous(format!(
                "{text} names {} runs in the cluster: give more of the id",
                matches.len()
            ))),
        }
    }

    /// Cancels run `id` for `reason` (`cancelled`, `parent ended`):
    /// a pending run ends at once, a running one is stopped by its worker.
    /// Idempotent: an unknown or ended run has nothing left to stop.
    pub async fn cancel(&self, id: &str, reason: FailReason) -> Result<(), ClusterError> {
        let mut pending = false;
        let changed = self
            .update(id, |run| match run.status() {
                RunStatus::Completed | RunStatus::Failed => Change::Keep,
                RunStatus::Pending => {
                    pending = true;
                    Change::Keep
                }
                RunStatus::Running => {
                    if run.cancel.is_some() {
                        return Change::Keep;
                    }
                    run.cancel = Some(reason.as_str().to_owned());
                    Change::Write
                }
            })
            .await?;
        if pending {
            let outcome = Outcome {
                status: RunStatus::Failed,
                reason: Some(reason.clone()),
                done: None,
            };
            if !self.end(id, None, Ending::of(outcome)).await? {
                // A worker claimed it meanwhile: stop it there.
                return Box::pin(self.cancel(id, reason)).await;
            }
        }
        if changed.is_some() {
            nats(
                "cancel",
                self.client
                    .publish(
                        layout::cancel_subject(id),
                        Bytes::from(reason.as_str().to_owned()),
                    )
                    .await,
            )?;
        }
        Ok(())
    }

    /// Ends run `id` as `ending` says, once: only a live run (one
    /// `worker` runs, when given) ends. Then its last events and its
    /// `done` are published, its live entry goes and its children are
    /// cancelled (`parent ended`). Whether this ending ended it.
    ///
    /// The same ending tried again (a clone, after a failure that
    /// passes) finishes what the earlier try left: a try whose record
    /// update landed and whose publishing failed would otherwise leave
    /// the run ended with no `done` stored.
    pub(crate) async fn end(
        &self,
        id: &str,
        worker: Option<&str>,
        ending: Ending,
    ) -> Result<bool, ClusterError> {
        let Some(ended) = self.record_end(id, worker, &ending).await? else {
            return Ok(false);
        };
        if let Some(done) = ended.done {
            let seq = match ending.seq {
                Some(seq) => seq,
                None => self.next_seq(id).await?,
            };
            let mut publisher = self.publisher(id, seq);
            for event in &ending.before {
                publisher.push(event).await?;
            }
            publisher.push(&done).await?;
            publisher.flush().await?;
        }
        self.clear_live(id).await;
        for child in &ended.run.children {
            if let Err(error) = Box::pin(self.cancel(child, FailReason::ParentEnded)).await {
                tracing::warn!(run = child, "cannot end a child run: {error}");
            }
        }
        Ok(true)
    }

    /// The record side of [`end`](Self::end): marks run `id` ended by
    /// `ending` if it is live (and `worker`'s, when given). `None` when
    /// the run is not this ending's to end: it is live elsewhere, or
    /// another ending ended it.
    pub(crate) async fn record_end(
        &self,
        id: &str,
        worker: Option<&str>,
        ending: &Ending,
    ) -> Result<Option<Ended>, ClusterError> {
        let (ending_id, done) = (&ending.id, &ending.done);
        let mut outcome = ending.outcome.clone();
        let mut done_event = None;
        let mut ended_before = None;
        let ended = self
            .update(id, |run| {
                let live = !run.is_terminal();
                let owned = worker.is_none_or(|w| run.worker.as_deref() == Some(w));
                if !(live && owned) {
                    if !live && run.ending.as_ref() == Some(ending_id) {
                        ended_before = Some(run.clone());
                    }
                    return Change::Keep;
                }
                if let (Some(asked), Some(FailReason::Cancelled)) = (&run.cancel, &outcome.reason) {
                    // Stopped because someone asked: say why they asked.
                    outcome.reason = Some(FailReason::from_stored(asked));
                }
                let event = done
                    .clone()
                    .unwrap_or_else(|| outcome.synthesized_done(&run.job.adapter));
                run.status = outcome.status.as_str().into();
                run.reason = outcome.reason.as_ref().map(|r| r.as_str().to_owned());
                run.done = outcome.done.clone().or_else(|| payload_of(&event));
                run.ended_ms = Some(moat_engine::now_ms());
                run.ending = Some(ending_id.clone());
                done_event = Some(event);
                Change::Write
            })
            .await?;
        if let (Some(run), Some(done)) = (ended, done_event) {
            return Ok(Some(Ended {
                run,
                done: Some(done),
            }));
        }
        let Some(run) = ended_before else {
            return Ok(None);
        };
        // Ended by this ending in an earlier try (or in this one, when the
        // update's answer was lost): its `done` goes out unless it did.
        let done = if self.done_stored(id).await? {
            None
        } else {
            Some(done.clone().unwrap_or_else(|| synthesized(&run)))
        };
        Ok(Some(Ended { run, done }))
    }

    /// Whether run `id`'s stored events end with a `done`.
    async fn done_stored(&self, id: &str) -> Result<bool, ClusterError> {
        let Some(message) = self.last_message(id).await? else {
            return Ok(false);
        };
        let events = events::decode(Some(&message.headers), &message.payload)?;
        Ok(events.last().is_some_and(|(_, event)| event.is_done()))
    }

    /// The last message of run `id`'s events, if it has any.
    async fn last_message(
        &self,
        id: &str,
    ) -> Result<Option<jetstream::message::StreamMessage>, ClusterError> {
        let subject = layout::events_subject(id);
        settled(|| async {
            match self.events.get_last_raw_message_by_subject(&subject).await {
                Ok(message) => Ok(Some(message)),
                Err(error) if error.kind() == stream::LastRawMessageErrorKind::NoMessageFound => {
                    Ok(None)
                }
                Err(error) => Err(ClusterError::nats("event stream")(&error)),
            }
        })
        .await
    }

    /// The number the next event of run `id` gets: one past the highest
    /// stored, 0 for none. Not always past the last message: one sent
    /// again after its acknowledgement was lost is stored after later
    /// ones. Read from the messages' headers alone.
    pub(crate) async fn next_seq(&self, id: &str) -> Result<u64, ClusterError> {
        let mut next = 0;
        self.each_stored_message(id, true, |message| {
            if let Some(end) = message.headers.as_ref().and_then(events::end_of) {
                next = next.max(end);
            }
            Ok(())
        })
        .await?;
        Ok(next)
    }

    /// Hands each stored message of run `id` to `each` (its headers alone
    /// when `headers_only`), from the first until none is pending. A
    /// delivery that does not come within [`LISTING_PATIENCE`] (a consumer
    /// stalled by a failover) fails the read as timed out, a transient
    /// failure: no reader waits on it for ever.
    async fn each_stored_message(
        &self,
        id: &str,
        headers_only: bool,
        mut each: impl FnMut(&jetstream::Message) -> Result<(), ClusterError>,
    ) -> Result<(), ClusterError> {
        if self.last_message(id).await?.is_none() {
            return Ok(());
        }
        let mut messages = self.ordered_events(id, headers_only).await?;
        loop {
            let next = within(LISTING_PATIENCE, "event stream", async {
                Ok(messages.next().await)
            })
            .await?;
            let Some(message) = next else {
                return Ok(());
            };
            let message = nats("event stream", message)?;
            each(&message)?;
            if nats("event stream", message.info())?.pending == 0 {
                return Ok(());
            }
        }
    }

    /// A publisher of run `id`'s events, the first numbered `seq`.
    pub(crate) fn publisher(&self, id: &str, seq: u64) -> Publisher {
        Publisher::new(
            self.js.clone(),
            layout::events_subject(id),
            seq,
            self.client.server_info().max_payload,
        )
    }

    /// Run `id`'s stored events from number `from`, then the live ones, to
    /// its `done`. When the run ends without its `done` reaching the
    /// stream (its worker was lost between the two), one is made from the
    /// record. Lost workers are looked for meanwhile.
    pub async fn follow(
        &self,
        id: &str,
        from: u64,
    ) -> Result<impl Stream<Item = Result<(u64, AgentEvent), ClusterError>> + use<>, ClusterError>
    {
        let messages = self.event_messages(id).await?;
        let (sender, mut receiver) = tokio::sync::mpsc::channel(256);
        tokio::spawn(follow_events(
            self.clone(),
            id.to_owned(),
            from,
            messages,
            sender,
        ));
        Ok(futures::stream::poll_fn(move |cx| receiver.poll_recv(cx)))
    }

    /// An ordered consumer of run `id`'s events, from its first.
    async fn event_messages(&self, id: &str) -> Result<consumer::pull::Ordered, ClusterError> {
        self.ordered_events(id, false).await
    }

    /// An ordered consumer of run `id`'s event messages, from its first;
    /// their headers alone when `headers_only`.
    async fn ordered_events(
        &self,
        id: &str,
        headers_only: bool,
    ) -> Result<consumer::pull::Ordered, ClusterError> {
        settled(|| async {
            let consumer = nats(
                "event stream",
                self.events
                    .create_consumer(consumer::pull::OrderedConfig {
                        filter_subject: layout::events_subject(id),
                        deliver_policy: consumer::DeliverPolicy::All,
                        headers_only,
                        ..Default::default()
                    })
                    .await,
            )?;
            nats("event stream", consumer.messages().await)
        })
        .await
    }

    /// Forgets that run `id` is live: its entry purged, marker and all,
    /// so the search for lost workers reads only live runs.
    pub(crate) async fn clear_live(&self, id: &str) {
        let subject = format!("$KV.{}.{id}", layout::LIVE_BUCKET);
        if let Err(error) = self.live_stream.purge().filter(subject).await {
            tracing::warn!(run = id, "cannot clear the run's live entry: {error}");
        }
    }

    /// Run `id`'s stored events only, from number `from`.
    pub async fn stored_events(
        &self,
        id: &str,
        from: u64,
    ) -> Result<Vec<(u64, AgentEvent)>, ClusterError> {
        let mut events = Vec::new();
        self.each_stored_message(id, false, |message| {
            for (seq, event) in events::decode(message.headers.as_ref(), &message.payload)? {
                if seq >= from {
                    events.push((seq, event));
                }
            }
            Ok(())
        })
        .await?;
        // In order, once each (see `events::InOrder`).
        events.sort_by_key(|(seq, _)| *seq);
        events.dedup_by_key(|(seq, _)| *seq);
        Ok(events)
    }

    /// Waits until run `id` has ended; its record then. Lost workers are
    /// looked for meanwhile.
    pub async fn wait(&self, id: &str) -> Result<ClusterRun, ClusterError> {
        let mut watch = nats("record", self.records.watch(id).await)?;
        loop {
            let run = self
                .get(id)
                .await?
                .ok_or_else(|| ClusterError::NotFound(id.to_owned()))?;
            if run.is_terminal() {
                return Ok(run);
            }
            let _ = tokio::time::timeout(WATCH_EVERY, watch.next()).await;
            // Looking for lost workers is the waiter's help, not its job: a
            // failover that fails it now does not end the wait.
            if let Err(error) = self.reap_lost_workers().await {
                tracing::debug!("looking for lost workers: {error}");
            }
        }
    }

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
                // run moved on.
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
        self.clear_live(id).await;
        self.enqueue(&run.job).await?;
        tracing::info!(run = id, "queued again after its worker was lost");
        Ok(true)
    }

    /// Stores a component (once per content) and returns its SHA-256.
    pub async fn put_component(&self, bytes: &[u8]) -> Result<String, ClusterError> {
        let sha256 = hex_sha256(bytes);
        // Tried again through a failover; storing the same bytes twice
        // under their hash changes nothing.
        let stored = settled(|| async {
            if self.components.info(&sha256).await.is_ok() {
                return Ok(());
            }
            let mut reader = bytes;
            nats(
                "component store",
                self.components.put(sha256.as_str(), &mut reader).await,
            )
            .map(drop)
        })
        .await;
        stored.map_err(|e| ClusterError::Component {
            sha256: sha256.clone(),
            message: format!("cannot store it: {e}"),
        })?;
        Ok(sha256)
    }

    /// The component `sha256` as a file in `dir`: fetched from the cluster
    /// and checked against its hash the first time, from `dir` after.
    pub async fn fetch_component(&self, sha256: &str, dir: &Path) -> Result<PathBuf, ClusterError> {
        let failed = |message: String| ClusterError::Component {
            sha256: sha256.to_owned(),
            message,
        };
        if !is_sha256(sha256) {
            return Err(failed("not a SHA-256".into()));
        }
        let path = dir.join(format!("{sha256}.wasm"));
        if path.is_file() {
            return Ok(path);
        }
        // Fetched again through a failover (the hash below checks what
        // arrives, whichever attempt brought it).
        let bytes = settled(|| async {
            let mut object = nats("component store", self.components.get(sha256).await)?;
            let mut bytes = Vec::new();
            nats(
                "component store",
                (&mut object)
                    .take(MAX_COMPONENT_BYTES + 1)
                    .read_to_end(&mut bytes)
                    .await,
            )?;
            Ok(bytes)
        })
        .await
        .map_err(|e| {
            failed(format!(
                "cannot fetch it from the cluster's component store: {e}"
            ))
        })?;
        if bytes.len() as u64 > MAX_COMPONENT_BYTES {
            return Err(failed(format!("larger than {MAX_COMPONENT_BYTES} bytes")));
        }
        let actual = hex_sha256(&bytes);
        if actual != sha256 {
            return Err(failed(format!(
                "the stored bytes hash to {actual}: refused"
            )));
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| failed(format!("cannot create {}: {e}", dir.display())))?;
        // A name of its own: runs of one worker may fetch the same
        // component at once, and one's rename must not take the other's
        // file.
        let temp = dir.join(format!(".{sha256}.{}.part", uuid::Uuid::new_v4()));
        let written = std::fs::write(&temp, &bytes).and_then(|()| std::fs::rename(&temp, &path));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(failed(format!("cannot write {}: {error}", path.display())));
        }
        Ok(path)
    }

    /// Closes the connection once everything sent has reached the server.
    pub async fn close(&self) {
        let _ = self.client.flush().await;
    }
}

/// How a run ends: its outcome, and what is published. A clone is the
/// same ending (the same `id`), as when it is tried again.
#[derive(Clone)]
pub(crate) struct Ending {
    /// Which ending this is (see [`ClusterRun::ending`]).
    pub id: String,
    /// Its status and reason (and `done` payload, when it had one).
    pub outcome: Outcome,
    /// The number of the first event published; `None`: one past the
    /// last stored.
    pub seq: Option<u64>,
    /// Events published before the `done`.
    pub before: Vec<AgentEvent>,
    /// The run's own `done`; `None`: one made from the outcome.
    pub done: Option<AgentEvent>,
}

impl Ending {
    /// An end with `outcome` and nothing but a made `done`.
    pub(crate) fn of(outcome: Outcome) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            outcome,
            seq: None,
            before: Vec::new(),
            done: None,
        }
    }
}

/// A run an ending ended (see [`Cluster::record_end`]): its record, and
/// the `done` still to publish (`None`: it is stored already).
pub(crate) struct Ended {
    run: ClusterRun,
    done: Option<AgentEvent>,
}

/// The payload of an event, as records keep a `done`'s.
fn payload_of(event: &AgentEvent) -> Option<serde_json::Value> {
    serde_json::to_value(event)
        .ok()
        .and_then(|value| value.get("payload").cloned())
}

/// `event` with the `done` payload `payload` (as a record keeps it).
fn with_payload(event: AgentEvent, payload: &serde_json::Value) -> AgentEvent {
    let mut value = match serde_json::to_value(&event) {
        Ok(value) => value,
        Err(_) => return event,
    };
    value["payload"] = payload.clone();
    serde_json::from_value(value).unwrap_or(event)
}

/// The task behind [`Cluster::follow`]: `messages` are the run's, from
/// its first (an ordered consumer).
async fn follow_events<E: std::fmt::Display>(
    cluster: Cluster,
    id: String,
    from: u64,
    mut messages: impl Stream<Item = Result<jetstream::Message, E>> + Unpin,
    sender: tokio::sync::mpsc::Sender<Result<(u64, AgentEvent), ClusterError>>,
) {
    let mut ended_seen: Option<ClusterRun> = None;
    let mut order = events::InOrder::default();
    loop {
        let next = tokio::time::timeout(WATCH_EVERY, messages.next()).await;
        let message = match next {
            Ok(Some(Ok(message))) => message,
            Ok(None) => return,
            // Quiet, or the consumer failing (it recreates itself): either
            // way, look at the run, so a stream that keeps failing can
            // neither spin nor outlive the run.
            quiet => {
                if let Ok(Some(Err(error))) = quiet {
                    tracing::debug!(run = id, "following events: {error}");
                    tokio::time::sleep(WATCH_EVERY / 4).await;
                }
                if sender.is_closed() {
                    return;
                }
                if let Err(error) = cluster.reap_lost_workers().await {
                    tracing::debug!("looking for lost workers: {error}");
                }
                // Ended a while ago (seen at the last look), or events
                // missing for longer than any sender retries: what is
                // missing is either stored already and only slow to come
                // (the consumer stalled by a failover or a busy machine),
                // or never coming. The stream says which.
                if ended_seen.is_some() || order.stalled_for(SETTLE + WATCH_EVERY) {
                    match catch_up(
                        &cluster,
                        &id,
                        from,
                        &mut order,
                        &sender,
                        ended_seen.as_ref(),
                    )
                    .await
                    {
                        Ok(ControlFlow::Break(())) => return,
                        Ok(ControlFlow::Continue(())) => {}
                        Err(error) => {
                            tracing::debug!(run = id, "reading the stored events: {error}")
                        }
                    }
                    continue;
                }
                match cluster.get(&id).await {
                    Ok(Some(run)) if run.is_terminal() => ended_seen = Some(run),
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        let _ = sender.send(Err(ClusterError::NotFound(id.clone()))).await;
                        return;
                    }
                    Err(error) => tracing::debug!("reading the run's record: {error}"),
                }
                continue;
            }
        };
        let decoded = match events::decode(message.headers.as_ref(), &message.payload) {
            Ok(decoded) => decoded,
            Err(error) => {
                tracing::warn!(run = id, "skipping events: {error}");
                continue;
            }
        };
        if emit(&sender, from, order.take(decoded)).await.is_break() {
            return;
        }
    }
}

/// Sends what the stream holds of run `id` from the next event expected;
/// then gives up on the events still missing: at once when the run has
/// `ended` (its sender flushed everything before ending it, or is gone),
/// else once they have been missing for longer than any sender retries.
/// A run that ended without its `done` in the stream gets one made from
/// its record. `Break` once the `done` went, or the reader is gone.
async fn catch_up(
    cluster: &Cluster,
    id: &str,
    from: u64,
    order: &mut events::InOrder,
    sender: &tokio::sync::mpsc::Sender<Result<(u64, AgentEvent), ClusterError>>,
    ended: Option<&ClusterRun>,
) -> Result<ControlFlow<()>, ClusterError> {
    let stored = cluster.stored_events(id, order.expected()).await?;
    if emit(sender, from, order.take(stored)).await.is_break() {
        return Ok(ControlFlow::Break(()));
    }
    let skipped = order.skip_gap(SETTLE + WATCH_EVERY, ended.is_some());
    if emit(sender, from, skipped).await.is_break() {
        return Ok(ControlFlow::Break(()));
    }
    let Some(run) = ended else {
        return Ok(ControlFlow::Continue(()));
    };
    let done = synthesized(run);
    let _ = sender.send(Ok((order.expected(), done))).await;
    Ok(ControlFlow::Break(()))
}

/// Sends `events` from number `from` on; `Break` once the `done` went, or
/// the reader is gone.
async fn emit(
    sender: &tokio::sync::mpsc::Sender<Result<(u64, AgentEvent), ClusterError>>,
    from: u64,
    events: Vec<(u64, AgentEvent)>,
) -> ControlFlow<()> {
    for (seq, event) in events {
        let done = event.is_done();
        if seq >= from && sender.send(Ok((seq, event))).await.is_err() {
            return ControlFlow::Break(());
        }
        if done {
            return ControlFlow::Break(());
        }
    }
    ControlFlow::Continue(())
}

/// The `done` a record says its run ended with.
fn synthesized(run: &ClusterRun) -> AgentEvent {
    let outcome = Outcome {
        status: run.status(),
        reason: run.reason.as_deref().map(FailReason::from_stored),
        done: run.done.clone(),
    };
    let event = outcome.synthesized_done(&run.job.adapter);
    match &run.done {
        Some(payload) => with_payload(event, payload),
        None => event,
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every key of `bucket`.
async fn keys(bucket: &kv::Store) -> Result<Vec<String>, ClusterError> {
    let listing = async {
        let mut keys = nats("keys", bucket.keys().await)?;
        let mut all = Vec::new();
        while let Some(key) = keys.next().await {
            all.push(nats("keys", key)?);
        }
        Ok(all)
    };
    within(LISTING_PATIENCE, "keys", listing).await
}

/// `operation` (NATS operation `what`), given up as timed out, a transient
/// failure, after `patience`.
async fn within<T>(
    patience: Duration,
    what: &'static str,
    operation: impl Future<Output = Result<T, ClusterError>>,
) -> Result<T, ClusterError> {
    tokio::time::timeout(patience, operation)
        .await
        .unwrap_or_else(|_| {
            Err(ClusterError::Nats {
                what,
                message: format!("timed out after {} s", patience.as_secs()),
            })
        })
}

/// The key-value bucket `name`, made when missing. Made as the stream
/// the client's own `create_key_value` would make, without its account
/// query, whose answer from a 2.9 server (Debian's) this client cannot
/// read.
async fn key_value(
    js: &jetstream::Context,
    name: &str,
    max_age: Duration,
    replicas: usize,
) -> Result<kv::Store, ClusterError> {
    if let Ok(store) = js.get_key_value(name).await {
        return Ok(store);
    }
    let config = stream::Config {
        name: format!("KV_{name}"),
        subjects: vec![format!("$KV.{name}.>")],
        max_messages_per_subject: 1,
        max_age,
        max_message_size: -1,
        max_bytes: -1,
        storage: stream::StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        // Reads go to the stream's leader: a replica may be behind, and a
        // record read stale would make every compare-and-set retry.
        allow_direct: false,
        num_replicas: replicas,
        discard: stream::DiscardPolicy::New,
        ..Default::default()
    };
    if let Err(error) = js.get_or_create_stream(config).await {
        return Err(ClusterError::nats("bucket")(&error));
    }
    nats("bucket", js.get_key_value(name).await)
}

/// A client connected with `settings`' credentials and TLS.
async fn connect_client(
    settings: &Settings,
    name: &str,
) -> Result<async_nats::Client, ClusterError> {
    let mut options = async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(5));
    options = match &settings.auth {
        Auth::None => options,
        Auth::Token(token) => options.token(token.clone()),
        Auth::UserPassword { user, password } => {
            options.user_and_password(user.clone(), password.clone())
        }
        Auth::Nkey(seed) => options.nkey(seed.clone()),
        Auth::CredsFile(path) => options.credentials_file(path).await.map_err(|e| {
            ClusterError::Settings(format!(
                "cannot read the NATS creds file {}: {e}",
                path.display()
            ))
        })?,
    };
    let tls = &settings.tls;
    if tls.required {
        options = options.require_tls(true);
    }
    if let Some(ca) = &tls.ca {
        options = options.add_root_certificates(ca.clone());
    }
    if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
        options = options.add_client_certificate(cert.clone(), key.clone());
    }
    let urls = settings.urls.join(",");
    let addresses: Vec<async_nats::ServerAddr> = settings
        .urls
        .iter()
        .map(|url| url.parse())
        .collect::<Result<_, _>>()
        .map_err(|e| ClusterError::Settings(format!("the NATS URL in {urls}: {e}")))?;
    // The first connection must come within a bounded time: a user waits.
    let connect = options.connect(addresses);
    match tokio::time::timeout(Duration::from_secs(10), connect).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(error)) => Err(ClusterError::Connect {
            urls,
            message: error.to_string(),
        }),
        Err(_) => Err(ClusterError::Connect {
            urls,
            message: "no server answered within 10 s; is nats-server running there (with -js)?"
                .into(),
        }),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use moat_testkit::nats;

    use super::*;
    use crate::job::ComponentRef;

    /// A cluster of one fresh `nats-server`, kept running while the server
    /// is held; `None` (the test skips) without `nats-server`.
    pub(crate) async fn connected() -> Option<(nats::NatsServer, Cluster)> {
        if !nats::available() {
            return None;
        }
        let server = nats::server(&[]);
        let settings = Settings::new(&server.url(), None).expect("settings");
        let cluster = Cluster::connect(&settings, "moat tests")
            .await
            .expect("connects");
        Some((server, cluster))
    }

    /// How many `done`s run `id` has stored.
    async fn dones(cluster: &Cluster, id: &str) -> usize {
        let events = cluster.stored_events(id, 0).await.expect("stored events");
        events.iter().filter(|(_, event)| event.is_done()).count()
    }

    /// Runs of one worker fetching the same component at once each get
    /// it, whole.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_component_fetched_many_times_at_once_arrives_for_each() {
        let Some((_server, cluster)) = connected().await else {
            return;
        };
        let bytes: Vec<u8> = (0..256 * 1024).map(|i| (i % 251) as u8).collect();
        let sha256 = cluster.put_component(&bytes).await.expect("stored");
        let dir = tempfile::tempdir().expect("a directory");
        for _ in 0..5 {
            // Tasks, so the fetches' writes run on both threads at once.
            let fetches = (0..8).map(|_| {
                let (cluster, sha256, dir) =
                    (cluster.clone(), sha256.clone(), dir.path().to_owned());
                tokio::spawn(async move { cluster.fetch_component(&sha256, &dir).await })
            });
            for fetched in futures::future::join_all(fetches).await {
                let path = fetched.expect("no panic").expect("fetched");
                assert_eq!(std::fs::read(path).expect("written"), bytes);
            }
            std::fs::remove_file(dir.path().join(format!("{sha256}.wasm"))).expect("there");
        }
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("listed").collect();
        assert!(left.is_empty(), "no temporary file is left: {left:?}");
        cluster.close().await;
    }

    /// A run of the built-in echo, submitted and marked running on
    /// worker `w1` (which never runs it): its id.
    async fn running_echo(cluster: &Cluster) -> String {
        let echo = ComponentRef::Builtin {
            name: "echo".into(),
        };
        let id = cluster
            .submit(Job::new(echo, "echo", "hi"))
            .await
            .expect("submitted")
            .job
            .id;
        cluster
            .update(&id, |run| {
                run.status = RunStatus::Running.as_str().into();
                run.worker = Some("w1".into());
                Change::Write
            })
            .await
            .expect("claimed");
        id
    }

    /// An ended run whose two messages of events (0–2, then 3–5 with its
    /// `done`) were stored second first, as when the first is sent again
    /// after its acknowledgement was lost: its id and its `done`.
    async fn reordered_run(cluster: &Cluster) -> (String, AgentEvent) {
        let id = running_echo(cluster).await;
        let completed = Outcome {
            status: RunStatus::Completed,
            reason: None,
            done: None,
        };
        let mut done = completed.synthesized_done("echo");
        if let moat_engine::EventPayload::Done(payload) = &mut done.payload {
            payload.result = Some("the run's own".into());
        }
        let text = |n: u64| {
            AgentEvent::by_host(
                "echo",
                moat_engine::EventPayload::text(format!("event {n}")),
            )
        };
        let mut second = cluster.publisher(&id, 3);
        for n in 3..5 {
            second.push(&text(n)).await.expect("pushed");
        }
        second.push(&done).await.expect("pushed");
        second.flush().await.expect("stored");
        let mut first = cluster.publisher(&id, 0);
        for n in 0..3 {
            first.push(&text(n)).await.expect("pushed");
        }
        first.flush().await.expect("stored");
        let ending = Ending::of(completed);
        let ended = cluster.record_end(&id, Some("w1"), &ending).await;
        assert!(ended.expect("recorded").is_some());
        (id, done)
    }

    /// The number a run's next event gets is past its highest stored,
    /// not past its last message (which may be an earlier one, sent
    /// again): an ending or a new attempt never reuses a number.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_next_number_is_past_the_highest_stored_not_the_last_message() {
        let Some((_server, cluster)) = connected().await else {
            return;
        };
        let (id, _) = reordered_run(&cluster).await;
        assert_eq!(cluster.next_seq(&id).await.expect("read"), 6);
        assert_eq!(cluster.next_seq("r_none").await.expect("read"), 0);
        cluster.close().await;
    }

    /// A follower whose consumer stalls at the end of a run (a failover, a
    /// busy machine) — here it brought only the run's second message, the
    /// first stored after it — still gives every event the stream holds,
    /// in order, and the run's own `done`, once the run has ended: nothing
    /// skipped, no `done` made up in place of the one stored.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_follower_whose_consumer_stalls_gives_what_the_stream_holds() {
        let Some((_server, cluster)) = connected().await else {
            return;
        };
        let (id, done) = reordered_run(&cluster).await;
        let mut stored = cluster.event_messages(&id).await.expect("a consumer");
        let second_message = stored.next().await.expect("there").expect("read");
        let stalled = futures::stream::iter([Ok::<_, ClusterError>(second_message)])
            .chain(futures::stream::pending());
        let (sender, mut receiver) = tokio::sync::mpsc::channel(16);
        tokio::spawn(follow_events(cluster.clone(), id, 0, stalled, sender));
        let mut followed = Vec::new();
        let until = tokio::time::Instant::now() + Duration::from_secs(30);
        while let Some(event) = tokio::time::timeout_at(until, receiver.recv())
            .await
            .expect("the follower ends")
        {
            followed.push(event.expect("an event"));
        }
        let seqs: Vec<u64> = followed.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(seqs, [0, 1, 2, 3, 4, 5], "every event, in order");
        assert_eq!(followed[5].1, done, "the run's own done");
        cluster.close().await;
    }

    /// A worker's ending whose record update landed and whose publishing
    /// never happened (the cluster failing between the two) is finished
    /// when the worker tries it again: one `done` is stored, once, and
    /// another ending of the run (a search for lost workers acting for
    /// the same worker) neither ends it again nor publishes one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_ending_tried_again_publishes_what_its_first_try_left_once() {
        let Some((_server, cluster)) = connected().await else {
            return;
        };
        let id = running_echo(&cluster).await;
        let completed = |seq| Ending {
            seq,
            ..Ending::of(Outcome {
                status: RunStatus::Completed,
                reason: None,
                done: None,
            })
        };
        let ending = completed(Some(0));

        let first_try = cluster.record_end(&id, Some("w1"), &ending).await;
        assert!(first_try.expect("recorded").is_some());
        assert_eq!(dones(&cluster, &id).await, 0);

        let other = cluster.end(&id, Some("w1"), completed(None)).await;
        assert!(!other.expect("answered"), "another ending ended it");
        assert_eq!(dones(&cluster, &id).await, 0);

        for _ in 0..2 {
            let again = cluster.end(&id, Some("w1"), ending.clone()).await;
            assert!(again.expect("answered"), "the ending is this one's");
            assert_eq!(dones(&cluster, &id).await, 1);
        }
        let record = cluster.get(&id).await.expect("read").expect("kept");
        assert_eq!(record.status(), RunStatus::Completed);
        cluster.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_operation_that_never_answers_is_given_up_as_a_transient_failure() {
        let never = std::future::pending::<Result<(), ClusterError>>();
        let error = within(Duration::from_secs(10), "keys", never)
            .await
            .expect_err("given up");
        assert!(error.is_transient(), "{error}");
        assert_eq!(
            error.to_string(),
            "the cluster's keys failed: timed out after 10 s"
        );
        let answered = within(Duration::from_secs(10), "keys", async { Ok(7) }).await;
        assert_eq!(answered.unwrap(), 7);
    }
}
