//! The one error of the sandbox's layers. Its text names the layer and the
//! step, for the server's start-up line and its log; a supervisor that
//! fails for a command reports only a [`crate::protocol::Failure`] word.

use std::path::PathBuf;

use rustix::io::Errno;

/// What a layer of the sandbox could not do.
#[derive(Debug)]
pub enum Error {
    /// Landlock refused a step of the ruleset.
    Landlock(landlock::RulesetError),
    /// Landlock is off (a simulated ABI 0) or missing on this kernel.
    LandlockUnavailable(String),
    /// The seccomp filter could not be built or installed.
    Seccomp(seccompiler::Error),
    /// A system call of a layer failed: its step, the path it was about.
    Os {
        /// What it was for (`"bind"`, `"mount namespace"`…).
        step: &'static str,
        /// The path it was about, if any.
        path: Option<PathBuf>,
        /// What the kernel said.
        errno: Errno,
    },
    /// Reading or writing one of the kernel's files (`mountinfo`, the user
    /// namespace's maps).
    Io {
        /// What it was for.
        step: &'static str,
        /// What went wrong.
        error: std::io::Error,
    },
    /// Not the name of a capability (`--command-capabilities`); the name
    /// as shown (control characters removed, 40 characters at most).
    UnknownCapability(String),
    /// A start-up probe's thread panicked.
    ProbePanicked,
    /// Commands on the network by allowlist need a network namespace of
    /// their own, which needs the view's namespaces, which the kernel
    /// refused.
    ProxyWithoutNamespaces,
    /// The root or a writable or readable path leads elsewhere (or
    /// nowhere) than at the server's start: moved, or replaced.
    Moved(PathBuf),
    /// A writable mount of the view kept being missed at its path (a
    /// directory above it renamed meanwhile, say): the view cannot be made
    /// read-only. Where it was last seen.
    Unreachable(PathBuf),
}

impl Error {
    /// A failed system call of `step`.
    pub(crate) fn os(step: &'static str, errno: Errno) -> Self {
        Self::Os { step, path: None, errno }
    }

    /// A failed system call of `step` on `path`.
    pub(crate) fn os_at(step: &'static str, path: impl Into<PathBuf>, errno: Errno) -> Self {
        Self::Os { step, path: Some(path.into()), errno }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Landlock(e) => write!(f, "{e}"),
            Self::LandlockUnavailable(why) => f.write_str(why),
            Self::Seccomp(e) => write!(f, "{e}"),
            Self::Os { step, path: Some(path), errno } => {
                write!(f, "{step} {}: {errno}", path.display())
            }
            Self::Os { step, path: None, errno } => write!(f, "{step}: {errno}"),
            Self::Io { step, error } => write!(f, "{step}: {error}"),
            Self::UnknownCapability(name) => {
                write!(f, "'{name}' is not a capability (e.g. CAP_NET_BIND_SERVICE)")
            }
            Self::ProbePanicked => f.write_str("the probe thread panicked"),
            Self::ProxyWithoutNamespaces => f.write_str(
                "the kernel refuses the namespaces commands on the network by allowlist need (a network namespace of their own; without it they would have the host's network)",
            ),
            Self::Moved(path) => write!(
                f,
                "{} is not the directory it was at the server's start (moved or replaced)",
                path.display()
            ),
            Self::Unreachable(path) => write!(
                f,
                "the mount at {} cannot be made read-only: its path keeps leading elsewhere (a directory above it renamed meanwhile?)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Landlock(e) => Some(e),
            Self::Seccomp(e) => Some(e),
            Self::Os { errno, .. } => Some(errno),
            Self::Io { error, .. } => Some(error),
            Self::LandlockUnavailable(_)
            | Self::UnknownCapability(_)
            | Self::ProbePanicked
            | Self::ProxyWithoutNamespaces
            | Self::Moved(_)
            | Self::Unreachable(_) => None,
        }
    }
}

impl From<landlock::RulesetError> for Error {
    fn from(e: landlock::RulesetError) -> Self {
        Self::Landlock(e)
    }
}

impl From<seccompiler::Error> for Error {
    fn from(e: seccompiler::Error) -> Self {
        Self::Seccomp(e)
    }
}

impl From<seccompiler::BackendError> for Error {
    fn from(e: seccompiler::BackendError) -> Self {
        Self::Seccomp(e.into())
    }
}
