//! What one run's store holds: its WASI and HTTP contexts, limits, process
//! table and refusals, and the host services every contract version offers.

use std::sync::Arc;

use crate::scope::RunScope;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::capabilities::{self, CapabilityError};
use crate::control::RunControl;
use crate::http::NetAccess;
use crate::limits::MemoryCap;
use crate::output::{GuestOutput, StreamName};
use moat_contain::denials::DenialLog;
use moat_contain::process::ProcessTable;
use moat_engine::RunLimits;

/// Longest guest log message kept; the rest is cut.
const MAX_LOG_MESSAGE_BYTES: usize = 4 * 1024;

/// How loud a guest's log message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GuestLogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
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
    /// The granted directories (canonical host paths): where a link the
    /// guest makes may point ([`crate::filesystem`]).
    pub(crate) preopens: Vec<std::path::PathBuf>,
    /// Files and directories the guest has open now ([`crate::filesystem`]).
    pub(crate) open_files: usize,
    /// Most it may have open at once.
    pub(crate) max_open_files: usize,
    /// Who starts its child runs; `None`: none may start.
    pub(crate) children: Option<crate::children::ChildRunner>,
    /// Who answers the guest's requests (`approvals` import); `None`: the
    /// run does not ask.
    pub(crate) asking: Option<moat_contain::Asking>,
}

impl RunState {
    /// A run with the capabilities `grants` allow and nothing else (see
    /// [`capabilities`](crate::capabilities) and
    /// [`process`](moat_contain::process)); with no grants: no files, no
    /// environment, no network, no processes, no arguments, stdin closed,
    /// stdout and stderr into the host's logs. Each HTTP request ends by `deadline`,
    /// the end of the run's time.
    pub(crate) fn new(
        adapter: Arc<str>,
        control: Arc<RunControl>,
        limits: &RunLimits,
        scope: &RunScope,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Self, CapabilityError> {
        let grants = &scope.grants;
        let stderr = GuestOutput::new(adapter.clone(), StreamName::Stderr);
        let mut env = capabilities::granted_env(&adapter, grants);
        let dirs = capabilities::granted_dirs(grants, &scope.dirs)?;
        let denials = DenialLog::default();
        let mut table = ResourceTable::new();
        // The run's memory may be more than an adapter can have: the
        // adapter's share is at most the sandbox's ceiling.
        let adapter_memory = limits.max_memory_bytes.min(crate::MAX_MEMORY_CEILING);
        table.set_max_capacity(crate::limits::max_resources(adapter_memory));
        let mut http = WasiHttpCtx::new();
        http.set_field_size_limit(crate::limits::MAX_HEADER_MAP_BYTES);
        // The run's open connections: its components' requests and its
        // programs' through the proxy count together.
        let connections = Arc::new(tokio::sync::Semaphore::new(
            limits
                .max_connections
                .min(tokio::sync::Semaphore::MAX_PERMITS),
        ));
        let mut processes = ProcessTable::new(
            adapter.clone(),
            grants,
            &scope.confinement,
            &dirs,
            env.clone(),
            control.children.clone(),
            moat_contain::egress::Policy {
                rules: grants.net.as_slice().into(),
                denials: denials.clone(),
                deadline,
                connections: connections.clone(),
                secrets: scope.secrets.clone(),
                token: None,
                asking: scope.asking.clone(),
                own_network: Default::default(),
                traffic: scope.traffic.clone(),
            },
        );
        // The adapter learns its secrets' routes, which its programs get.
        for (name, route) in processes.secret_routes() {
            env.retain(|(set, _)| *set != name);
            env.push((name, route));
        }
        // And, when it asks, about which tools, and where its CLI asks.
        let mut told = Vec::new();
        if let Some(asking) = scope.asking.as_ref().filter(|a| !a.tools.is_empty()) {
            told.push((
                moat_contain::approvals::ASK_TOOLS_VARIABLE,
                asking.tools.join(","),
            ));
        }
        if let Some(route) = processes.approval_route() {
            told.push((moat_contain::approvals::APPROVALS_VARIABLE, route));
        }
        for (name, value) in told {
            env.retain(|(set, _)| set != name);
            env.push((name.to_owned(), value));
        }
        let wasi = capabilities::wasi_context(
            grants,
            &dirs,
            &env,
            GuestOutput::new(adapter.clone(), StreamName::Stdout),
            stderr.clone(),
        )?;
        control
            .children
            .set_limits(moat_contain::process::ProgramLimits::of(limits));
        Ok(Self {
            processes,
            children: scope.children.clone(),
            asking: scope.asking.clone(),
            adapter,
            control,
            memory: MemoryCap::new(adapter_memory),
            open_files: 0,
            max_open_files: limits.max_open_files,
            stderr,
            net: NetAccess {
                rules: grants.net.as_slice().into(),
                secrets: scope.secrets.clone(),
                deadline,
                denials: denials.clone(),
                connections,
                max_connections: limits.max_connections,
                asking: scope.asking.clone(),
                traffic: scope.traffic.clone(),
            },
            denials,
            wasi,
            http,
            table,
            preopens: grants
                .preopens()
                .into_iter()
                .map(|p| std::fs::canonicalize(&p.host).unwrap_or(p.host))
                .collect(),
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

impl RunState {
    /// Writes a guest's log message into the host's log, cut to
    /// [`MAX_LOG_MESSAGE_BYTES`].
    pub(crate) fn log(&self, level: GuestLogLevel, message: &str) {
        let message = &message[..message.floor_char_boundary(MAX_LOG_MESSAGE_BYTES)];
        let adapter = &*self.adapter;
        match level {
            GuestLogLevel::Trace => tracing::trace!(target: "moat::guest", adapter, "{message}"),
            GuestLogLevel::Debug => tracing::debug!(target: "moat::guest", adapter, "{message}"),
            GuestLogLevel::Info => tracing::info!(target: "moat::guest", adapter, "{message}"),
            GuestLogLevel::Warn => tracing::warn!(target: "moat::guest", adapter, "{message}"),
            GuestLogLevel::Error => tracing::error!(target: "moat::guest", adapter, "{message}"),
        }
    }
}
