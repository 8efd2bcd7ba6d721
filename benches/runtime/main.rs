//! The core runtime benchmark: `cargo bench -p moat-benches --bench runtime`.
//!
//! Four figures, each measured for a Wasm component and, in the same run
//! and through the same engine, for a native in-process adapter, so the
//! table shows what the sandbox adds rather than how fast this machine is
//! (docs/performance.md explains each figure):
//!
//! 1. run start: `run_agent` to the first event, the component loaded;
//! 2. per-event cost of a long stream of small events;
//! 3. abort latency of a guest spinning in `next`, p50 and p99;
//! 4. live sessions held at once and host memory per session;
//! 5. 100 and 1,000 echo runs at once through `run_parallel`: events per
//!    second and peak host memory.
//!
//! 1 and 2 are criterion benchmarks; 3 and 4 are plain loops, since they
//! need percentiles and process memory, which criterion does not give. The
//! table goes to stdout and to `target/moat-bench/summary.md`.
//!
//! Without `--bench` (as under `cargo test --benches`) criterion runs each
//! benchmark once as a test, the other figures run at a tiny size, and no
//! summary is written.

mod abort;
#[path = "../common/mod.rs"]
mod common;
mod fixtures;
mod parallel;
mod report;
mod sessions;
mod start_and_events;

use criterion::Criterion;
use moat_sandbox::Sandbox;
use moat_testkit::native::{NativeEcho, NativeFlood, ScriptedAdapter, Step};
use tokio::runtime::Runtime;
use tracing_subscriber::EnvFilter;

use fixtures::Subject;

/// How big each figure is.
struct Scale {
    /// Events per flood run (figure 2).
    flood_events: u64,
    /// Aborts timed per side (figure 3).
    abort_samples: usize,
    /// Sessions held live per side (figure 4).
    sessions: usize,
    /// Parallel run sizes (figure 5).
    parallel: &'static [usize],
}

const FULL: Scale = Scale {
    flood_events: 100_000,
    abort_samples: 300,
    sessions: 10_000,
    parallel: &[100, 1_000],
};

/// Enough to prove every figure runs, fast enough for a test run.
const SMOKE: Scale = Scale {
    flood_events: 1_000,
    abort_samples: 5,
    sessions: 100,
    parallel: &[10],
};

/// Pool slots for figures 1 to 3, which hold a few sessions at a time.
const POOL_SESSIONS: u32 = 1_000;

fn main() {
    if let Some((side, sessions)) = sessions::child_request() {
        return sessions::child_main(side, sessions);
    }
    if let Some(work) = parallel::child_request() {
        return parallel::child_main(work);
    }
    // Warnings only (say, the sandbox falling back from the instance
    // pool), on stderr, so the figures' conditions are visible.
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();

    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|arg| arg == flag);
    let full = common::full_run();
    let scale = if full { &FULL } else { &SMOKE };

    // One runtime and one sandbox for the process, as in the real host.
    let rt = fixtures::runtime();
    let sandbox = fixtures::sandbox(POOL_SESSIONS);
    let mut criterion = Criterion::default().configure_from_args();
    let mut rows = criterion_figures(&mut criterion, &rt, &sandbox, scale);
    criterion.final_summary();
    if has("--list") || has("--profile-time") {
        // Criterion-only modes: the other figures have nothing to list or
        // profile.
        return;
    }

    let spinning = Subject::new(rt.block_on(fixtures::load_file(
        &sandbox,
        moat_testkit::components::SPIN_NEXT,
    )));
    let hanging = Subject::new(ScriptedAdapter::new("native-hang", vec![Step::Hang]));
    // Abort latency is mostly OS wake-up and scheduling latency, so the
    // machine's load (other processes competing for the two cores) goes
    // beside it.
    let mut notes = vec![format!(
        "load average (1, 5, 15 min) at the abort figure: {}",
        common::load_average()
    )];
    rows.extend(abort::figure(&rt, &spinning, &hanging, scale.abort_samples));

    rows.extend(sessions::figure(scale.sessions, &mut notes));
    rows.extend(parallel::figure(scale.parallel, &mut notes));

    if !full {
        // Tiny sizes, often in a debug build, say nothing about the targets.
        for row in &mut rows {
            row.met = None;
        }
        println!("\nsmoke test: every figure ran at a tiny size; these are not measurements");
    }
    let summary = report::render(&rows, &notes);
    println!("\n{summary}");
    if full {
        match report::save(&summary) {
            Ok(path) => println!("summary written to {}", path.display()),
            Err(error) => eprintln!("cannot write the summary: {error}"),
        }
    }
}

/// Figures 1 and 2, the criterion benchmarks.
fn criterion_figures(
    criterion: &mut Criterion,
    rt: &Runtime,
    sandbox: &Sandbox,
    scale: &Scale,
) -> Vec<report::Row> {
    let echo = Subject::new(rt.block_on(fixtures::load_echo(sandbox)));
    let native_echo = Subject::new(NativeEcho::named("native-echo"));
    let flood = Subject::new(rt.block_on(fixtures::load_file(
        sandbox,
        moat_testkit::components::FLOOD,
    )));
    let native_flood = Subject::new(NativeFlood::new());
    vec![
        start_and_events::run_start(criterion, rt, &echo, &native_echo),
        start_and_events::per_event(criterion, rt, &flood, &native_flood, scale.flood_events),
    ]
}
