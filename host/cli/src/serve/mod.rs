//! `moat serve`: moat's operations for programs in any language, as JSON
//! lines (docs/protocol.md; the schema is protocol/moat-protocol.schema.json)
//! on stdin/stdout or on a Unix socket several clients share.
//!
//! - [`protocol`]: the messages and error codes;
//! - [`server`]: the runs the server started and the operations on them;
//! - [`connection`]: one client: requests, subscriptions, its writer.
//!
//! Every run is recorded in the run store like a `moat run`, so `moat ps`,
//! `logs`, `wait` and `cancel` see the server's runs, and the server's
//! `await`, `get` and `subscribe` see other moats' runs.

mod connection;
mod on_cluster;
mod protocol;
mod server;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::io::BufReader;
use tokio::signal::unix::{SignalKind, signal};

use moat_sandbox::Sandbox;

use crate::args::ServeArgs;
use crate::resolve;
use server::Server;

/// How long live runs get to end with their `done` when the server stops,
/// before they are stopped at once.
const STOP_PATIENCE: Duration = Duration::from_secs(5);

pub async fn serve(
    sandbox: Sandbox,
    cli_store: Option<&Path>,
    cluster: &crate::args::ClusterFlags,
    args: ServeArgs,
) -> anyhow::Result<ExitCode> {
    let store = resolve::store(cli_store)?;
    let cluster = match cluster.nats {
        Some(_) => Some(crate::commands::cluster::connect(cluster, "moat serve", None).await?),
        None => None,
    };
    let server = Arc::new(Server::new(sandbox, store, args.grants, cluster));
    tokio::spawn(stop_on_signals(server.clone()));
    let serving = match &args.socket {
        None => {
            let stdio = server.clone();
            let stdin = stdin_stream().context("cannot read stdin")?;
            tokio::spawn(async move {
                let stdin = BufReader::new(stdin);
                connection::serve(stdio.clone(), stdin, tokio::io::stdout()).await;
                // The client closed stdin: it is gone, and so is the server.
                stdio.stopping.cancel();
            })
        }
        Some(path) => {
            let listener = listen(path)?;
            tracing::info!(socket = %path.display(), "serving");
            let accepting = server.clone();
            tokio::spawn(async move { accept(accepting, listener).await })
        }
    };
    server.stopping.cancelled().await;
    server.stop_runs(STOP_PATIENCE).await;
    server.closed.cancel();
    // Connections close and write out what they have queued (their last
    // answers, the runs' last events), each for a bounded time.
    let _ = tokio::time::timeout(STOP_PATIENCE, serving).await;
    if let Some(path) = &args.socket {
        let _ = std::fs::remove_file(path);
    }
    Ok(ExitCode::SUCCESS)
}

/// Stdin as a stream the runtime never waits for: a thread of its own
/// copies it into one end of a socket pair. (Tokio reads stdin on its
/// blocking pool, and a read the client never answers would hold up the
/// runtime's shutdown after the server is done.)
fn stdin_stream() -> std::io::Result<tokio::net::UnixStream> {
    let (ours, mut theirs) = std::os::unix::net::UnixStream::pair()?;
    std::thread::spawn(move || {
        // At the end of stdin `theirs` is dropped: the server reads the end.
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut theirs);
    });
    ours.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(ours)
}

/// Binds the socket, readable and writable by the user only. A socket file
/// left by a server that is gone is replaced; one a server still answers
/// on is not.
fn listen(path: &PathBuf) -> anyhow::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            anyhow::bail!(
                "a server already listens on {}; stop it, or pass another --socket",
                path.display()
            );
        }
        std::fs::remove_file(path)
            .with_context(|| format!("cannot replace the stale socket {}", path.display()))?;
    }
    let listener = tokio::net::UnixListener::bind(path)
        .with_context(|| format!("cannot listen on {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot restrict {} to its owner", path.display()))?;
    Ok(listener)
}

/// Serves each client that connects, at once, until the server stops;
/// then waits for the connections to close.
async fn accept(server: Arc<Server>, listener: tokio::net::UnixListener) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let stream = tokio::select! {
            () = server.closed.cancelled() => break,
            accepted = listener.accept() => accepted,
            // Reap the connections that have closed as it goes.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        match stream {
            Ok((stream, _)) => {
                let (reader, writer) = stream.into_split();
                connections.spawn(connection::serve(
                    server.clone(),
                    BufReader::new(reader),
                    writer,
                ));
            }
            Err(error) => tracing::warn!("a client could not connect: {error}"),
        }
    }
    while connections.join_next().await.is_some() {}
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
