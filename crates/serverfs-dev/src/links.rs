//! File transfer (SPEC §3, HTTP mode only): the `file_link` tool signs
//! time-limited URLs, and `GET/HEAD/PUT /files/<path>` serves them, so
//! large files move between the client and the project without passing
//! through the model's context.
//!
//! Guarantees:
//! - **Signed links.** A link is `/files/<percent-encoded path>?method=M&
//!   expires=E&sig=S` where `S` is the base64url (no padding) HMAC-SHA256,
//!   under a 32-byte key drawn at each start (so a restart revokes every
//!   link), of `M\n<normalised path>\nE` ([`canonical`]). It is checked
//!   with `hmac`'s constant-time `verify_slice`. `HEAD` is `GET`.
//! - **Authorisation.** A request passes with a valid, unexpired signature
//!   for its method and path, or with the configured bearer token. No
//!   credentials at all (no signature parameter, no `Authorization`) is
//!   401; a signature that is expired, tampered, for another path or
//!   method, or incomplete (`sig` stripped) is 403. Nothing is looked up in
//!   the tree before that.
//! - **The resolver, always.** The path is percent-decoded and located in
//!   the root (syntax and policy: `..` past the root, absolute paths,
//!   credentials, `.git` refused), reads follow links only within the root,
//!   uploads go through the writer and never through a link. Refusals are
//!   `CODE: message` bodies naming paths as `project:/…`, never host paths.
//! - **Streaming.** Downloads are read in 256 KiB pieces (never whole),
//!   with `Content-Length`, `Accept-Ranges: bytes` and one `Range`
//!   (`a-b`, `a-`, `-n`) → 206; an unsatisfiable range → 416 with
//!   `Content-Range: bytes */size`; several ranges, a malformed one, or an
//!   `If-Range` → the whole file (200). Uploads (`Content-Length` or
//!   chunked; `Expect: 100-continue` is answered when the body is first
//!   read, i.e. after the checks) stream into [`serverfs_write::Upload`]:
//!   over `--max-upload` → 413 (by `Content-Length` before a byte is read,
//!   else as soon as the count passes it), the old file intact and no
//!   temporary left; slower than `--upload-timeout` in total → 408; 201
//!   created / 200 replaced with `{path, size, sha256}`.
//! - **Origin.** An absolute URL is built only from `--public-url`; nothing
//!   is derived from `Host` or `X-Forwarded-*`. Without it the tool returns
//!   a path on the server's own origin.
//! - Responses are `application/octet-stream`, `nosniff`, `attachment`,
//!   `no-store`: a signed link opened in a browser never renders as a page
//!   of this origin.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::{
    ACCEPT_RANGES, CACHE_CONTROL, CONNECTION, CONTENT_DISPOSITION, CONTENT_LENGTH, CONTENT_RANGE,
    CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, IF_NONE_MATCH, IF_RANGE, RANGE,
};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use axum::routing::get;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use http_body_util::BodyExt;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serverfs_core::{ErrorCode, FsError};
use serverfs_tools::Reported;
use serverfs_transport::{BearerAuth, Router};
use sha2::Sha256;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::{mpsc, oneshot};

use crate::project::Project;

/// Default `--max-upload`: 1 GiB.
pub const DEFAULT_MAX_UPLOAD_BYTES: u64 = 1 << 30;
/// Default `--upload-timeout`, seconds.
pub const DEFAULT_UPLOAD_TIMEOUT_SECONDS: u64 = 600;
/// Default and largest link lifetime, seconds.
pub const DEFAULT_TTL_SECONDS: u64 = 900;
pub const MAX_TTL_SECONDS: u64 = 86_400;

/// Bytes read from the file per piece of a download.
const READ_CHUNK: usize = 256 * 1024;
/// Pieces of an upload queued for the writer thread.
const UPLOAD_QUEUE: usize = 16;

/// Characters left as they are in a URL path segment: RFC 3986 unreserved.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

type HmacSha256 = Hmac<Sha256>;

/// The file-transfer settings (flags with environment fallbacks).
#[derive(Debug, clap::Args)]
pub(crate) struct LinkSettings {
    /// Base URL clients reach this server at (e.g. https://dev.example.com);
    /// file_link then returns absolute URLs. Never derived from request headers.
    #[arg(long, env = "SERVERFS_PUBLIC_URL", value_name = "URL")]
    public_url: Option<String>,

    /// Largest file a PUT /files upload may write, in bytes.
    #[arg(long, env = "SERVERFS_MAX_UPLOAD_BYTES", default_value_t = DEFAULT_MAX_UPLOAD_BYTES)]
    max_upload: u64,

    /// Time a whole PUT /files upload body may take to arrive, in seconds.
    #[arg(long, env = "SERVERFS_UPLOAD_TIMEOUT_SECONDS", default_value_t = DEFAULT_UPLOAD_TIMEOUT_SECONDS)]
    upload_timeout: u64,
}

/// The file-transfer settings, validated.
#[derive(Clone, Debug)]
pub struct LinkConfig {
    /// Without a trailing `/`.
    pub public_url: Option<String>,
    pub max_upload: u64,
    pub upload_timeout: Duration,
}

impl LinkSettings {
    pub(crate) fn config(&self) -> Result<LinkConfig, String> {
        let public_url = match &self.public_url {
            None => None,
            Some(url) if url.trim().is_empty() => None,
            Some(url) => Some(public_url(url.trim())?),
        };
        if !(1..=86_400).contains(&self.upload_timeout) {
            return Err("SERVERFS_UPLOAD_TIMEOUT_SECONDS must be between 1 and 86400".to_owned());
        }
        Ok(LinkConfig {
            public_url,
            max_upload: self.max_upload,
            upload_timeout: Duration::from_secs(self.upload_timeout),
        })
    }
}

/// `http(s)://host[:port][/prefix]`, without query, fragment or trailing `/`.
fn public_url(url: &str) -> Result<String, String> {
    let bad = |why: &str| Err(format!("SERVERFS_PUBLIC_URL (--public-url): {why}"));
    let Some(rest) = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")) else {
        return bad("must start with https:// or http://");
    };
    if rest.is_empty() || rest.starts_with('/') {
        return bad("has no host");
    }
    if url.contains(['?', '#', ' ']) || !url.is_ascii() || url.chars().any(char::is_control) {
        return bad("must be a plain ASCII URL without query or fragment");
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// The signing key and settings of one server run.
pub struct Links {
    key: [u8; 32],
    config: LinkConfig,
}

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Links").field("config", &self.config).finish_non_exhaustive()
    }
}

/// The string a signature covers.
pub fn canonical(method: &str, path: &str, expires: u64) -> String {
    format!("{method}\n{path}\n{expires}")
}

/// Why a signed request is refused (403).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Incomplete,
    Malformed,
    OtherMethod,
    Expired,
    BadSignature,
}

impl Refusal {
    fn text(self) -> &'static str {
        match self {
            Self::Incomplete => "the link is incomplete (method, expires and sig are required)",
            Self::Malformed => "the link's parameters are malformed",
            Self::OtherMethod => "the link was signed for another method",
            Self::Expired => "the link has expired",
            Self::BadSignature => "the signature does not match this path",
        }
    }
}

/// The signature parameters of a query string (other parameters are
/// ignored); a repeated one makes the set malformed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SignedQuery {
    method: Option<String>,
    expires: Option<String>,
    sig: Option<String>,
    repeated: bool,
}

impl SignedQuery {
    pub fn parse(query: Option<&str>) -> Self {
        let mut q = Self::default();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let slot = match key {
                "method" => &mut q.method,
                "expires" => &mut q.expires,
                "sig" => &mut q.sig,
                _ => continue,
            };
            if slot.is_some() {
                q.repeated = true;
            }
            *slot = Some(percent_decode_str(value).decode_utf8_lossy().into_owned());
        }
        q
    }

    /// Whether any signature parameter is present.
    pub fn is_signed(&self) -> bool {
        self.method.is_some() || self.expires.is_some() || self.sig.is_some() || self.repeated
    }
}

impl Links {
    /// A fresh random key.
    ///
    /// # Errors
    /// When the OS has no randomness to give.
    pub fn new(config: LinkConfig) -> Result<Self, String> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| format!("cannot draw a link-signing key: {e}"))?;
        Ok(Self::with_key(key, config))
    }

    pub fn with_key(key: [u8; 32], config: LinkConfig) -> Self {
        Self { key, config }
    }

    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    fn mac(&self, method: &str, path: &str, expires: u64) -> HmacSha256 {
        // HMAC takes a key of any length: this cannot fail.
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(canonical(method, path, expires).as_bytes());
        mac
    }

    /// The signature of a link, base64url without padding.
    pub fn sign(&self, method: &str, path: &str, expires: u64) -> String {
        let tag = self.mac(method, path, expires).finalize().into_bytes();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag)
    }

    /// Checks a signed request for `method` (`GET` or `PUT`; `HEAD` is
    /// `GET`) on the normalised `path` at unix time `now`.
    ///
    /// # Errors
    /// Why it is refused.
    pub fn verify(
        &self,
        q: &SignedQuery,
        method: &str,
        path: &str,
        now: u64,
    ) -> Result<(), Refusal> {
        if q.repeated {
            return Err(Refusal::Malformed);
        }
        let (Some(signed_method), Some(expires), Some(sig)) = (&q.method, &q.expires, &q.sig)
        else {
            return Err(Refusal::Incomplete);
        };
        let expires: u64 = expires.parse().map_err(|_| Refusal::Malformed)?;
        let tag = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(sig.as_bytes())
            .map_err(|_| Refusal::BadSignature)?;
        // The tag covers the signed method: check it before saying which
        // part is wrong.
        self.mac(signed_method, path, expires)
            .verify_slice(&tag)
            .map_err(|_| Refusal::BadSignature)?;
        if signed_method != method {
            return Err(Refusal::OtherMethod);
        }
        if now > expires {
            return Err(Refusal::Expired);
        }
        Ok(())
    }

    /// file_link: checks `args.path` as the method will meet it (GET: a
    /// regular file, read through the root's rule; PUT: an upload could
    /// start there), then signs.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` (ttl), and the path's refusals.
    pub fn link(&self, project: &Project, args: &FileLinkArgs) -> Result<FileLinkResult, FsError> {
        let ttl = args.ttl_seconds.unwrap_or(DEFAULT_TTL_SECONDS);
        if !(1..=MAX_TTL_SECONDS).contains(&ttl) {
            return Err(FsError::invalid(format!(
                "ttl_seconds must be between 1 and {MAX_TTL_SECONDS}; got {ttl}."
            )));
        }
        let root = project.root();
        let loc = root.locate(&args.path)?;
        let method = match args.method {
            LinkMethod::Get => {
                root.open_file(&loc)?;
                "GET"
            }
            LinkMethod::Put => {
                project.writer().check_upload(&args.path, true)?;
                "PUT"
            }
        };
        let rel = loc.path().as_relative();
        let expires = unix_now().saturating_add(ttl);
        let encoded: Vec<String> =
            rel.split('/').map(|c| utf8_percent_encode(c, SEGMENT).to_string()).collect();
        let base = self.config.public_url.as_deref().unwrap_or("");
        let url = format!(
            "{base}/files/{}?method={method}&expires={expires}&sig={}",
            encoded.join("/"),
            self.sign(method, &rel, expires)
        );
        let expires_at = time::OffsetDateTime::from_unix_timestamp(expires as i64)
            .ok()
            .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
            .ok_or_else(|| FsError::new(ErrorCode::InternalError, "the expiry is out of range."))?;
        Ok(FileLinkResult { url, method: method.to_owned(), expires_at })
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// What a link allows (no doc per variant: the schema stays a plain
/// string `enum`).
#[derive(Clone, Copy, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
#[schemars(inline)]
pub enum LinkMethod {
    #[default]
    Get,
    Put,
}

/// Arguments of file_link.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FileLinkArgs {
    /// File path relative to the project root.
    pub path: String,
    /// GET (default): download (also HEAD, with Range); PUT: upload (create or replace).
    #[serde(default)]
    pub method: LinkMethod,
    /// Lifetime of the link in seconds, 1 to 86400 (default 900).
    #[serde(default)]
    #[schemars(range(min = 1, max = 86_400))]
    pub ttl_seconds: Option<u64>,
}

/// Result of file_link.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FileLinkResult {
    /// The signed URL: absolute when the server has a public URL
    /// configured, else a path on the server's own origin (prefix it with
    /// the scheme, host and port you reach the server at).
    pub url: String,
    /// GET or PUT.
    pub method: String,
    /// When the link stops working, RFC 3339 UTC.
    pub expires_at: String,
}

impl Reported for FileLinkResult {}

/// What the `/files` handlers share.
#[derive(Clone)]
struct Files {
    project: Arc<Project>,
    links: Arc<Links>,
    bearer: Option<BearerAuth>,
}

/// `GET/HEAD/PUT /files/{*path}` (see the module docs). No body limit of
/// `/mcp` applies; the connection cap and header timeout of the accept
/// loop do.
pub fn router(project: Arc<Project>, links: Arc<Links>, bearer: Option<BearerAuth>) -> Router {
    let files = Files { project, links, bearer };
    Router::new().route("/files/{*path}", get(serve).put(serve)).with_state(files)
}

async fn serve(State(files): State<Files>, request: Request) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    let raw = request.uri().path().strip_prefix("/files/").unwrap_or("").to_owned();
    let response = authorised(&files, &request, &raw);
    let response = match response {
        Err(response) => *response,
        Ok(path) if method == Method::PUT => upload(&files, request, path).await,
        Ok(path) => download(&files, request.headers(), path, method == Method::HEAD).await,
    };
    // The path as sent (percent-encoded), never the query: its signature
    // is a credential. `head_ms`: until the response head (a download
    // streams on after it; an upload is complete by then).
    tracing::info!(
        event = "file_transfer",
        method = %method,
        path = %raw,
        status = response.status().as_u16(),
        head_ms = started.elapsed().as_millis() as u64,
    );
    response
}

/// The decoded client path of an authorised request, or the refusal.
fn authorised(files: &Files, request: &Request, raw: &str) -> Result<String, Box<Response>> {
    let query = SignedQuery::parse(request.uri().query());
    let bearer = files.bearer.as_ref().is_some_and(|b| b.authorizes(request.headers()));
    if !bearer && !query.is_signed() {
        return Err(Box::new(plain(
            StatusCode::UNAUTHORIZED,
            "401 Unauthorized: a signed link (file_link) or the bearer token is required\n".into(),
        )));
    }
    let path = percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| {
            Box::new(fs_error(&FsError::invalid("the path is not valid UTF-8 once decoded.")))
        })?
        .into_owned();
    let loc = files.project.root().locate(&path).map_err(|e| Box::new(fs_error(&e)))?;
    if !bearer {
        let method = if request.method() == Method::PUT { "PUT" } else { "GET" };
        let rel = loc.path().as_relative();
        if let Err(why) = files.links.verify(&query, method, &rel, unix_now()) {
            let text = format!("403 Forbidden: {}\n", why.text());
            return Err(Box::new(plain(StatusCode::FORBIDDEN, text)));
        }
    }
    Ok(path)
}

/// Which bytes of a file of `size` a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    Whole,
    /// First and last byte, inclusive.
    Part(u64, u64),
    Unsatisfiable,
}

/// The span of one `Range` header (see the module docs).
pub fn span(range: Option<&HeaderValue>, if_range: bool, size: u64) -> Span {
    let Some(spec) = range.and_then(|r| r.to_str().ok()) else {
        return Span::Whole;
    };
    let spec = spec.trim();
    if if_range || spec.len() < 6 || !spec[..6].eq_ignore_ascii_case("bytes=") {
        return Span::Whole;
    }
    let spec = spec[6..].trim();
    if spec.contains(',') {
        return Span::Whole;
    }
    let Some((first, last)) = spec.split_once('-') else {
        return Span::Whole;
    };
    let number = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
    };
    match (first.trim(), last.trim()) {
        ("", n) => match number(n) {
            None => Span::Whole,
            Some(0) => Span::Unsatisfiable,
            Some(_) if size == 0 => Span::Unsatisfiable,
            Some(n) => Span::Part(size - n.min(size), size - 1),
        },
        (a, "") => match number(a) {
            None => Span::Whole,
            Some(a) if a >= size => Span::Unsatisfiable,
            Some(a) => Span::Part(a, size - 1),
        },
        (a, b) => match (number(a), number(b)) {
            (Some(a), Some(b)) if b >= a => {
                if a >= size {
                    Span::Unsatisfiable
                } else {
                    Span::Part(a, b.min(size - 1))
                }
            }
            _ => Span::Whole,
        },
    }
}

async fn download(files: &Files, headers: &HeaderMap, path: String, head: bool) -> Response {
    let project = Arc::clone(&files.project);
    let opened = tokio::task::spawn_blocking(move || {
        let loc = project.root().locate(&path)?;
        let name = loc.path().file_name().unwrap_or("file").to_owned();
        project.root().open_file(&loc).map(|(file, meta)| (file, meta.size, name))
    })
    .await;
    let (file, size, name) = match opened {
        Ok(Ok(opened)) => opened,
        Ok(Err(e)) => return fs_error(&e),
        Err(_) => return fs_error(&FsError::new(ErrorCode::InternalError, "the read failed.")),
    };
    let span = span(headers.get(RANGE), headers.contains_key(IF_RANGE), size);
    let (status, start, len) = match span {
        Span::Whole => (StatusCode::OK, 0, size),
        Span::Part(a, b) => (StatusCode::PARTIAL_CONTENT, a, b - a + 1),
        Span::Unsatisfiable => {
            let mut r =
                plain(StatusCode::RANGE_NOT_SATISFIABLE, "416 Range Not Satisfiable\n".to_owned());
            r.headers_mut().insert(CONTENT_RANGE, value(&format!("bytes */{size}")));
            r.headers_mut().insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
            return r;
        }
    };
    let body = if head || len == 0 {
        Body::empty()
    } else {
        let mut file = tokio::fs::File::from_std(file);
        file.set_max_buf_size(READ_CHUNK);
        if start > 0
            && let Err(e) = file.seek(std::io::SeekFrom::Start(start)).await
        {
            let e = FsError::new(ErrorCode::InternalError, "the file could not be read.")
                .with_detail(e.to_string());
            return fs_error(&e);
        }
        let reader = file.take(len);
        Body::from_stream(tokio_util::io::ReaderStream::with_capacity(reader, READ_CHUNK))
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let h = response.headers_mut();
    h.insert(CONTENT_LENGTH, value(&len.to_string()));
    h.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    h.insert(
        HeaderName::from_static("x-content-type-options"),
        HeaderValue::from_static("nosniff"),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    let encoded = utf8_percent_encode(&name, SEGMENT);
    h.insert(CONTENT_DISPOSITION, value(&format!("attachment; filename*=UTF-8''{encoded}")));
    if status == StatusCode::PARTIAL_CONTENT {
        let end = start + len - 1;
        h.insert(CONTENT_RANGE, value(&format!("bytes {start}-{end}/{size}")));
    }
    response
}

/// A message from the request to the upload's writer thread.
enum Piece {
    Data(Bytes),
    End,
}

/// Why the body stopped arriving.
enum Cut {
    TooLarge,
    Unreadable,
    WriterStopped,
}

async fn upload(files: &Files, request: Request, path: String) -> Response {
    let max = files.links.config.max_upload;
    let headers = request.headers();
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return too_large(max);
    }
    // `If-None-Match: *` asks for create-only (RFC 9110 §13.1.2).
    let create_only =
        headers.get_all(IF_NONE_MATCH).iter().any(|v| v.as_bytes().trim_ascii() == b"*");
    let (ready_tx, ready_rx) = oneshot::channel();
    let (data_tx, data_rx) = mpsc::channel::<Piece>(UPLOAD_QUEUE);
    let (done_tx, done_rx) = oneshot::channel();
    let project = Arc::clone(&files.project);
    // A thread of its own, not the blocking pool: an upload may wait on a
    // slow client for minutes and must not hold a thread the tools need.
    let spawned = std::thread::Builder::new().name("serverfs-upload".into()).spawn(move || {
        write_upload(&project, &path, !create_only, max, ready_tx, data_rx, done_tx);
    });
    if spawned.is_err() {
        return fs_error(&FsError::new(ErrorCode::ServerBusy, "no thread for the upload; retry."));
    }
    match ready_rx.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) if create_only && e.code() == ErrorCode::AlreadyExists => {
            return closing(plain(StatusCode::PRECONDITION_FAILED, format!("{e}\n")));
        }
        Ok(Err(e)) => return closing(fs_error(&e)),
        Err(_) => return internal(),
    }
    // Only now is the body polled, so `100 Continue` goes out only for an
    // upload that can start.
    let mut body = request.into_body();
    let pumped = tokio::time::timeout(files.links.config.upload_timeout, async {
        let mut received: u64 = 0;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return Err(Cut::Unreadable);
            };
            if let Ok(data) = frame.into_data() {
                received += data.len() as u64;
                if received > max {
                    return Err(Cut::TooLarge);
                }
                if data_tx.send(Piece::Data(data)).await.is_err() {
                    return Err(Cut::WriterStopped);
                }
            }
        }
        Ok(())
    })
    .await;
    let cut = match pumped {
        Ok(Ok(())) => data_tx.send(Piece::End).await.err().map(|_| Cut::WriterStopped),
        Ok(Err(cut)) => Some(cut),
        Err(_) => {
            drop(data_tx);
            let _ = done_rx.await;
            return closing(plain(
                StatusCode::REQUEST_TIMEOUT,
                "408 Request Timeout: the upload took longer than the server allows\n".into(),
            ));
        }
    };
    // The writer has finished (committed, or aborted with nothing left)
    // before anything is answered.
    drop(data_tx);
    let done = done_rx.await;
    match (cut, done) {
        (Some(Cut::TooLarge), _) => too_large(max),
        (Some(Cut::Unreadable), _) => closing(plain(
            StatusCode::BAD_REQUEST,
            "400 Bad Request: the upload body could not be read\n".into(),
        )),
        (_, Ok(Ok(report))) => {
            let status = if report.created { StatusCode::CREATED } else { StatusCode::OK };
            let json = serde_json::json!({
                "path": report.path, "size": report.size, "sha256": report.sha256,
            });
            let mut r = Response::new(Body::from(format!("{json}\n")));
            *r.status_mut() = status;
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r
        }
        (_, Ok(Err(e))) if e.code() == ErrorCode::ReadLimitExceeded => too_large(max),
        (_, Ok(Err(e))) => closing(fs_error(&e)),
        (_, Err(_)) => closing(internal()),
    }
}

/// The writer's side of an upload, on its own thread.
fn write_upload(
    project: &Project,
    path: &str,
    overwrite: bool,
    max: u64,
    ready: oneshot::Sender<Result<(), FsError>>,
    mut pieces: mpsc::Receiver<Piece>,
    done: oneshot::Sender<Result<serverfs_write::WriteReport, FsError>>,
) {
    let mut upload = match project.writer().begin_upload(path, overwrite, max) {
        Ok(upload) => upload,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    if ready.send(Ok(())).is_err() {
        return;
    }
    let result = loop {
        match pieces.blocking_recv() {
            Some(Piece::Data(bytes)) => {
                if let Err(e) = upload.write(&bytes) {
                    break Err(e);
                }
            }
            Some(Piece::End) => break upload.commit(),
            None => {
                drop(upload);
                break Err(FsError::invalid("the upload was cut off."));
            }
        }
    };
    let _ = done.send(result);
}

fn value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

fn plain(status: StatusCode, text: String) -> Response {
    let mut r = Response::new(Body::from(text));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// The connection cannot carry another request: the body was not read.
fn closing(mut r: Response) -> Response {
    r.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

fn too_large(max: u64) -> Response {
    closing(plain(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("413 Payload Too Large: uploads are limited to {max} bytes\n"),
    ))
}

fn internal() -> Response {
    fs_error(&FsError::new(ErrorCode::InternalError, "the upload failed."))
}

/// `CODE: message` with the status its code means over HTTP; the detail
/// goes to the log only.
fn fs_error(e: &FsError) -> Response {
    let status = match e.code() {
        ErrorCode::InvalidArgument | ErrorCode::PathOutsideWorkdir => StatusCode::BAD_REQUEST,
        ErrorCode::DeniedPath
        | ErrorCode::HiddenPathNotAllowed
        | ErrorCode::AccessDenied
        | ErrorCode::SymlinkNotAllowed => StatusCode::FORBIDDEN,
        ErrorCode::PathNotFound => StatusCode::NOT_FOUND,
        ErrorCode::NotAFile
        | ErrorCode::NotADirectory
        | ErrorCode::UnsupportedFileType
        | ErrorCode::AlreadyExists
        | ErrorCode::PatchConflict => StatusCode::CONFLICT,
        ErrorCode::ReadLimitExceeded => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::ServerBusy => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    if let Some(detail) = e.detail() {
        tracing::warn!(event = "file_transfer_failed", code = %e.code(), detail);
    }
    plain(status, format!("{e}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links() -> Links {
        let config =
            LinkConfig { public_url: None, max_upload: 10, upload_timeout: Duration::from_secs(1) };
        Links::with_key([7; 32], config)
    }

    fn query(method: &str, expires: u64, sig: &str) -> SignedQuery {
        SignedQuery::parse(Some(&format!("method={method}&expires={expires}&sig={sig}")))
    }

    #[test]
    fn the_canonical_string_is_method_path_expiry_on_lines() {
        assert_eq!(canonical("GET", "a/b c.txt", 17), "GET\na/b c.txt\n17");
        // Known-answer: HMAC-SHA256 over exactly that string with the key.
        let l = links();
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&[7; 32]).unwrap();
        mac.update(b"GET\na/b c.txt\n17");
        let tag =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        assert_eq!(l.sign("GET", "a/b c.txt", 17), tag);
        assert_eq!(tag.len(), 43);
    }

    #[test]
    fn a_signature_verifies_only_for_its_method_path_and_time() {
        let l = links();
        let sig = l.sign("GET", "a.txt", 100);
        assert_eq!(l.verify(&query("GET", 100, &sig), "GET", "a.txt", 100), Ok(()));
        assert_eq!(l.verify(&query("GET", 100, &sig), "GET", "a.txt", 101), Err(Refusal::Expired));
        assert_eq!(
            l.verify(&query("GET", 100, &sig), "PUT", "a.txt", 50),
            Err(Refusal::OtherMethod)
        );
        // The method parameter is covered by the signature.
        assert_eq!(
            l.verify(&query("PUT", 100, &sig), "PUT", "a.txt", 50),
            Err(Refusal::BadSignature)
        );
        assert_eq!(
            l.verify(&query("GET", 100, &sig), "GET", "b.txt", 50),
            Err(Refusal::BadSignature)
        );
        assert_eq!(
            l.verify(&query("GET", 1000, &sig), "GET", "a.txt", 50),
            Err(Refusal::BadSignature)
        );
        let mut flipped = sig.clone().into_bytes();
        flipped[0] = if flipped[0] == b'A' { b'B' } else { b'A' };
        let flipped = String::from_utf8(flipped).unwrap();
        assert_eq!(
            l.verify(&query("GET", 100, &flipped), "GET", "a.txt", 50),
            Err(Refusal::BadSignature)
        );
        // Truncated tags are refused (verify_slice wants the whole tag).
        assert_eq!(
            l.verify(&query("GET", 100, &sig[..20]), "GET", "a.txt", 50),
            Err(Refusal::BadSignature)
        );
        let other = Links::with_key([8; 32], links().config.clone());
        assert_eq!(
            other.verify(&query("GET", 100, &sig), "GET", "a.txt", 50),
            Err(Refusal::BadSignature)
        );
    }

    #[test]
    fn incomplete_or_repeated_parameters_are_refused() {
        let l = links();
        let sig = l.sign("GET", "a.txt", 100);
        let stripped = SignedQuery::parse(Some("method=GET&expires=100"));
        assert!(stripped.is_signed());
        assert_eq!(l.verify(&stripped, "GET", "a.txt", 50), Err(Refusal::Incomplete));
        let twice = SignedQuery::parse(Some(&format!("method=GET&expires=100&sig={sig}&sig=x")));
        assert_eq!(l.verify(&twice, "GET", "a.txt", 50), Err(Refusal::Malformed));
        let bad = SignedQuery::parse(Some(&format!("method=GET&expires=soon&sig={sig}")));
        assert_eq!(l.verify(&bad, "GET", "a.txt", 50), Err(Refusal::Malformed));
        assert!(!SignedQuery::parse(Some("x=1")).is_signed());
        assert!(!SignedQuery::parse(None).is_signed());
    }

    #[test]
    fn ranges() {
        let v = |s: &str| HeaderValue::from_str(s).unwrap();
        let s = |r: &str, size| span(Some(&v(r)), false, size);
        assert_eq!(span(None, false, 10), Span::Whole);
        assert_eq!(s("bytes=0-0", 10), Span::Part(0, 0));
        assert_eq!(s("bytes=2-5", 10), Span::Part(2, 5));
        assert_eq!(s("bytes=2-", 10), Span::Part(2, 9));
        assert_eq!(s("bytes=9-9", 10), Span::Part(9, 9));
        assert_eq!(s("bytes=5-100", 10), Span::Part(5, 9));
        assert_eq!(s("bytes=-3", 10), Span::Part(7, 9));
        assert_eq!(s("bytes=-30", 10), Span::Part(0, 9));
        assert_eq!(s("BYTES=1-1", 10), Span::Part(1, 1));
        assert_eq!(s("bytes=10-", 10), Span::Unsatisfiable);
        assert_eq!(s("bytes=10-20", 10), Span::Unsatisfiable);
        assert_eq!(s("bytes=-0", 10), Span::Unsatisfiable);
        assert_eq!(s("bytes=0-", 0), Span::Unsatisfiable);
        assert_eq!(s("bytes=-1", 0), Span::Unsatisfiable);
        for ignored in ["bytes=0-1,3-4", "bytes=5-2", "items=0-1", "bytes=x-1", "bytes=+1-2"] {
            assert_eq!(s(ignored, 10), Span::Whole, "{ignored}");
        }
        assert_eq!(span(Some(&v("bytes=0-1")), true, 10), Span::Whole);
    }

    #[test]
    fn public_urls_are_checked() {
        assert_eq!(public_url("https://dev.example.com/").unwrap(), "https://dev.example.com");
        assert_eq!(public_url("http://h:8/p").unwrap(), "http://h:8/p");
        for bad in ["dev.example.com", "ftp://x", "https://", "https://x/?a", "https://x/#f"] {
            assert!(public_url(bad).is_err(), "{bad}");
        }
    }
}
