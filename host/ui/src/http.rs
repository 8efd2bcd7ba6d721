//! HTTP/1.1 with hyper: one connection, its requests checked and routed,
//! and the embedded assets.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::response::{Body, full, text};
use crate::{State, api, guard};

/// The largest request body read (an approval's answer, a workflow's
/// path).
const MAX_BODY: usize = 64 * 1024;

const INDEX: &str = include_str!("../assets/index.html");
const APP_JS: &[u8] = include_bytes!("../assets/app.js");
const APP_CSS: &[u8] = include_bytes!("../assets/app.css");

/// Serves one connection until it closes or the server stops.
pub(crate) async fn connection(state: Arc<State>, stream: TcpStream, stop: CancellationToken) {
    let service = service_fn(move |request| {
        let state = state.clone();
        async move { Ok::<_, Infallible>(respond(state, request).await) }
    });
    let connection =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        result = connection => {
            if let Err(error) = result {
                tracing::debug!("moat ui: connection: {error}");
            }
        }
        () = stop.cancelled() => {}
    }
}

async fn respond(state: Arc<State>, request: Request<Incoming>) -> Response<Body> {
    if let Some(why) = guard::refusal(&state, &request) {
        return text(StatusCode::FORBIDDEN, why);
    }
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    let last_event_id = request
        .headers()
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut response = match (&method, segments.as_slice()) {
        (&Method::GET, [""]) => index(&state),
        (&Method::GET, ["assets", "app.js"]) => asset(APP_JS, "text/javascript; charset=utf-8"),
        (&Method::GET, ["assets", "app.css"]) => asset(APP_CSS, "text/css; charset=utf-8"),
        (&Method::GET, ["api", "runs"]) => api::list(&state, &query).await,
        (&Method::GET, ["api", "runs", "stream"]) => api::list_stream(&state, &query),
        (&Method::GET, ["api", "runs", id]) => api::run(&state, id).await,
        (&Method::GET, ["api", "runs", id, "events"]) => {
            api::events(&state, id, &query, last_event_id.as_deref()).await
        }
        (&Method::GET, ["api", "runs", id, "diff"]) => api::diff(&state, id).await,
        (&Method::GET, ["api", "runs", id, "traffic"]) => api::traffic(&state, id).await,
        (&Method::GET, ["api", "runs", id, "workflow"]) => api::workflow(&state, id).await,
        (&Method::POST, ["api", "runs", id, "cancel"]) => api::cancel(&state, id).await,
        (&Method::POST, ["api", "workflows"]) => match read_body(request).await {
            Ok(body) => api::start_workflow(&state, &body).await,
            Err(response) => response,
        },
        (&Method::POST, ["api", "runs", id, "approvals", number]) => {
            match read_body(request).await {
                Ok(body) => api::answer(&state, id, number, &body).await,
                Err(response) => response,
            }
        }
        (_, ["api", ..] | [""] | ["assets", _]) => {
            text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        _ => text(StatusCode::NOT_FOUND, "not found"),
    };
    let headers = response.headers_mut();
    // The token is in the page's URL: it must not leave in a Referer, and
    // the page is never framed by another.
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
             img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
             form-action 'none'",
        ),
    );
    response
}

/// The page, its asset URLs carrying the token.
fn index(state: &State) -> Response<Body> {
    let page = INDEX.replace("__MOAT_TOKEN__", &state.token);
    let mut response = Response::new(full(page));
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn asset(bytes: &'static [u8], kind: &'static str) -> Response<Body> {
    let mut response = Response::new(full(Bytes::from_static(bytes)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    response
}

/// The request's body, at most [`MAX_BODY`] bytes.
async fn read_body(request: Request<Incoming>) -> Result<Bytes, Response<Body>> {
    match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(_) => Err(text(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request's body is too large or broken",
        )),
    }
}
