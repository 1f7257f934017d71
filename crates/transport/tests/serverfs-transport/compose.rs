//! The seam binaries build on: `mcp_router` + their own layers +
//! `health_router`, checked by `with_header_checks`, served by `serve`. A
//! layer the binary adds in front of `/mcp` (here one that always answers
//! 401) decides before rmcp sees the request, and leaves `/healthz` alone.

use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use rmcp::ServerHandler;
use rmcp::model::{ServerCapabilities, ServerConfig};
use serverfs_transport::{
    ConnectionOptions, McpOptions, health_router, mcp_router, serve, with_header_checks,
};
use tokio_util::sync::CancellationToken;

/// An MCP server with one capability and no tools: enough to answer.
#[derive(Clone)]
struct Empty;

impl ServerHandler for Empty {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

fn options() -> (McpOptions, ConnectionOptions) {
    (
        McpOptions {
            allowed_hosts: vec!["127.0.0.1".into()],
            extra_origins: vec![],
            max_body_bytes: 64 * 1024,
            body_timeout: Duration::from_secs(10),
        },
        ConnectionOptions { header_timeout: Duration::from_secs(10), max_connections: 8 },
    )
}

/// Serves `app` on an ephemeral loopback port; returns its base URL.
async fn start(app: Router, shutdown: &CancellationToken) -> String {
    let (_, connections) = options();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = shutdown.clone();
    tokio::spawn(async move { serve(listener, app, &connections, shutdown).await.unwrap() });
    base
}

async fn list_tools(base: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("Mcp-Protocol-Version", "2025-06-18")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_binary_layer_in_front_of_mcp_decides_first() {
    let shutdown = CancellationToken::new();
    let (mcp_options, _) = options();
    let refuse = axum::middleware::from_fn(
        |_req: axum::extract::Request, _next: axum::middleware::Next| async {
            (StatusCode::UNAUTHORIZED, "401 Unauthorized: test layer\n").into_response()
        },
    );
    let mcp = mcp_router(|| Empty, &mcp_options, &shutdown).route_layer(refuse);
    let base = start(with_header_checks(health_router().merge(mcp)), &shutdown).await;

    let r = list_tools(&base).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.text().await.unwrap(), "401 Unauthorized: test layer\n");
    let r = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!((r.status(), r.text().await.unwrap().as_str()), (StatusCode::OK, "ok\n"));
    let r = reqwest::get(format!("{base}/mcp/.well-known/openid-configuration")).await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    shutdown.cancel();
}

#[tokio::test]
async fn without_the_layer_the_same_app_serves_mcp() {
    let shutdown = CancellationToken::new();
    let (mcp_options, _) = options();
    let mcp = mcp_router(|| Empty, &mcp_options, &shutdown);
    let base = start(with_header_checks(health_router().merge(mcp)), &shutdown).await;

    let r = list_tools(&base).await;
    assert_eq!(r.status(), StatusCode::OK);
    let body = r.text().await.unwrap();
    assert!(body.contains(r#""tools":[]"#), "{body}");
    // The whole-app checks apply to every route.
    let r = reqwest::Client::new()
        .get(format!("{base}/healthz"))
        .header("Origin", "http://127.0.0.1")
        .header("Origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    shutdown.cancel();
}
