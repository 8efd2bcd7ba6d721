//! The production [`TaskRunner`]: each attempt is a run launched like any
//! other — its adapter loaded once per workflow, admitted under the
//! workflow's ceiling narrowed by the task's own grants and limits,
//! recorded where the workflow's runs go (as a child of the workflow's
//! own record on this machine, or on a cluster), its events folded into
//! the engine contract's result.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use futures::StreamExt;
use moat_engine::{DoneStatus, ResultFold, SettingNames};
use moat_grants::Grants;
use moat_launch::{
    AdapterRef, Asked, AskedLimits, Ceiling, LaunchError, LaunchSpec, Launcher, Resolved, Timeout,
};
use moat_runs::RunId;
use tokio::sync::Mutex;

use crate::definition::Task;
use crate::runner::{AttemptStatus, TaskDispatch, TaskReport, TaskRunner};

/// Runs attempts through a [`Launcher`].
pub struct LaunchRunner {
    launcher: Launcher,
    ceiling: Arc<Ceiling>,
    /// The workflow's own record: the parent of every attempt's (set once
    /// it exists; on this machine only).
    parent: OnceLock<RunId>,
    /// Where every task works (the workflow file's directory).
    project: PathBuf,
    names: Arc<dyn SettingNames>,
    /// Adapters loaded so far, by the name or path the file gives.
    loaded: Mutex<HashMap<String, Resolved>>,
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
            project,
            names,
            loaded: Mutex::default(),
        }
    }

    /// Records every attempt as a child of `run`, the workflow's own.
    pub fn set_parent(&self, run: RunId) {
        let _ = self.parent.set(run);
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
        // A relative component path is the project's, like every path in
        // the file.
        let adapter = if task.adapter.contains('/') || task.adapter.ends_with(".wasm") {
            self.project
                .join(&task.adapter)
                .to_string_lossy()
                .into_owned()
        } else {
            task.adapter.clone()
        };
        let resolved = self
            .launcher
            .resolver()
            .resolve(&adapter)
            .await
            .map_err(|e| e.to_string())?;
        loaded.insert(task.adapter.clone(), resolved.clone());
        Ok(resolved)
    }

    /// The launch of an attempt of `task` on `prompt`.
    fn spec(&self, task: &Task, resolved: Resolved, prompt: String) -> LaunchSpec {
        LaunchSpec {
            options: task.options.run_options(&self.project),
            asked: Asked {
                grants: task.grants.clone(),
                trust: None,
                limits: AskedLimits {
                    timeout: task.timeout.map(Timeout::After),
                    ..AskedLimits::default()
                },
            },
            parent: self.parent.get().cloned(),
            names: self.names.clone(),
            ..LaunchSpec::new(AdapterRef::Resolved(resolved), prompt, self.ceiling.clone())
        }
    }

    /// A launch failure as the task's: a refusal in the caller's words.
    fn failure(&self, error: LaunchError) -> String {
        match error {
            LaunchError::Refused(refusal) => refusal.message(self.names.as_ref()),
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
            AdapterRef::Resolved(resolved) => resolved,
            AdapterRef::Named(_) => unreachable!("resolved above"),
        };
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
        let spec = LaunchSpec {
            abort: dispatch.abort.clone(),
            ..self.spec(task, resolved, dispatch.prompt)
        };
        let prepared = match self.launcher.prepare(spec).await {
            Ok(prepared) => prepared,
            Err(error) => return TaskReport::failed(self.failure(error)),
        };
        let run_id = prepared.id().map(ToString::to_string);
        let mut events = self.launcher.start(prepared);
        let mut fold = ResultFold::new();
        while let Some(event) = events.next().await {
            fold.observe(&event, &mut ());
        }
        let result = fold.finish();
        let status = match result.status {
            DoneStatus::Success => AttemptStatus::Completed,
            DoneStatus::Interrupted if dispatch.abort.is_cancelled() => AttemptStatus::Cancelled,
            other => AttemptStatus::Failed {
                reason: match &result.error {
                    Some(error) => match &error.code {
                        Some(code) => format!("{code}: {}", error.message),
                        None => error.message.clone(),
                    },
                    None => format!(
                        "the run ended {}",
                        serde_json::to_value(other)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_else(|| format!("{other:?}"))
                    ),
                },
            },
        };
        TaskReport {
            status,
            answer: result.text.unwrap_or_default(),
            run: run_id,
            usage: result.usage,
        }
    }
}
