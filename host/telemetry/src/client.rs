//! The OTLP exporter's HTTP client: hyper (already in moat's tree) on a
//! small runtime of its own, so the SDK's batch thread can export while
//! moat's runtime is busy — or gone, when the process flushes at its end.

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use opentelemetry_http::{HttpClient, HttpError};

/// How long one export may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends each export on its own connection, from its own thread, started
/// with the first export (a process that ends no span pays nothing).
#[derive(Debug, Default)]
pub(crate) struct Client {
    runtime: OnceLock<Result<tokio::runtime::Handle, String>>,
}

impl Client {
    /// The runtime's handle, its thread started now if need be.
    fn runtime(&self) -> Result<&tokio::runtime::Handle, HttpError> {
        let started = self.runtime.get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            let handle = runtime.handle().clone();
            std::thread::Builder::new()
                .name("moat-otlp".into())
                .spawn(move || runtime.block_on(std::future::pending::<()>()))
                .map_err(|e| e.to_string())?;
            Ok(handle)
        });
        started
            .as_ref()
            .map_err(|e| format!("the exporter's thread cannot start: {e}").into())
    }
}

#[async_trait::async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let sent = self
            .runtime()?
            .spawn(async move {
                match tokio::time::timeout(EXPORT_TIMEOUT, send(request)).await {
                    Ok(result) => result,
                    Err(_) => Err(format!("no answer in {EXPORT_TIMEOUT:?}").into()),
                }
            })
            .await;
        sent.map_err(|e| -> HttpError { Box::new(e) })?
    }
}

/// One request over a fresh HTTP/1.1 connection.
async fn send(request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
    let (mut parts, body) = request.into_parts();
    let host = parts.uri.host().ok_or("a URL without a host")?.to_owned();
    let port = parts.uri.port_u16().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!("the OTLP connection ended: {error}");
        }
    });
    let authority = parts
        .uri
        .authority()
        .map(ToString::to_string)
        .unwrap_or(host);
    parts
        .headers
        .insert(http::header::HOST, http::HeaderValue::from_str(&authority)?);
    parts.uri = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()?;
    let response = sender
        .send_request(Request::from_parts(parts, Full::new(body)))
        .await?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await?.to_bytes();
    Ok(Response::from_parts(parts, body))
}
