//! A cluster worker's jobs, executed through the launch layer: a job is
//! admitted exactly as a request to `moat serve` is — its grants, trust
//! and limits within the worker's ceiling and its parent's —, its
//! directories opened here, and the runs its component starts are
//! submitted to the cluster as its children.

use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use moat_cluster::{ComponentRef, Executor, Job, Refusal as JobRefusal};
use moat_engine::{AgentEvent, SettingNames};
use moat_runs::RunId;
use tokio_util::sync::CancellationToken;

use crate::admit::{Asked, Ceiling};
use crate::error::LaunchError;
use crate::launcher::{Launcher, Place};
use crate::limits::AskedLimits;
use crate::resolve::Resolved;
use crate::spec::{AdapterRef, LaunchSpec};

/// Executes a worker's jobs under its ceiling.
pub struct JobExecutor {
    launcher: Launcher,
    ceiling: Arc<Ceiling>,
    names: Arc<dyn SettingNames>,
}

impl JobExecutor {
    /// Executes jobs with `launcher` (whose place is the worker's
    /// cluster, where the jobs' children go) under `ceiling`; refusals
    /// are worded with `names`.
    pub fn new(launcher: Launcher, ceiling: Arc<Ceiling>, names: Arc<dyn SettingNames>) -> Self {
        debug_assert!(matches!(launcher.place(), Place::Cluster(_)));
        Self {
            launcher,
            ceiling,
            names,
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
                limits: AskedLimits::exactly(&job.limits.to_run_limits()),
            },
            parent: job.parent.as_deref().and_then(RunId::parse),
            abort,
            names: self.names.clone(),
            ..LaunchSpec::new(
                AdapterRef::Resolved(resolved),
                job.prompt.clone(),
                self.ceiling.clone(),
            )
        };
        let prepared = self
            .launcher
            .prepare_recorded_elsewhere(spec, id)
            .await
            .map_err(|error| match error {
                LaunchError::Refused(refusal) => {
                    JobRefusal::Boundary(refusal.message(self.names.as_ref()))
                }
                error @ LaunchError::ParentEnded(_) => JobRefusal::ParentEnded(error.to_string()),
                other => JobRefusal::Failed(other.to_string()),
            })?;
        Ok(self.launcher.start(prepared).boxed())
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
