//! How the engine has a task's attempt run: through a [`TaskRunner`]. moat
//! runs it as a sandboxed, recorded run (the CLI's runner); tests use
//! [`crate::MockRunner`], which makes no model call.

use std::sync::Arc;

use moat_engine::ResultUsage;
use tokio_util::sync::CancellationToken;

use crate::definition::Task;

/// One attempt of one task, with its assembled prompt.
#[derive(Debug, Clone)]
pub struct TaskDispatch {
    /// The workflow's name.
    pub workflow: String,
    /// The task.
    pub task: Arc<Task>,
    /// The attempt, from 1.
    pub attempt: u32,
    /// The loop's iteration, from 1.
    pub iteration: u32,
    /// The prompt: constitution, handovers, inputs and the task (see
    /// [`crate::context`]).
    pub prompt: String,
    /// Cancelled when the attempt must stop (the workflow is cancelled or
    /// must stop): the runner ends the run and reports
    /// [`AttemptStatus::Cancelled`].
    pub abort: CancellationToken,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptStatus {
    /// The run completed: its answer is the task's work.
    Completed,
    /// The run failed; `reason` says why.
    Failed {
        /// Why, for the user.
        reason: String,
    },
    /// The run was stopped by the attempt's abort.
    Cancelled,
}

/// What a runner reports of an attempt.
#[derive(Debug, Clone)]
pub struct TaskReport {
    /// How it ended.
    pub status: AttemptStatus,
    /// Its final answer (the run's result text).
    pub answer: String,
    /// The id of its run, when it was recorded.
    pub run: Option<String>,
    /// Its tokens and cost, as far as known.
    pub usage: ResultUsage,
}

impl TaskReport {
    /// An attempt that failed before its run started.
    pub fn failed(reason: impl Into<String>) -> Self {
        Self {
            status: AttemptStatus::Failed {
                reason: reason.into(),
            },
            answer: String::new(),
            run: None,
            usage: ResultUsage::default(),
        }
    }
}

/// Runs tasks' attempts.
#[async_trait::async_trait]
pub trait TaskRunner: Send + Sync {
    /// Before anything runs: whether `task` can run at all (its adapter
    /// loads, its grants are within the workflow's). `Err` says why not.
    async fn check(&self, _task: &Task) -> Result<(), String> {
        Ok(())
    }

    /// Runs one attempt to its end.
    async fn run(&self, dispatch: TaskDispatch) -> TaskReport;
}
