//! Optional static bearer token (SPEC §2.7): a tower [`Layer`] that lets a
//! request through only when it carries `Authorization: Bearer <token>`.
//!
//! Guarantees:
//! - The comparison is constant-time in the token's bytes (`subtle`); only
//!   the length of the presented credential can influence timing, which
//!   says nothing useful about a high-entropy token.
//! - Exactly one `Authorization` header with the `Bearer` scheme (any case,
//!   as RFC 9110 §11.1 makes schemes case-insensitive) is accepted; a missing
//!   or repeated header, another scheme (`Basic`, …) or a wrong token is 401
//!   with a short plain-text body, and the inner service is never called.
//! - The token is never printed: `Debug` is redacted, and a refusal is
//!   logged (`auth_refused`) with its reason, never what was presented.
//!
//! The 401 carries no `WWW-Authenticate` header on purpose. OpenAI's
//! tunnel-client switches from its static `MCP_EXTRA_HEADERS` to an OAuth
//! flow when a 401 carries `WWW-Authenticate: Bearer resource_metadata=…`;
//! with no challenge at all there is nothing to misread as an OAuth server,
//! so a misconfigured tunnel stays in static-header mode and reports the
//! 401 instead of starting a discovery that can never succeed. (RFC 9110
//! asks for a challenge on 401; this server has no scheme a client could
//! negotiate, so the omission loses nothing.)

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use subtle::ConstantTimeEq;
use tower::{Layer, Service};

/// A configured bearer token; as a [`Layer`] it guards the wrapped service.
#[derive(Clone)]
pub struct BearerAuth {
    token: Arc<[u8]>,
}

impl fmt::Debug for BearerAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerAuth(<redacted>)")
    }
}

impl BearerAuth {
    /// Accepts a token of visible ASCII characters (RFC 6750 `b64token` and
    /// more), without spaces or commas: a comma would split tunnel-client's
    /// comma-separated `MCP_EXTRA_HEADERS`.
    ///
    /// # Errors
    /// An empty token, or one with a character outside that set (the
    /// message never contains the token).
    pub fn new(token: &str) -> Result<Self, String> {
        if token.is_empty() {
            return Err("the token is empty".into());
        }
        if !token.bytes().all(|b| b.is_ascii_graphic() && b != b',') {
            return Err("the token may only contain visible ASCII characters other than ','".into());
        }
        Ok(Self { token: token.as_bytes().into() })
    }

    /// Whether `headers` hold exactly one `Authorization: Bearer <token>`
    /// with this token.
    pub fn authorizes(&self, headers: &HeaderMap) -> bool {
        let mut values = headers.get_all(AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return false;
        };
        bearer_credentials(value.as_bytes())
            .is_some_and(|presented| bool::from(presented.ct_eq(&self.token)))
    }
}

/// The credentials of a `Bearer` authorization value: the scheme (any case),
/// one or more spaces, then the token.
fn bearer_credentials(value: &[u8]) -> Option<&[u8]> {
    const SCHEME: &[u8] = b"bearer ";
    let head = value.get(..SCHEME.len())?;
    if !head.eq_ignore_ascii_case(SCHEME) {
        return None;
    }
    let rest = &value[SCHEME.len()..];
    let start = rest.iter().position(|&b| b != b' ')?;
    Some(&rest[start..])
}

fn unauthorized() -> Response<Body> {
    let mut response =
        Response::new(Body::from("401 Unauthorized: missing or invalid bearer token\n"));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

impl<S> Layer<S> for BearerAuth {
    type Service = RequireBearer<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequireBearer { auth: self.clone(), inner }
    }
}

/// The service [`BearerAuth`] wraps around another.
#[derive(Clone, Debug)]
pub struct RequireBearer<S> {
    auth: BearerAuth,
    inner: S,
}

impl<S, B> Service<Request<B>> for RequireBearer<S>
where
    S: Service<Request<B>, Response = Response<Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if self.auth.authorizes(request.headers()) {
            Box::pin(self.inner.call(request))
        } else {
            // The reason, never what was presented.
            let reason = if request.headers().contains_key(AUTHORIZATION) {
                "invalid bearer credentials"
            } else {
                "no Authorization header"
            };
            tracing::info!(
                event = "auth_refused",
                method = %request.method(),
                path = request.uri().path(),
                reason,
            );
            Box::pin(std::future::ready(Ok(unauthorized())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn accepts_only_one_exact_bearer_token() {
        let auth = BearerAuth::new("s3cret-token").unwrap();
        assert!(auth.authorizes(&headers(&["Bearer s3cret-token"])));
        assert!(auth.authorizes(&headers(&["bearer   s3cret-token"])));
        for bad in [
            &[][..],
            &["Bearer s3cret-toke"],
            &["Bearer s3cret-token2"],
            &["Bearer "],
            &["Bearer"],
            &["Basic czNjcmV0LXRva2Vu"],
            &["s3cret-token"],
            &["Bearers3cret-token"],
            &["Bearer s3cret-token", "Bearer s3cret-token"],
        ] {
            assert!(!auth.authorizes(&headers(bad)), "{bad:?}");
        }
    }

    #[test]
    fn rejects_unusable_tokens_without_echoing_them() {
        for bad in ["", "two words", "a,b", "tab\there", "naïve"] {
            let e = BearerAuth::new(bad).unwrap_err();
            assert!(bad.is_empty() || !e.contains(bad), "{e}");
        }
        let auth = BearerAuth::new("hidden-value").unwrap();
        assert!(!format!("{auth:?}").contains("hidden-value"));
    }
}
