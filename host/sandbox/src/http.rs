//! Outgoing HTTP for one run, exactly as granted.
//!
//! `wasi:http/outgoing-handler` is the only way out of the sandbox (raw
//! sockets and name lookups stay off). Every request the guest sends comes
//! through [`NetAccess::send_request`], which:
//!
//! 1. checks the scheme (http or https), host and port against the run's
//!    `--allow-net` rules — a request no rule grants is refused here,
//!    before any name is resolved, so it makes no network traffic at all;
//! 2. resolves the name once and checks every address against the ranges a
//!    wildcard grant does not reach ([`moat_grants::address`]);
//! 3. connects to a checked address itself, never resolving again (a
//!    second lookup could answer differently: DNS rebinding). The `Host`
//!    header keeps the name; https does TLS with the name as SNI and for
//!    certificate checks;
//! 4. bounds the request by the run's remaining time (connect, first byte,
//!    between bytes) and its bodies by [`MAX_REQUEST_BODY_BYTES`] and
//!    [`MAX_RESPONSE_BODY_BYTES`].
//!
//! Each request, allowed or refused, is recorded in the run's traffic; a
//! model call's answer is read as it passes for its usage
//! ([`moat_contain::traffic`]).
//!
//! A refusal answers the guest with an HTTP error code
//! (`HTTP-request-denied`, or `destination-IP-prohibited` for an address)
//! and is recorded in the run's [`DenialLog`], which the engine turns into
//! a `CAPABILITY_DENIED` event.

mod buffered;
pub(crate) use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode as HttpErrorCode;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use moat_contain::denials::DenialLog;
use moat_engine::Denial;
use moat_grants::{NetRule, Scheme};

use moat_contain::destination::{ConnectFailure, Destination, shown};
use moat_contain::traffic::{Exchange, Kind, Recording, Traffic, Who};

/// Largest request body a guest may send, in bytes.
pub const MAX_REQUEST_BODY_BYTES: u64 = 64 * 1024 * 1024;
/// Largest response body a guest may receive, in bytes.
pub const MAX_RESPONSE_BODY_BYTES: u64 = 64 * 1024 * 1024;
/// Each timeout of a request when neither the guest nor the run's time
/// limit asks for less.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

type ResponseFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

/// The network access of one run: its rules, its deadline and where its
/// refusals and traffic go.
pub(crate) struct NetAccess {
    pub(crate) rules: Arc<[NetRule]>,
    /// Added to the requests to their destinations.
    pub(crate) secrets: moat_contain::Secrets,
    /// The end of the run's time: each request ends by it.
    pub(crate) deadline: Option<Instant>,
    pub(crate) denials: DenialLog,
    /// The run's open connections (a request holds one until its response
    /// body is read or dropped), shared with the run's programs.
    pub(crate) connections: Arc<tokio::sync::Semaphore>,
    pub(crate) max_connections: usize,
    /// Who is asked for a destination no rule grants; `None`: refused.
    pub(crate) asking: Option<moat_contain::Asking>,
    /// Where each request is recorded.
    pub(crate) traffic: Traffic,
}

impl WasiHttpHooks for NetAccess {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> ResponseFuture {
        let destination = match destination_of(request.uri(), &self.rules) {
            Ok(destination) => destination,
            Err(Refused::Invalid(error)) => return Box::new(async move { Err(error) }),
            Err(Refused::NotGranted(denial)) => return self.ask_for(denial, request, options),
        };
        let allowed_by = self
            .rules
            .iter()
            .find(|rule| rule.matches(destination.scheme, &destination.host, destination.port))
            .map(ToString::to_string);
        match self.sending(destination, request, allowed_by) {
            Ok(sending) => Box::new(send(sending, options)),
            Err(error) => Box::new(async { Err(error) }),
        }
    }

    // The crate's defaults log each failure at `warn`, as a Rust debug
    // struct, on the user's terminal; the guest gets the error code and
    // reports it (the openai adapter: "connection refused by …: is the
    // server running?"), so moat logs it at `debug` only, and says which
    // failure it was rather than "refused" for all.
    fn p2_error_from_connect(&mut self, error: &std::io::Error) -> HttpErrorCode {
        tracing::debug!("connect error: {error}");
        match error.kind() {
            std::io::ErrorKind::TimedOut => HttpErrorCode::ConnectionTimeout,
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted => {
                HttpErrorCode::ConnectionTerminated
            }
            std::io::ErrorKind::HostUnreachable | std::io::ErrorKind::NetworkUnreachable => {
                HttpErrorCode::DestinationUnavailable
            }
            _ => HttpErrorCode::ConnectionRefused,
        }
    }

    fn p2_error_from_tls(&mut self, error: &std::io::Error) -> HttpErrorCode {
        tracing::debug!("TLS error: {error}");
        HttpErrorCode::TlsProtocolError
    }

    fn p2_error_from_hyper(&mut self, error: &hyper::Error) -> HttpErrorCode {
        tracing::debug!("HTTP error: {error}");
        if error.is_timeout() {
            HttpErrorCode::ConnectionReadTimeout
        } else if error.is_incomplete_message() || error.is_closed() || error.is_canceled() {
            HttpErrorCode::HttpResponseIncomplete
        } else {
            HttpErrorCode::HttpProtocolError
        }
    }
}

impl NetAccess {
    /// A request to a destination no rule grants: refused at once, or,
    /// when the run asks ([`moat_contain::approvals`]), sent once approved —
    /// to that destination by name, as a grant of it would allow.
    fn ask_for(
        &mut self,
        denial: Denial,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> ResponseFuture {
        let scheme = match request.uri().scheme_str() {
            Some("https") => Scheme::Https,
            _ => Scheme::Http,
        };
        let (Some(asking), Some(moat_engine::Grant::Net { host, port })) =
            (self.asking.clone(), denial.remedy.clone())
        else {
            self.refused(denial, scheme, &request);
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        };
        let access = self.for_one_request();
        Box::new(async move {
            if let Err(denial) = asking.ask_for_guest(denial).await {
                access.refused(denial, scheme, &request);
                return Err(HttpError::HttpRequestDenied);
            }
            let approved = NetRule::parse(&format!("{host}:{port}"))
                .map_err(|_| HttpError::HttpRequestDenied)?;
            let destination = Destination::granted(scheme, &host, port, &[approved])
                .map_err(|_| HttpError::HttpRequestDenied)?;
            send(
                access.sending(destination, request, Some("approved".into()))?,
                options,
            )
            .await
        })
    }

    /// Records the refusal of `request`: in the run's refusals and its
    /// traffic.
    fn refused(&self, denial: Denial, scheme: Scheme, request: &http::Request<WasiBody>) {
        let uri = request.uri();
        let host = uri.host().unwrap_or_default();
        let port = uri.port_u16().unwrap_or(match scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        });
        let mut row = Exchange::new(Who::Component, Kind::Request, scheme, host, port).request(
            request.method().as_str(),
            uri.path_and_query().map_or("/", |p| p.as_str()),
        );
        row.refused = Some(denial.reason.clone());
        if let Some(moat_engine::Grant::Net { host, port }) = &denial.remedy {
            row.would_allow = Some(format!("{host}:{port}"));
        }
        self.traffic.record(row, None);
        self.denials.record(denial);
    }

    /// What sending one request needs of this access, to take along into
    /// a future that outlives the borrow of it.
    fn for_one_request(&self) -> NetAccess {
        NetAccess {
            rules: self.rules.clone(),
            secrets: self.secrets.clone(),
            deadline: self.deadline,
            denials: self.denials.clone(),
            connections: self.connections.clone(),
            max_connections: self.max_connections,
            asking: None,
            traffic: self.traffic.clone(),
        }
    }

    /// `request` to the granted `destination` (`allowed_by` that rule),
    /// with the run's secrets for it, holding one of the run's
    /// connections; refused when all are open.
    fn sending(
        &self,
        destination: Destination,
        mut request: http::Request<WasiBody>,
        allowed_by: Option<String>,
    ) -> Result<Sending, HttpError> {
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        let mut row = Exchange::new(
            Who::Component,
            Kind::Request,
            destination.scheme,
            &destination.host,
            destination.port,
        )
        .request(request.method().as_str(), &path);
        row.allowed_by = allowed_by;
        let mut recording = Recording::request(&self.traffic, row, destination.scheme, &path);
        if recording.is_model_call() {
            if recording.refused_after_stop().is_some() {
                return Err(HttpError::HttpRequestDenied);
            }
            // A model call's answer is read as it passes: uncompressed.
            request.headers_mut().remove(http::header::ACCEPT_ENCODING);
        }
        // The run's secrets for this destination replace whatever the guest
        // put in their headers (the placeholder, typically).
        for secret in
            self.secrets
                .for_destination(destination.scheme, &destination.host, destination.port)
        {
            let (name, value) = secret.header();
            request.headers_mut().insert(name.clone(), value.clone());
        }
        let Ok(connection) = self.connections.clone().try_acquire_owned() else {
            tracing::info!(
                "a request over the run's {} open connections was refused",
                self.max_connections
            );
            recording.failed("the run has as many connections open as it may");
            return Err(HttpError::ConnectionLimitReached);
        };
        Ok(Sending {
            destination,
            request,
            deadline: self.deadline,
            denials: self.denials.clone(),
            connection,
            recording: Some(recording),
        })
    }
}

/// A request ready to go: its destination granted, its connection held.
struct Sending {
    destination: Destination,
    request: http::Request<WasiBody>,
    deadline: Option<Instant>,
    denials: DenialLog,
    connection: tokio::sync::OwnedSemaphorePermit,
    /// Its row in the run's traffic, recorded when its answer ends.
    recording: Option<Recording>,
}

enum Refused {
    /// Not a request moat can send (no host, say): an error, not a denial.
    Invalid(HttpError),
    NotGranted(Denial),
}

/// Where a guest's request to `uri` goes, if `rules` grant it.
fn destination_of(uri: &http::Uri, rules: &[NetRule]) -> Result<Destination, Refused> {
    let scheme = match uri.scheme_str() {
        Some("http") => Scheme::Http,
        Some("https") => Scheme::Https,
        _ => return Err(Refused::Invalid(HttpError::HttpProtocolError)),
    };
    let host = uri
        .host()
        .filter(|host| !host.is_empty())
        .ok_or(Refused::Invalid(HttpError::HttpRequestUriInvalid))?;
    let port = uri.port_u16().unwrap_or(match scheme {
        Scheme::Http => 80,
        Scheme::Https => 443,
    });
    Destination::granted(scheme, host, port, rules).map_err(Refused::NotGranted)
}

/// A granted destination that could not be reached, as the guest sees it.
fn connect_error(failure: ConnectFailure) -> HttpError {
    {
        match failure {
            ConnectFailure::AddressProhibited => HttpError::DestinationIpProhibited,
            ConnectFailure::Dns(error) => HttpError::DnsError {
                rcode: Some(error),
                info_code: None,
            },
            ConnectFailure::NotFound => HttpError::DestinationNotFound,
            ConnectFailure::Connect(error) => HttpError::Connect(error),
            ConnectFailure::Timeout => HttpError::ConnectionTimeout,
        }
    }
}

/// The part of the run's remaining time one step of a request may take.
fn bounded(requested: Option<Duration>, deadline: Option<Instant>) -> Duration {
    let wanted = requested.unwrap_or(DEFAULT_TIMEOUT);
    match deadline {
        Some(deadline) => wanted.min(deadline.saturating_duration_since(Instant::now())),
        None => wanted,
    }
}

type Sent = Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ),
    HttpError,
>;

/// Sends `sending`; a failure is recorded in its row.
async fn send(mut sending: Sending, options: Option<RequestOptions>) -> Sent {
    let mut recording = sending.recording.take();
    let sent = send_recorded(sending, options, &mut recording).await;
    if let (Err(error), Some(recording)) = (&sent, recording.as_mut()) {
        match error {
            HttpError::DestinationIpProhibited => {
                recording.row().refused =
                    Some("it resolves to an address its grant does not reach".into());
            }
            error => recording.failed(format!("{error:?}")),
        }
    }
    sent
}

/// Sends `sending`, its answer's body read into `recording` (taken).
async fn send_recorded(
    sending: Sending,
    options: Option<RequestOptions>,
    recording: &mut Option<Recording>,
) -> Sent {
    let Sending {
        destination,
        mut request,
        deadline,
        denials,
        connection: connection_slot,
        recording: _,
    } = sending;
    let options = options.unwrap_or_default();
    let connect_timeout = bounded(options.connect_timeout, deadline);
    let stream = match destination.connect(connect_timeout, &denials).await {
        Ok(stream) => stream,
        Err(failure) => return Err(connect_error(failure)),
    };
    tracing::debug!(
        host = shown(&destination.host),
        port = destination.port,
        address = ?stream.peer_addr().ok(),
        "HTTP request granted; connected"
    );
    let stream: Box<dyn Stream> = match destination.scheme {
        Scheme::Http => Box::new(stream),
        Scheme::Https => {
            let tls = tls_handshake(stream, destination.bare_host());
            match tokio::time::timeout(bounded(options.connect_timeout, deadline), tls).await {
                Ok(stream) => Box::new(stream?),
                Err(_) => return Err(HttpError::ConnectionTimeout),
            }
        }
    };
    let handshake = hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(stream));
    let (mut sender, connection) =
        tokio::time::timeout(bounded(options.connect_timeout, deadline), handshake)
            .await
            .map_err(|_| HttpError::ConnectionTimeout)??;

    // The request carries the scheme and authority; on the wire (to an
    // origin, not a proxy) only the path goes in the request line. The
    // `Host` header, set from the authority, keeps the name.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| HttpError::HttpRequestUriInvalid)?;
    // The `Host` header is the granted name and port, whatever the guest
    // put in the authority: never its userinfo (credentials in the URL).
    let host = destination.host_header();
    let host = http::HeaderValue::from_str(&host).map_err(|_| HttpError::HttpRequestUriInvalid)?;
    request.headers_mut().insert(http::header::HOST, host);
    let request = request.map(|body| LimitedRequestBody {
        inner: match recording {
            Some(recording) => recording.counted(body).boxed_unsync(),
            None => body,
        },
        sent: 0,
    });

    let first_byte_timeout = bounded(options.first_byte_timeout, deadline);
    let between_bytes = options.between_bytes_timeout;
    let send = async move {
        let response = tokio::time::timeout(first_byte_timeout, sender.send_request(request))
            .await
            .map_err(|_| HttpError::ConnectionReadTimeout)??;
        Ok::<_, HttpError>(response)
    };

    // The connection does the I/O: drive it while waiting for the response
    // head, then hand it back to run beside the body.
    let mut send = std::pin::pin!(send);
    let mut connection = Some(connection);
    let response = std::future::poll_fn(|cx| {
        if let Poll::Ready(result) = send.as_mut().poll(cx) {
            return Poll::Ready(result);
        }
        let Some(running) = connection.as_mut() else {
            return Poll::Pending;
        };
        let result = ready!(Pin::new(running).poll(cx));
        connection = None;
        match result {
            Ok(()) => send.as_mut().poll(cx),
            Err(error) => Poll::Ready(Err(HttpError::from(error))),
        }
    })
    .await?;
    if let Some(recording) = recording {
        recording.answered(response.status().as_u16(), response.headers());
    }
    let between = bounded(between_bytes, deadline).max(Duration::from_nanos(1));
    let recording = recording.take();
    let response = response.map(|incoming| CheckedResponseBody {
        incoming,
        between,
        timer: Box::pin(tokio::time::sleep(between)),
        received: 0,
        recording,
    });
    // The body is read ahead by the connection's task (see `buffered`).
    let (head, checked) = response.into_parts();
    let (body, read_ahead) = buffered::buffered(checked);
    let response = http::Response::from_parts(head, body.boxed_unsync());
    let io: Box<dyn Future<Output = Result<(), HttpError>> + Send> = Box::new(async move {
        let _slot = connection_slot;
        let connection = async move {
            match connection {
                Some(connection) => connection.await.map_err(|error| {
                    if error.is_timeout() {
                        HttpError::HttpResponseTimeout
                    } else {
                        HttpError::from(error)
                    }
                }),
                None => Ok(()),
            }
        };
        let (result, ()) = futures::join!(connection, read_ahead);
        result
    });
    Ok((response, io))
}

trait Stream: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {}
impl<T> Stream for T where T: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {}

/// TLS over the already connected `stream` (see [`moat_contain::tls`]),
/// its failure as the guest sees it.
async fn tls_handshake(
    stream: TcpStream,
    host: &str,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, HttpError> {
    use moat_contain::tls::TlsFailure;
    moat_contain::tls::handshake(stream, host)
        .await
        .map_err(|failure| match failure {
            TlsFailure::InvalidName => HttpError::DnsError {
                rcode: Some("invalid DNS name".into()),
                info_code: None,
            },
            TlsFailure::Setup(reason) => {
                HttpError::InternalError(Some(format!("TLS setup failed: {reason}")))
            }
            TlsFailure::Handshake(error) => HttpError::Tls(error),
        })
}

/// The guest's request body, cut off with an error past
/// [`MAX_REQUEST_BODY_BYTES`].
struct LimitedRequestBody {
    inner: WasiBody,
    sent: u64,
}

impl Body for LimitedRequestBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = self.get_mut();
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
        {
            this.sent = this.sent.saturating_add(data.len() as u64);
            if this.sent > MAX_REQUEST_BODY_BYTES {
                return Poll::Ready(Some(Err(HttpError::HttpRequestBodySize(Some(this.sent)))));
            }
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

/// The response body, with the between-bytes timeout and cut off with an
/// error past [`MAX_RESPONSE_BODY_BYTES`], read into the run's traffic as
/// it comes (recorded when it ends, fails or is dropped).
struct CheckedResponseBody {
    incoming: hyper::body::Incoming,
    between: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    received: u64,
    recording: Option<Recording>,
}

impl buffered::Upstream for CheckedResponseBody {
    fn resume(&mut self) {
        self.timer.as_mut().reset(Instant::now() + self.between);
    }
}

impl Body for CheckedResponseBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.incoming).poll_frame(cx) {
            Poll::Ready(None) => {
                // Recorded as soon as it ends: the call is charged before
                // the guest can act on its answer.
                drop(this.recording.take());
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(error))) => {
                if let Some(recording) = &mut this.recording {
                    recording.failed(&error);
                }
                Poll::Ready(Some(Err(if error.is_timeout() {
                    HttpError::HttpResponseTimeout
                } else {
                    HttpError::from(error)
                })))
            }
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if let Some(recording) = &mut this.recording {
                        recording.received(data);
                    }
                    if this.incoming.is_end_stream() {
                        drop(this.recording.take());
                    }
                    this.received = this.received.saturating_add(data.len() as u64);
                    if this.received > MAX_RESPONSE_BODY_BYTES {
                        return Poll::Ready(Some(Err(HttpError::HttpResponseBodySize(Some(
                            this.received,
                        )))));
                    }
                }
                this.timer.as_mut().reset(Instant::now() + this.between);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(this.timer.as_mut().poll(cx));
                Poll::Ready(Some(Err(HttpError::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moat_engine::Grant;
    use moat_grants::address::HostGrant;

    fn rules(texts: &[&str]) -> Vec<NetRule> {
        texts.iter().map(|t| NetRule::parse(t).unwrap()).collect()
    }

    fn destination(uri: &str, rules: &[NetRule]) -> Result<Destination, Refused> {
        destination_of(&uri.parse().unwrap(), rules)
    }

    #[test]
    fn a_request_no_rule_grants_is_refused_with_the_grant_that_would_allow_it() {
        let rules = rules(&["api.example.com:443", "*.example.org"]);
        for (uri, target, host, port) in [
            (
                "http://example.invalid/x",
                "http://example.invalid:80",
                "example.invalid",
                80,
            ),
            (
                "https://api.example.com:8443/",
                "https://api.example.com:8443",
                "api.example.com",
                8443,
            ),
            ("http://[::1]:9000/", "http://[::1]:9000", "[::1]", 9000),
            (
                "https://example.org/",
                "https://example.org:443",
                "example.org",
                443,
            ),
        ] {
            match destination(uri, &rules) {
                Err(Refused::NotGranted(denial)) => {
                    assert_eq!(denial.request.capability(), "net");
                    assert_eq!(denial.request.to_string(), target);
                    assert_eq!(
                        denial.remedy,
                        Some(Grant::Net {
                            host: host.into(),
                            port
                        })
                    );
                }
                _ => panic!("{uri} should be refused"),
            }
        }
    }

    #[test]
    fn granted_requests_carry_how_they_are_granted() {
        let rules = rules(&["api.example.com:443", "*.example.org", "[::1]"]);
        let grant = |uri| destination(uri, &rules).ok().map(|d| d.grant);
        assert_eq!(grant("https://API.example.com/v1"), Some(HostGrant::ByName));
        assert_eq!(grant("http://a.example.org/"), Some(HostGrant::ByWildcard));
        assert_eq!(grant("http://[::1]:8080/"), Some(HostGrant::ByAddress));
        let d = destination("http://[::1]:8080/", &rules).ok().unwrap();
        assert_eq!(d.bare_host(), "::1");
        assert_eq!(d.port, 8080);
    }

    fn request_body(len: usize) -> LimitedRequestBody {
        let inner = http_body_util::Full::new(Bytes::from(vec![b'x'; len]))
            .map_err(|never| match never {})
            .boxed_unsync();
        LimitedRequestBody { inner, sent: 0 }
    }

    #[tokio::test]
    async fn a_request_body_past_the_cap_fails_with_a_body_size_error() {
        let cap = usize::try_from(MAX_REQUEST_BODY_BYTES).unwrap();
        let at_cap = request_body(cap).collect().await;
        assert_eq!(at_cap.map(|b| b.to_bytes().len()).ok(), Some(cap));
        let over = request_body(cap + 1).collect().await;
        assert!(
            matches!(over, Err(HttpError::HttpRequestBodySize(Some(n))) if n == MAX_REQUEST_BODY_BYTES + 1),
            "{over:?}"
        );
    }

    #[test]
    fn timeouts_never_exceed_the_runs_remaining_time() {
        let soon = Instant::now() + Duration::from_millis(200);
        assert!(bounded(None, Some(soon)) <= Duration::from_millis(200));
        assert!(bounded(Some(Duration::from_secs(60)), Some(soon)) <= Duration::from_millis(200));
        assert_eq!(
            bounded(Some(Duration::from_millis(5)), Some(soon)),
            Duration::from_millis(5)
        );
        assert_eq!(bounded(None, None), DEFAULT_TIMEOUT);
        let past = Instant::now() - Duration::from_millis(1);
        assert_eq!(bounded(None, Some(past)), Duration::ZERO);
    }
}
