//! Authentication on `/mcp`: one tower layer,
//! [`Auth`] → [`RequireAuth`], for both binaries. It asks each configured
//! [`Verify`] in turn (the bearer tokens here, [`BearerAuth`]; Cloudflare
//! Access in serverfs-auth) and lets a request in as the first one's
//! [`Principal`].
//!
//! Guarantees:
//! - Only request headers are looked at; the body is never polled, so the
//!   layer placed outside the body limits refuses a stranger before a byte
//!   of the body is read. The inner service is never called for a refused
//!   request; an admitted one carries its [`Principal`] in its extensions.
//! - Bearer tokens are compared in constant time in their bytes (`subtle`),
//!   against every configured token with no early exit; only the length of
//!   the presented credential can influence timing, which says nothing
//!   useful about a high-entropy token. Exactly one `Authorization` header
//!   with the `Bearer` scheme (any case, as RFC 9110 §11.1 makes schemes
//!   case-insensitive) is accepted; the local token
//!   ([`BearerAuth::local`]) also as the one `token=` of the query, for
//!   clients that take only a URL (as Jupyter's per-start token is).
//! - A refusal is `401` with a short plain-text body (`401 Unauthorized:
//!   missing or invalid <what the binary accepts>`). Which check failed is
//!   logged (`auth_refused`, INFO) with the method and path, never a token
//!   or an unverified claim; `Debug` of a [`BearerAuth`] is redacted.
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
use axum::http::{HeaderMap, HeaderValue, Request, Response, StatusCode, Uri};
use subtle::{ConditionallySelectable, ConstantTimeEq};
use tower::{Layer, Service};

/// Who a request was admitted as.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Principal {
    /// A holder of a bearer token: `None` for the one unnamed token (every
    /// holder is the same principal), else the token's name.
    Token(Option<Arc<str>>),
    /// A user Cloudflare Access vouched for.
    Access {
        /// The user's email from the verified Access token.
        email: String,
    },
}

/// The principal's name in logs and audit lines, and as the owner of what
/// it opens: `token`, `token:<name>` or `access:<email>`.
impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Token(None) => f.write_str("token"),
            Self::Token(Some(name)) => write!(f, "token:{name}"),
            Self::Access { email } => write!(f, "access:{email}"),
        }
    }
}

/// The future a [`Verify`] answers with: the principal, or a log-safe
/// reason for the refusal.
pub type Verdict<'a> = Pin<Box<dyn Future<Output = Result<Principal, &'static str>> + Send + 'a>>;

/// One way of proving who calls (a bearer token, an Access JWT).
pub trait Verify: Send + Sync + fmt::Debug {
    /// Its name in the start-up log line (`bearer`, `cloudflare-access`).
    fn method(&self) -> &'static str;

    /// Checks a request's headers (and, for a method that accepts one
    /// there, the credential in its query). The reason of a refusal is
    /// logged: it must never contain a credential or an unverified claim.
    fn verify<'a>(&'a self, uri: &'a Uri, headers: &'a HeaderMap) -> Verdict<'a>;
}

/// Why a request was refused: each configured method's finding, in order.
/// Its text (the findings joined by `; `) is safe to log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal(pub Vec<&'static str>);

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("; "))
    }
}

/// The configured bearer tokens: one unnamed token (`SERVERFS_TOKEN`), or
/// several named ones, each its own [`Principal`].
#[derive(Clone)]
pub struct BearerAuth {
    tokens: Arc<[Token]>,
    /// Also accepted as `token=` in the query ([`BearerAuth::local`]).
    in_query: bool,
}

/// One configured token and the name of its holder.
struct Token {
    name: Option<Arc<str>>,
    secret: Box<[u8]>,
}

impl fmt::Debug for BearerAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.tokens.iter().map(|t| t.name.as_deref()).collect();
        write!(f, "BearerAuth({names:?}, <redacted>)")
    }
}

/// Longest token name (names appear in logs and owner names).
const MAX_NAME_BYTES: usize = 64;

impl BearerAuth {
    /// One unnamed token. Accepts a token of visible ASCII characters
    /// (RFC 6750 `b64token` and more), without spaces or commas: a comma
    /// would split tunnel-client's comma-separated `MCP_EXTRA_HEADERS`.
    ///
    /// # Errors
    /// An empty token, one shorter than 16 bytes, or one with a
    /// character outside that set (the message never contains the token).
    // A `String`: the message of the `ConfigError` the caller names the
    // setting for; no caller tells its causes apart.
    pub fn new(token: &str) -> Result<Self, String> {
        check_token(token)?;
        let tokens = Arc::new([Token { name: None, secret: token.as_bytes().into() }]);
        Ok(Self { tokens, in_query: false })
    }

    /// The local token: one a server drew for this start alone (see
    /// serverfs-dev's `local_token`), admitting its holder as
    /// `Principal::Token(Some("local"))`, in the `Authorization` header or
    /// as the one `token=` of the request's query (a URL-only client).
    ///
    /// # Errors
    /// As [`Self::new`].
    pub fn local(token: &str) -> Result<Self, String> {
        check_token(token)?;
        let secret = token.as_bytes().into();
        Ok(Self {
            tokens: Arc::new([Token { name: Some("local".into()), secret }]),
            in_query: true,
        })
    }

    /// Several named tokens, each admitting its holder as
    /// `Principal::Token(Some(name))`. Each entry is `(label, name, token)`,
    /// the label saying where it came from (`line 3`) for messages. A name
    /// is 1–64 letters, digits, `.`, `_` or `-`; tokens follow
    /// [`Self::new`]'s rule; names and tokens are unique.
    ///
    /// # Errors
    /// The first bad entry's label and why (the message may contain a name,
    /// never a token), or that there is no entry.
    // A `String`: as `new`'s.
    pub fn named<'a, L: fmt::Display>(
        entries: impl IntoIterator<Item = (L, &'a str, &'a str)>,
    ) -> Result<Self, String> {
        let mut tokens: Vec<Token> = Vec::new();
        let mut labels: Vec<String> = Vec::new();
        for (label, name, token) in entries {
            let name_ok = (1..=MAX_NAME_BYTES).contains(&name.len())
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            if !name_ok {
                return Err(format!(
                    "{label}: the name must be 1 to {MAX_NAME_BYTES} letters, digits, '.', '_' \
                     or '-'"
                ));
            }
            check_token(token).map_err(|e| format!("{label}: {e}"))?;
            for (other, other_label) in tokens.iter().zip(&labels) {
                if other.name.as_deref() == Some(name) {
                    return Err(format!("{label}: the name '{name}' is also on {other_label}"));
                }
                if bool::from(other.secret.ct_eq(token.as_bytes())) {
                    return Err(format!("{label}: the same token as {other_label}"));
                }
            }
            tokens.push(Token { name: Some(name.into()), secret: token.as_bytes().into() });
            labels.push(label.to_string());
        }
        if tokens.is_empty() {
            return Err("no token is given".to_owned());
        }
        Ok(Self { tokens: tokens.into(), in_query: false })
    }

    /// The principal whose token `headers` carry (in exactly one
    /// `Authorization: Bearer <token>`), if any.
    pub fn principal(&self, headers: &HeaderMap) -> Option<Principal> {
        let mut values = headers.get_all(AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return None;
        };
        self.holder(bearer_credentials(value.as_bytes())?)
    }

    /// The principal whose token is the one `token=` of `uri`'s query,
    /// when this is the local token; the value is compared as it is
    /// (the tokens a server draws need no percent-encoding).
    fn principal_in_query(&self, uri: &Uri) -> Option<Principal> {
        if !self.in_query {
            return None;
        }
        let mut values = uri.query()?.split('&').filter_map(|pair| pair.strip_prefix("token="));
        let (Some(value), None) = (values.next(), values.next()) else {
            return None;
        };
        self.holder(value.as_bytes())
    }

    /// The holder of `presented`, compared with every token.
    fn holder(&self, presented: &[u8]) -> Option<Principal> {
        // Every token is compared, whichever matches: the time taken does
        // not depend on which one (if any) it was.
        let mut found = subtle::CtOption::new(0_u32, 0.into());
        for (index, token) in self.tokens.iter().enumerate() {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            let here = subtle::CtOption::new(index, presented.ct_eq(&token.secret));
            found = subtle::CtOption::conditional_select(&found, &here, here.is_some());
        }
        let index = Option::<u32>::from(found)?;
        let token = self.tokens.get(usize::try_from(index).ok()?)?;
        Some(Principal::Token(token.name.clone()))
    }
}

/// The shortest token accepted: 16 bytes, 96 bits and more of a random
/// source's output in any common encoding (`openssl rand -hex 16` gives 32).
pub(crate) const MIN_TOKEN_BYTES: usize = 16;

/// [`BearerAuth::new`]'s rule for one token.
// A `String`: part of `new`'s and `named`'s message.
fn check_token(token: &str) -> Result<(), String> {
    if token.is_empty() {
        return Err("the token is empty".into());
    }
    if !token.bytes().all(|b| b.is_ascii_graphic() && b != b',') {
        return Err("the token may only contain visible ASCII characters other than ','".into());
    }
    if token.len() < MIN_TOKEN_BYTES {
        return Err(format!(
            "the token is {} bytes; use at least {MIN_TOKEN_BYTES} random ones (e.g. \
             `openssl rand -hex 32`)",
            token.len()
        ));
    }
    Ok(())
}

impl Verify for BearerAuth {
    fn method(&self) -> &'static str {
        "bearer"
    }

    fn verify<'a>(&'a self, uri: &'a Uri, headers: &'a HeaderMap) -> Verdict<'a> {
        let verdict = self.principal(headers).or_else(|| self.principal_in_query(uri)).ok_or(
            if headers.contains_key(AUTHORIZATION) {
                "invalid bearer credentials"
            } else {
                "no Authorization header"
            },
        );
        Box::pin(std::future::ready(verdict))
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

/// The configured ways in; as a [`Layer`] it guards the wrapped service.
#[derive(Clone, Debug)]
pub struct Auth {
    verifiers: Arc<[Arc<dyn Verify>]>,
    /// What a refusal says is missing (`bearer token`, `credentials`).
    wanted: &'static str,
}

impl Auth {
    /// The layer asking `verifiers` in order (put those without I/O
    /// first); `None` when there is none (then nothing guards the
    /// endpoint). A refusal's body is `401 Unauthorized: missing or invalid
    /// <wanted>`.
    pub fn new(verifiers: Vec<Arc<dyn Verify>>, wanted: &'static str) -> Option<Self> {
        (!verifiers.is_empty()).then(|| Self { verifiers: verifiers.into(), wanted })
    }

    /// The configured methods joined by `+`, for the start-up log line
    /// (`bearer`, `bearer+cloudflare-access`).
    pub fn methods(&self) -> String {
        self.verifiers.iter().map(|v| v.method()).collect::<Vec<_>>().join("+")
    }

    /// Checks `headers` with each method in turn; the first that admits
    /// decides.
    ///
    /// # Errors
    /// What each method found.
    pub async fn authenticate(&self, uri: &Uri, headers: &HeaderMap) -> Result<Principal, Refusal> {
        let mut reasons = Vec::with_capacity(self.verifiers.len());
        for verifier in self.verifiers.iter() {
            match verifier.verify(uri, headers).await {
                Ok(principal) => return Ok(principal),
                Err(reason) => reasons.push(reason),
            }
        }
        Err(Refusal(reasons))
    }

    /// The answer to a refused request.
    fn unauthorized(&self) -> Response<Body> {
        let text = format!("401 Unauthorized: missing or invalid {}\n", self.wanted);
        let mut response = Response::new(Body::from(text));
        *response.status_mut() = StatusCode::UNAUTHORIZED;
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
        response
    }
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
            match auth.authenticate(request.uri(), request.headers()).await {
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
                    Ok(auth.unauthorized())
                }
            }
        })
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
    fn only_the_local_token_is_taken_from_the_query() {
        let secret = "0123456789abcdef0123456789abcdef";
        let local = BearerAuth::local(secret).unwrap();
        let uri = |q: &str| format!("/mcp?{q}").parse::<Uri>().unwrap();
        let admitted = |auth: &BearerAuth, q: &str| {
            auth.principal(&HeaderMap::new()).or_else(|| auth.principal_in_query(&uri(q)))
        };
        let holder = Some(Principal::Token(Some("local".into())));
        assert_eq!(admitted(&local, &format!("token={secret}")), holder);
        assert_eq!(admitted(&local, &format!("a=1&token={secret}&b=2")), holder);
        assert_eq!(local.principal(&headers(&[&format!("Bearer {secret}")])), holder);
        assert_eq!(Principal::Token(Some("local".into())).to_string(), "token:local");
        for bad in [
            format!("token={secret}x"),
            format!("token={secret}&token={secret}"),
            format!("xtoken={secret}"),
            "token=".to_owned(),
            String::new(),
        ] {
            assert_eq!(admitted(&local, &bad), None, "{bad}");
        }
        // A configured token travels in the header alone.
        let configured = BearerAuth::new(secret).unwrap();
        assert_eq!(admitted(&configured, &format!("token={secret}")), None);
    }

    #[test]
    fn accepts_only_one_exact_bearer_token() {
        let auth = BearerAuth::new("s3cret-token-0123456").unwrap();
        assert_eq!(
            auth.principal(&headers(&["Bearer s3cret-token-0123456"])),
            Some(Principal::Token(None))
        );
        assert!(auth.principal(&headers(&["bearer   s3cret-token-0123456"])).is_some());
        for bad in [
            &[][..],
            &["Bearer s3cret-toke"],
            &["Bearer s3cret-token-01234562"],
            &["Bearer "],
            &["Bearer"],
            &["Basic czNjcmV0LXRva2Vu"],
            &["s3cret-token-0123456"],
            &["Bearers3cret-token-0123456"],
            &["Bearer s3cret-token-0123456", "Bearer s3cret-token-0123456"],
        ] {
            assert!(auth.principal(&headers(bad)).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn rejects_unusable_tokens_without_echoing_them() {
        for bad in ["", "two words", "a,b", "tab\there", "naïve", "short-token-15b"] {
            let e = BearerAuth::new(bad).unwrap_err();
            assert!(bad.is_empty() || !e.contains(bad), "{e}");
        }
        let auth = BearerAuth::new("hidden-value-0123456").unwrap();
        assert!(!format!("{auth:?}").contains("hidden-value-0123456"));
    }

    #[test]
    fn each_named_token_is_its_own_principal() {
        let auth = BearerAuth::named([
            (1, "alice", "tok-a-0123456789abc"),
            (2, "bob.ci", "tok-b-0123456789abc"),
        ])
        .unwrap();
        let who = |value: &str| auth.principal(&headers(&[value])).map(|p| p.to_string());
        assert_eq!(who("Bearer tok-a-0123456789abc").as_deref(), Some("token:alice"));
        assert_eq!(who("Bearer tok-b-0123456789abc").as_deref(), Some("token:bob.ci"));
        for bad in [
            "Bearer tok-a-0123456789ab",
            "Bearer tok-c-0123456789abc",
            "Bearer alice",
            "Bearer tok-a-0123456789abc4",
        ] {
            assert_eq!(who(bad), None, "{bad}");
        }
        // Two holders' tokens at once are no one's.
        let both = headers(&["Bearer tok-a-0123456789abc", "Bearer tok-b-0123456789abc"]);
        assert_eq!(auth.principal(&both), None);
        let debug = format!("{auth:?}");
        assert!(debug.contains("alice") && !debug.contains("tok-a"), "{debug}");
    }

    #[test]
    fn named_tokens_are_checked_entry_by_entry_never_echoing_a_token() {
        /// (label, name, token) entries.
        type Entries<'a> = &'a [(&'a str, &'a str, &'a str)];
        let bad: &[(Entries<'_>, &str)] = &[
            (&[], "no token"),
            (&[("l1", "", "secret-1-0123456789")], "l1: the name"),
            (&[("l1", "a b", "secret-1-0123456789")], "l1: the name"),
            (&[("l1", "a:b", "secret-1-0123456789")], "l1: the name"),
            (
                &[("l1", "ok", "secret-1-0123456789"), ("l2", "ok2", "secret 2-0123456789")],
                "l2: the token may",
            ),
            (
                &[("l1", "ok", "secret-1-0123456789"), ("l2", "ok", "secret-2-0123456789")],
                "l2: the name 'ok' is also on l1",
            ),
            (
                &[
                    ("l1", "ok", "secret-1-0123456789"),
                    ("l2", "ok2", "secret-3-0123456789"),
                    ("l3", "ok3", "secret-1-0123456789"),
                ],
                "l3: the same token as l1",
            ),
        ];
        for (entries, expected) in bad {
            let why = BearerAuth::named(entries.iter().copied()).unwrap_err();
            assert!(why.starts_with(expected), "{entries:?}: {why}");
            assert!(!why.contains("secret"), "{why}");
        }
        let long = "n".repeat(MAX_NAME_BYTES + 1);
        assert!(BearerAuth::named([(1, long.as_str(), "t")]).is_err());
    }

    #[test]
    fn principals_are_named_for_owners_and_logs() {
        assert_eq!(Principal::Token(None).to_string(), "token");
        assert_eq!(Principal::Token(Some("ci".into())).to_string(), "token:ci");
        let access = Principal::Access { email: "a@example.com".into() };
        assert_eq!(access.to_string(), "access:a@example.com");
    }

    #[test]
    fn nothing_configured_is_no_layer() {
        assert!(Auth::new(Vec::new(), "credentials").is_none());
        let bearer: Arc<dyn Verify> = Arc::new(BearerAuth::new("t-0123456789abcdef").unwrap());
        assert_eq!(Auth::new(vec![bearer], "bearer token").unwrap().methods(), "bearer");
    }
}
