use super::*;
use crate::testing::endpoint;

fn local(key: Option<&str>) -> Endpoint {
    endpoint("http://127.0.0.1:8080/v1", key)
}

fn body(message: &str) -> Vec<u8> {
    format!(r#"{{"error":{{"message":"{message}","type":"x","code":null}}}}"#).into_bytes()
}

#[test]
fn auth_failures_name_the_key_variable_and_whether_it_was_seen() {
    let failure = status_failure(&local(None), "m", 401, &[], &body("Incorrect API key"));
    assert_eq!(failure.error.code.as_deref(), Some("AUTH_FAILED"));
    assert!(!failure.error.recoverable);
    assert!(failure.error.message.contains("Incorrect API key"));
    assert!(failure.error.message.contains("--allow-env=ACME_API_KEY"));
    let failure = status_failure(&local(Some("sk")), "m", 401, &[], b"");
    assert!(
        failure
            .error
            .message
            .contains("check the key in ACME_API_KEY")
    );
    let failure = status_failure(&local(Some("sk")), "m", 403, &[], b"");
    assert_eq!(failure.error.code.as_deref(), Some("AUTH_FAILED"));
    assert!(
        failure
            .error
            .message
            .contains("ACME_API_KEY may lack access to model `m`")
    );
}

#[test]
fn a_missing_model_names_the_model_the_base_url_source_and_the_vendors_example() {
    let failure = status_failure(&local(None), "acme-x", 404, &[], &body("model not found"));
    assert_eq!(failure.error.code.as_deref(), Some("MODEL_NOT_FOUND"));
    assert!(failure.error.message.contains("`acme-x`"));
    assert!(
        failure
            .error
            .message
            .ends_with("is the API root, e.g. http://localhost:8080/v1"),
        "{}",
        failure.error.message
    );
    assert!(failure.error.message.contains("ACME_BASE_URL"));
}

#[test]
fn rate_limits_and_server_errors_are_recoverable_with_retry_after() {
    let headers = [("Retry-After".to_string(), b"7".to_vec())];
    let failure = status_failure(&local(None), "m", 429, &headers, &body("slow down"));
    assert_eq!(failure.error.code.as_deref(), Some("RATE_LIMITED"));
    assert!(failure.error.recoverable);
    assert_eq!(failure.retry_after.as_deref(), Some("7"));
    assert!(failure.error.message.contains("retry after 7s"));
    let date = [(
        "retry-after".to_string(),
        b"Wed, 21 Oct 2026 07:28:00 GMT".to_vec(),
    )];
    let failure = status_failure(&local(None), "m", 429, &date, b"");
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
        let failure = status_failure(&local(None), "m", status, &[], b"<html>oops</html>");
        assert_eq!(failure.error.code.as_deref(), Some(code));
        assert!(failure.error.recoverable);
        assert!(failure.error.message.contains("<html>oops</html>"));
        assert_eq!(failure.status, Some(status));
    }
    let failure = status_failure(&local(None), "m", 400, &[], &body("bad field"));
    assert_eq!(failure.error.code.as_deref(), Some("REQUEST_REJECTED"));
    assert!(!failure.error.recoverable);
}

#[test]
fn transport_failures_say_what_to_do() {
    let denied = transport_failure(
        &local(None),
        &http::Error::Http(http::HttpFailure::new(
            "HttpRequestDenied",
            "HTTP request denied",
        )),
    );
    assert_eq!(denied.error.code.as_deref(), Some("HOST_NOT_GRANTED"));
    assert!(denied.error.message.contains("--allow-net=127.0.0.1:8080"));
    let refused = transport_failure(
        &local(None),
        &http::Error::Http(http::HttpFailure::new(
            "ConnectionRefused",
            "connection refused",
        )),
    );
    assert!(refused.error.message.contains("refused"));
    assert!(refused.error.message.contains("set ACME_BASE_URL"));
    assert!(refused.error.recoverable);
    let dns = transport_failure(
        &local(None),
        &http::Error::Http(http::HttpFailure::new("DnsError", "DNS lookup failed")),
    );
    assert!(dns.error.message.contains("resolve"));
    assert!(dns.error.message.contains("DNS lookup failed"));
    assert!(!dns.error.message.contains("DnsError"));
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
    assert_eq!(
        server_message(br#"{"type":"error","error":{"type":"x","message":"nested"}}"#).as_deref(),
        Some("nested")
    );
    assert_eq!(header(&[("A".into(), b"  ".to_vec())], "a"), None);
}
