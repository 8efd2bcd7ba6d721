//! One attempt of one task, from its backoff to its verdict: pre-task
//! hooks, context, the runner, the saved answer, the handover, the outputs,
//! post-task hooks, the loop's condition and, when the task has failed for
//! good, its on-failure hooks. It owns no state: it reports to the engine,
//! which alone writes the state.
//!
//! An attempt resumed with its run still in flight (a cluster's, whose
//! submitter was killed) re-attaches to that run when the runner can: its
//! pre-task hooks ran and its prompt was assembled before the run started,
//! so neither happens again; everything after the run — the saved answer,
//! the handover, the outputs, post-task hooks, the loop's condition,
//! retries and on-failure hooks — happens as for any attempt.

use std::sync::Arc;
use std::time::{Duration, Instant};

use moat_engine::Usage;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::context::{self, Handovers};
use crate::definition::{OnMax, Task, Until, Workflow};
use crate::events::WorkflowEvent;
use crate::handover;
use crate::hooks::{HookEvent, HookPoint, Hooks, run_command};
use crate::runner::{AttemptStatus, Reattach, RunNotice, TaskDispatch, TaskReport, TaskRunner};
use crate::template::Values;

/// Receives a workflow's events.
pub type Emit = Arc<dyn Fn(&WorkflowEvent) + Send + Sync>;

/// How long a loop's check command may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(600);

/// Everything an attempt needs, owned: it runs on a task of its own.
pub struct Step {
    pub workflow: Arc<Workflow>,
    pub task: Arc<Task>,
    pub runner: Arc<dyn TaskRunner>,
    pub hooks: Arc<Hooks>,
    pub emit: Emit,
    pub attempt: u32,
    pub iteration: u32,
    /// The handovers of the tasks it depends on, in `depends_on` order.
    pub dependencies: Vec<(String, Map<String, Value>)>,
    /// Its own from the previous iteration.
    pub previous: Option<Map<String, Value>>,
    pub abort: CancellationToken,
    /// The run an earlier moat left in flight for it, to re-attach to.
    pub reattach: Option<String>,
    /// Where the runner tells the engine its run before starting it.
    pub notice: RunNotice,
    /// The last run of each task it depends on.
    pub upstream_runs: Vec<String>,
}

/// What became of an attempt.
#[derive(Debug)]
pub enum Verdict {
    /// The task is done.
    Completed { handover: Map<String, Value> },
    /// Its loop goes on with the next iteration.
    NextIteration { handover: Map<String, Value> },
    /// The attempt failed; another follows after `backoff`.
    Retry { reason: String, backoff: Duration },
    /// The task failed for good (its on-failure hooks have run).
    Failed { reason: String },
    /// Stopped by the abort.
    Cancelled,
}

/// The attempt's report to the engine.
pub struct StepReport {
    pub verdict: Verdict,
    pub run: Option<String>,
    pub usage: Usage,
    pub duration: Duration,
}

/// How an attempt that did not succeed failed.
enum Failure {
    /// Another attempt may fix it.
    Retryable(String),
    /// It will not be better next time (a pre-task hook said no, the
    /// context cannot be assembled, the loop ran out).
    Final(String),
    /// Stopped by the abort.
    Cancelled,
}

impl Step {
    /// Runs the attempt, waiting `backoff` first.
    pub async fn run(self, backoff: Duration) -> StepReport {
        let started = Instant::now();
        if !backoff.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = self.abort.cancelled() => return self.report(Verdict::Cancelled, None, Usage::default(), started),
            }
        }
        let mut run = None;
        let mut usage = Usage::default();
        let outcome = self.attempt(&mut run, &mut usage).await;
        let verdict = match outcome {
            Ok(verdict) => verdict,
            Err(Failure::Cancelled) => Verdict::Cancelled,
            Err(Failure::Retryable(reason)) if self.attempt <= self.task.retries => {
                Verdict::Retry {
                    reason,
                    backoff: self.task.backoff_before(self.attempt + 1),
                }
            }
            Err(Failure::Retryable(reason) | Failure::Final(reason)) => {
                self.failed(&reason, run.clone()).await;
                Verdict::Failed { reason }
            }
        };
        let verdict = match verdict {
            Verdict::Failed { reason } if reason.is_empty() => Verdict::Failed {
                reason: "failed".into(),
            },
            other => other,
        };
        self.report(verdict, run, usage, started)
    }

    fn report(
        &self,
        verdict: Verdict,
        run: Option<String>,
        usage: Usage,
        started: Instant,
    ) -> StepReport {
        StepReport {
            verdict,
            run,
            usage,
            duration: started.elapsed(),
        }
    }

    fn event(&self, hook: HookPoint) -> HookEvent {
        HookEvent {
            hook,
            workflow: self.workflow.name.clone(),
            task: self.task.id.clone(),
            attempt: self.attempt,
            iteration: self.iteration,
            run: None,
            answer: None,
            handover: None,
            reason: None,
        }
    }

    /// `future`, unless the abort comes first.
    async fn unless_aborted<T>(&self, future: impl Future<Output = T>) -> Result<T, Failure> {
        tokio::select! {
            value = future => Ok(value),
            () = self.abort.cancelled() => Err(Failure::Cancelled),
        }
    }

    /// The dispatch of this attempt with `prompt`.
    fn dispatch(&self, prompt: String) -> TaskDispatch {
        TaskDispatch {
            workflow: self.workflow.name.clone(),
            task: self.task.clone(),
            attempt: self.attempt,
            iteration: self.iteration,
            prompt,
            abort: self.abort.clone(),
            notice: self.notice.clone(),
            upstream_runs: self.upstream_runs.clone(),
        }
    }

    /// The report of the run an earlier moat left in flight, followed to
    /// its end; `None` when there is none or the runner cannot follow it.
    async fn reattached(&self) -> Option<TaskReport> {
        let run = self.reattach.as_deref()?;
        match self
            .runner
            .reattach(run, self.dispatch(String::new()))
            .await
        {
            Reattach::Following(report) => {
                tracing::info!(task = %self.task.id, run, "re-attached to the run in flight");
                (self.emit)(&WorkflowEvent::TaskReattached {
                    task: self.task.id.clone(),
                    run: run.to_owned(),
                    attempt: self.attempt,
                    iteration: self.iteration,
                });
                Some(report.await)
            }
            Reattach::Cannot(why) => {
                tracing::info!(task = %self.task.id, run, "cannot re-attach to its run ({why}): running it again");
                None
            }
        }
    }

    /// A fresh run of the attempt: its pre-task hooks, its context, the
    /// runner.
    async fn fresh(&self) -> Result<TaskReport, Failure> {
        let pre = self.event(HookPoint::PreTask);
        if let Err(failure) = self.unless_aborted(self.hooks.run(&pre)).await? {
            self.hook_failed(&pre, &failure.hook, &failure.reason);
            return Err(Failure::Final(format!(
                "the pre-task hook {} refused it: {}",
                failure.hook, failure.reason
            )));
        }
        let values = Values {
            task: &self.task.id,
            workflow: &self.workflow.name,
            attempt: self.attempt,
            iteration: self.iteration,
        };
        let handovers = Handovers {
            dependencies: self
                .dependencies
                .iter()
                .map(|(id, h)| (id.as_str(), h))
                .collect(),
            previous: self.previous.as_ref(),
        };
        let assembled = context::assemble(&self.workflow, &self.task, &handovers, values)
            .map_err(Failure::Final)?;
        for truncation in assembled.truncations {
            (self.emit)(&WorkflowEvent::ContextTruncated {
                task: self.task.id.clone(),
                piece: truncation.piece,
                shown: truncation.shown,
                total: truncation.total,
            });
        }
        Ok(self.runner.run(self.dispatch(assembled.prompt)).await)
    }

    async fn attempt(
        &self,
        run: &mut Option<String>,
        usage: &mut Usage,
    ) -> Result<Verdict, Failure> {
        let report = match self.reattached().await {
            Some(report) => report,
            None => self.fresh().await?,
        };
        run.clone_from(&report.run);
        *usage = report.usage;
        match report.status {
            AttemptStatus::Completed => {}
            AttemptStatus::Failed { reason } => return Err(Failure::Retryable(reason)),
            AttemptStatus::Cancelled => return Err(Failure::Cancelled),
        }
        if self.abort.is_cancelled() {
            return Err(Failure::Cancelled);
        }
        if let Some(path) = &self.task.save_answer {
            crate::project::write(&self.workflow.project, path, &report.answer).map_err(|e| {
                Failure::Retryable(format!("cannot save the answer to {}: {e}", path.display()))
            })?;
        }
        let handover = handover::extract(&report.answer)
            .map_err(Failure::Retryable)?
            .unwrap_or_default();
        if let Some(missing) = self
            .task
            .outputs
            .iter()
            .find(|p| !self.workflow.project.join(p).is_file())
        {
            return Err(Failure::Retryable(format!(
                "it did not produce {}, one of its outputs",
                missing.display()
            )));
        }
        let mut post = self.event(HookPoint::PostTask);
        post.run.clone_from(run);
        post.answer = Some(report.answer.clone());
        post.handover = Some(Value::Object(handover.clone()));
        if let Err(failure) = self.unless_aborted(self.hooks.run(&post)).await? {
            self.hook_failed(&post, &failure.hook, &failure.reason);
            return Err(Failure::Retryable(format!(
                "the post-task hook {} refused it: {}",
                failure.hook, failure.reason
            )));
        }
        let Some(repeat) = &self.task.repeat else {
            return Ok(Verdict::Completed { handover });
        };
        let held = match &repeat.until {
            Until::Handover { pointer, equals } => {
                Value::Object(handover.clone()).pointer(pointer) == Some(equals)
            }
            Until::Command(command, sandbox) => {
                let mut check = post.clone();
                check.answer = None;
                let stdin = serde_json::to_vec(&check).unwrap_or_default();
                self.unless_aborted(run_command(
                    command,
                    sandbox,
                    &self.workflow.project,
                    "loop-check",
                    &check,
                    &stdin,
                    CHECK_TIMEOUT,
                ))
                .await?
                .is_ok()
            }
        };
        let last = self.iteration >= repeat.max_iterations;
        if !held && !last {
            return Ok(Verdict::NextIteration { handover });
        }
        let reason = if held { "condition" } else { "max_iterations" };
        (self.emit)(&WorkflowEvent::LoopExit {
            task: self.task.id.clone(),
            iterations: self.iteration,
            reason: reason.into(),
        });
        let mut exit = post;
        exit.hook = HookPoint::OnLoopExit;
        exit.reason = Some(reason.into());
        for failure in self.unless_aborted(self.hooks.run_all(&exit)).await? {
            self.hook_failed(&exit, &failure.hook, &failure.reason);
        }
        match (held, repeat.on_max) {
            (true, _) | (false, OnMax::Complete) => Ok(Verdict::Completed { handover }),
            (false, OnMax::Fail) => Err(Failure::Final(format!(
                "its loop ran {} iterations without its condition holding",
                self.iteration
            ))),
        }
    }

    /// The task failed for good: its on-failure hooks, every one.
    async fn failed(&self, reason: &str, run: Option<String>) {
        let mut event = self.event(HookPoint::OnFailure);
        event.reason = Some(reason.to_owned());
        event.run = run;
        for failure in self.hooks.run_all(&event).await {
            self.hook_failed(&event, &failure.hook, &failure.reason);
        }
    }

    fn hook_failed(&self, event: &HookEvent, hook: &str, reason: &str) {
        (self.emit)(&WorkflowEvent::HookFailed {
            task: self.task.id.clone(),
            hook: event.hook.as_str().into(),
            command: hook.to_owned(),
            reason: reason.to_owned(),
        });
    }
}
