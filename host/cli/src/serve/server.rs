//! What one `moat serve` process holds and does for every client: the runs
//! it started (live, each publishing its events as they are recorded), and
//! the operations of the protocol on them and on the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use moat_engine::{
    Adapter, AgentEvent, DoneStatus, EventPayload, FieldNames, McpServers, Registry, ResultFold,
    RunLimits, RunRequest, run_agent,
};
use moat_grants::{Grants, TrustLevel, canonical_dir, names};
use moat_sandbox::{ChildError, ChildRequest, ChildRun, ChildRunner, ChildRuns, RunScope, Sandbox};
use moat_store::{FailReason, Recorder, RunFilter, RunId, RunStatus, Store};

use super::on_cluster;
use super::protocol::{Code, Failure, LimitParams, ListParams, RunParams, awaited};
use crate::args::GrantFlags;
use crate::commands::{record_json, recording};
use crate::resolve;

/// Events a live run keeps for subscribers that fall behind; one further
/// behind is told it lagged (and catches up from the store).
const EVENT_BUFFER: usize = 4096;

/// How often a run owned by another moat process is looked at in the
/// store (its events, its end).
const STORE_POLL: Duration = Duration::from_millis(100);

/// How many levels of runs may hang below a run a client started.
pub const MAX_DEPTH: usize = 4;

/// How many children of one run may be live at once.
pub const MAX_LIVE_CHILDREN: usize = 16;

/// How many stored events a subscriber reads from the store at a time:
/// what it holds while it waits for its client.
const REPLAY_PAGE: usize = 256;

/// One recorded event as a live run publishes it: its JSON, made once for
/// every subscriber.
#[derive(Debug, Clone)]
pub struct Published {
    pub seq: u64,
    pub json: Arc<str>,
    pub done: bool,
}

impl Published {
    fn of(seq: u64, event: &AgentEvent) -> Self {
        Published {
            seq,
            json: serde_json::to_string(event).unwrap_or_default().into(),
            done: event.is_done(),
        }
    }
}

/// A run this server started that has not ended yet.
struct LiveRun {
    /// The run whose child it is.
    parent: Option<RunId>,
    abort: CancellationToken,
    events: broadcast::Sender<Published>,
    /// Becomes true once the run's record is final and its events stored.
    ended: watch::Receiver<bool>,
}

/// The server: its sandbox, its store, its ceiling of grants, its runs.
pub struct Server {
    sandbox: Sandbox,
    store: Arc<Store>,
    /// With `--nats`: the cluster whose runs the operations are on.
    cluster: Option<moat_cluster::Cluster>,
    /// The server's own grant flags: the most any run may get.
    ceiling: GrantFlags,
    live: Mutex<HashMap<RunId, Arc<LiveRun>>>,
    /// Cancelled when the server is asked to stop (`shutdown`, a signal,
    /// the end of stdin): no new run starts, live ones are stopped.
    pub stopping: CancellationToken,
    /// Cancelled once the runs have ended: connections close.
    pub closed: CancellationToken,
}

impl Server {
    pub fn new(
        sandbox: Sandbox,
        store: Arc<Store>,
        ceiling: GrantFlags,
        cluster: Option<moat_cluster::Cluster>,
    ) -> Self {
        Server {
            sandbox,
            store,
            cluster,
            ceiling,
            live: Mutex::new(HashMap::new()),
            stopping: CancellationToken::new(),
            closed: CancellationToken::new(),
        }
    }

    fn live_run(&self, id: &RunId) -> Option<Arc<LiveRun>> {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    /// `run`: records the run and starts it; its id at once.
    pub async fn start_run(self: &Arc<Self>, mut params: RunParams) -> Result<Value, Failure> {
        if self.stopping.is_cancelled() {
            return Err(Failure::new(Code::RunFailed, "the server is shutting down"));
        }
        let resolved = resolve::adapter(&self.sandbox, &params.adapter)
            .await
            .map_err(|e| match e.downcast_ref::<crate::UsageError>() {
                Some(usage) if usage.0.starts_with("unknown adapter") => {
                    Failure::not_found(usage.0.clone())
                }
                _ => Failure::new(Code::RunFailed, format!("{e:#}")),
            })?;
        // What `moat run` with the server's own flags would give this
        // adapter: the server's ceiling and the adapter's own boundary
        // (a built-in's declared needs, a policy entry).
        let mut allowance =
            resolve::grants(&resolved, TrustLevel::Sandbox, None, &[], &self.ceiling)
                .map_err(|e| Failure::new(Code::RunFailed, format!("{e:#}")))?;
        let parent = match (&params.parent, &self.cluster) {
            (Some(text), Some(cluster)) => {
                let (id, parents) = on_cluster::parent_grants(cluster, text).await?;
                // A child never gets more than its parent.
                allowance = allowance.intersect(&parents);
                RunId::parse(&id)
            }
            (Some(text), None) => {
                let (id, record) = self.record(text)?;
                self.check_room(&id)
                    .map_err(|limit| Failure::new(Code::RunFailed, limit))?;
                let parents: Grants = serde_json::from_value(record.run.grants).unwrap_or_default();
                // A child never gets more than its parent.
                allowance = allowance.intersect(&parents);
                Some(id)
            }
            (None, _) => None,
        };
        let grants = match params.grants.take() {
            Some(requested) => checked(requested)?,
            None => allowance.clone(),
        };
        let excess = grants.excess_over(&allowance);
        if !excess.is_empty() {
            let beyond: Vec<String> = excess.iter().map(ToString::to_string).collect();
            let whose = if parent.is_some() {
                "this server and the parent run allow"
            } else {
                "this server allows the adapter"
            };
            return Err(Failure::new(
                Code::BoundaryViolation,
                format!(
                    "the run asks for more than {whose}: {}; ask for less, or start moat serve with those grants",
                    beyond.join(", ")
                ),
            ));
        }
        if let Some(servers) = &params.options.mcp_servers {
            let servers = McpServers::from_json(&json!({"mcpServers": servers}).to_string())
                .map_err(|e| Failure::invalid(format!("options.mcpServers: {e}")))?;
            resolve::check_mcp_programs(Some(&servers), &grants)
                .map_err(|e| Failure::new(Code::BoundaryViolation, format!("{e:#}")))?;
        }
        // The run's own children, once its id is known.
        let own_id = Arc::new(std::sync::OnceLock::new());
        let scope = RunScope {
            grants,
            trust: params.trust,
            confinement: resolve::confinement(&resolved, &self.ceiling),
            children: Some(ChildRunner(Arc::new(ServedChildren {
                server: Arc::downgrade(self),
                parent: own_id.clone(),
                trust: params.trust,
            }))),
        };
        let agent = resolved.adapter.info().name.clone();
        let sha256 = resolved.adapter.details().sha256.clone();
        if let Some(bytes) = params.limits.max_memory_bytes
            && bytes > moat_sandbox::MAX_MEMORY_CEILING
        {
            return Err(Failure::invalid(format!(
                "limits.maxMemoryBytes {bytes} is over the most a run may have, {}",
                moat_sandbox::MAX_MEMORY_CEILING
            )));
        }
        let limits = limits(&params, resolved.default_timeout());
        if let Some(cluster) = &self.cluster {
            let submission = on_cluster::Submission {
                resolved: &resolved,
                adapter: &params.adapter,
                prompt: params.prompt,
                options: params.options,
                grants: scope.grants,
                trust: params.trust,
                limits: &limits,
                parent: parent.map(|id| id.to_string()),
            };
            return on_cluster::submit(cluster, submission).await;
        }
        let mut registry = Registry::scoped();
        registry
            .register(Arc::new(resolved.adapter))
            .map_err(|e| Failure::new(Code::RunFailed, e.to_string()))?;
        let abort = CancellationToken::new();
        let request = RunRequest {
            options: params.options,
            limits,
            abort: Some(abort.clone()),
            names: Arc::new(FieldNames),
            ..RunRequest::new(agent, params.prompt).with_scope(scope)
        };
        let parent_of_live = parent.clone();
        let recorder = recording::record(self.store.clone(), &request, sha256, parent)
            .map_err(|e| Failure::new(Code::RunFailed, format!("cannot record the run: {e:#}")))?;
        let id = recorder.id().clone();
        let _ = own_id.set(id.clone());
        let run = run_agent(&registry, request)
            .map_err(|e| Failure::new(Code::RunFailed, e.to_string()))?;
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let (ended_tx, ended) = watch::channel(false);
        let live = Arc::new(LiveRun {
            parent: parent_of_live,
            abort,
            events,
            ended,
        });
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), live.clone());
        let server = self.clone();
        let reply = json!({"run": id.as_str()});
        tokio::spawn(async move {
            server.drive(run, recorder, &live).await;
            server
                .live
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            let _ = ended_tx.send(true);
        });
        Ok(reply)
    }

    /// Pulls the run's events to its end: each recorded, then published.
    /// A run the store can no longer record is stopped, and says why.
    async fn drive(&self, run: moat_engine::AgentRun, recorder: Recorder, live: &LiveRun) {
        if let Err(error) = recorder.running() {
            tracing::error!("cannot record the run: {error}");
        }
        let id = recorder.id().clone();
        let watcher = tokio::spawn(recording::watch_cancels(
            self.store.clone(),
            vec![id.clone()],
            vec![live.abort.clone()],
        ));
        let mut events = std::pin::pin!(run.into_stream());
        let mut recording = Some(recorder);
        let mut next_seq = 0;
        while let Some(mut event) = events.next().await {
            if let Some(recorder) = recording.as_mut() {
                match recorder.record(&event) {
                    Ok(seq) => next_seq = seq,
                    Err(error) => {
                        let failure = recording::store_failure(&event, &error);
                        live.abort.cancel();
                        let _ = live.events.send(Published::of(next_seq, &failure));
                        next_seq += 1;
                        if let Some(recorder) = recording.take() {
                            let _ = recorder.finish(FailReason::StoreError);
                        }
                    }
                }
            }
            if recording.is_none()
                && let EventPayload::Done(done) = &mut event.payload
            {
                done.status = DoneStatus::Error;
            }
            if event.is_done() {
                // The record is final before anyone hears of the done: a
                // client that reads it and asks `get` sees the ended run.
                if let Some(recorder) = recording.take()
                    && let Err(error) = recorder.finish(FailReason::Cancelled)
                {
                    tracing::error!("cannot record the run's end: {error}");
                }
                let _ = self.store.flush();
                let _ = live.events.send(Published::of(next_seq, &event));
                break;
            }
            let _ = live.events.send(Published::of(next_seq, &event));
            next_seq += 1;
        }
        watcher.abort();
        // A stream cut before its done: the run was stopped.
        if let Some(recorder) = recording
            && let Err(error) = recorder.finish(FailReason::Cancelled)
        {
            tracing::error!("cannot record the run's end: {error}");
        }
        // What awaits and subscribers read from the store is all there.
        let _ = self.store.flush();
    }

    /// Whether `parent` may have one more child: not nested deeper than
    /// [`MAX_DEPTH`] below a client's run, not [`MAX_LIVE_CHILDREN`] live
    /// already. The refusal says which.
    fn check_room(&self, parent: &RunId) -> Result<(), String> {
        // The parent's own depth: how many runs hang above it.
        let mut depth = 0;
        let mut above = self
            .store
            .get(parent)
            .ok()
            .flatten()
            .and_then(|r| r.run.parent);
        while let Some(id) = above {
            depth += 1;
            if depth >= MAX_DEPTH {
                break;
            }
            above = self
                .store
                .get(&id)
                .ok()
                .flatten()
                .and_then(|r| r.run.parent);
        }
        if depth + 1 > MAX_DEPTH {
            return Err(format!(
                "runs nest at most {MAX_DEPTH} deep below the run a client started; {parent} is at that depth"
            ));
        }
        let live_children = self
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|run| run.parent.as_ref() == Some(parent))
            .count();
        if live_children >= MAX_LIVE_CHILDREN {
            return Err(format!(
                "{parent} has {MAX_LIVE_CHILDREN} live children, the most a run may have at once; wait for one to end"
            ));
        }
        Ok(())
    }

    /// A component may name as its child's adapter a built-in, or a
    /// component inside the directories its own run was granted: the host
    /// never loads (nor says whether it could load) any other file a guest
    /// names.
    fn check_child_adapter(&self, parent: &RunId, adapter: &str) -> Result<(), ChildError> {
        if moat_builtins::component(adapter).is_some() {
            return Ok(());
        }
        let grants: Grants = self
            .store
            .get(parent)
            .ok()
            .flatten()
            .and_then(|record| serde_json::from_value(record.run.grants).ok())
            .unwrap_or_default();
        let path = std::path::Path::new(adapter);
        let inside = path.is_absolute()
            && std::fs::canonicalize(path).is_ok_and(|real| {
                grants
                    .read
                    .iter()
                    .chain(&grants.write)
                    .any(|dir| real.starts_with(dir))
            });
        if inside {
            return Ok(());
        }
        Err(ChildError::Denied(format!(
            "a child's adapter is a built-in ({}) or a component inside this run's granted directories",
            moat_builtins::names().collect::<Vec<_>>().join(", ")
        )))
    }

    /// The record of the run `text` names (an id or a unique prefix).
    fn record(&self, text: &str) -> Result<(RunId, moat_store::RunRecord), Failure> {
        let id = self
            .store
            .resolve(text)
            .map_err(|e| Failure::not_found(e.to_string()))?;
        let record = self
            .store
            .get(&id)
            .map_err(store_failure)?
            .ok_or_else(|| Failure::not_found(format!("no run {id}")))?;
        Ok((id, record))
    }

    /// Waits until the run has ended and its record is final.
    async fn ended(&self, id: &RunId) -> Result<(), Failure> {
        if let Some(live) = self.live_run(id) {
            let mut ended = live.ended.clone();
            let _ = ended.wait_for(|ended| *ended).await;
            return Ok(());
        }
        // Not this server's: another moat owns it; its record says when.
        loop {
            let record = self.store.get(id).map_err(store_failure)?;
            match record {
                Some(record) if record.status.is_terminal() => return Ok(()),
                Some(_) => tokio::time::sleep(STORE_POLL).await,
                None => return Err(Failure::not_found(format!("no run {id}"))),
            }
        }
    }

    /// `await`: every run's result once all have ended; `RUN_FAILED`
    /// (with the results) when one did not complete.
    pub async fn await_runs(&self, runs: &[String]) -> Result<Value, Failure> {
        if let Some(cluster) = &self.cluster {
            return on_cluster::await_runs(cluster, runs).await;
        }
        let mut ids = Vec::with_capacity(runs.len());
        for text in runs {
            ids.push(self.record(text)?.0);
        }
        for id in &ids {
            self.ended(id).await?;
        }
        let mut results = serde_json::Map::new();
        let mut failed = Vec::new();
        for id in &ids {
            let (record, result) = self.result(id)?;
            if record.status != RunStatus::Completed {
                let reason = record.reason.map(|r| r.as_str().to_owned());
                failed.push(format!(
                    "{id} {}",
                    reason.unwrap_or_else(|| "failed".into())
                ));
            }
            results.insert(id.to_string(), result);
        }
        awaited(results, &failed)
    }

    /// An ended run's record and result (folded from its stored events).
    fn result(&self, id: &RunId) -> Result<(moat_store::RunRecord, Value), Failure> {
        let record = self
            .store
            .get(id)
            .map_err(store_failure)?
            .ok_or_else(|| Failure::not_found(format!("no run {id}")))?;
        let mut fold = ResultFold::new();
        for (_, event) in self.store.events(id, 0).map_err(store_failure)? {
            fold.observe(&event, &mut ());
        }
        let result = serde_json::to_value(fold.finish()).unwrap_or(Value::Null);
        Ok((record, result))
    }

    /// `cancel`: stops the run wherever on this machine it runs; a run
    /// that is unknown or has ended already is a success too.
    pub async fn cancel(&self, text: &str) -> Result<Value, Failure> {
        match &self.cluster {
            Some(cluster) => on_cluster::cancel(cluster, text).await,
            None => self.cancel_here(text),
        }
    }

    /// `cancel` of a run on this machine.
    fn cancel_here(&self, text: &str) -> Result<Value, Failure> {
        let Ok(id) = self.store.resolve(text) else {
            return Ok(json!({}));
        };
        if let Some(live) = self.live_run(&id) {
            live.abort.cancel();
        } else if let Some(record) = self.store.get(&id).map_err(store_failure)?
            && !record.status.is_terminal()
        {
            self.store.request_cancel(&id).map_err(store_failure)?;
        }
        Ok(json!({}))
    }

    /// `get`: the record, and the result once the run has ended.
    pub async fn get(&self, text: &str) -> Result<Value, Failure> {
        if let Some(cluster) = &self.cluster {
            return on_cluster::get(cluster, text).await;
        }
        let (id, record) = self.record(text)?;
        let mut value = record_json(&record);
        value["result"] = if record.status.is_terminal() {
            self.result(&id)?.1
        } else {
            Value::Null
        };
        Ok(value)
    }

    /// `list`: records, newest first.
    pub async fn list(&self, params: &ListParams) -> Result<Value, Failure> {
        let mut statuses = Vec::new();
        for status in &params.status {
            let known = RunStatus::ALL.into_iter().find(|s| s.as_str() == status);
            statuses.push(known.ok_or_else(|| {
                Failure::invalid(format!(
                    "list: unknown status {status:?}; the statuses are pending, running, completed, failed"
                ))
            })?);
        }
        if let Some(cluster) = &self.cluster {
            return on_cluster::list(cluster, &statuses, params).await;
        }
        let filter = RunFilter {
            statuses,
            limit: params.limit,
        };
        let runs = self.store.list(&filter).map_err(store_failure)?;
        Ok(json!({"runs": runs.iter().map(record_json).collect::<Vec<_>>()}))
    }

    /// `adapters`: the built-in adapters.
    pub async fn adapters(&self) -> Result<Value, Failure> {
        let mut adapters = Vec::new();
        for name in moat_builtins::names() {
            let resolved = resolve::adapter(&self.sandbox, name)
                .await
                .map_err(|e| Failure::new(Code::RunFailed, format!("{e:#}")))?;
            adapters.push(describe(&resolved, None));
        }
        Ok(json!({"adapters": adapters}))
    }

    /// `inspect`: what an adapter is, and what this server allows it.
    pub async fn inspect(&self, adapter: &str) -> Result<Value, Failure> {
        let resolved = resolve::adapter(&self.sandbox, adapter)
            .await
            .map_err(|e| Failure::not_found(format!("{e:#}")))?;
        let allowance = resolve::grants(&resolved, TrustLevel::Sandbox, None, &[], &self.ceiling)
            .map_err(|e| Failure::invalid(format!("{e:#}")))?;
        Ok(describe(&resolved, Some(&allowance)))
    }

    /// Stops every live run (each ends with its `done` interrupted) and
    /// waits until their records are final, at most `patience`.
    pub async fn stop_runs(&self, patience: Duration) {
        let live: Vec<Arc<LiveRun>> = self
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for run in &live {
            run.abort.cancel();
        }
        let all = futures::future::join_all(live.iter().map(|run| {
            let mut ended = run.ended.clone();
            async move {
                let _ = ended.wait_for(|ended| *ended).await;
            }
        }));
        if tokio::time::timeout(patience, all).await.is_err() {
            tracing::warn!("runs still ending after {patience:?}; stopping them at once");
            moat_sandbox::stop_all_runs();
        }
    }

    /// The events of run `id` from `from_seq` on, to `send` (as JSON, and
    /// whether it is the `done`): the stored ones, a page at a time, then
    /// the live ones as they come, each once and in order, until its
    /// `done`. `Err(next)` when the subscriber fell behind the live events
    /// (it resumes from `next`, the first it did not get).
    pub async fn stream_events<F, Fut>(
        &self,
        id: &RunId,
        from_seq: u64,
        stop: &CancellationToken,
        mut send: F,
    ) -> Result<(), u64>
    where
        F: FnMut(u64, Arc<str>, bool) -> Fut,
        Fut: Future<Output = bool>,
    {
        if let Some(cluster) = &self.cluster {
            on_cluster::stream_events(cluster, id, from_seq, stop, send).await;
            return Ok(());
        }
        // Listening starts before the store is read: an event published
        // from now on is received, and one published before was recorded
        // before, so the flush below makes it readable.
        let mut live = self.live_run(id).map(|run| run.events.subscribe());
        let mut next = from_seq;
        loop {
            let _ = self.store.flush();
            loop {
                let page = self
                    .store
                    .event_lines(id, next, REPLAY_PAGE)
                    .unwrap_or_default();
                if page.is_empty() {
                    break;
                }
                for line in page {
                    if stop.is_cancelled() || !send(line.seq, line.json.into(), line.done).await {
                        return Ok(());
                    }
                    next = line.seq + 1;
                    if line.done {
                        return Ok(());
                    }
                }
            }
            let Some(receiver) = live.as_mut() else {
                // Another moat's run: its events arrive through the store.
                let ended = self
                    .store
                    .get(id)
                    .ok()
                    .flatten()
                    .is_none_or(|record| record.status.is_terminal());
                if ended
                    && self
                        .store
                        .event_lines(id, next, 1)
                        .unwrap_or_default()
                        .is_empty()
                {
                    return Ok(());
                }
                tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    () = tokio::time::sleep(STORE_POLL) => continue,
                }
            };
            loop {
                let received = tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    received = receiver.recv() => received,
                };
                match received {
                    Ok(published) if published.seq < next => {}
                    Ok(published) => {
                        if !send(published.seq, published.json, published.done).await {
                            return Ok(());
                        }
                        next = published.seq + 1;
                        if published.done {
                            return Ok(());
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => return Err(next),
                    // The run ended: whatever is left is in the store.
                    Err(broadcast::error::RecvError::Closed) => {
                        live = None;
                        break;
                    }
                }
            }
        }
    }

    /// Refuses a subscription from past the end of a run that has ended
    /// (it would wait for events that never come).
    pub async fn check_from(&self, id: &RunId, from_seq: u64) -> Result<(), Failure> {
        if let Some(cluster) = &self.cluster {
            return on_cluster::check_from(cluster, id, from_seq).await;
        }
        if from_seq == 0 || self.live_run(id).is_some() {
            return Ok(());
        }
        let ended = self
            .store
            .get(id)
            .map_err(store_failure)?
            .is_some_and(|record| record.status.is_terminal());
        if !ended {
            return Ok(());
        }
        let _ = self.store.flush();
        let past_end = self
            .store
            .event_lines(id, from_seq, 1)
            .map_err(store_failure)?
            .is_empty();
        if !past_end {
            return Ok(());
        }
        Err(Failure::invalid(format!(
            "run {id} has ended before event {from_seq}: fromSeq is past its end"
        )))
    }

    /// Resolves run ids for a subscription: every one must exist.
    pub async fn resolve_runs(&self, runs: &[String]) -> Result<Vec<RunId>, Failure> {
        if let Some(cluster) = &self.cluster {
            return on_cluster::resolve_runs(cluster, runs).await;
        }
        runs.iter().map(|text| Ok(self.record(text)?.0)).collect()
    }
}

/// A store failure as a protocol error.
fn store_failure(error: moat_store::StoreError) -> Failure {
    Failure::new(Code::RunFailed, format!("the run store failed: {error}"))
}

/// A request's grants, checked as the flags are: directories absolute and
/// existing (canonical), names well formed.
fn checked(mut grants: Grants) -> Result<Grants, Failure> {
    let invalid = |e: moat_grants::GrantError| Failure::invalid(format!("grants: {e}"));
    for dir in grants.read.iter_mut().chain(grants.write.iter_mut()) {
        if !dir.is_absolute() {
            return Err(Failure::invalid(format!(
                "grants: {} is not an absolute path",
                dir.display()
            )));
        }
        *dir = canonical_dir(dir, None).map_err(invalid)?;
    }
    for name in &mut grants.env {
        *name = names::env_name(name).map_err(invalid)?;
    }
    for program in &mut grants.run {
        *program = names::program(program).map_err(invalid)?;
    }
    Ok(grants)
}

/// The run's limits: the request's, else the defaults (the adapter's
/// default timeout).
fn limits(params: &RunParams, default_timeout: Duration) -> RunLimits {
    let defaults = RunLimits::default();
    let asked = &params.limits;
    RunLimits {
        timeout: Some(
            asked
                .timeout_ms
                .map_or(default_timeout, Duration::from_millis),
        ),
        fuel: asked.fuel,
        max_memory_bytes: asked.max_memory_bytes.unwrap_or(defaults.max_memory_bytes),
        max_event_bytes: asked
            .max_event_bytes
            .map_or(defaults.max_event_bytes, |b| b as usize),
        ..defaults
    }
}

/// An adapter as `adapters` and `inspect` describe it.
fn describe(resolved: &resolve::Resolved, allowance: Option<&Grants>) -> Value {
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

/// The child runs of one of the server's runs (the contract's `runs`
/// import): started as a client's run with that run as `parent` (so within
/// its grants, recorded, ended with it), at its trust level.
struct ServedChildren {
    server: std::sync::Weak<Server>,
    /// The run's id, set once it is recorded.
    parent: Arc<std::sync::OnceLock<RunId>>,
    trust: TrustLevel,
}

impl ChildRuns for ServedChildren {
    fn start(
        &self,
        request: ChildRequest,
    ) -> futures::future::BoxFuture<'_, Result<Box<dyn ChildRun>, ChildError>> {
        Box::pin(async move {
            let server = self
                .server
                .upgrade()
                .ok_or_else(|| ChildError::Failed("the server is stopping".into()))?;
            let parent = self
                .parent
                .get()
                .ok_or_else(|| ChildError::Failed("the run is not recorded yet".into()))?
                .clone();
            server
                .check_room(&parent)
                .map_err(ChildError::LimitReached)?;
            server.check_child_adapter(&parent, &request.adapter)?;
            let params = RunParams {
                adapter: request.adapter,
                prompt: request.prompt,
                options: request.options,
                trust: self.trust,
                grants: request.grants,
                limits: LimitParams {
                    timeout_ms: request
                        .timeout
                        .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                    ..LimitParams::default()
                },
                parent: Some(parent.to_string()),
            };
            let started = server
                .start_run(params)
                .await
                .map_err(|failure| match failure.code {
                    Code::BoundaryViolation => ChildError::Denied(failure.message),
                    Code::NotFound => ChildError::NotFound(failure.message),
                    Code::InvalidRequest | Code::RunFailed => ChildError::Failed(failure.message),
                })?;
            let id = started["run"]
                .as_str()
                .and_then(RunId::parse)
                .ok_or_else(|| ChildError::Failed("the child has no id".into()))?;
            Ok(Box::new(ServedChild::follow(server, id)) as Box<dyn ChildRun>)
        })
    }
}

/// A child run as its parent reads it: its events forwarded, in order and
/// each once, from the server's stream of it (resumed from the store after
/// a lag), into a small queue the parent drains.
struct ServedChild {
    server: Arc<Server>,
    id: RunId,
    events: tokio::sync::mpsc::Receiver<Arc<str>>,
    stop: CancellationToken,
}

impl ServedChild {
    fn follow(server: Arc<Server>, id: RunId) -> Self {
        let (sender, events) = tokio::sync::mpsc::channel(256);
        let stop = CancellationToken::new();
        let following = (server.clone(), id.clone(), stop.clone());
        tokio::spawn(async move {
            let (server, id, stop) = following;
            let mut from = 0;
            loop {
                let sent = server
                    .stream_events(&id, from, &stop, |_, json, _| {
                        let sender = sender.clone();
                        async move { sender.send(json).await.is_ok() }
                    })
                    .await;
                match sent {
                    Ok(()) => return,
                    Err(next) => from = next,
                }
            }
        });
        ServedChild {
            server,
            id,
            events,
            stop,
        }
    }
}

impl ChildRun for ServedChild {
    fn id(&self) -> String {
        self.id.to_string()
    }

    fn next_event(&mut self) -> futures::future::BoxFuture<'_, Option<AgentEvent>> {
        Box::pin(async move {
            // Events this server recorded and serialized itself.
            let json = self.events.recv().await?;
            serde_json::from_str(&json).ok()
        })
    }

    fn result(&mut self) -> futures::future::BoxFuture<'_, Value> {
        Box::pin(async move {
            if let Err(failure) = self.server.ended(&self.id).await {
                return json!({"status": "error", "usage": {"toolUses": 0}, "error": {"message": failure.message}});
            }
            match self.server.result(&self.id) {
                Ok((_, result)) => result,
                Err(failure) => {
                    json!({"status": "error", "usage": {"toolUses": 0}, "error": {"message": failure.message}})
                }
            }
        })
    }

    fn cancel(&self) {
        // A component's children run here, never on a cluster.
        let _ = self.server.cancel_here(self.id.as_str());
    }
}

impl Drop for ServedChild {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
