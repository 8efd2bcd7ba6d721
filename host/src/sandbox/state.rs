//! What one run's store holds, and the host functions the adapter imports.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use wasmtime::Engine;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::host_api::{self, LogLevel};
use super::capabilities::{self, CapabilityError};
use super::denials::DenialLog;
use super::http::NetAccess;
use super::limits::MemoryCap;
use super::output::{GuestOutput, StreamName};
use super::process::{ChildGroups, GroupSignal, ProcessTable};
use crate::engine::SessionControl;
use crate::grants::Grants;

/// Longest guest log message kept; the rest is cut.
const MAX_LOG_MESSAGE_BYTES: usize = 4 * 1024;

/// The interrupt and kill switches of one run, reachable from any thread.
#[derive(Debug)]
pub(crate) struct RunControl {
    engine: Engine,
    interrupted: AtomicBool,
    /// Wakes host calls that wait for a child, so they return at once.
    interrupt_notify: tokio::sync::Notify,
    killed: AtomicBool,
    /// The run's children, signalled at interrupt and killed at kill.
    pub(crate) children: ChildGroups,
}

impl RunControl {
    pub(crate) fn new(engine: Engine) -> Self {
        Self {
            engine,
            interrupted: AtomicBool::new(false),
            interrupt_notify: tokio::sync::Notify::new(),
            killed: AtomicBool::new(false),
            children: ChildGroups::default(),
        }
    }

    /// Resolves once the run is interrupted (enable it, then check
    /// [`is_interrupted`](Self::is_interrupted), to miss nothing).
    pub(crate) fn interrupt_notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.interrupt_notify.notified()
    }

    pub(crate) fn is_interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Acquire)
    }

    pub(crate) fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }
}

impl SessionControl for RunControl {
    fn interrupt(&self) {
        self.interrupted.store(true, Ordering::Release);
        // Children are asked to stop now (ENG-005); the drain gives the
        // adapter time to report, and the end of the run kills them.
        self.children.signal_all(GroupSignal::Terminate);
        self.interrupt_notify.notify_waiters();
        // A guest computing right now reaches its epoch check at once and
        // yields, so the task driving it can start the drain.
        self.engine.increment_epoch();
    }

    fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.children.kill_all();
        self.engine.increment_epoch();
    }
}

/// The data of one run's store.
pub(crate) struct RunState {
    pub(crate) adapter: Arc<str>,
    pub(crate) control: Arc<RunControl>,
    pub(crate) memory: MemoryCap,
    pub(crate) stderr: GuestOutput,
    /// What the run was refused, for the engine to report.
    pub(crate) denials: DenialLog,
    /// What the run may start, and what it started.
    pub(crate) processes: ProcessTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    net: NetAccess,
    pub(crate) table: ResourceTable,
}

impl RunState {
    /// A run with the capabilities `grants` allow and nothing else (see
    /// [`capabilities`](super::capabilities) and
    /// [`process`](super::process)); with no grants: no files, no
    /// environment, no network, no processes, no arguments, stdin closed,
    /// stdout and stderr into the host's logs. Each HTTP request ends by `deadline`,
    /// the end of the run's time.
    pub(crate) fn new(
        adapter: Arc<str>,
        control: Arc<RunControl>,
        max_memory_bytes: u64,
        grants: &Grants,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Self, CapabilityError> {
        let stderr = GuestOutput::new(adapter.clone(), StreamName::Stderr);
        let env = capabilities::granted_env(&adapter, grants);
        let wasi = capabilities::wasi_context(
            grants,
            &env,
            GuestOutput::new(adapter.clone(), StreamName::Stdout),
            stderr.clone(),
        )?;
        let denials = DenialLog::default();
        let processes = ProcessTable::new(
            adapter.clone(),
            grants,
            env,
            control.children.clone(),
            denials.clone(),
        );
        Ok(Self {
            processes,
            adapter,
            control,
            memory: MemoryCap::new(max_memory_bytes),
            stderr,
            net: NetAccess::new(&grants.net, deadline, denials.clone()),
            denials,
            wasi,
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
        })
    }
}

impl WasiView for RunState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for RunState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.net,
        }
    }
}

impl host_api::Host for RunState {
    fn log(&mut self, level: LogLevel, message: String) {
        let message = truncate(&message, MAX_LOG_MESSAGE_BYTES);
        let adapter = &*self.adapter;
        match level {
            LogLevel::Trace => tracing::trace!(target: "moat::guest", adapter, "{message}"),
            LogLevel::Debug => tracing::debug!(target: "moat::guest", adapter, "{message}"),
            LogLevel::Info => tracing::info!(target: "moat::guest", adapter, "{message}"),
            LogLevel::Warn => tracing::warn!(target: "moat::guest", adapter, "{message}"),
            LogLevel::Error => tracing::error!(target: "moat::guest", adapter, "{message}"),
        }
    }

    fn interrupted(&mut self) -> bool {
        self.control.is_interrupted()
    }
}

impl super::bindings::wit::Host for RunState {}

/// Cuts `text` to at most `max` bytes on a character boundary.
pub(crate) fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
