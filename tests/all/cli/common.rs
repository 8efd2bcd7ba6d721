//! Helpers the tests that run the real `moat` binary share.

use std::process::{Command, Output, Stdio};

use moat_engine::AgentEvent;

/// `moat` with the tests' shared cache, their shared run store and data
/// directory (never the user's) and quiet logs.
pub fn moat() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_moat"));
    command
        .env("MOAT_CACHE_DIR", moat_testkit::shared_cache_dir())
        .env(
            "MOAT_STORE",
            moat_testkit::repo_root().join("target/e2e-store/moat.db"),
        )
        // Installed adapters: the tests', never the user's.
        .env(
            "MOAT_DATA_DIR",
            moat_testkit::repo_root().join("target/e2e-data"),
        )
        // Secrets: none kept unless a test keeps its own; never the user's.
        .env(
            "MOAT_SECRETS",
            moat_testkit::repo_root().join("target/e2e-data/no-secrets.json"),
        )
        .env_remove("MOAT_LOG")
        .stdin(Stdio::null());
    command
}

/// The events of an ndjson run.
pub fn events(output: &Output) -> Vec<AgentEvent> {
    String::from_utf8(output.stdout.clone())
        .expect("utf-8 output")
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not an event ({e}): {line}"))
        })
        .collect()
}
