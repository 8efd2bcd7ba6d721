//! `cargo bench -p moat --bench cli`: the whole `moat` process, as a user
//! runs it from a shell (docs/performance.md, "The whole process"):
//!
//! 1. `moat run echo hi` from spawn to exit with a warm compile cache,
//!    median of 30: with the run store (the default) and with
//!    `--no-store`, beside starting `/bin/true` (what any process costs
//!    here);
//! 2. `moat run FLOOD 1000000 --output ndjson > /dev/null`, events per
//!    second over the whole command (median of 3): with the store and
//!    with `--no-store`; and `moat logs RUN --output ndjson > /dev/null`
//!    replaying that run from the store.
//!
//! Every command must succeed; a replay must print every event. Without
//! `--bench` (as under `cargo test --benches`) it runs once at a tiny size
//! and writes no summary.

#[path = "../common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{bench_dir, load_average, median_process_seconds, moat};

/// Sizes of a full run and of a smoke run.
struct Scale {
    /// Processes per whole-process figure.
    samples: usize,
    /// Events per flood.
    events: u64,
    /// Floods per events-per-second figure.
    floods: usize,
}

const FULL: Scale = Scale {
    samples: 30,
    events: 1_000_000,
    floods: 3,
};

const SMOKE: Scale = Scale {
    samples: 1,
    events: 1_000,
    floods: 1,
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test");
    let scale = if full { FULL } else { SMOKE };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = dir.path().join("moat.db");
    let flood = moat_testkit::components::FLOOD;

    // Warm: the compile cache (echo, flood) and the store's file.
    echo(&store, false).status().expect("moat runs");
    flood_run(&store, flood, 10, false)
        .status()
        .expect("moat runs");

    let process = median_process_seconds(scale.samples, || Command::new("true"));
    let echo_stored = median_process_seconds(scale.samples, || echo(&store, false));
    let echo_bare = median_process_seconds(scale.samples, || echo(&store, true));

    let flood_bare = median_process_seconds(scale.floods, || {
        flood_run(&store, flood, scale.events, true)
    });
    let flood_stored = median_process_seconds(scale.floods, || {
        flood_run(&store, flood, scale.events, false)
    });
    let last = last_run(&store);
    let replay = median_process_seconds(scale.floods, || logs(&store, &last));
    check_replay(&store, &last, scale.events + 1);

    let ms = |seconds: f64| seconds * 1e3;
    let rate = |seconds: f64| (scale.events + 1) as f64 / seconds;
    let mut table = format!(
        "- date: {}\n- load average before: {}\n- release moat, warm compile cache\n\n",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()),
        load_average(),
    );
    table.push_str(
        "| figure | moat | baseline | ratio | target | met? |\n|---|---|---|---|---|---|\n",
    );
    table.push_str(&format!(
        "| `moat run echo hi`, whole process, run store on (median of {n}) | {:.2} ms | `true`: {:.2} ms | ×{:.1} | ≤ 8 ms | {} |\n",
        ms(echo_stored),
        ms(process),
        echo_stored / process,
        yes(echo_stored <= 0.008),
        n = scale.samples,
    ));
    table.push_str(&format!(
        "| `moat run echo hi --no-store`, whole process (median of {n}) | {:.2} ms | `true`: {:.2} ms | ×{:.1} | — | — |\n",
        ms(echo_bare),
        ms(process),
        echo_bare / process,
        n = scale.samples,
    ));
    table.push_str(&format!(
        "| `moat run FLOOD {e} --output ndjson > /dev/null`, store on | {:.0}k events/s | `--no-store`: {:.0}k events/s | ×{:.2} time | ≥ 1,500k events/s | {} |\n",
        rate(flood_stored) / 1e3,
        rate(flood_bare) / 1e3,
        flood_stored / flood_bare,
        yes(rate(flood_stored) >= 1.5e6),
        e = scale.events,
    ));
    table.push_str(&format!(
        "| `moat logs RUN --output ndjson > /dev/null`, replay of it | {:.0}k events/s | the live run: {:.0}k events/s | ×{:.2} time | ≥ 1,500k events/s | {} |\n",
        rate(replay) / 1e3,
        rate(flood_stored) / 1e3,
        replay / flood_stored,
        yes(rate(replay) >= 1.5e6),
    ));
    println!("{table}");
    if full {
        let out = bench_dir();
        std::fs::create_dir_all(&out).expect("the bench directory");
        std::fs::write(out.join("cli.md"), &table).expect("the summary is written");
    }
}

fn yes(met: bool) -> &'static str {
    if met { "yes" } else { "**no**" }
}

/// `moat run echo hi`, its output discarded.
fn echo(store: &Path, no_store: bool) -> Command {
    let mut command = moat(store);
    command.args(["run", "echo", "hi", "--output", "ndjson"]);
    if no_store {
        command.arg("--no-store");
    }
    command.stdout(Stdio::null());
    command
}

/// `moat run FLOOD events --output ndjson > /dev/null`.
fn flood_run(store: &Path, flood: &str, events: u64, no_store: bool) -> Command {
    let mut command = moat(store);
    command
        .args(["run", flood, &events.to_string(), "--output", "ndjson"])
        .stdout(Stdio::null());
    if no_store {
        command.arg("--no-store");
    }
    command
}

/// `moat logs RUN --output ndjson > /dev/null`.
fn logs(store: &Path, run: &str) -> Command {
    let mut command = moat(store);
    command
        .args(["logs", run, "--output", "ndjson"])
        .stdout(Stdio::null());
    command
}

/// The id of the newest run in the store.
fn last_run(store: &Path) -> String {
    let out = moat(store)
        .args(["ps", "--all", "--last", "1", "--output", "json"])
        .output()
        .expect("moat ps runs");
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).expect("ps prints JSON");
    runs[0]["id"].as_str().expect("a run id").to_owned()
}

/// A replay prints every event of the run, the `done` last.
fn check_replay(store: &Path, run: &str, events: u64) {
    let out = moat(store)
        .args(["logs", run, "--output", "ndjson"])
        .output()
        .expect("moat logs runs");
    assert!(out.status.success());
    let lines: Vec<&[u8]> = out
        .stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len() as u64, events, "every event is replayed");
    let done: serde_json::Value = serde_json::from_slice(lines[lines.len() - 1]).expect("JSON");
    assert_eq!(done["type"], "done");
}
