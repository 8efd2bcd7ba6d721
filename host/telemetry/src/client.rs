//! The OTLP exporter's HTTP client: one HTTP/1.1 request per export over a
//! fresh connection, written and read right there on the SDK's batch
//! thread — the one thread that exports, and one that may block. Export
//! needs no runtime and no thread of its own (they were most of what it
//! cost a short run: docs/performance.md), and works as well while moat's
//! runtime is busy or gone, at the process's end. The reply's head is
//! read by httparse, hyper's own parser.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use opentelemetry_http::{HttpClient, HttpError};

/// How long connecting, and each write or read of one export, may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of a collector's reply that is read: it says how the export
/// went, in a few bytes.
const MAX_REPLY_BYTES: u64 = 1024 * 1024;

/// Sends each export on a connection of its own, blocking the caller.
#[derive(Debug, Default)]
pub(crate) struct Client;

#[async_trait::async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        send(request)
    }
}

/// `request` over a fresh HTTP/1.1 connection (`Connection: close`), and
/// the collector's reply.
fn send(request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
    let (parts, body) = request.into_parts();
    let host = parts.uri.host().ok_or("a URL without a host")?;
    let port = parts.uri.port_u16().unwrap_or(80);
    let address = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| format!("{host} has no address"))?;
    let mut stream = TcpStream::connect_timeout(&address, EXPORT_TIMEOUT)?;
    stream.set_read_timeout(Some(EXPORT_TIMEOUT))?;
    stream.set_write_timeout(Some(EXPORT_TIMEOUT))?;
    let authority = parts
        .uri
        .authority()
        .map_or_else(|| host.to_owned(), ToString::to_string);
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut head = format!(
        "{} {path} HTTP/1.1\r\nhost: {authority}\r\ncontent-length: {}\r\nconnection: close\r\n",
        parts.method,
        body.len()
    )
    .into_bytes();
    for (name, value) in &parts.headers {
        let set_here = [
            http::header::HOST,
            http::header::CONTENT_LENGTH,
            http::header::CONNECTION,
        ];
        if !set_here.contains(name) {
            head.extend_from_slice(name.as_str().as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(value.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
    }
    head.extend_from_slice(b"\r\n");
    stream.write_all(&head)?;
    stream.write_all(&body)?;
    let mut reply = Vec::new();
    stream.take(MAX_REPLY_BYTES).read_to_end(&mut reply)?;
    reply_of(&reply)
}

/// The collector's reply, from its bytes: its status and, when it said how
/// long it is, its body (a chunked one is not read: the status is what the
/// exporter needs).
fn reply_of(bytes: &[u8]) -> Result<Response<Bytes>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Response::new(&mut headers);
    let httparse::Status::Complete(head_length) = parsed.parse(bytes)? else {
        return Err("the collector's reply ended inside its head".into());
    };
    let status = parsed.code.ok_or("a reply without a status")?;
    let length = parsed
        .headers
        .iter()
        .find(|header| header.name.eq_ignore_ascii_case("content-length"))
        .and_then(|header| std::str::from_utf8(header.value).ok())
        .and_then(|value| value.trim().parse::<usize>().ok());
    let rest = &bytes[head_length..];
    let body = match length {
        Some(length) => &rest[..length.min(rest.len())],
        None => &[][..],
    };
    Ok(Response::builder()
        .status(status)
        .body(Bytes::copy_from_slice(body))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_gives_its_status_and_the_body_its_length_says() {
        let reply = reply_of(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcdef").unwrap();
        assert_eq!(reply.status(), 200);
        assert_eq!(reply.body().as_ref(), b"abc");
        let chunked =
            reply_of(b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc")
                .unwrap();
        assert_eq!(chunked.status(), 400);
        assert!(chunked.body().is_empty());
        assert!(reply_of(b"HTTP/1.1 200 OK\r\nContent-").is_err());
        assert!(reply_of(b"garbage\r\n\r\n").is_err());
    }
}
