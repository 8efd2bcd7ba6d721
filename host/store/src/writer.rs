//! Events are written by one thread per store in batches: whatever arrived
//! while the previous transaction committed goes into the next one (group
//! commit), so a run pays the encoding of its event into a buffer, not a
//! commit. Each batch stores one block per run (its
//! events as newline-separated JSON), so thousands of events are a handful
//! of rows. A `kill -9` loses at most what had not been committed yet.
//!
//! Changes to the runs' records (a run created, started, ended) go the same
//! way, committed at once rather than gathered: made in the next batch's
//! transaction after its events, so runs created, started or ended while
//! the previous batch commits share one commit, and a run's end shares the
//! commit of its last events (a commit costs far more than its rows; under
//! `perf`, a server's four commits per run were half its CPU).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use moat_engine::AgentEvent;
use rusqlite::Connection;

use crate::blocks::{self, Encoding};
use crate::checkpoint::Checkpointer;
use crate::error::StoreError;

/// Once a run has its `done` (the store may have ended it: a cancel, its
/// parent's end), nothing more is stored for it, so `done` stays last and
/// alone; what the owner emits after that is dropped.
pub(crate) const HAS_DONE: &str =
    "SELECT EXISTS (SELECT 1 FROM event_blocks WHERE run_id = ?1 AND has_done = 1)";

/// Stores one block of a run's events.
pub(crate) const INSERT_BLOCK: &str =
    "INSERT INTO event_blocks (run_id, first_seq, last_seq, has_done, encoding, events)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// Encoded events waiting to be written, at most: past it a run waits for
/// the disk (backpressure) instead of queueing without end, and a batch
/// never holds more memory than this.
const MAX_PENDING_BYTES: usize = 16 << 20;

/// How long the writer gathers events before committing them, unless a
/// flush is waiting or much is queued: a few commits per second per busy
/// store instead of one per handful of events (a commit rewrites the
/// table's and indexes' pages whatever its size). It is also what a
/// `kill -9` can lose at most, with the commit under way.
const COMMIT_INTERVAL: Duration = Duration::from_millis(10);

/// Queued bytes that are committed without waiting out the interval.
const COMMIT_BYTES: usize = 256 << 10;

/// A reply to a flush: once everything queued before it is committed.
type FlushReply = SyncSender<Result<(), String>>;

/// What a change found (whether it changed the record), once its batch is
/// committed: the outer error when the batch could not be written, the
/// inner one when the change itself was refused.
pub(crate) type Changed = Result<Result<bool, StoreError>, StoreError>;

/// A change to the runs' records, made inside a batch's transaction. Its
/// error leaves nothing of it behind and the rest of the batch stands.
pub(crate) type Apply = Box<dyn FnOnce(&Connection) -> Result<bool, StoreError> + Send>;

/// Who waits for a change, and how.
enum Reply {
    /// Nobody: an error is logged.
    Nobody,
    /// A thread, blocked until the batch is committed.
    Blocking(SyncSender<Changed>),
    /// A task, awaiting the batch's commit.
    Awaiting(tokio::sync::oneshot::Sender<Changed>),
}

impl Reply {
    fn send(self, changed: Changed) {
        match self {
            Reply::Nobody => {
                if let Ok(Err(error)) | Err(error) = changed {
                    tracing::error!("a run's record could not be changed: {error}");
                }
            }
            Reply::Blocking(reply) => {
                let _ = reply.send(changed);
            }
            Reply::Awaiting(reply) => {
                let _ = reply.send(changed);
            }
        }
    }
}

/// A queued change and who waits for it.
struct Change {
    apply: Apply,
    reply: Reply,
}

/// What the runs queued since the last batch was taken: one block per run
/// (and per gap in its seqs), in order of arrival.
#[derive(Default)]
struct Pending {
    blocks: Vec<(Arc<str>, Block)>,
    flushes: Vec<FlushReply>,
    /// In the order they came, made after the blocks.
    changes: Vec<Change>,
    bytes: usize,
    /// The handle is gone: write what is left and stop.
    closed: bool,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.blocks.is_empty() && self.flushes.is_empty() && self.changes.is_empty()
    }

    /// Whether to commit now rather than gather more.
    fn is_urgent(&self) -> bool {
        // A change is committed at once: a run's record says what it is
        // doing as soon as it does it, waited for or not.
        self.closed
            || !self.flushes.is_empty()
            || !self.changes.is_empty()
            || self.bytes >= COMMIT_BYTES
    }

    /// Encodes an event (`encode` writes its JSON, `done` says whether it
    /// is a `done`) straight into its run's block. Events are encoded by
    /// the run that makes them, into a buffer the writer takes whole:
    /// nothing allocated per event crosses threads (freeing another
    /// thread's allocations is what made a per-event message slow).
    fn add(
        &mut self,
        run: &Arc<str>,
        seq: u64,
        done: bool,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<(), String>,
    ) -> Result<(), String> {
        let open = self
            .blocks
            .iter_mut()
            .rev()
            .find(|(id, _)| Arc::ptr_eq(id, run) || id == run)
            .map(|(_, block)| block)
            .filter(|block| !block.has_done && seq == block.last_seq + 1);
        let block = match open {
            Some(block) => {
                block.events.push(b'\n');
                block
            }
            None => {
                self.blocks.push((
                    run.clone(),
                    Block {
                        first_seq: seq,
                        last_seq: seq,
                        has_done: false,
                        events: Vec::with_capacity(4096),
                    },
                ));
                &mut self.blocks.last_mut().expect("just pushed").1
            }
        };
        let before = block.events.len();
        if let Err(error) = encode(&mut block.events) {
            block.events.truncate(before.saturating_sub(1));
            return Err(error);
        }
        block.last_seq = seq;
        block.has_done = done;
        self.bytes += block.events.len() - before;
        Ok(())
    }
}

/// What the writer thread and its handle share.
#[derive(Default)]
struct Shared {
    pending: Mutex<Pending>,
    /// Wakes the writer: something was queued, or the handle is gone.
    queued: Condvar,
    /// Wakes waiting runs: the writer took a batch.
    taken: Condvar,
    /// Set with the first write failure: the quick check on every event.
    failed: AtomicBool,
    /// The first write failure; once set, nothing more is written.
    failure: Mutex<Option<String>>,
    /// Batches committed so far (what the tests count).
    #[cfg(test)]
    committed: std::sync::atomic::AtomicU64,
}

impl Shared {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn failure(&self) -> Option<String> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn fail(&self, reason: &str) {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| reason.to_owned());
        self.failed.store(true, Ordering::Release);
    }
}

/// The writer thread's handle.
pub(crate) struct Writer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts the writer on a connection of its own to the store at `path`.
    pub(crate) fn start(path: &Path) -> Result<Self, StoreError> {
        let conn = crate::connect(path)?;
        let shared = Arc::new(Shared::default());
        let thread = std::thread::Builder::new()
            .name("moat-store-writer".into())
            .spawn({
                let shared = shared.clone();
                let mut checkpointer = Checkpointer::new(path);
                move || {
                    let conn = write_batches(conn, &shared, &mut checkpointer);
                    checkpointer.close(&conn);
                }
            })
            .map_err(|e| StoreError::Write(format!("cannot start the writer: {e}")))?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Queues the event number `seq` of `run`; an error when writing has
    /// already failed.
    pub(crate) fn event(
        &self,
        run: &Arc<str>,
        seq: u64,
        event: &AgentEvent,
    ) -> Result<(), StoreError> {
        self.queue(run, seq, event.is_done(), |events| {
            serde_json::to_writer(events, event)
                .map_err(|error| format!("cannot encode an event: {error}"))
        })
    }

    /// Queues the event number `seq` of `run` already encoded: `json` is
    /// the event as `serde_json` writes it (one line), `done` whether it is
    /// a `done`.
    pub(crate) fn encoded(
        &self,
        run: &Arc<str>,
        seq: u64,
        json: &[u8],
        done: bool,
    ) -> Result<(), StoreError> {
        if json.contains(&b'\n') {
            return Err(StoreError::Write(
                "an encoded event spans more than one line".into(),
            ));
        }
        self.queue(run, seq, done, |events| {
            events.extend_from_slice(json);
            Ok(())
        })
    }

    fn queue(
        &self,
        run: &Arc<str>,
        seq: u64,
        done: bool,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<(), String>,
    ) -> Result<(), StoreError> {
        self.check()?;
        let mut pending = self.shared.pending();
        while pending.bytes >= MAX_PENDING_BYTES && !self.shared.failed.load(Ordering::Acquire) {
            pending = self
                .shared
                .taken
                .wait(pending)
                .unwrap_or_else(PoisonError::into_inner);
        }
        // The writer waits for a first event, then gathers until the
        // interval is out or much is queued: wake it only then (a wake is a
        // system call).
        let was_empty = pending.is_empty();
        let was_small = pending.bytes < COMMIT_BYTES;
        pending
            .add(run, seq, done, encode)
            .map_err(StoreError::Write)?;
        if was_empty || (was_small && pending.bytes >= COMMIT_BYTES) {
            self.shared.queued.notify_one();
        }
        Ok(())
    }

    /// Queues `apply` for the next batch (committed at once, with
    /// everything queued before it); nobody waits (an error is logged).
    pub(crate) fn change_unwaited(&self, apply: Apply) -> Result<(), StoreError> {
        self.push(apply, Reply::Nobody)
    }

    /// Queues `apply` and blocks until its batch is committed.
    pub(crate) fn change(&self, apply: Apply) -> Changed {
        let (reply, answer) = sync_channel(1);
        self.push(apply, Reply::Blocking(reply))?;
        answer
            .recv()
            .map_err(|_| StoreError::Write("the writer is gone".into()))?
    }

    /// Queues `apply` and waits, without blocking the thread, until its
    /// batch is committed: changes awaited together share one commit.
    pub(crate) async fn change_awaiting(&self, apply: Apply) -> Changed {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.push(apply, Reply::Awaiting(reply))?;
        answer
            .await
            .map_err(|_| StoreError::Write("the writer is gone".into()))?
    }

    fn push(&self, apply: Apply, reply: Reply) -> Result<(), StoreError> {
        self.check()?;
        let mut pending = self.shared.pending();
        let was_urgent = pending.is_urgent();
        pending.changes.push(Change { apply, reply });
        if !was_urgent {
            self.shared.queued.notify_one();
        }
        Ok(())
    }

    /// Waits until every event queued before is committed.
    pub(crate) fn flush(&self) -> Result<(), StoreError> {
        let (reply, answer) = sync_channel(1);
        self.shared.pending().flushes.push(reply);
        self.shared.queued.notify_one();
        answer
            .recv()
            .map_err(|_| StoreError::Write("the writer is gone".into()))?
            .map_err(StoreError::Write)
    }

    /// How many batches (transactions) it has committed.
    #[cfg(test)]
    pub(crate) fn batches_committed(&self) -> u64 {
        self.shared.committed.load(Ordering::Relaxed)
    }

    /// The first write failure, if there was one.
    pub(crate) fn check(&self) -> Result<(), StoreError> {
        match self.shared.failure() {
            Some(reason) => Err(StoreError::Write(reason)),
            None => Ok(()),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // The thread writes what is left, then ends.
        self.shared.pending().closed = true;
        self.shared.queued.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One run's events of a batch, encoded: newline-separated JSON.
struct Block {
    first_seq: u64,
    last_seq: u64,
    has_done: bool,
    events: Vec<u8>,
}

/// Takes whatever was queued while the previous batch committed and
/// commits it as the next (group commit), until the handle is gone.
/// Gives the connection back for the store's last checkpoint.
fn write_batches(
    mut conn: Connection,
    shared: &Shared,
    checkpointer: &mut Checkpointer,
) -> Connection {
    // The connection reads the schema with its first statement: done now,
    // while the process sets its run up, rather than in the run's first
    // commit (a `moat run` makes only a few).
    if let Err(error) = conn.prepare_cached(INSERT_BLOCK) {
        tracing::debug!("the writer could not prepare its statement yet: {error}");
    }
    loop {
        let batch = {
            let mut pending = shared.pending();
            while pending.is_empty() && !pending.closed {
                pending = shared
                    .queued
                    .wait(pending)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if pending.is_empty() {
                return conn;
            }
            let gathering = Instant::now();
            while !pending.is_urgent() {
                let Some(left) = COMMIT_INTERVAL.checked_sub(gathering.elapsed()) else {
                    break;
                };
                pending = shared
                    .queued
                    .wait_timeout(pending, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            let closed = pending.closed;
            let batch = std::mem::take(&mut *pending);
            pending.closed = closed;
            shared.taken.notify_all();
            batch
        };
        let mut made = Vec::with_capacity(batch.changes.len());
        let result = match shared.failure() {
            Some(reason) => {
                made.extend(
                    batch
                        .changes
                        .into_iter()
                        .map(|change| (change.reply, Err(StoreError::Write(reason.clone())))),
                );
                Err(reason)
            }
            None => match commit(&mut conn, &batch.blocks, batch.changes, &mut made) {
                Ok(()) => {
                    checkpointer.committed();
                    #[cfg(test)]
                    shared.committed.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                }
                Err(error) => {
                    let reason = error.to_string();
                    tracing::error!("the run store could not be written: {reason}");
                    shared.fail(&reason);
                    shared.taken.notify_all();
                    Err(reason)
                }
            },
        };
        for (reply, changed) in made {
            reply.send(match &result {
                Ok(()) => Ok(changed),
                Err(reason) => Err(StoreError::Write(reason.clone())),
            });
        }
        for reply in batch.flushes {
            let _ = reply.send(result.clone());
        }
    }
}

/// Writes `blocks`, then makes `changes` (each in a savepoint of its own:
/// one refused leaves the others), in one transaction. Every change goes
/// into `made` with what it found (one not reached: an error), to be told
/// once the commit's result is known.
fn commit(
    conn: &mut Connection,
    blocks: &[(Arc<str>, Block)],
    changes: Vec<Change>,
    made: &mut Vec<(Reply, Result<bool, StoreError>)>,
) -> rusqlite::Result<()> {
    let mut changes = changes.into_iter();
    let written = write_batch(conn, blocks, &mut changes, made);
    for change in changes {
        made.push((
            change.reply,
            Err(StoreError::Write("the batch was not written".into())),
        ));
    }
    written
}

fn write_batch(
    conn: &mut Connection,
    blocks: &[(Arc<str>, Block)],
    changes: &mut impl Iterator<Item = Change>,
    made: &mut Vec<(Reply, Result<bool, StoreError>)>,
) -> rusqlite::Result<()> {
    let mut tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    {
        // Whether each run of the batch has its done already: asked once
        // per run and batch, inside the write lock, so no other process
        // ends it meanwhile.
        let mut ended: HashMap<&str, bool> = HashMap::new();
        let mut has_done = tx.prepare_cached(HAS_DONE)?;
        let mut insert = tx.prepare_cached(INSERT_BLOCK)?;
        for (run, block) in blocks {
            let done = match ended.get(&**run) {
                Some(done) => *done,
                None => has_done.query_row([&**run], |row| row.get(0))?,
            };
            if done {
                ended.insert(run, true);
                continue;
            }
            insert.execute((
                &**run,
                block.first_seq as i64,
                block.last_seq as i64,
                block.has_done,
                Encoding::Lz4.as_str(),
                blocks::compress(&block.events),
            ))?;
            ended.insert(run, block.has_done);
        }
    }
    for Change { apply, reply } in changes {
        let mut savepoint = |apply: Apply| -> rusqlite::Result<Result<bool, StoreError>> {
            let savepoint = tx.savepoint()?;
            // A change that panics is refused alone: the writer thread
            // serves every run's record, and every flush and change waits
            // on it.
            let changed =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| apply(&savepoint)))
                    .unwrap_or_else(|_| {
                        Err(StoreError::Write(
                            "a change of a run's record failed".into(),
                        ))
                    });
            if changed.is_ok() {
                savepoint.commit()?;
            }
            Ok(changed)
        };
        match savepoint(apply) {
            Ok(changed) => made.push((reply, changed)),
            Err(error) => {
                made.push((reply, Err(StoreError::Write(error.to_string()))));
                return Err(error);
            }
        }
    }
    tx.commit()
}
