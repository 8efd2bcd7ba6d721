//! A [`TaskRunner`] that makes no model call: it records every dispatch
//! and answers as scripted — the seed's MockRuntimeAdapter. For tests of
//! workflows and of the engine itself.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::FutureExt;
use moat_engine::Usage;
use moat_runs::RunId;

use crate::runner::{AttemptStatus, Reattach, TaskDispatch, TaskReport, TaskRunner};

/// What the mock does for one attempt.
#[derive(Debug, Clone)]
pub enum Scripted {
    /// Completes with this answer (without writing the task's outputs).
    Answer(String),
    /// Completes with the default answer, writing the task's outputs.
    Succeed,
    /// Fails with this reason.
    Fail(String),
    /// Waits until aborted.
    Hang,
}

/// One dispatch the mock received.
#[derive(Debug, Clone)]
pub struct MockCall {
    /// The task's id.
    pub task: String,
    /// The attempt.
    pub attempt: u32,
    /// The iteration.
    pub iteration: u32,
    /// The assembled prompt (empty for a re-attached attempt).
    pub prompt: String,
    /// The attempt's run, when the mock gives runs ([`MockRunner::with_runs`]).
    pub run: Option<String>,
    /// Whether it followed a run an earlier moat left in flight rather
    /// than start one.
    pub reattached: bool,
    /// When it started.
    pub started: Instant,
    /// When it ended.
    pub ended: Instant,
}

/// The mock runner.
pub struct MockRunner {
    project: PathBuf,
    delay: Duration,
    /// Whether each attempt has a run, noticed to the engine first.
    runs: bool,
    script: Mutex<HashMap<String, VecDeque<Scripted>>>,
    /// Runs going on elsewhere, which a re-attach can follow.
    in_flight: Mutex<HashMap<String, Scripted>>,
    calls: Arc<Mutex<Vec<MockCall>>>,
}

impl MockRunner {
    /// A mock for the workflow whose project is `project` (where it writes
    /// tasks' outputs); each attempt takes `delay`.
    pub fn new(project: impl Into<PathBuf>, delay: Duration) -> Self {
        Self {
            project: project.into(),
            delay,
            runs: false,
            script: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(HashMap::new()),
            calls: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Gives each attempt a run, as a cluster would: its id is told to the
    /// engine ([`crate::RunNotice::starting`]) before the attempt starts,
    /// and reported.
    pub fn with_runs(mut self) -> Self {
        self.runs = true;
        self
    }

    /// What the next attempts of `task` do, in order; once they are used,
    /// attempts succeed.
    pub fn script(&self, task: &str, steps: impl IntoIterator<Item = Scripted>) {
        self.script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(task.to_owned())
            .or_default()
            .extend(steps);
    }

    /// Run `run`, started by an earlier moat, goes on elsewhere and ends
    /// as `outcome`: a re-attach follows it. Any other run cannot be
    /// re-attached to.
    pub fn in_flight(&self, run: &str, outcome: Scripted) {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(run.to_owned(), outcome);
    }

    /// The dispatches so far, in the order they ended.
    pub fn calls(&self) -> Vec<MockCall> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The answer of a successful attempt: it says which task and
    /// iteration it was and hands that over.
    pub fn default_answer(task: &str, iteration: u32) -> String {
        format!(
            "{task} is done.\n\n```handover\n{{\"task\": \"{task}\", \"iteration\": {iteration}}}\n```\n"
        )
    }
}

/// Plays `step` for `dispatch`, after `delay`: how it ended and its answer.
async fn play(
    project: &Path,
    delay: Duration,
    step: Scripted,
    dispatch: &TaskDispatch,
) -> (AttemptStatus, String) {
    let waited = tokio::select! {
        () = tokio::time::sleep(delay) => true,
        () = dispatch.abort.cancelled() => false,
    };
    let hang = matches!(step, Scripted::Hang);
    if hang {
        dispatch.abort.cancelled().await;
    }
    if !waited || hang {
        return (AttemptStatus::Cancelled, String::new());
    }
    match step {
        Scripted::Answer(answer) => (AttemptStatus::Completed, answer),
        Scripted::Succeed => {
            let mut status = AttemptStatus::Completed;
            for output in &dispatch.task.outputs {
                let path = project.join(output);
                let written = path
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| {
                        std::fs::write(&path, format!("written by {}\n", dispatch.task.id))
                    });
                if let Err(e) = written {
                    status = AttemptStatus::Failed {
                        reason: format!("cannot write {}: {e}", path.display()),
                    };
                }
            }
            (
                status,
                MockRunner::default_answer(&dispatch.task.id, dispatch.iteration),
            )
        }
        Scripted::Fail(reason) => (AttemptStatus::Failed { reason }, String::new()),
        Scripted::Hang => unreachable!("handled above"),
    }
}

/// Records the call and makes its report.
fn finish(
    calls: &Mutex<Vec<MockCall>>,
    dispatch: TaskDispatch,
    (status, answer): (AttemptStatus, String),
    run: Option<String>,
    reattached: bool,
    started: Instant,
) -> TaskReport {
    calls
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(MockCall {
            task: dispatch.task.id.clone(),
            attempt: dispatch.attempt,
            iteration: dispatch.iteration,
            prompt: dispatch.prompt,
            run: run.clone(),
            reattached,
            started,
            ended: Instant::now(),
        });
    TaskReport {
        status,
        answer,
        run,
        usage: Usage::default(),
    }
}

#[async_trait::async_trait]
impl TaskRunner for MockRunner {
    async fn run(&self, dispatch: TaskDispatch) -> TaskReport {
        let started = Instant::now();
        let run = if self.runs {
            let run = RunId::new().to_string();
            if let Err(error) = dispatch.notice.starting(&run).await {
                return if dispatch.abort.is_cancelled() {
                    TaskReport::cancelled()
                } else {
                    TaskReport::failed(error.to_string())
                };
            }
            Some(run)
        } else {
            None
        };
        let step = self
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(&dispatch.task.id)
            .and_then(VecDeque::pop_front)
            .unwrap_or(Scripted::Succeed);
        let played = play(&self.project, self.delay, step, &dispatch).await;
        finish(&self.calls, dispatch, played, run, false, started)
    }

    async fn reattach(&self, run: &str, dispatch: TaskDispatch) -> Reattach {
        let outcome = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(run);
        let Some(outcome) = outcome else {
            return Reattach::Cannot(format!("no run {run} goes on"));
        };
        let (project, delay, calls) = (self.project.clone(), self.delay, self.calls.clone());
        let run = run.to_owned();
        Reattach::Following(
            async move {
                let started = Instant::now();
                let played = play(&project, delay, outcome, &dispatch).await;
                finish(&calls, dispatch, played, Some(run), true, started)
            }
            .boxed(),
        )
    }
}
