//! File transfer for serverfs-dev(HTTP mode only): the
//! `file_link` tool signs
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
//! - **Bounded uploads.** At most [`MAX_UPLOADS`] uploads run at once; one
//!   more is refused at once with 503 (`SERVER_BUSY`, retry), before its
//!   body is read. An upload holds no thread while it waits for its
//!   client: each piece is written on the runtime worker that received it,
//!   inside `tokio::task::block_in_place` (the worker's other tasks move to
//!   another thread meanwhile), so uploads never hold more than
//!   [`MAX_UPLOADS`] threads, and only while a piece is being written.
//!   The `/files` routes need tokio's multi-threaded runtime.
//! - **Origin.** An absolute URL is built only from `--public-url`; nothing
//!   is derived from `Host` or `X-Forwarded-*`. Without it the tool returns
//!   a path on the server's own origin.
//! - Responses are `application/octet-stream`, `nosniff`, `attachment`,
//!   `no-store`: a signed link opened in a browser never renders as a page
//!   of this origin.

#![deny(missing_docs)]

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC};

mod link;
mod range;
mod routes;
mod settings;

pub use link::{FileLinkArgs, FileLinkResult, LinkMethod, Links, Refusal, SignedQuery, canonical};
pub use range::{Span, span};
pub use routes::router;
pub use settings::{LinkConfig, LinkSettings};

/// Default `--max-upload`: 1 GiB.
pub const DEFAULT_MAX_UPLOAD_BYTES: u64 = 1 << 30;
/// Default `--upload-timeout`, seconds.
pub const DEFAULT_UPLOAD_TIMEOUT_SECONDS: u64 = 600;
/// Default link lifetime, seconds.
pub const DEFAULT_TTL_SECONDS: u64 = 900;
/// Largest link lifetime, seconds.
pub const MAX_TTL_SECONDS: u64 = 86_400;

/// Uploads that may run at once (see the crate docs).
pub const MAX_UPLOADS: usize = 16;

/// Characters left as they are in a URL path segment: RFC 3986 unreserved.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');
