//! Recording one request or connection while it goes: a guard that
//! counts its bytes and reads a model call's answer as it passes, and
//! records the row (with the call) when it ends or is dropped.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use moat_grants::Scheme;
use moat_meter::{UsageReader, Vendor};

use super::exchange::UsageRow;
use super::{Exchange, MeteredCall, Traffic};

/// A row being recorded: recorded when dropped.
pub struct Recording {
    traffic: Traffic,
    row: Exchange,
    started: Instant,
    sent: Arc<AtomicU64>,
    /// A model call: whose API, and its answer's reader once it answered.
    vendor: Option<Vendor>,
    reader: Option<UsageReader>,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("row", &self.row)
            .field("vendor", &self.vendor)
            .finish_non_exhaustive()
    }
}

impl Recording {
    /// Starts recording `row` into `traffic`; `vendor`: a model call to
    /// that vendor's API.
    pub fn start(traffic: &Traffic, row: Exchange, vendor: Option<Vendor>) -> Self {
        traffic.opened();
        Self {
            traffic: traffic.clone(),
            row,
            started: Instant::now(),
            sent: Arc::default(),
            vendor,
            reader: None,
        }
    }

    /// Starts recording the request `row` (its method set) into
    /// `traffic`: a model call when it goes to a model API (as `scheme`)
    /// on one of its model calls' paths (`path_and_query`, whole: the row
    /// keeps it cut).
    pub fn request(traffic: &Traffic, row: Exchange, scheme: Scheme, path_and_query: &str) -> Self {
        let method = row.method.as_deref().unwrap_or_default();
        let vendor = traffic
            .vendor(scheme, &row.host, row.port)
            .filter(|vendor| vendor.is_model_call(method, path_and_query));
        Self::start(traffic, row, vendor)
    }

    /// Why it may not go out, when it is a model call of a run that was
    /// stopped (the call that crossed its budget was its last); marked
    /// refused then.
    pub fn refused_after_stop(&mut self) -> Option<&'static str> {
        self.vendor?;
        let reason = self.traffic.model_calls_refused()?;
        self.row.refused = Some(reason.into());
        Some(reason)
    }

    /// The row so far.
    pub fn row(&mut self) -> &mut Exchange {
        &mut self.row
    }

    /// Whether it is a model call.
    pub fn is_model_call(&self) -> bool {
        self.vendor.is_some()
    }

    /// `body`, its bytes counted as sent.
    pub fn counted<B>(&self, body: B) -> CountedBody<B> {
        CountedBody {
            inner: body,
            sent: self.sent.clone(),
        }
    }

    /// Adds `bytes` sent (a tunnel's, counted by whoever moved them).
    pub fn add_sent(&self, bytes: u64) {
        self.sent.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The answer's status and headers came: a model call's answer is
    /// read from here on.
    pub fn answered(&mut self, status: u16, headers: &http::HeaderMap) {
        self.row.status = Some(status);
        if let Some(vendor) = self.vendor {
            self.reader = Some(UsageReader::new(
                vendor,
                headers
                    .get(http::header::CONTENT_TYPE)
                    .map(http::HeaderValue::as_bytes),
                headers
                    .get(http::header::CONTENT_ENCODING)
                    .map(http::HeaderValue::as_bytes),
            ));
        }
    }

    /// `bytes` of the answer's body came.
    pub fn received(&mut self, bytes: &[u8]) {
        self.row.received = self.row.received.saturating_add(bytes.len() as u64);
        if let Some(reader) = &mut self.reader {
            reader.feed(bytes);
        }
    }

    /// It failed after it was allowed, as `error` says.
    pub fn failed(&mut self, error: impl std::fmt::Display) {
        if self.row.error.is_none() {
            self.row.error = Some(error.to_string().chars().take(300).collect());
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let mut row = self.row.clone();
        row.ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        row.sent = row.sent.saturating_add(self.sent.load(Ordering::Relaxed));
        // A call is one the API answered with success: a refused or
        // failed request used nothing.
        let answered = row
            .status
            .is_some_and(|status| (200..300).contains(&status));
        let call = self.vendor.filter(|_| answered).map(|vendor| {
            let reading = self.reader.as_ref().map(UsageReader::reading);
            let (model, usage) = reading.map_or((None, None), |r| (r.model, r.usage));
            row.vendor = Some(vendor.as_str());
            row.model.clone_from(&model);
            row.usage = usage.map(|usage| UsageRow {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
            });
            MeteredCall {
                vendor,
                destination: format!("{}:{}", row.host, row.port),
                model,
                usage,
            }
        });
        self.traffic.record_closing(row, call, true);
    }
}

/// A request body whose bytes are counted as sent.
#[derive(Debug)]
pub struct CountedBody<B> {
    inner: B,
    sent: Arc<AtomicU64>,
}

impl<B> Body for CountedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
        {
            this.sent.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// An answer's body, read as it passes: recorded when it ends, fails or
/// is dropped.
#[derive(Debug)]
pub struct WatchedBody<B> {
    inner: B,
    recording: Option<Recording>,
}

impl<B> WatchedBody<B> {
    /// `body`, the answer `recording` records.
    pub fn new(body: B, recording: Recording) -> Self {
        Self {
            inner: body,
            recording: Some(recording),
        }
    }
}

impl<B> Body for WatchedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        match &frame {
            Some(Ok(frame)) => {
                if let (Some(data), Some(recording)) = (frame.data_ref(), &mut this.recording) {
                    recording.received(data);
                }
                // The last frame: whoever sends it on may not ask again.
                if this.inner.is_end_stream() {
                    drop(this.recording.take());
                }
            }
            Some(Err(_)) => {
                if let Some(mut recording) = this.recording.take() {
                    recording.failed("the answer broke off");
                }
            }
            // Recorded as soon as it ends: the call is charged before
            // whoever reads the answer can act on it.
            None => drop(this.recording.take()),
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
