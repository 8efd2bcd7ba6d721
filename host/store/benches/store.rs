//! The run store's cost: `cargo bench -p moat-store --bench store`.
//!
//! 1. `per_event/{no_store,store}`: a native flood of small events through
//!    the engine (`run_agent`, pulled), without and with each event
//!    recorded (`Recorder`), in the same run: the ratio is what storing
//!    adds to an event (target ≤ 1.3×).
//! 2. `stored_events`: events queued straight into the store and flushed:
//!    how many a store writes per second (target ≥ 300k/s).
//! 3. `start/open_record_finish`: what the store adds to starting (and
//!    ending) one `moat run`: opening the store (with its reconciliation),
//!    recording the run, marking it running and ending it (target ≤ 5 ms).
//!
//! The store is a real SQLite file in a temporary directory. Without
//! `--bench` (as under `cargo test --benches`) each runs once, small.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use futures::StreamExt;
use moat_engine::{AgentEvent, EventPayload, Registry, RunRequest, run_agent};
use moat_store::{FailReason, NewRun, Recorder, Store};
use moat_testkit::native::NativeFlood;

/// Events per flood run.
const EVENTS: u64 = 10_000;

fn new_run() -> NewRun {
    NewRun {
        parent: None,
        adapter: "native-flood".into(),
        component_sha256: String::new(),
        prompt: EVENTS.to_string(),
        options: serde_json::json!({}),
        grants: serde_json::json!({}),
        limits: serde_json::json!({}),
        timeout_ms: None,
    }
}

/// One flood run of [`EVENTS`] events, recorded in `store` when given:
/// how long it took.
async fn flood(registry: &Registry, store: Option<&Arc<Store>>) -> Duration {
    let started = Instant::now();
    let request = RunRequest::new("native-flood", EVENTS.to_string());
    let mut recorder = store.map(|store| Recorder::create(store.clone(), &new_run()).unwrap());
    let mut events = run_agent(registry, request).unwrap().into_stream();
    let mut count = 0;
    while let Some(event) = events.next().await {
        if let Some(recorder) = recorder.as_mut() {
            recorder.record(&event).unwrap();
        }
        count += 1;
    }
    if let Some(recorder) = recorder {
        recorder.finish(FailReason::Cancelled).unwrap();
    }
    assert_eq!(count, EVENTS + 1, "every delta and the done");
    started.elapsed()
}

fn small_event(n: u64) -> AgentEvent {
    AgentEvent {
        agent: "bench".into(),
        timestamp: n,
        session_id: "s".into(),
        role: None,
        payload: EventPayload::TextDelta(moat_engine::TextDeltaPayload { delta: "x".into() }),
    }
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("bench.db")).unwrap());
    let mut registry = Registry::new();
    registry.register(Arc::new(NativeFlood::new())).unwrap();

    let mut group = criterion.benchmark_group("per_event");
    group.throughput(Throughput::Elements(EVENTS));
    group.bench_function("no_store", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| runtime.block_on(flood(&registry, None)))
                .sum()
        })
    });
    group.bench_function("store", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| runtime.block_on(flood(&registry, Some(&store))))
                .sum()
        })
    });
    group.finish();

    let mut group = criterion.benchmark_group("stored_events");
    group.throughput(Throughput::Elements(EVENTS));
    let events: Vec<AgentEvent> = (0..EVENTS).map(small_event).collect();
    group.bench_function("batched", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                let id = store.create_run(&new_run()).unwrap();
                let started = Instant::now();
                for (seq, event) in events.iter().enumerate() {
                    store.record_event(&id, seq as u64, event).unwrap();
                }
                store.flush().unwrap();
                took += started.elapsed();
            }
            took
        })
    });
    group.finish();
    let mut group = criterion.benchmark_group("start");
    let path = dir.path().join("bench.db");
    group.bench_function("open_record_finish", |b| {
        b.iter(|| {
            let store = Arc::new(Store::open(&path).unwrap());
            let recorder = Recorder::create(store, &new_run()).unwrap();
            recorder.running().unwrap();
            recorder.finish(FailReason::Cancelled).unwrap();
        })
    });
    group.finish();
    criterion.final_summary();
}
