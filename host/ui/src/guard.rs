//! Who may talk to the server: requests with the token, sent to this
//! server by its own pages.

use hyper::Request;
use hyper::header::{HOST, ORIGIN};

use crate::State;

/// Why a request is refused; the text is the response's body.
pub(crate) fn refusal<B>(state: &State, request: &Request<B>) -> Option<&'static str> {
    let host = request.headers().get(HOST).and_then(|h| h.to_str().ok());
    if !host.is_some_and(|host| is_ours(state.port, host)) {
        return Some("moat ui: refused: the Host is not this server (127.0.0.1 or localhost)");
    }
    if let Some(origin) = request.headers().get(ORIGIN) {
        let ours = origin.to_str().ok().and_then(|o| o.strip_prefix("http://"));
        if !ours.is_some_and(|origin| is_ours(state.port, origin)) {
            return Some("moat ui: refused: a page of another origin");
        }
    }
    if !token_of(request).is_some_and(|given| same(given.as_bytes(), state.token.as_bytes())) {
        return Some("moat ui: refused: no valid token; open the URL `moat ui` printed");
    }
    None
}

/// `127.0.0.1:PORT` or `localhost:PORT`.
fn is_ours(port: u16, host: &str) -> bool {
    let Some((name, given)) = host.rsplit_once(':') else {
        return false;
    };
    (name == "127.0.0.1" || name.eq_ignore_ascii_case("localhost"))
        && given.parse::<u16>().ok() == Some(port)
}

/// The token of the request: its `token` query parameter, else its
/// `X-Moat-Token` header.
fn token_of<B>(request: &Request<B>) -> Option<&str> {
    let from_query = request.uri().query().and_then(|query| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix("token="))
    });
    from_query.or_else(|| {
        request
            .headers()
            .get("x-moat-token")
            .and_then(|v| v.to_str().ok())
    })
}

/// Equal, in a time that does not depend on where they differ.
fn same(given: &[u8], token: &[u8]) -> bool {
    given.len() == token.len()
        && given
            .iter()
            .zip(token)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_servers_host_names_are_ours() {
        assert!(is_ours(8080, "127.0.0.1:8080"));
        assert!(is_ours(8080, "localhost:8080"));
        assert!(!is_ours(8080, "127.0.0.1:8081"));
        assert!(!is_ours(8080, "evil.example:8080"));
        assert!(!is_ours(8080, "127.0.0.1"));
        assert!(!is_ours(8080, "127.0.0.1.evil.example:8080"));
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abcd", b"abcd"));
        assert!(!same(b"abc", b"abcd"));
        assert!(!same(b"abce", b"abcd"));
        assert!(!same(b"", b"abcd"));
    }
}
