//! The one error type of the core: a stable machine code plus a message that
//! is safe to show to a client.
//!
//! Guarantee: a [`FsError`] message never contains a host path, a
//! `/workdirs/NN` path or OS error text. Paths appear only in the
//! `alias:/relative` form; the OS detail, when there is one, is kept in
//! [`FsError::detail`] for the log and never rendered by `Display`.

use std::fmt;

/// Stable error codes. Clients match on these strings; never rename one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The named workdir is not configured.
    WorkdirNotFound,
    /// Nothing exists at the path.
    PathNotFound,
    /// A directory was expected.
    NotADirectory,
    /// A regular file was expected.
    NotAFile,
    /// The operating system refused access (file permissions).
    AccessDenied,
    /// The path leaves the workdir (absolute, or `..` past the root).
    PathOutsideWorkdir,
    /// A symbolic link is on the path; links are never followed.
    SymlinkNotAllowed,
    /// A component starts with `.` and hidden paths are not allowed.
    HiddenPathNotAllowed,
    /// The path matches a credential deny rule.
    DeniedPath,
    /// The file holds NUL bytes.
    BinaryFile,
    /// The file is not UTF-8.
    UnsupportedTextEncoding,
    /// FIFO, socket or device: never opened for reading.
    UnsupportedFileType,
    /// The whole file is larger than the read cap (resource reads).
    ReadLimitExceeded,
    /// One line is larger than the read cap.
    LineTooLarge,
    /// An argument is malformed or out of range.
    InvalidArgument,
    /// A server-side failure; details are only in the log.
    InternalError,
    /// Too many calls of the same kind are running; retry shortly.
    ServerBusy,
    /// The call passed its deadline before it could answer.
    Timeout,
    /// serverfs-dev: the path to create already exists.
    AlreadyExists,
    /// serverfs-dev: the patch text is malformed (the message names the
    /// patch line).
    PatchSyntax,
    /// serverfs-dev: a hunk's context is not in the file.
    PatchContextNotFound,
    /// serverfs-dev: a hunk's context matches more than once.
    PatchContextAmbiguous,
    /// serverfs-dev: a hunk matched only by ignoring indentation, and its
    /// lines cannot be mapped consistently onto the file's indentation.
    PatchIndentationAmbiguous,
    /// serverfs-dev: the same path twice, or a target changed since it
    /// was matched.
    PatchConflict,
    /// serverfs-dev: the patch is over its size or operation limit.
    PatchTooLarge,
    /// serverfs-dev: the command policy refuses a program or a shell
    /// metacharacter.
    CommandNotAllowed,
    /// serverfs-dev: the content to write, or a file a write would
    /// change, is over the file cap (`--max-file-bytes`).
    WriteLimitExceeded,
}

impl ErrorCode {
    /// Every code: serverfs-mcp's first, then the ones serverfs-dev added.
    pub const ALL: [ErrorCode; 27] = [
        Self::WorkdirNotFound,
        Self::PathNotFound,
        Self::NotADirectory,
        Self::NotAFile,
        Self::AccessDenied,
        Self::PathOutsideWorkdir,
        Self::SymlinkNotAllowed,
        Self::HiddenPathNotAllowed,
        Self::DeniedPath,
        Self::BinaryFile,
        Self::UnsupportedTextEncoding,
        Self::UnsupportedFileType,
        Self::ReadLimitExceeded,
        Self::LineTooLarge,
        Self::InvalidArgument,
        Self::InternalError,
        Self::ServerBusy,
        Self::Timeout,
        Self::AlreadyExists,
        Self::PatchSyntax,
        Self::PatchContextNotFound,
        Self::PatchContextAmbiguous,
        Self::PatchConflict,
        Self::PatchTooLarge,
        Self::CommandNotAllowed,
        Self::PatchIndentationAmbiguous,
        Self::WriteLimitExceeded,
    ];

    /// The wire form, e.g. `PATH_OUTSIDE_WORKDIR`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WorkdirNotFound => "WORKDIR_NOT_FOUND",
            Self::PathNotFound => "PATH_NOT_FOUND",
            Self::NotADirectory => "NOT_A_DIRECTORY",
            Self::NotAFile => "NOT_A_FILE",
            Self::AccessDenied => "ACCESS_DENIED",
            Self::PathOutsideWorkdir => "PATH_OUTSIDE_WORKDIR",
            Self::SymlinkNotAllowed => "SYMLINK_NOT_ALLOWED",
            Self::HiddenPathNotAllowed => "HIDDEN_PATH_NOT_ALLOWED",
            Self::DeniedPath => "DENIED_PATH",
            Self::BinaryFile => "BINARY_FILE",
            Self::UnsupportedTextEncoding => "UNSUPPORTED_TEXT_ENCODING",
            Self::UnsupportedFileType => "UNSUPPORTED_FILE_TYPE",
            Self::ReadLimitExceeded => "READ_LIMIT_EXCEEDED",
            Self::LineTooLarge => "LINE_TOO_LARGE",
            Self::InvalidArgument => "INVALID_ARGUMENT",
            Self::InternalError => "INTERNAL_ERROR",
            Self::ServerBusy => "SERVER_BUSY",
            Self::Timeout => "TIMEOUT",
            Self::AlreadyExists => "ALREADY_EXISTS",
            Self::PatchSyntax => "PATCH_SYNTAX",
            Self::PatchContextNotFound => "PATCH_CONTEXT_NOT_FOUND",
            Self::PatchContextAmbiguous => "PATCH_CONTEXT_AMBIGUOUS",
            Self::PatchIndentationAmbiguous => "PATCH_INDENTATION_AMBIGUOUS",
            Self::PatchConflict => "PATCH_CONFLICT",
            Self::PatchTooLarge => "PATCH_TOO_LARGE",
            Self::CommandNotAllowed => "COMMAND_NOT_ALLOWED",
            Self::WriteLimitExceeded => "WRITE_LIMIT_EXCEEDED",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed operation: code, client-safe message, and an optional log-only
/// detail (errno text and the like).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsError {
    code: ErrorCode,
    message: String,
    detail: Option<String>,
}

impl FsError {
    /// An error whose message is already client-safe.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), detail: None }
    }

    /// Shorthand for [`ErrorCode::InvalidArgument`].
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }

    /// Attaches a log-only detail.
    #[must_use]
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// The machine code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The client-safe message, without the code.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Log-only detail; never send it to a client.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }
}

/// Renders `CODE: message`, the form clients see.
impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for FsError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_screaming_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "duplicate {s}");
            assert!(s.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'), "{s}");
        }
    }

    /// Clients match on these strings: a code may be appended to
    /// `error-codes.txt`, never renamed or removed.
    #[test]
    fn codes_match_the_checked_in_list() {
        let listed: Vec<&str> = include_str!("../error-codes.txt").lines().collect();
        let ours: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(ours, listed);
    }

    #[test]
    fn display_hides_detail() {
        let e = FsError::new(ErrorCode::AccessDenied, "p:/x is not readable.")
            .with_detail("EACCES /srv/secret/x");
        assert_eq!(e.to_string(), "ACCESS_DENIED: p:/x is not readable.");
        assert_eq!(e.detail(), Some("EACCES /srv/secret/x"));
    }
}
