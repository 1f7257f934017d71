//! Transport plumbing shared by the ServerFS binaries: stateless Streamable
//! HTTP at `/mcp` behind Host/Origin checks and a body cap, `GET /healthz`,
//! stdio, the `healthcheck` probe, and flat JSON logs on stderr.
//!
//! Guarantees: HTTP is stateless (no session is created or required) and
//! answers JSON; a request with a foreign `Host` or `Origin` gets 403, a body
//! over the cap 413, anything else malformed a 4xx — and the server keeps
//! serving. Every path but `/mcp` and `/healthz` is 404, which tells OpenAI's
//! tunnel-client that no OAuth is involved. Logs never go to stdout, which
//! carries the protocol under stdio.

mod auth;
mod health;
mod http;
mod logging;

pub use auth::{BearerAuth, RequireBearer};
pub use health::probe_health;
pub use http::{HttpOptions, SHUTDOWN_GRACE, default_allowed_hosts, serve_http};
pub use logging::init_logging;

/// Serves one client on stdin/stdout until stdin closes.
///
/// # Errors
/// If the transport fails before the client is served.
pub async fn serve_stdio<S>(server: S) -> std::io::Result<()>
where
    S: rmcp::ServerHandler,
{
    use rmcp::ServiceExt;
    use rmcp::service::ServerInitializeError;
    match server.serve(rmcp::transport::io::stdio_pipes()).await {
        Ok(running) => running.waiting().await.map(drop).map_err(std::io::Error::other),
        // The client went away before saying anything: a normal end.
        Err(ServerInitializeError::ConnectionClosed(_)) => Ok(()),
        Err(e) => Err(std::io::Error::other(e)),
    }
}
