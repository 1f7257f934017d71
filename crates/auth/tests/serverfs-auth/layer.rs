//! serverfs-transport's layer with serverfs-dev's methods (bearer token
//! and/or Access, `serverfs_auth::combined`), through a real axum router; and its place in front of serverfs-transport's `/mcp` router,
//! where it must refuse before any body byte is read.

use crate::router;
use crate::support;

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use router::*;
use serverfs_auth::combined;
use serverfs_transport::{BearerAuth, McpOptions, Principal, mcp_router};
use support::*;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

#[test]
fn nothing_configured_is_no_layer() {
    assert!(combined(None, None).is_none());
}

#[tokio::test]
async fn bearer_only() {
    let auth = combined(Some(BearerAuth::new(TOKEN).unwrap()), None).unwrap();
    assert_eq!(auth.methods(), "bearer");
    let app = app(auth);
    let right = format!("Bearer {TOKEN}");
    let (status, body, _) = call(&app, &[("authorization", &right)]).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "token"));
    assert_refused(call(&app, &[]).await, "missing");
    assert_refused(call(&app, &[("authorization", "Bearer wrong-token")]).await, "wrong");
    let basic = format!("Basic {TOKEN}");
    assert_refused(call(&app, &[("authorization", &basic)]).await, "Basic");
    assert_refused(call(&app, &[("authorization", TOKEN)]).await, "no scheme");
    let twice: &[(&str, &str)] = &[("authorization", &right), ("authorization", &right)];
    assert_refused(call(&app, twice).await, "repeated");
}

#[tokio::test]
async fn named_tokens_each_admit_their_holder() {
    let tokens = BearerAuth::named([
        (1, "alice", "tok-alice-0123456789"),
        (2, "bob", "tok-bob-0123456789ab"),
    ]);
    let auth = combined(Some(tokens.unwrap()), None).unwrap();
    let app = app(auth);
    for (token, who) in
        [("tok-alice-0123456789", "token:alice"), ("tok-bob-0123456789ab", "token:bob")]
    {
        let value = format!("Bearer {token}");
        let (status, body, _) = call(&app, &[("authorization", &value)]).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, who));
    }
    assert_refused(call(&app, &[("authorization", "Bearer alice")]).await, "a name");
    assert_refused(
        call(&app, &[("authorization", "Bearer tok-carol-0123456789")]).await,
        "unknown",
    );
}

#[tokio::test]
async fn access_only() {
    let server = JwksServer::start(jwks(vec![jwk(KEY_A, "kid-a")]), Duration::ZERO).await;
    let auth = combined(None, Some(server.verifier(None))).unwrap();
    assert_eq!(auth.methods(), "cloudflare-access");
    let app = app(auth);
    let token = sign(KEY_A, "kid-a", &claims());
    let (status, body, _) = call(&app, &[("cf-access-jwt-assertion", &token)]).await;
    assert_eq!((status, body), (StatusCode::OK, format!("access:{EMAIL}")));
    assert_refused(call(&app, &[]).await, "missing header");
    assert_refused(call(&app, &[("cf-access-jwt-assertion", "garbage")]).await, "garbage");
    let right = format!("Bearer {TOKEN}");
    assert_refused(call(&app, &[("authorization", &right)]).await, "bearer not configured");
    let expired = sign(KEY_A, "kid-a", &{
        let mut c = claims();
        c["exp"] = serde_json::json!(now() - 120);
        c
    });
    assert_refused(call(&app, &[("cf-access-jwt-assertion", &expired)]).await, "expired");
}

#[tokio::test]
async fn both_configured_either_admits() {
    let server = JwksServer::start(jwks(vec![jwk(KEY_A, "kid-a")]), Duration::ZERO).await;
    let auth =
        combined(Some(BearerAuth::new(TOKEN).unwrap()), Some(server.verifier(None))).unwrap();
    assert_eq!(auth.methods(), "bearer+cloudflare-access");
    let app = app(auth);
    let right = format!("Bearer {TOKEN}");
    let token = sign(KEY_A, "kid-a", &claims());
    let access_email = format!("access:{EMAIL}");
    let cases: [(Headers<'_>, Option<&str>); 7] = [
        (&[("authorization", &right)], Some("token")),
        (&[("cf-access-jwt-assertion", &token)], Some(&access_email)),
        // Both valid: the token wins (it is checked first, without I/O).
        (&[("authorization", &right), ("cf-access-jwt-assertion", &token)], Some("token")),
        // A wrong bearer (e.g. Access's own OAuth token passed through) does
        // not spoil a valid Access token.
        (
            &[("authorization", "Bearer oauth:opaque"), ("cf-access-jwt-assertion", &token)],
            Some(&access_email),
        ),
        (&[], None),
        (&[("authorization", "Bearer nope"), ("cf-access-jwt-assertion", "nope")], None),
        (&[("authorization", &format!("Basic {TOKEN}"))], None),
    ];
    for (headers, expected) in cases {
        let got = call(&app, headers).await;
        match expected {
            Some(who) => assert_eq!((got.0, got.1.as_str()), (StatusCode::OK, who), "{headers:?}"),
            None => assert_refused(got, &format!("{headers:?}")),
        }
    }
}

/// A request body that records whether anyone polled it.
struct Watched {
    polled: Arc<AtomicBool>,
    data: Option<Bytes>,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        self.polled.store(true, Ordering::SeqCst);
        Poll::Ready(self.data.take().map(|d| Ok(http_body::Frame::data(d))))
    }
}

#[derive(Clone)]
struct Empty;

impl rmcp::ServerHandler for Empty {}

#[tokio::test]
async fn in_front_of_the_mcp_router_no_body_is_read_for_a_stranger() {
    let options = McpOptions {
        allowed_hosts: vec!["localhost".into()],
        extra_origins: vec![],
        max_body_bytes: 1024,
        body_timeout: Duration::from_secs(10),
    };
    let shutdown = CancellationToken::new();
    let auth = combined(Some(BearerAuth::new(TOKEN).unwrap()), None).unwrap();
    // As serverfs-dev wires it: auth added after the body limits, so it runs first.
    let app = mcp_router(|| Empty, &options, &shutdown).route_layer(auth);

    let send = |authorization: Option<String>| {
        let app = app.clone();
        async move {
            let polled = Arc::new(AtomicBool::new(false));
            let body = Watched {
                polled: Arc::clone(&polled),
                data: Some(Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)),
            };
            let mut request = Request::post("/mcp")
                .header("host", "localhost")
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "2025-06-18");
            if let Some(value) = authorization {
                request = request.header("authorization", value);
            }
            let response = app.oneshot(request.body(Body::new(body)).unwrap()).await.unwrap();
            (response.status(), polled.load(Ordering::SeqCst))
        }
    };
    let (status, polled) = send(None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!polled, "the body of a refused request was read");
    let (status, polled) = send(Some("Bearer wrong".into())).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!polled, "the body of a refused request was read");
    // Admitted: the body limits read it and rmcp answers.
    let (status, polled) = send(Some(format!("Bearer {TOKEN}"))).await;
    assert!(polled, "admitted request's body was read");
    assert_ne!(status, StatusCode::UNAUTHORIZED);
}

/// An MCP server whose only answer names the principal it was called as,
/// read the way serverfs-dev's handlers read it: rmcp hands the HTTP
/// request parts to the handler, and the layer's `Principal` is among their
/// extensions.
#[derive(Clone)]
struct WhoAmI;

impl rmcp::ServerHandler for WhoAmI {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder().enable_tools().build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        let who = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
            .map_or_else(|| "nobody".to_owned(), Principal::to_string);
        let schema: rmcp::model::JsonObject =
            serde_json::from_value(serde_json::json!({"type": "object"})).unwrap();
        let tool = rmcp::model::Tool::new(who, "who called", Arc::new(schema));
        Ok(rmcp::model::ListToolsResult::with_all_items(vec![tool]))
    }
}

#[tokio::test]
async fn the_principal_reaches_the_mcp_handler() {
    let server = JwksServer::start(jwks(vec![jwk(KEY_A, "kid-a")]), Duration::ZERO).await;
    let options = McpOptions {
        allowed_hosts: vec!["localhost".into()],
        extra_origins: vec![],
        max_body_bytes: 64 * 1024,
        body_timeout: Duration::from_secs(10),
    };
    let shutdown = CancellationToken::new();
    let auth =
        combined(Some(BearerAuth::new(TOKEN).unwrap()), Some(server.verifier(None))).unwrap();
    let app = mcp_router(|| WhoAmI, &options, &shutdown).route_layer(auth);
    let list_tools = |name: &'static str, value: String| {
        let app = app.clone();
        async move {
            let request = Request::post("/mcp")
                .header("host", "localhost")
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "2025-06-18")
                .header(name, value)
                .body(Body::from(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#))
                .unwrap();
            let response = app.oneshot(request).await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
            let reply: serde_json::Value = serde_json::from_slice(&body).unwrap();
            reply["result"]["tools"][0]["name"].as_str().unwrap().to_owned()
        }
    };
    assert_eq!(list_tools("authorization", format!("Bearer {TOKEN}")).await, "token");
    let token = sign(KEY_A, "kid-a", &claims());
    assert_eq!(list_tools("cf-access-jwt-assertion", token).await, format!("access:{EMAIL}"));
}
