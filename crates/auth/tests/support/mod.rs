//! Test fixtures: a JWKS server on 127.0.0.1 that counts its fetches and can
//! rotate keys, the two committed test keys, and token minting.

#![allow(dead_code, unreachable_pub)] // each test file uses part of this

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use serverfs_auth::{AccessConfig, AccessJwt};

pub const TEAM: &str = "testteam";
pub const ISSUER: &str = "https://testteam.cloudflareaccess.com";
pub const AUD: &str = "4714c1358e65fe4b408ad6d432a5f878f08194bdb4752441fd56faefa9b2b6f2";
pub const EMAIL: &str = "dev@example.com";

pub const KEY_A: &str = include_str!("../keys/rsa-a.pem");
pub const KEY_B: &str = include_str!("../keys/rsa-b.pem");

/// The JWK (public half) of a test key, under `kid`.
pub fn jwk(pem: &str, kid: &str) -> Value {
    let key = EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap();
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::RS256).unwrap();
    jwk.common.key_id = Some(kid.to_owned());
    jwk.common.public_key_use = Some(PublicKeyUse::Signature);
    serde_json::to_value(jwk).unwrap()
}

/// A JWKS document shaped like Cloudflare's (`keys`, `public_cert`,
/// `public_certs`).
pub fn jwks(keys: Vec<Value>) -> Value {
    json!({
        "keys": keys,
        "public_cert": {"kid": "ignored", "cert": "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n"},
        "public_certs": [],
    })
}

#[derive(Clone)]
struct ServerState {
    document: Arc<Mutex<Value>>,
    status: Arc<Mutex<StatusCode>>,
    fetches: Arc<AtomicUsize>,
    delay: Duration,
}

/// A JWKS endpoint on an ephemeral loopback port.
pub struct JwksServer {
    pub url: String,
    state: ServerState,
}

impl JwksServer {
    /// Serves `document` at `/cdn-cgi/access/certs`; each answer waits
    /// `delay` first (so concurrent callers pile up behind one fetch).
    pub async fn start(document: Value, delay: Duration) -> Self {
        let state = ServerState {
            document: Arc::new(Mutex::new(document)),
            status: Arc::new(Mutex::new(StatusCode::OK)),
            fetches: Arc::new(AtomicUsize::new(0)),
            delay,
        };
        let app =
            Router::new().route("/cdn-cgi/access/certs", get(certs)).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/cdn-cgi/access/certs", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, state }
    }

    /// How many times the keys were fetched.
    pub fn fetches(&self) -> usize {
        self.state.fetches.load(Ordering::SeqCst)
    }

    /// Serves `document` from now on.
    pub fn rotate(&self, document: Value) {
        *self.state.document.lock().unwrap() = document;
    }

    /// Answers with `status` (and no keys unless 200) from now on.
    pub fn set_status(&self, status: StatusCode) {
        *self.state.status.lock().unwrap() = status;
    }

    /// A verifier for the test team and AUD, fetching from this server.
    pub fn verifier(&self, min_refresh_interval: Option<Duration>) -> AccessJwt {
        let mut config =
            AccessConfig::new(TEAM, &[AUD]).unwrap().with_certs_url(&self.url).unwrap();
        if let Some(interval) = min_refresh_interval {
            config = config.with_min_refresh_interval(interval);
        }
        AccessJwt::new(config).unwrap()
    }
}

async fn certs(State(state): State<ServerState>) -> Response {
    state.fetches.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(state.delay).await;
    let status = *state.status.lock().unwrap();
    if status != StatusCode::OK {
        return (status, "unavailable").into_response();
    }
    let body = state.document.lock().unwrap().to_string();
    ([("content-type", "application/json")], body).into_response()
}

pub fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// Claims like Access puts in an application token, valid for 5 minutes.
pub fn claims() -> Value {
    let now = now();
    json!({
        "aud": [AUD],
        "email": EMAIL,
        "exp": now + 300,
        "iat": now,
        "nbf": now,
        "iss": ISSUER,
        "type": "app",
        "identity_nonce": "6ei69kawdKzMIAPF",
        "sub": "7335d417-61da-459d-899c-0a01c76a2f94",
        "country": "US",
    })
}

/// An RS256 token over `claims` signed with `pem`, naming `kid`.
pub fn sign(pem: &str, kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    let key = EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap();
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

/// An HS256 token over `claims` with `secret`, naming `kid`.
pub fn sign_hs256(secret: &[u8], kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_secret(secret).unwrap()).unwrap()
}

/// An unsigned token: `header` as given, empty signature.
pub fn unsigned(header: &Value, claims: &Value) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!("{}.{}.", b64.encode(header.to_string()), b64.encode(claims.to_string()))
}
