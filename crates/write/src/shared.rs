//! Where every writer of one root meets, whatever its state directory:
//! `<user dir>/<dev>.<ino>/`, named by the root directory's identity, in
//! this user's rendezvous directory (see [`crate::rendezvous`]; found from
//! the uid, never from `HOME` or the state directory). Never inside the
//! root.
//!
//! Guarantees:
//! - **One commit lock per root and user.** `commit.lock` is `flock`ed
//!   through a write-only descriptor around every switch of every writer
//!   of the root. Its mode is 0200: a command cannot get a descriptor it
//!   could lock — not for reading (no read bit; commands hold no
//!   `CAP_DAC_OVERRIDE`), not for writing (the sandbox lets commands write
//!   only below the root, their `TMPDIR`, `/tmp` and `--command-writable`
//!   paths, and the rendezvous is refused below every one of them at
//!   start), and `flock` refuses `O_PATH` descriptors. So a command cannot
//!   freeze the writers of a root.
//! - **Never two users' writers on one root.** Each writer holds a shared
//!   `flock` on the root's `present` (mode 0244: its owner may only write
//!   it, so the owner's commands cannot open it; other users may read it)
//!   for as long as it lives, and only then looks for the `present` of
//!   every other user's directory for this root: one that is locked is a
//!   live writer of another user (they cannot share a lock file, see
//!   docs/security.md), and the open is refused (`SERVER_BUSY`). As each
//!   takes its own before it looks, of two users' writers that start
//!   together at least one refuses; never both serve uncoordinated.
//! - **Never on another user's torn tree.** A writer writes
//!   [`SERVING`] and the root's path into `present` once it holds it, and
//!   the last live writer of the user on the root empties it when it is
//!   dropped. A writer of another user that finds `present` unlocked but
//!   naming a path that still leads to this root (its writer was killed:
//!   its journal, in a state directory only its user may read, may hold an
//!   unfinished patch) refuses too, and says how to settle it. A path that
//!   leads elsewhere is a removed root whose inode was reused: ignored.
//! - **Every journal is found.** `dirs/` names each journal directory that
//!   has served this root (one file per directory, holding its path);
//!   recovery scans all of them, so the journal a killed writer left in
//!   its own state directory is settled by the next transaction or start
//!   of any writer of the root. Entries are written only under the commit
//!   lock; one whose directory is gone is dropped; a directory that is not
//!   this user's, or is open to others, is skipped.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, Mode, OFlags};
use serverfs_core::{ErrorCode, FsError};
use sha2::{Digest, Sha256};

use crate::journal::{JournalDir, RootId, state_error};
use crate::rendezvous::{self, ENTER_ONLY, USER_DIR_PREFIX};

/// Mode of the commit lock: writable by its owner, readable by no one.
const LOCK_MODE: u32 = 0o200;

/// Mode of the presence file: its owner may only write it (so the owner's
/// commands cannot open it at all), other users may read it (to test its
/// lock).
const PRESENT_MODE: u32 = 0o244;

/// How often a writer tries to take its presence lock, 10 ms apart: only
/// another user's momentary test holds it exclusively.
const PRESENCE_TRIES: u32 = 100;

/// What `present` holds, before the root's path, while a writer of its
/// user may serve the root (emptied by the last one to stop).
const SERVING: &str = "serving ";

/// `<user dir>/<key>/` of one root.
#[derive(Debug)]
pub(crate) struct SharedDir {
    dir: PathBuf,
    /// `present`, share-locked while this writer lives.
    present: File,
    /// The directory itself, share-locked (when it could be) against
    /// systemd-tmpfiles' ageing.
    _held: Option<File>,
}

impl SharedDir {
    /// Creates this user's directory in `base` and `<key>/dirs` in it if
    /// needed, makes sure the commit lock exists with its mode, takes this
    /// writer's presence, and refuses (`SERVER_BUSY`) when a writer of
    /// another user serves the root.
    pub(crate) fn open(base: &Path, id: &RootId) -> Result<Self, FsError> {
        let uid = rendezvous::euid();
        let user = rendezvous::user_dir(base, uid);
        rendezvous::ensure_user_dir(&user).map_err(|reason| {
            FsError::new(
                ErrorCode::InternalError,
                "the servers' rendezvous directory cannot be used.",
            )
            .with_detail(format!("{}: {reason}", user.display()))
        })?;
        let dir = user.join(id.key());
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir.join("dirs"))
            .map_err(|e| state_error(&e, "cannot be created"))?;
        // Others enter it to find `present`; the umask may have narrowed it.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(ENTER_ONLY))
            .map_err(|e| state_error(&e, "cannot be created"))?;
        // A lock file left readable (by hand, or by an older version) is
        // closed again before anything is served.
        let lock = open_write_only(&dir.join("commit.lock"), LOCK_MODE)?;
        lock.set_permissions(std::fs::Permissions::from_mode(LOCK_MODE))
            .map_err(|e| state_error(&e, "cannot be locked"))?;
        let present = open_write_only(&dir.join("present"), PRESENT_MODE)?;
        present
            .set_permissions(std::fs::Permissions::from_mode(PRESENT_MODE))
            .map_err(|e| state_error(&e, "cannot be locked"))?;
        take_presence(&present, &dir)?;
        // systemd-tmpfiles skips a directory it cannot lock: the presence
        // file is not aged away under a live writer. Best effort: whoever
        // else holds it protects it as well.
        let held = File::open(&dir).ok();
        if let Some(d) = &held {
            let _ = rustix::fs::flock(d, FlockOperation::NonBlockingLockShared);
        }
        refuse_other_users(base, uid, id)?;
        // Only once it may serve: a refused start leaves no mark.
        present
            .set_len(0)
            .and_then(|()| (&present).write_all(format!("{SERVING}{}\n", id.path).as_bytes()))
            .map_err(|e| state_error(&e, "cannot be written"))?;
        Ok(Self { dir, present, _held: held })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// Blocks until the root's commit lock is ours; released when the file
    /// drops. A new open file description each time, so two threads of one
    /// process exclude each other too.
    pub(crate) fn lock_commits(&self) -> Result<File, FsError> {
        let file = open_write_only(&self.dir.join("commit.lock"), LOCK_MODE)?;
        rustix::fs::flock(&file, FlockOperation::LockExclusive)
            .map_err(|e| state_error(&e.into(), "cannot be locked"))?;
        Ok(file)
    }

    /// Records `journals` as a journal directory of this root (under the
    /// commit lock).
    pub(crate) fn register(&self, journals: &JournalDir) -> Result<(), FsError> {
        let path = journals.path().to_string_lossy().into_owned();
        let digest = Sha256::digest(path.as_bytes());
        let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        let entry = self.dir.join("dirs").join(&name);
        if std::fs::read_to_string(&entry).is_ok_and(|p| p == path) {
            return Ok(());
        }
        let temp = self.dir.join("dirs").join(format!("{name}.tmp"));
        let write = || -> std::io::Result<()> {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&temp)?;
            f.write_all(path.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&temp, &entry)?;
            File::open(self.dir.join("dirs"))?.sync_all()
        };
        write().map_err(|e| state_error(&e, "cannot be written"))
    }

    /// The other journal directories of this root (every one but `own`),
    /// and warnings about entries skipped. Under the commit lock.
    pub(crate) fn others(
        &self,
        own: &JournalDir,
    ) -> Result<(Vec<JournalDir>, Vec<String>), FsError> {
        let (mut dirs, mut skipped) = (Vec::new(), Vec::new());
        let entries = std::fs::read_dir(self.dir.join("dirs"))
            .map_err(|e| state_error(&e, "cannot be read"))?;
        // Our own journal dir says who we are.
        let me =
            std::fs::metadata(own.path()).map_err(|e| state_error(&e, "cannot be read"))?.uid();
        for entry in entries {
            let entry = entry.map_err(|e| state_error(&e, "cannot be read"))?;
            if entry.file_name().to_string_lossy().ends_with(".tmp") {
                continue;
            }
            let Ok(path) = std::fs::read_to_string(entry.path()).map(PathBuf::from) else {
                continue;
            };
            if path == own.path() {
                continue;
            }
            match std::fs::symlink_metadata(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    // The state directory was removed, its journals with it.
                    let _ = std::fs::remove_file(entry.path());
                }
                Ok(m) if m.is_dir() && m.uid() == me && m.mode() & 0o077 == 0 => {
                    dirs.push(JournalDir::at(path));
                }
                _ => skipped.push(format!(
                    "journal directory {} is not this user's private directory: not scanned",
                    path.display()
                )),
            }
        }
        Ok((dirs, skipped))
    }
}

impl Drop for SharedDir {
    /// The last live writer of this user on the root (no other holds
    /// `present`) empties it: stopped cleanly. A writer that cannot tell
    /// leaves it, and another user's start says so.
    fn drop(&mut self) {
        if rustix::fs::flock(&self.present, FlockOperation::NonBlockingLockExclusive).is_ok() {
            let _ = self.present.set_len(0);
        }
    }
}

/// Opens (creating with `mode`) a lock file of the rendezvous for writing,
/// never through a link.
fn open_write_only(path: &Path, mode: u32) -> Result<File, FsError> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::open(path, flags, Mode::from_raw_mode(mode))
        .map(File::from)
        .map_err(|e| state_error(&e.into(), "cannot be locked"))
}

/// Share-locks `present` for as long as it stays open. Only another
/// user's test of it holds it exclusively, for an instant: tried
/// [`PRESENCE_TRIES`] times before giving up with a line that says why.
fn take_presence(present: &File, dir: &Path) -> Result<(), FsError> {
    for _ in 0..PRESENCE_TRIES {
        match rustix::fs::flock(present, FlockOperation::NonBlockingLockShared) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::WOULDBLOCK) => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => return Err(state_error(&e.into(), "cannot be locked")),
        }
    }
    Err(FsError::new(
        ErrorCode::ServerBusy,
        format!(
            "a process of another user keeps {} locked, so this server cannot announce itself \
             to the servers of other users on this root; find it with `fuser -v` on that file",
            dir.join("present").display()
        ),
    ))
}

/// Whether another user's `present` (unlocked) says a writer of that user
/// may have left a journal on the root `id`: not empty, and the path it
/// names still leads to this root. A root directory removed and its inode
/// reused by a new directory is not the root that writer served.
fn unsettled(mut present: &File, id: &RootId) -> bool {
    let mut text = String::new();
    if present.read_to_string(&mut text).is_err() {
        return true;
    }
    let Some(path) = text.strip_prefix(SERVING).map(|p| p.trim_end_matches('\n')) else {
        return !text.is_empty();
    };
    std::fs::metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == (id.dev, id.ino))
}

/// Refuses (`SERVER_BUSY`) when a writer of another user lives on the
/// root `id`: its `present` in its user's directory of `base` is locked.
/// A directory of the base named like a user's but owned by someone else
/// is not that user's rendezvous (never created by a writer): skipped.
fn refuse_other_users(base: &Path, uid: u32, id: &RootId) -> Result<(), FsError> {
    let entries = std::fs::read_dir(base)
        .map_err(|e| state_error(&e, "cannot be read"))?
        .filter_map(Result::ok);
    for entry in entries {
        let name = entry.file_name();
        let Some(other) = name
            .to_str()
            .and_then(|n| n.strip_prefix(USER_DIR_PREFIX))
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|&other| other != uid)
        else {
            continue;
        };
        if !std::fs::symlink_metadata(entry.path()).is_ok_and(|m| m.is_dir() && m.uid() == other) {
            continue;
        }
        let path = entry.path().join(id.key()).join("present");
        let cannot_tell = |e: &dyn std::fmt::Display| {
            FsError::new(
                ErrorCode::ServerBusy,
                format!(
                    "cannot tell whether a server of another user (uid {other}) serves this root \
                     ({} cannot be tested: {e}); servers of one root must run as one user",
                    path.display()
                ),
            )
        };
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let present = match rustix::fs::open(&path, flags, Mode::empty()) {
            Ok(present) => File::from(present),
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(cannot_tell(&e)),
        };
        match rustix::fs::flock(&present, FlockOperation::NonBlockingLockExclusive) {
            // Unlocked again when `present` drops.
            Ok(()) if !unsettled(&present, id) => {}
            Ok(()) => {
                return Err(FsError::new(
                    ErrorCode::ServerBusy,
                    format!(
                        "a serverfs-dev of another user (uid {other}) on this root did not stop \
                         cleanly (killed?): its journal, which only that user can read, may hold \
                         an unfinished patch; start and stop a server of uid {other} on this \
                         root once to settle it (or, if its files are known whole, empty {})",
                        path.display()
                    ),
                ));
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(FsError::new(
                    ErrorCode::ServerBusy,
                    format!(
                        "a serverfs-dev of another user (uid {other}) serves this root; servers \
                         of one root must run as one user, as they share one commit lock (whatever \
                         their HOME or state directory): stop that server, or run this one as \
                         uid {other}"
                    ),
                ));
            }
            Err(e) => return Err(cannot_tell(&e)),
        }
    }
    Ok(())
}
