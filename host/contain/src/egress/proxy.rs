//! The proxy through which a run's programs reach the network: HTTP/1.1
//! forward requests (`GET http://host/…`) and tunnels (`CONNECT
//! host:port`), each checked against the run's `--allow-net` rules exactly
//! as a component's requests are ([`Destination`]).
//!
//! - A forward request is checked as `http`; it goes to the origin with
//!   its path only and the granted `Host`, without the proxy's own headers.
//! - A tunnel is checked as `https` (what passes through it is opaque, so
//!   a rule for `http://` only does not open it).
//! - A refusal answers `403 Forbidden`, with a body saying what was refused
//!   and the grant that would allow it, and is recorded as the run's
//!   `CAPABILITY_DENIED` event; a destination that cannot be reached
//!   answers `502 Bad Gateway`.
//!
//! The proxy runs as long as the run's programs may: dropping it closes
//! its socket and every connection it holds.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use moat_grants::{NetRule, Scheme};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::denials::DenialLog;
use crate::destination::{ConnectFailure, Destination, shown};
use crate::traffic::{Exchange, Kind, Recording, Traffic, WatchedBody, Who};

/// How long connecting to a destination may take when the run's time
/// allows more.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Bytes a tunnel moves per read, each way (tokio's default, 8 KiB, costs
/// a system call pair per 8 KiB of a large download).
const TUNNEL_BUFFER: usize = 64 * 1024;

/// Headers meant for the proxy or for one hop only: never forwarded.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
];

/// What the proxy lets through, and where its refusals go.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The run's network grants.
    pub rules: Arc<[NetRule]>,
    /// Where a refusal is recorded, for the run's events.
    pub denials: DenialLog,
    /// The end of the run's time: no connection is made after it.
    pub deadline: Option<Instant>,
    /// The run's open connections (shared with its components' requests).
    pub connections: Arc<tokio::sync::Semaphore>,
    /// The run's secrets, each on its route ([`SECRET_ROUTE`]).
    pub secrets: crate::Secrets,
    /// The credential a request must carry, when the proxy listens where
    /// processes outside the run could reach it (the host's loopback,
    /// without namespaces): `Proxy-Authorization: Basic moat:TOKEN`, and
    /// the token as the first segment of a secret's route.
    pub token: Option<String>,
    /// Who is asked for a destination no rule grants ([`crate::approvals`]);
    /// `None`: refused at once.
    pub asking: Option<crate::Asking>,
    /// The run's own network, where a loopback destination is looked for
    /// first: what its programs serve there.
    pub own_network: super::OwnNetwork,
    /// Where what passes is recorded, and which destinations are model
    /// APIs.
    pub traffic: Traffic,
}

/// The answer when the run has all its connections open.
fn all_connections_open() -> Response<ProxyBody> {
    answer(
        StatusCode::TOO_MANY_REQUESTS,
        "moat's proxy: the run has as many connections open as it may".into(),
    )
}

/// The path under which a secret's route starts: `/moat-secret/NAME/…`
/// goes to the secret's destination with the secret added.
pub(crate) const SECRET_ROUTE: &str = "/moat-secret/";

/// A running proxy; stopped when dropped.
#[derive(Debug)]
pub(crate) struct Proxy {
    task: tokio::task::JoinHandle<()>,
    /// Dropped with the proxy: the tunnels and forwarded requests, which
    /// outlive the connection that asked for them, end then.
    _open: tokio::sync::watch::Sender<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Serves `listener` (listening, non-blocking) under `policy`.
    pub(crate) fn serve(listener: std::net::TcpListener, policy: Policy) -> std::io::Result<Self> {
        let port = listener.local_addr()?.port();
        let listener = TcpListener::from_std(listener)?;
        let (open, closed) = tokio::sync::watch::channel(());
        let policy = Arc::new(Served {
            policy,
            closed,
            port,
        });
        let task = tokio::spawn(async move {
            // Dropped with the task: every connection ends with the proxy.
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((stream, peer)) = accepted else {
                            // Out of descriptors, say: wait rather than spin.
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        };
                        // A response's head and body go out as two writes:
                        // without this, the body waits for the program's
                        // delayed ACK (~40 ms a request).
                        let _ = stream.set_nodelay(true);
                        let policy = policy.clone();
                        connections.spawn(serve_connection(TokioIo::new(stream), policy, Some(peer)));
                    }
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        });
        Ok(Self { task, _open: open })
    }
}

type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// The policy of a running proxy, and the signal that it stopped.
struct Served {
    policy: Policy,
    closed: tokio::sync::watch::Receiver<()>,
    /// The proxy's own port: a forward request to it is for one of its
    /// routes (a program that sends every request through the proxy, its
    /// base URL's too).
    port: u16,
}

impl Served {
    /// Whether `request` carries the proxy's credential, when it has one.
    fn authorized<B>(&self, request: &Request<B>) -> bool {
        let Some(token) = &self.policy.token else {
            return true;
        };
        use base64::Engine as _;
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("moat:{token}"))
        );
        request
            .headers()
            .get(http::header::PROXY_AUTHORIZATION)
            .is_some_and(|given| given.as_bytes() == expected.as_bytes())
    }

    /// Whether `uri` addresses the proxy itself: origin-form, or its own
    /// loopback address and port.
    fn is_for_itself(&self, uri: &http::Uri) -> bool {
        match uri.authority() {
            None => true,
            Some(authority) => {
                matches!(authority.host(), "127.0.0.1" | "localhost")
                    && authority.port_u16() == Some(self.port)
            }
        }
    }

    /// Who sent `request`, when moat made the connection it came on.
    fn caller(&self, request: &Request<Incoming>) -> Option<crate::traffic::Caller> {
        let Peer(from) = request.extensions().get::<Peer>()?;
        self.policy.traffic.caller(*from)
    }

    /// Runs `work` until it ends or the proxy stops.
    fn spawn_until_closed(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut closed = self.closed.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = work => {}
                _ = closed.changed() => {}
            }
        });
    }
}

/// The address a program's connection to the proxy came from, in each
/// of its requests: who sent it ([`Served::caller`]).
#[derive(Debug, Clone, Copy)]
struct Peer(std::net::SocketAddr);

/// Serves one connection of a program, which came from `peer`: TCP, or a
/// tunnel it opened to the proxy itself. Boxed: a tunnel's connection is
/// served from within another's, and the future's type cannot contain
/// itself.
fn serve_connection<I>(
    io: I,
    policy: Arc<Served>,
    peer: Option<std::net::SocketAddr>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    Box::pin(async move {
        let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            if let Some(peer) = peer {
                request.extensions_mut().insert(Peer(peer));
            }
            let policy = policy.clone();
            async move { Ok::<_, Infallible>(handle(request, &policy).await) }
        });
        let served = hyper::server::conn::http1::Builder::new()
            .preserve_header_case(true)
            .serve_connection(io, service)
            .with_upgrades()
            .await;
        if let Err(error) = served {
            tracing::debug!("a program's proxy connection ended: {error}");
        }
    })
}

async fn handle(request: Request<Incoming>, policy: &Arc<Served>) -> Response<ProxyBody> {
    // The run's approvals: its token in the path, as a secret's route.
    if request
        .uri()
        .path()
        .starts_with(super::approvals::APPROVAL_ROUTE)
        && policy.is_for_itself(request.uri())
    {
        let policy = &policy.policy;
        return super::approvals::serve(request, policy.token.as_deref(), policy.asking.clone())
            .await;
    }
    let route =
        request.uri().path().starts_with(SECRET_ROUTE) && policy.is_for_itself(request.uri());
    // A route carries the token in its path (a program may reach it
    // without the proxy's variables); anything else, in the header.
    if !route && !policy.authorized(&request) {
        let mut refused = answer(
            StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            "moat's proxy serves only the run it belongs to".into(),
        );
        refused.headers_mut().insert(
            http::header::PROXY_AUTHENTICATE,
            http::HeaderValue::from_static("Basic realm=\"moat\""),
        );
        return refused;
    }
    if request.method() == Method::CONNECT {
        tunnel(request, policy).await
    } else if route {
        secret_route(request, policy).await
    } else {
        forward(request, policy).await
    }
}

/// `CONNECT host:port`: a granted destination gets a tunnel.
async fn tunnel(request: Request<Incoming>, served: &Arc<Served>) -> Response<ProxyBody> {
    let Some((host, port)) = request
        .uri()
        .authority()
        .and_then(|authority| Some((authority.host().to_owned(), authority.port_u16()?)))
    else {
        return answer(
            StatusCode::BAD_REQUEST,
            "moat's proxy: CONNECT needs host:port".into(),
        );
    };
    if served.is_for_itself(request.uri()) {
        // A program that tunnels every request (Node's proxy agents do,
        // plain http too) tunnels to the proxy's own routes: what comes
        // through is served as a connection of its own.
        // Each takes one of the run's connections, as any tunnel does, so
        // tunnels nested in tunnels cannot grow without bound.
        let Ok(slot) = served.policy.connections.clone().try_acquire_owned() else {
            return all_connections_open();
        };
        let again = served.clone();
        let peer = request.extensions().get::<Peer>().map(|Peer(from)| *from);
        served.spawn_until_closed(async move {
            let _slot = slot;
            if let Ok(upgraded) = hyper::upgrade::on(request).await {
                serve_connection(upgraded, again, peer).await;
            }
        });
        return Response::new(empty());
    }
    let policy = &served.policy;
    let vendor = policy.traffic.vendor(Scheme::Https, &host, port);
    let mut recording = Recording::start(
        &policy.traffic,
        Exchange::new(Who::Program, Kind::Tunnel, Scheme::Https, &host, port)
            .by(served.caller(&request)),
        vendor,
    );
    if vendor.is_some() && policy.traffic.refuses_unmetered() {
        return unmetered_refused(&host, port, policy, &mut recording);
    }
    if let Some(refused) = stopped(&mut recording) {
        return refused;
    }
    let reached = match reach(Scheme::Https, &host, port, policy, &mut recording).await {
        Ok(reached) => reached,
        Err(response) => return response,
    };
    recording.row().status = Some(200);
    served.spawn_until_closed(async move {
        let Reached {
            destination,
            mut stream,
            slot: _slot,
        } = reached;
        let Ok(upgraded) = hyper::upgrade::on(request).await else {
            recording.failed("the program did not take the tunnel");
            return;
        };
        let mut program = TokioIo::new(upgraded);
        let moved = tokio::io::copy_bidirectional_with_sizes(
            &mut program,
            &mut stream,
            TUNNEL_BUFFER,
            TUNNEL_BUFFER,
        )
        .await;
        match moved {
            Ok((sent, received)) => {
                recording.add_sent(sent);
                recording.received(&[]);
                recording.row().received = received;
            }
            Err(error) => recording.failed(error),
        }
        tracing::debug!(host = shown(&destination.host), "a program's tunnel closed");
    });
    Response::new(empty())
}

/// A model call of a run that was stopped: refused, so the call that
/// crossed its budget is its last.
fn stopped(recording: &mut Recording) -> Option<Response<ProxyBody>> {
    let reason = recording.refused_after_stop()?;
    Some(answer(
        StatusCode::FORBIDDEN,
        format!("moat refused this request: {reason}"),
    ))
}

/// A tunnel to a model API under a budget in tokens or dollars: its calls
/// could not be read, so they could not be counted.
fn unmetered_refused(
    host: &str,
    port: u16,
    policy: &Policy,
    recording: &mut Recording,
) -> Response<ProxyBody> {
    let denial = moat_engine::Denial {
        request: moat_engine::DeniedRequest::Net {
            scheme: "https".into(),
            host: host.to_owned(),
            port,
        },
        reason: "a tunnel to a model API carries calls moat cannot read (TLS end to end), \
                 and the run has a budget in tokens or dollars: reach it through a secret's \
                 route (a secret grant NAME@HOST), whose calls moat reads"
            .into(),
        remedy: Some(moat_engine::Grant::Unmetered),
    };
    let message = format!("moat refused this request: {denial}");
    let row = recording.row();
    row.refused = Some(denial.reason.clone());
    row.unmetered = true;
    policy.denials.record(denial);
    answer(StatusCode::FORBIDDEN, message)
}

/// `GET http://host/path`: a granted destination gets the request.
async fn forward(request: Request<Incoming>, served: &Served) -> Response<ProxyBody> {
    let uri = request.uri().clone();
    if uri.scheme_str() != Some("http") {
        return answer(
            StatusCode::BAD_REQUEST,
            "moat's proxy forwards http:// URLs; use CONNECT for https".into(),
        );
    }
    let Some(host) = uri.host().filter(|host| !host.is_empty()) else {
        return answer(
            StatusCode::BAD_REQUEST,
            "moat's proxy: the URL has no host".into(),
        );
    };
    let port = uri.port_u16().unwrap_or(80);
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let policy = &served.policy;
    let mut recording = Recording::request(
        &policy.traffic,
        Exchange::new(Who::Program, Kind::Request, Scheme::Http, host, port)
            .by(served.caller(&request))
            .request(request.method().as_str(), &path),
        Scheme::Http,
        &path,
    );
    if let Some(refused) = stopped(&mut recording) {
        return refused;
    }
    let Reached {
        destination,
        stream,
        slot,
    } = match reach(Scheme::Http, host, port, policy, &mut recording).await {
        Ok(reached) => reached,
        Err(response) => return response,
    };
    let upstream: Box<dyn Upstream> = Box::new(stream);
    send_to_origin(
        served,
        request,
        &path,
        &destination,
        upstream,
        slot,
        recording,
    )
    .await
}

/// `/moat-secret/NAME/…`: the rest of the path goes to the secret's
/// destination (over TLS unless its grant says `http://`), its header set
/// to the secret. The destination must be granted like any other.
async fn secret_route(mut request: Request<Incoming>, served: &Served) -> Response<ProxyBody> {
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let rest = &path[SECRET_ROUTE.len()..];
    let rest = match &served.policy.token {
        None => rest,
        Some(token) => match rest
            .strip_prefix(token.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
        {
            Some(rest) => rest,
            None => {
                return answer(
                    StatusCode::FORBIDDEN,
                    "moat's proxy serves only the run it belongs to".into(),
                );
            }
        },
    };
    let (name, rest) = rest.split_once('/').unwrap_or((rest, ""));
    let Some(secret) = served.policy.secrets.named(name) else {
        return answer(
            StatusCode::NOT_FOUND,
            format!("moat's proxy: the run has no secret {}", shown(name)),
        );
    };
    let Some((scheme, host, port)) = secret.upstream() else {
        return answer(
            StatusCode::BAD_REQUEST,
            format!(
                "moat's proxy: secret {} is granted for a wildcard; its route needs one host",
                secret.grant.name
            ),
        );
    };
    let path = format!("/{rest}");
    let policy = &served.policy;
    let mut row = Exchange::new(Who::Program, Kind::SecretRoute, scheme, &host, port)
        .by(served.caller(&request))
        .request(request.method().as_str(), &path);
    row.secret = Some(secret.grant.name.clone());
    let mut recording = Recording::request(&policy.traffic, row, scheme, &path);
    if let Some(refused) = stopped(&mut recording) {
        return refused;
    }
    let Reached {
        destination,
        stream,
        slot,
    } = match reach(scheme, &host, port, policy, &mut recording).await {
        Ok(reached) => reached,
        Err(response) => return response,
    };
    let upstream: Box<dyn Upstream> = match scheme {
        Scheme::Http => Box::new(stream),
        Scheme::Https => match crate::tls::handshake(stream, destination.bare_host()).await {
            Ok(tls) => Box::new(tls),
            Err(error) => {
                let message = format!(
                    "moat's proxy: TLS to {}: {error:?}",
                    shown(&destination.host)
                );
                recording.failed(&message);
                return answer(StatusCode::BAD_GATEWAY, message);
            }
        },
    };
    let (header, value) = secret.header();
    request.headers_mut().insert(header.clone(), value.clone());
    send_to_origin(
        served,
        request,
        &path,
        &destination,
        upstream,
        slot,
        recording,
    )
    .await
}

/// A connection to an origin, plain or TLS.
trait Upstream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T> Upstream for T where T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static
{}

/// Sends `request` to `destination` over `upstream` as `path`, with the
/// granted `Host` and without the proxy's own headers; its response, read
/// as it passes (`recording`).
async fn send_to_origin(
    served: &Served,
    request: Request<Incoming>,
    path: &str,
    destination: &Destination,
    upstream: Box<dyn Upstream>,
    slot: tokio::sync::OwnedSemaphorePermit,
    mut recording: Recording,
) -> Response<ProxyBody> {
    let handshake = hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await;
    let (mut sender, connection) = match handshake {
        Ok(handshake) => handshake,
        Err(error) => {
            recording.failed(&error);
            return answer(StatusCode::BAD_GATEWAY, format!("moat's proxy: {error}"));
        }
    };
    let mut request = request.map(|body| recording.counted(body));
    served.spawn_until_closed(async move {
        let _slot = slot;
        let _ = connection.await;
    });
    *request.uri_mut() = match path.parse() {
        Ok(path) => path,
        Err(_) => return answer(StatusCode::BAD_REQUEST, "moat's proxy: bad path".into()),
    };
    let headers = request.headers_mut();
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    if let Ok(host) = http::HeaderValue::from_str(&destination.host_header()) {
        headers.insert(http::header::HOST, host);
    }
    // A model call's answer is read as it passes: uncompressed.
    if recording.is_model_call() {
        headers.remove(http::header::ACCEPT_ENCODING);
    }
    match sender.send_request(request).await {
        Ok(response) => {
            recording.answered(response.status().as_u16(), response.headers());
            response.map(|body| WatchedBody::new(body, recording).boxed())
        }
        Err(error) => {
            recording.failed(&error);
            answer(StatusCode::BAD_GATEWAY, format!("moat's proxy: {error}"))
        }
    }
}

/// A connection made for a program.
struct Reached {
    destination: Destination,
    stream: tokio::net::TcpStream,
    /// Held as long as the connection is open.
    slot: tokio::sync::OwnedSemaphorePermit,
}

/// A connection to `scheme://host:port` if the policy grants it; else the
/// answer to the program (the refusal recorded, in `recording` too).
async fn reach(
    scheme: Scheme,
    host: &str,
    port: u16,
    policy: &Policy,
    recording: &mut Recording,
) -> Result<Reached, Response<ProxyBody>> {
    if let Some(reached) = own_server(scheme, host, port, policy).await? {
        recording.row().allowed_by = Some("own loopback".into());
        return Ok(reached);
    }
    let destination = match Destination::granted(scheme, host, port, &policy.rules) {
        Ok(destination) => {
            recording.row().allowed_by = policy
                .rules
                .iter()
                .find(|rule| rule.matches(scheme, host, port))
                .map(ToString::to_string);
            destination
        }
        Err(denial) => {
            let destination = approved(scheme, denial, policy, recording).await?;
            recording.row().allowed_by = Some("approved".into());
            destination
        }
    };
    let Ok(slot) = policy.connections.clone().try_acquire_owned() else {
        recording.failed("the run has as many connections open as it may");
        return Err(all_connections_open());
    };
    let timeout = match policy.deadline {
        Some(deadline) => CONNECT_TIMEOUT.min(deadline.saturating_duration_since(Instant::now())),
        None => CONNECT_TIMEOUT,
    };
    match destination.connect(timeout, &policy.denials).await {
        Ok(stream) => Ok(Reached {
            stream: {
                let _ = stream.set_nodelay(true);
                stream
            },
            destination,
            slot,
        }),
        Err(ConnectFailure::AddressProhibited) => {
            let reason = "it resolves to an address its grant does not reach";
            recording.row().refused = Some(reason.into());
            Err(answer(
                StatusCode::FORBIDDEN,
                format!(
                    "moat refused this request: {}:{} {reason}",
                    shown(&destination.host),
                    destination.port
                ),
            ))
        }
        Err(failure) => {
            let failure = describe(&failure);
            recording.failed(&failure);
            Err(answer(
                StatusCode::BAD_GATEWAY,
                format!(
                    "moat's proxy cannot reach {}:{}: {failure}",
                    shown(&destination.host),
                    destination.port,
                ),
            ))
        }
    }
}

/// A server the run's programs started on its own loopback, when `host`
/// names the loopback and one listens on `port` there: the loopback is
/// the run's first (the host's, granted, is reached when nothing of the
/// run's listens).
async fn own_server(
    scheme: Scheme,
    host: &str,
    port: u16,
    policy: &Policy,
) -> Result<Option<Reached>, Response<ProxyBody>> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let addresses: Vec<IpAddr> = match host.trim_start_matches('[').trim_end_matches(']') {
        "localhost" => vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ],
        literal => match literal.parse::<IpAddr>() {
            Ok(address) if address.is_loopback() => vec![address],
            _ => return Ok(None),
        },
    };
    for address in addresses {
        let Some(stream) = policy
            .own_network
            .connect(std::net::SocketAddr::new(address, port))
            .await
        else {
            continue;
        };
        let Ok(slot) = policy.connections.clone().try_acquire_owned() else {
            return Err(all_connections_open());
        };
        let rule = NetRule::parse(&format!("{host}:{port}")).ok();
        let Some(destination) = rule.and_then(|rule| {
            Destination::granted(scheme, host, port, std::slice::from_ref(&rule)).ok()
        }) else {
            return Ok(None);
        };
        let _ = stream.set_nodelay(true);
        return Ok(Some(Reached {
            destination,
            stream,
            slot,
        }));
    }
    Ok(None)
}

/// A destination no rule grants, once approved ([`crate::approvals`]):
/// the program's request waits for the answer. Refused, the refusal is
/// recorded and the program told why.
async fn approved(
    scheme: Scheme,
    denial: moat_engine::Denial,
    policy: &Policy,
    recording: &mut Recording,
) -> Result<Destination, Response<ProxyBody>> {
    let refuse = |denial: moat_engine::Denial, recording: &mut Recording| {
        let message = format!("moat refused this request: {denial}");
        let row = recording.row();
        row.refused = Some(denial.reason.clone());
        if let Some(moat_engine::Grant::Net { host, port }) = &denial.remedy {
            row.would_allow = Some(format!("{host}:{port}"));
        }
        policy.denials.record(denial);
        answer(StatusCode::FORBIDDEN, message)
    };
    let (Some(asking), Some(moat_engine::Grant::Net { host, port })) =
        (&policy.asking, denial.remedy.clone())
    else {
        return Err(refuse(denial, recording));
    };
    if let Err(refused) = asking.ask(denial.clone()).await {
        return Err(refuse(refused, recording));
    }
    moat_grants::NetRule::parse(&format!("{host}:{port}"))
        .ok()
        .and_then(|rule| Destination::granted(scheme, &host, port, &[rule]).ok())
        .ok_or_else(|| refuse(denial, recording))
}

fn describe(failure: &ConnectFailure) -> String {
    match failure {
        ConnectFailure::AddressProhibited => "address prohibited".into(),
        ConnectFailure::Dns(error) => format!("name lookup failed: {error}"),
        ConnectFailure::NotFound => "the name has no address".into(),
        ConnectFailure::Connect(error) => error.to_string(),
        ConnectFailure::Timeout => "timed out".into(),
    }
}

fn answer(status: StatusCode, message: String) -> Response<ProxyBody> {
    let mut response = Response::new(
        Full::new(Bytes::from(message + "\n"))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response
}

fn empty() -> ProxyBody {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}
