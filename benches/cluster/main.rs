//! The cluster backend beside the local one: `cargo bench -p moat-benches --bench
//! cluster`.
//!
//! A real `nats-server` (JetStream, loopback, temporary storage) and real
//! `moat worker` processes of the release binary; every figure beside its
//! local baseline in the same run:
//!
//! 1. Per event: `moat run --nats URL FLOOD 100000 --output ndjson` (one
//!    worker executes it; the submitter follows it) beside `moat run FLOOD
//!    100000 --output ndjson` here, with the store, every line read.
//! 2. Run start: a whole `moat run --nats URL echo hi` beside a whole
//!    `moat run echo hi` (median of 20 processes each); and through the
//!    library, from submitting an echo run to holding its `done` (median
//!    of 50, one connection), beside the local process figure.
//! 3. Scaling, with 1, 2 and 3 workers (`--max-runs 4` each), submitted
//!    at once and followed to their `done`:
//!    - CPU-bound: 120 runs of `flood 2000`, events per second. This
//!      machine has two cores, shared by the workers, the server and the
//!      bench: more workers add no CPU here.
//!    - waiting, as agent runs do (on a model, a CLI): 24 runs of
//!      `sleepy` (1,000 events, 1 ms apart), runs per second — what more
//!      workers buy.
//!
//! The bench fails unless every run ends in `done` success with all its
//! events. The table goes to stdout and `target/moat-bench/cluster.md`.
//! Without `--bench` it runs once at a tiny size and writes nothing.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Instant;

#[path = "../common/mod.rs"]
mod common;

use common::{bench_dir, load_average, median_process_seconds, moat};
use futures::StreamExt;
use moat_cluster::{Cluster, ComponentRef, Job, Settings};
use moat_engine::DoneStatus;
use moat_testkit::components::{FLOOD, SLEEPY};

/// A `moat worker`, killed when dropped.
struct Worker(Child);

impl Worker {
    fn start(store: &Path, url: &str) -> Self {
        let mut child = moat(store)
            .args(["worker", "--nats", url, "--max-runs", "4"])
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("moat worker starts");
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        loop {
            let line = lines
                .next()
                .expect("the worker says it takes runs")
                .unwrap();
            if line.contains("taking runs") {
                break;
            }
        }
        std::thread::spawn(move || for _ in lines {});
        Self(child)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Seconds per event of one flood run, every line read.
fn per_event(store: &Path, nats: Option<&str>, events: u64) -> f64 {
    let started = Instant::now();
    let mut command = moat(store);
    command.arg("run");
    if let Some(url) = nats {
        command.args(["--nats", url]);
    }
    let mut child = command
        .args([FLOOD, &events.to_string(), "--output", "ndjson"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::with_capacity(1 << 16, child.stdout.take().unwrap())
        .lines()
        .count() as u64;
    assert!(child.wait().unwrap().success());
    assert_eq!(lines, events + 1, "every delta and the done");
    started.elapsed().as_secs_f64() / lines as f64
}

/// Median seconds of a whole `moat run [--nats URL] echo hi`.
fn whole_run(store: &Path, nats: Option<&str>, samples: usize) -> f64 {
    median_process_seconds(samples, || {
        let mut command = moat(store);
        command.arg("run");
        if let Some(url) = nats {
            command.args(["--nats", url]);
        }
        command
            .args(["echo", "hi", "--output", "ndjson"])
            .stdout(Stdio::null());
        command
    })
}

fn job(component: ComponentRef, adapter: &str, prompt: &str) -> Job {
    Job::new(component, adapter, prompt)
}

/// Follows run `id` to its done: (events, success); fails on an error
/// event, saying it.
async fn follow(cluster: &Cluster, id: &str) -> (u64, bool) {
    let mut events = 0;
    let mut success = false;
    let mut stream = std::pin::pin!(cluster.follow(id, 0).await.unwrap());
    while let Some(event) = stream.next().await {
        let event = event.unwrap().event;
        events += 1;
        if let moat_engine::EventPayload::Error(error) = &event.payload {
            panic!("run {id}: {error:?}");
        }
        if let Some(done) = event.as_done() {
            success = done.status == DoneStatus::Success;
        }
    }
    if !success {
        let record = cluster.get(id).await.unwrap();
        panic!("run {id} did not complete: {record:?}");
    }
    (events, success)
}

/// Median seconds from submitting an echo run to holding its done.
async fn submit_to_done(cluster: &Cluster, samples: usize) -> f64 {
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        let run = job(
            ComponentRef::Builtin {
                name: "echo".into(),
            },
            "echo",
            "hi",
        );
        let id = run.id.clone();
        cluster.submit(run).await.unwrap();
        let (_, success) = follow(cluster, &id).await;
        assert!(success);
        times.push(started.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Events per second over `runs` runs of `job` with `events` events each
/// (and their done), submitted at once and followed concurrently; and the
/// seconds the batch took.
async fn batch(cluster: &Cluster, flood: &Job, runs: usize, events: u64) -> (f64, f64) {
    let started = Instant::now();
    let mut ids = Vec::with_capacity(runs);
    for _ in 0..runs {
        let run = flood.again();
        ids.push(run.id.clone());
        cluster.submit(run).await.unwrap();
    }
    let followers = ids.into_iter().map(|id| {
        let cluster = cluster.clone();
        tokio::spawn(async move { follow(&cluster, &id).await })
    });
    let mut total = 0;
    for follower in futures::future::join_all(followers).await {
        let (seen, success) = follower.unwrap();
        assert!(success, "every run completes");
        assert_eq!(seen, events + 1, "every event, once");
        total += seen;
    }
    let took = started.elapsed().as_secs_f64();
    (total as f64 / took, took)
}

fn main() {
    let full = common::full_run();
    if !moat_testkit::nats::available() {
        return;
    }
    let (events, samples, library_samples, runs, per_run, waiting_runs, worker_counts) = if full {
        (100_000u64, 20, 50, 120, 2_000u64, 24, vec![1, 2, 3])
    } else {
        (100, 1, 2, 4, 50, 2, vec![1])
    };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("moat.db");
    let server = moat_testkit::nats::server(&[]);
    let url = server.url();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cluster = runtime.block_on(async {
        Cluster::connect(&Settings::new(&url, None).unwrap(), "moat bench")
            .await
            .unwrap()
    });

    // Warm: the compile caches of this machine and of the worker.
    let first = Worker::start(&store, &url);
    per_event(&store, None, 10);
    per_event(&store, Some(&url), 10);

    let local_event = per_event(&store, None, events);
    let cluster_event = per_event(&store, Some(&url), events);
    let local_run = whole_run(&store, None, samples);
    let cluster_run = whole_run(&store, Some(&url), samples);
    let library_run = runtime.block_on(submit_to_done(&cluster, library_samples));

    let flood = runtime.block_on(async {
        let bytes = std::fs::read(FLOOD).unwrap();
        let sha256 = cluster.put_component(&bytes).await.unwrap();
        job(
            ComponentRef::Stored { sha256 },
            "flood",
            &per_run.to_string(),
        )
    });
    let sleepy = runtime.block_on(async {
        let bytes = std::fs::read(SLEEPY).unwrap();
        let sha256 = cluster.put_component(&bytes).await.unwrap();
        job(ComponentRef::Stored { sha256 }, "sleepy", "1")
    });
    let mut workers = vec![first];
    // Warm: the worker's copy of the component, the followers' first
    // consumers.
    runtime.block_on(batch(&cluster, &flood, 8, per_run));
    runtime.block_on(batch(&cluster, &sleepy, 1, 1_000));
    let mut scaling = Vec::new();
    for count in worker_counts {
        while workers.len() < count {
            workers.push(Worker::start(&store, &url));
        }
        let (rate, _) = runtime.block_on(batch(&cluster, &flood, runs, per_run));
        let (_, took) = runtime.block_on(batch(&cluster, &sleepy, waiting_runs, 1_000));
        scaling.push((count, rate, waiting_runs as f64 / took));
    }
    drop(workers);

    let us = |seconds: f64| seconds * 1e6;
    let ms = |seconds: f64| seconds * 1e3;
    let mut table = String::new();
    table.push_str(&format!(
        "- date: {}\n- load average before: {}\n- nats-server {}, one node, loopback; release moat\n\n",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()),
        load_average(),
        nats_version(),
    ));
    table.push_str("| figure | cluster | local | ratio |\n|---|---|---|---|\n");
    table.push_str(&format!(
        "| per event, flood {events} (whole command) | {:.2} µs ({:.0}k events/s) | {:.2} µs ({:.0}k events/s) | ×{:.2} |\n",
        us(cluster_event),
        1e-3 / cluster_event,
        us(local_event),
        1e-3 / local_event,
        cluster_event / local_event
    ));
    table.push_str(&format!(
        "| `moat run echo hi`, whole process (median of {samples}) | {:.1} ms | {:.1} ms | ×{:.2} |\n",
        ms(cluster_run),
        ms(local_run),
        cluster_run / local_run
    ));
    table.push_str(&format!(
        "| submit → done of an echo run, library (median of {library_samples}) | {:.2} ms | {:.1} ms (whole local process) | ×{:.2} |\n",
        ms(library_run),
        ms(local_run),
        library_run / local_run
    ));
    let (one, one_waiting) = scaling
        .first()
        .map_or((1.0, 1.0), |(_, rate, waiting)| (*rate, *waiting));
    for (count, rate, _) in &scaling {
        table.push_str(&format!(
            "| {runs} × flood {per_run} at once (CPU-bound), {count} worker(s) | {:.0}k events/s | — | ×{:.2} of 1 worker |\n",
            rate / 1e3,
            rate / one
        ));
    }
    for (count, _, waiting) in &scaling {
        table.push_str(&format!(
            "| {waiting_runs} × sleepy (1,000 events 1 ms apart) at once, {count} worker(s) | {waiting:.2} runs/s | — | ×{:.2} of 1 worker |\n",
            waiting / one_waiting
        ));
    }
    println!("{table}");
    if full {
        let out = bench_dir();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("cluster.md"), &table).unwrap();
    }
}

fn nats_version() -> String {
    std::process::Command::new("nats-server")
        .arg("--version")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default()
}
