//! Figure 4: how many sessions can be live at once and how much host
//! memory each holds, measured with a plain loop and the process RSS.
//!
//! Each side runs in a fresh child process (this same binary, told what to
//! do by an environment variable): in one process, sessions of the second
//! side would reuse heap the first side freed, and a limit hit by one side
//! (pool slots, memory mappings) would not spoil the rest of the bench.

use std::io::Read as _;
use std::time::Instant;

use moat_engine::{EventPayload, run_agent};
use moat_testkit::native::NativeEcho;
use serde::{Deserialize, Serialize};

use super::fixtures::{self, Subject};
use super::report::{self, Row};

/// Set in a child: "wasm:N" or "native:N".
const CHILD_ENV: &str = "MOAT_BENCH_SESSIONS_CHILD";

/// Figure 4's target per session (issue 17; the first round's was 100 KiB).
const TARGET_KIB: f64 = 48.0;

/// What a child process reports, as one JSON line on stdout.
#[derive(Debug, Serialize, Deserialize)]
struct Report {
    wanted: usize,
    reached: usize,
    rss_before_kib: u64,
    rss_after_kib: u64,
    /// Memory mappings of the process with every session live.
    maps: usize,
    seconds: f64,
    /// Why the child stopped short of `wanted`.
    error: Option<String>,
}

impl Report {
    fn kib_per_session(&self) -> f64 {
        let grown = self.rss_after_kib.saturating_sub(self.rss_before_kib);
        grown as f64 / self.reached.max(1) as f64
    }
}

/// The side a child measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Wasm,
    Native,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Wasm => "wasm",
            Side::Native => "native",
        }
    }
}

/// The work this process was started for, if it is a figure-4 child.
pub fn child_request() -> Option<(Side, usize)> {
    let request = std::env::var(CHILD_ENV).ok()?;
    let (side, sessions) = request.split_once(':')?;
    let side = match side {
        "wasm" => Side::Wasm,
        "native" => Side::Native,
        _ => return None,
    };
    Some((side, sessions.parse().ok()?))
}

/// A child's whole life: hold the sessions, print the report.
pub fn child_main(side: Side, sessions: usize) {
    let rt = fixtures::runtime();
    let report = rt.block_on(hold_sessions(side, sessions));
    println!(
        "{}",
        serde_json::to_string(&report).expect("a report serializes")
    );
}

/// Starts `wanted` echo runs, pulls the first event of each and keeps them
/// all live, then reads how far RSS grew.
async fn hold_sessions(side: Side, wanted: usize) -> Report {
    // The sandbox must outlive the sessions; the pool is sized to exactly
    // the sessions asked for, as a host configured for that load would be.
    let sandbox;
    let subject = match side {
        Side::Wasm => {
            let pool = u32::try_from(wanted).expect("a pool size fits in u32");
            sandbox = fixtures::sandbox(pool);
            Subject::new(fixtures::load_echo(&sandbox).await)
        }
        Side::Native => Subject::new(NativeEcho::named("native-echo")),
    };
    let mut runs = Vec::with_capacity(wanted);
    // One session opened and dropped before the baseline, so one-time
    // costs (lazy statics, the first touch of shared code) are not
    // counted per session. Dropping it frees its pool slot at once.
    let _ = open(&subject).await;

    let rss_before_kib = fixtures::rss_kib("VmRSS");
    let started = Instant::now();
    let mut error = None;
    while runs.len() < wanted {
        match open(&subject).await {
            Ok(run) => runs.push(run),
            Err(message) => {
                error = Some(message);
                break;
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let report = Report {
        wanted,
        reached: runs.len(),
        rss_before_kib,
        rss_after_kib: fixtures::rss_kib("VmRSS"),
        maps: map_count(),
        seconds,
        error,
    };
    drop(runs);
    report
}

/// A live echo run that has delivered its first event, or why it could not
/// start.
async fn open(subject: &Subject) -> Result<moat_engine::AgentRun, String> {
    let mut run = run_agent(&subject.registry, subject.request("hello world"))
        .map_err(|error| error.to_string())?;
    match run.next().await.map(|event| event.payload) {
        Some(EventPayload::Init(_)) => Ok(run),
        Some(EventPayload::Error(error)) => Err(error.message),
        other => Err(format!("expected init first, got {other:?}")),
    }
}

/// Memory mappings of this process (the kernel caps them at
/// vm.max_map_count). Counted through a fixed buffer: near the cap, a
/// growing one could not be mapped.
fn map_count() -> usize {
    let Ok(mut maps) = std::fs::File::open("/proc/self/maps") else {
        return 0;
    };
    let mut buffer = [0u8; 16 * 1024];
    let mut lines = 0;
    while let Ok(read @ 1..) = maps.read(&mut buffer) {
        lines += buffer[..read].iter().filter(|&&byte| byte == b'\n').count();
    }
    lines
}

/// Figure 4 for both sides, each in its own child process; the notes
/// record the limits a side ran into.
pub fn figure(sessions: usize, notes: &mut Vec<String>) -> Vec<Row> {
    let child = |side: Side| {
        fixtures::run_child::<Report>(CHILD_ENV, &format!("{}:{sessions}", side.name()))
    };
    let wasm = child(Side::Wasm);
    let native = child(Side::Native);
    for (side, report) in [(Side::Wasm, &wasm), (Side::Native, &native)] {
        match report {
            Ok(report) => {
                notes.push(format!(
                    "{} sessions: {} live in {:.2} s, RSS {} → {} KiB, {} memory mappings (vm.max_map_count {})",
                    side.name(),
                    report.reached,
                    report.seconds,
                    report.rss_before_kib,
                    report.rss_after_kib,
                    report.maps,
                    max_map_count(),
                ));
                if let Some(error) = &report.error {
                    notes.push(format!(
                        "{} sessions stopped at {} of {}: {error}",
                        side.name(),
                        report.reached,
                        report.wanted
                    ));
                }
            }
            Err(error) => notes.push(format!("{} sessions: {error}", side.name())),
        }
    }

    let reached_figure = "Live sessions held (echo, after first event)";
    let memory_figure = "Host memory per live session (RSS)";
    let memory_target = "≤ 48 KiB";
    let (Ok(wasm), Ok(native)) = (wasm, native) else {
        return vec![
            Row::not_measured(reached_figure, "10,000", "child failed, see notes"),
            Row::not_measured(memory_figure, memory_target, "child failed, see notes"),
        ];
    };
    let (wasm_kib, native_kib) = (wasm.kib_per_session(), native.kib_per_session());
    vec![
        Row {
            figure: reached_figure.into(),
            wasm: report::count(wasm.reached as u64),
            native: report::count(native.reached as u64),
            overhead: "—".into(),
            target: report::count(sessions as u64),
            met: Some(wasm.reached >= sessions),
        },
        Row {
            figure: memory_figure.into(),
            wasm: format!("{wasm_kib:.1} KiB"),
            native: format!("{native_kib:.1} KiB"),
            overhead: format!(
                "+{:.1} KiB (×{:.0})",
                wasm_kib - native_kib,
                wasm_kib / native_kib.max(0.1)
            ),
            target: memory_target.into(),
            met: Some(wasm.reached >= sessions && wasm_kib <= TARGET_KIB),
        },
    ]
}

fn max_map_count() -> String {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .map_or_else(|_| "unknown".into(), |count| count.trim().to_owned())
}
