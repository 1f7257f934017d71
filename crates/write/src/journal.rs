//! The intent journal: one JSON file per transaction in
//! `<state_dir>/journal/`, never inside the root.
//!
//! Guarantees:
//! - A journal is replaced atomically: written to a temporary file in the
//!   journal directory, fsynced, renamed over `<key>-<txid>.json`, and the
//!   directory fsynced. A crash leaves the old state or the new one, never
//!   a torn file; a leftover `*.tmp` of ours is garbage.
//! - A finished transaction's journal is removed durably, except a
//!   `committed` one's (see [`JournalDir::remove`]). A transaction of one
//!   change is never `prepared` nor `committed` (see
//!   [`Journal::commits_at_its_switch`]): a one-file patch costs 5 fsyncs
//!   (its journal, its temporary, its directory after the switch, the
//!   journal's removal); one of several files, 10 and more.
//! - The file name starts with the root's identity key (`<dev>.<ino>` of
//!   the root directory, hex), so a writer lists only its own root's
//!   journals and never touches another root's, even their temporaries.
//! - It records everything recovery needs and nothing it has to guess:
//!   the root identity, the writer running it (see [`crate::owner`]),
//!   each change's relative path,
//!   operation, temporary
//!   and backup names, the directories the transaction creates, and (from
//!   `prepared` on) the inode of each temporary file.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serverfs_core::{ErrorCode, FsError};

use crate::owner::WriterId;

/// Format version; a journal of another version is left alone.
pub(crate) const VERSION: u32 = 1;

/// Which root a journal belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RootId {
    /// The host path the root was opened at (for the log only: matching is
    /// by `dev`/`ino`).
    pub(crate) path: String,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

impl RootId {
    /// The prefix of this root's journal file names.
    pub(crate) fn key(&self) -> String {
        format!("{:x}.{:x}", self.dev, self.ino)
    }
}

/// How far a transaction got; each state is written (durably) before the
/// step it allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum State {
    /// Written before the first byte in the root. Nothing has been renamed
    /// onto or unlinked from a target yet: recovery removes what the
    /// transaction created (temporaries, backups, directories).
    Intent,
    /// Every temporary and backup is complete and durable; targets may have
    /// been renamed or unlinked: recovery rolls back by inode.
    Prepared,
    /// Every target holds its new state durably: recovery only removes
    /// leftover backups.
    Committed,
}

/// A change's operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// A new file where none was.
    Create,
    /// New content for an existing file (its mode kept).
    Replace,
    /// An existing file removed.
    Delete,
}

/// One change as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct JournalChange {
    /// Normalised relative path of the target.
    pub(crate) path: String,
    pub(crate) op: Op,
    /// Name of the new content's temporary file beside the target
    /// (Create, Replace).
    pub(crate) temp: Option<String>,
    /// Name of the old file's backup beside the target (Replace, Delete).
    pub(crate) backup: Option<String>,
    /// Inode of the temporary file; set from `prepared` on.
    pub(crate) temp_ino: Option<u64>,
    /// Inode of the file being replaced, as verified (a transaction of
    /// one change: see [`Journal::commits_at_its_switch`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) target_ino: Option<u64>,
}

/// A transaction's journal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Journal {
    pub(crate) version: u32,
    pub(crate) txid: String,
    pub(crate) root: RootId,
    /// The writer running the transaction: its journal is recovered only
    /// once that writer is dead (see [`crate::owner`]). `None`: no live
    /// writer (a journal disowned after a failed rollback, or one of an
    /// older version, whose `owner` token is ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) writer: Option<WriterId>,
    pub(crate) state: State,
    /// Directories this transaction creates, parents first (relative
    /// paths).
    pub(crate) dirs: Vec<String>,
    pub(crate) changes: Vec<JournalChange>,
}

impl Journal {
    /// A transaction of one change keeps no backup and skips `prepared`:
    /// its one rename (or unlink) is its commit point, as atomic as a
    /// switch can be, and nothing would ever need undoing. Its journal
    /// stays `intent` until removed; whether the switch happened is read
    /// from the tree (see `Writer::settle`), and a transaction settled
    /// either way removes the same leftovers.
    pub(crate) fn commits_at_its_switch(&self) -> bool {
        matches!(self.changes.as_slice(), [c] if c.backup.is_none())
    }
}

/// The journal directory of one state dir.
#[derive(Debug)]
pub(crate) struct JournalDir {
    dir: PathBuf,
}

impl JournalDir {
    /// Creates `<state_dir>/journal` (mode 0700) if needed; its path is
    /// kept canonical (it names the directory to other writers).
    pub(crate) fn open(state_dir: &Path) -> Result<Self, FsError> {
        let dir = state_dir.join("journal");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| state_error(&e, "cannot be created"))?;
        let dir = dir.canonicalize().map_err(|e| state_error(&e, "cannot be resolved"))?;
        Ok(Self { dir })
    }

    /// The journal directory of another state dir, as registered.
    pub(crate) fn at(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    fn file(&self, root: &RootId, txid: &str) -> PathBuf {
        self.dir.join(format!("{}-{txid}.json", root.key()))
    }

    /// Writes `journal` durably, replacing its previous state atomically.
    pub(crate) fn write(&self, journal: &Journal) -> Result<(), FsError> {
        let target = self.file(&journal.root, &journal.txid);
        let mut temp = target.clone().into_os_string();
        temp.push(".tmp");
        let temp = PathBuf::from(temp);
        let bytes = serde_json::to_vec_pretty(journal).map_err(|e| {
            FsError::new(ErrorCode::InternalError, "the journal could not be encoded.")
                .with_detail(e.to_string())
        })?;
        let write = || -> std::io::Result<()> {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&temp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            fs::rename(&temp, &target)?;
            File::open(&self.dir)?.sync_all()
        };
        write().map_err(|e| state_error(&e, "cannot be written"))
    }

    /// Removes a finished transaction's journal: durably, except a
    /// `committed` one's. Settling a committed journal only removes
    /// leftover temporaries and backups, by names unique to its
    /// transaction, so one that comes back after a crash is settled again
    /// harmlessly; the next journal written fsyncs the directory anyway.
    /// (An `intent` or `prepared` journal that came back could undo by
    /// inode number, and inode numbers are reused: those removals are
    /// fsynced.)
    pub(crate) fn remove(&self, journal: &Journal) -> Result<(), FsError> {
        let remove = || -> std::io::Result<()> {
            match fs::remove_file(self.file(&journal.root, &journal.txid)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            if journal.state == State::Committed {
                return Ok(());
            }
            File::open(&self.dir)?.sync_all()
        };
        remove().map_err(|e| state_error(&e, "cannot be updated"))
    }

    /// This root's journals, oldest transaction first, and the files of
    /// other roots (left alone). Leftover temporaries of this root are
    /// removed: a journal is only valid once renamed into place.
    pub(crate) fn scan(&self, root: &RootId) -> Result<Scan, FsError> {
        let prefix = format!("{}-", root.key());
        let mut scan = Scan::default();
        let entries = fs::read_dir(&self.dir).map_err(|e| state_error(&e, "cannot be read"))?;
        for entry in entries {
            let entry = entry.map_err(|e| state_error(&e, "cannot be read"))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with(&prefix) {
                if name.ends_with(".json") {
                    scan.foreign.push(name);
                }
            } else if name.ends_with(".json.tmp") {
                fs::remove_file(entry.path()).map_err(|e| state_error(&e, "cannot be cleaned"))?;
            } else if name.ends_with(".json") {
                scan.ours.push(entry.path());
            }
        }
        // txids start with a fixed-width hex timestamp: name order is
        // start order.
        scan.ours.sort();
        scan.foreign.sort();
        Ok(scan)
    }

    /// Reads one journal file.
    pub(crate) fn read(path: &Path) -> std::io::Result<Journal> {
        Ok(serde_json::from_slice(&fs::read(path)?)?)
    }
}

#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub(crate) ours: Vec<PathBuf>,
    pub(crate) foreign: Vec<String>,
}

/// A state-dir failure. The state dir is the operator's, not the client's:
/// its path goes to the detail only.
pub(crate) fn state_error(e: &std::io::Error, what: &str) -> FsError {
    FsError::new(ErrorCode::InternalError, format!("the server's state directory {what}."))
        .with_detail(e.to_string())
}
