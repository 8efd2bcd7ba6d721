//! The production [`TaskRunner`]: each attempt is a moat run — its adapter
//! loaded once per workflow, its grants the workflow's ceiling narrowed by
//! the task's own, recorded in the run store as a child of the workflow's
//! run, its events folded into the engine contract's result.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use futures::StreamExt;
use moat_engine::{Adapter, DoneStatus, Registry, ResultFold, RunLimits, RunRequest, run_agent};
use moat_grants::{Grants, TrustLevel};
use moat_sandbox::{RunScope, Sandbox};
use moat_store::{RunId, Store};
use moat_workflow::{AttemptStatus, Task, TaskDispatch, TaskReport, TaskRunner};
use tokio::sync::Mutex;

use super::super::recording;
use crate::args::GrantFlags;
use crate::names::FlagNames;
use crate::resolve::{self, Resolved};

/// Runs attempts as moat runs.
pub struct MoatRunner {
    pub sandbox: Sandbox,
    pub store: Option<Arc<Store>>,
    /// The workflow's own record: the parent of every attempt's (set once
    /// it exists).
    pub parent: OnceLock<RunId>,
    /// Where every task works (the workflow file's directory).
    pub project: PathBuf,
    pub trust: TrustLevel,
    /// The ceiling of every task's grants.
    pub flags: GrantFlags,
    /// Adapters loaded so far, by the name or path the file gives.
    pub loaded: Mutex<HashMap<String, Resolved>>,
}

/// What a task's run is made of.
struct Prepared {
    resolved: Resolved,
    grants: Grants,
}

impl MoatRunner {
    /// The adapter of `task`, loaded once, and its grants: the ceiling
    /// (what `moat run` with the same flags in the project would get),
    /// narrowed to the task's own when it has them.
    async fn prepare(&self, task: &Task) -> Result<Prepared, String> {
        let resolved = {
            let mut loaded = self.loaded.lock().await;
            match loaded.get(&task.adapter) {
                Some(resolved) => resolved.clone(),
                None => {
                    // A relative component path is the project's, like
                    // every path in the file.
                    let adapter = if task.adapter.contains('/') || task.adapter.ends_with(".wasm") {
                        self.project
                            .join(&task.adapter)
                            .to_string_lossy()
                            .into_owned()
                    } else {
                        task.adapter.clone()
                    };
                    let resolved = resolve::adapter(&self.sandbox, &adapter)
                        .await
                        .map_err(|e| format!("{e:#}"))?;
                    loaded.insert(task.adapter.clone(), resolved.clone());
                    resolved
                }
            }
        };
        let project = self.project.to_string_lossy();
        let ceiling = resolve::grants(&resolved, self.trust, Some(&project), &[], &self.flags)
            .map_err(|e| format!("{e:#}"))?;
        let grants = match &task.grants {
            None => ceiling,
            Some(asked) => {
                let excess = asked.excess_over(&ceiling);
                if !excess.is_empty() {
                    let items: Vec<String> = excess.iter().map(ToString::to_string).collect();
                    return Err(format!(
                        "its grants go beyond the workflow's ({}): grant them to `moat workflow run` with the --allow-* flags, or narrow the task",
                        items.join(", ")
                    ));
                }
                asked.clone()
            }
        };
        Ok(Prepared { resolved, grants })
    }
}

#[async_trait::async_trait]
impl TaskRunner for MoatRunner {
    async fn check(&self, task: &Task) -> Result<(), String> {
        self.prepare(task).await.map(drop)
    }

    async fn run(&self, dispatch: TaskDispatch) -> TaskReport {
        let task = &dispatch.task;
        let Prepared { resolved, grants } = match self.prepare(task).await {
            Ok(prepared) => prepared,
            Err(reason) => return TaskReport::failed(reason),
        };
        let agent = resolved.adapter.info().name.clone();
        let sha256 = resolved.adapter.details().sha256.clone();
        let scope = RunScope {
            grants,
            trust: self.trust,
            confinement: resolve::confinement(&resolved, &self.flags),
            children: None,
        };
        let mut registry = Registry::scoped();
        if let Err(error) = registry.register(Arc::new(resolved.adapter.clone())) {
            return TaskReport::failed(error.to_string());
        }
        let request = RunRequest {
            options: task.options.run_options(&self.project),
            limits: RunLimits {
                timeout: Some(task.timeout.unwrap_or_else(|| resolved.default_timeout())),
                ..RunLimits::default()
            },
            abort: Some(dispatch.abort.clone()),
            names: Arc::new(FlagNames),
            ..RunRequest::new(agent, dispatch.prompt).with_scope(scope)
        };
        let recorder = match &self.store {
            Some(store) => {
                match recording::record(store.clone(), &request, sha256, self.parent.get().cloned())
                {
                    Ok(recorder) => Some(recorder),
                    Err(error) => {
                        return TaskReport::failed(format!("cannot record the run: {error:#}"));
                    }
                }
            }
            None => None,
        };
        let run_id = recorder.as_ref().map(|r| r.id().to_string());
        let run = match run_agent(&registry, request) {
            Ok(run) => run,
            Err(error) => {
                if let Some(recorder) = recorder {
                    let _ = recorder.finish(moat_store::FailReason::AdapterError);
                }
                return TaskReport::failed(error.to_string());
            }
        };
        let mut fold = ResultFold::new();
        match recorder {
            Some(recorder) => {
                let events = recording::single(run.into_stream());
                let mut events = std::pin::pin!(recording::recorded(
                    events,
                    vec![recorder],
                    vec![dispatch.abort.clone()]
                ));
                while let Some(event) = events.next().await {
                    fold.observe(&event, &mut ());
                }
            }
            None => {
                let mut events = std::pin::pin!(run.into_stream());
                while let Some(event) = events.next().await {
                    fold.observe(&event, &mut ());
                }
            }
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
