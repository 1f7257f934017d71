//! Stateless Streamable HTTP (SPEC §2.4, §2.6 "HTTP").

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

/// HTTP settings, validated by the binary.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Listen address.
    pub listen: SocketAddr,
    /// Accepted `Host` names (an entry without a port matches any port).
    pub allowed_hosts: Vec<String>,
    /// Extra accepted browser origins (`scheme://host[:port|:*]`); the
    /// allowed hosts' own `http`/`https` origins are always accepted.
    pub extra_origins: Vec<String>,
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
}

/// Loopback names plus the Compose service name, so OpenAI's tunnel-client
/// can reach `http://serverfs-mcp:8000/mcp`.
pub fn default_allowed_hosts() -> Vec<String> {
    ["localhost", "127.0.0.1", "::1", "serverfs-mcp"].map(String::from).to_vec()
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

/// Serves `factory`'s handlers on `options.listen` until `shutdown`.
///
/// # Errors
/// If the address cannot be bound or the server fails.
pub async fn serve_http<S, F>(
    factory: F,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> std::io::Result<()>
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
    let app = Router::new().route("/healthz", get(|| async { "ok\n" })).nest_service("/mcp", mcp);
    let listener = tokio::net::TcpListener::bind(options.listen).await?;
    tracing::info!(event = "listening", address = %listener.local_addr()?, endpoint = "/mcp");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
