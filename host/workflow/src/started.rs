//! A workflow started through the launch layer, wherever it is started
//! from — `moat workflow run`, the protocol's `workflow_run`, `moat ui`:
//! its own record (its tasks' runs are its children: `moat ps` lists it,
//! `moat cancel` stops it), its budget (every task spends from its
//! account, and once it is spent nothing more is dispatched), its span
//! (every task's is under it), and its end, recorded exactly once.

use std::path::PathBuf;
use std::sync::Arc;

use moat_engine::SettingNames;
use moat_launch::{Ask, Budget, Ceiling, Launcher};
use moat_runs::{FailReason, NewRun, Outcome, RecordedLimits, RunBook, RunId, RunLog, RunStatus};
use tokio_util::sync::CancellationToken;

use crate::definition::Workflow;
use crate::engine::{Engine, Settings, Start, Summary, WorkflowError};
use crate::hooks::Hooks;
use crate::launched::LaunchRunner;
use crate::state::WorkflowStatus;
use crate::step::Emit;

/// The name a workflow's own record goes by, where a run's adapter's
/// would.
pub const WORKFLOW_ADAPTER: &str = "workflow";

/// How many tasks run at once unless whoever starts it or the file says.
pub const DEFAULT_PARALLEL: usize = 4;

/// How many of `workflow`'s tasks run at once: as `asked` (a flag, a
/// request), else as its file says, else [`DEFAULT_PARALLEL`]; between 1
/// and `most`.
pub fn parallelism(asked: Option<usize>, workflow: &Workflow, most: usize) -> usize {
    asked
        .or(workflow.max_parallel)
        .unwrap_or(DEFAULT_PARALLEL)
        .clamp(1, most.max(1))
}

/// A workflow to start, and with what.
pub struct WorkflowLaunch {
    /// The workflow, loaded and checked.
    pub workflow: Workflow,
    /// Starts its tasks' runs, where its book keeps them.
    pub launcher: Launcher,
    /// Where the workflow's own record is kept: a book whose runs execute
    /// in this process (this machine's store, beside the workflow's state
    /// file, also when its tasks go to a cluster); `None`: recorded
    /// nowhere.
    pub book: Option<Arc<dyn RunBook>>,
    /// The most any task gets (the flags of `moat workflow run`, the
    /// ceiling of a server), its trust presets applying to the project;
    /// its budget is the workflow's, which every task spends from.
    pub ceiling: Ceiling,
    /// How tasks ask for what their grants lack; `None`: refused at once.
    pub ask: Option<Ask>,
    /// The words refusals use.
    pub names: Arc<dyn SettingNames>,
    /// Where the workspaces of tasks that have one are made.
    pub workspace_root: Option<PathBuf>,
    /// How many tasks run at once (at least 1).
    pub max_parallel: usize,
    /// Fresh, or resumed.
    pub start: Start,
}

/// How a started workflow ended.
pub enum Finished {
    /// It could not start (its state, an unrunnable task): nothing ran,
    /// and its record, when it had one, ended failed saying why.
    NotStarted(WorkflowError),
    /// It ran to its end, its cancel, or a failure that stopped it.
    Ran {
        /// Its summary, or what stopped it.
        result: Result<Summary, WorkflowError>,
        /// Its budget, when it was spent (nothing more was dispatched).
        budget_spent: Option<Budget>,
    },
}

impl WorkflowLaunch {
    /// Records the workflow and opens its state, then tells `opened` its
    /// record's id (`None`: recorded nowhere) and runs it to its end, or
    /// until `cancel` — which cancelling its record from elsewhere
    /// (`moat cancel`, the protocol) cancels too. Its events go to
    /// `emit`.
    pub async fn run(
        self,
        cancel: CancellationToken,
        emit: Emit,
        opened: impl FnOnce(Option<&RunId>) + Send,
    ) -> Finished {
        let WorkflowLaunch {
            workflow,
            launcher,
            book,
            mut ceiling,
            ask,
            names,
            workspace_root,
            max_parallel,
            start,
        } = self;
        ceiling.cwd = Some(workflow.project.clone());
        let budget = std::mem::take(&mut ceiling.budget);
        let grants = ceiling.grants.clone();
        let trust = ceiling.trust;
        let runner = Arc::new(LaunchRunner::new(
            launcher.clone(),
            Arc::new(ceiling),
            workflow.project.clone(),
            names,
        ));
        if let Some(root) = workspace_root {
            runner.set_workspace_root(root);
        }
        if let Some(ask) = ask {
            runner.set_ask(ask);
        }
        // Its tasks are its record's children when they are kept where it
        // is (on this machine); a cluster does not know this machine's
        // records.
        let children_here = launcher.workers().is_none();
        let log = match &book {
            Some(book) => {
                // Its record holds what it may give its tasks, which are
                // its children.
                let grants = match children_here {
                    true => runner.allowance(&workflow.tasks).await,
                    false => grants,
                };
                let run = record(&workflow, grants, trust, budget);
                match book.create(RunId::new(), &run, cancel.clone()).await {
                    Ok(log) => Some(log),
                    Err(error) => {
                        return Finished::NotStarted(WorkflowError::Record(error.to_string()));
                    }
                }
            }
            None => None,
        };
        let id = log.as_ref().map(|log| log.id().clone());
        let name = workflow.name.clone();
        let hooks = Hooks::from_commands(&workflow.hooks, workflow.project.clone());
        let engine = Engine::new(workflow, runner.clone(), hooks);
        let opened_state = match engine.open(start).await {
            Ok(opened) => opened,
            Err(error) => {
                end(log, Err(&error.to_string()));
                return Finished::NotStarted(error);
            }
        };
        let mut account = None;
        // Its span is its tasks' runs' parent, as its record is: one
        // trace. On a cluster its tasks carry the span itself.
        let tracer = tracer(id.as_ref(), &name);
        match (&id, children_here) {
            (Some(id), true) => {
                runner.set_parent(id.clone());
                if !budget.is_unbounded() {
                    account = Some(launcher.open_account(id, budget, cancel.clone()));
                }
            }
            _ => {
                if let Some(tracer) = &tracer {
                    runner.set_traceparent(tracer.traceparent());
                }
            }
        }
        let mut log = log;
        if let Some(log) = &mut log
            && let Err(error) = log.running()
        {
            tracing::error!("cannot record the workflow as running: {error}");
        }
        opened(id.as_ref());
        let settings = Settings {
            max_parallel,
            cancel,
            run: id.as_ref().map(ToString::to_string),
            emit,
        };
        let result = opened_state.run(settings).await;
        if let Some(tracer) = tracer {
            end_tracer(tracer, &result);
        }
        let error = result.as_ref().err().map(ToString::to_string);
        end(
            log,
            result
                .as_ref()
                .map(|summary| summary.status)
                .map_err(|_| error.as_deref().unwrap_or_default()),
        );
        let budget_spent = account
            .filter(|account| account.crossed())
            .map(|account| account.budget());
        Finished::Ran {
            result,
            budget_spent,
        }
    }
}

/// The workflow's own record, holding `grants` at `trust`, with its
/// budget when it has one (no other limit of its own).
fn record(
    workflow: &Workflow,
    grants: moat_grants::Grants,
    trust: moat_grants::TrustLevel,
    budget: Budget,
) -> NewRun {
    NewRun {
        parent: None,
        adapter: WORKFLOW_ADAPTER.into(),
        component_sha256: workflow.hash.clone(),
        prompt: format!("{} ({})", workflow.name, workflow.file.display()),
        // The file by its absolute path: the record is read from anywhere
        // (`moat ui`, `moat ps` in another directory).
        options: serde_json::json!({
            "file": std::path::absolute(&workflow.file).unwrap_or_else(|_| workflow.file.clone()),
            "project": workflow.project,
        }),
        grants,
        trust: Some(trust),
        limits: Some(budget)
            .filter(|budget| !budget.is_unbounded())
            .map(|budget| RecordedLimits {
                budget_usd: budget.usd,
                max_tokens: budget.tokens,
                max_model_calls: budget.calls,
                ..RecordedLimits::of(&moat_launch::limits::unbounded())
            }),
        role: None,
    }
}

/// Ends the workflow's record as the workflow ended (or why it could
/// not).
fn end(log: Option<Box<dyn RunLog>>, status: Result<WorkflowStatus, &str>) {
    let Some(log) = log else {
        return;
    };
    let (status, reason) = match status {
        Ok(WorkflowStatus::Completed) => (RunStatus::Completed, None),
        Ok(WorkflowStatus::Cancelled) => (RunStatus::Failed, Some(FailReason::Cancelled)),
        Ok(WorkflowStatus::Failed | WorkflowStatus::Running) => (
            RunStatus::Failed,
            Some(FailReason::Other("a task failed".into())),
        ),
        Err(why) => (RunStatus::Failed, Some(FailReason::Other(why.to_owned()))),
    };
    let outcome = Outcome {
        status,
        reason,
        done: None,
    };
    if let Err(error) = log.end(&outcome) {
        tracing::error!("cannot end the workflow's record: {error}");
    }
}

/// The workflow's span, when traces are exported.
fn tracer(id: Option<&RunId>, name: &str) -> Option<moat_telemetry::RunTracer> {
    let id = id.map(ToString::to_string);
    let mut tracer = moat_telemetry::start_run(moat_telemetry::RunStart {
        id: id.as_deref(),
        adapter: WORKFLOW_ADAPTER,
        ..moat_telemetry::RunStart::default()
    })?;
    tracer.set_attribute("moat.workflow.name", name.to_owned());
    Some(tracer)
}

/// Ends the workflow's span as it ended.
fn end_tracer(tracer: moat_telemetry::RunTracer, result: &Result<Summary, WorkflowError>) {
    match result {
        Ok(summary) => {
            let (status, error) = match summary.status {
                WorkflowStatus::Completed => ("success", None),
                WorkflowStatus::Cancelled => ("interrupted", None),
                _ => ("error", Some("a task failed")),
            };
            tracer.finish(status, error);
        }
        Err(error) => tracer.finish("error", Some(&error.to_string())),
    }
}

/// Why [`Starter::start`] did not start a workflow.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Its file is not a path this starter can place (it takes absolute
    /// paths only: whoever asks is elsewhere).
    #[error("{0} is not an absolute path: the workflow file is named by its absolute path here")]
    Relative(PathBuf),
    /// Its file could not be read, or is not a workflow.
    #[error(transparent)]
    Definition(#[from] crate::definition::DefinitionError),
    /// It could not start (see [`Finished::NotStarted`]).
    #[error(transparent)]
    NotStarted(WorkflowError),
    /// The starter is stopping: no workflow starts any more.
    #[error("workflows are no longer started here: it is shutting down")]
    Stopping,
}

/// Starts workflow files in the background, each as [`WorkflowLaunch`]
/// runs one, all under the same launcher and ceiling — the protocol's
/// `workflow_run`, a workflow started from `moat ui` — and stops them
/// together.
pub struct Starter {
    launcher: Launcher,
    ceiling: Ceiling,
    ask: Option<Ask>,
    names: Arc<dyn SettingNames>,
    workspace_root: Option<PathBuf>,
    /// The most tasks of one workflow that run at once.
    most_parallel: usize,
    /// Cancels every workflow it started (each through a child of it).
    stopping: CancellationToken,
    /// The workflows it started, each until it has ended.
    running: tokio_util::task::TaskTracker,
}

impl Starter {
    /// A starter launching the tasks with `launcher` under `ceiling`
    /// (whose budget is each workflow's), running at most `most_parallel`
    /// tasks of one workflow at once; refusals worded with `names`. A
    /// workflow's own record is kept in the launcher's book when its runs
    /// execute here (with runs on a cluster, nowhere).
    pub fn new(
        launcher: Launcher,
        ceiling: Ceiling,
        names: Arc<dyn SettingNames>,
        most_parallel: usize,
    ) -> Self {
        Self {
            launcher,
            ceiling,
            ask: None,
            names,
            workspace_root: None,
            most_parallel,
            stopping: CancellationToken::new(),
            running: tokio_util::task::TaskTracker::new(),
        }
    }

    /// This starter, its workflows' tasks making their workspaces under
    /// `root`.
    pub fn with_workspace_root(mut self, root: Option<PathBuf>) -> Self {
        self.workspace_root = root;
        self
    }

    /// This starter, its workflows' tasks asking as `ask` says for what
    /// their grants lack.
    pub fn with_ask(mut self, ask: Option<Ask>) -> Self {
        self.ask = ask;
        self
    }

    /// Starts the workflow file `file` as `start` says, running
    /// `max_parallel` tasks at once (else as the file says): its record's
    /// id once its state is taken (`None`: recorded nowhere). It runs on
    /// in the background until it ends, is cancelled through its record,
    /// or the starter stops.
    pub async fn start(
        &self,
        file: &std::path::Path,
        start: Start,
        max_parallel: Option<usize>,
    ) -> Result<Option<RunId>, StartError> {
        if self.stopping.is_cancelled() {
            return Err(StartError::Stopping);
        }
        if !file.is_absolute() {
            return Err(StartError::Relative(file.to_path_buf()));
        }
        let workflow = crate::definition::load(file)?;
        let name = workflow.name.clone();
        let launch = WorkflowLaunch {
            max_parallel: parallelism(max_parallel, &workflow, self.most_parallel),
            workflow,
            launcher: self.launcher.clone(),
            book: self
                .launcher
                .book()
                .filter(|book| book.workers().is_none())
                .cloned(),
            ceiling: self.ceiling.clone(),
            ask: self.ask.clone(),
            names: self.names.clone(),
            workspace_root: self.workspace_root.clone(),
            start,
        };
        let (opened, is_open) = tokio::sync::oneshot::channel();
        let cancel = self.stopping.child_token();
        let running = self.running.spawn(async move {
            let quiet: Emit = Arc::new(|_: &crate::WorkflowEvent| {});
            let finished = launch
                .run(cancel, quiet, |id| {
                    let _ = opened.send(id.cloned());
                })
                .await;
            if let Finished::Ran {
                result: Err(error), ..
            } = &finished
            {
                tracing::warn!(workflow = name, "the workflow stopped: {error}");
            }
            finished
        });
        match is_open.await {
            Ok(id) => Ok(id),
            // It ended before its state was taken: why.
            Err(_) => match running.await {
                Ok(Finished::NotStarted(error)) => Err(StartError::NotStarted(error)),
                Ok(Finished::Ran { .. }) | Err(_) => Err(StartError::Stopping),
            },
        }
    }

    /// Stops every workflow it started (each ends cancelled, dispatching
    /// nothing more) and waits up to `patience` for their ends; no
    /// workflow starts any more.
    pub async fn stop(&self, patience: std::time::Duration) {
        self.stopping.cancel();
        self.running.close();
        if tokio::time::timeout(patience, self.running.wait())
            .await
            .is_err()
        {
            tracing::warn!("workflows still ending after {patience:?}");
        }
    }
}

/// The state workflow file `file` left here: its name, and its state
/// (`None` when it has not run here), as `moat workflow status` reads it.
pub fn status_of(
    file: &std::path::Path,
) -> Result<(String, Option<crate::state::State>), StartError> {
    if !file.is_absolute() {
        return Err(StartError::Relative(file.to_path_buf()));
    }
    let workflow = crate::definition::load(file)?;
    let path = crate::state::directory(&workflow).join("state.json");
    let state = crate::state::read(&path).map_err(|e| StartError::NotStarted(e.into()))?;
    Ok((workflow.name, state))
}
