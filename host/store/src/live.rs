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
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

/// Events a live run keeps for followers that fall behind; one further
/// behind is told it lagged (and catches up from the store).
pub const EVENT_BUFFER: usize = 4096;

/// A run live in this process.
#[derive(Debug)]
pub struct LiveRun {
    /// The run that started it.
    pub parent: Option<RunId>,
    /// Stops it (its adapter drains, then it ends with `done`).
    pub abort: CancellationToken,
    /// Weak: only the driver's [`Publisher`] keeps the channel open, so a
    /// follower hears it close when the run ends.
    events: broadcast::WeakSender<StoredEvent>,
    /// True once its record is final and its events stored.
    ended: watch::Receiver<bool>,
    /// How many of its events are recorded: a follower that listens from
    /// now on reads the ones before this from the store.
    recorded: Arc<AtomicU64>,
}

impl LiveRun {
    /// Its events from now on; `None` once it has ended (they are all
    /// stored).
    pub fn subscribe(&self) -> Option<broadcast::Receiver<StoredEvent>> {
        self.events.upgrade().map(|sender| sender.subscribe())
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
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let (ended_tx, ended) = watch::channel(false);
        let recorded = Arc::new(AtomicU64::new(0));
        let live = Arc::new(LiveRun {
            parent,
            abort,
            events: events.downgrade(),
            ended,
            recorded: recorded.clone(),
        });
        self.lock().insert(id.clone(), live);
        Publisher {
            runs: Arc::downgrade(self),
            id,
            events,
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
    events: broadcast::Sender<StoredEvent>,
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
        self.events.receiver_count() > 0
    }

    /// Publishes a recorded event.
    pub fn publish(&self, event: StoredEvent) {
        let _ = self.events.send(event);
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        if let Some(runs) = self.runs.upgrade() {
            runs.lock().remove(&self.id);
        }
        let _ = self.ended.send(true);
    }
}
