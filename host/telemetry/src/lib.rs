//! moat's OpenTelemetry traces. With the standard `OTEL_*` variables set
//! (or `--otel`), [`install`] starts an OTLP/HTTP exporter behind the
//! SDK's batch processor, and every run the launch layer starts gets a
//! [`RunTracer`] ([`start_run`]) that turns its events into spans:
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

static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();

fn installed() -> Option<&'static Telemetry> {
    TELEMETRY.get()
}

/// Exports this process's runs' traces as `config` says, until the
/// returned guard is shut down (or dropped).
pub fn install(config: &OtelConfig) -> Result<Guard, TelemetryError> {
    if installed().is_some() {
        return Err(TelemetryError::Installed);
    }
    let exporter = export::Exporter::new(config)?;
    // The queue's bound and the export interval: the SDK's defaults, or
    // the OTEL_BSP_* variables.
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(BatchConfigBuilder::default().build())
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
    TELEMETRY
        .set(Telemetry {
            provider,
            tracer,
            live: Mutex::new(HashMap::new()),
        })
        .map_err(|_| TelemetryError::Installed)?;
    tracing::info!(endpoint = %config.traces_endpoint, "exporting traces over OTLP");
    Ok(Guard {
        done: false,
        flushing: None,
    })
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
    /// Starts exporting what is queued now, on a thread of its own, while
    /// the process goes on winding down (its runs have ended);
    /// [`shutdown`](Self::shutdown) then waits for it, within the same
    /// [`FLUSH_TIMEOUT`].
    pub fn flush_soon(&mut self) {
        let Some(telemetry) = installed() else {
            return;
        };
        if self.flushing.is_some() || self.done {
            return;
        }
        let (sent, over) = std::sync::mpsc::channel();
        let started = std::thread::Builder::new()
            .name("moat-otlp-flush".into())
            .spawn(move || {
                let _ = telemetry.provider.force_flush();
                let _ = sent.send(());
            });
        if started.is_ok() {
            self.flushing = Some((Instant::now(), over));
        }
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
