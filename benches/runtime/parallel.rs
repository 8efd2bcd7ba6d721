//! Figure 5: many runs at once through `run_parallel`, for N Wasm tasks
//! beside N native ones: echo runs (events per second and host memory,
//! where starting the runs is most of the work) and floods (the merge:
//! events per second when every run has many events, and fairness, each
//! run's own events per second from its first event to its `done`, the
//! slowest beside the fastest).
//!
//! Each measurement runs in a fresh child process (see
//! [`fixtures::run_child`]); memory is the growth of the process's RSS
//! high-water mark over the run, divided by N.

use std::time::Instant;

use moat_engine::{ParallelTask, run_parallel};
use moat_testkit::native::{NativeEcho, NativeFlood};
use serde::{Deserialize, Serialize};

use super::fixtures::{self, Subject};
use super::report::{self, Row};
use super::sessions::Side;

/// Set in a child: "SIDE:N" (echo tasks) or "SIDE:N:EVENTS" (floods of
/// EVENTS deltas each), SIDE being "wasm" or "native".
const CHILD_ENV: &str = "MOAT_BENCH_PARALLEL_CHILD";

/// Deltas per flood task of the merge figure.
pub const MERGE_EVENTS: u64 = 1_000;

/// The merge again with four times the events per task: peak memory must
/// not grow with the events (nothing is kept per event).
const MERGE_LONGER: u64 = 4 * MERGE_EVENTS;

/// Sixteen words: each echo task streams 16 deltas plus init, text, done.
const PROMPT: &str = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen";

#[derive(Debug, Serialize, Deserialize)]
struct Report {
    tasks: usize,
    events: u64,
    seconds: f64,
    peak_growth_kib: u64,
    failed: usize,
    /// Each task's events per second from its first event to its `done`:
    /// the slowest and the fastest task.
    slowest_task: f64,
    fastest_task: f64,
}

/// What a figure-5 child runs.
#[derive(Debug, Clone, Copy)]
pub struct Work {
    side: Side,
    tasks: usize,
    /// `None`: echo tasks; `Some(n)`: floods of `n` deltas.
    flood: Option<u64>,
}

impl Work {
    fn env(&self) -> String {
        match self.flood {
            None => format!("{}:{}", self.side.name(), self.tasks),
            Some(events) => format!("{}:{}:{events}", self.side.name(), self.tasks),
        }
    }
}

/// The work this process was started for, if it is a figure-5 child.
pub fn child_request() -> Option<Work> {
    let request = std::env::var(CHILD_ENV).ok()?;
    let mut parts = request.split(':');
    let side = match parts.next()? {
        "wasm" => Side::Wasm,
        "native" => Side::Native,
        _ => return None,
    };
    let tasks = parts.next()?.parse().ok()?;
    let flood = match parts.next() {
        Some(events) => Some(events.parse().ok()?),
        None => None,
    };
    Some(Work { side, tasks, flood })
}

/// A child's whole life: one parallel run of its tasks.
pub fn child_main(work: Work) {
    let rt = fixtures::runtime();
    let report = rt.block_on(run_tasks(work));
    println!(
        "{}",
        serde_json::to_string(&report).expect("a report serializes")
    );
}

async fn run_tasks(work: Work) -> Report {
    let Work { side, tasks, flood } = work;
    let sandbox;
    let subject = match (side, flood) {
        (Side::Wasm, _) => {
            sandbox = fixtures::sandbox(u32::try_from(tasks).expect("fits in u32").max(16));
            Subject::new(match flood {
                None => fixtures::load_echo(&sandbox).await,
                Some(_) => fixtures::load_file(&sandbox, moat_testkit::components::FLOOD).await,
            })
        }
        (Side::Native, None) => Subject::new(NativeEcho::named("native-echo")),
        (Side::Native, Some(_)) => Subject::new(NativeFlood::new()),
    };
    let prompt = flood.map_or_else(|| PROMPT.to_owned(), |events| events.to_string());
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
        .map(|_| ParallelTask::new(subject.request(&prompt)))
        .collect();
    let mut run = run_parallel(&subject.registry, all, None).expect("registered");
    let (mut events, mut failed) = (0, 0);
    // Per task: its events, and when its first came.
    let mut seen: Vec<(u64, Option<Instant>)> = vec![(0, None); tasks];
    let mut rates = Vec::with_capacity(tasks);
    while let Some(tagged) = run.next_tagged().await {
        events += 1;
        let (count, first) = &mut seen[tagged.task];
        *count += 1;
        let first = *first.get_or_insert_with(Instant::now);
        if let Some(done) = tagged.event.as_done() {
            if done.status != moat_engine::DoneStatus::Success {
                failed += 1;
            }
            rates.push(*count as f64 / first.elapsed().as_secs_f64().max(1e-9));
        }
    }
    Report {
        tasks,
        events,
        seconds: started.elapsed().as_secs_f64(),
        peak_growth_kib: fixtures::rss_kib("VmHWM").saturating_sub(before),
        failed,
        slowest_task: rates.iter().copied().fold(f64::INFINITY, f64::min),
        fastest_task: rates.iter().copied().fold(0.0, f64::max),
    }
}

/// Both sides of one measurement, each in a child process of its own; a
/// note and a row saying so when either failed.
fn both_sides(
    tasks: usize,
    flood: Option<u64>,
    label: &str,
    notes: &mut Vec<String>,
    rows: &mut Vec<Row>,
) -> Option<(Report, Report)> {
    let child = |side: Side| {
        let work = Work { side, tasks, flood };
        fixtures::run_child::<Report>(CHILD_ENV, &work.env())
    };
    match (child(Side::Wasm), child(Side::Native)) {
        (Ok(wasm), Ok(native)) => {
            for (side, report) in [(Side::Wasm, &wasm), (Side::Native, &native)] {
                notes.push(format!(
                    "{label} {}: {} events in {:.3} s, {} failed, RSS high-water +{} KiB",
                    side.name(),
                    report.events,
                    report.seconds,
                    report.failed,
                    report.peak_growth_kib
                ));
            }
            Some((wasm, native))
        }
        (wasm, native) => {
            let why = [wasm.err(), native.err()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("; ");
            notes.push(format!("{label}: {why}"));
            rows.push(Row::not_measured(label, "—", "child failed, see notes"));
            None
        }
    }
}

fn rate(report: &Report) -> f64 {
    report.events as f64 / report.seconds
}

/// The events-per-second row of `label`.
fn rate_row(label: &str, wasm: &Report, native: &Report, target: &str, met: bool) -> Row {
    Row {
        figure: format!("{label}: events/s"),
        wasm: report::count(rate(wasm) as u64),
        native: report::count(rate(native) as u64),
        overhead: format!(
            "×{:.2} time",
            wasm.seconds / native.seconds.max(f64::EPSILON)
        ),
        target: target.into(),
        met: Some(met),
    }
}

/// Figure 5 at each size, both sides in their own child processes: echo
/// runs at every size, then the merge of floods at the largest.
pub fn figure(sizes: &[usize], notes: &mut Vec<String>) -> Vec<Row> {
    let mut rows = Vec::new();
    for &tasks in sizes {
        let label = format!("{tasks} parallel echo runs");
        let Some((wasm, native)) = both_sides(tasks, None, &label, notes, &mut rows) else {
            continue;
        };
        let per_task = |r: &Report| r.peak_growth_kib as f64 / r.tasks as f64;
        let complete = wasm.failed == 0 && native.failed == 0;
        rows.push(rate_row(&label, &wasm, &native, "all complete", complete));
        rows.push(Row {
            figure: format!("{label}: peak memory per task"),
            wasm: format!("{:.1} KiB", per_task(&wasm)),
            native: format!("{:.1} KiB", per_task(&native)),
            overhead: format!("+{:.1} KiB", per_task(&wasm) - per_task(&native)),
            target: "—".into(),
            met: None,
        });
    }
    if let Some(&tasks) = sizes.iter().max() {
        let label = format!("merge of {tasks} parallel floods of {MERGE_EVENTS}");
        if let Some((wasm, native)) =
            both_sides(tasks, Some(MERGE_EVENTS), &label, notes, &mut rows)
        {
            let complete = wasm.failed == 0
                && native.failed == 0
                && wasm.events == tasks as u64 * (MERGE_EVENTS + 1);
            rows.push(rate_row(
                &label,
                &wasm,
                &native,
                "≥ 500,000 (Wasm)",
                complete && rate(&wasm) >= 500_000.0,
            ));
            let spread = |r: &Report| {
                format!(
                    "{} – {} /s (×{:.1})",
                    report::count(r.slowest_task as u64),
                    report::count(r.fastest_task as u64),
                    r.fastest_task / r.slowest_task.max(f64::EPSILON)
                )
            };
            rows.push(Row {
                figure: format!("{label}: each run's events/s, slowest – fastest"),
                wasm: spread(&wasm),
                native: spread(&native),
                overhead: "—".into(),
                target: "none starved".into(),
                met: Some(wasm.slowest_task > 0.0 && native.slowest_task > 0.0),
            });
            let longer = format!("merge of {tasks} parallel floods of {MERGE_LONGER}");
            if let Some((wasm_longer, native_longer)) =
                both_sides(tasks, Some(MERGE_LONGER), &longer, notes, &mut rows)
            {
                let per_task = |r: &Report| r.peak_growth_kib as f64 / r.tasks as f64;
                let shown = |short: &Report, long: &Report| {
                    format!("{:.1} → {:.1} KiB", per_task(short), per_task(long))
                };
                rows.push(Row {
                    figure: format!(
                        "merge of {tasks} parallel floods: peak memory per task, {MERGE_EVENTS} → {MERGE_LONGER} events each"
                    ),
                    wasm: shown(&wasm, &wasm_longer),
                    native: shown(&native, &native_longer),
                    overhead: "—".into(),
                    target: "flat (nothing kept per event)".into(),
                    // Four times the events, well under twice the memory.
                    met: Some(per_task(&wasm_longer) < 2.0 * per_task(&wasm)),
                });
            }
        }
    }
    rows
}
