//! A run's traffic in its events: each request or connection recorded
//! where it happened ([`moat_contain::traffic`]) becomes a `moat:traffic`
//! event of its run, and each model call moat read a `moat:usage` event
//! with `source: "metered"` (charged by the meter, [`crate::metering`]),
//! as they happen; what is left when the run ends comes before its
//! `done`, which waits (up to [`OPEN_AT_DONE`]) for the requests and
//! connections still going when it came: the run's programs are killed
//! as it ends, and what they had open is recorded as it closes.
//!
//! Only moat says what a run's traffic was: an adapter's own
//! `moat:traffic` event is dropped (with an error saying so), and its
//! `moat:usage` events are marked `source: "reported"` whatever they
//! claimed.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::stream::{BoxStream, Stream, StreamExt};
use moat_contain::traffic::{MeteredCall, Taken, Traffic};
use moat_engine::{
    AgentEvent, EventPayload, ExtensionPayload, METERED_SOURCE, REPORTED_SOURCE, TRAFFIC_EVENT,
    TaskEvent, USAGE_EVENT,
};
use serde_json::{Value, json};

/// How long a run's `done` waits for its requests and connections still
/// going: a killed program's close at once; an answer still on its way to
/// one is cut off by the proxy's end soon after.
pub(crate) const OPEN_AT_DONE: Duration = Duration::from_secs(2);

/// One run's traffic, and whose events carry it until its own say more.
pub(crate) struct RunTraffic {
    /// Its task.
    pub(crate) task: usize,
    pub(crate) traffic: Traffic,
    /// Its adapter's name.
    pub(crate) agent: String,
    /// The session id its events start with.
    pub(crate) session_id: String,
    /// Its role among its siblings.
    pub(crate) role: Option<String>,
}

/// `engine`'s events, with the traffic of each of `runs`.
pub(crate) fn recorded(
    engine: BoxStream<'static, TaskEvent>,
    runs: Vec<RunTraffic>,
) -> BoxStream<'static, TaskEvent> {
    Recorded {
        engine,
        runs: runs
            .into_iter()
            .map(|run| {
                (
                    run.task,
                    Run {
                        traffic: run.traffic,
                        // Its traffic may come before its first event (an
                        // adapter that says nothing while its program
                        // works): charged as it comes all the same.
                        last: without_payload(run.agent, run.session_id, run.role),
                    },
                )
            })
            .collect(),
        queue: VecDeque::new(),
        held: Vec::new(),
        engine_ended: false,
    }
    .boxed()
}

struct Recorded {
    engine: BoxStream<'static, TaskEvent>,
    runs: HashMap<usize, Run>,
    queue: VecDeque<TaskEvent>,
    /// Runs whose `done` came while some of their traffic was still
    /// going.
    held: Vec<Held>,
    /// The engine's stream ended (the held `done`s are still to come).
    engine_ended: bool,
}

/// A run's `done`, held until its traffic still going ends.
struct Held {
    task: usize,
    run: Run,
    done: TaskEvent,
    /// The end of its wait, started once something was still going.
    until: Option<Pin<Box<tokio::time::Sleep>>>,
}

struct Run {
    traffic: Traffic,
    /// Its last event, without its payload: whose and which session the
    /// next ones are.
    last: AgentEvent,
}

/// `event` without its payload, when it says something `last` does not.
fn remembered(last: &mut AgentEvent, event: &AgentEvent) {
    let same =
        last.agent == event.agent && last.session_id == event.session_id && last.role == event.role;
    if !same {
        *last = without_payload(
            event.agent.clone(),
            event.session_id.clone(),
            event.role.clone(),
        );
    }
}

/// The fields of an event of `agent`'s, in `session_id`, as `role`.
fn without_payload(agent: String, session_id: String, role: Option<String>) -> AgentEvent {
    AgentEvent {
        agent,
        timestamp: 0,
        session_id,
        role,
        payload: EventPayload::error("", "", true),
    }
}

impl Run {
    /// `taken` as its events.
    fn events(&self, task: usize, taken: Taken) -> Vec<TaskEvent> {
        let last = &self.last;
        let event = |name: &str, payload: Value| TaskEvent {
            task,
            event: AgentEvent {
                timestamp: now_ms(),
                payload: EventPayload::Extension(Box::new(ExtensionPayload {
                    name: name.to_owned(),
                    payload,
                })),
                ..last.clone()
            },
        };
        let rows = taken.exchanges.into_iter().map(|row| {
            event(
                TRAFFIC_EVENT,
                serde_json::to_value(&row).unwrap_or(Value::Null),
            )
        });
        let calls = taken
            .calls
            .into_iter()
            .map(|call| event(USAGE_EVENT, metered_usage(&call)));
        rows.chain(calls).collect()
    }

    /// What is left of its record, with what it did past the rows kept.
    fn last_events(&self, task: usize) -> Vec<TaskEvent> {
        let mut events = self.events(task, self.traffic.take());
        let overflow = self.traffic.overflow();
        if !overflow.is_empty() {
            events.push(TaskEvent {
                task,
                event: AgentEvent {
                    timestamp: now_ms(),
                    payload: EventPayload::Extension(Box::new(ExtensionPayload {
                        name: TRAFFIC_EVENT.to_owned(),
                        payload: json!({
                            "overflow": overflow,
                            "rowsKept": moat_contain::traffic::MAX_EXCHANGES,
                        }),
                    })),
                    ..self.last.clone()
                },
            });
        }
        events
    }
}

/// A metered call as a `moat:usage` event's payload.
fn metered_usage(call: &MeteredCall) -> Value {
    let mut payload = json!({
        "source": METERED_SOURCE,
        "vendor": call.vendor.as_str(),
        "destination": call.destination,
    });
    match &call.usage {
        Some(usage) => {
            payload["inputTokens"] = usage.input_tokens.into();
            payload["outputTokens"] = usage.output_tokens.into();
        }
        // A call all the same: it counts against a limit of calls.
        None => payload["usageUnknown"] = true.into(),
    }
    if let Some(model) = &call.model {
        payload["model"] = model.clone().into();
    }
    payload
}

impl Recorded {
    /// Queues what each held run recorded since, and the `done` of each
    /// whose traffic ended or whose wait is over.
    fn poll_held(&mut self, cx: &mut Context<'_>) {
        let mut index = 0;
        while index < self.held.len() {
            let held = &mut self.held[index];
            if let Poll::Ready(taken) = held.run.traffic.poll_take(cx) {
                self.queue.extend(held.run.events(held.task, taken));
            }
            let open = held.run.traffic.open();
            let waiting = open > 0
                && held
                    .until
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(OPEN_AT_DONE)))
                    .as_mut()
                    .poll(cx)
                    .is_pending();
            if waiting {
                index += 1;
                continue;
            }
            if open > 0 {
                tracing::warn!(
                    open,
                    "a run ended with requests or connections still going after {OPEN_AT_DONE:?}; their rows are not in its events"
                );
            }
            let held = self.held.swap_remove(index);
            self.queue.extend(held.run.last_events(held.task));
            self.queue.push_back(held.done);
        }
    }
}

impl Stream for Recorded {
    type Item = TaskEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<TaskEvent>> {
        let this = &mut *self;
        loop {
            if let Some(event) = this.queue.pop_front() {
                return Poll::Ready(Some(event));
            }
            for (task, run) in &this.runs {
                if let Poll::Ready(taken) = run.traffic.poll_take(cx) {
                    this.queue.extend(run.events(*task, taken));
                }
            }
            this.poll_held(cx);
            if !this.queue.is_empty() {
                continue;
            }
            if this.engine_ended {
                // Woken by a held run's traffic or its wait's end.
                return if this.held.is_empty() {
                    Poll::Ready(None)
                } else {
                    Poll::Pending
                };
            }
            let mut passed = match this.engine.poll_next_unpin(cx) {
                Poll::Ready(Some(passed)) => passed,
                Poll::Ready(None) => {
                    this.engine_ended = true;
                    continue;
                }
                Poll::Pending => return Poll::Pending,
            };
            let task = passed.task;
            let Some(run) = this.runs.get_mut(&task) else {
                return Poll::Ready(Some(passed));
            };
            match &mut passed.event.payload {
                EventPayload::Extension(extension) if extension.name == TRAFFIC_EVENT => {
                    tracing::warn!("an adapter sent a moat:traffic event; dropped");
                    passed.event.payload = EventPayload::error(
                        moat_engine::codes::INVALID_EVENT,
                        "the adapter sent a moat:traffic event, which only moat makes; dropped",
                        true,
                    );
                }
                EventPayload::Extension(extension) if extension.name == USAGE_EVENT => {
                    if let Value::Object(payload) = &mut extension.payload {
                        payload.insert("source".into(), REPORTED_SOURCE.into());
                    }
                }
                EventPayload::Done(_) => {
                    let Some(run) = this.runs.remove(&task) else {
                        return Poll::Ready(Some(passed));
                    };
                    // Released by `poll_held` at once when nothing is
                    // still going.
                    this.held.push(Held {
                        task,
                        run,
                        done: passed,
                        until: None,
                    });
                    continue;
                }
                _ => {}
            }
            remembered(&mut run.last, &passed.event);
            return Poll::Ready(Some(passed));
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use moat_contain::traffic::{Exchange, Kind, Recording, Who};
    use moat_engine::{DonePayload, DoneStatus, Usage};
    use moat_grants::Scheme;

    fn done() -> TaskEvent {
        TaskEvent {
            task: 0,
            event: AgentEvent::by_host(
                "a",
                EventPayload::Done(Box::new(DonePayload {
                    status: DoneStatus::Success,
                    result: None,
                    resume_token: None,
                    usage: Usage::default(),
                    duration_ms: 0,
                    metadata: None,
                })),
            ),
        }
    }

    fn run(traffic: &Traffic) -> Vec<RunTraffic> {
        vec![RunTraffic {
            task: 0,
            traffic: traffic.clone(),
            agent: "a".into(),
            session_id: "s".into(),
            role: None,
        }]
    }

    fn names(events: &[TaskEvent]) -> Vec<String> {
        events
            .iter()
            .map(|e| match &e.event.payload {
                EventPayload::Extension(extension) => extension.name.clone(),
                EventPayload::Done(_) => "done".into(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn request(traffic: &Traffic) -> Recording {
        Recording::start(
            traffic,
            Exchange::new(Who::Program, Kind::Request, Scheme::Http, "h", 80),
            None,
        )
    }

    /// A request still going when the run's `done` comes (its program
    /// killed as the run ends, its connection closing a moment later) is
    /// in the run's events, before the `done`.
    #[tokio::test]
    async fn a_done_waits_for_the_traffic_still_going() {
        let traffic = Traffic::default();
        let going = request(&traffic);
        let events = recorded(futures::stream::iter([done()]).boxed(), run(&traffic));
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(going);
        });
        let events: Vec<TaskEvent> = events.collect().await;
        assert_eq!(names(&events), [TRAFFIC_EVENT, "done"]);
    }

    /// A request that outlasts the wait is left out (logged), and the
    /// `done` comes: a run never hangs on its traffic.
    #[tokio::test]
    async fn a_done_waits_no_longer_than_its_bound() {
        let traffic = Traffic::default();
        let going = request(&traffic);
        let events = recorded(futures::stream::iter([done()]).boxed(), run(&traffic));
        let started = std::time::Instant::now();
        let events: Vec<TaskEvent> = events.collect().await;
        assert_eq!(names(&events), ["done"]);
        assert!(started.elapsed() >= OPEN_AT_DONE);
        drop(going);
    }
}
