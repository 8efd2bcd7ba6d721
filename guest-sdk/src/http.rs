//! A small blocking HTTP client over `wasi:http/outgoing-handler`, the only
//! way an adapter reaches the network.
//!
//! The host sends a request only to a destination the run was granted
//! (`--allow-net`); anything else fails with [`Error::Http`] carrying the
//! host's error code ([`HttpFailure`]: its name, `HttpRequestDenied` or
//! `DestinationIpProhibited`, to act on, and its words, to show), and
//! the user sees a `CAPABILITY_DENIED` event naming the flag that would
//! allow it.
//!
//! ```no_run
//! use moat_guest::http::{Request, send};
//!
//! let response = send(&Request::get("https://api.example.com/v1/models"))?;
//! let body = response.read_to_end(1024 * 1024)?;
//! # Ok::<(), moat_guest::http::Error>(())
//! ```
//!
//! Built on the `wasi` crate's bindings. On native targets (unit tests of
//! an adapter) there is no host: [`send`] returns [`Error::Unsupported`].

use std::fmt;

/// An HTTP request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, … (any token).
    pub method: String,
    /// `http://` or `https://` URL.
    pub url: String,
    /// Header names and values, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body to send.
    pub body: Vec<u8>,
}

impl Request {
    /// A request with `method` to `url`, no headers, no body.
    pub fn new(method: &str, url: &str) -> Self {
        Self {
            method: method.to_owned(),
            url: url.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A `GET` of `url`.
    pub fn get(url: &str) -> Self {
        Self::new("GET", url)
    }

    /// Adds a header.
    pub fn with_header(mut self, name: &str, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push((name.to_owned(), value.into()));
        self
    }

    /// Sets the body.
    pub fn with_body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The URL is not `http(s)://authority[/path]`.
    InvalidUrl(String),
    /// The host refused a header (a forbidden or malformed one).
    InvalidHeader(String),
    /// The host's `wasi:http` error code, e.g. `HttpRequestDenied` when the
    /// run was not granted the destination.
    Http(HttpFailure),
    /// Reading or writing a body failed.
    Io(String),
    /// The response body is larger than the limit the caller gave.
    TooLarge(u64),
    /// The run was interrupted (the user aborted it) while the request
    /// waited for the server; the request is abandoned. End the run with a
    /// `done` of status `interrupted`.
    Interrupted,
    /// Not running inside a component.
    Unsupported,
}

/// A `wasi:http` error code: its name, to act on, and what it says in
/// words, to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpFailure {
    /// The code's name in the WIT's case (`HttpRequestDenied`,
    /// `DnsError`, `ConnectionRefused`, …).
    pub code: String,
    /// What it says, in words ("HTTP request denied", "DNS lookup failed:
    /// NXDOMAIN").
    pub message: String,
}

impl HttpFailure {
    /// The failure `code`, said as `message`.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

impl fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidUrl(url) => write!(f, "invalid URL {url:?}"),
            Error::InvalidHeader(reason) => write!(f, "invalid header: {reason}"),
            Error::Http(code) => write!(f, "HTTP error: {code}"),
            Error::Io(reason) => write!(f, "body I/O failed: {reason}"),
            Error::TooLarge(limit) => write!(f, "the response body exceeds {limit} bytes"),
            Error::Interrupted => {
                f.write_str("the run was interrupted while waiting for the server")
            }
            Error::Unsupported => f.write_str("wasi:http is only available inside a component"),
        }
    }
}

impl std::error::Error for Error {}

/// The parts of a URL `wasi:http` takes separately.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Url<'a> {
    https: bool,
    authority: &'a str,
    path_with_query: &'a str,
}

fn parse_url(url: &str) -> Result<Url<'_>, Error> {
    let invalid = || Error::InvalidUrl(url.to_owned());
    let (scheme, rest) = url.split_once("://").ok_or_else(invalid)?;
    let https = match scheme.to_ascii_lowercase().as_str() {
        "http" => false,
        "https" => true,
        _ => return Err(invalid()),
    };
    // The fragment is never sent.
    let rest = rest.split('#').next().unwrap_or_default();
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.is_empty() {
        return Err(invalid());
    }
    let path_with_query = if path.is_empty() { "/" } else { path };
    Ok(Url {
        https,
        authority,
        path_with_query,
    })
}

#[cfg(target_arch = "wasm32")]
pub use component::{Response, send};

#[cfg(not(target_arch = "wasm32"))]
pub use native::{Response, send};

/// The name of a `wasi:http` error code's variant, from the bindings'
/// debug form (`ErrorCode::DnsError(…)` → `DnsError`).
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn variant_name(debug: &str) -> &str {
    let name = debug.trim_start_matches("ErrorCode::");
    name.split(['(', ' ', '{']).next().unwrap_or(name)
}

/// A variant's name in words (`ConnectionRefused` → "connection refused").
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn variant_words(name: &str) -> String {
    let mut words = String::new();
    for (at, c) in name.char_indices() {
        if c.is_ascii_uppercase() && at > 0 {
            words.push(' ');
        }
        words.push(c.to_ascii_lowercase());
    }
    words
        .replace("dns", "DNS")
        .replace("tls", "TLS")
        .replace("http", "HTTP")
}

#[cfg(target_arch = "wasm32")]
mod component {
    use wasi::clocks::monotonic_clock;
    use wasi::http::outgoing_handler;
    use wasi::http::types::{
        ErrorCode, Fields, IncomingBody, IncomingResponse, Method, OutgoingBody, OutgoingRequest,
        Scheme,
    };
    use wasi::io::poll::{self, Pollable};
    use wasi::io::streams::{InputStream, StreamError};

    use super::{Error, Request, parse_url};

    /// Largest chunk read from a response body at once.
    const CHUNK: u64 = 64 * 1024;
    /// How often a wait for the server looks at the run's abort flag, in
    /// nanoseconds: a server that is slow or silent must not keep an
    /// aborted run waiting for the host to cut it off.
    const INTERRUPT_CHECK_NS: u64 = 20_000_000;

    /// Waits until `pollable` is ready, or fails with
    /// [`Error::Interrupted`] once the run is interrupted.
    fn wait(pollable: &Pollable) -> Result<(), Error> {
        loop {
            if pollable.ready() {
                return Ok(());
            }
            if crate::interrupted() {
                return Err(Error::Interrupted);
            }
            let tick = monotonic_clock::subscribe_duration(INTERRUPT_CHECK_NS);
            poll::poll(&[pollable, &tick]);
        }
    }

    /// A response whose body is read in chunks.
    pub struct Response {
        /// The status code.
        pub status: u16,
        /// Header names and values, in order.
        pub headers: Vec<(String, Vec<u8>)>,
        // Dropped in this order: a stream before its body, a body before
        // its response.
        stream: InputStream,
        _body: IncomingBody,
        _response: IncomingResponse,
    }

    impl Response {
        /// The next chunk of the body (moat's host hands over in one read
        /// whatever arrived since the last, however many writes of the
        /// server it came in); `None` at its end. Fails with
        /// [`Error::Interrupted`] when the run is interrupted while the
        /// server sends nothing.
        pub fn read_chunk(&mut self) -> Result<Option<Vec<u8>>, Error> {
            loop {
                match self.stream.read(CHUNK) {
                    Ok(chunk) if !chunk.is_empty() => return Ok(Some(chunk)),
                    Ok(_) => wait(&self.stream.subscribe())?,
                    Err(StreamError::Closed) => return Ok(None),
                    Err(StreamError::LastOperationFailed(error)) => {
                        return Err(Error::Io(error.to_debug_string()));
                    }
                }
            }
        }

        /// The whole body, refused past `limit` bytes.
        pub fn read_to_end(mut self, limit: u64) -> Result<Vec<u8>, Error> {
            let mut body = Vec::new();
            while let Some(chunk) = self.read_chunk()? {
                body.extend_from_slice(&chunk);
                if body.len() as u64 > limit {
                    return Err(Error::TooLarge(limit));
                }
            }
            Ok(body)
        }
    }

    /// Writes the whole request body and finishes it.
    fn write_body(body: OutgoingBody, bytes: &[u8]) -> Result<(), Error> {
        {
            let stream = body
                .write()
                .map_err(|()| Error::Io("the request body is unavailable".into()))?;
            // The host accepts at most 4096 bytes per blocking write.
            for chunk in bytes.chunks(4096) {
                stream
                    .blocking_write_and_flush(chunk)
                    .map_err(|e| Error::Io(format!("{e:?}")))?;
            }
        }
        OutgoingBody::finish(body, None).map_err(http_error)
    }

    fn http_error(code: ErrorCode) -> Error {
        let debug = format!("{code:?}");
        Error::Http(super::HttpFailure::new(
            super::variant_name(&debug),
            describe(&code),
        ))
    }

    /// What `code` says, in words ("connection refused", "DNS lookup
    /// failed: NXDOMAIN"), never the bindings' debug form with its type
    /// names.
    fn describe(code: &ErrorCode) -> String {
        let with = |what: &str, detail: Option<&str>| match detail {
            Some(detail) if !detail.is_empty() => format!("{what}: {detail}"),
            _ => what.to_owned(),
        };
        match code {
            ErrorCode::DnsError(payload) => with("DNS lookup failed", payload.rcode.as_deref()),
            ErrorCode::TlsAlertReceived(payload) => {
                with("TLS alert received", payload.alert_message.as_deref())
            }
            ErrorCode::InternalError(message) => with("internal error", message.as_deref()),
            other => super::variant_words(super::variant_name(&format!("{other:?}"))),
        }
    }

    fn method(name: &str) -> Method {
        match name.to_ascii_uppercase().as_str() {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "CONNECT" => Method::Connect,
            "OPTIONS" => Method::Options,
            "TRACE" => Method::Trace,
            "PATCH" => Method::Patch,
            _ => Method::Other(name.to_owned()),
        }
    }

    /// Sends `request` and waits for the response's head; the body is
    /// read from the [`Response`]. Fails with [`Error::Interrupted`] when
    /// the run is interrupted while waiting.
    pub fn send(request: &Request) -> Result<Response, Error> {
        let url = parse_url(&request.url)?;
        let mut entries = request.headers.clone();
        // A known length is sent as such: without it the body goes out
        // chunked, which some servers refuse.
        let has_length = entries
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-length"));
        if !request.body.is_empty() && !has_length {
            entries.push((
                "content-length".to_owned(),
                request.body.len().to_string().into_bytes(),
            ));
        }
        let headers =
            Fields::from_list(&entries).map_err(|e| Error::InvalidHeader(format!("{e:?}")))?;
        let outgoing = OutgoingRequest::new(headers);
        let invalid = |what: &str| Error::InvalidUrl(format!("{}: bad {what}", request.url));
        outgoing
            .set_method(&method(&request.method))
            .map_err(|()| {
                Error::Http(super::HttpFailure::new(
                    "HttpRequestMethodInvalid",
                    format!("invalid method {:?}", request.method),
                ))
            })?;
        let scheme = if url.https {
            Scheme::Https
        } else {
            Scheme::Http
        };
        outgoing
            .set_scheme(Some(&scheme))
            .map_err(|()| invalid("scheme"))?;
        outgoing
            .set_authority(Some(url.authority))
            .map_err(|()| invalid("authority"))?;
        outgoing
            .set_path_with_query(Some(url.path_with_query))
            .map_err(|()| invalid("path"))?;
        let body = outgoing
            .body()
            .map_err(|()| Error::Io("the request body is unavailable".into()))?;

        // Sent first, so the host reads the body while it is written.
        let pending = outgoing_handler::handle(outgoing, None).map_err(http_error)?;
        let written = write_body(body, &request.body);

        wait(&pending.subscribe())?;
        let response = match pending.get() {
            Some(Ok(Ok(response))) => response,
            // A request refused or failed (denied, connection refused, DNS)
            // also breaks the body being written: the request's own error
            // says why, so it goes first.
            Some(Ok(Err(code))) => return Err(http_error(code)),
            Some(Err(())) | None => {
                return Err(Error::Http(super::HttpFailure::new(
                    "InternalError",
                    "the response was already taken",
                )));
            }
        };
        written?;
        let status = response.status();
        let headers = response.headers().entries();
        let body = response
            .consume()
            .map_err(|()| Error::Io("the response body is unavailable".into()))?;
        let stream = body
            .stream()
            .map_err(|()| Error::Io("the response body is unavailable".into()))?;
        Ok(Response {
            status,
            headers,
            stream,
            _body: body,
            _response: response,
        })
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use super::{Error, Request, parse_url};

    /// A response whose body is read in chunks. Never made natively.
    pub struct Response {
        /// The status code.
        pub status: u16,
        /// Header names and values, in order.
        pub headers: Vec<(String, Vec<u8>)>,
    }

    impl Response {
        /// The next chunk of the body; `None` at its end.
        pub fn read_chunk(&mut self) -> Result<Option<Vec<u8>>, Error> {
            Err(Error::Unsupported)
        }

        /// The whole body, refused past `limit` bytes.
        pub fn read_to_end(self, _limit: u64) -> Result<Vec<u8>, Error> {
            Err(Error::Unsupported)
        }
    }

    /// Checks the URL, then fails: there is no host outside a component.
    pub fn send(request: &Request) -> Result<Response, Error> {
        parse_url(&request.url)?;
        Err(Error::Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_codes_variant_is_said_in_words() {
        assert_eq!(
            variant_words(variant_name("ErrorCode::ConnectionRefused")),
            "connection refused"
        );
        assert_eq!(
            variant_words(variant_name("ErrorCode::DnsTimeout")),
            "DNS timeout"
        );
        assert_eq!(
            variant_name("ErrorCode::HttpRequestBodySize(Some(3))"),
            "HttpRequestBodySize"
        );
        assert_eq!(
            variant_words("HttpRequestBodySize"),
            "HTTP request body size"
        );
    }

    #[test]
    fn urls_split_into_scheme_authority_and_path() {
        let url = parse_url("https://api.example.com:8443/v1/x?q=1#frag").unwrap();
        assert!(url.https);
        assert_eq!(url.authority, "api.example.com:8443");
        assert_eq!(url.path_with_query, "/v1/x?q=1");
        let url = parse_url("http://[::1]:8080").unwrap();
        assert!(!url.https);
        assert_eq!(url.authority, "[::1]:8080");
        assert_eq!(url.path_with_query, "/");
        assert_eq!(parse_url("http://h?x").unwrap().path_with_query, "?x");
        for bad in ["ftp://x", "no-scheme", "http://", "http:///path"] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn natively_there_is_no_network() {
        assert_eq!(
            send(&Request::get("http://127.0.0.1/")).err(),
            Some(Error::Unsupported)
        );
    }
}
