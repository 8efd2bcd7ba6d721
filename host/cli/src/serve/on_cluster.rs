//! `moat serve --nats`: the protocol's operations on a NATS JetStream
//! cluster's runs instead of this machine's. Clients see the same
//! messages; runs execute on `moat worker`s and go on when the server
//! stops (a submitter's end never stops its runs in a cluster).

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use moat_cluster::{Cluster, ClusterError, ClusterRun, ComponentRef, Job, JobLimits};
use moat_engine::{Adapter, ResultFold, RunLimits, RunOptions};
use moat_grants::{Grants, Provenance, TrustLevel};
use moat_store::{FailReason, RunId, RunStatus};

use super::protocol::{Code, Failure, ListParams, awaited};
use crate::commands::record_json;
use crate::resolve;

/// A cluster failure as a protocol error.
fn failure(error: ClusterError) -> Failure {
    match error {
        ClusterError::NotFound(_) => Failure::not_found(error.to_string()),
        ClusterError::Ambiguous(_) | ClusterError::Invalid(_) => {
            Failure::invalid(error.to_string())
        }
        ClusterError::BoundaryViolation(_) => {
            Failure::new(Code::BoundaryViolation, error.to_string())
        }
        other => Failure::new(Code::RunFailed, format!("the cluster failed: {other}")),
    }
}

/// The grants of the run `text` names, for a child's ceiling.
pub async fn parent_grants(cluster: &Cluster, text: &str) -> Result<(String, Grants), Failure> {
    let id = cluster.resolve(text).await.map_err(failure)?;
    let record = cluster
        .get(&id)
        .await
        .map_err(failure)?
        .ok_or_else(|| Failure::not_found(format!("no run {id}")))?;
    Ok((id, record.job.grants))
}

/// A run, checked by the server, submitted to the cluster: its id.
pub struct Submission<'a> {
    pub resolved: &'a resolve::Resolved,
    pub adapter: &'a str,
    pub prompt: String,
    pub options: RunOptions,
    pub grants: Grants,
    pub trust: TrustLevel,
    pub limits: &'a RunLimits,
    pub parent: Option<String>,
}

pub async fn submit(cluster: &Cluster, run: Submission<'_>) -> Result<Value, Failure> {
    let component = if run.resolved.provenance == Provenance::BuiltIn {
        ComponentRef::Builtin {
            name: run.adapter.to_owned(),
        }
    } else {
        let bytes = resolve::component_bytes(run.adapter)
            .map_err(|e| Failure::new(Code::RunFailed, format!("{e:#}")))?
            .ok_or_else(|| Failure::new(Code::RunFailed, "the component went while it was read"))?;
        let sha256 = cluster.put_component(&bytes).await.map_err(failure)?;
        ComponentRef::Stored { sha256 }
    };
    let job = Job {
        id: RunId::new().to_string(),
        parent: run.parent,
        adapter: run.resolved.adapter.info().name.clone(),
        component,
        prompt: run.prompt,
        options: run.options,
        grants: run.grants,
        trust: run.trust,
        limits: JobLimits::of(run.limits),
        retry_on_worker_loss: false,
    };
    let id = job.id.clone();
    cluster.submit(job).await.map_err(failure)?;
    Ok(json!({"run": id}))
}

/// An ended run's result, folded from its events.
async fn result(cluster: &Cluster, id: &str) -> Result<Value, Failure> {
    let mut fold = ResultFold::new();
    for (_, event) in cluster.stored_events(id, 0).await.map_err(failure)? {
        fold.observe(&event, &mut ());
    }
    Ok(serde_json::to_value(fold.finish()).unwrap_or(Value::Null))
}

fn as_json(run: &ClusterRun) -> Value {
    let mut value = record_json(&run.to_run_record());
    value["worker"] = json!(run.worker);
    value
}

pub async fn await_runs(cluster: &Cluster, runs: &[String]) -> Result<Value, Failure> {
    let mut ids = Vec::with_capacity(runs.len());
    for text in runs {
        ids.push(cluster.resolve(text).await.map_err(failure)?);
    }
    let mut results = serde_json::Map::new();
    let mut failed = Vec::new();
    for id in &ids {
        let record = cluster.wait(id).await.map_err(failure)?;
        if record.status() != RunStatus::Completed {
            failed.push(format!(
                "{id} {}",
                record.reason.as_deref().unwrap_or("failed")
            ));
        }
        results.insert(id.clone(), result(cluster, id).await?);
    }
    awaited(results, &failed)
}

pub async fn cancel(cluster: &Cluster, text: &str) -> Result<Value, Failure> {
    // Idempotent: a run that is unknown has nothing left to stop.
    if let Ok(id) = cluster.resolve(text).await {
        cluster
            .cancel(&id, FailReason::Cancelled)
            .await
            .map_err(failure)?;
    }
    Ok(json!({}))
}

pub async fn get(cluster: &Cluster, text: &str) -> Result<Value, Failure> {
    let id = cluster.resolve(text).await.map_err(failure)?;
    let run = cluster
        .get(&id)
        .await
        .map_err(failure)?
        .ok_or_else(|| Failure::not_found(format!("no run {id}")))?;
    let mut value = as_json(&run);
    value["result"] = if run.is_terminal() {
        result(cluster, &id).await?
    } else {
        Value::Null
    };
    Ok(value)
}

pub async fn list(
    cluster: &Cluster,
    statuses: &[RunStatus],
    params: &ListParams,
) -> Result<Value, Failure> {
    let runs: Vec<Value> = cluster
        .list()
        .await
        .map_err(failure)?
        .iter()
        .filter(|run| statuses.is_empty() || statuses.contains(&run.status()))
        .take(params.limit.unwrap_or(usize::MAX))
        .map(as_json)
        .collect();
    Ok(json!({"runs": runs}))
}

pub async fn resolve_runs(cluster: &Cluster, runs: &[String]) -> Result<Vec<RunId>, Failure> {
    let mut ids = Vec::with_capacity(runs.len());
    for text in runs {
        let id = cluster.resolve(text).await.map_err(failure)?;
        ids.push(
            RunId::parse(&id).ok_or_else(|| Failure::invalid(format!("{id} is not a run id")))?,
        );
    }
    Ok(ids)
}

/// Refuses a subscription from past the end of a run that has ended.
pub async fn check_from(cluster: &Cluster, id: &RunId, from_seq: u64) -> Result<(), Failure> {
    if from_seq == 0 {
        return Ok(());
    }
    let run = cluster.get(id.as_str()).await.map_err(failure)?;
    if !run.as_ref().is_some_and(ClusterRun::is_terminal) {
        return Ok(());
    }
    let stored = cluster
        .stored_events(id.as_str(), from_seq)
        .await
        .map_err(failure)?;
    if stored.is_empty() {
        return Err(Failure::invalid(format!(
            "run {id} has ended before event {from_seq}: fromSeq is past its end"
        )));
    }
    Ok(())
}

/// The events of run `id` from `from_seq` on, to `send`, until its `done`
/// (the cluster replays what is stored, then the live ones: a slow client
/// is never lagged, it reads on from the stream).
pub async fn stream_events<F, Fut>(
    cluster: &Cluster,
    id: &RunId,
    from_seq: u64,
    stop: &CancellationToken,
    mut send: F,
) where
    F: FnMut(u64, Arc<str>, bool) -> Fut,
    Fut: Future<Output = bool>,
{
    let events = match cluster.follow(id.as_str(), from_seq).await {
        Ok(events) => events,
        Err(error) => {
            tracing::warn!(run = %id, "cannot follow the run: {error}");
            return;
        }
    };
    let mut events = std::pin::pin!(events);
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => return,
            next = events.next() => next,
        };
        let Some(next) = next else { return };
        let (seq, event) = match next {
            Ok(next) => next,
            Err(error) => {
                tracing::warn!(run = %id, "following the run: {error}");
                return;
            }
        };
        let done = event.is_done();
        let json: Arc<str> = serde_json::to_string(&event).unwrap_or_default().into();
        if !send(seq, json, done).await || done {
            return;
        }
    }
}
