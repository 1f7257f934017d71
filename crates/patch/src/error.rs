//! The one error type of the patch crate: a stable code plus a message that
//! names the patch line or the hunk, safe to show to a client.
//!
//! The code is the workspace's one [`ErrorCode`] (`PATCH_SYNTAX`,
//! `PATCH_CONTEXT_NOT_FOUND`, `PATCH_CONTEXT_AMBIGUOUS`, `PATCH_CONFLICT`,
//! `PATCH_TOO_LARGE`, `UNSUPPORTED_TEXT_ENCODING`), so a [`PatchError`]
//! becomes an [`FsError`] without any mapping.
//!
//! Messages never contain host paths: only the paths written in the patch.

use std::fmt;

use serverfs_core::{ErrorCode, FsError};

/// A refused patch: code and client-safe message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchError {
    code: ErrorCode,
    message: String,
}

impl PatchError {
    /// An error with this code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    /// A [`ErrorCode::PatchSyntax`] error at a 1-based patch line.
    pub(crate) fn syntax(line: usize, message: impl fmt::Display) -> Self {
        Self::new(ErrorCode::PatchSyntax, format!("line {line}: {message}"))
    }

    /// The machine code.
    pub fn code(&self) -> ErrorCode {
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

impl From<PatchError> for FsError {
    fn from(e: PatchError) -> Self {
        FsError::new(e.code, e.message)
    }
}

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
    fn becomes_the_same_fs_error() {
        let e = FsError::from(PatchError::new(ErrorCode::PatchContextNotFound, "hunk 2"));
        assert_eq!(e.to_string(), "PATCH_CONTEXT_NOT_FOUND: hunk 2");
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
