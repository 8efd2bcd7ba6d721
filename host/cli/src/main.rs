//! The `moat` command: parses arguments, turns flags into the library's
//! types (`args`, `tasks`), calls the library crates (`moat-engine`,
//! `moat-sandbox`, `moat-grants`, `moat-builtins`) and renders events
//! (`render`). No engine or sandbox logic lives here.

mod args;
mod commands;
mod names;
mod render;
mod resolve;
mod serve;
mod tasks;

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use tracing_subscriber::EnvFilter;

use args::{Cli, Command};

/// Exit code of a usage error: bad flags, an unknown adapter, a file that
/// is not an adapter.
pub const EXIT_USAGE: u8 = 2;

/// How long exiting waits for runs' sessions to close.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// A problem with what the user asked for, reported in one line with
/// exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error)
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            // clap's first paragraph says what is wrong and with which
            // flag; the usage and hint after it are replaced by a shorter one.
            let message = error.to_string();
            let problem: Vec<&str> = message
                .lines()
                .take_while(|line| !line.trim().is_empty())
                .map(str::trim)
                .collect();
            eprintln!(
                "moat: {} (see --help)",
                problem.join(" ").trim_start_matches("error: ")
            );
            return ExitCode::from(EXIT_USAGE);
        }
    };
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("moat: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(dispatch(cli));
    // Every run has ended; what remains is closing sessions in the
    // background. Shutting down drops them, which kills what their
    // adapters started and removes their directories: wait for that, but
    // not for long on a lingering blocking task (an abandoned compile).
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    // Whatever is still alive of any run dies with it now.
    moat_sandbox::stop_all_runs();
    match result {
        Ok(code) => code,
        Err(error) => {
            // The message may quote an adapter (what it printed, what its
            // info() said): shown with its control characters escaped.
            eprintln!("moat: {}", render::safe::text(&format!("{error:#}")));
            if error.is::<UsageError>() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    if cli.cluster.nats.is_some() {
        if let Some(answer) = on_cluster_without_sandbox(&cli).await {
            return answer;
        }
    } else if matches!(cli.command, Command::Worker(_)) {
        return Err(UsageError(
            "moat worker executes a cluster's runs: pass --nats nats://HOST:PORT (docs/cluster.md)"
                .into(),
        )
        .into());
    }
    // The store's commands need no sandbox.
    let store = cli.store.as_deref();
    match cli.command {
        Command::Ps(args) => return commands::ps(store, args),
        Command::Show(args) => return commands::show(store, args),
        Command::Logs(args) => return commands::logs(store, args),
        Command::Wait(args) => return commands::wait(store, args),
        Command::Cancel(args) => return commands::cancel(store, args),
        Command::Prune(args) => return commands::prune(store, args),
        Command::New(args) => return commands::new(args),
        Command::Workflow(ref command) => {
            if let Some(answer) = commands::workflow_without_sandbox(command) {
                return answer;
            }
        }
        Command::Adapter(ref command) => {
            if let Some(answer) = commands::adapter_without_sandbox(command) {
                return answer;
            }
        }
        _ => {}
    }
    let sandbox = resolve::sandbox(&cli)?;
    match cli.command {
        Command::Run(args) if cli.cluster.nats.is_some() => {
            commands::run_on_cluster(&sandbox, &cli.cluster, args).await
        }
        Command::Worker(args) => {
            commands::cluster::worker(sandbox, &cli.cluster, cli.cache_dir.clone(), args).await
        }
        Command::Run(args) => commands::run(&sandbox, cli.store.as_deref(), args).await,
        Command::Parallel(args) => commands::parallel(&sandbox, cli.store.as_deref(), args).await,
        Command::Inspect(args) => commands::inspect(&sandbox, args).await,
        Command::Compile(args) => commands::compile(&sandbox, args).await,
        Command::Adapters => commands::adapters(&sandbox).await,
        Command::Serve(args) => serve::serve(sandbox, store, &cli.cluster, args).await,
        Command::Workflow(command) => commands::workflow(&sandbox, store, command).await,
        Command::Adapter(command) => commands::adapter(&sandbox, command).await,
        Command::Ps(_)
        | Command::Show(_)
        | Command::Logs(_)
        | Command::Wait(_)
        | Command::Cancel(_)
        | Command::Prune(_)
        | Command::New(_) => {
            unreachable!("answered above")
        }
    }
}

/// The commands that work on the cluster's runs with `--nats` and need
/// no sandbox, answered; `None` for those that do (`run`, `worker`).
/// Commands that have no cluster form refuse `--nats` rather than quietly
/// work on this machine.
async fn on_cluster_without_sandbox(cli: &Cli) -> Option<anyhow::Result<ExitCode>> {
    use commands::cluster;
    let flags = &cli.cluster;
    let refused = |what: &str| {
        Some(Err(UsageError(format!(
            "{what} has no cluster form yet: leave out --nats (and MOAT_NATS) to use this machine"
        ))
        .into()))
    };
    match &cli.command {
        Command::Ps(args) => Some(cluster::ps(flags, args.clone()).await),
        Command::Show(args) => Some(cluster::show(flags, args.clone()).await),
        Command::Logs(args) => Some(cluster::logs(flags, args.clone()).await),
        Command::Wait(args) => Some(cluster::wait(flags, args.clone()).await),
        Command::Cancel(args) => Some(cluster::cancel(flags, args.clone()).await),
        Command::Run(_) | Command::Worker(_) | Command::Serve(_) => None,
        Command::Prune(_) => refused("moat prune (the cluster's events expire after 7 days)"),
        Command::Parallel(_) => refused("moat parallel"),
        Command::Workflow(_) => refused("moat workflow"),
        Command::Inspect(_)
        | Command::Compile(_)
        | Command::Adapters
        | Command::Adapter(_)
        | Command::New(_) => None,
    }
}

/// Logs go to stderr so stdout carries only events. Default: warnings.
fn init_logging(verbose: u8) {
    let filter = match std::env::var("MOAT_LOG") {
        Ok(filter) => EnvFilter::new(filter),
        Err(_) => EnvFilter::new(match verbose {
            // The NATS client logs each failed connection attempt as an
            // error; moat reports the failure itself, once.
            0 => "warn,async_nats=off",
            1 => "info",
            2 => "debug",
            _ => "trace",
        }),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
