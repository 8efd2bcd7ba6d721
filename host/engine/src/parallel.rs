//! `run_parallel`: several runs at once, their events merged as they arrive
//! (ENG-010 to ENG-012).
//!
//! Every task is an [`AgentRun`] under all of `run_agent`'s rules, driven
//! in its own tokio task so tasks run truly concurrently: one whose adapter
//! computes or blocks delays no other. A task that fails, traps or ends
//! without `done` gets its own `error` and `done` and leaves the pool; the
//! others go on.
//!
//! # Telling tasks apart
//!
//! Every event carries its adapter's name in `agent` and, when the task was
//! given one, its `role`. Give each task a distinct role and the role alone
//! identifies it, on the wire too. Without roles, `agent` plus `sessionId`
//! tells runs apart in practice, but a session id can change during a run
//! (the adapter reports its backend's) and two runs may share one (both
//! resuming the same session); [`ParallelRun::next_tagged`] and
//! [`ParallelRun::into_tagged_stream`] give each event with the index of
//! its task in the list, which is always unambiguous.
//!
//! # Abort
//!
//! The whole-run token interrupts every task; a task's own token
//! (`request.abort`) only that task, or every task holding the same token.
//! Each interrupted task drains and ends with its own `done` interrupted; a
//! task whose token is already cancelled never starts its adapter and
//! yields exactly one `done`.
//!
//! # Backpressure
//!
//! The tasks share one bounded channel with a slot per task: a task pulls
//! its adapter only while there is room, so a task flooding events holds at
//! most its slot's worth plus the one event it is handing over, and memory
//! stays bounded however slow the consumer. The channel serves waiting
//! tasks in turn, so a flood does not starve the others.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::FutureExt;
use futures::stream::Stream;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::{debug, error};

use super::adapter::Adapter;
use super::codes;
use super::event::{AgentEvent, DoneStatus, EventPayload, new_session_id, now_ms};
use super::registry::Registry;
use super::run::{AgentRun, EngineError, RunRequest, synthesized_done};

/// One task of a parallel run, within a scope of type `S` (see
/// [`Adapter`]).
#[derive(Debug, Clone)]
pub struct ParallelTask<S = ()> {
    /// What to run; `request.abort` is this task's own abort token.
    pub request: RunRequest<S>,
    /// Set on every event of the task, to tell it apart in the merged stream.
    pub role: Option<String>,
    /// What it takes of a memory budget; `None`: its
    /// `limits.max_memory_bytes` (the launch layer counts a run's programs
    /// too, which the engine does not know of).
    pub memory_bytes: Option<u64>,
}

impl<S> ParallelTask<S> {
    /// A task without a role.
    pub fn new(request: RunRequest<S>) -> Self {
        Self {
            request,
            role: None,
            memory_bytes: None,
        }
    }

    /// Sets the role.
    pub fn with_role(mut self, role: impl Into<String>) -> Self {
        self.role = Some(role.into());
        self
    }
}

/// An event of a parallel run with the index of its task in the list given
/// to [`run_parallel`].
#[derive(Debug, Clone, PartialEq)]
pub struct TaskEvent {
    /// The task's index in the list given to [`run_parallel`].
    pub task: usize,
    /// The event.
    pub event: AgentEvent,
}

/// Starts the tasks' runs, merged into one stream.
///
/// Every adapter is looked up first: an unknown name in any task is an
/// error here and nothing starts (ENG-003). The runs start at the first
/// pull, which needs a tokio runtime; an empty list yields nothing.
/// `abort` interrupts every task.
pub fn run_parallel<S: Send + Sync + 'static>(
    registry: &Registry<S>,
    tasks: Vec<ParallelTask<S>>,
    abort: Option<CancellationToken>,
) -> Result<ParallelRun, EngineError> {
    let pending = tasks
        .into_iter()
        .map(|task| {
            let adapter =
                registry
                    .get(&task.request.agent)
                    .ok_or_else(|| EngineError::UnknownAdapter {
                        name: task.request.agent.clone(),
                        known: registry.list(),
                    })?;
            Ok(Pending::new(
                adapter,
                task.request,
                task.role,
                task.memory_bytes,
            ))
        })
        .collect::<Result<Vec<_>, EngineError>>()?;
    let (sender, receiver) = mpsc::channel(pending.len().max(1) * SLOTS_PER_TASK);
    Ok(ParallelRun {
        // A child: cancelled by the caller's token, and by us on drop
        // without touching the caller's.
        stop: abort.map_or_else(CancellationToken::new, |t| t.child_token()),
        count: pending.len(),
        pending,
        sender: Some(sender),
        receiver,
        tasks: Vec::new(),
        memory_budget: None,
    })
}

/// Room in the shared channel per task: one event ahead of the consumer.
const SLOTS_PER_TASK: usize = 1;

/// A task not started yet.
struct Pending {
    agent: String,
    /// The task's memory cap, what it takes of a memory budget.
    memory_bytes: u64,
    /// The task's own abort token.
    abort: Option<CancellationToken>,
    role: Option<String>,
    /// Makes the task's run, given its final abort token (which the whole
    /// run's token cancels too).
    run: Box<dyn FnOnce(CancellationToken) -> AgentRun + Send>,
}

impl Pending {
    fn new<S: Send + Sync + 'static>(
        adapter: Arc<dyn Adapter<S>>,
        mut request: RunRequest<S>,
        role: Option<String>,
        memory_bytes: Option<u64>,
    ) -> Self {
        Self {
            agent: request.agent.clone(),
            memory_bytes: memory_bytes.unwrap_or(request.limits.max_memory_bytes),
            abort: request.abort.take(),
            role,
            run: Box::new(move |abort| AgentRun::new(adapter, request.with_abort(abort))),
        }
    }
}

/// The merged events of a parallel run: every task's events in its own
/// order, each task ending with exactly one `done`.
///
/// Dropping it stops every task and kills their adapters.
pub struct ParallelRun {
    /// Not started yet; the first pull starts them.
    pending: Vec<Pending>,
    count: usize,
    /// Kept until the tasks start, then only the tasks hold senders, so the
    /// channel closes when the last task ends.
    sender: Option<mpsc::Sender<TaskEvent>>,
    receiver: mpsc::Receiver<TaskEvent>,
    /// Interrupts every task: the caller's whole-run token, or our drop.
    stop: CancellationToken,
    tasks: Vec<AbortHandle>,
    /// The sum of memory caps the running tasks may have; `None`: no
    /// budget, every task starts at once.
    memory_budget: Option<u64>,
}

/// The unit a memory budget is counted in (the semaphore's permits).
const BUDGET_UNIT: u64 = 1024 * 1024;

impl ParallelRun {
    /// Runs tasks only while the sum of their memory caps (each task's
    /// `memory_bytes`, else `limits.max_memory_bytes`) fits in `bytes`: the others wait, in
    /// order, for running ones to end (their timeouts start when they do).
    /// A task whose cap alone is over the budget runs alone. Call before
    /// the first pull.
    pub fn with_memory_budget(mut self, bytes: u64) -> Self {
        self.memory_budget = Some(bytes);
        self
    }

    /// The number of tasks.
    pub fn task_count(&self) -> usize {
        self.count
    }

    /// The next event of any task, `None` once every task is done.
    pub async fn next(&mut self) -> Option<AgentEvent> {
        self.next_tagged().await.map(|tagged| tagged.event)
    }

    /// The next event with the index of its task.
    ///
    /// Cancel-safe: dropping the returned future loses no event.
    pub async fn next_tagged(&mut self) -> Option<TaskEvent> {
        futures::future::poll_fn(|cx| self.poll_tagged(cx)).await
    }

    /// The events as a stream.
    pub fn into_stream(self) -> impl Stream<Item = AgentEvent> + Send + 'static {
        self
    }

    /// The events with the index of their task, as a stream.
    pub fn into_tagged_stream(mut self) -> impl Stream<Item = TaskEvent> + Send + 'static {
        futures::stream::poll_fn(move |cx| self.poll_tagged(cx))
    }

    fn poll_tagged(&mut self, cx: &mut Context<'_>) -> Poll<Option<TaskEvent>> {
        if let Some(sender) = self.sender.take() {
            self.start(&sender);
        }
        self.receiver.poll_recv(cx)
    }

    /// Spawns a driving task per task.
    fn start(&mut self, sender: &mpsc::Sender<TaskEvent>) {
        debug!(tasks = self.pending.len(), "starting a parallel run");
        let budget = self.memory_budget.map(|bytes| {
            let units = bytes
                .div_ceil(BUDGET_UNIT)
                .clamp(1, Semaphore::MAX_PERMITS as u64);
            (Arc::new(Semaphore::new(units as usize)), units)
        });
        for (index, task) in std::mem::take(&mut self.pending).into_iter().enumerate() {
            let Pending {
                agent,
                memory_bytes,
                abort,
                role,
                run,
            } = task;
            let (abort, guard) = task_token(&self.stop, abort);
            let admission = budget.as_ref().map(|(semaphore, total)| {
                let units = memory_bytes.div_ceil(BUDGET_UNIT).clamp(1, *total);
                (semaphore.clone(), units as u32)
            });
            let sender = sender.clone();
            let handle = tokio::spawn(async move {
                // Waits for its share of the budget; an abort while waiting
                // starts it at once, to end with its `done` interrupted.
                let _share = match admission {
                    Some((semaphore, units)) => tokio::select! {
                        share = semaphore.acquire_many_owned(units) => share.ok(),
                        () = abort.cancelled() => None,
                    },
                    None => None,
                };
                drive(index, agent, run(abort), role, sender, guard).await;
            });
            self.tasks.push(handle.abort_handle());
        }
    }
}

impl Stream for ParallelRun {
    type Item = AgentEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        self.get_mut()
            .poll_tagged(cx)
            .map(|tagged| tagged.map(|t| t.event))
    }
}

impl Drop for ParallelRun {
    fn drop(&mut self) {
        // Interrupting first wakes an adapter computing inside its task's
        // poll, so the abort below takes effect; the abort drops each run,
        // which kills its adapter.
        self.stop.cancel();
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl std::fmt::Debug for ParallelRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParallelRun")
            .field("tasks", &self.count)
            .field("started", &self.sender.is_none())
            .finish_non_exhaustive()
    }
}

/// The abort token of one task: cancelled with `stop` (the whole run) or
/// with the task's own token. The guard, when there is one, must live as
/// long as the task: it ends the relay between the two tokens.
fn task_token(
    stop: &CancellationToken,
    own: Option<CancellationToken>,
) -> (CancellationToken, Option<DropGuard>) {
    let Some(own) = own else {
        return (stop.clone(), None);
    };
    let token = stop.child_token();
    if own.is_cancelled() {
        // Cancelled now, not by the relay, so the run sees it before it
        // starts its adapter.
        token.cancel();
        return (token, None);
    }
    // A relay in its own task: the task driving the run may be held by an
    // adapter computing in its poll, and the abort must reach the watcher
    // that wakes it.
    let relay = token.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = own.cancelled() => relay.cancel(),
            () = relay.cancelled() => {}
        }
    });
    let guard = token.clone().drop_guard();
    (token, Some(guard))
}

/// What a task forwarded, to end it properly should its run panic.
struct Forwarded {
    session_id: Option<String>,
    tool_use_ids: HashSet<String>,
    done: bool,
}

/// Drives one task's run and forwards its events, tagged with the role.
async fn drive(
    index: usize,
    agent: String,
    run: AgentRun,
    role: Option<String>,
    sender: mpsc::Sender<TaskEvent>,
    _relay: Option<DropGuard>,
) {
    let started = Instant::now();
    let mut forwarded = Forwarded {
        session_id: None,
        tool_use_ids: HashSet::new(),
        done: false,
    };
    let outcome = AssertUnwindSafe(forward(run, index, &role, &sender, &mut forwarded))
        .catch_unwind()
        .await;
    let Err(panic) = outcome else { return };
    // A native adapter panicked inside our poll (a Wasm one traps instead,
    // which the run reports itself). The run is gone, and with it the
    // adapter; the task still ends with its error and done, and the other
    // tasks are unaffected.
    let message = panic_message(panic.as_ref());
    error!(%agent, task = index, %message, "a parallel task panicked");
    if forwarded.done {
        return;
    }
    let session_id = forwarded.session_id.unwrap_or_else(new_session_id);
    let payloads = [
        EventPayload::error(
            codes::ADAPTER_ERROR,
            format!("the adapter panicked: {message}"),
            false,
        ),
        EventPayload::Done(Box::new(synthesized_done(
            DoneStatus::Error,
            None,
            forwarded.tool_use_ids.len(),
            started.elapsed(),
        ))),
    ];
    for payload in payloads {
        let event = AgentEvent {
            agent: agent.clone(),
            timestamp: now_ms(),
            session_id: session_id.clone(),
            role: role.clone(),
            payload,
        };
        if sender.send(TaskEvent { task: index, event }).await.is_err() {
            return;
        }
    }
}

/// Pulls the run only as fast as the channel has room: the bound on what
/// a task holds ahead of the consumer.
async fn forward(
    mut run: AgentRun,
    index: usize,
    role: &Option<String>,
    sender: &mpsc::Sender<TaskEvent>,
    forwarded: &mut Forwarded,
) {
    while let Some(mut event) = run.next().await {
        event.role.clone_from(role);
        if forwarded.session_id.as_ref() != Some(&event.session_id) {
            forwarded.session_id = Some(event.session_id.clone());
        }
        match &event.payload {
            EventPayload::ToolUse(tool_use) => {
                forwarded.tool_use_ids.insert(tool_use.tool_use_id.clone());
            }
            EventPayload::Done(_) => forwarded.done = true,
            _ => {}
        }
        if sender.send(TaskEvent { task: index, event }).await.is_err() {
            // The consumer is gone: dropping the run kills the adapter.
            debug!(task = index, "the parallel run was dropped");
            return;
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_task_token_relay_ends_with_its_task() {
        // The relay between a task's own token and the run must not outlive
        // the task: the task's combined token is cancelled at its end.
        let stop = CancellationToken::new();
        let own = CancellationToken::new();
        let (token, guard) = task_token(&stop, Some(own.clone()));
        assert!(!token.is_cancelled());
        drop(guard);
        assert!(token.is_cancelled());
        assert!(
            !own.is_cancelled(),
            "the caller's token is never cancelled by us"
        );
        assert!(!stop.is_cancelled());

        let (token, guard) = task_token(&stop, None);
        assert!(guard.is_none(), "the run's own token needs no relay");
        stop.cancel();
        assert!(token.is_cancelled());
    }
}
