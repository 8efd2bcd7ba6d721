//! What every benchmark shares: where results go, how busy the machine
//! was, and the `moat` binary. Included by each bench with `#[path]`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Whether this is a measuring run (`cargo bench`), not the one-pass
/// smoke run `cargo test --benches` makes.
pub fn full_run() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test")
}

/// Where summaries and the compiled-component cache go: under the
/// workspace's target directory.
pub fn bench_dir() -> PathBuf {
    // This crate is benches/, at the workspace's root.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/moat-bench")
}

/// The real `moat` binary, built by cargo in this bench's own profile (a
/// bench of another package is not handed it as `CARGO_BIN_EXE_moat`).
#[allow(dead_code)]
pub fn moat_bin() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| moat_testkit::helper_binary("moat", "moat"))
}

/// The 1, 5 and 15 minute load averages, from /proc/loadavg: figures
/// taken on a busy machine say so.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".into(),
        |loads| {
            loads
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        },
    )
}

/// The real `moat` binary with the benches' compile cache, the store
/// `store` and quiet logs (the benches that run it; not every one does).
#[allow(dead_code)]
pub fn moat(store: &Path) -> Command {
    let mut command = Command::new(moat_bin());
    command
        .env("MOAT_CACHE_DIR", bench_dir().join("cache"))
        .env("MOAT_STORE", store)
        .env_remove("MOAT_LOG")
        .stderr(Stdio::null());
    command
}

/// Median seconds of `samples` whole processes of the command `make`
/// builds (from spawn to exit), each required to succeed.
#[allow(dead_code)]
pub fn median_process_seconds(samples: usize, mut make: impl FnMut() -> Command) -> f64 {
    let mut times: Vec<f64> = (0..samples.max(1))
        .map(|_| {
            let mut command = make();
            let started = Instant::now();
            let status = command.status().expect("the command starts");
            let took = started.elapsed().as_secs_f64();
            assert!(status.success(), "{command:?} failed: {status}");
            took
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
