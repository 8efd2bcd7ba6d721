//! moat's OpenTelemetry traces. With the standard `OTEL_*` variables set
//! (or `--otel`), [`install`] readies an OTLP/HTTP exporter behind the
//! SDK's batch processor — made when the first run starts, so a command
//! that starts none pays nothing — and every run the launch layer starts
//! gets a [`RunTracer`] ([`start_run`]) that turns its events into spans:
//!
//! - `invoke_agent {adapter}`, the run (GenAI semantic conventions:
//!   `gen_ai.operation.name`, `gen_ai.agent.name`, `gen_ai.request.model`,
//!   `gen_ai.usage.input_tokens` / `output_tokens`, `moat.cost.usd`,
//!   `moat.run.id`), status error when it failed; its `error` events are
//!   span events (`exception`);
//! - `execute_tool {tool}`, one per tool call, from `tool_use` to
//!   `tool_result`;
//! - `chat {model}`, one per model call the backend reports (`moat:usage`).
//!
//! A run's span is a child of its parent run's (known here by the parent's
//! run id while it lives, or carried as a `traceparent` in a cluster's
//! job), so one trace shows a whole tree of runs, across machines.
//!
//! Export never slows or fails a run: spans go to a bounded queue (drops
//! counted and logged once by the SDK), the export runs on threads of its
//! own, failures are logged once, and [`Guard::shutdown`] waits at most
//! [`FLUSH_TIMEOUT`] for what is left.

mod client;
pub mod config;
pub mod context;
mod export;
pub mod run;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use opentelemetry::trace::{SpanContext, TracerProvider};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};

pub use config::{DEFAULT_ENDPOINT, OtelConfig};
pub use context::{parse_traceparent, traceparent};
pub use run::{RunStart, RunTracer, start_run};

/// Most spans waiting for export at once (`OTEL_BSP_MAX_QUEUE_SIZE`
/// overrides it); more are dropped, counted and logged once by the SDK.
/// A batch goes out at 512 spans or every 5 s, so only spans ending while
/// an export is stuck (a collector that does not answer) wait here.
pub const MAX_QUEUED_SPANS: usize = 512;

/// The longest the process waits at its end for its spans to be exported.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Why traces cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The endpoint is not one moat can export to.
    #[error("the OTLP endpoint {0:?}: {1}")]
    Endpoint(String, String),
    /// The exporter could not start.
    #[error("the OTLP exporter cannot start: {0}")]
    Start(String),
    /// Telemetry was installed already in this process.
    #[error("OpenTelemetry export is installed already")]
    Installed,
}

/// The process's exporter, once installed.
struct Telemetry {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    /// The spans of the runs live in this process, by run id: their
    /// children's parents.
    live: Mutex<HashMap<String, SpanContext>>,
}

/// What [`install`] was given: the exporter is made from it when the
/// first run starts.
static CONFIG: OnceLock<OtelConfig> = OnceLock::new();

/// The exporter, once the first run started (`None`: it could not be
/// made, which was said then).
static TELEMETRY: OnceLock<Option<Telemetry>> = OnceLock::new();

/// The exporter, if one was made.
fn installed() -> Option<&'static Telemetry> {
    TELEMETRY.get().and_then(Option::as_ref)
}

/// The exporter, made now if this is the first run: a process that starts
/// no run (`moat ps`) pays nothing for it.
fn started() -> Option<&'static Telemetry> {
    TELEMETRY
        .get_or_init(|| {
            let config = CONFIG.get()?;
            match Telemetry::new(config) {
                Ok(telemetry) => Some(telemetry),
                Err(error) => {
                    tracing::warn!("no traces are exported: {error}");
                    None
                }
            }
        })
        .as_ref()
}

/// Exports this process's runs' traces as `config` says, until the
/// returned guard is shut down (or dropped). The exporter starts with the
/// first run.
pub fn install(config: &OtelConfig) -> Result<Guard, TelemetryError> {
    CONFIG
        .set(config.clone())
        .map_err(|_| TelemetryError::Installed)?;
    Ok(Guard {
        done: false,
        flushing: None,
    })
}

impl Telemetry {
    fn new(config: &OtelConfig) -> Result<Self, TelemetryError> {
        let exporter = export::Exporter::new(config)?;
        // The export interval and batch: the SDK's defaults, or the
        // OTEL_BSP_* variables. The queue's bound is moat's own unless
        // OTEL_BSP_MAX_QUEUE_SIZE sets it: the SDK's channel allocates and
        // touches every slot up front, and the SDK's 2,048 cost every
        // `moat run` 180 page faults (a third of what export cost a short
        // run: docs/performance.md).
        let mut batch = BatchConfigBuilder::default();
        if std::env::var_os("OTEL_BSP_MAX_QUEUE_SIZE").is_none() {
            batch = batch.with_max_queue_size(MAX_QUEUED_SPANS);
        }
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(batch.build())
            .build();
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("moat");
        }
        let resource = resource
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("moat");
        tracing::info!(endpoint = %config.traces_endpoint, "exporting traces over OTLP");
        Ok(Self {
            provider,
            tracer,
            live: Mutex::new(HashMap::new()),
        })
    }
}

/// Flushes and stops the exporter when the process ends.
#[must_use = "dropping the guard stops the export"]
pub struct Guard {
    done: bool,
    /// A flush started early ([`Guard::flush_soon`]): it says when it is
    /// over.
    flushing: Option<(Instant, std::sync::mpsc::Receiver<()>)>,
}

impl Guard {
    /// Starts exporting what is queued now while the process goes on
    /// winding down (its runs have ended): the wait for the export is
    /// handed to `spawn`, which runs it on a thread that may block (the
    /// caller's blocking pool, whose threads are there already; a thread
    /// of its own would cost a short run more than the export). Then
    /// [`shutdown`](Self::shutdown) waits for it, within the same
    /// [`FLUSH_TIMEOUT`].
    pub fn flush_soon(&mut self, spawn: impl FnOnce(Box<dyn FnOnce() + Send>)) {
        let Some(telemetry) = installed() else {
            return;
        };
        if self.flushing.is_some() || self.done {
            return;
        }
        let (sent, over) = std::sync::mpsc::channel();
        spawn(Box::new(move || {
            let _ = telemetry.provider.force_flush();
            let _ = sent.send(());
        }));
        self.flushing = Some((Instant::now(), over));
    }

    /// Exports what is left, waiting at most [`FLUSH_TIMEOUT`] in all,
    /// and stops.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let Some(telemetry) = installed() else {
            return;
        };
        let mut left = FLUSH_TIMEOUT;
        if let Some((started, over)) = self.flushing.take() {
            let _ = over.recv_timeout(FLUSH_TIMEOUT);
            left = FLUSH_TIMEOUT.saturating_sub(started.elapsed());
        }
        if let Err(error) = telemetry
            .provider
            .shutdown_with_timeout(left.max(Duration::from_millis(1)))
        {
            tracing::warn!("the last traces were not all exported: {error}");
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop();
    }
}
