//! This machine's runs behind the [`Runs`] trait: the store every moat
//! process shares, and the runs live in this process ([`LiveRuns`]),
//! whose events a follower here gets as they are recorded instead of
//! waiting for the store.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use moat_runs::{
    ANSWER_POLL, Answer, Approval, EventStream, RunFilter, RunId, RunRecord, Runs, RunsError,
    StoredEvent,
};

use crate::live::{LiveRuns, Publisher};
use crate::{Store, StoreError};

/// How often a run owned by another moat process is looked at in the
/// store (its events, its end).
const STORE_POLL: Duration = Duration::from_millis(100);

/// How many stored events a follower reads from the store at a time, at
/// least (to the end of the block where they end): what it holds while its
/// reader is busy.
const REPLAY_PAGE: usize = 256;

/// How often this process looks for cancels asked of its runs from
/// elsewhere (`moat cancel`, a parent's end in another process).
const CANCEL_POLL: Duration = Duration::from_millis(200);

/// This machine's runs: the shared store and this process's live runs.
#[derive(Debug, Clone)]
pub struct LocalRuns {
    store: Arc<Store>,
    live: Arc<LiveRuns>,
    /// The one task that turns cancels asked through the store into the
    /// live runs' aborts, started with the first live run.
    watcher: Arc<std::sync::OnceLock<()>>,
    /// Woken when a request of a run is answered through this process, so
    /// a run here that waits for it goes on at once (answers from other
    /// processes are found by polling, [`ANSWER_POLL`]).
    answered: Arc<tokio::sync::Notify>,
}

impl LocalRuns {
    /// The runs of `store`, with none live in this process yet.
    pub fn new(store: Arc<Store>) -> Self {
        Self {
            store,
            live: Arc::default(),
            watcher: Arc::default(),
            answered: Arc::default(),
        }
    }

    /// Waits until request `number` of run `id` is answered, looking in
    /// the store as answers come through this process and every
    /// [`ANSWER_POLL`] otherwise (cheap: one indexed read).
    pub async fn answer_to(&self, id: &RunId, number: u32) -> Result<Answer, StoreError> {
        loop {
            let woken = self.answered.notified();
            if let Some(answer) = self.store.answer_of(id, number)? {
                return Ok(answer);
            }
            let _ = tokio::time::timeout(ANSWER_POLL, woken).await;
        }
    }

    /// Registers run `id` (recorded in the store by this process) as live
    /// here, stopped by `abort`, also when someone asks the store to
    /// cancel it: the handle its driver publishes through. Needs a tokio
    /// runtime.
    pub fn begin(
        &self,
        id: RunId,
        parent: Option<RunId>,
        abort: tokio_util::sync::CancellationToken,
    ) -> Publisher {
        self.watcher.get_or_init(|| {
            tokio::spawn(watch_cancels(
                self.store.clone(),
                Arc::downgrade(&self.live),
            ));
        });
        self.live.begin(id, parent, abort)
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The runs live in this process.
    pub fn live(&self) -> &Arc<LiveRuns> {
        &self.live
    }
}

/// A store error as the trait's.
pub(crate) fn runs_error(error: StoreError) -> RunsError {
    match error {
        StoreError::NotFound(text) => RunsError::NotFound(text),
        StoreError::Ambiguous {
            prefix,
            count,
            candidates,
        } => RunsError::Ambiguous {
            prefix,
            count,
            candidates,
        },
        StoreError::Refused(text) => RunsError::Invalid(text),
        other => RunsError::Unavailable(other.to_string()),
    }
}

#[async_trait::async_trait]
impl Runs for LocalRuns {
    fn place(&self) -> &'static str {
        "this machine's run store"
    }

    async fn resolve(&self, text: &str) -> Result<RunId, RunsError> {
        self.store
            .resolve(&RunId::prefix_from(text))
            .map_err(runs_error)
    }

    async fn get(&self, id: &RunId) -> Result<Option<RunRecord>, RunsError> {
        self.store.get(id).map_err(runs_error)
    }

    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, RunsError> {
        self.store.list(filter).map_err(runs_error)
    }

    async fn approvals(&self, id: &RunId) -> Result<Vec<Approval>, RunsError> {
        self.store.approvals(id).map_err(runs_error)
    }

    async fn answer(
        &self,
        id: &RunId,
        number: Option<u32>,
        answer: Answer,
    ) -> Result<Approval, RunsError> {
        let answered = self.store.answer(id, number, &answer).map_err(runs_error)?;
        self.answered.notify_waiters();
        Ok(answered)
    }

    async fn cancel(&self, id: &RunId) -> Result<(), RunsError> {
        if let Some(live) = self.live.get(id) {
            live.abort.cancel();
            return Ok(());
        }
        // Another moat's run (or none): its owner polls for the request.
        self.store.request_cancel(id).map_err(runs_error)
    }

    async fn stored(
        &self,
        id: &RunId,
        from: u64,
        max: usize,
    ) -> Result<Vec<StoredEvent>, RunsError> {
        // What this process queued for the store is readable after this.
        let _ = self.store.flush();
        self.store.event_lines(id, from, max).map_err(runs_error)
    }

    async fn follow(&self, id: &RunId, from: u64) -> Result<EventStream, RunsError> {
        if self.store.get(id).map_err(runs_error)?.is_none() {
            return Err(RunsError::NotFound(id.to_string()));
        }
        // Listening starts before the store is read: an event published
        // from now on is received, and one published before was recorded
        // before, so the store has it.
        let (live, live_from) = match self.live.get(id) {
            Some(run) => match run.subscribe() {
                // Read after subscribing: every event from this on is heard.
                Some(receiver) => (Some(receiver), run.recorded()),
                None => (None, u64::MAX),
            },
            None => (None, u64::MAX),
        };
        let follower = Follower {
            runs: self.clone(),
            id: id.clone(),
            next: from,
            page: VecDeque::new(),
            live,
            live_from,
            listening: false,
            flushed: false,
            over: false,
        };
        Ok(
            futures::stream::unfold(follower, |mut follower| async move {
                let item = follower.next().await?;
                Some((item, follower))
            })
            .boxed(),
        )
    }

    async fn wait(&self, id: &RunId) -> Result<RunRecord, RunsError> {
        if let Some(live) = self.live.get(id) {
            live.ended().await;
        }
        loop {
            match self.store.get(id).map_err(runs_error)? {
                Some(record) if record.is_terminal() => return Ok(record),
                Some(_) => tokio::time::sleep(STORE_POLL).await,
                None => return Err(RunsError::NotFound(id.to_string())),
            }
        }
    }
}

/// One follower of one run: the stored events a page at a time, then the
/// live ones (or, for another process's run, the store again).
struct Follower {
    runs: LocalRuns,
    id: RunId,
    /// The first event not handed out yet.
    next: u64,
    /// Stored events read and not handed out yet.
    page: VecDeque<StoredEvent>,
    /// The run's live events, while it is live here.
    live: Option<crate::live::LiveEvents>,
    /// The first event heard live: the ones before it are read from the
    /// store, the rest live (so a follower goes live at once after
    /// replaying what was there when it came, and a slow one lags).
    live_from: u64,
    /// The store had nothing more: events come live now.
    listening: bool,
    /// The store was flushed since the follower started reading it.
    flushed: bool,
    /// The `done` (or the run's end) was reached.
    over: bool,
}

impl Follower {
    /// The next event; `None` once the run's `done` is handed out.
    ///
    /// The store is read up to the first event heard live (or, for a run
    /// not live here, until it has nothing more); from then on the live
    /// events are handed out as they come, until the run ends and the
    /// rest is in the store.
    async fn next(&mut self) -> Option<Result<StoredEvent, RunsError>> {
        if self.over {
            return None;
        }
        loop {
            if let Some(event) = self.page.pop_front() {
                return Some(Ok(self.hand_out(event)));
            }
            if !self.listening && self.live.is_some() && self.next >= self.live_from {
                self.listening = true;
            }
            if !self.listening {
                // What this process queued for the store before it was
                // listening is readable after one flush; what it records
                // from now on comes live (so the store is read ahead of
                // the live events only once, not per page).
                if !self.flushed {
                    let _ = self.runs.store.flush();
                    self.flushed = true;
                }
                let page = self
                    .runs
                    .store
                    .event_page(&self.id, self.next, REPLAY_PAGE)
                    .map_err(runs_error);
                match page {
                    Ok(page) if !page.is_empty() => {
                        self.page = page.into();
                        continue;
                    }
                    Ok(_) => self.listening = self.live.is_some(),
                    Err(error) => {
                        self.over = true;
                        return Some(Err(error));
                    }
                }
            }
            match self.live.as_mut() {
                Some(receiver) => match receiver.recv().await {
                    Ok(event) if event.seq < self.next => {}
                    Ok(event) => return Some(Ok(self.hand_out(event))),
                    Err(crate::live::NoEvent::Lagged) => {
                        self.over = true;
                        return Some(Err(RunsError::Lagged { next: self.next }));
                    }
                    // The run ended: whatever is left is in the store.
                    Err(crate::live::NoEvent::Closed) => {
                        self.live = None;
                        self.live_from = u64::MAX;
                        self.listening = false;
                        self.flushed = false;
                    }
                },
                None => {
                    // Another moat's run: its events arrive through the
                    // store, until it has ended and they are all read.
                    let ended = match self.runs.store.get(&self.id) {
                        Ok(record) => record.is_none_or(|record| record.is_terminal()),
                        Err(error) => {
                            self.over = true;
                            return Some(Err(runs_error(error)));
                        }
                    };
                    if ended {
                        let rest = self.runs.stored(&self.id, self.next, 1).await;
                        if rest.as_ref().is_ok_and(Vec::is_empty) {
                            self.over = true;
                            return None;
                        }
                        continue;
                    }
                    tokio::time::sleep(STORE_POLL).await;
                }
            }
        }
    }

    fn hand_out(&mut self, event: StoredEvent) -> StoredEvent {
        self.next = event.seq + 1;
        if event.done {
            self.over = true;
            self.page.clear();
        }
        event
    }
}

/// Aborts the live runs someone cancels through the store, or the store
/// ended from outside (their parent ended), until this process's runs are
/// gone.
async fn watch_cancels(store: Arc<Store>, live: std::sync::Weak<LiveRuns>) {
    loop {
        tokio::time::sleep(CANCEL_POLL).await;
        let Some(live) = live.upgrade() else { return };
        if live.all().is_empty() {
            continue;
        }
        let asking = store.clone();
        let asked = tokio::task::spawn_blocking(move || asking.cancels_requested())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        for id in asked {
            if let Some(run) = live.get(&id)
                && !run.abort.is_cancelled()
            {
                tracing::info!(run = %id, "cancelled through the store");
                run.abort.cancel();
            }
        }
    }
}
