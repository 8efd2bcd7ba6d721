//! A run's events in the event stream: a publisher of them, the stored
//! ones read (from a number on; the number the next gets; whether the
//! `done` is there), the stored then the live ones followed to the run's
//! `done`, and waiting for a run to end.

use std::ops::ControlFlow;
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use futures::{Stream, StreamExt};

use super::records::synthesized;
use super::unqueued::Requeuer;
use super::{Cluster, LISTING_PATIENCE};
use crate::error::{ClusterError, SETTLE, nats, settled, within};
use crate::events::{self, NumberedEvent, Publisher};
use crate::layout;
use crate::record::ClusterRun;

/// How many batches of events (one message's, each) a follower's task
/// may have sent ahead of its reader.
const FOLLOWED_BATCHES: usize = 16;

/// What a follower's task sends its reader: the events of one message,
/// in order, or why following stopped.
type Batch = Result<Vec<NumberedEvent>, ClusterError>;

/// How often a waiting or following client looks for lost workers and
/// at the run's record.
const WATCH_EVERY: Duration = Duration::from_secs(1);

impl Cluster {
    /// Whether run `id`'s stored events end with a `done`.
    pub(super) async fn done_stored(&self, id: &str) -> Result<bool, ClusterError> {
        let Some(message) = self.last_message(id).await? else {
            return Ok(false);
        };
        let events = events::decode(Some(&message.headers), &message.payload)?;
        Ok(events.last().is_some_and(|last| last.event.is_done()))
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
    ) -> Result<impl Stream<Item = Result<NumberedEvent, ClusterError>> + use<>, ClusterError> {
        let messages = self.event_messages(id).await?;
        let (sender, mut receiver) = tokio::sync::mpsc::channel(FOLLOWED_BATCHES);
        tokio::spawn(follow_events(
            self.clone(),
            id.to_owned(),
            from,
            messages,
            sender,
        ));
        // A message's events cross from the task as one batch (a message
        // holds up to a thousand): one send and one wake each, not one per
        // event.
        Ok(
            futures::stream::poll_fn(move |cx| receiver.poll_recv(cx)).flat_map(|batch| {
                let events: Vec<_> = match batch {
                    Ok(events) => events.into_iter().map(Ok).collect(),
                    Err(error) => vec![Err(error)],
                };
                futures::stream::iter(events)
            }),
        )
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

    /// Run `id`'s stored events only, from number `from`.
    pub async fn stored_events(
        &self,
        id: &str,
        from: u64,
    ) -> Result<Vec<NumberedEvent>, ClusterError> {
        let mut events = Vec::new();
        self.each_stored_message(id, false, |message| {
            for event in events::decode(message.headers.as_ref(), &message.payload)? {
                if event.seq >= from {
                    events.push(event);
                }
            }
            Ok(())
        })
        .await?;
        // In order, once each (see `events::InOrder`).
        events.sort_by_key(|event| event.seq);
        events.dedup_by_key(|event| event.seq);
        Ok(events)
    }

    /// Waits until run `id` has ended; its record then. Lost workers, and
    /// a job the run lost before it was queued, are looked for meanwhile.
    pub async fn wait(&self, id: &str) -> Result<ClusterRun, ClusterError> {
        let mut watch = nats("record", self.records.watch(id).await)?;
        let mut requeuer = Requeuer::default();
        loop {
            let run = self
                .get(id)
                .await?
                .ok_or_else(|| ClusterError::NotFound(id.to_owned()))?;
            if run.is_terminal() {
                return Ok(run);
            }
            requeuer.look(self, &run).await;
            let _ = tokio::time::timeout(WATCH_EVERY, watch.next()).await;
            // Looking for lost workers is the waiter's help, not its job: a
            // failover that fails it now does not end the wait.
            if let Err(error) = self.reap_lost_workers().await {
                tracing::debug!("looking for lost workers: {error}");
            }
        }
    }
}

/// The task behind [`Cluster::follow`]: `messages` are the run's, from
/// its first (an ordered consumer).
async fn follow_events<E: std::fmt::Display>(
    cluster: Cluster,
    id: String,
    from: u64,
    mut messages: impl Stream<Item = Result<jetstream::Message, E>> + Unpin,
    sender: tokio::sync::mpsc::Sender<Batch>,
) {
    let mut ended_seen: Option<ClusterRun> = None;
    let mut order = events::InOrder::default();
    let mut requeuer = Requeuer::default();
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
                    Ok(Some(run)) => {
                        requeuer.look(&cluster, &run).await;
                    }
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
    sender: &tokio::sync::mpsc::Sender<Batch>,
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
    let _ = sender
        .send(Ok(vec![NumberedEvent::made(order.expected(), done)]))
        .await;
    Ok(ControlFlow::Break(()))
}

/// Sends `events` from number `from` on, up to the `done`, as one batch;
/// `Break` once the `done` went, or the reader is gone.
async fn emit(
    sender: &tokio::sync::mpsc::Sender<Batch>,
    from: u64,
    events: Vec<NumberedEvent>,
) -> ControlFlow<()> {
    let mut batch = Vec::with_capacity(events.len());
    let mut done = false;
    for event in events {
        done = event.event.is_done();
        if event.seq >= from {
            batch.push(event);
        }
        if done {
            break;
        }
    }
    if !batch.is_empty() && sender.send(Ok(batch)).await.is_err() {
        return ControlFlow::Break(());
    }
    if done {
        ControlFlow::Break(())
    } else {
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use moat_engine::AgentEvent;
    use moat_runs::{Outcome, RunStatus};

    use super::*;
    use crate::cluster::records::Ending;
    use crate::cluster::records::tests::running_echo;
    use crate::cluster::tests::connected;

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
            followed.extend(event.expect("events"));
        }
        let seqs: Vec<u64> = followed.iter().map(|event| event.seq).collect();
        assert_eq!(seqs, [0, 1, 2, 3, 4, 5], "every event, in order");
        assert_eq!(followed[5].event, done, "the run's own done");
        assert!(
            followed.iter().all(|event| event.json.is_some()),
            "each with its stored line"
        );
        cluster.close().await;
    }
}
