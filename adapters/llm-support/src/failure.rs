//! Failures before the stream starts (an HTTP error status, a connection
//! that cannot be made) as error events a user can act on. The messages
//! name the vendor's variables and the run's URL, model and grant.

use moat_guest::ErrorInfo;
use moat_guest::http;
use moat_guest::json::Value;

use crate::endpoint::Endpoint;

/// Longest part of a server's error message quoted in ours.
pub const MAX_QUOTED: usize = 500;

/// A failure, and what the `done` event's metadata says about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The error event's content.
    pub error: ErrorInfo,
    /// The HTTP status, when the server answered.
    pub status: Option<u16>,
    /// The server's `retry-after` header, when it sent one.
    pub retry_after: Option<String>,
}

impl Failure {
    /// A failure without an HTTP status.
    pub fn new(code: &str, message: impl Into<String>, recoverable: bool) -> Self {
        Self {
            error: ErrorInfo::new(code, message.into(), recoverable),
            status: None,
            retry_after: None,
        }
    }
}

/// The server at `endpoint` answered `status` (not 200) with `body` to a
/// request for `model`.
pub fn status_failure(
    endpoint: &Endpoint,
    model: &str,
    status: u16,
    headers: &[(String, Vec<u8>)],
    body: &[u8],
) -> Failure {
    let quoted = server_message(body)
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    let url = &endpoint.url;
    let key_var = endpoint.vendor.key_var;
    let key_hint = if endpoint.api_key.is_some() {
        format!("check the key in {key_var}")
    } else {
        format!(
            "{key_var} is not set (or not granted: --allow-env={key_var}); set it to a valid key"
        )
    };
    let retry_after = header(headers, "retry-after");
    // `retry-after` is seconds or an HTTP date.
    let retry = match retry_after.as_deref() {
        Some(after) if after.bytes().all(|b| b.is_ascii_digit()) => {
            format!("; retry after {after}s")
        }
        Some(after) => format!("; retry after {after}"),
        None => String::new(),
    };
    let (code, message, recoverable) = match status {
        401 => (
            "AUTH_FAILED",
            format!("{url} refused the API key (HTTP 401){quoted}; {key_hint}"),
            false,
        ),
        403 => (
            "AUTH_FAILED",
            format!(
                "{url} denied access (HTTP 403){quoted}; the key in {key_var} may lack access to model `{model}`"
            ),
            false,
        ),
        404 => (
            "MODEL_NOT_FOUND",
            format!(
                "{url} answered HTTP 404{quoted}; check --model `{model}`, and that the base URL (from {}) is the API root, {}",
                endpoint.source(),
                endpoint.vendor.base_url_example
            ),
            false,
        ),
        429 => (
            "RATE_LIMITED",
            format!("{url} is rate limiting (HTTP 429){quoted}{retry}"),
            true,
        ),
        503 | 529 => (
            "OVERLOADED",
            format!("{url} is overloaded (HTTP {status}){quoted}{retry}"),
            true,
        ),
        500..=599 => (
            "SERVER_ERROR",
            format!("{url} failed (HTTP {status}){quoted}{retry}"),
            true,
        ),
        _ => (
            "REQUEST_REJECTED",
            format!("{url} rejected the request (HTTP {status}){quoted}"),
            false,
        ),
    };
    Failure {
        error: ErrorInfo::new(code, message, recoverable),
        status: Some(status),
        retry_after,
    }
}

/// The request to `endpoint` could not be sent, or its answer not
/// received.
pub fn transport_failure(endpoint: &Endpoint, error: &http::Error) -> Failure {
    let url = &endpoint.url;
    let grant = &endpoint.grant;
    let source = endpoint.source();
    let http::Error::Http(code) = error else {
        return Failure::new(
            "CONNECTION_FAILED",
            format!("the request to {url} failed: {error}"),
            true,
        );
    };
    // Acted on by the code's name; shown in its words.
    match code.code.as_str() {
        "HttpRequestDenied" | "DestinationIpProhibited" => Failure::new(
            "HOST_NOT_GRANTED",
            format!(
                "this run may not reach {grant} (base URL from {source}); run again with --allow-net={grant}"
            ),
            false,
        ),
        "ConnectionRefused" => Failure::new(
            "CONNECTION_FAILED",
            format!(
                "connection refused by {grant}: is the server running? (base URL from {source}; set {} to use another)",
                endpoint.vendor.base_url_var
            ),
            true,
        ),
        "DnsError" | "DnsTimeout" | "DestinationNotFound" => Failure::new(
            "CONNECTION_FAILED",
            format!(
                "cannot resolve the host of {url} (DNS: {code}); check the base URL (from {source})"
            ),
            false,
        ),
        "ConnectionTimeout" | "ConnectionReadTimeout" | "HttpResponseTimeout" => Failure::new(
            "CONNECTION_FAILED",
            format!("{url} did not answer in time ({code})"),
            true,
        ),
        _ => Failure::new(
            "CONNECTION_FAILED",
            format!("the request to {url} failed: {code}"),
            true,
        ),
    }
}

/// A header's value, as text.
pub fn header(headers: &[(String, Vec<u8>)], name: &str) -> Option<String> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, value)| cut(String::from_utf8_lossy(value).trim(), 64))
        .filter(|value| !value.is_empty())
}

/// The message of an error body as both vendors shape it
/// (`{"error": {"message"}}`, OpenAI-compatible servers' `{"error": "…"}`
/// or `{"message": "…"}`); the body as text when it is not JSON.
pub fn server_message(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let message = match moat_guest::serde_json::from_str::<Value>(text).ok() {
        Some(json) => json
            .pointer("/error/message")
            .or_else(|| json.get("error"))
            .or_else(|| json.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| text.to_owned()),
        None => text.to_owned(),
    };
    Some(cut(&message, MAX_QUOTED))
}

/// `text` cut to at most `max` bytes, on a character boundary.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!("{}…", &text[..text.floor_char_boundary(max)])
}

#[cfg(test)]
mod tests;
