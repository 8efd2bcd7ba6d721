//! A [`TaskRunner`] that makes no model call: it records every dispatch
//! and answers as scripted — the seed's MockRuntimeAdapter. For tests of
//! workflows and of the engine itself.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use moat_engine::ResultUsage;

use crate::runner::{AttemptStatus, TaskDispatch, TaskReport, TaskRunner};

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
    /// The assembled prompt.
    pub prompt: String,
    /// When it started.
    pub started: Instant,
    /// When it ended.
    pub ended: Instant,
}

/// The mock runner.
pub struct MockRunner {
    project: PathBuf,
    delay: Duration,
    script: Mutex<HashMap<String, VecDeque<Scripted>>>,
    calls: Mutex<Vec<MockCall>>,
}

impl MockRunner {
    /// A mock for the workflow whose project is `project` (where it writes
    /// tasks' outputs); each attempt takes `delay`.
    pub fn new(project: impl Into<PathBuf>, delay: Duration) -> Self {
        Self {
            project: project.into(),
            delay,
            script: Mutex::new(HashMap::new()),
            calls: Mutex::new(Vec::new()),
        }
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

#[async_trait::async_trait]
impl TaskRunner for MockRunner {
    async fn run(&self, dispatch: TaskDispatch) -> TaskReport {
        let started = Instant::now();
        let step = self
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(&dispatch.task.id)
            .and_then(VecDeque::pop_front)
            .unwrap_or(Scripted::Succeed);
        let waited = tokio::select! {
            () = tokio::time::sleep(self.delay) => true,
            () = dispatch.abort.cancelled() => false,
        };
        let hang = matches!(step, Scripted::Hang);
        if hang {
            dispatch.abort.cancelled().await;
        }
        let (status, answer) = if !waited || hang {
            (AttemptStatus::Cancelled, String::new())
        } else {
            match step {
                Scripted::Answer(answer) => (AttemptStatus::Completed, answer),
                Scripted::Succeed => {
                    let mut status = AttemptStatus::Completed;
                    for output in &dispatch.task.outputs {
                        let path = self.project.join(output);
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
                        Self::default_answer(&dispatch.task.id, dispatch.iteration),
                    )
                }
                Scripted::Fail(reason) => (AttemptStatus::Failed { reason }, String::new()),
                Scripted::Hang => unreachable!("handled above"),
            }
        };
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(MockCall {
                task: dispatch.task.id.clone(),
                attempt: dispatch.attempt,
                iteration: dispatch.iteration,
                prompt: dispatch.prompt,
                started,
                ended: Instant::now(),
            });
        TaskReport {
            status,
            answer,
            run: None,
            usage: ResultUsage::default(),
        }
    }
}
