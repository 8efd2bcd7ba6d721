//! `moat worker`: executes a NATS JetStream cluster's runs here, each
//! admitted through the launch layer under this worker's ceiling (its
//! flags), until Ctrl-C or SIGTERM; then it stops its runs (each ends
//! with its `done`) and leaves.

use std::process::ExitCode;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use moat_cluster::WorkerConfig;
use moat_launch::JobExecutor;
use moat_sandbox::Sandbox;

use crate::args::WorkerArgs;
use crate::{Globals, wiring};

pub async fn worker(
    globals: &Globals,
    sandbox: Sandbox,
    args: WorkerArgs,
) -> anyhow::Result<ExitCode> {
    let id = moat_cluster::new_worker_id();
    let name = format!("moat worker {id}");
    let cluster = wiring::cluster(&globals.cluster, &name, Some(args.worker_timeout)).await?;
    let components = globals
        .cache_dir
        .clone()
        .or_else(|| moat_sandbox::SandboxConfig::default().cache_dir)
        .unwrap_or_else(std::env::temp_dir)
        .join("cluster-components");
    let config = WorkerConfig {
        id: id.clone(),
        max_runs: usize::from(args.max_runs),
        components,
    };
    // What `moat run` with this worker's flags would give an adapter is
    // the most any job gets; the runs its jobs start go to the cluster.
    let ceiling = args
        .ceiling
        .request()
        .map_err(wiring::request_error)?
        .ceiling("this worker");
    let launcher =
        wiring::launcher(globals, &sandbox, Some(Arc::new(cluster.clone()))).with_memory_budget(
            wiring::memory_budget(args.max_total_memory, moat_launch::Roots::Wait),
        );
    let executor = Arc::new(JobExecutor::new(
        launcher,
        Arc::new(ceiling),
        Arc::new(crate::names::FlagNames),
        wiring::workspace_root(globals)?,
    ));
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
