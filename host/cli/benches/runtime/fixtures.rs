//! What every figure shares: the tokio runtime, the sandbox, the adapters
//! under test and the native baselines set beside them.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use moat_engine::{
    Adapter, AdapterEvent, AdapterEventKind, AdapterInfo, AdapterSession, DoneStatus, ErrorInfo,
    Registry, RunLimits, RunOptions, RunRequest, SessionControl, SessionFailure, StartError,
};
use moat_sandbox::{RunScope, Sandbox, SandboxConfig, WasmAdapter};
use moat_testkit::native::done_info;

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

/// The delta every `flood` event carries (see adapters/testing/flood).
const FLOOD_DELTA: &str = "x";

/// The native twin of the `flood` testing component: N `text_delta` "x"
/// events, then `done` success. Events are made one at a time in `next`,
/// as the component makes them, so the baseline holds only the engine's
/// own per-event work (a scripted adapter would add cloning its script).
pub struct NativeFlood {
    info: AdapterInfo,
}

impl NativeFlood {
    pub fn new() -> Self {
        Self {
            info: AdapterInfo {
                name: "native-flood".into(),
                version: "0.0.0".into(),
                description: "Emits N text deltas (N = prompt), natively".into(),
                ..AdapterInfo::default()
            },
        }
    }
}

impl<S: Send + Sync> Adapter<S> for NativeFlood {
    fn info(&self) -> &AdapterInfo {
        &self.info
    }

    fn start<'a>(
        &'a self,
        prompt: &'a str,
        _options: &'a RunOptions,
        _limits: &'a RunLimits,
        _scope: &'a S,
    ) -> BoxFuture<'a, Result<Box<dyn AdapterSession>, StartError>> {
        let started = match prompt.trim().parse() {
            Ok(remaining) => {
                let session: Box<dyn AdapterSession> = Box::new(FloodSession {
                    remaining,
                    done: false,
                    control: Arc::default(),
                });
                Ok(session)
            }
            Err(_) => Err(StartError::refused(ErrorInfo {
                code: None,
                message: format!("the prompt must be a number of events, not {prompt:?}"),
                recoverable: false,
            })),
        };
        Box::pin(std::future::ready(started))
    }
}

struct FloodSession {
    remaining: u64,
    done: bool,
    control: Arc<FloodControl>,
}

/// Only `kill` matters: the engine kills a session whose run is dropped.
#[derive(Default)]
struct FloodControl {
    killed: AtomicBool,
}

impl SessionControl for FloodControl {
    fn interrupt(&self) {}

    fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
    }
}

impl AdapterSession for FloodSession {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<AdapterEvent>, SessionFailure>> {
        let result = if self.control.killed.load(Ordering::SeqCst) {
            Err(SessionFailure::Killed)
        } else if self.remaining > 0 {
            self.remaining -= 1;
            let delta = AdapterEventKind::TextDelta(FLOOD_DELTA.to_owned());
            Ok(Some(AdapterEvent::new(delta)))
        } else if !self.done {
            self.done = true;
            let done = AdapterEventKind::Done(done_info(DoneStatus::Success));
            Ok(Some(AdapterEvent::new(done)))
        } else {
            Ok(None)
        };
        Box::pin(std::future::ready(result))
    }

    fn control(&self) -> Arc<dyn SessionControl> {
        Arc::clone(&self.control) as Arc<dyn SessionControl>
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
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
