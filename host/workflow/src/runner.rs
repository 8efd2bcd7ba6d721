//! How the engine has a task's attempt run: through a [`TaskRunner`]. moat
//! runs it as a sandboxed, recorded run (the CLI's runner); tests use
//! [`crate::MockRunner`], which makes no model call.
//!
//! A run may outlive the moat that started it (in a cluster it goes on
//! when its submitter is killed). So a runner tells the engine each run's
//! id before it starts it ([`RunNotice::starting`]), the engine writes it
//! in the state, and a resume hands a run left in flight back to the
//! runner ([`TaskRunner::reattach`]) rather than running the task again.

use std::sync::Arc;

use futures::future::BoxFuture;
use moat_engine::Usage;
use tokio::sync::{mpsc, oneshot};
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
    /// Tells the engine the attempt's run before it starts.
    pub notice: RunNotice,
    /// The last run of each task it depends on, in `depends_on` order: a
    /// task in a workspace starts from their workspaces' changes.
    pub upstream_runs: Vec<String>,
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
    pub usage: Usage,
}

impl TaskReport {
    /// An attempt stopped by its abort before its run started.
    pub fn cancelled() -> Self {
        Self {
            status: AttemptStatus::Cancelled,
            answer: String::new(),
            run: None,
            usage: Usage::default(),
        }
    }

    /// An attempt that failed before its run started.
    pub fn failed(reason: impl Into<String>) -> Self {
        Self {
            status: AttemptStatus::Failed {
                reason: reason.into(),
            },
            answer: String::new(),
            run: None,
            usage: Usage::default(),
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

    /// Runs one attempt to its end. A runner whose runs can outlive this
    /// process calls [`RunNotice::starting`] with the run's id before it
    /// starts the run, and starts it only once that returned `Ok`.
    async fn run(&self, dispatch: TaskDispatch) -> TaskReport;

    /// On resume: the attempt `dispatch` was running `run` when the moat
    /// that started it went away. A runner that can find that run and
    /// follow it to its end returns [`Reattach::Following`] — whether the
    /// run is still going on or ended meanwhile — so the task is not run
    /// twice; otherwise [`Reattach::Cannot`], and the attempt runs afresh.
    /// `dispatch.prompt` is empty: the run has its prompt already.
    async fn reattach(&self, _run: &str, _dispatch: TaskDispatch) -> Reattach {
        Reattach::Cannot("this runner cannot follow a run another process started".into())
    }
}

/// What a runner does with a run an earlier moat left in flight.
pub enum Reattach {
    /// It follows the run: the attempt's report once the run has ended.
    /// (The attempt's abort stops the run, as a fresh attempt's does.)
    Following(BoxFuture<'static, TaskReport>),
    /// It cannot (why, for the log): the attempt is run again.
    Cannot(String),
}

impl std::fmt::Debug for Reattach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Following(_) => f.write_str("Following(..)"),
            Self::Cannot(why) => f.debug_tuple("Cannot").field(why).finish(),
        }
    }
}

/// Why a run's id could not be written in the workflow's state: the run
/// must not start.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the workflow's state cannot record run {run}: {reason}")]
pub struct NotRecorded {
    /// The run.
    pub run: String,
    /// Why (the workflow is stopping, its state cannot be written).
    pub reason: String,
}

/// The engine's ear for an attempt's run: see [`RunNotice::starting`].
#[derive(Clone, Debug)]
pub struct RunNotice {
    /// `None`: nobody listens (a runner used outside the engine).
    to: Option<Listener>,
}

#[derive(Clone, Debug)]
struct Listener {
    task: String,
    /// Which dispatch of the task: a late notice from an attempt already
    /// settled is told apart from its successor's.
    serial: u64,
    sender: mpsc::UnboundedSender<Noted>,
}

/// What an attempt tells the engine's loop about its run.
#[derive(Debug)]
pub(crate) struct Noted {
    pub(crate) task: String,
    pub(crate) serial: u64,
    pub(crate) run: String,
    pub(crate) what: NotedWhat,
}

/// What [`Noted`] says.
#[derive(Debug)]
pub(crate) enum NotedWhat {
    /// The run is about to start; answered once the state holding it is
    /// written (or why not).
    Starting(oneshot::Sender<Result<(), String>>),
    /// The run waits for an answer to its request `request` (`moat
    /// approve RUN N`), for `reason`.
    Waiting { request: String, reason: String },
}

impl RunNotice {
    /// A notice nobody listens to: every run is accepted at once.
    pub fn ignored() -> Self {
        Self { to: None }
    }

    /// The notice of dispatch `serial` of `task`, sent to `sender`.
    pub(crate) fn new(task: String, serial: u64, sender: mpsc::UnboundedSender<Noted>) -> Self {
        Self {
            to: Some(Listener {
                task,
                serial,
                sender,
            }),
        }
    }

    /// The attempt's run will be `run`: returns once the workflow's state
    /// says so, so a moat killed while the run goes on leaves its id for
    /// the resume to re-attach. Called before the run starts (an id
    /// written down for a run that never started is harmless: a resume
    /// finds no such run and runs the attempt again; a run started and
    /// not written down would run twice). `Err`: do not start it.
    pub async fn starting(&self, run: &str) -> Result<(), NotRecorded> {
        let Some(to) = &self.to else {
            return Ok(());
        };
        let not_recorded = |reason: &str| NotRecorded {
            run: run.to_owned(),
            reason: reason.to_owned(),
        };
        let (written, answer) = oneshot::channel();
        to.sender
            .send(Noted {
                task: to.task.clone(),
                serial: to.serial,
                run: run.to_owned(),
                what: NotedWhat::Starting(written),
            })
            .map_err(|_| not_recorded("the workflow has ended"))?;
        match answer.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(not_recorded(&reason)),
            Err(_) => Err(not_recorded("the workflow has ended")),
        }
    }

    /// The attempt's run `run` waits for an answer to its request
    /// `request` (asked for `reason`): the workflow says so, with how to
    /// answer. Nothing waits on the engine.
    pub fn waiting(&self, run: &str, request: &str, reason: &str) {
        if let Some(to) = &self.to {
            let _ = to.sender.send(Noted {
                task: to.task.clone(),
                serial: to.serial,
                run: run.to_owned(),
                what: NotedWhat::Waiting {
                    request: request.to_owned(),
                    reason: reason.to_owned(),
                },
            });
        }
    }
}
