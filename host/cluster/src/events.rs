//! How a run's events travel: in order, numbered, several to a message
//! when they come faster than they can be sent one by one (an NDJSON block
//! whose first event's number is in a header), each message small enough
//! for the servers.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream;
use bytes::Bytes;
use moat_engine::{AgentEvent, EventPayload, codes};

use crate::error::{ClusterError, nats, settled};
use crate::layout::{COUNT_HEADER, SEQ_HEADER};

/// Most events in one message.
const BATCH_EVENTS: u32 = 1024;
/// Most bytes of events in one message (the servers' limit, 1 MiB by
/// default, lowers it).
const BATCH_BYTES: usize = 256 * 1024;
/// Room left in a message for its headers.
const HEADER_ROOM: usize = 4096;
/// How many messages of one run may be on their way, unacknowledged.
const PUBLISH_WINDOW: usize = 64;

/// Publishes one run's events.
pub(crate) struct Publisher {
    js: jetstream::Context,
    subject: String,
    /// The number the next event pushed gets.
    next_seq: u64,
    batch: Vec<u8>,
    batch_first: u64,
    batch_count: u32,
    /// The most bytes one message may carry.
    limit: usize,
    in_flight: VecDeque<InFlight>,
}

/// A message sent and not yet acknowledged, kept to be sent again.
struct InFlight {
    ack: jetstream::context::PublishAckFuture,
    headers: HeaderMap,
    payload: Bytes,
}

impl Publisher {
    /// A publisher on `subject`, the first event numbered `seq`; messages
    /// at most `max_payload` bytes (the server's limit).
    pub(crate) fn new(
        js: jetstream::Context,
        subject: String,
        seq: u64,
        max_payload: usize,
    ) -> Self {
        Self {
            js,
            subject,
            next_seq: seq,
            batch: Vec::new(),
            batch_first: seq,
            batch_count: 0,
            limit: max_payload
                .saturating_sub(HEADER_ROOM)
                .clamp(1024, BATCH_BYTES),
            in_flight: VecDeque::new(),
        }
    }

    /// The number the next event gets.
    pub(crate) fn seq(&self) -> u64 {
        self.next_seq
    }

    /// Adds `event` to the batch; sends the batch when it is full. An
    /// event too large for any message goes as what fits (see [`fit`]).
    pub(crate) async fn push(&mut self, event: &AgentEvent) -> Result<(), ClusterError> {
        let mut line = encode(event)?;
        if line.len() + 1 > self.limit {
            line = encode(&fit(event, line.len(), self.limit))?;
        }
        if !self.batch.is_empty() && self.batch.len() + line.len() + 1 > self.limit {
            self.send().await?;
        }
        if self.batch_count == 0 {
            self.batch_first = self.next_seq;
        }
        self.batch.extend_from_slice(&line);
        self.batch.push(b'\n');
        self.batch_count += 1;
        self.next_seq += 1;
        if self.batch_count >= BATCH_EVENTS {
            self.send().await?;
        }
        Ok(())
    }

    /// Sends what is batched, if anything.
    pub(crate) async fn send(&mut self) -> Result<(), ClusterError> {
        if self.batch_count == 0 {
            return Ok(());
        }
        if self.in_flight.len() >= PUBLISH_WINDOW
            && let Some(sent) = self.in_flight.pop_front()
        {
            self.confirm(sent).await?;
        }
        let mut headers = HeaderMap::new();
        headers.insert(SEQ_HEADER, self.batch_first.to_string().as_str());
        headers.insert(COUNT_HEADER, self.batch_count.to_string().as_str());
        // Sent again after a lost acknowledgement, the stream keeps one.
        let message_id = format!("{}:{}", self.subject, self.batch_first);
        headers.insert("Nats-Msg-Id", message_id.as_str());
        let payload = Bytes::from(std::mem::take(&mut self.batch));
        self.batch_count = 0;
        let ack = nats(
            "event stream",
            self.js
                .publish_with_headers(self.subject.clone(), headers.clone(), payload.clone())
                .await,
        )?;
        self.in_flight.push_back(InFlight {
            ack,
            headers,
            payload,
        });
        Ok(())
    }

    /// Waits for `sent`'s acknowledgement; through a cluster's failover
    /// (no answer, no leader), sends it again until one comes.
    async fn confirm(&self, sent: InFlight) -> Result<(), ClusterError> {
        let InFlight {
            ack,
            headers,
            payload,
        } = sent;
        match nats("event stream", ack.await) {
            Err(error) if error.is_transient() => {
                settled(|| async {
                    let ack = nats(
                        "event stream",
                        self.js
                            .publish_with_headers(
                                self.subject.clone(),
                                headers.clone(),
                                payload.clone(),
                            )
                            .await,
                    )?;
                    nats("event stream", ack.await).map(drop)
                })
                .await
            }
            other => other.map(drop),
        }
    }

    /// Sends what is batched and waits until everything sent is stored.
    pub(crate) async fn flush(&mut self) -> Result<(), ClusterError> {
        self.send().await?;
        while let Some(sent) = self.in_flight.pop_front() {
            self.confirm(sent).await?;
        }
        Ok(())
    }
}

fn encode(event: &AgentEvent) -> Result<Vec<u8>, ClusterError> {
    serde_json::to_vec(event)
        .map_err(|e| ClusterError::Invalid(format!("cannot encode an event: {e}")))
}

/// What goes instead of an event of `size` bytes that no message can
/// carry: a `done` without its answer and metadata (its status is what
/// matters), anything else an error saying what was dropped.
fn fit(event: &AgentEvent, size: usize, limit: usize) -> AgentEvent {
    let mut fitted = event.clone();
    fitted.payload = match &event.payload {
        EventPayload::Done(done) => {
            let mut done = done.clone();
            done.result = None;
            done.metadata = None;
            EventPayload::Done(done)
        }
        other => EventPayload::error(
            codes::INVALID_EVENT,
            format!(
                "a `{}` event of {size} bytes is larger than the cluster carries ({limit}): not delivered",
                other.type_name()
            ),
            true,
        ),
    };
    fitted
}

/// One of a run's events as its readers take it from the stream.
#[derive(Debug, Clone)]
pub struct NumberedEvent {
    /// Its number in the run, from 0.
    pub seq: u64,
    /// The event, parsed and checked.
    pub event: AgentEvent,
    /// Its JSON line as the stream holds it (the worker's encoding of
    /// `event`), so a reader that shows JSON hands it on rather than
    /// encoding the event again; `None` for an event the reader made (a
    /// `done` made from the run's record).
    pub json: Option<Bytes>,
}

impl NumberedEvent {
    /// An event the reader made, with no stored line.
    pub(crate) fn made(seq: u64, event: AgentEvent) -> Self {
        Self {
            seq,
            event,
            json: None,
        }
    }
}

/// The events one message carries, numbered, checked: each line is parsed
/// into an event, and kept as it came beside it.
pub(crate) fn decode(
    headers: Option<&HeaderMap>,
    payload: &Bytes,
) -> Result<Vec<NumberedEvent>, ClusterError> {
    let header = |name: &str| {
        headers
            .and_then(|h| h.get(name))
            .and_then(|value| value.as_str().parse::<u64>().ok())
    };
    let first = header(SEQ_HEADER)
        .ok_or_else(|| ClusterError::Invalid("events without their number".into()))?;
    let mut events = Vec::new();
    for (index, line) in payload
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .enumerate()
    {
        let event = AgentEvent::from_json(line)
            .map_err(|e| ClusterError::Invalid(format!("a malformed event: {e}")))?;
        events.push(NumberedEvent {
            seq: first.saturating_add(index as u64),
            event,
            json: Some(payload.slice_ref(line)),
        });
    }
    if let Some(count) = header(COUNT_HEADER)
        && count != events.len() as u64
    {
        return Err(ClusterError::Invalid(format!(
            "a message says it carries {count} events and carries {}",
            events.len()
        )));
    }
    Ok(events)
}

/// Puts a run's events back in order for a reader: a message sent again
/// after its acknowledgement was lost (a node failing over) can be stored
/// after later ones, and stored twice never (the stream drops the copy).
#[derive(Default)]
pub(crate) struct InOrder {
    expected: u64,
    held: BTreeMap<u64, NumberedEvent>,
    /// Since when the events held wait for one that has not come.
    stalled_since: Option<Instant>,
}

impl InOrder {
    /// The number of the next event to give out.
    pub(crate) fn expected(&self) -> u64 {
        self.expected
    }

    /// Takes a message's events; returns those that are now next, in
    /// order.
    pub(crate) fn take(&mut self, events: Vec<NumberedEvent>) -> Vec<NumberedEvent> {
        let mut ready = Vec::with_capacity(events.len());
        for event in events {
            // The usual case, the next event with none held: straight
            // out, never through the map (an insert and a removal each
            // moving the event were most of a follower's time).
            if event.seq == self.expected && self.held.is_empty() {
                self.expected += 1;
                ready.push(event);
            } else if event.seq >= self.expected {
                let next = event.seq == self.expected;
                self.held.insert(event.seq, event);
                if next {
                    ready.extend(self.ready());
                }
            }
        }
        self.stalled_since = match (self.held.is_empty(), ready.is_empty()) {
            (true, _) => None,
            (false, false) => Some(Instant::now()),
            (false, true) => self.stalled_since.or_else(|| Some(Instant::now())),
        };
        ready
    }

    /// Whether events held have waited for a missing one for `patience`.
    pub(crate) fn stalled_for(&self, patience: Duration) -> bool {
        self.stalled_since
            .is_some_and(|since| since.elapsed() >= patience)
    }

    /// Gives up on the events missing before those held, once they have
    /// been missing for `patience` (or at once, `now`): what is held, in
    /// order. Their sender died before it could send them again.
    pub(crate) fn skip_gap(&mut self, patience: Duration, now: bool) -> Vec<NumberedEvent> {
        let stalled = self.stalled_since.is_some() && (now || self.stalled_for(patience));
        let Some(first) = self.held.keys().next().copied().filter(|_| stalled) else {
            return Vec::new();
        };
        tracing::warn!(
            missing = first - self.expected,
            "events never stored: skipped"
        );
        self.expected = first;
        self.stalled_since = None;
        self.ready()
    }

    fn ready(&mut self) -> Vec<NumberedEvent> {
        let mut ready = Vec::new();
        while let Some(event) = self.held.remove(&self.expected) {
            ready.push(event);
            self.expected += 1;
        }
        ready
    }
}

/// The number after the last event of a message with these headers.
pub(crate) fn end_of(headers: &HeaderMap) -> Option<u64> {
    let value = |name: &str| headers.get(name)?.as_str().parse::<u64>().ok();
    Some(value(SEQ_HEADER)? + value(COUNT_HEADER).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(text: &str) -> AgentEvent {
        AgentEvent {
            agent: "a".into(),
            timestamp: 1,
            session_id: "s".into(),
            role: None,
            payload: EventPayload::text_delta(text),
        }
    }

    #[test]
    fn a_message_carries_numbered_events_and_is_checked() {
        let mut headers = HeaderMap::new();
        headers.insert(SEQ_HEADER, "7");
        headers.insert(COUNT_HEADER, "2");
        let mut payload = encode(&delta("a")).unwrap();
        payload.push(b'\n');
        payload.extend(encode(&delta("b")).unwrap());
        payload.push(b'\n');
        let payload = Bytes::from(payload);
        let events = decode(Some(&headers), &payload).unwrap();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [7, 8]);
        // Each keeps its line as it came, for readers that show JSON.
        assert_eq!(
            events[1].json.as_deref(),
            Some(&encode(&delta("b")).unwrap()[..])
        );
        assert_eq!(end_of(&headers), Some(9));
        headers.insert(COUNT_HEADER, "3");
        assert!(decode(Some(&headers), &payload).is_err(), "a wrong count");
        assert!(decode(None, &payload).is_err(), "no number");
        assert!(decode(Some(&headers), &Bytes::from_static(b"{not json\n")).is_err());
    }

    #[test]
    fn events_come_out_in_order_once_and_a_gap_is_skipped_only_when_given_up() {
        let mut order = InOrder::default();
        let numbers =
            |events: Vec<NumberedEvent>| events.into_iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(
            numbers(order.take(vec![
                NumberedEvent::made(0, delta("a")),
                NumberedEvent::made(1, delta("b"))
            ])),
            [0, 1]
        );
        // 2 and 3 were sent again and come after 4 and 5.
        assert!(
            order
                .take(vec![
                    NumberedEvent::made(4, delta("e")),
                    NumberedEvent::made(5, delta("f"))
                ])
                .is_empty()
        );
        assert!(order.skip_gap(Duration::from_secs(60), false).is_empty());
        assert_eq!(
            numbers(order.take(vec![
                NumberedEvent::made(2, delta("c")),
                NumberedEvent::made(3, delta("d"))
            ])),
            [2, 3, 4, 5]
        );
        // A copy of what was given out already: dropped.
        assert!(
            order
                .take(vec![NumberedEvent::made(3, delta("d"))])
                .is_empty()
        );
        assert_eq!(order.expected(), 6);
        // 6 never comes: given up on, the rest goes out in order.
        assert!(
            order
                .take(vec![
                    NumberedEvent::made(8, delta("i")),
                    NumberedEvent::made(7, delta("h"))
                ])
                .is_empty()
        );
        assert_eq!(numbers(order.skip_gap(Duration::ZERO, false)), [7, 8]);
    }

    #[test]
    fn an_event_too_large_goes_as_what_fits() {
        let big = delta(&"x".repeat(10_000));
        let fitted = fit(&big, 10_100, 4096);
        assert!(matches!(fitted.payload, EventPayload::Error(_)));
        assert!(encode(&fitted).unwrap().len() < 4096);
    }
}
