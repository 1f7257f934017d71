//! [`Root`]: one directory handle with its display name, policy and symlink
//! rule — the only way a ServerFS tool reaches a file. Every filesystem
//! access of every file tool goes through a root's [`Root::locate`] and one
//! of its operations. (A command serverfs-dev runs reaches files as the OS
//! lets it; only its working directory comes from a root.)
//!
//! Guarantees:
//! - A client path is parsed and normalised ([`RelPath`]) and checked
//!   against the [`Policy`] *before* any lookup, so a
//!   denied name is reported as denied whether or not it exists.
//! - Resolution walks file descriptors from the root handle (see the
//!   `resolve` module): nothing is canonicalised and re-opened by name, so
//!   an entry swapped for a symlink while a call runs cannot make it
//!   escape. Under [`SymlinkRule::FollowWithinRoot`] every followed link is
//!   re-checked against the policy, hop by hop.
//! - Reads and stats use the handle that resolution opened; the type is
//!   checked on that handle. A file is opened `O_PATH`, classified with
//!   `fstat`, and only then re-opened for reading *through that handle*
//!   (`/proc/self/fd/N`, procfs verified as in libpathrs), so no second
//!   lookup can meet a FIFO or device swapped in meanwhile: FIFOs, sockets
//!   and devices are never opened for reading, and nothing blocks. (Where
//!   `/proc` is not mounted, the file is opened a second time beneath the
//!   root and its type checked again on that handle: nothing blocks or
//!   escapes, but a FIFO swapped in between the two opens is opened.)
//! - The API hands out no raw directory descriptor and no raw `stat`:
//!   callers get [`Meta`], an [`Entry`] (metadata, and the file read
//!   through its handle on request), a [`File`] opened for reading, a [`WalkRoot`]
//!   path for walkers and command workdirs, and — the one seam for a write crate —
//!   [`Root::open_parent`], whose parent is resolved without following any
//!   link whatever the rule (writes never follow a symlink).
//! - Every errno is mapped to an [`ErrorCode`] by the workspace's one map
//!   ([`errno_error`], shared with serverfs-write); messages name paths
//!   only as `name:/relative`.

use std::fmt;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::errno::{errno_error, symlink_error};
use crate::error::{ErrorCode, FsError};
use crate::meta::{EntryKind, Meta};
use crate::path::RelPath;
use crate::policy::{Policy, Refusal, SENTINEL};
use crate::resolve::{
    Beneath, Failure, Last, MAX_SYMLINK_HOPS, ResolveMode, SymlinkRule, path_flags,
};

/// How a [`Root`] is opened. Defaults: [`SymlinkRule::Never`] and the
/// resolve mode the kernel supports.
#[derive(Clone, Debug)]
pub struct RootOptions {
    name: String,
    policy: Policy,
    symlinks: SymlinkRule,
    mode: Option<ResolveMode>,
}

impl RootOptions {
    /// A root shown to clients as `name` (`name:/relative/path`), under
    /// `policy`.
    pub fn new(name: impl Into<String>, policy: Policy) -> Self {
        Self { name: name.into(), policy, symlinks: SymlinkRule::Never, mode: None }
    }

    /// Whether links inside the root are followed. Default:
    /// [`SymlinkRule::Never`].
    #[must_use]
    pub fn symlinks(mut self, rule: SymlinkRule) -> Self {
        self.symlinks = rule;
        self
    }

    /// Forces a resolve mode (tests run every case in both). Default: the
    /// one the kernel supports, detected when the root is opened.
    #[must_use]
    pub fn resolve_mode(mut self, mode: ResolveMode) -> Self {
        self.mode = Some(mode);
        self
    }
}

/// Why a root could not be opened. The message names no host path; the
/// caller prefixes its own name for the root (`slot 03: …`).
#[derive(Debug)]
#[non_exhaustive]
pub enum RootError {
    /// The directory cannot be opened: missing, not a directory, or not
    /// accessible to the server's user. Shown as one of those words, never
    /// the OS's text (the source keeps it).
    Open(std::io::Error),
    /// Whether the directory holds the reserved sentinel cannot be checked.
    Check(std::io::Error),
    /// The directory holds the reserved sentinel [`SENTINEL`], which marks a
    /// disabled Docker slot: serving it would contradict the marker.
    Reserved,
}

impl fmt::Display for RootError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Open(e) => f.write_str(match e.kind() {
                std::io::ErrorKind::NotFound => "the directory does not exist",
                std::io::ErrorKind::NotADirectory => "the path is not a directory",
                std::io::ErrorKind::PermissionDenied => {
                    "the directory is not accessible to the server's user"
                }
                _ => "the directory cannot be opened",
            }),
            Self::Check(_) => f.write_str(
                "the directory cannot be checked for the reserved file (is it readable by the \
                 server's user?)",
            ),
            Self::Reserved => write!(
                f,
                "the directory contains the reserved file {SENTINEL}; remove it or choose another directory"
            ),
        }
    }
}

impl std::error::Error for RootError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Open(e) | Self::Check(e) => Some(e),
            Self::Reserved => None,
        }
    }
}

/// One directory served to clients: its handle, display name, policy and
/// symlink rule.
///
/// The handle is opened once (`O_PATH | O_DIRECTORY`); it is not a cache:
/// every call resolves beneath it afresh, and a host path renamed or
/// retargeted later changes nothing.
#[derive(Debug)]
pub struct Root {
    name: String,
    fd: OwnedFd,
    /// Only for walkers where no procfs is mounted (checked against the
    /// handle there); never shown to a client.
    host_path: PathBuf,
    policy: Policy,
    symlinks: SymlinkRule,
    mode: ResolveMode,
    /// Whether a genuine procfs lets handles be re-opened in place.
    procfs: bool,
}

impl Root {
    /// Opens the directory at `host_path`.
    ///
    /// # Errors
    /// [`RootError`]: an unopenable path or not a directory, or a directory
    /// holding the reserved sentinel.
    pub fn open(host_path: &Path, options: RootOptions) -> Result<Self, RootError> {
        let fd = rustix::fs::open(
            host_path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| RootError::Open(e.into()))?;
        match rustix::fs::statat(&fd, SENTINEL, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => return Err(RootError::Reserved),
            Err(Errno::NOENT) => {}
            Err(e) => return Err(RootError::Check(e.into())),
        }
        let mode = options.mode.unwrap_or_else(|| ResolveMode::detect(&fd));
        // Opened (and verified) once here, so the handles it keeps are there
        // from the start rather than appearing with the first call.
        let procfs = rustix_linux_procfs::proc_self_fd().is_ok();
        Ok(Self {
            name: options.name,
            fd,
            host_path: host_path.to_owned(),
            policy: options.policy,
            symlinks: options.symlinks,
            mode,
            procfs,
        })
    }

    /// The name clients see (`name:/relative/path`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The symlink rule in force.
    pub fn symlinks(&self) -> SymlinkRule {
        self.symlinks
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

    /// Parses, normalises and policy-checks a client path.
    /// Does not touch the filesystem.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT`, `PATH_OUTSIDE_WORKDIR`, `DENIED_PATH`,
    /// `HIDDEN_PATH_NOT_ALLOWED`.
    pub fn locate(&self, raw_path: &str) -> Result<Location<'_>, FsError> {
        let path = RelPath::parse(raw_path, &self.name)?;
        self.locate_walked(path)
    }

    /// Binds a path produced by a walk (already normal) to this root,
    /// re-checking the policy.
    ///
    /// # Errors
    /// `DENIED_PATH`, `HIDDEN_PATH_NOT_ALLOWED`.
    pub fn locate_walked(&self, path: RelPath) -> Result<Location<'_>, FsError> {
        self.policy.enforce(&self.name, &path)?;
        Ok(Location { root: self, path })
    }

    /// The entry itself, `lstat` semantics: a final symlink is reported as
    /// such, under either rule (under [`SymlinkRule::FollowWithinRoot`] the
    /// links *before* it are followed).
    ///
    /// # Errors
    /// Resolution errors (`PATH_NOT_FOUND`, `SYMLINK_NOT_ALLOWED` for a link
    /// that is not followed, `ACCESS_DENIED`, …).
    pub fn inspect(&self, loc: &Location<'_>) -> Result<Meta, FsError> {
        self.lookup(loc).map(|entry| entry.meta)
    }

    /// [`Self::inspect`], keeping the entry's handle: a regular file found
    /// this way is then read through it ([`Entry::open_file`]), with no
    /// second lookup.
    ///
    /// # Errors
    /// As [`Self::inspect`].
    pub fn lookup<'a>(&self, loc: &'a Location<'a>) -> Result<Entry<'a>, FsError> {
        self.own(loc)?;
        Entry::open(loc, Last::NoFollow)
    }

    /// Opens a regular file for reading; returns it with its metadata.
    /// Under [`SymlinkRule::FollowWithinRoot`] a final link is followed.
    ///
    /// # Errors
    /// `NOT_A_FILE` (directories), `UNSUPPORTED_FILE_TYPE` (FIFO, socket,
    /// device: never opened for reading), `SYMLINK_NOT_ALLOWED`, and the
    /// resolution errors.
    pub fn open_file(&self, loc: &Location<'_>) -> Result<(File, Meta), FsError> {
        self.own(loc)?;
        Entry::open(loc, self.reads())?.open_file()
    }

    /// Opens a directory for listing (crate-private: the descriptor never
    /// leaves the core). Under [`SymlinkRule::FollowWithinRoot`] a final
    /// link is followed.
    ///
    /// # Errors
    /// `NOT_A_DIRECTORY` (files, FIFOs, …), `SYMLINK_NOT_ALLOWED`, and the
    /// resolution errors.
    pub(crate) fn open_dir(&self, loc: &Location<'_>) -> Result<OpenDir, FsError> {
        self.own(loc)?;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match self.beneath().open(&loc.path, flags, self.reads()) {
            Ok(fd) => Ok(OpenDir { fd }),
            Err(Failure::Errno(e @ (Errno::LOOP | Errno::NOTDIR))) => {
                // Either the entry itself or a parent component is not a
                // directory; a look at the entry (as this rule reads it)
                // tells which.
                match Entry::open(loc, self.reads())?.meta.kind {
                    EntryKind::Symlink => Err(symlink_error(loc)),
                    EntryKind::Directory => Err(errno_error(e, loc)),
                    _ => Err(FsError::new(
                        ErrorCode::NotADirectory,
                        format!("{loc} is not a directory."),
                    )),
                }
            }
            Err(f) => Err(failure_error(f, loc)),
        }
    }

    /// Opens the directory `loc` for a path-based walker (see [`WalkRoot`]).
    ///
    /// # Errors
    /// As listing a directory; `INTERNAL_ERROR` when, without procfs, the
    /// host path no longer leads to the directory that was opened.
    pub fn walk_root(&self, loc: &Location<'_>) -> Result<WalkRoot, FsError> {
        let dir = self.open_dir(loc)?.fd;
        if self.procfs {
            let path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
            return Ok(WalkRoot { _dir: dir, path });
        }
        let path = self.host_path.join(loc.path.as_relative());
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

    /// The directory that holds `loc` and the final component's name: the
    /// only seam a write crate gets.
    ///
    /// The parent is resolved beneath the root *without following any
    /// link*, whatever this root's [`SymlinkRule`] (writes never
    /// follow a symlink), and opened `O_DIRECTORY`. The final component is
    /// not looked up: if it is a link, [`ParentDir::meta`] reports it as
    /// [`EntryKind::Symlink`] and the write crate refuses it. The whole path,
    /// final name included, passed the policy in [`Root::locate`].
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` for the root itself (it has no parent);
    /// `SYMLINK_NOT_ALLOWED` when a parent component is a link;
    /// `PATH_NOT_FOUND` when a parent is missing or not a directory; the
    /// other resolution errors.
    pub fn open_parent(&self, loc: &Location<'_>) -> Result<(ParentDir, Name), FsError> {
        self.own(loc)?;
        let Some((name, parents)) = loc.path.components().split_last() else {
            return Err(FsError::invalid(format!(
                "{loc} is the root; it has no parent directory to create or replace it in."
            )));
        };
        let parent = RelPath::from_components(parents.iter().cloned()).ok_or_else(|| {
            FsError::new(ErrorCode::InternalError, format!("{loc} is not normal."))
        })?;
        // The parent itself is classified on an `O_PATH` handle, so a link
        // there is named as such, then re-opened through that handle (`.`):
        // no second lookup by name.
        let never = Beneath { symlinks: SymlinkRule::Never, ..self.beneath() };
        let handle =
            never.open(&parent, path_flags(), Last::NoFollow).map_err(|f| failure_error(f, loc))?;
        match fstat(&handle, loc)?.kind {
            EntryKind::Directory => {}
            EntryKind::Symlink => return Err(symlink_error(loc)),
            _ => return Err(errno_error(Errno::NOTDIR, loc)),
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&handle, ".", flags, Mode::empty())
            .map_err(|e| errno_error(e, loc))?;
        Ok((ParentDir { fd, shown: loc.to_string() }, Name(name.clone())))
    }

    /// Refuses a location made by another root: its path was checked
    /// against that root's policy, not this one's.
    fn own(&self, loc: &Location<'_>) -> Result<(), FsError> {
        if std::ptr::eq(self, loc.root) {
            Ok(())
        } else {
            Err(FsError::new(
                ErrorCode::InternalError,
                format!("{loc} was located in another root."),
            ))
        }
    }

    /// How reads treat a final link under this root's rule.
    fn reads(&self) -> Last {
        match self.symlinks {
            SymlinkRule::Never => Last::NoFollow,
            SymlinkRule::FollowWithinRoot => Last::Follow,
        }
    }

    fn beneath(&self) -> Beneath<'_> {
        Beneath { root: &self.fd, policy: &self.policy, mode: self.mode, symlinks: self.symlinks }
    }

    fn open_beneath(
        &self,
        loc: &Location<'_>,
        flags: OFlags,
        last: Last,
    ) -> Result<OwnedFd, FsError> {
        self.beneath().open(&loc.path, flags, last).map_err(|f| failure_error(f, loc))
    }
}

/// An entry looked up once: its metadata and its `O_PATH` handle, which
/// [`Entry::open_file`] re-opens for reading (see the module docs).
#[derive(Debug)]
pub struct Entry<'a> {
    loc: &'a Location<'a>,
    handle: OwnedFd,
    meta: Meta,
    last: Last,
}

impl<'a> Entry<'a> {
    /// `loc`, opened `O_PATH` beneath its (already owned) root.
    fn open(loc: &'a Location<'a>, last: Last) -> Result<Self, FsError> {
        let handle = loc.root.open_beneath(loc, path_flags(), last)?;
        let meta = fstat(&handle, loc)?;
        Ok(Self { loc, handle, meta, last })
    }

    /// The entry's metadata (of the link itself when it was not followed).
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Opens the entry for reading; returns it with its metadata.
    ///
    /// # Errors
    /// `NOT_A_FILE` (directories), `UNSUPPORTED_FILE_TYPE` (FIFO, socket,
    /// device: never opened for reading), `SYMLINK_NOT_ALLOWED`, and the
    /// resolution errors of the second lookup where there is no procfs.
    pub fn open_file(self) -> Result<(File, Meta), FsError> {
        let loc = self.loc;
        let classify = |meta: &Meta| match meta.kind {
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
        classify(&self.meta)?;
        let fd = if loc.root.procfs {
            reopen_for_reading(&self.handle).map_err(|e| errno_error(e, loc))?
        } else {
            // No usable procfs: a second lookup, checked again below.
            let flags = OFlags::RDONLY
                | OFlags::NONBLOCK
                | OFlags::NOCTTY
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC;
            loc.root.open_beneath(loc, flags, self.last)?
        };
        let meta = fstat(&fd, loc)?;
        classify(&meta)?;
        Ok((File::from(fd), meta))
    }
}

/// A client path that passed syntax and policy checks, bound to the root
/// that checked it. Not yet looked up.
#[derive(Clone, Debug)]
pub struct Location<'r> {
    root: &'r Root,
    path: RelPath,
}

impl<'r> Location<'r> {
    /// The root this location belongs to.
    pub fn root(&self) -> &'r Root {
        self.root
    }

    /// The normalised relative path.
    pub fn path(&self) -> &RelPath {
        &self.path
    }
}

/// `name:/relative/path`, the only form in which paths reach clients.
impl fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:/{}", self.root.name, self.path.as_relative())
    }
}

/// An opened directory, ready to be read. Crate-private: a directory
/// descriptor outside the core would allow `openat(fd, "..")`.
#[derive(Debug)]
pub(crate) struct OpenDir {
    fd: OwnedFd,
}

impl OpenDir {
    /// The directory handle (for `*at` calls relative to it).
    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }
}

/// A directory opened by the resolver, named by a path for walkers that
/// only take paths. Walkers must still confirm every entry through the
/// [`Root`] before reporting or reading it.
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

/// The directory that holds a location, from [`Root::open_parent`]:
/// resolved beneath the root without following any link and opened
/// `O_RDONLY | O_DIRECTORY`.
#[derive(Debug)]
pub struct ParentDir {
    fd: OwnedFd,
    /// The location it was opened for, for messages.
    shown: String,
}

impl ParentDir {
    /// The entry `name` in this directory, not following a link: `None`
    /// when it does not exist.
    ///
    /// # Errors
    /// `ACCESS_DENIED` and the other errno errors, naming the location.
    pub fn meta(&self, name: &Name) -> Result<Option<Meta>, FsError> {
        match rustix::fs::statat(&self.fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(Meta::from_stat(&stat))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(errno_error(e, &self.shown)),
        }
    }
}

/// The directory handle, for a write crate's `*at` calls.
///
/// # Security
/// Use it only with the [`Name`] that came with it from
/// [`Root::open_parent`]: that name is one normal component that passed
/// the policy as part of the whole path. Any other name — `..` above all —
/// bypasses the root, the policy and the symlink rule.
impl AsFd for ParentDir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A location's final component: one normal name (not empty, `.` or `..`,
/// no `/`, NUL or `\`), checked against the policy as part of its whole
/// path. Only [`Root::open_parent`] makes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name(String);

impl Name {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
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

fn fstat(fd: &OwnedFd, loc: &Location<'_>) -> Result<Meta, FsError> {
    rustix::fs::fstat(fd).map(|stat| Meta::from_stat(&stat)).map_err(|e| errno_error(e, loc))
}

/// A resolution failure as an error naming `shown`: the errno mapping, plus
/// the refusals of a followed link.
fn failure_error(f: Failure, shown: &dyn fmt::Display) -> FsError {
    match f {
        Failure::Errno(e) => errno_error(e, shown),
        Failure::LinkEscapes => FsError::new(
            ErrorCode::PathOutsideWorkdir,
            format!("{shown} leads through a symbolic link outside the root."),
        ),
        Failure::AbsoluteLink => FsError::new(
            ErrorCode::SymlinkNotAllowed,
            format!(
                "{shown} leads through a symbolic link with an absolute target; only relative links that stay inside the root are followed."
            ),
        ),
        Failure::UnnameableLink => FsError::new(
            ErrorCode::SymlinkNotAllowed,
            format!(
                "{shown} leads through a symbolic link whose target cannot be named as a path (not UTF-8, or holding a backslash)."
            ),
        ),
        Failure::LinkRefused(Refusal::Denied) => FsError::new(
            ErrorCode::DeniedPath,
            format!(
                "{shown} leads through a symbolic link to a path that matches a deny rule; it is never served."
            ),
        ),
        Failure::LinkRefused(Refusal::Hidden) => FsError::new(
            ErrorCode::HiddenPathNotAllowed,
            format!(
                "{shown} leads through a symbolic link to a hidden path; hidden paths are not served."
            ),
        ),
        Failure::TooManyLinks => FsError::new(
            ErrorCode::SymlinkNotAllowed,
            format!("{shown}: too many levels of symbolic links (more than {MAX_SYMLINK_HOPS})."),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_one(dir: &Path) -> Result<Root, RootError> {
        Root::open(dir, RootOptions::new("w", Policy::new(false, &[]).unwrap()))
    }

    #[test]
    fn sentinel_in_a_root_is_refused_without_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SENTINEL), "").unwrap();
        let e = open_one(dir.path()).unwrap_err();
        assert!(matches!(e, RootError::Reserved), "{e:?}");
        assert!(e.to_string().contains(SENTINEL), "{e}");
        let missing = open_one(&dir.path().join("missing")).unwrap_err();
        assert_eq!(missing.to_string(), "the directory does not exist");
        let file = dir.path().join(SENTINEL);
        assert_eq!(open_one(&file).unwrap_err().to_string(), "the path is not a directory");
        for e in [e, missing] {
            assert!(!e.to_string().contains(&*dir.path().to_string_lossy()), "{e}");
        }
    }

    #[test]
    fn a_location_from_another_root_is_refused() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (ra, rb) = (open_one(a.path()).unwrap(), open_one(b.path()).unwrap());
        let loc = rb.locate("").unwrap();
        assert_eq!(ra.inspect(&loc).unwrap_err().code(), ErrorCode::InternalError);
        assert_eq!(rb.inspect(&loc).unwrap().kind, EntryKind::Directory);
    }
}
