//! Failures before the stream starts (an HTTP error status, a connection
//! that cannot be made) as error events a user can act on.

use moat_guest::ErrorInfo;
use moat_guest::http;
use moat_guest::json::Value;

use crate::config::{BASE_URL_VAR, Config, KEY_VAR};

/// Longest part of a server's error message quoted in ours.
const MAX_QUOTED: usize = 500;

/// A failure, and what the `done` event's metadata says about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub error: ErrorInfo,
    /// The HTTP status, when the server answered.
    pub status: Option<u16>,
    /// The server's `retry-after` header, when it sent one.
    pub retry_after: Option<String>,
}

impl Failure {
    fn new(code: &str, message: String, recoverable: bool) -> Self {
        Self {
            error: ErrorInfo::new(code, message, recoverable),
            status: None,
            retry_after: None,
        }
    }
}

/// The server answered `status` (not 200) with `body`.
pub fn status_failure(
    config: &Config,
    status: u16,
    headers: &[(String, Vec<u8>)],
    body: &[u8],
) -> Failure {
    let quoted = server_message(body)
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    let url = &config.url;
    let key_hint = if config.api_key.is_some() {
        format!("check the key in {KEY_VAR}")
    } else {
        format!(
            "{KEY_VAR} is not set (or not granted: --allow-env={KEY_VAR}); set it to a valid key"
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
                "{url} denied access (HTTP 403){quoted}; the key in {KEY_VAR} may lack access to model `{}`",
                config.model
            ),
            false,
        ),
        404 => (
            "MODEL_NOT_FOUND",
            format!(
                "{url} answered HTTP 404{quoted}; check --model `{}`, and that the base URL (from {}) is the API root, e.g. http://localhost:11434/v1",
                config.model,
                config.base_source.describe()
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

/// The request could not be sent, or its answer not received.
pub fn transport_failure(config: &Config, error: &http::Error) -> Failure {
    let url = &config.url;
    let grant = &config.grant;
    let source = config.base_source.describe();
    let http::Error::Http(code) = error else {
        return Failure::new(
            "CONNECTION_FAILED",
            format!("the request to {url} failed: {error}"),
            true,
        );
    };
    // The SDK shows the host's `wasi:http` error code in Debug form, e.g.
    // `ErrorCode::ConnectionRefused` or `ErrorCode::DnsError(…)`.
    let bare = code.strip_prefix("ErrorCode::").unwrap_or(code);
    let kind = bare.split(['(', ' ']).next().unwrap_or_default();
    match kind {
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
                "connection refused by {grant}: is the server running? (base URL from {source}; set {BASE_URL_VAR} to use another)"
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

/// The message of an OpenAI-style error body (`{"error": {"message"}}`,
/// or the error as a plain string); the body as text when it is not JSON.
pub fn server_message(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let message = match serde_json_value(text) {
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

fn serde_json_value(text: &str) -> Option<Value> {
    moat_guest::serde_json::from_str(text).ok()
}

/// `text` cut to at most `max` bytes, on a character boundary.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use moat_guest::Options;

    fn config(key: Option<&str>) -> Config {
        let options = Options {
            model: Some("gpt-x".into()),
            ..Options::default()
        };
        let key = key.map(str::to_owned);
        Config::new("hi", &options, move |name| match name {
            KEY_VAR => key.clone(),
            BASE_URL_VAR => Some("http://127.0.0.1:8080/v1".into()),
            _ => None,
        })
        .unwrap()
    }

    fn body(message: &str) -> Vec<u8> {
        format!(r#"{{"error":{{"message":"{message}","type":"x","code":null}}}}"#).into_bytes()
    }

    #[test]
    fn auth_failures_name_the_key_variable_and_whether_it_was_seen() {
        let failure = status_failure(&config(None), 401, &[], &body("Incorrect API key"));
        assert_eq!(failure.error.code.as_deref(), Some("AUTH_FAILED"));
        assert!(!failure.error.recoverable);
        assert!(failure.error.message.contains("Incorrect API key"));
        assert!(failure.error.message.contains("--allow-env=OPENAI_API_KEY"));
        let failure = status_failure(&config(Some("sk")), 401, &[], b"");
        assert!(
            failure
                .error
                .message
                .contains("check the key in OPENAI_API_KEY")
        );
        let failure = status_failure(&config(Some("sk")), 403, &[], b"");
        assert_eq!(failure.error.code.as_deref(), Some("AUTH_FAILED"));
        assert!(failure.error.message.contains("OPENAI_API_KEY"));
    }

    #[test]
    fn a_missing_model_names_the_model_and_the_base_url_source() {
        let failure = status_failure(&config(None), 404, &[], &body("model not found"));
        assert_eq!(failure.error.code.as_deref(), Some("MODEL_NOT_FOUND"));
        assert!(failure.error.message.contains("`gpt-x`"));
        assert!(failure.error.message.contains(BASE_URL_VAR));
    }

    #[test]
    fn rate_limits_and_server_errors_are_recoverable_with_retry_after() {
        let headers = [("Retry-After".to_string(), b"7".to_vec())];
        let failure = status_failure(&config(None), 429, &headers, &body("slow down"));
        assert_eq!(failure.error.code.as_deref(), Some("RATE_LIMITED"));
        assert!(failure.error.recoverable);
        assert_eq!(failure.retry_after.as_deref(), Some("7"));
        assert!(failure.error.message.contains("retry after 7s"));
        let date = [(
            "retry-after".to_string(),
            b"Wed, 21 Oct 2026 07:28:00 GMT".to_vec(),
        )];
        let failure = status_failure(&config(None), 429, &date, b"");
        assert!(
            failure
                .error
                .message
                .ends_with("retry after Wed, 21 Oct 2026 07:28:00 GMT"),
            "{}",
            failure.error.message
        );
        for (status, code) in [
            (500, "SERVER_ERROR"),
            (502, "SERVER_ERROR"),
            (503, "OVERLOADED"),
            (529, "OVERLOADED"),
        ] {
            let failure = status_failure(&config(None), status, &[], b"<html>oops</html>");
            assert_eq!(failure.error.code.as_deref(), Some(code));
            assert!(failure.error.recoverable);
            assert!(failure.error.message.contains("<html>oops</html>"));
            assert_eq!(failure.status, Some(status));
        }
        let failure = status_failure(&config(None), 400, &[], &body("bad field"));
        assert_eq!(failure.error.code.as_deref(), Some("REQUEST_REJECTED"));
        assert!(!failure.error.recoverable);
    }

    #[test]
    fn transport_failures_say_what_to_do() {
        let denied = transport_failure(
            &config(None),
            &http::Error::Http("HttpRequestDenied".into()),
        );
        assert_eq!(denied.error.code.as_deref(), Some("HOST_NOT_GRANTED"));
        assert!(denied.error.message.contains("--allow-net=127.0.0.1:8080"));
        let refused = transport_failure(
            &config(None),
            &http::Error::Http("ErrorCode::ConnectionRefused".into()),
        );
        assert!(refused.error.message.contains("refused"));
        assert!(refused.error.recoverable);
        let dns = transport_failure(
            &config(None),
            &http::Error::Http("DnsError(DnsErrorPayload { rcode: None, info_code: None })".into()),
        );
        assert!(dns.error.message.contains("resolve"));
        assert!(!dns.error.recoverable);
    }

    #[test]
    fn quoted_server_text_is_bounded() {
        let long = "é".repeat(1000);
        let quoted = server_message(long.as_bytes()).unwrap();
        assert!(quoted.len() <= MAX_QUOTED + "…".len());
        assert_eq!(server_message(b"  "), None);
        assert_eq!(
            server_message(br#"{"error":"plain"}"#).as_deref(),
            Some("plain")
        );
    }
}
