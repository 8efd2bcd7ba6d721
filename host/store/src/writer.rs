//! Events are written by one thread per store in batches: whatever arrived
//! while the previous transaction committed goes into the next one (group
//! commit), so a run pays a channel send per event, not a commit. A
//! `kill -9` loses at most what had not been committed yet.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use rusqlite::Connection;

use crate::error::StoreError;

/// Once a run has its `done` (the store may have ended it: a cancel, its
/// parent's end), nothing more is stored for it, so `done` stays last and
/// alone; what the owner emits after that is dropped.
const HAS_DONE: &str = "SELECT EXISTS (SELECT 1 FROM events WHERE run_id = ?1 AND kind = 'done')";

/// Stores one event (a seq already taken is left alone).
const INSERT: &str =
    "INSERT OR IGNORE INTO events (run_id, seq, kind, event) VALUES (?1, ?2, ?3, ?4)";

/// Most events committed in one transaction.
const MAX_BATCH: usize = 4096;

enum Message {
    Event {
        run: String,
        seq: u64,
        kind: String,
        json: String,
    },
    /// Answered once everything sent before it is committed (or failed).
    Flush(Sender<Result<(), String>>),
}

/// The writer thread's handle.
pub(crate) struct Writer {
    sender: Option<Sender<Message>>,
    /// The first write failure; once set, nothing more is written.
    failure: Arc<Mutex<Option<String>>>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts the writer on a connection of its own to the store at `path`.
    pub(crate) fn start(path: &Path) -> Result<Self, StoreError> {
        let conn = crate::connect(path)?;
        let (sender, receiver) = channel();
        let failure = Arc::new(Mutex::new(None));
        let thread = std::thread::Builder::new()
            .name("moat-store-writer".into())
            .spawn({
                let failure = failure.clone();
                move || write_batches(conn, receiver, failure)
            })
            .map_err(|e| StoreError::Write(format!("cannot start the writer: {e}")))?;
        Ok(Self {
            sender: Some(sender),
            failure,
            thread: Some(thread),
        })
    }

    /// Queues an event; an error when writing has already failed.
    pub(crate) fn event(
        &self,
        run: &str,
        seq: u64,
        kind: &str,
        json: String,
    ) -> Result<(), StoreError> {
        self.check()?;
        let message = Message::Event {
            run: run.to_owned(),
            seq,
            kind: kind.to_owned(),
            json,
        };
        self.send(message)
    }

    /// Waits until every event queued before is committed.
    pub(crate) fn flush(&self) -> Result<(), StoreError> {
        let (reply, answer) = channel();
        self.send(Message::Flush(reply))?;
        answer
            .recv()
            .map_err(|_| StoreError::Write("the writer is gone".into()))?
            .map_err(StoreError::Write)
    }

    /// The first write failure, if there was one.
    pub(crate) fn check(&self) -> Result<(), StoreError> {
        match &*self.failure.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(reason) => Err(StoreError::Write(reason.clone())),
            None => Ok(()),
        }
    }

    fn send(&self, message: Message) -> Result<(), StoreError> {
        self.sender
            .as_ref()
            .and_then(|sender| sender.send(message).ok())
            .ok_or_else(|| StoreError::Write("the writer is gone".into()))
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Closing the channel ends the thread once it has written the rest.
        self.sender = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn write_batches(
    mut conn: Connection,
    receiver: Receiver<Message>,
    failure: Arc<Mutex<Option<String>>>,
) {
    while let Ok(first) = receiver.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(message) => batch.push(message),
                Err(_) => break,
            }
        }
        let failed = failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let result = match failed {
            Some(reason) => Err(reason),
            None => commit(&mut conn, &batch).map_err(|e| e.to_string()),
        };
        if let Err(reason) = &result {
            tracing::error!("the run store could not be written: {reason}");
            failure
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert_with(|| reason.clone());
        }
        for message in batch {
            if let Message::Flush(reply) = message {
                let _ = reply.send(result.clone());
            }
        }
    }
}

fn commit(conn: &mut Connection, batch: &[Message]) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    {
        // Whether each run of the batch has its done already: asked once
        // per run and batch (inside the write lock, so no other process
        // ends it meanwhile), then kept up to date as the batch goes.
        let mut ended: HashMap<&str, bool> = HashMap::new();
        let mut has_done = tx.prepare_cached(HAS_DONE)?;
        let mut insert = tx.prepare_cached(INSERT)?;
        for message in batch {
            if let Message::Event {
                run,
                seq,
                kind,
                json,
            } = message
            {
                let done = match ended.get(run.as_str()) {
                    Some(done) => *done,
                    None => has_done.query_row([run], |row| row.get(0))?,
                };
                if done {
                    ended.insert(run, true);
                    continue;
                }
                insert.execute((run, *seq as i64, kind, json))?;
                ended.insert(run, kind == "done");
            }
        }
    }
    tx.commit()
}
