//! The engine: topological dispatch of a workflow's tasks. Every ready task
//! starts at once, up to the parallel limit; a task that fails for good
//! blocks what depends on it while independent branches finish; a cancel
//! stops every attempt. The engine's loop alone owns the state: attempts
//! ([`crate::step`]) report to it, and it writes the state after every
//! round of transitions — before it dispatches what they made ready — and
//! stops dispatching the moment a write fails. A runner's notice that an
//! attempt's run is about to start is written at once, before the run
//! starts: the state always names every run that may be going on.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use moat_engine::Usage;
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinError};
use tokio_util::sync::CancellationToken;

use crate::definition::{Task, Workflow};
use crate::events::WorkflowEvent;
use crate::hooks::Hooks;
use crate::runner::{Noted, NotedWhat, RunNotice, TaskRunner};
use crate::state::{self, State, StateError, StateFile, TaskState, TaskStatus, WorkflowStatus};
use crate::step::{Emit, Step, StepReport, Verdict};

/// How long stopped attempts get to end on their own before they are
/// dropped (their runs and commands killed).
const STOP_GRACE: Duration = Duration::from_secs(30);

/// How a run of the engine begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// From the beginning. A state left unfinished by an earlier run is
    /// refused unless `discard`.
    Fresh {
        /// Start over even when an earlier run did not finish.
        discard: bool,
    },
    /// Where the state says: completed tasks are skipped, the rest run.
    /// A state written for another version of the file is refused unless
    /// `force`.
    Resume {
        /// Resume though the file changed.
        force: bool,
    },
}

/// What the engine is told besides the workflow.
pub struct Settings {
    /// How many attempts may run at once (at least 1).
    pub max_parallel: usize,
    /// Cancelled to stop the workflow (Ctrl-C, `moat cancel`).
    pub cancel: CancellationToken,
    /// The workflow's record in the run store, if it has one.
    pub run: Option<String>,
    /// Receives its events.
    pub emit: Emit,
}

/// Why a workflow could not run, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    /// Its state could not be read, locked or written. A write failure is
    /// critical: nothing more is dispatched.
    #[error("{0}")]
    State(#[from] StateError),
    /// `run` found an unfinished earlier run.
    #[error(
        "an earlier run of this workflow did not finish ({path}): `moat workflow resume` goes on from it, --fresh starts over"
    )]
    Unfinished {
        /// The state file.
        path: String,
    },
    /// `resume` found no state.
    #[error(
        "this workflow has not run here ({path} does not exist): start it with `moat workflow run`"
    )]
    NothingToResume {
        /// The state file.
        path: String,
    },
    /// The file changed since the state was written.
    #[error(
        "the workflow file changed since its state was written ({path}); resume anyway with --force, or start over with `moat workflow run --fresh`"
    )]
    Changed {
        /// The state file.
        path: String,
    },
    /// Its own record could not be made where runs are kept.
    #[error("cannot record the workflow: {0}")]
    Record(String),
    /// A task cannot run at all.
    #[error("task {task}: {reason}")]
    Unrunnable {
        /// The task.
        task: String,
        /// Why.
        reason: String,
    },
}

/// How a run of the engine ended.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The workflow's status.
    pub status: WorkflowStatus,
    /// Its final state.
    pub state: State,
}

/// Runs workflows through a runner, with hooks.
pub struct Engine {
    workflow: Arc<Workflow>,
    runner: Arc<dyn TaskRunner>,
    hooks: Arc<Hooks>,
}

impl Engine {
    /// An engine for `workflow`, dispatching through `runner`, with `hooks`
    /// (the file's commands and any callbacks, see [`Hooks`]).
    pub fn new(workflow: Workflow, runner: Arc<dyn TaskRunner>, hooks: Hooks) -> Self {
        Self {
            workflow: Arc::new(workflow),
            runner,
            hooks: Arc::new(hooks),
        }
    }

    /// Takes the workflow's state for a run that begins as `start`: locks
    /// it against other processes, reads it, and checks that every task
    /// left to run can run. Nothing runs and nothing is written yet.
    pub async fn open(&self, start: Start) -> Result<Opened<'_>, WorkflowError> {
        let file = StateFile::open(&self.workflow)?;
        let path = file.path().display().to_string();
        let state = match (start, file.load()?) {
            (Start::Fresh { discard: false }, Some(old))
                if old.status != WorkflowStatus::Completed =>
            {
                return Err(WorkflowError::Unfinished { path });
            }
            (Start::Fresh { .. }, _) => State::new(&self.workflow),
            (Start::Resume { .. }, None) => return Err(WorkflowError::NothingToResume { path }),
            (Start::Resume { force }, Some(old)) => {
                if old.file_sha256 != self.workflow.hash && !force {
                    return Err(WorkflowError::Changed { path });
                }
                resumed(old, &self.workflow)
            }
        };
        for task in &self.workflow.tasks {
            if state.tasks[&task.id].status != TaskStatus::Completed
                && let Err(reason) = self.runner.check(task).await
            {
                return Err(WorkflowError::Unrunnable {
                    task: task.id.clone(),
                    reason,
                });
            }
        }
        Ok(Opened {
            engine: self,
            state,
            file,
        })
    }

    /// Opens the workflow ([`Engine::open`]) and runs it.
    pub async fn run(&self, start: Start, settings: Settings) -> Result<Summary, WorkflowError> {
        self.open(start).await?.run(settings).await
    }
}

/// A workflow whose state is taken, ready to run.
pub struct Opened<'a> {
    engine: &'a Engine,
    state: State,
    file: StateFile,
}

impl Opened<'_> {
    /// The tasks an earlier run completed: they are skipped.
    pub fn completed(&self) -> Vec<String> {
        self.state
            .tasks
            .iter()
            .filter(|(_, task)| task.status == TaskStatus::Completed)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Runs the workflow to its end (or its cancel).
    pub async fn run(self, settings: Settings) -> Result<Summary, WorkflowError> {
        let mut round = Round::new(self.engine, self.state, self.file, settings);
        round.drive().await
    }
}

/// The state of a workflow resumed: completed tasks stay, the rest run
/// again (from their first attempt, their loops from the iteration after
/// the last one done). A task whose run was in flight keeps it: its
/// attempt re-attaches to that run when the runner can.
fn resumed(mut old: State, workflow: &Workflow) -> State {
    let mut tasks = std::collections::BTreeMap::new();
    for task in &workflow.tasks {
        let mut state = old
            .tasks
            .remove(&task.id)
            .unwrap_or_else(TaskState::pending);
        match state.status {
            TaskStatus::Completed => state.run = None,
            TaskStatus::Running => {
                state.status = TaskStatus::Pending;
                state.error = Some(match &state.run {
                    Some(run) => format!("interrupted; its run {run} is followed again on resume"),
                    None => "interrupted; run again on resume".into(),
                });
            }
            TaskStatus::Failed => {
                state.status = TaskStatus::Pending;
                state.completed_at = None;
                state.run = None;
            }
            // Left pending with a run in flight: stopped before its attempt
            // reported (its run may go on).
            TaskStatus::Pending => state.completed_at = None,
        }
        state.attempts = 0;
        state.blocked_by = None;
        tasks.insert(task.id.clone(), state);
    }
    State {
        tasks,
        status: WorkflowStatus::Running,
        ended_at: None,
        file_sha256: workflow.hash.clone(),
        ..old
    }
}

/// An attempt on its way.
struct Running {
    abort: CancellationToken,
    handle: AbortHandle,
    /// Which dispatch it is: its runner's notices name it.
    serial: u64,
}

/// One run of the engine: the state, and the attempts in flight.
struct Round<'a> {
    engine: &'a Engine,
    state: State,
    file: StateFile,
    settings: Settings,
    tasks: HashMap<String, Arc<Task>>,
    dependents: HashMap<String, Vec<String>>,
    running: HashMap<String, Running>,
    /// Tasks due again soon (a retry's backoff).
    backoff: HashMap<String, Duration>,
    stopping: Option<Stop>,
    started: Instant,
    /// Dispatches so far: each attempt's serial.
    dispatched: u64,
    /// Runners' notices of runs about to start, and where attempts send
    /// them.
    notices: mpsc::UnboundedReceiver<Noted>,
    notify: mpsc::UnboundedSender<Noted>,
}

/// What the engine's loop waits for.
enum Wake {
    /// The workflow is cancelled.
    Cancelled,
    /// An attempt ended.
    Settled(String, Result<StepReport, JoinError>),
    /// A runner is about to start a run.
    Noticed(Noted),
    /// No attempt is in flight.
    Idle,
    /// Stopped attempts did not end within the grace.
    Overstayed,
}

/// Why the engine stops dispatching.
enum Stop {
    Cancelled,
    StateFailed(StateError),
}

type InFlight =
    FuturesUnordered<futures::future::BoxFuture<'static, (String, Result<StepReport, JoinError>)>>;

impl<'a> Round<'a> {
    fn new(engine: &'a Engine, state: State, file: StateFile, settings: Settings) -> Self {
        let tasks: HashMap<String, Arc<Task>> = engine
            .workflow
            .tasks
            .iter()
            .map(|task| (task.id.clone(), Arc::new(task.clone())))
            .collect();
        let mut dependents: HashMap<String, Vec<String>> = HashMap::new();
        for task in &engine.workflow.tasks {
            for dependency in &task.depends_on {
                dependents
                    .entry(dependency.clone())
                    .or_default()
                    .push(task.id.clone());
            }
        }
        let (notify, notices) = mpsc::unbounded_channel();
        Self {
            engine,
            state,
            file,
            settings,
            tasks,
            dependents,
            running: HashMap::new(),
            backoff: HashMap::new(),
            stopping: None,
            started: Instant::now(),
            dispatched: 0,
            notices,
            notify,
        }
    }

    fn emit(&self, event: WorkflowEvent) {
        (self.settings.emit)(&event);
    }

    async fn drive(&mut self) -> Result<Summary, WorkflowError> {
        let skipped: Vec<String> = self
            .state
            .tasks
            .iter()
            .filter(|(_, task)| task.status == TaskStatus::Completed)
            .map(|(id, _)| id.clone())
            .collect();
        if let Some(run) = &self.settings.run {
            self.state.runs.push(run.clone());
        }
        self.file.save(&self.state)?;
        self.emit(WorkflowEvent::WorkflowStarted {
            workflow: self.engine.workflow.name.clone(),
            tasks: self.engine.workflow.tasks.len(),
            skipped,
            run: self.settings.run.clone(),
        });
        let mut in_flight: InFlight = FuturesUnordered::new();
        let mut dirty = false;
        loop {
            // A cancel that came while attempts ended: nothing more starts
            // (an interrupted task is pending, and would look ready).
            if self.stopping.is_none() && self.settings.cancel.is_cancelled() {
                self.stop(Stop::Cancelled);
            }
            if self.stopping.is_none() {
                let steps = self.dispatchable();
                dirty |= !steps.is_empty();
                if dirty {
                    dirty = false;
                    if let Err(error) = self.file.save(&self.state) {
                        tracing::error!("cannot write the workflow's state: {error}");
                        self.stop(Stop::StateFailed(error));
                    }
                }
                if self.stopping.is_none() {
                    for (id, step, backoff) in steps {
                        self.spawn(&mut in_flight, id, step, backoff);
                    }
                } else {
                    // Marked running but never started: they are pending.
                    for (id, _, _) in steps {
                        self.task_mut(&id).status = TaskStatus::Pending;
                    }
                }
            }
            let (id, report) = match self.wake(&mut in_flight).await {
                Wake::Idle => break,
                Wake::Overstayed => {
                    self.abandon();
                    break;
                }
                Wake::Cancelled => {
                    self.stop(Stop::Cancelled);
                    continue;
                }
                Wake::Noticed(noted) => {
                    self.noticed(noted);
                    continue;
                }
                Wake::Settled(id, report) => (id, report),
            };
            self.settle(&id, report);
            dirty = true;
            // Everything else already done joins this round's write.
            while let Some(Some((id, report))) = in_flight.next().now_or_never() {
                self.settle(&id, report);
            }
        }
        self.finish()
    }

    /// The next thing to act on. While stopping, attempts get
    /// [`STOP_GRACE`] to end; notices are still answered (with a no), so a
    /// runner waiting on one ends too.
    async fn wake(&mut self, in_flight: &mut InFlight) -> Wake {
        if in_flight.is_empty() {
            return Wake::Idle;
        }
        let settled = |next: Option<(String, Result<StepReport, JoinError>)>| match next {
            Some((id, report)) => Wake::Settled(id, report),
            None => Wake::Idle,
        };
        if self.stopping.is_some() {
            let grace = tokio::time::sleep(STOP_GRACE);
            tokio::pin!(grace);
            return tokio::select! {
                next = in_flight.next() => settled(next),
                Some(noted) = self.notices.recv() => Wake::Noticed(noted),
                () = &mut grace => Wake::Overstayed,
            };
        }
        tokio::select! {
            biased;
            () = self.settings.cancel.cancelled() => Wake::Cancelled,
            Some(noted) = self.notices.recv() => Wake::Noticed(noted),
            next = in_flight.next() => settled(next),
        }
    }

    /// Runners' notices of runs about to start (this one and any others
    /// waiting): written in the state at once, then each runner is told
    /// it may start its run. A notice from an attempt that no longer runs,
    /// or while stopping, is refused: that run must not start.
    /// A notice of a run waiting for an answer is said at once
    /// ([`WorkflowEvent::TaskWaiting`]).
    fn noticed(&mut self, first: Noted) {
        let mut batch = vec![first];
        while let Ok(noted) = self.notices.try_recv() {
            batch.push(noted);
        }
        let mut accepted = Vec::new();
        for noted in batch {
            let current = self
                .running
                .get(&noted.task)
                .is_some_and(|running| running.serial == noted.serial);
            let written = match noted.what {
                NotedWhat::Starting(written) => written,
                NotedWhat::Waiting { request, reason } => {
                    if current {
                        self.emit(WorkflowEvent::TaskWaiting {
                            task: noted.task,
                            run: noted.run,
                            request,
                            reason,
                        });
                    }
                    continue;
                }
            };
            if self.stopping.is_some() || !current {
                let why = if current {
                    "the workflow is stopping"
                } else {
                    "its attempt has ended"
                };
                let _ = written.send(Err(why.into()));
                continue;
            }
            self.task_mut(&noted.task).run = Some(noted.run.clone());
            accepted.push((noted.task, written));
        }
        if accepted.is_empty() {
            return;
        }
        match self.file.save(&self.state) {
            Ok(()) => {
                for (_, written) in accepted {
                    let _ = written.send(Ok(()));
                }
            }
            Err(error) => {
                tracing::error!("cannot write the workflow's state: {error}");
                let reason = error.to_string();
                for (task, written) in accepted {
                    self.task_mut(&task).run = None;
                    let _ = written.send(Err(reason.clone()));
                }
                self.stop(Stop::StateFailed(error));
            }
        }
    }

    fn task_mut(&mut self, id: &str) -> &mut TaskState {
        self.state
            .tasks
            .get_mut(id)
            .expect("every task has a state")
    }

    /// The tasks ready to start now, marked running.
    fn dispatchable(&mut self) -> Vec<(String, Step, Duration)> {
        let room = self
            .settings
            .max_parallel
            .max(1)
            .saturating_sub(self.running.len());
        // Runs left in flight first: they are going on anyway.
        let not_in_flight = |task: &&Task| self.state.tasks[&task.id].run.is_none();
        let mut candidates: Vec<&Task> = self.engine.workflow.tasks.iter().collect();
        candidates.sort_by_key(not_in_flight);
        let ready: Vec<String> = candidates
            .into_iter()
            .filter(|task| {
                let state = &self.state.tasks[&task.id];
                state.status == TaskStatus::Pending
                    && state.blocked_by.is_none()
                    && !self.running.contains_key(&task.id)
                    && task
                        .depends_on
                        .iter()
                        .all(|d| self.state.tasks[d].status == TaskStatus::Completed)
            })
            .take(room)
            .map(|task| task.id.clone())
            .collect();
        ready
            .into_iter()
            .map(|id| {
                let task = self.tasks[&id].clone();
                let upstream_runs = task
                    .depends_on
                    .iter()
                    .filter_map(|d| self.state.tasks[d].runs.last().cloned())
                    .collect();
                let dependencies = task
                    .depends_on
                    .iter()
                    .map(|d| {
                        (
                            d.clone(),
                            self.state.tasks[d].handover.clone().unwrap_or_default(),
                        )
                    })
                    .collect();
                let state = self
                    .state
                    .tasks
                    .get_mut(&id)
                    .expect("every task has a state");
                state.status = TaskStatus::Running;
                state.attempts = state.attempts.saturating_add(1);
                if state.started_at.is_none() {
                    state.started_at = Some(state::now());
                }
                let previous = if state.iterations > 0 && task.repeat.is_some() {
                    state.handover.clone()
                } else {
                    None
                };
                let step = Step {
                    workflow: self.engine.workflow.clone(),
                    task,
                    runner: self.engine.runner.clone(),
                    hooks: self.engine.hooks.clone(),
                    emit: self.settings.emit.clone(),
                    attempt: state.attempts,
                    // Counts read from a state file are not trusted not to
                    // overflow.
                    iteration: state.iterations.saturating_add(1),
                    dependencies,
                    previous,
                    abort: self.settings.cancel.child_token(),
                    reattach: state.run.clone(),
                    // Its serial is set when it is spawned.
                    notice: RunNotice::ignored(),
                    upstream_runs,
                };
                let backoff = self.backoff.remove(&id).unwrap_or_default();
                (id, step, backoff)
            })
            .collect()
    }

    fn spawn(&mut self, in_flight: &mut InFlight, id: String, mut step: Step, backoff: Duration) {
        self.dispatched += 1;
        let serial = self.dispatched;
        step.notice = RunNotice::new(id.clone(), serial, self.notify.clone());
        self.emit(WorkflowEvent::TaskStarted {
            task: id.clone(),
            attempt: step.attempt,
            iteration: step.iteration,
        });
        let abort = step.abort.clone();
        let handle = tokio::spawn(step.run(backoff));
        self.running.insert(
            id.clone(),
            Running {
                abort,
                handle: handle.abort_handle(),
                serial,
            },
        );
        in_flight.push(handle.map(move |report| (id, report)).boxed());
    }

    /// Applies an attempt's report to the state.
    fn settle(&mut self, id: &str, report: Result<StepReport, JoinError>) {
        self.running.remove(id);
        let report = match report {
            Ok(report) => report,
            Err(error) => StepReport {
                verdict: if error.is_cancelled() {
                    Verdict::Cancelled
                } else {
                    Verdict::Failed {
                        reason: "its attempt panicked (a bug in moat or in a hook; see the log)"
                            .into(),
                    }
                },
                run: None,
                usage: Usage::default(),
                duration: Duration::ZERO,
            },
        };
        let state = self.task_mut(id);
        // The attempt ended: its run is no longer in flight.
        state.run = None;
        state.runs.extend(report.run);
        state.usage.add(&report.usage);
        state.duration_ms = state
            .duration_ms
            .saturating_add(u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX));
        match report.verdict {
            Verdict::Completed { handover } => {
                let task = &self.tasks[id];
                let outputs = task.produces().cloned().collect();
                let state = self.task_mut(id);
                state.status = TaskStatus::Completed;
                state.completed_at = Some(state::now());
                state.outputs = outputs;
                state.iterations = state.iterations.saturating_add(1);
                state.handover = Some(handover);
                state.error = None;
                let (runs, duration_ms, usage) =
                    (state.runs.clone(), state.duration_ms, state.usage);
                self.emit(WorkflowEvent::TaskCompleted {
                    task: id.to_owned(),
                    runs,
                    duration_ms,
                    usage,
                });
            }
            Verdict::NextIteration { handover } => {
                state.status = TaskStatus::Pending;
                state.iterations = state.iterations.saturating_add(1);
                state.attempts = 0;
                state.handover = Some(handover);
                let iteration = state.iterations;
                self.emit(WorkflowEvent::LoopIteration {
                    task: id.to_owned(),
                    iteration,
                });
            }
            Verdict::Retry { reason, backoff } => {
                state.status = TaskStatus::Pending;
                state.error = Some(reason.clone());
                let attempt = state.attempts;
                self.backoff.insert(id.to_owned(), backoff);
                self.emit(WorkflowEvent::TaskRetrying {
                    task: id.to_owned(),
                    attempt,
                    reason,
                    backoff_ms: backoff.as_millis() as u64,
                });
            }
            Verdict::Failed { reason } => {
                state.status = TaskStatus::Failed;
                state.completed_at = Some(state::now());
                state.error = Some(reason.clone());
                self.emit(WorkflowEvent::TaskFailed {
                    task: id.to_owned(),
                    reason,
                });
                self.block_dependents(id);
            }
            Verdict::Cancelled => {
                state.status = TaskStatus::Pending;
                state.error = Some("interrupted; run again on resume".into());
                self.emit(WorkflowEvent::TaskInterrupted {
                    task: id.to_owned(),
                });
            }
        }
    }

    /// Everything downstream of `failed` is blocked.
    fn block_dependents(&mut self, failed: &str) {
        let mut queue = vec![failed.to_owned()];
        let mut seen = HashSet::new();
        while let Some(id) = queue.pop() {
            for dependent in self.dependents.get(&id).cloned().unwrap_or_default() {
                if !seen.insert(dependent.clone()) {
                    continue;
                }
                let state = self.task_mut(&dependent);
                if state.status == TaskStatus::Pending && state.blocked_by.is_none() {
                    state.blocked_by = Some(failed.to_owned());
                    self.emit(WorkflowEvent::TaskBlocked {
                        task: dependent.clone(),
                        by: failed.to_owned(),
                    });
                }
                queue.push(dependent);
            }
        }
    }

    /// Stops dispatching and aborts every attempt.
    fn stop(&mut self, why: Stop) {
        if self.stopping.is_none() {
            self.stopping = Some(why);
        }
        for running in self.running.values() {
            running.abort.cancel();
        }
    }

    /// Attempts that did not end within the grace: dropped.
    fn abandon(&mut self) {
        let ids: Vec<String> = self.running.keys().cloned().collect();
        for id in ids {
            if let Some(running) = self.running.remove(&id) {
                running.handle.abort();
            }
            let state = self.task_mut(&id);
            state.status = TaskStatus::Pending;
            state.error = Some("interrupted; run again on resume".into());
            self.emit(WorkflowEvent::TaskInterrupted { task: id });
        }
    }

    fn finish(&mut self) -> Result<Summary, WorkflowError> {
        let count = |status| {
            self.state
                .tasks
                .values()
                .filter(|t| t.status == status)
                .count()
        };
        let (completed, failed) = (count(TaskStatus::Completed), count(TaskStatus::Failed));
        let pending = self.state.tasks.len() - completed - failed;
        let (status, reason) = match &self.stopping {
            Some(Stop::StateFailed(error)) => (
                WorkflowStatus::Failed,
                Some(format!(
                    "critical: cannot write the workflow's state: {error}; nothing more was dispatched"
                )),
            ),
            Some(Stop::Cancelled) => (WorkflowStatus::Cancelled, Some("cancelled".into())),
            None if failed > 0 || pending > 0 => (
                WorkflowStatus::Failed,
                Some(format!("{failed} task(s) failed, {pending} did not run")),
            ),
            None => (WorkflowStatus::Completed, None),
        };
        self.state.status = status;
        self.state.ended_at = Some(state::now());
        let saved = match self.stopping.take() {
            Some(Stop::StateFailed(error)) => Err(error),
            _ => self.file.save(&self.state),
        };
        let reason = match &saved {
            Err(error) if reason.is_none() || status != WorkflowStatus::Failed => Some(format!(
                "critical: cannot write the workflow's state: {error}"
            )),
            _ => reason,
        };
        self.emit(WorkflowEvent::WorkflowDone {
            status: if saved.is_err() {
                WorkflowStatus::Failed
            } else {
                status
            },
            completed,
            failed,
            pending,
            duration_ms: self.started.elapsed().as_millis() as u64,
            reason,
        });
        saved?;
        Ok(Summary {
            status,
            state: self.state.clone(),
        })
    }
}
