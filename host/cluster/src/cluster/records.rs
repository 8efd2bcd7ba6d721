//! Run records in the records bucket: submitting a run (its record, then
//! the work queue), reading, changing (compare and set), listing and
//! resolving records, cancelling a run, and ending one once ([`Ending`]),
//! with the `done` a record keeps.

use std::time::Duration;

use async_nats::jetstream::kv;
use async_nats::jetstream::message::PublishMessage;
use bytes::Bytes;
use moat_engine::AgentEvent;
use moat_runs::{FailReason, Outcome, RunStatus};

use super::{Cluster, keys};
use crate::error::{ClusterError, nats, settled};
use crate::layout;
use crate::record::ClusterRun;
use moat_runs::job::Job;

/// How many times a change of a record is tried against concurrent ones.
const CAS_ATTEMPTS: usize = 64;

/// What [`Cluster::update`]'s change does with a record.
pub(crate) enum Change {
    /// Write the record as changed.
    Write,
    /// Leave it as it is.
    Keep,
}

impl Cluster {
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
        self.enqueue(&record.job, record.attempt).await?;
        // A parent that ended between taking the child and the child's
        // record being there could not stop it: stop it now.
        if let Some(parent) = &record.job.parent
            && self.get(parent).await?.is_none_or(|run| run.is_terminal())
        {
            self.cancel(&id, FailReason::ParentEnded).await?;
        }
        Ok(record)
    }

    /// Puts `job` on the work queue as the job of the run's `attempt`
    /// (its record's count of claims so far). The server drops a second
    /// job of the same attempt within the stream's duplicate window (two
    /// minutes unless set otherwise), so a job that may be missing can be
    /// queued again without piling up copies (and a copy past the window
    /// is harmless: a run is claimed only while pending, by compare and
    /// set). Whether it was queued, not dropped as a copy.
    pub(crate) async fn enqueue(&self, job: &Job, attempt: u32) -> Result<bool, ClusterError> {
        let payload: Bytes = serde_json::to_vec(job)
            .map_err(|e| ClusterError::Invalid(format!("cannot encode a job: {e}")))?
            .into();
        let message_id = format!("{}.{attempt}", job.id);
        settled(|| async {
            let publish = PublishMessage::build()
                .payload(payload.clone())
                .message_id(&message_id);
            let ack = nats(
                "work queue",
                self.js.send_publish(layout::RUNS_SUBJECT, publish).await,
            )?;
            nats("work queue", ack.await).map(|ack| !ack.duplicate)
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
        change: impl FnMut(&mut ClusterRun) -> Change,
    ) -> Result<Option<ClusterRun>, ClusterError> {
        let updated = self.update_from(id, None, change).await?;
        Ok(updated.map(|(run, _)| run))
    }

    /// As [`Self::update`], the first attempt on `read`, the record and
    /// its revision as the caller read or wrote it (a round trip saved;
    /// were it changed since, the write fails and the record is read
    /// again); with the revision the write made.
    pub(crate) async fn update_from(
        &self,
        id: &str,
        mut read: Option<(ClusterRun, u64)>,
        mut change: impl FnMut(&mut ClusterRun) -> Change,
    ) -> Result<Option<(ClusterRun, u64)>, ClusterError> {
        for _ in 0..CAS_ATTEMPTS {
            let entry = match read.take() {
                Some(entry) => Some(entry),
                None => self.entry(id).await?,
            };
            let Some((mut run, revision)) = entry else {
                return Ok(None);
            };
            if let Change::Keep = change(&mut run) {
                return Ok(None);
            }
            match self.records.update(id, run.to_bytes(), revision).await {
                Ok(revision) => return Ok(Some((run, revision))),
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
                // A cluster's records are never `waiting`: its runs do
                // not ask (yet); were one to, it is stopped as running.
                RunStatus::Running | RunStatus::Waiting => {
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
            .update_from(id, ending.read.clone(), |run| {
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
                // Its open requests are closed with it, in the same write.
                for approval in &mut run.approvals {
                    approval
                        .answer
                        .get_or_insert_with(moat_runs::Answer::closed);
                }
                done_event = Some(event);
                Change::Write
            })
            .await?;
        if let (Some((run, _)), Some(done)) = (ended, done_event) {
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
    /// The run's record and its revision as the ender last wrote it (a
    /// worker's claim): the end is written on it without reading the
    /// record again, unless it changed since.
    pub read: Option<(ClusterRun, u64)>,
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
            read: None,
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

/// The `done` a record says its run ended with.
pub(super) fn synthesized(run: &ClusterRun) -> AgentEvent {
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::cluster::tests::connected;
    use moat_runs::job::ComponentRef;

    /// How many `done`s run `id` has stored.
    async fn dones(cluster: &Cluster, id: &str) -> usize {
        let events = cluster.stored_events(id, 0).await.expect("stored events");
        events
            .iter()
            .filter(|stored| stored.event.is_done())
            .count()
    }

    /// A run of the built-in echo, submitted and marked running on
    /// worker `w1` (which never runs it): its id.
    pub(crate) async fn running_echo(cluster: &Cluster) -> String {
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
}
