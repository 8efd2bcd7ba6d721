//! The engine's guarantees hold for real components run in parallel:
//! every task ends with exactly one `done`, misbehaving tasks do not
//! disturb the others, and a spinning task does not hold up anyone.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use moat_sandbox::RunScope;

use moat_engine::{AgentEvent, DoneStatus, EventPayload, ParallelTask, Registry, run_parallel};
use moat_testkit::components::*;
use moat_testkit::{TEST_DEADLINE, error_codes, load, registry_of, single_done};
use tokio_util::sync::CancellationToken;

/// Runs `tasks` and returns each task's events, by task index.
async fn run_all(
    registry: &Registry<RunScope>,
    tasks: Vec<ParallelTask<RunScope>>,
    abort: Option<CancellationToken>,
) -> BTreeMap<usize, Vec<AgentEvent>> {
    let mut run = run_parallel(registry, tasks, abort).expect("all adapters registered");
    let mut by_task: BTreeMap<usize, Vec<AgentEvent>> = BTreeMap::new();
    let all = async {
        while let Some(tagged) = run.next_tagged().await {
            by_task.entry(tagged.task).or_default().push(tagged.event);
        }
    };
    tokio::time::timeout(TEST_DEADLINE, all)
        .await
        .expect("the parallel run ended");
    by_task
}

/// A registry with the components at `paths`, and their names in order.
async fn registry_with(paths: &[&str]) -> (Registry<RunScope>, Vec<String>) {
    let mut adapters = Vec::new();
    for path in paths {
        adapters.push(load(path).await);
    }
    let names = adapters
        .iter()
        .map(|a| moat_engine::Adapter::info(a).name.clone())
        .collect();
    (registry_of(adapters), names)
}

fn task(agent: &str, prompt: &str, timeout: Option<Duration>) -> ParallelTask<RunScope> {
    let mut request = moat_testkit::request(agent, prompt);
    request.limits.timeout = timeout;
    ParallelTask::new(request)
}

fn deltas(events: &[AgentEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::TextDelta(_)))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_tasks_each_end_with_one_done_and_well_behaved_ones_are_complete() {
    let paths = [
        FLOOD, PANIC, NO_DONE, AFTER_DONE, SPIN_NEXT, BAD_JSON, DROP_TRAP,
    ];
    let (registry, names) = registry_with(&paths).await;
    let limit = Some(Duration::from_millis(500));
    let tasks = vec![
        task(&names[0], "5000", None),
        task(&names[1], "", limit),
        task(&names[2], "", limit),
        task(&names[3], "", limit),
        task(&names[4], "", limit),
        task(&names[5], "", limit),
        task(&names[6], "", limit),
        task(&names[0], "300", None),
    ];
    let by_task = run_all(&registry, tasks, None).await;
    assert_eq!(by_task.len(), 8, "every task spoke");
    let expected = [
        (DoneStatus::Success, vec![]),
        (DoneStatus::Error, vec!["ADAPTER_ERROR"]),
        (DoneStatus::Error, vec!["MISSING_DONE"]),
        (DoneStatus::Success, vec![]),
        (DoneStatus::Error, vec!["TIMEOUT"]),
        (DoneStatus::Success, vec!["INVALID_EVENT"]),
        (DoneStatus::Success, vec![]),
        (DoneStatus::Success, vec![]),
    ];
    for (index, (status, codes)) in expected.iter().enumerate() {
        let events = &by_task[&index];
        assert_eq!(single_done(events).status, *status, "task {index}");
        assert_eq!(error_codes(events), *codes, "task {index}");
    }
    assert_eq!(
        deltas(&by_task[&0]),
        5000,
        "a flood beside failures arrives complete"
    );
    assert_eq!(deltas(&by_task[&7]), 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_task_does_not_delay_another_tasks_events() {
    let (registry, names) = registry_with(&[SPIN_NEXT, FLOOD]).await;
    let abort = CancellationToken::new();
    let mut run = run_parallel(
        &registry,
        vec![task(&names[0], "", None), task(&names[1], "2000", None)],
        Some(abort.clone()),
    )
    .unwrap();
    let started = Instant::now();
    let mut flood = Vec::new();
    let mut spin = Vec::new();
    while let Some(tagged) = tokio::time::timeout(TEST_DEADLINE, run.next_tagged())
        .await
        .unwrap()
    {
        let done = tagged.event.is_done();
        if tagged.task == 1 {
            flood.push(tagged.event);
            if done {
                // The flood finished while its neighbour spins forever.
                assert!(started.elapsed() < Duration::from_secs(20));
                abort.cancel();
            }
        } else {
            spin.push(tagged.event);
        }
    }
    assert_eq!(single_done(&flood).status, DoneStatus::Success);
    assert_eq!(deltas(&flood), 2000);
    assert_eq!(single_done(&spin).status, DoneStatus::Interrupted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_token_interrupts_exactly_the_tasks_holding_it() {
    let (registry, names) = registry_with(&[SLEEPY, FLOOD]).await;
    let shared = CancellationToken::new();
    let holding = |prompt: &str| {
        let mut t = task(&names[0], prompt, None);
        t.request.abort = Some(shared.clone());
        t.request.drain = Duration::from_millis(100);
        t
    };
    let tasks = vec![
        holding("10000"),
        holding("10000"),
        task(&names[1], "100", None),
    ];
    let trigger = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let by_task = run_all(&registry, tasks, None).await;
    assert_eq!(single_done(&by_task[&0]).status, DoneStatus::Interrupted);
    assert_eq!(single_done(&by_task[&1]).status, DoneStatus::Interrupted);
    assert_eq!(single_done(&by_task[&2]).status, DoneStatus::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_label_every_event_of_their_task() {
    let (registry, names) = registry_with(&[FLOOD]).await;
    let tasks = vec![
        task(&names[0], "3", None).with_role("writer"),
        task(&names[0], "4", None).with_role("reviewer"),
    ];
    let by_task = run_all(&registry, tasks, None).await;
    assert!(
        by_task[&0]
            .iter()
            .all(|e| e.role.as_deref() == Some("writer"))
    );
    assert!(
        by_task[&1]
            .iter()
            .all(|e| e.role.as_deref() == Some("reviewer"))
    );
}
