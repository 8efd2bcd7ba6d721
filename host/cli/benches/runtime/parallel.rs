//! Figure 5: many echo runs at once through `run_parallel`, events per
//! second and host memory, for N Wasm tasks beside N native ones.
//!
//! Each measurement runs in a fresh child process (see
//! [`fixtures::run_child`]); memory is the growth of the process's RSS
//! high-water mark over the run, divided by N.

use std::time::Instant;

use moat_engine::{ParallelTask, run_parallel};
use moat_testkit::native::NativeEcho;
use serde::{Deserialize, Serialize};

use super::fixtures::{self, Subject};
use super::report::{self, Row};
use super::sessions::Side;

/// Set in a child: "wasm:N" or "native:N".
const CHILD_ENV: &str = "MOAT_BENCH_PARALLEL_CHILD";

/// Sixteen words: each echo task streams 16 deltas plus init, text, done.
const PROMPT: &str = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen";

#[derive(Debug, Serialize, Deserialize)]
struct Report {
    tasks: usize,
    events: u64,
    seconds: f64,
    peak_growth_kib: u64,
    failed: usize,
}

/// The work this process was started for, if it is a figure-5 child.
pub fn child_request() -> Option<(Side, usize)> {
    let request = std::env::var(CHILD_ENV).ok()?;
    let (side, tasks) = request.split_once(':')?;
    let side = match side {
        "wasm" => Side::Wasm,
        "native" => Side::Native,
        _ => return None,
    };
    Some((side, tasks.parse().ok()?))
}

/// A child's whole life: one parallel run of `tasks` echo tasks.
pub fn child_main(side: Side, tasks: usize) {
    let rt = fixtures::runtime();
    let report = rt.block_on(run_tasks(side, tasks));
    println!(
        "{}",
        serde_json::to_string(&report).expect("a report serializes")
    );
}

async fn run_tasks(side: Side, tasks: usize) -> Report {
    let sandbox;
    let subject = match side {
        Side::Wasm => {
            sandbox = fixtures::sandbox(u32::try_from(tasks).expect("fits in u32").max(16));
            Subject::new(fixtures::load_echo(&sandbox).await)
        }
        Side::Native => Subject::new(NativeEcho::named("native-echo")),
    };
    // One run first, so one-time costs are not counted.
    let mut warm = run_parallel(
        &subject.registry,
        vec![ParallelTask::new(subject.request("warm"))],
        None,
    )
    .expect("registered");
    while warm.next().await.is_some() {}

    let before = fixtures::rss_kib("VmRSS");
    let started = Instant::now();
    let all = (0..tasks)
        .map(|_| ParallelTask::new(subject.request(PROMPT)))
        .collect();
    let mut run = run_parallel(&subject.registry, all, None).expect("registered");
    let (mut events, mut failed) = (0, 0);
    while let Some(event) = run.next().await {
        events += 1;
        if event
            .as_done()
            .is_some_and(|done| done.status != moat_engine::DoneStatus::Success)
        {
            failed += 1;
        }
    }
    Report {
        tasks,
        events,
        seconds: started.elapsed().as_secs_f64(),
        peak_growth_kib: fixtures::rss_kib("VmHWM").saturating_sub(before),
        failed,
    }
}

/// Figure 5 at each size, both sides in their own child processes.
pub fn figure(sizes: &[usize], notes: &mut Vec<String>) -> Vec<Row> {
    let mut rows = Vec::new();
    for &tasks in sizes {
        let child = |side: Side| {
            fixtures::run_child::<Report>(CHILD_ENV, &format!("{}:{tasks}", side.name()))
        };
        let (wasm, native) = match (child(Side::Wasm), child(Side::Native)) {
            (Ok(wasm), Ok(native)) => (wasm, native),
            (wasm, native) => {
                let why = [wasm.err(), native.err()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join("; ");
                notes.push(format!("parallel ×{tasks}: {why}"));
                rows.push(Row::not_measured(
                    &format!("{tasks} parallel echo runs"),
                    "—",
                    "child failed, see notes",
                ));
                continue;
            }
        };
        for (side, report) in [(Side::Wasm, &wasm), (Side::Native, &native)] {
            notes.push(format!(
                "parallel ×{tasks} {}: {} events in {:.3} s, {} failed, RSS high-water +{} KiB",
                side.name(),
                report.events,
                report.seconds,
                report.failed,
                report.peak_growth_kib
            ));
        }
        let rate = |r: &Report| r.events as f64 / r.seconds;
        let per_task = |r: &Report| r.peak_growth_kib as f64 / r.tasks as f64;
        let complete = wasm.failed == 0 && native.failed == 0;
        rows.push(Row {
            figure: format!("{tasks} parallel echo runs: events/s"),
            wasm: report::count(rate(&wasm) as u64),
            native: report::count(rate(&native) as u64),
            overhead: format!(
                "×{:.2} time",
                wasm.seconds / native.seconds.max(f64::EPSILON)
            ),
            target: "all complete".into(),
            met: Some(complete),
        });
        rows.push(Row {
            figure: format!("{tasks} parallel echo runs: peak memory per task"),
            wasm: format!("{:.1} KiB", per_task(&wasm)),
            native: format!("{:.1} KiB", per_task(&native)),
            overhead: format!("+{:.1} KiB", per_task(&wasm) - per_task(&native)),
            target: "—".into(),
            met: None,
        });
    }
    rows
}
