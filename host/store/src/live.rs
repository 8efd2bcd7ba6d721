//! The runs this process is running now: how to stop each at once, and
//! its events as they are recorded, for followers in this process (a
//! protocol client, a parent run reading its child) that would otherwise
//! wait for the store.
//!
//! An event is published after it is recorded, and a follower starts
//! listening before it reads the store: so whatever it did not receive
//! live it finds stored, and an event nobody listens to is not even
//! encoded for the hub.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use moat_runs::{RunId, StoredEvent};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// Events a follower of a live run may fall behind by; one further behind
/// is told it lagged (and catches up from the store).
pub const EVENT_BUFFER: usize = 4096;

/// Bytes of events a follower may fall behind by: however large the
/// events, a follower that stops reading holds at most this much of the
/// host's memory (a single larger event still reaches a follower that is
/// not behind).
pub const FOLLOWER_BYTES: usize = 8 * 1024 * 1024;

/// What one follower of a live run is queued: bounded in events and in
/// bytes, never waiting for the run.
#[derive(Debug)]
struct Queue {
    sender: mpsc::UnboundedSender<StoredEvent>,
    /// Events and bytes queued and not received yet.
    queued: Arc<Queued>,
}

/// Events and bytes in a follower's queue.
#[derive(Debug, Default)]
struct Queued {
    events: AtomicU64,
    bytes: AtomicU64,
    /// It fell behind and was dropped from the run's followers.
    lagged: std::sync::atomic::AtomicBool,
}

/// A live run's followers (each with its queue), closed when the run ends.
#[derive(Debug, Default)]
struct Hub {
    /// `None` once the run has ended.
    queues: Mutex<Option<Vec<Queue>>>,
}

impl Hub {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Vec<Queue>>> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Why [`LiveEvents::recv`] has no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoEvent {
    /// The follower fell behind (by [`EVENT_BUFFER`] events or
    /// [`FOLLOWER_BYTES`] bytes): what it missed is in the store.
    Lagged,
    /// The run has ended: its events are all stored.
    Closed,
}

/// One follower's live events of a run.
#[derive(Debug)]
pub struct LiveEvents {
    receiver: mpsc::UnboundedReceiver<StoredEvent>,
    queued: Arc<Queued>,
}

impl LiveEvents {
    /// The next event published, in order.
    pub async fn recv(&mut self) -> Result<StoredEvent, NoEvent> {
        match self.receiver.recv().await {
            Some(event) => {
                self.queued.events.fetch_sub(1, Ordering::SeqCst);
                self.queued
                    .bytes
                    .fetch_sub(event.json.len() as u64, Ordering::SeqCst);
                Ok(event)
            }
            None if self.queued.lagged.load(Ordering::SeqCst) => Err(NoEvent::Lagged),
            None => Err(NoEvent::Closed),
        }
    }
}

/// A run live in this process.
#[derive(Debug)]
pub struct LiveRun {
    /// The run that started it.
    pub parent: Option<RunId>,
    /// Stops it (its adapter drains, then it ends with `done`).
    pub abort: CancellationToken,
    /// Its followers; the driver's [`Publisher`] closes it when the run
    /// ends, so a follower hears it close.
    hub: Arc<Hub>,
    /// True once its record is final and its events stored.
    ended: watch::Receiver<bool>,
    /// How many of its events are recorded: a follower that listens from
    /// now on reads the ones before this from the store.
    recorded: Arc<AtomicU64>,
}

impl LiveRun {
    /// Its events from now on; `None` once it has ended (they are all
    /// stored).
    pub fn subscribe(&self) -> Option<LiveEvents> {
        let mut queues = self.hub.lock();
        let queues = queues.as_mut()?;
        let (sender, receiver) = mpsc::unbounded_channel();
        let queued = Arc::new(Queued::default());
        queues.push(Queue {
            sender,
            queued: queued.clone(),
        });
        Some(LiveEvents { receiver, queued })
    }

    /// How many of its events are recorded so far. Read after
    /// [`subscribe`](Self::subscribe): every event numbered from this on
    /// is heard live.
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::SeqCst)
    }

    /// Waits until its record is final and its events are stored.
    pub async fn ended(&self) {
        let mut ended = self.ended.clone();
        let _ = ended.wait_for(|ended| *ended).await;
    }
}

/// The runs live in this process, by id.
#[derive(Debug, Default)]
pub struct LiveRuns {
    runs: Mutex<HashMap<RunId, Arc<LiveRun>>>,
}

impl LiveRuns {
    /// Registers run `id`, stopped by `abort`: the handle its driver
    /// publishes through. The run is live until the handle is dropped.
    pub fn begin(
        self: &Arc<Self>,
        id: RunId,
        parent: Option<RunId>,
        abort: CancellationToken,
    ) -> Publisher {
        let hub = Arc::new(Hub {
            queues: Mutex::new(Some(Vec::new())),
        });
        let (ended_tx, ended) = watch::channel(false);
        let recorded = Arc::new(AtomicU64::new(0));
        let live = Arc::new(LiveRun {
            parent,
            abort,
            hub: hub.clone(),
            ended,
            recorded: recorded.clone(),
        });
        self.lock().insert(id.clone(), live);
        Publisher {
            runs: Arc::downgrade(self),
            id,
            hub,
            ended: ended_tx,
            recorded,
        }
    }

    /// Run `id`, when it is live here.
    pub fn get(&self, id: &RunId) -> Option<Arc<LiveRun>> {
        self.lock().get(id).cloned()
    }

    /// How many children of `parent` are live here.
    pub fn live_children(&self, parent: &RunId) -> usize {
        self.lock()
            .values()
            .filter(|run| run.parent.as_ref() == Some(parent))
            .count()
    }

    /// Every run live here.
    pub fn all(&self) -> Vec<Arc<LiveRun>> {
        self.lock().values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Arc<LiveRun>>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a live run's driver holds: it publishes the run's recorded
/// events, and the run stops being live when it is dropped (after its
/// record is final).
#[derive(Debug)]
pub struct Publisher {
    runs: std::sync::Weak<LiveRuns>,
    id: RunId,
    hub: Arc<Hub>,
    ended: watch::Sender<bool>,
    recorded: Arc<AtomicU64>,
}

impl Publisher {
    /// Event `seq` is recorded (call before publishing it): a follower
    /// that starts listening from now on gets it live.
    pub fn recorded(&self, seq: u64) {
        self.recorded.store(seq + 1, Ordering::SeqCst);
    }

    /// Whether anyone listens: an event nobody listens to need not be
    /// encoded (it is in the store for whoever comes later).
    pub fn is_heard(&self) -> bool {
        self.hub
            .lock()
            .as_ref()
            .is_some_and(|queues| !queues.is_empty())
    }

    /// Publishes a recorded event to every follower; one that has fallen
    /// behind by [`EVENT_BUFFER`] events or [`FOLLOWER_BYTES`] bytes is
    /// dropped instead (told it lagged once it has read what it was
    /// queued), and so is one that has gone.
    pub fn publish(&self, event: StoredEvent) {
        let bytes = event.json.len() as u64;
        let mut queues = self.hub.lock();
        let Some(queues) = queues.as_mut() else {
            return;
        };
        queues.retain(|queue| {
            let queued = &queue.queued;
            let events = queued.events.load(Ordering::SeqCst);
            let held = queued.bytes.load(Ordering::SeqCst);
            let behind = events >= EVENT_BUFFER as u64
                || (events > 0 && held + bytes > FOLLOWER_BYTES as u64);
            if behind {
                queued.lagged.store(true, Ordering::SeqCst);
                return false;
            }
            queued.events.fetch_add(1, Ordering::SeqCst);
            queued.bytes.fetch_add(bytes, Ordering::SeqCst);
            queue.sender.send(event.clone()).is_ok()
        });
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        // Its followers hear the run end once they have read what they
        // were queued.
        self.hub.lock().take();
        if let Some(runs) = self.runs.upgrade() {
            runs.lock().remove(&self.id);
        }
        let _ = self.ended.send(true);
    }
}
