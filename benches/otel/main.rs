//! `cargo bench -p moat-benches --bench otel`: what exporting traces costs a run
//! whose collector is down (docs/performance.md, "OpenTelemetry"): the
//! whole `moat run echo hi` process with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! pointing at a port nobody listens on, beside the same command without
//! it. Measured with criterion (both sides, one group), then as the ratio
//! of medians of interleaved processes (so a machine's drift hits both
//! sides alike); and the same ratio for a run of 100,000 events
//! (`moat run FLOOD 100000`), where every event passes the run's tracer.
//! Target: at most +5 % for the run (spawn to its `done` on stdout); the
//! whole process, exit and the export's flush included, is reported.
//!
//! Every command must succeed. Without `--bench` (as under `cargo test
//! --benches`) criterion runs each routine once and no summary is written.

#[path = "../common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{bench_dir, load_average, moat};
use criterion::Criterion;

/// Processes per side for the ratio.
const SAMPLES: usize = 101;

fn main() {
    let full = common::full_run();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = dir.path().join("moat.db");
    // A port nobody listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a local port");
    let endpoint = format!("http://{closed}");
    // Warm: the compile cache and the store's file.
    run(&echo(&store, None));

    let mut criterion = Criterion::default().configure_from_args();
    {
        let mut group = criterion.benchmark_group("otel");
        group.sample_size(if full { 30 } else { 10 });
        group.bench_function("moat run echo hi", |b| {
            b.iter(|| run(&echo(&store, None)));
        });
        group.bench_function("moat run echo hi, collector unreachable", |b| {
            b.iter(|| run(&echo(&store, Some(&endpoint))));
        });
        group.finish();
    }
    criterion.final_summary();

    let samples = if full { SAMPLES } else { 1 };
    let echo_row = row(
        "`moat run echo hi`",
        samples,
        |endpoint| echo(&store, endpoint),
        &endpoint,
    );
    let events = if full { FLOOD_EVENTS } else { 1_000 };
    let flood_row = row(
        &format!("`moat run FLOOD {events}`"),
        if full { FLOODS } else { 1 },
        |endpoint| flood(&store, events, endpoint),
        &endpoint,
    );
    let table = format!(
        "- date: {}\n- load average before: {}\n- the moat binary of this build (release under cargo bench), warm compile cache\n\n\
         | figure | with OTLP export | without | overhead | target | met? |\n|---|---|---|---|---|---|\n{echo_row}{flood_row}",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()),
        load_average(),
    );
    println!("{table}");
    if full {
        let out = bench_dir();
        std::fs::create_dir_all(&out).expect("the bench directory");
        std::fs::write(out.join("otel.md"), &table).expect("the summary is written");
    }
}

/// Events per flood.
const FLOOD_EVENTS: u64 = 100_000;

/// Floods per side.
const FLOODS: usize = 31;

/// Two table rows: `samples` processes `make` builds, exporting and not,
/// interleaved; the medians and the overhead of the run (spawn to its
/// `done` on stdout: what the user waits for) and of the whole process
/// (its exit too, after the export's flush).
fn row(
    what: &str,
    samples: usize,
    make: impl Fn(Option<&str>) -> Command,
    endpoint: &str,
) -> String {
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        without.push(run(&make(None)));
        with.push(run(&make(Some(endpoint))));
    }
    let line = |part: &str, target: &str, pick: fn(&Timed) -> Duration| {
        let without = median(without.iter().map(pick).collect());
        let with = median(with.iter().map(pick).collect());
        let overhead = (with.as_secs_f64() / without.as_secs_f64() - 1.0) * 100.0;
        let met = match target {
            "≤ +5 %" if overhead <= 5.0 => "yes",
            "≤ +5 %" => "**no**",
            _ => "",
        };
        format!(
            "| {what}, {part}, collector unreachable (median of {samples}, interleaved) | {:.2} ms | {:.2} ms | {overhead:+.1} % | {target} | {met} |\n",
            with.as_secs_f64() * 1e3,
            without.as_secs_f64() * 1e3,
        )
    };
    line("the run: spawn to its `done` on stdout", "≤ +5 %", |t| {
        t.to_done
    }) + &line("the whole process: exit included", "reported", |t| t.whole)
}

/// `moat run FLOOD events`, in NDJSON.
fn flood(store: &Path, events: u64, endpoint: Option<&str>) -> Command {
    let mut command = base(store, endpoint);
    command.args([
        "run",
        moat_testkit::components::FLOOD,
        &events.to_string(),
        "--output",
        "ndjson",
    ]);
    command
}

/// `moat run echo hi`, in NDJSON; exporting to `endpoint` when given.
fn echo(store: &Path, endpoint: Option<&str>) -> Command {
    let mut command = base(store, endpoint);
    command.args(["run", "echo", "hi", "--output", "ndjson"]);
    command
}

/// `moat` with the benches' cache and `store`; exporting to `endpoint`
/// when given.
fn base(store: &Path, endpoint: Option<&str>) -> Command {
    let mut command = moat(store);
    command
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    if let Some(endpoint) = endpoint {
        command.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
    }
    command
}

/// How long one process took.
struct Timed {
    /// Spawn to the run's `done` line on its stdout.
    to_done: Duration,
    /// Spawn to exit.
    whole: Duration,
}

/// Times `command` (its stdout read as it comes); it must succeed.
fn run(command: &Command) -> Timed {
    use std::io::{BufRead, BufReader};
    let mut command = clone(command);
    let started = Instant::now();
    let mut child = command.spawn().expect("moat starts");
    let stdout = child.stdout.take().expect("piped");
    let mut to_done = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("moat's output");
        if to_done.is_none() && line.starts_with("{\"type\":\"done\"") {
            to_done = Some(started.elapsed());
        }
    }
    let status = child.wait().expect("moat ends");
    let whole = started.elapsed();
    assert!(status.success(), "{command:?} failed: {status}");
    Timed {
        to_done: to_done.expect("the run's done is printed"),
        whole,
    }
}

/// A command built again from `command`'s program, arguments and
/// environment (a `Command` is not `Clone`).
fn clone(command: &Command) -> Command {
    let mut again = Command::new(command.get_program());
    again.args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => again.env(key, value),
            None => again.env_remove(key),
        };
    }
    again.stdout(Stdio::piped()).stderr(Stdio::null());
    again
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
