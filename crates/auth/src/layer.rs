//! The combined authentication layer of serverfs-dev's HTTP endpoint: the
//! bearer token ([`BearerAuth`] of serverfs-transport, reused as is) and/or
//! Cloudflare Access tokens ([`AccessJwt`]). When both are configured either
//! one lets a request in.
//!
//! Guarantees:
//! - Only request headers are looked at; the body is never polled, so the
//!   layer placed outside the body limits refuses a stranger before a byte
//!   of the body is read.
//! - An admitted request carries its [`Principal`] in its extensions; the
//!   inner service is never called for a refused one.
//! - A refusal is `401` with the plain-text body
//!   `401 Unauthorized: missing or invalid credentials` and no
//!   `WWW-Authenticate` header (see serverfs-transport's auth module for why
//!   no challenge is sent). Which check failed is logged at INFO with the
//!   method and path, never a token or an unverified claim.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use serverfs_transport::BearerAuth;
use tower::{Layer, Service};

use crate::access::{AccessError, AccessJwt};

/// Who a request was admitted as.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Principal {
    /// The holder of the bearer token (every holder is the same principal).
    Token,
    /// A user Cloudflare Access vouched for.
    Access {
        /// The user's email from the verified Access token.
        email: String,
    },
}

/// Why a request was refused: what each configured method found. Safe to
/// log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The bearer check's finding, when a token is configured.
    pub bearer: Option<&'static str>,
    /// The Access check's finding, when Access is configured.
    pub access: Option<AccessError>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if let Some(bearer) = self.bearer {
            write!(f, "{bearer}")?;
            sep = "; ";
        }
        if let Some(access) = self.access {
            write!(f, "{sep}{access}")?;
        }
        Ok(())
    }
}

/// The configured credentials; as a [`Layer`] it guards the wrapped service.
#[derive(Clone, Debug)]
pub struct Auth {
    bearer: Option<BearerAuth>,
    access: Option<AccessJwt>,
}

impl Auth {
    /// The layer for the configured methods; `None` when neither is
    /// configured (then nothing guards the endpoint: see
    /// [`crate::require_auth_for_listen`]).
    pub fn new(bearer: Option<BearerAuth>, access: Option<AccessJwt>) -> Option<Self> {
        (bearer.is_some() || access.is_some()).then_some(Self { bearer, access })
    }

    /// The configured methods, for the start-up log line: `bearer`,
    /// `cloudflare-access` or `bearer+cloudflare-access`.
    pub fn methods(&self) -> &'static str {
        match (&self.bearer, &self.access) {
            (Some(_), Some(_)) => "bearer+cloudflare-access",
            (Some(_), None) => "bearer",
            _ => "cloudflare-access",
        }
    }

    /// The Access verifier, if configured (e.g. to prefetch its keys).
    pub fn access(&self) -> Option<&AccessJwt> {
        self.access.as_ref()
    }

    /// Checks `headers`: the bearer token first (no I/O), then the Access
    /// token.
    ///
    /// # Errors
    /// What each configured method found.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Refusal> {
        let mut refusal = Refusal { bearer: None, access: None };
        if let Some(bearer) = &self.bearer {
            if bearer.authorizes(headers) {
                return Ok(Principal::Token);
            }
            refusal.bearer = Some(if headers.contains_key(AUTHORIZATION) {
                "invalid bearer credentials"
            } else {
                "no Authorization header"
            });
        }
        if let Some(access) = &self.access {
            match access.verify_headers(headers).await {
                Ok(identity) => return Ok(Principal::Access { email: identity.email }),
                Err(e) => refusal.access = Some(e),
            }
        }
        Err(refusal)
    }
}

/// The answer to a refused request.
fn unauthorized() -> Response<Body> {
    let mut response =
        Response::new(Body::from("401 Unauthorized: missing or invalid credentials\n"));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

impl<S> Layer<S> for Auth {
    type Service = RequireAuth<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequireAuth { auth: self.clone(), inner }
    }
}

/// The service [`Auth`] wraps around another.
#[derive(Clone, Debug)]
pub struct RequireAuth<S> {
    auth: Auth,
    inner: S,
}

impl<S, B> Service<Request<B>> for RequireAuth<S>
where
    S: Service<Request<B>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        // The service that was polled ready goes into the future; a fresh
        // clone stays for the next call (tower's usual dance).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let auth = self.auth.clone();
        Box::pin(async move {
            match auth.authenticate(request.headers()).await {
                Ok(principal) => {
                    request.extensions_mut().insert(principal);
                    inner.call(request).await
                }
                Err(refusal) => {
                    tracing::info!(
                        event = "auth_refused",
                        method = %request.method(),
                        path = request.uri().path(),
                        reason = %refusal,
                    );
                    Ok(unauthorized())
                }
            }
        })
    }
}
