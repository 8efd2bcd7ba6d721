//! A run's record while it runs: created `pending` before its adapter
//! starts (in whichever [`RunBook`](moat_runs::RunBook) keeps it), each
//! event recorded as it passes, and finished exactly once whatever
//! happens — by its `done`, by the stream's end, or, when it never
//! started, by being dropped. A book that cannot record the run stops
//! it, and the run says why in its own stream.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use moat_engine::{AgentEvent, DoneStatus, EventPayload, TaskEvent, codes};
use moat_runs::{FailReason, RunLog, RunsError};
use tokio_util::sync::CancellationToken;

/// One run's record, open until it is finished.
#[derive(Debug)]
pub struct Recording {
    /// `None` once the record is final.
    log: Option<Box<dyn RunLog>>,
    abort: CancellationToken,
    /// The book failed: the run was stopped, and its `done` says error.
    unrecorded: bool,
    /// Why it failed if it ends without a `done`.
    cut: FailReason,
}

impl Recording {
    /// The record `log` keeps, the run stopped by `abort`.
    pub(crate) fn new(log: Box<dyn RunLog>, abort: CancellationToken) -> Self {
        Self {
            log: Some(log),
            abort,
            unrecorded: false,
            // A run dropped before it started never ran its adapter.
            cut: FailReason::Other("not started".into()),
        }
    }

    /// Its adapter starts now.
    fn running(&mut self) {
        self.cut = FailReason::Cancelled;
        if let Some(log) = &mut self.log
            && let Err(error) = log.running()
        {
            tracing::error!("cannot record the run: {error}");
        }
    }

    /// Records `event` (`json`: its encoding, when made): the event to
    /// hand on, and the one to hand on after it when the book failed
    /// (then the first is the failure's `error`).
    fn record(&mut self, mut event: AgentEvent, json: Option<&[u8]>) -> Recorded1 {
        let mut failure = None;
        if let Some(log) = self.log.as_mut() {
            match log.record(&event, json) {
                Ok(_) => {
                    if event.is_done() {
                        // Final, as the done said (the log ended it).
                        self.log = None;
                    }
                }
                Err(error) => {
                    // Never go on without recording: the run stops, and
                    // says why in its own stream.
                    let stopped = store_failure(&event, &error);
                    self.abort.cancel();
                    self.unrecorded = true;
                    if let Some(log) = self.log.take() {
                        log.fail(FailReason::StoreError, &stopped);
                    }
                    failure = Some(stopped);
                }
            }
        }
        if self.unrecorded
            && let EventPayload::Done(done) = &mut event.payload
        {
            done.status = DoneStatus::Error;
        }
        match failure {
            Some(failure) => Recorded1 {
                first: failure,
                then: Some(event),
                changed: true,
            },
            None => Recorded1 {
                changed: self.unrecorded,
                first: event,
                then: None,
            },
        }
    }

    /// Ends the record: as its `done` said, or failed with `reason`.
    fn finish(&mut self, reason: FailReason) {
        if let Some(log) = self.log.take()
            && let Err(error) = log.finish(reason)
        {
            tracing::error!("cannot record the run's end: {error}");
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let cut = std::mem::replace(&mut self.cut, FailReason::Cancelled);
        self.finish(cut);
    }
}

/// What recording one event gives.
struct Recorded1 {
    first: AgentEvent,
    then: Option<AgentEvent>,
    /// `first` is not the event as it was encoded.
    changed: bool,
}

/// The `error` a run gets when the store can no longer record it.
fn store_failure(beside: &AgentEvent, error: &RunsError) -> AgentEvent {
    AgentEvent {
        agent: beside.agent.clone(),
        timestamp: moat_engine::now_ms(),
        session_id: beside.session_id.clone(),
        role: beside.role.clone(),
        payload: EventPayload::error(
            codes::STORE_ERROR,
            format!(
                "{error}; the run is stopped rather than left unrecorded (--no-store runs without the store)"
            ),
            false,
        ),
    }
}

/// The events of the tasks whose records are `recordings` (in task order;
/// `None` for a task recorded nowhere), each stored as it passes. A plain
/// state machine rather than a chain of combinators: each event is moved
/// once and nothing is allocated per event, and each is encoded once, for
/// the store and for whoever shows it ([`Recorded::encoded`]).
pub struct Recorded<S> {
    events: Pin<Box<S>>,
    recordings: Vec<Option<Recording>>,
    /// The event that follows a store failure's `error`.
    next: Option<AgentEvent>,
    /// The JSON of the event last handed on, as stored.
    json: Vec<u8>,
    /// Whether `json` is the event last handed on, as it was handed on.
    json_shown: bool,
}

impl<S: Stream<Item = TaskEvent>> Recorded<S> {
    /// `events`, recorded by `recordings`; each recorded run is marked
    /// running now.
    pub(crate) fn new(events: S, mut recordings: Vec<Option<Recording>>) -> Self {
        for recording in recordings.iter_mut().flatten() {
            recording.running();
        }
        Self {
            events: Box::pin(events),
            recordings,
            next: None,
            json: Vec::new(),
            json_shown: false,
        }
    }

    /// The JSON of the event the stream gave last, when it was encoded for
    /// the store as it was handed on: an NDJSON printer prints it rather
    /// than encoding the event again.
    pub fn encoded(&self) -> Option<&[u8]> {
        self.json_shown.then_some(&self.json[..])
    }

    fn record(&mut self, task: usize, event: AgentEvent) -> AgentEvent {
        let Some(Some(recording)) = self.recordings.get_mut(task) else {
            self.json_shown = false;
            return event;
        };
        self.json.clear();
        let encoded = serde_json::to_writer(&mut self.json, &event).is_ok();
        let done = event.is_done();
        let recorded = recording.record(event, encoded.then_some(&self.json[..]));
        self.json_shown = encoded && !recorded.changed;
        if done {
            // Its record is finished: nothing more is recorded for it.
            self.recordings[task] = None;
        }
        match recorded.then {
            Some(then) => {
                self.next = Some(then);
                recorded.first
            }
            None => recorded.first,
        }
    }
}

impl<S: Stream<Item = TaskEvent>> Stream for Recorded<S> {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        if let Some(event) = self.next.take() {
            self.json_shown = false;
            return Poll::Ready(Some(event));
        }
        match std::task::ready!(self.events.as_mut().poll_next(cx)) {
            Some(TaskEvent { task, event }) => Poll::Ready(Some(self.record(task, event))),
            None => {
                // A task cut before its done was stopped: its record ends
                // failed (each recording's drop).
                self.recordings.clear();
                Poll::Ready(None)
            }
        }
    }
}
