//! The [`Runs`] trait: where runs are found, followed, awaited and
//! cancelled — this machine's store, or a cluster — behind one interface,
//! so every command and the protocol are written once.
//!
//! A run is never created here: runs are created by the launch layer,
//! which admits them first (its grants, trust and limits narrowed by
//! whoever starts them) and then records them where they will run.

use std::sync::Arc;

use futures::stream::BoxStream;

use crate::approval::{Answer, Approval};
use crate::id::RunId;
use crate::record::{RunFilter, RunRecord};

/// One recorded event of a run, as its JSON (encoded once, for every
/// reader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// Its number in its run, from 0.
    pub seq: u64,
    /// The event, as `moat run --output ndjson` prints it.
    pub json: Arc<str>,
    /// Whether it is the run's `done`: nothing follows it.
    pub done: bool,
}

impl StoredEvent {
    /// The event, parsed; `None` when its JSON is not an event.
    pub fn event(&self) -> Option<moat_engine::AgentEvent> {
        serde_json::from_str(&self.json).ok()
    }
}

/// How a user names the newest run (`moat logs @last`).
pub const LAST: &str = "@last";

/// A run's events as [`Runs::follow`] gives them.
pub type EventStream = BoxStream<'static, Result<StoredEvent, RunsError>>;

/// Why an operation on runs failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunsError {
    /// No run has this id or prefix.
    #[error("no run {0}; `moat ps --all` lists them")]
    NotFound(String),
    /// Several runs start with this prefix.
    #[error("{prefix} names {count} runs ({}); give more of the id", shown(candidates, *count))]
    Ambiguous {
        /// What was given.
        prefix: String,
        /// How many runs it matches.
        count: usize,
        /// Some of them, oldest first.
        candidates: Vec<RunId>,
    },
    /// A follower fell behind the run's live events; it may follow again
    /// from `next`, the first event it did not get.
    #[error("fell behind the run's events; follow again from event {next}")]
    Lagged {
        /// The first event not delivered.
        next: u64,
    },
    /// A request no moat would make (a malformed id, a sequence number
    /// past a run's end).
    #[error("{0}")]
    Invalid(String),
    /// The place the runs are kept failed (the store could not be read,
    /// the cluster is unreachable).
    #[error("{0}")]
    Unavailable(String),
}

/// The candidates of an ambiguous prefix, for its message.
fn shown(candidates: &[RunId], count: usize) -> String {
    let mut listed: Vec<&str> = candidates.iter().map(RunId::as_str).collect();
    if count > candidates.len() {
        listed.push("…");
    }
    listed.join(", ")
}

/// Where runs are kept: found by id or prefix, listed, followed, awaited
/// and cancelled.
#[async_trait::async_trait]
pub trait Runs: Send + Sync {
    /// Where these runs are, for messages ("this machine's store", "the
    /// cluster").
    fn place(&self) -> &'static str;

    /// The run whose id is `text`, or the one run whose id starts with it.
    async fn resolve(&self, text: &str) -> Result<RunId, RunsError>;

    /// The run a user names with `text`: an id or a prefix naming one run
    /// ([`Runs::resolve`]), or [`LAST`] for the newest run here.
    async fn find(&self, text: &str) -> Result<RunId, RunsError> {
        if text.trim() != LAST {
            return self.resolve(text).await;
        }
        let newest = RunFilter {
            limit: Some(1),
            ..RunFilter::default()
        };
        self.list(&newest)
            .await?
            .into_iter()
            .next()
            .map(|run| run.id)
            .ok_or_else(|| RunsError::NotFound(format!("{LAST} (none yet in {})", self.place())))
    }

    /// The run's record; `None` when there is none.
    async fn get(&self, id: &RunId) -> Result<Option<RunRecord>, RunsError>;

    /// The runs `filter` lists, newest first.
    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, RunsError>;

    /// Stops the run wherever it runs; it ends `failed` / `cancelled` with
    /// its `done` interrupted. Idempotent: an unknown or ended run has
    /// nothing left to stop.
    async fn cancel(&self, id: &RunId) -> Result<(), RunsError>;

    /// At most `max` of the run's stored events from number `from` on, in
    /// order, without waiting for more.
    async fn stored(
        &self,
        id: &RunId,
        from: u64,
        max: usize,
    ) -> Result<Vec<StoredEvent>, RunsError>;

    /// The run's events from number `from` on: those stored, then the
    /// live ones as they come, each once and in order, until its `done`
    /// (or, for a run that ended without one being stored, its end).
    async fn follow(&self, id: &RunId, from: u64) -> Result<EventStream, RunsError>;

    /// Waits until the run has ended; its final record.
    async fn wait(&self, id: &RunId) -> Result<RunRecord, RunsError>;

    /// The run's requests for approval, oldest first, with their answers
    /// (see [`Approval`]).
    async fn approvals(&self, id: &RunId) -> Result<Vec<Approval>, RunsError>;

    /// Answers request `number` of the live run `id` (`None`: its only
    /// open one; see [`crate::pick_open`]): the request, answered. The
    /// first answer wins; a request answered already, or a run that has
    /// ended, is refused.
    async fn answer(
        &self,
        id: &RunId,
        number: Option<u32>,
        answer: Answer,
    ) -> Result<Approval, RunsError>;
}
