//! [`Launcher`]: the one way a run starts. Every command that starts runs
//! (`moat run`, `parallel`, `serve`, a workflow's tasks, a cluster
//! worker's jobs, and the runs components start themselves) calls it, so
//! what touches every run is written here once: resolving the adapter,
//! admission ([`Ceiling::admit`]), the record, running it, and finishing
//! the record exactly once.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use moat_contain::Secrets;
use moat_engine::{AgentRun, ParallelTask, Registry, RunRequest, TaskEvent, run_parallel};
use moat_runs::{
    ComponentRef, Job, JobAsk, NewRun, RecordedLimits, RunBook, RunFilter, RunId, RunStatus, Runs,
    RunsError, Workers,
};
use moat_sandbox::{ChildRunner, RunScope, WasmAdapter};
use tokio_util::sync::CancellationToken;

use crate::admit::{
    Admission, Ceiling, MAX_DEPTH, MAX_LIVE_CHILDREN, ParentScope, declared_secrets,
};
use crate::approvals::{Desk, Notices};
use crate::budget::{MemoryBudget, Share, budgeted_memory};
use crate::children::{Children, Spawner};
use crate::error::LaunchError;
use crate::events::{Followed, Launched};
use crate::metering::Meter;
use crate::recording::Recording;
use crate::resolve::{Resolved, Resolver, Source};
use crate::secrets::{SecretError, SecretStore};
use crate::spec::{AdapterRef, LaunchSpec};
use crate::spending::{Account, Accounts};

/// A run admitted and recorded (`pending`), not started yet. Dropped
/// unstarted, its record ends `failed` — unless it was handed to workers
/// elsewhere, where runs go on whatever their submitter does.
pub struct Prepared {
    id: Option<RunId>,
    admission: Admission,
    kind: Kind,
}

enum Kind {
    /// To run in this process.
    Here {
        /// Its share of the launcher's memory budget, while it runs.
        share: Option<Share>,
        /// What it holds of a memory budget ([`budgeted_memory`]).
        memory: u64,
        adapter: Arc<WasmAdapter>,
        /// Boxed: a request is large beside a followed run.
        request: Box<RunRequest<RunScope>>,
        role: Option<String>,
        /// Boxed: a recording is large beside a followed run.
        recording: Option<Box<Recording>>,
        /// What its approval desk tells its consumer, when it asks.
        notices: Option<Notices>,
        /// What it spends is counted here, when it has a budget or its
        /// parent does.
        meter: Option<Meter>,
        /// Its protected paths as they were, put back before its `done`.
        guard: Option<crate::protected::Guard>,
        /// Its spans, when traces are exported.
        tracer: Option<moat_telemetry::RunTracer>,
    },
    /// Handed to workers elsewhere: to follow where it is kept.
    Elsewhere {
        runs: Arc<dyn Runs>,
        id: RunId,
        abort: CancellationToken,
        role: Option<String>,
        /// The submitter's side of its spans, when traces are exported.
        tracer: Option<moat_telemetry::RunTracer>,
    },
}

impl Prepared {
    /// The run's id, when it is recorded.
    pub fn id(&self) -> Option<&RunId> {
        self.id.as_ref()
    }

    /// What its admission gave it.
    pub fn admission(&self) -> &Admission {
        &self.admission
    }
}

/// Starts runs: see the module documentation.
#[derive(Clone)]
pub struct Launcher {
    inner: Arc<Inner>,
}

struct Inner {
    resolver: Resolver,
    /// Where its runs are kept; `None`: nowhere (`--no-store`): nothing is
    /// left on disk, and runs cannot nest (a child is known by its
    /// record). A book whose runs execute on workers elsewhere (a
    /// cluster's) is handed them instead of executing them here.
    book: Option<Arc<dyn RunBook>>,
    /// Where the values of the runs' secret grants are kept; `None`: a
    /// run granted a secret is refused.
    secrets: Option<SecretStore>,
    /// Stopped: no run starts any more (a server shutting down).
    stopping: CancellationToken,
    /// The memory its live runs may hold together.
    memory: Option<MemoryBudget>,
    /// The spending accounts of its live runs.
    accounts: Accounts,
}

impl Launcher {
    /// A launcher loading adapters with `resolver` and keeping runs in
    /// `book` (`None`: recorded nowhere).
    pub fn new(resolver: Resolver, book: Option<Arc<dyn RunBook>>) -> Self {
        Self::with_secrets(resolver, book, None)
    }

    /// [`new`](Self::new), resolving the runs' secret grants from
    /// `secrets` when they execute here.
    pub fn with_secrets(
        resolver: Resolver,
        book: Option<Arc<dyn RunBook>>,
        secrets: Option<SecretStore>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                resolver,
                book,
                secrets,
                stopping: CancellationToken::new(),
                memory: None,
                accounts: Accounts::default(),
            }),
        }
    }

    /// This launcher, its runs here holding at most `budget` of memory
    /// together (the sum of their caps).
    ///
    /// # Panics
    /// Once the launcher is shared (cloned, or its runs started).
    pub fn with_memory_budget(mut self, budget: MemoryBudget) -> Self {
        Arc::get_mut(&mut self.inner)
            .expect("a launcher's budget is set before it is shared")
            .memory = Some(budget);
        self
    }

    /// A share of the memory budget for the run `spec` asks for, admitted
    /// as `admission` (see [`budgeted_memory`]); `None` without a budget.
    async fn share(
        &self,
        admission: &Admission,
        spec: &LaunchSpec,
    ) -> Result<Option<Share>, LaunchError> {
        let Some(budget) = &self.inner.memory else {
            return Ok(None);
        };
        let cap = budgeted_memory(admission, &spec.asked.limits);
        Ok(budget.reserve(cap, spec.parent.is_none()).await?)
    }

    /// `admission` with the values of its secret grants, for a run of
    /// `resolved` executing here under `ceiling`. A secret not kept
    /// refuses the run, unless only the built-in declares it (and the
    /// ceiling's own flags do not name it): then the run goes without it,
    /// its key's variable working as before.
    fn unlocked(
        &self,
        mut admission: Admission,
        resolved: &Resolved,
        ceiling: &Ceiling,
    ) -> Result<Admission, LaunchError> {
        let grants = &admission.grants.secrets;
        let (kept, missing) = match &self.inner.secrets {
            Some(store) => store.resolve_kept(grants)?,
            None => (Vec::new(), grants.clone()),
        };
        let declared = declared_secrets(resolved);
        for grant in &missing {
            let optional = declared.contains(grant) && !ceiling.grants.secrets.contains(grant);
            if !optional {
                return Err(SecretError::Missing {
                    name: grant.name.clone(),
                }
                .into());
            }
            tracing::info!(
                secret = %grant,
                "the built-in's key is not kept as a secret; its variable is used as granted"
            );
        }
        admission
            .grants
            .secrets
            .retain(|grant| !missing.contains(grant));
        admission.secrets = Secrets::new(kept);
        Ok(admission)
    }

    /// What its runs' children are started by: this launcher, held
    /// weakly (a run never keeps a stopped launcher alive).
    fn spawner(&self) -> Box<dyn Spawner> {
        Box::new(WeakLauncher(Arc::downgrade(&self.inner)))
    }

    /// Its resolver.
    pub fn resolver(&self) -> &Resolver {
        &self.inner.resolver
    }

    /// Where its runs are kept; `None` when they are recorded nowhere.
    pub fn book(&self) -> Option<&Arc<dyn RunBook>> {
        self.inner.book.as_ref()
    }

    /// Where its runs can be found, followed and cancelled; `None` when
    /// they are recorded nowhere.
    pub fn runs(&self) -> Option<Arc<dyn Runs>> {
        self.inner.book.clone().map(|book| book as Arc<dyn Runs>)
    }

    /// The workers elsewhere its runs are handed to, when they execute
    /// there (a cluster's).
    pub fn workers(&self) -> Option<Arc<dyn Workers>> {
        self.inner.book.as_ref().and_then(|book| book.workers())
    }

    /// Opens the account of run `id`, recorded by whoever calls this (a
    /// workflow's own record): the runs launched here as its children
    /// spend from `budget`, and once it is spent `abort` is cancelled.
    /// The account lasts as long as the returned handle.
    pub fn open_account(
        &self,
        id: &RunId,
        budget: crate::Budget,
        abort: CancellationToken,
    ) -> Arc<Account> {
        let account = Account::new(id.clone(), budget, None, false, abort);
        self.inner.accounts.add(&account);
        account
    }

    /// From now on no run starts ([`LaunchError::Stopping`]).
    pub fn stop(&self) {
        self.inner.stopping.cancel();
    }

    /// Resolves, admits and records the run `spec` asks for, without
    /// starting it.
    pub async fn prepare(&self, spec: LaunchSpec) -> Result<Prepared, LaunchError> {
        let (resolved, admission) = self.admit(&spec, None).await?;
        let spec = with_policy_asks(spec, &admission);
        let Some(book) = &self.inner.book else {
            return self.prepare_unrecorded(resolved, spec, admission).await;
        };
        match book.workers() {
            Some(workers) => {
                let (mut spec, mut admission) = (spec, admission);
                let id = spec.id.clone().unwrap_or_default();
                spec.id = Some(id.clone());
                let workspace = match &spec.workspace {
                    Some(request) => Some((
                        crate::workspace::pack(
                            &workers,
                            request,
                            &id,
                            &mut admission,
                            &mut spec.options,
                        )
                        .await?,
                        request.root.clone(),
                    )),
                    None => None,
                };
                let tracer = start_tracer(&resolved, &spec, Some(&id), None, true);
                let submitted = match self
                    .job(workers.as_ref(), &resolved, &spec, &admission)
                    .await
                {
                    Ok(mut job) => {
                        job.workspace = workspace.as_ref().map(|((job, _), _)| job.clone());
                        job.traceparent =
                            tracer.as_ref().map(moat_telemetry::RunTracer::traceparent);
                        workers.submit(job).await.map_err(LaunchError::from)
                    }
                    Err(error) => Err(error),
                };
                if let Err(error) = submitted {
                    if let Some(((_, workspace), root)) = &workspace {
                        let _ = workspace.remove(root);
                    }
                    return Err(error);
                }
                Ok(Prepared {
                    id: Some(id.clone()),
                    admission,
                    kind: Kind::Elsewhere {
                        runs: book.clone(),
                        id,
                        abort: spec.abort,
                        role: spec.role,
                        tracer,
                    },
                })
            }
            None => {
                let mut spec = spec;
                let mut admission = self.unlocked(admission, &resolved, &spec.ceiling)?;
                let share = self.share(&admission, &spec).await?;
                let id = spec.id.clone().unwrap_or_default();
                let workspace = given_workspace(&mut spec, &id, &mut admission).await?;
                let new_run = new_run(&resolved, &spec, &admission);
                let log = book
                    .create(id, &new_run, spec.abort.clone())
                    .await
                    .map_err(|e| {
                        if let Some((workspace, root)) = &workspace {
                            let _ = workspace.remove(root);
                        }
                        LaunchError::Record(e.to_string())
                    })?;
                let id = log.id().clone();
                let recording = Recording::new(log, spec.abort.clone());
                let children = Children::new(self.spawner(), id.clone(), &spec, &admission);
                let meter = self.meter(&id, &spec, &admission, Some(book.clone()));
                let desk = spec.ask.clone().map(|ask| {
                    Desk::new(
                        book.clone(),
                        id.clone(),
                        resolved.name(),
                        ask,
                        admission.approvable.clone(),
                        spec.ceiling.holder.clone(),
                    )
                });
                Ok(self.here(
                    resolved,
                    spec,
                    admission,
                    Some(id),
                    Some(recording),
                    Some(children),
                    share,
                    desk,
                    meter,
                    None,
                ))
            }
        }
    }

    /// [`prepare`](Self::prepare) for a launcher that records nothing.
    async fn prepare_unrecorded(
        &self,
        resolved: Resolved,
        mut spec: LaunchSpec,
        admission: Admission,
    ) -> Result<Prepared, LaunchError> {
        if spec.ask.is_some() {
            return Err(LaunchError::Refused(crate::Refusal::Asking(
                "a run recorded nowhere cannot ask for approval: nobody could answer it (leave out --no-store, or --ask)".into(),
            )));
        }
        let mut admission = self.unlocked(admission, &resolved, &spec.ceiling)?;
        let share = self.share(&admission, &spec).await?;
        // Named by an id of its own, though nothing records it.
        let id = RunId::new();
        given_workspace(&mut spec, &id, &mut admission).await?;
        let meter = self.meter(&id, &spec, &admission, None);
        Ok(self.here(
            resolved, spec, admission, None, None, None, share, None, meter, None,
        ))
    }

    /// Admits the run `spec` asks for, to execute in this process as run
    /// `id`, which whoever calls this records (a cluster worker, for a job
    /// it claimed): its children are launched at this launcher's place.
    /// With `workspace` (made from the job's project, and where in it the
    /// run works), the run may write it and works there.
    /// `traceparent`: the submitter's trace context, its spans' parent.
    pub(crate) async fn prepare_recorded_elsewhere(
        &self,
        spec: LaunchSpec,
        id: RunId,
        workspace: Option<(&moat_workspace::Workspace, &str)>,
        traceparent: Option<&str>,
    ) -> Result<Prepared, LaunchError> {
        let (resolved, admission) = self.admit(&spec, Some(&id)).await?;
        let mut spec = with_policy_asks(spec, &admission);
        let mut admission = self.unlocked(admission, &resolved, &spec.ceiling)?;
        if let Some((workspace, cwd)) = workspace {
            crate::workspace::unpacked(workspace, cwd, &mut admission, &mut spec.options)?;
        }
        let share = self.share(&admission, &spec).await?;
        let children = Children::new(self.spawner(), id.clone(), &spec, &admission);
        let meter = self.meter(&id, &spec, &admission, None);
        // Its requests are kept in its record where it is kept, where any
        // submitter answers them.
        let desk = match (spec.ask.clone(), &self.inner.book) {
            (Some(ask), Some(book)) => Some(Desk::new(
                book.clone(),
                id.clone(),
                resolved.name(),
                ask,
                admission.approvable.clone(),
                spec.ceiling.holder.clone(),
            )),
            _ => None,
        };
        Ok(self.here(
            resolved,
            spec,
            admission,
            Some(id),
            None,
            Some(children),
            share,
            desk,
            meter,
            traceparent,
        ))
    }

    /// Resolves `spec`'s adapter and admits its run (`own`: its id, when
    /// it is recorded already).
    async fn admit(
        &self,
        spec: &LaunchSpec,
        own: Option<&RunId>,
    ) -> Result<(Resolved, Admission), LaunchError> {
        if self.inner.stopping.is_cancelled() {
            return Err(LaunchError::Stopping);
        }
        let resolved = match &spec.adapter {
            AdapterRef::Resolved(resolved) => (**resolved).clone(),
            AdapterRef::Named(name) => self.inner.resolver.resolve(name).await?,
        };
        crate::check_complete(&resolved, &spec.options)?;
        let parent = match &spec.parent {
            Some(id) => Some(self.parent_scope(id, own).await?),
            None => None,
        };
        let admission =
            spec.ceiling
                .admit(&resolved, &spec.options, &spec.asked, parent.as_ref())?;
        Ok((resolved, admission))
    }

    /// A run admitted to execute in this process.
    #[allow(clippy::too_many_arguments)]
    fn here(
        &self,
        resolved: Resolved,
        spec: LaunchSpec,
        admission: Admission,
        id: Option<RunId>,
        recording: Option<Recording>,
        children: Option<Children>,
        share: Option<Share>,
        desk: Option<(Desk, Notices)>,
        meter: Option<Meter>,
        traceparent: Option<&str>,
    ) -> Prepared {
        let tracer = start_tracer(&resolved, &spec, id.as_ref(), traceparent, false);
        let (desk, notices) = desk.unzip();
        // The run's events, its desk's and its traffic's share a session id
        // from the start (the backend's replaces it once it names one).
        let session_id = Some(
            desk.as_ref()
                .map_or_else(moat_engine::new_session_id, |desk| {
                    desk.session().to_owned()
                }),
        );
        // The budget goes to a backend that keeps one itself; the others
        // are not told (moat keeps it for them).
        let mut options = spec.options;
        options.max_budget_usd = match resolved.profile {
            Some(profile) if profile.own_budget => admission.budget.usd,
            _ => None,
        };
        let memory = budgeted_memory(&admission, &spec.asked.limits);
        let guard = crate::protected::Guard::keep(&admission, resolved.profile, spec.names.clone());
        let scope = RunScope {
            asking: desk.map(|desk| moat_contain::Asking {
                approver: Arc::new(desk),
                tools: spec
                    .ask
                    .as_ref()
                    .map(|ask| ask.tools.clone())
                    .unwrap_or_default(),
            }),
            grants: admission.grants.clone(),
            trust: admission.trust,
            confinement: with_read_only(admission.confinement.clone(), guard.as_ref()),
            children: children.map(|children| ChildRunner(Arc::new(children))),
            dirs: admission.dirs.clone(),
            secrets: admission.secrets.clone(),
            traffic: traffic_of(&admission, &spec.abort),
        };
        let request = RunRequest {
            options,
            limits: admission.limits.clone(),
            abort: Some(spec.abort),
            drain: spec.drain,
            names: spec.names,
            price_table: spec.price_table,
            resume_fallback: spec.resume_fallback,
            run_id: id.as_ref().map(RunId::to_string),
            session_id,
            ..RunRequest::new(resolved.name(), spec.prompt).with_scope(scope)
        };
        Prepared {
            id,
            admission,
            kind: Kind::Here {
                share,
                memory,
                adapter: Arc::new(resolved.adapter),
                request: Box::new(request),
                role: spec.role,
                recording: recording.map(Box::new),
                notices,
                meter,
                guard,
                tracer,
            },
        }
    }

    /// The job that hands `spec`'s run to `workers`.
    async fn job(
        &self,
        workers: &dyn Workers,
        resolved: &Resolved,
        spec: &LaunchSpec,
        admission: &Admission,
    ) -> Result<Job, LaunchError> {
        let component = match &resolved.source {
            Source::BuiltIn(name) => ComponentRef::Builtin { name: name.clone() },
            Source::Installed(_) | Source::File(_) => {
                let bytes = resolved.component_bytes()?.unwrap_or_default();
                let sha256 = workers.put_component(&bytes).await?;
                if sha256 != resolved.sha256() {
                    return Err(LaunchError::Resolve(crate::ResolveError::Mismatch(
                        format!("{} changed while it was read; run again", resolved.name()),
                    )));
                }
                ComponentRef::Stored { sha256 }
            }
        };
        Ok(Job {
            id: spec.id.clone().unwrap_or_default().to_string(),
            workspace: None,
            parent: spec.parent.as_ref().map(ToString::to_string),
            adapter: resolved.name().to_owned(),
            component,
            prompt: spec.prompt.clone(),
            options: spec.options.clone(),
            grants: admission.grants.clone(),
            trust: admission.trust,
            limits: recorded_limits(admission),
            asked_limits: spec.asked.limits.programs_asked(),
            retry_on_worker_loss: spec.retry_on_worker_loss,
            ask: spec.ask.as_ref().map(|ask| JobAsk {
                timeout_ms: ask
                    .timeout
                    .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                tools: ask.tools.clone(),
            }),
            // Set by the caller, from the run's span.
            traceparent: None,
            role: spec.role.clone(),
        })
    }

    /// The meter of run `id`, admitted as `admission`: when it has a
    /// budget, or its parent has an account here (what it spends, its
    /// parent spends). Spending is recorded in `book`, when given.
    fn meter(
        &self,
        id: &RunId,
        spec: &LaunchSpec,
        admission: &Admission,
        book: Option<Arc<dyn RunBook>>,
    ) -> Option<Meter> {
        let parent = spec
            .parent
            .as_ref()
            .and_then(|parent| self.inner.accounts.get(parent));
        if admission.budget.is_unbounded() && parent.is_none() {
            return None;
        }
        let account = Account::new(
            id.clone(),
            admission.budget,
            parent,
            admission.budget_set_aside,
            spec.abort.clone(),
        );
        self.inner.accounts.add(&account);
        Some(Meter {
            account,
            book,
            price_table: spec.price_table.clone(),
            model: spec.options.model.clone(),
        })
    }

    /// What bounds a child of run `id`: its record, which must be live
    /// and have fewer than [`MAX_LIVE_CHILDREN`] live children besides
    /// `child` (the run being admitted, when recorded already: a cluster's
    /// job).
    async fn parent_scope(
        &self,
        id: &RunId,
        child: Option<&RunId>,
    ) -> Result<ParentScope, LaunchError> {
        let runs = self.runs().ok_or_else(|| {
            LaunchError::Refused(crate::Refusal::Nesting(
                "runs recorded nowhere cannot nest: a child is known by its parent's record (leave out --no-store)".into(),
            ))
        })?;
        let record = runs
            .get(id)
            .await?
            .ok_or_else(|| RunsError::NotFound(id.to_string()))?;
        if record.is_terminal() {
            return Err(LaunchError::ParentEnded(id.clone()));
        }
        // A record that does not read bounds nothing it should: its child
        // is refused, as the most restrictive parent would refuse it.
        if !record.unreadable.is_empty() {
            return Err(LaunchError::Refused(crate::Refusal::Nesting(format!(
                "the record of {id} does not read ({}): the store is damaged, and a child its parent cannot bound is refused",
                record.unreadable.join(", ")
            ))));
        }
        let live = RunFilter {
            statuses: RunStatus::LIVE.to_vec(),
            parent: Some(id.clone()),
            limit: Some(MAX_LIVE_CHILDREN + 1),
            ..RunFilter::default()
        };
        let others = runs
            .list(&live)
            .await?
            .iter()
            .filter(|record| Some(&record.id) != child)
            .count();
        if others >= MAX_LIVE_CHILDREN {
            return Err(LaunchError::Refused(crate::Refusal::Nesting(format!(
                "{id} has {MAX_LIVE_CHILDREN} live children, the most a run may have at once; wait for one to end"
            ))));
        }
        // How many runs hang above it, counted as far as the limit.
        let mut depth = 0;
        let mut above = record.run.parent.clone();
        while let Some(id) = above {
            depth += 1;
            if depth >= MAX_DEPTH {
                break;
            }
            above = runs.get(&id).await?.and_then(|r| r.run.parent);
        }
        let mut scope = ParentScope::of(&record, depth);
        // A parent live here: what its account has left, children's
        // spending and what they set aside counted.
        if let Some(account) = self.inner.accounts.get(id) {
            scope.budget_left = account.left();
        }
        Ok(scope)
    }

    /// Starts one prepared run: its events, recorded as they pass.
    pub fn start(&self, prepared: Prepared) -> Launched {
        self.start_all(vec![prepared], None)
    }

    /// Starts prepared runs together, their events merged as they come;
    /// with `memory_budget`, runs wait while the sum of their memory caps
    /// would pass it.
    pub fn start_all(&self, prepared: Vec<Prepared>, memory_budget: Option<u64>) -> Launched {
        let ids: Vec<Option<RunId>> = prepared.iter().map(|p| p.id.clone()).collect();
        let mut here = Vec::new();
        let mut followed = Vec::new();
        let mut shares = Vec::new();
        let mut notices = Vec::new();
        let mut meters = Vec::new();
        let mut guards = Vec::new();
        let mut traffics = Vec::new();
        let mut tracers = Vec::new();
        for (task, prepared) in prepared.into_iter().enumerate() {
            match prepared.kind {
                Kind::Here {
                    share,
                    memory,
                    adapter,
                    request,
                    role,
                    recording,
                    notices: asked,
                    meter,
                    guard,
                    tracer,
                } => {
                    guards.extend(guard.map(|guard| (task, guard)));
                    traffics.push(crate::traffic::RunTraffic {
                        task,
                        traffic: request.scope.traffic.clone(),
                        agent: request.agent.clone(),
                        session_id: request.session_id.clone().unwrap_or_default(),
                        role: role.clone(),
                    });
                    tracers.extend(tracer.map(|tracer| (task, tracer)));
                    shares.extend(share);
                    notices.extend(asked.map(|asked| (task, asked)));
                    meters.extend(meter.map(|meter| (task, meter)));
                    here.push((adapter, *request, role, recording.map(|r| *r), memory));
                }
                Kind::Elsewhere {
                    runs,
                    id,
                    abort,
                    role,
                    tracer,
                } => followed.push(Followed {
                    runs,
                    id,
                    abort,
                    role,
                    tracer,
                }),
            }
        }
        if !followed.is_empty() {
            return Launched::followed(ids, followed);
        }
        let roles: Vec<Option<String>> =
            here.iter().map(|(_, _, role, _, _)| role.clone()).collect();
        let (events, recordings) = engine_start(here, memory_budget);
        let events = if guards.is_empty() {
            events
        } else {
            crate::protected::guarded(events, guards)
        };
        let events = if notices.is_empty() {
            events
        } else {
            crate::events::with_notices(events, notices, roles)
        };
        let events = crate::traffic::recorded(events, traffics);
        let events = if meters.is_empty() {
            events
        } else {
            crate::metering::metered(events, meters)
        };
        let events = crate::traces::traced(events, tracers);
        Launched::here(ids, events, recordings, shares)
    }

    /// Launches the run `spec` asks for and runs it to its end in the
    /// background (on workers elsewhere: hands it to them): its id once
    /// recorded.
    pub async fn spawn(&self, spec: LaunchSpec) -> Result<RunId, LaunchError> {
        let prepared = self.prepare(spec).await?;
        let id = prepared.id.clone().ok_or_else(|| {
            LaunchError::Refused(crate::Refusal::Nesting(
                "a run recorded nowhere cannot be followed once started".into(),
            ))
        })?;
        if let Kind::Here { .. } = prepared.kind {
            let mut events = self.start(prepared);
            tokio::spawn(async move { while events.next().await.is_some() {} });
        }
        Ok(id)
    }

    /// Waits until every run live in this process has ended, each stopped
    /// (its `done` interrupted after its drain) first; past `patience`
    /// they are stopped at once.
    pub async fn stop_runs(&self, patience: Duration) {
        let Some(book) = &self.inner.book else {
            return;
        };
        if !book.stop_live(patience).await {
            tracing::warn!("runs still ending after {patience:?}; stopping them at once");
            moat_sandbox::stop_all_runs();
        }
    }
}

/// A launcher held weakly, as its runs' children reach it.
struct WeakLauncher(Weak<Inner>);

impl Spawner for WeakLauncher {
    fn spawn(&self, spec: LaunchSpec) -> BoxFuture<'_, Result<RunId, LaunchError>> {
        Box::pin(async move {
            let inner = self.0.upgrade().ok_or(LaunchError::Stopping)?;
            Launcher { inner }.spawn(spec).await
        })
    }

    fn runs(&self) -> Option<Arc<dyn Runs>> {
        self.0.upgrade().and_then(|inner| Launcher { inner }.runs())
    }
}

/// The workspace `spec` asks for, made as run `id`'s here and given to the
/// admitted run, with the root it is under; `None` when it asks for none.
async fn given_workspace(
    spec: &mut LaunchSpec,
    id: &RunId,
    admission: &mut Admission,
) -> Result<Option<(moat_workspace::Workspace, std::path::PathBuf)>, LaunchError> {
    let Some(request) = &spec.workspace else {
        return Ok(None);
    };
    let given = crate::workspace::give(request, id, admission, &mut spec.options).await?;
    Ok(Some((given, request.root.clone())))
}

/// The spans of the run of `resolved` that `spec` asks for (`id`, when
/// recorded; `traceparent`: a parent from another process, else the
/// spec's own; `submitted`:
/// followed here, executed by a cluster's worker); `None` when no traces
/// are exported.
fn start_tracer(
    resolved: &Resolved,
    spec: &LaunchSpec,
    id: Option<&RunId>,
    traceparent: Option<&str>,
    submitted: bool,
) -> Option<moat_telemetry::RunTracer> {
    let id = id.map(RunId::to_string);
    let parent = spec.parent.as_ref().map(RunId::to_string);
    moat_telemetry::start_run(moat_telemetry::RunStart {
        id: id.as_deref(),
        parent: parent.as_deref(),
        traceparent: traceparent.or(spec.traceparent.as_deref()),
        adapter: resolved.name(),
        model: spec.options.model.as_deref(),
        submitted,
    })
}

/// Where the traffic of a run admitted as `admission` is recorded: its
/// model APIs those its grants name, a call moat cannot read refused
/// under a budget in tokens or dollars unless it may make them, and no
/// model call sent once the run is stopped (`abort`).
fn traffic_of(admission: &Admission, abort: &CancellationToken) -> moat_contain::traffic::Traffic {
    let budget = &admission.budget;
    let counted = budget.tokens.is_some() || budget.usd.is_some();
    moat_contain::traffic::Traffic::new(
        moat_grants::Meters::of(&admission.grants),
        counted && !admission.grants.unmetered,
        abort.clone(),
    )
}

/// The record of a run of `resolved` that `spec` asks for, as admitted.
fn new_run(resolved: &Resolved, spec: &LaunchSpec, admission: &Admission) -> NewRun {
    NewRun {
        parent: spec.parent.clone(),
        adapter: resolved.name().to_owned(),
        component_sha256: resolved.sha256().to_owned(),
        prompt: spec.prompt.clone(),
        options: serde_json::to_value(&spec.options).unwrap_or_default(),
        grants: admission.grants.clone(),
        trust: Some(admission.trust),
        limits: Some(recorded_limits(admission)),
        role: spec.role.clone(),
    }
}

/// `spec`, asking also about the tools the policy file names for its
/// adapter (a run it names some for asks, whatever it was started with).
fn with_policy_asks(mut spec: LaunchSpec, admission: &Admission) -> LaunchSpec {
    if admission.ask_tools.is_empty() {
        return spec;
    }
    let ask = spec.ask.get_or_insert_with(crate::Ask::default);
    for tool in &admission.ask_tools {
        if !ask.tools.contains(tool) {
            ask.tools.push(tool.clone());
        }
    }
    spec
}

/// The limits a run's record (or job) keeps: its budget with the rest.
fn recorded_limits(admission: &Admission) -> RecordedLimits {
    RecordedLimits {
        budget_usd: admission.budget.usd,
        max_tokens: admission.budget.tokens,
        max_model_calls: admission.budget.calls,
        ..RecordedLimits::of(&admission.limits)
    }
}

type HereRun = (
    Arc<WasmAdapter>,
    RunRequest<RunScope>,
    Option<String>,
    Option<Recording>,
    u64,
);

/// `confinement`, with the protected paths `guard` keeps that may be made
/// read-only to the run's programs.
fn with_read_only(
    mut confinement: moat_grants::Confinement,
    guard: Option<&crate::protected::Guard>,
) -> moat_grants::Confinement {
    if let (moat_grants::Confinement::Contained { read_only, .. }, Some(guard)) =
        (&mut confinement, guard)
    {
        *read_only = guard.read_only();
    }
    confinement
}

/// The engine's run entry, called from here alone: one run pulled
/// directly, several merged by the engine's parallel run.
fn engine_start(
    runs: Vec<HereRun>,
    memory_budget: Option<u64>,
) -> (BoxStream<'static, TaskEvent>, Vec<Option<Recording>>) {
    let mut recordings = Vec::with_capacity(runs.len());
    if runs.len() == 1 {
        let (adapter, request, role, recording, _) = runs.into_iter().next().expect("one run");
        recordings.push(recording);
        let run = AgentRun::new(adapter, request);
        let events = run.into_stream().map(move |mut event| {
            if event.role.is_none() {
                event.role.clone_from(&role);
            }
            TaskEvent { task: 0, event }
        });
        return (events.boxed(), recordings);
    }
    let mut registry = Registry::scoped();
    let mut tasks = Vec::with_capacity(runs.len());
    for (adapter, request, role, recording, memory) in runs {
        // Each run its own adapter under its own name: the same adapter
        // twice is registered once.
        if registry.get(&request.agent).is_none() {
            let _ = registry.register(adapter);
        }
        recordings.push(recording);
        tasks.push(ParallelTask {
            request,
            role,
            memory_bytes: Some(memory),
        });
    }
    let run = run_parallel(&registry, tasks, None).expect("every adapter is registered");
    let run = match memory_budget {
        Some(bytes) => run.with_memory_budget(bytes),
        None => run,
    };
    (run.into_tagged_stream().boxed(), recordings)
}
