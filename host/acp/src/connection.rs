//! One editor on a pair of streams: its lines read and checked, each
//! request answered on a task of its own (a prompt that runs for minutes
//! holds up no `session/cancel`), moat's own requests to it matched with
//! their answers, and every line out written by one writer in order.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio_util::task::TaskTracker;

use crate::agent::AcpAgent;
use crate::editor::Editor;
use crate::jsonrpc::{self, Id, Incoming, MAX_LINE_BYTES, RpcError};

/// Lines queued for the editor before a run's events wait for it to read.
const QUEUED_LINES: usize = 1024;

/// How long running turns get to end with their `done` once the editor
/// has gone.
const STOP_PATIENCE: Duration = Duration::from_secs(10);

/// What a connection's tasks share.
pub(crate) struct Connection {
    out: mpsc::Sender<Value>,
    /// moat's requests to the editor waiting for an answer, by id.
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>,
    next_id: AtomicU64,
    /// The editor's name, from `initialize`.
    client: Mutex<String>,
}

impl Editor for Connection {
    async fn notify(&self, method: &str, params: Value) {
        let _ = self.out.send(jsonrpc::notification(method, params)).await;
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answered, answer) = oneshot::channel();
        lock(&self.pending).insert(id, answered);
        // Removed again whether answered or given up on.
        let _forget = Forget {
            connection: self,
            id,
        };
        if self
            .out
            .send(jsonrpc::request(id, method, params))
            .await
            .is_err()
        {
            return Err(RpcError::internal("the editor is gone"));
        }
        answer
            .await
            .unwrap_or_else(|_| Err(RpcError::internal("the editor is gone")))
    }

    fn client_name(&self) -> String {
        lock(&self.client).clone()
    }
}

impl Connection {
    async fn answer(&self, id: &Id, outcome: Result<Value, RpcError>) {
        let _ = self.out.send(jsonrpc::answer(id, outcome)).await;
    }
}

struct Forget<'a> {
    connection: &'a Connection,
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(&self.connection.pending).remove(&self.id);
    }
}

/// Serves one editor on `reader` and `writer` until it closes its end;
/// then its running turns are stopped, each ending with its `done`.
pub async fn serve<R, W>(agent: Arc<AcpAgent>, mut reader: R, writer: W)
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, lines) = mpsc::channel(QUEUED_LINES);
    let writing = tokio::spawn(write_lines(lines, writer));
    let connection = Arc::new(Connection {
        out,
        pending: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(0),
        client: Mutex::new("an ACP client".to_owned()),
    });
    let tasks = TaskTracker::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) if line.len() > MAX_LINE_BYTES => {
                let error = RpcError::new(
                    RpcError::INVALID_REQUEST,
                    format!("a message is longer than {MAX_LINE_BYTES} bytes: closing"),
                );
                let _ = connection.out.send(jsonrpc::error_without_id(&error)).await;
                break;
            }
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        match jsonrpc::parse(text.trim()) {
            Ok(incoming) => dispatch(&agent, &connection, &tasks, incoming).await,
            Err((Some(id), error)) => connection.answer(&id, Err(error)).await,
            Err((None, error)) => {
                let _ = connection.out.send(jsonrpc::error_without_id(&error)).await;
            }
        }
    }
    // The editor is gone: its turns stop and end, then the writer drains.
    agent.cancel_all().await;
    tasks.close();
    let _ = tokio::time::timeout(STOP_PATIENCE, tasks.wait()).await;
    drop(connection);
    let _ = writing.await;
}

async fn dispatch(
    agent: &Arc<AcpAgent>,
    connection: &Arc<Connection>,
    tasks: &TaskTracker,
    incoming: Incoming,
) {
    match incoming {
        Incoming::Request { id, method, params } => {
            let (agent, connection) = (agent.clone(), connection.clone());
            tasks.spawn(async move {
                let outcome = call(&agent, &connection, &method, &params).await;
                if let Err(error) = &outcome {
                    tracing::info!(method, "answered with an error: {error}");
                }
                connection.answer(&id, outcome).await;
            });
        }
        Incoming::Notification { method, params } => match method.as_str() {
            "session/cancel" => agent.cancel(&params).await,
            other => tracing::debug!(method = other, "notification ignored"),
        },
        Incoming::Response { id, outcome } => {
            let waiting = id
                .as_u64()
                .and_then(|id| lock(&connection.pending).remove(&id));
            match waiting {
                Some(waiting) => {
                    let _ = waiting.send(outcome);
                }
                None => tracing::debug!(%id, "an answer to no request of moat's"),
            }
        }
    }
}

async fn call(
    agent: &AcpAgent,
    connection: &Arc<Connection>,
    method: &str,
    params: &Value,
) -> Result<Value, RpcError> {
    match method {
        "initialize" => {
            if let Some(name) = params.pointer("/clientInfo/name").and_then(Value::as_str) {
                let name: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
                *lock(&connection.client) = name;
            }
            agent.initialize(params)
        }
        "session/new" => agent.new_session(params),
        "session/prompt" => agent.prompt(connection, params).await,
        "authenticate" => Err(RpcError::invalid_params(
            "moat acp needs no authentication: the adapter's keys are moat's (moat secret set)",
        )),
        other => Err(RpcError::new(
            RpcError::METHOD_NOT_FOUND,
            format!("moat acp does not support {other}"),
        )),
    }
}

/// Writes each line as it comes, flushing whenever none is waiting.
async fn write_lines<W: AsyncWrite + Unpin>(mut lines: mpsc::Receiver<Value>, mut writer: W) {
    let mut buffer = Vec::new();
    while let Some(line) = lines.recv().await {
        buffer.clear();
        let mut next = Some(line);
        while let Some(line) = next {
            // A Value always serializes.
            let _ = serde_json::to_writer(&mut buffer, &line);
            buffer.push(b'\n');
            next = lines.try_recv().ok();
        }
        if writer.write_all(&buffer).await.is_err() || writer.flush().await.is_err() {
            // The editor stopped reading: nothing more reaches it.
            return;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
