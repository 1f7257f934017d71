//! The one resolver: `(workdir alias, client path, purpose) → opened handle
//! or error`. Every filesystem access of every tool goes through here.
//!
//! Guarantees:
//! - The client path is parsed and normalised ([`RelPath`]) and checked
//!   against the [`Policy`] *before* any lookup, so a denied name is
//!   reported as denied whether or not it exists.
//! - Resolution walks file descriptors from the workdir's root handle: with
//!   `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`
//!   where the kernel has it, otherwise one `openat(O_NOFOLLOW)` per
//!   component. No symlink is followed anywhere in the path, and nothing is
//!   canonicalised and re-opened by name, so a directory swapped for a
//!   symlink while a call runs cannot make it escape.
//! - Reads and stats use the handle that resolution opened; the type is
//!   checked on that handle. A file is opened `O_PATH`, classified with
//!   `fstat`, and only then re-opened for reading *through that handle*
//!   (`/proc/self/fd/N`, procfs verified as in libpathrs), so no second
//!   lookup can meet a FIFO or device swapped in meanwhile: FIFOs, sockets
//!   and devices are never opened for reading, and nothing blocks. (Where
//!   `/proc` is not mounted, the file is opened a second time beneath the
//!   root and its type checked again on that handle: nothing blocks or
//!   escapes, but a FIFO swapped in between the two opens is opened.)
//! - Walkers that need a path (ripgrep's `ignore`) get [`WalkRoot`]: the
//!   directory opened by the resolver, named `/proc/self/fd/N`, so a walk
//!   reads exactly the directory that was resolved even if a host path is
//!   renamed or retargeted meanwhile.

use std::fmt;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;

use crate::error::{ErrorCode, FsError};
use crate::path::RelPath;
use crate::policy::{Policy, SENTINEL};

/// How paths are resolved beneath a root handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResolveMode {
    /// One `openat2` call with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`.
    Openat2,
    /// `openat(O_NOFOLLOW)` one component at a time (kernels before 5.6,
    /// or seccomp filters that refuse `openat2`).
    ComponentWalk,
}

impl ResolveMode {
    /// `Openat2` if the running kernel accepts it beneath `dir`.
    pub fn detect(dir: &OwnedFd) -> Self {
        match rustix::fs::openat2(dir, ".", path_flags(), Mode::empty(), beneath_flags()) {
            Ok(_) => Self::Openat2,
            // ENOSYS: old kernel; EPERM: seccomp; EINVAL/E2BIG: unknown bits.
            Err(_) => Self::ComponentWalk,
        }
    }
}

/// One configured workdir: its alias, description and root handle.
///
/// The root is opened once at start-up (`O_PATH | O_DIRECTORY`); it is a
/// handle, not a cache: every call resolves beneath it afresh.
#[derive(Debug)]
pub struct Workdir {
    alias: String,
    description: Option<String>,
    root: OwnedFd,
    host_root: PathBuf,
}

impl Workdir {
    /// The alias clients use.
    pub fn alias(&self) -> &str {
        &self.alias
    }

    /// The optional description.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
}

/// A workdir definition before its root is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkdirSpec {
    /// Validated alias.
    pub alias: String,
    /// Description, `None` when empty.
    pub description: Option<String>,
    /// Where the root is on this host. Never shown to clients.
    pub host_path: PathBuf,
    /// How the spec names itself in start-up errors (`slot 03`, `workdir
    /// 'docs'`): never the host path.
    pub origin: String,
}

/// All workdirs plus the policy and resolve mode: the read-only core's
/// entry point.
#[derive(Debug)]
pub struct Sandbox {
    workdirs: Vec<Workdir>,
    policy: Policy,
    mode: ResolveMode,
    /// Whether a genuine procfs lets handles be re-opened in place.
    procfs: bool,
}

/// A client path that passed syntax and policy checks, bound to its
/// workdir. Not yet looked up.
#[derive(Clone, Debug)]
pub struct Location<'a> {
    workdir: &'a Workdir,
    path: RelPath,
}

impl<'a> Location<'a> {
    /// The workdir (borrowed from the sandbox, not from this location).
    pub fn workdir(&self) -> &'a Workdir {
        self.workdir
    }

    /// The normalised relative path.
    pub fn path(&self) -> &RelPath {
        &self.path
    }
}

/// `alias:/relative/path`, the only form in which paths reach clients.
impl fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:/{}", self.workdir.alias, self.path.as_relative())
    }
}

/// What a handle is opened for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    /// `O_PATH`: stat anything, including the link itself.
    Inspect,
    /// `O_RDONLY | O_DIRECTORY`.
    ListDirectory,
    /// `O_RDONLY | O_NONBLOCK | O_NOCTTY`, only after the type was checked.
    ReadFile,
}

/// The type of a filesystem entry as clients see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// Regular file.
    File,
    /// Directory.
    Directory,
    /// Symbolic link (never followed).
    Symlink,
    /// FIFO, socket or device.
    Special,
}

impl EntryKind {
    /// From a `st_mode`.
    pub fn from_stat(stat: &Stat) -> Self {
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => Self::File,
            FileType::Directory => Self::Directory,
            FileType::Symlink => Self::Symlink,
            _ => Self::Special,
        }
    }

    /// `file`, `directory`, `symlink` or `special`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Directory => "directory",
            Self::Symlink => "symlink",
            Self::Special => "special",
        }
    }
}

/// An opened directory, ready to be read.
#[derive(Debug)]
pub struct OpenDir {
    pub(crate) fd: OwnedFd,
}

impl OpenDir {
    /// The directory handle (for `*at` calls relative to it).
    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }
}

/// A directory opened by the resolver, named by a path for walkers that
/// only take paths. Walkers must still confirm every entry through the
/// [`Sandbox`] before reporting or reading it.
#[derive(Debug)]
pub struct WalkRoot {
    /// Kept open: the path names this handle.
    _dir: OwnedFd,
    path: PathBuf,
}

impl WalkRoot {
    /// `/proc/self/fd/N`, or (without procfs) the host path that was
    /// checked to be the same directory.
    ///
    /// # Security
    /// Never show it to a client or log it at INFO.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Sandbox {
    /// Opens every workdir root. Fails on an unreadable root, a root that is
    /// not a directory, or a root holding the reserved sentinel.
    ///
    /// # Errors
    /// One line naming the spec's origin, never its host path.
    pub fn open(specs: Vec<WorkdirSpec>, policy: Policy) -> Result<Self, String> {
        let mut workdirs = Vec::with_capacity(specs.len());
        for spec in specs {
            let root = rustix::fs::open(
                &spec.host_path,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| {
                format!("{}: directory cannot be opened ({})", spec.origin, errno_words(e))
            })?;
            match rustix::fs::statat(&root, SENTINEL, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
                Ok(_) => {
                    return Err(format!(
                        "{}: the directory contains the reserved file {SENTINEL}; remove it or choose another directory",
                        spec.origin
                    ));
                }
                Err(Errno::NOENT) => {}
                Err(e) => {
                    return Err(format!(
                        "{}: directory cannot be checked ({})",
                        spec.origin,
                        errno_words(e)
                    ));
                }
            }
            workdirs.push(Workdir {
                alias: spec.alias,
                description: spec.description,
                root,
                host_root: spec.host_path,
            });
        }
        let mode = workdirs.first().map_or(ResolveMode::Openat2, |w| ResolveMode::detect(&w.root));
        // Opened (and verified) once here, so the handles it keeps are there
        // from the start rather than appearing with the first call.
        let procfs = rustix_linux_procfs::proc_self_fd().is_ok();
        Ok(Self { workdirs, policy, mode, procfs })
    }

    /// Forces a resolve mode (tests run every case in both).
    #[must_use]
    pub fn with_mode(mut self, mode: ResolveMode) -> Self {
        self.mode = mode;
        self
    }

    /// The active resolve mode.
    pub fn mode(&self) -> ResolveMode {
        self.mode
    }

    /// Whether files are re-opened through `/proc/self/fd` (see the module
    /// docs); false where no genuine procfs is mounted.
    pub fn reopens_in_place(&self) -> bool {
        self.procfs
    }

    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Workdirs in configuration order.
    pub fn workdirs(&self) -> &[Workdir] {
        &self.workdirs
    }

    /// Looks up a workdir by exact, case-sensitive alias.
    ///
    /// # Errors
    /// `WORKDIR_NOT_FOUND`.
    pub fn workdir(&self, alias: &str) -> Result<&Workdir, FsError> {
        self.workdirs.iter().find(|w| w.alias == alias).ok_or_else(|| {
            let shown: String = alias.chars().filter(|c| !c.is_control()).take(64).collect();
            FsError::new(
                ErrorCode::WorkdirNotFound,
                format!("workdir '{shown}' is not configured; call list_workdirs to see the available workdirs."),
            )
        })
    }

    /// Parses, normalises and policy-checks a client path (SPEC §2.6 steps
    /// 1–3). Does not touch the filesystem.
    ///
    /// # Errors
    /// `WORKDIR_NOT_FOUND`, `INVALID_ARGUMENT`, `PATH_OUTSIDE_WORKDIR`,
    /// `DENIED_PATH`, `HIDDEN_PATH_NOT_ALLOWED`.
    pub fn locate(&self, alias: &str, raw_path: &str) -> Result<Location<'_>, FsError> {
        let workdir = self.workdir(alias)?;
        let path = RelPath::parse(raw_path, alias)?;
        self.policy.enforce(alias, &path)?;
        Ok(Location { workdir, path })
    }

    /// Binds a path produced by a walk (already normal) to its workdir,
    /// re-checking the policy.
    ///
    /// # Errors
    /// `DENIED_PATH`, `HIDDEN_PATH_NOT_ALLOWED`.
    pub fn locate_walked<'a>(
        &self,
        workdir: &'a Workdir,
        path: RelPath,
    ) -> Result<Location<'a>, FsError> {
        self.policy.enforce(&workdir.alias, &path)?;
        Ok(Location { workdir, path })
    }

    /// `lstat` semantics: the entry itself, a symlink reported as such.
    ///
    /// # Errors
    /// Resolution errors (`PATH_NOT_FOUND`, `SYMLINK_NOT_ALLOWED` for a link
    /// in a parent component, `ACCESS_DENIED`, …).
    pub fn inspect(&self, loc: &Location<'_>) -> Result<Stat, FsError> {
        let fd = self.open_beneath(loc, Purpose::Inspect).map_err(|e| errno_error(e, loc))?;
        rustix::fs::fstat(&fd).map_err(|e| errno_error(e, loc))
    }

    /// Opens a directory for listing.
    ///
    /// # Errors
    /// `NOT_A_DIRECTORY` (files, FIFOs, …), `SYMLINK_NOT_ALLOWED`, and the
    /// resolution errors.
    pub fn open_dir(&self, loc: &Location<'_>) -> Result<OpenDir, FsError> {
        match self.open_beneath(loc, Purpose::ListDirectory) {
            Ok(fd) => Ok(OpenDir { fd }),
            Err(e @ (Errno::LOOP | Errno::NOTDIR)) => {
                // Either the entry itself or a parent component is not a
                // directory; the O_PATH look tells which.
                match EntryKind::from_stat(&self.inspect(loc)?) {
                    EntryKind::Symlink => Err(symlink_error(loc)),
                    EntryKind::Directory => Err(errno_error(e, loc)),
                    _ => Err(FsError::new(
                        ErrorCode::NotADirectory,
                        format!("{loc} is not a directory."),
                    )),
                }
            }
            Err(e) => Err(errno_error(e, loc)),
        }
    }

    /// Opens a regular file for reading; returns it with its `fstat`.
    ///
    /// # Errors
    /// `NOT_A_FILE` (directories), `UNSUPPORTED_FILE_TYPE` (FIFO, socket,
    /// device: never opened for reading), `SYMLINK_NOT_ALLOWED`, and the
    /// resolution errors.
    pub fn open_file(&self, loc: &Location<'_>) -> Result<(File, Stat), FsError> {
        let classify = |stat: &Stat| match EntryKind::from_stat(stat) {
            EntryKind::File => Ok(()),
            EntryKind::Directory => {
                Err(FsError::new(ErrorCode::NotAFile, format!("{loc} is a directory, not a file.")))
            }
            EntryKind::Symlink => Err(symlink_error(loc)),
            EntryKind::Special => Err(FsError::new(
                ErrorCode::UnsupportedFileType,
                format!("{loc} is a FIFO, socket or device; only regular files can be read."),
            )),
        };
        let handle = self.open_beneath(loc, Purpose::Inspect).map_err(|e| errno_error(e, loc))?;
        let stat = rustix::fs::fstat(&handle).map_err(|e| errno_error(e, loc))?;
        classify(&stat)?;
        let fd = if self.procfs {
            reopen_for_reading(&handle)
        } else {
            // No usable procfs: a second lookup, checked again below.
            self.open_beneath(loc, Purpose::ReadFile)
        }
        .map_err(|e| errno_error(e, loc))?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| errno_error(e, loc))?;
        classify(&stat)?;
        Ok((File::from(fd), stat))
    }

    /// Opens the directory `loc` for a path-based walker (see [`WalkRoot`]).
    ///
    /// # Errors
    /// As [`Sandbox::open_dir`]; `INTERNAL_ERROR` when, without procfs, the
    /// host path no longer leads to the directory that was opened.
    pub fn walk_root(&self, loc: &Location<'_>) -> Result<WalkRoot, FsError> {
        let dir = self.open_dir(loc)?.fd;
        if self.procfs {
            let path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
            return Ok(WalkRoot { _dir: dir, path });
        }
        let path = loc.workdir.host_root.join(loc.path.as_relative());
        let opened = rustix::fs::fstat(&dir).map_err(|e| errno_error(e, loc))?;
        match rustix::fs::stat(&path) {
            Ok(now) if (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino) => {
                Ok(WalkRoot { _dir: dir, path })
            }
            _ => Err(FsError::new(
                ErrorCode::InternalError,
                format!("{loc} was moved or replaced on the server while being opened; try again."),
            )),
        }
    }

    fn open_beneath(&self, loc: &Location<'_>, purpose: Purpose) -> Result<OwnedFd, Errno> {
        let flags = match purpose {
            Purpose::Inspect => path_flags(),
            Purpose::ListDirectory => {
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
            }
            Purpose::ReadFile => {
                OFlags::RDONLY
                    | OFlags::NONBLOCK
                    | OFlags::NOCTTY
                    | OFlags::NOFOLLOW
                    | OFlags::CLOEXEC
            }
        };
        let root = &loc.workdir.root;
        if loc.path.is_root() {
            return rustix::fs::openat(root, ".", flags, Mode::empty());
        }
        match self.mode {
            ResolveMode::Openat2 => openat2_beneath(root, &loc.path, flags),
            ResolveMode::ComponentWalk => walk_beneath(root, &loc.path, flags),
        }
    }
}

/// Re-opens the inode behind an `O_PATH` handle for reading, through
/// `/proc/self/fd/N` (no path lookup of the original name).
fn reopen_for_reading(handle: &OwnedFd) -> Result<OwnedFd, Errno> {
    let proc_fd = rustix_linux_procfs::proc_self_fd()?;
    let name = handle.as_raw_fd().to_string();
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    rustix::fs::openat(proc_fd, name.as_str(), flags, Mode::empty())
}

fn path_flags() -> OFlags {
    OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn beneath_flags() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

fn openat2_beneath(root: &OwnedFd, path: &RelPath, flags: OFlags) -> Result<OwnedFd, Errno> {
    let joined = path.as_relative();
    // EAGAIN: a concurrent rename somewhere on the system; the kernel asks
    // for a retry. Bounded, as in cap-std.
    let mut attempts = 0;
    loop {
        match rustix::fs::openat2(root, &joined, flags, Mode::empty(), beneath_flags()) {
            Err(Errno::AGAIN) if attempts < 8 => attempts += 1,
            other => return other,
        }
    }
}

/// The fallback: every intermediate component is opened `O_PATH |
/// O_NOFOLLOW` relative to the previous handle and must be a directory;
/// since a [`RelPath`] has no `..`, the walk cannot climb.
fn walk_beneath(root: &OwnedFd, path: &RelPath, flags: OFlags) -> Result<OwnedFd, Errno> {
    let (last, parents) = path.components().split_last().ok_or(Errno::INVAL)?;
    let mut current: Option<OwnedFd> = None;
    for name in parents {
        let base = current.as_ref().map_or(root.as_fd(), AsFd::as_fd);
        let next = rustix::fs::openat(base, name.as_str(), path_flags(), Mode::empty())?;
        match FileType::from_raw_mode(rustix::fs::fstat(&next)?.st_mode) {
            FileType::Directory => current = Some(next),
            FileType::Symlink => return Err(Errno::LOOP),
            _ => return Err(Errno::NOTDIR),
        }
    }
    let base = current.as_ref().map_or(root.as_fd(), AsFd::as_fd);
    rustix::fs::openat(base, last.as_str(), flags, Mode::empty())
}

fn symlink_error(loc: &Location<'_>) -> FsError {
    FsError::new(
        ErrorCode::SymlinkNotAllowed,
        format!(
            "{loc} is or passes through a symbolic link; ServerFS never follows symbolic links."
        ),
    )
}

/// The one errno → error-code mapping.
pub(crate) fn errno_error(e: Errno, loc: &Location<'_>) -> FsError {
    let err = match e {
        Errno::NOENT | Errno::NOTDIR => {
            FsError::new(ErrorCode::PathNotFound, format!("{loc} does not exist."))
        }
        Errno::LOOP => symlink_error(loc),
        Errno::ACCESS | Errno::PERM => FsError::new(
            ErrorCode::AccessDenied,
            format!("{loc} is not accessible to the server's user (file permissions)."),
        ),
        Errno::XDEV => {
            FsError::new(ErrorCode::PathOutsideWorkdir, format!("{loc} leaves the workdir."))
        }
        Errno::NXIO | Errno::NODEV | Errno::OPNOTSUPP => FsError::new(
            ErrorCode::UnsupportedFileType,
            format!("{loc} is a FIFO, socket or device; only regular files can be read."),
        ),
        Errno::NAMETOOLONG => FsError::invalid(format!("{loc} is too long.")),
        _ => FsError::new(ErrorCode::InternalError, format!("{loc} could not be accessed.")),
    };
    err.with_detail(format!("errno {}", errno_words(e)))
}

fn errno_words(e: Errno) -> String {
    std::io::Error::from(e).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_one(dir: &std::path::Path) -> Result<Sandbox, String> {
        let spec = WorkdirSpec {
            alias: "w".into(),
            description: None,
            host_path: dir.into(),
            origin: "workdir 'w'".into(),
        };
        Sandbox::open(vec![spec], Policy::new(false, &[]).unwrap())
    }

    #[test]
    fn errno_mapping() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = open_one(dir.path()).unwrap();
        let loc = sandbox.locate("w", "x").unwrap();
        for (errno, code) in [
            (Errno::ACCESS, ErrorCode::AccessDenied),
            (Errno::PERM, ErrorCode::AccessDenied),
            (Errno::NOENT, ErrorCode::PathNotFound),
            (Errno::NOTDIR, ErrorCode::PathNotFound),
            (Errno::LOOP, ErrorCode::SymlinkNotAllowed),
            (Errno::XDEV, ErrorCode::PathOutsideWorkdir),
            (Errno::NXIO, ErrorCode::UnsupportedFileType),
            (Errno::IO, ErrorCode::InternalError),
        ] {
            let e = errno_error(errno, &loc);
            assert_eq!(e.code(), code, "{errno:?}");
            assert!(e.detail().is_some());
            assert!(!e.message().contains("os error"));
        }
    }

    #[test]
    fn sentinel_in_a_workdir_is_a_conflict() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SENTINEL), "").unwrap();
        let e = open_one(dir.path()).unwrap_err();
        assert!(e.starts_with("workdir 'w':") && e.contains(SENTINEL), "{e}");
        assert!(!e.contains(&*dir.path().to_string_lossy()));
    }
}
