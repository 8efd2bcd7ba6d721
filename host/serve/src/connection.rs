//! One client of the server: its requests read a line at a time and
//! answered each on a task of its own (so a long `await` holds up nothing
//! else), its subscriptions, and one writer for everything it is sent.
//!
//! What is sent waits in a bounded queue: a client that stops reading
//! fills it, its subscriptions then fall behind the runs' events and get
//! `lagged`, and no run or other client ever waits for it.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::protocol::{self, Failure, MAX_REQUEST_BYTES, Op, SubscribeParams};
use super::server::Server;

/// Messages waiting for a client before its subscriptions lag.
const OUTGOING: usize = 1024;

/// Bytes waiting for a client before its subscriptions lag: a client that
/// stops reading holds at most this much of the server's memory in its
/// queue, however large the events (one larger message still goes out
/// alone).
const OUTGOING_BYTES: usize = 8 * 1024 * 1024;

/// What goes out to one client: a queue bounded in messages and in bytes.
#[derive(Clone)]
struct Outgoing {
    queue: mpsc::Sender<(String, OwnedSemaphorePermit)>,
    bytes: Arc<Semaphore>,
}

impl Outgoing {
    fn new() -> (Self, mpsc::Receiver<(String, OwnedSemaphorePermit)>) {
        let (queue, outgoing) = mpsc::channel(OUTGOING);
        let bytes = Arc::new(Semaphore::new(OUTGOING_BYTES));
        (Self { queue, bytes }, outgoing)
    }

    /// Queues `message`, waiting while the client is this far behind;
    /// `false` once the client is gone.
    async fn send(&self, message: String) -> bool {
        let weight = u32::try_from(message.len().clamp(1, OUTGOING_BYTES)).unwrap_or(u32::MAX);
        let Ok(permit) = self.bytes.clone().acquire_many_owned(weight).await else {
            return false;
        };
        self.queue.send((message, permit)).await.is_ok()
    }
}

/// About how many bytes go out in one write when messages are queued.
const WRITE_BATCH: usize = 64 * 1024;

/// How long a closing connection's queued messages have to go out.
const FLUSH_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Subscription ids, unique in the server.
static NEXT_SUBSCRIPTION: AtomicU64 = AtomicU64::new(1);

/// A client's live subscriptions, by id.
type Subscriptions = Arc<Mutex<HashMap<String, CancellationToken>>>;

/// Serves one client until it closes its side (or the server stops).
pub async fn serve<R, W>(server: Arc<Server>, reader: R, writer: W)
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, outgoing) = Outgoing::new();
    let mut writing = tokio::spawn(write_all(outgoing, writer));
    let subscriptions: Subscriptions = Arc::default();
    let mut lines = LineReader::new(reader);
    loop {
        let line = tokio::select! {
            () = server.closed.cancelled() => break,
            line = lines.next() => line,
        };
        let line = match line {
            Ok(Some(line)) => line,
            Ok(None) | Err(LineError::Io) => break,
            Err(LineError::TooLong) => {
                let failure = Failure::invalid(format!(
                    "a request line is at most {MAX_REQUEST_BYTES} bytes"
                ));
                let response = protocol::response(&Value::Null, Err(failure));
                let _ = out.send(response.to_string()).await;
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let server = server.clone();
        let out = out.clone();
        let subscriptions = subscriptions.clone();
        tokio::spawn(async move {
            let (response, stop) = match protocol::parse(&line) {
                Ok(request) => {
                    let stop = matches!(request.op, Op::Shutdown);
                    let outcome = handle(&server, request.op, &out, &subscriptions).await;
                    (protocol::response(&request.id, outcome), stop)
                }
                Err((id, failure)) => (protocol::response(&id, Err(failure)), false),
            };
            let _ = out.send(response.to_string()).await;
            // `shutdown` is answered before the server starts to stop, so
            // the answer is queued ahead of the connection's end.
            if stop {
                server.stopping.cancel();
            }
        });
    }
    // What is queued, and what the subscriptions still deliver of runs that
    // have ended (their `done`), goes out first, for a bounded time; then
    // the subscriptions left (runs that go on) are stopped.
    drop(out);
    if tokio::time::timeout(FLUSH_PATIENCE, &mut writing)
        .await
        .is_err()
    {
        tracing::debug!("a client's last messages were not all written");
    }
    for (_, stop) in subscriptions
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .drain()
    {
        stop.cancel();
    }
    writing.abort();
}

async fn handle(
    server: &Arc<Server>,
    op: Op,
    out: &Outgoing,
    subscriptions: &Subscriptions,
) -> Result<Value, Failure> {
    match op {
        Op::Run(params) => server.start_run(*params).await,
        Op::WorkflowRun(params) => server.start_workflow(&params).await,
        Op::WorkflowStatus(params) => server.workflow_status(&params.file),
        Op::Await(params) => server.await_runs(&params.runs).await,
        Op::Cancel(params) => server.cancel(&params.run).await,
        Op::Get(params) => server.get(&params.run).await,
        Op::Traffic(params) => server.traffic(&params.run).await,
        Op::List(params) => server.list(&params).await,
        Op::Subscribe(params) => subscribe(server, params, out, subscriptions).await,
        Op::Unsubscribe(params) => {
            if let Some(stop) = subscriptions
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&params.subscription_id)
            {
                stop.cancel();
            }
            Ok(json!({}))
        }
        Op::Adapters => server.adapters().await,
        Op::Inspect(params) => server.inspect(&params.adapter).await,
        Op::Diff(params) => server.diff(&params.run, params.stat).await,
        Op::Apply(params) => {
            server
                .apply(&params.run, params.commits, params.include_protected)
                .await
        }
        Op::Approve(params) => {
            let answer = moat_runs::Answer::approve(server.answerer(), params.always);
            server.answer(&params.run, params.request, answer).await
        }
        Op::Deny(params) => {
            let answer = moat_runs::Answer::deny(server.answerer(), params.reason);
            server.answer(&params.run, params.request, answer).await
        }
        Op::Approvals(params) => server.approvals(&params.run).await,
        // The server stops once the answer is queued (above).
        Op::Shutdown => Ok(json!({})),
    }
}

/// Starts streaming the runs' events to the client: each run's stored
/// events from `fromSeq`, then its live ones, until its `done`. A run the
/// client falls behind on is ended, in this subscription, with one `lagged`
/// event; its other runs go on.
async fn subscribe(
    server: &Arc<Server>,
    params: SubscribeParams,
    out: &Outgoing,
    subscriptions: &Subscriptions,
) -> Result<Value, Failure> {
    if params.runs.is_empty() {
        return Err(Failure::invalid("subscribe: runs names no run"));
    }
    let ids = server
        .subscribed_runs(&params.runs, params.from_seq)
        .await?;
    let id = format!("s_{}", NEXT_SUBSCRIPTION.fetch_add(1, Ordering::Relaxed));
    let stop = CancellationToken::new();
    subscriptions
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id.clone(), stop.clone());
    for run in ids {
        let server = server.clone();
        let out = out.clone();
        let stop = stop.clone();
        let subscription = id.clone();
        tokio::spawn(async move {
            let run_id = run.to_string();
            // The event's JSON goes in as it was made, once for everyone.
            let head = format!(
                r#"{{"event":"run_event","subscriptionId":{},"run":{},"seq":"#,
                Value::from(subscription.as_str()),
                Value::from(run_id.as_str()),
            );
            let streamed = stream(&server, &run, params.from_seq, &stop, &head, &out).await;
            if let Err(next) = streamed {
                // Behind on this run: its part of the subscription ends, and
                // says where to resume; the subscription's other runs go on.
                let lagged = json!({
                    "event": "lagged",
                    "subscriptionIds": [subscription],
                    "run": run_id,
                    "nextSeq": next,
                });
                let _ = out.send(lagged.to_string()).await;
            }
        });
    }
    Ok(json!({"subscriptionId": id}))
}

/// Events that are ready at once (a stored run's replay, a burst of live
/// ones) go into one queued message of this many at most (and about
/// [`WRITE_BATCH`] bytes): one queue slot, one wake of the writer, instead
/// of one per event.
const EVENTS_PER_MESSAGE: usize = 256;

/// Sends run `id`'s events from `from_seq` on to `out`, each as a
/// `run_event` line beginning with `head`, until its `done`, `stop`, or the
/// client being gone. `Err(next)` when the client fell behind the live
/// events (it may resume from `next`, the first it did not get).
async fn stream(
    server: &Server,
    id: &moat_runs::RunId,
    from_seq: u64,
    stop: &CancellationToken,
    head: &str,
    out: &Outgoing,
) -> Result<(), u64> {
    use futures::StreamExt;
    let events = match server.follow(id, from_seq).await {
        Ok(events) => events,
        Err(error) => {
            tracing::warn!(run = %id, "cannot follow the run: {error}");
            return Ok(());
        }
    };
    let mut ready = events.ready_chunks(EVENTS_PER_MESSAGE);
    loop {
        let chunk = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            chunk = ready.next() => chunk,
        };
        let Some(chunk) = chunk else { return Ok(()) };
        // Lines joined by newlines: the writer ends the message with one.
        let mut lines = String::new();
        let mut ended = Ok(());
        let mut over = false;
        for next in chunk {
            match next {
                Ok(event) => {
                    if !lines.is_empty() {
                        lines.push('\n');
                    }
                    let _ = write!(lines, r#"{head}{},"data":{}}}"#, event.seq, event.json);
                    if event.done {
                        over = true;
                        break;
                    }
                    // A message holds about a write's worth: large events
                    // go out a few at a time, so what waits for a client
                    // stays within its queue's bytes, not 256 events' worth.
                    if lines.len() >= WRITE_BATCH && !out.send(std::mem::take(&mut lines)).await {
                        return Ok(());
                    }
                }
                Err(moat_runs::RunsError::Lagged { next }) => {
                    ended = Err(next);
                    over = true;
                    break;
                }
                Err(error) => {
                    tracing::warn!(run = %id, "following the run: {error}");
                    over = true;
                    break;
                }
            }
        }
        if !lines.is_empty() && !out.send(lines).await {
            return Ok(());
        }
        if over {
            return ended;
        }
    }
}

/// Writes each message as one line until the queue closes or the client is
/// gone: whatever is queued at once goes out in one write, flushed; a
/// message's bytes count against the queue until written.
async fn write_all<W: AsyncWrite + Unpin>(
    mut outgoing: mpsc::Receiver<(String, OwnedSemaphorePermit)>,
    mut writer: W,
) {
    let mut batch = String::new();
    let mut permits = Vec::new();
    while let Some((message, permit)) = outgoing.recv().await {
        batch.clear();
        batch.push_str(&message);
        batch.push('\n');
        drop(message);
        permits.push(permit);
        while batch.len() < WRITE_BATCH {
            let Ok((more, permit)) = outgoing.try_recv() else {
                break;
            };
            batch.push_str(&more);
            batch.push('\n');
            permits.push(permit);
        }
        if writer.write_all(batch.as_bytes()).await.is_err() || writer.flush().await.is_err() {
            return;
        }
        permits.clear();
    }
}

/// Why no line was read.
enum LineError {
    /// Longer than [`MAX_REQUEST_BYTES`]; the rest of it was skipped.
    TooLong,
    /// Reading failed: the client is gone.
    Io,
}

/// Lines of at most [`MAX_REQUEST_BYTES`], never buffering more: a longer
/// one is skipped to its end and reported.
struct LineReader<R> {
    reader: R,
    line: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    fn new(reader: R) -> Self {
        Self {
            reader,
            line: Vec::new(),
        }
    }

    /// The next line (without its newline); `None` at the end.
    async fn next(&mut self) -> Result<Option<String>, LineError> {
        self.line.clear();
        let mut too_long = false;
        loop {
            let buffer = self.reader.fill_buf().await.map_err(|_| LineError::Io)?;
            if buffer.is_empty() {
                if too_long {
                    return Err(LineError::TooLong);
                }
                if self.line.is_empty() {
                    return Ok(None);
                }
                break;
            }
            let (piece, found) = match buffer.iter().position(|b| *b == b'\n') {
                Some(end) => (&buffer[..end], Some(end + 1)),
                None => (buffer, None),
            };
            if !too_long && self.line.len() + piece.len() <= MAX_REQUEST_BYTES {
                self.line.extend_from_slice(piece);
            } else {
                too_long = true;
                self.line.clear();
            }
            let consumed = found.unwrap_or(buffer.len());
            self.reader.consume(consumed);
            if found.is_some() {
                if too_long {
                    return Err(LineError::TooLong);
                }
                break;
            }
        }
        Ok(Some(String::from_utf8_lossy(&self.line).into_owned()))
    }
}
