//! `cargo bench -p moat --bench otel`: what exporting traces costs a run
//! whose collector is down (docs/performance.md, "OpenTelemetry"): the
//! whole `moat run echo hi` process with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! pointing at a port nobody listens on, beside the same command without
//! it. Measured with criterion (both sides, one group), then as the ratio
//! of medians of interleaved processes (so a machine's drift hits both
//! sides alike); and the same ratio for a run of 100,000 events
//! (`moat run FLOOD 100000`), where every event passes the run's tracer.
//! Target: at most +5 %.
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
const SAMPLES: usize = 60;

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
const FLOODS: usize = 15;

/// A table row: `samples` processes `make` builds, exporting and not,
/// interleaved; their medians and the overhead.
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
    let (without, with) = (median(without), median(with));
    let overhead = (with.as_secs_f64() / without.as_secs_f64() - 1.0) * 100.0;
    format!(
        "| {what}, whole process, collector unreachable (median of {samples}, interleaved) | {:.2} ms | {:.2} ms | {overhead:+.1} % | ≤ +5 % | {} |\n",
        with.as_secs_f64() * 1e3,
        without.as_secs_f64() * 1e3,
        if overhead <= 5.0 { "yes" } else { "**no**" },
    )
}

/// `moat run FLOOD events`, its output discarded.
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

/// `moat run echo hi`, its output discarded; exporting to `endpoint` when
/// given.
fn echo(store: &Path, endpoint: Option<&str>) -> Command {
    let mut command = base(store, endpoint);
    command.args(["run", "echo", "hi", "--output", "ndjson"]);
    command
}

/// `moat` with the benches' cache and `store`, its output discarded;
/// exporting to `endpoint` when given.
fn base(store: &Path, endpoint: Option<&str>) -> Command {
    let mut command = moat(store);
    command
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdout(Stdio::null());
    if let Some(endpoint) = endpoint {
        command.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
    }
    command
}

/// How long `command` took, spawn to exit; it must succeed.
fn run(command: &Command) -> Duration {
    let mut command = clone(command);
    let started = Instant::now();
    let status = command.status().expect("moat starts");
    let took = started.elapsed();
    assert!(status.success(), "{command:?} failed: {status}");
    took
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
    again.stdout(Stdio::null()).stderr(Stdio::null());
    again
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
