//! The exporter: OTLP/HTTP protobuf through [`crate::client`], its
//! failures logged once and never handed to a run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

use crate::TelemetryError;
use crate::client::Client;
use crate::config::OtelConfig;

/// The OTLP exporter, counting the batches it could not deliver.
#[derive(Debug)]
pub(crate) struct Exporter {
    inner: opentelemetry_otlp::SpanExporter,
    endpoint: String,
    failures: AtomicU64,
}

impl Exporter {
    pub(crate) fn new(config: &OtelConfig) -> Result<Self, TelemetryError> {
        let client = Client;
        let inner = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_http_client(client)
            .with_endpoint(config.traces_endpoint.clone())
            .build()
            .map_err(|e| TelemetryError::Start(e.to_string()))?;
        Ok(Self {
            inner,
            endpoint: config.traces_endpoint.clone(),
            failures: AtomicU64::new(0),
        })
    }
}

impl SpanExporter for Exporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        if let Err(error) = self.inner.export(batch).await {
            // Once: a collector that is down stays down, and the runs go
            // on regardless.
            if self.failures.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    spans,
                    "traces cannot be exported to {}: {error}; runs go on, later failures are counted, not logged",
                    self.endpoint
                );
            }
        }
        Ok(())
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        let failures = self.failures.load(Ordering::Relaxed);
        if failures > 1 {
            tracing::warn!(
                failures,
                "{failures} trace exports to {} failed",
                self.endpoint
            );
        }
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}
