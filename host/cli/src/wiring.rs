//! The process's parts, made from the flags: its sandbox, where its runs
//! are (this machine's store or a cluster) and the launcher that starts
//! them; and the library's errors as the command line reports them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;

use moat_cluster::{Cluster, Settings};
use moat_contain::Containment;
use moat_launch::{LaunchError, Launcher, ResolveError, Resolver, SecretStore};
use moat_runs::{RunBook, Runs, RunsError};
use moat_sandbox::{MAX_MEMORY_CEILING, Sandbox, SandboxConfig};
use moat_store::{LocalRuns, Store};

use super::args::{COMMAND_SESSIONS, Cli, ClusterFlags, Command};
use super::names::FlagNames;
use super::{Globals, UsageError};

/// The pool of a `moat run`: its run, the instance that reads the
/// adapter's `info()` first, room for the fresh session of a resume
/// fallback while the first one closes, and for the children its
/// component may run at once (each with the instance its adapter's
/// `info()` is read from).
const RUN_SESSIONS: u32 = 4 + 2 * moat_launch::MAX_LIVE_CHILDREN as u32;

/// Starts the sandbox `config` describes (its engine, linker and cache).
pub fn start_sandbox(config: SandboxConfig) -> anyhow::Result<Sandbox> {
    Sandbox::new(config).context("cannot start the sandbox")
}

/// The settings of the process's sandbox: the cache from the flags, the
/// pool and memory cap from the command.
pub fn sandbox_config(cli: &Cli) -> SandboxConfig {
    let mut config = SandboxConfig::default();
    if cli.no_cache {
        config.cache_dir = None;
    } else if let Some(dir) = &cli.cache_dir {
        config.cache_dir = Some(dir.clone());
    }
    // `info()` runs under the cap of the runs: a `moat run` gets its
    // `--max-memory`; `parallel` tasks may each set theirs and `inspect`
    // only describes, so they get the ceiling.
    config.info_max_memory_bytes = match &cli.command {
        // A request that does not read is refused by the run itself.
        Command::Run(args) => args
            .run
            .request()
            .ok()
            .and_then(|request| request.limits.max_memory_bytes)
            .map_or(moat_engine::RunLimits::DEFAULT_MAX_MEMORY_BYTES, |bytes| {
                bytes.min(MAX_MEMORY_CEILING)
            }),
        _ => MAX_MEMORY_CEILING,
    };
    // One command runs a handful of sessions at most; a server as many as
    // its clients start (the library's default pool).
    config.pool_sessions = match &cli.command {
        Command::Serve(_) | Command::Acp(_) => config.pool_sessions,
        // One run and its children: a pool for the library's default would
        // cost every `moat run` the mappings of thousands.
        Command::Run(_) => RUN_SESSIONS,
        // Each of its runs, and the instance each job's adapter is loaded
        // through.
        Command::Worker(args) => u32::from(args.max_runs).saturating_mul(2),
        _ => COMMAND_SESSIONS as _,
    };
    config.containment = containment();
    // A person waiting for a command sees a first compile; a server's or
    // a worker's log says it (at info).
    if !matches!(
        cli.command,
        Command::Serve(_) | Command::Acp(_) | Command::Worker(_)
    ) {
        config.compile_watcher = crate::render::compile_watcher();
    }
    config
}

/// Where workspaces are made: `--workspace-dir` (`MOAT_WORKSPACE_DIR`, the
/// config's `workspace-dir`), else `workspaces` in moat's state directory.
pub fn workspace_root(globals: &Globals) -> anyhow::Result<PathBuf> {
    globals
        .workspace_dir
        .clone()
        .or_else(|| moat_store::state_file("MOAT_WORKSPACE_DIR", "workspaces"))
        .ok_or_else(|| {
            UsageError("no home directory for workspaces: pass --workspace-dir DIR".into()).into()
        })
}

/// The workspace `request` asks for (`--workspace`), under the workspace
/// root: of its `--cwd`, else of this directory.
pub fn workspace(
    globals: &Globals,
    request: &moat_launch::RunRequest,
) -> anyhow::Result<Option<moat_workspace::Request>> {
    if request.workspace.is_none() {
        return Ok(None);
    }
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    Ok(request.workspace_request(&workspace_root(globals)?, &here))
}

/// The run `request`'s `--parent` names, found in `runs` (none without
/// a store: `--no-store` refuses `--parent`).
pub async fn parent(
    request: &moat_launch::RunRequest,
    runs: Option<&dyn Runs>,
) -> anyhow::Result<Option<moat_runs::RunId>> {
    match (&request.parent, runs) {
        (Some(text), Some(runs)) => Ok(Some(runs.find(text).await.map_err(runs_error)?)),
        _ => Ok(None),
    }
}

/// A request the flags cannot make: the flag, and what is wrong with it
/// (exit 2).
pub fn request_error(error: moat_launch::RequestError) -> anyhow::Error {
    UsageError(error.to_string()).into()
}

/// The run store the flags name (or the default one), opened: its runs of
/// moat processes that are gone are failed now.
pub fn store(cli_store: Option<&Path>) -> anyhow::Result<Arc<Store>> {
    let path = match cli_store {
        Some(path) => path.to_path_buf(),
        None => Store::default_path().ok_or_else(|| {
            UsageError("no home directory for the run store: pass --store PATH".into())
        })?,
    };
    let store = Store::open(&path)
        .map_err(|error| anyhow::anyhow!("{error}; --store PATH uses another, --no-store none"))?;
    Ok(Arc::new(store))
}

/// This machine's runs, in the store the flags name.
pub fn local_runs(cli_store: Option<&Path>) -> anyhow::Result<LocalRuns> {
    Ok(LocalRuns::new(store(cli_store)?))
}

/// Connects to the cluster the flags name, as `name`; `worker_timeout`
/// when this process may create the workers' bucket with its own.
pub async fn cluster(
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

/// Where the runs are: the cluster with `--nats`, else this machine's
/// store.
pub async fn runs(globals: &Globals, name: &str) -> anyhow::Result<Arc<dyn Runs>> {
    Ok(match globals.cluster.nats {
        Some(_) => Arc::new(cluster(&globals.cluster, name, None).await?),
        None => Arc::new(local_runs(globals.store.as_deref())?),
    })
}

/// Where a command's runs are kept: the cluster with `--nats` (whose
/// workers execute them), this machine's store, or nowhere (`--no-store`:
/// `None`).
pub async fn book(
    globals: &Globals,
    name: &str,
    no_store: bool,
) -> anyhow::Result<Option<Arc<dyn RunBook>>> {
    if globals.cluster.nats.is_some() {
        if no_store {
            return Err(UsageError(
                "--no-store: the cluster records every run; leave it out with --nats".into(),
            )
            .into());
        }
        return Ok(Some(Arc::new(cluster(&globals.cluster, name, None).await?)));
    }
    if no_store {
        return Ok(None);
    }
    // The store opens (files, schema, lease) on the blocking pool: a
    // caller may load its adapter meanwhile.
    let path = globals.store.clone();
    let runs = tokio::task::spawn_blocking(move || local_runs(path.as_deref()))
        .await
        .context("cannot open the run store")??;
    Ok(Some(Arc::new(runs)))
}

/// A command's runs where they are kept: [`book`], which must record them.
pub async fn recorded(globals: &Globals, name: &str) -> anyhow::Result<Arc<dyn RunBook>> {
    Ok(book(globals, name, false)
        .await?
        .expect("runs are recorded unless --no-store"))
}

/// A launcher keeping runs in `book`, loading adapters with `resolver`,
/// resolving secret grants from the secrets file.
pub fn launcher_with(
    globals: &Globals,
    resolver: Resolver,
    book: Option<Arc<dyn RunBook>>,
) -> Launcher {
    Launcher::with_secrets(resolver, book, secret_store(globals))
}

/// A launcher keeping runs in `book`; the runs its runs start may hold
/// half of this machine's memory together (`moat serve` and `moat worker`
/// set their own budget, which counts every run).
pub fn launcher(globals: &Globals, sandbox: &Sandbox, book: Option<Arc<dyn RunBook>>) -> Launcher {
    launcher_with(globals, Resolver::new(sandbox.clone()), book)
        .with_memory_budget(memory_budget(None, moat_launch::Roots::Free))
}

/// The secrets file: `--secrets`, else its default place.
pub fn secret_store(globals: &Globals) -> Option<SecretStore> {
    globals
        .secrets
        .clone()
        .or_else(SecretStore::default_path)
        .map(SecretStore::at)
}

/// How this process keeps its runs' programs: in cgroups of their own
/// unless an operator's switch (docs/security.md), `MOAT_RUN_CGROUPS=0`,
/// says not; this process starts no children but runs', so orphans it
/// adopts are theirs.
pub fn containment() -> Containment {
    Containment {
        cgroups: std::env::var_os("MOAT_RUN_CGROUPS").is_none_or(|v| v != "0"),
        adopt_orphans: true,
    }
    .for_this_process()
}

/// The memory budget `--max-total-memory` gives (else half of this
/// machine's memory, as `moat parallel`'s), treating runs without a
/// parent as `roots` says.
pub fn memory_budget(flag: Option<u64>, roots: moat_launch::Roots) -> moat_launch::MemoryBudget {
    let bytes = flag
        .or_else(moat_sandbox::default_memory_budget)
        .unwrap_or(u64::MAX);
    moat_launch::MemoryBudget::new(bytes, roots)
}

/// A launch failure as the command line reports it: what the user asked
/// for (an adapter, grants, a parent) is theirs to fix (exit 2).
pub fn launch_error(error: LaunchError) -> anyhow::Error {
    match error {
        LaunchError::Resolve(error) => resolve_error(error),
        LaunchError::Refused(refusal) => UsageError(format!(
            "BOUNDARY_VIOLATION: {}",
            refusal.message(&FlagNames)
        ))
        .into(),
        LaunchError::Invalid(invalid) => UsageError(invalid.message(&FlagNames)).into(),
        LaunchError::Runs(error) => runs_error(error),
        error @ (LaunchError::ParentEnded(_) | LaunchError::Secret(_)) => {
            UsageError(error.to_string()).into()
        }
        LaunchError::Workspace(error) => crate::commands::workspace_error(error),
        other => other.into(),
    }
}

/// An adapter that could not be resolved, with the flag that would let it
/// load when that is why it did not.
pub fn resolve_error(error: ResolveError) -> anyhow::Error {
    let hint = match error.limit() {
        Some(limit) => format!(
            "; raise it with {}",
            moat_engine::SettingNames::setting(&FlagNames, limit)
        ),
        None => String::new(),
    };
    UsageError(format!("{error}{hint}")).into()
}

/// A run the user named that is not there (or not only one) is their
/// mistake (exit 2); a store or cluster that fails is not.
pub fn runs_error(error: RunsError) -> anyhow::Error {
    match error {
        RunsError::NotFound(_) | RunsError::Ambiguous { .. } | RunsError::Invalid(_) => {
            UsageError(error.to_string()).into()
        }
        other => anyhow::anyhow!("{other}"),
    }
}

/// Starts exporting traces when `--otel` (`otel`) or the `OTEL_*`
/// variables ask for it; a collector that is misconfigured is reported
/// once and changes nothing else.
pub(crate) fn telemetry(otel: Option<Option<&str>>) -> Option<moat_telemetry::Guard> {
    let config = match moat_telemetry::OtelConfig::from_env(otel) {
        Ok(config) => config?,
        Err(error) => {
            tracing::warn!("no traces are exported: {error}");
            return None;
        }
    };
    match moat_telemetry::install(&config) {
        Ok(guard) => Some(guard),
        Err(error) => {
            tracing::warn!("no traces are exported: {error}");
            None
        }
    }
}
