//! Stateless Streamable HTTP, as pieces each
//! binary composes: [`mcp_router`] (`/mcp` → rmcp), [`health_router`]
//! (`/healthz`), [`with_header_checks`] for the whole app, the binary's own
//! layers and routes in between (a token, file transfer), and [`serve`], our
//! accept loop on hyper's HTTP/1 connection builder, which bounds every
//! resource a client can hold:
//!
//! - **Connections**: at most `max_connections` are open. A permit is taken
//!   *before* `accept`, so at the cap the server stops accepting and further
//!   clients wait in the kernel's listen backlog; the process never runs
//!   into its file-descriptor limit.
//! - **Request heads**: hyper's `header_read_timeout` starts as soon as a
//!   connection waits for a request head — when it opens and again after
//!   every response — and closes the connection if the head is not complete
//!   in time. This one timer is both the slow-header (slowloris) guard and
//!   the keep-alive idle timeout: hyper 1.12 offers no separate idle timer,
//!   and a longer idle timeout could never take effect under it.
//! - **Request bodies**: the whole body must arrive within `body_timeout`
//!   of the handler asking for it (a total deadline, not a per-chunk one, so
//!   a trickled or endlessly chunked body is cut too) and may not exceed
//!   `max_body_bytes`; else 408 or 413, and the connection is closed.
//! - **Memory held by arriving bodies** is bounded by `max_connections ×
//!   max_body_bytes` (256 MiB with the defaults): each connection carries at
//!   most one request at a time and its body is buffered only up to the cap.
//!   No separate semaphore is used; the connection cap is that bound.
//!
//! Also: `/mcp` is matched exactly (`/mcp/…` is 404, so no OAuth discovery
//! path under it answers); more than one `Origin` header is 403 (rmcp checks
//! only the first); more than one `Host` header is 400 (RFC 9112 §3.2); a
//! path no router has is 404. `/healthz` is answered by the router itself,
//! never queued behind tool work, so it answers whenever a connection slot
//! is free.
//!
//! On shutdown the listener is closed, idle connections are closed, requests
//! in flight may finish for up to [`SHUTDOWN_GRACE`], and then the server
//! returns.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{CONNECTION, CONTENT_TYPE, HOST, ORIGIN};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::cancel::InFlight;

/// How long requests in flight may run on after shutdown is asked for.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What the `/mcp` endpoint accepts, validated by the binary.
#[derive(Clone, Debug)]
pub struct McpOptions {
    /// Accepted `Host` names (an entry without a port matches any port).
    pub allowed_hosts: Vec<String>,
    /// Extra accepted browser origins (`scheme://host[:port|:*]`); the
    /// allowed hosts' own `http`/`https` origins are always accepted.
    pub extra_origins: Vec<String>,
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// Time a request body may take to arrive in full.
    pub body_timeout: Duration,
}

/// What one connection may hold, validated by the binary.
#[derive(Clone, Debug)]
pub struct ConnectionOptions {
    /// Time a connection may take to deliver a complete request head,
    /// counted from when the server starts waiting for one (also the
    /// keep-alive idle timeout).
    pub header_timeout: Duration,
    /// Most connections open at once (≥ 1).
    pub max_connections: usize,
}

/// The server's own origins: those of the hosts it answers to.
fn own_origins(hosts: &[String]) -> Vec<String> {
    hosts
        .iter()
        .flat_map(|h| {
            let host =
                if h.contains(':') && !h.starts_with('[') { format!("[{h}]") } else { h.clone() };
            [format!("http://{host}:*"), format!("https://{host}:*")]
        })
        .collect()
}

/// Serves `app` on `listener` until `shutdown`, under `options`' connection
/// cap and header timeout (see the module docs).
///
/// # Errors
/// If the listener's address cannot be read.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    options: &ConnectionOptions,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    tracing::info!(
        event = "listening",
        address = %listener.local_addr()?,
        max_connections = options.max_connections,
    );
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.timer(TokioTimer::new()).header_read_timeout(options.header_timeout);
    let permits = Arc::new(Semaphore::new(options.max_connections));
    let graceful = GracefulShutdown::new();
    loop {
        // The permit comes first: at the cap nothing more is accepted.
        let permit = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break, // never closed
            },
        };
        let (stream, _) = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Per-connection errors (a peer that reset before we
                    // accepted, a transient ENFILE) must not end the server;
                    // the pause keeps a persistent error from spinning.
                    tracing::warn!(event = "accept_failed", error = %e);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let connection =
            http1.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // Timeouts and peers that vanish end connections with an error;
            // that is routine, so it is only worth a DEBUG line.
            if let Err(e) = connection.await {
                tracing::debug!(event = "connection_closed", error = %e);
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown()).await.is_err() {
        tracing::warn!(event = "shutdown_grace_expired");
    }
    Ok(())
}

/// How a binary serves HTTP, validated at start-up.
#[derive(Debug)]
pub struct HttpConfig {
    /// The listen address.
    pub listen: std::net::SocketAddr,
    /// What `/mcp` accepts.
    pub mcp: McpOptions,
    /// What one connection may hold.
    pub connections: ConnectionOptions,
    /// When set, `/mcp` requires one of these bearer tokens.
    pub auth: Option<crate::BearerAuth>,
    /// The listener [`HttpConfig::bind`] opened; `None` until then.
    pub bound: Option<std::net::TcpListener>,
}

impl HttpConfig {
    /// The address [`Self::bind`] bound (its port, when `listen`'s was 0).
    pub fn bound_address(&self) -> Option<std::net::SocketAddr> {
        self.bound.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Binds the listen address now, before the binary says it is
    /// starting: an address in use is then the first thing said, not a
    /// line after others that read like a good start. Needs no runtime;
    /// [`serve_guarded_mcp`] serves this listener (and binds itself when
    /// this was not called).
    ///
    /// # Errors
    /// The address cannot be bound: in use, not this machine's, not
    /// allowed.
    pub fn bind(&mut self) -> Result<(), ListenError> {
        let listener =
            bind_now(self.listen).map_err(|source| ListenError { address: self.listen, source })?;
        self.bound = Some(listener);
        Ok(())
    }
}

/// A listening socket as tokio's `TcpListener::bind` makes one
/// (`SO_REUSEADDR`, a backlog of 1024, close-on-exec so no command
/// inherits it), nonblocking, without a runtime.
fn bind_now(address: std::net::SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(address), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&address.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

/// Serves `/mcp` (`factory`'s handlers, behind the configured bearer token
/// when there is one), the binary's own `routes` (which guard themselves)
/// and `/healthz` on the hardened accept loop of [`serve`], until
/// `shutdown`.
///
/// # Errors
/// If the listen address cannot be bound or the accept loop fails.
pub async fn serve_mcp<S, F>(
    factory: F,
    mut http: HttpConfig,
    routes: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()>
where
    S: ServerHandler + Send + 'static,
    F: Fn() -> S + Send + Sync + 'static,
{
    let guard = McpGuard::from(http.auth.take());
    serve_guarded_mcp(factory, http, guard, routes, shutdown).await
}

/// What stands in front of `/mcp`: a route layer the binary chose, applied
/// after the body limits so that it runs first (no body is read for a
/// stranger), and its name for the log.
pub struct McpGuard {
    apply: Box<dyn FnOnce(Router) -> Router + Send>,
    name: String,
}

impl McpGuard {
    /// `layer` in front of `/mcp`, logged as `name`.
    pub fn new(
        name: impl Into<String>,
        apply: impl FnOnce(Router) -> Router + Send + 'static,
    ) -> Self {
        Self { apply: Box::new(apply), name: name.into() }
    }

    /// Nothing in front of `/mcp` (loopback only, or a trusted proxy).
    pub fn none() -> Self {
        Self::new("none", |router| router)
    }
}

impl From<Option<crate::Auth>> for McpGuard {
    fn from(auth: Option<crate::Auth>) -> Self {
        match auth {
            Some(auth) => Self::new(auth.methods(), move |router| router.route_layer(auth)),
            None => Self::none(),
        }
    }
}

/// The bearer tokens alone (serverfs-mcp): a refusal says
/// `401 Unauthorized: missing or invalid bearer token`.
impl From<Option<crate::BearerAuth>> for McpGuard {
    fn from(tokens: Option<crate::BearerAuth>) -> Self {
        Self::from(tokens.and_then(|tokens| {
            let bearer: std::sync::Arc<dyn crate::Verify> = std::sync::Arc::new(tokens);
            crate::Auth::new(vec![bearer], "bearer token")
        }))
    }
}

/// [`serve_mcp`] with the binary's own `guard` in front of `/mcp`
/// (`http.auth` is not used).
///
/// # Errors
/// If the listen address cannot be bound or the accept loop fails.
pub async fn serve_guarded_mcp<S, F>(
    factory: F,
    mut http: HttpConfig,
    guard: McpGuard,
    routes: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()>
where
    S: ServerHandler + Send + 'static,
    F: Fn() -> S + Send + Sync + 'static,
{
    let mcp = (guard.apply)(mcp_router(factory, &http.mcp, &shutdown));
    let app = with_header_checks(health_router().merge(mcp).merge(routes));
    let listener = match http.bound.take() {
        Some(listener) => listener,
        None => bind_now(http.listen).map_err(|e| ListenError::wrap(http.listen, e))?,
    };
    let listener = tokio::net::TcpListener::from_std(listener)?;
    tracing::info!(event = "http_endpoint", endpoint = "/mcp", auth = %guard.name);
    serve(listener, app, &http.connections, shutdown).await
}

/// The listen address could not be bound (in use, not local, not
/// allowed): a configuration error, which [`crate::finish`] ends with exit
/// code 2 and a line naming the address and the setting.
#[derive(Debug)]
pub struct ListenError {
    /// The address asked for.
    pub address: std::net::SocketAddr,
    /// Why it could not be bound.
    pub source: std::io::Error,
}

impl ListenError {
    fn wrap(address: std::net::SocketAddr, source: std::io::Error) -> std::io::Error {
        std::io::Error::new(source.kind(), Self { address, source })
    }
}

impl std::fmt::Display for ListenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = match self.source.kind() {
            std::io::ErrorKind::AddrInUse => "the address is already in use".to_owned(),
            std::io::ErrorKind::AddrNotAvailable => {
                "the address is not one of this machine's".to_owned()
            }
            std::io::ErrorKind::PermissionDenied => {
                "permission denied (a port below 1024?)".to_owned()
            }
            _ => self.source.to_string(),
        };
        write!(f, "SERVERFS_LISTEN (--listen): cannot listen on {}: {why}", self.address)
    }
}

impl std::error::Error for ListenError {}

/// `GET /healthz` → 200 `ok`, answered by the router itself: never behind
/// tool work or a token.
pub fn health_router() -> Router {
    Router::new().route("/healthz", get(|| async { "ok\n" }))
}

/// `/mcp` (exactly: `/mcp/…` is 404) serving `factory`'s handlers statelessly,
/// behind our Host check (a refusal names `--allowed-hosts`; rmcp's own
/// stays behind it), rmcp's Origin check and the body limits of `options`.
/// Binaries add their own layers (`route_layer`, e.g. an [`crate::Auth`])
/// and merge it with [`health_router`]; [`with_header_checks`] goes on the
/// whole app.
pub fn mcp_router<S, F>(factory: F, options: &McpOptions, shutdown: &CancellationToken) -> Router
where
    S: ServerHandler + Send + 'static,
    F: Fn() -> S + Send + Sync + 'static,
{
    let origins: Vec<String> = own_origins(&options.allowed_hosts)
        .into_iter()
        .chain(options.extra_origins.iter().cloned())
        .collect();
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_allowed_hosts(options.allowed_hosts.clone())
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(options.max_body_bytes)
        .with_cancellation_token(shutdown.child_token());
    let mcp = StreamableHttpService::new(
        move || Ok(factory()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let limits = BodyLimits {
        max_bytes: options.max_body_bytes,
        timeout: options.body_timeout,
        in_flight: Arc::default(),
    };
    let hosts =
        AllowedHosts(options.allowed_hosts.iter().filter_map(|h| allowed_host(h)).collect());
    // `route_service`, not `nest_service`: only `/mcp` itself is the endpoint.
    Router::new()
        .route_service("/mcp", mcp)
        .route_layer(middleware::from_fn_with_state(limits, read_whole_body))
        .route_layer(middleware::from_fn_with_state(Arc::new(hosts), allowed_host_only))
}

/// The accepted `Host` names, lower case, without brackets, each with its
/// port when the entry names one (else any port matches): rmcp's rule,
/// checked here first so that a refusal names the setting and is logged
/// as one of ours.
#[derive(Debug)]
struct AllowedHosts(Vec<(String, Option<u16>)>);

/// A `Host` value or an allowlist entry as (name, port): `Example.org:80`
/// → (`example.org`, 80), `[::1]` → (`::1`, none). `None` when it is not
/// an authority (an entry that is not one matches by its whole text, as
/// rmcp does).
fn authority(text: &str) -> Option<(String, Option<u16>)> {
    let authority = axum::http::uri::Authority::try_from(text.trim()).ok()?;
    let host = authority.host().trim_start_matches('[').trim_end_matches(']');
    Some((host.to_ascii_lowercase(), authority.port_u16()))
}

fn allowed_host(entry: &str) -> Option<(String, Option<u16>)> {
    let entry = entry.trim();
    if entry.is_empty() {
        return None;
    }
    let whole = || (entry.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase(), None);
    Some(authority(entry).unwrap_or_else(whole))
}

/// 403 naming `--allowed-hosts` for a `Host` the allowlist does not hold
/// (a DNS-rebinding defence), logged as `host_refused` with plain values.
/// A missing or malformed `Host` is left to rmcp (400).
async fn allowed_host_only(
    State(allowed): State<Arc<AllowedHosts>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(Ok(host)) = request.headers().get(HOST).map(HeaderValue::to_str) else {
        return next.run(request).await;
    };
    let Some((name, port)) = authority(host) else {
        return next.run(request).await;
    };
    let ok = allowed.0.is_empty()
        || allowed.0.iter().any(|(n, p)| *n == name && p.is_none_or(|p| Some(p) == port));
    if ok {
        return next.run(request).await;
    }
    // Printable and short: the header is the client's text.
    let shown: String = host.chars().filter(|c| !c.is_control()).take(100).collect();
    tracing::warn!(
        event = "host_refused",
        host = %shown,
        path = request.uri().path(),
        setting = "SERVERFS_ALLOWED_HOSTS (--allowed-hosts)",
    );
    let text = format!(
        "403 Forbidden: Host '{shown}' is not allowed; add it to SERVERFS_ALLOWED_HOSTS \
         (--allowed-hosts) if clients reach this server by that name\n"
    );
    plain(StatusCode::FORBIDDEN, text)
}

/// The checks every request passes first: more than one `Origin` is 403
/// (rmcp's check reads only the first), more than one `Host` 400.
pub fn with_header_checks(app: Router) -> Router {
    app.layer(middleware::from_fn(single_host_and_origin))
}

#[derive(Clone, Debug)]
struct BodyLimits {
    max_bytes: usize,
    timeout: Duration,
    /// The requests in flight, for `notifications/cancelled`.
    in_flight: Arc<InFlight>,
}

/// Buffers the request body under the size cap and the total deadline, so
/// that rmcp only ever sees a complete body; fills a task request's missing
/// `Mcp-Name` (see the task_name module); then lets a cancel
/// notification reach the request it names (see the cancel module).
async fn read_whole_body(
    State(limits): State<BodyLimits>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let read = Limited::new(body, limits.max_bytes).collect();
    match tokio::time::timeout(limits.timeout, read).await {
        Ok(Ok(body)) => {
            let body = body.to_bytes();
            crate::task_name::fill_missing(&mut parts, &body);
            limits.in_flight.serve(parts, body, next).await
        }
        Ok(Err(e)) if e.is::<LengthLimitError>() => closing(
            StatusCode::PAYLOAD_TOO_LARGE,
            "413 Payload Too Large: request body over the limit\n",
        ),
        Ok(Err(_)) => {
            closing(StatusCode::BAD_REQUEST, "400 Bad Request: unreadable request body\n")
        }
        Err(_) => {
            closing(StatusCode::REQUEST_TIMEOUT, "408 Request Timeout: request body too slow\n")
        }
    }
}

/// 403 for more than one `Origin` (the check behind it reads only the first),
/// 400 for more than one `Host`.
async fn single_host_and_origin(request: Request, next: Next) -> Response {
    let headers = request.headers();
    if headers.get_all(ORIGIN).iter().nth(1).is_some() {
        return plain(StatusCode::FORBIDDEN, "403 Forbidden: more than one Origin header\n");
    }
    if headers.get_all(HOST).iter().nth(1).is_some() {
        return plain(StatusCode::BAD_REQUEST, "400 Bad Request: more than one Host header\n");
    }
    next.run(request).await
}

fn plain(status: StatusCode, text: impl Into<Body>) -> Response {
    let mut response = Response::new(text.into());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

/// A plain answer after which the connection is closed: the rest of the
/// body was never read, so the stream cannot carry another request.
fn closing(status: StatusCode, text: &'static str) -> Response {
    let mut response = plain(status, text);
    response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_as_rmcp_matches_them() {
        let allowed: Vec<_> = ["localhost", "Example.org:8443", "[::1]", " "]
            .iter()
            .filter_map(|h| allowed_host(h))
            .collect();
        assert_eq!(
            allowed,
            [("localhost".into(), None), ("example.org".into(), Some(8443)), ("::1".into(), None)]
        );
        assert_eq!(authority("LOCALHOST:8000"), Some(("localhost".into(), Some(8000))));
        assert_eq!(authority("[::1]:8000"), Some(("::1".into(), Some(8000))));
        assert_eq!(authority("a b"), None);
    }

    #[test]
    fn own_origins_bracket_ipv6() {
        let o = own_origins(&["::1".into(), "serverfs-mcp".into()]);
        assert_eq!(
            o,
            [
                "http://[::1]:*",
                "https://[::1]:*",
                "http://serverfs-mcp:*",
                "https://serverfs-mcp:*"
            ]
        );
    }
}
