//! Recording one run as its events go by: each event stored in order, and
//! the run's terminal status derived from what the host saw — the `done`
//! and the errors the engine raised — never from what the adapter claims
//! about itself alone.

use std::sync::Arc;

use moat_engine::{AgentEvent, EventPayload, codes};

use moat_runs::{FailReason, NewRun, Outcome, RunId, RunStatus};

use crate::writer::Writer;
use crate::{Store, StoreError};

/// One run being recorded.
#[derive(Debug)]
pub struct Recorder {
    store: Arc<Store>,
    id: RunId,
    /// The id as the writer takes it, shared by every event.
    key: Arc<str>,
    next_seq: u64,
    /// The engine's TIMEOUT error, if one came: the run failed by timeout.
    timed_out: bool,
    /// The outcome, once `done` went by.
    outcome: Option<Outcome>,
}

impl Recorder {
    /// Records `run` (`pending`) in `store`: its id is known from now on.
    pub fn create(store: Arc<Store>, run: &NewRun) -> Result<Self, StoreError> {
        Self::create_as(store, RunId::new(), run)
    }

    /// Records `run` (`pending`) in `store` under `id`, chosen by the
    /// caller (see [`Store::create_run_as`]).
    pub fn create_as(store: Arc<Store>, id: RunId, run: &NewRun) -> Result<Self, StoreError> {
        let id = store.create_run_as(id, run)?;
        Ok(Self::created(store, id))
    }

    /// [`Recorder::create_as`] without blocking the thread: runs created
    /// together share one commit (see [`Store::create_run_as_awaiting`]).
    pub async fn create_as_awaiting(
        store: Arc<Store>,
        id: RunId,
        run: &NewRun,
    ) -> Result<Self, StoreError> {
        let id = store.create_run_as_awaiting(id, run).await?;
        Ok(Self::created(store, id))
    }

    fn created(store: Arc<Store>, id: RunId) -> Self {
        Self {
            store,
            key: id.as_str().into(),
            id,
            next_seq: 0,
            timed_out: false,
            outcome: None,
        }
    }

    /// The store it records into.
    pub fn store(&self) -> Arc<Store> {
        self.store.clone()
    }

    /// The run's id.
    pub fn id(&self) -> &RunId {
        &self.id
    }

    /// The number the run's next event gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The adapter started: the record says so as soon as the store's
    /// writer commits it, sharing the commit with other runs' changes,
    /// without the run waiting.
    pub fn running(&self) -> Result<(), StoreError> {
        self.store.mark_running_unwaited(&self.id)
    }

    /// Stores the run's next event: its sequence number in the run. An
    /// error means the store can no longer record this run: the caller
    /// must stop it.
    pub fn record(&mut self, event: &AgentEvent) -> Result<u64, StoreError> {
        self.store_next(event, |writer, run, seq| writer.event(run, seq, event))
    }

    /// [`record`](Self::record) for an event the caller has encoded
    /// already: `json` is `event` as `serde_json` writes it, stored as it
    /// is (a recorded run printed as NDJSON is encoded once for both).
    pub fn record_encoded(&mut self, event: &AgentEvent, json: &[u8]) -> Result<u64, StoreError> {
        self.store_next(event, |writer, run, seq| {
            writer.encoded(run, seq, json, event.is_done())
        })
    }

    /// Notes what `event` says of the run's end, and queues it as the
    /// run's next event with `queue`.
    fn store_next(
        &mut self,
        event: &AgentEvent,
        queue: impl FnOnce(&Writer, &Arc<str>, u64) -> Result<(), StoreError>,
    ) -> Result<u64, StoreError> {
        match &event.payload {
            EventPayload::Error(error) if error.code.as_deref() == Some(codes::TIMEOUT) => {
                self.timed_out = true;
            }
            EventPayload::Done(done) => {
                self.outcome = Some(Outcome::of_done(done.status, self.timed_out, event));
            }
            _ => {}
        }
        let seq = self.next_seq;
        queue(&self.store.writer, &self.key, seq)?;
        self.next_seq += 1;
        Ok(seq)
    }

    /// Ends the record: as its `done` said, or, without one (the stream
    /// was cut), failed with `reason`. Returns whether this ended it (the
    /// store may have ended it first: a cancel, its parent's end).
    pub fn finish(self, reason: FailReason) -> Result<bool, StoreError> {
        let outcome = self.outcome.clone().unwrap_or(Outcome {
            status: RunStatus::Failed,
            reason: Some(reason),
            done: None,
        });
        self.store.finish(&self.id, &outcome)
    }
}
