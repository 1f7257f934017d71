//! One command's connections: the listening socket received from its
//! supervisor, each client connection served with hyper's HTTP/1 (which
//! bounds and parses the request heads), tunnels and forwarded requests,
//! and their audit lines.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::{CONNECT_TIMEOUT, Egress, HEADER_TIMEOUT, Host, IDLE_TIMEOUT, MAX_CONNECTIONS, Who};

type Body = BoxBody<Bytes, hyper::Error>;

/// The smallest read buffer hyper accepts: a request head over it is
/// refused (431).
const MAX_HEAD: usize = 16 * 1024;

/// Each direction's buffer in a tunnel: a download moves in 64 KiB
/// pieces, not tokio's default 8 KiB (fewer wake-ups per megabyte).
const TUNNEL_BUF: usize = 64 * 1024;

/// What one command's connections share.
pub(crate) struct Command {
    egress: Arc<Egress>,
    who: Who,
    refused: Arc<Mutex<Vec<String>>>,
    pub(crate) stop: CancellationToken,
    slots: Arc<Semaphore>,
}

impl Command {
    pub(crate) fn new(
        egress: Arc<Egress>,
        who: Who,
        refused: Arc<Mutex<Vec<String>>>,
        stop: CancellationToken,
    ) -> Self {
        Self { egress, who, refused, stop, slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)) }
    }

    /// Keeps `line` for the command's answer, once.
    fn keep(&self, line: String) {
        let mut refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        if !refused.contains(&line) {
            refused.push(line);
        }
    }

    /// The audit line of one connection.
    fn audit(&self, target: &Target, verdict: &str, reason: &str, meter: &Meter, started: Instant) {
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(
            event = "network",
            principal = %self.who.principal,
            command = %self.who.command,
            host = %target.host,
            port = target.port,
            verdict,
            reason,
            sent = meter.sent.load(Ordering::Relaxed),
            received = meter.received.load(Ordering::Relaxed),
            duration_ms,
        );
    }
}

/// Receives the command's listening socket on `channel` and serves every
/// connection made to it.
pub(crate) async fn accept(command: Arc<Command>, channel: UnixStream) {
    let Ok(listener) = receive_listener(channel).await else {
        tracing::warn!(event = "network_setup", message = "no proxy socket from the supervisor");
        return;
    };
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // The server's own error (out of descriptors: EMFILE): the
                // connection stays queued and the socket readable, so the
                // pause keeps this loop from spinning until it clears.
                tracing::warn!(event = "network_accept_failed", error = %e);
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        match Arc::clone(&command.slots).try_acquire_owned() {
            Ok(slot) => {
                tokio::spawn(serve(Arc::clone(&command), stream, slot));
            }
            Err(_) => command.keep(format!(
                "network: refused a connection (more than {MAX_CONNECTIONS} at once)"
            )),
        }
    }
}

async fn receive_listener(channel: UnixStream) -> std::io::Result<tokio::net::TcpListener> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    use std::io::IoSliceMut;
    use std::mem::MaybeUninit;
    channel.set_nonblocking(true)?;
    let channel = tokio::net::UnixStream::from_std(channel)?;
    let fd: OwnedFd = loop {
        channel.readable().await?;
        let received = channel.try_io(tokio::io::Interest::READABLE, || {
            let mut byte = [0u8; 1];
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut ancillary = RecvAncillaryBuffer::new(&mut space);
            recvmsg(
                &channel,
                &mut [IoSliceMut::new(&mut byte)],
                &mut ancillary,
                RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
            )?;
            let fd = ancillary.drain().find_map(|message| match message {
                RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
                _ => None,
            });
            fd.ok_or_else(|| std::io::Error::other("no socket"))
        });
        match received {
            Ok(fd) => break fd,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    };
    let listener = std::net::TcpListener::from(fd);
    listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(listener)
}

/// One client connection, until it or the command ends.
async fn serve(command: Arc<Command>, stream: TcpStream, slot: OwnedSemaphorePermit) {
    let slot = Arc::new(slot);
    let stop = command.stop.clone();
    let service = hyper::service::service_fn(move |request| {
        let (command, slot) = (Arc::clone(&command), Arc::clone(&slot));
        async move { Ok::<_, Infallible>(handle(command, request, slot).await) }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::select! {
        _ = connection => {}
        () = stop.cancelled() => {}
    }
}

/// Where a request goes.
struct Target {
    host: Host,
    port: u16,
    /// A `CONNECT` (a tunnel), not a request to forward.
    tunnel: bool,
}

impl Target {
    /// The request's target, or the 400 that says why it has none.
    fn of(request: &Request<Incoming>) -> Result<Self, &'static str> {
        let uri = request.uri();
        let authority = uri.authority().ok_or(
            "this is a proxy: send CONNECT host:port, or a request with an absolute http:// URL",
        )?;
        let host = Host::parse(authority.host()).ok_or("not a host name or an address")?;
        if request.method() == Method::CONNECT {
            let port = authority.port_u16().ok_or("CONNECT needs host:port")?;
            return Ok(Self { host, port, tunnel: true });
        }
        if uri.scheme_str() != Some("http") {
            return Err("only http:// URLs are forwarded; use CONNECT for https");
        }
        Ok(Self { host, port: authority.port_u16().unwrap_or(80), tunnel: false })
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut response =
        Response::new(Full::new(Bytes::from(body)).map_err(|never| match never {}).boxed());
    *response.status_mut() = status;
    response
}

async fn handle(
    command: Arc<Command>,
    request: Request<Incoming>,
    slot: Arc<OwnedSemaphorePermit>,
) -> Response<Body> {
    let started = Instant::now();
    let target = match Target::of(&request) {
        Ok(target) => target,
        Err(why) => return text(StatusCode::BAD_REQUEST, format!("serverfs: {why}\n")),
    };
    let addrs = match command.egress.resolve(&target.host, target.port).await {
        Ok(addrs) => addrs,
        Err(reason) => {
            command.audit(&target, "refused", &reason, &Meter::default(), started);
            command.keep(format!("network: refused {target} ({reason})"));
            return text(StatusCode::FORBIDDEN, format!("serverfs: refused {target} ({reason})\n"));
        }
    };
    let upstream = match connect(&addrs).await {
        Ok(upstream) => upstream,
        Err(e) => {
            let reason = format!("could not connect: {e}");
            command.audit(&target, "failed", &reason, &Meter::default(), started);
            return text(StatusCode::BAD_GATEWAY, format!("serverfs: {target}: {reason}\n"));
        }
    };
    let upstream = Metered::new(upstream);
    if target.tunnel {
        let upgrade = hyper::upgrade::on(request);
        tokio::spawn(async move {
            let meter = Arc::clone(&upstream.meter);
            let ended = match upgrade.await {
                Ok(client) => tunnel(TokioIo::new(client), upstream, &command.stop).await,
                Err(_) => "the client left",
            };
            command.audit(&target, "allowed", ended, &meter, started);
            drop(slot);
        });
        return Response::new(Full::new(Bytes::new()).map_err(|never| match never {}).boxed());
    }
    forward(command, request, upstream, target, started, slot).await
}

/// Connects to the first of `addrs` that answers.
async fn connect(addrs: &[SocketAddr]) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other("no address");
    for addr in addrs {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = e,
            Err(_) => last = std::io::ErrorKind::TimedOut.into(),
        }
    }
    Err(last)
}

/// Copies both ways until either side ends, the tunnel idles, or the
/// command ends; says which.
async fn tunnel<C>(mut client: C, mut upstream: Metered, stop: &CancellationToken) -> &'static str
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let meter = Arc::clone(&upstream.meter);
    tokio::select! {
        copied = tokio::io::copy_bidirectional_with_sizes(&mut client, &mut upstream, TUNNEL_BUF, TUNNEL_BUF) => match copied {
            Ok(_) => "closed",
            Err(_) => "reset",
        },
        () = meter.idle() => "idle",
        () = stop.cancelled() => "the command ended",
    }
}

/// Forwards a plain-HTTP request in origin form over `upstream` and
/// answers with its response, streamed; the audit line comes when the
/// upstream connection ends.
async fn forward(
    command: Arc<Command>,
    mut request: Request<Incoming>,
    upstream: Metered,
    target: Target,
    started: Instant,
    slot: Arc<OwnedSemaphorePermit>,
) -> Response<Body> {
    let meter = Arc::clone(&upstream.meter);
    let Ok((mut sender, connection)) =
        hyper::client::conn::http1::handshake::<_, Incoming>(TokioIo::new(upstream)).await
    else {
        return text(StatusCode::BAD_GATEWAY, format!("serverfs: {target}: handshake failed\n"));
    };
    let origin = request.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
    // The host the request was allowed for is the one it reaches: a Host
    // header naming another site on the same address (a CDN) is replaced.
    let host = request.uri().authority().map(|a| a.as_str().to_owned());
    match origin.parse() {
        Ok(uri) => *request.uri_mut() = uri,
        Err(_) => {
            return text(StatusCode::BAD_REQUEST, "serverfs: bad request target\n".to_owned());
        }
    }
    let headers = request.headers_mut();
    for hop in ["proxy-connection", "proxy-authorization", "keep-alive", "te", "upgrade"] {
        headers.remove(hop);
    }
    match host.as_deref().map(hyper::header::HeaderValue::from_str) {
        Some(Ok(host)) => {
            headers.insert(hyper::header::HOST, host);
        }
        _ => return text(StatusCode::BAD_REQUEST, "serverfs: bad request target\n".to_owned()),
    }
    let stop = command.stop.clone();
    let watched = Arc::clone(&meter);
    tokio::spawn(async move {
        let ended = tokio::select! {
            done = connection => if done.is_ok() { "closed" } else { "reset" },
            () = watched.idle() => "idle",
            () = stop.cancelled() => "the command ended",
        };
        command.audit(&target, "allowed", ended, &watched, started);
        drop(slot);
    });
    match sender.send_request(request).await {
        Ok(response) => response.map(BodyExt::boxed),
        Err(_) => text(StatusCode::BAD_GATEWAY, "serverfs: the upstream request failed\n".into()),
    }
}

/// Bytes each way on an upstream connection, and when they last moved.
#[derive(Debug, Default)]
struct Meter {
    sent: AtomicU64,
    received: AtomicU64,
}

impl Meter {
    fn total(&self) -> u64 {
        self.sent.load(Ordering::Relaxed) + self.received.load(Ordering::Relaxed)
    }

    /// Returns once a whole [`IDLE_TIMEOUT`] passed without a byte.
    async fn idle(&self) {
        let mut seen = self.total();
        loop {
            tokio::time::sleep(IDLE_TIMEOUT).await;
            let now = self.total();
            if now == seen {
                return;
            }
            seen = now;
        }
    }
}

/// An upstream connection that counts its bytes.
struct Metered {
    stream: TcpStream,
    meter: Arc<Meter>,
}

impl Metered {
    fn new(stream: TcpStream) -> Self {
        Self { stream, meter: Arc::default() }
    }
}

impl AsyncRead for Metered {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        let read = (buf.filled().len() - before) as u64;
        self.meter.received.fetch_add(read, Ordering::Relaxed);
        polled
    }
}

impl AsyncWrite for Metered {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.meter.sent.fetch_add(n as u64, Ordering::Relaxed);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
