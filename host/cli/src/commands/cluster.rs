//! The run commands over a NATS JetStream cluster (`--nats`): `run`
//! submits and follows, `ps`, `show`, `logs`, `wait` and `cancel` read
//! and change the cluster's records, and `moat worker` executes runs
//! here. The cluster's own logic is in moat-cluster; this wires it to the
//! flags, the sandbox and the renderers.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use tokio_util::sync::CancellationToken;

use moat_builtins as builtin;
use moat_cluster::{
    Cluster, ClusterError, ClusterRun, ComponentRef, Executor, Job, JobLimits, Refusal, Settings,
    WorkerConfig,
};
use moat_engine::{Adapter, AgentEvent, McpServers, Registry, RunRequest, run_agent};
use moat_grants::{Provenance, TrustLevel};
use moat_sandbox::{RunScope, Sandbox};
use moat_store::{FailReason, RunId};

use super::drive::render_until_done;
use super::runs::{listed_statuses, print_runs, print_show};
use crate::args::{
    CancelArgs, ClusterFlags, GrantFlags, LogsArgs, PsArgs, RunArgs, ShowArgs, WaitArgs, WorkerArgs,
};
use crate::names::FlagNames;
use crate::{UsageError, render, resolve};

/// Connects to the cluster the flags name; `worker_timeout` when this
/// process may create the workers' bucket with its own.
pub async fn connect(
    flags: &ClusterFlags,
    name: &str,
    worker_timeout: Option<std::time::Duration>,
) -> anyhow::Result<Cluster> {
    let urls = flags
        .nats
        .as_deref()
        .ok_or_else(|| UsageError("no cluster given: pass --nats nats://HOST:PORT".into()))?;
    let mut settings =
        Settings::new(urls, flags.nats_auth.as_deref()).map_err(|e| UsageError(e.to_string()))?;
    settings.replicas = usize::from(flags.nats_replicas);
    if let Some(timeout) = worker_timeout {
        settings.worker_timeout = timeout;
    }
    Ok(Cluster::connect(&settings, name).await?)
}

/// A cluster error as the user sees it: a run they named that is not
/// there is their mistake (exit 2).
fn user_error(error: ClusterError) -> anyhow::Error {
    match error {
        ClusterError::NotFound(_)
        | ClusterError::Ambiguous(_)
        | ClusterError::Invalid(_)
        | ClusterError::Settings(_)
        | ClusterError::BoundaryViolation(_) => UsageError(error.to_string()).into(),
        other => other.into(),
    }
}

/// `moat run --nats`: the run submitted to the cluster, then followed
/// here like a local one (Ctrl-C cancels it in the cluster); with
/// `--detach`, its id printed at once.
pub async fn run(
    sandbox: &Sandbox,
    flags: &ClusterFlags,
    args: RunArgs,
    prompt: String,
) -> anyhow::Result<ExitCode> {
    if args.no_store {
        return Err(UsageError(
            "--no-store: the cluster records every run; leave it out with --nats".into(),
        )
        .into());
    }
    if args.continue_run.is_some() {
        return Err(UsageError(
            "--continue works on this machine's runs; with --nats, pass the session with --resume"
                .into(),
        )
        .into());
    }
    let resolved = resolve::adapter(sandbox, &args.adapter).await?;
    let scope = resolve::run_scope(&resolved, &args.run)?;
    let cluster = connect(flags, "moat run", None).await?;
    let component = if resolved.provenance == Provenance::BuiltIn {
        ComponentRef::Builtin {
            name: args.adapter.clone(),
        }
    } else {
        let bytes = resolve::component_bytes(&args.adapter)?
            .context("the adapter's component went while it was read")?;
        let sha256 = cluster.put_component(&bytes).await?;
        if sha256 != resolved.adapter.details().sha256 {
            anyhow::bail!("{} changed while it was read; run again", args.adapter);
        }
        ComponentRef::Stored { sha256 }
    };
    let parent = match &args.parent {
        Some(text) => Some(cluster.resolve(text).await.map_err(user_error)?),
        None => None,
    };
    if let Some(parent) = &parent {
        let record = cluster
            .get(parent)
            .await?
            .ok_or_else(|| ClusterError::NotFound(parent.clone()))
            .map_err(user_error)?;
        // A child never gets more than its parent.
        let excess = scope.grants.excess_over(&record.job.grants);
        if !excess.is_empty() {
            let beyond: Vec<String> = excess.iter().map(ToString::to_string).collect();
            return Err(user_error(ClusterError::BoundaryViolation(format!(
                "BOUNDARY_VIOLATION: the run asks for more than its parent {parent} holds: {}; ask for less",
                beyond.join(", ")
            ))));
        }
    }
    let job = Job {
        id: RunId::new().to_string(),
        parent,
        adapter: resolved.adapter.info().name.clone(),
        component,
        prompt,
        options: args.run.options(),
        grants: scope.grants.clone(),
        trust: scope.trust,
        limits: JobLimits::of(&args.run.limits(resolved.default_timeout())),
        retry_on_worker_loss: args.retry_on_worker_loss,
    };
    let id = job.id.clone();
    cluster.submit(job).await.map_err(user_error)?;
    if args.detach {
        println!("{id}");
        cluster.close().await;
        return Ok(ExitCode::SUCCESS);
    }
    let mut renderer = render::for_format(render::default_format(args.output));
    let abort = CancellationToken::new();
    let cancelling = {
        let (cluster, abort, id) = (cluster.clone(), abort.clone(), id.clone());
        tokio::spawn(async move {
            abort.cancelled().await;
            if let Err(error) = cluster.cancel(&id, FailReason::Cancelled).await {
                tracing::warn!("cannot cancel the run in the cluster: {error}");
            }
        })
    };
    let events = followed(&cluster, &id, 0).await?;
    let code = render_until_done(Box::pin(events), renderer.as_mut(), abort).await;
    cancelling.abort();
    code
}

/// Run `id`'s events from number `from` to its `done`, as a renderer
/// takes them.
async fn followed(
    cluster: &Cluster,
    id: &str,
    from: u64,
) -> anyhow::Result<BoxStream<'static, AgentEvent>> {
    let events = cluster.follow(id, from).await?;
    Ok(events
        .filter_map(|event| async move {
            match event {
                Ok((_, event)) => Some(event),
                Err(error) => {
                    tracing::warn!("{error}");
                    None
                }
            }
        })
        .boxed())
}

pub async fn ps(flags: &ClusterFlags, args: PsArgs) -> anyhow::Result<ExitCode> {
    let cluster = connect(flags, "moat ps", None).await?;
    let statuses = listed_statuses(&args);
    let mut runs: Vec<moat_store::RunRecord> = cluster
        .list()
        .await?
        .iter()
        .map(ClusterRun::to_run_record)
        .filter(|run| statuses.is_empty() || statuses.contains(&run.status))
        .collect();
    if let Some(last) = args.last {
        runs.truncate(last);
    }
    print_runs(&runs, args.output)
}

pub async fn show(flags: &ClusterFlags, args: ShowArgs) -> anyhow::Result<ExitCode> {
    let cluster = connect(flags, "moat show", None).await?;
    let id = cluster.resolve(&args.run).await.map_err(user_error)?;
    let run = cluster
        .get(&id)
        .await?
        .context("the run went while it was read")?;
    let events = if run.is_terminal() {
        Some(cluster.stored_events(&id, 0).await?)
    } else {
        None
    };
    print_show(
        &run.to_run_record(),
        events,
        args.json,
        run.worker.as_deref(),
    )
}

pub async fn logs(flags: &ClusterFlags, args: LogsArgs) -> anyhow::Result<ExitCode> {
    let cluster = connect(flags, "moat logs", None).await?;
    let id = cluster.resolve(&args.run).await.map_err(user_error)?;
    let mut renderer = render::for_format(render::default_format(args.output));
    // Followed: rendered as they come; else the stored ones.
    let mut events: BoxStream<'static, AgentEvent> = if args.follow {
        followed(&cluster, &id, 0).await?
    } else {
        let stored = cluster.stored_events(&id, 0).await?;
        futures::stream::iter(stored.into_iter().map(|(_, event)| event)).boxed()
    };
    let mut success = None;
    while let Some(event) = render::next_shown(&mut events, renderer.as_mut())
        .await
        .context("cannot write the output")?
    {
        if let Some(done) = event.as_done() {
            success = Some(done.status == moat_engine::DoneStatus::Success);
        }
        renderer.event(&event).context("cannot write the output")?;
    }
    renderer.finish().context("cannot write the output")?;
    Ok(match success {
        Some(false) => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    })
}

pub async fn wait(flags: &ClusterFlags, args: WaitArgs) -> anyhow::Result<ExitCode> {
    let cluster = connect(flags, "moat wait", None).await?;
    let mut ids = Vec::new();
    for run in &args.runs {
        ids.push(cluster.resolve(run).await.map_err(user_error)?);
    }
    let mut all_completed = true;
    for id in ids {
        let run = cluster.wait(&id).await.map_err(user_error)?;
        all_completed &= run.status() == moat_store::RunStatus::Completed;
    }
    Ok(if all_completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

pub async fn cancel(flags: &ClusterFlags, args: CancelArgs) -> anyhow::Result<ExitCode> {
    let cluster = connect(flags, "moat cancel", None).await?;
    for run in &args.runs {
        // Idempotent: a run that is unknown has nothing left to stop.
        match cluster.resolve(run).await {
            Ok(id) => cluster.cancel(&id, FailReason::Cancelled).await?,
            Err(ClusterError::NotFound(_)) => {}
            Err(error) => return Err(user_error(error)),
        }
    }
    cluster.close().await;
    Ok(ExitCode::SUCCESS)
}

/// `moat worker`: executes the cluster's runs here until Ctrl-C or
/// SIGTERM, then stops its runs (each ends with its `done`) and leaves.
pub async fn worker(
    sandbox: Sandbox,
    flags: &ClusterFlags,
    cache_dir: Option<PathBuf>,
    args: WorkerArgs,
) -> anyhow::Result<ExitCode> {
    let id = moat_cluster::new_worker_id();
    let name = format!("moat worker {id}");
    let cluster = connect(flags, &name, Some(args.worker_timeout)).await?;
    let components = cache_dir
        .or_else(|| moat_sandbox::SandboxConfig::default().cache_dir)
        .unwrap_or_else(std::env::temp_dir)
        .join("cluster-components");
    let config = WorkerConfig {
        id: id.clone(),
        max_runs: usize::from(args.max_runs),
        components,
    };
    let executor = Arc::new(SandboxExecutor {
        sandbox,
        ceiling: args.grants,
    });
    let stop = CancellationToken::new();
    let (signals, _) = super::drive::on_signals(stop.clone());
    eprintln!(
        "moat: worker {id} taking runs (at most {} at once)",
        args.max_runs
    );
    moat_cluster::run_worker(cluster, config, executor, stop).await?;
    signals.abort();
    Ok(ExitCode::SUCCESS)
}

/// Executes jobs in this process's sandbox, under the worker's ceiling:
/// what `moat run` with the worker's flags would give the adapter.
struct SandboxExecutor {
    sandbox: Sandbox,
    ceiling: GrantFlags,
}

impl SandboxExecutor {
    async fn start_run(
        &self,
        job: &Job,
        component: Option<PathBuf>,
        abort: CancellationToken,
    ) -> Result<BoxStream<'static, AgentEvent>, Refusal> {
        let failed = |e: &dyn std::fmt::Display| Refusal::Failed(format!("{e:#}"));
        let resolved = match (&job.component, component) {
            (ComponentRef::Builtin { name }, _) => {
                if builtin::component(name).is_none() {
                    return Err(Refusal::Failed(format!(
                        "this worker has no built-in adapter {name}"
                    )));
                }
                resolve::adapter(&self.sandbox, name)
                    .await
                    .map_err(|e| failed(&e))?
            }
            (ComponentRef::Stored { sha256 }, Some(path)) => {
                let resolved = self
                    .sandbox
                    .load_file(&path)
                    .await
                    .map_err(|e| failed(&e))?;
                if &resolved.details().sha256 != sha256 {
                    return Err(Refusal::Failed(format!(
                        "the component loaded from {} is not {sha256}",
                        path.display()
                    )));
                }
                resolve::Resolved {
                    adapter: resolved,
                    provenance: Provenance::Loaded,
                    profile: None,
                    accepted: None,
                }
            }
            (ComponentRef::Stored { sha256 }, None) => {
                return Err(Refusal::Failed(format!(
                    "component {sha256} was not fetched"
                )));
            }
        };
        // What `moat run` with this worker's flags would give the adapter:
        // its ceiling, and a built-in's declared needs.
        let allowance = resolve::grants(&resolved, TrustLevel::Sandbox, None, &[], &self.ceiling)
            .map_err(|e| failed(&e))?;
        let excess = job.grants.excess_over(&allowance);
        if !excess.is_empty() {
            let beyond: Vec<String> = excess.iter().map(ToString::to_string).collect();
            return Err(Refusal::Boundary(format!(
                "the run asks for more than this worker allows: {}; submit it with less, or start a worker with those grants",
                beyond.join(", ")
            )));
        }
        if let Some(servers) = &job.options.mcp_servers {
            let servers =
                McpServers::from_json(&serde_json::json!({"mcpServers": servers}).to_string())
                    .map_err(|e| Refusal::Failed(format!("options.mcpServers: {e}")))?;
            resolve::check_mcp_programs(Some(&servers), &job.grants)
                .map_err(|e| Refusal::Boundary(format!("{e:#}")))?;
        }
        let limits = job.limits.to_run_limits();
        if limits.max_memory_bytes > moat_sandbox::MAX_MEMORY_CEILING {
            return Err(Refusal::Failed(format!(
                "a memory cap of {} bytes is over the most a run may have, {}",
                limits.max_memory_bytes,
                moat_sandbox::MAX_MEMORY_CEILING
            )));
        }
        let scope = RunScope {
            grants: job.grants.clone(),
            trust: job.trust,
            confinement: resolve::confinement(&resolved, &self.ceiling),
            children: None,
        };
        let agent = resolved.adapter.info().name.clone();
        let mut registry = Registry::scoped();
        registry
            .register(Arc::new(resolved.adapter))
            .map_err(|e| failed(&e))?;
        let request = RunRequest {
            options: job.options.clone(),
            limits,
            abort: Some(abort),
            names: Arc::new(FlagNames),
            ..RunRequest::new(agent, job.prompt.clone()).with_scope(scope)
        };
        let run = run_agent(&registry, request).map_err(|e| failed(&e))?;
        Ok(run.into_stream().boxed())
    }
}

impl Executor for SandboxExecutor {
    fn start<'a>(
        &'a self,
        job: &'a Job,
        component: Option<PathBuf>,
        abort: CancellationToken,
    ) -> BoxFuture<'a, Result<BoxStream<'static, AgentEvent>, Refusal>> {
        Box::pin(self.start_run(job, component, abort))
    }
}
