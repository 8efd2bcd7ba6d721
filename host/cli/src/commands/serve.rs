//! `moat serve`: the protocol (moat-serve) on stdio or a Unix socket, its
//! ceiling the flags, its runs on this machine or, with `--nats`, on the
//! cluster. The first SIGINT, SIGTERM or SIGHUP stops the server as
//! `shutdown` does; a second one stops every run at once.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use moat_sandbox::Sandbox;
use moat_serve::{ServeConfig, Server};

use crate::args::ServeArgs;
use crate::names::FlagNames;
use crate::{Globals, wiring};

/// How long live runs get to end with their `done` when the server stops,
/// before they are stopped at once.
const STOP_PATIENCE: Duration = Duration::from_secs(5);

pub async fn serve(
    globals: &Globals,
    sandbox: Sandbox,
    args: ServeArgs,
) -> anyhow::Result<ExitCode> {
    let book = wiring::book(globals, "moat serve", false).await?;
    let ceiling = args
        .ceiling
        .request()
        .map_err(wiring::request_error)?
        .ceiling("this server");
    let server = Server::new(ServeConfig {
        launcher: wiring::launcher(globals, &sandbox, book).with_memory_budget(
            wiring::memory_budget(args.max_total_memory, moat_launch::Roots::Refuse),
        ),
        ceiling: Arc::new(ceiling),
        names: Arc::new(FlagNames),
        workspace_root: wiring::workspace_root(globals).ok(),
    })
    .map_err(anyhow::Error::msg)?;
    let server = Arc::new(server);
    tokio::spawn(stop_on_signals(server.clone()));
    let serving = match &args.socket {
        None => {
            let stdio = server.clone();
            tokio::spawn(async move {
                if let Err(error) = moat_serve::serve_stdio(stdio).await {
                    tracing::error!("cannot read stdin: {error}");
                }
            })
        }
        Some(path) => {
            let listener = moat_serve::listen(path)?;
            tracing::info!(socket = %path.display(), "serving");
            tokio::spawn(moat_serve::accept(server.clone(), listener))
        }
    };
    server.stopping.cancelled().await;
    server.stop(STOP_PATIENCE).await;
    // Connections close and write out what they have queued (their last
    // answers, the runs' last events), each for a bounded time.
    let _ = tokio::time::timeout(STOP_PATIENCE, serving).await;
    if let Some(path) = &args.socket {
        let _ = std::fs::remove_file(path);
    }
    Ok(ExitCode::SUCCESS)
}

/// The first SIGINT, SIGTERM or SIGHUP stops the server as `shutdown`
/// does; a second one stops every run at once.
async fn stop_on_signals(server: Arc<Server>) {
    let (Ok(mut interrupt), Ok(mut terminate), Ok(mut hangup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::warn!("cannot listen for signals; stop the server with the shutdown op");
        return;
    };
    let mut next = async || {
        tokio::select! {
            _ = interrupt.recv() => {},
            _ = terminate.recv() => {},
            _ = hangup.recv() => {},
        }
    };
    next().await;
    tracing::info!("stopping: live runs end with their done (again to stop them at once)");
    server.stopping.cancel();
    next().await;
    moat_sandbox::stop_all_runs();
}
