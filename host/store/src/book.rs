//! This machine's store behind [`RunBook`]: a run executing in this
//! process is recorded in the store ([`Recorder`]) and, as each event is
//! stored, published to whoever follows it here ([`Publisher`]).

use std::time::Duration;

use moat_engine::AgentEvent;
use moat_runs::{
    Answer, Approval, ApprovalRequest, FailReason, NewRun, Outcome, RunBook, RunId, RunLog,
    RunsError, Spent, StoredEvent,
};
use tokio_util::sync::CancellationToken;

use crate::live::Publisher;
use crate::local::{LocalRuns, runs_error};
use crate::recorder::Recorder;

#[async_trait::async_trait]
impl RunBook for LocalRuns {
    async fn create(
        &self,
        id: RunId,
        run: &NewRun,
        abort: CancellationToken,
    ) -> Result<Box<dyn RunLog>, RunsError> {
        let recorder = Recorder::create_as_awaiting(self.store().clone(), id, run)
            .await
            .map_err(runs_error)?;
        let publisher = self.begin(recorder.id().clone(), run.parent.clone(), abort);
        Ok(Box::new(StoreLog {
            id: recorder.id().clone(),
            recorder: Some(recorder),
            publisher: Some(publisher),
        }))
    }

    async fn ask(&self, id: &RunId, request: &ApprovalRequest) -> Result<Approval, RunsError> {
        self.store().ask(id, request).map_err(runs_error)
    }

    async fn answer_of(&self, id: &RunId, number: u32) -> Result<Option<Answer>, RunsError> {
        self.store().answer_of(id, number).map_err(runs_error)
    }

    async fn answer_to(&self, id: &RunId, number: u32) -> Result<Answer, RunsError> {
        LocalRuns::answer_to(self, id, number)
            .await
            .map_err(runs_error)
    }

    fn spent(&self, id: &RunId, spent: &Spent) -> Result<(), RunsError> {
        self.store().set_spent(id, spent).map_err(runs_error)
    }

    async fn stop_live(&self, patience: Duration) -> bool {
        let live = self.live().all();
        for run in &live {
            run.abort.cancel();
        }
        let all = futures::future::join_all(live.iter().map(|run| run.ended()));
        tokio::time::timeout(patience, all).await.is_ok()
    }
}

/// A run's record in the store while it executes here.
#[derive(Debug)]
struct StoreLog {
    id: RunId,
    /// `None` once the record is final.
    recorder: Option<Recorder>,
    /// Its entry among this process's live runs; `None` once its `done`
    /// was told.
    publisher: Option<Publisher>,
}

impl StoreLog {
    fn publish(&self, seq: u64, event: &AgentEvent, json: Option<&[u8]>) {
        let Some(publisher) = self.publisher.as_ref().filter(|p| p.is_heard()) else {
            return;
        };
        let json = match json {
            Some(json) => String::from_utf8_lossy(json).into(),
            None => serde_json::to_string(event).unwrap_or_default().into(),
        };
        publisher.publish(StoredEvent {
            seq,
            json,
            done: event.is_done(),
        });
    }

    /// Ends the record as its `done` said, or failed with `reason`.
    fn close(&mut self, reason: FailReason) -> Result<(), RunsError> {
        match self.recorder.take() {
            Some(recorder) => recorder.finish(reason).map(drop).map_err(runs_error),
            None => Ok(()),
        }
    }
}

impl RunLog for StoreLog {
    fn id(&self) -> &RunId {
        &self.id
    }

    fn running(&mut self) -> Result<(), RunsError> {
        match &self.recorder {
            Some(recorder) => recorder.running().map_err(runs_error),
            None => Ok(()),
        }
    }

    fn record(&mut self, event: &AgentEvent, json: Option<&[u8]>) -> Result<u64, RunsError> {
        let Some(recorder) = self.recorder.as_mut() else {
            return Err(RunsError::Invalid(format!(
                "run {} has ended: nothing more is recorded",
                self.id
            )));
        };
        let seq = match json {
            Some(json) => recorder.record_encoded(event, json),
            None => recorder.record(event),
        }
        .map_err(runs_error)?;
        if let Some(publisher) = &self.publisher {
            publisher.recorded(seq);
        }
        if event.is_done() {
            // The record is final before anyone hears of the done: a
            // follower that reads it and asks for the record sees the
            // ended run.
            if let Err(error) = self.close(FailReason::Cancelled) {
                tracing::error!("cannot record the run's end: {error}");
            }
        }
        self.publish(seq, event, json);
        if event.is_done() {
            // Whatever follows in this process is told the run ended.
            self.publisher = None;
        }
        Ok(seq)
    }

    fn finish(mut self: Box<Self>, reason: FailReason) -> Result<(), RunsError> {
        // The record is final, then the run stops being live here (the
        // publisher's drop).
        self.close(reason)
    }

    fn end(mut self: Box<Self>, outcome: &Outcome) -> Result<(), RunsError> {
        match self.recorder.take() {
            Some(recorder) => recorder
                .store()
                .finish(&self.id, outcome)
                .map(drop)
                .map_err(runs_error),
            None => Ok(()),
        }
    }

    fn fail(mut self: Box<Self>, reason: FailReason, said: &AgentEvent) {
        let next = self.recorder.as_ref().map(Recorder::next_seq);
        if let Err(error) = self.close(reason) {
            tracing::error!("cannot record the run's end: {error}");
        }
        if let Some(next) = next {
            self.publish(next, said, None);
        }
    }
}
