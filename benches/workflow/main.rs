//! Workflows at scale: `cargo bench -p moat-benches --bench workflow`.
//!
//! The real `moat workflow run` on a fan-out/fan-in DAG of `echo` tasks —
//! one root, every other task depending on it, one sink depending on all
//! of them — recording into a store, with the state written after every
//! round. Each size runs in a fresh project; the bench fails unless every
//! task completed and the sink saw every handover.
//!
//! Figures, each beside its baseline in the same run:
//!
//! 1. Time per task at 1,000 tasks, beside one whole `moat run echo hi`
//!    (the median of 10 processes): what a task costs once the process is
//!    up, next to what one run costs from nothing.
//! 2. Memory: the process's resident memory sampled as tasks complete (at
//!    10 %, 50 % and 90 % of them) and its peak, at 1,000 tasks beside 100:
//!    a flat profile keeps the 1,000-task peak near the 100-task one.
//!
//! The table goes to stdout and to `target/moat-bench/workflow.md`.
//! Without `--bench` (as under `cargo test --benches`) it runs once at a
//! tiny size and writes nothing.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[path = "../common/mod.rs"]
mod common;

use common::{bench_dir, load_average, moat};
use serde_json::Value;

/// How many tasks run at once.
const PARALLEL: &str = "8";

/// `VmRSS` and `VmHWM` of a process, in KiB.
fn memory(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// What one workflow run measured.
struct Measured {
    tasks: usize,
    seconds: f64,
    /// Resident KiB at 10 %, 50 % and 90 % of tasks completed.
    samples: [u64; 3],
    peak_kib: u64,
}

fn run_workflow(tasks: usize) -> Measured {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let file = dir.path().join("fan.toml");
    std::fs::write(&file, moat_testkit::workflows::fan_out_fan_in(tasks)).unwrap();
    let store = dir.path().join("moat.db");
    let started = Instant::now();
    let mut child = moat(&store)
        .args(["workflow", "run"])
        .arg(&file)
        .args(["--output", "ndjson", "--max-parallel", PARALLEL])
        .stdout(Stdio::piped())
        .spawn()
        .expect("moat runs");
    let pid = child.id();
    // The peak, read until the process is gone: the last read is the
    // nearest to its end.
    let peak = Arc::new(AtomicU64::new(0));
    let watcher = {
        let peak = peak.clone();
        std::thread::spawn(move || {
            while let Some((_, hwm)) = memory(pid) {
                peak.fetch_max(hwm, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let milestones = [(tasks / 10).max(1), tasks / 2, tasks * 9 / 10];
    let mut samples = [0u64; 3];
    let mut completed = 0;
    let mut done = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let event: Value = serde_json::from_str(&line.unwrap()).expect("an event");
        match event["type"].as_str() {
            Some("task_completed") => {
                completed += 1;
                if let Some(at) = milestones.iter().position(|m| *m == completed) {
                    samples[at] = memory(pid).map_or(0, |(rss, _)| rss);
                }
            }
            Some("workflow_done") => done = Some(event),
            _ => {}
        }
    }
    assert!(child.wait().unwrap().success(), "the workflow failed");
    let seconds = started.elapsed().as_secs_f64();
    watcher.join().unwrap();
    let done = done.expect("a workflow_done");
    assert_eq!(done["completed"], tasks, "every task completed");
    // The sink saw every handover: its answer (echo's: its prompt) is in
    // the state as the handover's source, so check its recorded prompt.
    let state: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join(".moat/workflows/fan/state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["status"], "completed");
    let output = moat(&store)
        .args(["ps", "--all", "--output", "json"])
        .output()
        .unwrap();
    let runs: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let sink = runs
        .iter()
        .filter_map(|r| r["prompt"].as_str())
        .find(|p| p.contains("gather"))
        .expect("the sink's run");
    assert_eq!(
        sink.matches("\n## t").count(),
        tasks - 2,
        "every handover reached the sink"
    );
    Measured {
        tasks,
        seconds,
        samples,
        peak_kib: peak.load(Ordering::Relaxed),
    }
}

/// The median wall time of `moat run echo hi`, whole processes.
fn one_run(store: &Path, times: usize) -> f64 {
    let mut seconds: Vec<f64> = (0..times)
        .map(|_| {
            let started = Instant::now();
            let status = moat(store)
                .args(["run", "echo", "hi", "--output", "ndjson"])
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
            started.elapsed().as_secs_f64()
        })
        .collect();
    seconds.sort_by(f64::total_cmp);
    seconds[seconds.len() / 2]
}

fn main() {
    let full = common::full_run();
    let (small, large, runs) = if full { (100, 1_000, 10) } else { (5, 20, 1) };
    let dir = tempfile::tempdir().expect("a scratch directory");
    let store = dir.path().join("moat.db");
    // Warm the compile cache.
    one_run(&store, 1);
    let baseline = one_run(&store, runs);
    let small = run_workflow(small);
    let large = run_workflow(large);

    let ms = |seconds: f64| format!("{:.2} ms", seconds * 1e3);
    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    let mut table = format!(
        "Load average: {}\n\n| figure | workflow | baseline | ratio |\n|---|---|---|---|\n",
        load_average()
    );
    table.push_str(&format!(
        "| time per task, {} tasks (whole workflow {:.2} s) | {} | one `moat run echo hi`: {} | {:.2}× |\n",
        large.tasks,
        large.seconds,
        ms(large.seconds / large.tasks as f64),
        ms(baseline),
        large.seconds / large.tasks as f64 / baseline
    ));
    table.push_str(&format!(
        "| peak memory, {} tasks | {} | {} tasks: {} | {:.2}× |\n",
        large.tasks,
        mib(large.peak_kib),
        small.tasks,
        mib(small.peak_kib),
        large.peak_kib as f64 / small.peak_kib.max(1) as f64
    ));
    for (at, label) in ["10 %", "50 %", "90 %"].iter().enumerate() {
        table.push_str(&format!(
            "| resident memory at {label} of tasks done | {} | {} | {:.2}× |\n",
            mib(large.samples[at]),
            mib(small.samples[at]),
            large.samples[at] as f64 / small.samples[at].max(1) as f64
        ));
    }
    println!("{table}");
    if full {
        let out = bench_dir();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("workflow.md"), &table).unwrap();
    }
}
