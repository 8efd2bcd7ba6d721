//! What every benchmark of the `moat` crate shares: where results go and
//! how busy the machine was. Included by each bench with `#[path]`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where summaries and the compiled-component cache go: under the
/// workspace's target directory.
pub fn bench_dir() -> PathBuf {
    // This crate is host/cli.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/moat-bench")
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
    let mut command = Command::new(env!("CARGO_BIN_EXE_moat"));
    command
        .env("MOAT_CACHE_DIR", bench_dir().join("cache"))
        .env("MOAT_STORE", store)
        .env_remove("MOAT_LOG")
        .stderr(Stdio::null());
    command
}
