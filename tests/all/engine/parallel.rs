//! The mechanics of `run_parallel`: laziness, backpressure, drop, panics,
//! task indices. The contract scenarios are in `engine::conformance`.

use std::time::Duration;

use futures::StreamExt;

use moat_engine::DoneStatus;
use moat_engine::*;
use moat_testkit::engine::{
    assert_one_done_last, collect_parallel, error_at, eventually, kinds, last_done, next_tagged,
    of_task, registry,
};
use moat_testkit::native::{ScriptedAdapter, Step};

fn task(agent: &str) -> ParallelTask {
    ParallelTask::new(RunRequest::new(agent, "prompt"))
}

fn flood(name: &str, events: usize) -> ScriptedAdapter {
    let mut steps: Vec<Step> = (0..events).map(|i| Step::text(&i.to_string())).collect();
    steps.push(Step::done(DoneStatus::Success));
    ScriptedAdapter::new(name, steps)
}

#[test]
fn it_can_be_made_outside_a_runtime_and_starts_nothing_until_pulled() {
    let (registry, probes) = registry(vec![flood("a", 1)]);
    let run = run_parallel(&registry, vec![task("a")], None).unwrap();
    assert_eq!(run.task_count(), 1);
    drop(run);
    assert_eq!(probes[0].starts(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_start_at_the_first_pull() {
    let (registry, probes) = registry(vec![flood("a", 1)]);
    let mut run = run_parallel(&registry, vec![task("a")], None).unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(probes[0].starts(), 0);
    assert!(next_tagged(&mut run).await.is_some());
    assert_eq!(probes[0].starts(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_is_pulled_only_as_fast_as_the_consumer_reads() {
    let (registry, probes) = registry(vec![flood("a", 1000), flood("b", 1000)]);
    let mut run = run_parallel(&registry, vec![task("a"), task("b")], None).unwrap();
    next_tagged(&mut run).await.unwrap();
    // Time enough for an unbounded engine to read everything.
    tokio::time::sleep(Duration::from_millis(100)).await;
    for probe in &probes {
        // Its slot's share of the channel, the event it is handing over,
        // and what the consumer took.
        assert!(probe.nexts() <= 4, "read {} events ahead", probe.nexts());
    }
    let events = collect_parallel(run).await;
    // Both floods go on once the consumer reads again, interleaved.
    assert_eq!(events.len() + 1, 2 * 1001);
    let first_half = &events[..500];
    assert!(first_half.iter().any(|e| e.task == 0) && first_half.iter().any(|e| e.task == 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_run_kills_every_task() {
    let (registry, probes) = registry(vec![
        ScriptedAdapter::new("a", vec![Step::text("a"), Step::Hang]),
        ScriptedAdapter::new("b", vec![Step::Hang]),
    ]);
    let mut run = run_parallel(&registry, vec![task("a"), task("b")], None).unwrap();
    assert_eq!(next_tagged(&mut run).await.unwrap().task, 0);
    eventually("both adapters to start", || {
        probes.iter().all(|p| p.starts() == 1)
    })
    .await;
    drop(run);
    for probe in &probes {
        eventually("the adapter to be killed", || probe.kills() >= 1).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_native_adapter_ends_its_task_with_error_and_done() {
    let (registry, _) = registry(vec![
        ScriptedAdapter::new(
            "panics",
            vec![
                Step::emit_in("s-p", moat_engine::AdapterEventKind::Text("a".into())),
                Step::tool_use("t1"),
                Step::Panic("boom".into()),
            ],
        ),
        flood("fine", 3),
    ]);
    let tasks = vec![task("panics").with_role("p"), task("fine")];
    let events = collect_parallel(run_parallel(&registry, tasks, None).unwrap()).await;
    let panicked = of_task(&events, 0);
    assert_eq!(kinds(&panicked), ["text", "tool_use", "error", "done"]);
    let error = error_at(&panicked, 2);
    assert_eq!(error.code.as_deref(), Some("ADAPTER_ERROR"));
    assert!(error.message.contains("boom"), "{}", error.message);
    assert!(!error.recoverable);
    let done = last_done(&panicked);
    assert_eq!(done.status, DoneStatus::Error);
    assert_eq!(done.usage.tool_uses, 1);
    assert!(
        panicked
            .iter()
            .all(|e| e.session_id == "s-p" && e.role.as_deref() == Some("p"))
    );
    let fine = of_task(&events, 1);
    assert_one_done_last(&fine);
    assert_eq!(last_done(&fine).status, DoneStatus::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tagged_events_carry_the_index_of_their_task() {
    // Two tasks of the same adapter, no roles: only the index tells them
    // apart for sure.
    let (registry, _) = registry(vec![flood("a", 2)]);
    let tasks = vec![
        ParallelTask::new(RunRequest::new("a", "one")),
        ParallelTask::new(RunRequest::new("a", "two")),
    ];
    let events: Vec<TaskEvent> = run_parallel(&registry, tasks, None)
        .unwrap()
        .into_tagged_stream()
        .collect()
        .await;
    for index in [0, 1] {
        assert_eq!(kinds(&of_task(&events, index)), ["text", "text", "done"]);
    }
    assert_eq!(events.len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn into_stream_yields_every_event() {
    let (registry, _) = registry(vec![flood("a", 2), flood("b", 1)]);
    let events: Vec<AgentEvent> = run_parallel(&registry, vec![task("a"), task("b")], None)
        .unwrap()
        .into_stream()
        .collect()
        .await;
    assert_eq!(events.len(), 5);
    assert_eq!(events.iter().filter(|e| e.is_done()).count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_next_call_loses_no_event() {
    let (registry, _) = registry(vec![ScriptedAdapter::new(
        "slow",
        vec![
            Step::Sleep(Duration::from_millis(50)),
            Step::text("a"),
            Step::done(DoneStatus::Success),
        ],
    )]);
    let mut run = run_parallel(&registry, vec![task("slow")], None).unwrap();
    let early = tokio::time::timeout(Duration::from_millis(5), run.next()).await;
    assert!(early.is_err());
    let events = collect_parallel(run).await;
    assert_eq!(kinds(&of_task(&events, 0)), ["text", "done"]);
}

/// `count` adapters that each hold a slot for a while, counting how many
/// are inside at once; the most seen.
fn overlapping(
    count: usize,
) -> (
    Vec<ScriptedAdapter>,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let adapters = (0..count)
        .map(|i| {
            let (enter, most_seen, leave) = (inside.clone(), most.clone(), inside.clone());
            ScriptedAdapter::new(
                &format!("t{i}"),
                vec![
                    Step::call(move || {
                        let now = enter.fetch_add(1, Ordering::SeqCst) + 1;
                        most_seen.fetch_max(now, Ordering::SeqCst);
                    }),
                    Step::text("working"),
                    Step::Sleep(Duration::from_millis(50)),
                    Step::call(move || {
                        leave.fetch_sub(1, Ordering::SeqCst);
                    }),
                    Step::done(DoneStatus::Success),
                ],
            )
        })
        .collect();
    (adapters, most)
}

fn capped(agent: &str, max_memory_bytes: u64) -> ParallelTask {
    let limits = RunLimits {
        max_memory_bytes,
        ..RunLimits::default()
    };
    ParallelTask::new(RunRequest::new(agent, "prompt").with_limits(limits))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_beyond_the_memory_budget_wait_for_room_instead_of_failing() {
    const MIB: u64 = 1024 * 1024;
    let (adapters, most) = overlapping(3);
    let (one_at_a_time, _) = registry(adapters);
    let tasks = ["t0", "t1", "t2"].map(|t| capped(t, 100 * MIB)).to_vec();
    let run = run_parallel(&one_at_a_time, tasks, None)
        .unwrap()
        .with_memory_budget(150 * MIB);
    let events = collect_parallel(run).await;
    let dones: Vec<DoneStatus> = events
        .iter()
        .filter_map(|e| e.event.as_done().map(|d| d.status))
        .collect();
    assert_eq!(dones, [DoneStatus::Success; 3], "all ran, none failed");
    assert_eq!(
        most.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one at a time"
    );

    // With room for all three, they overlap.
    let (adapters, most) = overlapping(3);
    let (all_at_once, _) = registry(adapters);
    let tasks = ["t0", "t1", "t2"].map(|t| capped(t, 100 * MIB)).to_vec();
    let run = run_parallel(&all_at_once, tasks, None)
        .unwrap()
        .with_memory_budget(300 * MIB);
    collect_parallel(run).await;
    assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 3);
}
