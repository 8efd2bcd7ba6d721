//! What one server holds and does for every client: the operations of the
//! protocol, each written once — runs start through the launch layer
//! under the server's ceiling, and are found, awaited, followed and
//! cancelled through [`Runs`], whether they live in this machine's store
//! or in a cluster.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use moat_engine::SettingNames;
use moat_launch::{
    AdapterRef, Ceiling, LaunchError, LaunchSpec, Launcher, Refusal, ResolveError, Resolved,
    RunRequest, RunWorkspace,
};
use moat_runs::{EventStream, RunFilter, RunId, RunRecord, RunStatus, Runs, RunsError};

use crate::protocol::{Code, Failure, ListParams, WorkflowRunParams, awaited};

/// The most tasks of one workflow a server runs at once.
pub const MAX_WORKFLOW_PARALLEL: usize = 64;

/// Everything a server is made of.
pub struct ServeConfig {
    /// Starts its runs (and, through their components, their children).
    pub launcher: Launcher,
    /// The most any run may get: a request only narrows it.
    pub ceiling: Arc<Ceiling>,
    /// The words refusals use for what was asked and what to change.
    pub names: Arc<dyn SettingNames>,
    /// Where runs' workspaces are made; `None`: no run gets one.
    pub workspace_root: Option<PathBuf>,
}

/// The server: its launcher and ceiling, and where its runs are.
pub struct Server {
    launcher: Launcher,
    runs: Arc<dyn Runs>,
    ceiling: Arc<Ceiling>,
    names: Arc<dyn SettingNames>,
    workspace_root: Option<PathBuf>,
    /// Cancelled when the server is asked to stop (`shutdown`, a signal,
    /// the end of stdin): no new run starts, live ones are stopped.
    pub stopping: CancellationToken,
    /// Cancelled once the runs have ended: connections close.
    pub closed: CancellationToken,
    /// Starts the workflows clients ask for, under its ceiling.
    workflows: moat_workflow::Starter,
}

/// A `Runs` error as a protocol error.
fn runs_failure(error: RunsError) -> Failure {
    match error {
        RunsError::NotFound(_) | RunsError::Ambiguous { .. } => {
            Failure::not_found(error.to_string())
        }
        RunsError::Invalid(message) => Failure::invalid(message),
        RunsError::Lagged { .. } | RunsError::Unavailable(_) => {
            Failure::new(Code::RunFailed, error.to_string())
        }
    }
}

/// A workflow that could not start, as a protocol error, in the
/// protocol's words.
fn workflow_failure(error: moat_workflow::StartError) -> Failure {
    use moat_workflow::StartError as S;
    use moat_workflow::WorkflowError as E;
    let error = match error {
        S::NotStarted(error) => error,
        error @ (S::Relative(_) | S::Definition(_)) => return Failure::invalid(error.to_string()),
        error @ S::Stopping => return Failure::new(Code::RunFailed, error.to_string()),
    };
    match error {
        E::Unfinished { path } => Failure::new(
            Code::Conflict,
            format!(
                "an earlier run of this workflow did not finish ({path}): \"resume\": true goes on from it, \"fresh\": true starts over"
            ),
        ),
        E::NothingToResume { path } => Failure::not_found(format!(
            "this workflow has not run here ({path} does not exist): start it without \"resume\""
        )),
        E::Changed { path } => Failure::new(
            Code::Conflict,
            format!(
                "the workflow file changed since its state was written ({path}); resume anyway with \"force\": true, or start over with \"fresh\": true"
            ),
        ),
        error @ E::Unrunnable { .. } => Failure::invalid(error.to_string()),
        // Running already, here or in another moat.
        error @ E::State(moat_workflow::state::StateError::Locked { .. }) => {
            Failure::new(Code::Conflict, error.to_string())
        }
        error @ (E::State(_) | E::Record(_)) => Failure::new(Code::RunFailed, error.to_string()),
    }
}

/// A workspace's failure as a protocol error.
fn workspace_failure(error: moat_workspace::WorkspaceError) -> Failure {
    use moat_workspace::WorkspaceError as E;
    let code = match &error {
        E::NotFound(_) => Code::NotFound,
        E::Conflict { .. } | E::AlreadyApplied { .. } => Code::Conflict,
        E::Protected { .. } => Code::BoundaryViolation,
        E::Dirty { .. } | E::Project(_) => Code::InvalidRequest,
        E::Git { .. } | E::Io { .. } => Code::RunFailed,
    };
    Failure::new(code, error.to_string())
}

impl Server {
    /// A server as `config` says; its runs are where its launcher puts
    /// them, which must be somewhere (a server's runs are recorded).
    pub fn new(config: ServeConfig) -> Result<Self, String> {
        let runs = config
            .launcher
            .runs()
            .ok_or("a server's runs are recorded: give its launcher a place")?;
        let workflows = moat_workflow::Starter::new(
            config.launcher.clone(),
            (*config.ceiling).clone(),
            config.names.clone(),
            MAX_WORKFLOW_PARALLEL,
        )
        .with_workspace_root(config.workspace_root.clone());
        Ok(Server {
            workflows,
            launcher: config.launcher,
            runs,
            ceiling: config.ceiling,
            names: config.names,
            workspace_root: config.workspace_root,
            stopping: CancellationToken::new(),
            closed: CancellationToken::new(),
        })
    }

    /// Where its runs are.
    pub fn runs(&self) -> &Arc<dyn Runs> {
        &self.runs
    }

    /// A launch failure as a protocol error.
    fn launch_failure(&self, error: LaunchError) -> Failure {
        match error {
            LaunchError::Resolve(error @ ResolveError::Unknown { .. }) => {
                Failure::not_found(error.to_string())
            }
            // Too deep or too many at once: a limit reached, not more
            // asked than allowed.
            LaunchError::Refused(refusal @ Refusal::Nesting(_)) => {
                Failure::new(Code::RunFailed, refusal.message(self.names.as_ref()))
            }
            LaunchError::Refused(refusal) => Failure::new(
                Code::BoundaryViolation,
                refusal.message(self.names.as_ref()),
            ),
            LaunchError::Invalid(invalid) => Failure::invalid(invalid.message(self.names.as_ref())),
            LaunchError::Runs(error) => runs_failure(error),
            LaunchError::Workspace(error) => workspace_failure(error),
            other => Failure::new(Code::RunFailed, other.to_string()),
        }
    }

    /// `run`: records the run and starts it; its id at once.
    pub async fn start_run(&self, request: RunRequest) -> Result<Value, Failure> {
        if self.stopping.is_cancelled() {
            return Err(Failure::new(Code::RunFailed, "the server is shutting down"));
        }
        let parent = match &request.parent {
            Some(text) => Some(self.runs.resolve(text).await.map_err(runs_failure)?),
            None => None,
        };
        let workspace = match request.workspace {
            Some(_) => Some(self.workspace_request(&request)?),
            None => None,
        };
        let adapter = AdapterRef::Named(request.adapter.clone().unwrap_or_default());
        let spec = LaunchSpec {
            workspace,
            parent,
            ..request.launch_spec(
                adapter,
                self.ceiling.clone(),
                request.asked(),
                self.names.clone(),
            )
        };
        let id = self
            .launcher
            .spawn(spec)
            .await
            .map_err(|error| self.launch_failure(error))?;
        Ok(json!({"run": id.as_str()}))
    }

    /// `workflow_run`: records the workflow file `params` names and starts
    /// it here under the server's ceiling, as `moat workflow run` would
    /// (its tasks' runs are its record's children, its state file beside
    /// it); its record's id once its state is taken (`null` with runs on a
    /// cluster: its record stays with a store of this machine, and this
    /// server has none). It runs on whatever its client does; `cancel` of
    /// its record stops it.
    pub async fn start_workflow(&self, params: &WorkflowRunParams) -> Result<Value, Failure> {
        use moat_workflow::Start;
        if self.stopping.is_cancelled() {
            return Err(Failure::new(Code::RunFailed, "the server is shutting down"));
        }
        let start = match (params.resume, params.fresh) {
            (true, true) => {
                return Err(Failure::invalid(
                    "workflow_run: `resume` goes on from its state, `fresh` starts over: give one",
                ));
            }
            (true, false) => Start::Resume {
                force: params.force,
            },
            (false, _) => Start::Fresh {
                discard: params.fresh,
            },
        };
        if params.max_parallel == Some(0) {
            return Err(Failure::invalid(
                "workflow_run: `maxParallel` is at least 1",
            ));
        }
        let id = self
            .workflows
            .start(Path::new(&params.file), start, params.max_parallel)
            .await
            .map_err(workflow_failure)?;
        Ok(json!({"run": id.map(|id| id.to_string())}))
    }

    /// `workflow_status`: the state the workflow file `file` left here
    /// (`null` when it has not run here), as `moat workflow status -o json`
    /// prints it.
    pub fn workflow_status(&self, file: &str) -> Result<Value, Failure> {
        let (name, state) = moat_workflow::status_of(Path::new(file)).map_err(workflow_failure)?;
        Ok(json!({"workflow": name, "state": state}))
    }

    /// The workspace a `run` request asks for: of its `options.cwd`.
    fn workspace_request(&self, request: &RunRequest) -> Result<moat_workspace::Request, Failure> {
        let root = self
            .workspace_root
            .clone()
            .ok_or_else(|| Failure::new(Code::RunFailed, "this server makes no workspaces"))?;
        let project = request
            .options
            .cwd
            .as_deref()
            .map(PathBuf::from)
            .ok_or_else(|| {
                Failure::invalid(
                    "workspace: a workspace is of options.cwd: give it, an absolute directory",
                )
            })?;
        request
            .workspace_request(&root, &project)
            .ok_or_else(|| Failure::invalid("workspace: no mode"))
    }

    /// Run `text`'s workspace.
    async fn workspace_of(&self, text: &str) -> Result<(RunId, RunWorkspace), Failure> {
        let id = self.runs.resolve(text).await.map_err(runs_failure)?;
        let root = self
            .workspace_root
            .as_deref()
            .ok_or_else(|| Failure::not_found(format!("run {id} has no workspace here")))?;
        let workspace = RunWorkspace::find(self.launcher.workers(), root, &id)
            .map_err(|error| self.launch_failure(error))?;
        Ok((id, workspace))
    }

    /// `diff`: what run `text` changed in its workspace, against its base.
    pub async fn diff(&self, text: &str, stat: bool) -> Result<Value, Failure> {
        let (_, workspace) = self.workspace_of(text).await?;
        let diff = workspace
            .diff(stat, false)
            .await
            .map_err(|error| self.launch_failure(error))?;
        let protected: Vec<Value> = workspace
            .protected()
            .await
            .map_err(|error| self.launch_failure(error))?
            .into_iter()
            .map(|found| json!({"path": found.path, "why": found.why}))
            .collect();
        Ok(json!({"diff": String::from_utf8_lossy(&diff), "protected": protected}))
    }

    /// `apply`: run `text`'s changes to its project, all or none, or
    /// (`commits`) the commits it made on the project's branch; only once
    /// the run has ended.
    pub async fn apply(
        &self,
        text: &str,
        commits: bool,
        include_protected: bool,
    ) -> Result<Value, Failure> {
        let (id, workspace) = self.workspace_of(text).await?;
        let record = self.runs.get(&id).await.map_err(runs_failure)?;
        if record.is_some_and(|record| !record.is_terminal()) {
            return Err(Failure::invalid(format!(
                "run {id} is live: apply its changes once it has ended"
            )));
        }
        if commits {
            let landed = workspace
                .apply_commits(include_protected)
                .await
                .map_err(|error| self.launch_failure(error))?;
            let (how, count) = match landed {
                moat_workspace::Landed::Nothing => ("nothing", 0),
                moat_workspace::Landed::FastForward { commits } => ("fastForward", commits),
                moat_workspace::Landed::CherryPicked { commits } => ("cherryPicked", commits),
            };
            return Ok(json!({"applied": count > 0, "landed": how, "commits": count}));
        }
        let applied = workspace
            .apply(include_protected)
            .await
            .map_err(|error| self.launch_failure(error))?;
        Ok(json!({"applied": applied > 0}))
    }

    /// The run `text` names (an id or a unique prefix) and its record.
    async fn record(&self, text: &str) -> Result<(RunId, RunRecord), Failure> {
        let id = self.runs.resolve(text).await.map_err(runs_failure)?;
        let record = self
            .runs
            .get(&id)
            .await
            .map_err(runs_failure)?
            .ok_or_else(|| Failure::not_found(format!("no run {id}")))?;
        Ok((id, record))
    }

    /// An ended run's result (folded from its stored events), as JSON.
    async fn result(&self, id: &RunId) -> Result<Value, Failure> {
        let result = moat_runs::result(self.runs.as_ref(), id)
            .await
            .map_err(runs_failure)?;
        Ok(serde_json::to_value(result).unwrap_or(Value::Null))
    }

    /// `await`: every run's result once all have ended; `RUN_FAILED`
    /// (with the results) when one did not complete.
    pub async fn await_runs(&self, runs: &[String]) -> Result<Value, Failure> {
        let mut ids = Vec::with_capacity(runs.len());
        for text in runs {
            ids.push(self.runs.resolve(text).await.map_err(runs_failure)?);
        }
        let mut results = serde_json::Map::new();
        let mut failed = Vec::new();
        for id in &ids {
            let record = self.runs.wait(id).await.map_err(runs_failure)?;
            if record.status != RunStatus::Completed {
                let reason = record.reason.map(|r| r.as_str().to_owned());
                failed.push(format!(
                    "{id} {}",
                    reason.unwrap_or_else(|| "failed".into())
                ));
            }
            results.insert(id.to_string(), self.result(id).await?);
        }
        awaited(results, &failed)
    }

    /// `cancel`: stops the run wherever it runs; a run that is unknown or
    /// has ended already is a success too. A prefix naming several runs
    /// names none: `NOT_FOUND`.
    pub async fn cancel(&self, text: &str) -> Result<Value, Failure> {
        let id = match self.runs.resolve(text).await {
            Ok(id) => id,
            Err(RunsError::NotFound(_)) => return Ok(json!({})),
            Err(error) => return Err(runs_failure(error)),
        };
        self.runs.cancel(&id).await.map_err(runs_failure)?;
        Ok(json!({}))
    }

    /// `get`: the record, and the result once the run has ended.
    pub async fn get(&self, text: &str) -> Result<Value, Failure> {
        let (id, record) = self.record(text).await?;
        let mut value = record.to_json();
        value["result"] = if record.is_terminal() {
            self.result(&id).await?
        } else {
            Value::Null
        };
        value["requests"] = self.approvals(id.as_str()).await?["requests"].take();
        Ok(value)
    }

    /// Who answers through this server, as the run's record keeps it.
    pub fn answerer(&self) -> String {
        format!("a client of moat serve (pid {})", std::process::id())
    }

    /// `approve` / `deny`: answers a run's request (its only open one when
    /// `number` is absent); the request, answered.
    pub async fn answer(
        &self,
        text: &str,
        number: Option<u32>,
        answer: moat_runs::Answer,
    ) -> Result<Value, Failure> {
        let id = self.runs.resolve(text).await.map_err(runs_failure)?;
        let answered = self
            .runs
            .answer(&id, number, answer)
            .await
            .map_err(runs_failure)?;
        Ok(json!({"request": answered.to_json()}))
    }

    /// `approvals`: a run's requests, oldest first, with their answers.
    pub async fn approvals(&self, text: &str) -> Result<Value, Failure> {
        let id = self.runs.resolve(text).await.map_err(runs_failure)?;
        let approvals = self.runs.approvals(&id).await.map_err(runs_failure)?;
        let requests: Vec<Value> = approvals.iter().map(moat_runs::Approval::to_json).collect();
        Ok(json!({"requests": requests}))
    }

    /// `traffic`: a run's requests and connections through moat (rows as
    /// its `moat:traffic` events), what it did past the rows kept, and its
    /// model calls' usage as moat metered it and as its adapter reported
    /// it.
    pub async fn traffic(&self, text: &str) -> Result<Value, Failure> {
        let id = self.runs.resolve(text).await.map_err(runs_failure)?;
        let traffic = moat_runs::traffic(self.runs.as_ref(), &id)
            .await
            .map_err(runs_failure)?;
        serde_json::to_value(&traffic).map_err(|e| Failure::invalid(e.to_string()))
    }

    /// `list`: records, newest first.
    pub async fn list(&self, params: &ListParams) -> Result<Value, Failure> {
        let mut statuses = Vec::new();
        for status in &params.status {
            let known = RunStatus::ALL.into_iter().find(|s| s.as_str() == status);
            statuses.push(known.ok_or_else(|| {
                Failure::invalid(format!(
                    "list: unknown status {status:?}; the statuses are pending, running, waiting, completed, failed"
                ))
            })?);
        }
        let parent = match &params.parent {
            Some(text) => Some(self.runs.resolve(text).await.map_err(runs_failure)?),
            None => None,
        };
        let filter = RunFilter {
            statuses,
            adapter: params.adapter.clone(),
            parent,
            limit: params.limit,
        };
        let runs = self.runs.list(&filter).await.map_err(runs_failure)?;
        Ok(json!({"runs": runs.iter().map(RunRecord::to_json).collect::<Vec<_>>()}))
    }

    /// `adapters`: the built-in adapters.
    pub async fn adapters(&self) -> Result<Value, Failure> {
        let mut adapters = Vec::new();
        for name in moat_builtins::names() {
            let resolved = self
                .launcher
                .resolver()
                .resolve(name)
                .await
                .map_err(|e| Failure::new(Code::RunFailed, e.to_string()))?;
            adapters.push(describe(&resolved, None));
        }
        Ok(json!({"adapters": adapters}))
    }

    /// `inspect`: what an adapter is, and what this server allows it.
    pub async fn inspect(&self, adapter: &str) -> Result<Value, Failure> {
        let resolved = self
            .launcher
            .resolver()
            .resolve(adapter)
            .await
            .map_err(|e| Failure::not_found(e.to_string()))?;
        let allowance = self
            .ceiling
            .allowance(&resolved)
            .map_err(|e| Failure::invalid(e.message(self.names.as_ref())))?;
        Ok(describe(&resolved, Some(&allowance)))
    }

    /// Stops every run live here (each ends with its `done` interrupted)
    /// and waits until their records are final, at most `patience`. No
    /// run starts any more. (A cluster's runs go on: a submitter's end
    /// never stops them.)
    pub async fn stop_runs(&self, patience: Duration) {
        // Its workflows first: cancelled, they dispatch nothing more, and
        // their tasks end interrupted rather than refused.
        // (`join` polls them in order: the workflows are cancelled before
        // the launcher stops.)
        let runs = async {
            self.launcher.stop();
            self.launcher.stop_runs(patience).await;
        };
        tokio::join!(self.workflows.stop(patience), runs);
    }

    /// Resolves run ids for a subscription, each from `from_seq` on:
    /// every one must exist, and must not have ended before `from_seq`.
    pub async fn subscribed_runs(
        &self,
        runs: &[String],
        from_seq: u64,
    ) -> Result<Vec<RunId>, Failure> {
        let mut ids = Vec::with_capacity(runs.len());
        for text in runs {
            let id = self.runs.resolve(text).await.map_err(runs_failure)?;
            moat_runs::check_from(self.runs.as_ref(), &id, from_seq)
                .await
                .map_err(runs_failure)?;
            ids.push(id);
        }
        Ok(ids)
    }

    /// Run `id`'s events from `from_seq` on: stored, then live, to its
    /// `done`; a follower that falls behind gets [`RunsError::Lagged`].
    pub async fn follow(&self, id: &RunId, from_seq: u64) -> Result<EventStream, RunsError> {
        self.runs.follow(id, from_seq).await
    }
}

/// An adapter as `adapters` and `inspect` describe it.
fn describe(resolved: &Resolved, allowance: Option<&moat_grants::Grants>) -> Value {
    use moat_engine::Adapter;
    let info = resolved.adapter.info();
    let details = resolved.adapter.details();
    let mut value = json!({
        "name": info.name,
        "version": info.version,
        "description": info.description,
        "contract": format!("moat:adapter@{}", details.contract),
        "sha256": details.sha256,
        "needs": resolved.adapter.needs(),
        "builtIn": resolved.provenance == moat_grants::Provenance::BuiltIn,
    });
    if let Some(allowance) = allowance {
        value["allowed"] = json!(allowance);
    }
    value
}
