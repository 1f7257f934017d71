//! A router behind the auth layer, and one call to it: for the layer tests
//! (serverfs-dev's own auth test includes `support` but not this).

#![allow(dead_code, unreachable_pub)] // each test file uses part of this

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::routing::post;
use axum::{Extension, Router};
use serverfs_transport::{Auth, Principal};
use tower::ServiceExt as _;

/// The bearer token the layer tests configure.
pub const TOKEN: &str = "0123456789abcdef0123456789abcdef";

async fn who(Extension(principal): Extension<Principal>) -> String {
    principal.to_string()
}

/// A router whose `/mcp` answers the principal, behind `auth`.
pub fn app(auth: Auth) -> Router {
    Router::new().route("/mcp", post(who)).route_layer(auth)
}

/// Request headers as (name, value) pairs.
pub type Headers<'a> = &'a [(&'a str, &'a str)];

/// One POST to `/mcp`: status, body, and whether a `WWW-Authenticate` came back.
pub async fn call(app: &Router, headers: Headers<'_>) -> (StatusCode, String, bool) {
    let mut request = Request::post("/mcp");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = app.clone().oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
    let status = response.status();
    let challenge = response.headers().contains_key(header::WWW_AUTHENTICATE);
    let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap(), challenge)
}

/// The one refusal body, whatever the reason.
pub const REFUSED: &str = "401 Unauthorized: missing or invalid credentials\n";

pub fn assert_refused((status, body, challenge): (StatusCode, String, bool), what: &str) {
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}");
    assert_eq!(body, REFUSED, "{what}");
    assert!(!challenge, "{what}: no WWW-Authenticate");
}
