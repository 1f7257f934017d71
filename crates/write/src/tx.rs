//! [`Writer`]: crash-safe multi-file transactions over one [`Root`].
//!
//! Guarantees:
//! - **Verified before written.** Every change is located (syntax,
//!   policy), its parents and target are inspected without following a
//!   link, and the current bytes are compared with the expected ones —
//!   all under the per-path locks — before anything is written. Any
//!   refusal there leaves the root and the state dir untouched.
//! - **Wholly before or wholly after.** The journal (see [`crate::journal`])
//!   is durable before the first byte is written in the root. New contents
//!   go to temporary files beside their targets and old files get a backup
//!   name (a hard link, or a copy where links are refused); only then are
//!   targets renamed/unlinked, each after re-checking that it still is the
//!   file that was verified. A live failure and a crash (recovered by
//!   [`Writer::open`]) are undone by the same code, [`Writer::settle`],
//!   driven by the journal alone, so the tree ends wholly before or wholly
//!   after the transaction; settling twice is harmless.
//! - **Never through a link.** Parents come from [`Root::open_parent`]
//!   (which refuses a linked parent); a final component that is a link is
//!   refused with `SYMLINK_NOT_ALLOWED`; missing parents are created one at
//!   a time through `locate` + `open_parent`, so each passes the policy
//!   and the no-link rule.
//! - **Serialised per path.** Concurrent transactions on one path run one
//!   after the other (see [`crate::locks`]) and each re-verifies under its
//!   locks: of two replacements expecting the same bytes, one wins and the
//!   other gets `PATCH_CONFLICT`.
//! - **Any number of writers on one root, whatever their state dirs.**
//!   Writers in other processes are serialised with this one by the
//!   root's commit lock (see [`crate::shared`]: found from the root's
//!   identity and the uid, not from the state dir or `HOME`, and out of
//!   every command's reach; a writer of another user on the root is
//!   refused at open),
//!   held from the re-verification to the end of each switch (never while
//!   a patch is planned or an upload streams). Each writer stamps its
//!   journals with its identity (see [`crate::owner`]); under the commit
//!   lock, every transaction first settles the journals of this root whose
//!   writer is dead, in every state dir that has served the root, never
//!   one whose writer lives. No lock decides whether a writer lives, so
//!   nothing a command holds keeps a torn transaction unsettled.
//! - **No poisoned writer.** A rollback that fails is disowned (its
//!   journal loses its owner) and settled by the next transaction of any
//!   writer, like a crash; one that cannot be settled (e.g. a parent
//!   swapped for a link) is kept, reported as a warning, and retried
//!   later — it never blocks other transactions or a restart.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serverfs_core::{ErrorCode, FsError, Location, Name, ParentDir, Root};
use sha2::{Digest, Sha256};

use crate::fsops::{self, Entry, Kind};
use crate::journal::{self, Journal, JournalChange, JournalDir, Op, RootId, State};
use crate::locks::LockTable;
use crate::owner::{self, Liveness, Registered, WriterId};
use crate::shared::SharedDir;
use crate::syntax::KeptParses;

/// Default cap on the size of a file that is replaced or deleted (its
/// current bytes are read to be re-verified): 256 KiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 256 * 1024;

/// One change of a transaction. Paths are client paths, relative to the
/// root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A new file. Fails with `ALREADY_EXISTS` if anything is at `path`
    /// (`SYMLINK_NOT_ALLOWED` if that is a link). `mode`: permission bits
    /// to set (`None`: 0o666 narrowed by the umask). `create_parents`:
    /// create missing directories inside the root.
    Create { path: String, bytes: Vec<u8>, mode: Option<u32>, create_parents: bool },
    /// New content for the regular file at `path`, which must still hold
    /// exactly `expected` (else `PATCH_CONFLICT`). Its mode bits are kept.
    Replace { path: String, expected: Vec<u8>, bytes: Vec<u8> },
    /// Removes the regular file at `path` (a directory: `NOT_A_FILE`); with
    /// `expected`, only if it still holds exactly those bytes.
    Delete { path: String, expected: Option<Vec<u8>> },
}

/// What a transaction did to one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// Normalised relative path (`a/b.txt`).
    pub path: String,
    pub op: Op,
    /// Size of the new content (Create, Replace).
    pub size: Option<u64>,
    /// SHA-256 of the new content, lowercase hex (Create, Replace).
    pub sha256: Option<String>,
}

/// The result of a committed transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitReport {
    pub txid: String,
    /// In the order the changes were given.
    pub changes: Vec<Applied>,
    /// Cleanup that failed after the commit point (the changes are in
    /// place; leftover backups are removed at the next start). For the log.
    pub warnings: Vec<String>,
}

/// The result of [`Writer::write_file`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteReport {
    pub path: String,
    pub size: u64,
    pub sha256: String,
    /// True if the file did not exist before.
    pub created: bool,
}

/// What [`Writer::open`] found and repaired. For the log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub recovered: Vec<Recovered>,
    /// Journals that could not be settled now (e.g. a parent swapped for
    /// a link): kept, and retried by every later transaction.
    pub kept: Vec<String>,
    /// Journal files of other roots sharing the state dir: left alone.
    pub foreign: Vec<String>,
}

/// One interrupted transaction and what recovery did with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    pub txid: String,
    pub outcome: Outcome,
    /// Its target paths (relative).
    pub paths: Vec<String>,
}

/// How an interrupted transaction was settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It had not reached its commit point: every target is as before.
    RolledBack,
    /// It had: every target is as after; leftovers removed.
    Completed,
}

/// How a [`Writer`] is set up.
#[derive(Clone, Debug)]
pub struct WriterConfig {
    root_path: PathBuf,
    state_dir: PathBuf,
    rendezvous: Option<PathBuf>,
    max_file_bytes: u64,
}

impl WriterConfig {
    /// `root_path`: the host path the root was opened at (recorded in
    /// journals for the operator; journals are matched by the root
    /// directory's device and inode). `state_dir`: where journals live;
    /// must be outside the root.
    pub fn new(root_path: impl Into<PathBuf>, state_dir: impl Into<PathBuf>) -> Self {
        Self {
            root_path: root_path.into(),
            state_dir: state_dir.into(),
            rendezvous: None,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
        }
    }

    /// The machine-wide directory the writers of one root meet in whoever
    /// runs them (each user's directory in it holds the root's commit lock
    /// and the list of its journal dirs, see [`crate::rendezvous`] and
    /// [`crate::shared`]); serverfs-dev gives [`crate::RENDEZVOUS_BASE`].
    /// Default: the state dir, which coordinates only the writers that
    /// share it.
    #[must_use]
    pub fn rendezvous(mut self, base: impl Into<PathBuf>) -> Self {
        self.rendezvous = Some(base.into());
        self
    }

    /// Cap on a replaced or deleted file's current size, and on a patched
    /// file before and after (`WRITE_LIMIT_EXCEEDED` beyond). Default [`DEFAULT_MAX_FILE_BYTES`].
    #[must_use]
    pub fn max_file_bytes(mut self, bytes: u64) -> Self {
        self.max_file_bytes = bytes;
        self
    }
}

/// The only mutator of a root. Share it (`Arc<Writer>`) between calls: its
/// lock table is what serialises mutations of one path.
#[derive(Debug)]
pub struct Writer {
    pub(crate) root: Arc<Root>,
    pub(crate) id: RootId,
    pub(crate) journals: JournalDir,
    /// The root's commit lock and its other journal dirs.
    shared: SharedDir,
    pub(crate) locks: LockTable,
    pub(crate) max_file_bytes: u64,
    next_txid: AtomicU64,
    /// This writer's identity, alive while it is.
    owner: Registered,
    /// The syntax check's parses of the files written last.
    pub(crate) kept_parses: KeptParses,
}

/// A change normalised: what must be there, and what to put there.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub(crate) path: String,
    expect: Expect,
    /// New content; `None` deletes.
    content: Option<Vec<u8>>,
    mode: Option<u32>,
    create_parents: bool,
}

#[derive(Clone, Debug)]
enum Expect {
    /// Nothing at the path.
    Absent,
    /// A regular file; with these bytes if given.
    File(Option<Vec<u8>>),
    /// Nothing, or a regular file with any content (`write_file`
    /// overwrite).
    Any,
}

impl Request {
    /// `write_file`'s change: create (with parents), or with `overwrite`
    /// replace whatever regular file is there.
    pub(crate) fn put(path: &str, bytes: Vec<u8>, overwrite: bool) -> Self {
        Self {
            path: path.to_owned(),
            expect: if overwrite { Expect::Any } else { Expect::Absent },
            content: Some(bytes),
            mode: None,
            create_parents: true,
        }
    }
}

impl From<Change> for Request {
    fn from(change: Change) -> Self {
        match change {
            Change::Create { path, bytes, mode, create_parents } => {
                Self { path, expect: Expect::Absent, content: Some(bytes), mode, create_parents }
            }
            Change::Replace { path, expected, bytes } => Self {
                path,
                expect: Expect::File(Some(expected)),
                content: Some(bytes),
                mode: None,
                create_parents: false,
            },
            Change::Delete { path, expected } => Self {
                path,
                expect: Expect::File(expected),
                content: None,
                mode: None,
                create_parents: false,
            },
        }
    }
}

/// One planned change.
struct Step<'r> {
    loc: Location<'r>,
    shown: String,
    rel: String,
    op: Op,
    content: Option<Vec<u8>>,
    /// Mode for the temporary file: given, or the replaced file's.
    mode: Option<u32>,
    /// The target as verified: inode and current bytes (Replace, Delete).
    target: Option<(Entry, Vec<u8>)>,
    /// Opened at planning, or after its parents were created.
    handle: Option<(ParentDir, Name)>,
}

impl Step<'_> {
    fn handle(&self) -> Result<&(ParentDir, Name), FsError> {
        self.handle.as_ref().ok_or_else(|| {
            FsError::new(ErrorCode::InternalError, format!("{} has no parent handle.", self.shown))
        })
    }
}

/// Why a transaction step stopped: a failure (rolled back), or — only
/// under test — a simulated crash (nothing cleaned up).
#[derive(Debug)]
pub(crate) enum Stop {
    Fail(FsError),
    Crash,
}

impl From<FsError> for Stop {
    fn from(e: FsError) -> Self {
        Self::Fail(e)
    }
}

impl Stop {
    pub(crate) fn into_error(self) -> FsError {
        match self {
            Self::Fail(e) => e,
            // Unreachable in production: no `Faults` there crashes.
            Self::Crash => FsError::new(ErrorCode::InternalError, "simulated crash."),
        }
    }
}

/// Test seam: production passes [`Faults::none`]. A crash point is every
/// place where a kill would leave a distinct state; `crash_at: Some(k)`
/// returns [`Stop::Crash`] at the k-th (1-based) without any cleanup, as
/// a kill would. `copy_backups` takes the no-hard-link fallback.
#[derive(Default)]
pub(crate) struct Faults {
    pub(crate) crash_at: Option<usize>,
    pub(crate) passed: usize,
    pub(crate) copy_backups: bool,
    /// Runs once the `prepared` journal is durable, before the first
    /// target is switched: a test changes a target there, as a concurrent
    /// process could.
    #[cfg(test)]
    pub(crate) on_prepared: Option<Box<dyn FnMut()>>,
}

impl Faults {
    pub(crate) fn none() -> Self {
        Self::default()
    }

    fn point(&mut self) -> Result<(), Stop> {
        self.passed += 1;
        if self.crash_at == Some(self.passed) { Err(Stop::Crash) } else { Ok(()) }
    }
}

impl Writer {
    /// Opens the writer for `root` and settles every interrupted
    /// transaction of this root found in the state dir (rolled back if it
    /// had not reached its commit point, completed if it had) before any
    /// new one can start.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` if the state dir is inside the root;
    /// `SERVER_BUSY` if a writer of another user serves the root (see
    /// [`crate::shared`]);
    /// `INTERNAL_ERROR` if the state dir or the rendezvous cannot be used,
    /// or an interrupted transaction's journal cannot be read (it is kept;
    /// the tree must be checked before serving writes). Blocks while
    /// another writer of the root commits.
    pub fn open(root: Arc<Root>, config: WriterConfig) -> Result<(Self, RecoveryReport), FsError> {
        Self::open_with(root, config, &mut Faults::none()).map_err(Stop::into_error)
    }

    pub(crate) fn open_with(
        root: Arc<Root>,
        config: WriterConfig,
        faults: &mut Faults,
    ) -> Result<(Self, RecoveryReport), Stop> {
        let id = root_id(&root, &config.root_path)?;
        let journals = JournalDir::open(&config.state_dir)?;
        refuse_state_dir_inside(journals.path(), &id)?;
        let base = config.rendezvous.unwrap_or(config.state_dir);
        let shared = SharedDir::open(&base, &id)?;
        refuse_state_dir_inside(shared.path(), &id)?;
        let commit_lock = shared.lock_commits()?;
        shared.register(&journals)?;
        let owner = Registered::new()?;
        let writer = Self {
            root,
            id,
            journals,
            shared,
            locks: LockTable::default(),
            max_file_bytes: config.max_file_bytes,
            next_txid: AtomicU64::new(0),
            owner,
            kept_parses: KeptParses::default(),
        };
        let report = writer.recover(faults, true)?;
        drop(commit_lock);
        Ok((writer, report))
    }

    /// This writer's identity, stamped on its journals.
    pub(crate) fn writer_id(&self) -> &WriterId {
        self.owner.id()
    }

    /// Takes the commit lock shared by every writer of this root (blocking
    /// until it is free), then settles what dead writers left. Returns the
    /// lock (released when dropped) and the warnings of journals that
    /// could not be settled (kept for later).
    pub(crate) fn exclusive(&self, faults: &mut Faults) -> Result<Exclusive, Stop> {
        let file = self.shared.lock_commits()?;
        let report = self.recover(faults, false)?;
        let mut warnings = report.kept;
        warnings.extend(report.recovered.iter().map(|r| {
            format!(
                "transaction {} of a writer that died was settled ({:?}): {}",
                r.txid,
                r.outcome,
                r.paths.join(", ")
            )
        }));
        Ok(Exclusive { _file: file, warnings })
    }

    /// The root this writer mutates.
    pub fn root(&self) -> &Arc<Root> {
        &self.root
    }

    /// Applies `changes` as one transaction: all of them or none.
    ///
    /// A path may appear once. The order is kept for the report; a Move is
    /// `Delete { src, expected }` + `Create { dst, mode: src's mode }`.
    ///
    /// # Errors
    /// Verification: `INVALID_ARGUMENT`, `PATH_OUTSIDE_WORKDIR`,
    /// `DENIED_PATH`, `HIDDEN_PATH_NOT_ALLOWED`, `SYMLINK_NOT_ALLOWED`,
    /// `PATH_NOT_FOUND`, `NOT_A_DIRECTORY`, `NOT_A_FILE`,
    /// `UNSUPPORTED_FILE_TYPE`, `ALREADY_EXISTS`, `PATCH_CONFLICT`,
    /// `WRITE_LIMIT_EXCEEDED`; `ACCESS_DENIED` and `INTERNAL_ERROR` while
    /// writing. Whatever the error, nothing of the transaction remains —
    /// unless undoing it fails too (an I/O error mid-rollback): then its
    /// journal is kept, this writer refuses every further transaction
    /// (`INTERNAL_ERROR`), and the next [`Writer::open`] finishes the
    /// rollback.
    pub fn commit(&self, changes: Vec<Change>) -> Result<CommitReport, FsError> {
        let requests = changes.into_iter().map(Request::from).collect();
        self.commit_with(requests, &mut Faults::none()).map_err(Stop::into_error)
    }

    /// Writes one file atomically: created (with missing parents) if
    /// absent; if present and `overwrite`, replaced whatever it holds, its
    /// mode kept; if present and not `overwrite`, `ALREADY_EXISTS`.
    ///
    /// # Errors
    /// As [`Writer::commit`].
    pub fn write_file(
        &self,
        path: &str,
        bytes: Vec<u8>,
        overwrite: bool,
    ) -> Result<WriteReport, FsError> {
        let request = Request::put(path, bytes, overwrite);
        let report =
            self.commit_with(vec![request], &mut Faults::none()).map_err(Stop::into_error)?;
        let applied = report.changes.into_iter().next().ok_or_else(|| {
            FsError::new(ErrorCode::InternalError, "the write reported no change.")
        })?;
        Ok(WriteReport {
            path: applied.path,
            size: applied.size.unwrap_or(0),
            sha256: applied.sha256.unwrap_or_default(),
            created: applied.op == Op::Create,
        })
    }

    pub(crate) fn commit_with(
        &self,
        requests: Vec<Request>,
        faults: &mut Faults,
    ) -> Result<CommitReport, Stop> {
        if requests.is_empty() {
            return Err(FsError::invalid("a transaction needs at least one change.").into());
        }
        let mut located = Vec::with_capacity(requests.len());
        let mut keys = BTreeSet::new();
        for request in requests {
            let loc = self.root.locate(&request.path)?;
            let components = loc.path().components();
            if request.create_parents {
                for i in 1..components.len() {
                    keys.insert(components[..i].join("/"));
                }
            }
            keys.insert(loc.path().as_relative());
            located.push((loc, request));
        }
        let _held = self.locks.lock(keys);
        let exclusive = self.exclusive(faults)?;

        // Phase 0: plan and verify; nothing is written on any error.
        let (mut steps, dirs) = self.plan(located)?;
        let txid = self.new_txid();
        // One change needs no backup: see `Journal::commits_at_its_switch`.
        let alone = steps.len() == 1;
        let mut journal = Journal {
            version: journal::VERSION,
            txid: txid.clone(),
            root: self.id.clone(),
            writer: Some(self.owner.id().clone()),
            state: State::Intent,
            dirs,
            changes: steps
                .iter()
                .enumerate()
                .map(|(n, s)| JournalChange {
                    path: s.rel.clone(),
                    op: s.op,
                    temp: s.content.is_some().then(|| fsops::temp_name(&txid, n)),
                    backup: (s.target.is_some() && !alone).then(|| fsops::backup_name(&txid, n)),
                    temp_ino: None,
                    target_ino: s.target.as_ref().filter(|_| alone).map(|(entry, _)| entry.ino),
                })
                .collect(),
        };

        // Phase 1: the intent is durable before the first byte in the root.
        if let Err(e) = self.journals.write(&journal) {
            // Nothing was written in the root; a partial journal is ours
            // to drop (a leftover is removed at the next start anyway).
            let _ = self.journals.remove(&journal);
            return Err(e.into());
        }
        faults.point()?;
        let mut warnings = exclusive.warnings;
        match self.prepare_and_apply(&mut steps, &mut journal, faults) {
            Ok(late) => warnings.extend(late),
            Err(Stop::Crash) => return Err(Stop::Crash),
            Err(Stop::Fail(e)) => {
                return Err(match self.settle(&journal, faults) {
                    Ok(_) => Stop::Fail(e),
                    Err(Stop::Crash) => Stop::Crash,
                    // Disowned: the next transaction (of any writer)
                    // settles it like a crash's.
                    Err(Stop::Fail(undo)) => {
                        let mut orphan = journal.clone();
                        orphan.writer = None;
                        let _ = self.journals.write(&orphan);
                        Stop::Fail(e.with_detail(format!(
                            "rollback incomplete, journal {txid} kept for the next transaction: \
                             {undo} ({})",
                            undo.detail().unwrap_or("")
                        )))
                    }
                });
            }
        }

        // Past the commit point: cleanup only; a failure is a warning. A
        // lone change left nothing to clean up (its temporary was renamed
        // onto the target, durably, and it has no backup): only the
        // journal goes.
        let cleanup = if journal.commits_at_its_switch() {
            self.journals.remove(&journal).map_err(Stop::from).and_then(|()| faults.point())
        } else {
            self.settle(&journal, faults).map(|_| ())
        };
        match cleanup {
            Ok(()) => {}
            Err(Stop::Crash) => return Err(Stop::Crash),
            Err(Stop::Fail(e)) => warnings.push(format!("transaction {txid}: {e}")),
        }
        let changes = steps
            .into_iter()
            .map(|s| Applied {
                path: s.rel,
                op: s.op,
                size: s.content.as_ref().map(|c| c.len() as u64),
                sha256: s.content.as_deref().map(sha256_hex),
            })
            .collect();
        Ok(CommitReport { txid, changes, warnings })
    }

    /// Phase 0: every check that can be made before writing.
    fn plan<'r>(
        &'r self,
        located: Vec<(Location<'r>, Request)>,
    ) -> Result<(Vec<Step<'r>>, Vec<String>), FsError> {
        let rels: Vec<String> = located.iter().map(|(l, _)| l.path().as_relative()).collect();
        for (i, rel) in rels.iter().enumerate() {
            let shown = located[i].0.to_string();
            for (j, other) in rels.iter().enumerate() {
                if i != j && (other == rel || other.starts_with(&format!("{rel}/"))) {
                    return Err(FsError::new(
                        ErrorCode::PatchConflict,
                        format!(
                            "{shown} is changed twice in one transaction (or is the parent of another change)."
                        ),
                    ));
                }
            }
        }
        let mut dirs: Vec<String> = Vec::new();
        let mut steps = Vec::with_capacity(located.len());
        for ((loc, request), rel) in located.into_iter().zip(rels) {
            let shown = loc.to_string();
            if loc.path().file_name().is_some_and(fsops::is_reserved) {
                return Err(reserved(&shown));
            }
            let missing_parent =
                if request.create_parents { self.plan_parents(&loc, &mut dirs)? } else { false };
            let (handle, found) = if missing_parent {
                (None, None)
            } else {
                let (parent, name) = self.root.open_parent(&loc)?;
                let found = fsops::lstat(&parent, name.as_str(), &shown)?;
                (Some((parent, name)), found)
            };
            let refuse_kind = |kind: Kind| match kind {
                Kind::Symlink => fsops::symlink_error(&shown),
                Kind::Dir => fsops::not_a_file(&shown),
                _ => FsError::new(
                    ErrorCode::UnsupportedFileType,
                    format!("{shown} is a FIFO, socket or device; only regular files are written."),
                ),
            };
            let (op, target) = match (&request.expect, found) {
                (Expect::Absent | Expect::Any, None) => (Op::Create, None),
                (Expect::Absent, Some(e)) if e.kind == Kind::Symlink => {
                    return Err(fsops::symlink_error(&shown));
                }
                (Expect::Absent, Some(_)) => return Err(fsops::already_exists(&shown)),
                (Expect::File(_), None) => {
                    return Err(FsError::new(
                        ErrorCode::PathNotFound,
                        format!("{shown} does not exist."),
                    ));
                }
                (Expect::File(_) | Expect::Any, Some(e)) if e.kind != Kind::File => {
                    return Err(refuse_kind(e.kind));
                }
                (Expect::File(_) | Expect::Any, Some(_)) => {
                    let (parent, name) = handle
                        .as_ref()
                        .ok_or_else(|| FsError::new(ErrorCode::InternalError, "no parent."))?;
                    let (bytes, entry) =
                        fsops::read_capped(parent, name.as_str(), self.max_file_bytes, &shown)?;
                    if let Expect::File(Some(expected)) = &request.expect
                        && *expected != bytes
                    {
                        return Err(conflict(&shown));
                    }
                    let op = if request.content.is_some() { Op::Replace } else { Op::Delete };
                    (op, Some((entry, bytes)))
                }
            };
            let mode = match (&target, request.mode) {
                (Some((entry, _)), _) => Some(entry.mode),
                (None, mode) => mode,
            };
            steps.push(Step {
                loc,
                shown,
                rel,
                op,
                content: request.content,
                mode,
                target,
                handle,
            });
        }
        Ok((steps, dirs))
    }

    /// Checks each parent of `loc`, root first, through `locate` +
    /// `open_parent` (policy and no-link per component); appends the
    /// missing ones to `dirs`. Returns whether any is missing.
    pub(crate) fn plan_parents(
        &self,
        loc: &Location<'_>,
        dirs: &mut Vec<String>,
    ) -> Result<bool, FsError> {
        let components = loc.path().components();
        let mut missing = false;
        for i in 1..components.len() {
            let prefix = components[..i].join("/");
            let dir = self.root.locate(&prefix)?;
            if !missing {
                let (parent, name) = self.root.open_parent(&dir)?;
                let shown = dir.to_string();
                match fsops::lstat(&parent, name.as_str(), &shown)? {
                    None => missing = true,
                    Some(Entry { kind: Kind::Dir, .. }) => {}
                    Some(Entry { kind: Kind::Symlink, .. }) => {
                        return Err(fsops::symlink_error(&shown));
                    }
                    Some(_) => return Err(fsops::not_a_dir(&shown)),
                }
            }
            if missing && !dirs.contains(&prefix) {
                dirs.push(prefix);
            }
        }
        Ok(missing)
    }

    /// Phases 1 (after the intent journal) and 2. Every error leaves the
    /// journal's in-memory state matching what may be on disk, for
    /// [`Writer::settle`].
    /// Phases 2 and 3; returns warnings (a lone change's directory that
    /// could not be fsynced after its switch: the change has happened).
    fn prepare_and_apply(
        &self,
        steps: &mut [Step<'_>],
        journal: &mut Journal,
        faults: &mut Faults,
    ) -> Result<Vec<String>, Stop> {
        let alone = journal.commits_at_its_switch();
        for dir in &journal.dirs {
            let loc = self.root.locate(dir)?;
            let (parent, name) = self.root.open_parent(&loc)?;
            let shown = loc.to_string();
            fsops::make_dir(&parent, &name, &shown)?;
            fsops::sync_dir(&parent, &shown)?;
            faults.point()?;
        }
        for step in steps.iter_mut() {
            if step.handle.is_none() {
                step.handle = Some(self.root.open_parent(&step.loc)?);
            }
        }
        for (step, change) in steps.iter().zip(journal.changes.iter_mut()) {
            if let (Some(content), Some(temp)) = (&step.content, &change.temp) {
                let (parent, _) = step.handle()?;
                let ino = fsops::create_exclusive(parent, temp, content, step.mode, &step.shown)?;
                change.temp_ino = Some(ino);
                faults.point()?;
            }
        }
        for (step, change) in steps.iter().zip(journal.changes.iter()) {
            if let (Some((entry, bytes)), Some(backup)) = (&step.target, &change.backup) {
                let (parent, name) = step.handle()?;
                self.make_backup(parent, name, backup, entry, bytes, &step.shown, faults)?;
                faults.point()?;
            }
        }
        // The backups are durable before any target is switched, and so is
        // the journal that knows how to undo by them. A lone change has
        // neither: its switch is its commit point.
        if !alone {
            for step in steps.iter() {
                fsops::sync_dir(&step.handle()?.0, &step.shown)?;
            }
            self.advance(journal, State::Prepared)?;
            faults.point()?;
        }
        #[cfg(test)]
        if let Some(hook) = faults.on_prepared.as_mut() {
            hook();
        }

        for (step, change) in steps.iter().zip(journal.changes.iter()) {
            let (parent, name) = step.handle()?;
            if let Some((entry, bytes)) = &step.target {
                // Re-check just before the switch: still the very file,
                // still the bytes that were verified.
                let (now, now_entry) =
                    fsops::read_capped(parent, name.as_str(), self.max_file_bytes, &step.shown)
                        .map_err(|e| match e.code() {
                            ErrorCode::PathNotFound => conflict(&step.shown),
                            _ => e,
                        })?;
                if now_entry.ino != entry.ino || now != *bytes {
                    return Err(conflict(&step.shown).into());
                }
            }
            match (step.op, &change.temp) {
                (Op::Create, Some(temp)) => {
                    fsops::rename_noreplace(parent, temp, name.as_str(), &step.shown)?;
                }
                (Op::Replace, Some(temp)) => {
                    fsops::rename_over(parent, temp, name.as_str(), &step.shown)?;
                }
                (Op::Delete, None) => {
                    rustix::fs::unlinkat(parent, name.as_str(), rustix::fs::AtFlags::empty())
                        .map_err(|e| fsops::errno_error(e, &step.shown))?;
                }
                _ => {
                    return Err(FsError::new(
                        ErrorCode::InternalError,
                        format!("{} has an inconsistent plan.", step.shown),
                    )
                    .into());
                }
            }
            faults.point()?;
        }
        if alone {
            // Past the commit point, with no backup to go back to: a
            // failed directory fsync is not turned into a failure of a
            // change that has happened.
            let step = &steps[0];
            return Ok(match fsops::sync_dir(&step.handle()?.0, &step.shown) {
                Ok(()) => Vec::new(),
                Err(e) => vec![format!("{e} The change is made but may not be durable yet.")],
            });
        }
        for step in steps.iter() {
            fsops::sync_dir(&step.handle()?.0, &step.shown)?;
        }
        self.advance(journal, State::Committed)?;
        faults.point()?;
        Ok(Vec::new())
    }

    /// A second name for the file about to be replaced or deleted: a hard
    /// link (the very inode, mode and owner kept), or where the filesystem
    /// refuses links, a copy of the verified bytes with its mode.
    #[allow(clippy::too_many_arguments)]
    fn make_backup(
        &self,
        parent: &ParentDir,
        name: &Name,
        backup: &str,
        entry: &Entry,
        bytes: &[u8],
        shown: &str,
        faults: &Faults,
    ) -> Result<(), FsError> {
        let linked = if faults.copy_backups {
            Err(rustix::io::Errno::PERM)
        } else {
            fsops::hard_link(parent, name.as_str(), backup)
        };
        match linked {
            Ok(()) => match fsops::lstat(parent, backup, shown)? {
                // The link names the file that was verified, or the target
                // changed in between.
                Some(b) if b.ino == entry.ino => Ok(()),
                _ => Err(conflict(shown)),
            },
            Err(
                rustix::io::Errno::PERM | rustix::io::Errno::MLINK | rustix::io::Errno::OPNOTSUPP,
            ) => {
                fsops::create_exclusive(parent, backup, bytes, Some(entry.mode), shown).map(|_| ())
            }
            Err(rustix::io::Errno::NOENT) => Err(conflict(shown)),
            Err(e) => Err(fsops::errno_error(e, shown)),
        }
    }

    pub(crate) fn advance(&self, journal: &mut Journal, state: State) -> Result<(), FsError> {
        let mut next = journal.clone();
        next.state = state;
        self.journals.write(&next)?;
        *journal = next;
        Ok(())
    }

    /// Brings a transaction to rest from its journal alone — the one code
    /// path for a live failure, for recovery, and for the cleanup after a
    /// commit — then removes the journal.
    ///
    /// - `intent`: nothing was renamed onto or unlinked from a target:
    ///   temporaries, backups and created directories are removed.
    /// - `prepared`: per change, in reverse: a target that is the
    ///   temporary's inode was applied (Create: unlinked; Replace: its
    ///   backup renamed back over it); a missing target with a backup
    ///   (Delete applied) gets its backup back (no-replace rename). Then
    ///   as `intent`.
    /// - `committed`: leftover backups (and temporaries) are removed.
    ///
    /// - a lone change's `intent` (see [`Journal::commits_at_its_switch`]):
    ///   `committed` if its switch happened, else as `intent`.
    ///
    /// Every step is idempotent and durable (directory fsync) before the
    /// journal goes, so a crash here is finished by the next start.
    pub(crate) fn settle(&self, journal: &Journal, faults: &mut Faults) -> Result<Outcome, Stop> {
        self.settle_in(&self.journals, journal, faults)
    }

    /// [`Writer::settle`] of a journal in `journals` (this writer's journal
    /// dir, or another state dir's).
    fn settle_in(
        &self,
        journals: &JournalDir,
        journal: &Journal,
        faults: &mut Faults,
    ) -> Result<Outcome, Stop> {
        let committed = match (journal.state, journal.changes.as_slice()) {
            (State::Committed, _) => true,
            (State::Intent, [change]) if journal.commits_at_its_switch() => {
                self.switched(change)?
            }
            _ => false,
        };
        let undo = journal.state == State::Prepared;
        let order: Vec<&JournalChange> = if committed {
            journal.changes.iter().collect()
        } else {
            journal.changes.iter().rev().collect()
        };
        for change in order {
            let Some((parent, name, shown)) = self.parent_of(&change.path)? else {
                continue;
            };
            if undo {
                undo_change(change, &parent, &name, &shown)?;
            }
            for leftover in [&change.temp, &change.backup].into_iter().flatten() {
                fsops::unlink_if_present(&parent, leftover, &shown)?;
            }
            fsops::sync_dir(&parent, &shown)?;
            faults.point()?;
        }
        if !committed {
            for dir in journal.dirs.iter().rev() {
                if let Some((parent, name, shown)) = self.parent_of(dir)? {
                    fsops::remove_dir_if_empty(&parent, &name, &shown)?;
                    fsops::sync_dir(&parent, &shown)?;
                    faults.point()?;
                }
            }
        }
        journals.remove(journal)?;
        faults.point()?;
        Ok(if committed { Outcome::Completed } else { Outcome::RolledBack })
    }

    /// Whether a lone change's switch happened: its target is no longer
    /// the file it verified (Replace), is there (Create), or is gone
    /// (Delete). Read only to report the outcome and to keep created
    /// directories: settling removes the same leftovers either way.
    fn switched(&self, change: &JournalChange) -> Result<bool, FsError> {
        let Some((parent, name, shown)) = self.parent_of(&change.path)? else {
            return Ok(change.op == Op::Delete);
        };
        let target = fsops::lstat(&parent, name.as_str(), &shown)?;
        Ok(match (change.op, target) {
            (Op::Delete, target) => target.is_none(),
            (Op::Create, target) => target.is_some(),
            (Op::Replace, Some(t)) => change.target_ino.is_some_and(|ino| ino != t.ino),
            (Op::Replace, None) => false,
        })
    }

    /// The parent handle of a journal path; `None` when the parent does not
    /// exist (a directory the transaction never got to create, or already
    /// removed).
    fn parent_of(&self, rel: &str) -> Result<Option<(ParentDir, Name, String)>, FsError> {
        let loc = self.root.locate(rel)?;
        let shown = loc.to_string();
        match self.root.open_parent(&loc) {
            Ok((parent, name)) => Ok(Some((parent, name, shown))),
            Err(e) if e.code() == ErrorCode::PathNotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Settles every journal of this root whose writer is dead (or has
    /// none), in this writer's journal dir and in every other journal dir
    /// that has served the root. Call under the commit lock. `strict` (at
    /// open): an unreadable journal in this writer's own dir is an error;
    /// otherwise it is a warning in `kept`, as is a journal that cannot be
    /// settled now.
    fn recover(&self, faults: &mut Faults, strict: bool) -> Result<RecoveryReport, Stop> {
        let (others, skipped) = self.shared.others(&self.journals)?;
        let mut report = RecoveryReport::default();
        if strict {
            report.kept.extend(skipped);
        }
        for (n, dir) in std::iter::once(&self.journals).chain(&others).enumerate() {
            let own = n == 0;
            let scan = match dir.scan(&self.id) {
                Ok(scan) => scan,
                Err(e) if own => return Err(e.into()),
                Err(e) => {
                    report.kept.push(format!(
                        "{}: {e} ({})",
                        dir.path().display(),
                        e.detail().unwrap_or("")
                    ));
                    continue;
                }
            };
            if own {
                report.foreign = scan.foreign;
            }
            for path in scan.ours {
                self.recover_one(dir, &path, faults, strict && own, &mut report)?;
            }
        }
        Ok(report)
    }

    /// Settles the journal at `path` (in `dir`) unless its writer lives.
    fn recover_one(
        &self,
        dir: &JournalDir,
        path: &Path,
        faults: &mut Faults,
        strict: bool,
        report: &mut RecoveryReport,
    ) -> Result<(), Stop> {
        let journal = match JournalDir::read(path) {
            Ok(journal) => journal,
            Err(e) if strict => {
                return Err(FsError::new(
                    ErrorCode::InternalError,
                    "an interrupted transaction's journal cannot be read; check the tree and remove the journal by hand.",
                )
                .with_detail(format!("{}: {e}", path.display()))
                .into());
            }
            Err(e) => {
                report.kept.push(format!("unreadable journal {}: {e}", path.display()));
                return Ok(());
            }
        };
        if journal.version != journal::VERSION
            || (journal.root.dev, journal.root.ino) != (self.id.dev, self.id.ino)
        {
            report.foreign.push(
                path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            );
            return Ok(());
        }
        match journal.writer.as_ref().map(owner::liveness) {
            Some(Liveness::Alive) => return Ok(()),
            Some(Liveness::Unknown) => {
                if strict {
                    report.kept.push(format!(
                        "transaction {} belongs to a writer of another pid namespace, which may live; its journal is kept",
                        journal.txid
                    ));
                }
                return Ok(());
            }
            Some(Liveness::Dead) | None => {}
        }
        match self.settle_in(dir, &journal, faults) {
            Ok(outcome) => report.recovered.push(Recovered {
                txid: journal.txid.clone(),
                outcome,
                paths: journal.changes.iter().map(|c| c.path.clone()).collect(),
            }),
            Err(Stop::Crash) => return Err(Stop::Crash),
            // Kept for a later transaction or start; never fatal: the
            // settle steps are idempotent and check inodes, so a later
            // attempt cannot undo a newer change.
            Err(Stop::Fail(e)) => report.kept.push(format!(
                "interrupted transaction {} could not be settled yet ({e}; {}); its journal is kept",
                journal.txid,
                e.detail().unwrap_or("")
            )),
        }
        Ok(())
    }

    /// Sortable and unique: start time (fixed-width hex nanoseconds), pid,
    /// per-writer counter.
    pub(crate) fn new_txid(&self) -> String {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let n = self.next_txid.fetch_add(1, Ordering::Relaxed);
        format!("{:016x}-{:x}-{n:x}", nanos as u64, std::process::id())
    }
}

/// The `prepared` undo of one change (see [`Writer::settle`]).
fn undo_change(
    change: &JournalChange,
    parent: &ParentDir,
    name: &Name,
    shown: &str,
) -> Result<(), FsError> {
    let target = fsops::lstat(parent, name.as_str(), shown)?;
    let backup = match &change.backup {
        Some(b) => fsops::lstat(parent, b, shown)?.map(|_| b),
        None => None,
    };
    match target {
        Some(t) if t.kind == Kind::File && change.temp_ino == Some(t.ino) => {
            match (change.op, backup) {
                (Op::Create, _) => fsops::unlink_if_present(parent, name.as_str(), shown),
                (_, Some(backup)) => fsops::rename_over(parent, backup, name.as_str(), shown),
                (_, None) => Err(FsError::new(
                    ErrorCode::InternalError,
                    format!("{shown} was replaced but its backup is missing."),
                )),
            }
        }
        None => match backup {
            Some(backup) => fsops::rename_noreplace(parent, backup, name.as_str(), shown),
            None => Ok(()),
        },
        // Not ours (never renamed, or already restored): leave it.
        Some(_) => Ok(()),
    }
}

/// Identifies the root directory by device and inode, read on the handle
/// `open_parent` gives for a top-level name (the root itself; the name is
/// never looked up).
fn root_id(root: &Root, host_path: &Path) -> Result<RootId, FsError> {
    let probe = root.locate("serverfs-root-probe")?;
    let (dir, _) = root.open_parent(&probe)?;
    let st = rustix::fs::fstat(&dir)
        .map_err(|e| fsops::errno_error(e, &format!("{}:/", root.name())))?;
    Ok(RootId { path: host_path.to_string_lossy().into_owned(), dev: st.st_dev, ino: st.st_ino })
}

/// the journal is never inside the root (where the agent could
/// edit it, and where it would show up in listings).
fn refuse_state_dir_inside(journal_dir: &Path, root: &RootId) -> Result<(), FsError> {
    let canonical =
        journal_dir.canonicalize().map_err(|e| journal::state_error(&e, "cannot be resolved"))?;
    for dir in canonical.ancestors() {
        let meta =
            std::fs::metadata(dir).map_err(|e| journal::state_error(&e, "cannot be resolved"))?;
        if (meta.dev(), meta.ino()) == (root.dev, root.ino) {
            return Err(FsError::invalid(
                "the state directory is inside the root; choose one outside it.",
            ));
        }
    }
    Ok(())
}

/// The commit lock held while a transaction (of any writer of this root)
/// verifies and switches; released when the returned guard drops.
pub(crate) struct Exclusive {
    _file: File,
    /// Journals that could not be settled now (kept for later).
    pub(crate) warnings: Vec<String>,
}

pub(crate) fn conflict(shown: &str) -> FsError {
    FsError::new(
        ErrorCode::PatchConflict,
        format!("{shown} changed since it was read; read it again and retry."),
    )
}

pub(crate) fn reserved(shown: &str) -> FsError {
    FsError::invalid(format!(
        "{shown} uses a name reserved for ServerFS's temporary files ({}*, {}*).",
        fsops::TEMP_PREFIX,
        fsops::BACKUP_PREFIX
    ))
}

fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for b in digest.iter() {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}
