//! Streamed uploads: [`Writer::begin_upload`] → [`Upload::write`] (any
//! number of chunks) → [`Upload::commit`]; dropping an [`Upload`] aborts it.
//!
//! Guarantees:
//! - **Never buffered whole.** Each chunk goes straight to a temporary file
//!   beside the target (created `O_EXCL | O_NOFOLLOW` in a parent from
//!   [`Root::open_parent`]); the SHA-256 is computed as the bytes pass.
//! - **Own cap.** `max_bytes` is enforced while streaming: the chunk that
//!   would pass it is refused (`READ_LIMIT_EXCEEDED`) and the upload is
//!   aborted at once (temporary and created directories removed). The
//!   writer's per-file cap for patches does not apply: the replaced file is
//!   never read.
//! - **Atomic.** The target is switched by one `rename` after the
//!   temporary is fsynced and the target re-checked under the per-path
//!   lock (the parent is still the directory the upload started in; the
//!   target is absent or a regular file, never a link or directory);
//!   replacing keeps the replaced file's mode bits; the directory is
//!   fsynced. Readers see the old file or the new one, never a part.
//! - **Crash-safe.** An intent journal naming the temporary and the
//!   directories the upload creates is durable before anything is created
//!   in the root, so a kill at any instant leaves the old file intact, and
//!   [`Writer::open`] removes what the upload left (the temporary, created
//!   directories that are still empty). An abort (drop, error, cap) takes
//!   the same path at once.
//! - The per-path lock is held only while the upload starts and while it
//!   commits, not while bytes arrive: a slow upload never holds up a patch
//!   of the same file; whichever commits last wins, each atomically.
//!
//! [`Root::open_parent`]: serverfs_core::Root::open_parent

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write;

use rustix::fs::Mode;
use serverfs_core::{ErrorCode, FsError, Location, Name, ParentDir};
use sha2::{Digest, Sha256};

use crate::fsops::{self, Kind};
use crate::journal::{self, Journal, JournalChange, Op, State};
use crate::tx::{Faults, Stop, WriteReport, Writer, conflict, reserved};

/// An upload in progress; see the module docs. Dropping it without
/// [`Upload::commit`] aborts it: nothing of it remains.
#[derive(Debug)]
pub struct Upload<'w> {
    writer: &'w Writer,
    loc: Location<'w>,
    shown: String,
    rel: String,
    overwrite: bool,
    max_bytes: u64,
    parent: ParentDir,
    name: Name,
    temp: String,
    /// `None` once the upload has ended (committed or aborted).
    file: Option<File>,
    journal: Journal,
    hasher: Sha256,
    size: u64,
}

/// What [`Writer::check_upload`] found at the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UploadTarget {
    /// Nothing is there (missing parents would be created).
    Absent,
    /// A regular file is there (replaced if the upload overwrites).
    File,
}

impl Writer {
    /// Whether an upload to `path` could start now, without writing
    /// anything: the path locates (syntax, policy, not a reserved name),
    /// no parent is a link or a non-directory, and the target is absent or
    /// (with `overwrite`) a regular file.
    ///
    /// # Errors
    /// As [`Writer::begin_upload`] before it writes.
    pub fn check_upload(&self, path: &str, overwrite: bool) -> Result<UploadTarget, FsError> {
        let loc = self.root.locate(path)?;
        let mut dirs = Vec::new();
        self.inspect_target(&loc, overwrite, &mut dirs).map(|op| match op {
            Op::Replace => UploadTarget::File,
            _ => UploadTarget::Absent,
        })
    }

    /// Starts a streamed upload of at most `max_bytes` bytes to `path`:
    /// created (with missing parents) if absent; if a regular file is
    /// there, replaced when `overwrite`, else `ALREADY_EXISTS`.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT`, `PATH_OUTSIDE_WORKDIR`, `DENIED_PATH`,
    /// `SYMLINK_NOT_ALLOWED` (target or a parent), `NOT_A_FILE`,
    /// `NOT_A_DIRECTORY`, `UNSUPPORTED_FILE_TYPE`, `ALREADY_EXISTS`;
    /// `ACCESS_DENIED`, `INTERNAL_ERROR` when creating. Nothing remains on
    /// any error.
    pub fn begin_upload(
        &self,
        path: &str,
        overwrite: bool,
        max_bytes: u64,
    ) -> Result<Upload<'_>, FsError> {
        let loc = self.root.locate(path)?;
        let shown = loc.to_string();
        let rel = loc.path().as_relative();
        let _held = self.locks.lock(lock_keys(&loc));
        let _exclusive = self.exclusive(&mut Faults::none()).map_err(Stop::into_error)?;
        let mut dirs = Vec::new();
        let op = self.inspect_target(&loc, overwrite, &mut dirs)?;
        let txid = self.new_txid();
        let temp = fsops::temp_name(&txid, 0);
        let journal = Journal {
            version: journal::VERSION,
            txid,
            root: self.id.clone(),
            writer: Some(self.writer_id().clone()),
            state: State::Intent,
            dirs,
            changes: vec![JournalChange {
                path: rel.clone(),
                op,
                temp: Some(temp.clone()),
                backup: None,
                temp_ino: None,
                target_ino: None,
            }],
        };
        // The intent is durable before anything is created in the root.
        if let Err(e) = self.journals.write(&journal) {
            let _ = self.journals.remove(&journal);
            return Err(e);
        }
        let created = (|| {
            for dir in &journal.dirs {
                let dloc = self.root.locate(dir)?;
                let (parent, name) = self.root.open_parent(&dloc)?;
                let dshown = dloc.to_string();
                fsops::make_dir(&parent, &name, &dshown)?;
                fsops::sync_dir(&parent, &dshown)?;
            }
            let (parent, name) = self.root.open_parent(&loc)?;
            let (file, _) = fsops::create_temp(&parent, &temp, &shown)?;
            Ok((parent, name, file))
        })();
        match created {
            Ok((parent, name, file)) => Ok(Upload {
                writer: self,
                loc,
                shown,
                rel,
                overwrite,
                max_bytes,
                parent,
                name,
                temp,
                file: Some(file),
                journal,
                hasher: Sha256::new(),
                size: 0,
            }),
            Err(e) => {
                // Whatever was created goes; if even that fails, the
                // journal stays for the next start.
                let _ = self.settle(&journal, &mut Faults::none());
                Err(e)
            }
        }
    }

    /// The checks of an upload's target (see [`Writer::check_upload`]);
    /// appends the missing parents to `dirs`. Returns `Create` or
    /// `Replace`.
    fn inspect_target(
        &self,
        loc: &Location<'_>,
        overwrite: bool,
        dirs: &mut Vec<String>,
    ) -> Result<Op, FsError> {
        let shown = loc.to_string();
        if loc.path().file_name().is_some_and(fsops::is_reserved) {
            return Err(reserved(&shown));
        }
        if self.plan_parents(loc, dirs)? {
            return Ok(Op::Create);
        }
        let (parent, name) = self.root.open_parent(loc)?;
        match fsops::lstat(&parent, name.as_str(), &shown)? {
            None => Ok(Op::Create),
            Some(e) => match e.kind {
                Kind::File if overwrite => Ok(Op::Replace),
                Kind::File => Err(fsops::already_exists(&shown)),
                kind => Err(refuse_kind(kind, &shown)),
            },
        }
    }
}

impl Upload<'_> {
    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.size
    }

    /// Whether no byte has been written yet.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The target's normalised relative path.
    pub fn path(&self) -> &str {
        &self.rel
    }

    /// Appends `bytes` to the temporary file.
    ///
    /// # Errors
    /// `READ_LIMIT_EXCEEDED` when the upload would pass its cap; an I/O
    /// error (`INTERNAL_ERROR`, no space, …); `INTERNAL_ERROR` after the
    /// upload has ended. On any error the upload is aborted: nothing of it
    /// remains.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), FsError> {
        let Some(file) = self.file.as_mut() else {
            return Err(ended(&self.shown));
        };
        let total = self.size.saturating_add(bytes.len() as u64);
        if total > self.max_bytes {
            let e = FsError::new(
                ErrorCode::ReadLimitExceeded,
                format!(
                    "the upload to {} is larger than the {}-byte limit.",
                    self.shown, self.max_bytes
                ),
            );
            return Err(self.fail(e));
        }
        if let Err(e) = file.write_all(bytes) {
            let e = fsops::io_error(&e, &self.shown, "could not be written");
            return Err(self.fail(e));
        }
        self.hasher.update(bytes);
        self.size = total;
        Ok(())
    }

    /// Makes the upload the target's content: fsync, re-check under the
    /// path's lock, atomic rename (keeping a replaced file's mode), fsync
    /// of the directory.
    ///
    /// # Errors
    /// `PATCH_CONFLICT` when the parent directory was moved or replaced
    /// meanwhile; `ALREADY_EXISTS` (without overwrite), `SYMLINK_NOT_ALLOWED`,
    /// `NOT_A_FILE`, `UNSUPPORTED_FILE_TYPE` when the target became one
    /// meanwhile; I/O errors. On any error the upload is aborted and the
    /// target is as it was.
    pub fn commit(mut self) -> Result<WriteReport, FsError> {
        match self.switch() {
            Ok(created) => {
                let mut journal = self.journal.clone();
                // Past the commit point: cleanup only. If the journal
                // cannot advance, settling it as an intent removes nothing
                // but the (already renamed) temporary name.
                let _ = self.writer.advance(&mut journal, State::Committed);
                let _ = self.writer.settle(&journal, &mut Faults::none());
                self.file = None;
                let digest = std::mem::take(&mut self.hasher).finalize();
                let mut sha256 = String::with_capacity(64);
                for b in digest.iter() {
                    let _ = write!(sha256, "{b:02x}");
                }
                Ok(WriteReport { path: self.rel.clone(), size: self.size, sha256, created })
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Everything up to and including the rename. Returns whether the
    /// target was created.
    fn switch(&mut self) -> Result<bool, FsError> {
        let file = self.file.as_ref().ok_or_else(|| ended(&self.shown))?;
        rustix::fs::fsync(file).map_err(|e| fsops::errno_error(e, &self.shown))?;
        let writer = self.writer;
        let _held = writer.locks.lock(lock_keys(&self.loc));
        let _exclusive = writer.exclusive(&mut Faults::none()).map_err(Stop::into_error)?;
        // Still the directory the upload started in, reached without links.
        let (now, _) = writer.root.open_parent(&self.loc)?;
        let same = |a: &ParentDir, b: &ParentDir| -> Result<bool, FsError> {
            let (a, b) = (
                rustix::fs::fstat(a).map_err(|e| fsops::errno_error(e, &self.shown))?,
                rustix::fs::fstat(b).map_err(|e| fsops::errno_error(e, &self.shown))?,
            );
            Ok((a.st_dev, a.st_ino) == (b.st_dev, b.st_ino))
        };
        if !same(&now, &self.parent)? {
            return Err(conflict(&self.shown));
        }
        let target = self.name.as_str();
        let created = match fsops::lstat(&self.parent, target, &self.shown)? {
            None => true,
            Some(e) if e.kind == Kind::File && self.overwrite => {
                rustix::fs::fchmod(file, Mode::from_raw_mode(e.mode))
                    .map_err(|e| fsops::errno_error(e, &self.shown))?;
                false
            }
            Some(e) if e.kind == Kind::File => return Err(fsops::already_exists(&self.shown)),
            Some(e) => return Err(refuse_kind(e.kind, &self.shown)),
        };
        if self.overwrite {
            fsops::rename_over(&self.parent, &self.temp, target, &self.shown)?;
        } else {
            fsops::rename_noreplace(&self.parent, &self.temp, target, &self.shown)?;
        }
        // Past the commit point: the new file is in place and there is no
        // backup to go back to, so a failed directory fsync is not turned
        // into a failure of an upload that has happened.
        let _ = fsops::sync_dir(&self.parent, &self.shown);
        Ok(created)
    }

    /// Aborts (see [`Upload::abort`]) and hands `e` back.
    fn fail(&mut self, e: FsError) -> FsError {
        self.abort();
        e
    }

    /// Removes the temporary file and the directories this upload created
    /// (when still empty), then the journal; a second call does nothing.
    /// If the cleanup fails, the journal stays and the next start
    /// finishes it.
    fn abort(&mut self) {
        if self.file.take().is_some() {
            let _held = self.writer.locks.lock(lock_keys(&self.loc));
            let _exclusive = self.writer.exclusive(&mut Faults::none());
            // Through the directory the temporary was created in, wherever
            // it is now: moved out of the root, the settle below (which
            // resolves the journal's path) would not find it.
            let _ = fsops::unlink_if_present(&self.parent, &self.temp, &self.shown);
            let _ = self.writer.settle(&self.journal, &mut Faults::none());
        }
    }
}

impl Drop for Upload<'_> {
    fn drop(&mut self) {
        self.abort();
    }
}

/// The path's lock and its parents' (as `write_file` with parents).
fn lock_keys(loc: &Location<'_>) -> BTreeSet<String> {
    let components = loc.path().components();
    (1..=components.len()).map(|i| components[..i].join("/")).collect()
}

fn refuse_kind(kind: Kind, shown: &str) -> FsError {
    match kind {
        Kind::Symlink => fsops::symlink_error(shown),
        Kind::Dir => fsops::not_a_file(shown),
        _ => FsError::new(
            ErrorCode::UnsupportedFileType,
            format!("{shown} is a FIFO, socket or device; only regular files are written."),
        ),
    }
}

fn ended(shown: &str) -> FsError {
    FsError::new(ErrorCode::InternalError, format!("the upload to {shown} has already ended."))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use serverfs_core::{ErrorCode, Policy, Root, RootOptions};

    use crate::{BACKUP_PREFIX, Outcome, TEMP_PREFIX, Writer, WriterConfig};

    use super::UploadTarget;

    struct Setup {
        tmp: tempfile::TempDir,
    }

    impl Setup {
        fn new() -> Self {
            let tmp = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(tmp.path().join("root/d")).unwrap();
            std::fs::create_dir_all(tmp.path().join("outside")).unwrap();
            let s = Self { tmp };
            std::fs::write(s.root().join("old.bin"), b"old contents\n").unwrap();
            std::fs::set_permissions(
                s.root().join("old.bin"),
                std::fs::Permissions::from_mode(0o750),
            )
            .unwrap();
            s
        }
        fn root(&self) -> PathBuf {
            self.tmp.path().join("root")
        }
        /// A writer whose patch cap (16 bytes) is far below the uploads.
        fn writer(&self) -> (Writer, crate::RecoveryReport) {
            let policy = Policy::new(true, &[]).unwrap();
            let root = Arc::new(Root::open(&self.root(), RootOptions::new("w", policy)).unwrap());
            let config =
                WriterConfig::new(self.root(), self.tmp.path().join("state")).max_file_bytes(16);
            Writer::open(root, config).unwrap()
        }
        fn read(&self, rel: &str) -> Vec<u8> {
            std::fs::read(self.root().join(rel)).unwrap()
        }
        /// Temporaries, backups and journals anywhere.
        fn leftovers(&self) -> Vec<String> {
            fn walk(dir: &Path, out: &mut Vec<String>) {
                for e in std::fs::read_dir(dir).unwrap() {
                    let e = e.unwrap();
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with(TEMP_PREFIX)
                        || name.starts_with(BACKUP_PREFIX)
                        || name.ends_with(".json")
                    {
                        out.push(name);
                    }
                    if e.file_type().unwrap().is_dir() {
                        walk(&e.path(), out);
                    }
                }
            }
            let mut out = Vec::new();
            walk(self.tmp.path(), &mut out);
            out
        }
    }

    fn chunks() -> Vec<Vec<u8>> {
        (0..8u8).map(|i| vec![i; 10_000]).collect()
    }

    #[test]
    fn a_streamed_upload_creates_parents_and_reports_size_and_sha256() {
        let s = Setup::new();
        let (w, _) = s.writer();
        let mut up = w.begin_upload("new/deep/big.bin", false, 1 << 20).unwrap();
        // The temporary is beside the target while bytes arrive.
        assert!(s.leftovers().iter().any(|n| n.starts_with(TEMP_PREFIX)));
        let mut all = Vec::new();
        for c in chunks() {
            up.write(&c).unwrap();
            all.extend_from_slice(&c);
        }
        assert_eq!(up.len(), 80_000);
        let r = up.commit().unwrap();
        assert_eq!((r.path.as_str(), r.size, r.created), ("new/deep/big.bin", 80_000, true));
        use sha2::Digest;
        let expected: String =
            sha2::Sha256::digest(&all).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(r.sha256, expected);
        assert_eq!(s.read("new/deep/big.bin"), all);
        assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());
    }

    #[test]
    fn overwrite_replaces_a_file_over_the_patch_cap_and_keeps_its_mode() {
        let s = Setup::new();
        let (w, _) = s.writer();
        assert_eq!(w.check_upload("old.bin", true).unwrap(), UploadTarget::File);
        let e = w.begin_upload("old.bin", false, 1 << 20).unwrap_err();
        assert_eq!(e.code(), ErrorCode::AlreadyExists);
        let mut up = w.begin_upload("old.bin", true, 1 << 20).unwrap();
        for c in chunks() {
            up.write(&c).unwrap();
        }
        let r = up.commit().unwrap();
        assert!(!r.created);
        assert_eq!(s.read("old.bin").len(), 80_000);
        let mode = std::fs::metadata(s.root().join("old.bin")).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o750);
        assert!(s.leftovers().is_empty());
    }

    #[test]
    fn over_the_cap_the_upload_is_aborted_and_nothing_remains() {
        let s = Setup::new();
        let (w, _) = s.writer();
        let mut up = w.begin_upload("old.bin", true, 25_000).unwrap();
        up.write(&[1; 20_000]).unwrap();
        let e = up.write(&[1; 10_000]).unwrap_err();
        assert_eq!(e.code(), ErrorCode::ReadLimitExceeded);
        assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());
        assert_eq!(up.write(b"x").unwrap_err().code(), ErrorCode::InternalError);
        assert!(up.commit().is_err());
        assert_eq!(s.read("old.bin"), b"old contents\n");
        // Created parents go too.
        let mut up = w.begin_upload("n1/n2/f", false, 4).unwrap();
        assert!(up.write(b"12345").is_err());
        assert!(!s.root().join("n1").exists());
    }

    #[test]
    fn dropping_an_upload_aborts_it() {
        let s = Setup::new();
        let (w, _) = s.writer();
        let mut up = w.begin_upload("n1/n2/f", true, 1 << 20).unwrap();
        up.write(b"partial").unwrap();
        assert!(s.root().join("n1/n2").is_dir());
        drop(up);
        assert!(!s.root().join("n1").exists());
        assert!(s.leftovers().is_empty());
    }

    #[test]
    fn a_crash_mid_upload_is_swept_at_the_next_start_and_the_old_file_kept() {
        let s = Setup::new();
        let (w, _) = s.writer();
        let mut up = w.begin_upload("old.bin", true, 1 << 20).unwrap();
        up.write(&[7; 50_000]).unwrap();
        let mut up2 = w.begin_upload("n1/f", true, 1 << 20).unwrap();
        up2.write(b"half").unwrap();
        // A kill: no destructor, no cleanup.
        std::mem::forget(up);
        std::mem::forget(up2);
        drop(w);
        assert!(!s.leftovers().is_empty());
        let (_w, report) = s.writer();
        assert_eq!(report.recovered.len(), 2);
        assert!(report.recovered.iter().all(|r| r.outcome == Outcome::RolledBack));
        assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());
        assert_eq!(s.read("old.bin"), b"old contents\n");
        assert!(!s.root().join("n1").exists());
    }

    #[test]
    fn links_are_never_written_through() {
        let s = Setup::new();
        symlink(s.tmp.path().join("outside"), s.root().join("out")).unwrap();
        symlink("old.bin", s.root().join("alias")).unwrap();
        let (w, _) = s.writer();
        for (path, code) in [
            ("out/x", ErrorCode::SymlinkNotAllowed),
            ("out/new/x", ErrorCode::SymlinkNotAllowed),
            ("alias", ErrorCode::SymlinkNotAllowed),
            ("d", ErrorCode::NotAFile),
            ("../x", ErrorCode::PathOutsideWorkdir),
            (".serverfs-tmp-1", ErrorCode::InvalidArgument),
        ] {
            let e = w.begin_upload(path, true, 10).unwrap_err();
            assert_eq!(e.code(), code, "{path}: {e}");
            assert_eq!(w.check_upload(path, true).unwrap_err().code(), code, "{path}");
        }
        assert_eq!(std::fs::read_dir(s.tmp.path().join("outside")).unwrap().count(), 0);
        assert!(s.leftovers().is_empty());
        // A target replaced by a link while the bytes arrive: refused at
        // commit, the link untouched.
        let mut up = w.begin_upload("late", true, 10).unwrap();
        up.write(b"x").unwrap();
        symlink("old.bin", s.root().join("late")).unwrap();
        assert_eq!(up.commit().unwrap_err().code(), ErrorCode::SymlinkNotAllowed);
        assert!(std::fs::symlink_metadata(s.root().join("late")).unwrap().is_symlink());
        assert!(s.leftovers().is_empty());
    }

    /// The upload's directory moved out of the root while the bytes
    /// arrive: refused at commit, and its temporary does not stay outside.
    #[test]
    fn an_upload_dir_moved_out_leaves_nothing_outside_and_the_next_call_works() {
        let s = Setup::new();
        let (w, _) = s.writer();
        let mut up = w.begin_upload("d/big.bin", false, 1 << 20).unwrap();
        up.write(&[7u8; 4096]).unwrap();
        let moved = s.tmp.path().join("outside/d");
        std::fs::rename(s.root().join("d"), &moved).unwrap();
        up.write(&[7u8; 4096]).unwrap();
        let e = up.commit().unwrap_err();
        assert!(matches!(e.code(), ErrorCode::PatchConflict | ErrorCode::PathNotFound), "{e}");
        assert_eq!(std::fs::read_dir(&moved).unwrap().count(), 0, "temporary left outside");
        assert!(s.leftovers().is_empty());
        let mut up = w.begin_upload("d/big.bin", false, 1 << 20).unwrap();
        up.write(b"x").unwrap();
        up.commit().unwrap();
        assert_eq!(std::fs::read(s.root().join("d/big.bin")).unwrap(), b"x");
    }
}
