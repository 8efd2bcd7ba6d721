//! Figures 1 and 2, measured with criterion: how long a run takes to give
//! its first event, and what each further event costs.

use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};
use moat_engine::{DoneStatus, EventPayload, run_agent};
use tokio::runtime::Runtime;

use super::fixtures::Subject;
use super::report::{self, Row};

/// Figure 1's target (issue 17; the first round's was 50 µs): first event
/// within 15 µs of `run_agent`.
const RUN_START_TARGET_NS: f64 = 15_000.0;
/// Figure 2's target (issue 17; the first round's was native + 1 µs): a
/// sandboxed event within 500 ns.
const PER_EVENT_TARGET_NS: f64 = 500.0;

const RUN_START_SAMPLES: usize = 50;
/// A flood run is long (tens of ms), so few samples of a few runs each.
const PER_EVENT_SAMPLES: usize = 10;

/// Figure 1: `run_agent` to the first event (echo's `init`), the component
/// already compiled and linked, so this is store + instantiate + `run` +
/// the first `next` for Wasm, against the engine alone for native.
pub fn run_start(c: &mut Criterion, rt: &Runtime, wasm: &Subject, native: &Subject) -> Row {
    let mut group = c.benchmark_group("run_start");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(RUN_START_SAMPLES);
    let wasm_ns = measure(&mut group, "wasm_echo", RUN_START_SAMPLES, |iters| {
        rt.block_on(first_events(wasm, iters))
    });
    let native_ns = measure(&mut group, "native_echo", RUN_START_SAMPLES, |iters| {
        rt.block_on(first_events(native, iters))
    });
    group.finish();

    let figure = "Run start → first event (cached component, mean)";
    let target = "≤ 15 µs";
    let (Some(wasm_ns), Some(native_ns)) = (wasm_ns, native_ns) else {
        return Row::not_measured(figure, target, "filtered out");
    };
    Row {
        figure: figure.into(),
        wasm: report::duration(wasm_ns),
        native: report::duration(native_ns),
        overhead: report::overhead(wasm_ns, native_ns),
        target: target.into(),
        met: Some(wasm_ns <= RUN_START_TARGET_NS),
    }
}

/// Starts `iters` echo runs and times each from `run_agent` to its first
/// event. Each run is then dropped mid-stream, outside the timed span:
/// that kills the session and frees its store, as a consumer that stops
/// listening would.
async fn first_events(subject: &Subject, iters: u64) -> Duration {
    let mut timed = Duration::ZERO;
    for _ in 0..iters {
        let started = Instant::now();
        let mut run = run_agent(&subject.registry, subject.request("hello world"))
            .expect("the adapter is registered");
        let first = run.next().await;
        timed += started.elapsed();
        // Anything but `init` means the run failed, and its time measures
        // the failure path instead.
        match first.map(|event| event.payload) {
            Some(EventPayload::Init(_)) => {}
            other => panic!("{}: expected init first, got {other:?}", subject.name),
        }
    }
    timed
}

/// Figure 2: a run of `events` small `text_delta` events then `done`; the
/// time per run divided by the events is the cost of one event, start
/// and end included (they are a rounding error over 100,000 events).
pub fn per_event(
    c: &mut Criterion,
    rt: &Runtime,
    wasm: &Subject,
    native: &Subject,
    events: u64,
) -> Row {
    let mut group = c.benchmark_group("per_event");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(PER_EVENT_SAMPLES)
        // Flat: every sample runs the same few iterations, which suits
        // iterations this long.
        .sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Elements(events));
    let wasm_ns = measure(&mut group, "wasm_flood", PER_EVENT_SAMPLES, |iters| {
        rt.block_on(floods(wasm, events, iters))
    });
    let native_ns = measure(&mut group, "native_flood", PER_EVENT_SAMPLES, |iters| {
        rt.block_on(floods(native, events, iters))
    });
    group.finish();

    let figure = format!("Per event ({} text_delta events)", report::count(events));
    let target = "Wasm ≤ 500 ns/event";
    let (Some(wasm_run), Some(native_run)) = (wasm_ns, native_ns) else {
        return Row::not_measured(&figure, target, "filtered out");
    };
    let count = events as f64;
    let (wasm_ns, native_ns) = (wasm_run / count, native_run / count);
    let per_second = |ns: f64| format!("{:.2} M events/s", 1e3 / ns);
    Row {
        figure,
        wasm: format!("{} ({})", report::duration(wasm_ns), per_second(wasm_ns)),
        native: format!(
            "{} ({})",
            report::duration(native_ns),
            per_second(native_ns)
        ),
        overhead: report::overhead(wasm_ns, native_ns),
        target: target.into(),
        met: Some(wasm_ns <= PER_EVENT_TARGET_NS),
    }
}

/// Runs `iters` floods of `events` to their end, checking each delivered
/// exactly what it should, so a broken run cannot pass for a fast one.
async fn floods(subject: &Subject, events: u64, iters: u64) -> Duration {
    let prompt = events.to_string();
    let started = Instant::now();
    for _ in 0..iters {
        let mut run =
            run_agent(&subject.registry, subject.request(&prompt)).expect("registered adapter");
        let mut deltas = 0;
        while let Some(event) = run.next().await {
            match event.payload {
                EventPayload::TextDelta(_) => deltas += 1,
                EventPayload::Done(done) if done.status == DoneStatus::Success => {}
                other => panic!("{}: unexpected event {other:?}", subject.name),
            }
        }
        assert_eq!(deltas, events, "{}: every delta arrives", subject.name);
    }
    started.elapsed()
}

/// Runs one criterion benchmark whose routine times its own iterations
/// (runs are async and their teardown must stay out of the timing), and
/// returns nanoseconds per iteration over criterion's measurement.
///
/// Criterion calls the routine while warming up, then once per sample, so
/// the last `samples` calls are the measurement; total time over total
/// iterations is what criterion's own slope estimates. `None` when
/// criterion skipped the benchmark (a name filter on the command line).
fn measure(
    group: &mut BenchmarkGroup<'_, WallTime>,
    id: &str,
    samples: usize,
    mut routine: impl FnMut(u64) -> Duration,
) -> Option<f64> {
    let mut calls: Vec<(u64, Duration)> = Vec::new();
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let elapsed = routine(iters);
            calls.push((iters, elapsed));
            elapsed
        });
    });
    let measured = &calls[calls.len().saturating_sub(samples)..];
    let iters: u64 = measured.iter().map(|(iters, _)| iters).sum();
    let elapsed: Duration = measured.iter().map(|(_, elapsed)| *elapsed).sum();
    (iters > 0).then(|| elapsed.as_nanos() as f64 / iters as f64)
}
