//! The workspace's one errno → error-code mapping, for reads (the core's
//! resolver) and writes (serverfs-write) alike, so the same failure has the
//! same code whichever server meets it.
//!
//! Guarantees: the message names the path only as it is shown to the
//! client (`alias:/relative`); the OS's text goes to [`FsError::detail`]
//! (the log), never to the message.
//!
//! The codes that need a choice:
//! - `ENOTDIR` is `NOT_A_DIRECTORY`: a component that must be a directory
//!   (a parent, or the path itself where a directory is expected) is not.
//! - `EXDEV` is `PATH_OUTSIDE_WORKDIR`: the resolver refuses to cross a
//!   mount (`RESOLVE_NO_XDEV`), and a rename across one would leave the
//!   filesystem the root was opened on.
//! - `ENXIO`, `ENODEV`, `EOPNOTSUPP` are `UNSUPPORTED_FILE_TYPE`: what they
//!   refuse is a FIFO, socket or device, on a read or a write.

use std::fmt;

use rustix::io::Errno;

use crate::error::{ErrorCode, FsError};

/// The error for `e` met at `shown` (the path as the client sees it).
pub fn errno_error(e: Errno, shown: &(impl fmt::Display + ?Sized)) -> FsError {
    let err = match e {
        Errno::NOENT => FsError::new(ErrorCode::PathNotFound, format!("{shown} does not exist.")),
        Errno::NOTDIR => FsError::new(
            ErrorCode::NotADirectory,
            format!("{shown} or one of its parents is not a directory."),
        ),
        Errno::LOOP => symlink_error(shown),
        Errno::EXIST => FsError::new(ErrorCode::AlreadyExists, format!("{shown} already exists.")),
        Errno::ISDIR => {
            FsError::new(ErrorCode::NotAFile, format!("{shown} is a directory, not a file."))
        }
        Errno::ACCESS | Errno::PERM | Errno::ROFS => FsError::new(
            ErrorCode::AccessDenied,
            format!(
                "{shown} is not accessible to the server's user (file permissions or a read-only filesystem)."
            ),
        ),
        Errno::XDEV => {
            FsError::new(ErrorCode::PathOutsideWorkdir, format!("{shown} leaves the root."))
        }
        Errno::NXIO | Errno::NODEV | Errno::OPNOTSUPP => FsError::new(
            ErrorCode::UnsupportedFileType,
            format!(
                "{shown} is a FIFO, socket or device; only regular files and directories are used."
            ),
        ),
        Errno::NAMETOOLONG => FsError::invalid(format!("{shown} is too long.")),
        Errno::NOSPC | Errno::DQUOT => FsError::new(
            ErrorCode::InternalError,
            format!("{shown} could not be written: no space left on the server's disk."),
        ),
        _ => FsError::new(ErrorCode::InternalError, format!("{shown} could not be accessed.")),
    };
    err.with_detail(format!("errno {}", std::io::Error::from(e)))
}

/// A link met where none may be followed (`ELOOP` under `O_NOFOLLOW` or
/// `RESOLVE_NO_SYMLINKS`, or a link found on an opened handle).
pub(crate) fn symlink_error(shown: &(impl fmt::Display + ?Sized)) -> FsError {
    FsError::new(
        ErrorCode::SymlinkNotAllowed,
        format!(
            "{shown} is or passes through a symbolic link; ServerFS never follows symbolic links."
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_code_per_errno() {
        for (errno, code) in [
            (Errno::NOENT, ErrorCode::PathNotFound),
            (Errno::NOTDIR, ErrorCode::NotADirectory),
            (Errno::LOOP, ErrorCode::SymlinkNotAllowed),
            (Errno::EXIST, ErrorCode::AlreadyExists),
            (Errno::ISDIR, ErrorCode::NotAFile),
            (Errno::ACCESS, ErrorCode::AccessDenied),
            (Errno::PERM, ErrorCode::AccessDenied),
            (Errno::ROFS, ErrorCode::AccessDenied),
            (Errno::XDEV, ErrorCode::PathOutsideWorkdir),
            (Errno::NXIO, ErrorCode::UnsupportedFileType),
            (Errno::NODEV, ErrorCode::UnsupportedFileType),
            (Errno::OPNOTSUPP, ErrorCode::UnsupportedFileType),
            (Errno::NAMETOOLONG, ErrorCode::InvalidArgument),
            (Errno::NOSPC, ErrorCode::InternalError),
            (Errno::IO, ErrorCode::InternalError),
        ] {
            let e = errno_error(errno, "w:/x");
            assert_eq!(e.code(), code, "{errno:?}");
            assert!(e.detail().is_some_and(|d| d.starts_with("errno ")), "{errno:?}");
            assert!(!e.message().contains("os error"), "{e}");
            assert!(e.message().starts_with("w:/x "), "{e}");
        }
    }
}
