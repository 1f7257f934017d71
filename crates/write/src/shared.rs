//! Where every writer of one root meets, whatever its state directory:
//! `<roots>/<dev>.<ino>/`, named by the root directory's identity, below a
//! fixed per-user directory `<roots>` (serverfs-dev: `roots/` in the
//! default state directory, whatever `--state-dir` says; see
//! [`crate::WriterConfig::roots_dir`]). Never inside the root.
//!
//! Guarantees:
//! - **One commit lock per root.** `commit.lock` is `flock`ed through a
//!   write-only descriptor around every switch of every writer of the
//!   root. Its mode is 0200: a command cannot get a descriptor it could
//!   lock — not for reading (no read bit; commands hold no
//!   `CAP_DAC_OVERRIDE`), not for writing (the sandbox lets commands write
//!   only below the root, their `TMPDIR`, `/tmp` and `--command-writable`
//!   paths, and this directory is refused below every one of them at
//!   start), and `flock` refuses `O_PATH` descriptors. So a command cannot
//!   freeze the writers of a root.
//! - **Every journal is found.** `dirs/` names each journal directory that
//!   has served this root (one file per directory, holding its path);
//!   recovery scans all of them, so the journal a killed writer left in
//!   its own state directory is settled by the next transaction or start
//!   of any writer of the root. Entries are written only under the commit
//!   lock; one whose directory is gone is dropped; a directory that is not
//!   this user's, or is open to others, is skipped.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;
use serverfs_core::FsError;
use sha2::{Digest, Sha256};

use crate::journal::{JournalDir, RootId, state_error};

/// Mode of the commit lock: writable by its owner, readable by no one.
const LOCK_MODE: u32 = 0o200;

/// `<roots>/<key>/` of one root.
#[derive(Debug)]
pub(crate) struct SharedDir {
    dir: PathBuf,
}

impl SharedDir {
    /// Creates `<roots>/<key>/dirs` (mode 0700) if needed, and makes sure
    /// the commit lock exists with its mode.
    pub(crate) fn open(roots: &Path, id: &RootId) -> Result<Self, FsError> {
        let dir = roots.join(id.key());
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir.join("dirs"))
            .map_err(|e| state_error(&e, "cannot be created"))?;
        let shared = Self { dir };
        // A lock file left readable (by hand, or by an older version) is
        // closed again before anything is served.
        let lock = shared.open_lock()?;
        lock.set_permissions(std::fs::Permissions::from_mode(LOCK_MODE))
            .map_err(|e| state_error(&e, "cannot be locked"))?;
        Ok(shared)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    fn open_lock(&self) -> Result<File, FsError> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(LOCK_MODE)
            .open(self.dir.join("commit.lock"))
            .map_err(|e| state_error(&e, "cannot be locked"))
    }

    /// Blocks until the root's commit lock is ours; released when the file
    /// drops. A new open file description each time, so two threads of one
    /// process exclude each other too.
    pub(crate) fn lock_commits(&self) -> Result<File, FsError> {
        let file = self.open_lock()?;
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
