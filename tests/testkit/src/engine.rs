//! Helpers for the engine's tests of single and parallel runs with native
//! doubles ([`crate::native`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use moat_engine::{
    AgentEvent, AgentRun, DonePayload, ErrorPayload, ParallelRun, Registry, RunRequest, TaskEvent,
    run_agent,
};

use crate::native::{Probe, ScriptedAdapter};

/// Long enough for a run that should end promptly; a run that hangs fails
/// its test instead of hanging it.
pub const PATIENCE: Duration = Duration::from_secs(5);

/// A registry holding `adapters`, and their probes in the same order.
pub fn registry(adapters: Vec<ScriptedAdapter>) -> (Registry, Vec<Arc<Probe>>) {
    let mut registry = Registry::new();
    let probes = adapters
        .into_iter()
        .map(|adapter| {
            let probe = adapter.probe();
            registry.register(Arc::new(adapter)).unwrap();
            probe
        })
        .collect();
    (registry, probes)
}

/// Every event of a single run.
pub async fn collect_run(mut run: AgentRun) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    while let Some(event) = tokio::time::timeout(PATIENCE, run.next())
        .await
        .expect("the run should have produced an event by now")
    {
        events.push(event);
    }
    events
}

/// Every event of `request` run alone.
pub async fn single(registry: &Registry, request: RunRequest) -> Vec<AgentEvent> {
    collect_run(run_agent(registry, request).unwrap()).await
}

/// Every event of a parallel run, with its task.
pub async fn collect_parallel(mut run: ParallelRun) -> Vec<TaskEvent> {
    let mut events = Vec::new();
    while let Some(event) = next_tagged(&mut run).await {
        events.push(event);
    }
    events
}

/// The next event of a parallel run, failing the test if it takes long.
pub async fn next_tagged(run: &mut ParallelRun) -> Option<TaskEvent> {
    tokio::time::timeout(PATIENCE, run.next_tagged())
        .await
        .expect("the parallel run should have produced an event by now")
}

/// The events of one task, in the order they were merged.
pub fn of_task(events: &[TaskEvent], task: usize) -> Vec<AgentEvent> {
    events
        .iter()
        .filter(|e| e.task == task)
        .map(|e| e.event.clone())
        .collect()
}

/// The events' types, in order.
pub fn kinds(events: &[AgentEvent]) -> Vec<&str> {
    events.iter().map(AgentEvent::type_name).collect()
}

/// The payload of the last event, which must be a `done`.
pub fn last_done(events: &[AgentEvent]) -> &DonePayload {
    events
        .last()
        .and_then(AgentEvent::as_done)
        .unwrap_or_else(|| panic!("the last event should be a done: {:?}", kinds(events)))
}

/// The payload of event `index`, which must be an `error`.
pub fn error_at(events: &[AgentEvent], index: usize) -> &ErrorPayload {
    events[index]
        .as_error()
        .unwrap_or_else(|| panic!("event {index} should be an error: {:?}", kinds(events)))
}

/// The shape every run must have: one done, last.
pub fn assert_one_done_last(events: &[AgentEvent]) {
    let dones = events.iter().filter(|e| e.is_done()).count();
    assert_eq!(dones, 1, "{:?}", kinds(events));
    assert!(
        events.last().is_some_and(AgentEvent::is_done),
        "{:?}",
        kinds(events)
    );
}

/// Cancels `token` after `delay`, from a task of its own.
pub fn cancel_after(token: &CancellationToken, delay: Duration) {
    let token = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        token.cancel();
    });
}

/// Waits (briefly) for a background effect such as a close or a kill.
pub async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(2);
    while !cond() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
