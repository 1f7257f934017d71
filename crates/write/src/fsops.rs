//! The mutating primitives, each one system call (or one short sequence)
//! on a directory handle from [`Root::open_parent`] and a single name in it.
//!
//! Guarantees:
//! - No path string reaches the OS: every call is `*at` relative to a
//!   [`ParentDir`], with either the [`Name`] that came with it (the client's
//!   final component, policy-checked) or a name this crate made itself
//!   ([`temp_name`], [`backup_name`]: fixed prefix, no `/`).
//! - No call follows a symbolic link: opens use `O_NOFOLLOW`, `linkat`
//!   is called without `AT_SYMLINK_FOLLOW`, stats use
//!   `AT_SYMLINK_NOFOLLOW`, and `rename`/`unlink` act on the entry itself.
//! - Every errno becomes an [`FsError`] naming the location as
//!   `name:/relative`, with the OS text only in the log-only detail.
//!
//! [`Root::open_parent`]: serverfs_core::Root::open_parent

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, Stat};
use rustix::io::Errno;
use serverfs_core::{ErrorCode, FsError, Name, ParentDir};

/// Prefix of every temporary file this crate writes beside a target.
pub const TEMP_PREFIX: &str = ".serverfs-tmp-";
/// Prefix of every backup (hard link or copy of a replaced/deleted file).
pub const BACKUP_PREFIX: &str = ".serverfs-bak-";

/// The temporary file of change `n` of transaction `txid`.
pub(crate) fn temp_name(txid: &str, n: usize) -> String {
    format!("{TEMP_PREFIX}{txid}-{n}")
}

/// The backup of change `n` of transaction `txid`.
pub(crate) fn backup_name(txid: &str, n: usize) -> String {
    format!("{BACKUP_PREFIX}{txid}-{n}")
}

/// Whether a client-supplied final name collides with the names reserved
/// for this crate's own files (a client must not create, replace or delete
/// them: recovery relies on them being ours).
pub(crate) fn is_reserved(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX) || name.starts_with(BACKUP_PREFIX)
}

/// What `lstat` says about an entry, as much as the writer needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) kind: Kind,
    pub(crate) ino: u64,
    pub(crate) mode: u32,
    pub(crate) size: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
    Special,
}

impl Entry {
    fn from_stat(st: &Stat) -> Self {
        let kind = match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            _ => Kind::Special,
        };
        Self {
            kind,
            ino: st.st_ino,
            mode: st.st_mode & 0o7777,
            size: u64::try_from(st.st_size).unwrap_or(0),
        }
    }
}

/// `lstat` of `name` in `dir`: `None` when it does not exist.
pub(crate) fn lstat(dir: &ParentDir, name: &str, shown: &str) -> Result<Option<Entry>, FsError> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(Entry::from_stat(&st))),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(errno_error(e, shown)),
    }
}

/// Reads the regular file `name` (never through a link, never blocking on
/// a FIFO), refusing one larger than `cap` bytes. Returns its bytes and
/// what `fstat` said about the opened handle.
pub(crate) fn read_capped(
    dir: &ParentDir,
    name: &str,
    cap: u64,
    shown: &str,
) -> Result<(Vec<u8>, Entry), FsError> {
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd =
        rustix::fs::openat(dir, name, flags, Mode::empty()).map_err(|e| errno_error(e, shown))?;
    let entry = fstat(&fd, shown)?;
    match entry.kind {
        Kind::File => {}
        Kind::Dir => return Err(not_a_file(shown)),
        Kind::Symlink => return Err(symlink_error(shown)),
        Kind::Special => {
            return Err(FsError::new(
                ErrorCode::UnsupportedFileType,
                format!("{shown} is a FIFO, socket or device; only regular files are written."),
            ));
        }
    }
    if entry.size > cap {
        return Err(too_large(shown, cap));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(entry.size).unwrap_or(0));
    // One byte past the cap tells a file that grew since the fstat.
    File::from(fd)
        .take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(&e, shown, "could not be read"))?;
    if bytes.len() as u64 > cap {
        return Err(too_large(shown, cap));
    }
    Ok((bytes, entry))
}

/// Creates `name` exclusively (`O_CREAT | O_EXCL | O_NOFOLLOW`: an existing
/// entry, a dangling link included, is never opened), writes `bytes`,
/// sets `mode` (when given; otherwise the umask applies to 0o666) and
/// fsyncs it. Returns the new file's inode.
pub(crate) fn create_exclusive(
    dir: &ParentDir,
    name: &str,
    bytes: &[u8],
    mode: Option<u32>,
    shown: &str,
) -> Result<u64, FsError> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    // With a mode to set, the file starts private and gets it by fchmod,
    // which (unlike the create mode) the umask does not narrow.
    let create_mode = if mode.is_some() { 0o600 } else { 0o666 };
    let fd = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(create_mode))
        .map_err(|e| errno_error(e, shown))?;
    if let Some(mode) = mode {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode & 0o7777))
            .map_err(|e| errno_error(e, shown))?;
    }
    let ino = fstat(&fd, shown)?.ino;
    let mut file = File::from(fd);
    file.write_all(bytes).map_err(|e| io_error(&e, shown, "could not be written"))?;
    rustix::fs::fsync(&file).map_err(|e| errno_error(e, shown))?;
    Ok(ino)
}

/// Creates the empty temporary file `name` of a streamed upload
/// exclusively (`O_CREAT | O_EXCL | O_NOFOLLOW`), mode 0o666 narrowed by the
/// umask (a replaced file's mode is set at commit). Returns the open file
/// and its inode.
pub(crate) fn create_temp(
    dir: &ParentDir,
    name: &str,
    shown: &str,
) -> Result<(File, u64), FsError> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o666))
        .map_err(|e| errno_error(e, shown))?;
    let ino = fstat(&fd, shown)?.ino;
    Ok((File::from(fd), ino))
}

/// A second name for the file `from`, in the same directory, without
/// following a link (`linkat` with no flags).
pub(crate) fn hard_link(dir: &ParentDir, from: &str, to: &str) -> Result<(), Errno> {
    rustix::fs::linkat(dir, from, dir, to, AtFlags::empty())
}

/// Renames `from` to `to` in one directory, failing with
/// `ALREADY_EXISTS` if `to` exists (`renameat2(RENAME_NOREPLACE)`): there
/// is never a moment where `to` is missing or holds something else.
pub(crate) fn rename_noreplace(
    dir: &ParentDir,
    from: &str,
    to: &str,
    shown: &str,
) -> Result<(), FsError> {
    rustix::fs::renameat_with(dir, from, dir, to, RenameFlags::NOREPLACE).map_err(|e| match e {
        Errno::EXIST => already_exists(shown),
        e => errno_error(e, shown),
    })
}

/// Renames `from` over `to` in one directory: atomic, `to` names either
/// the old file or the new one at every instant.
pub(crate) fn rename_over(
    dir: &ParentDir,
    from: &str,
    to: &str,
    shown: &str,
) -> Result<(), FsError> {
    rustix::fs::renameat(dir, from, dir, to).map_err(|e| errno_error(e, shown))
}

/// Removes the non-directory entry `name`; a missing one is not an error
/// (so cleanup can run twice).
pub(crate) fn unlink_if_present(dir: &ParentDir, name: &str, shown: &str) -> Result<(), FsError> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(errno_error(e, shown)),
    }
}

/// Creates directory `name` (mode 0o777 narrowed by the umask, as
/// `mkdir -p`). Returns false when a directory is already there.
pub(crate) fn make_dir(dir: &ParentDir, name: &Name, shown: &str) -> Result<bool, FsError> {
    match rustix::fs::mkdirat(dir, name.as_str(), Mode::from_raw_mode(0o777)) {
        Ok(()) => Ok(true),
        Err(Errno::EXIST) => match lstat(dir, name.as_str(), shown)? {
            Some(Entry { kind: Kind::Dir, .. }) => Ok(false),
            Some(Entry { kind: Kind::Symlink, .. }) => Err(symlink_error(shown)),
            _ => Err(not_a_dir(shown)),
        },
        Err(e) => Err(errno_error(e, shown)),
    }
}

/// Removes the directory `name` if it is empty; a missing or non-empty
/// one is left alone (another writer may have put something there).
pub(crate) fn remove_dir_if_empty(
    dir: &ParentDir,
    name: &Name,
    shown: &str,
) -> Result<(), FsError> {
    match rustix::fs::unlinkat(dir, name.as_str(), AtFlags::REMOVEDIR) {
        Ok(()) | Err(Errno::NOENT | Errno::NOTEMPTY | Errno::EXIST) => Ok(()),
        Err(e) => Err(errno_error(e, shown)),
    }
}

/// Makes the directory's entries (creations, renames, unlinks) durable.
pub(crate) fn sync_dir(dir: &ParentDir, shown: &str) -> Result<(), FsError> {
    rustix::fs::fsync(dir).map_err(|e| errno_error(e, shown))
}

pub(crate) fn fstat(fd: &OwnedFd, shown: &str) -> Result<Entry, FsError> {
    rustix::fs::fstat(fd.as_fd()).map(|st| Entry::from_stat(&st)).map_err(|e| errno_error(e, shown))
}

pub(crate) fn symlink_error(shown: &str) -> FsError {
    FsError::new(
        ErrorCode::SymlinkNotAllowed,
        format!("{shown} is a symbolic link; ServerFS never writes through a symbolic link."),
    )
}

pub(crate) fn not_a_file(shown: &str) -> FsError {
    FsError::new(ErrorCode::NotAFile, format!("{shown} is a directory, not a file."))
}

pub(crate) fn not_a_dir(shown: &str) -> FsError {
    FsError::new(ErrorCode::NotADirectory, format!("{shown} exists and is not a directory."))
}

pub(crate) fn already_exists(shown: &str) -> FsError {
    FsError::new(ErrorCode::AlreadyExists, format!("{shown} already exists."))
}

pub(crate) fn too_large(shown: &str, cap: u64) -> FsError {
    over_the_cap(
        &format!("{shown} is larger than the files write_file and apply_patch change"),
        cap,
    )
}

/// `WRITE_LIMIT_EXCEEDED`: `what` is over the file cap `cap`; names the
/// setting and the tools that can still do it, so a model has a way on.
pub(crate) fn over_the_cap(what: &str, cap: u64) -> FsError {
    FsError::new(
        ErrorCode::WriteLimitExceeded,
        format!(
            "{what} (at most {cap} bytes, SERVERFS_MAX_FILE_BYTES / --max-file-bytes). Change a \
             larger file with bash (sed, a script), or upload it with file_link (over HTTP)."
        ),
    )
}

/// The workspace's one errno mapping.
pub(crate) use serverfs_core::errno_error;

pub(crate) fn io_error(e: &std::io::Error, shown: &str, what: &str) -> FsError {
    match e.raw_os_error() {
        Some(raw) => errno_error(Errno::from_raw_os_error(raw), shown),
        None => FsError::new(ErrorCode::InternalError, format!("{shown} {what}."))
            .with_detail(e.to_string()),
    }
}
