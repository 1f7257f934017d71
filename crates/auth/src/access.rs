//! Cloudflare Access application tokens: the signed JWT
//! Access puts in `Cf-Access-Jwt-Assertion` on every request it forwards.
//!
//! Guarantees of [`AccessJwt::verify`]:
//! - Only `RS256` is accepted. The algorithm is read from the token's header
//!   and anything else (`HS256`, `none`, `PS256`, an unknown name) is refused
//!   before any key is looked up or fetched; `jsonwebtoken` enforces the same
//!   list again when it checks the signature. A header that lists `crit`
//!   extensions is refused (we implement none). `jku`, `jwk`, `x5u` and
//!   `x5c` in a token's header are ignored: keys only ever come from the
//!   configured certs URL.
//! - The signature must verify with the team's key whose `kid` the header
//!   names; `iss` must be `https://<team>.cloudflareaccess.com` exactly; `aud`
//!   must contain one of the configured AUD tags; `exp` is required; `exp`
//!   and (when present) `nbf` are checked with [`LEEWAY`]; the token must
//!   carry a non-empty `email` (the owner of what the caller does).
//! - Keys come from the JWKS at the certs URL over a real HTTPS client
//!   (rustls, system roots, no redirects, a timeout and a size cap) and are
//!   cached. A token naming an unknown `kid` triggers at most one refresh per
//!   [`MIN_REFRESH_INTERVAL`], shared by every request that wants it: callers
//!   that arrive while a refresh runs wait for it instead of starting their
//!   own (single flight), and within the interval an unknown `kid` is refused
//!   without any fetch. A flood of made-up key ids therefore costs the JWKS
//!   server one request per interval. Cached keys older than [`KEYS_MAX_AGE`]
//!   are refreshed by the next request that can take the refresh without
//!   waiting (keys Cloudflare has withdrawn stop being accepted); if that
//!   fetch fails the old keys stay in use.
//! - Nothing here logs a token; refusals are values ([`AccessError`]) whose
//!   text is safe to log.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::http::HeaderMap;
use base64::Engine as _;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use tokio::time::Instant;
use url::Url;

/// The request header Access forwards the application token in.
pub const ACCESS_JWT_HEADER: &str = "cf-access-jwt-assertion";

/// Clock skew tolerated on `exp` and `nbf`.
pub const LEEWAY: Duration = Duration::from_secs(30);

/// Least time between two JWKS fetches caused by unknown key ids (default of
/// [`AccessConfig::with_min_refresh_interval`]).
pub const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(30);

/// Age after which cached keys are refetched by the next request.
pub const KEYS_MAX_AGE: Duration = Duration::from_secs(3600);

/// Time one JWKS fetch may take, connection and body included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest JWKS document read (Cloudflare's is about 3 KiB).
const MAX_JWKS_BYTES: usize = 64 * 1024;

/// Most keys taken from one JWKS document (Cloudflare publishes two).
const MAX_KEYS: usize = 16;

/// Longest token looked at (Access tokens are well under 2 KiB).
const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Why a token was refused. The text ([`Self::reason`]) is safe to log; it
/// never contains the token or any claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AccessError {
    /// No `Cf-Access-Jwt-Assertion` header.
    Missing,
    /// More than one `Cf-Access-Jwt-Assertion` header.
    Repeated,
    /// Not a JWT (encoding, structure, JSON, size).
    Malformed,
    /// An algorithm other than RS256.
    Algorithm,
    /// The header names critical extensions we do not implement.
    CriticalHeader,
    /// The header has no `kid`.
    NoKeyId,
    /// No key with the token's `kid`, even after the refresh allowed now.
    UnknownKeyId,
    /// The signature does not verify.
    Signature,
    /// `exp` is past, beyond the leeway.
    Expired,
    /// `nbf` is ahead, beyond the leeway.
    NotYetValid,
    /// `iss` is not the team's issuer.
    Issuer,
    /// `aud` names none of the configured AUD tags.
    Audience,
    /// A required claim (`exp`, `iss`, `aud`) is missing or not well-formed.
    Claims,
    /// No non-empty `email` claim (e.g. a service token).
    NoEmail,
}

impl AccessError {
    /// A short, log-safe description.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Missing => "no Cf-Access-Jwt-Assertion header",
            Self::Repeated => "more than one Cf-Access-Jwt-Assertion header",
            Self::Malformed => "malformed Access token",
            Self::Algorithm => "Access token algorithm is not RS256",
            Self::CriticalHeader => "Access token has critical header extensions",
            Self::NoKeyId => "Access token has no kid",
            Self::UnknownKeyId => "Access token signed with an unknown key",
            Self::Signature => "Access token signature does not verify",
            Self::Expired => "Access token expired",
            Self::NotYetValid => "Access token not yet valid",
            Self::Issuer => "Access token issuer mismatch",
            Self::Audience => "Access token audience mismatch",
            Self::Claims => "Access token lacks a required claim",
            Self::NoEmail => "Access token has no email",
        }
    }
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for AccessError {}

/// The verified identity behind an Access token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessIdentity {
    /// The user's email, verified by the identity provider.
    pub email: String,
    /// Cloudflare's user id (`sub`), empty if absent.
    pub subject: String,
}

/// What an [`AccessJwt`] accepts: the team's issuer, the application's AUD
/// tags and where the team's keys are.
#[derive(Clone, Debug)]
pub struct AccessConfig {
    issuer: String,
    audiences: Vec<String>,
    certs_url: Url,
    min_refresh_interval: Duration,
    keys_max_age: Duration,
}

impl AccessConfig {
    /// `team` is the team name (`myteam`), its domain
    /// (`myteam.cloudflareaccess.com`) or its issuer URL
    /// (`https://myteam.cloudflareaccess.com`, also `….fed.cloudflareaccess.com`);
    /// `audiences` are the application's AUD tags (at least one). Keys are
    /// fetched from `<issuer>/cdn-cgi/access/certs`.
    ///
    /// # Errors
    /// A team that is not one of those forms, or no usable AUD tag (the
    /// messages do not name a setting; callers prefix theirs).
    // A `String`: the message of the `ConfigError` the caller names the
    // setting for; no caller tells its causes apart.
    pub fn new<S: AsRef<str>>(team: &str, audiences: &[S]) -> Result<Self, String> {
        let issuer = team_issuer(team)?;
        let audiences: Vec<String> = audiences
            .iter()
            .map(|a| a.as_ref().trim().to_owned())
            .filter(|a| !a.is_empty())
            .collect();
        if audiences.is_empty() {
            return Err("no AUD tag given".to_owned());
        }
        if let Some(bad) = audiences.iter().find(|a| !a.bytes().all(|b| b.is_ascii_graphic())) {
            return Err(format!(
                "AUD tag '{}' has spaces or non-ASCII characters",
                bad.escape_debug()
            ));
        }
        let certs_url = Url::parse(&format!("{issuer}/cdn-cgi/access/certs"))
            .map_err(|e| format!("cannot form the certs URL: {e}"))?;
        Ok(Self {
            issuer,
            audiences,
            certs_url,
            min_refresh_interval: MIN_REFRESH_INTERVAL,
            keys_max_age: KEYS_MAX_AGE,
        })
    }

    /// Fetches the keys from `url` instead of the team's certs endpoint: for
    /// tests and self-hosted mirrors of the JWKS. It must be `https`, or
    /// `http` to a loopback address (`127.0.0.0/8`, `::1`, `localhost`).
    ///
    /// # Errors
    /// An unparsable URL, another scheme, `http` to a non-loopback host, or
    /// credentials in the URL.
    // A `String`: the message of the `ConfigError` the caller names the
    // setting for; no caller tells its causes apart.
    pub fn with_certs_url(mut self, url: &str) -> Result<Self, String> {
        let parsed = Url::parse(url.trim()).map_err(|e| format!("not a URL: {e}"))?;
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err("the URL may not carry credentials".to_owned());
        }
        match parsed.scheme() {
            "https" => {}
            "http" if is_loopback_url(&parsed) => {}
            "http" => return Err("http is only allowed to a loopback address; use https".into()),
            other => return Err(format!("scheme '{other}' is not https")),
        }
        self.certs_url = parsed;
        Ok(self)
    }

    /// Least time between two fetches caused by unknown key ids
    /// ([`MIN_REFRESH_INTERVAL`] unless changed; tests shorten it).
    #[must_use]
    pub fn with_min_refresh_interval(mut self, interval: Duration) -> Self {
        self.min_refresh_interval = interval;
        self
    }

    /// Age after which cached keys are refetched by the next request that
    /// can do so without waiting ([`KEYS_MAX_AGE`] unless changed).
    #[must_use]
    pub fn with_keys_max_age(mut self, age: Duration) -> Self {
        self.keys_max_age = age;
        self
    }

    /// The exact `iss` accepted: `https://<team>.cloudflareaccess.com`.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The accepted AUD tags.
    pub fn audiences(&self) -> &[String] {
        &self.audiences
    }

    /// Where the keys are fetched.
    pub fn certs_url(&self) -> &str {
        self.certs_url.as_str()
    }
}

/// The issuer URL of a team given as a name, a domain or the issuer itself.
// A `String` error: part of `AccessConfig::new`'s message.
fn team_issuer(team: &str) -> Result<String, String> {
    let team = team.trim().trim_end_matches('/').to_ascii_lowercase();
    let host = if let Some(rest) = team.strip_prefix("https://") {
        rest.to_owned()
    } else if team.contains("://") {
        return Err("the team URL must be https://<team>.cloudflareaccess.com".to_owned());
    } else if team.contains('.') {
        team.clone()
    } else {
        format!("{team}.cloudflareaccess.com")
    };
    let name = host
        .strip_suffix(".fed.cloudflareaccess.com")
        .or_else(|| host.strip_suffix(".cloudflareaccess.com"))
        .ok_or_else(|| {
            "the team must be a name or https://<team>.cloudflareaccess.com".to_owned()
        })?;
    let label_ok = (1..=63).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !label_ok {
        return Err("the team name must be letters, digits and inner hyphens".to_owned());
    }
    Ok(format!("https://{host}"))
}

fn is_loopback_url(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).to_canonical().is_loopback(),
        None => false,
    }
}

/// Verifies Cloudflare Access application tokens for one team and
/// application (see the module docs). Cheap to clone; clones share the key
/// cache.
#[derive(Clone)]
pub struct AccessJwt {
    inner: Arc<Inner>,
}

impl fmt::Debug for AccessJwt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessJwt")
            .field("issuer", &self.inner.config.issuer)
            .field("audiences", &self.inner.config.audiences)
            .field("certs_url", &self.inner.config.certs_url.as_str())
            .finish_non_exhaustive()
    }
}

struct Inner {
    config: AccessConfig,
    validation: Validation,
    client: HttpsClient,
    /// The current key set; replaced whole by each successful fetch.
    keys: RwLock<Arc<KeySet>>,
    /// Held while a fetch runs (single flight); remembers the last attempt.
    refresh: tokio::sync::Mutex<RefreshState>,
}

#[derive(Default)]
struct KeySet {
    by_kid: HashMap<String, Arc<DecodingKey>>,
    fetched_at: Option<Instant>,
}

#[derive(Default)]
struct RefreshState {
    last_attempt: Option<Instant>,
}

#[derive(Deserialize)]
struct PeekedHeader {
    alg: Option<String>,
    kid: Option<String>,
    crit: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    sub: Option<String>,
}

#[derive(Deserialize)]
struct JwksDocument {
    keys: Vec<serde_json::Value>,
}

impl AccessJwt {
    /// A verifier for `config` with its own HTTPS client. No key is fetched
    /// yet (see [`Self::prefetch`]).
    ///
    /// # Errors
    /// If the TLS configuration or the HTTP client cannot be built.
    // A `String`: a start-up message (rustls' and hyper's errors as text);
    // the caller only prints it.
    pub fn new(config: AccessConfig) -> Result<Self, String> {
        ensure_jwt_crypto();
        let client = http_client(&config.certs_url)?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.leeway = LEEWAY.as_secs();
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.set_issuer(&[config.issuer.as_str()]);
        validation.set_audience(&config.audiences);
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                validation,
                client,
                keys: RwLock::new(Arc::new(KeySet::default())),
                refresh: tokio::sync::Mutex::new(RefreshState::default()),
            }),
        })
    }

    /// What this verifier accepts.
    pub fn config(&self) -> &AccessConfig {
        &self.inner.config
    }

    /// Fetches the keys now (e.g. at start-up, to report a wrong team or an
    /// unreachable endpoint early). Counts as a refresh for the rate limit.
    ///
    /// # Errors
    /// Why the fetch failed (safe to log).
    // A `String`: the caller only logs it (see `fetch`).
    pub async fn prefetch(&self) -> Result<usize, String> {
        let mut state = self.inner.refresh.lock().await;
        state.last_attempt = Some(Instant::now());
        let keys = self.fetch().await?;
        let n = keys.len();
        self.store(keys);
        Ok(n)
    }

    /// Verifies the one `Cf-Access-Jwt-Assertion` header of a request.
    ///
    /// # Errors
    /// Why the request was refused.
    pub async fn verify_headers(&self, headers: &HeaderMap) -> Result<AccessIdentity, AccessError> {
        let mut values = headers.get_all(ACCESS_JWT_HEADER).iter();
        match (values.next(), values.next()) {
            (None, _) => Err(AccessError::Missing),
            (Some(_), Some(_)) => Err(AccessError::Repeated),
            (Some(value), None) => {
                let token = value.to_str().map_err(|_| AccessError::Malformed)?;
                self.verify(token.trim()).await
            }
        }
    }

    /// Verifies one token (see the module docs).
    ///
    /// # Errors
    /// Why the token was refused.
    pub async fn verify(&self, token: &str) -> Result<AccessIdentity, AccessError> {
        if token.is_empty() || token.len() > MAX_TOKEN_BYTES {
            return Err(AccessError::Malformed);
        }
        let header = peek_header(token)?;
        if header.alg.as_deref() != Some("RS256") {
            return Err(AccessError::Algorithm);
        }
        if header.crit.is_some() {
            return Err(AccessError::CriticalHeader);
        }
        let kid = header.kid.filter(|k| !k.is_empty()).ok_or(AccessError::NoKeyId)?;
        let key = self.key_for(&kid).await?;
        let data = jsonwebtoken::decode::<Claims>(token, &key, &self.inner.validation)
            .map_err(|e| classify(e.kind()))?;
        let email =
            data.claims.email.filter(|e| !e.trim().is_empty()).ok_or(AccessError::NoEmail)?;
        Ok(AccessIdentity { email, subject: data.claims.sub.unwrap_or_default() })
    }

    fn snapshot(&self) -> Arc<KeySet> {
        Arc::clone(&self.inner.keys.read().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    fn store(&self, by_kid: HashMap<String, Arc<DecodingKey>>) {
        let set = Arc::new(KeySet { by_kid, fetched_at: Some(Instant::now()) });
        *self.inner.keys.write().unwrap_or_else(std::sync::PoisonError::into_inner) = set;
    }

    fn refresh_allowed(&self, state: &RefreshState) -> bool {
        state.last_attempt.is_none_or(|t| t.elapsed() >= self.inner.config.min_refresh_interval)
    }

    /// The key named `kid`: from the cache, or after the one refresh the
    /// rate limit allows.
    async fn key_for(&self, kid: &str) -> Result<Arc<DecodingKey>, AccessError> {
        let keys = self.snapshot();
        if let Some(key) = keys.by_kid.get(kid) {
            let max_age = self.inner.config.keys_max_age;
            let stale = keys.fetched_at.is_some_and(|t| t.elapsed() >= max_age);
            if !stale {
                return Ok(Arc::clone(key));
            }
            // Stale: refresh if nobody else is, else use what we have.
            if let Ok(mut state) = self.inner.refresh.try_lock()
                && self.refresh_allowed(&state)
            {
                self.refresh_locked(&mut state, "stale").await;
            }
            return self.snapshot().by_kid.get(kid).cloned().ok_or(AccessError::UnknownKeyId);
        }
        // Unknown kid: one refresh at a time; waiters see its result.
        let mut state = self.inner.refresh.lock().await;
        if let Some(key) = self.snapshot().by_kid.get(kid) {
            return Ok(Arc::clone(key));
        }
        if !self.refresh_allowed(&state) {
            return Err(AccessError::UnknownKeyId);
        }
        self.refresh_locked(&mut state, "unknown_kid").await;
        drop(state);
        self.snapshot().by_kid.get(kid).cloned().ok_or(AccessError::UnknownKeyId)
    }

    async fn refresh_locked(&self, state: &mut RefreshState, cause: &'static str) {
        state.last_attempt = Some(Instant::now());
        match self.fetch().await {
            Ok(keys) => {
                tracing::info!(event = "access_jwks_fetched", cause, keys = keys.len());
                self.store(keys);
            }
            Err(error) => {
                tracing::warn!(event = "access_jwks_fetch_failed", cause, error = %error);
            }
        }
    }

    /// One GET of the certs URL: the RS256 signing keys it lists, by `kid`.
    // A `String`: what failed, for the log line only (HTTP status, body,
    // JSON, key errors); no caller branches on it, and it never reaches a
    // client.
    async fn fetch(&self) -> Result<HashMap<String, Arc<DecodingKey>>, String> {
        use http_body_util::BodyExt;
        let url = &self.inner.config.certs_url;
        let request = axum::http::Request::get(url.as_str())
            .header(axum::http::header::ACCEPT, "application/json")
            .header(
                axum::http::header::USER_AGENT,
                concat!("serverfs-auth/", env!("CARGO_PKG_VERSION")),
            )
            .body(http_body_util::Empty::<hyper::body::Bytes>::new())
            .map_err(|e| format!("GET {url}: {e}"))?;
        // One deadline for connection, headers and body; redirects are not
        // followed (the legacy client never follows them).
        let body = tokio::time::timeout(FETCH_TIMEOUT, async {
            let response = self
                .inner
                .client
                .request(request)
                .await
                .map_err(|e| format!("GET {url}: {}", error_chain(&e)))?;
            if !response.status().is_success() {
                return Err(format!("GET {url}: HTTP {}", response.status()));
            }
            http_body_util::Limited::new(response.into_body(), MAX_JWKS_BYTES)
                .collect()
                .await
                .map(|body| body.to_bytes())
                .map_err(|e| {
                    format!("GET {url}: {e} (the JWKS may be at most {MAX_JWKS_BYTES} bytes)")
                })
        })
        .await
        .map_err(|_| {
            format!("GET {url}: no complete answer within {} s", FETCH_TIMEOUT.as_secs())
        })??;
        let document: JwksDocument =
            serde_json::from_slice(&body).map_err(|e| format!("GET {url}: not a JWKS: {e}"))?;
        let keys = usable_keys(document.keys);
        if keys.is_empty() {
            return Err(format!("GET {url}: no usable RS256 key"));
        }
        Ok(keys)
    }
}

/// Access as one of [`serverfs_transport::Auth`]'s methods: a verified
/// token admits its user as `Principal::Access { email }`.
impl serverfs_transport::Verify for AccessJwt {
    fn method(&self) -> &'static str {
        "cloudflare-access"
    }

    fn verify<'a>(
        &'a self,
        _uri: &'a axum::http::Uri,
        headers: &'a HeaderMap,
    ) -> serverfs_transport::Verdict<'a> {
        Box::pin(async move {
            match self.verify_headers(headers).await {
                Ok(identity) => Ok(serverfs_transport::Principal::Access { email: identity.email }),
                Err(e) => Err(e.reason()),
            }
        })
    }
}

/// The RSA signing keys of a JWKS that may verify RS256, by `kid`; others
/// (other key types or algorithms, encryption keys, keys without `kid`,
/// unparsable entries) are skipped.
fn usable_keys(values: Vec<serde_json::Value>) -> HashMap<String, Arc<DecodingKey>> {
    let mut keys = HashMap::new();
    for value in values.into_iter().take(MAX_KEYS) {
        let Ok(jwk) = serde_json::from_value::<Jwk>(value) else { continue };
        let AlgorithmParameters::RSA(_) = &jwk.algorithm else { continue };
        if !matches!(jwk.common.key_algorithm, None | Some(KeyAlgorithm::RS256)) {
            continue;
        }
        if !matches!(jwk.common.public_key_use, None | Some(PublicKeyUse::Signature)) {
            continue;
        }
        let Some(kid) = jwk.common.key_id.clone().filter(|k| !k.is_empty()) else { continue };
        if let Ok(key) = DecodingKey::from_jwk(&jwk) {
            keys.insert(kid, Arc::new(key));
        }
    }
    keys
}

/// The JOSE header's `alg`, `kid` and `crit`, read without trusting anything.
fn peek_header(token: &str) -> Result<PeekedHeader, AccessError> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AccessError::Malformed);
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| AccessError::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| AccessError::Malformed)
}

fn classify(kind: &ErrorKind) -> AccessError {
    match kind {
        ErrorKind::InvalidSignature => AccessError::Signature,
        ErrorKind::ExpiredSignature => AccessError::Expired,
        ErrorKind::ImmatureSignature => AccessError::NotYetValid,
        ErrorKind::InvalidIssuer => AccessError::Issuer,
        ErrorKind::InvalidAudience => AccessError::Audience,
        ErrorKind::MissingRequiredClaim(_) | ErrorKind::InvalidClaimFormat(_) => {
            AccessError::Claims
        }
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => AccessError::Algorithm,
        _ => AccessError::Malformed,
    }
}

/// `jsonwebtoken` picks its crypto backend from its features; if another
/// crate in the build turns on a second backend it can no longer choose, so
/// we install the RustCrypto one (the one this crate asks for) explicitly.
fn ensure_jwt_crypto() {
    use jsonwebtoken::crypto::CryptoProvider;
    if CryptoProvider::try_get_default().is_none() {
        // Losing a race to another installer is fine: one is installed.
        let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
    }
}

/// The client the keys are fetched with.
type HttpsClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    http_body_util::Empty<hyper::body::Bytes>,
>;

/// The HTTPS client for the certs URL: hyper with rustls on *ring* and the
/// system's roots (no process-wide TLS default is needed or installed), no
/// proxy, no redirects; plain `http` only for a loopback override.
// A `String`: part of `AccessVerifier::new`'s message.
fn http_client(certs_url: &Url) -> Result<HttpsClient, String> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_platform_verifier()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_no_client_auth();
    let mut tcp = hyper_util::client::legacy::connect::HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_connect_timeout(Some(FETCH_TIMEOUT));
    let builder = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls);
    let builder =
        if is_loopback_url(certs_url) { builder.https_or_http() } else { builder.https_only() };
    let connector = builder.enable_http1().wrap_connector(tcp);
    Ok(hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector))
}

/// An error and its sources on one line (hyper's own text is terse).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn team_forms_give_one_issuer() {
        for team in [
            "myteam",
            "MyTeam",
            " myteam ",
            "myteam.cloudflareaccess.com",
            "https://myteam.cloudflareaccess.com",
            "https://myteam.cloudflareaccess.com/",
        ] {
            assert_eq!(team_issuer(team).unwrap(), "https://myteam.cloudflareaccess.com", "{team}");
        }
        assert_eq!(
            team_issuer("https://gov.fed.cloudflareaccess.com").unwrap(),
            "https://gov.fed.cloudflareaccess.com"
        );
        for bad in [
            "",
            "http://myteam.cloudflareaccess.com",
            "https://evil.example",
            "myteam.example.com",
            "-team",
            "te_am",
            "a.b.cloudflareaccess.com",
            "https://myteam.cloudflareaccess.com/path",
        ] {
            assert!(team_issuer(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn certs_url_needs_https_unless_loopback() {
        let config = AccessConfig::new("t", &["aud"]).unwrap();
        assert_eq!(config.certs_url(), "https://t.cloudflareaccess.com/cdn-cgi/access/certs");
        for ok in [
            "https://keys.example/certs",
            "http://127.0.0.1:8080/certs",
            "http://[::1]:1/c",
            "http://localhost:9/c",
        ] {
            assert!(config.clone().with_certs_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://keys.example/certs",
            "http://10.0.0.1/certs",
            "ftp://127.0.0.1/x",
            "https://user:pw@keys.example/",
            "not a url",
        ] {
            assert!(config.clone().with_certs_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn audiences_must_be_given() {
        assert!(AccessConfig::new("t", &[" ", ""]).is_err());
        assert!(AccessConfig::new("t", &["a b"]).is_err());
        let c = AccessConfig::new("t", &[" a ", "b"]).unwrap();
        assert_eq!(c.audiences(), ["a", "b"]);
    }
}
