//! `cargo bench -p moat-benches --bench cli`: the whole `moat` process, as a user
//! runs it from a shell (docs/performance.md, "The whole process"):
//!
//! 1. `moat run echo hi` from spawn to exit with a warm compile cache,
//!    median of 30: with the run store (the default) and with
//!    `--no-store`, beside starting `/bin/true` (what any process costs
//!    here);
//! 2. `moat run FLOOD 1000000 --output ndjson > /dev/null`, events per
//!    second over the whole command (median of 3): with the store and
//!    with `--no-store`; and `moat logs RUN --output ndjson > /dev/null`
//!    replaying that run from the store;
//! 3. the CLI adapters' own cost: the built-in `claude-code` adapter
//!    driving a fake `claude` that replays a long recording (20,000 text
//!    deltas over 2 s at their recorded pace, then again without pauses),
//!    beside the fake CLI alone, its stdout read line by line (median of
//!    3 each): the adapter's time over the CLI's own wall time.
//!
//! Every command must succeed; a replay must print every event. Without
//! `--bench` (as under `cargo test --benches`) it runs once at a tiny size
//! and writes no summary.

#[path = "../common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use std::io::BufRead;
use std::time::Instant;

use common::{bench_dir, load_average, median_process_seconds, moat};
use moat_testkit::fake_cli::FakeCli;
use serde_json::json;

/// Sizes of a full run and of a smoke run.
struct Scale {
    /// Processes per whole-process figure.
    samples: usize,
    /// Events per flood.
    events: u64,
    /// Floods per events-per-second figure.
    floods: usize,
    /// Text deltas in the long CLI recording, and over how many ms.
    cli_deltas: u64,
    cli_ms: u64,
    /// Replays per side.
    replays: usize,
}

const FULL: Scale = Scale {
    samples: 30,
    events: 1_000_000,
    floods: 3,
    cli_deltas: 20_000,
    cli_ms: 2_000,
    replays: 3,
};

const SMOKE: Scale = Scale {
    samples: 1,
    events: 1_000,
    floods: 1,
    cli_deltas: 100,
    cli_ms: 20,
    replays: 1,
};

fn main() {
    let full = common::full_run();
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

    let paced = cli_adapter(&scale, 1.0);
    let unpaced = cli_adapter(&scale, 0.0);

    let ms = |seconds: f64| seconds * 1e3;
    let rate = |seconds: f64| (scale.events + 1) as f64 / seconds;
    let mut table = format!(
        "- date: {}\n- load average before: {}\n- the moat binary of this build (release under cargo bench), warm compile cache\n\n",
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
    let (deltas, over) = (scale.cli_deltas, scale.cli_ms);
    table.push_str(&format!(
        "| `claude-code` on a fake `claude` replaying {deltas} deltas over {over} ms | {:.1} ms | the CLI alone: {:.1} ms | +{:.1} % | ≤ +5 % | {} |\n",
        ms(paced.through_moat),
        ms(paced.alone),
        paced.overhead_percent(),
        yes(paced.overhead_percent() <= 5.0),
    ));
    table.push_str(&format!(
        "| the same {deltas} deltas without pauses | {:.0}k lines/s | the CLI alone: {:.0}k lines/s | ×{:.2} time | — | — |\n",
        unpaced.lines as f64 / unpaced.through_moat / 1e3,
        unpaced.lines as f64 / unpaced.alone / 1e3,
        unpaced.through_moat / unpaced.alone,
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

/// One CLI-adapter measurement: median seconds per side.
struct Replay {
    /// Stdout lines of the recording.
    lines: u64,
    alone: f64,
    through_moat: f64,
}

impl Replay {
    fn overhead_percent(&self) -> f64 {
        (self.through_moat / self.alone - 1.0) * 100.0
    }
}

/// The built-in `claude-code` adapter on a fake `claude` replaying a long
/// recording at `speed` (1.0: its recorded pace; 0: no pauses), beside
/// the fake alone.
fn cli_adapter(scale: &Scale, speed: f64) -> Replay {
    let fake = FakeCli::new("claude", "claude", "text", json!({}));
    let lines = long_recording(&fake.dir(), scale.cli_deltas, scale.cli_ms);
    // Point the fake at the long recording, at `speed`.
    let config_path = fake.dir().join("fake-cli.json");
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config_path).expect("the fake's config"))
            .expect("JSON");
    config["fixture"] = json!(fake.dir().join("long.jsonl"));
    config["speed"] = json!(speed);
    std::fs::write(&config_path, config.to_string()).expect("the fake's config");

    let median = |mut times: Vec<f64>| {
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    };
    let alone = median(
        (0..scale.replays)
            .map(|_| {
                let started = Instant::now();
                let mut child = Command::new(&fake.program)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("the fake CLI starts");
                let read = std::io::BufReader::new(child.stdout.take().expect("piped"))
                    .lines()
                    .count() as u64;
                assert!(child.wait().expect("it ends").success());
                assert_eq!(read, lines, "the whole recording");
                started.elapsed().as_secs_f64()
            })
            .collect(),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    // Warm: the adapter's compiled component.
    runtime.block_on(moat_testkit::fake_cli::run(
        "claude-code",
        fake.request("claude-code", "hi"),
    ));
    let through_moat = median(
        (0..scale.replays)
            .map(|_| {
                let request = fake.request("claude-code", "hi");
                let started = Instant::now();
                let events = runtime.block_on(moat_testkit::fake_cli::run("claude-code", request));
                let took = started.elapsed().as_secs_f64();
                let deltas = events
                    .iter()
                    .filter(|e| matches!(e.payload, moat_engine::EventPayload::TextDelta(_)))
                    .count() as u64;
                assert_eq!(deltas, scale.cli_deltas, "every delta came through");
                assert_eq!(
                    moat_testkit::single_done(&events).status,
                    moat_engine::DoneStatus::Success
                );
                took
            })
            .collect(),
    );
    Replay {
        lines,
        alone,
        through_moat,
    }
}

/// Writes `long.jsonl` (and its meta) into `dir`: the recorded `claude`
/// text reply with its one delta line repeated `deltas` times, spread over
/// `over_ms`. Returns its number of stdout lines.
fn long_recording(dir: &Path, deltas: u64, over_ms: u64) -> u64 {
    let text = moat_testkit::cli_fixture("claude", "text");
    let recorded: Vec<serde_json::Value> = std::fs::read_to_string(&text)
        .expect("the recording")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a recorded line"))
        .collect();
    let is_delta = |line: &serde_json::Value| {
        line["stdout"]
            .as_str()
            .is_some_and(|out| out.contains("\"content_block_delta\""))
    };
    let first = recorded.iter().position(is_delta).expect("a delta line");
    let after = recorded.iter().rposition(is_delta).expect("a delta line") + 1;
    let start = recorded[first]["ms"].as_u64().expect("ms");
    let mut out = String::new();
    for line in &recorded[..first] {
        out.push_str(&format!("{line}\n"));
    }
    for i in 0..deltas {
        let mut line = recorded[first].clone();
        line["ms"] = json!(start + i * over_ms / deltas.max(1));
        out.push_str(&format!("{line}\n"));
    }
    for line in &recorded[after..] {
        let mut line = line.clone();
        line["ms"] = json!(line["ms"].as_u64().expect("ms") + over_ms);
        out.push_str(&format!("{line}\n"));
    }
    std::fs::write(dir.join("long.jsonl"), &out).expect("the long recording");
    std::fs::copy(
        moat_cli_fixture::meta_path(&text),
        moat_cli_fixture::meta_path(&dir.join("long.jsonl")),
    )
    .expect("its meta");
    out.lines()
        .filter(|line| line.contains("\"stdout\""))
        .count() as u64
}
