//! The run store's cost: `cargo bench -p moat-store --bench store`.
//!
//! 1. `per_event/{wasm,native}_{no_store,store}`: a flood of small events
//!    through the engine (`run_agent`, pulled), without and with each
//!    event recorded (`Recorder`), in the same run: the ratio is what
//!    storing adds to an event (target ≤ 1.3×). `wasm` is the run moat
//!    makes (the testing `flood` component in the sandbox); `native` an
//!    in-process flood, the engine's own cost and the harshest baseline.
//! 2. `stored_events`: events queued straight into the store and flushed:
//!    how many a store writes per second (target ≥ 300k/s).
//! 3. `start/open_record_finish`: what the store adds to starting (and
//!    ending) one `moat run`: opening the store (with its reconciliation),
//!    recording the run, marking it running and ending it (target ≤ 5 ms).
//!
//! The store is a real SQLite file in a temporary directory. Without
//! `--bench` (as under `cargo test --benches`) each runs once, small.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use futures::StreamExt;
use moat_engine::{AgentEvent, EventPayload, Registry, RunRequest, run_agent};
use moat_runs::{FailReason, NewRun};
use moat_sandbox::{RunScope, Sandbox, SandboxConfig};
use moat_store::{Recorder, Store};
use moat_testkit::native::NativeFlood;

/// Events per flood run.
const EVENTS: u64 = 10_000;

fn new_run() -> NewRun {
    NewRun {
        parent: None,
        adapter: "flood".into(),
        component_sha256: String::new(),
        prompt: EVENTS.to_string(),
        options: serde_json::json!({}),
        grants: Default::default(),
        trust: None,
        limits: None,
        role: None,
    }
}

/// One flood run of [`EVENTS`] events by the adapter `name` of `registry`,
/// recorded in `store` when given: how long it took, from the record's
/// creation to its end.
async fn flood(registry: &Registry<RunScope>, name: &str, store: Option<&Arc<Store>>) -> Duration {
    let started = Instant::now();
    let request = RunRequest::new(name, EVENTS.to_string()).with_scope(RunScope::none());
    let mut recorder = store.map(|store| Recorder::create(store.clone(), &new_run()).unwrap());
    let mut events = run_agent(registry, request).unwrap().into_stream();
    let mut deltas = 0;
    while let Some(event) = events.next().await {
        if let Some(recorder) = recorder.as_mut() {
            recorder.record(&event).unwrap();
        }
        match event.payload {
            EventPayload::TextDelta(_) => deltas += 1,
            EventPayload::Done(done) => assert_eq!(done.status, moat_engine::DoneStatus::Success),
            other => panic!("{name}: unexpected event {other:?}"),
        }
    }
    if let Some(recorder) = recorder {
        recorder.finish(FailReason::Cancelled).unwrap();
    }
    assert_eq!(deltas, EVENTS, "{name}: every delta arrives");
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
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(dir.path().join("cache")),
        ..SandboxConfig::default()
    })
    .unwrap();
    let wasm = runtime
        .block_on(sandbox.load_file(Path::new(moat_testkit::components::FLOOD)))
        .unwrap();
    let wasm_name = moat_engine::Adapter::<RunScope>::info(&wasm).name.clone();
    let mut registry = Registry::scoped();
    registry.register(Arc::new(wasm)).unwrap();
    registry.register(Arc::new(NativeFlood::new())).unwrap();

    let mut group = criterion.benchmark_group("per_event");
    group.throughput(Throughput::Elements(EVENTS));
    for (side, adapter) in [("wasm", wasm_name.as_str()), ("native", "native-flood")] {
        for (with, store) in [("no_store", None), ("store", Some(&store))] {
            group.bench_function(format!("{side}_{with}"), |b| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| runtime.block_on(flood(&registry, adapter, store)))
                        .sum()
                })
            });
        }
    }
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
