//! What a running workflow reports, as it happens: one NDJSON line each
//! when moat's output is piped, the live view on a terminal.

use moat_engine::Usage;
use serde::Serialize;

use crate::state::WorkflowStatus;

/// One thing that happened in a workflow.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkflowEvent {
    /// It started (or resumed).
    WorkflowStarted {
        /// Its name.
        workflow: String,
        /// Its tasks.
        tasks: usize,
        /// Tasks already completed by an earlier run, skipped.
        skipped: Vec<String>,
        /// Its record in the run store, when it has one.
        #[serde(skip_serializing_if = "Option::is_none")]
        run: Option<String>,
    },
    /// An attempt started.
    TaskStarted {
        /// The task.
        task: String,
        /// The attempt, from 1.
        attempt: u32,
        /// The loop's iteration, from 1.
        iteration: u32,
    },
    /// On resume, an attempt follows the run an earlier moat started for
    /// it (still going on, or ended meanwhile) instead of starting
    /// another: the task is not run twice.
    TaskReattached {
        /// The task.
        task: String,
        /// The run it follows.
        run: String,
        /// The attempt, from 1 (a resume counts attempts afresh).
        attempt: u32,
        /// The loop's iteration, from 1.
        iteration: u32,
    },
    /// An attempt's run waits for an answer to a request (the workflow
    /// runs with `--ask`): `moat approve RUN N` or `moat deny RUN N`.
    TaskWaiting {
        /// The task.
        task: String,
        /// Its run.
        run: String,
        /// The request's number in the run.
        request: String,
        /// What it asks for, in words.
        reason: String,
    },
    /// An attempt failed and will be tried again.
    TaskRetrying {
        /// The task.
        task: String,
        /// The attempt that failed.
        attempt: u32,
        /// Why.
        reason: String,
        /// Milliseconds before the next attempt.
        backoff_ms: u64,
    },
    /// A loop's iteration ended and the next one starts.
    LoopIteration {
        /// The task.
        task: String,
        /// The iteration that ended.
        iteration: u32,
    },
    /// A loop ended.
    LoopExit {
        /// The task.
        task: String,
        /// Iterations run.
        iterations: u32,
        /// `condition` or `max_iterations`.
        reason: String,
    },
    /// A piece of a task's context was cut to fit the budget.
    ContextTruncated {
        /// The task.
        task: String,
        /// The piece.
        piece: String,
        /// Bytes of it shown.
        shown: usize,
        /// Its size.
        total: usize,
    },
    /// A hook failed (on-failure and on-loop-exit hooks change nothing;
    /// pre- and post-task hooks fail the task or the attempt).
    HookFailed {
        /// The task.
        task: String,
        /// The point.
        hook: String,
        /// Which hook.
        command: String,
        /// Why.
        reason: String,
    },
    /// A task completed.
    TaskCompleted {
        /// The task.
        task: String,
        /// Its attempts' runs in the store.
        runs: Vec<String>,
        /// Its wall time, in milliseconds.
        duration_ms: u64,
        /// Its tokens and cost.
        usage: Usage,
    },
    /// A task failed for good.
    TaskFailed {
        /// The task.
        task: String,
        /// Why.
        reason: String,
    },
    /// A task will not run: a task it depends on failed.
    TaskBlocked {
        /// The task.
        task: String,
        /// The failed task.
        by: String,
    },
    /// A task was stopped by a cancel; a resume runs it again.
    TaskInterrupted {
        /// The task.
        task: String,
    },
    /// It ended: exactly once per run.
    WorkflowDone {
        /// How.
        status: WorkflowStatus,
        /// Tasks completed.
        completed: usize,
        /// Tasks failed.
        failed: usize,
        /// Tasks not run (blocked, cancelled or never reached).
        pending: usize,
        /// Its wall time, in milliseconds.
        duration_ms: u64,
        /// Why, when it did not complete.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}
