//! Recording the runs a command starts in the run store: a record per run
//! before its adapter starts, each event as it passes, the outcome at its
//! end, and cancels asked through the store (`moat cancel`) turned into the
//! run's abort.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use moat_engine::{AgentEvent, DoneStatus, EventPayload, RunRequest, TaskEvent, codes};
use moat_sandbox::RunScope;
use moat_store::{FailReason, NewRun, Recorder, RunId, Store, StoreError};
use tokio_util::sync::CancellationToken;

use super::drive::Shown;

/// How often a recorded run looks for a cancel asked from elsewhere.
const CANCEL_POLL: Duration = Duration::from_millis(200);

/// Records the run `request` asks for (`pending`), before its adapter
/// starts; `component_sha256` names its component, `parent` the live run
/// whose end ends it.
pub fn record(
    store: Arc<Store>,
    request: &RunRequest<RunScope>,
    component_sha256: String,
    parent: Option<RunId>,
) -> anyhow::Result<Recorder> {
    let limits = &request.limits;
    let timeout_ms = limits.timeout.map(|t| t.as_millis() as u64);
    let run = NewRun {
        parent,
        adapter: request.agent.clone(),
        component_sha256,
        prompt: request.prompt.clone(),
        options: serde_json::to_value(&request.options)?,
        grants: serde_json::to_value(&request.scope.grants)?,
        limits: serde_json::json!({
            "timeoutMs": timeout_ms,
            "fuel": limits.fuel,
            "maxMemoryBytes": limits.max_memory_bytes,
            "maxEventBytes": limits.max_event_bytes,
            "maxConnections": limits.max_connections,
            "maxOpenFiles": limits.max_open_files,
        }),
        timeout_ms,
    };
    Ok(Recorder::create(store, &run)?)
}

/// One run's events as [`recorded`] takes them.
pub fn single(events: impl Stream<Item = AgentEvent>) -> impl Stream<Item = TaskEvent> {
    events.map(|event| TaskEvent { task: 0, event })
}

/// `events` (of the tasks whose records are `recorders`, in task order),
/// each stored as it passes. A task is stopped (its `aborts` token) when
/// the store cannot record it or someone cancels it through the store; a
/// task's record ends with its `done`, or with the stream.
pub fn recorded<S: Stream<Item = TaskEvent> + Send + 'static>(
    events: S,
    recorders: Vec<Recorder>,
    aborts: Vec<CancellationToken>,
) -> Recorded<S> {
    let store = recorders.first().map(Recorder::store);
    let ids: Vec<RunId> = recorders.iter().map(|r| r.id().clone()).collect();
    for recorder in &recorders {
        if let Err(error) = recorder.running() {
            tracing::error!("cannot record the run: {error}");
        }
    }
    let watcher = store.map(|store| tokio::spawn(watch_cancels(store, ids, aborts.clone())));
    Recorded {
        events: Box::pin(events),
        unrecorded: vec![false; aborts.len().max(1)],
        recorders: recorders.into_iter().map(Some).collect(),
        aborts,
        watcher,
        next: None,
        json: Vec::new(),
        json_shown: false,
    }
}

/// The stream [`recorded`] returns. A plain state machine rather than a
/// chain of combinators: each event is moved once and nothing is
/// allocated per event (a flood's events cost less than a microsecond
/// each, and every move of one counted). Each event is encoded once, for
/// the store and for whoever shows it ([`Shown::encoded`]).
pub struct Recorded<S> {
    events: Pin<Box<S>>,
    /// Per task: its recorder while its record is open.
    recorders: Vec<Option<Recorder>>,
    aborts: Vec<CancellationToken>,
    /// Tasks stopped because the store failed: their `done` says error.
    unrecorded: Vec<bool>,
    watcher: Option<tokio::task::JoinHandle<()>>,
    /// The event that follows a store failure's `error`.
    next: Option<AgentEvent>,
    /// The JSON of the event last handed on, as stored.
    json: Vec<u8>,
    /// Whether `json` is the event last handed on, as it was handed on.
    json_shown: bool,
}

impl<S: Stream<Item = TaskEvent>> Recorded<S> {
    /// Records `event` of `task`: the event to hand on. When the store
    /// failed, that is the failure's `error`, and `event` waits in `next`.
    fn record(&mut self, task: usize, mut event: AgentEvent) -> AgentEvent {
        let mut failure = None;
        self.json.clear();
        self.json_shown = serde_json::to_writer(&mut self.json, &event).is_ok();
        if let Some(slot) = self.recorders.get_mut(task) {
            let recorded = slot.as_mut().map(|recorder| {
                if self.json_shown {
                    recorder.record_encoded(&event, &self.json)
                } else {
                    recorder.record(&event)
                }
            });
            if let Some(Err(error)) = recorded {
                // Never go on without recording: the run stops, and says
                // why in its own stream.
                failure = Some(store_failure(&event, &error));
                if let Some(abort) = self.aborts.get(task) {
                    abort.cancel();
                }
                if let Some(flag) = self.unrecorded.get_mut(task) {
                    *flag = true;
                }
                // Its record ends `failed` / `store error`, if the store
                // takes even that.
                if let Some(recorder) = slot.take() {
                    let _ = recorder.finish(FailReason::StoreError);
                }
            }
            if event.is_done() {
                finish(slot.take());
            }
        }
        if let EventPayload::Done(done) = &mut event.payload
            && self.unrecorded.get(task).copied().unwrap_or(false)
        {
            done.status = DoneStatus::Error;
            self.json_shown = false;
        }
        match failure {
            Some(failure) => {
                self.json_shown = false;
                self.next = Some(event);
                failure
            }
            None => event,
        }
    }

    /// The stream is over: a task cut before its done was stopped.
    fn end(&mut self) {
        if let Some(watcher) = self.watcher.take() {
            watcher.abort();
        }
        self.recorders.iter_mut().map(Option::take).for_each(finish);
    }
}

impl<S> Drop for Recorded<S> {
    fn drop(&mut self) {
        // Dropped before its end (the command gave up on it): nothing is
        // left to watch for.
        if let Some(watcher) = self.watcher.take() {
            watcher.abort();
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
                self.end();
                Poll::Ready(None)
            }
        }
    }
}

impl<S: Stream<Item = TaskEvent>> Shown for Recorded<S> {
    fn encoded(&self) -> Option<&[u8]> {
        self.json_shown.then_some(&self.json[..])
    }
}

/// The `error` a run gets when the store can no longer record it.
pub fn store_failure(beside: &AgentEvent, error: &StoreError) -> AgentEvent {
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

fn finish(recorder: Option<Recorder>) {
    if let Some(recorder) = recorder
        && let Err(error) = recorder.finish(FailReason::Cancelled)
    {
        eprintln!("moat: {error}");
    }
}

/// Aborts the runs `ids` someone cancels through the store, or the store
/// ended from outside (their parent ended).
pub async fn watch_cancels(store: Arc<Store>, ids: Vec<RunId>, aborts: Vec<CancellationToken>) {
    loop {
        tokio::time::sleep(CANCEL_POLL).await;
        let store = store.clone();
        let asked = tokio::task::spawn_blocking(move || store.cancels_requested())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        for (id, abort) in ids.iter().zip(&aborts) {
            if asked.contains(id) && !abort.is_cancelled() {
                tracing::info!(run = %id, "cancelled through the store");
                abort.cancel();
            }
        }
    }
}
