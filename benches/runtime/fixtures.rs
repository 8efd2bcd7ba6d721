//! What every figure shares: the tokio runtime, the sandbox, the adapters
//! under test and the native baselines set beside them.

use std::path::Path;
use std::sync::Arc;

use moat_engine::{Adapter, Registry, RunRequest};
use moat_sandbox::{RunScope, Sandbox, SandboxConfig, WasmAdapter};

use crate::common::bench_dir;
use tokio::runtime::Runtime;

/// The runtime every figure runs on: multi-threaded with two workers, as a
/// host on this 2-core machine would be. Figures drive their runs from
/// `block_on` on the main thread; tasks the engine spawns (the abort
/// watcher, background close) run on the workers.
pub fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the tokio runtime starts")
}

/// A sandbox whose instance pool holds `pool_sessions` live sessions, with
/// its compiled-component cache under [`bench_dir`](crate::common::bench_dir) so reruns skip compiling.
pub fn sandbox(pool_sessions: u32) -> Sandbox {
    let config = SandboxConfig {
        cache_dir: Some(bench_dir().join("cache")),
        pool_sessions,
        ..SandboxConfig::default()
    };
    Sandbox::new(config).expect("the sandbox starts")
}

/// The built-in echo component, compiled and linked (so `InstancePre` is
/// ready) before anything is timed.
pub async fn load_echo(sandbox: &Sandbox) -> WasmAdapter {
    let bytes = moat_builtins::component("echo").expect("echo is a built-in adapter");
    sandbox
        .load_bytes("built-in echo".into(), bytes.to_vec())
        .await
        .unwrap_or_else(|error| panic!("cannot load the built-in echo: {error}"))
}

/// A testing component from `moat_testkit::components`, compiled and linked.
pub async fn load_file(sandbox: &Sandbox, path: &str) -> WasmAdapter {
    sandbox
        .load_file(Path::new(path))
        .await
        .unwrap_or_else(|error| panic!("cannot load {path}: {error}"))
}

/// One adapter in a registry of its own, so each side of a figure goes
/// through exactly the same `run_agent` path.
pub struct Subject {
    pub registry: Registry<RunScope>,
    pub name: String,
}

impl Subject {
    pub fn new(adapter: impl Adapter<RunScope> + 'static) -> Self {
        let name = adapter.info().name.clone();
        let mut registry = Registry::scoped();
        registry
            .register(Arc::new(adapter))
            .expect("a fresh registry takes any name");
        Self { registry, name }
    }

    /// A request for this adapter with default options and limits.
    /// Native adapters ignore the scope; components get nothing granted.
    pub fn request(&self, prompt: &str) -> RunRequest<RunScope> {
        RunRequest::new(self.name.clone(), prompt).with_scope(RunScope::none())
    }
}

/// A memory figure of this process from /proc/self/status, in KiB:
/// `VmRSS` (now) or `VmHWM` (the high-water mark).
pub fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"))
}

/// Runs this bench binary again as a child told what to measure by `env`,
/// and reads the JSON report it prints last. Memory figures run in fresh
/// processes so one side cannot reuse heap the other freed. The child's
/// stderr goes straight to ours.
pub fn run_child<T: serde::de::DeserializeOwned>(env: &str, value: &str) -> Result<T, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let output = std::process::Command::new(exe)
        .env(env, value)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start the child process: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "the child process failed ({}); its error is above",
            output.status
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).map_err(|e| format!("unreadable child report {line:?}: {e}"))
}
