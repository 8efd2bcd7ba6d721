//! Adapters in three languages: `cargo bench -p moat-benches --bench sdks`.
//!
//! The echo adapter written in Rust (the built-in), TypeScript
//! (adapters/typescript/echo, componentize-js) and Python
//! (adapters/python/echo, componentize-py), each built from source first
//! and run by the real `moat` binary, in the same bench run:
//!
//! - the component's size;
//! - its first run, compiling it (a cache of the bench's own, emptied);
//! - a run with the compiled component cached: the median whole `moat run`
//!   of a one-word prompt (process, load, start, one event, done);
//! - the cost per event: a 20,000-word prompt (20,001 deltas and the rest)
//!   against the one-word run, divided by the extra events;
//! - in a warm `moat serve` (the adapter loaded by an earlier run), the
//!   time from a `run` request to its first event, the client subscribing
//!   as soon as the run's id comes back: p50 and p99.
//!
//! The table goes to stdout and to `target/moat-bench/sdks.md`, and the
//! figures to docs/adapter-authoring.md. Without `--bench` (as under
//! `cargo test --benches`) it only checks that the three run.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

#[path = "../common/mod.rs"]
mod common;

use common::{bench_dir, load_average};

/// Words in the long prompt.
const WORDS: usize = 20_000;

/// One language's echo.
struct Echo {
    language: &'static str,
    /// What `moat run` is given: a built-in's name or a path.
    adapter: String,
    /// The component's file, for its size.
    file: Option<PathBuf>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn must(command: &mut Command, what: &str) {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Builds the TypeScript and Python echoes from source.
fn build() -> Vec<Echo> {
    let root = root();
    let typescript = root.join("adapters/typescript");
    must(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefer-offline"])
            .current_dir(&typescript),
        "npm ci in adapters/typescript",
    );
    must(
        Command::new("npm")
            .args(["run", "build", "--workspace", "echo"])
            .current_dir(&typescript),
        "building the TypeScript echo",
    );
    let python = bench_dir().join("sdks/echo-py.wasm");
    must(
        Command::new("bash")
            .arg(root.join("adapters/python/echo/build.sh"))
            .arg(&python),
        "building the Python echo",
    );
    let ts = typescript.join("echo/dist/echo.wasm");
    vec![
        Echo {
            language: "Rust",
            adapter: "echo".into(),
            file: None,
        },
        Echo {
            language: "TypeScript",
            adapter: ts.display().to_string(),
            file: Some(ts),
        },
        Echo {
            language: "Python",
            adapter: python.display().to_string(),
            file: Some(python),
        },
    ]
}

/// Seconds of one whole `moat run ADAPTER PROMPT`, with the cache `cache`.
fn run(adapter: &str, prompt: &str, cache: &Path) -> f64 {
    let started = Instant::now();
    let status = Command::new(common::moat_bin())
        .args(["run", adapter, "-", "--output", "ndjson", "--no-store"])
        .env("MOAT_CACHE_DIR", cache)
        .env_remove("MOAT_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(prompt.as_bytes())?;
            child.wait()
        })
        .expect("moat runs");
    assert!(status.success(), "moat run {adapter} failed");
    started.elapsed().as_secs_f64()
}

/// Milliseconds from each `run` request of `adapter` to the run's first
/// event, through one `moat serve` on stdio with the cache `cache`, after a
/// first run that loads the adapter: `samples` runs one after another.
fn first_events_in_a_warm_server(adapter: &str, cache: &Path, samples: usize) -> Vec<f64> {
    let store = tempfile::tempdir().expect("a store of its own");
    let mut server = Command::new(common::moat_bin())
        .arg("serve")
        .env("MOAT_CACHE_DIR", cache)
        .env("MOAT_STORE", store.path().join("moat.db"))
        .env_remove("MOAT_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("moat serve starts");
    let mut input = server.stdin.take().expect("stdin");
    let mut lines = BufReader::new(server.stdout.take().expect("stdout")).lines();
    let mut message = || -> serde_json::Value {
        let line = lines.next().expect("the server answers").expect("a line");
        serde_json::from_str(&line).expect("JSON")
    };
    let mut firsts = Vec::with_capacity(samples);
    for n in 0..=samples {
        let started = Instant::now();
        let request =
            serde_json::json!({"id": n * 2, "op": "run", "adapter": adapter, "prompt": "hi"});
        writeln!(input, "{request}").expect("the server reads");
        let run = loop {
            let answer = message();
            if answer["id"] == n * 2 {
                break answer["result"]["run"].as_str().expect("a run").to_owned();
            }
        };
        let subscribe = serde_json::json!({"id": n * 2 + 1, "op": "subscribe", "runs": [run]});
        writeln!(input, "{subscribe}").expect("the server reads");
        let mut first = None;
        loop {
            let event = message();
            if event["event"] != "run_event" {
                continue;
            }
            first.get_or_insert_with(|| started.elapsed().as_secs_f64() * 1e3);
            if event["data"]["type"] == "done" {
                break;
            }
        }
        // The first run loads the adapter: not a warm server's.
        if n > 0 {
            firsts.extend(first);
        }
    }
    drop(input);
    let _ = server.wait();
    firsts
}

/// The `q` quantile (0..=1) of `samples`.
fn quantile(samples: &mut [f64], q: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[((samples.len() - 1) as f64 * q).round() as usize]
}

fn median(mut seconds: Vec<f64>) -> f64 {
    seconds.sort_by(f64::total_cmp);
    seconds[seconds.len() / 2]
}

fn main() {
    let full = common::full_run();
    let (runs, words) = if full { (7, WORDS) } else { (1, 100) };
    let echoes = build();
    let long: String = (0..words).map(|i| format!("w{i} ")).collect();
    let mut table = format!(
        "Load average: {}\n\n| echo in | component | first run (compiling) | cached run, one word | per event | first event in a warm `moat serve`, p50 / p99 |\n|---|---|---|---|---|---|\n",
        load_average()
    );
    let mut rust_event = None;
    for echo in &echoes {
        let cache = tempfile::tempdir().expect("a cache of its own");
        let size = match &echo.file {
            Some(file) => std::fs::metadata(file).expect("built").len(),
            None => moat_builtins::component("echo").expect("built in").len() as u64,
        };
        let first = run(&echo.adapter, "hi", cache.path());
        let short = median(
            (0..runs)
                .map(|_| run(&echo.adapter, "hi", cache.path()))
                .collect(),
        );
        let long_run = median(
            (0..runs.min(3))
                .map(|_| run(&echo.adapter, &long, cache.path()))
                .collect(),
        );
        let per_event = (long_run - short).max(0.0) / words as f64;
        let mut firsts = first_events_in_a_warm_server(&echo.adapter, cache.path(), runs * 7);
        let ratio = match rust_event {
            None => {
                rust_event = Some(per_event);
                String::new()
            }
            Some(rust) => format!(" ({:.1}× Rust)", per_event / rust),
        };
        table.push_str(&format!(
            "| {} | {:.1} MiB | {:.2} s | {:.1} ms | {:.2} µs{ratio} | {:.2} / {:.2} ms |\n",
            echo.language,
            size as f64 / (1024.0 * 1024.0),
            first,
            short * 1e3,
            per_event * 1e6,
            quantile(&mut firsts, 0.5),
            quantile(&mut firsts, 0.99),
        ));
    }
    println!("{table}");
    if full {
        let out = bench_dir();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("sdks.md"), &table).unwrap();
    }
}
