//! What every benchmark of the `moat` crate shares: where results go and
//! how busy the machine was. Included by each bench with `#[path]`.

use std::path::{Path, PathBuf};

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
