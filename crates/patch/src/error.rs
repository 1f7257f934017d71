//! The one error type of the patch crate: a stable code plus a message that
//! names the patch line or the hunk, safe to show to a client.
//!
//! The codes carry the same wire strings as the matching codes of
//! `serverfs-core`'s `ErrorCode`, so the server maps them one to one.
//! Messages never contain host paths: only the paths written in the patch.

use std::fmt;

/// Stable error codes. Clients match on these strings; never rename one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PatchErrorCode {
    /// The patch text is malformed; the message names the 1-based patch
    /// line and what was expected there.
    PatchSyntax,
    /// A hunk's context (or an `@@` line) is not in the file, or not after
    /// the previous hunk.
    PatchContextNotFound,
    /// A hunk's context matches more than one place.
    PatchContextAmbiguous,
    /// The same path appears twice in the patch.
    PatchConflict,
    /// The patch is over its byte or operation limit.
    PatchTooLarge,
    /// The file to update is not UTF-8 text.
    UnsupportedTextEncoding,
    /// Planning was stopped by its caller (deadline or cancellation).
    Timeout,
}

impl PatchErrorCode {
    /// Every code.
    pub const ALL: [PatchErrorCode; 7] = [
        Self::PatchSyntax,
        Self::PatchContextNotFound,
        Self::PatchContextAmbiguous,
        Self::PatchConflict,
        Self::PatchTooLarge,
        Self::UnsupportedTextEncoding,
        Self::Timeout,
    ];

    /// The wire form, e.g. `PATCH_SYNTAX`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PatchSyntax => "PATCH_SYNTAX",
            Self::PatchContextNotFound => "PATCH_CONTEXT_NOT_FOUND",
            Self::PatchContextAmbiguous => "PATCH_CONTEXT_AMBIGUOUS",
            Self::PatchConflict => "PATCH_CONFLICT",
            Self::PatchTooLarge => "PATCH_TOO_LARGE",
            Self::UnsupportedTextEncoding => "UNSUPPORTED_TEXT_ENCODING",
            Self::Timeout => "TIMEOUT",
        }
    }
}

impl fmt::Display for PatchErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused patch: code and client-safe message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchError {
    code: PatchErrorCode,
    message: String,
}

impl PatchError {
    /// An error with this code and message.
    pub fn new(code: PatchErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    /// A [`PatchErrorCode::PatchSyntax`] error at a 1-based patch line.
    pub(crate) fn syntax(line: usize, message: impl fmt::Display) -> Self {
        Self::new(PatchErrorCode::PatchSyntax, format!("line {line}: {message}"))
    }

    /// The machine code.
    pub fn code(&self) -> PatchErrorCode {
        self.code
    }

    /// The message, without the code.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Renders `CODE: message`, the form clients see.
impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for PatchError {}

/// Quotes a piece of patch or file text for a message: at most 80
/// characters (a patch line can be a megabyte long), escaped like a Rust
/// string so control characters cannot break the message's one line.
pub(crate) fn quote(text: &str) -> String {
    const MAX_CHARS: usize = 80;
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None => format!("{text:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_match_core_spelling() {
        let wire: Vec<&str> = PatchErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            wire,
            [
                "PATCH_SYNTAX",
                "PATCH_CONTEXT_NOT_FOUND",
                "PATCH_CONTEXT_AMBIGUOUS",
                "PATCH_CONFLICT",
                "PATCH_TOO_LARGE",
                "UNSUPPORTED_TEXT_ENCODING",
                "TIMEOUT",
            ]
        );
    }

    #[test]
    fn display_is_code_colon_message() {
        let e = PatchError::syntax(7, "expected x");
        assert_eq!(e.to_string(), "PATCH_SYNTAX: line 7: expected x");
        assert_eq!(e.message(), "line 7: expected x");
    }

    #[test]
    fn quote_truncates_and_escapes() {
        assert_eq!(quote("a\"b\n"), r#""a\"b\n""#);
        let long = "é".repeat(100);
        let q = quote(&long);
        assert_eq!(q.chars().filter(|&c| c == 'é').count(), 80);
        assert!(q.ends_with('…'));
    }
}
