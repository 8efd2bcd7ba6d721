//! moat's operations for programs in any language, as JSON lines
//! (docs/protocol.md; the schema is protocol/moat-protocol.schema.json)
//! on stdin/stdout or on a Unix socket several clients share — the
//! library `moat serve` is made of, for a Rust program that serves them
//! itself.
//!
//! - [`protocol`]: the messages and error codes;
//! - server: the operations, each written once on the launch layer and
//!   on [`Runs`](moat_runs::Runs) (this machine's store or a cluster);
//! - connection: one client: requests, subscriptions, its writer.
//!
//! Serving the protocol on a socket, without the `moat` binary:
//!
//! ```
//! use std::sync::Arc;
//!
//! use moat_engine::FieldNames;
//! use moat_launch::{Ceiling, Launcher, Resolver};
//! use moat_sandbox::{Sandbox, SandboxConfig};
//! use moat_serve::{ServeConfig, Server};
//! use moat_store::{LocalRuns, Store};
//! use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir()?;
//! let store = Arc::new(Store::open(&dir.path().join("moat.db"))?);
//! let sandbox = Sandbox::new(SandboxConfig::default())?;
//! let book = Arc::new(LocalRuns::new(store));
//! let launcher = Launcher::new(Resolver::new(sandbox), Some(book));
//! let server = Arc::new(Server::new(ServeConfig {
//!     launcher,
//!     ceiling: Arc::new(Ceiling::new("this server")),
//!     names: Arc::new(FieldNames),
//!     workspace_root: Some(dir.path().join("workspaces")),
//! })?);
//! let socket = dir.path().join("moat.sock");
//! let listener = moat_serve::listen(&socket)?;
//! let serving = tokio::spawn(moat_serve::accept(server.clone(), listener));
//!
//! // A client: start a run, then wait for its result.
//! let stream = tokio::net::UnixStream::connect(&socket).await?;
//! let (reader, mut writer) = stream.into_split();
//! let mut lines = BufReader::new(reader).lines();
//! writer.write_all(br#"{"id":1,"op":"run","adapter":"echo","prompt":"hi"}"#).await?;
//! writer.write_all(b"\n").await?;
//! let started: serde_json::Value = serde_json::from_str(&lines.next_line().await?.unwrap())?;
//! let run = started["result"]["run"].as_str().unwrap().to_owned();
//! let wait = serde_json::json!({"id": 2, "op": "await", "runs": [run]});
//! writer.write_all(format!("{wait}\n").as_bytes()).await?;
//! let answer: serde_json::Value = serde_json::from_str(&lines.next_line().await?.unwrap())?;
//! assert_eq!(answer["result"]["results"][&run]["status"], "success");
//!
//! server.stop(std::time::Duration::from_secs(5)).await;
//! serving.await?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod connection;
pub mod protocol;
mod server;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::BufReader;

pub use server::{ServeConfig, Server};

/// Why a server could not listen.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Another server answers on the socket.
    #[error("a server already listens on {0}; stop it, or pass another socket")]
    Taken(String),
    /// The path holds something that is not a socket: it is not ours to
    /// replace.
    #[error("{0} exists and is not a socket; pass another path")]
    NotASocket(String),
    /// The system refused.
    #[error("cannot listen on {path}: {source}")]
    Io {
        /// The socket's path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl Server {
    /// Stops the server as `shutdown` does: no new run starts, live runs
    /// end with their `done` (at once after `patience`), then the
    /// connections close.
    pub async fn stop(&self, patience: Duration) {
        self.stopping.cancel();
        self.stop_runs(patience).await;
        self.closed.cancel();
    }
}

/// Serves one client on stdin and stdout until it closes stdin (then the
/// server stops).
pub async fn serve_stdio(server: Arc<Server>) -> std::io::Result<()> {
    let stdin = stdin_stream()?;
    connection::serve(server.clone(), BufReader::new(stdin), tokio::io::stdout()).await;
    // The client closed stdin: it is gone, and so is the server.
    server.stopping.cancel();
    Ok(())
}

/// Stdin as a stream the runtime never waits for: a thread of its own
/// copies it into one end of a socket pair. (Tokio reads stdin on its
/// blocking pool, and a read the client never answers would hold up the
/// runtime's shutdown after the server is done.)
pub fn stdin_stream() -> std::io::Result<tokio::net::UnixStream> {
    let (ours, mut theirs) = std::os::unix::net::UnixStream::pair()?;
    std::thread::spawn(move || {
        // At the end of stdin `theirs` is dropped: the server reads the end.
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut theirs);
    });
    ours.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(ours)
}

/// Binds the socket at `path`, readable and writable by the user only. A
/// socket file left by a server that is gone is replaced; one a server
/// still answers on is not, nor anything that is not a socket.
pub fn listen(path: &Path) -> Result<tokio::net::UnixListener, ListenError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let shown = path.display().to_string();
    let io = |source| ListenError::Io {
        path: shown.clone(),
        source,
    };
    if let Ok(metadata) = std::fs::symlink_metadata(path) {
        if !metadata.file_type().is_socket() {
            return Err(ListenError::NotASocket(shown));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(ListenError::Taken(shown));
        }
        std::fs::remove_file(path).map_err(io)?;
    }
    // Bound in a directory only the user may enter, made 0600 there, then
    // linked into place: no other user can connect in between, as they
    // could between a bind at `path` and its chmod. (A link, not a
    // rename: it never replaces what appeared at `path` meanwhile.)
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let staging = tempfile::Builder::new()
        .prefix(".moat-socket-")
        .tempdir_in(parent)
        .map_err(io)?;
    let staged = staging.path().join("socket");
    let listener = tokio::net::UnixListener::bind(&staged).map_err(io)?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    std::fs::hard_link(&staged, path).map_err(io)?;
    Ok(listener)
}

/// Serves each client that connects, at once, until the server is closed;
/// then waits for the connections to close.
pub async fn accept(server: Arc<Server>, listener: tokio::net::UnixListener) {
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
