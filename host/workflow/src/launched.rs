//! The production [`TaskRunner`]: each attempt is a run launched like any
//! other — its adapter loaded once per workflow, admitted under the
//! workflow's ceiling narrowed by the task's own grants and limits,
//! recorded where the workflow's runs go (as a child of the workflow's
//! own record on this machine, or on a cluster), its events folded into
//! the engine contract's result.
//!
//! Each run's id is chosen here and written in the workflow's state
//! before the run is submitted. A cluster's run goes on when the moat that
//! submitted it is killed, so on resume this runner re-attaches to it —
//! follows it from its first event to its end, running or ended — and the
//! task is not run twice. A run on this machine died with its moat (its
//! record ends `engine restart`): that attempt runs again.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use futures::FutureExt;
use moat_engine::SettingNames;
use moat_grants::Grants;
use moat_launch::{AdapterRef, Ceiling, LaunchError, LaunchSpec, Launcher, Resolved};
use moat_runs::{FailReason, RunId, RunStatus};
use tokio::sync::Mutex;

use crate::definition::Task;
use crate::followed;
use crate::runner::{Reattach, TaskDispatch, TaskReport, TaskRunner};

/// Runs attempts through a [`Launcher`].
pub struct LaunchRunner {
    launcher: Launcher,
    ceiling: Arc<Ceiling>,
    /// The workflow's own record: the parent of every attempt's (set once
    /// it exists; on this machine only).
    parent: OnceLock<RunId>,
    /// The workflow's span, when it has no record its tasks' runs can
    /// name (on a cluster): every attempt's span's parent.
    traceparent: OnceLock<String>,
    /// Where every task works (the workflow file's directory).
    project: PathBuf,
    names: Arc<dyn SettingNames>,
    /// Adapters loaded so far, by the name or path the file gives.
    loaded: Mutex<HashMap<String, Resolved>>,
    /// Where the workspaces of tasks that have one are made.
    workspace_root: OnceLock<PathBuf>,
    /// How every attempt asks for what its grants lack (`--ask`); unset:
    /// refused at once.
    ask: OnceLock<moat_launch::Ask>,
}

impl LaunchRunner {
    /// Runs the tasks of a workflow in `project` with `launcher`, under
    /// `ceiling` (the workflow's flags, its trust presets applying to the
    /// project); refusals are worded with `names`.
    pub fn new(
        launcher: Launcher,
        ceiling: Arc<Ceiling>,
        project: PathBuf,
        names: Arc<dyn SettingNames>,
    ) -> Self {
        Self {
            launcher,
            ceiling,
            parent: OnceLock::new(),
            traceparent: OnceLock::new(),
            project,
            names,
            loaded: Mutex::default(),
            workspace_root: OnceLock::new(),
            ask: OnceLock::new(),
        }
    }

    /// Lets every attempt ask for what its grants lack, as `ask` says,
    /// within the ceiling (an answer never passes the workflow's flags).
    pub fn set_ask(&self, ask: moat_launch::Ask) {
        let _ = self.ask.set(ask);
    }

    /// Makes the workspaces of tasks that ask for one under `root`.
    pub fn set_workspace_root(&self, root: PathBuf) {
        let _ = self.workspace_root.set(root);
    }

    /// The workspace of an attempt of `task`: of the project, starting from
    /// its upstream tasks' changes (`upstream_runs`, those that had a
    /// workspace), so a task downstream sees what the tasks before it did.
    fn workspace(
        &self,
        task: &Task,
        upstream_runs: &[String],
    ) -> Result<Option<moat_workspace::Request>, String> {
        let Some(mode) = task.workspace() else {
            return Ok(None);
        };
        let root = self.workspace_root.get().cloned().ok_or_else(|| {
            format!(
                "task {} asks for a workspace, and no workspace directory is set",
                task.id
            )
        })?;
        Ok(Some(moat_workspace::Request {
            mode,
            project: self.project.clone(),
            base: None,
            include_dirty: false,
            root,
            seeds: upstream_runs.to_vec(),
        }))
    }

    /// Records every attempt as a child of `run`, the workflow's own.
    pub fn set_parent(&self, run: RunId) {
        let _ = self.parent.set(run);
    }

    /// Traces every attempt under `traceparent`, the workflow's span, when
    /// the attempts have no parent run to find it by.
    pub fn set_traceparent(&self, traceparent: String) {
        let _ = self.traceparent.set(traceparent);
    }

    /// What the workflow may give its tasks, together: for each task's
    /// adapter, what the ceiling allows it (its declared needs, the trust
    /// presets for the project, the flags). The workflow's own run is
    /// recorded holding these: its tasks' runs, its children, are bounded
    /// by what it holds, so with only the flags there they would lose the
    /// rest of what `moat run` gives them (a built-in's needs, the project
    /// under trust `controlled`). A task whose adapter does not load adds
    /// nothing (opening the workflow says why).
    pub async fn allowance(&self, tasks: &[Task]) -> Grants {
        let mut all = Grants::none();
        for task in tasks {
            if let Ok(resolved) = self.resolve(task).await
                && let Ok(grants) = self.ceiling.allowance(&resolved)
            {
                all.merge(&grants);
            }
        }
        all
    }

    /// The adapter of `task`, loaded once.
    async fn resolve(&self, task: &Task) -> Result<Resolved, String> {
        let mut loaded = self.loaded.lock().await;
        if let Some(resolved) = loaded.get(&task.adapter) {
            return Ok(resolved.clone());
        }
        let adapter = task.adapter_in(&self.project);
        let resolved = self
            .launcher
            .resolver()
            .resolve(&adapter)
            .await
            .map_err(|e| e.to_string())?;
        loaded.insert(task.adapter.clone(), resolved.clone());
        Ok(resolved)
    }

    /// The launch of an attempt of `task` on `prompt`: its request, in
    /// the project, under the workflow's ceiling.
    fn spec(&self, task: &Task, resolved: Resolved, prompt: String) -> LaunchSpec {
        let mut request = task.request.clone();
        request.prompt = Some(prompt);
        request.options.cwd = Some(self.project.to_string_lossy().into_owned());
        // Its record and events name the task it is an attempt of.
        request.role = Some(task.id.clone());
        LaunchSpec {
            parent: self.parent.get().cloned(),
            ask: self.ask.get().cloned(),
            traceparent: self.traceparent.get().cloned(),
            ..request.launch_spec(
                AdapterRef::Resolved(Box::new(resolved)),
                self.ceiling.clone(),
                request.asked(),
                self.names.clone(),
            )
        }
    }

    /// A launch failure as the task's: a refusal in the caller's words.
    fn failure(&self, error: LaunchError) -> String {
        match error {
            LaunchError::Refused(refusal) => refusal.message(self.names.as_ref()),
            LaunchError::Invalid(invalid) => invalid.message(self.names.as_ref()),
            other => other.to_string(),
        }
    }
}

#[async_trait::async_trait]
impl TaskRunner for LaunchRunner {
    async fn check(&self, task: &Task) -> Result<(), String> {
        let resolved = self.resolve(task).await?;
        let spec = self.spec(task, resolved, String::new());
        // Admitted exactly as its attempts will be, nothing recorded.
        let resolved = match &spec.adapter {
            AdapterRef::Resolved(resolved) => &**resolved,
            AdapterRef::Named(_) => unreachable!("resolved above"),
        };
        moat_launch::check_complete(resolved, &spec.options)
            .map_err(|invalid| invalid.message(self.names.as_ref()))?;
        self.ceiling
            .admit(resolved, &spec.options, &spec.asked, None)
            .map(drop)
            .map_err(|refusal| refusal.message(self.names.as_ref()))
    }

    async fn run(&self, dispatch: TaskDispatch) -> TaskReport {
        let task = &dispatch.task;
        let resolved = match self.resolve(task).await {
            Ok(resolved) => resolved,
            Err(reason) => return TaskReport::failed(reason),
        };
        // The id goes in the state before the run exists: a moat killed
        // once it is submitted leaves it for the resume to re-attach.
        let id = self.launcher.book().map(|_| RunId::new());
        if let Some(id) = &id
            && let Err(error) = dispatch.notice.starting(id.as_str()).await
        {
            return if dispatch.abort.is_cancelled() {
                TaskReport::cancelled()
            } else {
                TaskReport::failed(error.to_string())
            };
        }
        let workspace = match self.workspace(task, &dispatch.upstream_runs) {
            Ok(workspace) => workspace,
            Err(reason) => return TaskReport::failed(reason),
        };
        let spec = LaunchSpec {
            abort: dispatch.abort.clone(),
            id,
            workspace,
            ..self.spec(task, resolved, dispatch.prompt)
        };
        let prepared = match self.launcher.prepare(spec).await {
            Ok(prepared) => prepared,
            Err(error) => return TaskReport::failed(self.failure(error)),
        };
        let run_id = prepared.id().map(ToString::to_string);
        let events = self.launcher.start(prepared);
        followed::report(events, &dispatch.abort, run_id, &dispatch.notice).await
    }

    async fn reattach(&self, run: &str, dispatch: TaskDispatch) -> Reattach {
        if self.launcher.workers().is_none() {
            return Reattach::Cannot(
                "a run on this machine ends with the moat that ran it (engine restart)".into(),
            );
        }
        let Some(runs) = self.launcher.runs() else {
            return Reattach::Cannot("its runs are recorded nowhere".into());
        };
        let Some(id) = RunId::parse(run) else {
            return Reattach::Cannot(format!("{run:?} is not a run id"));
        };
        let record = match runs.get(&id).await {
            Ok(Some(record)) => record,
            // Its id was written down, then its moat died before it was
            // submitted.
            Ok(None) => {
                return Reattach::Cannot(format!("{} has no run {id}", runs.place()));
            }
            Err(error) => {
                let failed = TaskReport {
                    run: Some(id.to_string()),
                    ..TaskReport::failed(format!(
                        "cannot read run {id} in {}: {error}",
                        runs.place()
                    ))
                };
                return Reattach::Following(futures::future::ready(failed).boxed());
            }
        };
        // Stopped by a cancel (its moat's Ctrl-C, or `moat cancel`): it
        // runs again on resume, as any interrupted attempt does.
        if record.status == RunStatus::Failed && record.reason == Some(FailReason::Cancelled) {
            return Reattach::Cannot(format!("run {id} was cancelled"));
        }
        Reattach::Following(followed::follow(runs, id, dispatch.abort, dispatch.notice).boxed())
    }
}
