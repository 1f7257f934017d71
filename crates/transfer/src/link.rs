//! Signed links: the per-run key, the signature over method, path and
//! expiry, and the file_link tool that makes them.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use percent_encoding::{percent_decode_str, utf8_percent_encode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serverfs_core::{ErrorCode, FsError, Reported, ToText};
use serverfs_write::Writer;
use sha2::Sha256;

use crate::settings::LinkConfig;
use crate::{DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS, SEGMENT};

type HmacSha256 = Hmac<Sha256>;

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
    /// `method`, `expires` or `sig` is missing.
    Incomplete,
    /// A parameter is repeated or not a number.
    Malformed,
    /// Signed for GET, used for PUT or the reverse.
    OtherMethod,
    /// Past its `expires`.
    Expired,
    /// Not this key's tag for this method, path and expiry.
    BadSignature,
}

impl Refusal {
    pub(crate) fn text(self) -> &'static str {
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
    /// The signature parameters of `query` (percent-decoded).
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
    // A `String`: a start-up message the caller only prints.
    pub fn new(config: LinkConfig) -> Result<Self, String> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| format!("cannot draw a link-signing key: {e}"))?;
        Ok(Self::with_key(key, config))
    }

    /// Signing with `key` (tests; a server draws one with [`Links::new`]).
    pub fn with_key(key: [u8; 32], config: LinkConfig) -> Self {
        Self { key, config }
    }

    /// The settings it was made with.
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

    /// file_link: checks `args.path` in `writer`'s root as the method will
    /// meet it (GET: a regular file, read through the root's rule; PUT: an
    /// upload could start there), then signs.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` (ttl), and the path's refusals.
    pub fn link(&self, writer: &Writer, args: &FileLinkArgs) -> Result<FileLinkResult, FsError> {
        let ttl = args.ttl_seconds.unwrap_or(DEFAULT_TTL_SECONDS);
        if !(1..=MAX_TTL_SECONDS).contains(&ttl) {
            return Err(FsError::invalid(format!(
                "ttl_seconds must be between 1 and {MAX_TTL_SECONDS}; got {ttl}."
            )));
        }
        let root = writer.root();
        let loc = root.locate(&args.path)?;
        let method = match args.method {
            LinkMethod::Get => {
                root.open_file(&loc)?;
                "GET"
            }
            LinkMethod::Put => {
                writer.check_upload(&args.path, true)?;
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

/// Seconds since the epoch (0 before it).
pub(crate) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// What a link allows (no doc per variant: the schema stays a plain
/// string `enum`).
#[derive(Clone, Copy, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
#[schemars(inline)]
#[allow(missing_docs)]
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

/// The link, its method and when it expires: one line each for a model.
impl ToText for FileLinkResult {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        out.push_str(&format!("{} {}\nexpires_at: {}\n", self.method, self.url, self.expires_at));
    }
}

impl Reported for FileLinkResult {}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
}
