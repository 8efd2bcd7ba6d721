//! [`RunBook`]: where runs are kept, written as well as read — a run
//! created, its events recorded ([`RunLog`]), its requests asked and
//! answered, its spending kept, its record ended — so the launch layer
//! records a run one way, whichever place keeps it. This machine's store
//! (`moat-store`) and a cluster (`moat-cluster`) both implement it; a
//! cluster's runs execute on its workers ([`RunBook::workers`]), which
//! record them there.

use std::sync::Arc;
use std::time::Duration;

use moat_engine::AgentEvent;
use tokio_util::sync::CancellationToken;

use crate::approval::{Answer, Approval, ApprovalRequest};
use crate::id::RunId;
use crate::limits::Spent;
use crate::record::NewRun;
use crate::runs::{Runs, RunsError};
use crate::status::{FailReason, Outcome};
use crate::workers::Workers;

/// One run's record while it executes in this process: its events
/// recorded in order as they pass, its end recorded once.
pub trait RunLog: Send + std::fmt::Debug {
    /// The run's id.
    fn id(&self) -> &RunId;

    /// Its adapter starts now: the record says `running` (without the run
    /// waiting for it to be written).
    fn running(&mut self) -> Result<(), RunsError>;

    /// Records the run's next event (`json`: its encoding, when the caller
    /// made one, kept as it is): its number in the run. Once its `done` is
    /// recorded the record is final — ended as the `done` says — before
    /// anyone following the run hears of it. An error means the run can no
    /// longer be recorded: the caller stops it and calls
    /// [`fail`](Self::fail).
    fn record(&mut self, event: &AgentEvent, json: Option<&[u8]>) -> Result<u64, RunsError>;

    /// Ends the record: as its `done` said, or, without one (its events
    /// were cut), failed with `reason`.
    fn finish(self: Box<Self>, reason: FailReason) -> Result<(), RunsError>;

    /// Ends the record as `outcome` says: for a run whose end is not an
    /// adapter's `done` (a workflow's own record ends as its tasks did).
    fn end(self: Box<Self>, outcome: &Outcome) -> Result<(), RunsError>;

    /// The record could not be written: ends it failed with `reason`,
    /// telling whoever follows the run `said` (the run's own account of
    /// why, which could not be recorded).
    fn fail(self: Box<Self>, reason: FailReason, said: &AgentEvent);
}

/// Where runs are kept, written: see the module documentation.
#[async_trait::async_trait]
pub trait RunBook: Runs {
    /// The workers its runs are handed to when they execute elsewhere (a
    /// cluster's); `None`: they execute in the process that creates them.
    fn workers(&self) -> Option<Arc<dyn Workers>> {
        None
    }

    /// Records run `id`, `pending`, as `run` describes it, to execute in
    /// this process and be stopped by `abort` — also when it is cancelled
    /// from elsewhere: the log its events go to.
    async fn create(
        &self,
        id: RunId,
        run: &NewRun,
        abort: CancellationToken,
    ) -> Result<Box<dyn RunLog>, RunsError>;

    /// Records a request of live run `id` for approval (the run reads
    /// `waiting` until it is answered): the request, numbered.
    async fn ask(&self, id: &RunId, request: &ApprovalRequest) -> Result<Approval, RunsError>;

    /// The answer to request `number` of run `id`, when it has one.
    async fn answer_of(&self, id: &RunId, number: u32) -> Result<Option<Answer>, RunsError>;

    /// Waits until request `number` of run `id` is answered: the answer.
    async fn answer_to(&self, id: &RunId, number: u32) -> Result<Answer, RunsError>;

    /// Keeps what run `id` (with its children) has spent so far.
    fn spent(&self, id: &RunId, spent: &Spent) -> Result<(), RunsError>;

    /// Stops every run this process executes from this book and waits up
    /// to `patience` for their ends: whether they all ended.
    async fn stop_live(&self, patience: Duration) -> bool;
}
