//! Figure 3: how fast an abort ends a run whose adapter will not end it,
//! measured with a plain loop because it needs percentiles: on the machine
//! as it is, and again with both cores kept busy by two spinning processes
//! (as when the user compiles beside moat).

use std::time::{Duration, Instant};

use moat_engine::{DoneStatus, EventPayload, run_agent};
use tokio::runtime::Runtime;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::fixtures::Subject;
use super::report::{self, Row};

/// Figure 3's target: p99 within 1 ms.
const P99_TARGET_NS: f64 = 1_000_000.0;

/// Samples discarded first: the first runs touch fresh pool slots and
/// cold code, which says nothing about a running host.
const WARM_UP: usize = 10;

/// Aborts of a spinning Wasm guest against aborts of a native adapter
/// that is pending forever, each `samples` times: quiet, then under load;
/// then the native adapter again with one more busy process, standing for
/// the core the spinning guest itself keeps busy (so the two sides of that
/// row compete with as many busy threads).
pub fn figure(rt: &Runtime, wasm: &Subject, native: &Subject, samples: usize) -> Vec<Row> {
    let quiet = (
        rt.block_on(latencies(wasm, samples)),
        rt.block_on(latencies(native, samples)),
    );
    let mut rows = rows("", &quiet.0, &quiet.1, samples, true);
    let load = Load::start(2);
    let busy = (
        rt.block_on(latencies(wasm, samples)),
        rt.block_on(latencies(native, samples)),
    );
    drop(load);
    rows.extend(self::rows(
        ", both cores busy",
        &busy.0,
        &busy.1,
        samples,
        true,
    ));
    let load = Load::start(3);
    let native_busier = rt.block_on(latencies(native, samples));
    drop(load);
    rows.extend(self::rows(
        ", both cores busy, native beside one more busy process",
        &busy.0,
        &native_busier,
        samples,
        false,
    ));
    rows
}

/// p50, p99 and max of the two sides; `judged`: the p99 row is held
/// against the target.
fn rows(when: &str, wasm: &[f64], native: &[f64], samples: usize, judged: bool) -> Vec<Row> {
    let row = |name: &str, q: f64, target: &str, met: Option<bool>| {
        let (w, n) = (percentile(wasm, q), percentile(native, q));
        Row {
            figure: format!(
                "Abort latency, spinning guest, drain 0{when}: {name} ({samples} samples)"
            ),
            wasm: report::duration(w),
            native: report::duration(n),
            overhead: report::overhead(w, n),
            target: target.into(),
            met,
        }
    };
    let p99 = if judged {
        row(
            "p99",
            0.99,
            "p99 ≤ 1 ms",
            Some(percentile(wasm, 0.99) <= P99_TARGET_NS),
        )
    } else {
        row("p99", 0.99, "—", None)
    };
    vec![row("p50", 0.50, "—", None), p99, row("max", 1.0, "—", None)]
}

/// Processes that keep cores busy until dropped.
struct Load(Vec<std::process::Child>);

impl Load {
    fn start(processes: usize) -> Self {
        Self(
            (0..processes)
                .map(|_| {
                    std::process::Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("sh starts")
                })
                .collect(),
        )
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// For each sample: start a run with drain 0 on a worker, let it get stuck
/// (the Wasm guest spinning in `next`, the native one pending), cancel its
/// token from this thread, and time until the consumer task holds the
/// `done` interrupted. Nanoseconds, sorted.
async fn latencies(subject: &Subject, samples: usize) -> Vec<f64> {
    let mut latencies = Vec::with_capacity(samples);
    for i in 0..WARM_UP + samples {
        let abort = CancellationToken::new();
        let request = subject
            .request("")
            .with_abort(abort.clone())
            .with_drain(Duration::ZERO);
        let mut run = run_agent(&subject.registry, request).expect("registered adapter");
        let (done_tx, done_rx) = oneshot::channel();
        let consumer = tokio::spawn(async move {
            while let Some(event) = run.next().await {
                if let EventPayload::Done(done) = event.payload {
                    let _ = done_tx.send((Instant::now(), done.status));
                    return;
                }
            }
        });
        // Long enough for the run to start and get stuck; varied so the
        // cancel does not always land at the same point of the 1 ms epoch
        // tick.
        tokio::time::sleep(Duration::from_millis(2 + (i % 3) as u64)).await;
        let cancelled_at = Instant::now();
        abort.cancel();
        let (done_at, status) = done_rx.await.expect("the run ends with a done");
        assert_eq!(
            status,
            DoneStatus::Interrupted,
            "{}: the run was still going when aborted",
            subject.name
        );
        consumer.await.expect("the consumer task does not panic");
        if i >= WARM_UP {
            latencies.push(done_at.duration_since(cancelled_at).as_nanos() as f64);
        }
    }
    latencies.sort_by(f64::total_cmp);
    latencies
}

/// The `q` quantile (0 to 1) of sorted values, nearest rank.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
