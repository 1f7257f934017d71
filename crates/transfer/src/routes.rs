//! The `/files` routes: authorisation, downloads with `Range`, bounded
//! streamed uploads (see the crate docs).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{
    ACCEPT_RANGES, CACHE_CONTROL, CONNECTION, CONTENT_DISPOSITION, CONTENT_LENGTH, CONTENT_RANGE,
    CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, IF_NONE_MATCH, IF_RANGE, RANGE,
};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use axum::routing::get;
use http_body_util::BodyExt;
use percent_encoding::{percent_decode_str, utf8_percent_encode};
use serverfs_core::{ErrorCode, FsError};
use serverfs_transport::{BearerAuth, Router};
use serverfs_write::{Upload, Writer};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::Semaphore;
use tokio::task::block_in_place;

use crate::link::{Links, SignedQuery, unix_now};
use crate::range::{Span, span};
use crate::{MAX_UPLOADS, SEGMENT};

/// Bytes read from the file per piece of a download.
const READ_CHUNK: usize = 256 * 1024;

/// What the `/files` handlers share.
#[derive(Clone)]
struct Files {
    writer: Arc<Writer>,
    links: Arc<Links>,
    bearer: Option<BearerAuth>,
    /// [`MAX_UPLOADS`] permits.
    uploads: Arc<Semaphore>,
}

/// `GET/HEAD/PUT /files/{*path}` over `writer`'s root (see the crate
/// docs), signed by `links`, or authorised by `bearer`. No body limit of
/// `/mcp` applies; the connection cap and header timeout of the accept
/// loop do. Serve it on tokio's multi-threaded runtime.
pub fn router(writer: Arc<Writer>, links: Arc<Links>, bearer: Option<BearerAuth>) -> Router {
    let uploads = Arc::new(Semaphore::new(MAX_UPLOADS));
    let files = Files { writer, links, bearer, uploads };
    Router::new().route("/files/{*path}", get(serve).put(serve)).with_state(files)
}

async fn serve(State(files): State<Files>, request: Request) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    let raw = request.uri().path().strip_prefix("/files/").unwrap_or("").to_owned();
    let (response, principal) = match authorised(&files, &request, &raw) {
        Err(response) => (*response, None),
        Ok((path, principal)) if method == Method::PUT => {
            (upload(&files, request, path).await, Some(principal))
        }
        Ok((path, principal)) => {
            let head = method == Method::HEAD;
            (download(&files, request.headers(), path, head).await, Some(principal))
        }
    };
    // The path as sent (percent-encoded), never the query: its signature
    // is a credential. `principal`: the bearer token's holder, or `link`
    // for a signed link (whoever holds it); none for a refusal. `head_ms`:
    // until the response head (a download streams on after it; an upload
    // is complete by then).
    tracing::info!(
        event = "file_transfer",
        principal,
        method = %method,
        path = %raw,
        status = response.status().as_u16(),
        head_ms = started.elapsed().as_millis() as u64,
    );
    response
}

/// The decoded client path of an authorised request and who it is (see
/// `serve`), or the refusal.
fn authorised(
    files: &Files,
    request: &Request,
    raw: &str,
) -> Result<(String, String), Box<Response>> {
    let query = SignedQuery::parse(request.uri().query());
    let principal = files.bearer.as_ref().and_then(|b| b.principal(request.headers()));
    let bearer = principal.is_some();
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
    let loc = files.writer.root().locate(&path).map_err(|e| Box::new(fs_error(&e)))?;
    if !bearer {
        let method = if request.method() == Method::PUT { "PUT" } else { "GET" };
        let rel = loc.path().as_relative();
        if let Err(why) = files.links.verify(&query, method, &rel, unix_now()) {
            let text = format!("403 Forbidden: {}\n", why.text());
            return Err(Box::new(plain(StatusCode::FORBIDDEN, text)));
        }
    }
    Ok((path, principal.map_or_else(|| "link".to_owned(), |p| p.to_string())))
}

async fn download(files: &Files, headers: &HeaderMap, path: String, head: bool) -> Response {
    let root = Arc::clone(files.writer.root());
    let opened = tokio::task::spawn_blocking(move || {
        let loc = root.locate(&path)?;
        let name = loc.path().file_name().unwrap_or("file").to_owned();
        root.open_file(&loc).map(|(file, meta)| (file, meta.size, name))
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

/// Why the body stopped arriving.
enum Cut {
    TooLarge,
    Unreadable,
    /// The writer refused a piece (the upload is aborted).
    Refused(FsError),
}

async fn upload(files: &Files, request: Request, path: String) -> Response {
    let max = files.links.config().max_upload;
    let headers = request.headers();
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return too_large(max);
    }
    let Ok(_permit) = files.uploads.try_acquire() else {
        let busy = FsError::new(
            ErrorCode::ServerBusy,
            format!("{MAX_UPLOADS} uploads are already running; retry shortly."),
        );
        return closing(fs_error(&busy));
    };
    // `If-None-Match: *` asks for create-only (RFC 9110 §13.1.2).
    let create_only =
        headers.get_all(IF_NONE_MATCH).iter().any(|v| v.as_bytes().trim_ascii() == b"*");
    // Every call into the writer blocks (files, fsync): on this worker,
    // with its other tasks moved away meanwhile (see the crate docs).
    let writer = &files.writer;
    let mut upload = match block_in_place(|| writer.begin_upload(&path, !create_only, max)) {
        Ok(upload) => upload,
        Err(e) if create_only && e.code() == ErrorCode::AlreadyExists => {
            return closing(plain(StatusCode::PRECONDITION_FAILED, format!("{e}\n")));
        }
        Err(e) => return closing(fs_error(&e)),
    };
    // Only now is the body polled, so `100 Continue` goes out only for an
    // upload that can start.
    let body = request.into_body();
    let pumped =
        tokio::time::timeout(files.links.config().upload_timeout, pump(body, &mut upload, max))
            .await;
    let cut = match pumped {
        Ok(Ok(())) => None,
        Ok(Err(cut)) => Some(cut),
        Err(_) => {
            // Aborted (temporary and created directories removed) before
            // anything is answered.
            block_in_place(|| drop(upload));
            return closing(plain(
                StatusCode::REQUEST_TIMEOUT,
                "408 Request Timeout: the upload took longer than the server allows\n".into(),
            ));
        }
    };
    let committed = match cut {
        None => block_in_place(|| upload.commit()),
        Some(cut) => {
            block_in_place(|| drop(upload));
            match cut {
                Cut::TooLarge => return too_large(max),
                Cut::Unreadable => {
                    return closing(plain(
                        StatusCode::BAD_REQUEST,
                        "400 Bad Request: the upload body could not be read\n".into(),
                    ));
                }
                Cut::Refused(e) => Err(e),
            }
        }
    };
    match committed {
        Ok(report) => {
            let status = if report.created { StatusCode::CREATED } else { StatusCode::OK };
            let json = serde_json::json!({
                "path": report.path, "size": report.size, "sha256": report.sha256,
            });
            let mut r = Response::new(Body::from(format!("{json}\n")));
            *r.status_mut() = status;
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r
        }
        Err(e) if e.code() == ErrorCode::ReadLimitExceeded => too_large(max),
        Err(e) => closing(fs_error(&e)),
    }
}

/// Streams `body` into `upload`, at most `max` bytes.
async fn pump(mut body: Body, upload: &mut Upload<'_>, max: u64) -> Result<(), Cut> {
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
            block_in_place(|| upload.write(&data)).map_err(Cut::Refused)?;
        }
    }
    Ok(())
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
        ErrorCode::ReadLimitExceeded | ErrorCode::WriteLimitExceeded => {
            StatusCode::PAYLOAD_TOO_LARGE
        }
        ErrorCode::ServerBusy => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    if let Some(detail) = e.detail() {
        tracing::warn!(event = "file_transfer_failed", code = %e.code(), detail);
    }
    plain(status, format!("{e}\n"))
}
