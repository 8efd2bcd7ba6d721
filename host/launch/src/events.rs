//! [`Launched`]: the events of started runs, as their starter reads them —
//! recorded as they pass when the runs execute here, followed where they
//! are kept when workers elsewhere execute them. Either way each run ends with exactly
//! one `done`, and its abort token stops it wherever it runs.

use std::pin::Pin;
use std::task::{Context, Poll};

use std::sync::Arc;

use futures::stream::{BoxStream, SelectAll};
use futures::{FutureExt, Stream, StreamExt};
use moat_engine::{AgentEvent, DonePayload, DoneStatus, EventPayload, TaskEvent, Usage, codes};
use moat_runs::{RunId, Runs, StoredEvent};
use tokio_util::sync::CancellationToken;

use crate::recording::{Recorded, Recording};

/// The events of started runs.
pub struct Launched {
    ids: Vec<Option<RunId>>,
    events: Events,
    /// The runs' shares of their launcher's memory budget, given back when
    /// their events end.
    _shares: Vec<crate::budget::Share>,
}

enum Events {
    /// Executing here.
    Here(Recorded<BoxStream<'static, TaskEvent>>),
    /// Executing elsewhere, followed: each event with its line as it was
    /// stored, and the line of the event given last.
    Followed {
        events: BoxStream<'static, FollowedEvent>,
        last_json: Option<Arc<str>>,
    },
}

/// A followed event and, when it is the event as it was stored, its JSON
/// line.
type FollowedEvent = (AgentEvent, Option<Arc<str>>);

impl Launched {
    pub(crate) fn here(
        ids: Vec<Option<RunId>>,
        events: BoxStream<'static, TaskEvent>,
        recordings: Vec<Option<Recording>>,
        shares: Vec<crate::budget::Share>,
    ) -> Self {
        Self {
            ids,
            events: Events::Here(Recorded::new(events, recordings)),
            _shares: shares,
        }
    }

    pub(crate) fn followed(ids: Vec<Option<RunId>>, runs: Vec<Followed>) -> Self {
        let mut streams: Vec<_> = runs.into_iter().map(follow).collect();
        // One run's events as they come; several merged as each has one
        // (a merge re-queues its stream on every event: not for one).
        let events = match streams.len() {
            1 => streams.remove(0),
            _ => futures::stream::select_all(streams).boxed(),
        };
        Self {
            ids,
            events: Events::Followed {
                events,
                last_json: None,
            },
            _shares: Vec::new(),
        }
    }

    /// The runs' ids, in the order they were started (`None` for a run
    /// recorded nowhere).
    pub fn ids(&self) -> &[Option<RunId>] {
        &self.ids
    }

    /// The JSON of the event the stream gave last, when it was encoded
    /// already: for the store as it was handed on (see
    /// [`Recorded::encoded`]), or by the worker of a followed run (the
    /// line the cluster holds), so showing it takes no second encoding.
    pub fn encoded(&self) -> Option<&[u8]> {
        match &self.events {
            Events::Here(recorded) => recorded.encoded(),
            Events::Followed { last_json, .. } => last_json.as_deref().map(str::as_bytes),
        }
    }
}

impl Stream for Launched {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        match &mut self.events {
            Events::Here(recorded) => recorded.poll_next_unpin(cx),
            Events::Followed { events, last_json } => match events.poll_next_unpin(cx) {
                Poll::Ready(Some((event, json))) => {
                    *last_json = json;
                    Poll::Ready(Some(event))
                }
                Poll::Ready(None) => {
                    *last_json = None;
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

/// A run handed to workers elsewhere, to follow where it is kept.
pub(crate) struct Followed {
    pub(crate) runs: Arc<dyn Runs>,
    pub(crate) id: RunId,
    /// Cancels it where it runs.
    pub(crate) abort: CancellationToken,
    /// Set on its events, as on a run's here.
    pub(crate) role: Option<String>,
    /// The submitter's side of its spans, when traces are exported.
    pub(crate) tracer: Option<moat_telemetry::RunTracer>,
}

/// The run's events where it is kept, to its `done`; its abort cancels it
/// there. A run that cannot be followed still ends here with an `error`
/// and a `done`.
fn follow(run: Followed) -> BoxStream<'static, FollowedEvent> {
    let Followed {
        runs,
        id,
        abort,
        role,
        tracer,
    } = run;
    let mut tracer = tracer;
    let cancelling = {
        let (runs, id, abort) = (runs.clone(), id.clone(), abort.clone());
        tokio::spawn(async move {
            abort.cancelled().await;
            if let Err(error) = runs.cancel(&id).await {
                tracing::warn!(run = %id, "cannot cancel the run in {}: {error}", runs.place());
            }
        })
    };
    let guard = CancelOnDrop(cancelling);
    async move {
        let place = runs.place();
        match runs.follow(&id, 0).await {
            Ok(events) => events
                .filter_map(move |event| {
                    let _kept = &guard;
                    futures::future::ready(match event {
                        Ok(StoredEvent { json, .. }) => {
                            match serde_json::from_str::<AgentEvent>(&json) {
                                Ok(mut event) => {
                                    // A role set here changes the event: its
                                    // stored line is no longer it.
                                    let json = if event.role.is_none() && role.is_some() {
                                        event.role.clone_from(&role);
                                        None
                                    } else {
                                        Some(json)
                                    };
                                    Some((event, json))
                                }
                                Err(error) => {
                                    tracing::warn!(
                                        "a run's event in {place} is not an event: {error}"
                                    );
                                    None
                                }
                            }
                        }
                        Err(error) => {
                            tracing::warn!("following a run in {place}: {error}");
                            None
                        }
                    })
                })
                .map(move |followed| {
                    if let Some(tracer) = tracer.as_mut() {
                        tracer.observe(&followed.0);
                    }
                    followed
                })
                .boxed(),
            Err(error) => unfollowed(&id, place, &error.to_string()),
        }
    }
    .flatten_stream()
    .boxed()
}

/// Stops the task that cancels a followed run once nobody follows it.
struct CancelOnDrop(tokio::task::JoinHandle<()>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The `error` and `done` of a run that could not be followed.
fn unfollowed(id: &RunId, place: &str, why: &str) -> BoxStream<'static, FollowedEvent> {
    let error = AgentEvent::by_host(
        "moat",
        EventPayload::error(
            codes::ADAPTER_ERROR,
            format!("cannot follow run {id} in {place}: {why}"),
            false,
        ),
    );
    let done = AgentEvent::by_host(
        "moat",
        EventPayload::Done(Box::new(DonePayload {
            status: DoneStatus::Error,
            result: None,
            resume_token: None,
            usage: Usage::default(),
            duration_ms: 0,
            metadata: None,
        })),
    );
    futures::stream::iter([(error, None), (done, None)]).boxed()
}

/// `engine`'s events of `tasks` runs with what their approval desks tell
/// (`notices`, by task): a desk's event is handed on as soon as it is
/// made — while the engine still waits on the run's adapter, which is
/// what the run waits for — carrying the run's session id and role as
/// its last event had them, and never after the run's `done`.
pub(crate) fn with_notices(
    engine: BoxStream<'static, TaskEvent>,
    notices: Vec<(usize, crate::approvals::Notices)>,
    roles: Vec<Option<String>>,
) -> BoxStream<'static, TaskEvent> {
    let notices = futures::stream::select_all(notices.into_iter().map(|(task, receiver)| {
        tokio_stream_of(receiver)
            .map(move |event| TaskEvent { task, event })
            .boxed()
    }));
    WithNotices {
        engine,
        notices,
        last: vec![None; roles.len()],
        ended: vec![false; roles.len()],
        roles,
    }
    .boxed()
}

/// A receiver as a stream.
fn tokio_stream_of(
    mut receiver: crate::approvals::Notices,
) -> impl Stream<Item = AgentEvent> + Send + 'static {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

struct WithNotices {
    engine: BoxStream<'static, TaskEvent>,
    notices: SelectAll<BoxStream<'static, TaskEvent>>,
    /// Each run's session id, from its last event.
    last: Vec<Option<String>>,
    /// Each run's role, set on its events.
    roles: Vec<Option<String>>,
    /// Whether each run's `done` has passed.
    ended: Vec<bool>,
}

impl Stream for WithNotices {
    type Item = TaskEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<TaskEvent>> {
        // The desks first: a request is made before the adapter's call
        // that waits for it returns, and must come before what follows.
        while let Poll::Ready(Some(mut notice)) = self.notices.poll_next_unpin(cx) {
            let task = notice.task;
            if self.ended.get(task).copied().unwrap_or(true) {
                continue;
            }
            match self.last.get_mut(task) {
                Some(Some(session)) => notice.event.session_id.clone_from(session),
                // Before the run's first event: its notices share one id.
                Some(last) => *last = Some(notice.event.session_id.clone()),
                None => {}
            }
            notice.event.role = self.roles.get(task).cloned().flatten();
            return Poll::Ready(Some(notice));
        }
        let polled = self.engine.poll_next_unpin(cx);
        if let Poll::Ready(Some(passed)) = &polled {
            let task = passed.task;
            if let Some(last) = self.last.get_mut(task) {
                *last = Some(passed.event.session_id.clone());
            }
            if passed.event.is_done()
                && let Some(ended) = self.ended.get_mut(task)
            {
                *ended = true;
            }
        }
        polled
    }
}
