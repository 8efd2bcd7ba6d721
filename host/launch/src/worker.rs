//! A cluster worker's jobs, executed through the launch layer: a job is
//! admitted exactly as a request to `moat serve` is — its grants, trust
//! and limits within the worker's ceiling and its parent's —, its
//! directories opened here, and the runs its component starts are
//! handed to the same workers as its children. A job with a workspace
//! gets it made here from its project, and its changes go back to the
//! workers before its `done`. The worker loop that takes jobs and records
//! their runs is the workers' own (a cluster's: `moat-cluster`); this is
//! the [`Executor`] it is given.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use moat_engine::{AgentEvent, DoneStatus, EventPayload, SettingNames, codes};
use moat_runs::{ComponentRef, Executor, Job, JobRefusal, RunId, Workers};
use moat_workspace::Workspace;
use tokio_util::sync::CancellationToken;

use crate::admit::{Asked, Ceiling};
use crate::error::LaunchError;
use crate::launcher::Launcher;
use crate::limits::AskedLimits;
use crate::resolve::Resolved;
use crate::spec::{AdapterRef, LaunchSpec};

/// Executes a worker's jobs under its ceiling.
pub struct JobExecutor {
    launcher: Launcher,
    workers: Arc<dyn Workers>,
    ceiling: Arc<Ceiling>,
    names: Arc<dyn SettingNames>,
    workspaces: PathBuf,
}

impl JobExecutor {
    /// Executes jobs with `launcher` (whose runs go to the worker's
    /// workers, where the jobs' children go) under `ceiling`, making the
    /// workspaces jobs ask for under `workspaces`; refusals are worded
    /// with `names`.
    ///
    /// # Panics
    /// When `launcher`'s runs are not handed to workers.
    pub fn new(
        launcher: Launcher,
        ceiling: Arc<Ceiling>,
        names: Arc<dyn SettingNames>,
        workspaces: PathBuf,
    ) -> Self {
        let Some(workers) = launcher.workers() else {
            panic!("a worker's launcher hands runs to its workers");
        };
        Self {
            workers,
            launcher,
            ceiling,
            names,
            workspaces,
        }
    }

    async fn resolve(&self, job: &Job, component: Option<PathBuf>) -> Result<Resolved, JobRefusal> {
        let failed = |e: &dyn std::fmt::Display| JobRefusal::Failed(e.to_string());
        let resolver = self.launcher.resolver();
        match (&job.component, component) {
            (ComponentRef::Builtin { name }, _) => resolver
                .built_in(name)
                .await
                .map_err(|e| failed(&e))?
                .ok_or_else(|| {
                    JobRefusal::Failed(format!("this worker has no built-in adapter {name}"))
                }),
            (ComponentRef::Stored { sha256 }, Some(path)) => resolver
                .file_with_hash(&path, sha256)
                .await
                .map_err(|e| failed(&e)),
            (ComponentRef::Stored { sha256 }, None) => Err(JobRefusal::Failed(format!(
                "component {sha256} was not fetched"
            ))),
        }
    }

    async fn execute(
        &self,
        job: &Job,
        component: Option<PathBuf>,
        abort: CancellationToken,
    ) -> Result<BoxStream<'static, AgentEvent>, JobRefusal> {
        let resolved = self.resolve(job, component).await?;
        let id = RunId::parse(&job.id)
            .ok_or_else(|| JobRefusal::Failed(format!("a malformed run id {:?}", job.id)))?;
        let spec = LaunchSpec {
            options: job.options.clone(),
            // Everything a job asks for is explicit: it was decided by its
            // submitter, and is checked again here.
            asked: Asked {
                grants: Some(job.grants.clone()),
                trust: Some(job.trust),
                limits: AskedLimits {
                    max_tokens: job.limits.max_tokens,
                    max_model_calls: job.limits.max_model_calls,
                    // Given exactly, but asked for by its user only these.
                    programs_asked: Some(job.asked_limits),
                    ..AskedLimits::exactly(&job.limits.to_run_limits())
                },
            },
            parent: job.parent.as_deref().and_then(RunId::parse),
            abort,
            ask: job.ask.as_ref().map(|ask| crate::Ask {
                timeout: ask.timeout_ms.map(std::time::Duration::from_millis),
                tools: ask.tools.clone(),
            }),
            names: self.names.clone(),
            ..LaunchSpec::new(
                AdapterRef::Resolved(Box::new(resolved)),
                job.prompt.clone(),
                self.ceiling.clone(),
            )
        };
        let workspace = match &job.workspace {
            Some(asked) => Some(
                crate::workspace::unpack(self.workers.as_ref(), asked, &self.workspaces, &id)
                    .await
                    .map_err(|e| JobRefusal::Failed(format!("its workspace: {e}")))?,
            ),
            None => None,
        };
        let cwd = job
            .workspace
            .as_ref()
            .map_or("", |asked| asked.cwd.as_str());
        let prepared = self
            .launcher
            .prepare_recorded_elsewhere(
                spec,
                id,
                workspace.as_ref().map(|w| (w, cwd)),
                job.traceparent.as_deref(),
            )
            .await;
        if prepared.is_err()
            && let Some(workspace) = &workspace
        {
            let _ = workspace.remove(&self.workspaces);
        }
        let prepared = prepared.map_err(|error| match error {
            LaunchError::Refused(refusal) => {
                JobRefusal::Boundary(refusal.message(self.names.as_ref()))
            }
            error @ LaunchError::ParentEnded(_) => JobRefusal::ParentEnded(error.to_string()),
            other => JobRefusal::Failed(other.to_string()),
        })?;
        let events = self.launcher.start(prepared);
        Ok(match workspace {
            Some(workspace) => sending_back(
                events,
                self.workers.clone(),
                workspace,
                self.workspaces.clone(),
            ),
            None => events.boxed(),
        })
    }
}

/// `events`, with the run's changes in `workspace` sent back to `workers`
/// before its `done`; when they cannot be, an error says so and the run
/// fails (its work would be lost).
fn sending_back(
    events: impl Stream<Item = AgentEvent> + Send + 'static,
    workers: Arc<dyn Workers>,
    workspace: Workspace,
    root: PathBuf,
) -> BoxStream<'static, AgentEvent> {
    let mut workspace = Some(workspace);
    events
        .then(move |event| {
            let ending = event.is_done().then(|| workspace.take()).flatten();
            let (workers, root) = (workers.clone(), root.clone());
            async move {
                match ending {
                    Some(workspace) => send_back(workers.as_ref(), workspace, &root, event).await,
                    None => vec![event],
                }
            }
        })
        .flat_map(futures::stream::iter)
        .boxed()
}

/// The run's `done` once its changes are sent back; else an error before
/// it, and it failed.
async fn send_back(
    workers: &dyn Workers,
    workspace: Workspace,
    root: &Path,
    mut done: AgentEvent,
) -> Vec<AgentEvent> {
    let run = workspace.run.clone();
    match crate::workspace::send_back(workers, workspace, root).await {
        Ok(bytes) => {
            tracing::info!(run, bytes, "the run's changes are sent back");
            vec![done]
        }
        Err(error) => {
            let message = format!("the run's changes could not be sent back: {error}");
            let error = AgentEvent::by_host(
                &done.agent,
                EventPayload::error(codes::STORE_ERROR, message, false),
            );
            if let EventPayload::Done(payload) = &mut done.payload
                && payload.status == DoneStatus::Success
            {
                payload.status = DoneStatus::Error;
            }
            vec![error, done]
        }
    }
}

impl Executor for JobExecutor {
    fn start<'a>(
        &'a self,
        job: &'a Job,
        component: Option<PathBuf>,
        abort: CancellationToken,
    ) -> BoxFuture<'a, Result<BoxStream<'static, AgentEvent>, JobRefusal>> {
        Box::pin(self.execute(job, component, abort))
    }
}
